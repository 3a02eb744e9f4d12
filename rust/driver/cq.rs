// SPDX-License-Identifier: GPL-2.0

//! Completion queues: a ring of completions the data path produces and the
//! consumer (a process, without a system call, or a kernel ULP through
//! `poll_cq`) drains.

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use kernel::prelude::*;

use super::limits::MAX_CQE;
use super::port::FIRST_PORT;
use super::refusal::{check_limits, refuse};
use super::wqe::{geometry, Completion, CQE};
use crate::abi::cqe;
use crate::ib::device::Device;
use crate::ib::lock::{new_spinlock_bh, SpinLockBh};
use crate::ib::ring::SharedRing;
use crate::ib::types::{CqNotifyFlags, WcStatus};
use crate::ib::udata::{CreateCqResp, ResizeCqResp, Udata};
use crate::ib::verbs::{fill_wc, Cq, CqInitAttr, Wc};

/// Ring elements are 64 bytes: the 48-byte completion, then (kernel CQs
/// only) the address of the `ib_qp` for `ib_wc.qp`.
const CQ_ELEM: usize = 64;

/// Driver state of a CQ.
pub(crate) struct CqState {
    /// The ring. The lock serialises producers (completions from any QP
    /// using this CQ), kernel consumers of `poll_cq` and `resize`, which
    /// swaps the ring; bh-safe because the data path produces from softirq.
    ring: Pin<KBox<SpinLockBh<SharedRing>>>,
    /// `IB_CQ_SOLICITED` or `IB_CQ_NEXT_COMP` while armed, else 0.
    armed: AtomicU32,
    /// An armed CQ got its completion: the handler runs in
    /// [`CqState::deliver_event`], once the producer has dropped its locks.
    event_pending: AtomicBool,
    /// A completion found the ring full: the CQ is in error (InfiniBand's
    /// CQ overrun), `IB_EVENT_CQ_ERR` was raised once.
    overrun: AtomicBool,
}

impl CqState {
    /// Creates the ring; a user CQ gets it mapped and learns where. `dev`
    /// is only named in refusals (`refusal.rs`): a CQ needs nothing of the
    /// device state, which holds the QPs that complete to it.
    pub(crate) fn new<D>(
        dev: &Device<D>,
        attr: &CqInitAttr,
        udata: Option<&Udata<'_>>,
    ) -> Result<Self> {
        // Timestamps and ignored overruns are not offered.
        if attr.flags != 0 {
            let why = format_args!(
                "flags {:#x} not supported (no timestamps, no ignored overrun)",
                attr.flags
            );
            return Err(refuse(dev, "create_cq", None, crate::ib::eopnotsupp(), why));
        }
        check_cqe(dev, "create_cq", attr.cqe)?;
        let mut ring = new_ring(attr.cqe)?;
        if let Some(udata) = udata {
            let mi = ring.expose_for(udata)?;
            udata.respond(&CreateCqResp { mi })?;
        }
        Ok(Self {
            ring: KBox::pin_init(new_spinlock_bh!(ring, "metaroce_cq_ring"), GFP_KERNEL)?,
            armed: AtomicU32::new(0),
            overrun: AtomicBool::new(false),
            event_pending: AtomicBool::new(false),
        })
    }

    /// Entries the CQ holds.
    pub(crate) fn capacity(&self) -> u32 {
        self.ring.lock().count()
    }

    /// Replaces the ring by one of at least `cqe` entries holding the
    /// completions not consumed yet; a user CQ gets the new ring mapped
    /// (the provider maps it and unmaps the old one while it holds its CQ
    /// lock, so nobody consumes meanwhile). `EINVAL` if `cqe` is out of
    /// limits or below the number of pending completions.
    pub(crate) fn resize<D>(&self, dev: &Device<D>, cqe: u32, udata: Option<&Udata<'_>>) -> Result {
        check_cqe(dev, "resize_cq", cqe)?;
        // Allocation, mapping and the response may sleep: all before the
        // lock is taken. A failure below leaves the old ring in place and
        // the user ignores the response of a failed command.
        let mut ring = new_ring(cqe)?;
        if let Some(udata) = udata {
            let mi = ring.expose_for(udata)?;
            udata.respond(&ResizeCqResp { mi })?;
        }
        let swapped = {
            let mut cur = self.ring.lock();
            let cons = cur.consumer();
            let pending = cur.producer().wrapping_sub(cons);
            // More than the old ring holds: a user consumer index gone wild.
            if pending > cur.count() || pending > ring.count() {
                Err((pending, cur.count()))
            } else {
                let mut elem = [0u8; CQ_ELEM];
                for i in 0..pending {
                    cur.read(cons.wrapping_add(i), &mut elem);
                    ring.write(i, &elem);
                }
                ring.set_producer(pending);
                core::mem::swap(&mut *cur, &mut ring);
                Ok(())
            }
        };
        // `ring` (the old one on success) is freed here, outside the lock:
        // removing a mapping entry may sleep.
        drop(ring);
        swapped.map_err(|(pending, held)| {
            if pending > held {
                let why = format_args!(
                    "the consumer index is {pending} entries behind, more than the CQ's {held}"
                );
                refuse(dev, "resize_cq", None, EINVAL, why)
            } else {
                refuse(
                    dev,
                    "resize_cq",
                    None,
                    EINVAL,
                    format_args!("cqe {cqe} below the {pending} completions not polled yet"),
                )
            }
        })
    }

    /// Adds a completion (`qp_addr` is the `ib_qp` address for kernel
    /// consumers); if the CQ was armed for it, the completion handler is
    /// due ([`CqState::deliver_event`], which the producer calls after
    /// dropping its locks: a handler may post and poll at once). `ENOSPC` if the consumer let the CQ overflow: the completion is
    /// lost, so the CQ is in error (`IB_EVENT_CQ_ERR`, raised once) and the
    /// caller puts its QP in error (InfiniBand's CQ overrun); never a
    /// silent drop.
    pub(crate) fn push(
        &self,
        cq: &Cq<CqState>,
        c: &Completion,
        qp_addr: u64,
        solicited: bool,
    ) -> Result {
        {
            let ring = self.ring.lock();
            let prod = ring.producer();
            if ring.geometry().is_full(prod, ring.consumer()) {
                drop(ring);
                if !self.overrun.swap(true, Ordering::AcqRel) {
                    pr_warn!("CQ overrun: a completion found the CQ full; CQ and QP in error\n");
                    cq.error_event();
                }
                return Err(ENOSPC);
            }
            let mut elem = [0u8; CQ_ELEM];
            elem[..CQE].copy_from_slice(&c.cqe(FIRST_PORT as u8).encode());
            elem[CQE..CQE + 8].copy_from_slice(&qp_addr.to_ne_bytes());
            ring.write(prod, &elem);
            ring.set_producer(prod.wrapping_add(1));
        }
        let armed = self.armed.load(Ordering::Acquire);
        let fire = armed == CqNotifyFlags::NEXT_COMP
            || (armed == CqNotifyFlags::SOLICITED && (solicited || c.status != WcStatus::Success));
        if fire && self.armed.swap(0, Ordering::AcqRel) != 0 {
            self.event_pending.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Runs the completion handler if a completion made it due. Called by
    /// producers with none of the data path's locks held.
    pub(crate) fn deliver_event(&self, cq: &Cq<CqState>) {
        if self.event_pending.swap(false, Ordering::AcqRel) {
            cq.completion_event();
        }
    }

    /// Moves completions into `out` (kernel consumers).
    pub(crate) fn poll(&self, out: &mut [Wc]) -> usize {
        let ring = self.ring.lock();
        let mut cons = ring.consumer();
        let prod = ring.producer();
        let mut n = 0;
        while n < out.len() && cons != prod {
            let mut elem = [0u8; CQ_ELEM];
            ring.read(cons, &mut elem);
            let mut raw = [0u8; CQE];
            raw.copy_from_slice(&elem[..CQE]);
            let c = cqe::Completion::decode(&raw);
            let mut qp = [0u8; 8];
            qp.copy_from_slice(&elem[CQE..CQE + 8]);
            // A datagram's GRH area holds an IPv4 or, with
            // `WcFlags::GRH_IPV6`, an IPv6 header (`fill_wc`).
            fill_wc(&mut out[n], &c, u64::from_ne_bytes(qp), FIRST_PORT);
            cons = cons.wrapping_add(1);
            n += 1;
        }
        ring.set_consumer(cons);
        n
    }

    /// Arms the CQ; with `IB_CQ_REPORT_MISSED_EVENTS` returns 1 if
    /// completions are already waiting.
    pub(crate) fn arm(&self, flags: CqNotifyFlags) -> i32 {
        let kind = flags.arm();
        // NEXT_COMP is the wider condition: never narrow an armed CQ.
        let _ = self.armed.fetch_max(kind, Ordering::AcqRel);
        let missed = flags.report_missed() && {
            let ring = self.ring.lock();
            ring.producer() != ring.consumer()
        };
        i32::from(missed)
    }
}

/// Refuses (`EINVAL`, logged) a CQ size of 0 or above the limit.
fn check_cqe<D>(dev: &Device<D>, verb: &str, cqe: u32) -> Result {
    if cqe == 0 {
        return Err(refuse(
            dev,
            verb,
            None,
            EINVAL,
            format_args!("cqe 0: a CQ holds at least one entry"),
        ));
    }
    check_limits(dev, verb, &[("cqe", cqe, MAX_CQE)])
}

/// A zeroed ring of at least `cqe` completions.
fn new_ring(cqe: u32) -> Result<SharedRing> {
    if cqe == 0 || cqe > MAX_CQE {
        return Err(EINVAL);
    }
    let (count, size) = geometry(cqe, CQ_ELEM)?;
    SharedRing::new(count, size)
}
