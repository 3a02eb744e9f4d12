// SPDX-License-Identifier: GPL-2.0

//! Resource limits every MetaRoCE device reports and enforces.

/// Queue pairs per device: every index of a 12-bit QPN slot field
/// (`qpn.rs`) from `FIRST_QPN` on. Meta validated 4,000 connections per
/// device (issue 11); an idle connected QP costs the driver at most 8
/// KiB (`qp::IDLE_QP_BYTES`; at most 16 KiB with the RDMA core's own
/// objects), the tables of a device 8 B per QP each.
pub(crate) const MAX_QP: u32 = (1 << 12) - FIRST_QPN;
/// Work requests per send or receive queue.
pub(crate) const MAX_QP_WR: u32 = 4096;
/// Scatter/gather entries per work request.
pub(crate) const MAX_SGE: u32 = 16;
/// Inline payload bytes per send work request.
pub(crate) const MAX_INLINE: u32 = 256;
/// Completion queues per device (reported, not tracked: two per QP).
pub(crate) const MAX_CQ: u32 = 2 * MAX_QP;
/// Entries per completion queue.
pub(crate) const MAX_CQE: u32 = 16384;
/// Memory regions per device.
pub(crate) const MAX_MR: u32 = 4096;
/// Protection domains per device.
pub(crate) const MAX_PD: u32 = 1024;
/// Shared receive queues per device.
pub(crate) const MAX_SRQ: u32 = 256;
/// Work requests per SRQ.
pub(crate) const MAX_SRQ_WR: u32 = 4096;
/// Address handles per device.
pub(crate) const MAX_AH: u32 = 1024;
/// Outstanding RDMA READs per QP, each direction.
pub(crate) const MAX_RD_ATOMIC: u32 = 16;
/// Largest message (work request), bytes: InfiniBand's 2^31. Longer than
/// one engine message, it goes as several (transport/requester.rs).
pub(crate) const MAX_MSG_SIZE: u32 = 1 << 31;
/// Largest memory region, bytes.
pub(crate) const MAX_MR_SIZE: u64 = 1 << 32;
/// First QP number handed out (0 and 1 are the special QPs; the rest of
/// the low range is kept free as InfiniBand does).
pub(crate) const FIRST_QPN: u32 = 16;
/// Pages of a fast-registration region (`ib_alloc_mr` max_num_sg).
pub(crate) const MAX_FAST_REG_PAGES: u32 = 512;

/// PROBEs answered at once, then a second, when they are not from a
/// connected QP's peer (a prober such as selftests/metaroce_pkt.py, or a
/// host trying to reflect traffic off the device): protocol.md 1.6. The
/// peer's own probes are bounded by its paths and always answered.
pub(crate) const PROBE_BURST: u32 = 32;
/// See [`PROBE_BURST`].
pub(crate) const PROBE_RATE: u32 = 100;

/// Data packets of one QP the network stack may hold (in a qdisc or the
/// driver's ring, not yet freed), per plane the QP sends on, before the
/// QP waits for them to leave (design.md, "Transmit backpressure"): a QP
/// spreads its packets over its planes' paths, so each plane's default
/// 1000-packet qdisc stays above what 8 QPs hold there at once; and
/// above a transmit worker's turn and a doorbell's budget
/// (`tx_worker.rs`), so a QP meets it only when the stack backs up, not
/// in one burst.
pub(crate) const TX_IN_FLIGHT_PER_PLANE: u32 = 96;
