//! bindgen output over the installed public headers and our uapi header.
//!
//! Generated at build time by `build.rs` (bindgen-cli over `bindings.h`,
//! allowlisted to the items the provider names) into `$OUT_DIR`, so the
//! uapi header `include/uapi/rdma/metaroce-abi.h` stays the one source of
//! the user/kernel ABI. bindgen's own layout assertions (sizes, alignments
//! and offsets of every generated struct) are kept.

#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::pedantic,
    clippy::undocumented_unsafe_blocks
)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}

pub(crate) use generated::*;
