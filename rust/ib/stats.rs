// SPDX-License-Identifier: GPL-2.0

//! Per-port hardware counters through the core's hw-stats interface
//! (`rdma statistic show link DEV/PORT`, `/sys/class/infiniband/DEV/ports/
//! PORT/hw_counters`).

use kernel::prelude::*;

use super::device::{Device, IbDriver};
use super::sys::bindings;
use super::verbs::Qp;

/// The name of one counter (a `struct rdma_stat_desc`), in a static table
/// that the core keeps pointing to.
#[repr(transparent)]
pub(crate) struct StatDesc(bindings::rdma_stat_desc);

// SAFETY: a descriptor is immutable and points to a static string.
unsafe impl Sync for StatDesc {}

impl StatDesc {
    /// A counter named `name`.
    pub(crate) const fn new(name: &'static CStr) -> Self {
        Self(bindings::rdma_stat_desc {
            name: name.as_char_ptr(),
            flags: 0,
            priv_: core::ptr::null(),
        })
    }
}

/// `ops.alloc_hw_port_stats`: a stats struct over `T::PORT_STATS`.
///
/// # Safety
///
/// Called by the core with a live device of driver `T`.
pub(super) unsafe extern "C" fn alloc_hw_port_stats<T: IbDriver>(
    _dev: *mut bindings::ib_device,
    _port: u32,
) -> *mut bindings::rdma_hw_stats {
    let Ok(n) = i32::try_from(T::PORT_STATS.len()) else {
        return core::ptr::null_mut();
    };
    // SAFETY: the descriptor table is static (it outlives every stats
    // struct) and has `n` entries; `StatDesc` is a transparent wrapper.
    unsafe {
        bindings::rdma_alloc_hw_stats_struct(
            T::PORT_STATS.as_ptr().cast(),
            n,
            bindings::RDMA_HW_STATS_DEFAULT_LIFESPAN as kernel::ffi::c_ulong,
        )
    }
}

/// `ops.get_hw_stats`: fills every counter, returns how many.
///
/// # Safety
///
/// Called by the core (holding `stats->lock`) with a live device of driver
/// `T` whose data is initialised and a stats struct made by
/// [`alloc_hw_port_stats`].
pub(super) unsafe extern "C" fn get_hw_stats<T: IbDriver>(
    dev: *mut bindings::ib_device,
    stats: *mut bindings::rdma_hw_stats,
    port: u32,
    _index: kernel::ffi::c_int,
) -> kernel::ffi::c_int {
    // SAFETY: `stats` is valid and its lock is held by the caller, so we
    // have exclusive use of `value[..num_counters]`.
    let values = unsafe {
        let n = usize::try_from((*stats).num_counters).unwrap_or(0);
        (*stats).value.as_mut_slice(n)
    };
    let n = values.len().min(T::PORT_STATS.len());
    // SAFETY: a live device of driver `T` (caller's guarantee).
    let dev = unsafe { Device::<T::Data>::from_raw(dev) };
    if let Some(values) = values.get_mut(..n) {
        T::port_stats(dev, port, values);
    }
    n as kernel::ffi::c_int
}

/// `ops.counter_alloc_stats`: a stats struct over all port counters (the
/// core sums counter objects into the port's by index, over the port's
/// count), with those not counted per QP disabled (not shown).
///
/// # Safety
///
/// Called by the core with a counter object of one of driver `T`'s devices.
pub(super) unsafe extern "C" fn counter_alloc_stats<T: IbDriver>(
    _counter: *mut bindings::rdma_counter,
) -> *mut bindings::rdma_hw_stats {
    let descs = T::PORT_STATS;
    let Ok(n) = i32::try_from(descs.len()) else {
        return core::ptr::null_mut();
    };
    // SAFETY: the descriptor table is static and has `n` entries;
    // `StatDesc` is a transparent wrapper.
    let stats = unsafe {
        bindings::rdma_alloc_hw_stats_struct(
            descs.as_ptr().cast(),
            n,
            bindings::RDMA_HW_STATS_DEFAULT_LIFESPAN as kernel::ffi::c_ulong,
        )
    };
    if stats.is_null() {
        return stats;
    }
    const BITS: usize = core::mem::size_of::<kernel::ffi::c_ulong>() * 8;
    for i in T::QP_STATS..descs.len() {
        // SAFETY: the struct was just allocated with a zeroed bitmap of at
        // least `n` bits; nobody else sees it yet.
        unsafe { *(*stats).is_disabled.add(i / BITS) |= 1 << (i % BITS) };
    }
    stats
}

/// `ops.counter_update_stats`: reads a counter object's values.
///
/// # Safety
///
/// Called by the core (holding the counter's lock) with a counter object
/// of a live device of driver `T` whose stats come from
/// [`counter_alloc_stats`].
pub(super) unsafe extern "C" fn counter_update_stats<T: IbDriver>(
    counter: *mut bindings::rdma_counter,
) -> kernel::ffi::c_int {
    // SAFETY: the counter, its device and its stats are valid for the call;
    // the counter's lock gives us exclusive use of the values.
    unsafe {
        let stats = (*counter).stats;
        if stats.is_null() {
            return EINVAL.to_errno();
        }
        let n = usize::try_from((*stats).num_counters).unwrap_or(0);
        let values = (*stats).value.as_mut_slice(n);
        T::counter_stats(
            Device::<T::Data>::from_raw((*counter).device),
            (*counter).id,
            values,
        );
    }
    0
}

/// `ops.counter_bind_qp`: binds a QP to a counter object, which the driver
/// creates if its id is still 0.
///
/// # Safety
///
/// Called by the core (holding the counter's lock) with a counter object
/// and a live QP of one of driver `T`'s devices; the QP is not bound.
pub(super) unsafe extern "C" fn counter_bind_qp<T: IbDriver>(
    counter: *mut bindings::rdma_counter,
    qp: *mut bindings::ib_qp,
) -> kernel::ffi::c_int {
    // SAFETY: both objects are valid for the call; the core reads
    // `counter->id` and `qp->counter` back after a successful bind, as the
    // driver sets them.
    unsafe {
        let dev = Device::<T::Data>::from_raw((*qp).device);
        match T::counter_bind_qp(dev, (*counter).id, Qp::<T::Qp>::from_raw(qp)) {
            Ok(id) => {
                (*counter).id = id;
                (*qp).counter = counter;
                0
            }
            Err(e) => e.to_errno(),
        }
    }
}

/// `ops.counter_unbind_qp`: the QP leaves its counter object.
///
/// # Safety
///
/// Called by the core (holding the counter's lock) with a live QP of one
/// of driver `T`'s devices that is bound to a counter object.
pub(super) unsafe extern "C" fn counter_unbind_qp<T: IbDriver>(
    qp: *mut bindings::ib_qp,
) -> kernel::ffi::c_int {
    // SAFETY: a live QP of ours; the core expects `qp->counter` cleared.
    unsafe {
        match T::counter_unbind_qp(Qp::<T::Qp>::from_raw(qp)) {
            Ok(()) => {
                (*qp).counter = core::ptr::null_mut();
                0
            }
            Err(e) => e.to_errno(),
        }
    }
}

/// `ops.counter_dealloc`: the counter object's last QP left.
///
/// # Safety
///
/// Called by the core once per counter object, with a live device of
/// driver `T`.
pub(super) unsafe extern "C" fn counter_dealloc<T: IbDriver>(
    counter: *mut bindings::rdma_counter,
) -> kernel::ffi::c_int {
    // SAFETY: the counter and its device are valid for the call.
    unsafe {
        T::counter_dealloc(
            Device::<T::Data>::from_raw((*counter).device),
            (*counter).id,
        )
    };
    0
}
