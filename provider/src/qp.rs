//! Queue pairs: create (legacy and extended), modify/query/destroy, the
//! legacy post_send/post_recv and the `ibv_qp_ex` `ibv_wr_*` API.

use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of};

use crate::abi::{self, VerbsQp, VERBS_QP_EX};
use crate::creating::{Creating, KernelObject};
use crate::errno::{Errno, EINVAL, EOPNOTSUPP};
use crate::ffi::{int_verb, ptr_verb, void_verb};
use crate::lock::{held, FfiLock};
use crate::provider::cmd_fd;
use crate::queue::{Mapping, SharedQueue};
use crate::sys;
use crate::verbs::ah_num;
use crate::wq::{supported_send_ops, RecvQueue, SendQueue};
use crate::wqe::{
    uverbs_opcode, uverbs_send_flags, Payload, Remote, SendWr, Sge, OP_ATOMIC_WRITE, OP_BIND_MW,
    OP_CMP_SWP, OP_FETCH_ADD, OP_LOCAL_INV, OP_RDMA_READ, OP_RDMA_WRITE, OP_RDMA_WRITE_IMM,
    OP_SEND, OP_SEND_IMM, OP_SEND_INV, RECV_HDR, SEND_HDR, SEND_INLINE,
};

// Our Sge is laid out as struct ibv_sge, so SGE arrays from the application
// are read in place.
const _: () = assert!(size_of::<Sge>() == size_of::<sys::ibv_sge>());
const _: () = assert!(offset_of!(Sge, addr) == offset_of!(sys::ibv_sge, addr));
const _: () = assert!(offset_of!(Sge, length) == offset_of!(sys::ibv_sge, length));
const _: () = assert!(offset_of!(Sge, lkey) == offset_of!(sys::ibv_sge, lkey));

/// Our QP; `vqp` first so `ibv_qp`/`ibv_qp_ex` pointers are `Qp` pointers.
#[repr(C)]
pub(crate) struct Qp {
    vqp: VerbsQp,
    qp_type: u32,
    sq: FfiLock<Option<SendQueue>>,
    rq: FfiLock<Option<RecvQueue>>,
}

impl Qp {
    fn new(qp_type: u32) -> Self {
        Qp {
            // SAFETY: VerbsQp is a plain C struct; zero is its initial state.
            vqp: unsafe { core::mem::zeroed() },
            qp_type,
            sq: FfiLock::new(None),
            rq: FfiLock::new(None),
        }
    }

    /// Maps the rings of a QP the kernel just created.
    fn attach_queues(
        &mut self,
        fd: c_int,
        cap: &sys::ibv_qp_cap,
        has_srq: bool,
        resp: &sys::metaroce_create_qp_resp,
    ) -> Result<(), Errno> {
        // A size of 0 means no ring (a QP on an SRQ has no receive ring; a
        // QP created with max_*_wr 0 may have none either).
        if resp.sq_mi.size != 0 {
            let sring = SharedQueue::new(Mapping::map(fd, &resp.sq_mi)?, SEND_HDR)?;
            *self.sq.get_mut() = Some(SendQueue::new(
                sring,
                self.qp_type,
                cap.max_send_sge,
                cap.max_inline_data,
            ));
        }
        if !has_srq && resp.rq_mi.size != 0 {
            let rring = SharedQueue::new(Mapping::map(fd, &resp.rq_mi)?, RECV_HDR)?;
            *self.rq.get_mut() = Some(RecvQueue::new(rring, cap.max_recv_sge));
        }
        Ok(())
    }
}

impl KernelObject for Qp {
    unsafe fn destroy_in_kernel(qp: *mut Qp) {
        // SAFETY: per the caller, a QP the kernel created; its ibv_qp is at
        // offset 0 (repr(C), first field).
        unsafe { abi::ibv_cmd_destroy_qp(qp.cast::<sys::ibv_qp>()) };
    }
}

/// The provider-owned parts of a QP. Built from field borrows only: the
/// `ibv_qp` part belongs to libibverbs, which may write it (e.g. `state`)
/// from another thread, so no reference to the whole `Qp` is ever made
/// after creation.
struct QpView<'a> {
    qp_type: u32,
    sq: &'a FfiLock<Option<SendQueue>>,
    rq: &'a FfiLock<Option<RecvQueue>>,
}

/// # Safety
///
/// `ibqp` must be a live QP of this provider.
unsafe fn qp_ref<'a>(ibqp: *mut sys::ibv_qp) -> QpView<'a> {
    let q = ibqp.cast::<Qp>();
    // SAFETY: per the caller `q` is a live Qp; qp_type never changes after
    // creation and the locks are only used through shared references.
    unsafe {
        QpView {
            qp_type: (*q).qp_type,
            sq: &(*q).sq,
            rq: &(*q).rq,
        }
    }
}

fn check_qp_type(t: u32) -> Result<(), Errno> {
    match t {
        sys::ibv_qp_type_IBV_QPT_RC | sys::ibv_qp_type_IBV_QPT_UC | sys::ibv_qp_type_IBV_QPT_UD => {
            Ok(())
        }
        _ => Err(EOPNOTSUPP),
    }
}

/// `ibv_create_qp`.
///
/// # Safety
///
/// `pd` is NULL (refused) or one of our PDs, and `attr` NULL (refused) or a
/// valid `ibv_qp_init_attr` whose CQs and SRQ are ours; it is writable (the
/// granted capabilities are written back).
pub(crate) unsafe extern "C" fn create_qp(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_qp_init_attr,
) -> *mut sys::ibv_qp {
    ptr_verb(|| {
        if attr.is_null() || pd.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: the application's init attributes.
        let qp_type = unsafe { (*attr).qp_type };
        check_qp_type(qp_type)?;
        let mut qp = Creating::new(Qp::new(qp_type));
        let mut cmd = abi::CmdCreateQp::new();
        let mut resp = abi::CreateQpResp::new();
        // SAFETY: ibv_cmd_create_qp creates the QP it is given (ours, its
        // ibv_qp first) or fails; buffers of the sizes given (response =
        // core + driver part).
        unsafe {
            qp.create_in_kernel(|qp| {
                abi::ibv_cmd_create_qp(
                    pd,
                    qp.cast::<sys::ibv_qp>(),
                    attr,
                    &mut cmd,
                    size_of::<abi::CmdCreateQp>(),
                    &mut resp.ibv_resp,
                    size_of::<abi::CreateQpResp>(),
                )
            })
        }?;
        // SAFETY: ibv_cmd_create_qp wrote the granted caps back into attr;
        // pd's context is live.
        let (cap, has_srq, fd) =
            unsafe { ((*attr).cap, !(*attr).srq.is_null(), cmd_fd((*pd).context)) };
        qp.get_mut().attach_queues(fd, &cap, has_srq, &resp.drv)?;
        Ok(qp.finish().cast::<sys::ibv_qp>())
    })
}

const SUPPORTED_QP_COMP_MASK: u32 = sys::ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_PD
    | sys::ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_CREATE_FLAGS
    | sys::ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;

/// Validates extended create attributes (safe core of create_qp_ex).
pub(crate) fn check_qp_init_ex(
    qp_type: u32,
    comp_mask: u32,
    create_flags: u32,
    send_ops_flags: u64,
) -> Result<(), Errno> {
    check_qp_type(qp_type)?;
    if comp_mask & !SUPPORTED_QP_COMP_MASK != 0 {
        return Err(EOPNOTSUPP);
    }
    if comp_mask & sys::ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_CREATE_FLAGS != 0
        && create_flags != 0
    {
        return Err(EOPNOTSUPP);
    }
    if comp_mask & sys::ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0
        && send_ops_flags & !supported_send_ops(qp_type) != 0
    {
        return Err(EOPNOTSUPP);
    }
    Ok(())
}

/// `ibv_create_qp_ex`: a QP with the `ibv_wr_*` API.
///
/// # Safety
///
/// `ctx` is one of our open contexts and `attr` NULL (refused) or a valid,
/// writable `ibv_qp_init_attr_ex` whose PD, CQs and SRQ are ours.
pub(crate) unsafe extern "C" fn create_qp_ex(
    ctx: *mut sys::ibv_context,
    attr: *mut sys::ibv_qp_init_attr_ex,
) -> *mut sys::ibv_qp {
    ptr_verb(|| {
        if attr.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: the application's init attributes.
        let a = unsafe { &*attr };
        check_qp_init_ex(a.qp_type, a.comp_mask, a.create_flags, a.send_ops_flags)?;
        let mut qp = Creating::new(Qp::new(a.qp_type));
        set_wr_ops(&mut qp.get_mut().vqp.qp_ex);
        let mut cmd = abi::CmdCreateQpEx::new();
        let mut resp = abi::CreateQpExResp::new();
        // SAFETY: as in create_qp (the verbs_qp is the Qp's first field).
        unsafe {
            qp.create_in_kernel(|qp| {
                abi::ibv_cmd_create_qp_ex2(
                    ctx,
                    core::ptr::addr_of_mut!((*qp).vqp),
                    attr,
                    &mut cmd,
                    size_of::<abi::CmdCreateQpEx>(),
                    &mut resp.ibv_resp,
                    size_of::<abi::CreateQpExResp>(),
                )
            })
        }?;
        qp.get_mut().vqp.comp_mask |= VERBS_QP_EX;
        // SAFETY: attr holds the granted caps; ctx is live.
        let (cap, has_srq, fd) = unsafe { ((*attr).cap, !(*attr).srq.is_null(), cmd_fd(ctx)) };
        qp.get_mut().attach_queues(fd, &cap, has_srq, &resp.drv)?;
        Ok(qp.finish().cast::<sys::ibv_qp>())
    })
}

/// `ibv_query_qp`.
///
/// # Safety
///
/// `ibqp` is a QP of ours; `attr` and `init_attr` are writable.
pub(crate) unsafe extern "C" fn query_qp(
    ibqp: *mut sys::ibv_qp,
    attr: *mut sys::ibv_qp_attr,
    attr_mask: c_int,
    init_attr: *mut sys::ibv_qp_init_attr,
) -> c_int {
    int_verb(|| {
        let mut cmd = abi::CmdQueryQp::new();
        // SAFETY: passthrough; the command buffer is ours.
        Errno::check(unsafe {
            abi::ibv_cmd_query_qp(
                ibqp,
                attr,
                attr_mask,
                init_attr,
                &mut cmd,
                size_of::<abi::CmdQueryQp>(),
            )
        })
    })
}

/// `ibv_modify_qp`.
///
/// # Safety
///
/// `ibqp` is a QP of ours and `attr` valid for the fields `attr_mask` names.
pub(crate) unsafe extern "C" fn modify_qp(
    ibqp: *mut sys::ibv_qp,
    attr: *mut sys::ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    int_verb(|| {
        let mut cmd = abi::CmdModifyQp::new();
        // SAFETY: passthrough; the command buffer is ours.
        Errno::check(unsafe {
            abi::ibv_cmd_modify_qp(
                ibqp,
                attr,
                attr_mask,
                &mut cmd,
                size_of::<abi::CmdModifyQp>(),
            )
        })
    })
}

/// `ibv_destroy_qp`.
///
/// # Safety
///
/// `ibqp` is a QP of ours, not destroyed, with no other call on it running
/// (no open `wr_start` sequence); once this succeeds libibverbs does not use
/// it again.
pub(crate) unsafe extern "C" fn destroy_qp(ibqp: *mut sys::ibv_qp) -> c_int {
    int_verb(|| {
        // SAFETY: one of our QPs.
        Errno::check(unsafe { abi::ibv_cmd_destroy_qp(ibqp) })?;
        // SAFETY: destroyed in the kernel; the Box of create_qp(_ex)
        // (Creating) is released once (unmapping the rings).
        drop(unsafe { Box::from_raw(ibqp.cast::<Qp>()) });
        Ok(())
    })
}

/// Rings the send doorbell: a post_send command without work requests.
///
/// # Safety
///
/// `ibqp` must be a live QP.
#[cfg(not(test))]
unsafe fn doorbell(ibqp: *mut sys::ibv_qp) -> Result<(), Errno> {
    let mut bad: *mut sys::ibv_send_wr = core::ptr::null_mut();
    // SAFETY: per the caller; an empty WR list is valid.
    Errno::check(unsafe { abi::ibv_cmd_post_send(ibqp, core::ptr::null_mut(), &mut bad) })
}

#[cfg(test)]
thread_local! {
    static DOORBELLS: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
}

/// The tests' doorbell: counts the rings.
///
/// # Safety
///
/// None (the signature is the real doorbell's).
#[cfg(test)]
unsafe fn doorbell(_ibqp: *mut sys::ibv_qp) -> Result<(), Errno> {
    DOORBELLS.with(|d| d.set(d.get() + 1));
    Ok(())
}

/// The SGE array of a work request.
///
/// # Safety
///
/// `sg_list` must point at `num_sge` valid `ibv_sge` (or `num_sge` be 0).
unsafe fn sges<'a>(sg_list: *const sys::ibv_sge, num_sge: c_int) -> Result<&'a [Sge], Errno> {
    let n = usize::try_from(num_sge).map_err(|_| EINVAL)?;
    if n == 0 {
        return Ok(&[]);
    }
    if sg_list.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: per the caller; Sge has ibv_sge's layout (asserted above).
    Ok(unsafe { core::slice::from_raw_parts(sg_list.cast::<Sge>(), n) })
}

/// Converts a legacy `ibv_send_wr` to our work request.
///
/// # Safety
///
/// `w` must be a valid work request of a QP of type `qp_type` (for UD, its
/// AH one of ours).
pub(crate) unsafe fn send_wr_from_ibv(w: &sys::ibv_send_wr, qp_type: u32) -> Result<SendWr, Errno> {
    let opcode = uverbs_opcode(w.opcode).ok_or(EINVAL)?;
    let send_flags = uverbs_send_flags(w.send_flags)?;
    // SAFETY: both members of this union are 32-bit integers.
    let ex = unsafe { w.__bindgen_anon_1.imm_data };
    let ex = match opcode {
        OP_SEND_IMM | OP_RDMA_WRITE_IMM | OP_SEND_INV | OP_LOCAL_INV => ex,
        _ => 0,
    };
    let remote = match opcode {
        // SAFETY: (the three reads of `w.wr`) its members are plain integers
        // and pointers; the opcode says which one the application filled.
        OP_RDMA_WRITE | OP_RDMA_WRITE_IMM | OP_RDMA_READ => unsafe {
            Remote::Rdma {
                addr: w.wr.rdma.remote_addr,
                rkey: w.wr.rdma.rkey,
            }
        },
        // SAFETY: as above.
        OP_CMP_SWP | OP_FETCH_ADD => unsafe {
            Remote::Atomic {
                addr: w.wr.atomic.remote_addr,
                compare_add: w.wr.atomic.compare_add,
                swap: w.wr.atomic.swap,
                rkey: w.wr.atomic.rkey,
            }
        },
        // SAFETY: as above; the window is the application's (non-NULL
        // checked), its region NULL or the application's.
        OP_BIND_MW => unsafe {
            let b = &w.__bindgen_anon_2.bind_mw;
            let mw = b.mw.as_ref().ok_or(EINVAL)?;
            bind_remote(mw, b.rkey, &b.bind_info)
        },
        // SAFETY: as above; the AH is one of ours per the caller.
        _ if qp_type == sys::ibv_qp_type_IBV_QPT_UD => unsafe {
            Remote::Ud {
                qpn: w.wr.ud.remote_qpn,
                qkey: w.wr.ud.remote_qkey,
                ah_num: ah_num(w.wr.ud.ah)?,
            }
        },
        _ => Remote::None,
    };
    Ok(SendWr {
        wr_id: w.wr_id,
        opcode,
        send_flags: send_flags & !SEND_INLINE,
        ex,
        remote,
    })
}

/// The BIND_MW part of a work request binding `mw` as `info` says, under
/// the new rkey `rkey`.
///
/// # Safety
///
/// `info.mr` must be NULL or a live MR.
unsafe fn bind_remote(mw: &sys::ibv_mw, rkey: u32, info: &sys::ibv_mw_bind_info) -> Remote {
    // SAFETY: per the caller.
    let mr_lkey = unsafe { info.mr.as_ref() }.map_or(0, |mr| mr.lkey);
    Remote::Mw {
        addr: info.addr,
        length: info.length,
        mr_lkey,
        mw_rkey: mw.rkey,
        rkey,
        access: info.mw_access_flags,
    }
}

/// `ibv_inc_rkey`: the next key byte of a key.
fn inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

/// `ibv_bind_mw` (type 1 windows): a BIND_MW work request on the QP's send
/// queue; the window takes its new rkey once the request is posted.
///
/// # Safety
///
/// `ibqp` is a QP of ours; `mw` and `bind` are NULL (refused) or the
/// application's window and bind request, whose MR is NULL or live
/// (libibverbs checked the window's type and the MR's PD).
pub(crate) unsafe extern "C" fn bind_mw(
    ibqp: *mut sys::ibv_qp,
    mw: *mut sys::ibv_mw,
    bind: *mut sys::ibv_mw_bind,
) -> c_int {
    int_verb(|| {
        // SAFETY: the application's window and bind request (libibverbs
        // checked the type and the MR's PD); NULL is refused.
        let (mw, bind) = unsafe { (mw.as_mut().ok_or(EINVAL)?, bind.as_ref().ok_or(EINVAL)?) };
        let rkey = inc_rkey(mw.rkey);
        let wr = SendWr {
            wr_id: bind.wr_id,
            opcode: OP_BIND_MW,
            send_flags: uverbs_send_flags(bind.send_flags)? & !SEND_INLINE,
            ex: 0,
            // SAFETY: the MR is NULL or the application's.
            remote: unsafe { bind_remote(mw, rkey, &bind.bind_info) },
        };
        // SAFETY: one of our QPs.
        let qp = unsafe { qp_ref(ibqp) };
        let mut g = qp.sq.lock();
        let sq = g.as_mut().ok_or(EINVAL)?;
        sq.sync();
        sq.push(&wr, Payload::Sges(&[]))?;
        sq.publish();
        let ring = sq.doorbell_needed();
        drop(g);
        if ring {
            // SAFETY: live QP.
            unsafe { doorbell(ibqp) }?;
        }
        mw.rkey = rkey;
        Ok(())
    })
}

/// Pushes one legacy work request onto `sq`.
///
/// # Safety
///
/// As `send_wr_from_ibv`; with IBV_SEND_INLINE its SGE addresses must be
/// readable for their lengths.
unsafe fn push_legacy(sq: &mut SendQueue, w: &sys::ibv_send_wr, qp_type: u32) -> Result<(), Errno> {
    // SAFETY: per the caller.
    let wr = unsafe { send_wr_from_ibv(w, qp_type)? };
    // SAFETY: per the caller.
    let list = unsafe { sges(w.sg_list, w.num_sge)? };
    let inline = w.send_flags & sys::ibv_send_flags_IBV_SEND_INLINE != 0
        && !matches!(wr.opcode, OP_RDMA_READ | OP_CMP_SWP | OP_FETCH_ADD);
    if !inline {
        return sq.push(&wr, Payload::Sges(list));
    }
    let total: u64 = list.iter().map(|s| u64::from(s.length)).sum();
    if total > u64::from(sq.max_inline()) {
        return Err(EINVAL);
    }
    let mut buf = sq.take_scratch();
    for s in list {
        if s.length == 0 {
            continue;
        }
        // SAFETY: per the caller, inline SGEs name readable local memory.
        let part =
            unsafe { core::slice::from_raw_parts(s.addr as usize as *const u8, s.length as usize) };
        buf.extend_from_slice(part);
    }
    let r = sq.push(&wr, Payload::Inline(&buf));
    sq.return_scratch(buf);
    r
}

/// `ibv_post_send`: the WRs into the send ring, then the doorbell.
///
/// # Safety
///
/// `ibqp` is a QP of ours; `wr` is NULL or a list of valid work requests
/// (each SGE array `num_sge` long, inline SGEs readable, UD AHs ours);
/// `bad_wr` is NULL (refused) or writable.
pub(crate) unsafe extern "C" fn post_send(
    ibqp: *mut sys::ibv_qp,
    wr: *mut sys::ibv_send_wr,
    bad_wr: *mut *mut sys::ibv_send_wr,
) -> c_int {
    int_verb(|| {
        if bad_wr.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: bad_wr is the application's out pointer.
        unsafe { *bad_wr = core::ptr::null_mut() };
        // SAFETY: one of our QPs.
        let qp = unsafe { qp_ref(ibqp) };
        let mut g = qp.sq.lock();
        let sq = g.as_mut().ok_or(EINVAL)?;
        sq.sync();
        let mut cur = wr;
        let mut result = Ok(());
        while !cur.is_null() {
            // SAFETY: the application's WR list.
            let w = unsafe { &*cur };
            // SAFETY: w is a valid WR of this QP.
            if let Err(e) = unsafe { push_legacy(sq, w, qp.qp_type) } {
                // SAFETY: as above.
                unsafe { *bad_wr = cur };
                result = Err(e);
                break;
            }
            cur = w.next;
        }
        let n = sq.publish();
        let ring = n > 0 && sq.doorbell_needed();
        drop(g);
        if ring {
            // SAFETY: live QP.
            unsafe { doorbell(ibqp) }?;
        }
        result
    })
}

/// Posts a receive WR list to `rq` (shared by QPs and SRQs).
///
/// # Safety
///
/// `wr` must be NULL or a valid WR list; `bad_wr` a valid out pointer.
pub(crate) unsafe fn post_recv_list(
    rq: &mut RecvQueue,
    wr: *mut sys::ibv_recv_wr,
    bad_wr: *mut *mut sys::ibv_recv_wr,
) -> Result<(), Errno> {
    let mut cur = wr;
    let mut result = Ok(());
    while !cur.is_null() {
        // SAFETY: per the caller.
        let w = unsafe { &*cur };
        // SAFETY: per the caller, sg_list holds num_sge entries.
        let r = unsafe { sges(w.sg_list, w.num_sge) }.and_then(|s| rq.push(w.wr_id, s));
        if let Err(e) = r {
            // SAFETY: per the caller.
            unsafe { *bad_wr = cur };
            result = Err(e);
            break;
        }
        cur = w.next;
    }
    rq.publish();
    result
}

/// `ibv_post_recv`, without a system call.
///
/// # Safety
///
/// `ibqp` is a QP of ours; `wr` is NULL or a list of valid receive requests
/// (each SGE array `num_sge` long); `bad_wr` is NULL (refused) or writable.
pub(crate) unsafe extern "C" fn post_recv(
    ibqp: *mut sys::ibv_qp,
    wr: *mut sys::ibv_recv_wr,
    bad_wr: *mut *mut sys::ibv_recv_wr,
) -> c_int {
    int_verb(|| {
        if bad_wr.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: the application's out pointer.
        unsafe { *bad_wr = core::ptr::null_mut() };
        // SAFETY: live QP; `state` is maintained by libibverbs' modify_qp.
        if unsafe { (*ibqp).state } == sys::ibv_qp_state_IBV_QPS_RESET {
            // SAFETY: as above.
            unsafe { *bad_wr = wr };
            return Err(EINVAL);
        }
        // SAFETY: one of our QPs.
        let qp = unsafe { qp_ref(ibqp) };
        let mut g = qp.rq.lock();
        let Some(rq) = g.as_mut() else {
            // SAFETY: as above.
            unsafe { *bad_wr = wr };
            return Err(EINVAL); // the QP receives through an SRQ
        };
        // SAFETY: the application's WR list and out pointer.
        unsafe { post_recv_list(rq, wr, bad_wr) }
    })
}

// ---- the ibv_wr_* API ----

fn set_wr_ops(ex: &mut sys::ibv_qp_ex) {
    ex.wr_start = Some(wr_start);
    ex.wr_complete = Some(wr_complete);
    ex.wr_abort = Some(wr_abort);
    ex.wr_send = Some(wr_send);
    ex.wr_send_imm = Some(wr_send_imm);
    ex.wr_send_inv = Some(wr_send_inv);
    ex.wr_rdma_write = Some(wr_rdma_write);
    ex.wr_rdma_write_imm = Some(wr_rdma_write_imm);
    ex.wr_rdma_read = Some(wr_rdma_read);
    ex.wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp);
    ex.wr_atomic_fetch_add = Some(wr_atomic_fetch_add);
    ex.wr_atomic_write = Some(wr_atomic_write);
    ex.wr_local_inv = Some(wr_local_inv);
    ex.wr_bind_mw = Some(wr_bind_mw);
    ex.wr_set_sge = Some(wr_set_sge);
    ex.wr_set_sge_list = Some(wr_set_sge_list);
    ex.wr_set_inline_data = Some(wr_set_inline_data);
    ex.wr_set_inline_data_list = Some(wr_set_inline_data_list);
    ex.wr_set_ud_addr = Some(wr_set_ud_addr);
}

/// Runs `f` on the send queue of a QP inside a `wr_start`..`wr_complete`
/// sequence, leaving the lock held.
///
/// # Safety
///
/// `ex` must be a live QP of ours between `wr_start` and `wr_complete` /
/// `wr_abort`.
unsafe fn in_batch(ex: *mut sys::ibv_qp_ex, f: impl FnOnce(&mut SendQueue, &WrCtl)) {
    void_verb(|| {
        // SAFETY: per the caller: our QP, whose wr_start leaked the guard.
        let qp = unsafe { qp_ref(ex.cast::<sys::ibv_qp>()) };
        // SAFETY: as above.
        let mut g = held(unsafe { qp.sq.resume() });
        // SAFETY: wr_id/wr_flags are plain fields the application set before
        // this call; read by value.
        let ctl = unsafe {
            WrCtl {
                wr_id: (*ex).wr_id,
                wr_flags: (*ex).wr_flags,
            }
        };
        if let Some(sq) = g.as_mut() {
            f(sq, &ctl);
        }
    });
}

/// The `wr_id` and `wr_flags` the application set in its `ibv_qp_ex`.
struct WrCtl {
    wr_id: u64,
    wr_flags: u32,
}

/// Starts a work request with the `wr_id`/`wr_flags` the application set.
fn op(sq: &mut SendQueue, ex: &WrCtl, opcode: u32, ex_field: u32, remote: Remote) {
    match uverbs_send_flags(ex.wr_flags) {
        Ok(flags) => sq.batch_op(SendWr {
            wr_id: ex.wr_id,
            opcode,
            send_flags: flags & !SEND_INLINE,
            ex: ex_field,
            remote,
        }),
        Err(e) => sq.batch_fail(e),
    }
}

/// `ibv_wr_start`: takes the send queue until `wr_complete`/`wr_abort`.
///
/// # Safety
///
/// `ex` is the `ibv_qp_ex` of a QP `create_qp_ex` made (only those have the
/// `wr_*` ops), and the caller has no `wr_start` sequence open on it.
unsafe extern "C" fn wr_start(ex: *mut sys::ibv_qp_ex) {
    void_verb(|| {
        // SAFETY: one of our QPs.
        let qp = unsafe { qp_ref(ex.cast::<sys::ibv_qp>()) };
        let mut g = qp.sq.lock();
        if let Some(sq) = g.as_mut() {
            sq.batch_start();
        }
        g.leak(); // released by wr_complete / wr_abort
    });
}

/// `ibv_wr_complete`: publishes the batch, rings the doorbell, ends the
/// sequence.
///
/// # Safety
///
/// `ex` is the `ibv_qp_ex` of a QP of ours inside an open `wr_start`
/// sequence (libibverbs' API: work requests are built between `ibv_wr_start`
/// and `ibv_wr_complete`/`ibv_wr_abort`).
unsafe extern "C" fn wr_complete(ex: *mut sys::ibv_qp_ex) -> c_int {
    int_verb(|| {
        // SAFETY: one of our QPs, in a wr_start sequence.
        let qp = unsafe { qp_ref(ex.cast::<sys::ibv_qp>()) };
        // SAFETY: wr_start leaked the guard; this one ends the sequence.
        let mut g = unsafe { qp.sq.resume() };
        let sq = g.as_mut().ok_or(EINVAL)?;
        let n = sq.batch_complete()?;
        let ring = n > 0 && sq.doorbell_needed();
        drop(g);
        if ring {
            // SAFETY: live QP.
            unsafe { doorbell(ex.cast::<sys::ibv_qp>()) }?;
        }
        Ok(())
    })
}

/// `ibv_wr_abort`: drops the batch and ends the sequence.
///
/// # Safety
///
/// `ex` is the `ibv_qp_ex` of a QP of ours inside an open `wr_start`
/// sequence (libibverbs' API: work requests are built between `ibv_wr_start`
/// and `ibv_wr_complete`/`ibv_wr_abort`).
unsafe extern "C" fn wr_abort(ex: *mut sys::ibv_qp_ex) {
    void_verb(|| {
        // SAFETY: one of our QPs, in a wr_start sequence.
        let qp = unsafe { qp_ref(ex.cast::<sys::ibv_qp>()) };
        // SAFETY: wr_start leaked the guard; this one ends the sequence.
        let mut g = unsafe { qp.sq.resume() };
        if let Some(sq) = g.as_mut() {
            sq.batch_abort();
        }
    });
}

/// `ibv_wr_send`.
///
/// # Safety
///
/// `ex` is a QP of ours inside an open `wr_start` sequence (see
/// `wr_complete`).
unsafe extern "C" fn wr_send(ex: *mut sys::ibv_qp_ex) {
    // SAFETY: per the # Safety above, a QP of ours inside a sequence.
    unsafe { in_batch(ex, |sq, e| op(sq, e, OP_SEND, 0, Remote::None)) }
}

/// `ibv_wr_send_imm`.
///
/// # Safety
///
/// `ex` is a QP of ours inside an open `wr_start` sequence (see
/// `wr_complete`).
unsafe extern "C" fn wr_send_imm(ex: *mut sys::ibv_qp_ex, imm: u32) {
    // SAFETY: per the # Safety above.
    unsafe { in_batch(ex, |sq, e| op(sq, e, OP_SEND_IMM, imm, Remote::None)) }
}

/// `ibv_wr_send_inv`.
///
/// # Safety
///
/// `ex` is a QP of ours inside an open `wr_start` sequence (see
/// `wr_complete`).
unsafe extern "C" fn wr_send_inv(ex: *mut sys::ibv_qp_ex, rkey: u32) {
    // SAFETY: per the # Safety above.
    unsafe { in_batch(ex, |sq, e| op(sq, e, OP_SEND_INV, rkey, Remote::None)) }
}

/// `ibv_wr_local_inv`.
///
/// # Safety
///
/// `ex` is a QP of ours inside an open `wr_start` sequence (see
/// `wr_complete`).
unsafe extern "C" fn wr_local_inv(ex: *mut sys::ibv_qp_ex, rkey: u32) {
    // SAFETY: per the # Safety above.
    unsafe { in_batch(ex, |sq, e| op(sq, e, OP_LOCAL_INV, rkey, Remote::None)) }
}

/// `ibv_wr_bind_mw`.
///
/// # Safety
///
/// `ex` is a QP of ours inside an open `wr_start` sequence (see
/// `wr_complete`). `mw` and `info` are NULL (refused) or the application's
/// window and bind information, whose MR is NULL or live.
unsafe extern "C" fn wr_bind_mw(
    ex: *mut sys::ibv_qp_ex,
    mw: *mut sys::ibv_mw,
    rkey: u32,
    info: *const sys::ibv_mw_bind_info,
) {
    // SAFETY: the application's window and bind information, NULL refused;
    // the MR in it NULL or the application's.
    let remote = unsafe {
        match (mw.as_ref(), info.as_ref()) {
            (Some(mw), Some(info)) => Some(bind_remote(mw, rkey, info)),
            _ => None,
        }
    };
    // SAFETY: per the # Safety above.
    unsafe {
        in_batch(ex, |sq, e| match remote {
            Some(r) => op(sq, e, OP_BIND_MW, 0, r),
            None => sq.batch_fail(EINVAL),
        })
    }
}

/// `ibv_wr_rdma_write`.
///
/// # Safety
///
/// `ex` is a QP of ours inside an open `wr_start` sequence (see
/// `wr_complete`).
unsafe extern "C" fn wr_rdma_write(ex: *mut sys::ibv_qp_ex, rkey: u32, addr: u64) {
    let remote = Remote::Rdma { addr, rkey };
    // SAFETY: per the # Safety above.
    unsafe { in_batch(ex, |sq, e| op(sq, e, OP_RDMA_WRITE, 0, remote)) }
}

/// `ibv_wr_rdma_write_imm`.
///
/// # Safety
///
/// `ex` is a QP of ours inside an open `wr_start` sequence (see
/// `wr_complete`).
unsafe extern "C" fn wr_rdma_write_imm(ex: *mut sys::ibv_qp_ex, rkey: u32, addr: u64, imm: u32) {
    let remote = Remote::Rdma { addr, rkey };
    // SAFETY: per the # Safety above.
    unsafe { in_batch(ex, |sq, e| op(sq, e, OP_RDMA_WRITE_IMM, imm, remote)) }
}

/// `ibv_wr_rdma_read`.
///
/// # Safety
///
/// `ex` is a QP of ours inside an open `wr_start` sequence (see
/// `wr_complete`).
unsafe extern "C" fn wr_rdma_read(ex: *mut sys::ibv_qp_ex, rkey: u32, addr: u64) {
    let remote = Remote::Rdma { addr, rkey };
    // SAFETY: per the # Safety above.
    unsafe { in_batch(ex, |sq, e| op(sq, e, OP_RDMA_READ, 0, remote)) }
}

/// `ibv_wr_atomic_cmp_swp`.
///
/// # Safety
///
/// `ex` is a QP of ours inside an open `wr_start` sequence (see
/// `wr_complete`).
unsafe extern "C" fn wr_atomic_cmp_swp(
    ex: *mut sys::ibv_qp_ex,
    rkey: u32,
    addr: u64,
    compare: u64,
    swap: u64,
) {
    let remote = Remote::Atomic {
        addr,
        compare_add: compare,
        swap,
        rkey,
    };
    // SAFETY: per the # Safety above.
    unsafe { in_batch(ex, |sq, e| op(sq, e, OP_CMP_SWP, 0, remote)) }
}

/// `ibv_wr_atomic_fetch_add`.
///
/// # Safety
///
/// `ex` is a QP of ours inside an open `wr_start` sequence (see
/// `wr_complete`).
unsafe extern "C" fn wr_atomic_fetch_add(ex: *mut sys::ibv_qp_ex, rkey: u32, addr: u64, add: u64) {
    let remote = Remote::Atomic {
        addr,
        compare_add: add,
        swap: 0,
        rkey,
    };
    // SAFETY: per the # Safety above.
    unsafe { in_batch(ex, |sq, e| op(sq, e, OP_FETCH_ADD, 0, remote)) }
}

/// `ibv_wr_atomic_write`.
///
/// # Safety
///
/// `ex` is a QP of ours inside an open `wr_start` sequence (see
/// `wr_complete`). `atomic_wr` is NULL (refused) or 8 readable bytes.
unsafe extern "C" fn wr_atomic_write(
    ex: *mut sys::ibv_qp_ex,
    rkey: u32,
    addr: u64,
    atomic_wr: *const core::ffi::c_void,
) {
    let f = |sq: &mut SendQueue, e: &WrCtl| {
        if atomic_wr.is_null() {
            return sq.batch_fail(EINVAL);
        }
        let mut value = [0u8; 8];
        // SAFETY: the verb's contract: `atomic_wr` points to the 8 bytes to
        // store (read unaligned: any address will do).
        unsafe {
            core::ptr::copy_nonoverlapping(atomic_wr.cast::<u8>(), value.as_mut_ptr(), 8);
        }
        // The bytes travel as they are (protocol.md 5.1); the WQE's
        // compare_add field holds them in memory order.
        let remote = Remote::Atomic {
            addr,
            compare_add: u64::from_ne_bytes(value),
            swap: 0,
            rkey,
        };
        op(sq, e, OP_ATOMIC_WRITE, 0, remote)
    };
    // SAFETY: per the # Safety above.
    unsafe { in_batch(ex, f) }
}

/// `ibv_wr_set_sge`.
///
/// # Safety
///
/// `ex` is a QP of ours inside an open `wr_start` sequence (see
/// `wr_complete`).
unsafe extern "C" fn wr_set_sge(ex: *mut sys::ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    let s = [Sge { addr, length, lkey }];
    // SAFETY: per the # Safety above.
    unsafe { in_batch(ex, |sq, _| sq.batch_set_sges(&s)) }
}

/// `ibv_wr_set_sge_list`.
///
/// # Safety
///
/// `ex` is a QP of ours inside an open `wr_start` sequence (see
/// `wr_complete`). `list` points to `n` `ibv_sge` (or `n` is 0).
unsafe extern "C" fn wr_set_sge_list(ex: *mut sys::ibv_qp_ex, n: usize, list: *const sys::ibv_sge) {
    let f = |sq: &mut SendQueue, _: &WrCtl| {
        // SAFETY: the application passes `n` SGEs at `list`.
        let s = c_int::try_from(n)
            .map_err(|_| EINVAL)
            .and_then(|n| unsafe { sges(list, n) });
        match s {
            Ok(s) => sq.batch_set_sges(s),
            Err(e) => sq.batch_fail(e),
        }
    };
    // SAFETY: per the # Safety above.
    unsafe { in_batch(ex, f) }
}

/// `ibv_wr_set_inline_data`: the bytes are copied now.
///
/// # Safety
///
/// `ex` is a QP of ours inside an open `wr_start` sequence (see
/// `wr_complete`). `addr` points to `len` readable bytes (NULL refused when
/// `len` is not 0).
unsafe extern "C" fn wr_set_inline_data(ex: *mut sys::ibv_qp_ex, addr: *mut c_void, len: usize) {
    let f = |sq: &mut SendQueue, _: &WrCtl| {
        if len == 0 {
            sq.batch_set_inline(core::iter::empty());
        } else if addr.is_null() {
            sq.batch_fail(EINVAL);
        } else {
            // SAFETY: the application passes `len` readable bytes, copied
            // now (it may reuse the buffer right after the call).
            let d = unsafe { core::slice::from_raw_parts(addr.cast::<u8>(), len) };
            sq.batch_set_inline([d]);
        }
    };
    // SAFETY: per the # Safety above.
    unsafe { in_batch(ex, f) }
}

/// `ibv_wr_set_inline_data_list`: the bytes are copied now.
///
/// # Safety
///
/// `ex` is a QP of ours inside an open `wr_start` sequence (see
/// `wr_complete`). `list` points to `n` `ibv_data_buf` (or `n` is 0), each
/// naming `length` readable bytes.
unsafe extern "C" fn wr_set_inline_data_list(
    ex: *mut sys::ibv_qp_ex,
    n: usize,
    list: *const sys::ibv_data_buf,
) {
    let f = |sq: &mut SendQueue, _: &WrCtl| {
        if n > 0 && list.is_null() {
            return sq.batch_fail(EINVAL);
        }
        let bufs = if n == 0 {
            &[][..]
        } else {
            // SAFETY: the application passes `n` buffer descriptors.
            unsafe { core::slice::from_raw_parts(list, n) }
        };
        if bufs.iter().any(|b| b.addr.is_null() && b.length != 0) {
            return sq.batch_fail(EINVAL);
        }
        sq.batch_set_inline(bufs.iter().filter(|b| b.length != 0).map(|b| {
            // SAFETY: each descriptor names `length` readable bytes.
            unsafe { core::slice::from_raw_parts(b.addr.cast::<u8>(), b.length) }
        }));
    };
    // SAFETY: per the # Safety above.
    unsafe { in_batch(ex, f) }
}

/// `ibv_wr_set_ud_addr`.
///
/// # Safety
///
/// `ex` is a QP of ours inside an open `wr_start` sequence (see
/// `wr_complete`). `ah` is NULL (refused) or an AH of ours, not destroyed.
unsafe extern "C" fn wr_set_ud_addr(
    ex: *mut sys::ibv_qp_ex,
    ah: *mut sys::ibv_ah,
    qpn: u32,
    qkey: u32,
) {
    let f = |sq: &mut SendQueue, _: &WrCtl| {
        // SAFETY: ah is NULL or one of ours.
        match unsafe { ah_num(ah) } {
            Ok(n) => sq.batch_set_ud(qpn, qkey, n),
            Err(e) => sq.batch_fail(e),
        }
    };
    // SAFETY: per the # Safety above.
    unsafe { in_batch(ex, f) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errno::ENOMEM;
    use core::sync::atomic::Ordering;
    use metaroce_abi::ring::KernelFlags;

    const RC: u32 = sys::ibv_qp_type_IBV_QPT_RC;
    const UD: u32 = sys::ibv_qp_type_IBV_QPT_UD;

    fn fake_qp(qp_type: u32) -> Box<Qp> {
        let mut qp = Box::new(Qp::new(qp_type));
        set_wr_ops(&mut qp.vqp.qp_ex);
        qp.vqp.qp_ex.qp_base.qp_type = qp_type;
        qp.vqp.qp_ex.qp_base.state = sys::ibv_qp_state_IBV_QPS_RTS;
        *qp.sq.get_mut() = Some(SendQueue::new(SharedQueue::for_test(8, 7), qp_type, 4, 64));
        *qp.rq.get_mut() = Some(RecvQueue::new(SharedQueue::for_test(4, 6), 2));
        qp
    }

    fn sq_slot(qp: &mut Qp, i: u32) -> Vec<u8> {
        qp.sq.get_mut().as_ref().unwrap().ring().slot(i).to_vec()
    }

    fn producer(qp: &mut Qp) -> u32 {
        let sq = qp.sq.get_mut().as_ref().unwrap();
        sq.ring()
            .producer()
            .load(core::sync::atomic::Ordering::Relaxed)
    }

    fn doorbells() -> u32 {
        DOORBELLS.with(|d| d.get())
    }

    /// Posts `wrs` (linked in order) through the legacy verb.
    fn post_legacy(qp: &mut Qp, wrs: &mut [sys::ibv_send_wr]) -> (c_int, *mut sys::ibv_send_wr) {
        let n = wrs.len();
        for i in 0..n.saturating_sub(1) {
            let next: *mut sys::ibv_send_wr = &mut wrs[i + 1];
            wrs[i].next = next;
        }
        let mut bad = core::ptr::null_mut();
        let p = qp as *mut Qp as *mut sys::ibv_qp;
        // SAFETY: a live fake QP and a valid WR list.
        let r = unsafe { post_send(p, wrs.as_mut_ptr(), &mut bad) };
        (r, bad)
    }

    fn legacy_wr(opcode: u32, flags: u32, sg: &mut [sys::ibv_sge]) -> sys::ibv_send_wr {
        let mut w = sys::ibv_send_wr {
            wr_id: 0x77,
            opcode,
            send_flags: flags,
            num_sge: sg.len() as c_int,
            sg_list: sg.as_mut_ptr(),
            ..Default::default()
        };
        w.__bindgen_anon_1.imm_data = 0x0102_0304;
        w
    }

    /// Each opcode, legacy post_send vs the ibv_wr_* calls: same bytes.
    #[test]
    fn legacy_and_wr_api_produce_the_same_wqes() {
        let data = *b"inline payload!";
        let mut sg = [sys::ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 0x55,
        }];
        let mut isg = [
            sys::ibv_sge {
                addr: data.as_ptr() as u64,
                length: 6,
                lkey: 0,
            },
            sys::ibv_sge {
                addr: data[6..].as_ptr() as u64,
                length: 9,
                lkey: 0,
            },
        ];
        let signaled = sys::ibv_send_flags_IBV_SEND_SIGNALED;
        let inline = sys::ibv_send_flags_IBV_SEND_INLINE;
        type Case = (u32, u32, bool, fn(*mut sys::ibv_qp_ex));
        let cases: [Case; 6] = [
            (
                sys::ibv_wr_opcode_IBV_WR_SEND,
                signaled,
                false,
                // SAFETY: called with a live fake QP inside a wr_start sequence.
                |e| unsafe { wr_send(e) },
            ),
            (
                sys::ibv_wr_opcode_IBV_WR_SEND_WITH_IMM,
                signaled,
                false,
                // SAFETY: called with a live fake QP inside a wr_start sequence.
                |e| unsafe { wr_send_imm(e, 0x0102_0304) },
            ),
            (
                sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE,
                signaled,
                false,
                // SAFETY: called with a live fake QP inside a wr_start sequence.
                |e| unsafe { wr_rdma_write(e, 0x99, 0x2000) },
            ),
            (
                sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE_WITH_IMM,
                0,
                false,
                // SAFETY: called with a live fake QP inside a wr_start sequence.
                |e| unsafe { wr_rdma_write_imm(e, 0x99, 0x2000, 0x0102_0304) },
            ),
            (
                sys::ibv_wr_opcode_IBV_WR_RDMA_READ,
                signaled,
                false,
                // SAFETY: called with a live fake QP inside a wr_start sequence.
                |e| unsafe { wr_rdma_read(e, 0x99, 0x2000) },
            ),
            (
                sys::ibv_wr_opcode_IBV_WR_SEND,
                signaled | inline,
                true,
                // SAFETY: called with a live fake QP inside a wr_start sequence.
                |e| unsafe { wr_send(e) },
            ),
        ];
        for (opcode, flags, is_inline, call) in cases {
            let mut a = fake_qp(RC);
            let mut b = fake_qp(RC);
            let mut w = if is_inline {
                legacy_wr(opcode, flags, &mut isg)
            } else {
                legacy_wr(opcode, flags, &mut sg)
            };
            // Union members the opcode uses.
            w.wr.rdma = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
                remote_addr: 0x2000,
                rkey: 0x99,
            };
            if matches!(opcode, 5 | 6) {
                w.wr.atomic = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
                    remote_addr: 0x2000,
                    compare_add: if opcode == 5 { 1 } else { 3 },
                    swap: if opcode == 5 { 2 } else { 0 },
                    rkey: 0x99,
                };
            }
            let before = doorbells();
            assert_eq!(post_legacy(&mut a, &mut [w]).0, 0, "opcode {opcode}");
            assert_eq!(doorbells(), before + 1);

            let e = &mut b.vqp.qp_ex as *mut sys::ibv_qp_ex;
            // SAFETY: a live fake QP driven through a wr_start sequence.
            unsafe {
                (*e).wr_id = 0x77;
                (*e).wr_flags = flags & !inline;
                wr_start(e);
                call(e);
                if is_inline {
                    let bufs = [
                        sys::ibv_data_buf {
                            addr: data.as_ptr() as *mut c_void,
                            length: 6,
                        },
                        sys::ibv_data_buf {
                            addr: data[6..].as_ptr() as *mut c_void,
                            length: 9,
                        },
                    ];
                    wr_set_inline_data_list(e, 2, bufs.as_ptr());
                } else {
                    wr_set_sge(e, 0x55, 0x1000, 8);
                }
                assert_eq!(wr_complete(e), 0);
            }
            assert_eq!(producer(&mut a), 1);
            assert_eq!(producer(&mut b), 1);
            assert_eq!(sq_slot(&mut a, 0), sq_slot(&mut b, 0), "opcode {opcode}");
            assert!(!b.sq.is_locked());
        }
    }

    /// Window binds, local invalidation and SEND_WITH_INV: the legacy verb,
    /// the `ibv_wr_*` calls and (binds of type 1 windows) `ibv_bind_mw`
    /// write the same WQE; `ibv_bind_mw` gives the window its new rkey.
    #[test]
    fn window_binds_and_invalidations_encode_alike() {
        // SAFETY: plain C data.
        let mut mr: Box<sys::ibv_mr> = unsafe { crate::ffi::boxed_zeroed() };
        mr.lkey = 0x0301;
        // SAFETY: plain C data.
        let mut mw: Box<sys::ibv_mw> = unsafe { crate::ffi::boxed_zeroed() };
        mw.rkey = 0x04ff;
        mw.type_ = sys::ibv_mw_type_IBV_MW_TYPE_1;
        let info = sys::ibv_mw_bind_info {
            mr: &mut *mr,
            addr: 0x1000,
            length: 64,
            mw_access_flags: sys::ibv_access_flags_IBV_ACCESS_REMOTE_WRITE,
        };
        let signaled = sys::ibv_send_flags_IBV_SEND_SIGNALED;

        // BIND_MW: legacy, wr API, ibv_bind_mw.
        let (mut a, mut b, mut c) = (fake_qp(RC), fake_qp(RC), fake_qp(RC));
        let mut w = legacy_wr(sys::ibv_wr_opcode_IBV_WR_BIND_MW, signaled, &mut []);
        w.__bindgen_anon_2.bind_mw = sys::ibv_send_wr__bindgen_ty_4__bindgen_ty_1 {
            mw: &mut *mw,
            rkey: 0x0400,
            bind_info: info,
        };
        assert_eq!(post_legacy(&mut a, &mut [w]).0, 0);
        let e = &mut b.vqp.qp_ex as *mut sys::ibv_qp_ex;
        // SAFETY: a live fake QP driven through a wr_start sequence.
        unsafe {
            (*e).wr_id = 0x77;
            (*e).wr_flags = signaled;
            wr_start(e);
            wr_bind_mw(e, &mut *mw, 0x0400, &info);
            assert_eq!(wr_complete(e), 0);
        }
        let mut bind = sys::ibv_mw_bind {
            wr_id: 0x77,
            send_flags: signaled,
            bind_info: info,
        };
        let cq = &mut *c as *mut Qp as *mut sys::ibv_qp;
        // SAFETY: a live fake QP and window.
        assert_eq!(unsafe { bind_mw(cq, &mut *mw, &mut bind) }, 0);
        assert_eq!(mw.rkey, 0x0400, "the key byte wraps within the index");
        let slot = sq_slot(&mut a, 0);
        assert_eq!(slot, sq_slot(&mut b, 0));
        assert_eq!(slot, sq_slot(&mut c, 0));
        assert_eq!(&slot[8..12], &OP_BIND_MW.to_ne_bytes());
        assert_eq!(
            &slot[52..56],
            &0x04ffu32.to_ne_bytes(),
            "window key before the bind"
        );
        assert_eq!(
            &slot[56..60],
            &0x0400u32.to_ne_bytes(),
            "window key after the bind"
        );

        // LOCAL_INV and SEND_WITH_INV: the key rides in `ex`.
        type Case = (u32, fn(*mut sys::ibv_qp_ex, u32));
        let cases: [Case; 2] = [
            (sys::ibv_wr_opcode_IBV_WR_LOCAL_INV, |e, k| {
                // SAFETY: called with a live fake QP inside a wr_start sequence.
                unsafe { wr_local_inv(e, k) }
            }),
            (sys::ibv_wr_opcode_IBV_WR_SEND_WITH_INV, |e, k| {
                // SAFETY: called with a live fake QP inside a wr_start sequence.
                unsafe { wr_send_inv(e, k) }
            }),
        ];
        for (opcode, call) in cases {
            let (mut a, mut b) = (fake_qp(RC), fake_qp(RC));
            let mut w = legacy_wr(opcode, signaled, &mut []);
            w.__bindgen_anon_1.invalidate_rkey = 0x0400;
            assert_eq!(post_legacy(&mut a, &mut [w]).0, 0, "opcode {opcode}");
            let e = &mut b.vqp.qp_ex as *mut sys::ibv_qp_ex;
            // SAFETY: a live fake QP driven through a wr_start sequence.
            unsafe {
                (*e).wr_id = 0x77;
                (*e).wr_flags = signaled;
                wr_start(e);
            }
            call(e, 0x0400);
            // SAFETY: as above.
            assert_eq!(unsafe { wr_complete(e) }, 0);
            let slot = sq_slot(&mut a, 0);
            assert_eq!(slot, sq_slot(&mut b, 0), "opcode {opcode}");
            assert_eq!(&slot[28..32], &0x0400u32.to_ne_bytes());
        }
        // Not on UD QPs; a bind without its window is refused.
        let mut u = fake_qp(UD);
        let w = legacy_wr(sys::ibv_wr_opcode_IBV_WR_LOCAL_INV, signaled, &mut []);
        assert_eq!(post_legacy(&mut u, &mut [w]).0, EINVAL.0);
        let mut w = legacy_wr(sys::ibv_wr_opcode_IBV_WR_BIND_MW, signaled, &mut []);
        w.__bindgen_anon_2.bind_mw.mw = core::ptr::null_mut();
        assert_eq!(post_legacy(&mut a, &mut [w]).0, EINVAL.0);
    }

    #[test]
    fn ud_send_carries_the_ah_number() {
        // SAFETY: Ah is plain C data.
        let mut ah: Box<crate::verbs::Ah> = unsafe { crate::ffi::boxed_zeroed() };
        ah.ah_num = 42;
        let ahp = &mut *ah as *mut crate::verbs::Ah as *mut sys::ibv_ah;
        let mut sg = [sys::ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }];
        let mut a = fake_qp(UD);
        let mut b = fake_qp(UD);
        let mut w = legacy_wr(sys::ibv_wr_opcode_IBV_WR_SEND, 0, &mut sg);
        w.wr.ud = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_3 {
            ah: ahp,
            remote_qpn: 5,
            remote_qkey: 6,
        };
        assert_eq!(post_legacy(&mut a, &mut [w]).0, 0);
        let e = &mut b.vqp.qp_ex as *mut sys::ibv_qp_ex;
        // SAFETY: fake QP, wr_start sequence.
        unsafe {
            (*e).wr_id = 0x77;
            wr_start(e);
            wr_send(e);
            wr_set_ud_addr(e, ahp, 5, 6);
            wr_set_sge(e, 1, 0x1000, 8);
            assert_eq!(wr_complete(e), 0);
        }
        let s = sq_slot(&mut a, 0);
        assert_eq!(s, sq_slot(&mut b, 0));
        assert_eq!(&s[40..44], &42u32.to_ne_bytes());
    }

    #[test]
    fn post_send_reports_the_bad_wr() {
        let mut qp = fake_qp(RC);
        let mut sg = [sys::ibv_sge::default()];
        let ok = legacy_wr(sys::ibv_wr_opcode_IBV_WR_SEND, 0, &mut sg);
        let bad = legacy_wr(sys::ibv_wr_opcode_IBV_WR_BIND_MW, 0, &mut sg);
        let mut wrs = [ok, ok, bad, ok];
        let (r, badp) = post_legacy(&mut qp, &mut wrs);
        assert_eq!(r, EINVAL.0);
        assert_eq!(badp, &mut wrs[2] as *mut _);
        assert_eq!(
            producer(&mut qp),
            2,
            "the WRs before the bad one are posted"
        );
        // Ring of 8: 6 more fit, the 7th is ENOMEM.
        let mut wrs = [ok; 7];
        let (r, badp) = post_legacy(&mut qp, &mut wrs);
        assert_eq!(r, ENOMEM.0);
        assert_eq!(badp, &mut wrs[6] as *mut _);
        assert!(!qp.sq.is_locked());
    }

    /// The kernel's flag in the send ring's header: set, a post publishes
    /// its requests and makes no system call; clear (or unknown bits
    /// only), it rings; nothing published, nothing rung.
    #[test]
    fn a_post_skips_the_doorbell_while_the_kernel_takes_posts() {
        let mut qp = fake_qp(RC);
        let mut sg = [sys::ibv_sge::default()];
        let ok = legacy_wr(sys::ibv_wr_opcode_IBV_WR_SEND, 0, &mut sg);
        let set_flags = |qp: &mut Qp, bits: u32| {
            let sq = qp.sq.get_mut().as_ref().unwrap();
            sq.ring().kernel_flags().store(bits, Ordering::Relaxed);
        };
        let before = doorbells();
        assert_eq!(post_legacy(&mut qp, &mut [ok]).0, 0);
        assert_eq!(doorbells(), before + 1, "flag clear: rung");

        set_flags(&mut qp, KernelFlags::TAKES_POSTS.bits());
        assert_eq!(post_legacy(&mut qp, &mut [ok, ok]).0, 0);
        assert_eq!(producer(&mut qp), 3, "published all the same");
        assert_eq!(doorbells(), before + 1, "flag set: not rung");

        let e = &mut qp.vqp.qp_ex as *mut sys::ibv_qp_ex;
        // SAFETY: a live fake QP driven through a wr_start sequence.
        unsafe {
            (*e).wr_id = 0x78;
            wr_start(e);
            wr_send(e);
            wr_set_sge(e, 0x55, 0x1000, 8);
            assert_eq!(wr_complete(e), 0);
        }
        assert_eq!(producer(&mut qp), 4);
        assert_eq!(doorbells(), before + 1, "ibv_wr_complete: not rung either");

        set_flags(&mut qp, !KernelFlags::TAKES_POSTS.bits());
        assert_eq!(post_legacy(&mut qp, &mut [ok]).0, 0);
        assert_eq!(doorbells(), before + 2, "unknown bits: rung");
        let p = &mut *qp as *mut Qp as *mut sys::ibv_qp;
        let mut bad = core::ptr::null_mut();
        // SAFETY: a live fake QP and an empty WR list.
        assert_eq!(unsafe { post_send(p, core::ptr::null_mut(), &mut bad) }, 0);
        assert_eq!(doorbells(), before + 2, "nothing posted: not rung");
    }

    #[test]
    fn post_recv_writes_the_ring_and_checks_state() {
        let mut qp = fake_qp(RC);
        let mut sg = [sys::ibv_sge {
            addr: 0x3000,
            length: 64,
            lkey: 9,
        }];
        let mut w = sys::ibv_recv_wr {
            wr_id: 5,
            sg_list: sg.as_mut_ptr(),
            num_sge: 1,
            ..Default::default()
        };
        let p = &mut *qp as *mut Qp as *mut sys::ibv_qp;
        let mut bad = core::ptr::null_mut();
        // SAFETY: fake QP, valid WR.
        assert_eq!(unsafe { post_recv(p, &mut w, &mut bad) }, 0);
        let rq = qp.rq.get_mut().as_ref().unwrap();
        assert_eq!(
            rq.ring()
                .producer()
                .load(core::sync::atomic::Ordering::Relaxed),
            1
        );
        assert_eq!(&rq.ring().slot(0)[..8], &5u64.to_ne_bytes());
        qp.vqp.qp_ex.qp_base.state = sys::ibv_qp_state_IBV_QPS_RESET;
        // SAFETY: as above.
        assert_eq!(unsafe { post_recv(p, &mut w, &mut bad) }, EINVAL.0);
        assert_eq!(bad, &mut w as *mut _);
    }

    #[test]
    fn create_ex_attribute_checks() {
        let ops = supported_send_ops(RC);
        let m = sys::ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_PD
            | sys::ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        assert_eq!(check_qp_init_ex(RC, m, 0, ops), Ok(()));
        let tso = u64::from(sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_TSO);
        assert_eq!(check_qp_init_ex(RC, m, 0, ops | tso), Err(EOPNOTSUPP));
        let read = u64::from(sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_READ);
        assert_eq!(check_qp_init_ex(UD, m, 0, read), Err(EOPNOTSUPP));
        let send_imm = u64::from(sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND_WITH_IMM);
        assert_eq!(check_qp_init_ex(UD, m, 0, send_imm), Ok(()));
        // Atomics on RC only.
        for op in [
            sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
            sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
            sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_ATOMIC_WRITE,
        ] {
            assert_ne!(ops & u64::from(op), 0);
            assert_eq!(check_qp_init_ex(UD, m, 0, u64::from(op)), Err(EOPNOTSUPP));
            let uc = sys::ibv_qp_type_IBV_QPT_UC;
            assert_eq!(check_qp_init_ex(uc, m, 0, u64::from(op)), Err(EOPNOTSUPP));
        }
        // Memory windows and invalidation: RC only.
        for op in [
            sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_BIND_MW,
            sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_LOCAL_INV,
            sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND_WITH_INV,
        ] {
            assert_eq!(check_qp_init_ex(RC, m, 0, u64::from(op)), Ok(()));
            assert_eq!(check_qp_init_ex(UD, m, 0, u64::from(op)), Err(EOPNOTSUPP));
        }
        let xrcd = sys::ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_XRCD;
        assert_eq!(check_qp_init_ex(RC, m | xrcd, 0, 0), Err(EOPNOTSUPP));
        let cf = sys::ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_CREATE_FLAGS;
        assert_eq!(check_qp_init_ex(RC, m | cf, 1, 0), Err(EOPNOTSUPP));
        assert_eq!(
            check_qp_init_ex(sys::ibv_qp_type_IBV_QPT_XRC_SEND, m, 0, 0),
            Err(EOPNOTSUPP)
        );
    }
}
