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

use super::ack_routes::AckRoutes;
use super::cq::CqState;
use super::device::{DeviceState, MetaRoceIbDevice};
use super::limits::{MAX_INLINE, MAX_MSG_SIZE, MAX_RD_ATOMIC, MAX_SGE};
use super::mr::{MrTable, Requester};
use super::net::{send, send_data, RxFate, RxMeta};
use super::plane::PeerPlanes;
use super::qp_counters::QpCounters;
use super::srq::SrqState;
use super::stats::Counter;
use super::uc::{RecvFate, UcDrops};
use super::wqe::{self, Completion, RecvWqe, SendReq, Sge};
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
use crate::ib::skb::{Ecn, Ipv4Addr, TxTail};
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
    sges: [Sge {
        addr: 0,
        length: 0,
        lkey: 0,
    }; MAX_SGE as usize],
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

/// A receive this QP took from its SRQ for the message numbered `rsn`.
#[derive(Clone, Copy)]
struct TakenRecv {
    rsn: u16,
    wqe: RecvWqe,
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
    /// With an SRQ: the receives taken for messages in progress, at
    /// `rsn % MSG_WINDOW` (at most `MSG_WINDOW` are in progress, so their
    /// `rsn`s are distinct there). Empty without an SRQ: the QP's own ring
    /// binds receives by position.
    srq_taken: KVVec<Option<TakenRecv>>,
    /// Where the ACKs the receiver engine holds go (protocol.md 3.4).
    ack_routes: AckRoutes,
}

impl Inner {
    /// The slot of our READ or atomic `req_msn` still waiting for its
    /// response, if any.
    fn read_slot(&self, req_msn: u32) -> Option<usize> {
        self.reads
            .iter()
            .position(|r| r.is_some_and(|r| r.req_msn == req_msn))
    }
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
    /// A kernel consumer posted with interrupts off: the next tick takes
    /// the new requests (`kick` needs the bh-safe lock).
    kick_deferred: AtomicBool,
    pub(super) sq_sig_all: bool,
    /// Per-QP counting (`rdma statistic qp`).
    pub(crate) counters: QpCounters,
}

/// The device pieces a packet is sent with.
pub(crate) struct TxCtx<'a> {
    pub(crate) st: &'a DeviceState,
    pub(crate) sock: &'a TunnelSock,
}

/// The monotonic clock the engines and rate limits run on (ns).
pub(crate) fn now_ns() -> u64 {
    Ktime::ktime_get().to_ns() as u64
}

fn wc_opcode_for(opcode: u32) -> Option<(Opcode, u32)> {
    Some(match opcode {
        b::ib_wr_opcode_IB_WR_SEND => (Opcode::Send, b::ib_wc_opcode_IB_WC_SEND),
        b::ib_wr_opcode_IB_WR_SEND_WITH_IMM => (Opcode::SendImm, b::ib_wc_opcode_IB_WC_SEND),
        b::ib_wr_opcode_IB_WR_SEND_WITH_INV => (Opcode::SendInv, b::ib_wc_opcode_IB_WC_SEND),
        b::ib_wr_opcode_IB_WR_RDMA_WRITE => (Opcode::Write, b::ib_wc_opcode_IB_WC_RDMA_WRITE),
        b::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM => {
            (Opcode::WriteImm, b::ib_wc_opcode_IB_WC_RDMA_WRITE)
        }
        b::ib_wr_opcode_IB_WR_RDMA_READ => (Opcode::ReadReq, b::ib_wc_opcode_IB_WC_RDMA_READ),
        b::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP => {
            (Opcode::CmpSwap, b::ib_wc_opcode_IB_WC_COMP_SWAP)
        }
        b::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
            (Opcode::FetchAdd, b::ib_wc_opcode_IB_WC_FETCH_ADD)
        }
        b::ib_wr_opcode_IB_WR_ATOMIC_WRITE => {
            (Opcode::AtomicWrite, b::ib_wc_opcode_IB_WC_ATOMIC_WRITE)
        }
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
    local_op_wc(opcode)
        .or(wc_opcode_for(opcode).map(|(_, o)| o))
        .unwrap_or(b::ib_wc_opcode_IB_WC_SEND)
}

fn consumes_receive(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::Send | Opcode::SendImm | Opcode::SendInv | Opcode::WriteImm
    )
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
    ack_timeout
        .saturating_mul(u64::from(retry_cnt.min(7)) + 1)
        .max(RETRY_BUDGET_FLOOR_NS)
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
fn check_request(
    req: &SendReq,
    op: Opcode,
    mrs: &MrTable,
    who: &Requester,
) -> core::result::Result<u32, u32> {
    if op.atomic_len().is_some() {
        return check_atomic(req, op, mrs, who);
    }
    let len = u32::try_from(req.len())
        .ok()
        .filter(|&l| l <= MAX_MSG_SIZE)
        .ok_or(b::ib_wc_status_IB_WC_LOC_LEN_ERR)?;
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
fn check_atomic(
    req: &SendReq,
    op: Opcode,
    mrs: &MrTable,
    who: &Requester,
) -> core::result::Result<u32, u32> {
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
        let mut srq_taken = KVVec::new();
        if srq.is_some() {
            srq_taken.reserve(MSG_WINDOW, GFP_KERNEL)?;
            for _ in 0..MSG_WINDOW {
                srq_taken.push(None, GFP_KERNEL)?;
            }
        }
        let mut atomic_operands = KVVec::with_capacity(MSG_WINDOW, GFP_KERNEL)?;
        for _ in 0..MSG_WINDOW {
            atomic_operands.push(
                AtomicOperands {
                    msn: 0,
                    bytes: [0; 16],
                },
                GFP_KERNEL,
            )?;
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
            srq_taken,
            ack_routes: AckRoutes::NONE,
        };
        Ok(Arc::new(
            Self {
                inner: KBox::pin_init(
                    new_spinlock_bh!(inner, "metaroce_qp_transport"),
                    GFP_KERNEL,
                )?,
                sq,
                rq,
                srq,
                send_cq: cqs.0,
                recv_cq: cqs.1,
                qpn,
                qp_addr,
                local,
                error: AtomicBool::new(false),
                kick_deferred: AtomicBool::new(false),
                sq_sig_all,
                counters: QpCounters::new(),
            },
            GFP_KERNEL,
        )?)
    }

    /// Sends one packet of this QP (see [`send`]), counted for the QP too.
    fn send(
        &self,
        tx: &TxCtx<'_>,
        ndev: &NetDevice,
        to: &TxV4,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<usize>,
    ) -> Result {
        let sent = send(tx.st, tx.sock, ndev, to, len, fill);
        self.counters.on_send(&tx.st.qp_counters, &sent, len);
        sent
    }

    /// Sends one data packet of this QP (see [`send_data`]), counted for
    /// the QP too.
    fn send_data(
        &self,
        tx: &TxCtx<'_>,
        ndev: &NetDevice,
        to: &TxV4,
        len: usize,
        fill: impl FnOnce(&mut TxTail<'_>) -> Result,
    ) -> Result {
        let sent = send_data(tx.st, tx.sock, ndev, to, len, fill);
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
    ///
    /// The peer's first message is expected at `rq_psn`, the initial PSN
    /// the ends exchanged (protocol.md 2). Ours are numbered from `sq_psn`
    /// once we reach RTS ([`Transport::start_sending`]); a responder that
    /// answers in RTR numbers its responses from `rq_psn` instead and
    /// flags them, since the peer knows that number too.
    pub(crate) fn connect(&self, peer: Peer, mtu: u32, planes: u8, rq_psn: u32) -> Result {
        let now = now_ns();
        let mut i = self.inner.lock();
        let cfg = SenderConfig {
            dst_qpn: peer.qpn,
            mtu,
            planes,
            entropy_seed: self.qpn ^ 0x5eed,
            give_up_ns: i.give_up_ns,
            ..SenderConfig::DEFAULT
        };
        i.sender.reset(cfg, now).map_err(|_| EINVAL)?;
        for k in 1..planes {
            i.sender.plane_down(k);
        }
        i.receiver
            .reset(ReceiverConfig {
                peer_qpn: peer.qpn,
                mtu,
            })
            .map_err(|_| EINVAL)?;
        i.receiver.start_at(rq_psn);
        i.sender.start_at(rq_psn, true);
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
        i.srq_taken.fill(None);
        if let Some(uc) = i.uc.as_mut() {
            *uc = UcDrops::NONE;
        }
        Ok(())
    }

    /// RTS: our own initial PSN is known. Our messages are numbered from it
    /// unless we already answered from the peer's (in RTR), and the peer's
    /// responses numbered from it are accepted.
    pub(crate) fn start_sending(&self, sq_psn: u32) {
        let mut i = self.inner.lock();
        if i.peer.is_some() {
            i.sender.start_at(sq_psn, false);
            i.receiver.own_start(sq_psn);
        }
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

    /// RESET: the data path starts over (RTR connects it again). As in
    /// InfiniBand the QP forgets its connection and what its queues hold,
    /// without completions: a later INIT -> ERR flushes only what is
    /// posted after this. Receives it took from an SRQ for messages in
    /// progress are the exception: they are no longer in the SRQ, so they
    /// complete flushed here rather than being lost to the consumer.
    pub(crate) fn reset(&self) {
        {
            let mut i = self.inner.lock();
            i.failed = false;
            self.error.store(false, Ordering::Release);
            i.peer = None;
            self.sq.set_consumer(self.sq.producer());
            if let Some(rq) = &self.rq {
                rq.set_consumer(rq.producer());
            }
            i.sq_head = self.sq.consumer();
            i.sq_taken = i.sq_head;
            i.taking = false;
            i.reads = [None; MAX_RD_ATOMIC as usize];
            i.answers = [None; MAX_RD_ATOMIC as usize];
            self.flush_srq_taken(&mut i);
        }
        self.deliver_cq_events();
    }

    /// Runs `f` on the QP's sender engine (its paths and counters) under
    /// the transport's lock: for reports (`qp_details`), not the data path.
    pub(crate) fn with_sender<R>(&self, f: impl FnOnce(&Sender) -> R) -> R {
        let i = self.inner.lock();
        f(&i.sender)
    }

    /// The data path failed (a work request completed in error): the QP
    /// is in the error state.
    pub(crate) fn failed(&self) -> bool {
        self.error.load(Ordering::Acquire)
    }

    /// Sends our plane list to the peer on plane 0, saying whether we hold
    /// its list and asking for an answer until it said it holds ours.
    fn send_planes(&self, tx: &TxCtx<'_>, peer: Peer, pp: &PeerPlanes) {
        let planes = tx.st.planes.lock();
        let Some(ndev) = planes.get(0) else { return };
        let (count, addrs) = planes.addrs(peer.local);
        let pl = Planes {
            dst_qpn: peer.qpn,
            src_qpn: self.qpn,
            known: pp.known,
            confirm: !pp.acked,
            count,
            addrs,
        };
        let to = TxV4 {
            src: peer.local,
            dst: peer.remote,
            src_port: wire::UDP_PORT,
            ecn: Ecn::Ect0,
        };
        let _ = self.send(tx, ndev, &to, wire::PLANES_LEN + wire::ICRC_LEN, |buf| {
            pl.encode(buf).map_err(|_| EINVAL)
        });
    }

    /// Whether plane `k` can carry this QP's packets: our netdev has
    /// carrier, the peer's address on it is known, and the peer said it
    /// holds ours (before, it would drop what we send from there as not
    /// from its peer, protocol.md 1.8).
    fn plane_usable(tx: &TxCtx<'_>, pp: &PeerPlanes, k: u8) -> bool {
        (k == 0 || (pp.known && pp.acked))
            && pp.addr(k).is_some()
            && tx
                .st
                .planes
                .lock()
                .get(k)
                .is_some_and(|n| n.is_running_with_carrier())
    }

    /// Plane `plane`'s netdev gained (`up`) or lost carrier or went away:
    /// its paths return (after a probe) or are drained onto the others.
    pub(crate) fn plane_event(&self, tx: &TxCtx<'_>, plane: u8, up: bool) {
        {
            let mut i = self.inner.lock();
            if i.peer.is_some() && !i.failed && plane < i.sender.config().planes {
                if !up {
                    i.sender.plane_down(plane);
                } else if Self::plane_usable(tx, &i.peer_planes, plane) {
                    i.sender.plane_up(plane);
                }
                self.pump(&mut i, tx);
            }
        }
        self.deliver_cq_events();
    }

    /// The peer's PLANES packet: learn its addresses (its planes become
    /// usable), confirm that we have them, stop repeating ours once it
    /// confirms.
    fn receive_planes(&self, i: &mut Inner, tx: &TxCtx<'_>, pl: &Planes) {
        let Some(peer) = i.peer else { return };
        if pl.src_qpn != peer.qpn || i.failed {
            return;
        }
        let confirmed = i.peer_planes.acked;
        if pl.known {
            i.peer_planes.acked = true;
        }
        if i.peer_planes.learn(pl.count, &pl.addrs) || confirmed != i.peer_planes.acked {
            for k in 1..i.sender.config().planes {
                if Self::plane_usable(tx, &i.peer_planes, k) {
                    i.sender.plane_up(k);
                }
            }
        }
        if !pl.known || pl.confirm {
            self.send_planes(tx, peer, &i.peer_planes);
        }
        self.pump(i, tx);
    }

    /// The connected peer QP, if `src` is the peer's address on `ndev`'s
    /// plane (protocol.md 3): who a probe of ours may be answered for.
    pub(crate) fn peer_qpn_from(
        &self,
        st: &DeviceState,
        ndev: &NetDevice,
        src: Ipv4Addr,
    ) -> Option<u32> {
        let i = self.inner.lock();
        let peer = i.peer?;
        let plane = st.planes.lock().index_of(ndev)?;
        (i.peer_planes.addr(plane) == Some(src)).then_some(peer.qpn)
    }

    /// The periodic tick: fires the engine's timers (retransmission
    /// timeouts, probes) that are due, and sends what they release.
    pub(crate) fn tick(&self, tx: &TxCtx<'_>) {
        if self.kick_deferred.swap(false, Ordering::AcqRel) {
            self.kick(tx);
        }
        self.tick_locked(&mut self.inner.lock(), tx);
        self.deliver_cq_events();
    }

    fn tick_locked(&self, i: &mut Inner, tx: &TxCtx<'_>) {
        let now = now_ns();
        let Some(peer) = i.peer else { return };
        if i.failed {
            // Receives a process posts in error (no system call) complete
            // flushed within a tick.
            if self
                .rq
                .as_ref()
                .is_some_and(|rq| rq.producer() != rq.consumer())
            {
                self.flush_locked(i);
            }
            return;
        }
        // Every ACK the receiver engine held goes now: the next tick would
        // be later than protocol.md 3.4 lets a packet wait.
        while let Some(ack) = i.receiver.flush(u64::MAX) {
            let planes = tx.st.planes.lock();
            if let Some((ndev, to)) = i
                .ack_routes
                .of(ack.path_id)
                .and_then(|(k, to)| Some((planes.get(k)?, to)))
            {
                let _ = self.send(tx, ndev, &to, wire::ACK_LEN + wire::ICRC_LEN, |buf| {
                    ack.encode(buf).map_err(|_| EINVAL)
                });
            }
        }
        // Our plane list goes out until the peer confirms it (only needed
        // when we have planes besides plane 0; we answer the peer's anyway).
        if i.sender.config().planes > 1 && i.peer_planes.due(now) {
            self.send_planes(tx, peer, &i.peer_planes);
        }
        if i.sender.next_deadline().is_some_and(|d| d <= now) {
            i.sender.on_timer(now);
            self.pump(i, tx);
        }
    }

    /// New send work requests may be in the ring: turn them into messages
    /// and send what the windows allow. In the error state they are
    /// flushed.
    pub(crate) fn kick(&self, tx: &TxCtx<'_>) {
        {
            let mut i = self.inner.lock();
            if i.failed {
                self.flush_locked(&mut i);
            } else if i.peer.is_some() {
                self.take_requests(&mut i, tx);
                self.pump(&mut i, tx);
            }
        }
        self.deliver_cq_events();
    }

    /// Leaves the next [`Transport::kick`] to the device tick.
    pub(crate) fn defer_kick(&self) {
        self.kick_deferred.store(true, Ordering::Release);
    }

    /// The largest engine message at the QP's MTU.
    fn max_msg(i: &Inner) -> u32 {
        i.sender.config().mtu.saturating_mul(MAX_MSG_PKTS as u32)
    }

    /// Turns the send ring's new work requests into engine messages, as
    /// many as the message window (and, for READs, `max_rd_atomic`) takes.
    fn take_requests(&self, i: &mut Inner, tx: &TxCtx<'_>) {
        if i.peer.is_none() {
            return;
        }
        let prod = self.sq.producer();
        if self.sq.pending_from(i.sq_head).is_none() {
            // The process wrote its producer index more than a ring ahead
            // of what the kernel consumed: the ring is garbage, the QP in
            // error (its taken requests complete flushed).
            pr_warn!(
                "metaroce: QP {}: send ring indices corrupted by the process; QP in error\n",
                self.qpn
            );
            i.failed = true;
            return;
        }
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
                    signaled: self.sq_sig_all
                        || req.send_flags & (b::ib_send_flags_IB_SEND_SIGNALED as u32) != 0,
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
                    Some((op, _))
                        if i.uc.is_some() && (op.expects_response() || op == Opcode::SendInv) =>
                    {
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
                if is_read
                    && (i.reads.iter().flatten().count() >= i.max_rd_atomic || free_read.is_none())
                {
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
                i.out[msn as usize % MSG_WINDOW] = OutMsg::Wr {
                    wr: index,
                    offset: w.posted,
                };
                if let (true, Some(r)) = (is_read, free_read) {
                    i.reads[r] = Some(PendingRead {
                        req_msn: msn,
                        wr: index,
                        offset: w.posted,
                        len: chunk,
                    });
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
                Some(_) => mrs
                    .lock()
                    .fast_register(self.local.pd, &wqe::get_bind(&self.sq, index)),
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
        if i.peer.is_none() {
            return;
        }
        while let Some(a) = i.answers[0] {
            let msg = Message {
                opcode: a.opcode,
                len: a.len,
                remote_va: 0,
                rkey: 0,
                imm: a.req_msn,
                rsn: 0,
            };
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
        self.counters
            .sync_engine(i.sender.stats(), &tx.st.qp_counters, &tx.st.counters);
        self.complete_sends(i);
    }

    /// Sends each packet on its path's plane: from our netdev on that plane
    /// to the peer's address on it (plane 0: the connected GIDs; others:
    /// the source address the route picks on that netdev).
    fn pump_on(&self, i: &mut Inner, tx: &TxCtx<'_>, peer: Peer) {
        let now = now_ns();
        let planes = tx.st.planes.lock();
        while let Some(pkt) = i.sender.next_packet(now) {
            let (Some(ndev), Some(dst)) = (planes.get(pkt.plane), i.peer_planes.addr(pkt.plane))
            else {
                // The plane went away since the engine chose it: the packet
                // counts as lost and is resent on another path.
                tx.st.counters.inc(Counter::TxErrors);
                continue;
            };
            let src = if pkt.plane == 0 {
                peer.local
            } else {
                Ipv4Addr::default()
            };
            let to = TxV4 {
                src,
                dst,
                src_port: pkt.src_port,
                ecn: Ecn::Ect0,
            };
            match pkt.kind {
                TxKind::Data { header, retransmit } => {
                    if retransmit {
                        tx.st.counters.inc(Counter::Retransmissions);
                        self.counters
                            .add(&tx.st.qp_counters, Counter::Retransmissions, 1);
                    }
                    let n = header.payload_len as usize;
                    let len = wire::DATA_HEADER_LEN + n + wire::ICRC_LEN;
                    let mrs = &tx.st.mrs;
                    let out = i.out[header.msn as usize % MSG_WINDOW];
                    let _ = self.send_data(tx, ndev, &to, len, |buf| {
                        put_data_packet(buf, &header, |body| {
                            if header.opcode == Opcode::ReadReq {
                                return Ok(());
                            }
                            match out {
                                OutMsg::Wr { wr, .. } if header.opcode.atomic_len().is_some() => {
                                    let w = &i.wrs[wr as usize % WR_WINDOW];
                                    atomic_operands(w, n, body)
                                }
                                OutMsg::Wr { wr, offset } => {
                                    let w = &i.wrs[wr as usize % WR_WINDOW];
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
                        CompletionStatus::RetryExceeded if i.uc.is_some() => {
                            w.pending = w.pending.saturating_sub(1)
                        }
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
        let mut i = self.inner.lock();
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

    fn flush_locked(&self, i: &mut Inner) {
        self.error.store(true, Ordering::Release);
        let flushed = |wr_id, opcode| Completion {
            wr_id,
            status: b::ib_wc_status_IB_WC_WR_FLUSH_ERR,
            opcode,
            qp_num: self.qpn,
            ..Default::default()
        };
        if i.peer.is_none() {
            // Never connected (a datagram QP, or RC before RTR): the ring's
            // consumer index is where the data path stopped.
            i.sq_head = self.sq.consumer();
            i.sq_taken = i.sq_head;
            i.taking = false;
        }
        // What the ring holds; if the process wrote its producer index more
        // than a ring ahead, only the requests already taken.
        let mut cons = i.sq_head;
        let taken = i.sq_taken.wrapping_sub(i.sq_head) + u32::from(i.taking);
        for _ in 0..self.sq.pending_from(cons).unwrap_or(taken) {
            let (wr_id, opcode) = if cons.wrapping_sub(i.sq_head)
                < i.sq_taken.wrapping_sub(i.sq_head)
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
        i.reads = [None; MAX_RD_ATOMIC as usize];
        i.answers = [None; MAX_RD_ATOMIC as usize];
        if let Some(rq) = &self.rq {
            let mut cons = rq.consumer();
            for _ in 0..rq.pending_from(cons).unwrap_or(0) {
                let wr_id = wqe::get_recv(rq, cons).map_or(0, |w| w.wr_id);
                if self
                    .recv_cq
                    .data()
                    .push(
                        &self.recv_cq,
                        &flushed(wr_id, b::ib_wc_opcode_IB_WC_RECV),
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
    fn flush_srq_taken(&self, i: &mut Inner) {
        let flushed = |wr_id| Completion {
            wr_id,
            status: b::ib_wc_status_IB_WC_WR_FLUSH_ERR,
            opcode: b::ib_wc_opcode_IB_WC_RECV,
            qp_num: self.qpn,
            ..Default::default()
        };
        for k in 0..i.srq_taken.len() {
            let rsn = i.rx_rsn.wrapping_add(k as u16);
            let slot = rsn as usize % MSG_WINDOW;
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

    /// A packet for this QP arrived on `ndev` (receive softirq).
    pub(crate) fn receive(
        &self,
        tx: &TxCtx<'_>,
        ndev: &NetDevice,
        pkt: &Packet<'_>,
        meta: &RxMeta,
    ) -> RxFate {
        let fate = self.receive_locked(&mut self.inner.lock(), tx, ndev, pkt, meta);
        self.deliver_cq_events();
        fate
    }

    fn receive_locked(
        &self,
        i: &mut Inner,
        tx: &TxCtx<'_>,
        ndev: &NetDevice,
        pkt: &Packet<'_>,
        meta: &RxMeta,
    ) -> RxFate {
        // The plane the packet came in on: who may send on it, and where a
        // held ACK goes back.
        let plane = tx.st.planes.lock().index_of(ndev);
        if i.failed {
            // In error the QP places, answers and acknowledges nothing; its
            // peer's requests end in its retry budget. Only a packet of the
            // message that failed here gets that message's NAK again: the
            // requester whose NAK was lost learns why (protocol.md 3.2).
            tx.st.counters.inc(Counter::RxQpInError);
            if let Packet::Data { header, .. } = pkt {
                if self.from_peer(i, plane, pkt, meta) {
                    if let Some(nak) = i.receiver.nak_again(header) {
                        let reply = meta.reply_to();
                        let _ =
                            self.send(tx, ndev, &reply, wire::NAK_LEN + wire::ICRC_LEN, |buf| {
                                nak.encode(buf).map_err(|_| EINVAL)
                            });
                    }
                }
            }
            return RxFate::Dropped;
        }
        if !self.from_peer(i, plane, pkt, meta) {
            tx.st.counters.inc(Counter::RxNotPeer);
            return RxFate::Dropped;
        }
        match pkt {
            Packet::Data { header, payload } => {
                self.receive_data(i, tx, ndev, plane, header, payload, meta)
            }
            Packet::Ack(ack) => {
                let stale = i.sender.stats().stale_acks;
                i.sender.on_ack(ack, now_ns());
                if i.sender.stats().stale_acks != stale {
                    tx.st.counters.inc(Counter::RxStaleAcks);
                }
                self.after_progress(i, tx);
            }
            Packet::Nak(nak) => {
                let stale = i.sender.stats().stale_naks;
                i.sender.on_nak(nak);
                if i.sender.stats().stale_naks != stale {
                    tx.st.counters.inc(Counter::RxStaleNaks);
                }
                self.complete_sends(i);
            }
            Packet::ProbeReply(probe) => {
                i.sender.on_probe_reply(probe, now_ns());
                self.pump(i, tx);
            }
            Packet::Planes(pl) => self.receive_planes(i, tx, pl),
            Packet::Probe(_) => {}
        }
        RxFate::Consumed
    }

    /// Whether `pkt` comes from the connected peer: from its address on the
    /// plane it arrived on (`plane`), and a PLANES packet from its plane-0
    /// address (the one the QP was connected to) only (protocol.md 3).
    fn from_peer(&self, i: &Inner, plane: Option<u8>, pkt: &Packet<'_>, meta: &RxMeta) -> bool {
        let Some(peer) = i.peer else { return false };
        if matches!(pkt, Packet::Planes(_)) {
            return meta.src == peer.remote;
        }
        plane.and_then(|k| i.peer_planes.addr(k)) == Some(meta.src)
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

    #[allow(clippy::too_many_arguments)]
    fn receive_data(
        &self,
        i: &mut Inner,
        tx: &TxCtx<'_>,
        ndev: &NetDevice,
        plane: Option<u8>,
        h: &DataHeader,
        payload: &[u8],
        meta: &RxMeta,
    ) {
        let cum_msn = i.receiver.cum_msn();
        match i.receiver.on_data(h, meta.ecn == Ecn::Ce, now_ns()) {
            RxVerdict::Place(p) if i.uc.is_some() => self.place_uc(i, tx, &p, payload),
            RxVerdict::Place(p) => {
                let placed = match p.opcode {
                    Opcode::Write | Opcode::WriteImm => {
                        if i.access & b::ib_access_flags_IB_ACCESS_REMOTE_WRITE == 0 {
                            Err(Syndrome::InvalidRequest)
                        } else if p.opcode == Opcode::WriteImm && self.recv_for(i, p.rsn).is_err() {
                            // Its receive is bound by its first packet, as a
                            // SEND's is: with none posted the message fails
                            // with a NAK before anything is acknowledged.
                            Err(Syndrome::InvalidRequest)
                        } else {
                            tx.st.mrs.lock().write_remote(
                                p.rkey,
                                self.local.pd,
                                p.remote_va,
                                p.msg_len,
                                u64::from(p.offset),
                                payload,
                            )
                        }
                    }
                    Opcode::ReadReq => {
                        // A response longer than one engine message could
                        // not be posted (a requester splits its READs so):
                        // refused with a NAK, not a failed QP here.
                        if i.access & b::ib_access_flags_IB_ACCESS_REMOTE_READ == 0
                            || p.msg_len > Self::max_msg(i)
                        {
                            Err(Syndrome::InvalidRequest)
                        } else {
                            tx.st.mrs.lock().check_remote_read(
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
                        &tx.st.mrs.lock(),
                    ),
                    Opcode::AtomicResp => {
                        self.place_atomic_response(i, h.imm, payload, &tx.st.mrs.lock())
                    }
                    // The key must be one the QP may invalidate when the
                    // SEND completes.
                    Opcode::SendInv if !tx.st.mrs.lock().can_invalidate(p.rkey, self.local.pd) => {
                        Err(Syndrome::InvalidRequest)
                    }
                    // The response names our READ_REQ's MSN in `imm`.
                    Opcode::ReadResp => self.place_read_response(
                        i,
                        h.imm,
                        p.msg_len,
                        p.offset,
                        payload,
                        &tx.st.mrs.lock(),
                    ),
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
            RxVerdict::Drop(_) => {
                tx.st.counters.inc(Counter::RxDataDropped);
                return;
            }
        }
        let reply = meta.reply_to();
        // The NAK goes first, so the requester fails the message at once
        // (its success needs cum_msn, which the failure holds back; a lost
        // NAK is drawn out again by the requester's verdict probe).
        while let Some(nak) = i.receiver.pop_nak() {
            let _ = self.send(tx, ndev, &reply, wire::NAK_LEN + wire::ICRC_LEN, |buf| {
                nak.encode(buf).map_err(|_| EINVAL)
            });
        }
        if let Some(ack) = i.receiver.ack_now(h.path_id) {
            // An ACK that moves cum_msn goes twice: it alone completes the
            // peer's message, and when it is the peer's last one and this
            // QP is destroyed right after (a pingpong server's exit), a
            // lost copy would leave the peer resending to nobody.
            let copies = if i.receiver.cum_msn() != cum_msn {
                2
            } else {
                1
            };
            for _ in 0..copies {
                let _ = self.send(tx, ndev, &reply, wire::ACK_LEN + wire::ICRC_LEN, |buf| {
                    ack.encode(buf).map_err(|_| EINVAL)
                });
            }
        } else if let Some(k) = plane {
            // Held (protocol.md 3.4): a later packet of the path or the
            // tick sends it, back where this packet came from.
            i.ack_routes.wait(h.path_id, k, reply);
        }
        if self.complete_receives(i, &tx.st.mrs) {
            self.after_progress(i, tx);
        }
    }

    /// The ring receives come from: the SRQ's or the QP's own.
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
            i.uc.as_mut(),
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
        let refused = RecvFate::Failed(b::ib_wc_status_IB_WC_REM_ACCESS_ERR);
        match p.opcode {
            Opcode::Write | Opcode::WriteImm
                if i.access & b::ib_access_flags_IB_ACCESS_REMOTE_WRITE == 0 =>
            {
                Err(refused)
            }
            Opcode::Write | Opcode::WriteImm => tx
                .st
                .mrs
                .lock()
                .write_remote(
                    p.rkey,
                    self.local.pd,
                    p.remote_va,
                    p.msg_len,
                    u64::from(p.offset),
                    payload,
                )
                .map_err(|_| refused),
            Opcode::Send | Opcode::SendImm => {
                let at = (p.remote_va & !SEND_MORE).saturating_add(u64::from(p.offset));
                self.place_send(i, p.rsn, at as usize, payload, &tx.st.mrs.lock())
                    .map_err(|s| {
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
    }

    /// UC: what completing received message `c` does, given what was
    /// dropped.
    fn complete_uc(&self, i: &mut Inner, c: &RxCompletion) -> UcCompletion {
        let Some(uc) = i.uc.as_mut() else {
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
        if rsn.wrapping_sub(i.rx_rsn) as usize >= MSG_WINDOW {
            return Err(Syndrome::InvalidRequest);
        }
        let slot = &mut i.srq_taken[rsn as usize % MSG_WINDOW];
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
        let r = i
            .read_slot(req_msn)
            .and_then(|k| i.reads[k])
            .ok_or(Syndrome::InvalidRequest)?;
        let w = &i.wrs[r.wr as usize % WR_WINDOW];
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
        if i.access & access == 0 || !va.is_multiple_of(u64::from(wire::ATOMIC_LEN)) {
            return Err(Syndrome::InvalidRequest);
        }
        mrs.check_remote_atomic(rkey, self.local.pd, va, access)?;
        let slot = &mut i.atomic_operands[msn as usize % MSG_WINDOW];
        slot.msn = msn;
        slot.bytes = [0; 16];
        slot.bytes
            .get_mut(..payload.len())
            .ok_or(Syndrome::InvalidRequest)?
            .copy_from_slice(payload);
        Ok(())
    }

    /// Runs the peer's atomic request that just completed (in MSN order)
    /// and queues its response with the original value. `None`: it cannot
    /// run any more (its region went away since it was accepted).
    fn run_atomic(
        &self,
        i: &Inner,
        op: Opcode,
        msn: u32,
        va: u64,
        rkey: u32,
        mrs: &MrTable,
    ) -> Option<u64> {
        let operands = i.atomic_operands[msn as usize % MSG_WINDOW];
        if operands.msn != msn {
            return None;
        }
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
        let r = i
            .read_slot(req_msn)
            .and_then(|k| i.reads[k])
            .ok_or(Syndrome::InvalidRequest)?;
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
                    progress = true;
                    continue;
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
                    progress = true;
                    continue;
                }
                Opcode::ReadResp | Opcode::AtomicResp => {
                    let req_msn = c.imm.unwrap_or(0);
                    if let Some(k) = i.read_slot(req_msn) {
                        if let Some(r) = i.reads[k].take() {
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
            let wr_id = match (&self.srq, &self.rq) {
                (Some(_), _) => {
                    // The receive its packets took; a message with none
                    // (WRITE_IMM, or a SEND without payload packets to
                    // place) takes one now, unless it failed.
                    let slot = c.rsn as usize % MSG_WINDOW;
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
            };
            i.rx_rsn = i.rx_rsn.wrapping_add(1);
            let Some(wr_id) = wr_id else {
                // No receive to complete (an SRQ with none posted): the
                // RNR case, fatal on RC in v1.
                i.failed = true;
                progress = true;
                continue;
            };
            let status = match recv_status {
                Some(s) => s,
                None if ok => b::ib_wc_status_IB_WC_SUCCESS,
                None => b::ib_wc_status_IB_WC_LOC_PROT_ERR,
            };
            let (opcode, flags) = match c.opcode {
                Opcode::WriteImm => (
                    b::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
                    b::ib_wc_flags_IB_WC_WITH_IMM,
                ),
                Opcode::SendImm => (b::ib_wc_opcode_IB_WC_RECV, b::ib_wc_flags_IB_WC_WITH_IMM),
                Opcode::SendInv => (
                    b::ib_wc_opcode_IB_WC_RECV,
                    b::ib_wc_flags_IB_WC_WITH_INVALIDATE,
                ),
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
                qp_num: self.qpn,
                wc_flags: flags,
                ..Default::default()
            };
            let overrun = self
                .recv_cq
                .data()
                .push(&self.recv_cq, &wc, self.qp_addr, true)
                .is_err();
            // CQ overrun (raised by the CQ): the QP is in error.
            if !ok || overrun {
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
pub(super) fn put_data_packet(
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
pub(super) fn gather_sges(
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

/// Writes `payload` at `offset` of a receive buffer made of `sges`.
pub(super) fn scatter(
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

/// Looks up the QP of a data, ACK or NAK packet on `dev` and hands the
/// packet to it: what became of it, `None` if no QP has its number. Receive
/// softirq.
pub(crate) fn deliver(
    dev: &MetaRoceIbDevice,
    tx: &TxCtx<'_>,
    ndev: &NetDevice,
    pkt: &Packet<'_>,
    meta: &RxMeta,
) -> Option<RxFate> {
    let qpn = match pkt {
        Packet::Data { header, .. } => header.dst_qpn,
        Packet::Ack(Ack { dst_qpn, .. }) | Packet::Nak(Nak { dst_qpn, .. }) => *dst_qpn,
        Packet::ProbeReply(p) => p.dst_qpn,
        Packet::Planes(p) => p.dst_qpn,
        Packet::Probe(_) => return None,
    };
    // The table's lock is held through the QP's work: `destroy_qp` takes
    // the QP out under it, and the CQs the QP completes to may go once it
    // is out.
    let qps = dev.data().qps.lock();
    let t = qps.get(qpn)?;
    t.counters.on_receive(
        &tx.st.qp_counters,
        super::qp_counters::wire_len(pkt),
        meta.ecn == Ecn::Ce,
    );
    Some(t.receive(tx, ndev, pkt, meta))
}

/// The IPv4 address inside an IPv4-mapped GID (`::ffff:a.b.c.d`).
pub(crate) fn gid_ipv4(gid: &[u8; 16]) -> Option<Ipv4Addr> {
    if gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff {
        Some(Ipv4Addr([gid[12], gid[13], gid[14], gid[15]]))
    } else {
        None
    }
}
