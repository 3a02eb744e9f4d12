//! MetaRoCE transport engine.
//!
//! Pure, deterministic protocol logic for the MetaRoCE RDMA transport: wire
//! encoding, per-path sequence/SACK tracking, congestion control, multipath
//! spraying with selective retransmission, path health and ordered
//! completions. The caller supplies time (nanoseconds) and moves bytes; the
//! engine never allocates, never uses floating point and never panics on
//! packet-derived input. See `Documentation/protocol.md` for the wire spec.
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod ack_policy;
pub mod bitmap;
pub mod cc;
pub mod completion;
pub mod config;
pub mod crc;
pub mod knobs;
pub mod path;
pub mod ratelimit;
pub mod receiver;
pub mod sack;
pub mod sender;
pub mod seq;
pub mod wire;
