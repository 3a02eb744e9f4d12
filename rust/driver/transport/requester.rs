// SPDX-License-Identifier: GPL-2.0

//! The requester: send work requests become engine messages, whose
//! packets are built (payload gathered from local memory) and sent on
//! their paths.

use kernel::prelude::*;

use super::{
    consumes_receive, now_ns, Inner, OutMsg, OutWr, Peer, PendingRead, Transport, TxCtx, NO_WR,
    SEND_MORE,
};
use crate::abi::opcode::SendFlags;
use crate::driver::limits::{MAX_MSG_SIZE, TX_IN_FLIGHT_PER_PLANE};
use crate::driver::mr::{MrTable, Requester};
use crate::driver::stats::{Counter, PlaneCounter};
use crate::driver::wqe::{self, SendReq, Sge};
use crate::engine::crc::crc32;
use crate::engine::sender::{Message, PostError, TxKind};
use crate::engine::wire::{self, DataHeader, Opcode};
use crate::ib::ip::{Family, IpAddr};
use crate::ib::lock::SpinLockBh;
use crate::ib::skb::{Ecn, TxTail};
use crate::ib::trace::{self, Resent};
use crate::ib::types::{WcOpcode, WcStatus, WrOpcode};
use crate::ib::udp::TxTo;

/// The engine opcode of the messages of a send work request and the
/// opcode of its completion; `None` for one carried out without messages
/// (or unknown).
pub(super) fn wc_opcode_for(op: Option<WrOpcode>) -> Option<(Opcode, WcOpcode)> {
    Some(match op? {
        WrOpcode::Send => (Opcode::Send, WcOpcode::Send),
        WrOpcode::SendWithImm => (Opcode::SendImm, WcOpcode::Send),
        WrOpcode::SendWithInv => (Opcode::SendInv, WcOpcode::Send),
        WrOpcode::RdmaWrite => (Opcode::Write, WcOpcode::RdmaWrite),
        WrOpcode::RdmaWriteWithImm => (Opcode::WriteImm, WcOpcode::RdmaWrite),
        WrOpcode::RdmaRead => (Opcode::ReadReq, WcOpcode::RdmaRead),
        WrOpcode::AtomicCmpAndSwp => (Opcode::CmpSwap, WcOpcode::CompSwap),
        WrOpcode::AtomicFetchAndAdd => (Opcode::FetchAdd, WcOpcode::FetchAdd),
        WrOpcode::AtomicWrite => (Opcode::AtomicWrite, WcOpcode::AtomicWrite),
        WrOpcode::LocalInv | WrOpcode::BindMw | WrOpcode::RegMr => return None,
    })
}

/// The completion opcode of a work request carried out locally, without
/// messages: memory window binds and local invalidation.
pub(super) fn local_op_wc(op: Option<WrOpcode>) -> Option<WcOpcode> {
    match op? {
        WrOpcode::BindMw => Some(WcOpcode::BindMw),
        WrOpcode::LocalInv => Some(WcOpcode::LocalInv),
        WrOpcode::RegMr => Some(WcOpcode::RegMr),
        _ => None,
    }
}

/// Why a send work request cannot be carried: its error completion status.
fn check_request(
    req: &SendReq,
    op: Opcode,
    mrs: &MrTable,
    who: &Requester,
) -> core::result::Result<u32, WcStatus> {
    if op.atomic_len().is_some() {
        return check_atomic(req, op, mrs, who);
    }
    let len = u32::try_from(req.len())
        .ok()
        .filter(|&l| l <= MAX_MSG_SIZE)
        .ok_or(WcStatus::LocLenErr)?;
    if op == Opcode::ReadReq && req.is_inline {
        return Err(WcStatus::LocQpOpErr);
    }
    if !req.is_inline {
        for s in &req.sges[..req.num_sge] {
            mrs.check_local(s.lkey, who, s.addr, s.length, op == Opcode::ReadReq)
                .map_err(|_| WcStatus::LocProtErr)?;
        }
    }
    Ok(len)
}

/// An atomic work request: CMP_SWAP and FETCH_ADD name an 8-byte local
/// buffer the original value goes to (writable by the device); the value
/// ATOMIC_WRITE stores is in the request itself. Returns its length, 8.
fn check_atomic(
    req: &SendReq,
    op: Opcode,
    mrs: &MrTable,
    who: &Requester,
) -> core::result::Result<u32, WcStatus> {
    if op == Opcode::AtomicWrite {
        return Ok(wire::ATOMIC_LEN);
    }
    if req.is_inline {
        return Err(WcStatus::LocQpOpErr);
    }
    if req.len() != u64::from(wire::ATOMIC_LEN) {
        return Err(WcStatus::LocLenErr);
    }
    for s in &req.sges[..req.num_sge] {
        mrs.check_local(s.lkey, who, s.addr, s.length, true)
            .map_err(|_| WcStatus::LocProtErr)?;
    }
    Ok(wire::ATOMIC_LEN)
}

/// How far [`Transport::pump_on`] got.
enum Pumped {
    /// The engine has nothing more ready.
    Done,
    /// The caller's budget ran out: the transmit worker sends the rest.
    BudgetSpent,
    /// The QP's packets in the network stack are at their cap
    /// (`Inner::tx_blocked`).
    Blocked,
}

/// What taking the send work request at `sq_taken` came to.
enum Taken {
    /// Read and checked: its messages are posted next.
    Messages,
    /// A local work request, carried out: the next one is taken.
    Local,
    /// Not taken (no room in `Inner::wrs`, or the ring entry unreadable),
    /// or taken and failed its checks: no more are taken now.
    Stop,
}

impl Transport {
    /// Turns the send ring's new work requests into engine messages, as
    /// many as the message window (and, for READs, `max_rd_atomic`) takes.
    pub(super) fn take_requests(&self, i: &mut Inner, tx: &TxCtx<'_>) {
        if i.peer.is_none() {
            return;
        }
        // One read of the producer index for the checks and the loop: the
        // process may write it again meanwhile.
        let prod = self.sq.producer();
        // Either way the ring is garbage, the QP in error (its taken
        // requests complete flushed).
        let corrupted = match self.sq.geometry().used(prod, i.sq_head) {
            // The process wrote its producer index more than a ring ahead
            // of what the kernel consumed.
            Err(_) => Some("indices corrupted by the process"),
            // The producer index moved back over requests the kernel has
            // taken (their messages may be on the wire): taking on from
            // there would wrap round the ring into stale entries.
            Ok(posted) if posted < i.taken() => Some("producer moved back behind taken requests"),
            Ok(_) => None,
        };
        if let Some(what) = corrupted {
            pr_warn!("QP {}: send ring {}; QP in error\n", self.qpn, what);
            i.failed = true;
            return;
        }
        let max_msg = Self::max_msg(i);
        let first = i.sq_taken;
        self.take_requests_to(i, tx, prod, max_msg);
        if !tx.doorbell && self.local.kernel.is_none() {
            let taken = i.sq_taken.wrapping_sub(first);
            if taken != 0 {
                tx.counters
                    .add(Counter::PostsWithoutDoorbell, u64::from(taken));
            }
        }
    }

    /// Takes the requests from `sq_taken` up to `prod`, as far as the
    /// windows allow.
    fn take_requests_to(&self, i: &mut Inner, tx: &TxCtx<'_>, prod: u32, max_msg: u32) {
        while i.sq_taken != prod && !i.failed {
            let index = i.sq_taken;
            let prev = i.wr_slot(index.wrapping_sub(1));
            if index != i.sq_head && i.wrs[prev].status != WcStatus::Success {
                // Nothing after a request in error is sent: it fails the QP.
                break;
            }
            if !i.taking {
                match self.take_request(i, tx, index) {
                    Taken::Messages => {}
                    Taken::Local => continue,
                    Taken::Stop => break,
                }
            }
            if !self.post_messages(i, index, max_msg) {
                return;
            }
            i.taking = false;
            i.sq_taken = index.wrapping_add(1);
        }
    }

    /// Reads and checks the send work request at ring index `index`
    /// (`sq_taken`) into its slot of `Inner::wrs`.
    fn take_request(&self, i: &mut Inner, tx: &TxCtx<'_>, index: u32) -> Taken {
        if !i.room_for(index) {
            return Taken::Stop;
        }
        let slot = i.wr_slot(index);
        let Ok(req) = wqe::get_send(&self.sq, index) else {
            i.failed = true;
            return Taken::Stop;
        };
        let mut w = self.out_wr(&req);
        if let Some(wc_opcode) = local_op_wc(req.wr_opcode()) {
            // Carried out now, in posting order; completes in its
            // turn without a message (a failure fails the QP then).
            w.wc_opcode = wc_opcode;
            w.status = self.local_op(&req, index, tx.mrs);
            i.wrs[slot] = w;
            i.sq_taken = index.wrapping_add(1);
            return Taken::Local;
        }
        if req.wr_opcode() == Some(WrOpcode::SendWithInv) {
            // The peer's key to invalidate rides in the SEND_INV's rkey.
            w.rkey = req.ex;
        }
        let checked = match wc_opcode_for(req.wr_opcode()) {
            // UC carries no READs, atomics or SEND_INV (protocol.md 5).
            Some((op, _)) if i.uc.is_some() && (op.expects_response() || op == Opcode::SendInv) => {
                Err(WcStatus::LocQpOpErr)
            }
            Some((op, wc_opcode)) => {
                w.opcode = op;
                w.wc_opcode = wc_opcode;
                check_request(&req, op, &tx.mrs.lock(), &self.local)
            }
            None => Err(WcStatus::LocQpOpErr),
        };
        match checked {
            Ok(len) => w.len = len,
            Err(status) => {
                // Completes in error in its turn; the QP fails then.
                w.status = status;
                i.wrs[slot] = w;
                i.sq_taken = index.wrapping_add(1);
                return Taken::Stop;
            }
        }
        i.wrs[slot] = w;
        i.taking = true;
        Taken::Messages
    }

    /// A send work request as it is carried, before its opcode is known.
    fn out_wr(&self, req: &SendReq) -> OutWr {
        OutWr {
            wr_id: req.wr_id,
            signaled: self.sq_sig_all || req.send_flags & SendFlags::SIGNALED != 0,
            sges: req.sges,
            num_sge: req.num_sge,
            inline: req.inline,
            inline_len: req.inline_len,
            is_inline: req.is_inline,
            remote_va: req.remote_addr,
            rkey: req.rkey,
            imm: u32::from_be(req.ex),
            compare_add: req.compare_add,
            swap: req.swap,
            ..NO_WR
        }
    }

    /// Posts the next message(s) of the work request taken at ring index
    /// `index`, in parts of at most `max_msg` bytes. Returns whether all
    /// of it is posted; if not, the rest waits for the message window or
    /// a READ slot (or the request failed).
    fn post_messages(&self, i: &mut Inner, index: u32, max_msg: u32) -> bool {
        let slot = i.wr_slot(index);
        loop {
            let w = i.wrs[slot];
            if w.status != WcStatus::Success {
                // A part already failed (a READ's response overdue): the
                // rest is not sent, and the request fails the QP when its
                // turn to complete comes.
                return false;
            }
            let is_read = w.opcode.expects_response();
            let free_read = i.send.reads.iter().position(Option::is_none);
            if is_read
                && (i.send.reads.iter().flatten().count() >= i.max_rd_atomic || free_read.is_none())
            {
                return false;
            }
            let chunk = (w.len - w.posted).min(max_msg);
            let last = w.posted + chunk == w.len;
            // Only the last part of a split *_IMM carries the immediate
            // (and, for WRITE_IMM, consumes the receive).
            let op = match w.opcode {
                Opcode::WriteImm if !last => Opcode::Write,
                Opcode::SendImm | Opcode::SendInv if !last => Opcode::Send,
                op => op,
            };
            let rsn = if consumes_receive(op) { i.tx_rsn } else { 0 };
            // The parts of a SEND name where they go in the one receive
            // buffer, and whether more follow (protocol.md 1.3).
            let remote_va = match op {
                Opcode::Send | Opcode::SendImm | Opcode::SendInv => {
                    u64::from(w.posted) | if last { 0 } else { SEND_MORE }
                }
                _ => w.remote_va.wrapping_add(u64::from(w.posted)),
            };
            let msg = Message {
                opcode: op,
                // An atomic's message carries its operands.
                len: op.atomic_len().unwrap_or(chunk),
                remote_va,
                rkey: if matches!(op, Opcode::Send | Opcode::SendImm) {
                    0
                } else {
                    w.rkey
                },
                imm: w.imm,
                rsn,
            };
            let carried = OutMsg::Wr {
                wr: index,
                offset: w.posted,
            };
            let msn = match i.send.post(&msg, carried) {
                Ok(msn) => msn,
                // The message window is full: the rest waits for ACKs.
                Err(PostError::QueueFull) => return false,
                // No memory for the message window (the QP's first
                // message): the rest waits for the transmit worker's retry
                // (`Inner::room_wanted`).
                Err(PostError::NoMemory) => {
                    i.room_wanted = true;
                    return false;
                }
                Err(_) => {
                    i.wrs[slot].status = WcStatus::LocLenErr;
                    i.sq_taken = index.wrapping_add(1);
                    i.taking = false;
                    return false;
                }
            };
            if consumes_receive(op) && last {
                i.tx_rsn = i.tx_rsn.wrapping_add(1);
            }
            if let (true, Some(k)) = (is_read, free_read) {
                let r = PendingRead {
                    req_msn: msn,
                    wr: index,
                    offset: w.posted,
                    len: chunk,
                };
                i.send.await_response(k, r, now_ns());
            }
            let w = &mut i.wrs[slot];
            w.posted += chunk;
            w.pending += 1;
            if last {
                return true;
            }
        }
    }

    /// Carries out a local work request (window bind, fast registration,
    /// local invalidation) at send ring index `index`; returns its
    /// completion status.
    fn local_op(&self, req: &SendReq, index: u32, mrs: &SpinLockBh<MrTable>) -> WcStatus {
        if req.wr_opcode() == Some(WrOpcode::RegMr) {
            // Kernel consumers only: a process may write any opcode into its
            // ring.
            let done = match self.local.kernel {
                Some(_) => mrs
                    .lock()
                    .fast_register(self.local.pd, &wqe::get_bind(&self.sq, index)),
                None => Err(EINVAL),
            };
            return match done {
                Ok(()) => WcStatus::Success,
                Err(_) => WcStatus::LocQpOpErr,
            };
        }
        if req.wr_opcode() == Some(WrOpcode::BindMw) {
            let bind = wqe::get_bind(&self.sq, index);
            match mrs.lock().bind(self.local.pd, &bind) {
                Ok(_) => WcStatus::Success,
                Err(_) => WcStatus::MwBindErr,
            }
        } else {
            match mrs.lock().invalidate(req.ex, self.local.pd) {
                Ok(()) => WcStatus::Success,
                Err(_) => WcStatus::LocQpOpErr,
            }
        }
    }

    /// Sends the packets the engine has ready, as many as the caller's
    /// budget allows; the rest are left to the transmit worker.
    pub(super) fn pump(&self, i: &mut Inner, tx: &TxCtx<'_>) {
        let Some(peer) = i.peer else { return };
        match self.pump_on(i, tx, peer) {
            Pumped::Done | Pumped::Blocked => {}
            Pumped::BudgetSpent => self.defer_tx(tx),
        }
        self.counters
            .sync_engine(i.send.sender.stats(), tx.qp_counters, tx.counters);
        self.trace_events(i);
        self.complete_sends(i);
    }

    /// Sends each packet on its path's plane: from our netdev on that plane
    /// to the peer's address on it (plane 0: the connected GIDs; others:
    /// the source address the route picks on that netdev, or over IPv6 the
    /// one our PLANES named). Stops when the
    /// budget runs out, or when the network stack holds
    /// `TX_IN_FLIGHT_PER_PLANE` of the QP's packets per plane it sends on
    /// (transmit backpressure, design.md): then the stack releasing half
    /// of them wakes the transmit worker for it (`TxInFlight::wait_below`),
    /// not the worker at once, which would only find it blocked; its next
    /// ACK or the tick try too.
    fn pump_on(&self, i: &mut Inner, tx: &TxCtx<'_>, peer: Peer) -> Pumped {
        let was_blocked = core::mem::replace(&mut i.tx_blocked, false);
        if !i.send.sender.has_ready() {
            return Pumped::Done;
        }
        let now = now_ns();
        let planes = tx.planes.lock();
        // Per plane: a QP's paths spread its packets over its planes, each
        // with a qdisc and a ring of its own; and virtio-net frees what it
        // sent only when it next transmits or interrupts, so the count holds
        // packets already gone too (design.md).
        let cap = TX_IN_FLIGHT_PER_PLANE * u32::from(i.send.sender.config().planes.max(1));
        loop {
            if self.in_flight.skbs() >= cap {
                if !self.in_flight.wait_below(cap) {
                    // Half of them left the stack meanwhile.
                    continue;
                }
                if !was_blocked {
                    tx.counters.inc(Counter::TxInflightWaits);
                }
                i.tx_blocked = true;
                return Pumped::Blocked;
            }
            if !tx.spend() {
                return Pumped::BudgetSpent;
            }
            let Some(pkt) = i.send.sender.next_packet(now) else {
                return Pumped::Done;
            };
            let (Some(ndev), Some(dst)) =
                (planes.get(pkt.plane), i.recv.peer_planes.addr(pkt.plane))
            else {
                // The plane went away since the engine chose it: the packet
                // counts as lost and is resent on another path.
                tx.counters.inc(Counter::TxErrors);
                continue;
            };
            // IPv4 lets the route choose the source on other planes; IPv6
            // sends from the address our PLANES named there (a plane may
            // have several, and the peer takes only that one).
            let src = match peer.local.family() {
                Family::V6 => planes.local_addr_of(pkt.plane, &peer.local),
                Family::V4 if pkt.plane == 0 => peer.local,
                Family::V4 => IpAddr::UNSPECIFIED,
            };
            let to = TxTo {
                src,
                dst,
                src_port: pkt.src_port,
                ecn: Ecn::Ect0,
            };
            match pkt.kind {
                TxKind::Data { header, retransmit } => {
                    if let Some(cause) = retransmit {
                        tx.counters.inc(Counter::Retransmissions);
                        tx.counters
                            .add_plane(pkt.plane, PlaneCounter::Retransmissions, 1);
                        self.counters
                            .add(tx.qp_counters, Counter::Retransmissions, 1);
                        let resent = Resent {
                            path: header.path_id,
                            plane: pkt.plane,
                            psn: header.psn,
                            msn: header.msn,
                            offset: header.offset,
                            cause,
                        };
                        trace::retransmit(&i.send.dev_name, self.qpn, &resent);
                    }
                    let n = header.payload_len as usize;
                    let len = wire::DATA_HEADER_LEN + n + wire::ICRC_LEN;
                    let mrs = tx.mrs;
                    let out = i.send.out(header.msn);
                    let _ = self.send_data(tx, ndev, &to, len, |buf| {
                        put_data_packet(buf, &header, |body| {
                            if header.opcode == Opcode::ReadReq {
                                return Ok(());
                            }
                            match out {
                                OutMsg::Wr { wr, .. } if header.opcode.atomic_len().is_some() => {
                                    let w = &i.wrs[i.wr_slot(wr)];
                                    atomic_operands(w, n, body)
                                }
                                OutMsg::Wr { wr, offset } => {
                                    let w = &i.wrs[i.wr_slot(wr)];
                                    gather(
                                        w,
                                        (offset + header.offset) as usize,
                                        n,
                                        body,
                                        &mrs.lock(),
                                        &self.local,
                                    )
                                }
                                OutMsg::AtomicResp { original } => {
                                    body.put(&original.to_be_bytes())
                                }
                                OutMsg::ReadResp { va, rkey } => {
                                    let at = va.wrapping_add(u64::from(header.offset));
                                    mrs.lock().read_remote(rkey, self.local.pd, at, n, body)
                                }
                            }
                        })
                    });
                }
                TxKind::Probe(probe) => {
                    let _ = self.send(tx, ndev, &to, wire::PROBE_LEN + wire::ICRC_LEN, |buf| {
                        probe.encode(false, buf).map_err(|_| EINVAL)
                    });
                }
            }
        }
    }
}

/// The operands of an atomic work request as its packet carries them
/// (protocol.md 5.1): compare and swap, the addend (big-endian numbers), or
/// the 8 bytes to store.
fn atomic_operands(w: &OutWr, len: usize, out: &mut TxTail<'_>) -> Result {
    let mut b = [0u8; 16];
    match w.opcode {
        Opcode::CmpSwap => {
            b[..8].copy_from_slice(&w.compare_add.to_be_bytes());
            b[8..].copy_from_slice(&w.swap.to_be_bytes());
        }
        Opcode::FetchAdd => b[..8].copy_from_slice(&w.compare_add.to_be_bytes()),
        // The provider put the application's 8 bytes there as they were.
        _ => b[..8].copy_from_slice(&w.compare_add.to_ne_bytes()),
    }
    out.put(b.get(..len).ok_or(EINVAL)?)
}

/// Appends a data packet to `out`: `header`, then its payload, which
/// `payload` appends (exactly `header.payload_len` bytes, else `EINVAL`),
/// then the ICRC over both.
pub(in crate::driver) fn put_data_packet(
    out: &mut TxTail<'_>,
    header: &DataHeader,
    payload: impl FnOnce(&mut TxTail<'_>) -> Result,
) -> Result {
    let mut h = [0u8; wire::DATA_HEADER_LEN];
    header.encode(&mut h).map_err(|_| EINVAL)?;
    out.put(&h)?;
    let room = out.left();
    payload(out)?;
    if room - out.left() != usize::from(header.payload_len) {
        return Err(EINVAL);
    }
    let icrc = crc32(out.written());
    out.put(&icrc.to_be_bytes())
}

/// Appends bytes `[offset, offset + len)` of a work request's data, from
/// its local buffers, to `out`.
fn gather(
    m: &OutWr,
    offset: usize,
    len: usize,
    out: &mut TxTail<'_>,
    mrs: &MrTable,
    who: &Requester,
) -> Result {
    if m.is_inline {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        return out.put(m.inline[..m.inline_len].get(offset..end).ok_or(EINVAL)?);
    }
    gather_sges(&m.sges[..m.num_sge], offset, len, out, mrs, who)
}

/// Appends bytes `[offset, offset + want)` of the buffer made of `sges` to
/// `out`.
pub(in crate::driver) fn gather_sges(
    sges: &[Sge],
    offset: usize,
    want: usize,
    out: &mut TxTail<'_>,
    mrs: &MrTable,
    who: &Requester,
) -> Result {
    let mut skip = offset;
    let mut done = 0;
    for s in sges {
        if done == want {
            break;
        }
        let len = s.length as usize;
        if skip >= len {
            skip -= len;
            continue;
        }
        let n = (len - skip).min(want - done);
        // Checked: kernel consumers' SGEs reach here unvalidated.
        let at = s.addr.checked_add(skip as u64).ok_or(EINVAL)?;
        mrs.read_local(s.lkey, who, at, n, out)?;
        done += n;
        skip = 0;
    }
    if done == want {
        Ok(())
    } else {
        Err(EINVAL)
    }
}
