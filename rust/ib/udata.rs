// SPDX-License-Identifier: GPL-2.0

//! `ib_udata`: the driver-specific part of a uverbs command and response.

use core::marker::PhantomData;
use core::ptr::NonNull;

use kernel::error::to_result;
use kernel::prelude::*;

use crate::sys::bindings;

/// Plain data that may be copied to or from user space byte for byte.
///
/// # Safety
///
/// Implementors are `repr(C)` structs of integers and arrays of integers with
/// no implicit padding (so no uninitialised byte reaches user space) for
/// which every bit pattern is valid.
pub(crate) unsafe trait UserAbi: Copy + Default {}

// SAFETY: uapi structs of `__u32`/`__aligned_u64` fields with explicit
// reserved members and no padding (see include/uapi/rdma/metaroce-abi.h).
unsafe impl UserAbi for bindings::metaroce_create_cq_resp {}
// SAFETY: as above.
unsafe impl UserAbi for bindings::metaroce_create_qp_resp {}
// SAFETY: as above.
unsafe impl UserAbi for bindings::metaroce_create_srq_resp {}
// SAFETY: as above.
unsafe impl UserAbi for bindings::metaroce_create_ah_resp {}
// SAFETY: as above.
unsafe impl UserAbi for bindings::metaroce_resize_cq_resp {}

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
