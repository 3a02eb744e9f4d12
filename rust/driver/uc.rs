// SPDX-License-Identifier: GPL-2.0

//! The responder side of unreliable-connected (UC) QPs (protocol.md 5).
//!
//! A UC QP rides the RC engine unchanged (its packets are acknowledged and
//! retransmitted: UC permits reliable delivery), but a message the
//! responder cannot take is *dropped*, never NAKed: the requester completes
//! it as sent and neither QP leaves RTS. The engine still receives and
//! acknowledges every packet of a dropped message; only its bytes are not
//! placed. This records, per QP, which messages are being dropped and what
//! happens to the receive each dropped SEND / SEND_IMM / WRITE_IMM would
//! have consumed:
//!
//! * no receive posted for its `rsn` (the RNR case): the message takes no
//!   receive, and the receives posted later go to the messages after it;
//! * its receive was posted but the message does not fit it (local
//!   protection, too short) or, for WRITE_IMM, its target is refused: the
//!   receive completes with an error status (the QP stays in RTS).
//!
//! Both are decided when the message's first packet arrives and applied
//! when it completes, in message order.

use crate::engine::config::MSG_WINDOW_V1;
use crate::ib::types::WcStatus;

/// What became of the receive a dropped message would have consumed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvFate {
    /// Not dropped (or not yet decided).
    Taken,
    /// No receive was posted for it: none is consumed.
    NotPosted,
    /// The receive completes with this error status.
    Failed(WcStatus),
}

/// Drop bookkeeping of one UC QP's responder side: its receiver keeps
/// the v1 window (`Transport::connect`, protocol.md 1.4), so these tables
/// cover it.
pub(crate) struct UcDrops {
    /// Messages being dropped: bit `msn % MSG_WINDOW_V1` (the engine keeps at
    /// most `MSG_WINDOW_V1` messages in progress).
    msgs: u64,
    /// Fate of the receive of each receive-consuming message in progress,
    /// at `rsn % MSG_WINDOW_V1` (at most `MSG_WINDOW_V1` are in progress, so
    /// their `rsn`s are distinct there).
    recvs: [RecvFate; MSG_WINDOW_V1],
}

const _: () = assert!(MSG_WINDOW_V1 == 64);

impl UcDrops {
    /// Nothing dropped.
    pub(crate) const NONE: Self = Self {
        msgs: 0,
        recvs: [RecvFate::Taken; MSG_WINDOW_V1],
    };

    /// Whether message `msn` is being dropped.
    pub(crate) fn dropping(&self, msn: u32) -> bool {
        self.msgs & (1 << (msn as usize % MSG_WINDOW_V1)) != 0
    }

    /// Message `msn` is dropped: its remaining packets are not placed.
    pub(crate) fn drop_message(&mut self, msn: u32) {
        self.msgs |= 1 << (msn as usize % MSG_WINDOW_V1);
    }

    /// The fate of the receive numbered `rsn`.
    pub(crate) fn recv_fate(&self, rsn: u16) -> RecvFate {
        self.recvs[rsn as usize % MSG_WINDOW_V1]
    }

    /// The message(s) numbered `rsn` are dropped with `fate` for their
    /// receive. The first decision sticks (a later part of a split SEND
    /// cannot turn "no receive" into "failed receive").
    pub(crate) fn set_recv_fate(&mut self, rsn: u16, fate: RecvFate) {
        let slot = &mut self.recvs[rsn as usize % MSG_WINDOW_V1];
        if *slot == RecvFate::Taken {
            *slot = fate;
        }
    }

    /// How many receive numbers in `[from, to)` take no receive: the
    /// receive ring entry of `to` is that many entries closer.
    pub(crate) fn not_posted_between(&self, from: u16, to: u16) -> u32 {
        let n = to.wrapping_sub(from) as usize;
        (0..n.min(MSG_WINDOW_V1))
            .filter(|k| self.recv_fate(from.wrapping_add(*k as u16)) == RecvFate::NotPosted)
            .count() as u32
    }

    /// Message `msn` completed (in order): returns whether it was dropped.
    pub(crate) fn complete_message(&mut self, msn: u32) -> bool {
        let dropped = self.dropping(msn);
        self.msgs &= !(1 << (msn as usize % MSG_WINDOW_V1));
        dropped
    }

    /// The receive numbered `rsn` completed: returns its fate and forgets it.
    pub(crate) fn complete_recv(&mut self, rsn: u16) -> RecvFate {
        core::mem::replace(
            &mut self.recvs[rsn as usize % MSG_WINDOW_V1],
            RecvFate::Taken,
        )
    }
}
