// SPDX-License-Identifier: GPL-2.0

//! Per-device packet counters, shown by `rdma statistic show link DEV/1`.
//! Atomic (relaxed) so that softirq and process context update them without
//! a lock.
//!
//! After the device-wide counters come the same few per plane
//! (`plane<k>_tx_packets` ...): which plane carried what, so that an uneven
//! spread shows. Each plane's set is found by the ifindex of its netdev,
//! mirrored here in atomics (`set_plane`) so that transmit and receive
//! count it without taking the plane table's lock.

use core::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use kernel::c_str;

use super::plane::MAX_PLANES;
use crate::ib::stats::StatDesc;

/// A counter; its value is the index into [`NAMES`]. The first
/// [`QP_COUNTERS`] are also counted per QP (on the counters `rdma statistic
/// qp` binds QPs to): the core requires them to be a prefix of the port's.
#[derive(Clone, Copy)]
pub(crate) enum Counter {
    /// MetaRoCE packets received on the device's planes (any validity); per
    /// QP, those delivered to the QP.
    RxPackets,
    /// Their UDP payload bytes.
    RxBytes,
    /// Packets sent.
    TxPackets,
    /// Their UDP payload bytes.
    TxBytes,
    /// Received packets carrying ECN-CE.
    EcnMarks,
    /// Packets retransmitted (QP data path).
    Retransmissions,
    /// Losses detected by SACK (QP data path, from the engine).
    SackLosses,
    /// Paths replaced after unanswered probes (QP data path, from the engine).
    PathFailures,
    /// Received packets that failed `engine::wire::parse_packet` (or were
    /// not IPv4 / could not be read).
    RxMalformed,
    /// Valid packets for which no QP took delivery.
    RxNoQp,
    /// PROBEs answered with a PROBE_REPLY.
    ProbesAnswered,
    /// Packets that could not be sent (no route out of the plane, no memory).
    TxErrors,
    /// Datagrams (UD_SEND) sent from UD and GSI QPs.
    UdTxPackets,
    /// Datagrams delivered into a receive buffer of a UD or GSI QP.
    UdRxPackets,
    /// Datagrams dropped at the receiver: no such datagram QP, wrong Q_Key,
    /// no receive buffer posted, or a buffer that did not fit.
    UdRxDropped,
    /// Packets for a connected QP in the error state: dropped unplaced and
    /// unanswered (InfiniBand: a QP in error processes no packets).
    RxQpInError,
    /// Packets for a connected QP from an address that is not its peer's
    /// on the plane they arrived on (PLANES: not its plane-0 address).
    RxNotPeer,
    /// ACKs that named no live path of the QP or acknowledged beyond what
    /// the path carried: they move nothing (protocol.md 4.2).
    RxStaleAcks,
    /// NAKs that named no message in flight, no live path or a PSN the
    /// path never carried: they fail nothing.
    RxStaleNaks,
    /// Data packets of a connected QP the receiver dropped: outside its
    /// message window, disagreeing with their message, stale path state.
    RxDataDropped,
    /// PROBEs not from a connected QP's peer left unanswered: beyond the
    /// device's rate for those (protocol.md 1.6).
    RxProbesLimited,
    /// Retransmission timeouts of QP paths (from the engine).
    RtoTimeouts,
    /// Of those, timeouts a late ACK showed spurious and undid (protocol.md
    /// 4.3; from the engine).
    RtoSpurious,
    /// Packets the timeouts declared lost (in flight on the path when its
    /// timer expired): at most the retransmissions timers caused (from the
    /// engine).
    RtoLosses,
    /// SACK loss declarations that reordering on their path showed wrong
    /// (a packet sent before the one that overtook the hole arrived after
    /// it); each doubled that path's loss threshold (protocol.md 4.2; from
    /// the engine).
    SackReorders,
    /// Doorbells rung by processes: `post_send` system calls without work
    /// requests (design.md, "Doorbell suppression").
    Doorbells,
    /// Send work requests of processes' QPs the kernel took on its own (an
    /// ACK, the transmit worker, the tick), not in a doorbell's call: what
    /// the ring's flag saved doorbells for (a request posted with a
    /// doorbell that found the message window full counts here too).
    PostsWithoutDoorbell,
    /// Times a QP stopped sending because its packets not yet released by
    /// the network stack reached its cap (design.md, "Transmit
    /// backpressure"); it sends again as they drain.
    TxInflightWaits,
    /// Tail probes: a path's newest packet in flight sent again when no
    /// ACK of the path came for twice its SRTT plus the peer's ACK delay,
    /// so that SACK, not the timer, finds a lost tail (protocol.md 4.3;
    /// from the engine).
    TailProbes,
    /// Delay trials whose QP's SRTT stayed when its flight halved: each
    /// raised the RTT below which the QP reads no queueing (protocol.md
    /// 6.3; from the engine).
    DelayFloorsRaised,
}

/// A counter kept per plane; its value is the index in a plane's set.
#[derive(Clone, Copy)]
pub(crate) enum PlaneCounter {
    /// MetaRoCE packets sent out of the plane's netdev.
    TxPackets,
    /// Their UDP payload bytes.
    TxBytes,
    /// MetaRoCE packets received on it (any validity).
    RxPackets,
    /// Their UDP payload bytes.
    RxBytes,
    /// Data packets resent on the plane (wherever they were lost).
    Retransmissions,
}

/// How many of the first counters are also counted per QP.
pub(crate) const QP_COUNTERS: usize = 8;

/// Device-wide counters (before the per-plane ones).
const DEVICE_COUNT: usize = 30;

/// Counters of each plane.
const PER_PLANE: usize = 5;

/// Number of counters.
const COUNT: usize = DEVICE_COUNT + MAX_PLANES * PER_PLANE;

/// Counter descriptors: the device's names, then for each plane number
/// `plane<k>_` and its counters' names, in [`PlaneCounter`] order.
macro_rules! counter_names {
    ([$($name:literal),* $(,)?], [$($k:literal)*]) => {
        [
            $(StatDesc::new(c_str!($name)),)*
            $(
                StatDesc::new(c_str!(concat!("plane", $k, "_tx_packets"))),
                StatDesc::new(c_str!(concat!("plane", $k, "_tx_bytes"))),
                StatDesc::new(c_str!(concat!("plane", $k, "_rx_packets"))),
                StatDesc::new(c_str!(concat!("plane", $k, "_rx_bytes"))),
                StatDesc::new(c_str!(concat!("plane", $k, "_retransmissions"))),
            )*
        ]
    };
}

/// The counter names: [`Counter`] order, then each plane's.
pub(crate) static NAMES: [StatDesc; COUNT] = counter_names!(
    [
        "rx_packets",
        "rx_bytes",
        "tx_packets",
        "tx_bytes",
        "ecn_marks",
        "retransmissions",
        "sack_losses",
        "path_failures",
        "rx_malformed",
        "rx_no_qp",
        "probes_answered",
        "tx_errors",
        "ud_tx_packets",
        "ud_rx_packets",
        "ud_rx_dropped",
        "rx_qp_in_error",
        "rx_not_peer",
        "rx_stale_acks",
        "rx_stale_naks",
        "rx_data_dropped",
        "rx_probes_limited",
        "rto_timeouts",
        "rto_spurious",
        "rto_losses",
        "sack_reorders",
        "doorbells",
        "posts_without_doorbell",
        "tx_inflight_waits",
        "tail_probes",
        "delay_floors_raised",
    ],
    [0 1 2 3 4 5 6 7]
);

/// The counters of one device.
pub(crate) struct Counters {
    values: [AtomicU64; COUNT],
    /// The ifindex of each plane's netdev, 0 for none.
    planes: [AtomicI32; MAX_PLANES],
}

impl Counters {
    /// All zero; plane 0 is the netdev `first` (an ifindex).
    pub(crate) fn new(first: i32) -> Self {
        let c = Self {
            values: [const { AtomicU64::new(0) }; COUNT],
            planes: [const { AtomicI32::new(0) }; MAX_PLANES],
        };
        c.set_plane(0, first);
        c
    }

    /// Plane `k` is now the netdev with `ifindex` (0: none).
    pub(crate) fn set_plane(&self, k: u8, ifindex: i32) {
        if let Some(p) = self.planes.get(usize::from(k)) {
            p.store(ifindex, Ordering::Relaxed);
        }
    }

    /// The plane whose netdev has `ifindex`.
    fn plane_of(&self, ifindex: i32) -> Option<u8> {
        self.planes
            .iter()
            .position(|p| ifindex != 0 && p.load(Ordering::Relaxed) == ifindex)
            .map(|k| k as u8)
    }

    /// Adds `n` to plane `k`'s counter `c`.
    pub(crate) fn add_plane(&self, k: u8, c: PlaneCounter, n: u64) {
        let i = DEVICE_COUNT + usize::from(k) * PER_PLANE + c as usize;
        if usize::from(k) < MAX_PLANES {
            if let Some(v) = self.values.get(i) {
                v.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// One packet of `len` bytes went out of (`tx`) or came in on the
    /// netdev with `ifindex`: counted on its plane.
    pub(crate) fn on_plane_packet(&self, ifindex: i32, tx: bool, len: u64) {
        let Some(k) = self.plane_of(ifindex) else {
            return;
        };
        let (packets, bytes) = if tx {
            (PlaneCounter::TxPackets, PlaneCounter::TxBytes)
        } else {
            (PlaneCounter::RxPackets, PlaneCounter::RxBytes)
        };
        self.add_plane(k, packets, 1);
        self.add_plane(k, bytes, len);
    }

    /// Adds `n` to `c`.
    pub(crate) fn add(&self, c: Counter, n: u64) {
        if let Some(v) = self.values.get(c as usize) {
            v.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Adds one to `c`.
    pub(crate) fn inc(&self, c: Counter) {
        self.add(c, 1);
    }

    /// Copies the values into `out` (in [`NAMES`] order).
    pub(crate) fn read(&self, out: &mut [u64]) {
        for (o, v) in out.iter_mut().zip(self.values.iter()) {
            *o = v.load(Ordering::Relaxed);
        }
    }
}

// Every counter has a name; the per-QP ones come first.
const _: () = assert!(Counter::DelayFloorsRaised as usize + 1 == DEVICE_COUNT);
const _: () = assert!(PlaneCounter::Retransmissions as usize + 1 == PER_PLANE);
const _: () = assert!(Counter::PathFailures as usize + 1 == QP_COUNTERS);
