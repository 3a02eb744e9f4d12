// SPDX-License-Identifier: GPL-2.0

//! The reliable-connected data path of a QP: send work requests become
//! engine messages, sprayed as packets over the QP's paths; received data is
//! placed straight into the target memory; ACKs and NAKs drive the engine;
//! completions go to the CQs in message order.
//!
//! One [`Transport`] per RC QP, shared (`Arc`) by the QP and the device's
//! QP table the receive path looks it up in. Everything runs under its
//! bh-safe lock, from process context (posting, the doorbell) or from the
//! receive softirq, and allocates nothing.

use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::time::Ktime;

use super::cq::CqState;
use super::stats::Counter;
use super::device::{DeviceState, MetaRoceIbDevice};
use super::limits::{MAX_INLINE, MAX_SGE};
use super::mr::MrTable;
use super::net::{send, RxMeta};
use super::srq::SrqState;
use super::wqe::{self, Completion, Sge};
use crate::engine::cc::Aimd;
use crate::engine::completion::CompletionStatus;
use crate::engine::config::{ReceiverConfig, SenderConfig, MSG_WINDOW};
use crate::engine::crc::crc32;
use crate::engine::receiver::{Receiver, RxVerdict};
use crate::engine::sender::{Message, PostError, Sender, TxKind};
use crate::engine::wire::{self, Ack, DataHeader, Nak, Opcode, Packet, Syndrome};
use crate::ib::heap::kvbox_copy;
use crate::ib::lock::{new_spinlock_bh, SpinLockBh};
use crate::ib::netdev::{NetDevice, NetDeviceRef};
use crate::ib::ring::SharedRing;
use crate::ib::skb::{Ecn, Ipv4Addr};
use crate::ib::udp::{TunnelSock, TxV4};
use crate::ib::verbs::ObjRef;
use crate::sys::bindings as b;

/// An empty sender and receiver, copied into each QP's heap memory (~160
/// and ~14 KiB: never built on the kernel stack).
static EMPTY_SENDER: Sender = Sender::empty(Aimd);
static EMPTY_RECEIVER: Receiver = Receiver::EMPTY;

/// Where to send a QP's packets: the peer and our own address on the plane.
#[derive(Clone, Copy)]
pub(crate) struct Peer {
    /// Our address (the GID the QP was connected from).
    pub(crate) local: Ipv4Addr,
    /// The peer's address.
    pub(crate) remote: Ipv4Addr,
    /// The peer QP.
    pub(crate) qpn: u32,
}

/// A send work request the engine is carrying as message `msn`.
#[derive(Clone, Copy)]
struct OutMsg {
    wr_id: u64,
    /// `IB_WC_*` opcode of its completion.
    wc_opcode: u32,
    signaled: bool,
    sges: [Sge; MAX_SGE as usize],
    num_sge: usize,
    inline: [u8; MAX_INLINE as usize],
    inline_len: usize,
    is_inline: bool,
    len: u32,
}

const NO_MSG: OutMsg = OutMsg {
    wr_id: 0,
    wc_opcode: 0,
    signaled: false,
    sges: [Sge { addr: 0, length: 0, lkey: 0 }; MAX_SGE as usize],
    num_sge: 0,
    inline: [0; MAX_INLINE as usize],
    inline_len: 0,
    is_inline: false,
    len: 0,
};

struct Inner {
    sender: KVBox<Sender>,
    receiver: KVBox<Receiver>,
    /// The work request of message `msn`, at `msn % MSG_WINDOW`.
    out: KVVec<OutMsg>,
    /// Send ring index up to which work requests became messages.
    sq_taken: u32,
    /// Receive sequence number of the next receive-consuming message sent.
    tx_rsn: u16,
    /// Receive sequence number of the next receive-consuming message to
    /// complete here (its buffer is the receive ring's consumer entry).
    rx_rsn: u16,
    peer: Option<Peer>,
    /// The plane the QP sends on (held from connection to destruction).
    ndev: Option<NetDeviceRef>,
    /// A send failed or the peer reported an error: the QP is in error.
    failed: bool,
}

/// The data path of one RC QP.
pub(crate) struct Transport {
    inner: Pin<KBox<SpinLockBh<Inner>>>,
    sq: SharedRing,
    rq: Option<SharedRing>,
    srq: Option<ObjRef<b::ib_srq, SrqState>>,
    send_cq: ObjRef<b::ib_cq, CqState>,
    recv_cq: ObjRef<b::ib_cq, CqState>,
    qpn: u32,
    /// The `ib_qp`, for `ib_wc.qp` of kernel consumers.
    qp_addr: u64,
    /// The QP's protection domain (memory keys must be of the same one).
    pd: usize,
    sq_sig_all: bool,
}

/// The device pieces a packet is sent with.
pub(crate) struct TxCtx<'a> {
    pub(crate) st: &'a DeviceState,
    pub(crate) sock: &'a TunnelSock,
}

fn now_ns() -> u64 {
    Ktime::ktime_get().to_ns() as u64
}

fn wc_opcode_for(opcode: u32) -> Option<(Opcode, u32)> {
    Some(match opcode {
        b::ib_wr_opcode_IB_WR_SEND => (Opcode::Send, b::ib_wc_opcode_IB_WC_SEND),
        b::ib_wr_opcode_IB_WR_SEND_WITH_IMM => (Opcode::SendImm, b::ib_wc_opcode_IB_WC_SEND),
        b::ib_wr_opcode_IB_WR_RDMA_WRITE => (Opcode::Write, b::ib_wc_opcode_IB_WC_RDMA_WRITE),
        b::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM => (Opcode::WriteImm, b::ib_wc_opcode_IB_WC_RDMA_WRITE),
        _ => return None,
    })
}

fn consumes_receive(op: Opcode) -> bool {
    matches!(op, Opcode::Send | Opcode::SendImm | Opcode::WriteImm)
}

impl Transport {
    /// Creates the data path of QP `qpn`; the rings move in.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        qpn: u32,
        qp_addr: u64,
        pd: usize,
        sq: SharedRing,
        rq: Option<SharedRing>,
        srq: Option<ObjRef<b::ib_srq, SrqState>>,
        cqs: (ObjRef<b::ib_cq, CqState>, ObjRef<b::ib_cq, CqState>),
        sq_sig_all: bool,
    ) -> Result<Arc<Self>> {
        let sender = kvbox_copy(&EMPTY_SENDER)?;
        let receiver = kvbox_copy(&EMPTY_RECEIVER)?;
        let mut out = KVVec::with_capacity(MSG_WINDOW, GFP_KERNEL)?;
        for _ in 0..MSG_WINDOW {
            out.push(NO_MSG, GFP_KERNEL)?;
        }
        let inner = Inner {
            sender,
            receiver,
            out,
            sq_taken: 0,
            tx_rsn: 0,
            rx_rsn: 0,
            peer: None,
            ndev: None,
            failed: false,
        };
        Ok(Arc::new(
            Self {
                inner: KBox::pin_init(new_spinlock_bh!(inner, "metaroce_qp_transport"), GFP_KERNEL)?,
                sq,
                rq,
                srq,
                send_cq: cqs.0,
                recv_cq: cqs.1,
                qpn,
                qp_addr,
                pd,
                sq_sig_all,
            },
            GFP_KERNEL,
        )?)
    }

    /// The send ring.
    pub(crate) fn sq(&self) -> &SharedRing {
        &self.sq
    }

    /// The receive ring, unless the QP uses an SRQ.
    pub(crate) fn rq(&self) -> Option<&SharedRing> {
        self.rq.as_ref()
    }

    /// RTR/RTS: the peer is known and the path MTU agreed; the engine starts
    /// and sends on `ndev`.
    pub(crate) fn connect(&self, peer: Peer, mtu: u32, ndev: NetDeviceRef) -> Result {
        let now = now_ns();
        let mut i = self.inner.lock();
        let cfg = SenderConfig { dst_qpn: peer.qpn, mtu, planes: 1, entropy_seed: self.qpn ^ 0x5eed, ..SenderConfig::DEFAULT };
        i.sender.reset(cfg, now).map_err(|_| EINVAL)?;
        i.receiver.reset(ReceiverConfig { peer_qpn: peer.qpn, mtu }).map_err(|_| EINVAL)?;
        i.peer = Some(peer);
        i.ndev = Some(ndev);
        i.failed = false;
        Ok(())
    }

    /// The connected peer QP, if any.
    pub(crate) fn peer_qpn(&self) -> Option<u32> {
        self.inner.lock().peer.map(|p| p.qpn)
    }

    /// The periodic tick: fires the engine's timers (retransmission
    /// timeouts, probes) that are due, and sends what they release.
    pub(crate) fn tick(&self, tx: &TxCtx<'_>) {
        let now = now_ns();
        let mut i = self.inner.lock();
        if i.peer.is_none() || i.failed {
            return;
        }
        if i.sender.next_deadline().is_some_and(|d| d <= now) {
            i.sender.on_timer(now);
            self.pump(&mut i, tx);
        }
    }

    /// New send work requests may be in the ring: turn them into messages
    /// and send what the windows allow.
    pub(crate) fn kick(&self, tx: &TxCtx<'_>) {
        let mut i = self.inner.lock();
        if i.peer.is_none() || i.failed {
            return;
        }
        self.take_requests(&mut i);
        self.pump(&mut i, tx);
    }

    /// Turns the send ring's new work requests into engine messages, as
    /// many as the message window takes.
    fn take_requests(&self, i: &mut Inner) {
        let prod = self.sq.producer();
        while i.sq_taken != prod {
            let Ok(req) = wqe::get_send(&self.sq, i.sq_taken) else {
                i.failed = true;
                break;
            };
            let Some((op, wc_opcode)) = wc_opcode_for(req.opcode) else {
                i.failed = true;
                break;
            };
            let Ok(len) = u32::try_from(req.len()) else {
                i.failed = true;
                break;
            };
            let rsn = if consumes_receive(op) { i.tx_rsn } else { 0 };
            let msg = Message { opcode: op, len, remote_va: req.remote_addr, rkey: req.rkey, imm: u32::from_be(req.ex), rsn };
            let msn = match i.sender.post(&msg) {
                Ok(msn) => msn,
                // The message window is full: the rest waits for ACKs.
                Err(PostError::QueueFull) => break,
                Err(_) => {
                    i.failed = true;
                    break;
                }
            };
            if consumes_receive(op) {
                i.tx_rsn = i.tx_rsn.wrapping_add(1);
            }
            let signaled = self.sq_sig_all || req.send_flags & (b::ib_send_flags_IB_SEND_SIGNALED as u32) != 0;
            i.out[msn as usize % MSG_WINDOW] = OutMsg {
                wr_id: req.wr_id,
                wc_opcode,
                signaled,
                sges: req.sges,
                num_sge: req.num_sge,
                inline: req.inline,
                inline_len: req.inline_len,
                is_inline: req.is_inline,
                len,
            };
            i.sq_taken = i.sq_taken.wrapping_add(1);
        }
    }

    /// Sends every packet the engine has ready.
    fn pump(&self, i: &mut Inner, tx: &TxCtx<'_>) {
        let Some(peer) = i.peer else { return };
        let Some(ndev) = i.ndev.take() else { return };
        self.pump_on(i, tx, peer, &ndev);
        i.ndev = Some(ndev);
        self.complete_sends(i);
    }

    fn pump_on(&self, i: &mut Inner, tx: &TxCtx<'_>, peer: Peer, ndev: &NetDevice) {
        let now = now_ns();
        while let Some(pkt) = i.sender.next_packet(now) {
            let to = TxV4 { src: peer.local, dst: peer.remote, src_port: pkt.src_port, ecn: Ecn::Ect0 };
            match pkt.kind {
                TxKind::Data { header, retransmit } => {
                    if retransmit {
                        tx.st.counters.inc(Counter::Retransmissions);
                    }
                    let out = i.out[header.msn as usize % MSG_WINDOW];
                    let n = header.payload_len as usize;
                    let len = wire::DATA_HEADER_LEN + n + wire::ICRC_LEN;
                    let mrs = &tx.st.mrs;
                    let _ = send(tx.st, tx.sock, ndev, &to, len, |buf| {
                        header.encode(buf).map_err(|_| EINVAL)?;
                        let body = &mut buf[wire::DATA_HEADER_LEN..wire::DATA_HEADER_LEN + n];
                        gather(&out, header.offset as usize, body, &mrs.lock(), self.pd)?;
                        let icrc = crc32(&buf[..wire::DATA_HEADER_LEN + n]);
                        buf[wire::DATA_HEADER_LEN + n..len].copy_from_slice(&icrc.to_be_bytes());
                        Ok(len)
                    });
                }
                TxKind::Probe(probe) => {
                    let _ = send(tx.st, tx.sock, ndev, &to, wire::PROBE_LEN + wire::ICRC_LEN, |buf| {
                        probe.encode(false, buf).map_err(|_| EINVAL)
                    });
                }
            }
        }
    }

    /// Posts send completions, in order, and frees their ring entries.
    fn complete_sends(&self, i: &mut Inner) {
        while let Some(c) = i.sender.pop_completion() {
            let out = i.out[c.msn as usize % MSG_WINDOW];
            let status = match c.status {
                CompletionStatus::Success => b::ib_wc_status_IB_WC_SUCCESS,
                CompletionStatus::Failed(Syndrome::RemoteAccess) => b::ib_wc_status_IB_WC_REM_ACCESS_ERR,
                CompletionStatus::Failed(Syndrome::RemoteOperation) => b::ib_wc_status_IB_WC_REM_OP_ERR,
                CompletionStatus::Failed(Syndrome::InvalidRequest) => b::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
            };
            if status != b::ib_wc_status_IB_WC_SUCCESS {
                i.failed = true;
            }
            if out.signaled || status != b::ib_wc_status_IB_WC_SUCCESS {
                let wc = Completion {
                    wr_id: out.wr_id,
                    status,
                    opcode: out.wc_opcode,
                    byte_len: out.len,
                    qp_num: self.qpn,
                    ..Default::default()
                };
                let _ = self.send_cq.data().push(&self.send_cq, &wc, self.qp_addr, false);
            }
            self.sq.set_consumer(self.sq.consumer().wrapping_add(1));
        }
        if i.failed {
            self.flush_locked(i);
        }
    }

    /// The QP went to the error state: every outstanding work request
    /// completes with `IB_WC_WR_FLUSH_ERR`, sends first, then receives
    /// (from the QP's own receive ring; an SRQ's entries belong to others).
    pub(crate) fn flush(&self) {
        let mut i = self.inner.lock();
        i.failed = true;
        self.flush_locked(&mut i);
    }

    fn flush_locked(&self, i: &mut Inner) {
        let flushed = |wr_id, opcode| Completion {
            wr_id,
            status: b::ib_wc_status_IB_WC_WR_FLUSH_ERR,
            opcode,
            qp_num: self.qpn,
            ..Default::default()
        };
        let (mut cons, prod) = (self.sq.consumer(), self.sq.producer());
        while cons != prod {
            let (wr_id, opcode) = match wqe::get_send(&self.sq, cons) {
                Ok(r) => (r.wr_id, wc_opcode_for(r.opcode).map_or(b::ib_wc_opcode_IB_WC_SEND, |(_, o)| o)),
                Err(_) => (0, b::ib_wc_opcode_IB_WC_SEND),
            };
            if self.send_cq.data().push(&self.send_cq, &flushed(wr_id, opcode), self.qp_addr, false).is_err() {
                break;
            }
            cons = cons.wrapping_add(1);
        }
        self.sq.set_consumer(cons);
        i.sq_taken = cons;
        if let Some(rq) = &self.rq {
            let (mut cons, prod) = (rq.consumer(), rq.producer());
            while cons != prod {
                let wr_id = wqe::get_recv(rq, cons).map_or(0, |w| w.wr_id);
                if self.recv_cq.data().push(&self.recv_cq, &flushed(wr_id, b::ib_wc_opcode_IB_WC_RECV), self.qp_addr, false).is_err() {
                    break;
                }
                cons = cons.wrapping_add(1);
            }
            rq.set_consumer(cons);
        }
    }

    /// A packet for this QP arrived on `ndev` (receive softirq).
    pub(crate) fn receive(&self, tx: &TxCtx<'_>, ndev: &NetDevice, pkt: &Packet<'_>, meta: &RxMeta) {
        let mut i = self.inner.lock();
        match pkt {
            Packet::Data { header, payload } => self.receive_data(&mut i, tx, ndev, header, payload, meta),
            Packet::Ack(ack) => {
                i.sender.on_ack(ack, now_ns());
                // Completions free message slots: queued requests may go.
                self.complete_sends(&mut i);
                if !i.failed {
                    self.take_requests(&mut i);
                }
                self.pump(&mut i, tx);
            }
            Packet::Nak(nak) => {
                i.sender.on_nak(nak);
                self.complete_sends(&mut i);
            }
            Packet::ProbeReply(probe) => {
                i.sender.on_probe_reply(probe, now_ns());
                self.pump(&mut i, tx);
            }
            Packet::Probe(_) => {}
        }
    }

    fn receive_data(&self, i: &mut Inner, tx: &TxCtx<'_>, ndev: &NetDevice, h: &DataHeader, payload: &[u8], meta: &RxMeta) {
        match i.receiver.on_data(h, meta.ecn == Ecn::Ce, now_ns()) {
            RxVerdict::Place(p) => {
                let placed = if matches!(p.opcode, Opcode::Write | Opcode::WriteImm) {
                    tx.st.mrs.lock().write_remote(p.rkey, self.pd, p.remote_va, u64::from(p.offset), payload)
                } else {
                    self.place_send(i, p.rsn, p.offset as usize, payload, &tx.st.mrs.lock())
                };
                if let Err(syndrome) = placed {
                    i.receiver.fail_message(p.msn, syndrome, h.path_id, h.psn);
                }
            }
            RxVerdict::Duplicate | RxVerdict::Discard => {}
            RxVerdict::Drop(_) => return,
        }
        let reply = meta.reply_to();
        if let Some(ack) = i.receiver.ack_for(h.path_id) {
            let _ = send(tx.st, tx.sock, ndev, &reply, wire::ACK_LEN + wire::ICRC_LEN, |buf| ack.encode(buf).map_err(|_| EINVAL));
        }
        while let Some(nak) = i.receiver.pop_nak() {
            let _ = send(tx.st, tx.sock, ndev, &reply, wire::NAK_LEN + wire::ICRC_LEN, |buf| nak.encode(buf).map_err(|_| EINVAL));
        }
        self.complete_receives(i);
    }

    /// The receive buffer bound to receive sequence number `rsn`.
    fn recv_ring(&self) -> Option<&SharedRing> {
        match &self.srq {
            Some(srq) => Some(srq.data().ring()),
            None => self.rq.as_ref(),
        }
    }

    fn place_send(&self, i: &Inner, rsn: u16, offset: usize, payload: &[u8], mrs: &MrTable) -> core::result::Result<(), Syndrome> {
        let ring = self.recv_ring().ok_or(Syndrome::InvalidRequest)?;
        let ahead = rsn.wrapping_sub(i.rx_rsn) as u32;
        let index = ring.consumer().wrapping_add(ahead);
        if index.wrapping_sub(ring.consumer()) >= ring.producer().wrapping_sub(ring.consumer()) {
            // No receive posted for it (an RNR condition; fatal in v1).
            return Err(Syndrome::InvalidRequest);
        }
        let wqe = wqe::get_recv(ring, index).map_err(|_| Syndrome::InvalidRequest)?;
        scatter(&wqe.sges[..wqe.num_sge], offset, payload, mrs, self.pd)
    }

    fn complete_receives(&self, i: &mut Inner) {
        while let Some(c) = i.receiver.pop_completion() {
            if !consumes_receive(c.opcode) {
                continue;
            }
            let Some(ring) = self.recv_ring() else { continue };
            let cons = ring.consumer();
            let wr_id = wqe::get_recv(ring, cons).map(|w| w.wr_id).unwrap_or(0);
            let (status, failed) = match c.status {
                CompletionStatus::Success => (b::ib_wc_status_IB_WC_SUCCESS, false),
                CompletionStatus::Failed(_) => (b::ib_wc_status_IB_WC_LOC_PROT_ERR, true),
            };
            let (opcode, flags) = match c.opcode {
                Opcode::WriteImm => (b::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM, b::ib_wc_flags_IB_WC_WITH_IMM),
                Opcode::SendImm => (b::ib_wc_opcode_IB_WC_RECV, b::ib_wc_flags_IB_WC_WITH_IMM),
                _ => (b::ib_wc_opcode_IB_WC_RECV, 0),
            };
            let wc = Completion {
                wr_id,
                status,
                opcode,
                byte_len: c.len,
                ex: c.imm.map_or(0, u32::to_be),
                qp_num: self.qpn,
                wc_flags: flags,
                ..Default::default()
            };
            let _ = self.recv_cq.data().push(&self.recv_cq, &wc, self.qp_addr, true);
            ring.set_consumer(cons.wrapping_add(1));
            i.rx_rsn = i.rx_rsn.wrapping_add(1);
            if failed {
                i.failed = true;
            }
        }
    }
}

/// Copies bytes `[offset, offset + out.len())` of a message out of its
/// local buffers.
fn gather(m: &OutMsg, offset: usize, out: &mut [u8], mrs: &MrTable, pd: usize) -> Result {
    if m.is_inline {
        let src = m.inline[..m.inline_len].get(offset..offset + out.len()).ok_or(EINVAL)?;
        out.copy_from_slice(src);
        return Ok(());
    }
    let mut skip = offset;
    let mut done = 0;
    for s in &m.sges[..m.num_sge] {
        if done == out.len() {
            break;
        }
        let len = s.length as usize;
        if skip >= len {
            skip -= len;
            continue;
        }
        let n = (len - skip).min(out.len() - done);
        mrs.read_local(s.lkey, pd, s.addr + skip as u64, &mut out[done..done + n])?;
        done += n;
        skip = 0;
    }
    if done == out.len() { Ok(()) } else { Err(EINVAL) }
}

/// Writes `payload` at `offset` of a receive buffer made of `sges`.
fn scatter(sges: &[Sge], offset: usize, payload: &[u8], mrs: &MrTable, pd: usize) -> core::result::Result<(), Syndrome> {
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
        mrs.write_local(s.lkey, pd, s.addr + skip as u64, &payload[done..done + n])
            .map_err(|_| Syndrome::RemoteAccess)?;
        done += n;
        skip = 0;
    }
    // A receive buffer too small for the message.
    if done == payload.len() { Ok(()) } else { Err(Syndrome::InvalidRequest) }
}

/// Looks up the QP of a data, ACK or NAK packet on `dev` and hands the
/// packet to it. Returns whether a QP took it. Receive softirq.
pub(crate) fn deliver(dev: &MetaRoceIbDevice, tx: &TxCtx<'_>, ndev: &NetDevice, pkt: &Packet<'_>, meta: &RxMeta) -> bool {
    let qpn = match pkt {
        Packet::Data { header, .. } => header.dst_qpn,
        Packet::Ack(Ack { dst_qpn, .. }) | Packet::Nak(Nak { dst_qpn, .. }) => *dst_qpn,
        Packet::ProbeReply(p) => p.dst_qpn,
        Packet::Probe(_) => return false,
    };
    let qps = dev.data().qps.lock();
    let Some(t) = qps.get(qpn) else { return false };
    t.receive(tx, ndev, pkt, meta);
    true
}

/// The IPv4 address inside an IPv4-mapped GID (`::ffff:a.b.c.d`).
pub(crate) fn gid_ipv4(gid: &[u8; 16]) -> Option<Ipv4Addr> {
    if gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff {
        Some(Ipv4Addr([gid[12], gid[13], gid[14], gid[15]]))
    } else {
        None
    }
}
