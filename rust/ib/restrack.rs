// SPDX-License-Identifier: GPL-2.0

//! Driver details of a resource in `rdma resource show qp -dd` (and its
//! JSON form, `-j`): the name/value pairs a driver adds to the core's
//! restrack entry of one QP, inside its `RDMA_NLDEV_ATTR_DRIVER` table.
//!
//! The entry is one netlink message whose room the core chose (a page for
//! one QP, more for a dump), so a driver with much to say writes it in
//! groups: a group is kept whole or not at all, and [`Details::group`] says
//! when there was no room for it.

use core::fmt::{self, Write};
use core::marker::PhantomData;

use kernel::prelude::*;

use super::device::IbDriver;
use super::emsgsize;
use super::sys::bindings;
use super::verbs::Qp;

/// Longest attribute name, NUL included (iproute2 prints them as they are).
const NAME_MAX: usize = 32;

/// The driver table of one restrack entry being written.
///
/// # Invariants
///
/// `msg` is the netlink message the core is filling for this entry, valid
/// and used only by us for `'a` (the core's fill callback runs in process
/// context with the message not yet sent); `table` is the open
/// `RDMA_NLDEV_ATTR_DRIVER` nest inside it.
pub(crate) struct Details<'a> {
    msg: *mut bindings::sk_buff,
    table: *mut bindings::nlattr,
    _msg: PhantomData<&'a mut bindings::sk_buff>,
}

/// An attribute name formatted into a NUL-terminated buffer.
struct Name {
    buf: [u8; NAME_MAX],
    len: usize,
}

impl Write for Name {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        // Keep one byte for the NUL.
        if end >= NAME_MAX || s.bytes().any(|b| b == 0) {
            return Err(fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl Name {
    /// `name` formatted; EINVAL if it is longer than [`NAME_MAX`] - 1
    /// bytes (a driver bug, reported rather than cut).
    fn new(name: fmt::Arguments<'_>) -> Result<Self> {
        let mut n = Name {
            buf: [0; NAME_MAX],
            len: 0,
        };
        n.write_fmt(name).map_err(|_| EINVAL)?;
        Ok(n)
    }

    fn as_ptr(&self) -> *const kernel::ffi::c_char {
        // The buffer was zeroed and `len < NAME_MAX`: NUL-terminated.
        self.buf.as_ptr().cast()
    }
}

/// Maps the core's `-EMSGSIZE` (its only failure) to a `Result`.
fn put_result(rc: kernel::ffi::c_int) -> Result {
    if rc == 0 {
        Ok(())
    } else {
        Err(emsgsize())
    }
}

impl Details<'_> {
    /// Adds `name = value` (printed in decimal).
    pub(crate) fn u32(&mut self, name: fmt::Arguments<'_>, value: u32) -> Result {
        let name = Name::new(name)?;
        // SAFETY: `msg` is ours to write (type invariant); the core copies
        // the NUL-terminated name into the message.
        put_result(unsafe { bindings::rdma_nl_put_driver_u32(self.msg, name.as_ptr(), value) })
    }

    /// Adds `name = value` (printed in decimal).
    pub(crate) fn u64(&mut self, name: fmt::Arguments<'_>, value: u64) -> Result {
        let name = Name::new(name)?;
        // SAFETY: as in `u32`.
        put_result(unsafe { bindings::rdma_nl_put_driver_u64(self.msg, name.as_ptr(), value) })
    }

    /// Adds `name = value`, a short word such as a state's name.
    pub(crate) fn str(&mut self, name: fmt::Arguments<'_>, value: &CStr) -> Result {
        let name = Name::new(name)?;
        // SAFETY: as in `u32`; `value` is NUL-terminated and copied.
        put_result(unsafe {
            bindings::rdma_nl_put_driver_string(self.msg, name.as_ptr(), value.as_char_ptr())
        })
    }

    /// Writes the attributes `write` adds as one group: if the message has
    /// no room for all of them, none is kept and EMSGSIZE is returned, so
    /// the entry never ends in half a group.
    pub(crate) fn group(&mut self, write: impl FnOnce(&mut Self) -> Result) -> Result {
        // SAFETY: `msg` is valid (type invariant).
        let mark = unsafe { bindings::metaroce_helper_skb_tail(self.msg) };
        let r = write(self);
        if r.is_err() {
            // SAFETY: `mark` is this message's tail before the group, so
            // trimming back to it removes exactly the group's attributes.
            unsafe { bindings::metaroce_helper_nlmsg_trim(self.msg, mark.cast()) };
        }
        r
    }
}

/// `ops.fill_res_qp_entry`: the driver table of one QP's restrack entry.
///
/// # Safety
///
/// Called by the core's netlink handler in process context with the message
/// it is filling and a live QP of driver `T`.
pub(super) unsafe extern "C" fn fill_res_qp_entry<T: IbDriver>(
    msg: *mut bindings::sk_buff,
    qp: *mut bindings::ib_qp,
) -> kernel::ffi::c_int {
    // SAFETY: `msg` is the message being filled (caller).
    let table = unsafe {
        bindings::metaroce_helper_nla_nest_start(
            msg,
            bindings::rdma_nldev_attr_RDMA_NLDEV_ATTR_DRIVER as i32,
        )
    };
    if table.is_null() {
        return emsgsize().to_errno();
    }
    // INVARIANT: the caller's message, with the table just opened.
    let mut details = Details {
        msg,
        table,
        _msg: PhantomData,
    };
    // SAFETY: a live QP of driver `T` (caller).
    let r = T::qp_details(unsafe { Qp::<T::Qp>::from_raw(qp) }, &mut details);
    match r {
        Ok(()) => {
            // SAFETY: closes the table opened above in the same message.
            unsafe { bindings::metaroce_helper_nla_nest_end(details.msg, details.table) };
            0
        }
        Err(e) => {
            // SAFETY: removes the table opened above and all it holds.
            unsafe { bindings::metaroce_helper_nla_nest_cancel(details.msg, details.table) };
            e.to_errno()
        }
    }
}
