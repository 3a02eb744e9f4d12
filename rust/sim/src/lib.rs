//! Deterministic, seeded, event-driven network simulator that drives the
//! real MetaRoCE engine (`metaroce_engine`) through real wire bytes.
//!
//! Model: N senders and one receiver; every host has one port per plane;
//! each plane is an ECMP fabric of parallel core links (the UDP source port
//! of a path picks the link) followed by the receiver's downlink on that
//! plane. Links have rate, propagation delay, a FIFO queue with ECN-CE
//! marking threshold and drop-tail buffer, random loss and up/down state.
//! ACKs and probe replies return over the same core link without queueing.
#![forbid(unsafe_code)]

pub mod rng;
pub mod scenarios;
pub mod sim;
