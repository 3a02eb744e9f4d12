//! MetaRoCE transport engine.
//!
//! Pure, deterministic protocol logic for the MetaRoCE RDMA transport: wire
//! encoding, per-path sequence/SACK tracking, congestion control, multipath
//! spraying with selective retransmission, path health and ordered
//! completions. The caller supplies time (nanoseconds) and moves bytes; the
//! engine never uses floating point and never panics on packet-derived
//! input. It takes memory only from the [`heap::Heap`] its program gives
//! it, as a QP opens paths (`heap.rs`). See `Documentation/protocol.md` for
//! the wire spec.
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

// The host's heap. This file is the host crate's root only: the kernel
// module compiles the modules below into its own crate (rust/metaroce.rs),
// all but `crc`, for which it mounts the kernel's `crc32_le`
// (rust/ib/crc.rs), and implements `Heap for Global` there
// (rust/driver/engine_heap.rs).
extern crate alloc;

impl heap::Heap for heap::Global {
    type Box<T> = alloc::boxed::Box<T>;

    fn copy_of<T: Copy>(init: &T) -> Option<Self::Box<T>> {
        Some(alloc::boxed::Box::new(*init))
    }

    fn empty<T: heap::Empty>() -> Option<Self::Box<T>> {
        Some(alloc::boxed::Box::new(T::EMPTY))
    }
}

pub mod ack_policy;
pub mod bitmap;
pub mod cc;
pub mod completion;
pub mod config;
pub mod crc;
pub mod delay_trial;
pub mod events;
pub mod growth;
pub mod heap;
pub mod knobs;
pub mod marks;
pub mod path;
pub mod ratelimit;
pub mod rcn;
pub mod receiver;
pub mod rtt_peak;
pub mod sack;
pub mod sender;
pub mod seq;
pub mod window;
pub mod wire;
