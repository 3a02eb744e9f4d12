// SPDX-License-Identifier: GPL-2.0

//! Receiver rate hints (RCN, protocol.md 6.5): what the device knows for
//! them, its receive capacity and its count of receiving QPs.
//!
//! The capacity is the knob `rcn_capacity_mbps` when set, else the sum of
//! the planes' link speeds. A speed is read where the driver may sleep
//! under the RTNL, which the tick may not: when a plane is added, when a
//! plane's state changes (the netdevice notifier), and when an RCN knob is
//! written (so `ethtool -s DEV speed N` on a virtio-net plane, which
//! raises no event, is taken by writing a knob). A plane without carrier
//! counts for nothing; one whose speed is unknown (virtio-net reports none
//! unless given one) makes the whole capacity unknown, and then no hints
//! are sent unless the knob gives one: a guess would cap every sender.
//!
//! The count is the tick's (`device.rs`), which visits only the QPs
//! marked as having work for it (design.md, "The tick and many QPs"): a
//! QP that accepted data is such a QP (`TickWork::rcn_count`) until the
//! tick finds its receiving window passed (4 ms, longer at a small
//! share: `engine::rcn::receiving_window_ns`), and that visit, which no longer
//! counts it, lets it go idle. Each visit hands the QP its hint from the
//! last count and counts it again (`Receiver::rcn_count`). A QP the last
//! count did not find receiving is not visited, so its first ACKs take a
//! newcomer's hint from here (`Rcn::newcomer_hint`, set in
//! `responder.rs` at its first packet since the count), the newcomers
//! numbered as they come: 4 QPs that start together on an idle device
//! advertise C, C/2, C/3 and C/4 until the tick counts them, not C each.
//! The data path stores a timestamp per packet, and reads a flag, and
//! for a newcomer one atomic; idle QPs cost the tick nothing.

use core::sync::atomic::{AtomicU32, Ordering};

use super::plane::{PlaneTable, MAX_PLANES};
use crate::engine::rcn::{RcnConfig, Shares};
use crate::ib::lock::SpinLockBh;
use crate::ib::netdev::{NetDevice, NetDeviceRef, Rtnl};

/// A plane's speed as [`Rcn`] keeps it: no plane, or one without carrier.
const NONE: u32 = 0;
/// A plane with carrier whose speed its driver does not report.
const UNKNOWN: u32 = u32::MAX;

/// The device's RCN state, read by the tick without a lock.
pub(crate) struct Rcn {
    /// Each plane's link speed (Mbit/s), or [`NONE`] or [`UNKNOWN`].
    plane_mbps: [AtomicU32; MAX_PLANES],
    /// QPs counted as receiving at the last tick.
    receiving: AtomicU32,
    /// The capacity the last tick's count shared (Mbit/s, 0: no hints).
    counted_mbps: AtomicU32,
    /// Newcomers since the last tick: QPs it did not count that took a
    /// newcomer's hint, which the data path gives such a QP before its
    /// first ACK goes (the tick visits only receiving QPs), numbered as
    /// they come so that QPs starting together share the capacity.
    newcomers: AtomicU32,
}

impl Rcn {
    /// Plane 0 at `first_mbps` (as [`plane_speed`] read it), no QP
    /// receiving.
    pub(crate) fn new(first_mbps: u32) -> Self {
        let r = Self {
            plane_mbps: [const { AtomicU32::new(NONE) }; MAX_PLANES],
            receiving: AtomicU32::new(0),
            counted_mbps: AtomicU32::new(0),
            newcomers: AtomicU32::new(0),
        };
        r.plane_mbps[0].store(first_mbps, Ordering::Relaxed);
        r
    }

    /// Sets plane `k`'s speed (as [`plane_speed`] read it).
    pub(crate) fn set_plane(&self, k: u8, mbps: u32) {
        if let Some(s) = self.plane_mbps.get(k as usize) {
            s.store(mbps, Ordering::Relaxed);
        }
    }

    /// The planes' capacity (Mbit/s): the sum of the speeds of those with
    /// carrier; 0 when one of them has an unknown speed.
    pub(crate) fn link_mbps(&self) -> u32 {
        let mut sum = 0u32;
        for s in &self.plane_mbps {
            match s.load(Ordering::Relaxed) {
                UNKNOWN => return 0,
                mbps => sum = sum.saturating_add(mbps),
            }
        }
        sum
    }

    /// The hints of the last count under `cfg`.
    pub(crate) fn shares(&self, cfg: &RcnConfig) -> Shares {
        Shares::new(
            cfg.capacity(self.link_mbps()),
            self.receiving.load(Ordering::Relaxed),
        )
    }

    /// Records the tick's count: its shares (`last`, the previous
    /// count's capacity) among the `receiving` QPs it counted.
    pub(crate) fn counted(&self, last: &Shares, receiving: u32) {
        // A data path between these stores numbers its newcomer against
        // a count that is one tick old, or starts the new tick's at 1:
        // the next count corrects either.
        self.receiving.store(receiving, Ordering::Relaxed);
        self.counted_mbps
            .store(last.capacity_mbps(), Ordering::Relaxed);
        self.newcomers.store(0, Ordering::Relaxed);
    }

    /// The hint (kbit/s) of a QP the last count did not find receiving,
    /// once per tick (`Receiver::rcn_join`): the `k`-th such newcomer
    /// since the count of `N` takes `C / (N + k)` (protocol.md 6.5).
    pub(crate) fn newcomer_hint(&self) -> u32 {
        let ahead = self.newcomers.fetch_add(1, Ordering::Relaxed);
        Shares::new(
            self.counted_mbps.load(Ordering::Relaxed),
            self.receiving.load(Ordering::Relaxed),
        )
        .joining(ahead)
    }
}

/// `ndev`'s speed as a plane of [`Rcn`]: [`NONE`] without carrier, else
/// its link speed or [`UNKNOWN`] (never a speed: `link_speed_mbps`
/// reads `SPEED_UNKNOWN`, `u32::MAX`, as none).
pub(crate) fn plane_speed(ndev: &NetDevice, rtnl: &Rtnl) -> u32 {
    if !ndev.is_running_with_carrier() {
        return NONE;
    }
    ndev.link_speed_mbps(rtnl).unwrap_or(UNKNOWN)
}

/// Reads the speed of every plane of `planes` into `rcn` again. Process
/// context, not under the RTNL nor any driver lock (it takes the RTNL).
pub(crate) fn read_planes(rcn: &Rcn, planes: &SpinLockBh<PlaneTable>) {
    // References out of the plane table's lock, which the RTNL may not be
    // taken under.
    let ndevs: [Option<NetDeviceRef>; MAX_PLANES] = {
        let planes = planes.lock();
        core::array::from_fn(|k| planes.get(k as u8).map(NetDevice::hold))
    };
    Rtnl::with(|rtnl| {
        for (k, n) in ndevs.iter().enumerate() {
            rcn.set_plane(k as u8, n.as_ref().map_or(NONE, |n| plane_speed(n, rtnl)));
        }
    });
}
