// SPDX-License-Identifier: GPL-2.0

//! Per-device packet counters, shown by `rdma statistic show link DEV/1`.
//! Atomic (relaxed) so that softirq and process context update them without
//! a lock.

use core::sync::atomic::{AtomicU64, Ordering};

use kernel::c_str;

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
}

/// How many of the first counters are also counted per QP.
pub(crate) const QP_COUNTERS: usize = 8;

/// Number of counters.
const COUNT: usize = 23;

/// The counter names, in [`Counter`] order.
pub(crate) static NAMES: [StatDesc; COUNT] = [
    StatDesc::new(c_str!("rx_packets")),
    StatDesc::new(c_str!("rx_bytes")),
    StatDesc::new(c_str!("tx_packets")),
    StatDesc::new(c_str!("tx_bytes")),
    StatDesc::new(c_str!("ecn_marks")),
    StatDesc::new(c_str!("retransmissions")),
    StatDesc::new(c_str!("sack_losses")),
    StatDesc::new(c_str!("path_failures")),
    StatDesc::new(c_str!("rx_malformed")),
    StatDesc::new(c_str!("rx_no_qp")),
    StatDesc::new(c_str!("probes_answered")),
    StatDesc::new(c_str!("tx_errors")),
    StatDesc::new(c_str!("ud_tx_packets")),
    StatDesc::new(c_str!("ud_rx_packets")),
    StatDesc::new(c_str!("ud_rx_dropped")),
    StatDesc::new(c_str!("rx_qp_in_error")),
    StatDesc::new(c_str!("rx_not_peer")),
    StatDesc::new(c_str!("rx_stale_acks")),
    StatDesc::new(c_str!("rx_stale_naks")),
    StatDesc::new(c_str!("rx_data_dropped")),
    StatDesc::new(c_str!("rx_probes_limited")),
    StatDesc::new(c_str!("rto_timeouts")),
    StatDesc::new(c_str!("rto_spurious")),
];

/// The counters of one device.
pub(crate) struct Counters([AtomicU64; COUNT]);

impl Counters {
    /// All zero.
    pub(crate) const fn new() -> Self {
        Self([const { AtomicU64::new(0) }; COUNT])
    }

    /// Adds `n` to `c`.
    pub(crate) fn add(&self, c: Counter, n: u64) {
        if let Some(v) = self.0.get(c as usize) {
            v.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Adds one to `c`.
    pub(crate) fn inc(&self, c: Counter) {
        self.add(c, 1);
    }

    /// Copies the values into `out` (in [`NAMES`] order).
    pub(crate) fn read(&self, out: &mut [u64]) {
        for (o, v) in out.iter_mut().zip(self.0.iter()) {
            *o = v.load(Ordering::Relaxed);
        }
    }
}

// Every counter has a name; the per-QP ones come first.
const _: () = assert!(Counter::RtoSpurious as usize + 1 == COUNT);
const _: () = assert!(Counter::PathFailures as usize + 1 == QP_COUNTERS);
