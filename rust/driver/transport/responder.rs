// SPDX-License-Identifier: GPL-2.0

//! The responder: received data is checked and placed (WRITE into the
//! target region, SEND into its receive, READ and atomic responses into
//! the request's buffer), the peer's READs and atomics are answered, and
//! received messages complete in order.

use kernel::prelude::*;

use super::{
    consumes_receive, now_ns, AtomicOperands, Inner, OutMsg, TakenRecv, ToAnswer, Transport, TxCtx,
    SEND_MORE,
};
use crate::abi::opcode::WcFlags;
use crate::driver::mr::{MrTable, Requester};
use crate::driver::rx::RxMeta;
use crate::driver::stats::Counter;
use crate::driver::uc::RecvFate;
use crate::driver::wqe::{self, Completion, RecvWqe, Sge};
use crate::engine::completion::{CompletionStatus, RxCompletion};
use crate::engine::config::MSG_WINDOW_V1;
use crate::engine::receiver::{Placement, RxVerdict};
use crate::engine::sender::{Message, PostError};
use crate::engine::wire::{self, DataHeader, Opcode, Syndrome};
use crate::ib::lock::SpinLockBh;
use crate::ib::netdev::NetDevice;
use crate::ib::ring::SharedRing;
use crate::ib::skb::Ecn;
use crate::ib::types::{AccessFlags, WcOpcode, WcStatus};
use crate::ib::udp::TxTo;

/// What a UC QP does with a received message's completion.
enum UcCompletion {
    /// Nothing more (a dropped message, or its receive was never posted).
    Done,
    /// As on RC.
    AsRc,
    /// Its receive completes with this error status; the QP stays up.
    RecvFailed(WcStatus),
}

/// The access an atomic needs, of the QP and of the region: REMOTE_WRITE
/// for ATOMIC_WRITE (a write of 8 bytes), REMOTE_ATOMIC for the others.
fn atomic_access(op: Opcode) -> AccessFlags {
    if op == Opcode::AtomicWrite {
        AccessFlags::REMOTE_WRITE
    } else {
        AccessFlags::REMOTE_ATOMIC
    }
}

/// What an atomic does to the 8 bytes it finds (`operands` as on the wire,
/// protocol.md 5.1).
fn atomic_update(op: Opcode, operands: &[u8; 16]) -> impl Fn(u64) -> u64 {
    let mut first = [0u8; 8];
    first.copy_from_slice(&operands[..8]);
    let mut second = [0u8; 8];
    second.copy_from_slice(&operands[8..]);
    let (a, s) = (u64::from_be_bytes(first), u64::from_be_bytes(second));
    // ATOMIC_WRITE carries bytes, stored as they came.
    let store = u64::from_ne_bytes(first);
    move |m| match op {
        Opcode::CmpSwap if m == a => s,
        Opcode::CmpSwap => m,
        Opcode::FetchAdd => m.wrapping_add(a),
        _ => store,
    }
}

impl Transport {
    /// Posts the responses to the peer's READs and atomics that the
    /// message window takes, in request order.
    pub(super) fn answer_reads(&self, i: &mut Inner) {
        if i.peer.is_none() {
            return;
        }
        while let Some(a) = i.send.answers[0] {
            let msg = Message {
                opcode: a.opcode,
                len: a.len,
                remote_va: 0,
                rkey: 0,
                imm: a.req_msn,
                rsn: 0,
            };
            match i.send.post(&msg, a.out) {
                Ok(_) => {}
                Err(PostError::QueueFull) => return,
                // No memory for the message window: the answer waits for
                // the transmit worker's retry (`Inner::room_wanted`).
                Err(PostError::NoMemory) => {
                    i.room_wanted = true;
                    return;
                }
                Err(_) => {
                    i.failed = true;
                    return;
                }
            }
            i.send.answers.rotate_left(1);
            if let Some(last) = i.send.answers.last_mut() {
                *last = None;
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn receive_data(
        &self,
        i: &mut Inner,
        tx: &TxCtx<'_>,
        ndev: &NetDevice,
        plane: Option<u8>,
        h: &DataHeader,
        payload: &[u8],
        meta: &RxMeta,
    ) {
        let cum_msn = i.recv.receiver.cum_msn();
        match i.recv.receiver.on_data(h, meta.ecn == Ecn::Ce, now_ns()) {
            RxVerdict::Place(p) if i.uc.is_some() => self.place_uc(i, tx, &p, payload),
            RxVerdict::Place(p) => {
                if let Err(syndrome) = self.place_rc(i, tx, h, &p, payload) {
                    i.recv
                        .receiver
                        .fail_message(p.msn, syndrome, h.path_id, h.psn);
                }
            }
            RxVerdict::Duplicate | RxVerdict::Discard => {}
            RxVerdict::Drop(_) => {
                tx.counters.inc(Counter::RxDataDropped);
                return;
            }
        }
        if i.recv.receiver.rcn_join() {
            // The last count did not find this QP receiving: from its
            // first packet since, it advertises a newcomer's share of
            // that count, numbered among the newcomers since (protocol.md
            // 6.5), which the tick, visiting only receiving QPs, did not
            // keep current. A counted QP's hint is the tick's.
            i.recv.receiver.set_rate_hint(tx.rcn.newcomer_hint());
        }
        self.acknowledge(i, tx, ndev, meta.reply_to(), h.path_id, plane, cum_msn);
        if self.complete_receives(i, tx.mrs) {
            self.after_progress(i, tx);
        }
    }

    /// RC: places a packet of a message the receiver engine accepted, after
    /// the QP's and the key's checks; the error is the message's NAK.
    fn place_rc(
        &self,
        i: &mut Inner,
        tx: &TxCtx<'_>,
        h: &DataHeader,
        p: &Placement,
        payload: &[u8],
    ) -> core::result::Result<(), Syndrome> {
        match p.opcode {
            Opcode::Write | Opcode::WriteImm => {
                if !i.access.intersects(AccessFlags::REMOTE_WRITE) {
                    Err(Syndrome::InvalidRequest)
                } else if p.opcode == Opcode::WriteImm && self.recv_for(i, p.rsn).is_err() {
                    // Its receive is bound by its first packet, as a
                    // SEND's is: with none posted the message fails
                    // with a NAK before anything is acknowledged.
                    Err(Syndrome::InvalidRequest)
                } else {
                    self.place_write(tx, p, payload)
                }
            }
            Opcode::ReadReq => {
                // A response longer than one engine message could
                // not be posted (a requester splits its READs so):
                // refused with a NAK, not a failed QP here.
                if !i.access.intersects(AccessFlags::REMOTE_READ) || p.msg_len > Self::max_msg(i) {
                    Err(Syndrome::InvalidRequest)
                } else {
                    tx.mrs.lock().check_remote_read(
                        p.rkey,
                        self.local.pd,
                        p.remote_va,
                        u64::from(p.msg_len),
                    )
                }
            }
            // Checked now, run when it completes (protocol.md 5.1).
            Opcode::CmpSwap | Opcode::FetchAdd | Opcode::AtomicWrite => self.accept_atomic(
                i,
                p.opcode,
                p.msn,
                p.remote_va,
                p.rkey,
                payload,
                &tx.mrs.lock(),
            ),
            Opcode::AtomicResp => self.place_atomic_response(i, h.imm, payload, &tx.mrs.lock()),
            // The key must be one the QP may invalidate when the
            // SEND completes.
            Opcode::SendInv if !tx.mrs.lock().can_invalidate(p.rkey, self.local.pd) => {
                Err(Syndrome::InvalidRequest)
            }
            // The response names our READ_REQ's MSN in `imm`.
            Opcode::ReadResp => {
                self.place_read_response(i, h.imm, p.msg_len, p.offset, payload, &tx.mrs.lock())
            }
            _ => {
                let at = (p.remote_va & !SEND_MORE).saturating_add(u64::from(p.offset));
                self.place_send(i, p.rsn, at as usize, payload, &tx.mrs.lock())
            }
        }
    }

    /// Writes a WRITE packet's payload into the region it names (the key,
    /// protection domain, access and bounds checked).
    fn place_write(
        &self,
        tx: &TxCtx<'_>,
        p: &Placement,
        payload: &[u8],
    ) -> core::result::Result<(), Syndrome> {
        tx.mrs.lock().write_remote(
            p.rkey,
            self.local.pd,
            p.remote_va,
            p.msg_len,
            u64::from(p.offset),
            payload,
        )
    }

    /// Sends what the receiver engine has to say after a data packet of
    /// path `path_id` that came on `plane` from `reply`'s destination: its
    /// NAKs, then the path's ACK if one is due (else it is held for that
    /// route). `cum_msn`: the engine's before the packet.
    #[allow(clippy::too_many_arguments)]
    fn acknowledge(
        &self,
        i: &mut Inner,
        tx: &TxCtx<'_>,
        ndev: &NetDevice,
        reply: TxTo,
        path_id: u16,
        plane: Option<u8>,
        cum_msn: u32,
    ) {
        // The NAK goes first, so the requester fails the message at once
        // (its success needs cum_msn, which the failure holds back; a lost
        // NAK is drawn out again by the requester's verdict probe).
        while let Some(nak) = i.recv.receiver.pop_nak() {
            let _ = self.send(tx, ndev, &reply, wire::NAK_LEN + wire::ICRC_LEN, |buf| {
                nak.encode(buf).map_err(|_| EINVAL)
            });
        }
        if let Some(ack) = i.recv.receiver.ack_now(path_id) {
            let _ = self.send(tx, ndev, &reply, wire::ACK_LEN + wire::ICRC_LEN, |buf| {
                ack.encode(buf).map_err(|_| EINVAL)
            });
            if i.recv.receiver.cum_msn() != cum_msn {
                // It alone completes the peer's message: said again if
                // the QP is destroyed (`Transport::say_last_word`), back
                // on this packet's route.
                if let Some(k) = plane {
                    i.recv.ack_routes.wait(path_id, k, reply.src_port);
                    i.recv.last_word = Some(path_id);
                }
            }
        } else if let Some(k) = plane {
            // Held (protocol.md 3.4): a later packet of the path or the
            // tick sends it, back where this packet came from.
            i.recv.ack_routes.wait(path_id, k, reply.src_port);
        }
    }

    /// The ring receives come from: the SRQ's or the QP's own.
    fn recv_ring(&self) -> Option<&SharedRing> {
        match &self.srq {
            Some(srq) => Some(srq.data().ring()),
            None => self.rq.as_ref(),
        }
    }

    /// The receive ring entry bound to receive number `rsn`, if it is
    /// posted: the consumer entry plus the distance from the next number to
    /// complete (less, on UC, the numbers dropped without a receive).
    fn recv_index(&self, i: &Inner, rsn: u16) -> Option<u32> {
        let ring = self.recv_ring()?;
        let mut ahead = rsn.wrapping_sub(i.rx_rsn) as u32;
        if let Some(uc) = &i.uc {
            ahead -= uc.not_posted_between(i.rx_rsn, rsn);
        }
        (ahead < ring.producer().wrapping_sub(ring.consumer()))
            .then(|| ring.consumer().wrapping_add(ahead))
    }

    /// UC: places a packet, or drops its message when it cannot be placed
    /// (no NAK; a receive it would consume completes in error or, if not
    /// posted, is not consumed). READs are not UC operations: dropped.
    fn place_uc(&self, i: &mut Inner, tx: &TxCtx<'_>, p: &Placement, payload: &[u8]) {
        let Some(uc) = &i.uc else { return };
        if uc.dropping(p.msn) {
            return;
        }
        let fate = p.opcode.has_rsn().then(|| uc.recv_fate(p.rsn));
        if let (Err(fate), Some(uc)) = (
            self.place_uc_checked(i, tx, p, payload, fate),
            i.uc.as_deref_mut(),
        ) {
            uc.drop_message(p.msn);
            if p.opcode.has_rsn() {
                uc.set_recv_fate(p.rsn, fate);
            }
        }
    }

    /// UC: places a packet whose receive (if it takes one) has `fate` so
    /// far; the error is what becomes of its message's receive.
    fn place_uc_checked(
        &self,
        i: &mut Inner,
        tx: &TxCtx<'_>,
        p: &Placement,
        payload: &[u8],
        fate: Option<RecvFate>,
    ) -> core::result::Result<(), RecvFate> {
        match fate {
            None | Some(RecvFate::Taken) => {}
            // Another part of the same SEND was dropped.
            Some(fate) => return Err(fate),
        }
        if fate.is_some() {
            let posted = match &self.srq {
                Some(_) => self.recv_for(i, p.rsn).is_ok(),
                None => self.recv_index(i, p.rsn).is_some(),
            };
            if !posted {
                return Err(RecvFate::NotPosted);
            }
        }
        let refused = RecvFate::Failed(WcStatus::RemAccessErr);
        match p.opcode {
            Opcode::Write | Opcode::WriteImm if !i.access.intersects(AccessFlags::REMOTE_WRITE) => {
                Err(refused)
            }
            Opcode::Write | Opcode::WriteImm => {
                self.place_write(tx, p, payload).map_err(|_| refused)
            }
            Opcode::Send | Opcode::SendImm => {
                let at = (p.remote_va & !SEND_MORE).saturating_add(u64::from(p.offset));
                self.place_send(i, p.rsn, at as usize, payload, &tx.mrs.lock())
                    .map_err(|s| {
                        RecvFate::Failed(match s {
                            Syndrome::InvalidRequest => WcStatus::LocLenErr,
                            _ => WcStatus::LocProtErr,
                        })
                    })
            }
            // Not UC operations (READs, SEND_INV, atomics): dropped; the
            // receive a SEND_INV would take completes in error.
            op if op.has_rsn() => Err(RecvFate::Failed(WcStatus::RemInvReqErr)),
            _ => Err(RecvFate::Taken),
        }
    }

    /// UC: what completing received message `c` does, given what was
    /// dropped.
    fn complete_uc(&self, i: &mut Inner, c: &RxCompletion) -> UcCompletion {
        let Some(uc) = i.uc.as_deref_mut() else {
            return UcCompletion::AsRc;
        };
        let dropped = uc.complete_message(c.msn);
        let last_part = !(c.opcode == Opcode::Send && c.remote_va & SEND_MORE != 0);
        if !(c.opcode.has_rsn() && last_part) {
            return if dropped {
                UcCompletion::Done
            } else {
                UcCompletion::AsRc
            };
        }
        // The receive's fate, whichever part of a SEND was dropped.
        match uc.complete_recv(c.rsn) {
            RecvFate::Taken => UcCompletion::AsRc,
            RecvFate::NotPosted => {
                i.rx_rsn = i.rx_rsn.wrapping_add(1);
                UcCompletion::Done
            }
            RecvFate::Failed(status) => UcCompletion::RecvFailed(status),
        }
    }

    /// The receive message `rsn` goes into. The QP's own ring binds it by
    /// position (`recv_index`); an SRQ is shared, so the first packet of
    /// the message takes the SRQ's oldest receive for it and later packets
    /// find that one. `InvalidRequest` if none is posted (an RNR condition,
    /// fatal on RC in v1) or `rsn` is not of a message in progress.
    fn recv_for(&self, i: &mut Inner, rsn: u16) -> core::result::Result<RecvWqe, Syndrome> {
        let Some(srq) = &self.srq else {
            let ring = self.rq.as_ref().ok_or(Syndrome::InvalidRequest)?;
            let index = self.recv_index(i, rsn).ok_or(Syndrome::InvalidRequest)?;
            return wqe::get_recv(ring, index).map_err(|_| Syndrome::InvalidRequest);
        };
        if rsn.wrapping_sub(i.rx_rsn) as usize >= MSG_WINDOW_V1 {
            return Err(Syndrome::InvalidRequest);
        }
        let slot = &mut i.srq_taken[rsn as usize % MSG_WINDOW_V1];
        match slot {
            Some(t) if t.rsn == rsn => Ok(t.wqe),
            // Held by a message that never completed: not ours to reuse.
            Some(_) => Err(Syndrome::InvalidRequest),
            None => {
                let wqe = srq.data().take().ok_or(Syndrome::InvalidRequest)?;
                *slot = Some(TakenRecv { rsn, wqe });
                Ok(wqe)
            }
        }
    }

    fn place_send(
        &self,
        i: &mut Inner,
        rsn: u16,
        offset: usize,
        payload: &[u8],
        mrs: &MrTable,
    ) -> core::result::Result<(), Syndrome> {
        let wqe = self.recv_for(i, rsn)?;
        scatter(&wqe.sges[..wqe.num_sge], offset, payload, mrs, &self.local)
    }

    /// Places bytes of the response to our READ_REQ `req_msn` into the
    /// READ's local buffer.
    fn place_read_response(
        &self,
        i: &Inner,
        req_msn: u32,
        msg_len: u32,
        offset: u32,
        payload: &[u8],
        mrs: &MrTable,
    ) -> core::result::Result<(), Syndrome> {
        let (r, w) = i.pending_read(req_msn).ok_or(Syndrome::InvalidRequest)?;
        if r.len != msg_len || w.opcode != Opcode::ReadReq {
            return Err(Syndrome::InvalidRequest);
        }
        let at = r
            .offset
            .checked_add(offset)
            .ok_or(Syndrome::InvalidRequest)?;
        scatter(&w.sges[..w.num_sge], at as usize, payload, mrs, &self.local)
    }

    /// Checks the peer's atomic request `msn` when it arrives (protocol.md
    /// 5.1: QP access and alignment, then the region) and keeps its
    /// operands until it completes.
    #[allow(clippy::too_many_arguments)]
    fn accept_atomic(
        &self,
        i: &mut Inner,
        op: Opcode,
        msn: u32,
        va: u64,
        rkey: u32,
        payload: &[u8],
        mrs: &MrTable,
    ) -> core::result::Result<(), Syndrome> {
        let access = atomic_access(op);
        if !i.access.intersects(access) || !va.is_multiple_of(u64::from(wire::ATOMIC_LEN)) {
            return Err(Syndrome::InvalidRequest);
        }
        mrs.check_remote_atomic(rkey, self.local.pd, va, access)?;
        // Allocated when the QP granted REMOTE_ATOMIC, checked above. A
        // request arrives once per message here (its one packet, placed
        // once); a peer with more in progress than the table holds broke
        // our `max_dest_rd_atomic`.
        let table = i
            .atomic_operands
            .as_deref_mut()
            .ok_or(Syndrome::InvalidRequest)?;
        let slot = table
            .iter()
            .position(|o| o.is_some_and(|o| o.msn == msn))
            .or_else(|| table.iter().position(Option::is_none))
            .and_then(|k| table.get_mut(k))
            .ok_or(Syndrome::InvalidRequest)?;
        let mut operands = AtomicOperands {
            msn,
            bytes: [0; 16],
        };
        operands
            .bytes
            .get_mut(..payload.len())
            .ok_or(Syndrome::InvalidRequest)?
            .copy_from_slice(payload);
        *slot = Some(operands);
        Ok(())
    }

    /// Runs the peer's atomic request that just completed (in MSN order)
    /// and queues its response with the original value, freeing its
    /// operands' slot. `None`: it cannot run any more (its region went
    /// away since it was accepted).
    fn run_atomic(
        &self,
        i: &mut Inner,
        op: Opcode,
        msn: u32,
        va: u64,
        rkey: u32,
        mrs: &MrTable,
    ) -> Option<u64> {
        let operands = i
            .atomic_operands
            .as_deref_mut()?
            .iter_mut()
            .find(|o| o.is_some_and(|o| o.msn == msn))?
            .take()?;
        mrs.atomic_remote(
            rkey,
            self.local.pd,
            va,
            atomic_access(op),
            atomic_update(op, &operands.bytes),
        )
        .ok()
    }

    /// Places the response to our atomic `req_msn`: the original value, in
    /// our byte order, into the request's 8-byte buffer (ATOMIC_WRITE has
    /// none and ignores it).
    fn place_atomic_response(
        &self,
        i: &Inner,
        req_msn: u32,
        payload: &[u8],
        mrs: &MrTable,
    ) -> core::result::Result<(), Syndrome> {
        let (_, w) = i.pending_read(req_msn).ok_or(Syndrome::InvalidRequest)?;
        let original: [u8; 8] = payload.try_into().map_err(|_| Syndrome::InvalidRequest)?;
        match w.opcode {
            Opcode::CmpSwap | Opcode::FetchAdd => {
                let bytes = u64::from_be_bytes(original).to_ne_bytes();
                scatter(&w.sges[..w.num_sge], 0, &bytes, mrs, &self.local)
            }
            Opcode::AtomicWrite => Ok(()),
            _ => Err(Syndrome::InvalidRequest),
        }
    }

    /// Queues a response to the peer's READ or atomic, behind the others.
    fn queue_answer(&self, i: &mut Inner, answer: ToAnswer) {
        match i.send.answers.iter_mut().find(|a| a.is_none()) {
            Some(a) => *a = Some(answer),
            // More READs and atomics than max_dest_rd_atomic allows.
            None => i.failed = true,
        }
    }

    /// Completes received messages in order: receive completions, READ
    /// and atomic requests to answer (atomics run here), READ and atomic
    /// responses. Returns whether READs or atomics finished or requests to
    /// answer arrived (the send side has work).
    fn complete_receives(&self, i: &mut Inner, mrs: &SpinLockBh<MrTable>) -> bool {
        let mut progress = false;
        while let Some(c) = i.recv.receiver.pop_completion() {
            let ok = c.status == CompletionStatus::Success;
            let recv_status = match self.complete_uc(i, &c) {
                UcCompletion::Done => continue,
                UcCompletion::AsRc => None,
                UcCompletion::RecvFailed(status) => Some(status),
            };
            // Any message that is no READ or atomic (request or
            // response) completes into a receive.
            if self.complete_read_atomic(i, &c, ok, mrs)
                || self.complete_recv(i, &c, ok, recv_status, mrs)
            {
                progress = true;
            }
        }
        progress
    }

    /// Completes received message `c` if it is a READ or atomic request of
    /// the peer (queued to answer; an atomic runs here) or a response to
    /// ours; returns whether it was.
    fn complete_read_atomic(
        &self,
        i: &mut Inner,
        c: &RxCompletion,
        ok: bool,
        mrs: &SpinLockBh<MrTable>,
    ) -> bool {
        match c.opcode {
            Opcode::ReadReq if ok => {
                let answer = ToAnswer {
                    req_msn: c.msn,
                    opcode: Opcode::ReadResp,
                    len: c.len,
                    out: OutMsg::ReadResp {
                        va: c.remote_va,
                        rkey: c.rkey,
                    },
                };
                self.queue_answer(i, answer);
            }
            Opcode::CmpSwap | Opcode::FetchAdd | Opcode::AtomicWrite if ok => {
                // The one place an atomic runs: its completion is
                // released once, however often the request arrived.
                match self.run_atomic(i, c.opcode, c.msn, c.remote_va, c.rkey, &mrs.lock()) {
                    Some(original) => {
                        let answer = ToAnswer {
                            req_msn: c.msn,
                            opcode: Opcode::AtomicResp,
                            len: wire::ATOMIC_LEN,
                            out: OutMsg::AtomicResp { original },
                        };
                        self.queue_answer(i, answer);
                    }
                    None => i.failed = true,
                }
            }
            Opcode::ReadResp | Opcode::AtomicResp => {
                let req_msn = c.imm.unwrap_or(0);
                if let Some(k) = i.read_slot(req_msn) {
                    if let Some(r) = i.send.response_done(k) {
                        let k = i.wr_slot(r.wr);
                        let w = &mut i.wrs[k];
                        w.pending = w.pending.saturating_sub(1);
                        if !ok && w.status == WcStatus::Success {
                            // Its bytes could not be placed here.
                            w.status = WcStatus::LocProtErr;
                        }
                    }
                }
            }
            _ => return false,
        }
        true
    }

    /// Completes received message `c` into its receive, if it consumes
    /// one (`recv_status`: the status UC gave it); returns whether the QP
    /// failed.
    fn complete_recv(
        &self,
        i: &mut Inner,
        c: &RxCompletion,
        ok: bool,
        recv_status: Option<WcStatus>,
        mrs: &SpinLockBh<MrTable>,
    ) -> bool {
        if ok && c.opcode == Opcode::Send && c.remote_va & SEND_MORE != 0 {
            // A part of a SEND: the receive completes with its last part.
            return false;
        }
        if !consumes_receive(c.opcode) {
            // A WRITE or READ the peer was refused: fatal here too.
            if !ok {
                i.failed = true;
                return true;
            }
            return false;
        }
        let wr_id = self.consume_recv(i, c, ok);
        i.rx_rsn = i.rx_rsn.wrapping_add(1);
        let Some(wr_id) = wr_id else {
            // No receive to complete (an SRQ with none posted): the
            // RNR case, fatal on RC in v1.
            i.failed = true;
            return true;
        };
        let status = match recv_status {
            Some(s) => s,
            None if ok => WcStatus::Success,
            None => WcStatus::LocProtErr,
        };
        let (opcode, flags) = match c.opcode {
            Opcode::WriteImm => (WcOpcode::RecvRdmaWithImm, WcFlags::WITH_IMM),
            Opcode::SendImm => (WcOpcode::Recv, WcFlags::WITH_IMM),
            Opcode::SendInv => (WcOpcode::Recv, WcFlags::WITH_INVALIDATE),
            _ => (WcOpcode::Recv, 0),
        };
        if ok && c.opcode == Opcode::SendInv {
            // Checked when placed; it may have gone since (deallocated).
            let _ = mrs.lock().invalidate(c.rkey, self.local.pd);
        }
        let wc = Completion {
            byte_len: match c.opcode {
                // The SEND's bytes up to and including its last part.
                Opcode::Send | Opcode::SendImm | Opcode::SendInv => {
                    ((c.remote_va & !SEND_MORE) as u32).saturating_add(c.len)
                }
                _ => c.len,
            },
            // The invalidated key, or the immediate (network order).
            ex: if c.opcode == Opcode::SendInv {
                c.rkey
            } else {
                c.imm.map_or(0, u32::to_be)
            },
            wc_flags: flags,
            ..Completion::new(wr_id, status, opcode, self.qpn)
        };
        let overrun = self
            .recv_cq
            .data()
            .push(&self.recv_cq, &wc, self.qp_addr, true)
            .is_err();
        // CQ overrun (raised by the CQ): the QP is in error.
        if !ok || overrun {
            i.failed = true;
            return true;
        }
        false
    }

    /// Takes the receive received message `c` completes into: its
    /// `wr_id`, `None` if none is posted.
    fn consume_recv(&self, i: &mut Inner, c: &RxCompletion, ok: bool) -> Option<u64> {
        match (&self.srq, &self.rq) {
            (Some(_), _) => {
                // The receive its packets took; a message with none
                // (WRITE_IMM, or a SEND without payload packets to
                // place) takes one now, unless it failed.
                let slot = c.rsn as usize % MSG_WINDOW_V1;
                let taken = match i.srq_taken[slot] {
                    Some(t) if t.rsn == c.rsn => Some(t.wqe),
                    _ if ok => self.recv_for(i, c.rsn).ok(),
                    _ => None,
                };
                i.srq_taken[slot] = None;
                taken.map(|w| w.wr_id)
            }
            // None posted (the RNR case): nothing to consume.
            (None, Some(rq)) if rq.pending_from(rq.consumer()).unwrap_or(0) == 0 => None,
            (None, Some(rq)) => {
                let cons = rq.consumer();
                rq.set_consumer(cons.wrapping_add(1));
                Some(wqe::recv_wr_id(rq, cons))
            }
            (None, None) => None,
        }
    }
}

/// Writes `payload` at `offset` of a receive buffer made of `sges`.
pub(in crate::driver) fn scatter(
    sges: &[Sge],
    offset: usize,
    payload: &[u8],
    mrs: &MrTable,
    who: &Requester,
) -> core::result::Result<(), Syndrome> {
    let mut skip = offset;
    let mut done = 0;
    for s in sges {
        if done == payload.len() {
            break;
        }
        let len = s.length as usize;
        if skip >= len {
            skip -= len;
            continue;
        }
        let n = (len - skip).min(payload.len() - done);
        // The packet's offset is the peer's: checked, never wrapped.
        let at = s
            .addr
            .checked_add(skip as u64)
            .ok_or(Syndrome::RemoteAccess)?;
        mrs.write_local(s.lkey, who, at, &payload[done..done + n])
            .map_err(|_| Syndrome::RemoteAccess)?;
        done += n;
        skip = 0;
    }
    // A receive buffer too small for the message.
    if done == payload.len() {
        Ok(())
    } else {
        Err(Syndrome::InvalidRequest)
    }
}
