// SPDX-License-Identifier: GPL-2.0

//! `ib_udata`: the driver-specific part of a uverbs command and response.

use core::marker::PhantomData;
use core::ptr::NonNull;

use kernel::error::to_result;
use kernel::prelude::*;

use super::sys::bindings;

/// Plain data that may be copied to or from user space byte for byte.
///
/// # Safety
///
/// Implementors are `repr(C)` structs of integers and arrays of integers with
/// no implicit padding (so no uninitialised byte reaches user space) for
/// which every bit pattern is valid.
pub(crate) unsafe trait UserAbi: Copy + Default {}

/// `create_cq`'s answer to user space (`struct metaroce_create_cq_resp`,
/// include/uapi/rdma/metaroce-abi.h): where the CQ ring is mapped.
pub(crate) type CreateCqResp = bindings::metaroce_create_cq_resp;
/// `create_qp`'s answer (`struct metaroce_create_qp_resp`): where the send
/// and receive rings are mapped.
pub(crate) type CreateQpResp = bindings::metaroce_create_qp_resp;
/// `create_srq`'s answer (`struct metaroce_create_srq_resp`): where the ring
/// is mapped, and the SRQ's number.
pub(crate) type CreateSrqResp = bindings::metaroce_create_srq_resp;
/// `create_ah`'s answer (`struct metaroce_create_ah_resp`): the AH's number.
pub(crate) type CreateAhResp = bindings::metaroce_create_ah_resp;
/// `resize_cq`'s answer (`struct metaroce_resize_cq_resp`): where the new
/// ring is mapped.
pub(crate) type ResizeCqResp = bindings::metaroce_resize_cq_resp;

// SAFETY: uapi structs of `__u32`/`__aligned_u64` fields with explicit
// reserved members and no padding (see include/uapi/rdma/metaroce-abi.h).
unsafe impl UserAbi for CreateCqResp {}
// SAFETY: as above.
unsafe impl UserAbi for CreateQpResp {}
// SAFETY: as above.
unsafe impl UserAbi for CreateSrqResp {}
// SAFETY: as above.
unsafe impl UserAbi for CreateAhResp {}
// SAFETY: as above.
unsafe impl UserAbi for ResizeCqResp {}

/// The user-space side of one verb call.
///
/// # Invariants
///
/// `ptr` points to the core's `ib_udata` for the current call, valid for `'a`.
pub(crate) struct Udata<'a> {
    ptr: NonNull<bindings::ib_udata>,
    _call: PhantomData<&'a mut bindings::ib_udata>,
}

impl<'a> Udata<'a> {
    /// Wraps the udata of a call; `None` for calls from the kernel.
    ///
    /// # Safety
    ///
    /// `ptr` is NULL or the core's udata for a call that lasts for `'a`.
    pub(crate) unsafe fn from_raw(ptr: *mut bindings::ib_udata) -> Option<Self> {
        NonNull::new(ptr).map(|ptr| Self {
            ptr,
            _call: PhantomData,
        })
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::ib_udata {
        self.ptr.as_ptr()
    }

    /// Bytes of driver output the caller has room for.
    pub(crate) fn outlen(&self) -> usize {
        // SAFETY: valid for the call (invariant).
        unsafe { (*self.as_raw()).outlen }
    }

    /// Writes the driver response; `EINVAL` if the caller left no room for it.
    pub(crate) fn respond<T: UserAbi>(&self, resp: &T) -> Result {
        let len = core::mem::size_of::<T>();
        if self.outlen() < len {
            return Err(EINVAL);
        }
        // SAFETY: `resp` is `len` readable bytes with no padding (`UserAbi`);
        // the helper copies to the user buffer and reports faults.
        to_result(unsafe {
            bindings::metaroce_helper_copy_to_udata(self.as_raw(), (resp as *const T).cast(), len)
        })
    }

    /// The user context the call was made in.
    pub(crate) fn ucontext_raw(&self) -> *mut bindings::ib_ucontext {
        // SAFETY: a driver udata is always embedded in a uverbs attribute
        // bundle, which the helper reads the context from.
        unsafe { bindings::metaroce_helper_udata_ucontext(self.as_raw()) }
    }
}
