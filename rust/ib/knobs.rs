// SPDX-License-Identifier: GPL-2.0

//! The knobs' kernel interfaces (`rust/engine/src/knobs.rs`): a module
//! parameter each, the value new devices start from, and a file each in
//! every device's `metaroce` directory,
//! `/sys/class/infiniband/<dev>/metaroce/<knob>`, the value of that
//! device's new QPs.
//!
//! Both are declared in C (`rust/sys/knobs.c`: `module_param_cb` and
//! `__ATTR` are macros); their callbacks are here and find the knob by the
//! parameter's or the file's name. The files are an attribute group the
//! core adds to the device when it registers it (`ib_device_ops`'s
//! `device_group`) and removes, waiting for running callbacks, before the
//! device's data is dropped.
//!
//! C calls the callbacks by name, so they cannot be generic: they reach
//! [`Driver`], the module's one [`IbDriver`] (as `device.rs` assumes of
//! every device with our driver id).

use core::fmt::{self, Write};

use kernel::ffi::{c_char, c_int};
use kernel::prelude::*;

use super::device::{Device, IbDriver};
use super::sys::bindings;
use crate::engine::knobs::Knob;

/// What a driver keeps of the knobs.
pub(crate) trait KnobDriver: IbDriver {
    /// Sets the default of `knob` for new devices from a module
    /// parameter's text. Runs while the module loads, before its `init`.
    fn set_default(knob: Knob, text: &[u8]) -> Result;
    /// The default of `knob` for new devices.
    fn default_value(knob: Knob) -> u64;
    /// `knob`'s value on `dev`.
    fn value(dev: &Device<Self::Data>, knob: Knob) -> u64;
    /// Sets `knob` on `dev` from the text written to its file. Process
    /// context.
    fn set_value(dev: &Device<Self::Data>, knob: Knob, text: &[u8]) -> Result;
}

/// The module's driver, whose knobs the callbacks reach.
type Driver = crate::driver::device::MetaRoceDevice;

/// The attribute group of the knob files (`ib_device_ops::device_group`).
pub(super) fn device_group() -> *const bindings::attribute_group {
    // SAFETY: returns the address of a static group; no arguments.
    unsafe { bindings::metaroce_helper_knob_group() }
}

/// The knob named `name` (a parameter's or a file's name, both from
/// `knobs.c`'s static strings).
///
/// # Safety
///
/// `name` must be a valid NUL-terminated string for the call.
unsafe fn knob_named(name: *const c_char) -> Result<Knob> {
    if name.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: a valid C string (caller).
    let name = unsafe { CStr::from_char_ptr(name) };
    // An unknown name means knobs.c and the engine's table differ (the
    // host test `knob_docs.rs` keeps them equal).
    name.to_str().ok().and_then(Knob::from_name).ok_or(EINVAL)
}

/// Writes `value` and a newline into `buf` (the core's page for a sysfs
/// read or a parameter's value); returns the length written.
fn emit(buf: &mut [u8], value: u64) -> Result<usize> {
    let mut out = Cursor { buf, len: 0 };
    writeln!(out, "{value}").map_err(|_| EINVAL)?;
    Ok(out.len)
}

/// A `fmt::Write` into a byte buffer, failing when it is full.
struct Cursor<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl Write for Cursor<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        let dst = self.buf.get_mut(self.len..end).ok_or(fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// The length of the buffer the core hands a sysfs `show` or a
/// parameter's `get` (`PAGE_SIZE`).
const PAGE: usize = kernel::page::PAGE_SIZE;

/// `kernel_param_ops::set`: a module parameter given at load.
///
/// # Safety
///
/// Called by the module loader with `kp` one of `knobs.c`'s parameters and
/// `val` NULL or a NUL-terminated string, both valid for the call.
#[no_mangle]
unsafe extern "C" fn metaroce_knob_param_set(
    val: *const c_char,
    kp: *const bindings::kernel_param,
) -> c_int {
    kernel::error::from_result(|| {
        // SAFETY: `kp` is valid for the call and its name a static string
        // (caller).
        let knob = unsafe { knob_named((*kp).name) }?;
        if val.is_null() {
            // `metaroce initial_paths` without a value.
            return Err(EINVAL);
        }
        // SAFETY: a NUL-terminated string, valid for the call (caller).
        let text = unsafe { CStr::from_char_ptr(val) };
        Driver::set_default(knob, text.as_bytes())?;
        Ok(0)
    })
}

/// `kernel_param_ops::get`: `/sys/module/metaroce/parameters/<knob>`.
///
/// # Safety
///
/// Called by the parameters' sysfs code with `kp` one of `knobs.c`'s
/// parameters and `buf` a page the call may fill.
#[no_mangle]
unsafe extern "C" fn metaroce_knob_param_get(
    buf: *mut c_char,
    kp: *const bindings::kernel_param,
) -> c_int {
    kernel::error::from_result(|| {
        // SAFETY: as in `metaroce_knob_param_set`.
        let knob = unsafe { knob_named((*kp).name) }?;
        // SAFETY: a page of ours for this call (caller).
        let buf = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), PAGE) };
        let len = emit(buf, Driver::default_value(knob))?;
        Ok(len as c_int)
    })
}

/// The device of a knob file and the file's knob.
///
/// # Safety
///
/// `dev` and `attr` must be what sysfs hands a callback of `knobs.c`'s
/// group: the `struct device` of one of our registered `ib_device`s and
/// one of the group's attributes.
unsafe fn file_of<'a>(
    dev: *mut bindings::device,
    attr: *mut bindings::device_attribute,
) -> Result<(&'a Device<<Driver as IbDriver>::Data>, Knob)> {
    // SAFETY: `attr` is one of our static attributes, whose name is a
    // static string (caller).
    let knob = unsafe { knob_named((*attr).attr.name) }?;
    // SAFETY: `dev` is the device embedded in an `ib_device` (caller).
    let ib = unsafe { bindings::metaroce_helper_rdma_device_to_ibdev(dev) };
    // SAFETY: the group is installed only on our devices, all made by
    // `NewDevice::<Driver>::new` (caller, module doc), whose data is
    // initialised before registration and dropped only after the core
    // removed the files and waited for their callbacks.
    Ok((unsafe { Device::from_raw(ib) }, knob))
}

/// `device_attribute::show`: reading a knob file.
///
/// # Safety
///
/// Called by sysfs for an attribute of `knobs.c`'s group, with the
/// device's `struct device` and a page `buf` the call may fill.
#[no_mangle]
unsafe extern "C" fn metaroce_knob_show(
    dev: *mut bindings::device,
    attr: *mut bindings::device_attribute,
    buf: *mut c_char,
) -> isize {
    // SAFETY: sysfs' arguments (caller).
    let r = unsafe { file_of(dev, attr) }.and_then(|(dev, knob)| {
        // SAFETY: a page of ours for this call (caller).
        let buf = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), PAGE) };
        emit(buf, Driver::value(dev, knob))
    });
    match r {
        Ok(len) => len as isize,
        Err(e) => e.to_errno() as isize,
    }
}

/// `device_attribute::store`: writing a knob file.
///
/// # Safety
///
/// Called by sysfs for an attribute of `knobs.c`'s group, with the
/// device's `struct device` and the `count` bytes written at `buf`.
#[no_mangle]
unsafe extern "C" fn metaroce_knob_store(
    dev: *mut bindings::device,
    attr: *mut bindings::device_attribute,
    buf: *const c_char,
    count: usize,
) -> isize {
    // SAFETY: sysfs' arguments (caller).
    let r = unsafe { file_of(dev, attr) }.and_then(|(dev, knob)| {
        // SAFETY: `count` bytes at `buf`, valid for the call (caller).
        let text = unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), count) };
        Driver::set_value(dev, knob, text)
    });
    match r {
        Ok(()) => count as isize,
        Err(e) => e.to_errno() as isize,
    }
}
