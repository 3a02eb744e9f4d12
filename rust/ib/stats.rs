// SPDX-License-Identifier: GPL-2.0

//! Per-port hardware counters through the core's hw-stats interface
//! (`rdma statistic show link DEV/PORT`, `/sys/class/infiniband/DEV/ports/
//! PORT/hw_counters`).

use kernel::prelude::*;

use super::device::{Device, IbDriver};
use crate::sys::bindings;

/// The name of one counter (a `struct rdma_stat_desc`), in a static table
/// that the core keeps pointing to.
#[repr(transparent)]
pub(crate) struct StatDesc(bindings::rdma_stat_desc);

// SAFETY: a descriptor is immutable and points to a static string.
unsafe impl Sync for StatDesc {}

impl StatDesc {
    /// A counter named `name`.
    pub(crate) const fn new(name: &'static CStr) -> Self {
        Self(bindings::rdma_stat_desc { name: name.as_char_ptr(), flags: 0, priv_: core::ptr::null() })
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
