//! Deterministic, seeded, event-driven network simulator that drives the
//! real MetaRoCE engine (`metaroce_engine`) through real wire bytes.
//!
//! Model: N senders and one receiver; every host has one port per plane;
//! each plane is an ECMP fabric of parallel core links (the UDP source port
//! of a path picks the link) followed by the receiver's downlink on that
//! plane. Links have rate, propagation delay, a FIFO queue with ECN-CE
//! marking threshold and drop-tail buffer, random loss and up/down state.
//! ACKs and probe replies return over the same core link without queueing.
//!
//! `duplex` is a second model: two hosts (`host`: the engine with the
//! driver's rules) and one connection, both directions, every packet whole
//! and captured (`pcap`); `captures` names its scenarios (the golden
//! captures) and `replay` re-drives a capture through the engine.
#![forbid(unsafe_code)]

pub mod captures;
pub mod duplex;
pub mod host;
pub mod pcap;
pub mod replay;
pub mod rng;
pub mod scenarios;
pub mod show;
pub mod sim;
