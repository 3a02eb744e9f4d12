// SPDX-License-Identifier: GPL-2.0

//! Network devices and netdevice notifier events.

use core::marker::PhantomData;
use core::pin::Pin;

use kernel::error::to_result;
use kernel::prelude::*;
use kernel::types::Opaque;

use super::ip::IpAddr;
use super::skb::Ipv4Addr;
use super::sys::bindings;

/// A network device borrowed from the caller (the RDMA core or a notifier).
///
/// # Invariants
///
/// The wrapped `net_device` is alive for the lifetime of every `&NetDevice`.
#[repr(transparent)]
pub(crate) struct NetDevice(Opaque<bindings::net_device>);

impl NetDevice {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a live `net_device` that stays alive (the caller
    /// holds a reference or the RTNL) for the lifetime `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::net_device) -> &'a Self {
        // SAFETY: `NetDevice` is a transparent wrapper of `net_device`, and the
        // caller guarantees the pointee outlives `'a`.
        unsafe { &*ptr.cast() }
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    /// The interface name, e.g. `enp0s3`.
    pub(crate) fn name(&self) -> &CStr {
        // SAFETY: `name` is a NUL-terminated array inside a live net_device
        // (type invariant); the core never leaves it unterminated.
        unsafe { CStr::from_char_ptr((*self.as_raw()).name.as_ptr()) }
    }

    /// Whether the link layer is Ethernet (ARPHRD_ETHER).
    pub(crate) fn is_ethernet(&self) -> bool {
        // SAFETY: reading a plain field of a live net_device (type invariant).
        unsafe { u32::from((*self.as_raw()).type_) == bindings::ARPHRD_ETHER }
    }

    /// The interface index.
    pub(crate) fn ifindex(&self) -> i32 {
        // SAFETY: reading a plain field of a live net_device (type invariant).
        unsafe { (*self.as_raw()).ifindex }
    }

    /// The MTU in bytes.
    pub(crate) fn mtu(&self) -> u32 {
        // SAFETY: reading a plain field of a live net_device (type invariant).
        unsafe { (*self.as_raw()).mtu }
    }

    /// The permanent hardware (MAC) address.
    pub(crate) fn mac(&self) -> [u8; 6] {
        let mut mac = [0u8; 6];
        // SAFETY: `dev_addr` points to at least `addr_len` >= 6 bytes for an
        // Ethernet device, and the device is alive (type invariant). Callers
        // check `is_ethernet` before asking.
        unsafe {
            let addr = (*self.as_raw()).dev_addr;
            if !addr.is_null() && (*self.as_raw()).addr_len >= 6 {
                core::ptr::copy_nonoverlapping(addr, mac.as_mut_ptr(), 6);
            }
        }
        mac
    }

    /// A counted reference to this device.
    pub(crate) fn hold(&self) -> NetDeviceRef {
        // SAFETY: the device is alive (type invariant); `dev_hold` takes the
        // reference the new `NetDeviceRef` owns.
        unsafe { bindings::metaroce_helper_dev_hold(self.as_raw()) };
        NetDeviceRef { ptr: self.as_raw() }
    }

    /// The device's primary IPv4 address (global scope), if it has one.
    /// Any context.
    pub(crate) fn ipv4_addr(&self) -> Option<Ipv4Addr> {
        // SAFETY: the device is alive (type invariant); the helper reads its
        // address list under RCU and returns a `__be32` (0 if none).
        let be = unsafe { bindings::metaroce_helper_netdev_ipv4(self.as_raw()) };
        (be != 0).then(|| Ipv4Addr(be.to_ne_bytes()))
    }

    /// An IPv6 address of the device that is usable and preferred (not
    /// tentative, failed or deprecated): link-local
    /// (`fe80::/10`) if `link_local`, else one of global scope (ULAs
    /// included). Any context.
    pub(crate) fn ipv6_addr(&self, link_local: bool) -> Option<IpAddr> {
        let mut out = bindings::in6_addr::default();
        // SAFETY: the device is alive (type invariant); the helper walks its
        // IPv6 address list under RCU and writes `out` only when it found
        // one.
        let found =
            unsafe { bindings::metaroce_helper_netdev_ipv6(self.as_raw(), link_local, &mut out) };
        // SAFETY: every bit pattern of the union is a valid byte array.
        found.then(|| IpAddr(unsafe { out.in6_u.u6_addr8 }))
    }

    /// Whether the device is administratively up and has carrier.
    pub(crate) fn is_running_with_carrier(&self) -> bool {
        // SAFETY: the helpers only read flags of a live net_device.
        unsafe {
            bindings::metaroce_helper_netif_running(self.as_raw())
                && bindings::metaroce_helper_netif_carrier_ok(self.as_raw())
        }
    }

    /// The link speed its driver reports to ethtool, in Mbit/s; `None`
    /// when it reports none (`SPEED_UNKNOWN`, as virtio-net does unless
    /// the hypervisor or `ethtool -s` gave it one) or has no ethtool
    /// link settings. The driver's callback may sleep: process context.
    pub(crate) fn link_speed_mbps(&self, _rtnl: &Rtnl) -> Option<u32> {
        let mut ks = bindings::ethtool_link_ksettings::default();
        // SAFETY: the device is alive (type invariant), the RTNL is held
        // (`Rtnl`'s invariant) as the call asserts, and `ks` is a valid
        // out-parameter for it.
        let rc = unsafe { bindings::__ethtool_get_link_ksettings(self.as_raw(), &mut ks) };
        let speed = ks.base.speed;
        (rc == 0 && speed != 0 && speed != bindings::SPEED_UNKNOWN as u32).then_some(speed)
    }
}

/// Proof that this thread holds the RTNL (the networking core's mutex),
/// which some netdev calls require.
///
/// # Invariants
///
/// A `Rtnl` exists only while the RTNL is held: made by [`Rtnl::with`],
/// which holds it for the value's whole life (the value is only lent), or
/// for a netdevice notifier's call, which runs under it. Not `Send`.
pub(crate) struct Rtnl(PhantomData<*mut ()>);

impl Rtnl {
    /// Runs `f` with the RTNL held. Process context, and not already
    /// under the RTNL (a netdevice notifier has its own `Rtnl`): the call
    /// sleeps until the mutex is free.
    pub(crate) fn with<R>(f: impl FnOnce(&Rtnl) -> R) -> R {
        // SAFETY: takes the mutex; the caller is in process context.
        unsafe { bindings::rtnl_lock() };
        let r = f(&Rtnl(PhantomData));
        // SAFETY: taken above; the `Rtnl` lent to `f` is gone.
        unsafe { bindings::rtnl_unlock() };
        r
    }
}

/// A counted reference to a network device, dropped with `dev_put`.
///
/// # Invariants
///
/// `ptr` is a live `net_device` on which this object owns one reference.
pub(crate) struct NetDeviceRef {
    ptr: *mut bindings::net_device,
}

impl NetDeviceRef {
    /// Takes over a reference the caller already holds.
    ///
    /// # Safety
    ///
    /// `ptr` must be non-null and the caller must own one reference on it
    /// (from `dev_hold` or a getter that returns a held device).
    pub(crate) unsafe fn from_held(ptr: *mut bindings::net_device) -> Self {
        Self { ptr }
    }
}

// SAFETY: a held reference may be used and released (`dev_put`) from any
// context and thread.
unsafe impl Send for NetDeviceRef {}
// SAFETY: `&NetDeviceRef` only gives `&NetDevice`, whose accessors read.
unsafe impl Sync for NetDeviceRef {}

impl core::ops::Deref for NetDeviceRef {
    type Target = NetDevice;

    fn deref(&self) -> &NetDevice {
        // SAFETY: we own a reference, so the device is alive while `self` is.
        unsafe { NetDevice::from_raw(self.ptr) }
    }
}

impl Drop for NetDeviceRef {
    fn drop(&mut self) {
        // SAFETY: we own exactly one reference (type invariant).
        unsafe { bindings::metaroce_helper_dev_put(self.ptr) }
    }
}

/// A netdevice notifier event the driver reacts to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum NetdevEvent {
    /// The device came up.
    Up,
    /// The device went down.
    Down,
    /// Carrier or other state changed.
    Change,
    /// The device is being unregistered.
    Unregister,
    /// The MTU changed.
    ChangeMtu,
}

impl NetdevEvent {
    fn from_raw(event: kernel::ffi::c_ulong) -> Option<Self> {
        let event = u32::try_from(event).ok()?;
        Some(match event {
            bindings::netdev_cmd_NETDEV_UP => Self::Up,
            bindings::netdev_cmd_NETDEV_DOWN => Self::Down,
            bindings::netdev_cmd_NETDEV_CHANGE => Self::Change,
            bindings::netdev_cmd_NETDEV_UNREGISTER => Self::Unregister,
            bindings::netdev_cmd_NETDEV_CHANGEMTU => Self::ChangeMtu,
            _ => return None,
        })
    }
}

/// What a netdevice notifier handler implements.
pub(crate) trait NetdevHandler {
    /// Called with the RTNL held (`rtnl`), in process context.
    fn event(event: NetdevEvent, ndev: &NetDevice, rtnl: &Rtnl);
}

/// A registered netdevice notifier; unregistered on drop.
///
/// # Invariants
///
/// `nb` is registered with the netdevice notifier chain and pinned in memory
/// until `drop` unregisters it.
pub(crate) struct NetdevNotifier<T: NetdevHandler> {
    nb: Pin<KBox<Opaque<bindings::notifier_block>>>,
    _handler: PhantomData<T>,
}

// SAFETY: the notifier block is only touched by the notifier core under the
// RTNL after registration; the handle itself carries no thread-bound state.
unsafe impl<T: NetdevHandler> Send for NetdevNotifier<T> {}
// SAFETY: as above, `&NetdevNotifier` exposes nothing.
unsafe impl<T: NetdevHandler> Sync for NetdevNotifier<T> {}

impl<T: NetdevHandler> NetdevNotifier<T> {
    /// Registers `T` for netdevice events.
    pub(crate) fn register() -> Result<Self> {
        let nb = KBox::pin(
            Opaque::new(bindings::notifier_block {
                notifier_call: Some(Self::notifier_call),
                ..Default::default()
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: `nb` is a valid, pinned notifier block that outlives the
        // registration (unregistered in `drop` before it is freed).
        to_result(unsafe { bindings::register_netdevice_notifier(nb.get()) })?;
        Ok(Self {
            nb,
            _handler: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Called by the notifier chain with `ptr` a `netdev_notifier_info` whose
    /// `dev` is a live net_device, under the RTNL.
    unsafe extern "C" fn notifier_call(
        _nb: *mut bindings::notifier_block,
        event: kernel::ffi::c_ulong,
        ptr: *mut kernel::ffi::c_void,
    ) -> kernel::ffi::c_int {
        let Some(event) = NetdevEvent::from_raw(event) else {
            return bindings::NOTIFY_DONE as kernel::ffi::c_int;
        };
        let info = ptr.cast::<bindings::netdev_notifier_info>();
        // SAFETY: for netdevice notifiers `ptr` is a `netdev_notifier_info`
        // (see `netdev_notifier_info_to_dev`), valid for this call.
        let dev = unsafe { (*info).dev };
        if dev.is_null() {
            return bindings::NOTIFY_DONE as kernel::ffi::c_int;
        }
        // The chain is called under the RTNL (`Rtnl`'s invariant).
        let rtnl = Rtnl(PhantomData);
        // SAFETY: the notifier chain holds the device alive for this call.
        T::event(event, unsafe { NetDevice::from_raw(dev) }, &rtnl);
        bindings::NOTIFY_OK as kernel::ffi::c_int
    }
}

impl<T: NetdevHandler> Drop for NetdevNotifier<T> {
    fn drop(&mut self) {
        // SAFETY: `nb` was registered in `register` (type invariant).
        unsafe { bindings::unregister_netdevice_notifier(self.nb.get()) };
    }
}
