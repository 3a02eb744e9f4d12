//! The MetaRoCE shared-ring format, for both of its ends.
//!
//! The rings of `include/uapi/rdma/metaroce-abi.h` are written by one side
//! and read by the other: the provider (user space) produces send and
//! receive WQEs and consumes completions; metaroce.ko does the opposite.
//! This crate is the one implementation of their byte layout and index
//! arithmetic, compiled into both: the provider depends on it as a Cargo
//! crate, the kernel module includes its files (`rust/metaroce.rs`,
//! `pub mod abi`). The C header stays the definition of the ABI: the
//! offsets here are asserted against each side's bindgen output at compile
//! time ([`check_layout!`]).
//!
//! Decoders take a `&[u8]`, which can only be a private copy of an
//! element (a reference into memory the other side writes would be
//! unsound), read each field of it once and validate what they return:
//! whatever a ring holds may have been written by a hostile peer.
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod cqe;
pub mod field;
pub mod layout;
pub mod opcode;
pub mod recv;
pub mod reject;
pub mod ring;
pub mod send;
pub mod sge;
