//! Completion queues: create (legacy and extended), poll without a system
//! call, the extended polling API, notification, resize, destroy.

use core::ffi::{c_int, c_uint};
use core::mem::size_of;
use core::sync::atomic::Ordering;

use crate::abi::{self, VerbsCq};
use crate::creating::{Creating, KernelObject};
use crate::errno::{Errno, EINVAL, ENOENT, EOPNOTSUPP};
use crate::ffi::{int_verb, ptr_verb, value_verb, void_verb};
use crate::lock::{held, FfiLock};
use crate::provider::cmd_fd;
use crate::queue::{Mapping, SharedQueue};
use crate::sys;
use crate::wqe::{decode_cqe, ibv_wc_flags, to_ibv_wc, Completion, CQE_SIZE};

/// Per-CQ state behind the CQ lock.
pub(crate) struct CqState {
    ring: Option<SharedQueue>,
    /// Extended polling: index of the current completion, and whether it
    /// is still to be consumed by `end_poll`.
    cur: u32,
    current: Completion,
    current_valid: bool,
}

impl CqState {
    fn new() -> Self {
        CqState {
            ring: None,
            cur: 0,
            current: Completion::default(),
            current_valid: false,
        }
    }

    /// Adopts the ring a resize produced; the old one is unmapped here.
    fn replace_ring(&mut self, ring: SharedQueue) {
        self.current_valid = false;
        self.cur = 0;
        drop(self.ring.replace(ring));
    }
}

/// Our CQ; `vcq` first so `ibv_cq`/`ibv_cq_ex` pointers are `Cq` pointers.
#[repr(C)]
pub(crate) struct Cq {
    vcq: VerbsCq,
    state: FfiLock<CqState>,
}

/// Moves up to `out.len()` completions from the ring into `out` (safe
/// core of `poll_cq`).
pub(crate) fn poll_into(ring: &SharedQueue, out: &mut [sys::ibv_wc]) -> Result<usize, Errno> {
    let mut cons = ring.consumer().load(Ordering::Relaxed);
    let prod = ring.producer().load(Ordering::Acquire);
    let avail = ring.geometry().used(prod, cons)? as usize;
    let n = avail.min(out.len());
    for wc in &mut out[..n] {
        *wc = to_ibv_wc(&decode_cqe(ring.slot(cons)));
        cons = cons.wrapping_add(1);
    }
    if n > 0 {
        ring.consumer().store(cons, Ordering::Release);
    }
    Ok(n)
}

fn map_ring(fd: c_int, mi: &sys::metaroce_mmap_info) -> Result<SharedQueue, Errno> {
    SharedQueue::new(Mapping::map(fd, mi)?, CQE_SIZE)
}

impl Cq {
    fn new() -> Self {
        Cq {
            // SAFETY: VerbsCq is a plain C struct; zero is its initial state.
            vcq: unsafe { core::mem::zeroed() },
            state: FfiLock::new(CqState::new()),
        }
    }

    /// Maps the ring of a CQ the kernel just created.
    fn attach_ring(&mut self, fd: c_int, mi: &sys::metaroce_mmap_info) -> Result<(), Errno> {
        self.state.get_mut().ring = Some(map_ring(fd, mi)?);
        Ok(())
    }
}

impl KernelObject for Cq {
    unsafe fn destroy_in_kernel(cq: *mut Cq) {
        // SAFETY: per the caller, a CQ the kernel created; its ibv_cq is
        // at offset 0 (repr(C), first field).
        unsafe { abi::ibv_cmd_destroy_cq(cq.cast::<sys::ibv_cq>()) };
    }
}

/// # Safety
///
/// `ibcq` must be a live CQ of this provider.
unsafe fn state<'a>(ibcq: *mut sys::ibv_cq) -> &'a FfiLock<CqState> {
    // SAFETY: per the caller, ibcq is the first field of a live Cq; the
    // lock field is never touched by libibverbs.
    unsafe { &(*ibcq.cast::<Cq>()).state }
}

/// `ibv_create_cq`.
///
/// # Safety
///
/// `ctx` is one of our open contexts and `channel` NULL or a completion
/// channel of it.
pub(crate) unsafe extern "C" fn create_cq(
    ctx: *mut sys::ibv_context,
    cqe: c_int,
    channel: *mut sys::ibv_comp_channel,
    comp_vector: c_int,
) -> *mut sys::ibv_cq {
    ptr_verb(|| {
        let mut cq = Creating::new(Cq::new());
        let mut resp = abi::CreateCqResp::new();
        // SAFETY: ibv_cmd_create_cq creates the CQ it is given (ours, its
        // ibv_cq first) or fails; no driver command (NULL, 0) as the uapi
        // has none; the response buffer is core + driver part.
        unsafe {
            cq.create_in_kernel(|cq| {
                abi::ibv_cmd_create_cq(
                    ctx,
                    cqe,
                    channel,
                    comp_vector,
                    cq.cast::<sys::ibv_cq>(),
                    core::ptr::null_mut(),
                    0,
                    &mut resp.ibv_resp,
                    size_of::<abi::CreateCqResp>(),
                )
            })
        }?;
        // SAFETY: ctx is live.
        let fd = unsafe { cmd_fd(ctx) };
        cq.get_mut().attach_ring(fd, &resp.drv.mi)?;
        Ok(cq.finish().cast::<sys::ibv_cq>())
    })
}

/// Completion fields the extended API can read.
const SUPPORTED_WC_FLAGS: u64 = (sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_BYTE_LEN
    | sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_IMM
    | sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_QP_NUM
    | sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_SRC_QP
    | sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_SLID
    | sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_SL
    | sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_DLID_PATH_BITS)
    as u64;

/// `ibv_create_cq_ex`: a CQ with the extended polling API.
///
/// # Safety
///
/// `ctx` is one of our open contexts and `attr` NULL (refused) or a valid
/// `ibv_cq_init_attr_ex`, its channel NULL or a completion channel of `ctx`.
pub(crate) unsafe extern "C" fn create_cq_ex(
    ctx: *mut sys::ibv_context,
    attr: *mut sys::ibv_cq_init_attr_ex,
) -> *mut sys::ibv_cq_ex {
    ptr_verb(|| {
        if attr.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: attr is the application's valid init attr.
        let wc_flags = unsafe { (*attr).wc_flags };
        if wc_flags & !SUPPORTED_WC_FLAGS != 0 {
            return Err(EOPNOTSUPP);
        }
        // SAFETY: as above.
        let (mask, flags) = unsafe { ((*attr).comp_mask, (*attr).flags) };
        // A parent domain and IGNORE_OVERRUN (a CQ that may overflow
        // silently) are features we lack; SINGLE_THREADED only allows a
        // provider to skip locking, so it is accepted and changes nothing.
        if mask & !sys::ibv_cq_init_attr_mask_IBV_CQ_INIT_ATTR_MASK_FLAGS != 0
            || (mask & sys::ibv_cq_init_attr_mask_IBV_CQ_INIT_ATTR_MASK_FLAGS != 0
                && flags & !sys::ibv_create_cq_attr_flags_IBV_CREATE_CQ_ATTR_SINGLE_THREADED != 0)
        {
            return Err(EOPNOTSUPP);
        }
        // The kernel gets the attributes without SINGLE_THREADED.
        // SAFETY: as above.
        let mut kattr = unsafe { *attr };
        kattr.flags = 0;
        kattr.comp_mask &= !sys::ibv_cq_init_attr_mask_IBV_CQ_INIT_ATTR_MASK_FLAGS;
        let mut cq = Creating::new(Cq::new());
        let mut resp = abi::CreateCqExResp::new();
        // SAFETY: as in create_cq; the extended response is passed whole.
        unsafe {
            cq.create_in_kernel(|cq| {
                abi::ibv_cmd_create_cq_ex(
                    ctx,
                    &kattr,
                    core::ptr::addr_of_mut!((*cq).vcq),
                    core::ptr::null_mut(),
                    0,
                    &mut resp.ibv_resp,
                    size_of::<abi::CreateCqExResp>(),
                    0,
                )
            })
        }?;
        // SAFETY: ctx is live.
        let fd = unsafe { cmd_fd(ctx) };
        cq.get_mut().attach_ring(fd, &resp.drv.mi)?;
        let ex = &mut cq.get_mut().vcq.cq_ex;
        ex.start_poll = Some(start_poll);
        ex.next_poll = Some(next_poll);
        ex.end_poll = Some(end_poll);
        ex.read_opcode = Some(read_opcode);
        ex.read_vendor_err = Some(read_vendor_err);
        ex.read_wc_flags = Some(read_wc_flags);
        let has = |f: u32| wc_flags & u64::from(f) != 0;
        if has(sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_BYTE_LEN) {
            ex.read_byte_len = Some(read_byte_len);
        }
        if has(sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_IMM) {
            ex.read_imm_data = Some(read_imm_data);
        }
        if has(sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_QP_NUM) {
            ex.read_qp_num = Some(read_qp_num);
        }
        if has(sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_SRC_QP) {
            ex.read_src_qp = Some(read_src_qp);
        }
        if has(sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_SLID) {
            ex.read_slid = Some(read_slid);
        }
        if has(sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_SL) {
            ex.read_sl = Some(read_sl);
        }
        if has(sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_DLID_PATH_BITS) {
            ex.read_dlid_path_bits = Some(read_dlid_path_bits);
        }
        // The ibv_cq_ex is at offset 0, as for every CQ of ours.
        Ok(cq.finish().cast::<sys::ibv_cq_ex>())
    })
}

/// `ibv_poll_cq`, without a system call.
///
/// # Safety
///
/// `ibcq` is a CQ of ours, not destroyed, and `wc` NULL (refused) or `ne`
/// writable `ibv_wc`. Threads may poll the same CQ at once (its lock
/// serialises them).
pub(crate) unsafe extern "C" fn poll_cq(
    ibcq: *mut sys::ibv_cq,
    ne: c_int,
    wc: *mut sys::ibv_wc,
) -> c_int {
    value_verb(-1, || {
        let Ok(ne) = usize::try_from(ne) else {
            return -1;
        };
        if ne == 0 {
            return 0;
        }
        if wc.is_null() {
            return -1;
        }
        // SAFETY: ibcq is one of our CQs (libibverbs dispatches by context).
        let g = unsafe { state(ibcq) }.lock();
        let Some(ring) = g.ring.as_ref() else {
            return -1;
        };
        // SAFETY: the application passes an array of `ne` ibv_wc.
        let out = unsafe { core::slice::from_raw_parts_mut(wc, ne) };
        match poll_into(ring, out) {
            Ok(n) => c_int::try_from(n).unwrap_or(c_int::MAX),
            Err(_) => -1,
        }
    })
}

/// `ibv_req_notify_cq`.
///
/// # Safety
///
/// `ibcq` is a CQ of ours, not destroyed.
pub(crate) unsafe extern "C" fn req_notify_cq(ibcq: *mut sys::ibv_cq, solicited: c_int) -> c_int {
    // SAFETY: passthrough of libibverbs' arguments.
    int_verb(|| Errno::check(unsafe { abi::ibv_cmd_req_notify_cq(ibcq, solicited) }))
}

/// `ibv_resize_cq`.
///
/// # Safety
///
/// `ibcq` is a CQ of ours, not destroyed.
pub(crate) unsafe extern "C" fn resize_cq(ibcq: *mut sys::ibv_cq, cqe: c_int) -> c_int {
    int_verb(|| {
        // SAFETY: one of our CQs.
        let mut g = unsafe { state(ibcq) }.lock();
        let mut cmd = abi::CmdResizeCq::new();
        let mut resp = abi::ResizeCqResp::new();
        // SAFETY: live CQ; buffers of the sizes given.
        Errno::check(unsafe {
            abi::ibv_cmd_resize_cq(
                ibcq,
                cqe,
                &mut cmd,
                size_of::<abi::CmdResizeCq>(),
                &mut resp.ibv_resp,
                size_of::<abi::ResizeCqResp>(),
            )
        })?;
        // SAFETY: the CQ's context is live while the CQ is.
        let fd = unsafe { cmd_fd((*ibcq).context) };
        // The kernel moved the pending completions into the new ring and
        // no longer produces into the old one, which is unmapped once the
        // new one is in place. If the new ring cannot be mapped the CQ has
        // no ring left: polls fail from now on.
        match map_ring(fd, &resp.drv.mi) {
            Ok(ring) => {
                g.replace_ring(ring);
                Ok(())
            }
            Err(e) => {
                g.ring = None;
                Err(e)
            }
        }
    })
}

/// `ibv_destroy_cq`.
///
/// # Safety
///
/// `ibcq` is a CQ of ours, not destroyed, with no other call on it running;
/// once this succeeds libibverbs does not use it again.
pub(crate) unsafe extern "C" fn destroy_cq(ibcq: *mut sys::ibv_cq) -> c_int {
    int_verb(|| {
        // SAFETY: one of our CQs.
        Errno::check(unsafe { abi::ibv_cmd_destroy_cq(ibcq) })?;
        // SAFETY: destroyed in the kernel; the Box of create_cq(_ex)
        // (Creating) is released once, as libibverbs makes no further use.
        drop(unsafe { Box::from_raw(ibcq.cast::<Cq>()) });
        Ok(())
    })
}

// ---- extended polling ----

/// Publishes the current completion in the `ibv_cq_ex` fields the inline
/// helpers read directly.
///
/// # Safety
///
/// `ex` is a live CQ of ours whose lock the caller holds.
unsafe fn expose(ex: *mut sys::ibv_cq_ex, c: &Completion) {
    // SAFETY: per the caller; status/wr_id belong to the poll owner.
    unsafe {
        (*ex).status = c.status;
        (*ex).wr_id = c.wr_id;
    }
}

/// # Safety
///
/// `ex` must be a live extended CQ of ours.
unsafe fn ex_state<'a>(ex: *mut sys::ibv_cq_ex) -> &'a FfiLock<CqState> {
    // SAFETY: per the caller; ibv_cq_ex starts with the ibv_cq fields.
    unsafe { state(ex.cast::<sys::ibv_cq>()) }
}

/// `ibv_start_poll`: opens a poll sequence at the oldest completion.
///
/// # Safety
///
/// `ex` is the `ibv_cq_ex` of a CQ `create_cq_ex` made, and the caller has
/// no poll sequence open on it (sequences do not nest).
unsafe extern "C" fn start_poll(
    ex: *mut sys::ibv_cq_ex,
    _attr: *mut sys::ibv_poll_cq_attr,
) -> c_int {
    int_verb(|| {
        // SAFETY: one of our extended CQs.
        let mut g = unsafe { ex_state(ex) }.lock();
        let st = &mut *g;
        let ring = st.ring.as_ref().ok_or(EINVAL)?;
        let cons = ring.consumer().load(Ordering::Relaxed);
        let prod = ring.producer().load(Ordering::Acquire);
        if ring.geometry().used(prod, cons)? == 0 {
            return Err(ENOENT); // the guard drops: unlocked
        }
        st.cur = cons;
        st.current = decode_cqe(ring.slot(cons));
        st.current_valid = true;
        // SAFETY: we hold the lock.
        unsafe { expose(ex, &st.current) };
        g.leak(); // held until end_poll
        Ok(())
    })
}

/// `ibv_next_poll`.
///
/// # Safety
///
/// `ex` is a CQ of ours inside the caller's poll sequence: after a
/// `start_poll` that returned 0, before its `end_poll` (the extended polling
/// API's rule).
unsafe extern "C" fn next_poll(ex: *mut sys::ibv_cq_ex) -> c_int {
    int_verb(|| {
        // SAFETY: start_poll succeeded, so this poll sequence holds the
        // lock through a leaked guard.
        let g = unsafe { ex_state(ex).resume() };
        let mut g = held(g);
        let st = &mut *g;
        let ring = st.ring.as_ref().ok_or(EINVAL)?;
        st.cur = st.cur.wrapping_add(1);
        let prod = ring.producer().load(Ordering::Acquire);
        if ring.geometry().used(prod, st.cur)? == 0 {
            st.current_valid = false;
            return Err(ENOENT);
        }
        st.current = decode_cqe(ring.slot(st.cur));
        st.current_valid = true;
        // SAFETY: we hold the lock.
        unsafe { expose(ex, &st.current) };
        Ok(())
    })
}

/// `ibv_end_poll`: consumes what the sequence read and closes it.
///
/// # Safety
///
/// `ex` is a CQ of ours inside the caller's poll sequence: after a
/// `start_poll` that returned 0, before its `end_poll` (the extended polling
/// API's rule).
unsafe extern "C" fn end_poll(ex: *mut sys::ibv_cq_ex) {
    void_verb(|| {
        // SAFETY: as in next_poll; this guard ends the sequence (unlocks).
        let g = unsafe { ex_state(ex).resume() };
        if let Some(ring) = g.ring.as_ref() {
            let done = g.cur.wrapping_add(u32::from(g.current_valid));
            ring.consumer().store(done, Ordering::Release);
        }
    });
}

/// Reads a field of the current completion during a poll sequence.
fn read<R: Default>(ex: *mut sys::ibv_cq_ex, f: impl FnOnce(&Completion) -> R) -> R {
    value_verb(R::default(), || {
        // SAFETY: read_* are only valid between a successful start_poll and
        // end_poll, which hold the lock.
        let g = held(unsafe { ex_state(ex).resume() });
        f(&g.current)
    })
}

/// `ibv_wc_read_opcode` of the current completion.
///
/// # Safety
///
/// `ex` is a CQ of ours inside the caller's poll sequence (see `next_poll`).
unsafe extern "C" fn read_opcode(ex: *mut sys::ibv_cq_ex) -> sys::ibv_wc_opcode {
    read(ex, |c| c.opcode)
}

/// `ibv_wc_read_vendor_err` of the current completion.
///
/// # Safety
///
/// `ex` is a CQ of ours inside the caller's poll sequence (see `next_poll`).
unsafe extern "C" fn read_vendor_err(ex: *mut sys::ibv_cq_ex) -> u32 {
    read(ex, |c| c.vendor_err)
}

/// `ibv_wc_read_byte_len` of the current completion (set up when the CQ was
/// created with its `IBV_WC_EX_WITH_*` flag).
///
/// # Safety
///
/// `ex` is a CQ of ours inside the caller's poll sequence (see `next_poll`).
unsafe extern "C" fn read_byte_len(ex: *mut sys::ibv_cq_ex) -> u32 {
    read(ex, |c| c.byte_len)
}

/// `ibv_wc_read_imm_data` of the current completion (set up when the CQ was
/// created with its `IBV_WC_EX_WITH_*` flag).
///
/// # Safety
///
/// `ex` is a CQ of ours inside the caller's poll sequence (see `next_poll`).
unsafe extern "C" fn read_imm_data(ex: *mut sys::ibv_cq_ex) -> u32 {
    read(ex, |c| c.ex)
}

/// `ibv_wc_read_qp_num` of the current completion (set up when the CQ was
/// created with its `IBV_WC_EX_WITH_*` flag).
///
/// # Safety
///
/// `ex` is a CQ of ours inside the caller's poll sequence (see `next_poll`).
unsafe extern "C" fn read_qp_num(ex: *mut sys::ibv_cq_ex) -> u32 {
    read(ex, |c| c.qp_num)
}

/// `ibv_wc_read_src_qp` of the current completion (set up when the CQ was
/// created with its `IBV_WC_EX_WITH_*` flag).
///
/// # Safety
///
/// `ex` is a CQ of ours inside the caller's poll sequence (see `next_poll`).
unsafe extern "C" fn read_src_qp(ex: *mut sys::ibv_cq_ex) -> u32 {
    read(ex, |c| c.src_qp)
}

/// `ibv_wc_read_wc_flags` of the current completion.
///
/// # Safety
///
/// `ex` is a CQ of ours inside the caller's poll sequence (see `next_poll`).
unsafe extern "C" fn read_wc_flags(ex: *mut sys::ibv_cq_ex) -> c_uint {
    read(ex, |c| ibv_wc_flags(c.wc_flags))
}

/// `ibv_wc_read_slid` of the current completion (set up when the CQ was
/// created with its `IBV_WC_EX_WITH_*` flag).
///
/// # Safety
///
/// `ex` is a CQ of ours inside the caller's poll sequence (see `next_poll`).
unsafe extern "C" fn read_slid(ex: *mut sys::ibv_cq_ex) -> u32 {
    read(ex, |c| u32::from(c.slid))
}

/// `ibv_wc_read_sl` of the current completion (set up when the CQ was
/// created with its `IBV_WC_EX_WITH_*` flag).
///
/// # Safety
///
/// `ex` is a CQ of ours inside the caller's poll sequence (see `next_poll`).
unsafe extern "C" fn read_sl(ex: *mut sys::ibv_cq_ex) -> u8 {
    read(ex, |c| c.sl)
}

/// `ibv_wc_read_dlid_path_bits` of the current completion (set up when the
/// CQ was created with its `IBV_WC_EX_WITH_*` flag).
///
/// # Safety
///
/// `ex` is a CQ of ours inside the caller's poll sequence (see `next_poll`).
unsafe extern "C" fn read_dlid_path_bits(ex: *mut sys::ibv_cq_ex) -> u8 {
    read(ex, |c| c.dlid_path_bits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wqe::tests::kernel_cqe;

    /// Kernel side: appends a completion.
    fn produce(ring: &mut SharedQueue, wr_id: u64) {
        let p = ring.producer().load(Ordering::Relaxed);
        let c = Completion {
            wr_id,
            byte_len: 8,
            qp_num: 3,
            ..Default::default()
        };
        kernel_cqe(ring.slot_mut(p), &c);
        ring.producer().store(p.wrapping_add(1), Ordering::Release);
    }

    fn fake_cq(elems: u32) -> Box<Cq> {
        let mut cq = Box::new(Cq::new());
        cq.state.get_mut().ring = Some(SharedQueue::for_test(elems, 6));
        cq
    }

    fn ring_of(cq: &mut Cq) -> &mut SharedQueue {
        cq.state.get_mut().ring.as_mut().unwrap()
    }

    #[test]
    fn poll_cq_consumes_in_order() {
        let mut cq = fake_cq(4);
        for i in 0..3 {
            produce(ring_of(&mut cq), i);
        }
        let p = &mut *cq as *mut Cq as *mut sys::ibv_cq;
        // SAFETY: zeroed ibv_wc array.
        let mut wc: [sys::ibv_wc; 2] = unsafe { core::mem::zeroed() };
        // SAFETY: p is a live fake CQ; wc holds 2 entries.
        assert_eq!(unsafe { poll_cq(p, 2, wc.as_mut_ptr()) }, 2);
        assert_eq!((wc[0].wr_id, wc[1].wr_id), (0, 1));
        // SAFETY: as above.
        assert_eq!(unsafe { poll_cq(p, 2, wc.as_mut_ptr()) }, 1);
        assert_eq!(wc[0].wr_id, 2);
        // SAFETY: as above.
        assert_eq!(unsafe { poll_cq(p, 2, wc.as_mut_ptr()) }, 0);
        // SAFETY: negative count.
        assert_eq!(unsafe { poll_cq(p, -1, wc.as_mut_ptr()) }, -1);
        assert_eq!(ring_of(&mut cq).consumer().load(Ordering::Relaxed), 3);
        assert!(!cq.state.is_locked());
    }

    #[test]
    fn resize_adopts_the_new_ring() {
        let mut cq = fake_cq(2);
        produce(ring_of(&mut cq), 1);
        // The kernel copied the pending completion to a larger ring.
        let mut bigger = SharedQueue::for_test(8, 6);
        produce(&mut bigger, 1);
        produce(&mut bigger, 2);
        cq.state.get_mut().replace_ring(bigger);
        let p = &mut *cq as *mut Cq as *mut sys::ibv_cq;
        // SAFETY: zeroed ibv_wc array.
        let mut wc: [sys::ibv_wc; 4] = unsafe { core::mem::zeroed() };
        // SAFETY: p is a live fake CQ; wc holds 4 entries.
        assert_eq!(unsafe { poll_cq(p, 4, wc.as_mut_ptr()) }, 2);
        assert_eq!((wc[0].wr_id, wc[1].wr_id), (1, 2));
        assert_eq!(ring_of(&mut cq).geometry().capacity(), 8);
        assert!(!cq.state.is_locked());
    }

    #[test]
    fn extended_poll_sequence() {
        let mut cq = fake_cq(4);
        let ex = &mut *cq as *mut Cq as *mut sys::ibv_cq_ex;
        // SAFETY: ex is a live fake CQ; the calls follow the start/next/end
        // protocol.
        unsafe {
            assert_eq!(start_poll(ex, core::ptr::null_mut()), ENOENT.0);
            assert!(!(*ex.cast::<Cq>()).state.is_locked());
        }
        for i in 10..13 {
            produce(ring_of(&mut cq), i);
        }
        // SAFETY: as above.
        unsafe {
            assert_eq!(start_poll(ex, core::ptr::null_mut()), 0);
            assert_eq!((*ex).wr_id, 10);
            assert_eq!(read_qp_num(ex), 3);
            assert_eq!(next_poll(ex), 0);
            assert_eq!((*ex).wr_id, 11);
            end_poll(ex);
        }
        assert_eq!(ring_of(&mut cq).consumer().load(Ordering::Relaxed), 2);
        // SAFETY: as above.
        unsafe {
            assert_eq!(start_poll(ex, core::ptr::null_mut()), 0);
            assert_eq!((*ex).wr_id, 12);
            assert_eq!(next_poll(ex), ENOENT.0);
            end_poll(ex);
        }
        assert_eq!(ring_of(&mut cq).consumer().load(Ordering::Relaxed), 3);
        assert!(!cq.state.is_locked());
    }
}
