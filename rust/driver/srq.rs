// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: one ring of receive requests for many QPs.

use kernel::prelude::*;
use kernel::sync::{new_mutex, Mutex};

use super::limits::{MAX_SGE, MAX_SRQ_WR};
use super::refusal::{check_limits, refuse};
use super::wqe::{self, geometry, RecvWqe};
use crate::ib::device::Device;
use crate::ib::eopnotsupp;
use crate::ib::lock::{new_spinlock_bh, new_spinlock_irq, SpinLockBh, SpinLockIrq};
use crate::ib::ring::SharedRing;
use crate::ib::udata::{CreateSrqResp, Udata};
use crate::ib::verbs::{KernelRecvWr, SrqAttr, SrqInitAttr, SrqModify};

/// Driver state of an SRQ.
pub(crate) struct SrqState {
    ring: SharedRing,
    max_sge: u32,
    srq_num: u32,
    /// The limit event threshold (0: disarmed).
    limit: Pin<KBox<Mutex<u32>>>,
    /// Serialises kernel posters (any context, as the QP's rq lock).
    lock: Pin<KBox<SpinLockIrq<()>>>,
    /// Serialises the QPs taking receives (from the receive softirq of any
    /// CPU): the consumer side of the ring.
    take_lock: Pin<KBox<SpinLockBh<()>>>,
}

/// What an SRQ takes from its device: a number, which the device state
/// gives out (`device.rs`). A trait, so that the SRQ, from which the QPs
/// held by the device state take receives, does not import the state.
pub(crate) trait SrqNumbers {
    /// A free SRQ number.
    fn take_srq_num(&self) -> Result<u32>;
    /// Frees an SRQ number.
    fn give_back_srq_num(&self, n: u32);
}

impl SrqState {
    /// Creates an SRQ; a user SRQ gets its ring mapped.
    pub(crate) fn create<D: SrqNumbers>(
        dev: &Device<D>,
        attr: &mut SrqInitAttr,
        udata: Option<&Udata<'_>>,
    ) -> Result<Self> {
        if !attr.is_basic() {
            let why = format_args!(
                "SRQ type {} not supported (only basic SRQs are)",
                attr.srq_type
            );
            return Err(refuse(dev, "create_srq", None, eopnotsupp(), why));
        }
        let a = &mut attr.attr;
        if a.max_wr == 0 {
            return Err(refuse(
                dev,
                "create_srq",
                None,
                EINVAL,
                format_args!("max_wr 0: an SRQ holds at least one request"),
            ));
        }
        check_limits(
            dev,
            "create_srq",
            &[
                ("max_wr", a.max_wr, MAX_SRQ_WR),
                ("max_sge", a.max_sge, MAX_SGE),
            ],
        )?;
        if a.srq_limit > a.max_wr {
            let why = format_args!("srq_limit {} above its max_wr {}", a.srq_limit, a.max_wr);
            return Err(refuse(dev, "create_srq", None, EINVAL, why));
        }
        let (count, size) = geometry(a.max_wr, wqe::recv_elem(a.max_sge)?)?;
        let mut ring = SharedRing::new(count, size)?;
        a.max_wr = count;
        a.max_sge = a.max_sge.max(1);
        let srq_num = dev.data().take_srq_num()?;
        if let Some(udata) = udata {
            let res = ring.expose_for(udata).and_then(|mi| {
                udata.respond(&CreateSrqResp {
                    mi,
                    srq_num,
                    reserved: 0,
                })
            });
            if let Err(e) = res {
                dev.data().give_back_srq_num(srq_num);
                return Err(e);
            }
        }
        Ok(Self {
            ring,
            max_sge: a.max_sge,
            srq_num,
            limit: KBox::pin_init(new_mutex!(a.srq_limit), GFP_KERNEL)?,
            lock: KBox::pin_init(new_spinlock_irq!((), "metaroce_srq_post"), GFP_KERNEL)?,
            take_lock: KBox::pin_init(new_spinlock_bh!((), "metaroce_srq_take"), GFP_KERNEL)?,
        })
    }

    /// The ring of receive requests.
    pub(crate) fn ring(&self) -> &SharedRing {
        &self.ring
    }

    /// Takes the oldest posted receive for a message of one of the QPs
    /// using the SRQ. The entry is copied and its slot given back at once:
    /// which receive a message binds to is decided here, once, so that two
    /// QPs never bind the same one, and the QP completes the copy later.
    /// `None` when none is posted (or the process wrote the indices more
    /// than a ring apart). An entry that does not validate is taken
    /// without a buffer: its message fails on it.
    pub(crate) fn take(&self) -> Option<RecvWqe> {
        let _guard = self.take_lock.lock();
        let cons = self.ring.consumer();
        if self.ring.pending_from(cons)? == 0 {
            return None;
        }
        let w = wqe::get_recv(&self.ring, cons)
            .unwrap_or_else(|_| RecvWqe::without_buffer(wqe::recv_wr_id(&self.ring, cons)));
        self.ring.set_consumer(cons.wrapping_add(1));
        Some(w)
    }

    /// Gives the SRQ number back.
    pub(crate) fn release<D: SrqNumbers>(&self, dev: &Device<D>) {
        dev.data().give_back_srq_num(self.srq_num);
    }

    /// `modify_srq`: only the limit can change (no resize).
    pub(crate) fn modify<D>(&self, dev: &Device<D>, req: &SrqModify) -> Result {
        if req.max_wr.is_some() {
            let why = format_args!("max_wr: resizing an SRQ is not supported");
            return Err(refuse(dev, "modify_srq", None, eopnotsupp(), why));
        }
        if let Some(limit) = req.limit {
            let max_wr = self.ring.count();
            if limit > max_wr {
                let why = format_args!("srq_limit {limit} above its max_wr {max_wr}");
                return Err(refuse(dev, "modify_srq", None, EINVAL, why));
            }
            *self.limit.lock() = limit;
        }
        Ok(())
    }

    /// `query_srq`.
    pub(crate) fn query(&self, attr: &mut SrqAttr) {
        attr.max_wr = self.ring.count();
        attr.max_sge = self.max_sge;
        attr.srq_limit = *self.limit.lock();
    }

    /// Queues a kernel consumer's receive request.
    pub(crate) fn post_recv(&self, wr: KernelRecvWr<'_>) -> Result {
        let (wr_id, sges) = wr.read()?;
        if sges.len() > self.max_sge as usize {
            return Err(EINVAL);
        }
        let _guard = self.lock.lock();
        wqe::push_recv(&self.ring, wr_id, sges)
    }
}
