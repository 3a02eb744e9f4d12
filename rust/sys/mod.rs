// SPDX-License-Identifier: GPL-2.0

//! The FFI layer: bindgen output for the rdma and net APIs the module uses,
//! and the C helpers (`helpers.c`) for static inlines and macros; `knobs.c`
//! declares the knobs' module parameters and device files (macros too).
//!
//! A private child of `crate::ib` (declared there with `#[path]`): raw
//! items are reachable only from the safe wrappers in `crate::ib`.

pub(crate) mod bindings;
