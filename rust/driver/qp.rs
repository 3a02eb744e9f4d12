// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: creation, the state machine (`modify_qp`), the send and
//! receive rings, and posting from kernel consumers.

use core::sync::atomic::{AtomicU32, Ordering};

use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, Mutex};

use super::ah::AhState;
use super::datagram::Datagram;
use super::device::{MetaRoceDevice, MetaRoceIbDevice};
use super::gid::gid_ipv4;
use super::limits::{MAX_INLINE, MAX_QP_WR, MAX_RD_ATOMIC, MAX_SGE};
use super::mr::Requester;
use super::port::{active_mtu, mtu_bytes, FIRST_PORT};
use super::qp_counters::QpCounters;
use super::refusal::{check_limits, qp_state_name, qp_type_name, refuse};
use super::transport::{Peer, Transport};
use super::tx_worker::DOORBELL_BUDGET;
use super::wqe::{self, geometry, Remote, SendWr, Sge};
use crate::ib::eopnotsupp;
use crate::ib::lock::{irqs_disabled, new_spinlock_irq, SpinLockIrq};
use crate::ib::restrack::Details;
use crate::ib::ring::SharedRing;
use crate::ib::udata::Udata;
use crate::ib::verbs::{self, AddressVector, KernelRecvWr, KernelSendWr, Qp, QpInit};
use crate::ib::worker::in_task;
use crate::sys::bindings as b;

/// Attributes set through `modify_qp`.
#[derive(Clone, Copy, Default)]
pub(crate) struct QpAttrs {
    /// `IB_QPS_*`.
    pub(crate) state: u32,
    /// `IB_MTU_*` of the path.
    pub(crate) path_mtu: u32,
    /// UD Q_Key.
    pub(crate) qkey: u32,
    /// First expected incoming PSN (kept for query; paths number their own).
    pub(crate) rq_psn: u32,
    /// First outgoing PSN (kept for query).
    pub(crate) sq_psn: u32,
    /// The connected peer QP (RC).
    pub(crate) dest_qp_num: u32,
    /// `IB_ACCESS_*` remote access allowed to this QP.
    pub(crate) access: u32,
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

/// Driver state of a QP.
pub(crate) struct QpState {
    /// `IB_QPT_*`.
    qp_type: u32,
    qpn: u32,
    /// The rings, the CQs and (RC) the engine.
    transport: Arc<Transport>,
    /// UD and GSI: the datagram send and receive path.
    datagram: Option<Arc<Datagram>>,
    /// Capabilities granted at creation.
    cap: b::ib_qp_cap,
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
    /// `attrs.state`, readable without the mutex: kernel consumers post
    /// from atomic context, where the mutex must not be taken.
    state: AtomicU32,
}

fn supported(qp_type: u32) -> bool {
    matches!(
        qp_type,
        b::ib_qp_type_IB_QPT_RC
            | b::ib_qp_type_IB_QPT_UC
            | b::ib_qp_type_IB_QPT_UD
            | b::ib_qp_type_IB_QPT_GSI
    )
}

/// RC and UC: one peer QP, carried by the engine (UC: see `uc.rs`).
fn connected(qp_type: u32) -> bool {
    matches!(qp_type, b::ib_qp_type_IB_QPT_RC | b::ib_qp_type_IB_QPT_UC)
}

impl QpState {
    /// The QP's counting state (`rdma statistic qp`).
    pub(crate) fn counters(&self) -> &QpCounters {
        &self.transport.counters
    }

    /// Writes the transport's state for `rdma resource show qp -dd`: RC
    /// and UC QPs (the engine's paths); a datagram QP has none.
    pub(crate) fn details(&self, out: &mut Details<'_>) -> Result {
        if !connected(self.qp_type) {
            return Ok(());
        }
        self.transport
            .with_sender(|sender| super::qp_details::write(sender, out))
    }

    /// Creates a QP; returns its number and state.
    pub(crate) fn create(
        dev: &MetaRoceIbDevice,
        init: QpInit<'_, MetaRoceDevice>,
        udata: Option<&Udata<'_>>,
    ) -> Result<(u32, Self)> {
        let attr = init.attr;
        if !supported(attr.qp_type) {
            let why = format_args!(
                "QP type {} not supported (RC, UC, UD and GSI are)",
                attr.qp_type
            );
            return Err(refuse(dev, "create_qp", None, eopnotsupp(), why));
        }
        if attr.create_flags != 0 {
            let why = format_args!(
                "create flags {:#x} not supported (none are)",
                attr.create_flags
            );
            return Err(refuse(dev, "create_qp", None, eopnotsupp(), why));
        }
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

        let qpn = if attr.qp_type == b::ib_qp_type_IB_QPT_GSI {
            1
        } else {
            dev.data().take_qpn()?
        };
        let guard = QpnGuard { dev, qpn };

        if let Some(udata) = udata {
            let sq_mi = sq.expose_for(udata)?;
            let rq_mi = match rq.as_mut() {
                Some(rq) => rq.expose_for(udata)?,
                None => b::metaroce_mmap_info::default(),
            };
            udata.respond(&b::metaroce_create_qp_resp { rq_mi, sq_mi })?;
        }

        let sq_sig_all = attr.sq_sig_type == b::ib_sig_type_IB_SIGNAL_ALL_WR;
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
        )?;
        if attr.qp_type == b::ib_qp_type_IB_QPT_UC {
            transport.set_unreliable();
        }
        let datagram = match attr.qp_type {
            t if connected(t) => None,
            t => Some(Datagram::new(
                transport.clone(),
                t == b::ib_qp_type_IB_QPT_GSI,
            )?),
        };
        let state = Self {
            qp_type: attr.qp_type,
            qpn,
            transport,
            datagram,
            cap: *cap,
            sq_sig_all,
            user: udata.is_some(),
            sq_lock: KBox::pin_init(new_spinlock_irq!((), "metaroce_qp_sq"), GFP_KERNEL)?,
            rq_lock: KBox::pin_init(new_spinlock_irq!((), "metaroce_qp_rq"), GFP_KERNEL)?,
            state: AtomicU32::new(b::ib_qp_state_IB_QPS_RESET),
            attrs: KBox::pin_init(
                new_mutex!(QpAttrs {
                    state: b::ib_qp_state_IB_QPS_RESET,
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
        drop(dev.data().qps.lock().remove(qp.qp_num()));
        drop(dev.data().uds.lock().remove(qp.qp_num()));
        if qp.qp_type() != b::ib_qp_type_IB_QPT_GSI {
            dev.data().give_back_qpn(qp.qp_num());
        }
    }

    /// Applies `modify_qp`: checked first, then the attributes change and
    /// the data path follows the state change.
    pub(crate) fn modify(&self, dev: &MetaRoceIbDevice, attr: &b::ib_qp_attr, mask: u32) -> Result {
        let mut a = self.attrs.lock();
        if self.state() == b::ib_qp_state_IB_QPS_ERR {
            // The data path failed since the last modify.
            a.state = b::ib_qp_state_IB_QPS_ERR;
        }
        let next = self.check_modify(dev, attr, mask, a.state)?;
        let mut n = self.modified(attr, mask, &a);
        n.state = next;
        self.change_state(dev, &n, a.state)?;
        *a = n;
        self.state.store(next, Ordering::Release);
        Ok(())
    }

    /// Checks `modify_qp` of the QP in `state`: the transition, then each
    /// attribute it sets. Returns the state it goes to.
    fn check_modify(
        &self,
        dev: &MetaRoceIbDevice,
        attr: &b::ib_qp_attr,
        mask: u32,
        state: u32,
    ) -> Result<u32> {
        let cur = if mask & b::ib_qp_attr_mask_IB_QP_CUR_STATE != 0 {
            attr.cur_qp_state
        } else {
            state
        };
        let next = if mask & b::ib_qp_attr_mask_IB_QP_STATE != 0 {
            attr.qp_state
        } else {
            cur
        };
        if cur != state {
            let (given, is) = (qp_state_name(cur), qp_state_name(state));
            return Err(self.refuse(
                dev,
                format_args!("current state given as {given} but the QP is in {is}"),
            ));
        }
        if !verbs::modify_qp_is_ok(cur, next, self.qp_type, mask) {
            let (from, to, t) = (
                qp_state_name(cur),
                qp_state_name(next),
                qp_type_name(self.qp_type),
            );
            let why = format_args!("{from} to {to} with attribute mask {mask:#x} is not a valid transition for QP type {t}");
            return Err(self.refuse(dev, why));
        }
        if mask & b::ib_qp_attr_mask_IB_QP_PORT != 0 && attr.port_num != FIRST_PORT {
            let why = format_args!(
                "port {} is not the device's port {}",
                attr.port_num, FIRST_PORT
            );
            return Err(self.refuse(dev, why));
        }
        if mask & b::ib_qp_attr_mask_IB_QP_PKEY_INDEX != 0 && attr.pkey_index != 0 {
            let why = format_args!(
                "P_Key index {} is not 0 (the P_Key table has one entry)",
                attr.pkey_index
            );
            return Err(self.refuse(dev, why));
        }
        if mask & b::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC != 0
            && u32::from(attr.max_rd_atomic) > MAX_RD_ATOMIC
        {
            let why = format_args!(
                "max_rd_atomic {} above the device's {}",
                attr.max_rd_atomic, MAX_RD_ATOMIC
            );
            return Err(self.refuse(dev, why));
        }
        if mask & b::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC != 0
            && u32::from(attr.max_dest_rd_atomic) > MAX_RD_ATOMIC
        {
            let why = format_args!(
                "max_dest_rd_atomic {} above the device's {}",
                attr.max_dest_rd_atomic, MAX_RD_ATOMIC
            );
            return Err(self.refuse(dev, why));
        }
        if mask & b::ib_qp_attr_mask_IB_QP_PATH_MTU != 0 {
            let active = active_mtu(dev);
            if !(b::ib_mtu_IB_MTU_256..=b::ib_mtu_IB_MTU_4096).contains(&attr.path_mtu) {
                let why = format_args!(
                    "path MTU code {} is not an IB MTU (1 to 5: 256 to 4096)",
                    attr.path_mtu
                );
                return Err(self.refuse(dev, why));
            }
            if attr.path_mtu > active {
                let (path, active) = (mtu_bytes(attr.path_mtu), mtu_bytes(active));
                return Err(self.refuse(
                    dev,
                    format_args!("path MTU {path} above the active MTU {active}"),
                ));
            }
        }
        Ok(next)
    }

    /// The attributes `modify_qp` sets in `mask` over the QP's `from` (and
    /// a UD QP's Q_Key passed on to its data path).
    fn modified(&self, attr: &b::ib_qp_attr, mask: u32, from: &QpAttrs) -> QpAttrs {
        let mut n = *from;
        if mask & b::ib_qp_attr_mask_IB_QP_PATH_MTU != 0 {
            n.path_mtu = attr.path_mtu;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_QKEY != 0 {
            n.qkey = attr.qkey;
            if let Some(d) = &self.datagram {
                d.set_qkey(attr.qkey);
            }
        }
        if mask & b::ib_qp_attr_mask_IB_QP_RQ_PSN != 0 {
            n.rq_psn = attr.rq_psn & 0xff_ffff;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_SQ_PSN != 0 {
            n.sq_psn = attr.sq_psn & 0xff_ffff;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_DEST_QPN != 0 {
            n.dest_qp_num = attr.dest_qp_num & 0xff_ffff;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS != 0 {
            n.access = attr.qp_access_flags as u32;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_AV != 0 {
            n.av = AddressVector::from_attr(&attr.ah_attr);
        }
        if mask & b::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC != 0 {
            n.max_rd_atomic = attr.max_rd_atomic;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC != 0 {
            n.max_dest_rd_atomic = attr.max_dest_rd_atomic;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER != 0 {
            n.min_rnr_timer = attr.min_rnr_timer;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_TIMEOUT != 0 {
            n.timeout = attr.timeout;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_RETRY_CNT != 0 {
            n.retry_cnt = attr.retry_cnt;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_RNR_RETRY != 0 {
            n.rnr_retry = attr.rnr_retry;
        }
        n
    }

    /// The data path follows the QP from state `prev` to `n.state` with
    /// attributes `n`: limits and retry budget, flush, reset, connect,
    /// start sending.
    fn change_state(&self, dev: &MetaRoceIbDevice, n: &QpAttrs, prev: u32) -> Result {
        let next = n.state;
        let t = &self.transport;
        t.set_limits(n.access, n.max_rd_atomic);
        t.set_retry(n.timeout, n.retry_cnt);
        if next == b::ib_qp_state_IB_QPS_ERR || next == b::ib_qp_state_IB_QPS_RESET {
            drop(dev.data().uds.lock().remove(self.qpn));
        }
        if next == b::ib_qp_state_IB_QPS_ERR && prev != b::ib_qp_state_IB_QPS_ERR {
            match &self.datagram {
                Some(d) => d.flush(),
                None => t.flush(),
            }
        }
        if next == b::ib_qp_state_IB_QPS_RESET {
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
        if next == b::ib_qp_state_IB_QPS_RTR
            && prev != b::ib_qp_state_IB_QPS_RTR
            && connected(self.qp_type)
        {
            // v1 carries RC and UC over IPv4 only.
            const V4_ONLY: &str = "this device carries RC and UC over IPv4 only";
            let Some(local) = gid_ipv4(&n.av.sgid) else {
                let why = format_args!("GID index {} is an IPv6 GID; {V4_ONLY}", n.av.sgid_index);
                return Err(self.refuse(dev, why));
            };
            let Some(remote) = gid_ipv4(&n.av.dgid) else {
                return Err(self.refuse(
                    dev,
                    format_args!("the destination GID is an IPv6 address; {V4_ONLY}"),
                ));
            };
            let mtu = mtu_bytes(n.path_mtu);
            let planes = dev.data().planes.lock().count();
            t.connect(
                Peer {
                    local,
                    remote,
                    qpn: n.dest_qp_num,
                },
                mtu,
                planes,
                n.rq_psn,
            )?;
            dev.data().qps.lock().insert(self.qpn, t.clone());
            dev.data().start_data_path();
        }
        if next == b::ib_qp_state_IB_QPS_RTR && prev != b::ib_qp_state_IB_QPS_RTR {
            if let Some(d) = &self.datagram {
                let ndev = dev.netdev(FIRST_PORT).ok_or(ENODEV)?;
                d.attach(ndev, mtu_bytes(active_mtu(dev)));
                dev.data().uds.lock().insert(self.qpn, d.clone());
                dev.data().start_data_path();
            }
        }
        if next == b::ib_qp_state_IB_QPS_RTS
            && prev == b::ib_qp_state_IB_QPS_RTR
            && connected(self.qp_type)
        {
            t.start_sending(n.sq_psn);
        }
        Ok(())
    }

    /// Logs why `modify_qp` of this QP was refused; returns `EINVAL`.
    fn refuse(&self, dev: &MetaRoceIbDevice, why: core::fmt::Arguments<'_>) -> Error {
        refuse(dev, "modify_qp", Some(self.qpn), EINVAL, why)
    }

    /// Fills `query_qp`'s answers.
    pub(crate) fn query(&self, attr: &mut b::ib_qp_attr, init: &mut b::ib_qp_init_attr) {
        let a = *self.attrs.lock();
        let state = self.state();
        attr.qp_state = state;
        attr.cur_qp_state = state;
        attr.path_mtu = a.path_mtu;
        attr.path_mig_state = b::ib_mig_state_IB_MIG_MIGRATED;
        attr.qkey = a.qkey;
        attr.rq_psn = a.rq_psn;
        attr.sq_psn = a.sq_psn;
        attr.dest_qp_num = a.dest_qp_num;
        attr.qp_access_flags = a.access as i32;
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
        init.qp_type = self.qp_type;
        init.sq_sig_type = if self.sq_sig_all {
            b::ib_sig_type_IB_SIGNAL_ALL_WR
        } else {
            b::ib_sig_type_IB_SIGNAL_REQ_WR
        };
    }

    /// The QP's state (`IB_QPS_*`): the error state once the data path
    /// failed (a work request completed in error), as the consumer sees it.
    pub(crate) fn state(&self) -> u32 {
        let s = self.state.load(Ordering::Acquire);
        let live = matches!(
            s,
            b::ib_qp_state_IB_QPS_RTR | b::ib_qp_state_IB_QPS_RTS | b::ib_qp_state_IB_QPS_SQD
        );
        // (A datagram QP fails only through its send ring being corrupted.)
        if live && self.transport.failed() {
            b::ib_qp_state_IB_QPS_ERR
        } else {
            s
        }
    }

    /// Queues a kernel consumer's receive request.
    pub(crate) fn post_recv(&self, wr: KernelRecvWr<'_>) -> Result {
        let (wr_id, sges) = wr.read()?;
        let rq = self.transport.rq().ok_or(EINVAL)?;
        if self.state() == b::ib_qp_state_IB_QPS_RESET
            || sges.len() > self.cap.max_recv_sge as usize
        {
            return Err(EINVAL);
        }
        {
            let _guard = self.rq_lock.lock();
            wqe::push_recv(rq, wr_id, sges)?;
        }
        if self.state() == b::ib_qp_state_IB_QPS_ERR && !irqs_disabled() {
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
        let state = self.state();
        if state != b::ib_qp_state_IB_QPS_RTS
            && state != b::ib_qp_state_IB_QPS_SQD
            && state != b::ib_qp_state_IB_QPS_ERR
        {
            return Err(EINVAL);
        }
        if w.sges.len() > self.cap.max_send_sge as usize {
            return Err(EINVAL);
        }
        // No kernel consumer posts ATOMIC_WRITE (its value has no place in
        // `ib_atomic_wr`): refused rather than sent without one.
        if w.opcode == b::ib_wr_opcode_IB_WR_ATOMIC_WRITE {
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
        if state == b::ib_qp_state_IB_QPS_ERR && connected(self.qp_type) {
            // Requests posted in the error state complete flushed.
            self.transport.flush();
            return Ok(());
        }
        if state != b::ib_qp_state_IB_QPS_RTS && state != b::ib_qp_state_IB_QPS_SQD {
            return Err(EINVAL);
        }
        self.kick(dev)
    }

    fn kick(&self, dev: &MetaRoceIbDevice) -> Result {
        let st = dev.data();
        if irqs_disabled() || !in_task() {
            // A kernel consumer posting from an interrupt or a softirq (a
            // completion handler), or with interrupts off (the data path's
            // locks are bh-safe, not irq-safe), is served by the transmit
            // worker (datagrams by the device tick, below).
            self.transport.defer_kick(&st.tx(&st.tunnel, 0));
            return Ok(());
        }
        if let Some(d) = &self.datagram {
            // Kernel consumers may post with interrupts disabled: the device
            // tick sends their datagrams.
            if self.user {
                d.send_queued(&st.tx(&st.tunnel, 0), &st.ahs)?;
            }
            return Ok(());
        }
        self.transport.kick(&st.tx(&st.tunnel, DOORBELL_BUDGET));
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
