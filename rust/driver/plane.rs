// SPDX-License-Identifier: GPL-2.0

//! Planes: the netdevs one MetaRoCE device sprays over.
//!
//! Plane 0 is the netdev the device was created on; it is the device's only
//! RDMA port (port 1), so the core's GID table, port MTU and
//! `ib_device_get_by_netdev` all belong to it. Further planes are added with
//! `rdma link add NAME type metaroce netdev DEV` naming an existing MetaRoCE
//! device (see `link.rs`); they are not RDMA ports, only places to send
//! from and receive on. A device holds a reference on each plane's netdev in
//! its [`PlaneTable`]; the module-wide owner map below lets the receive path
//! and the netdev notifier find the device of a packet or event arriving on
//! a plane other than plane 0 (`device_of_plane`, in `device.rs`).
//!
//! A QP learns the peer's address on every plane from a PLANES packet
//! (protocol section 1.8), exchanged after RTR on plane 0, or on a plane
//! that is up when plane 0 is down ([`PeerPlanes`]); the device keeps what
//! its QPs learned in its peer directory (`peers.rs`).
//! A QP is one address family end to end: an IPv4 QP lists and uses IPv4
//! addresses on every plane, an IPv6 QP IPv6 ones, of the scope of its
//! plane-0 address (a link-local one is on the link of its plane, whose
//! netdev is its scope).

use core::sync::atomic::{AtomicU64, Ordering};

use kernel::prelude::*;

use super::peers::PeerAddrs;
use crate::engine::wire::{self, MAX_PLANES as WIRE_MAX_PLANES};
use crate::ib::ip::{Family, IpAddr};
use crate::ib::netdev::{NetDevice, NetDeviceRef};

/// Most planes per device: as many as one PLANES packet lists.
pub(crate) const MAX_PLANES: usize = WIRE_MAX_PLANES;

/// Extra planes of all devices together (plane 0 is not in the map).
const OWNER_SLOTS: usize = 64;

/// Extra-plane owners, `plane ifindex << 32 | plane-0 ifindex`, 0 = free.
/// Plain atomics: read from the receive softirq without a lock; written in
/// process context (link add, netdev unregister, device release). Ifindexes
/// are per network namespace, so two namespaces may hold the same entry
/// (each device's planes are in one namespace): a lookup yields candidates,
/// and the caller checks them (`device_of_plane`).
static OWNERS: [AtomicU64; OWNER_SLOTS] = [const { AtomicU64::new(0) }; OWNER_SLOTS];

fn owner_entry(plane: i32, first: i32) -> u64 {
    (u64::from(plane as u32) << 32) | u64::from(first as u32)
}

/// The plane-0 ifindexes of the devices that may have netdev `ifindex` (of
/// some namespace) as an extra plane.
pub(crate) fn owners_of(ifindex: i32) -> impl Iterator<Item = i32> {
    OWNERS.iter().filter_map(move |s| {
        let v = s.load(Ordering::Acquire);
        (v != 0 && (v >> 32) as u32 == ifindex as u32).then_some(v as u32 as i32)
    })
}

/// Records that netdev `plane` is an extra plane of the device on `first`;
/// returns the entry to give to [`release`].
fn claim(plane: i32, first: i32) -> Result<u64> {
    let entry = owner_entry(plane, first);
    for s in &OWNERS {
        if s.compare_exchange(0, entry, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return Ok(entry);
        }
    }
    Err(ENOSPC)
}

/// Forgets one `entry` made by [`claim`] (any one of equal entries: they
/// mean the same).
fn release(entry: u64) {
    for s in &OWNERS {
        if s.compare_exchange(entry, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return;
        }
    }
}

/// The netdevs of one device, by plane number. Plane numbers are stable:
/// a removed plane leaves a hole (its paths stay suspended) that the next
/// added plane fills.
pub(crate) struct PlaneTable {
    ndevs: [Option<NetDeviceRef>; MAX_PLANES],
    /// Each extra plane's owner-map entry, as claimed (the ifindexes then:
    /// a netdev moved to another namespace may get a new one).
    owner_entries: [u64; MAX_PLANES],
}

impl PlaneTable {
    /// A table with `first` as plane 0.
    pub(crate) fn new(first: &NetDevice) -> Self {
        let mut ndevs: [Option<NetDeviceRef>; MAX_PLANES] = Default::default();
        ndevs[0] = Some(first.hold());
        Self {
            ndevs,
            owner_entries: [0; MAX_PLANES],
        }
    }

    /// Planes a QP connected now spreads its paths over (highest plane
    /// number + 1).
    pub(crate) fn count(&self) -> u8 {
        self.ndevs
            .iter()
            .rposition(Option::is_some)
            .map_or(1, |k| k + 1) as u8
    }

    /// The netdev of plane `k`.
    pub(crate) fn get(&self, k: u8) -> Option<&NetDevice> {
        self.ndevs.get(k as usize)?.as_deref()
    }

    /// The plane number of `ndev`, if it is one of ours.
    pub(crate) fn index_of(&self, ndev: &NetDevice) -> Option<u8> {
        self.ndevs
            .iter()
            .position(|n| n.as_ref().is_some_and(|n| n.as_raw() == ndev.as_raw()))
            .map(|k| k as u8)
    }

    /// Whether any plane is up with carrier (the port state).
    pub(crate) fn any_carrier(&self) -> bool {
        self.ndevs
            .iter()
            .flatten()
            .any(|n| n.is_running_with_carrier())
    }

    /// Adds `ndev`, which is not a plane of any device, as a new plane;
    /// returns its number. `EXDEV` if it is not in plane 0's network
    /// namespace (the device's socket is there). Process context.
    pub(crate) fn add(&mut self, ndev: &NetDevice) -> Result<u8> {
        let k = self.ndevs.iter().position(Option::is_none).ok_or(ENOSPC)?;
        let first = self.get(0).ok_or(ENODEV)?;
        if first.net() != ndev.net() {
            return Err(EXDEV);
        }
        self.owner_entries[k] = claim(ndev.ifindex(), first.ifindex())?;
        self.ndevs[k] = Some(ndev.hold());
        Ok(k as u8)
    }

    /// Removes plane `k` (k > 0) and drops our reference on its netdev.
    pub(crate) fn remove(&mut self, k: u8) {
        if k == 0 {
            return;
        }
        if let Some(_ndev) = self.ndevs.get_mut(k as usize).and_then(Option::take) {
            // Out of the map before our reference on the netdev goes.
            release(core::mem::take(&mut self.owner_entries[k as usize]));
        }
    }

    /// The largest payload every plane a QP connected from `local` lists
    /// carries in one frame (protocol.md 1.8, payload size): the smallest
    /// netdev MTU of plane 0 and of the planes with an address of its
    /// family, less the IP header of that family, UDP, the data header
    /// and the ICRC, at most `MAX_PAYLOAD`.
    pub(crate) fn max_payload(&self, local: &IpAddr) -> u16 {
        let ip_header = match local.family() {
            Family::V4 => 20,
            Family::V6 => 40,
        };
        let overhead = ip_header + 8 + wire::DATA_HEADER_LEN as u32 + wire::ICRC_LEN as u32;
        let mtu = (0..self.count())
            .filter(|&k| k == 0 || self.local_addr(k, local).is_some())
            .filter_map(|k| self.get(k).map(NetDevice::mtu))
            .min()
            .unwrap_or(0);
        mtu.saturating_sub(overhead).min(wire::MAX_PAYLOAD as u32) as u16
    }

    /// This device's address on plane `k` (k > 0) for a QP connected
    /// from `local` on plane 0: of `local`'s family, and for IPv6 of its
    /// scope (link-local or global). `None` if the plane has none.
    pub(crate) fn local_addr(&self, k: u8, local: &IpAddr) -> Option<IpAddr> {
        let n = self.get(k)?;
        match local.family() {
            Family::V4 => n.ipv4_addr().map(IpAddr::from),
            Family::V6 => n.ipv6_addr(local.is_link_local()),
        }
    }

    /// Our address on plane `k` for a QP connected from `local`, as the
    /// peer knows it: `local` on plane 0, on others the one our PLANES
    /// named (unspecified if none: the route chooses).
    pub(crate) fn local_addr_of(&self, k: u8, local: &IpAddr) -> IpAddr {
        if k == 0 {
            return *local;
        }
        self.local_addr(k, local).unwrap_or(IpAddr::UNSPECIFIED)
    }

    /// Where a packet that may take any plane goes (a datagram, a PLANES
    /// packet), for a peer connected from `src` to `dst` (plane-0
    /// addresses, of one family): plane 0 while its netdev has carrier;
    /// else the first plane with carrier where we have an address of
    /// `src`'s family and scope ([`Self::local_addr`]) and the peer's is
    /// known (`peer_addr`); else plane 0 all the same (no plane known to
    /// work). Returns the plane's netdev, source and destination.
    pub(crate) fn live_route(
        &self,
        src: IpAddr,
        dst: IpAddr,
        peer_addr: impl Fn(u8) -> Option<IpAddr>,
    ) -> Option<(&NetDevice, IpAddr, IpAddr)> {
        let first = self.get(0)?;
        if first.is_running_with_carrier() {
            return Some((first, src, dst));
        }
        let other = (1..self.count()).find_map(|k| {
            let ndev = self.get(k).filter(|n| n.is_running_with_carrier())?;
            Some((ndev, self.local_addr(k, &src)?, peer_addr(k)?))
        });
        Some(other.unwrap_or((first, src, dst)))
    }

    /// This device's address on each plane, for a PLANES packet: `count`
    /// and the addresses in GID form (zero where a plane has no address of
    /// `local`'s family and scope, or no netdev). Plane 0 is `local`, the
    /// address the QP connected from.
    pub(crate) fn addrs(&self, local: &IpAddr) -> (u8, [[u8; 16]; MAX_PLANES]) {
        let mut out = [[0u8; 16]; MAX_PLANES];
        out[0] = local.0;
        for (k, o) in out.iter_mut().enumerate().skip(1) {
            if let Some(ip) = self.local_addr(k as u8, local) {
                *o = ip.0;
            }
        }
        (self.count(), out)
    }
}

impl Drop for PlaneTable {
    fn drop(&mut self) {
        for k in 1..MAX_PLANES as u8 {
            self.remove(k);
        }
    }
}

/// First and longest interval between repeated PLANES packets.
const PLANES_RETRY_MIN_NS: u64 = 1_000_000;
const PLANES_RETRY_MAX_NS: u64 = 100_000_000;

/// What a QP knows of its peer's planes, and whether the PLANES exchange
/// is done: each side repeats its PLANES (backing off from 1 to 100 ms)
/// until it receives one flagged KNOWN, and answers every PLANES not
/// flagged KNOWN with its own, flagged KNOWN. Loss of any packet only
/// delays the exchange.
#[derive(Clone, Copy)]
pub(crate) struct PeerPlanes {
    /// The peer's address on each plane (plane 0: from RTR); unspecified
    /// where none is known.
    addrs: [IpAddr; MAX_PLANES],
    /// We received the peer's list.
    pub(crate) known: bool,
    /// The peer confirmed it has ours.
    pub(crate) acked: bool,
    /// The payload size our PLANES advertise (protocol.md 1.8): 0 when
    /// the QP's path MTU is below the port's, else what our planes carry.
    pub(crate) own_payload: u16,
    /// The payload size the peer's latest PLANES advertised (0: none).
    pub(crate) peer_payload: u16,
    next_ns: u64,
    interval_ns: u64,
}

impl PeerPlanes {
    /// Before the QP is connected: no address known.
    pub(crate) const NONE: Self = Self {
        addrs: [IpAddr::UNSPECIFIED; MAX_PLANES],
        known: false,
        acked: false,
        own_payload: 0,
        peer_payload: 0,
        next_ns: 0,
        interval_ns: PLANES_RETRY_MIN_NS,
    };

    /// Before the exchange: only plane 0 is known; a PLANES, advertising
    /// `own_payload`, is due now.
    pub(crate) fn new(remote: IpAddr, own_payload: u16, now: u64) -> Self {
        let mut addrs = [IpAddr::UNSPECIFIED; MAX_PLANES];
        addrs[0] = remote;
        Self {
            addrs,
            known: false,
            acked: false,
            own_payload,
            peer_payload: 0,
            next_ns: now,
            interval_ns: PLANES_RETRY_MIN_NS,
        }
    }

    /// The peer's address on plane `k`.
    pub(crate) fn addr(&self, k: u8) -> Option<IpAddr> {
        self.addrs
            .get(k as usize)
            .copied()
            .filter(|a| !a.is_unspecified())
    }

    /// What this QP learned, as the device's directory keeps it
    /// (`peers.rs`); `local` is our plane-0 address on the connection.
    pub(crate) fn as_peer(&self, local: IpAddr) -> PeerAddrs {
        PeerAddrs {
            local,
            addrs: self.addrs,
        }
    }

    /// Whether our PLANES is due (the peer has not confirmed it), and if so
    /// schedules the next repetition.
    pub(crate) fn due(&mut self, now: u64) -> bool {
        if self.acked || now < self.next_ns {
            return false;
        }
        self.next_ns = now + self.interval_ns;
        self.interval_ns = (self.interval_ns * 2).min(PLANES_RETRY_MAX_NS);
        true
    }

    /// Our plane list changed (a plane was added to the device while the
    /// QP is connected, protocol.md 1.8): the peer holds an old one, so
    /// ours is due now and repeated, from the shortest interval, until
    /// the peer says it holds it. What we know of the peer's stays.
    pub(crate) fn restart(&mut self, now: u64) {
        self.acked = false;
        self.next_ns = now;
        self.interval_ns = PLANES_RETRY_MIN_NS;
    }

    /// Takes the peer's list; returns whether it told us anything new (the
    /// first list, or one that differs from the last: the peer's planes
    /// changed). Plane 0 stays the address the QP was connected to; an
    /// entry of the other family than plane 0's is not usable (a QP is one
    /// family end to end).
    pub(crate) fn learn(&mut self, count: u8, addrs: &[[u8; 16]; MAX_PLANES]) -> bool {
        let family = self.addrs[0].family();
        let mut changed = false;
        for k in 1..MAX_PLANES {
            let a = IpAddr(addrs[k]);
            let a = if k < count as usize && a.family() == family {
                a
            } else {
                IpAddr::UNSPECIFIED
            };
            changed |= self.addrs[k] != a;
            self.addrs[k] = a;
        }
        !core::mem::replace(&mut self.known, true) || changed
    }
}
