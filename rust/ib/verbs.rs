// SPDX-License-Identifier: GPL-2.0

//! Verbs objects: the containers behind `ib_ucontext`, `ib_pd`, `ib_ah`,
//! `ib_cq`, `ib_srq`, `ib_qp`, `ib_mr` and `ib_mw`, and the `ib_device_ops` callbacks
//! that turn [`IbDriver`] methods into C.
//!
//! The core allocates every object but the MR (zeroed, `size_ib_*` bytes)
//! with its C struct first; the driver's data follows it in a
//! [`Container`], is written in the create callback and dropped in the
//! destroy callback. MRs are allocated here the same way, with `KBox`.

use core::marker::PhantomData;
use core::ptr::NonNull;

use kernel::error::from_result;
use kernel::prelude::*;
use kernel::types::Opaque;

use super::device::{Device, IbDriver};
use super::sys::bindings;
use super::types::{AccessFlags, CqNotifyFlags, Mtu, MwType, QpState, QpType};
use super::udata::Udata;
use crate::abi::cqe::Completion;
use crate::abi::opcode::WcFlags;

/// A core object `R` followed by the driver's data `D`.
#[repr(C)]
pub(crate) struct Container<R, D> {
    raw: R,
    data: D,
}

/// A live verbs object of type `R` whose driver data is a `D`.
///
/// # Invariants
///
/// The wrapped `R` is the `raw` field of a live `Container<R, D>` whose
/// `data` is initialised, for the lifetime of every `&Obj`.
#[repr(transparent)]
pub(crate) struct Obj<R, D>(Opaque<R>, PhantomData<D>);

impl<R, D> Obj<R, D> {
    /// # Safety
    ///
    /// `ptr` is the `raw` field of a live `Container<R, D>` with initialised
    /// data, for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut R) -> &'a Self {
        // SAFETY: transparent wrapper; the caller guarantees the rest.
        unsafe { &*ptr.cast() }
    }

    pub(crate) fn as_raw(&self) -> *mut R {
        self.0.get()
    }

    /// The driver data.
    pub(crate) fn data(&self) -> &D {
        // SAFETY: `raw` is at offset 0 of a live container with initialised
        // data (invariant).
        unsafe { &(*self.as_raw().cast::<Container<R, D>>()).data }
    }
}

/// A protection domain.
pub(crate) type Pd<D> = Obj<bindings::ib_pd, D>;
/// An address handle.
pub(crate) type Ah<D> = Obj<bindings::ib_ah, D>;
/// A completion queue.
pub(crate) type Cq<D> = Obj<bindings::ib_cq, D>;
/// A shared receive queue.
pub(crate) type Srq<D> = Obj<bindings::ib_srq, D>;
/// A queue pair.
pub(crate) type Qp<D> = Obj<bindings::ib_qp, D>;
/// A memory region.
pub(crate) type Mr<D> = Obj<bindings::ib_mr, D>;
/// A memory window.
pub(crate) type Mw<D> = Obj<bindings::ib_mw, D>;

/// A reference to a verbs object that the core keeps alive for as long as
/// the holder exists (a CQ or SRQ used by a QP: the core refuses to destroy
/// it while its use count is held).
///
/// # Invariants
///
/// Points to a live `Obj<R, D>` for the lifetime of this value.
pub(crate) struct ObjRef<R, D>(NonNull<R>, PhantomData<D>);

// SAFETY: the referenced objects are `Sync` driver data behind core objects
// the core keeps alive; the reference carries no thread affinity.
unsafe impl<R, D: Send + Sync> Send for ObjRef<R, D> {}
// SAFETY: as above.
unsafe impl<R, D: Send + Sync> Sync for ObjRef<R, D> {}

/// A CQ the core holds for the object that names it.
pub(crate) type CqRef<D> = ObjRef<bindings::ib_cq, D>;
/// An SRQ the core holds for the QP that names it.
pub(crate) type SrqRef<D> = ObjRef<bindings::ib_srq, D>;

impl<R, D> ObjRef<R, D> {
    /// # Safety
    ///
    /// `ptr` is a live `Obj<R, D>` that the core keeps alive until this
    /// value is dropped.
    unsafe fn new(ptr: *mut R) -> Option<Self> {
        NonNull::new(ptr).map(|p| Self(p, PhantomData))
    }
}

impl<R, D> core::ops::Deref for ObjRef<R, D> {
    type Target = Obj<R, D>;

    fn deref(&self) -> &Obj<R, D> {
        // SAFETY: live for our lifetime (invariant).
        unsafe { Obj::from_raw(self.0.as_ptr()) }
    }
}

impl<D> Cq<D> {
    /// Runs the consumer's completion handler (an armed CQ got an entry).
    pub(crate) fn completion_event(&self) {
        let cq = self.as_raw();
        // SAFETY: the core sets `comp_handler` and `cq_context` before the CQ
        // is used and keeps them for its lifetime.
        unsafe {
            if let Some(handler) = (*cq).comp_handler {
                handler(cq, (*cq).cq_context);
            }
        }
    }
}

impl<D> Cq<D> {
    /// Raises `IB_EVENT_CQ_ERR` to the consumer's event handler (the CQ
    /// overflowed). Any context: the core's handlers (uverbs' async event
    /// queue) take irq-safe locks only.
    pub(crate) fn error_event(&self) {
        let cq = self.as_raw();
        // SAFETY: the core sets `event_handler` and `cq_context` before the
        // CQ is used and keeps them for its lifetime; the event lives for
        // the call, which is all the handler may rely on.
        unsafe {
            if let Some(handler) = (*cq).event_handler {
                let mut ev = bindings::ib_event {
                    device: (*cq).device,
                    event: bindings::ib_event_type_IB_EVENT_CQ_ERR,
                    ..Default::default()
                };
                ev.element.cq = cq;
                handler(&mut ev, (*cq).cq_context);
            }
        }
    }
}

impl<D> Qp<D> {
    /// The QP number.
    pub(crate) fn qp_num(&self) -> u32 {
        // SAFETY: plain field of a live QP (invariant).
        unsafe { (*self.as_raw()).qp_num }
    }

    /// The QP type; `None` for a type this layer does not name (the
    /// driver's `create_qp` refuses those).
    pub(crate) fn qp_type(&self) -> Option<QpType> {
        // SAFETY: plain field of a live QP (invariant).
        let raw = unsafe { (*self.as_raw()).qp_type };
        QpType::from_raw(raw)
    }

    /// Whether the QP belongs to a user process (its rings are mapped).
    pub(crate) fn is_user(&self) -> bool {
        // SAFETY: plain field of a live QP (invariant).
        unsafe { !(*self.as_raw()).uobject.is_null() }
    }
}

/// The attributes `create_qp` is given and answers with (`struct
/// ib_qp_init_attr`), and `query_qp` reports.
pub(crate) type QpInitAttr = bindings::ib_qp_init_attr;

impl QpInitAttr {
    /// Whether every send work request completes (`IB_SIGNAL_ALL_WR`), not
    /// only the signalled ones.
    pub(crate) fn signals_all(&self) -> bool {
        self.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR
    }

    /// Reports whether every send work request completes.
    pub(crate) fn set_signals_all(&mut self, all: bool) {
        self.sq_sig_type = if all {
            bindings::ib_sig_type_IB_SIGNAL_ALL_WR
        } else {
            bindings::ib_sig_type_IB_SIGNAL_REQ_WR
        };
    }
}

/// A QP's attributes as `query_qp` reports them (`struct ib_qp_attr`).
pub(crate) type QpAttr = bindings::ib_qp_attr;

impl QpAttr {
    /// Reports a QP without an alternate path (`IB_MIG_MIGRATED`).
    pub(crate) fn set_no_alternate_path(&mut self) {
        self.path_mig_state = bindings::ib_mig_state_IB_MIG_MIGRATED;
    }
}

/// A QP's capabilities (`struct ib_qp_cap`): ring sizes, SGEs, inline bytes.
pub(crate) type QpCap = bindings::ib_qp_cap;

/// A kernel consumer's scatter/gather element (`struct ib_sge`).
pub(crate) type KernelSge = bindings::ib_sge;

/// An address handle's attributes (`struct rdma_ah_attr`).
pub(crate) type AhAttr = bindings::rdma_ah_attr;

/// What `create_cq` is given (`struct ib_cq_init_attr`).
pub(crate) type CqInitAttr = bindings::ib_cq_init_attr;

/// What `create_qp` is given, with the core's object pointers checked.
pub(crate) struct QpInit<'a, T: IbDriver> {
    /// The attributes; the driver writes back the capabilities it granted.
    pub(crate) attr: &'a mut QpInitAttr,
    /// Completions of sends.
    pub(crate) send_cq: ObjRef<bindings::ib_cq, T::Cq>,
    /// Completions of receives.
    pub(crate) recv_cq: ObjRef<bindings::ib_cq, T::Cq>,
    /// The SRQ receives come from, if any.
    pub(crate) srq: Option<ObjRef<bindings::ib_srq, T::Srq>>,
    /// Address of the `ib_qp` (reported in kernel consumers' completions).
    pub(crate) qp_addr: u64,
    /// Address of the QP's `ib_pd` (identifies its protection domain).
    pub(crate) pd_addr: usize,
    /// Set for a QP of a kernel consumer: its work requests may name kernel
    /// memory through DMA regions.
    pub(crate) kernel: Option<super::kdma::KernelConsumer>,
}

/// Fills `ops` with this layer's callbacks and object sizes for `T`.
pub(crate) fn fill_ops<T: IbDriver>(ops: &mut bindings::ib_device_ops) {
    ops.size_ib_ucontext = core::mem::size_of::<Container<bindings::ib_ucontext, T::Ucontext>>();
    ops.size_ib_pd = core::mem::size_of::<Container<bindings::ib_pd, T::Pd>>();
    ops.size_ib_ah = core::mem::size_of::<Container<bindings::ib_ah, T::Ah>>();
    ops.size_ib_cq = core::mem::size_of::<Container<bindings::ib_cq, T::Cq>>();
    ops.size_ib_srq = core::mem::size_of::<Container<bindings::ib_srq, T::Srq>>();
    ops.size_ib_qp = core::mem::size_of::<Container<bindings::ib_qp, T::Qp>>();
    ops.size_ib_mw = core::mem::size_of::<Container<bindings::ib_mw, T::Mw>>();
    ops.alloc_ucontext = Some(alloc_ucontext::<T>);
    ops.dealloc_ucontext = Some(dealloc_ucontext::<T>);
    ops.mmap = Some(super::ring::mmap);
    ops.mmap_free = Some(super::ring::mmap_free);
    ops.alloc_pd = Some(alloc_pd::<T>);
    ops.dealloc_pd = Some(dealloc_pd::<T>);
    ops.create_ah = Some(create_ah::<T>);
    ops.create_user_ah = Some(create_ah::<T>);
    ops.destroy_ah = Some(destroy_ah::<T>);
    ops.create_cq = Some(create_cq::<T>);
    ops.destroy_cq = Some(destroy_cq::<T>);
    ops.poll_cq = Some(poll_cq::<T>);
    ops.resize_cq = Some(resize_cq::<T>);
    ops.req_notify_cq = Some(req_notify_cq::<T>);
    ops.create_srq = Some(create_srq::<T>);
    ops.modify_srq = Some(modify_srq::<T>);
    ops.query_srq = Some(query_srq::<T>);
    ops.destroy_srq = Some(destroy_srq::<T>);
    ops.post_srq_recv = Some(post_srq_recv::<T>);
    ops.create_qp = Some(create_qp::<T>);
    ops.modify_qp = Some(modify_qp::<T>);
    ops.query_qp = Some(query_qp::<T>);
    ops.destroy_qp = Some(destroy_qp::<T>);
    ops.post_send = Some(post_send::<T>);
    ops.post_recv = Some(post_recv::<T>);
    ops.get_dma_mr = Some(get_dma_mr::<T>);
    ops.reg_user_mr = Some(reg_user_mr::<T>);
    ops.dereg_mr = Some(dereg_mr::<T>);
    ops.alloc_mr = Some(alloc_mr::<T>);
    ops.map_mr_sg = Some(map_mr_sg::<T>);
    ops.alloc_mw = Some(alloc_mw::<T>);
    ops.dealloc_mw = Some(dealloc_mw::<T>);
    ops.fill_res_qp_entry = Some(super::restrack::fill_res_qp_entry::<T>);
}

/// Writes `data` into the container behind `raw`.
///
/// # Safety
///
/// `raw` is the `raw` field of a core-allocated, zeroed `Container<R, D>`
/// whose data is not initialised yet.
unsafe fn put<R, D>(raw: *mut R, data: D) {
    // SAFETY: the container is ours to initialise (caller).
    unsafe { core::ptr::addr_of_mut!((*raw.cast::<Container<R, D>>()).data).write(data) };
}

/// Drops the data of the container behind `raw`.
///
/// # Safety
///
/// `raw` is the `raw` field of a `Container<R, D>` with initialised data
/// that nothing uses any more.
unsafe fn drop_data<R, D>(raw: *mut R) {
    // SAFETY: initialised and unused (caller).
    unsafe {
        core::ptr::drop_in_place(core::ptr::addr_of_mut!(
            (*raw.cast::<Container<R, D>>()).data
        ))
    };
}

/// # Safety
///
/// `dev` is a device of driver `T` (its data is a `T::Data`).
unsafe fn dev_of<'a, T: IbDriver>(dev: *mut bindings::ib_device) -> &'a Device<T::Data> {
    // SAFETY: the core only calls our ops on our devices (caller).
    unsafe { Device::<T::Data>::from_raw(dev) }
}

/// The `alloc_ucontext` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn alloc_ucontext<T: IbDriver>(
    uctx: *mut bindings::ib_ucontext,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: the core passes a zeroed container of our size, its device
        // and the call's udata.
        unsafe {
            let udata = Udata::from_raw(udata).ok_or(EINVAL)?;
            let data = T::alloc_ucontext(dev_of::<T>((*uctx).device), &udata)?;
            put::<_, T::Ucontext>(uctx, data);
        }
        Ok(0)
    })
}

/// The `dealloc_ucontext` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn dealloc_ucontext<T: IbDriver>(uctx: *mut bindings::ib_ucontext) {
    // SAFETY: created by `alloc_ucontext`; the core destroys it once.
    unsafe { drop_data::<_, T::Ucontext>(uctx) };
}

/// The `alloc_pd` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn alloc_pd<T: IbDriver>(
    pd: *mut bindings::ib_pd,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: zeroed container of our size, with its device set.
        unsafe {
            let data = T::alloc_pd(dev_of::<T>((*pd).device), Udata::from_raw(udata).as_ref())?;
            put::<_, T::Pd>(pd, data);
        }
        Ok(0)
    })
}

/// The `dealloc_pd` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn dealloc_pd<T: IbDriver>(
    pd: *mut bindings::ib_pd,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: created by `alloc_pd`; the core destroys it once, unused.
    unsafe { drop_data::<_, T::Pd>(pd) };
    0
}

/// The `create_ah` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn create_ah<T: IbDriver>(
    ah: *mut bindings::ib_ah,
    init: *mut bindings::rdma_ah_init_attr,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: zeroed container with device set; `init` and its `ah_attr`
        // are valid for the call.
        unsafe {
            let attr = (*init).ah_attr.as_ref().ok_or(EINVAL)?;
            let pd = (*ah).pd as usize;
            let data = T::create_ah(
                dev_of::<T>((*ah).device),
                pd,
                attr,
                Udata::from_raw(udata).as_ref(),
            )?;
            put::<_, T::Ah>(ah, data);
        }
        Ok(0)
    })
}

/// The `destroy_ah` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn destroy_ah<T: IbDriver>(
    ah: *mut bindings::ib_ah,
    _flags: u32,
) -> kernel::ffi::c_int {
    // SAFETY: created by `create_ah`; destroyed once.
    unsafe {
        T::destroy_ah(dev_of::<T>((*ah).device), Ah::<T::Ah>::from_raw(ah));
        drop_data::<_, T::Ah>(ah);
    }
    0
}

/// The `create_cq` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn create_cq<T: IbDriver>(
    cq: *mut bindings::ib_cq,
    attr: *const bindings::ib_cq_init_attr,
    attrs: *mut bindings::uverbs_attr_bundle,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: zeroed container with device set; `attr` valid for the
        // call; `attrs` NULL for kernel CQs.
        unsafe {
            let udata = Udata::from_raw(bindings::metaroce_helper_attrs_udata(attrs));
            let data = T::create_cq(dev_of::<T>((*cq).device), &*attr, udata.as_ref())?;
            put::<_, T::Cq>(cq, data);
            // The consumer may now see the size it asked for (or more).
            (*cq).cqe = T::cq_capacity(Cq::<T::Cq>::from_raw(cq)) as i32;
        }
        Ok(0)
    })
}

/// The `destroy_cq` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn destroy_cq<T: IbDriver>(
    cq: *mut bindings::ib_cq,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: created by `create_cq`; the core destroys it once, after every
    // QP using it is gone.
    unsafe { drop_data::<_, T::Cq>(cq) };
    0
}

/// The `resize_cq` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn resize_cq<T: IbDriver>(
    cq: *mut bindings::ib_cq,
    cqe: kernel::ffi::c_int,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        let cqe = u32::try_from(cqe).map_err(|_| EINVAL)?;
        // SAFETY: a live CQ of ours, on one of our devices; `udata` NULL
        // (kernel callers) or the call's. The core serialises verbs on one
        // user CQ object, and `cqe` is a plain field consumers read after
        // the call.
        unsafe {
            let udata = Udata::from_raw(udata);
            let obj = Cq::<T::Cq>::from_raw(cq);
            T::resize_cq(dev_of::<T>((*cq).device), obj, cqe, udata.as_ref())?;
            (*cq).cqe = T::cq_capacity(obj) as i32;
        }
        Ok(0)
    })
}

/// The `poll_cq` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn poll_cq<T: IbDriver>(
    cq: *mut bindings::ib_cq,
    n: kernel::ffi::c_int,
    wc: *mut bindings::ib_wc,
) -> kernel::ffi::c_int {
    let Ok(n) = usize::try_from(n) else {
        return EINVAL.to_errno();
    };
    if n == 0 || wc.is_null() {
        return 0;
    }
    // SAFETY: a live CQ of ours; `wc` has room for `n` entries (core API).
    let (cq, wc) = unsafe {
        (
            Cq::<T::Cq>::from_raw(cq),
            core::slice::from_raw_parts_mut(wc, n),
        )
    };
    T::poll_cq(cq, wc) as kernel::ffi::c_int
}

/// The `req_notify_cq` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn req_notify_cq<T: IbDriver>(
    cq: *mut bindings::ib_cq,
    flags: bindings::ib_cq_notify_flags,
) -> kernel::ffi::c_int {
    let flags = CqNotifyFlags::from_raw(flags);
    // SAFETY: a live CQ of ours.
    match T::req_notify_cq(unsafe { Cq::<T::Cq>::from_raw(cq) }, flags) {
        Ok(v) => v,
        Err(e) => e.to_errno(),
    }
}

/// The `create_srq` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn create_srq<T: IbDriver>(
    srq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_init_attr,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: zeroed container with device and pd set; `attr` valid.
        unsafe {
            let udata = Udata::from_raw(udata);
            let data = T::create_srq(dev_of::<T>((*srq).device), &mut *attr, udata.as_ref())?;
            put::<_, T::Srq>(srq, data);
        }
        Ok(0)
    })
}

/// The `modify_srq` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn modify_srq<T: IbDriver>(
    srq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
    mask: bindings::ib_srq_attr_mask,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: a live SRQ of ours, on one of our devices; `attr` valid
        // for the call.
        unsafe {
            let udata = Udata::from_raw(udata);
            T::modify_srq(
                dev_of::<T>((*srq).device),
                Srq::<T::Srq>::from_raw(srq),
                &SrqModify::from_raw(&*attr, mask),
                udata.as_ref(),
            )?;
        }
        Ok(0)
    })
}

/// The `query_srq` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn query_srq<T: IbDriver>(
    srq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: a live SRQ of ours; `attr` valid for the call.
        unsafe { T::query_srq(Srq::<T::Srq>::from_raw(srq), &mut *attr)? };
        Ok(0)
    })
}

/// The `destroy_srq` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn destroy_srq<T: IbDriver>(
    srq: *mut bindings::ib_srq,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: created by `create_srq`; destroyed once, unused by any QP.
    unsafe {
        T::destroy_srq(dev_of::<T>((*srq).device), Srq::<T::Srq>::from_raw(srq));
        drop_data::<_, T::Srq>(srq);
    }
    0
}

/// The `post_srq_recv` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn post_srq_recv<T: IbDriver>(
    srq: *mut bindings::ib_srq,
    mut wr: *const bindings::ib_recv_wr,
    bad: *mut *const bindings::ib_recv_wr,
) -> kernel::ffi::c_int {
    // SAFETY: a live SRQ of ours; `wr` is a NULL-terminated list valid for
    // the call, `bad` a valid out-pointer.
    unsafe {
        let srq = Srq::<T::Srq>::from_raw(srq);
        while let Some(w) = wr.as_ref() {
            if let Err(e) = T::post_srq_recv(srq, KernelRecvWr::from_raw(w)) {
                *bad = wr;
                return e.to_errno();
            }
            wr = w.next;
        }
    }
    0
}

/// The `create_qp` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn create_qp<T: IbDriver>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_init_attr,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: zeroed container with device, pd, CQs, SRQ and type set by
        // the core, which holds use counts on the CQs, SRQ and PD until the
        // QP is destroyed (hence the `ObjRef`s); `attr` valid for the call.
        // The core sets `uobject` (and passes udata) exactly for user QPs.
        unsafe {
            let udata = Udata::from_raw(udata);
            let attr = &mut *attr;
            let init = QpInit::<T> {
                send_cq: ObjRef::new(attr.send_cq).ok_or(EINVAL)?,
                recv_cq: ObjRef::new(attr.recv_cq).ok_or(EINVAL)?,
                srq: ObjRef::new(attr.srq),
                qp_addr: qp as u64,
                pd_addr: (*qp).pd as usize,
                // No user data and no user object: a kernel consumer
                // creates this QP (`KernelConsumer` invariants).
                kernel: if udata.is_none() && (*qp).uobject.is_null() {
                    Some(super::kdma::KernelConsumer::new())
                } else {
                    None
                },
                attr,
            };
            let dev = dev_of::<T>((*qp).device);
            let (qpn, data) = T::create_qp(dev, init, udata.as_ref())?;
            (*qp).qp_num = qpn;
            put::<_, T::Qp>(qp, data);
        }
        Ok(0)
    })
}

/// The `modify_qp` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn modify_qp<T: IbDriver>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    mask: kernel::ffi::c_int,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: a live QP of ours; `attr` valid for the call.
        unsafe {
            let udata = Udata::from_raw(udata);
            T::modify_qp(
                dev_of::<T>((*qp).device),
                Qp::<T::Qp>::from_raw(qp),
                &QpModify::from_raw(&*attr, mask as u32),
                udata.as_ref(),
            )?;
        }
        Ok(0)
    })
}

/// The `query_qp` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn query_qp<T: IbDriver>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    mask: kernel::ffi::c_int,
    init: *mut bindings::ib_qp_init_attr,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: a live QP of ours; both out-structs valid for the call.
        unsafe {
            T::query_qp(
                Qp::<T::Qp>::from_raw(qp),
                &mut *attr,
                mask as u32,
                &mut *init,
            )?
        };
        Ok(0)
    })
}

/// The `destroy_qp` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn destroy_qp<T: IbDriver>(
    qp: *mut bindings::ib_qp,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: a live QP of ours, destroyed once.
    unsafe {
        T::destroy_qp(dev_of::<T>((*qp).device), Qp::<T::Qp>::from_raw(qp));
        drop_data::<_, T::Qp>(qp);
    }
    0
}

/// The `post_send` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn post_send<T: IbDriver>(
    qp: *mut bindings::ib_qp,
    mut wr: *const bindings::ib_send_wr,
    bad: *mut *const bindings::ib_send_wr,
) -> kernel::ffi::c_int {
    // SAFETY: a live QP of ours; `wr` is NULL (a user doorbell) or a
    // NULL-terminated list valid for the call; `bad` a valid out-pointer.
    unsafe {
        let dev = dev_of::<T>((*qp).device);
        let qp = Qp::<T::Qp>::from_raw(qp);
        if wr.is_null() {
            return match T::post_send(dev, qp, None) {
                Ok(()) => 0,
                Err(e) => e.to_errno(),
            };
        }
        while let Some(w) = wr.as_ref() {
            if let Err(e) = T::post_send(dev, qp, Some(KernelSendWr::from_raw(w))) {
                *bad = wr;
                return e.to_errno();
            }
            wr = w.next;
        }
    }
    0
}

/// The `post_recv` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn post_recv<T: IbDriver>(
    qp: *mut bindings::ib_qp,
    mut wr: *const bindings::ib_recv_wr,
    bad: *mut *const bindings::ib_recv_wr,
) -> kernel::ffi::c_int {
    // SAFETY: as for `post_send`.
    unsafe {
        let qp = Qp::<T::Qp>::from_raw(qp);
        while let Some(w) = wr.as_ref() {
            if let Err(e) = T::post_recv(qp, KernelRecvWr::from_raw(w)) {
                *bad = wr;
                return e.to_errno();
            }
            wr = w.next;
        }
    }
    0
}

/// Allocates an MR container for `data`, with its keys; the core fills in
/// the rest of the `ib_mr` after we return it.
fn new_mr<D>(keys: (u32, u32), data: D) -> Result<*mut bindings::ib_mr> {
    let mr = KBox::new(
        Container {
            raw: bindings::ib_mr {
                lkey: keys.0,
                rkey: keys.1,
                ..Default::default()
            },
            data,
        },
        GFP_KERNEL,
    )?;
    Ok(KBox::into_raw(mr).cast())
}

/// The `get_dma_mr` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn get_dma_mr<T: IbDriver>(
    pd: *mut bindings::ib_pd,
    access: kernel::ffi::c_int,
) -> *mut bindings::ib_mr {
    // SAFETY: a live PD of ours, on one of our devices.
    let (dev, pd) = unsafe { (dev_of::<T>((*pd).device), Pd::<T::Pd>::from_raw(pd)) };
    match T::get_dma_mr(dev, pd, AccessFlags::from_raw(access as u32))
        .and_then(|(keys, data)| new_mr(keys, data))
    {
        Ok(mr) => mr,
        Err(e) => e.to_ptr(),
    }
}

/// The `reg_user_mr` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn reg_user_mr<T: IbDriver>(
    pd: *mut bindings::ib_pd,
    start: u64,
    length: u64,
    iova: u64,
    access: kernel::ffi::c_int,
    udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    // SAFETY: a live PD of ours, on one of our devices; the call's udata.
    let (dev, pd, udata) = unsafe {
        (
            dev_of::<T>((*pd).device),
            Pd::<T::Pd>::from_raw(pd),
            Udata::from_raw(udata),
        )
    };
    let access = AccessFlags::from_raw(access as u32);
    let res = T::reg_user_mr(dev, pd, start, length, iova, access, udata.as_ref())
        .and_then(|(keys, data)| new_mr(keys, data));
    match res {
        Ok(mr) => {
            // SAFETY: just allocated; the core reads these back.
            unsafe {
                (*mr).iova = iova;
                (*mr).length = length;
            }
            mr
        }
        Err(e) => e.to_ptr(),
    }
}

/// The `dereg_mr` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn dereg_mr<T: IbDriver>(
    mr: *mut bindings::ib_mr,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: allocated by `new_mr` as a `Container<ib_mr, T::Mr>`; the core
    // deregisters it once and no longer uses it.
    unsafe {
        T::dereg_mr(dev_of::<T>((*mr).device), Mr::<T::Mr>::from_raw(mr));
        drop(KBox::from_raw(
            mr.cast::<Container<bindings::ib_mr, T::Mr>>(),
        ));
    }
    0
}

/// The `alloc_mr` op of `ib_device_ops` (kernel consumers only).
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn alloc_mr<T: IbDriver>(
    pd: *mut bindings::ib_pd,
    mr_type: bindings::ib_mr_type,
    max_num_sg: u32,
) -> *mut bindings::ib_mr {
    if mr_type != bindings::ib_mr_type_IB_MR_TYPE_MEM_REG {
        return super::eopnotsupp().to_ptr();
    }
    // SAFETY: a live PD of ours, on one of our devices. `ib_alloc_mr` is
    // not a user verb: the caller is a kernel consumer (`KernelConsumer`
    // invariants).
    let (dev, pd, who) = unsafe {
        (
            dev_of::<T>((*pd).device),
            Pd::<T::Pd>::from_raw(pd),
            super::kdma::KernelConsumer::new(),
        )
    };
    match T::alloc_mr(dev, pd, max_num_sg, who).and_then(|(keys, data)| new_mr(keys, data)) {
        Ok(mr) => mr,
        Err(e) => e.to_ptr(),
    }
}

/// `set_page` of `ib_sg_to_pages`: one page of a mapping.
///
/// # Safety
///
/// `mr` is a live MR of this driver (the one `map_mr_sg` passed on).
unsafe extern "C" fn set_page<T: IbDriver>(
    mr: *mut bindings::ib_mr,
    addr: u64,
) -> kernel::ffi::c_int {
    // SAFETY: per the caller; allocated by `new_mr` with its device set.
    let (dev, m) = unsafe { (dev_of::<T>((*mr).device), Mr::<T::Mr>::from_raw(mr)) };
    match T::map_mr_page(dev, m, addr) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The `map_mr_sg` op of `ib_device_ops`: the core's page walker fills the
/// region's page list.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn map_mr_sg<T: IbDriver>(
    mr: *mut bindings::ib_mr,
    sg: *mut bindings::scatterlist,
    sg_nents: kernel::ffi::c_int,
    sg_offset: *mut kernel::ffi::c_uint,
) -> kernel::ffi::c_int {
    // SAFETY: an MR of ours (allocated by `new_mr`, device set by the core);
    // `ib_map_mr_sg` set its page size; the scatterlist and offset pointer
    // are the consumer's, valid for the call, and `set_page` is called back
    // with this same MR.
    unsafe {
        let (dev, m) = (dev_of::<T>((*mr).device), Mr::<T::Mr>::from_raw(mr));
        if let Err(e) = T::map_mr_begin(dev, m, (*mr).page_size) {
            return e.to_errno();
        }
        let n = bindings::ib_sg_to_pages(mr, sg, sg_nents, sg_offset, Some(set_page::<T>));
        T::map_mr_end(dev, m, (*mr).iova, (*mr).length);
        n
    }
}

/// The `alloc_mw` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn alloc_mw<T: IbDriver>(
    mw: *mut bindings::ib_mw,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: a zeroed container of our size, with its device, PD and
        // type set by the core.
        unsafe {
            let (rkey, data) = T::alloc_mw(
                dev_of::<T>((*mw).device),
                (*mw).pd as usize,
                MwType::from_raw((*mw).type_),
            )?;
            (*mw).rkey = rkey;
            put::<_, T::Mw>(mw, data);
        }
        Ok(0)
    })
}

/// The `dealloc_mw` op of `ib_device_ops`.
///
/// # Safety
///
/// Called only by the RDMA core, with live objects of this driver's
/// devices and pointers valid for the call (the core's verbs contract).
unsafe extern "C" fn dealloc_mw<T: IbDriver>(mw: *mut bindings::ib_mw) -> kernel::ffi::c_int {
    // SAFETY: created by `alloc_mw`; the core frees it once, unused.
    unsafe {
        T::dealloc_mw(dev_of::<T>((*mw).device), Mw::<T::Mw>::from_raw(mw));
        drop_data::<_, T::Mw>(mw);
    }
    0
}

/// Where an address handle or a connected QP sends to, as RoCE addresses it.
#[derive(Clone, Copy, Default)]
#[allow(dead_code)] // The data path addresses packets with it.
pub(crate) struct AddressVector {
    /// Destination GID (an IPv4-mapped or IPv6 address).
    pub(crate) dgid: [u8; 16],
    /// Source GID (the local address), from the GID table entry.
    pub(crate) sgid: [u8; 16],
    /// Index of the source GID in the port's table.
    pub(crate) sgid_index: u8,
    /// Destination MAC the core resolved, if any.
    pub(crate) dmac: [u8; 6],
    /// IP TTL / hop limit.
    pub(crate) hop_limit: u8,
    /// IP traffic class (DSCP + ECN bits).
    pub(crate) traffic_class: u8,
    /// IPv6 flow label.
    pub(crate) flow_label: u32,
    /// Port (plane) number.
    pub(crate) port: u32,
}

impl AddressVector {
    /// Reads the RoCE address out of an `rdma_ah_attr`.
    pub(crate) fn from_attr(attr: &AhAttr) -> Self {
        let grh = &attr.grh;
        // SAFETY: `ib_gid` is a union of byte views of the same 16 bytes, and
        // for RoCE attributes (ours: the port is RoCE) the `roce` member of
        // the address union is the one the core fills. `sgid_attr` is NULL
        // or a GID entry the core holds for the duration of the call.
        unsafe {
            let mut av = Self {
                dgid: grh.dgid.raw,
                sgid_index: grh.sgid_index,
                dmac: attr.__bindgen_anon_1.roce.dmac,
                hop_limit: grh.hop_limit,
                traffic_class: grh.traffic_class,
                flow_label: grh.flow_label,
                port: attr.port_num,
                ..Default::default()
            };
            if let Some(gid) = grh.sgid_attr.as_ref() {
                av.sgid = gid.gid.raw;
            }
            av
        }
    }
}

/// An SRQ's attributes (`struct ib_srq_attr`): what `create_srq` is asked
/// for and grants, and what `query_srq` reports.
pub(crate) type SrqAttr = bindings::ib_srq_attr;

/// What `create_srq` is given (`struct ib_srq_init_attr`).
pub(crate) type SrqInitAttr = bindings::ib_srq_init_attr;

impl SrqInitAttr {
    /// Whether the SRQ asked for is a basic one (`IB_SRQT_BASIC`: no XRC,
    /// no tag matching).
    pub(crate) fn is_basic(&self) -> bool {
        self.srq_type == bindings::ib_srq_type_IB_SRQT_BASIC
    }
}

/// A `modify_srq` request (`struct ib_srq_attr` and its `IB_SRQ_*` mask),
/// read into the attributes the mask names.
#[derive(Clone, Copy)]
pub(crate) struct SrqModify {
    /// `IB_SRQ_MAX_WR`: a new size.
    pub(crate) max_wr: Option<u32>,
    /// `IB_SRQ_LIMIT`: the limit that arms the SRQ's limit event.
    pub(crate) limit: Option<u32>,
}

impl SrqModify {
    /// Reads the attributes of `attr` that `mask` names.
    fn from_raw(attr: &SrqAttr, mask: u32) -> Self {
        let given = |bit: u32| mask & bit != 0;
        Self {
            max_wr: given(bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR).then_some(attr.max_wr),
            limit: given(bindings::ib_srq_attr_mask_IB_SRQ_LIMIT).then_some(attr.srq_limit),
        }
    }
}

/// A kernel consumer's completion slot of `poll_cq` (`struct ib_wc`).
pub(crate) type Wc = bindings::ib_wc;

/// Writes completion `c` of the QP whose `ib_qp` is at `qp_addr` into `wc`,
/// reported on port `port`. A completion with a GRH area has an IPv4
/// header in it, or an IPv6 one with `WcFlags::GRH_IPV6`, which becomes
/// `network_hdr_type` (what `ib_init_ah_attr_from_wc` reads).
pub(crate) fn fill_wc(wc: &mut Wc, c: &Completion, qp_addr: u64, port: u32) {
    *wc = Wc::default();
    wc.__bindgen_anon_1.wr_id = c.wr_id;
    wc.status = c.status;
    wc.opcode = c.opcode;
    wc.byte_len = c.byte_len;
    wc.ex.imm_data = c.ex;
    wc.qp = qp_addr as usize as *mut bindings::ib_qp;
    wc.src_qp = c.src_qp;
    wc.wc_flags = (c.wc_flags & !WcFlags::GRH_IPV6) as i32;
    if c.wc_flags & bindings::ib_wc_flags_IB_WC_GRH != 0 {
        wc.network_hdr_type = if c.wc_flags & WcFlags::GRH_IPV6 != 0 {
            bindings::rdma_network_type_RDMA_NETWORK_IPV6
        } else {
            bindings::rdma_network_type_RDMA_NETWORK_IPV4
        } as u8;
        wc.wc_flags |= bindings::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE as i32;
    }
    wc.port_num = port;
}

/// A `modify_qp` request (`struct ib_qp_attr` and its `IB_QP_*` mask),
/// read into the attributes the mask names: `None` for each one it leaves
/// alone. A state or MTU given with a value its type does not name is
/// `Some(Err(value))`, for the driver to refuse.
#[derive(Clone, Copy)]
pub(crate) struct QpModify {
    /// The `IB_QP_*` mask as given (the core's transition table reads it).
    pub(crate) mask: u32,
    /// `IB_QP_CUR_STATE`: the state the consumer believes the QP is in.
    pub(crate) cur_state: Option<core::result::Result<QpState, u32>>,
    /// `IB_QP_STATE`: the state to go to.
    pub(crate) state: Option<core::result::Result<QpState, u32>>,
    /// `IB_QP_PORT`.
    pub(crate) port_num: Option<u32>,
    /// `IB_QP_PKEY_INDEX`.
    pub(crate) pkey_index: Option<u16>,
    /// `IB_QP_MAX_QP_RD_ATOMIC`: READs and atomics this side may have
    /// outstanding.
    pub(crate) max_rd_atomic: Option<u8>,
    /// `IB_QP_MAX_DEST_RD_ATOMIC`: READs and atomics the peer may have
    /// outstanding here.
    pub(crate) max_dest_rd_atomic: Option<u8>,
    /// `IB_QP_PATH_MTU`.
    pub(crate) path_mtu: Option<core::result::Result<Mtu, u32>>,
    /// `IB_QP_QKEY`.
    pub(crate) qkey: Option<u32>,
    /// `IB_QP_RQ_PSN`, as given.
    pub(crate) rq_psn: Option<u32>,
    /// `IB_QP_SQ_PSN`, as given.
    pub(crate) sq_psn: Option<u32>,
    /// `IB_QP_DEST_QPN`, as given.
    pub(crate) dest_qp_num: Option<u32>,
    /// `IB_QP_ACCESS_FLAGS`.
    pub(crate) access: Option<AccessFlags>,
    /// `IB_QP_AV`: the peer's address.
    pub(crate) av: Option<AddressVector>,
    /// `IB_QP_MIN_RNR_TIMER`.
    pub(crate) min_rnr_timer: Option<u8>,
    /// `IB_QP_TIMEOUT`.
    pub(crate) timeout: Option<u8>,
    /// `IB_QP_RETRY_CNT`.
    pub(crate) retry_cnt: Option<u8>,
    /// `IB_QP_RNR_RETRY`.
    pub(crate) rnr_retry: Option<u8>,
}

impl QpModify {
    /// Reads the attributes of `attr` that `mask` names.
    fn from_raw(attr: &bindings::ib_qp_attr, mask: u32) -> Self {
        let given = |bit: u32| mask & bit != 0;
        let state = |v: u32| QpState::from_raw(v).ok_or(v);
        Self {
            mask,
            cur_state: given(bindings::ib_qp_attr_mask_IB_QP_CUR_STATE)
                .then(|| state(attr.cur_qp_state)),
            state: given(bindings::ib_qp_attr_mask_IB_QP_STATE).then(|| state(attr.qp_state)),
            port_num: given(bindings::ib_qp_attr_mask_IB_QP_PORT).then_some(attr.port_num),
            pkey_index: given(bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX)
                .then_some(attr.pkey_index),
            max_rd_atomic: given(bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC)
                .then_some(attr.max_rd_atomic),
            max_dest_rd_atomic: given(bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC)
                .then_some(attr.max_dest_rd_atomic),
            path_mtu: given(bindings::ib_qp_attr_mask_IB_QP_PATH_MTU)
                .then(|| Mtu::from_raw(attr.path_mtu).ok_or(attr.path_mtu)),
            qkey: given(bindings::ib_qp_attr_mask_IB_QP_QKEY).then_some(attr.qkey),
            rq_psn: given(bindings::ib_qp_attr_mask_IB_QP_RQ_PSN).then_some(attr.rq_psn),
            sq_psn: given(bindings::ib_qp_attr_mask_IB_QP_SQ_PSN).then_some(attr.sq_psn),
            dest_qp_num: given(bindings::ib_qp_attr_mask_IB_QP_DEST_QPN)
                .then_some(attr.dest_qp_num),
            access: given(bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS)
                .then(|| AccessFlags::from_raw(attr.qp_access_flags as u32)),
            av: given(bindings::ib_qp_attr_mask_IB_QP_AV)
                .then(|| AddressVector::from_attr(&attr.ah_attr)),
            min_rnr_timer: given(bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER)
                .then_some(attr.min_rnr_timer),
            timeout: given(bindings::ib_qp_attr_mask_IB_QP_TIMEOUT).then_some(attr.timeout),
            retry_cnt: given(bindings::ib_qp_attr_mask_IB_QP_RETRY_CNT).then_some(attr.retry_cnt),
            rnr_retry: given(bindings::ib_qp_attr_mask_IB_QP_RNR_RETRY).then_some(attr.rnr_retry),
        }
    }
}

/// Whether the core's QP state machine allows `cur -> next` for this QP type
/// with the attributes in `mask`.
pub(crate) fn modify_qp_is_ok(cur: QpState, next: QpState, qp_type: QpType, mask: u32) -> bool {
    // SAFETY: a pure table lookup in the core.
    unsafe { bindings::ib_modify_qp_is_ok(cur.raw(), next.raw(), qp_type.raw(), mask) }
}

/// A kernel consumer's send work request, read out of the core's
/// `ib_send_wr` and the opcode-specific struct around it.
pub(crate) struct SendWr<'a, A> {
    /// The consumer's id.
    pub(crate) wr_id: u64,
    /// `IB_WR_*`.
    pub(crate) opcode: u32,
    /// `IB_SEND_*`.
    pub(crate) send_flags: u32,
    /// Immediate data or the rkey to invalidate.
    pub(crate) ex: u32,
    /// Local data.
    pub(crate) sges: &'a [KernelSge],
    /// RDMA target (READ/WRITE): remote address and key.
    pub(crate) rdma: Option<(u64, u32)>,
    /// Atomic target and operands (CMP_AND_SWP, FETCH_AND_ADD).
    pub(crate) atomic: Option<AtomicTarget>,
    /// UD target: the AH, remote QPN and Q_Key.
    pub(crate) ud: Option<(&'a Ah<A>, u32, u32)>,
    /// `IB_WR_REG_MR`: what to register.
    pub(crate) reg: Option<RegWr>,
}

/// An `IB_WR_REG_MR` work request: register the region whose key is
/// `region_key` (its index) over `[iova, iova + length)` (what
/// `ib_map_mr_sg` mapped) under `new_key` with `access`.
#[derive(Clone, Copy)]
pub(crate) struct RegWr {
    pub(crate) region_key: u32,
    pub(crate) new_key: u32,
    pub(crate) access: u32,
    pub(crate) iova: u64,
    pub(crate) length: u64,
}

/// The remote side of a kernel consumer's atomic (`struct ib_atomic_wr`).
#[derive(Clone, Copy)]
pub(crate) struct AtomicTarget {
    /// Address of the 8 bytes.
    pub(crate) remote_addr: u64,
    /// Compare value or addend.
    pub(crate) compare_add: u64,
    /// Swap value.
    pub(crate) swap: u64,
    /// Remote key.
    pub(crate) rkey: u32,
}

/// A send work request the core handed to `post_send` of a QP of the driver
/// whose AH data type is `A`.
///
/// # Invariants
///
/// `raw` is valid for `'a` and follows the core's verbs contract: `sg_list`
/// holds `num_sge` entries; RDMA opcodes come inside an `ib_rdma_wr`,
/// atomics inside an `ib_atomic_wr`, REG_MR inside an `ib_reg_wr` naming a
/// live MR, and sends on UD/GSI QPs
/// inside an `ib_ud_wr` whose AH (if not NULL) is one of this driver's with
/// data `A`, alive for the call.
pub(crate) struct KernelSendWr<'a, A> {
    raw: &'a bindings::ib_send_wr,
    _ah: PhantomData<A>,
}

impl<'a, A> KernelSendWr<'a, A> {
    /// # Safety
    ///
    /// `raw` must be a work request the core passed to this driver's
    /// `post_send` for a QP whose AHs carry data `A`, valid for `'a`.
    unsafe fn from_raw(raw: &'a bindings::ib_send_wr) -> Self {
        // INVARIANT: the caller's guarantee.
        Self {
            raw,
            _ah: PhantomData,
        }
    }

    /// Reads the request for a QP of type `qp_type`.
    pub(crate) fn read(&self, qp_type: QpType) -> Result<SendWr<'a, A>> {
        let wr = self.raw;
        let num = usize::try_from(wr.num_sge).map_err(|_| EINVAL)?;
        if num > 0 && wr.sg_list.is_null() {
            return Err(EINVAL);
        }
        let ud_type = qp_type.is_datagram();
        // SAFETY: by the type invariants: `sg_list` holds `num_sge` entries,
        // the opcode-specific outer structs are what the core passed, the AH
        // is this driver's with data `A`; `wr_id` is the union member
        // consumers set (`wr_cqe` users get their cqe pointer back as the same
        // bits).
        unsafe {
            let sges = if num == 0 {
                &[][..]
            } else {
                core::slice::from_raw_parts(wr.sg_list, num)
            };
            let rdma = match wr.opcode {
                bindings::ib_wr_opcode_IB_WR_RDMA_WRITE
                | bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
                | bindings::ib_wr_opcode_IB_WR_RDMA_READ => {
                    let r = &*(wr as *const bindings::ib_send_wr).cast::<bindings::ib_rdma_wr>();
                    Some((r.remote_addr, r.rkey))
                }
                _ => None,
            };
            let reg = if wr.opcode == bindings::ib_wr_opcode_IB_WR_REG_MR {
                let r = &*(wr as *const bindings::ib_send_wr).cast::<bindings::ib_reg_wr>();
                let mr = r.mr.as_ref().ok_or(EINVAL)?;
                Some(RegWr {
                    region_key: mr.lkey,
                    new_key: r.key,
                    access: r.access as u32,
                    iova: mr.iova,
                    length: mr.length,
                })
            } else {
                None
            };
            let atomic = match wr.opcode {
                bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
                | bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
                    let a = &*(wr as *const bindings::ib_send_wr).cast::<bindings::ib_atomic_wr>();
                    Some(AtomicTarget {
                        remote_addr: a.remote_addr,
                        compare_add: a.compare_add,
                        swap: a.swap,
                        rkey: a.rkey,
                    })
                }
                _ => None,
            };
            let ud = if ud_type {
                let u = &*(wr as *const bindings::ib_send_wr).cast::<bindings::ib_ud_wr>();
                if u.ah.is_null() {
                    return Err(EINVAL);
                }
                let ah = Ah::<A>::from_raw(u.ah);
                Some((ah, u.remote_qpn, u.remote_qkey))
            } else {
                None
            };
            Ok(SendWr {
                wr_id: wr.__bindgen_anon_1.wr_id,
                opcode: wr.opcode,
                send_flags: wr.send_flags as u32,
                ex: wr.ex.imm_data,
                sges,
                rdma,
                atomic,
                ud,
                reg,
            })
        }
    }
}

/// A receive work request the core handed to `post_recv` or
/// `post_srq_recv` of this driver.
///
/// # Invariants
///
/// `raw` is valid for `'a` and its `sg_list` holds `num_sge` entries.
pub(crate) struct KernelRecvWr<'a> {
    raw: &'a bindings::ib_recv_wr,
}

impl<'a> KernelRecvWr<'a> {
    /// # Safety
    ///
    /// `raw` must be a work request the core passed to this driver's
    /// `post_recv` or `post_srq_recv`, valid for `'a`.
    unsafe fn from_raw(raw: &'a bindings::ib_recv_wr) -> Self {
        // INVARIANT: the caller's guarantee.
        Self { raw }
    }

    /// The consumer's id and the SGEs.
    pub(crate) fn read(&self) -> Result<(u64, &'a [KernelSge])> {
        let wr = self.raw;
        let num = usize::try_from(wr.num_sge).map_err(|_| EINVAL)?;
        if num > 0 && wr.sg_list.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: `sg_list` holds `num_sge` entries (type invariant);
        // `wr_id` is the same bits whichever union member the consumer set.
        unsafe {
            let sges = if num == 0 {
                &[][..]
            } else {
                core::slice::from_raw_parts(wr.sg_list, num)
            };
            Ok((wr.__bindgen_anon_1.wr_id, sges))
        }
    }
}
