//! Completion records handed to the caller, strictly in message order.

use super::wire::{Opcode, Syndrome};

/// Outcome of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionStatus {
    /// Delivered (sender side) / fully placed (receiver side).
    Success,
    /// Failed at the responder with this syndrome (fatal to the QP in v1).
    Failed(Syndrome),
    /// Sender side: no acknowledgement progress for the QP's retry budget
    /// (`SenderConfig::give_up_ns`): the peer is gone (4.3).
    RetryExceeded,
}

/// A sender-side completion: message `msn` is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxCompletion {
    /// Message sequence number returned by `post`.
    pub msn: u32,
    /// Operation.
    pub opcode: Opcode,
    /// Message length.
    pub len: u32,
    /// Outcome.
    pub status: CompletionStatus,
}

/// A receiver-side completion: message `msn` is fully placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxCompletion {
    /// Message sequence number.
    pub msn: u32,
    /// Operation (READ_REQ completions ask the caller to post a READ_RESP).
    pub opcode: Opcode,
    /// Message length (READ_REQ: bytes requested).
    pub len: u32,
    /// Immediate data (*_IMM), or requester MSN for READ_RESP.
    pub imm: Option<u32>,
    /// Remote address of the message (WRITE / READ_REQ).
    pub remote_va: u64,
    /// Remote key (WRITE / READ_REQ).
    pub rkey: u32,
    /// Receive sequence number (SEND, SEND_IMM, WRITE_IMM): the receive
    /// buffer this message consumed is the `rsn`-th (mod 2^16) posted one;
    /// 0 for other opcodes.
    pub rsn: u16,
    /// Outcome.
    pub status: CompletionStatus,
}
