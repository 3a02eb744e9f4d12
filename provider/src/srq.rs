//! Shared receive queues: create, modify (resize remaps the ring), query,
//! destroy, and post_srq_recv without a system call.

use core::ffi::c_int;
use core::mem::size_of;

use crate::abi::{self, VerbsSrq};
use crate::creating::{Creating, KernelObject};
use crate::errno::{Errno, EINVAL};
use crate::ffi::{int_verb, ptr_verb};
use crate::lock::FfiLock;
use crate::provider::cmd_fd;
use crate::qp::post_recv_list;
use crate::queue::{Mapping, SharedQueue};
use crate::sys;
use crate::wq::RecvQueue;
use crate::wqe::RECV_HDR;

/// Our SRQ; `vsrq` first so `ibv_srq` pointers are `Srq` pointers.
#[repr(C)]
pub(crate) struct Srq {
    vsrq: VerbsSrq,
    rq: FfiLock<Option<RecvQueue>>,
    max_sge: u32,
}

impl Srq {
    fn new() -> Self {
        Srq {
            // SAFETY: VerbsSrq is a plain C struct; zero is its initial state.
            vsrq: unsafe { core::mem::zeroed() },
            rq: FfiLock::new(None),
            max_sge: 0,
        }
    }

    /// Maps the ring of an SRQ the kernel just created with `max_sge`.
    fn attach_ring(
        &mut self,
        fd: c_int,
        mi: &sys::metaroce_mmap_info,
        max_sge: u32,
    ) -> Result<(), Errno> {
        *self.rq.get_mut() = Some(map(fd, mi, max_sge)?);
        self.max_sge = max_sge;
        Ok(())
    }
}

impl KernelObject for Srq {
    unsafe fn destroy_in_kernel(srq: *mut Srq) {
        // SAFETY: per the caller, an SRQ the kernel created; its ibv_srq is
        // at offset 0 (repr(C), first fields).
        unsafe { abi::ibv_cmd_destroy_srq(srq.cast::<sys::ibv_srq>()) };
    }
}

/// The provider-owned parts of an SRQ (field borrows only; the `ibv_srq`
/// part belongs to libibverbs).
struct SrqView<'a> {
    rq: &'a FfiLock<Option<RecvQueue>>,
    max_sge: u32,
}

/// # Safety
///
/// `ibsrq` must be a live SRQ of this provider.
unsafe fn srq_ref<'a>(ibsrq: *mut sys::ibv_srq) -> SrqView<'a> {
    let s = ibsrq.cast::<Srq>();
    // SAFETY: per the caller; max_sge is fixed after creation.
    unsafe {
        SrqView {
            rq: &(*s).rq,
            max_sge: (*s).max_sge,
        }
    }
}

fn map(fd: c_int, mi: &sys::metaroce_mmap_info, max_sge: u32) -> Result<RecvQueue, Errno> {
    let ring = SharedQueue::new(Mapping::map(fd, mi)?, RECV_HDR)?;
    Ok(RecvQueue::new(ring, max_sge))
}

/// `ibv_create_srq`.
///
/// # Safety
///
/// `pd` is NULL (refused) or one of our PDs, and `attr` NULL (refused) or a
/// valid, writable `ibv_srq_init_attr` (the granted limits are written
/// back).
pub(crate) unsafe extern "C" fn create_srq(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_srq_init_attr,
) -> *mut sys::ibv_srq {
    ptr_verb(|| {
        if pd.is_null() || attr.is_null() {
            return Err(EINVAL);
        }
        let mut srq = Creating::new(Srq::new());
        let mut cmd = abi::CmdCreateSrq::new();
        let mut resp = abi::CreateSrqResp::new();
        // SAFETY: ibv_cmd_create_srq creates the SRQ it is given (ours, its
        // ibv_srq first) or fails; buffers of the sizes given.
        unsafe {
            srq.create_in_kernel(|srq| {
                abi::ibv_cmd_create_srq(
                    pd,
                    srq.cast::<sys::ibv_srq>(),
                    attr,
                    &mut cmd,
                    size_of::<abi::CmdCreateSrq>(),
                    &mut resp.ibv_resp,
                    size_of::<abi::CreateSrqResp>(),
                )
            })
        }?;
        // SAFETY: attr now holds the granted limits; pd's context is live.
        let (max_sge, fd) = unsafe { ((*attr).attr.max_sge, cmd_fd((*pd).context)) };
        srq.get_mut().attach_ring(fd, &resp.drv.mi, max_sge)?;
        Ok(srq.finish().cast::<sys::ibv_srq>())
    })
}

/// `ibv_modify_srq` (a new size remaps the ring).
///
/// # Safety
///
/// `ibsrq` is an SRQ of ours, not destroyed, and `attr` valid for the fields
/// `mask` names.
pub(crate) unsafe extern "C" fn modify_srq(
    ibsrq: *mut sys::ibv_srq,
    attr: *mut sys::ibv_srq_attr,
    mask: c_int,
) -> c_int {
    int_verb(|| {
        // SAFETY: one of our SRQs.
        let srq = unsafe { srq_ref(ibsrq) };
        let mut g = srq.rq.lock();
        // SAFETY: zero is a valid mmap_info for the kernel to overwrite.
        let mut mi: sys::metaroce_mmap_info = unsafe { core::mem::zeroed() };
        let mut cmd = abi::MetaroceModifySrq {
            ibv_cmd: abi::CmdModifySrq::new(),
            drv: sys::metaroce_modify_srq_cmd {
                mmap_info_addr: &mut mi as *mut sys::metaroce_mmap_info as u64,
            },
        };
        // SAFETY: live SRQ; the command is core + driver part, its full size
        // passed; `mi` outlives the call.
        Errno::check(unsafe {
            abi::ibv_cmd_modify_srq(
                ibsrq,
                attr,
                mask,
                &mut cmd.ibv_cmd,
                size_of::<abi::MetaroceModifySrq>(),
            )
        })?;
        if mask as u32 & sys::ibv_srq_attr_mask_IBV_SRQ_MAX_WR != 0 && mi.size != 0 {
            // SAFETY: the SRQ's context is live.
            let fd = unsafe { cmd_fd((*ibsrq).context) };
            let rq = map(fd, &mi, srq.max_sge)?;
            *g = Some(rq);
        }
        Ok(())
    })
}

/// `ibv_query_srq`.
///
/// # Safety
///
/// `ibsrq` is an SRQ of ours and `attr` writable.
pub(crate) unsafe extern "C" fn query_srq(
    ibsrq: *mut sys::ibv_srq,
    attr: *mut sys::ibv_srq_attr,
) -> c_int {
    int_verb(|| {
        let mut cmd = abi::CmdQuerySrq::new();
        // SAFETY: passthrough; the command buffer is ours.
        Errno::check(unsafe {
            abi::ibv_cmd_query_srq(ibsrq, attr, &mut cmd, size_of::<abi::CmdQuerySrq>())
        })
    })
}

/// `ibv_destroy_srq`.
///
/// # Safety
///
/// `ibsrq` is an SRQ of ours, not destroyed, with no other call on it
/// running; once this succeeds libibverbs does not use it again.
pub(crate) unsafe extern "C" fn destroy_srq(ibsrq: *mut sys::ibv_srq) -> c_int {
    int_verb(|| {
        // SAFETY: one of our SRQs.
        Errno::check(unsafe { abi::ibv_cmd_destroy_srq(ibsrq) })?;
        // SAFETY: destroyed in the kernel; the Box of create_srq (Creating)
        // is released once.
        drop(unsafe { Box::from_raw(ibsrq.cast::<Srq>()) });
        Ok(())
    })
}

/// `ibv_post_srq_recv`, without a system call.
///
/// # Safety
///
/// `ibsrq` is an SRQ of ours; `wr` is NULL or a list of valid receive
/// requests (each SGE array `num_sge` long); `bad_wr` is NULL (refused) or
/// writable.
pub(crate) unsafe extern "C" fn post_srq_recv(
    ibsrq: *mut sys::ibv_srq,
    wr: *mut sys::ibv_recv_wr,
    bad_wr: *mut *mut sys::ibv_recv_wr,
) -> c_int {
    int_verb(|| {
        if bad_wr.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: the application's out pointer.
        unsafe { *bad_wr = core::ptr::null_mut() };
        // SAFETY: one of our SRQs.
        let srq = unsafe { srq_ref(ibsrq) };
        let mut g = srq.rq.lock();
        let rq = g.as_mut().ok_or(EINVAL)?;
        // SAFETY: the application's WR list and out pointer.
        unsafe { post_recv_list(rq, wr, bad_wr) }
    })
}
