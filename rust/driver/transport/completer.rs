// SPDX-License-Identifier: GPL-2.0

//! The completer: the engine's send completions and the peer's ACKs and
//! NAKs complete send work requests in posting order; a QP in error
//! flushes what is outstanding.

use core::sync::atomic::Ordering;

use super::requester::{local_op_wc, wc_opcode_for};
use super::{now_ns, Inner, OutMsg, Transport, TxCtx};
use crate::driver::stats::Counter;
use crate::driver::wqe::{self, Completion};
use crate::engine::completion::CompletionStatus;
use crate::engine::config::MSG_WINDOW_V1;
use crate::engine::wire::{Ack, Nak, Syndrome};
use crate::ib::trace;
use crate::ib::types::{WcOpcode, WcStatus, WrOpcode};

/// The completion opcode of any send work request (flushes included).
fn wc_opcode_of(op: Option<WrOpcode>) -> WcOpcode {
    local_op_wc(op)
        .or(wc_opcode_for(op).map(|(_, o)| o))
        .unwrap_or(WcOpcode::Send)
}

/// The send completion status of a message the peer failed.
fn remote_status(s: Syndrome) -> WcStatus {
    match s {
        Syndrome::RemoteAccess => WcStatus::RemAccessErr,
        Syndrome::RemoteOperation => WcStatus::RemOpErr,
        Syndrome::InvalidRequest => WcStatus::RemInvReqErr,
    }
}

impl Transport {
    /// The peer's ACK: acknowledged messages complete, and what waited for
    /// them may go.
    pub(super) fn receive_ack(&self, i: &mut Inner, tx: &TxCtx<'_>, ack: &Ack) {
        let stale = i.send.sender.stats().stale_acks;
        i.send.sender.on_ack(ack, now_ns());
        if i.send.sender.stats().stale_acks != stale {
            tx.counters.inc(Counter::RxStaleAcks);
        }
        self.after_progress(i, tx);
    }

    /// The peer's NAK: the message it names fails.
    pub(super) fn receive_nak(&self, i: &mut Inner, tx: &TxCtx<'_>, nak: &Nak) {
        let before = i.send.sender.stats().stale_naks;
        i.send.sender.on_nak(nak);
        let stale = i.send.sender.stats().stale_naks != before;
        if stale {
            tx.counters.inc(Counter::RxStaleNaks);
        }
        trace::nak(&i.send.dev_name, self.qpn, nak, stale);
        self.complete_sends(i);
    }

    /// Takes the engine's send completions into the work requests, then
    /// completes the finished requests in posting order.
    pub(super) fn complete_sends(&self, i: &mut Inner) {
        while let Some(c) = i.send.sender.pop_completion() {
            match i.send.out(c.msn) {
                OutMsg::Wr { wr, .. } => {
                    let k = i.wr_slot(wr);
                    let w = &mut i.wrs[k];
                    match c.status {
                        // A delivered READ_REQ or atomic waits for its
                        // response.
                        CompletionStatus::Success if c.opcode.expects_response() => {}
                        CompletionStatus::Success => w.pending = w.pending.saturating_sub(1),
                        CompletionStatus::Failed(s) => {
                            if w.status == WcStatus::Success {
                                w.status = remote_status(s);
                            }
                        }
                        // UC promises no delivery: a send is done once sent.
                        CompletionStatus::RetryExceeded if i.uc.is_some() => {
                            w.pending = w.pending.saturating_sub(1)
                        }
                        CompletionStatus::RetryExceeded => {
                            if w.status == WcStatus::Success {
                                w.status = WcStatus::RetryExcErr;
                            }
                        }
                    }
                }
                // The requester could not take our READ or atomic response.
                OutMsg::ReadResp { .. } | OutMsg::AtomicResp { .. } => {
                    if c.status != CompletionStatus::Success {
                        i.failed = true;
                    }
                }
            }
        }
        self.retire(i);
    }

    /// The peer's QP was not heard from for the retry budget while our
    /// READs and atomics waited for their responses
    /// (`SendSide::response_due`): they fail with retry exceeded, and the
    /// oldest failed request, completing with it, takes the QP to the error
    /// state (the rest are flushed), as the requests would have had the
    /// peer not acknowledged them (protocol.md 4.3).
    pub(super) fn responses_overdue(&self, i: &mut Inner) {
        let mut failed = 0u32;
        for k in 0..i.send.reads.len() {
            if let Some(r) = i.send.response_done(k) {
                let slot = i.wr_slot(r.wr);
                let w = &mut i.wrs[slot];
                if w.status == WcStatus::Success {
                    w.status = WcStatus::RetryExcErr;
                }
                failed += 1;
            }
        }
        trace::give_up(&i.send.dev_name, self.qpn, failed);
        // The sender's own completions first (its retry budget may have run
        // out in the same timer turn): one of them may hold the head.
        self.complete_sends(i);
    }

    /// Completes finished work requests, oldest first; the first one in
    /// error fails the QP.
    fn retire(&self, i: &mut Inner) {
        while i.sq_head != i.sq_taken && !i.failed {
            let w = i.wrs[i.wr_slot(i.sq_head)];
            let ok = w.status == WcStatus::Success;
            if ok && w.pending > 0 {
                break;
            }
            if !ok {
                // The QP is in error before the consumer can see why.
                self.error.store(true, Ordering::Release);
            }
            // The slot is free before its completion is visible: a consumer
            // that posts as soon as it polls must find room in the ring.
            i.sq_head = i.sq_head.wrapping_add(1);
            self.sq.set_consumer(i.sq_head);
            if w.signaled || !ok {
                let wc = Completion {
                    byte_len: w.len,
                    ..Completion::new(w.wr_id, w.status, w.wc_opcode, self.qpn)
                };
                if self
                    .send_cq
                    .data()
                    .push(&self.send_cq, &wc, self.qp_addr, false)
                    .is_err()
                {
                    // CQ overrun (raised by the CQ): the QP is in error.
                    i.failed = true;
                }
            }
            if !ok {
                i.failed = true;
            }
        }
        if i.failed {
            self.flush_locked(i);
        }
    }

    /// The QP went to the error state: every outstanding work request
    /// completes with `IB_WC_WR_FLUSH_ERR`, sends first, then receives
    /// (from the QP's own receive ring; an SRQ's entries belong to others).
    pub(crate) fn flush(&self) {
        self.flush_quietly();
        self.deliver_cq_events();
    }

    /// [`Transport::flush`] without running completion handlers: for
    /// callers holding a lock of their own (the datagram path), which call
    /// [`Transport::deliver_cq_events`] once they dropped it.
    pub(crate) fn flush_quietly(&self) {
        let mut i = self.lock();
        i.failed = true;
        self.flush_locked(&mut i);
    }

    /// Runs the completion handlers that completions made due; called
    /// after the QP's lock is dropped, so that a kernel consumer's handler
    /// may poll and post to this QP at once.
    pub(crate) fn deliver_cq_events(&self) {
        self.send_cq.data().deliver_event(&self.send_cq);
        self.recv_cq.data().deliver_event(&self.recv_cq);
    }

    pub(super) fn flush_locked(&self, i: &mut Inner) {
        self.error.store(true, Ordering::Release);
        let flushed =
            |wr_id, opcode| Completion::new(wr_id, WcStatus::WrFlushErr, opcode, self.qpn);
        if i.peer.is_none() {
            // Never connected (a datagram QP, or RC before RTR): the ring's
            // consumer index is where the data path stopped.
            i.sq_head = self.sq.consumer();
            i.sq_taken = i.sq_head;
            i.taking = false;
        }
        // What the ring holds, and at least the requests already taken: if
        // the process wrote its producer index more than a ring ahead, or
        // moved it back behind them, those alone.
        let mut cons = i.sq_head;
        let taken = i.taken();
        let pending = self.sq.pending_from(cons).map_or(taken, |p| p.max(taken));
        for _ in 0..pending {
            let (wr_id, opcode) = if cons.wrapping_sub(i.sq_head)
                < i.sq_taken.wrapping_sub(i.sq_head)
                || (cons == i.sq_taken && i.taking)
            {
                let w = &i.wrs[i.wr_slot(cons)];
                (w.wr_id, w.wc_opcode)
            } else {
                match wqe::get_send(&self.sq, cons) {
                    Ok(r) => (r.wr_id, wc_opcode_of(r.wr_opcode())),
                    Err(_) => (0, WcOpcode::Send),
                }
            };
            if self
                .send_cq
                .data()
                .push(&self.send_cq, &flushed(wr_id, opcode), self.qp_addr, false)
                .is_err()
            {
                break;
            }
            cons = cons.wrapping_add(1);
        }
        self.sq.set_consumer(cons);
        i.sq_head = cons;
        i.sq_taken = cons;
        i.taking = false;
        i.send.forget_reads();
        if let Some(rq) = &self.rq {
            let mut cons = rq.consumer();
            for _ in 0..rq.pending_from(cons).unwrap_or(0) {
                let wr_id = wqe::get_recv(rq, cons).map_or(0, |w| w.wr_id);
                if self
                    .recv_cq
                    .data()
                    .push(
                        &self.recv_cq,
                        &flushed(wr_id, WcOpcode::Recv),
                        self.qp_addr,
                        false,
                    )
                    .is_err()
                {
                    break;
                }
                cons = cons.wrapping_add(1);
            }
            rq.set_consumer(cons);
        }
        self.flush_srq_taken(i);
    }

    /// Receives taken from an SRQ for messages that will not complete now:
    /// flushed in message order, they are this QP's.
    pub(super) fn flush_srq_taken(&self, i: &mut Inner) {
        let flushed =
            |wr_id| Completion::new(wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, self.qpn);
        for k in 0..i.srq_taken.len() {
            let rsn = i.rx_rsn.wrapping_add(k as u16);
            let slot = rsn as usize % MSG_WINDOW_V1;
            if let Some(t) = i.srq_taken[slot].take_if(|t| t.rsn == rsn) {
                if self
                    .recv_cq
                    .data()
                    .push(&self.recv_cq, &flushed(t.wqe.wr_id), self.qp_addr, false)
                    .is_err()
                {
                    break;
                }
            }
        }
        i.srq_taken.fill(None);
    }
}
