// SPDX-License-Identifier: GPL-2.0

//! `rdma link add NAME type TYPE netdev DEV`: the rdma link-type registration.

use core::marker::PhantomData;
use core::pin::Pin;

use kernel::error::from_result;
use kernel::prelude::*;
use kernel::types::Opaque;

use super::netdev::NetDevice;
use super::sys::bindings;

/// What a link type implements.
pub(crate) trait LinkType {
    /// The type string of `rdma link add ... type <TYPE>`.
    const TYPE: &'static CStr;
    /// Creates device `name` bound to `ndev`. Runs in process context.
    fn newlink(name: &CStr, ndev: &NetDevice) -> Result;
}

/// A registered link type; unregistered on drop.
///
/// # Invariants
///
/// `ops` is registered with the RDMA core and pinned until `drop`.
pub(crate) struct LinkRegistration<T: LinkType> {
    ops: Pin<KBox<Opaque<bindings::rdma_link_ops>>>,
    _type: PhantomData<T>,
}

// SAFETY: after registration only the core touches `ops`, under its own lock.
unsafe impl<T: LinkType> Send for LinkRegistration<T> {}
// SAFETY: as above; `&LinkRegistration` exposes nothing.
unsafe impl<T: LinkType> Sync for LinkRegistration<T> {}

impl<T: LinkType> LinkRegistration<T> {
    /// Registers link type `T::TYPE`.
    pub(crate) fn register() -> Result<Self> {
        let ops = KBox::pin(
            Opaque::new(bindings::rdma_link_ops {
                type_: T::TYPE.as_char_ptr(),
                newlink: Some(Self::newlink),
                ..Default::default()
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: `ops` is pinned and outlives the registration; `type_`
        // points to a static string.
        unsafe { bindings::rdma_link_register(ops.get()) };
        Ok(Self {
            ops,
            _type: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Called by the core (nldev) with a valid name and a held net_device.
    unsafe extern "C" fn newlink(
        name: *const kernel::ffi::c_char,
        ndev: *mut bindings::net_device,
    ) -> kernel::ffi::c_int {
        from_result(|| {
            // SAFETY: nldev passes a NUL-terminated name and holds `ndev`
            // for the duration of the call.
            let (name, ndev) = unsafe { (CStr::from_char_ptr(name), NetDevice::from_raw(ndev)) };
            T::newlink(name, ndev)?;
            Ok(0)
        })
    }
}

impl<T: LinkType> Drop for LinkRegistration<T> {
    fn drop(&mut self) {
        // SAFETY: registered in `register` (invariant).
        unsafe { bindings::rdma_link_unregister(self.ops.get()) };
    }
}
