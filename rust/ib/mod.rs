// SPDX-License-Identifier: GPL-2.0

//! Safe wrappers over the parts of the RDMA core and the network stack that
//! the driver uses. This layer (with `sys`, its private child) is the only
//! place where the module holds `unsafe` code; `crate::driver` above it has
//! none, and names no bindgen item: `sys` is not visible to it.

// The FFI layer (rust/sys): private to this module, so `crate::driver`
// cannot name a bindgen item; the compiler holds it to the safe types here.
#[path = "../sys/mod.rs"]
mod sys;

pub(crate) mod crc;
pub(crate) mod device;
pub(crate) mod heap;
pub(crate) mod inflight;
pub(crate) mod ip;
pub(crate) mod kdma;
pub(crate) mod knobs;
pub(crate) mod link;
pub(crate) mod lock;
pub(crate) mod log;
pub(crate) mod netdev;
pub(crate) mod netns;
pub(crate) mod random;
pub(crate) mod restrack;
pub(crate) mod ring;
pub(crate) mod skb;
pub(crate) mod stats;
pub(crate) mod timer;
pub(crate) mod trace;
pub(crate) mod types;
pub(crate) mod udata;
pub(crate) mod udp;
pub(crate) mod umem;
pub(crate) mod verbs;
pub(crate) mod worker;

use kernel::error::Error;

/// `EOPNOTSUPP`, which the kernel crate does not name: the errno user space
/// expects for an operation a device does not implement.
pub(crate) fn eopnotsupp() -> Error {
    Error::from_errno(-(kernel::bindings::EOPNOTSUPP as i32))
}

/// `EMSGSIZE`, which the kernel crate does not name: a netlink message has
/// no room for an attribute.
pub(crate) fn emsgsize() -> Error {
    Error::from_errno(-(kernel::bindings::EMSGSIZE as i32))
}
