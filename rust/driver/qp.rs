// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: creation, the state machine (`modify_qp`), the send and
//! receive rings, and posting from kernel consumers.

use core::mem::size_of;
use core::sync::atomic::{AtomicU32, Ordering};

use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, Mutex};

use super::ah::AhState;
use super::datagram::Datagram;
use super::device::{MetaRoceDevice, MetaRoceIbDevice};
use super::limits::{MAX_INLINE, MAX_QP_WR, MAX_RD_ATOMIC, MAX_SGE};
use super::mr::Requester;
use super::port::{active_mtu, FIRST_PORT};
use super::qp_counters::QpCounters;
use super::refusal::{check_limits, qp_state_name, qp_type_name, refuse};
use super::stats::Counter;
use super::transport::{self, Peer, Transport};
use super::tx_worker::DOORBELL_BUDGET;
use super::wqe::{self, geometry, Remote, SendWr, Sge};
use crate::engine::heap::kmalloc_size;
use crate::ib::eopnotsupp;
use crate::ib::ip::{Family, IpAddr};
use crate::ib::lock::{irqs_disabled, new_spinlock_irq, SpinLockIrq};
use crate::ib::restrack::Details;
use crate::ib::ring::{MmapInfo, SharedRing};
use crate::ib::trace::DevName;
use crate::ib::types::{AccessFlags, Mtu, QpState as Qps, QpType, WrOpcode};
use crate::ib::udata::{CreateQpResp, Udata};
use crate::ib::verbs::{
    self, AddressVector, KernelRecvWr, KernelSendWr, Qp, QpAttr, QpCap, QpInit, QpInitAttr,
    QpModify,
};
use crate::ib::worker::in_task;

/// Attributes set through `modify_qp`.
#[derive(Clone, Copy, Default)]
pub(crate) struct QpAttrs {
    /// The QP's state.
    pub(crate) state: Qps,
    /// The path MTU; `None` until `modify_qp` sets one (then 256 bytes are
    /// used and 0 is reported).
    pub(crate) path_mtu: Option<Mtu>,
    /// UD Q_Key.
    pub(crate) qkey: u32,
    /// First expected incoming PSN (kept for query; paths number their own).
    pub(crate) rq_psn: u32,
    /// First outgoing PSN (kept for query).
    pub(crate) sq_psn: u32,
    /// The connected peer QP (RC).
    pub(crate) dest_qp_num: u32,
    /// The remote access allowed to this QP.
    pub(crate) access: AccessFlags,
    /// The peer's address (RC).
    pub(crate) av: AddressVector,
    /// Outstanding READs this side may issue / accept.
    pub(crate) max_rd_atomic: u8,
    /// Outstanding READs the peer may issue to us.
    pub(crate) max_dest_rd_atomic: u8,
    /// RNR NAK timer code.
    pub(crate) min_rnr_timer: u8,
    /// Local ACK timeout code (4.096 us * 2^timeout).
    pub(crate) timeout: u8,
    /// Retries before a transport error.
    pub(crate) retry_cnt: u8,
    /// Retries on RNR NAK.
    pub(crate) rnr_retry: u8,
}

/// What an idle connected RC QP allocates in the driver, in kmalloc
/// classes: its data path ([`transport::IDLE_BYTES`]) and the locks and
/// attributes below (the `QpState` itself is inside the core's `ib_qp`
/// allocation, 80 B). 8,072 B on the test kernel, 7,832 B on the
/// benchmark kernel.
pub(crate) const IDLE_QP_BYTES: usize = transport::IDLE_BYTES
    + 2 * kmalloc_size(size_of::<SpinLockIrq<()>>())
    + kmalloc_size(size_of::<Mutex<QpAttrs>>());

// Issue 11 allows 16 KiB per idle connected QP on a device of 4,000, the
// RDMA core's own objects and the rings' metadata included (~4 KiB
// measured on the test kernel): ours get half of it. The accounting is in
// design.md, "Per-QP memory".
const _: () = assert!(IDLE_QP_BYTES <= 8 * 1024);

/// Driver state of a QP.
pub(crate) struct QpState {
    qp_type: QpType,
    qpn: u32,
    /// The rings, the CQs and (RC) the engine.
    transport: Arc<Transport>,
    /// UD and GSI: the datagram send and receive path.
    datagram: Option<Arc<Datagram>>,
    /// Capabilities granted at creation.
    cap: QpCap,
    /// Completions for every send, not only signalled ones.
    sq_sig_all: bool,
    /// The rings belong to a process (which resets its own indices).
    user: bool,
    /// Serialises kernel posters on the send ring. Irq-safe: ULPs post
    /// from process context, from softirq (their completion handlers) and
    /// with interrupts off.
    sq_lock: Pin<KBox<SpinLockIrq<()>>>,
    /// Serialises kernel posters on the receive ring (irq-safe, as above).
    rq_lock: Pin<KBox<SpinLockIrq<()>>>,
    /// Attributes, changed only by `modify_qp`.
    attrs: Pin<KBox<Mutex<QpAttrs>>>,
    /// `attrs.state` (its C value), readable without the mutex: kernel
    /// consumers post from atomic context, where the mutex must not be
    /// taken.
    state: AtomicU32,
}

impl QpState {
    /// The QP's counting state (`rdma statistic qp`).
    pub(crate) fn counters(&self) -> &QpCounters {
        &self.transport.counters
    }

    /// Writes the transport's state for `rdma resource show qp -dd`: RC
    /// and UC QPs (the engine's paths); a datagram QP has none.
    pub(crate) fn details(&self, out: &mut Details<'_>) -> Result {
        if !self.qp_type.is_connected() {
            return Ok(());
        }
        self.transport
            .with_engines(|sender, receiver| super::qp_details::write(sender, receiver, out))
    }

    /// Creates a QP; returns its number and state.
    pub(crate) fn create(
        dev: &MetaRoceIbDevice,
        init: QpInit<'_, MetaRoceDevice>,
        udata: Option<&Udata<'_>>,
    ) -> Result<(u32, Self)> {
        let attr = init.attr;
        let Some(qp_type) = QpType::from_raw(attr.qp_type) else {
            let why = format_args!(
                "QP type {} not supported (RC, UC, UD and GSI are)",
                attr.qp_type
            );
            return Err(refuse(dev, "create_qp", None, eopnotsupp(), why));
        };
        if attr.create_flags != 0 {
            let why = format_args!(
                "create flags {:#x} not supported (none are)",
                attr.create_flags
            );
            return Err(refuse(dev, "create_qp", None, eopnotsupp(), why));
        }
        let sq_sig_all = attr.signals_all();
        let cap = &mut attr.cap;
        check_limits(
            dev,
            "create_qp",
            &[
                ("max_send_wr", cap.max_send_wr, MAX_QP_WR),
                ("max_recv_wr", cap.max_recv_wr, MAX_QP_WR),
                ("max_send_sge", cap.max_send_sge, MAX_SGE),
                ("max_recv_sge", cap.max_recv_sge, MAX_SGE),
                ("max_inline_data", cap.max_inline_data, MAX_INLINE),
            ],
        )?;
        let (sq_count, sq_size) = geometry(
            cap.max_send_wr,
            wqe::send_elem(cap.max_send_sge, cap.max_inline_data)?,
        )?;
        let mut sq = SharedRing::new(sq_count, sq_size)?;
        let mut rq = match init.srq {
            Some(_) => None,
            None => {
                let (count, size) = geometry(cap.max_recv_wr, wqe::recv_elem(cap.max_recv_sge)?)?;
                Some(SharedRing::new(count, size)?)
            }
        };
        // Grant what the rings hold.
        cap.max_send_wr = sq.count();
        cap.max_send_sge = cap.max_send_sge.max(1);
        cap.max_inline_data = (sq.elem_size() - wqe::SEND_WQE_HEADER) as u32;
        cap.max_inline_data = cap.max_inline_data.min(MAX_INLINE);
        if let Some(rq) = &rq {
            cap.max_recv_wr = rq.count();
            cap.max_recv_sge = cap.max_recv_sge.max(1);
        }

        let qpn = if qp_type == QpType::Gsi {
            1
        } else {
            dev.data().take_qpn()?
        };
        let guard = QpnGuard { dev, qpn };

        if let Some(udata) = udata {
            let sq_mi = sq.expose_for(udata)?;
            let rq_mi = match rq.as_mut() {
                Some(rq) => rq.expose_for(udata)?,
                None => MmapInfo::default(),
            };
            udata.respond(&CreateQpResp { rq_mi, sq_mi })?;
        }

        let transport = Transport::new(
            qpn,
            init.qp_addr,
            Requester {
                pd: init.pd_addr,
                kernel: init.kernel,
            },
            sq,
            rq,
            init.srq,
            (init.send_cq, init.recv_cq),
            sq_sig_all,
            DevName::new(dev.name()),
            dev.data().tick_due.clone(),
            &dev.data().tx_drain,
        )?;
        if qp_type == QpType::Uc {
            transport.set_unreliable()?;
        }
        let datagram = match qp_type {
            t if t.is_connected() => None,
            t => Some(Datagram::new(transport.clone(), t == QpType::Gsi)?),
        };
        let state = Self {
            qp_type,
            qpn,
            transport,
            datagram,
            cap: *cap,
            sq_sig_all,
            user: udata.is_some(),
            sq_lock: KBox::pin_init(new_spinlock_irq!((), "metaroce_qp_sq"), GFP_KERNEL)?,
            rq_lock: KBox::pin_init(new_spinlock_irq!((), "metaroce_qp_rq"), GFP_KERNEL)?,
            state: AtomicU32::new(Qps::Reset.raw()),
            attrs: KBox::pin_init(
                new_mutex!(QpAttrs {
                    state: Qps::Reset,
                    ..Default::default()
                }),
                GFP_KERNEL,
            )?,
        };
        core::mem::forget(guard);
        Ok((qpn, state))
    }

    /// Takes the QP off the receive path and returns its number.
    pub(crate) fn release(dev: &MetaRoceIbDevice, qp: &Qp<QpState>) {
        let d = dev.data();
        let removed = d.qps.lock().remove(qp.qp_num());
        if let Some(t) = removed {
            // Off the receive path first, so that nothing moves cum_msn
            // after the last word.
            t.say_last_word(&d.tx(&d.tunnel, 0));
        }
        drop(d.uds.lock().remove(qp.qp_num()));
        if qp.qp_type() != Some(QpType::Gsi) {
            d.give_back_qpn(qp.qp_num());
        }
    }

    /// Applies `modify_qp`: checked first, then the attributes change and
    /// the data path follows the state change.
    pub(crate) fn modify(&self, dev: &MetaRoceIbDevice, req: &QpModify) -> Result {
        let mut a = self.attrs.lock();
        if self.state() == Qps::Err {
            // The data path failed since the last modify.
            a.state = Qps::Err;
        }
        let next = self.check_modify(dev, req, a.state)?;
        let mut n = self.modified(req, &a);
        n.state = next;
        self.change_state(dev, &n, a.state)?;
        *a = n;
        self.state.store(next.raw(), Ordering::Release);
        Ok(())
    }

    /// Checks `modify_qp` of the QP in `state`: the transition, then each
    /// attribute it sets. Returns the state it goes to.
    fn check_modify(&self, dev: &MetaRoceIbDevice, req: &QpModify, state: Qps) -> Result<Qps> {
        // A value `Qps` does not name (`None` here) is no state the QP is
        // in, nor one the core lets it go to.
        let cur = req.cur_state.map_or(Some(state), core::result::Result::ok);
        let next = req.state.map_or(cur, core::result::Result::ok);
        let cur = match cur {
            Some(cur) if cur == state => cur,
            _ => {
                let (given, is) = (qp_state_name(cur), qp_state_name(Some(state)));
                return Err(self.refuse(
                    dev,
                    format_args!("current state given as {given} but the QP is in {is}"),
                ));
            }
        };
        let mask = req.mask;
        let next = match next {
            Some(next) if verbs::modify_qp_is_ok(cur, next, self.qp_type, mask) => next,
            _ => {
                let (from, to, t) = (
                    qp_state_name(Some(cur)),
                    qp_state_name(next),
                    qp_type_name(self.qp_type),
                );
                let why = format_args!("{from} to {to} with attribute mask {mask:#x} is not a valid transition for QP type {t}");
                return Err(self.refuse(dev, why));
            }
        };
        if let Some(port) = req.port_num.filter(|&p| p != FIRST_PORT) {
            let why = format_args!("port {port} is not the device's port {FIRST_PORT}");
            return Err(self.refuse(dev, why));
        }
        if let Some(index) = req.pkey_index.filter(|&i| i != 0) {
            let why = format_args!("P_Key index {index} is not 0 (the P_Key table has one entry)");
            return Err(self.refuse(dev, why));
        }
        if let Some(n) = req.max_rd_atomic.filter(|&n| u32::from(n) > MAX_RD_ATOMIC) {
            let why = format_args!("max_rd_atomic {n} above the device's {MAX_RD_ATOMIC}");
            return Err(self.refuse(dev, why));
        }
        if let Some(n) = req
            .max_dest_rd_atomic
            .filter(|&n| u32::from(n) > MAX_RD_ATOMIC)
        {
            let why = format_args!("max_dest_rd_atomic {n} above the device's {MAX_RD_ATOMIC}");
            return Err(self.refuse(dev, why));
        }
        match req.path_mtu {
            None => {}
            Some(Err(code)) => {
                let why =
                    format_args!("path MTU code {code} is not an IB MTU (1 to 5: 256 to 4096)");
                return Err(self.refuse(dev, why));
            }
            Some(Ok(path)) => {
                let active = active_mtu(dev);
                if path > active {
                    let (path, active) = (path.bytes(), active.bytes());
                    return Err(self.refuse(
                        dev,
                        format_args!("path MTU {path} above the active MTU {active}"),
                    ));
                }
            }
        }
        Ok(next)
    }

    /// The attributes `modify_qp` sets over the QP's `from` (and a UD QP's
    /// Q_Key passed on to its data path). `req` has been checked.
    fn modified(&self, req: &QpModify, from: &QpAttrs) -> QpAttrs {
        let mut n = *from;
        if let Some(Ok(mtu)) = req.path_mtu {
            n.path_mtu = Some(mtu);
        }
        if let Some(qkey) = req.qkey {
            n.qkey = qkey;
            if let Some(d) = &self.datagram {
                d.set_qkey(qkey);
            }
        }
        if let Some(psn) = req.rq_psn {
            n.rq_psn = psn & 0xff_ffff;
        }
        if let Some(psn) = req.sq_psn {
            n.sq_psn = psn & 0xff_ffff;
        }
        if let Some(qpn) = req.dest_qp_num {
            n.dest_qp_num = qpn & 0xff_ffff;
        }
        n.access = req.access.unwrap_or(n.access);
        n.av = req.av.unwrap_or(n.av);
        n.max_rd_atomic = req.max_rd_atomic.unwrap_or(n.max_rd_atomic);
        n.max_dest_rd_atomic = req.max_dest_rd_atomic.unwrap_or(n.max_dest_rd_atomic);
        n.min_rnr_timer = req.min_rnr_timer.unwrap_or(n.min_rnr_timer);
        n.timeout = req.timeout.unwrap_or(n.timeout);
        n.retry_cnt = req.retry_cnt.unwrap_or(n.retry_cnt);
        n.rnr_retry = req.rnr_retry.unwrap_or(n.rnr_retry);
        n
    }

    /// The data path follows the QP from state `prev` to `n.state` with
    /// attributes `n`: limits and retry budget, flush, reset, connect,
    /// start sending.
    fn change_state(&self, dev: &MetaRoceIbDevice, n: &QpAttrs, prev: Qps) -> Result {
        let next = n.state;
        let t = &self.transport;
        t.set_limits(n.access, n.max_rd_atomic)?;
        t.set_retry(n.timeout, n.retry_cnt);
        if next == Qps::Err || next == Qps::Reset {
            drop(dev.data().uds.lock().remove(self.qpn));
        }
        if next == Qps::Err && prev != Qps::Err {
            match &self.datagram {
                Some(d) => d.flush(),
                None => t.flush(),
            }
        }
        if next == Qps::Reset {
            drop(dev.data().qps.lock().remove(self.qpn));
            t.reset();
            if !self.user {
                // Kernel rings start over; a process resets its own indices.
                for ring in Iterator::chain(core::iter::once(t.sq()), t.rq()) {
                    ring.set_consumer(0);
                    ring.set_producer(0);
                }
            }
        }
        if next == Qps::Rtr && prev != Qps::Rtr && self.qp_type.is_connected() {
            let (local, remote) = self.check_addresses(dev, &n.av)?;
            let mtu = n.path_mtu.unwrap_or(Mtu::Bytes256).bytes();
            // The larger payload our planes carry is advertised only when
            // the application set the port's own MTU: one that chose a
            // smaller MTU gets exactly it (protocol.md 1.8, payload size).
            let wide = n.path_mtu == Some(active_mtu(dev));
            let (planes, plane0_up, own_payload) = {
                let p = dev.data().planes.lock();
                let own = p.max_payload(&local);
                (
                    p.count(),
                    p.get(0).is_some_and(|n| n.is_running_with_carrier()),
                    if wide && u32::from(own) > mtu { own } else { 0 },
                )
            };
            // The device's knobs as they are now: later changes are for
            // QPs that connect after them.
            let knobs = dev.data().knobs.lock().sender;
            t.connect(
                &knobs,
                Peer {
                    local,
                    remote,
                    qpn: n.dest_qp_num,
                },
                mtu,
                own_payload,
                planes,
                plane0_up,
                n.rq_psn,
            )?;
            dev.data().qps.lock().insert(self.qpn, t.clone());
            // The QP marked what `connect` left for the tick (our PLANES)
            // before it was in the table, where a tick may have taken the
            // mark and passed it over: marked again now that it is there.
            dev.data().tick_due.mark(self.qpn);
            dev.data().start_data_path();
        }
        if next == Qps::Rtr && prev != Qps::Rtr {
            if let Some(d) = &self.datagram {
                d.attach(active_mtu(dev).bytes());
                dev.data().uds.lock().insert(self.qpn, d.clone());
                // As for a connected QP: a kernel request marked before
                // the QP was in the table is not passed over.
                dev.data().tick_due.mark(self.qpn);
                dev.data().start_data_path();
            }
        }
        if next == Qps::Rts && prev == Qps::Rtr && self.qp_type.is_connected() {
            t.start_sending(n.sq_psn);
        }
        Ok(())
    }

    /// The QP's own and its peer's address on plane 0, from the address
    /// vector of RTR: of one family (IPv4-mapped GIDs or IPv6 ones), both
    /// specified, the source one of the port's GIDs.
    fn check_addresses(
        &self,
        dev: &MetaRoceIbDevice,
        av: &AddressVector,
    ) -> Result<(IpAddr, IpAddr)> {
        let (local, remote) = (IpAddr(av.sgid), IpAddr(av.dgid));
        let name = |a: &IpAddr| match a.family() {
            Family::V4 => "an IPv4",
            Family::V6 => "an IPv6",
        };
        if local.is_unspecified() {
            let why = format_args!("source GID index {} has no address", av.sgid_index);
            return Err(self.refuse(dev, why));
        }
        if remote.is_unspecified() {
            return Err(self.refuse(dev, format_args!("the destination GID has no address")));
        }
        if local.family() != remote.family() {
            let why = format_args!(
                "source GID index {} is {} address and the destination GID {remote} {} one: a QP is one family end to end",
                av.sgid_index,
                name(&local),
                name(&remote)
            );
            return Err(self.refuse(dev, why));
        }
        Ok((local, remote))
    }

    /// Logs why `modify_qp` of this QP was refused; returns `EINVAL`.
    fn refuse(&self, dev: &MetaRoceIbDevice, why: core::fmt::Arguments<'_>) -> Error {
        refuse(dev, "modify_qp", Some(self.qpn), EINVAL, why)
    }

    /// Fills `query_qp`'s answers.
    pub(crate) fn query(&self, attr: &mut QpAttr, init: &mut QpInitAttr) {
        let a = *self.attrs.lock();
        let state = self.state();
        attr.qp_state = state.raw();
        attr.cur_qp_state = state.raw();
        attr.path_mtu = a.path_mtu.map_or(0, Mtu::raw);
        attr.set_no_alternate_path();
        attr.qkey = a.qkey;
        attr.rq_psn = a.rq_psn;
        attr.sq_psn = a.sq_psn;
        attr.dest_qp_num = a.dest_qp_num;
        attr.qp_access_flags = a.access.raw() as i32;
        attr.cap = self.cap;
        attr.pkey_index = 0;
        attr.port_num = FIRST_PORT;
        attr.max_rd_atomic = a.max_rd_atomic;
        attr.max_dest_rd_atomic = a.max_dest_rd_atomic;
        attr.min_rnr_timer = a.min_rnr_timer;
        attr.timeout = a.timeout;
        attr.retry_cnt = a.retry_cnt;
        attr.rnr_retry = a.rnr_retry;
        init.cap = self.cap;
        init.qp_type = self.qp_type.raw();
        init.set_signals_all(self.sq_sig_all);
    }

    /// The QP's state: the error state once the data path failed (a work
    /// request completed in error), as the consumer sees it.
    pub(crate) fn state(&self) -> Qps {
        // Only `Qps` values are stored: the fallback is never taken.
        let s = Qps::from_raw(self.state.load(Ordering::Acquire)).unwrap_or(Qps::Err);
        let live = matches!(s, Qps::Rtr | Qps::Rts | Qps::Sqd);
        // (A datagram QP fails only through its send ring being corrupted.)
        if live && self.transport.failed() {
            Qps::Err
        } else {
            s
        }
    }

    /// Queues a kernel consumer's receive request.
    pub(crate) fn post_recv(&self, wr: KernelRecvWr<'_>) -> Result {
        let (wr_id, sges) = wr.read()?;
        let rq = self.transport.rq().ok_or(EINVAL)?;
        if self.state() == Qps::Reset || sges.len() > self.cap.max_recv_sge as usize {
            return Err(EINVAL);
        }
        {
            let _guard = self.rq_lock.lock();
            wqe::push_recv(rq, wr_id, sges)?;
        }
        if self.state() == Qps::Err && !irqs_disabled() {
            // Posted in error: completes flushed (`ib_drain_rq` waits for
            // exactly that). With interrupts off the device tick flushes it.
            match &self.datagram {
                Some(d) => d.flush(),
                None => self.transport.flush(),
            }
        }
        Ok(())
    }

    /// Queues a kernel consumer's send request and sends it.
    pub(crate) fn post_send(
        &self,
        dev: &MetaRoceIbDevice,
        wr: &KernelSendWr<'_, AhState>,
    ) -> Result {
        let w = wr.read(self.qp_type)?;
        if !matches!(self.state(), Qps::Rts | Qps::Sqd | Qps::Err) {
            return Err(EINVAL);
        }
        if w.sges.len() > self.cap.max_send_sge as usize {
            return Err(EINVAL);
        }
        // No kernel consumer posts ATOMIC_WRITE (its value has no place in
        // `ib_atomic_wr`): refused rather than sent without one.
        if WrOpcode::from_raw(w.opcode) == Some(WrOpcode::AtomicWrite) {
            return Err(EINVAL);
        }
        let remote = match (w.reg, w.rdma, w.atomic, w.ud) {
            // REG_MR travels in the `wr.mw` layout, without a window.
            (Some(r), _, _, _) => Remote::Mw {
                addr: r.iova,
                length: r.length,
                mr_lkey: r.region_key,
                mw_rkey: 0,
                rkey: r.new_key,
                access: r.access,
            },
            (None, _, _, Some((ah, qpn, qkey))) => Remote::Ud {
                qpn,
                qkey,
                ah_num: ah.data().ah_num(),
            },
            (None, _, Some(a), None) => Remote::Atomic {
                addr: a.remote_addr,
                compare_add: a.compare_add,
                swap: a.swap,
                rkey: a.rkey,
            },
            (None, Some((addr, rkey)), None, None) => Remote::Rdma { addr, rkey },
            (None, None, None, None) => Remote::Rdma { addr: 0, rkey: 0 },
        };
        let mut s = [Sge::default(); MAX_SGE as usize];
        for (d, g) in s.iter_mut().zip(w.sges) {
            *d = Sge {
                addr: g.addr,
                length: g.length,
                lkey: g.lkey,
            };
        }
        let req = SendWr {
            wr_id: w.wr_id,
            opcode: w.opcode,
            send_flags: w.send_flags,
            ex: w.ex,
            remote,
        };
        {
            let sq = self.transport.sq();
            let _guard = self.sq_lock.lock();
            let prod = sq.producer();
            if sq.geometry().is_full(prod, sq.consumer()) {
                return Err(ENOMEM);
            }
            wqe::put_send(sq, prod, &req, &s[..w.sges.len()])?;
            sq.set_producer(prod.wrapping_add(1));
        }
        self.kick(dev)
    }

    /// A process rang the doorbell: its send ring has new requests.
    pub(crate) fn doorbell(&self, dev: &MetaRoceIbDevice) -> Result {
        let state = self.state();
        if state == Qps::Err && self.qp_type.is_connected() {
            // Requests posted in the error state complete flushed.
            self.transport.flush();
            return Ok(());
        }
        if state != Qps::Rts && state != Qps::Sqd {
            return Err(EINVAL);
        }
        dev.data().counters.inc(Counter::Doorbells);
        self.kick(dev)
    }

    fn kick(&self, dev: &MetaRoceIbDevice) -> Result {
        let st = dev.data();
        if self.datagram.is_some() && !self.user {
            // Kernel consumers may post with interrupts disabled: the
            // device tick sends their datagrams, marked for it once the
            // request is in the ring.
            st.tick_due.mark(self.qpn);
        }
        if irqs_disabled() || !in_task() {
            // A kernel consumer posting from an interrupt or a softirq (a
            // completion handler), or with interrupts off (the data path's
            // locks are bh-safe, not irq-safe), is served by the transmit
            // worker (datagrams by the device tick, above).
            self.transport.defer_kick(&st.tx(&st.tunnel, 0));
            return Ok(());
        }
        if let Some(d) = &self.datagram {
            if self.user {
                d.send_queued(&st.tx(&st.tunnel, 0), &st.ahs)?;
            }
            return Ok(());
        }
        if self.user {
            // A process's doorbell: the window for its requests is
            // allocated here, where the allocation may sleep.
            self.transport.reserve_requests();
        }
        let mut tx = st.tx(&st.tunnel, DOORBELL_BUDGET);
        tx.doorbell = self.user;
        self.transport.kick(&tx);
        Ok(())
    }
}

/// Gives a QP number back if creation fails after taking it.
struct QpnGuard<'a> {
    dev: &'a MetaRoceIbDevice,
    qpn: u32,
}

impl Drop for QpnGuard<'_> {
    fn drop(&mut self) {
        if self.qpn != 1 {
            self.dev.data().give_back_qpn(self.qpn);
        }
    }
}
