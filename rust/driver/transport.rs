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

use core::sync::atomic::{AtomicBool, Ordering};

use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::time::Ktime;

use super::cq::CqState;
use super::stats::Counter;
use super::device::{DeviceState, MetaRoceIbDevice};
use super::limits::{MAX_INLINE, MAX_MSG_SIZE, MAX_RD_ATOMIC, MAX_SGE};
use super::mr::{MrTable, Requester};
use super::net::{send, RxMeta};
use super::plane::PeerPlanes;
use super::qp_counters::QpCounters;
use super::srq::SrqState;
use super::uc::{RecvFate, UcDrops};
use super::wqe::{self, Completion, SendReq, Sge};
use crate::engine::bitmap::MAX_MSG_PKTS;
use crate::engine::cc::Aimd;
use crate::engine::completion::{CompletionStatus, RxCompletion};
use crate::engine::config::{ReceiverConfig, SenderConfig, MSG_WINDOW};
use crate::engine::crc::crc32;
use crate::engine::receiver::{Placement, Receiver, RxVerdict};
use crate::engine::sender::{Message, PostError, Sender, TxKind};
use crate::engine::wire::{self, Ack, DataHeader, Nak, Opcode, Packet, Planes, Syndrome};
use crate::ib::heap::kvbox_copy;
use crate::ib::lock::{new_spinlock_bh, SpinLockBh};
use crate::ib::netdev::NetDevice;
use crate::ib::ring::SharedRing;
use crate::ib::skb::{Ecn, Ipv4Addr};
use crate::ib::udp::{TunnelSock, TxV4};
use crate::ib::verbs::ObjRef;
use crate::sys::bindings as b;

/// An empty sender and receiver, copied into each QP's heap memory (~160
/// and ~14 KiB: never built on the kernel stack).
static EMPTY_SENDER: Sender = Sender::empty(Aimd);
static EMPTY_RECEIVER: Receiver = Receiver::EMPTY;

/// Where to send a QP's packets on plane 0: the peer and our own address.
/// (The peer's addresses on other planes come from its PLANES packet.)
#[derive(Clone, Copy)]
pub(crate) struct Peer {
    /// Our address on plane 0 (the GID the QP was connected from).
    pub(crate) local: Ipv4Addr,
    /// The peer's address on plane 0.
    pub(crate) remote: Ipv4Addr,
    /// The peer QP.
    pub(crate) qpn: u32,
}

/// A send work request being carried, at `send ring index % WR_WINDOW`.
/// A request longer than one engine message (WRITE, READ) goes as several
/// messages; it completes when all of them have (READ: when all responses
/// have arrived), and only after every earlier request (send completions
/// are in posting order).
#[derive(Clone, Copy)]
struct OutWr {
    wr_id: u64,
    /// `IB_WC_*` opcode of its completion.
    wc_opcode: u32,
    /// Engine opcode of its messages (a split WRITE_IMM: the last one).
    opcode: Opcode,
    signaled: bool,
    sges: [Sge; MAX_SGE as usize],
    num_sge: usize,
    inline: [u8; MAX_INLINE as usize],
    inline_len: usize,
    is_inline: bool,
    len: u32,
    remote_va: u64,
    rkey: u32,
    imm: u32,
    /// Atomics: compare value, addend or the value to store.
    compare_add: u64,
    /// CMP_SWAP: the swap value.
    swap: u64,
    /// Bytes already turned into messages.
    posted: u32,
    /// Messages (READ: responses) still to complete.
    pending: u32,
    /// `IB_WC_*` status; the first failure sticks.
    status: u32,
}

const NO_WR: OutWr = OutWr {
    wr_id: 0,
    wc_opcode: 0,
    opcode: Opcode::Send,
    signaled: false,
    sges: [Sge { addr: 0, length: 0, lkey: 0 }; MAX_SGE as usize],
    num_sge: 0,
    inline: [0; MAX_INLINE as usize],
    inline_len: 0,
    is_inline: false,
    len: 0,
    remote_va: 0,
    rkey: 0,
    imm: 0,
    compare_add: 0,
    swap: 0,
    posted: 0,
    pending: 0,
    status: b::ib_wc_status_IB_WC_SUCCESS,
};

/// `remote_va` bit of a SEND message: more parts of the same SEND follow
/// (the low bits are the part's offset in the SEND).
const SEND_MORE: u64 = 1 << 63;

/// Send work requests tracked at once (taken but not completed): at most
/// `MSG_WINDOW` in the engine plus READs waiting for their responses.
const WR_WINDOW: usize = 128;

/// What the engine is carrying as message `msn` (at `msn % MSG_WINDOW`).
#[derive(Clone, Copy)]
enum OutMsg {
    /// Bytes `[offset, offset + len)` of send work request `wr` (ring index).
    Wr { wr: u32, offset: u32 },
    /// A READ response: bytes of our region `rkey` from `va`.
    ReadResp { va: u64, rkey: u32 },
    /// An atomic response: the original value the atomic found, kept
    /// here until the message is acknowledged (retransmissions send it
    /// again; the atomic never runs twice, protocol.md 5.1).
    AtomicResp { original: u64 },
}

/// A READ or atomic request of ours waiting for its response (requester
/// side).
#[derive(Clone, Copy)]
struct PendingRead {
    /// MSN of the request (the response names it in `imm`).
    req_msn: u32,
    /// The work request (ring index) and where in its buffer the response
    /// goes.
    wr: u32,
    offset: u32,
    len: u32,
}

/// A READ or atomic request of the peer to answer (responder side), once
/// our message window takes the response.
#[derive(Clone, Copy)]
struct ToAnswer {
    req_msn: u32,
    /// READ_RESP or ATOMIC_RESP.
    opcode: Opcode,
    len: u32,
    /// Where the response's bytes come from.
    out: OutMsg,
}

/// The operands of an atomic request of the peer, from its arrival to
/// its execution when it completes (at `msn % MSG_WINDOW`).
#[derive(Clone, Copy)]
struct AtomicOperands {
    msn: u32,
    bytes: [u8; wire::ATOMIC_CMP_SWAP_LEN as usize],
}

struct Inner {
    sender: KVBox<Sender>,
    receiver: KVBox<Receiver>,
    /// What message `msn` carries, at `msn % MSG_WINDOW`.
    out: KVVec<OutMsg>,
    /// Send work requests from `sq_head` to `sq_taken` (and the one at
    /// `sq_taken` while it is being split), at `index % WR_WINDOW`.
    wrs: KVVec<OutWr>,
    /// Send ring index of the oldest work request not completed.
    sq_head: u32,
    /// Send ring index up to which work requests became messages.
    sq_taken: u32,
    /// The request at `sq_taken` has been read and partly posted.
    taking: bool,
    /// Our READs and atomics waiting for responses (at most
    /// `max_rd_atomic`).
    reads: [Option<PendingRead>; MAX_RD_ATOMIC as usize],
    /// READs and atomics the QP may have outstanding (its `max_rd_atomic`,
    /// at least 1).
    max_rd_atomic: usize,
    /// The peer's READs and executed atomics to answer, oldest first.
    answers: [Option<ToAnswer>; MAX_RD_ATOMIC as usize],
    /// The peer's atomic requests placed and not yet executed, at
    /// `msn % MSG_WINDOW`.
    atomic_operands: KVVec<AtomicOperands>,
    /// `IB_ACCESS_*` the QP grants its peer (REMOTE_WRITE, REMOTE_READ).
    access: u32,
    /// Receive sequence number of the next receive-consuming message sent.
    tx_rsn: u16,
    /// Receive sequence number of the next receive-consuming message to
    /// complete here (its buffer is the receive ring's consumer entry).
    rx_rsn: u16,
    peer: Option<Peer>,
    /// The peer's addresses on every plane, and the PLANES exchange.
    peer_planes: PeerPlanes,
    /// A send failed or the peer reported an error: the QP is in error.
    failed: bool,
    /// UC QPs: the messages the responder drops (an RC QP NAKs instead).
    uc: Option<UcDrops>,
    /// The engine's retry budget (`retry_budget_ns`), kept across connect.
    give_up_ns: u64,
}

/// What a UC QP does with a received message's completion.
enum UcCompletion {
    /// Nothing more (a dropped message, or its receive was never posted).
    Done,
    /// As on RC.
    AsRc,
    /// Its receive completes with this error status; the QP stays up.
    RecvFailed(u32),
}

/// The data path of one RC QP.
pub(crate) struct Transport {
    inner: Pin<KBox<SpinLockBh<Inner>>>,
    pub(super) sq: SharedRing,
    pub(super) rq: Option<SharedRing>,
    pub(super) srq: Option<ObjRef<b::ib_srq, SrqState>>,
    pub(super) send_cq: ObjRef<b::ib_cq, CqState>,
    pub(super) recv_cq: ObjRef<b::ib_cq, CqState>,
    pub(super) qpn: u32,
    /// The `ib_qp`, for `ib_wc.qp` of kernel consumers.
    pub(super) qp_addr: u64,
    /// The QP's protection domain (memory keys must be of the same one),
    /// and whether it is a kernel QP.
    pub(super) local: Requester,
    /// The data path failed: `Inner::failed`, readable without the lock
    /// (the QP state is read from atomic context, possibly under it).
    error: AtomicBool,
    pub(super) sq_sig_all: bool,
    /// Per-QP counting (`rdma statistic qp`).
    pub(crate) counters: QpCounters,
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
        b::ib_wr_opcode_IB_WR_SEND_WITH_INV => (Opcode::SendInv, b::ib_wc_opcode_IB_WC_SEND),
        b::ib_wr_opcode_IB_WR_RDMA_WRITE => (Opcode::Write, b::ib_wc_opcode_IB_WC_RDMA_WRITE),
        b::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM => (Opcode::WriteImm, b::ib_wc_opcode_IB_WC_RDMA_WRITE),
        b::ib_wr_opcode_IB_WR_RDMA_READ => (Opcode::ReadReq, b::ib_wc_opcode_IB_WC_RDMA_READ),
        b::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP => (Opcode::CmpSwap, b::ib_wc_opcode_IB_WC_COMP_SWAP),
        b::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => (Opcode::FetchAdd, b::ib_wc_opcode_IB_WC_FETCH_ADD),
        b::ib_wr_opcode_IB_WR_ATOMIC_WRITE => (Opcode::AtomicWrite, b::ib_wc_opcode_IB_WC_ATOMIC_WRITE),
        _ => return None,
    })
}

/// The completion opcode of a work request carried out locally, without
/// messages: memory window binds and local invalidation.
fn local_op_wc(opcode: u32) -> Option<u32> {
    match opcode {
        b::ib_uverbs_wr_opcode_IB_UVERBS_WR_BIND_MW => Some(b::ib_wc_opcode_IB_WC_BIND_MW),
        b::ib_wr_opcode_IB_WR_LOCAL_INV => Some(b::ib_wc_opcode_IB_WC_LOCAL_INV),
        b::ib_wr_opcode_IB_WR_REG_MR => Some(b::ib_wc_opcode_IB_WC_REG_MR),
        _ => None,
    }
}

/// The completion opcode of any send work request (flushes included).
fn wc_opcode_of(opcode: u32) -> u32 {
    local_op_wc(opcode).or(wc_opcode_for(opcode).map(|(_, o)| o)).unwrap_or(b::ib_wc_opcode_IB_WC_SEND)
}

fn consumes_receive(op: Opcode) -> bool {
    matches!(op, Opcode::Send | Opcode::SendImm | Opcode::SendInv | Opcode::WriteImm)
}

/// Least retry budget: InfiniBand's (local ACK timeout 4.096 us * 2^timeout,
/// retried retry_cnt times: 0.5 s for perftest's 14 and 7) is shorter than
/// a software host's stalls (a TCG VM: hundreds of ms), and a path or plane
/// failure must be survived by the other paths, not end the QP.
const RETRY_BUDGET_FLOOR_NS: u64 = 5_000_000_000;

/// The time without acknowledgement progress after which outstanding
/// messages fail with IB_WC_RETRY_EXC_ERR; 0 (never) for timeout 0, which
/// InfiniBand defines as infinite.
fn retry_budget_ns(timeout: u8, retry_cnt: u8) -> u64 {
    if timeout == 0 {
        return 0;
    }
    let ack_timeout = 4096u64 << u32::from(timeout.min(31));
    ack_timeout.saturating_mul(u64::from(retry_cnt.min(7)) + 1).max(RETRY_BUDGET_FLOOR_NS)
}

/// The send completion status of a message the peer failed.
fn remote_status(s: Syndrome) -> u32 {
    match s {
        Syndrome::RemoteAccess => b::ib_wc_status_IB_WC_REM_ACCESS_ERR,
        Syndrome::RemoteOperation => b::ib_wc_status_IB_WC_REM_OP_ERR,
        Syndrome::InvalidRequest => b::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
    }
}

/// The access an atomic needs, of the QP and of the region: REMOTE_WRITE
/// for ATOMIC_WRITE (a write of 8 bytes), REMOTE_ATOMIC for the others.
fn atomic_access(op: Opcode) -> u32 {
    if op == Opcode::AtomicWrite {
        b::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    } else {
        b::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC
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

/// Why a send work request cannot be carried: its error completion status.
fn check_request(req: &SendReq, op: Opcode, mrs: &MrTable, who: &Requester) -> core::result::Result<u32, u32> {
    if op.atomic_len().is_some() {
        return check_atomic(req, op, mrs, who);
    }
    let len = u32::try_from(req.len()).ok().filter(|&l| l <= MAX_MSG_SIZE).ok_or(b::ib_wc_status_IB_WC_LOC_LEN_ERR)?;
    if op == Opcode::ReadReq && req.is_inline {
        return Err(b::ib_wc_status_IB_WC_LOC_QP_OP_ERR);
    }
    if !req.is_inline {
        for s in &req.sges[..req.num_sge] {
            mrs.check_local(s.lkey, who, s.addr, s.length, op == Opcode::ReadReq)
                .map_err(|_| b::ib_wc_status_IB_WC_LOC_PROT_ERR)?;
        }
    }
    Ok(len)
}

/// An atomic work request: CMP_SWAP and FETCH_ADD name an 8-byte local
/// buffer the original value goes to (writable by the device); the value
/// ATOMIC_WRITE stores is in the request itself. Returns its length, 8.
fn check_atomic(req: &SendReq, op: Opcode, mrs: &MrTable, who: &Requester) -> core::result::Result<u32, u32> {
    if op == Opcode::AtomicWrite {
        return Ok(wire::ATOMIC_LEN);
    }
    if req.is_inline {
        return Err(b::ib_wc_status_IB_WC_LOC_QP_OP_ERR);
    }
    if req.len() != u64::from(wire::ATOMIC_LEN) {
        return Err(b::ib_wc_status_IB_WC_LOC_LEN_ERR);
    }
    for s in &req.sges[..req.num_sge] {
        mrs.check_local(s.lkey, who, s.addr, s.length, true)
            .map_err(|_| b::ib_wc_status_IB_WC_LOC_PROT_ERR)?;
    }
    Ok(wire::ATOMIC_LEN)
}

impl Transport {
    /// Creates the data path of QP `qpn`; the rings move in.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        qpn: u32,
        qp_addr: u64,
        local: Requester,
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
            out.push(OutMsg::Wr { wr: 0, offset: 0 }, GFP_KERNEL)?;
        }
        let mut wrs = KVVec::with_capacity(WR_WINDOW, GFP_KERNEL)?;
        for _ in 0..WR_WINDOW {
            wrs.push(NO_WR, GFP_KERNEL)?;
        }
        let mut atomic_operands = KVVec::with_capacity(MSG_WINDOW, GFP_KERNEL)?;
        for _ in 0..MSG_WINDOW {
            atomic_operands.push(AtomicOperands { msn: 0, bytes: [0; 16] }, GFP_KERNEL)?;
        }
        let inner = Inner {
            sender,
            receiver,
            out,
            wrs,
            sq_head: 0,
            sq_taken: 0,
            taking: false,
            reads: [None; MAX_RD_ATOMIC as usize],
            max_rd_atomic: 1,
            answers: [None; MAX_RD_ATOMIC as usize],
            atomic_operands,
            access: 0,
            tx_rsn: 0,
            rx_rsn: 0,
            peer: None,
            peer_planes: PeerPlanes::new(Ipv4Addr::default(), 0),
            failed: false,
            uc: None,
            give_up_ns: 0,
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
                local,
                error: AtomicBool::new(false),
                sq_sig_all,
                counters: QpCounters::new(),
            },
            GFP_KERNEL,
        )?)
    }

    /// Sends one packet of this QP (see [`send`]), counted for the QP too.
    fn send(&self, tx: &TxCtx<'_>, ndev: &NetDevice, to: &TxV4, len: usize, fill: impl FnOnce(&mut [u8]) -> Result<usize>) -> Result {
        let sent = send(tx.st, tx.sock, ndev, to, len, fill);
        self.counters.on_send(&tx.st.qp_counters, &sent, len);
        sent
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
    /// with its paths spread over the device's `planes` planes. Only plane 0
    /// carries packets until the peer's PLANES packet names its address on
    /// the others.
    pub(crate) fn connect(&self, peer: Peer, mtu: u32, planes: u8) -> Result {
        let now = now_ns();
        let mut i = self.inner.lock();
        let cfg = SenderConfig { dst_qpn: peer.qpn, mtu, planes, entropy_seed: self.qpn ^ 0x5eed, give_up_ns: i.give_up_ns, ..SenderConfig::DEFAULT };
        i.sender.reset(cfg, now).map_err(|_| EINVAL)?;
        for k in 1..planes {
            i.sender.plane_down(k);
        }
        i.receiver.reset(ReceiverConfig { peer_qpn: peer.qpn, mtu }).map_err(|_| EINVAL)?;
        i.peer = Some(peer);
        i.peer_planes = PeerPlanes::new(peer.remote, now);
        i.failed = false;
        self.error.store(false, Ordering::Release);
        // Both engines start over: so do the request and receive numbering.
        i.sq_head = self.sq.consumer();
        i.sq_taken = i.sq_head;
        i.taking = false;
        i.reads = [None; MAX_RD_ATOMIC as usize];
        i.answers = [None; MAX_RD_ATOMIC as usize];
        i.tx_rsn = 0;
        i.rx_rsn = 0;
        if let Some(uc) = i.uc.as_mut() {
            *uc = UcDrops::NONE;
        }
        Ok(())
    }

    /// The QP is unreliable connected (UC): no READs, and the responder
    /// drops what it cannot place instead of failing both QPs.
    pub(crate) fn set_unreliable(&self) {
        self.inner.lock().uc = Some(UcDrops::NONE);
    }

    /// The QP's remote access flags (`IB_ACCESS_REMOTE_*`) and the READs it
    /// may have outstanding (`max_rd_atomic`; 0 is taken as 1 so that a
    /// READ is not stuck forever).
    pub(crate) fn set_limits(&self, access: u32, max_rd_atomic: u8) {
        let mut i = self.inner.lock();
        i.access = access;
        i.max_rd_atomic = usize::from(max_rd_atomic).clamp(1, MAX_RD_ATOMIC as usize);
    }

    /// The QP's `timeout` and `retry_cnt` attributes become the engine's
    /// retry budget (protocol.md 4.3).
    pub(crate) fn set_retry(&self, timeout: u8, retry_cnt: u8) {
        let ns = retry_budget_ns(timeout, retry_cnt);
        let mut i = self.inner.lock();
        i.give_up_ns = ns;
        i.sender.set_give_up_ns(ns);
    }

    /// The data path failed (a work request completed in error): the QP
    /// is in the error state.
    pub(crate) fn failed(&self) -> bool {
        self.error.load(Ordering::Acquire)
    }

    /// Sends our plane list to the peer on plane 0; `known`: we hold its.
    fn send_planes(&self, tx: &TxCtx<'_>, peer: Peer, known: bool) {
        let planes = tx.st.planes.lock();
        let Some(ndev) = planes.get(0) else { return };
        let (count, addrs) = planes.addrs(peer.local);
        let pl = Planes { dst_qpn: peer.qpn, src_qpn: self.qpn, known, count, addrs };
        let to = TxV4 { src: peer.local, dst: peer.remote, src_port: wire::UDP_PORT, ecn: Ecn::Ect0 };
        let _ = self.send(tx, ndev, &to, wire::PLANES_LEN + wire::ICRC_LEN, |buf| pl.encode(buf).map_err(|_| EINVAL));
    }

    /// Whether plane `k` can carry this QP's packets: our netdev has
    /// carrier and the peer's address on it is known.
    fn plane_usable(tx: &TxCtx<'_>, pp: &PeerPlanes, k: u8) -> bool {
        (k == 0 || pp.known)
            && pp.addr(k).is_some()
            && tx.st.planes.lock().get(k).is_some_and(|n| n.is_running_with_carrier())
    }

    /// Plane `plane`'s netdev gained (`up`) or lost carrier or went away:
    /// its paths return (after a probe) or are drained onto the others.
    pub(crate) fn plane_event(&self, tx: &TxCtx<'_>, plane: u8, up: bool) {
        let mut i = self.inner.lock();
        if i.peer.is_none() || i.failed || plane >= i.sender.config().planes {
            return;
        }
        if !up {
            i.sender.plane_down(plane);
        } else if Self::plane_usable(tx, &i.peer_planes, plane) {
            i.sender.plane_up(plane);
        }
        self.pump(&mut i, tx);
    }

    /// The peer's PLANES packet: learn its addresses (its planes become
    /// usable), confirm that we have them, stop repeating ours once it
    /// confirms.
    fn receive_planes(&self, i: &mut Inner, tx: &TxCtx<'_>, pl: &Planes) {
        let Some(peer) = i.peer else { return };
        if pl.src_qpn != peer.qpn || i.failed {
            return;
        }
        if pl.known {
            i.peer_planes.acked = true;
        }
        if i.peer_planes.learn(pl.count, &pl.addrs) {
            for k in 1..i.sender.config().planes {
                if Self::plane_usable(tx, &i.peer_planes, k) {
                    i.sender.plane_up(k);
                }
            }
        }
        if !pl.known {
            self.send_planes(tx, peer, true);
        }
        self.pump(i, tx);
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
        let Some(peer) = i.peer else { return };
        if i.failed {
            return;
        }
        // Our plane list goes out until the peer confirms it (only needed
        // when we have planes besides plane 0; we answer the peer's anyway).
        if i.sender.config().planes > 1 && i.peer_planes.due(now) {
            let known = i.peer_planes.known;
            self.send_planes(tx, peer, known);
        }
        if i.sender.next_deadline().is_some_and(|d| d <= now) {
            i.sender.on_timer(now);
            self.pump(&mut i, tx);
        }
    }

    /// New send work requests may be in the ring: turn them into messages
    /// and send what the windows allow. In the error state they are
    /// flushed.
    pub(crate) fn kick(&self, tx: &TxCtx<'_>) {
        let mut i = self.inner.lock();
        if i.failed {
            self.flush_locked(&mut i);
            return;
        }
        if i.peer.is_none() {
            return;
        }
        self.take_requests(&mut i, tx);
        self.pump(&mut i, tx);
    }

    /// The largest engine message at the QP's MTU.
    fn max_msg(i: &Inner) -> u32 {
        i.sender.config().mtu.saturating_mul(MAX_MSG_PKTS as u32)
    }

    /// Turns the send ring's new work requests into engine messages, as
    /// many as the message window (and, for READs, `max_rd_atomic`) takes.
    fn take_requests(&self, i: &mut Inner, tx: &TxCtx<'_>) {
        let prod = self.sq.producer();
        let max_msg = Self::max_msg(i);
        while i.sq_taken != prod && !i.failed {
            let index = i.sq_taken;
            let slot = index as usize % WR_WINDOW;
            let prev = index.wrapping_sub(1) as usize % WR_WINDOW;
            if index != i.sq_head && i.wrs[prev].status != b::ib_wc_status_IB_WC_SUCCESS {
                // Nothing after a request in error is sent: it fails the QP.
                break;
            }
            if !i.taking {
                if index.wrapping_sub(i.sq_head) as usize >= WR_WINDOW {
                    break;
                }
                let Ok(req) = wqe::get_send(&self.sq, index) else {
                    i.failed = true;
                    break;
                };
                let mut w = OutWr {
                    wr_id: req.wr_id,
                    signaled: self.sq_sig_all || req.send_flags & (b::ib_send_flags_IB_SEND_SIGNALED as u32) != 0,
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
                };
                if let Some(wc_opcode) = local_op_wc(req.opcode) {
                    // Carried out now, in posting order; completes in its
                    // turn without a message (a failure fails the QP then).
                    w.wc_opcode = wc_opcode;
                    w.status = self.local_op(&req, index, &tx.st.mrs);
                    i.wrs[slot] = w;
                    i.sq_taken = index.wrapping_add(1);
                    continue;
                }
                if req.opcode == b::ib_wr_opcode_IB_WR_SEND_WITH_INV {
                    // The peer's key to invalidate rides in the SEND_INV's rkey.
                    w.rkey = req.ex;
                }
                let checked = match wc_opcode_for(req.opcode) {
                    // UC carries no READs, atomics or SEND_INV (protocol.md 5).
                    Some((op, _)) if i.uc.is_some() && (op.expects_response() || op == Opcode::SendInv) => {
                        Err(b::ib_wc_status_IB_WC_LOC_QP_OP_ERR)
                    }
                    Some((op, wc_opcode)) => {
                        w.opcode = op;
                        w.wc_opcode = wc_opcode;
                        check_request(&req, op, &tx.st.mrs.lock(), &self.local)
                    }
                    None => Err(b::ib_wc_status_IB_WC_LOC_QP_OP_ERR),
                };
                match checked {
                    Ok(len) => w.len = len,
                    Err(status) => {
                        // Completes in error in its turn; the QP fails then.
                        w.status = status;
                        i.wrs[slot] = w;
                        i.sq_taken = index.wrapping_add(1);
                        break;
                    }
                }
                i.wrs[slot] = w;
                i.taking = true;
            }
            // Post the request's next message(s).
            loop {
                let w = i.wrs[slot];
                let is_read = w.opcode.expects_response();
                let free_read = i.reads.iter().position(Option::is_none);
                if is_read && (i.reads.iter().flatten().count() >= i.max_rd_atomic || free_read.is_none()) {
                    return;
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
                    Opcode::Send | Opcode::SendImm | Opcode::SendInv => u64::from(w.posted) | if last { 0 } else { SEND_MORE },
                    _ => w.remote_va.wrapping_add(u64::from(w.posted)),
                };
                let msg = Message {
                    opcode: op,
                    // An atomic's message carries its operands.
                    len: op.atomic_len().unwrap_or(chunk),
                    remote_va,
                    rkey: if matches!(op, Opcode::Send | Opcode::SendImm) { 0 } else { w.rkey },
                    imm: w.imm,
                    rsn,
                };
                let msn = match i.sender.post(&msg) {
                    Ok(msn) => msn,
                    // The message window is full: the rest waits for ACKs.
                    Err(PostError::QueueFull) => return,
                    Err(_) => {
                        i.wrs[slot].status = b::ib_wc_status_IB_WC_LOC_LEN_ERR;
                        i.sq_taken = index.wrapping_add(1);
                        i.taking = false;
                        return;
                    }
                };
                if consumes_receive(op) && last {
                    i.tx_rsn = i.tx_rsn.wrapping_add(1);
                }
                i.out[msn as usize % MSG_WINDOW] = OutMsg::Wr { wr: index, offset: w.posted };
                if let (true, Some(r)) = (is_read, free_read) {
                    i.reads[r] = Some(PendingRead { req_msn: msn, wr: index, offset: w.posted, len: chunk });
                }
                let w = &mut i.wrs[slot];
                w.posted += chunk;
                w.pending += 1;
                if last {
                    break;
                }
            }
            i.taking = false;
            i.sq_taken = index.wrapping_add(1);
        }
    }

    /// Carries out a local work request (window bind, fast registration,
    /// local invalidation) at send ring index `index`; returns its
    /// completion status.
    fn local_op(&self, req: &SendReq, index: u32, mrs: &SpinLockBh<MrTable>) -> u32 {
        if req.opcode == b::ib_wr_opcode_IB_WR_REG_MR {
            // Kernel consumers only: a process may write any opcode into its
            // ring.
            let done = match self.local.kernel {
                Some(_) => mrs.lock().fast_register(self.local.pd, &wqe::get_bind(&self.sq, index)),
                None => Err(EINVAL),
            };
            return match done {
                Ok(()) => b::ib_wc_status_IB_WC_SUCCESS,
                Err(_) => b::ib_wc_status_IB_WC_LOC_QP_OP_ERR,
            };
        }
        if req.opcode == b::ib_uverbs_wr_opcode_IB_UVERBS_WR_BIND_MW {
            let bind = wqe::get_bind(&self.sq, index);
            match mrs.lock().bind(self.local.pd, &bind) {
                Ok(_) => b::ib_wc_status_IB_WC_SUCCESS,
                Err(_) => b::ib_wc_status_IB_WC_MW_BIND_ERR,
            }
        } else {
            match mrs.lock().invalidate(req.ex, self.local.pd) {
                Ok(()) => b::ib_wc_status_IB_WC_SUCCESS,
                Err(_) => b::ib_wc_status_IB_WC_LOC_QP_OP_ERR,
            }
        }
    }

    /// Posts the responses to the peer's READs and atomics that the
    /// message window takes, in request order.
    fn answer_reads(&self, i: &mut Inner) {
        while let Some(a) = i.answers[0] {
            let msg = Message { opcode: a.opcode, len: a.len, remote_va: 0, rkey: 0, imm: a.req_msn, rsn: 0 };
            let msn = match i.sender.post(&msg) {
                Ok(msn) => msn,
                Err(PostError::QueueFull) => return,
                Err(_) => {
                    i.failed = true;
                    return;
                }
            };
            i.out[msn as usize % MSG_WINDOW] = a.out;
            i.answers.rotate_left(1);
            if let Some(last) = i.answers.last_mut() {
                *last = None;
            }
        }
    }

    /// Sends every packet the engine has ready.
    fn pump(&self, i: &mut Inner, tx: &TxCtx<'_>) {
        let Some(peer) = i.peer else { return };
        self.pump_on(i, tx, peer);
        self.counters.sync_engine(i.sender.stats(), &tx.st.qp_counters, &tx.st.counters);
        self.complete_sends(i);
    }

    /// Sends each packet on its path's plane: from our netdev on that plane
    /// to the peer's address on it (plane 0: the connected GIDs; others:
    /// the source address the route picks on that netdev).
    fn pump_on(&self, i: &mut Inner, tx: &TxCtx<'_>, peer: Peer) {
        let now = now_ns();
        let planes = tx.st.planes.lock();
        while let Some(pkt) = i.sender.next_packet(now) {
            let (Some(ndev), Some(dst)) = (planes.get(pkt.plane), i.peer_planes.addr(pkt.plane)) else {
                // The plane went away since the engine chose it: the packet
                // counts as lost and is resent on another path.
                tx.st.counters.inc(Counter::TxErrors);
                continue;
            };
            let src = if pkt.plane == 0 { peer.local } else { Ipv4Addr::default() };
            let to = TxV4 { src, dst, src_port: pkt.src_port, ecn: Ecn::Ect0 };
            match pkt.kind {
                TxKind::Data { header, retransmit } => {
                    if retransmit {
                        tx.st.counters.inc(Counter::Retransmissions);
                        self.counters.add(&tx.st.qp_counters, Counter::Retransmissions, 1);
                    }
                    let n = header.payload_len as usize;
                    let len = wire::DATA_HEADER_LEN + n + wire::ICRC_LEN;
                    let mrs = &tx.st.mrs;
                    let out = i.out[header.msn as usize % MSG_WINDOW];
                    let _ = self.send(tx, ndev, &to, len, |buf| {
                        header.encode(buf).map_err(|_| EINVAL)?;
                        let body = &mut buf[wire::DATA_HEADER_LEN..wire::DATA_HEADER_LEN + n];
                        if header.opcode != Opcode::ReadReq {
                            match out {
                                OutMsg::Wr { wr, .. } if header.opcode.atomic_len().is_some() => {
                                    let w = &i.wrs[wr as usize % WR_WINDOW];
                                    atomic_operands(w, body)?;
                                }
                                OutMsg::Wr { wr, offset } => {
                                    let w = &i.wrs[wr as usize % WR_WINDOW];
                                    gather(w, (offset + header.offset) as usize, body, &mrs.lock(), &self.local)?;
                                }
                                OutMsg::AtomicResp { original } => {
                                    body.copy_from_slice(&original.to_be_bytes());
                                }
                                OutMsg::ReadResp { va, rkey } => {
                                    let at = va.wrapping_add(u64::from(header.offset));
                                    mrs.lock().read_remote(rkey, self.local.pd, at, body)?;
                                }
                            }
                        }
                        let icrc = crc32(&buf[..wire::DATA_HEADER_LEN + n]);
                        buf[wire::DATA_HEADER_LEN + n..len].copy_from_slice(&icrc.to_be_bytes());
                        Ok(len)
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

    /// Takes the engine's send completions into the work requests, then
    /// completes the finished requests in posting order.
    fn complete_sends(&self, i: &mut Inner) {
        while let Some(c) = i.sender.pop_completion() {
            match i.out[c.msn as usize % MSG_WINDOW] {
                OutMsg::Wr { wr, .. } => {
                    let w = &mut i.wrs[wr as usize % WR_WINDOW];
                    match c.status {
                        // A delivered READ_REQ or atomic waits for its
                        // response.
                        CompletionStatus::Success if c.opcode.expects_response() => {}
                        CompletionStatus::Success => w.pending = w.pending.saturating_sub(1),
                        CompletionStatus::Failed(s) => {
                            if w.status == b::ib_wc_status_IB_WC_SUCCESS {
                                w.status = remote_status(s);
                            }
                        }
                        // UC promises no delivery: a send is done once sent.
                        CompletionStatus::RetryExceeded if i.uc.is_some() => w.pending = w.pending.saturating_sub(1),
                        CompletionStatus::RetryExceeded => {
                            if w.status == b::ib_wc_status_IB_WC_SUCCESS {
                                w.status = b::ib_wc_status_IB_WC_RETRY_EXC_ERR;
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

    /// Completes finished work requests, oldest first; the first one in
    /// error fails the QP.
    fn retire(&self, i: &mut Inner) {
        while i.sq_head != i.sq_taken && !i.failed {
            let w = i.wrs[i.sq_head as usize % WR_WINDOW];
            let ok = w.status == b::ib_wc_status_IB_WC_SUCCESS;
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
                    wr_id: w.wr_id,
                    status: w.status,
                    opcode: w.wc_opcode,
                    byte_len: w.len,
                    qp_num: self.qpn,
                    ..Default::default()
                };
                let _ = self.send_cq.data().push(&self.send_cq, &wc, self.qp_addr, false);
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
        let mut i = self.inner.lock();
        i.failed = true;
        self.flush_locked(&mut i);
    }

    fn flush_locked(&self, i: &mut Inner) {
        self.error.store(true, Ordering::Release);
        let flushed = |wr_id, opcode| Completion {
            wr_id,
            status: b::ib_wc_status_IB_WC_WR_FLUSH_ERR,
            opcode,
            qp_num: self.qpn,
            ..Default::default()
        };
        let (mut cons, prod) = (i.sq_head, self.sq.producer());
        while cons != prod {
            let (wr_id, opcode) = if cons.wrapping_sub(i.sq_head) < i.sq_taken.wrapping_sub(i.sq_head)
                || (cons == i.sq_taken && i.taking)
            {
                let w = &i.wrs[cons as usize % WR_WINDOW];
                (w.wr_id, w.wc_opcode)
            } else {
                match wqe::get_send(&self.sq, cons) {
                    Ok(r) => (r.wr_id, wc_opcode_of(r.opcode)),
                    Err(_) => (0, b::ib_wc_opcode_IB_WC_SEND),
                }
            };
            if self.send_cq.data().push(&self.send_cq, &flushed(wr_id, opcode), self.qp_addr, false).is_err() {
                break;
            }
            cons = cons.wrapping_add(1);
        }
        self.sq.set_consumer(cons);
        i.sq_head = cons;
        i.sq_taken = cons;
        i.taking = false;
        i.reads = [None; MAX_RD_ATOMIC as usize];
        i.answers = [None; MAX_RD_ATOMIC as usize];
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
                self.after_progress(&mut i, tx);
            }
            Packet::Nak(nak) => {
                i.sender.on_nak(nak);
                self.complete_sends(&mut i);
            }
            Packet::ProbeReply(probe) => {
                i.sender.on_probe_reply(probe, now_ns());
                self.pump(&mut i, tx);
            }
            Packet::Planes(pl) => self.receive_planes(&mut i, tx, pl),
            Packet::Probe(_) => {}
        }
    }

    /// Messages or READs completed: requests that waited for a free slot
    /// may go, then whatever is ready is sent.
    fn after_progress(&self, i: &mut Inner, tx: &TxCtx<'_>) {
        self.complete_sends(i);
        if !i.failed {
            self.answer_reads(i);
            self.take_requests(i, tx);
        }
        self.pump(i, tx);
    }

    fn receive_data(&self, i: &mut Inner, tx: &TxCtx<'_>, ndev: &NetDevice, h: &DataHeader, payload: &[u8], meta: &RxMeta) {
        let cum_msn = i.receiver.cum_msn();
        match i.receiver.on_data(h, meta.ecn == Ecn::Ce, now_ns()) {
            RxVerdict::Place(p) if i.uc.is_some() => self.place_uc(i, tx, &p, payload),
            RxVerdict::Place(p) => {
                let placed = match p.opcode {
                    Opcode::Write | Opcode::WriteImm => {
                        if i.access & b::ib_access_flags_IB_ACCESS_REMOTE_WRITE == 0 {
                            Err(Syndrome::InvalidRequest)
                        } else {
                            tx.st.mrs.lock().write_remote(p.rkey, self.local.pd, p.remote_va, u64::from(p.offset), payload)
                        }
                    }
                    Opcode::ReadReq => {
                        if i.access & b::ib_access_flags_IB_ACCESS_REMOTE_READ == 0 {
                            Err(Syndrome::InvalidRequest)
                        } else {
                            tx.st.mrs.lock().check_remote_read(p.rkey, self.local.pd, p.remote_va, u64::from(p.msg_len))
                        }
                    }
                    // Checked now, run when it completes (protocol.md 5.1).
                    Opcode::CmpSwap | Opcode::FetchAdd | Opcode::AtomicWrite => {
                        self.accept_atomic(i, p.opcode, p.msn, p.remote_va, p.rkey, payload, &tx.st.mrs.lock())
                    }
                    Opcode::AtomicResp => self.place_atomic_response(i, h.imm, payload, &tx.st.mrs.lock()),
                    // The key must be one the QP may invalidate when the
                    // SEND completes.
                    Opcode::SendInv if !tx.st.mrs.lock().can_invalidate(p.rkey, self.local.pd) => Err(Syndrome::InvalidRequest),
                    // The response names our READ_REQ's MSN in `imm`.
                    Opcode::ReadResp => self.place_read_response(i, h.imm, p.msg_len, p.offset, payload, &tx.st.mrs.lock()),
                    _ => {
                        let at = (p.remote_va & !SEND_MORE).saturating_add(u64::from(p.offset));
                        self.place_send(i, p.rsn, at as usize, payload, &tx.st.mrs.lock())
                    }
                };
                if let Err(syndrome) = placed {
                    i.receiver.fail_message(p.msn, syndrome, h.path_id, h.psn);
                }
            }
            RxVerdict::Duplicate | RxVerdict::Discard => {}
            RxVerdict::Drop(_) => return,
        }
        let reply = meta.reply_to();
        // The NAK goes first, so the requester fails the message at once
        // (its success needs cum_msn, which the failure holds back; a lost
        // NAK is drawn out again by the requester's verdict probe).
        while let Some(nak) = i.receiver.pop_nak() {
            let _ = self.send(tx, ndev, &reply, wire::NAK_LEN + wire::ICRC_LEN, |buf| nak.encode(buf).map_err(|_| EINVAL));
        }
        if let Some(ack) = i.receiver.ack_for(h.path_id) {
            // An ACK that moves cum_msn goes twice: it alone completes the
            // peer's message, and when it is the peer's last one and this
            // QP is destroyed right after (a pingpong server's exit), a
            // lost copy would leave the peer resending to nobody.
            let copies = if i.receiver.cum_msn() != cum_msn { 2 } else { 1 };
            for _ in 0..copies {
                let _ = self.send(tx, ndev, &reply, wire::ACK_LEN + wire::ICRC_LEN, |buf| ack.encode(buf).map_err(|_| EINVAL));
            }
        }
        if self.complete_receives(i, &tx.st.mrs) {
            self.after_progress(i, tx);
        }
    }

    /// The receive buffer bound to receive sequence number `rsn`.
    pub(super) fn recv_ring(&self) -> Option<&SharedRing> {
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
        (ahead < ring.producer().wrapping_sub(ring.consumer())).then(|| ring.consumer().wrapping_add(ahead))
    }

    /// UC: places a packet, or drops its message when it cannot be placed
    /// (no NAK; a receive it would consume completes in error or, if not
    /// posted, is not consumed). READs are not UC operations: dropped.
    fn place_uc(&self, i: &mut Inner, tx: &TxCtx<'_>, p: &Placement, payload: &[u8]) {
        let Some(uc) = &i.uc else { return };
        if uc.dropping(p.msn) {
            return;
        }
        let placed = (|| {
            if p.opcode.has_rsn() {
                match uc.recv_fate(p.rsn) {
                    RecvFate::Taken => {}
                    // Another part of the same SEND was dropped.
                    fate => return Err(fate),
                }
                self.recv_index(i, p.rsn).ok_or(RecvFate::NotPosted)?;
            }
            let refused = RecvFate::Failed(b::ib_wc_status_IB_WC_REM_ACCESS_ERR);
            match p.opcode {
                Opcode::Write | Opcode::WriteImm if i.access & b::ib_access_flags_IB_ACCESS_REMOTE_WRITE == 0 => Err(refused),
                Opcode::Write | Opcode::WriteImm => tx
                    .st
                    .mrs
                    .lock()
                    .write_remote(p.rkey, self.local.pd, p.remote_va, u64::from(p.offset), payload)
                    .map_err(|_| refused),
                Opcode::Send | Opcode::SendImm => {
                    let at = (p.remote_va & !SEND_MORE).saturating_add(u64::from(p.offset));
                    self.place_send(i, p.rsn, at as usize, payload, &tx.st.mrs.lock()).map_err(|s| {
                        RecvFate::Failed(match s {
                            Syndrome::InvalidRequest => b::ib_wc_status_IB_WC_LOC_LEN_ERR,
                            _ => b::ib_wc_status_IB_WC_LOC_PROT_ERR,
                        })
                    })
                }
                // Not UC operations (READs, SEND_INV, atomics): dropped; the
                // receive a SEND_INV would take completes in error.
                op if op.has_rsn() => Err(RecvFate::Failed(b::ib_wc_status_IB_WC_REM_INV_REQ_ERR)),
                _ => Err(RecvFate::Taken),
            }
        })();
        if let (Err(fate), Some(uc)) = (placed, i.uc.as_mut()) {
            uc.drop_message(p.msn);
            if p.opcode.has_rsn() {
                uc.set_recv_fate(p.rsn, fate);
            }
        }
    }

    /// UC: what completing received message `c` does, given what was
    /// dropped.
    fn complete_uc(&self, i: &mut Inner, c: &RxCompletion) -> UcCompletion {
        let Some(uc) = i.uc.as_mut() else { return UcCompletion::AsRc };
        let dropped = uc.complete_message(c.msn);
        let last_part = !(c.opcode == Opcode::Send && c.remote_va & SEND_MORE != 0);
        if !(c.opcode.has_rsn() && last_part) {
            return if dropped { UcCompletion::Done } else { UcCompletion::AsRc };
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

    fn place_send(&self, i: &Inner, rsn: u16, offset: usize, payload: &[u8], mrs: &MrTable) -> core::result::Result<(), Syndrome> {
        let ring = self.recv_ring().ok_or(Syndrome::InvalidRequest)?;
        // No receive posted for it: an RNR condition, fatal on RC in v1.
        let index = self.recv_index(i, rsn).ok_or(Syndrome::InvalidRequest)?;
        let wqe = wqe::get_recv(ring, index).map_err(|_| Syndrome::InvalidRequest)?;
        scatter(&wqe.sges[..wqe.num_sge], offset, payload, mrs, &self.local)
    }

    /// Places bytes of the response to our READ_REQ `req_msn` into the
    /// READ's local buffer.
    fn place_read_response(&self, i: &Inner, req_msn: u32, msg_len: u32, offset: u32, payload: &[u8], mrs: &MrTable) -> core::result::Result<(), Syndrome> {
        let r = i.reads.iter().flatten().find(|r| r.req_msn == req_msn).ok_or(Syndrome::InvalidRequest)?;
        let w = &i.wrs[r.wr as usize % WR_WINDOW];
        if r.len != msg_len || w.opcode != Opcode::ReadReq {
            return Err(Syndrome::InvalidRequest);
        }
        scatter(&w.sges[..w.num_sge], (r.offset + offset) as usize, payload, mrs, &self.local)
    }

    /// Checks the peer's atomic request `msn` when it arrives (protocol.md
    /// 5.1: QP access and alignment, then the region) and keeps its
    /// operands until it completes.
    #[allow(clippy::too_many_arguments)]
    fn accept_atomic(&self, i: &mut Inner, op: Opcode, msn: u32, va: u64, rkey: u32, payload: &[u8], mrs: &MrTable) -> core::result::Result<(), Syndrome> {
        let access = atomic_access(op);
        if i.access & access == 0 || !va.is_multiple_of(u64::from(wire::ATOMIC_LEN)) {
            return Err(Syndrome::InvalidRequest);
        }
        mrs.check_remote_atomic(rkey, self.local.pd, va, access)?;
        let slot = &mut i.atomic_operands[msn as usize % MSG_WINDOW];
        slot.msn = msn;
        slot.bytes = [0; 16];
        slot.bytes.get_mut(..payload.len()).ok_or(Syndrome::InvalidRequest)?.copy_from_slice(payload);
        Ok(())
    }

    /// Runs the peer's atomic request that just completed (in MSN order)
    /// and queues its response with the original value. `None`: it cannot
    /// run any more (its region went away since it was accepted).
    fn run_atomic(&self, i: &Inner, op: Opcode, msn: u32, va: u64, rkey: u32, mrs: &MrTable) -> Option<u64> {
        let operands = i.atomic_operands[msn as usize % MSG_WINDOW];
        if operands.msn != msn {
            return None;
        }
        mrs.atomic_remote(rkey, self.local.pd, va, atomic_access(op), atomic_update(op, &operands.bytes)).ok()
    }

    /// Places the response to our atomic `req_msn`: the original value, in
    /// our byte order, into the request's 8-byte buffer (ATOMIC_WRITE has
    /// none and ignores it).
    fn place_atomic_response(&self, i: &Inner, req_msn: u32, payload: &[u8], mrs: &MrTable) -> core::result::Result<(), Syndrome> {
        let r = i.reads.iter().flatten().find(|r| r.req_msn == req_msn).ok_or(Syndrome::InvalidRequest)?;
        let w = &i.wrs[r.wr as usize % WR_WINDOW];
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
        match i.answers.iter_mut().find(|a| a.is_none()) {
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
        while let Some(c) = i.receiver.pop_completion() {
            let ok = c.status == CompletionStatus::Success;
            let recv_status = match self.complete_uc(i, &c) {
                UcCompletion::Done => continue,
                UcCompletion::AsRc => None,
                UcCompletion::RecvFailed(status) => Some(status),
            };
            match c.opcode {
                Opcode::ReadReq if ok => {
                    let answer = ToAnswer { req_msn: c.msn, opcode: Opcode::ReadResp, len: c.len, out: OutMsg::ReadResp { va: c.remote_va, rkey: c.rkey } };
                    self.queue_answer(i, answer);
                    progress = true;
                    continue;
                }
                Opcode::CmpSwap | Opcode::FetchAdd | Opcode::AtomicWrite if ok => {
                    // The one place an atomic runs: its completion is
                    // released once, however often the request arrived.
                    match self.run_atomic(i, c.opcode, c.msn, c.remote_va, c.rkey, &mrs.lock()) {
                        Some(original) => {
                            let answer = ToAnswer { req_msn: c.msn, opcode: Opcode::AtomicResp, len: wire::ATOMIC_LEN, out: OutMsg::AtomicResp { original } };
                            self.queue_answer(i, answer);
                        }
                        None => i.failed = true,
                    }
                    progress = true;
                    continue;
                }
                Opcode::ReadResp | Opcode::AtomicResp => {
                    let req_msn = c.imm.unwrap_or(0);
                    if let Some(slot) = i.reads.iter_mut().find(|r| r.is_some_and(|r| r.req_msn == req_msn)) {
                        if let Some(r) = slot.take() {
                            let w = &mut i.wrs[r.wr as usize % WR_WINDOW];
                            w.pending = w.pending.saturating_sub(1);
                            if !ok && w.status == b::ib_wc_status_IB_WC_SUCCESS {
                                // Its bytes could not be placed here.
                                w.status = b::ib_wc_status_IB_WC_LOC_PROT_ERR;
                            }
                        }
                    }
                    progress = true;
                    continue;
                }
                _ => {}
            }
            if ok && c.opcode == Opcode::Send && c.remote_va & SEND_MORE != 0 {
                // A part of a SEND: the receive completes with its last part.
                continue;
            }
            if !consumes_receive(c.opcode) {
                // A WRITE or READ the peer was refused: fatal here too.
                if !ok {
                    i.failed = true;
                    progress = true;
                }
                continue;
            }
            let Some(ring) = self.recv_ring() else { continue };
            let cons = ring.consumer();
            let wr_id = wqe::get_recv(ring, cons).map(|w| w.wr_id).unwrap_or(0);
            let status = match recv_status {
                Some(s) => s,
                None if ok => b::ib_wc_status_IB_WC_SUCCESS,
                None => b::ib_wc_status_IB_WC_LOC_PROT_ERR,
            };
            let (opcode, flags) = match c.opcode {
                Opcode::WriteImm => (b::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM, b::ib_wc_flags_IB_WC_WITH_IMM),
                Opcode::SendImm => (b::ib_wc_opcode_IB_WC_RECV, b::ib_wc_flags_IB_WC_WITH_IMM),
                Opcode::SendInv => (b::ib_wc_opcode_IB_WC_RECV, b::ib_wc_flags_IB_WC_WITH_INVALIDATE),
                _ => (b::ib_wc_opcode_IB_WC_RECV, 0),
            };
            if ok && c.opcode == Opcode::SendInv {
                // Checked when placed; it may have gone since (deallocated).
                let _ = mrs.lock().invalidate(c.rkey, self.local.pd);
            }
            let wc = Completion {
                wr_id,
                status,
                opcode,
                byte_len: match c.opcode {
                    // The SEND's bytes up to and including its last part.
                    Opcode::Send | Opcode::SendImm | Opcode::SendInv => ((c.remote_va & !SEND_MORE) as u32).saturating_add(c.len),
                    _ => c.len,
                },
                // The invalidated key, or the immediate (network order).
                ex: if c.opcode == Opcode::SendInv { c.rkey } else { c.imm.map_or(0, u32::to_be) },
                qp_num: self.qpn,
                wc_flags: flags,
                ..Default::default()
            };
            let _ = self.recv_cq.data().push(&self.recv_cq, &wc, self.qp_addr, true);
            ring.set_consumer(cons.wrapping_add(1));
            i.rx_rsn = i.rx_rsn.wrapping_add(1);
            if !ok {
                i.failed = true;
                progress = true;
            }
        }
        progress
    }
}

/// The operands of an atomic work request as its packet carries them
/// (protocol.md 5.1): compare and swap, the addend (big-endian numbers), or
/// the 8 bytes to store.
fn atomic_operands(w: &OutWr, out: &mut [u8]) -> Result {
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
    out.copy_from_slice(b.get(..out.len()).ok_or(EINVAL)?);
    Ok(())
}

/// Copies bytes `[offset, offset + out.len())` of a work request's data
/// out of its local buffers.
fn gather(m: &OutWr, offset: usize, out: &mut [u8], mrs: &MrTable, who: &Requester) -> Result {
    if m.is_inline {
        let src = m.inline[..m.inline_len].get(offset..offset + out.len()).ok_or(EINVAL)?;
        out.copy_from_slice(src);
        return Ok(());
    }
    gather_sges(&m.sges[..m.num_sge], offset, out, mrs, who)
}

/// Copies bytes `[offset, offset + out.len())` of the buffer made of `sges`.
pub(super) fn gather_sges(sges: &[Sge], offset: usize, out: &mut [u8], mrs: &MrTable, who: &Requester) -> Result {
    let mut skip = offset;
    let mut done = 0;
    for s in sges {
        if done == out.len() {
            break;
        }
        let len = s.length as usize;
        if skip >= len {
            skip -= len;
            continue;
        }
        let n = (len - skip).min(out.len() - done);
        mrs.read_local(s.lkey, who, s.addr + skip as u64, &mut out[done..done + n])?;
        done += n;
        skip = 0;
    }
    if done == out.len() { Ok(()) } else { Err(EINVAL) }
}

/// Writes `payload` at `offset` of a receive buffer made of `sges`.
pub(super) fn scatter(sges: &[Sge], offset: usize, payload: &[u8], mrs: &MrTable, who: &Requester) -> core::result::Result<(), Syndrome> {
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
        mrs.write_local(s.lkey, who, s.addr + skip as u64, &payload[done..done + n])
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
        Packet::Planes(p) => p.dst_qpn,
        Packet::Probe(_) => return false,
    };
    let qps = dev.data().qps.lock();
    let Some(t) = qps.get(qpn) else { return false };
    t.counters.on_receive(&tx.st.qp_counters, super::qp_counters::wire_len(pkt), meta.ecn == Ecn::Ce);
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
