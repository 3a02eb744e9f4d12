//! Builders the engine's integration tests share. Each file under tests/
//! is a crate of its own that takes this module with `mod common;` and
//! uses some of it: what one of them leaves unused is not dead code.
#![allow(dead_code)]

use metaroce_engine::config::{ReceiverConfig, SenderConfig};
use metaroce_engine::receiver::Receiver;
use metaroce_engine::sender::{Message, Sender};
use metaroce_engine::wire::Opcode;

/// The receiving end of a test's sender: `mtu`-byte packets, the ACKs to
/// QP 0 (a sender does not look at the QPN its ACKs carry).
pub fn receiver(mtu: u32) -> Receiver {
    Receiver::new(ReceiverConfig { peer_qpn: 0, mtu }).unwrap()
}

/// A WRITE of `len` bytes, without immediate data.
pub fn write(len: u32) -> Message {
    Message {
        opcode: Opcode::Write,
        len,
        remote_va: 0x1000,
        rkey: 1,
        imm: 0,
        rsn: 0,
    }
}

/// `paths` paths (at most `max_paths`) over `planes` planes, the rest the
/// defaults but the retransmit timeout: 10 us at first, 1 us at the least,
/// so that a test's lost packet times out within a few of its steps.
pub fn quick_rto(mtu: u32, paths: u16, planes: u8, max_paths: u16) -> SenderConfig {
    SenderConfig {
        mtu,
        planes,
        initial_paths: paths,
        max_paths,
        min_rto_ns: 1_000,
        initial_rto_ns: 10_000,
        ..SenderConfig::default()
    }
}

/// The plane of each used slot, in slot order.
pub fn planes_of(tx: &Sender) -> Vec<u8> {
    tx.used_paths().map(|p| p.plane).collect()
}
