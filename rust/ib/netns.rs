// SPDX-License-Identifier: GPL-2.0

//! Network namespaces: a borrowed `struct net`, the lookups the driver does
//! in one, and a registration for being told when one goes away.

use core::marker::PhantomData;
use core::pin::Pin;

use kernel::error::to_result;
use kernel::prelude::*;
use kernel::types::Opaque;

use super::netdev::{NetDevice, NetDeviceRef};
use super::sys::bindings;

/// A network namespace, borrowed.
///
/// # Invariants
///
/// The wrapped `net` is alive (its exit methods have not all run) for the
/// lifetime of every `&Net`.
#[repr(transparent)]
pub(crate) struct Net(Opaque<bindings::net>);

impl Net {
    /// # Safety
    ///
    /// `ptr` must point to a live `net` that stays alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::net) -> &'a Self {
        // SAFETY: `Net` is a transparent wrapper of `net`; the caller
        // guarantees the pointee outlives `'a`.
        unsafe { &*ptr.cast() }
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::net {
        self.0.get()
    }

    /// The initial namespace, which lives as long as the kernel.
    pub(crate) fn init() -> &'static Self {
        // SAFETY: `init_net` is a static that is never torn down; taking its
        // address reads nothing.
        unsafe { Self::from_raw(core::ptr::addr_of_mut!(bindings::init_net)) }
    }

    /// Whether this is the initial namespace.
    pub(crate) fn is_init(&self) -> bool {
        self == Self::init()
    }

    /// The namespace's inode number: what `ls -l /proc/PID/ns/net` shows
    /// as `net:[N]`, unique among live namespaces (for log lines).
    pub(crate) fn inum(&self) -> u32 {
        // SAFETY: reading a plain field, set at creation, of a live `net`
        // (type invariant).
        unsafe { (*self.as_raw()).ns.inum }
    }

    /// The network device of this namespace with index `ifindex`, held.
    /// Any context.
    pub(crate) fn netdev_by_index(&self, ifindex: i32) -> Option<NetDeviceRef> {
        // SAFETY: the namespace is alive (type invariant); the lookup runs
        // under RCU and returns the device held, or NULL.
        let ptr = unsafe { bindings::dev_get_by_index(self.as_raw(), ifindex) };
        // SAFETY: non-null and held by the lookup.
        (!ptr.is_null()).then(|| unsafe { NetDeviceRef::from_held(ptr) })
    }
}

/// The same namespace.
impl PartialEq for Net {
    fn eq(&self, other: &Self) -> bool {
        self.as_raw() == other.as_raw()
    }
}

impl Eq for Net {}

impl NetDevice {
    /// The namespace the device is in now. A registered device's namespace
    /// outlives it: a namespace going away first moves or unregisters its
    /// devices and waits until each one's last reference is gone.
    pub(crate) fn net(&self) -> &Net {
        // SAFETY: the device is alive (type invariant of `NetDevice`); the
        // helper reads its namespace pointer.
        let net = unsafe { bindings::metaroce_helper_dev_net(self.as_raw()) };
        // SAFETY: see the function's comment: the namespace outlives the
        // borrowed device.
        unsafe { Net::from_raw(net) }
    }
}

/// What a [`PernetRegistration`] calls.
pub(crate) trait PernetHandler {
    /// `net` is going away: its devices are already unregistered or moved
    /// out, and it is alive until this returns. Process context (may
    /// sleep). Also called for every namespace, `init_net` included, when
    /// the registration is dropped.
    fn exit(net: &Net);
}

/// Per-namespace operations (`register_pernet_subsys`) with an exit
/// method only; unregistered on drop.
///
/// A subsystem's exit runs after every device's (the network devices of
/// the namespace are gone by then), which is the order `T` relies on.
///
/// # Invariants
///
/// `ops` is registered and pinned until `drop` unregisters it.
pub(crate) struct PernetRegistration<T: PernetHandler> {
    ops: Pin<KBox<Opaque<bindings::pernet_operations>>>,
    _handler: PhantomData<T>,
}

// SAFETY: after registration only the namespace core reads `ops`, under its
// own lock; the handle carries no thread-bound state.
unsafe impl<T: PernetHandler> Send for PernetRegistration<T> {}
// SAFETY: as above; `&PernetRegistration` exposes nothing.
unsafe impl<T: PernetHandler> Sync for PernetRegistration<T> {}

impl<T: PernetHandler> PernetRegistration<T> {
    /// Registers `T`. Process context.
    pub(crate) fn register() -> Result<Self> {
        let ops = KBox::pin(
            Opaque::new(bindings::pernet_operations {
                exit: Some(Self::exit),
                ..Default::default()
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: `ops` is pinned and outlives the registration (unregistered
        // in `drop` before it is freed); it has no `id`/`size`, so the core
        // allocates nothing per namespace for it.
        to_result(unsafe { bindings::register_pernet_subsys(ops.get()) })?;
        Ok(Self {
            ops,
            _handler: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Called by the namespace core with a namespace that stays alive for
    /// the call.
    unsafe extern "C" fn exit(net: *mut bindings::net) {
        if net.is_null() {
            return;
        }
        // SAFETY: alive for this call (see above).
        T::exit(unsafe { Net::from_raw(net) });
    }
}

impl<T: PernetHandler> Drop for PernetRegistration<T> {
    fn drop(&mut self) {
        // SAFETY: registered in `register` (type invariant); this calls the
        // exit method for every namespace and then forgets `ops`.
        unsafe { bindings::unregister_pernet_subsys(self.ops.get()) };
    }
}
