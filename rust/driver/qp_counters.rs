// SPDX-License-Identifier: GPL-2.0

//! Per-QP counters: the core's counter objects (`rdma statistic qp set link
//! DEV/1 auto type on`, `rdma statistic qp bind link DEV/1 lqpn N`,
//! `rdma statistic show link DEV/1`) count the first
//! [`QP_COUNTERS`](super::stats::QP_COUNTERS) device counters for the QPs
//! bound to them.
//!
//! Each counter object is a slot of the device's [`CounterTable`]; a QP's
//! [`QpCounters`] names the slot it is bound to, and its data path adds to
//! that slot as it counts. The core shows a port counter as the driver's
//! value plus every counter object's (live and released): the port value
//! therefore leaves out what went to counter objects ([`CounterTable::
//! attributed`]), so the total stays the device's.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use kernel::prelude::*;

use super::stats::{Counter, QP_COUNTERS};
use crate::engine::sender::SenderStats;
use crate::engine::wire::{self, Packet};

/// Counter objects per device.
pub(crate) const MAX_COUNTERS: usize = 64;

/// One counter object.
struct Slot {
    used: AtomicBool,
    values: [AtomicU64; QP_COUNTERS],
}

impl Slot {
    const EMPTY: Self = Self {
        used: AtomicBool::new(false),
        values: [const { AtomicU64::new(0) }; QP_COUNTERS],
    };
}

/// The counter objects of a device. Atomic (relaxed), updated from any
/// context without a lock.
pub(crate) struct CounterTable {
    /// `MAX_COUNTERS` slots (on the heap: 4.6 KiB, too large for the stack).
    slots: KVec<Slot>,
    /// Everything ever added to any slot, per counter.
    attributed: [AtomicU64; QP_COUNTERS],
}

impl CounterTable {
    /// No counter objects.
    pub(crate) fn new() -> Result<Self> {
        let mut slots = KVec::with_capacity(MAX_COUNTERS, GFP_KERNEL)?;
        for _ in 0..MAX_COUNTERS {
            slots.push(Slot::EMPTY, GFP_KERNEL)?;
        }
        Ok(Self {
            slots,
            attributed: [const { AtomicU64::new(0) }; QP_COUNTERS],
        })
    }

    /// A new counter object (zeroed); returns its id (never 0). `ENOSPC`
    /// when all are in use.
    pub(crate) fn alloc(&self) -> Result<u32> {
        for (i, s) in self.slots.iter().enumerate() {
            if s.used
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                for v in &s.values {
                    v.store(0, Ordering::Relaxed);
                }
                return Ok(i as u32 + 1);
            }
        }
        Err(ENOSPC)
    }

    fn slot(&self, id: u32) -> Option<&Slot> {
        self.slots
            .get((id as usize).checked_sub(1)?)
            .filter(|s| s.used.load(Ordering::Acquire))
    }

    /// Whether `id` names a counter object in use.
    pub(crate) fn exists(&self, id: u32) -> bool {
        self.slot(id).is_some()
    }

    /// Frees counter object `id` (no QP is bound to it any more).
    pub(crate) fn free(&self, id: u32) {
        if let Some(s) = self.slot(id) {
            s.used.store(false, Ordering::Release);
        }
    }

    /// Copies the values of counter object `id` into `out`.
    pub(crate) fn read(&self, id: u32, out: &mut [u64]) {
        if let Some(s) = self.slot(id) {
            for (o, v) in out.iter_mut().zip(s.values.iter()) {
                *o = v.load(Ordering::Relaxed);
            }
        }
    }

    /// The share of per-QP counter `index` that went to counter objects.
    pub(crate) fn attributed(&self, index: usize) -> u64 {
        self.attributed
            .get(index)
            .map_or(0, |v| v.load(Ordering::Relaxed))
    }

    fn add(&self, id: u32, c: Counter, n: u64) {
        let Some(s) = self.slot(id) else { return };
        if let (Some(v), Some(a)) = (s.values.get(c as usize), self.attributed.get(c as usize)) {
            v.fetch_add(n, Ordering::Relaxed);
            a.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// The counting state of one QP's data path.
pub(crate) struct QpCounters {
    /// The counter object the QP is bound to, 0 if none.
    bound: AtomicU32,
    /// The engine's SACK-detected losses, replaced paths, timeouts (all,
    /// spurious), packets timeouts declared lost, SACK losses shown to be
    /// reordering, tail probes and raised delay floors already counted: it
    /// keeps totals, the counters take the increments.
    sack_losses_seen: AtomicU64,
    path_failures_seen: AtomicU64,
    timeouts_seen: AtomicU64,
    spurious_seen: AtomicU64,
    timeout_losses_seen: AtomicU64,
    reorders_seen: AtomicU64,
    tail_probes_seen: AtomicU64,
    delay_floors_seen: AtomicU64,
}

impl QpCounters {
    /// Not bound, nothing seen.
    pub(crate) const fn new() -> Self {
        Self {
            bound: AtomicU32::new(0),
            sack_losses_seen: AtomicU64::new(0),
            path_failures_seen: AtomicU64::new(0),
            timeouts_seen: AtomicU64::new(0),
            spurious_seen: AtomicU64::new(0),
            timeout_losses_seen: AtomicU64::new(0),
            reorders_seen: AtomicU64::new(0),
            tail_probes_seen: AtomicU64::new(0),
            delay_floors_seen: AtomicU64::new(0),
        }
    }

    /// Binds the QP to counter object `id`; `EINVAL` if it is bound already.
    pub(crate) fn bind(&self, id: u32) -> Result {
        self.bound
            .compare_exchange(0, id, Ordering::AcqRel, Ordering::Relaxed)
            .map(|_| ())
            .map_err(|_| EINVAL)
    }

    /// Unbinds the QP; `EINVAL` if it was not bound.
    pub(crate) fn unbind(&self) -> Result {
        if self.bound.swap(0, Ordering::AcqRel) == 0 {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// Counts `n` of `c` for this QP (on its counter object, if bound).
    pub(crate) fn add(&self, table: &CounterTable, c: Counter, n: u64) {
        let id = self.bound.load(Ordering::Relaxed);
        if id != 0 {
            table.add(id, c, n);
        }
    }

    /// A packet of `len` bytes was sent (`sent` is the send's result).
    pub(crate) fn on_send(&self, table: &CounterTable, sent: &Result, len: usize) {
        if sent.is_ok() {
            self.add(table, Counter::TxPackets, 1);
            self.add(table, Counter::TxBytes, len as u64);
        }
    }

    /// A packet of `len` bytes (UDP payload) was delivered to the QP.
    pub(crate) fn on_receive(&self, table: &CounterTable, len: usize, ce: bool) {
        self.add(table, Counter::RxPackets, 1);
        self.add(table, Counter::RxBytes, len as u64);
        if ce {
            self.add(table, Counter::EcnMarks, 1);
        }
    }

    /// Takes the engine's new SACK-detected losses, path failures and
    /// timeouts into the device counters `dev` and this QP's (the per-QP
    /// counters hold only the first two).
    pub(crate) fn sync_engine(
        &self,
        stats: &SenderStats,
        table: &CounterTable,
        dev: &super::stats::Counters,
    ) {
        let pairs = [
            (
                stats.sack_losses,
                &self.sack_losses_seen,
                Counter::SackLosses,
            ),
            (
                stats.paths_replaced,
                &self.path_failures_seen,
                Counter::PathFailures,
            ),
            (stats.timeouts, &self.timeouts_seen, Counter::RtoTimeouts),
            (
                stats.spurious_timeouts,
                &self.spurious_seen,
                Counter::RtoSpurious,
            ),
            (
                stats.timeout_losses,
                &self.timeout_losses_seen,
                Counter::RtoLosses,
            ),
            (stats.reorders, &self.reorders_seen, Counter::SackReorders),
            (
                stats.tail_probes,
                &self.tail_probes_seen,
                Counter::TailProbes,
            ),
            (
                stats.delay_floor_raised,
                &self.delay_floors_seen,
                Counter::DelayFloorsRaised,
            ),
        ];
        for (total, seen, c) in pairs {
            let before = seen.swap(total, Ordering::Relaxed);
            // A reconnected QP's engine starts again from zero.
            let new = if total >= before {
                total - before
            } else {
                total
            };
            if new != 0 {
                dev.add(c, new);
                self.add(table, c, new);
            }
        }
    }
}

/// Bytes of `pkt` on the wire after the UDP header (what `rx_bytes` and
/// `tx_bytes` count).
pub(crate) fn wire_len(pkt: &Packet<'_>) -> usize {
    wire::ICRC_LEN
        + match pkt {
            Packet::Data { payload, .. } => wire::DATA_HEADER_LEN + payload.len(),
            Packet::Ack(_) => wire::ACK_LEN,
            Packet::Nak(_) => wire::NAK_LEN,
            Packet::Probe(_) | Packet::ProbeReply(_) => wire::PROBE_LEN,
            Packet::Planes(_) => wire::PLANES_LEN,
        }
}
