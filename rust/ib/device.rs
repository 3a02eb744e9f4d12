// SPDX-License-Identifier: GPL-2.0

//! `ib_device`: allocation, the ops table built from the [`IbDriver`] trait,
//! registration with the RDMA core, lookup and unregistration.

use core::marker::PhantomData;
use core::ptr::NonNull;

use kernel::error::{from_result, to_result};
use kernel::prelude::*;
use kernel::types::Opaque;

use super::netdev::{NetDevice, NetDeviceRef};
use super::sys::bindings;
use super::types::{AccessFlags, CqNotifyFlags, MwType};
use super::udata::Udata;
use super::verbs::{
    Ah, AhAttr, Cq, CqInitAttr, KernelRecvWr, KernelSendWr, Mr, Mw, Pd, Qp, QpAttr, QpInit,
    QpInitAttr, QpModify, Srq, SrqAttr, SrqInitAttr, SrqModify, Wc,
};

/// Device attributes reported by `query_device` (the core's `ib_device_attr`).
pub(crate) type DeviceAttr = bindings::ib_device_attr;
/// Port attributes reported by `query_port` (the core's `ib_port_attr`).
pub(crate) type PortAttr = bindings::ib_port_attr;
/// Port properties fixed at registration (the core's `ib_port_immutable`).
pub(crate) type PortImmutable = bindings::ib_port_immutable;

/// `device_cap_flags` of `query_device` (`enum ib_device_cap_flags`): a
/// set of what the device offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DeviceCaps(bindings::ib_device_cap_flags);

impl DeviceCaps {
    /// `IB_DEVICE_SYS_IMAGE_GUID`: `sys_image_guid` is set.
    pub(crate) const SYS_IMAGE_GUID: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID);
    /// `IB_DEVICE_RC_RNR_NAK_GEN`.
    pub(crate) const RC_RNR_NAK_GEN: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN);
    /// `IB_DEVICE_SRQ_RESIZE`.
    pub(crate) const SRQ_RESIZE: Self = Self(bindings::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE);
    /// `IB_DEVICE_MEM_WINDOW`: memory windows.
    pub(crate) const MEM_WINDOW: Self = Self(bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW);
    /// `IB_DEVICE_MEM_MGT_EXTENSIONS`: fast registration and local
    /// invalidation.
    pub(crate) const MEM_MGT_EXTENSIONS: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS);
    /// `IB_DEVICE_ATOMIC_WRITE`.
    pub(crate) const ATOMIC_WRITE: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE);

    /// Both sets' flags.
    pub(crate) const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

impl DeviceAttr {
    /// Reports the device capabilities `caps`.
    pub(crate) fn set_caps(&mut self, caps: DeviceCaps) {
        self.device_cap_flags = caps.0 as u64;
    }

    /// Reports that the device can be unregistered while processes use it
    /// (`IBK_ALLOW_USER_UNREG`), the only kernel capability it has.
    pub(crate) fn set_user_unregister(&mut self) {
        self.kernel_cap_flags = bindings::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG as u64;
    }

    /// Reports atomics that are atomic among all the device runs
    /// (`IB_ATOMIC_HCA`).
    pub(crate) fn set_atomics_hca(&mut self) {
        self.atomic_cap = bindings::ib_atomic_cap_IB_ATOMIC_HCA;
    }
}

/// Whether a port carries packets: its `ib_port_state` and
/// `ib_port_phys_state` together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortState {
    /// `IB_PORT_DOWN`, physically `IB_PORT_PHYS_STATE_DISABLED`.
    Down,
    /// `IB_PORT_ACTIVE`, physically `IB_PORT_PHYS_STATE_LINK_UP`.
    Active,
}

impl PortAttr {
    /// Reports the port's state.
    pub(crate) fn set_state(&mut self, state: PortState) {
        let (s, phys) = match state {
            PortState::Down => (
                bindings::ib_port_state_IB_PORT_DOWN,
                bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED,
            ),
            PortState::Active => (
                bindings::ib_port_state_IB_PORT_ACTIVE,
                bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP,
            ),
        };
        self.state = s;
        self.phys_state = phys as u8;
    }
}

impl PortImmutable {
    /// A RoCE v2 port (`RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP`) whose MADs are
    /// `IB_MGMT_MAD_SIZE` bytes.
    pub(crate) fn set_roce_v2(&mut self) {
        self.core_cap_flags = bindings::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
        self.max_mad_size = bindings::IB_MGMT_MAD_SIZE as u32;
    }
}

/// The driver id the core tells our devices apart by (in
/// `ib_device_get_by_netdev` and `ib_unregister_driver`), and user space
/// matches the provider by. Not `RDMA_DRIVER_UNKNOWN`: the core's lookups
/// treat that as "any driver". See `include/uapi/rdma/metaroce-abi.h`.
const DRIVER_ID: bindings::rdma_driver_id = bindings::METAROCE_DRIVER_ID;

/// The verbs a driver implements; the adapters (here and in `verbs`) turn
/// them into `ib_device_ops`.
pub(crate) trait IbDriver: Sized {
    /// Driver state carried by every device, after the `ib_device`.
    type Data: Send + Sync;
    /// Driver state of a user context.
    type Ucontext: Send + Sync;
    /// Driver state of a protection domain.
    type Pd: Send + Sync;
    /// Driver state of an address handle.
    type Ah: Send + Sync;
    /// Driver state of a completion queue.
    type Cq: Send + Sync;
    /// Driver state of a shared receive queue.
    type Srq: Send + Sync;
    /// Driver state of a queue pair.
    type Qp: Send + Sync;
    /// Driver state of a memory region.
    type Mr: Send + Sync;
    /// Driver state of a memory window.
    type Mw: Send + Sync;

    /// Fills the device attributes.
    fn query_device(dev: &Device<Self::Data>, attr: &mut DeviceAttr) -> Result;
    /// Fills the attributes of `port` (the core has zeroed `attr`).
    fn query_port(dev: &Device<Self::Data>, port: u32, attr: &mut PortAttr) -> Result;
    /// Fills the immutable properties of `port`.
    fn get_port_immutable(dev: &Device<Self::Data>, port: u32, imm: &mut PortImmutable) -> Result;
    /// Returns the P_Key at `index` of `port`.
    fn query_pkey(dev: &Device<Self::Data>, port: u32, index: u16) -> Result<u16>;

    /// A process opened the device.
    fn alloc_ucontext(dev: &Device<Self::Data>, udata: &Udata<'_>) -> Result<Self::Ucontext>;
    /// Creates a protection domain.
    fn alloc_pd(dev: &Device<Self::Data>, udata: Option<&Udata<'_>>) -> Result<Self::Pd>;
    /// Creates an address handle in the PD at `pd_addr`.
    fn create_ah(
        dev: &Device<Self::Data>,
        pd_addr: usize,
        attr: &AhAttr,
        udata: Option<&Udata<'_>>,
    ) -> Result<Self::Ah>;
    /// The AH is about to be destroyed (its data is dropped right after).
    fn destroy_ah(dev: &Device<Self::Data>, ah: &Ah<Self::Ah>);
    /// Creates a completion queue.
    fn create_cq(
        dev: &Device<Self::Data>,
        attr: &CqInitAttr,
        udata: Option<&Udata<'_>>,
    ) -> Result<Self::Cq>;
    /// How many completions the CQ holds (reported to the consumer).
    fn cq_capacity(cq: &Cq<Self::Cq>) -> u32;
    /// Moves up to `wc.len()` completions into `wc`; returns how many.
    fn poll_cq(cq: &Cq<Self::Cq>, wc: &mut [Wc]) -> usize;
    /// Changes the CQ to hold at least `cqe` completions, keeping the
    /// pending ones; [`IbDriver::cq_capacity`] reports the new size after.
    fn resize_cq(
        dev: &Device<Self::Data>,
        cq: &Cq<Self::Cq>,
        cqe: u32,
        udata: Option<&Udata<'_>>,
    ) -> Result;
    /// Arms the CQ; returns 1 if completions were missed (as the verb does).
    fn req_notify_cq(cq: &Cq<Self::Cq>, flags: CqNotifyFlags) -> Result<i32>;
    /// Creates a shared receive queue.
    fn create_srq(
        dev: &Device<Self::Data>,
        attr: &mut SrqInitAttr,
        udata: Option<&Udata<'_>>,
    ) -> Result<Self::Srq>;
    /// Changes the limit or size of an SRQ.
    fn modify_srq(
        dev: &Device<Self::Data>,
        srq: &Srq<Self::Srq>,
        req: &SrqModify,
        udata: Option<&Udata<'_>>,
    ) -> Result;
    /// The SRQ is about to be destroyed (its data is dropped right after).
    fn destroy_srq(dev: &Device<Self::Data>, srq: &Srq<Self::Srq>);
    /// Reports an SRQ's attributes.
    fn query_srq(srq: &Srq<Self::Srq>, attr: &mut SrqAttr) -> Result;
    /// Posts one receive work request to an SRQ (kernel consumers).
    fn post_srq_recv(srq: &Srq<Self::Srq>, wr: KernelRecvWr<'_>) -> Result;
    /// Creates a queue pair; returns its number and state.
    fn create_qp(
        dev: &Device<Self::Data>,
        init: QpInit<'_, Self>,
        udata: Option<&Udata<'_>>,
    ) -> Result<(u32, Self::Qp)>;
    /// Moves a QP through its state machine and sets attributes.
    fn modify_qp(
        dev: &Device<Self::Data>,
        qp: &Qp<Self::Qp>,
        req: &QpModify,
        udata: Option<&Udata<'_>>,
    ) -> Result;
    /// Reports a QP's attributes.
    fn query_qp(qp: &Qp<Self::Qp>, attr: &mut QpAttr, mask: u32, init: &mut QpInitAttr) -> Result;
    /// The QP is about to be destroyed: stop using it (its data is dropped
    /// right after).
    fn destroy_qp(dev: &Device<Self::Data>, qp: &Qp<Self::Qp>);
    /// Posts one send work request (kernel consumers), or, with `None`,
    /// rings the doorbell of a user QP whose send ring has new entries.
    fn post_send(
        dev: &Device<Self::Data>,
        qp: &Qp<Self::Qp>,
        wr: Option<KernelSendWr<'_, Self::Ah>>,
    ) -> Result;
    /// Posts one receive work request (kernel consumers).
    fn post_recv(qp: &Qp<Self::Qp>, wr: KernelRecvWr<'_>) -> Result;
    /// A region covering all memory, for kernel consumers; returns
    /// `((lkey, rkey), state)`.
    fn get_dma_mr(
        dev: &Device<Self::Data>,
        pd: &Pd<Self::Pd>,
        access: AccessFlags,
    ) -> Result<((u32, u32), Self::Mr)>;
    /// Registers user memory; returns `((lkey, rkey), state)`.
    fn reg_user_mr(
        dev: &Device<Self::Data>,
        pd: &Pd<Self::Pd>,
        start: u64,
        length: u64,
        iova: u64,
        access: AccessFlags,
        udata: Option<&Udata<'_>>,
    ) -> Result<((u32, u32), Self::Mr)>;
    /// The region is about to be freed (its data is dropped right after).
    fn dereg_mr(dev: &Device<Self::Data>, mr: &Mr<Self::Mr>);
    /// A fast-registration region of a kernel consumer for `max_num_sg`
    /// pages (`ib_alloc_mr` with `IB_MR_TYPE_MEM_REG`); returns
    /// `((lkey, rkey), state)`.
    fn alloc_mr(
        dev: &Device<Self::Data>,
        pd: &Pd<Self::Pd>,
        max_num_sg: u32,
        who: super::kdma::KernelConsumer,
    ) -> Result<((u32, u32), Self::Mr)>;
    /// `ib_map_mr_sg` of a fast-registration region starts (pages of
    /// `page_size` bytes follow through [`IbDriver::map_mr_page`]).
    fn map_mr_begin(dev: &Device<Self::Data>, mr: &Mr<Self::Mr>, page_size: u32) -> Result;
    /// The next page's DMA address.
    fn map_mr_page(dev: &Device<Self::Data>, mr: &Mr<Self::Mr>, addr: u64) -> Result;
    /// The mapping is done and spans `[iova, iova + length)`.
    fn map_mr_end(dev: &Device<Self::Data>, mr: &Mr<Self::Mr>, iova: u64, length: u64);
    /// Creates a memory window of type `mw_type` (`IB_MW_TYPE_*`) in the PD
    /// at `pd_addr`; returns `(rkey, state)`.
    fn alloc_mw(
        dev: &Device<Self::Data>,
        pd_addr: usize,
        mw_type: Option<MwType>,
    ) -> Result<(u32, Self::Mw)>;
    /// The window is about to be freed (its data is dropped right after).
    fn dealloc_mw(dev: &Device<Self::Data>, mw: &Mw<Self::Mw>);

    /// The per-port counters of `rdma statistic` (none by default).
    const PORT_STATS: &'static [super::stats::StatDesc] = &[];
    /// Fills `values`, one per [`IbDriver::PORT_STATS`] entry, for `port`.
    fn port_stats(_dev: &Device<Self::Data>, _port: u32, _values: &mut [u64]) {}

    /// How many of the first [`IbDriver::PORT_STATS`] are also counted on
    /// counter objects QPs are bound to (`rdma statistic qp`; the others
    /// are not shown there); 0: none.
    /// The core adds every counter object's values to the port's, so
    /// [`IbDriver::port_stats`] must leave them out.
    const QP_STATS: usize = 0;
    /// Binds `qp` to counter object `id`, or to a new one if `id` is 0;
    /// returns the object's id (never 0).
    fn counter_bind_qp(_dev: &Device<Self::Data>, _id: u32, _qp: &Qp<Self::Qp>) -> Result<u32> {
        Err(super::eopnotsupp())
    }
    /// Unbinds `qp` from its counter object.
    fn counter_unbind_qp(_qp: &Qp<Self::Qp>) -> Result {
        Err(super::eopnotsupp())
    }
    /// Frees counter object `id` (no QP is bound to it).
    fn counter_dealloc(_dev: &Device<Self::Data>, _id: u32) {}
    /// Fills `values`, one per per-QP counter, for counter object `id`.
    fn counter_stats(_dev: &Device<Self::Data>, _id: u32, _values: &mut [u64]) {}

    /// Writes `qp`'s driver details for `rdma resource show qp -dd` (none
    /// by default). Process context, no driver lock held.
    fn qp_details(_qp: &Qp<Self::Qp>, _out: &mut super::restrack::Details<'_>) -> Result {
        Ok(())
    }
}

/// The allocation behind every device of this driver: the core's
/// `ib_device` first (the core and `container_of` rely on offset 0), then
/// the driver's data.
#[repr(C)]
struct Container<D> {
    ib: bindings::ib_device,
    data: D,
}

/// A registered (or registering) `ib_device` of this driver, borrowed from
/// the core.
///
/// # Invariants
///
/// The wrapped `ib_device` is alive for the lifetime of every `&Device`, is
/// the `ib` field of a `Container<D>` and its `data` is initialised.
#[repr(transparent)]
pub(crate) struct Device<D>(Opaque<bindings::ib_device>, PhantomData<D>);

impl<D> Device<D> {
    /// # Safety
    ///
    /// `ptr` must be a live `ib_device` for the lifetime `'a`, allocated by
    /// [`NewDevice::new`] with data type `D`, whose data is initialised.
    pub(super) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: transparent wrapper; the caller guarantees the rest.
        unsafe { &*ptr.cast() }
    }

    /// The raw device, for the other wrappers of this layer.
    pub(super) fn as_raw(&self) -> *mut bindings::ib_device {
        self.0.get()
    }

    /// The driver data of this device.
    pub(crate) fn data(&self) -> &D {
        // SAFETY: the device is the `ib` field, at offset 0, of a live
        // `Container<D>` whose data is initialised (type invariant).
        unsafe { &(*self.as_raw().cast::<Container<D>>()).data }
    }

    /// The device name, e.g. `mr0`.
    pub(crate) fn name(&self) -> &CStr {
        // SAFETY: `name` is a NUL-terminated array inside a live ib_device
        // (type invariant), kept in sync with the kobject name by the core.
        unsafe { CStr::from_char_ptr((*self.as_raw()).name.as_ptr()) }
    }

    /// The network device bound to `port`, with a reference held.
    pub(crate) fn netdev(&self, port: u32) -> Option<NetDeviceRef> {
        // SAFETY: the device is alive (type invariant); the getter returns a
        // held reference or NULL.
        let ndev = unsafe { bindings::ib_device_get_netdev(self.as_raw(), port) };
        if ndev.is_null() {
            None
        } else {
            // SAFETY: non-null and held by `ib_device_get_netdev`.
            Some(unsafe { NetDeviceRef::from_held(ndev) })
        }
    }

    /// The port speed and width the core derives from the netdev's ethtool
    /// link settings.
    pub(crate) fn eth_speed(&self, port: u32) -> Result<(u16, u8)> {
        let (mut speed, mut width) = (0u16, 0u8);
        // SAFETY: the device is alive; the out-pointers are valid locals.
        to_result(unsafe {
            bindings::ib_get_eth_speed(self.as_raw(), port, &mut speed, &mut width)
        })?;
        Ok((speed, width))
    }

    /// Tells the core (and user space) that `port` became active or failed.
    pub(crate) fn dispatch_port_event(&self, port: u32, active: bool) {
        let mut ev = bindings::ib_event {
            device: self.as_raw(),
            event: if active {
                bindings::ib_event_type_IB_EVENT_PORT_ACTIVE
            } else {
                bindings::ib_event_type_IB_EVENT_PORT_ERR
            },
            ..Default::default()
        };
        ev.element.port_num = port;
        // SAFETY: `ev` is a fully initialised event for a live device.
        unsafe { bindings::ib_dispatch_event(&ev) };
    }

    /// Queues the unregistration of this device (safe under the RTNL, from a
    /// netdevice notifier); the core frees it when done.
    pub(crate) fn unregister_queued(&self) {
        // SAFETY: the device is alive and registered by this driver, which
        // sets `dealloc_driver` as the queued path requires.
        unsafe { bindings::ib_unregister_device_queued(self.as_raw()) };
    }
}

/// A counted reference to a registered device, released with `ib_device_put`.
///
/// # Invariants
///
/// `ptr` is a registered `ib_device` of this driver (a `Container<D>`) on
/// which this object holds a reference.
pub(crate) struct DeviceRef<D> {
    ptr: NonNull<bindings::ib_device>,
    _data: PhantomData<D>,
}

impl<D> core::ops::Deref for DeviceRef<D> {
    type Target = Device<D>;

    fn deref(&self) -> &Device<D> {
        // SAFETY: the held reference keeps the device alive, and devices
        // with our driver id are all `Container<D>` (invariant).
        unsafe { Device::from_raw(self.ptr.as_ptr()) }
    }
}

impl<D> Drop for DeviceRef<D> {
    fn drop(&mut self) {
        // SAFETY: we hold exactly one registration reference (invariant).
        unsafe { bindings::ib_device_put(self.ptr.as_ptr()) };
    }
}

/// The device of driver `T` bound to `ndev`, if any. Usable in any context
/// (the core looks it up under RCU).
pub(crate) fn device_by_netdev<T: IbDriver>(ndev: &NetDevice) -> Option<DeviceRef<T::Data>> {
    // SAFETY: `ndev` is alive; the call returns a held device or NULL.
    let ptr = unsafe { bindings::ib_device_get_by_netdev(ndev.as_raw(), DRIVER_ID) };
    // Every device with our driver id was made by `NewDevice::new::<T>`: the
    // module has exactly one `IbDriver`.
    NonNull::new(ptr).map(|ptr| DeviceRef {
        ptr,
        _data: PhantomData,
    })
}

/// The device of driver `T` named `name`, if any. Process context (the
/// core's lookup may sleep).
pub(crate) fn device_by_name<T: IbDriver>(name: &CStr) -> Option<DeviceRef<T::Data>> {
    // SAFETY: `name` is a valid C string; the call returns a held device of
    // our driver id or NULL.
    let ptr = unsafe { bindings::ib_device_get_by_name(name.as_char_ptr(), DRIVER_ID) };
    // Every device with our driver id was made by `NewDevice::new::<T>`.
    NonNull::new(ptr).map(|ptr| DeviceRef {
        ptr,
        _data: PhantomData,
    })
}

/// Whether any RDMA device (of any driver) already has this name.
pub(crate) fn name_in_use(name: &CStr) -> bool {
    // SAFETY: `name` is a valid C string; RDMA_DRIVER_UNKNOWN matches every
    // driver here. A returned device is held, and released at once.
    let ptr = unsafe {
        bindings::ib_device_get_by_name(
            name.as_char_ptr(),
            bindings::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
        )
    };
    if ptr.is_null() {
        return false;
    }
    // SAFETY: `ptr` was returned held by `ib_device_get_by_name`.
    unsafe { bindings::ib_device_put(ptr) };
    true
}

/// Unregisters every device of this driver and waits until all are gone.
pub(crate) fn unregister_all() {
    // SAFETY: may sleep; called from module exit in process context.
    unsafe { bindings::ib_unregister_driver(DRIVER_ID) };
}

/// Static description of a device being created.
pub(crate) struct DeviceConfig {
    /// Node GUID (big-endian on the wire, stored as the core expects).
    pub(crate) node_guid: u64,
    /// Node description, shown by `ibv_devinfo -v`.
    pub(crate) node_desc: &'static [u8],
    /// Number of completion vectors.
    pub(crate) num_comp_vectors: u32,
    /// ABI version of the uverbs interface (`include/uapi`).
    pub(crate) uverbs_abi_ver: u32,
}

/// An allocated, not yet registered device, owned by the driver.
///
/// # Invariants
///
/// `ptr` was returned by `_ib_alloc_device` for a `Container<T::Data>` whose
/// data is initialised and whose ops are `T`'s; it is neither registered nor
/// freed; `drop` frees it with `ib_dealloc_device` (which drops the data
/// through `dealloc_driver`).
pub(crate) struct NewDevice<T: IbDriver> {
    ptr: NonNull<bindings::ib_device>,
    _driver: PhantomData<T>,
}

impl<T: IbDriver> NewDevice<T> {
    /// Allocates a device whose ops come from `T`, with one port, and
    /// initialises its driver data in place.
    pub(crate) fn new(
        module: &'static ThisModule,
        cfg: &DeviceConfig,
        data: impl PinInit<T::Data, Error>,
    ) -> Result<Self> {
        let size = core::mem::size_of::<Container<T::Data>>();
        // SAFETY: allocates a zeroed block for a container whose first field
        // is the ib_device (offset 0, `repr(C)`).
        let ptr = NonNull::new(unsafe { bindings::_ib_alloc_device(size) }).ok_or(ENOMEM)?;
        let container = ptr.as_ptr().cast::<Container<T::Data>>();
        // SAFETY: the block is ours and large enough; `data` is written in
        // place and never moves (the core never moves a device).
        if let Err(e) = unsafe { data.__pinned_init(core::ptr::addr_of_mut!((*container).data)) } {
            // No ops are set yet, so this frees the block without calling
            // `dealloc_driver` on uninitialised data.
            // SAFETY: allocated above, never registered.
            unsafe { bindings::ib_dealloc_device(ptr.as_ptr()) };
            return Err(e);
        }
        let this = Self {
            ptr,
            _driver: PhantomData,
        };

        let ops = bindings::ib_device_ops {
            // Same C object, seen through the kernel crate's bindings.
            owner: module.as_ptr().cast(),
            driver_id: DRIVER_ID,
            uverbs_abi_ver: cfg.uverbs_abi_ver,
            query_device: Some(query_device::<T>),
            query_port: Some(query_port::<T>),
            get_port_immutable: Some(get_port_immutable::<T>),
            get_link_layer: Some(get_link_layer),
            query_pkey: Some(query_pkey::<T>),
            dealloc_driver: Some(dealloc_driver::<T>),
            alloc_hw_port_stats: (!T::PORT_STATS.is_empty())
                .then_some(super::stats::alloc_hw_port_stats::<T>),
            get_hw_stats: (!T::PORT_STATS.is_empty()).then_some(super::stats::get_hw_stats::<T>),
            counter_bind_qp: (T::QP_STATS > 0).then_some(super::stats::counter_bind_qp::<T>),
            counter_unbind_qp: (T::QP_STATS > 0).then_some(super::stats::counter_unbind_qp::<T>),
            counter_dealloc: (T::QP_STATS > 0).then_some(super::stats::counter_dealloc::<T>),
            counter_alloc_stats: (T::QP_STATS > 0)
                .then_some(super::stats::counter_alloc_stats::<T>),
            counter_update_stats: (T::QP_STATS > 0)
                .then_some(super::stats::counter_update_stats::<T>),
            // The knob files, whose callbacks take every device of our
            // driver id for the module's one driver, as the lookups here do.
            device_group: super::knobs::device_group(),
            ..Default::default()
        };
        let mut ops = ops;
        super::verbs::fill_ops::<T>(&mut ops);
        let dev = this.ptr.as_ptr();
        // SAFETY: `dev` is ours and unregistered (invariant); the core copies
        // the ops table, so `ops` may live on the stack.
        unsafe {
            bindings::ib_set_device_ops(dev, &ops);
            (*dev).node_type = bindings::RDMA_NODE_IB_CA as u8;
            (*dev).phys_port_cnt = 1;
            (*dev).num_comp_vectors = cfg.num_comp_vectors as i32;
            (*dev).node_guid = cfg.node_guid.to_be();
            (*dev).local_dma_lkey = 0;
            // Legacy write commands the provider uses: POST_SEND (with no
            // work requests) is its doorbell, REQ_NOTIFY_CQ arms CQs for
            // completion channels. The core enables neither by default.
            (*dev).uverbs_cmd_mask |= (1u64
                << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND)
                | (1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
            let desc = &mut (*dev).node_desc;
            let n = cfg.node_desc.len().min(desc.len() - 1);
            for (d, s) in desc.iter_mut().zip(&cfg.node_desc[..n]) {
                *d = *s as _;
            }
        }
        Ok(this)
    }

    /// Binds `ndev` to `port`; the core holds its own reference from now on.
    pub(crate) fn set_netdev(&mut self, ndev: &NetDevice, port: u32) -> Result {
        // SAFETY: the device is ours (invariant) and `ndev` is alive.
        to_result(unsafe { bindings::ib_device_set_netdev(self.ptr.as_ptr(), ndev.as_raw(), port) })
    }

    /// Registers the device as `name`. On failure the device is freed.
    pub(crate) fn register(self, name: &CStr) -> Result {
        // SAFETY: the device is ours and fully set up; a NULL dma_device makes
        // the core use virtual DMA, as for every software RDMA device.
        let ret = unsafe {
            bindings::ib_register_device(
                self.ptr.as_ptr(),
                name.as_char_ptr(),
                core::ptr::null_mut(),
            )
        };
        to_result(ret)?;
        // Registered: from now on the core owns the device and frees it after
        // unregistration (through `dealloc_driver`).
        core::mem::forget(self);
        Ok(())
    }
}

impl<T: IbDriver> Drop for NewDevice<T> {
    fn drop(&mut self) {
        // SAFETY: allocated by `_ib_alloc_device` and never registered, or its
        // registration failed, in which case the caller must free it.
        unsafe { bindings::ib_dealloc_device(self.ptr.as_ptr()) };
    }
}

/// # Safety
///
/// Called by the core with a live device and valid `attr`/`udata` pointers.
unsafe extern "C" fn query_device<T: IbDriver>(
    dev: *mut bindings::ib_device,
    attr: *mut bindings::ib_device_attr,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: `udata` is NULL or valid for this call (core contract).
        if !udata.is_null() && unsafe { (*udata).inlen != 0 || (*udata).outlen != 0 } {
            // No driver-specific query_device payload is defined in our uapi.
            return Err(EINVAL);
        }
        // SAFETY: the core passes a live device and an exclusive attr buffer.
        let (dev, attr) = unsafe { (Device::<T::Data>::from_raw(dev), &mut *attr) };
        T::query_device(dev, attr)?;
        Ok(0)
    })
}

/// # Safety
///
/// Called by the core with a live device and a valid, zeroed `attr`.
unsafe extern "C" fn query_port<T: IbDriver>(
    dev: *mut bindings::ib_device,
    port: u32,
    attr: *mut bindings::ib_port_attr,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: the core passes a live device and an exclusive attr buffer.
        let (dev, attr) = unsafe { (Device::<T::Data>::from_raw(dev), &mut *attr) };
        T::query_port(dev, port, attr)?;
        Ok(0)
    })
}

/// # Safety
///
/// Called by the core during registration with a live device and valid `imm`.
unsafe extern "C" fn get_port_immutable<T: IbDriver>(
    dev: *mut bindings::ib_device,
    port: u32,
    imm: *mut bindings::ib_port_immutable,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: the core passes a live device and an exclusive buffer.
        let (dev, imm) = unsafe { (Device::<T::Data>::from_raw(dev), &mut *imm) };
        T::get_port_immutable(dev, port, imm)?;
        Ok(0)
    })
}

/// # Safety
///
/// Called by the core with a live device and a valid `pkey` out-pointer.
unsafe extern "C" fn query_pkey<T: IbDriver>(
    dev: *mut bindings::ib_device,
    port: u32,
    index: u16,
    pkey: *mut u16,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: the core passes a live device.
        let value = T::query_pkey(unsafe { Device::<T::Data>::from_raw(dev) }, port, index)?;
        // SAFETY: `pkey` is a valid out-pointer for this call.
        unsafe { *pkey = value };
        Ok(0)
    })
}

/// Every MetaRoCE port is an Ethernet port (RoCE-style addressing).
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn get_link_layer(
    _dev: *mut bindings::ib_device,
    _port: u32,
) -> bindings::rdma_link_layer {
    bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET
}

/// Called by the core just before it frees an unregistered (or never
/// registered) device: drops the driver data. The netdev references belong
/// to the core.
///
/// # Safety
///
/// Called once per device, by the core, after every other op has returned.
unsafe extern "C" fn dealloc_driver<T: IbDriver>(dev: *mut bindings::ib_device) {
    let container = dev.cast::<Container<T::Data>>();
    // SAFETY: the device was made by `NewDevice::<T>::new`, which initialised
    // the data before installing this op; nothing uses it after this call.
    unsafe { core::ptr::drop_in_place(core::ptr::addr_of_mut!((*container).data)) };
}
