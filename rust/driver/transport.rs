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
//!
//! This file holds the state and what all roles share: setup and the QP
//! state changes, the tick, posting (`kick`) and the receive dispatch. Each
//! role has its own file, as the IB transport's requester, responder and
//! completer are told apart: `requester` turns send work requests into
//! messages and sends packets, `responder` places received data and
//! answers the peer's READs and atomics, `completer` completes send work
//! requests from ACKs and NAKs and flushes; `planes` is the PLANES
//! exchange.

use core::cell::Cell;
use core::mem::size_of;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, Ordering};

use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::time::Ktime;

use super::ack_routes::AckRoutes;
use super::cq::CqState;
use super::limits::{MAX_INLINE, MAX_RD_ATOMIC, MAX_SGE};
use super::mr::{MrTable, Requester};
use super::peers::PeerDirectory;
use super::plane::{PeerPlanes, PlaneTable};
use super::qp_counters::{CounterTable, QpCounters};
use super::qp_marks::QpMarks;
use super::rcn::Rcn;
use super::rx::{RxFate, RxMeta};
use super::srq::SrqState;
use super::stats::{Counter, Counters};
use super::tx::{send, send_data};
use super::uc::UcDrops;
use super::wqe::{RecvWqe, Sge};
use crate::engine::bitmap::MAX_MSG_PKTS;
use crate::engine::cc::Aimd;
use crate::engine::config::{
    ConfigError, ReceiverConfig, SenderConfig, MSG_WINDOW_MAX, MSG_WINDOW_V1,
};
use crate::engine::heap::{kmalloc_size, Empty};
use crate::engine::path::TxPath;
use crate::engine::rcn::Shares;
use crate::engine::receiver::Receiver;
use crate::engine::sender::{Message, PostError, Sender};
use crate::engine::window::MsgWindow;
use crate::engine::wire::{self, Opcode, Packet};
use crate::ib::inflight::{TxDrain, TxInFlight, TX_IN_FLIGHT_BYTES};
use crate::ib::ip::IpAddr;
use crate::ib::lock::{new_spinlock_bh, SpinLockBh, SpinLockBhGuard};
use crate::ib::netdev::NetDevice;
use crate::ib::ring::SharedRing;
use crate::ib::skb::{Ecn, TxTail};
use crate::ib::trace::DevName;
use crate::ib::types::{AccessFlags, WcOpcode, WcStatus};
use crate::ib::udp::{TunnelSock, TxTo};
use crate::ib::verbs::{CqRef, SrqRef};
use crate::ib::worker::WorkItem;

mod completer;
mod doorbell;
mod planes;
mod requester;
mod responder;
mod tracing;

pub(super) use requester::{gather_sges, put_data_packet};
pub(super) use responder::scatter;

/// Where to send a QP's packets on plane 0: the peer and our own address.
/// (The peer's addresses on other planes come from its PLANES packet.)
#[derive(Clone, Copy)]
pub(crate) struct Peer {
    /// Our address on plane 0 (the GID the QP was connected from).
    pub(crate) local: IpAddr,
    /// The peer's address on plane 0, of `local`'s family.
    pub(crate) remote: IpAddr,
    /// The peer QP.
    pub(crate) qpn: u32,
}

/// A send work request being carried, at its slot of `Inner::wrs`
/// (`Inner::wr_slot`).
/// A request longer than one engine message (WRITE, READ) goes as several
/// messages; it completes when all of them have (READ: when all responses
/// have arrived), and only after every earlier request (send completions
/// are in posting order).
#[derive(Clone, Copy)]
struct OutWr {
    wr_id: u64,
    /// The opcode of its completion.
    wc_opcode: WcOpcode,
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
    /// Its completion status; the first failure sticks.
    status: WcStatus,
}

const NO_WR: OutWr = OutWr {
    wr_id: 0,
    wc_opcode: WcOpcode::Send,
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
    status: WcStatus::Success,
};

/// `remote_va` bit of a SEND message: more parts of the same SEND follow
/// (the low bits are the part's offset in the SEND).
const SEND_MORE: u64 = 1 << 63;

/// Send work requests tracked at once (taken but not completed): at most
/// `MSG_WINDOW_MAX` in the engine plus READs waiting for their responses,
/// a power of two (the window's slots follow the ring indices across
/// their wrap). A QP whose send ring is smaller tracks as many as its ring
/// holds: a request stays in the ring until it completes, so no more can
/// be outstanding (592 B each: the window grows to what the QP posts,
/// `reserve_requests`, so only a QP that keeps 1,024 requests in flight
/// has the 592 KiB of a 1,024-deep one).
const WR_WINDOW: usize = 2 * MSG_WINDOW_MAX;

const _: () = assert!(WR_WINDOW >= MSG_WINDOW_MAX + MAX_RD_ATOMIC as usize);
const _: () = assert!(WR_WINDOW.is_power_of_two());

/// What the engine is carrying as message `msn` (at `msn % MSG_WINDOW_MAX`).
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

impl Empty for OutMsg {
    const EMPTY: Self = OutMsg::Wr { wr: 0, offset: 0 };
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
/// its execution when it completes (in a free slot of
/// `Inner::atomic_operands`).
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

/// The sender engine and the tables of what its messages carry, in one
/// allocation: the `Sender` (1,496 B; its message window is taken in
/// chunks as messages are posted) with the message table (taken the same
/// way), the READ and atomic tables and the device's name, 2,416 B, in
/// one 4 KiB kmalloc object (design.md, "Per-QP memory"; asserted below).
struct SendSide {
    sender: Sender,
    /// What message `msn` carries, at `msn % MSG_WINDOW_MAX`.
    out: MsgWindow<OutMsg>,
    /// Our READs and atomics waiting for responses (at most
    /// `max_rd_atomic`).
    reads: [Option<PendingRead>; MAX_RD_ATOMIC as usize],
    /// While `reads` holds any: the time by which the peer must be heard
    /// from (a data packet, ACK or NAK of its QP) or they fail with retry exceeded
    /// (protocol.md 4.3). Their requests may all be acknowledged, so the
    /// sender's own budget no longer runs: without this a responder
    /// destroyed or in error left them waiting forever.
    response_due: Option<u64>,
    /// The peer's READs and executed atomics to answer, oldest first.
    answers: [Option<ToAnswer>; MAX_RD_ATOMIC as usize],
    /// The device's name, for the QP's tracepoints (`tracing.rs`): here,
    /// in the 4 KiB object's room, rather than in the `Transport`'s full
    /// 512 B one.
    dev_name: DevName,
}

/// The receiver engine, where its held ACKs go and whom it takes packets
/// from, in one allocation (a 1 KiB kmalloc object; the `Receiver`'s
/// message window is taken with its first data packet; the peer's
/// addresses, 16 B each for IPv6, would push the `Transport` past its
/// 512 B one).
struct RecvSide {
    receiver: Receiver,
    /// Where the ACKs the receiver engine holds go (protocol.md 3.4).
    ack_routes: AckRoutes,
    /// The peer's addresses on every plane (whom packets are taken from,
    /// protocol.md 3, and sent to), and the PLANES exchange.
    peer_planes: PeerPlanes,
    /// The path whose ACK last moved `cum_msn`: said once more as the QP
    /// is destroyed ([`Transport::say_last_word`], protocol.md 3.4).
    last_word: Option<u16>,
}

/// Empty engines, copied into each QP's memory (~3.3 and ~0.9 KiB:
/// constants, so the copy comes straight from the module's data, not
/// through the kernel stack). Their message windows, paths and per-PSN
/// records are taken as the QP opens and uses them (`engine_heap.rs`).
const EMPTY_SEND: SendSide = SendSide {
    sender: Sender::empty(Aimd),
    out: MsgWindow::NONE,
    reads: [None; MAX_RD_ATOMIC as usize],
    response_due: None,
    answers: [None; MAX_RD_ATOMIC as usize],
    dev_name: DevName::NONE,
};
const EMPTY_RECV: RecvSide = RecvSide {
    receiver: Receiver::EMPTY,
    ack_routes: AckRoutes::NONE,
    peer_planes: PeerPlanes::NONE,
    last_word: None,
};

/// Atomic requests of the peer placed and not yet executed that a QP
/// keeps: a conforming peer has at most `MAX_RD_ATOMIC` (our
/// `max_dest_rd_atomic`) outstanding; the v1 window's worth were kept
/// before, by MSN, and a table as long keeps every earlier peer working.
const ATOMICS_IN_PROGRESS: usize = MSG_WINDOW_V1;

/// No atomic request placed: the peer's atomics' operands, allocated
/// when the QP grants `REMOTE_ATOMIC`.
const NO_OPERANDS: [Option<AtomicOperands>; ATOMICS_IN_PROGRESS] = [None; ATOMICS_IN_PROGRESS];

struct Inner {
    send: KVBox<SendSide>,
    recv: KVBox<RecvSide>,
    /// Send work requests from `sq_head` to `sq_taken` (and the one at
    /// `sq_taken` while it is being split), at `wr_slot(index)`. Empty
    /// until the QP posts; grown to a power of two as requests are taken,
    /// up to `wr_cap` (`Transport::grow_wrs`).
    wrs: KVVec<OutWr>,
    /// Slots `wrs` may grow to: as many as the send ring has, at most
    /// `WR_WINDOW`.
    wr_cap: usize,
    /// Work waits for memory the heap refused: a request for `wrs` to
    /// grow or for the sender's message window (taken with the first
    /// message), or a READ's or atomic's answer for that window. The tick
    /// has the transmit worker try again (`kick_locked`, which clears it
    /// first).
    room_wanted: bool,
    /// The QP stopped sending at its cap of packets the network stack
    /// holds (`TX_IN_FLIGHT_PER_PLANE` per plane): the stack releasing
    /// half of them wakes the transmit worker for it
    /// (`TxInFlight::wait_below`); its next ACK or the tick try again too.
    tx_blocked: bool,
    /// The send ring's header says the kernel takes posts without a
    /// doorbell (`doorbell.rs`): the kernel's own record of what it
    /// advertised, never read back from the ring.
    takes_posts: bool,
    /// Requests were published while the ring said the kernel takes them,
    /// and found when it withdrew that where nothing could send them (a
    /// hold of the lock without a `TxCtx`): the tick has the transmit
    /// worker take them.
    unrung: bool,
    /// Send ring index of the oldest work request not completed.
    sq_head: u32,
    /// Send ring index up to which work requests became messages.
    sq_taken: u32,
    /// The request at `sq_taken` has been read and partly posted.
    taking: bool,
    /// READs and atomics the QP may have outstanding (its `max_rd_atomic`,
    /// at least 1).
    max_rd_atomic: usize,
    /// The peer's atomic requests placed and not yet executed, each in a
    /// free slot, found by its MSN; taken when the QP first grants
    /// `REMOTE_ATOMIC` (`set_limits`), kept after.
    atomic_operands: Option<KVBox<[Option<AtomicOperands>; ATOMICS_IN_PROGRESS]>>,
    /// The rights the QP grants its peer (REMOTE_WRITE, REMOTE_READ,
    /// REMOTE_ATOMIC).
    access: AccessFlags,
    /// Receive sequence number of the next receive-consuming message sent.
    tx_rsn: u16,
    /// Receive sequence number of the next receive-consuming message to
    /// complete here (its buffer is the receive ring's consumer entry).
    rx_rsn: u16,
    peer: Option<Peer>,
    /// A send failed or the peer reported an error: the QP is in error.
    failed: bool,
    /// UC QPs: the messages the responder drops (an RC QP NAKs instead).
    uc: Option<KBox<UcDrops>>,
    /// The engine's retry budget (`retry_budget_ns`), kept across connect.
    give_up_ns: u64,
    /// With an SRQ: the receives taken for messages in progress, at
    /// `rsn % MSG_WINDOW_V1` (the receiver of a QP with an SRQ keeps the v1
    /// window, `connect`: at most that many are in progress, so their
    /// `rsn`s are distinct there). Empty without an SRQ: the QP's own ring
    /// binds receives by position.
    srq_taken: KVVec<Option<TakenRecv>>,
}

impl SendSide {
    /// Posts `msg` to the sender engine with what it carries (`out`),
    /// kept under its MSN; the record's memory is taken first, so no
    /// message goes out without one.
    fn post(&mut self, msg: &Message, out: OutMsg) -> Result<u32, PostError> {
        if !self
            .out
            .take(self.sender.next_msn() as usize % MSG_WINDOW_MAX)
        {
            return Err(PostError::NoMemory);
        }
        let msn = self.sender.post(msg)?;
        if let Some(o) = self.out.get_mut(msn as usize % MSG_WINDOW_MAX) {
            *o = out;
        }
        Ok(msn)
    }

    /// What message `msn` (one the engine carries) carries.
    fn out(&self, msn: u32) -> OutMsg {
        self.out
            .get(msn as usize % MSG_WINDOW_MAX)
            .copied()
            .unwrap_or(OutMsg::EMPTY)
    }

    /// Our READ or atomic `r`, in free slot `k`, waits for its response
    /// from `now` (its request not even sent yet: the clock covers both).
    fn await_response(&mut self, k: usize, r: PendingRead, now: u64) {
        self.reads[k] = Some(r);
        if self.response_due.is_none() {
            self.heard_from_peer(now);
        }
    }

    /// A data packet, ACK or NAK of the peer's QP came in at `now` (a QP in
    /// error sends none but a failed message's NAK, and a PROBE_REPLY may
    /// come from its device alone): the responses we wait for take the
    /// retry budget again from here. Only while some are waited for.
    fn heard_from_peer(&mut self, now: u64) {
        let budget = self.sender.config().give_up_ns;
        self.response_due = (budget != 0).then(|| now.saturating_add(budget));
    }

    /// The retry budget changed (`modify_qp`): READs and atomics waiting
    /// take the new one from `now` (0: they wait as long as it takes).
    fn budget_changed(&mut self, now: u64) {
        if self.reads.iter().any(Option::is_some) {
            self.heard_from_peer(now);
        }
    }

    /// The response to our READ or atomic in slot `k` completed (or will
    /// not come): no longer waited for.
    fn response_done(&mut self, k: usize) -> Option<PendingRead> {
        let r = self.reads.get_mut(k)?.take();
        if self.reads.iter().all(Option::is_none) {
            self.response_due = None;
        }
        r
    }

    /// The READs and atomics both ways start over (connect, flush).
    fn forget_reads(&mut self) {
        self.reads = [None; MAX_RD_ATOMIC as usize];
        self.response_due = None;
        self.answers = [None; MAX_RD_ATOMIC as usize];
    }
}

impl Inner {
    /// The slot of our READ or atomic `req_msn` still waiting for its
    /// response, if any.
    fn read_slot(&self, req_msn: u32) -> Option<usize> {
        self.send
            .reads
            .iter()
            .position(|r| r.is_some_and(|r| r.req_msn == req_msn))
    }

    /// Our READ or atomic `req_msn` still waiting for its response, and
    /// its work request (whose buffer the response goes to).
    fn pending_read(&self, req_msn: u32) -> Option<(PendingRead, &OutWr)> {
        let r = self.read_slot(req_msn).and_then(|k| self.send.reads[k])?;
        Some((r, &self.wrs[self.wr_slot(r.wr)]))
    }

    /// The slot of send ring index `index` in `wrs`. Its length is a power
    /// of two, so slots follow the indices across their wrap at 2^32.
    /// Only indices of requests taken (`sq_head..=sq_taken`) are looked
    /// up, and `wrs` has a slot for each of them.
    fn wr_slot(&self, index: u32) -> usize {
        index as usize % self.wrs.len().max(1)
    }

    /// Send requests taken and not completed (`sq_head..sq_taken`, and
    /// the one at `sq_taken` while it is posted in parts).
    fn taken(&self) -> u32 {
        self.sq_taken.wrapping_sub(self.sq_head) + u32::from(self.taking)
    }

    /// Makes `new` (longer, a power of two) the request window, each
    /// request taken moving to its slot there; returns the old window,
    /// for the caller to free (outside the lock when it can).
    fn install_wrs(&mut self, mut new: KVVec<OutWr>) -> KVVec<OutWr> {
        let live = self.taken();
        let len = new.len().max(1);
        for k in 0..live {
            let index = self.sq_head.wrapping_add(k);
            let from = self.wr_slot(index);
            if let (Some(w), Some(to)) = (self.wrs.get(from), new.get_mut(index as usize % len)) {
                *to = *w;
            }
        }
        core::mem::replace(&mut self.wrs, new)
    }

    /// Whether `wrs` has a slot for the request at ring index `index`,
    /// growing it if not (the data path, under the transport's lock: an
    /// atomic allocation). False: no room, and none could be made.
    fn room_for(&mut self, index: u32) -> bool {
        let need = index.wrapping_sub(self.sq_head) as usize + 1;
        if need <= self.wrs.len() {
            return true;
        }
        if need > self.wr_cap {
            return false;
        }
        match empty_wrs(wr_window_for(need, self.wr_cap), GFP_ATOMIC | __GFP_NOWARN) {
            Ok(new) => {
                drop(self.install_wrs(new));
                true
            }
            Err(_) => {
                self.room_wanted = true;
                false
            }
        }
    }
}

/// The request window for `n` requests: the power of two at or above it,
/// at least 4 (a window grows a few times, not at every request), at most
/// `cap`.
fn wr_window_for(n: usize, cap: usize) -> usize {
    n.max(4).next_power_of_two().min(cap)
}

/// A request window of `n` empty slots.
fn empty_wrs(n: usize, flags: kernel::alloc::Flags) -> Result<KVVec<OutWr>> {
    let mut v = KVVec::with_capacity(n, flags)?;
    for _ in 0..n {
        v.push(NO_WR, flags)?;
    }
    Ok(v)
}

/// What an idle connected RC or UC QP's data path allocates, in kmalloc
/// classes (design.md, "Per-QP memory"): the two engine boxes (the
/// sender's with the message table), the sender's first paths and the
/// `Transport` itself (in its `Arc`, after the reference count). Nothing
/// else until the QP carries data (the message windows: 8, 4 and 1 KiB
/// chunks of 64 messages, and per-path memory), grants `REMOTE_ATOMIC`,
/// is UC or uses an SRQ; the rings are the process's, sized by it.
pub(crate) const IDLE_BYTES: usize = kmalloc_size(size_of::<SendSide>())
    + SenderConfig::DEFAULT.initial_paths as usize * kmalloc_size(size_of::<TxPath>())
    + kmalloc_size(size_of::<RecvSide>())
    + kmalloc_size(size_of::<Transport>() + size_of::<u64>())
    + kmalloc_size(TX_IN_FLIGHT_BYTES);

// Each box fills its kmalloc class and no more: the `SendSide` needs the
// 4 KiB class and the `RecvSide` the 1 KiB one, and nothing added to them
// may push them into the next. The message windows a QP takes as it
// carries messages (the sender's and its table of what they carry with
// the messages it sends, the receiver's with the data packets it accepts;
// kept until the QP is destroyed) come in chunks of 64 messages, 8, 1
// and 4 KiB kmalloc objects, each window's first with a 128 B table.
const _: () = assert!(size_of::<SendSide>() <= 4096 && size_of::<SendSide>() > 2048);
const _: () = assert!(size_of::<RecvSide>() <= 1024 && size_of::<RecvSide>() > 512);
const _: () = assert!(<Sender>::WINDOW_CHUNK_BYTES == 8192);
const _: () = assert!(<Receiver>::WINDOW_CHUNK_BYTES == 4096);
const _: () = assert!(MsgWindow::<OutMsg>::CHUNK_SIZE == 1024);
const _: () = assert!(size_of::<Transport>() + size_of::<u64>() <= 512);

/// The data path of one RC QP. Its lock and state are in the same
/// allocation as the rest (one 512 B kmalloc object, asserted below).
#[pin_data]
pub(crate) struct Transport {
    #[pin]
    inner: SpinLockBh<Inner>,
    pub(super) sq: SharedRing,
    pub(super) rq: Option<SharedRing>,
    pub(super) srq: Option<SrqRef<SrqState>>,
    pub(super) send_cq: CqRef<CqState>,
    pub(super) recv_cq: CqRef<CqState>,
    pub(super) qpn: u32,
    /// The `ib_qp`, for `ib_wc.qp` of kernel consumers.
    pub(super) qp_addr: u64,
    /// The QP's protection domain (memory keys must be of the same one),
    /// and whether it is a kernel QP.
    pub(super) local: Requester,
    /// The data path failed: `Inner::failed`, readable without the lock
    /// (the QP state is read from atomic context, possibly under it).
    error: AtomicBool,
    /// New send work requests wait for the transmit worker: a kernel
    /// consumer posted from an interrupt or a softirq, or with interrupts
    /// off (`kick` needs the bh-safe lock and sends).
    kick_deferred: AtomicBool,
    /// Packets may be ready that the caller who made them ready left to
    /// the transmit worker (a softirq, or a spent budget).
    tx_deferred: AtomicBool,
    /// An engine timer is due: the transmit worker fires it (see
    /// `tick_locked`).
    timers_deferred: AtomicBool,
    /// The device's marks of the QPs with work for its tick: every hold
    /// of this QP's lock ends by marking it if it has some (`Locked`).
    tick_due: Arc<QpMarks>,
    pub(super) sq_sig_all: bool,
    /// Per-QP counting (`rdma statistic qp`).
    pub(crate) counters: QpCounters,
    /// The QP's data packets the network stack still holds: at
    /// `TX_IN_FLIGHT_PER_PLANE` per plane it sends on, the QP stops
    /// sending (`requester.rs`).
    in_flight: Arc<TxInFlight>,
}

/// A QP's transport state, locked ([`Transport::lock`]). Letting it go
/// marks the QP for the device's tick if it has work for the tick
/// ([`TickWork`]): the tick visits only marked QPs, and takes a QP's mark
/// before it locks the QP, so whatever left work behind, under this lock,
/// also left the mark that brings the tick (design.md, "The tick and
/// many QPs"). A QP already marked is not judged again: the cost of a
/// busy QP's hold is one read of its mark's word.
struct Locked<'a> {
    t: &'a Transport,
    i: SpinLockBhGuard<'a, Inner>,
    /// What the holder sends with, if it may send: the doorbell flag's
    /// withdrawal takes what it finds with it (`doorbell.rs`).
    tx: Option<&'a TxCtx<'a>>,
}

impl Deref for Locked<'_> {
    type Target = Inner;

    fn deref(&self) -> &Inner {
        &self.i
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.i
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // Still under the lock: the guard is dropped after this.
        let t = self.t;
        t.settle_doorbell(&mut self.i, self.tx);
        let i = &*self.i;
        t.tick_due.mark_if(t.qpn, || t.tick_work(i).any());
    }
}

/// What the device tick has to do for a QP: [`Transport::tick_work`]
/// says, [`Transport::tick`] does. A QP with none is not visited (its
/// lock's holder marks it when it has some, `Locked`), so every piece of
/// work the tick does must be here.
#[derive(Default)]
struct TickWork {
    /// In error with a receive ring of its own: receives a process posts
    /// there (no system call) complete flushed within a tick.
    flush_receives: bool,
    /// The receiver engine holds ACKs (protocol.md 3.4): they go at the
    /// next tick at the latest.
    held_acks: bool,
    /// Our PLANES is repeated until the peer confirms it (protocol.md
    /// 1.8).
    planes: bool,
    /// Work waits for memory (`Inner::room_wanted`) or for a doorbell the
    /// ring's flag saved (`Inner::unrung`): the transmit worker takes the
    /// requests again.
    room_wanted: bool,
    /// The QP stopped at its cap of packets in the stack
    /// (`Inner::tx_blocked`): the transmit worker tries again, should no
    /// ACK come first.
    tx_blocked: bool,
    /// The sender engine's next timer (retransmission timeouts, probes,
    /// the verdict probe, the retry budget, a refused allocation's retry)
    /// or the responses' (`SendSide::response_due`), whichever is first.
    deadline: Option<u64>,
    /// The receiver accepted data since the device's count of receiving
    /// QPs last found it idle (`Receiver::rcn_due`): every tick counts it
    /// until its window has passed, and that tick lets it go (protocol.md
    /// 6.5, `rcn.rs`).
    rcn_count: bool,
}

impl TickWork {
    fn any(&self) -> bool {
        self.flush_receives
            || self.held_acks
            || self.planes
            || self.room_wanted
            || self.tx_blocked
            || self.deadline.is_some()
            || self.rcn_count
    }
}

/// The device pieces a packet is sent with: what the data path reaches of
/// the device from any QP (`DeviceState::tx` lends them), the tunnel
/// socket, and how much data the caller may send now.
pub(crate) struct TxCtx<'a> {
    /// The device's packet counters.
    pub(crate) counters: &'a Counters,
    /// The counter objects QPs are bound to (`rdma statistic qp`).
    pub(crate) qp_counters: &'a CounterTable,
    /// Registered memory by key.
    pub(crate) mrs: &'a SpinLockBh<MrTable>,
    /// The netdevs the device sends on and receives from, by plane.
    pub(crate) planes: &'a SpinLockBh<PlaneTable>,
    /// What PLANES packets told of each peer's planes.
    pub(crate) peers: &'a SpinLockBh<PeerDirectory>,
    /// The tunnel socket packets go out through.
    pub(crate) sock: &'a TunnelSock,
    /// The QPs with work for the device's transmit worker.
    pub(crate) pending: &'a QpMarks,
    /// The device's receiver rate hints: a QP not counted as receiving
    /// takes its hint from here before its ACKs go.
    pub(crate) rcn: &'a Rcn,
    /// The transmit worker (`tx_worker.rs`).
    pub(crate) worker: &'a WorkItem,
    /// Data and probe packets this caller may still send; what is left
    /// when it runs out goes to the transmit worker. Zero in a softirq:
    /// the receive path and the tick send only replies (ACKs, NAKs,
    /// PLANES) themselves.
    pub(crate) budget: Cell<u32>,
    /// The caller is a process's doorbell: what it takes from the send
    /// ring is not counted as taken without one.
    pub(crate) doorbell: bool,
}

impl TxCtx<'_> {
    /// Takes one packet from the budget; false when it is spent.
    fn spend(&self) -> bool {
        let left = self.budget.get();
        self.budget.set(left.saturating_sub(1));
        left > 0
    }

    /// QP `qpn` has work for the transmit worker, which is queued.
    fn defer(&self, qpn: u32) {
        self.pending.mark(qpn);
        self.worker.schedule();
    }
}

/// The monotonic clock the engines and rate limits run on (ns).
pub(crate) fn now_ns() -> u64 {
    Ktime::ktime_get().to_ns() as u64
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

impl Transport {
    /// Creates the data path of QP `qpn`; the rings move in.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        qpn: u32,
        qp_addr: u64,
        local: Requester,
        sq: SharedRing,
        rq: Option<SharedRing>,
        srq: Option<SrqRef<SrqState>>,
        cqs: (CqRef<CqState>, CqRef<CqState>),
        sq_sig_all: bool,
        dev_name: DevName,
        tick_due: Arc<QpMarks>,
        drain: &TxDrain,
    ) -> Result<Arc<Self>> {
        let mut send = KVBox::new(EMPTY_SEND, GFP_KERNEL)?;
        send.dev_name = dev_name;
        let recv = KVBox::new(EMPTY_RECV, GFP_KERNEL)?;
        let in_flight = TxInFlight::new(qpn, drain)?;
        let mut srq_taken = KVVec::new();
        if srq.is_some() {
            srq_taken.reserve(MSG_WINDOW_V1, GFP_KERNEL)?;
            for _ in 0..MSG_WINDOW_V1 {
                srq_taken.push(None, GFP_KERNEL)?;
            }
        }
        let inner = Inner {
            send,
            recv,
            wrs: KVVec::new(),
            wr_cap: (sq.count() as usize).clamp(1, WR_WINDOW),
            room_wanted: false,
            tx_blocked: false,
            takes_posts: false,
            unrung: false,
            sq_head: 0,
            sq_taken: 0,
            taking: false,
            max_rd_atomic: 1,
            atomic_operands: None,
            access: AccessFlags::NONE,
            tx_rsn: 0,
            rx_rsn: 0,
            peer: None,
            failed: false,
            uc: None,
            give_up_ns: 0,
            srq_taken,
        };
        Arc::pin_init(
            pin_init!(Self {
                inner <- new_spinlock_bh!(inner, "metaroce_qp_transport"),
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
                tx_deferred: AtomicBool::new(false),
                timers_deferred: AtomicBool::new(false),
                tick_due,
                sq_sig_all,
                counters: QpCounters::new(),
                in_flight,
            }),
            GFP_KERNEL,
        )
    }

    /// Sends one packet of this QP (see [`send`]), counted for the QP too.
    fn send(
        &self,
        tx: &TxCtx<'_>,
        ndev: &NetDevice,
        to: &TxTo,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<usize>,
    ) -> Result {
        let sent = send(tx.counters, tx.sock, ndev, to, len, fill);
        self.counters.on_send(tx.qp_counters, &sent, len);
        sent
    }

    /// Sends one data packet of this QP (see [`send_data`]), counted for
    /// the QP too.
    fn send_data(
        &self,
        tx: &TxCtx<'_>,
        ndev: &NetDevice,
        to: &TxTo,
        len: usize,
        fill: impl FnOnce(&mut TxTail<'_>) -> Result,
    ) -> Result {
        let sent = send_data(
            tx.counters,
            tx.sock,
            ndev,
            to,
            len,
            Some(&self.in_flight),
            fill,
        );
        self.counters.on_send(tx.qp_counters, &sent, len);
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

    /// RTR/RTS: the peer is known and the path MTU agreed (`own_payload`:
    /// the larger payload size our PLANES advertise, 0 for none,
    /// protocol.md 1.8); the engine starts
    /// from the device's knobs `base` (the paths it opens, windows, RTO
    /// floor, ...), with its paths spread over the device's `planes`
    /// planes. Only plane 0 (`plane0_up`: it has carrier) carries packets
    /// until the peer's PLANES packet names its address on the others.
    ///
    /// The peer's first message is expected at `rq_psn`, the initial PSN
    /// the ends exchanged (protocol.md 2). Ours are numbered from `sq_psn`
    /// once we reach RTS ([`Transport::start_sending`]); a responder that
    /// answers in RTR numbers its responses from `rq_psn` instead and
    /// flags them, since the peer knows that number too.
    pub(crate) fn connect(
        &self,
        base: &SenderConfig,
        peer: Peer,
        mtu: u32,
        own_payload: u16,
        planes: u8,
        plane0_up: bool,
        rq_psn: u32,
    ) -> Result {
        let now = now_ns();
        let mut i = self.lock();
        let cfg = SenderConfig {
            dst_qpn: peer.qpn,
            mtu,
            planes,
            entropy_seed: self.qpn ^ 0x5eed,
            give_up_ns: i.give_up_ns,
            ..*base
        };
        i.send.sender.reset(cfg, now).map_err(|e| match e {
            ConfigError::NoMemory => ENOMEM,
            _ => EINVAL,
        })?;
        // Planes other than 0 wait for the PLANES exchange, their slots'
        // paths on plane 0 meanwhile (or, with plane 0 down too, waiting
        // for the first plane the exchange brings up): not a failure (and
        // the events' queue goes back to the heap, design.md "Per-QP
        // memory").
        for k in 1..planes {
            i.send.sender.plane_down(k, now);
        }
        if !plane0_up {
            i.send.sender.plane_down(0, now);
        }
        i.send.sender.clear_events();
        i.recv
            .receiver
            .reset(ReceiverConfig {
                peer_qpn: peer.qpn,
                mtu,
            })
            .map_err(|_| EINVAL)?;
        // The receiver accepts what the responder's tables follow: those
        // of receives taken from an SRQ and of a UC QP's drops are the v1
        // window's (protocol.md 1.4).
        let window = if self.srq.is_some() || i.uc.is_some() {
            MSG_WINDOW_V1
        } else {
            MSG_WINDOW_MAX
        };
        i.recv.receiver.set_msg_window(window);
        i.recv.receiver.start_at(rq_psn);
        i.send.sender.start_at(rq_psn, true);
        i.peer = Some(peer);
        i.recv.peer_planes = PeerPlanes::new(peer.remote, own_payload, now);
        i.failed = false;
        self.error.store(false, Ordering::Release);
        // Both engines start over: so do the request and receive numbering.
        i.sq_head = self.sq.consumer();
        i.sq_taken = i.sq_head;
        i.taking = false;
        i.send.forget_reads();
        i.tx_rsn = 0;
        i.rx_rsn = 0;
        i.srq_taken.fill(None);
        if let Some(uc) = i.uc.as_deref_mut() {
            *uc = UcDrops::NONE;
        }
        if let Some(t) = i.atomic_operands.as_deref_mut() {
            t.fill(None);
        }
        Ok(())
    }

    /// RTS: our own initial PSN is known. Our messages are numbered from it
    /// unless we already answered from the peer's (in RTR), and the peer's
    /// responses numbered from it are accepted.
    pub(crate) fn start_sending(&self, sq_psn: u32) {
        let mut i = self.lock();
        if i.peer.is_some() {
            i.send.sender.start_at(sq_psn, false);
            i.recv.receiver.own_start(sq_psn);
        }
    }

    /// The QP is unreliable connected (UC): no READs, and the responder
    /// drops what it cannot place instead of failing both QPs.
    pub(crate) fn set_unreliable(&self) -> Result {
        let uc = KBox::new(UcDrops::NONE, GFP_KERNEL)?;
        self.lock().uc = Some(uc);
        Ok(())
    }

    /// The QP's remote access flags and the READs it
    /// may have outstanding (`max_rd_atomic`; 0 is taken as 1 so that a
    /// READ is not stuck forever). A QP that grants `REMOTE_ATOMIC` gets
    /// the table its peer's atomics' operands wait in (1,536 B, only for
    /// such QPs: design.md, "Per-QP memory").
    pub(crate) fn set_limits(&self, access: AccessFlags, max_rd_atomic: u8) -> Result {
        let mut operands = None;
        if access.intersects(AccessFlags::REMOTE_ATOMIC) && self.lock().atomic_operands.is_none() {
            operands = Some(KVBox::new(NO_OPERANDS, GFP_KERNEL)?);
        }
        let mut i = self.lock();
        i.access = access;
        i.max_rd_atomic = usize::from(max_rd_atomic).clamp(1, MAX_RD_ATOMIC as usize);
        if i.atomic_operands.is_none() {
            i.atomic_operands = operands.take();
        }
        drop(i);
        // A table another caller installed first goes here, unlocked.
        drop(operands);
        Ok(())
    }

    /// Grows the send request window (`Inner::wrs`) ahead of the requests
    /// a process has posted (the doorbell, process context: it may
    /// sleep), so the data path seldom needs to grow it with an atomic
    /// allocation. A failure leaves that to the data path.
    pub(crate) fn reserve_requests(&self) {
        let (have, want) = {
            let i = self.lock();
            let posted = self.sq.pending_from(i.sq_head).unwrap_or(0) as usize;
            (i.wrs.len(), wr_window_for(posted, i.wr_cap))
        };
        if want <= have {
            return;
        }
        let Ok(new) = empty_wrs(want, GFP_KERNEL) else {
            return;
        };
        let old = {
            let mut i = self.lock();
            if want <= i.wrs.len() {
                return;
            }
            i.install_wrs(new)
        };
        drop(old);
    }

    /// The QP's `timeout` and `retry_cnt` attributes become the engine's
    /// retry budget (protocol.md 4.3).
    pub(crate) fn set_retry(&self, timeout: u8, retry_cnt: u8) {
        let ns = retry_budget_ns(timeout, retry_cnt);
        let mut i = self.lock();
        i.give_up_ns = ns;
        i.send.sender.set_give_up_ns(ns);
        i.send.budget_changed(now_ns());
    }

    /// RESET: the data path starts over (RTR connects it again). As in
    /// InfiniBand the QP forgets its connection and what its queues hold,
    /// without completions: a later INIT -> ERR flushes only what is
    /// posted after this. Receives it took from an SRQ for messages in
    /// progress are the exception: they are no longer in the SRQ, so they
    /// complete flushed here rather than being lost to the consumer.
    pub(crate) fn reset(&self) {
        {
            let mut i = self.lock();
            i.failed = false;
            self.error.store(false, Ordering::Release);
            i.peer = None;
            i.recv.last_word = None;
            self.sq.set_consumer(self.sq.producer());
            if let Some(rq) = &self.rq {
                rq.set_consumer(rq.producer());
            }
            i.sq_head = self.sq.consumer();
            i.sq_taken = i.sq_head;
            i.taking = false;
            i.send.forget_reads();
            self.flush_srq_taken(&mut i);
        }
        self.deliver_cq_events();
    }

    /// Runs `f` on the QP's engines (the sender's paths and counters, the
    /// receiver's rate hint) under the transport's lock: for reports
    /// (`qp_details`), not the data path.
    pub(crate) fn with_engines<R>(&self, f: impl FnOnce(&Sender, &Receiver) -> R) -> R {
        let i = self.lock();
        f(&i.send.sender, &i.recv.receiver)
    }

    /// The data path failed (a work request completed in error): the QP
    /// is in the error state.
    pub(crate) fn failed(&self) -> bool {
        self.error.load(Ordering::Acquire)
    }

    /// The state, locked; letting it go marks the QP for the tick if it
    /// has work for it (`Locked`).
    fn lock(&self) -> Locked<'_> {
        Locked {
            t: self,
            i: self.inner.lock(),
            tx: None,
        }
    }

    /// The state, locked by a holder that sends with `tx` (the data
    /// path's entry points).
    fn lock_tx<'a>(&'a self, tx: &'a TxCtx<'a>) -> Locked<'a> {
        Locked {
            t: self,
            i: self.inner.lock(),
            tx: Some(tx),
        }
    }

    /// What the tick has to do for the QP in state `i`.
    fn tick_work(&self, i: &Inner) -> TickWork {
        if i.peer.is_none() {
            return TickWork::default();
        }
        // Counted until its window has passed, in error too (what it
        // accepted before still counts).
        let rcn_count = i.recv.receiver.rcn_due();
        if i.failed {
            return TickWork {
                flush_receives: self.rq.is_some(),
                rcn_count,
                ..TickWork::default()
            };
        }
        TickWork {
            flush_receives: false,
            held_acks: i.recv.receiver.ack_deadline().is_some(),
            planes: (i.send.sender.config().planes > 1 || i.recv.peer_planes.own_payload != 0)
                && !i.recv.peer_planes.acked,
            room_wanted: i.room_wanted || i.unrung,
            tx_blocked: i.tx_blocked,
            deadline: [i.send.sender.next_deadline(), i.send.response_due]
                .into_iter()
                .flatten()
                .min(),
            rcn_count,
        }
    }

    /// Sends `ack` back where its path's last packet came from (the route
    /// `AckRoutes` kept for the path's slot); nothing if that plane or the
    /// peer's address there is gone.
    fn send_ack_back(&self, i: &Inner, tx: &TxCtx<'_>, peer: &Peer, ack: &wire::Ack) {
        let planes = tx.planes.lock();
        let Some((ndev, to)) = i.recv.ack_routes.of(ack.path_id).and_then(|(k, src_port)| {
            let to = TxTo {
                src: planes.local_addr_of(k, &peer.local),
                dst: i.recv.peer_planes.addr(k)?,
                src_port,
                ecn: Ecn::Ect0,
            };
            Some((planes.get(k)?, to))
        }) else {
            return;
        };
        let _ = self.send(tx, ndev, &to, wire::ACK_LEN + wire::ICRC_LEN, |buf| {
            ack.encode(buf).map_err(|_| EINVAL)
        });
    }

    /// The QP is being destroyed: the ACK that last moved `cum_msn` goes
    /// once more (protocol.md 3.4). It alone completes the peer's message,
    /// and an application that exits once its own work completed (a
    /// pingpong server) destroys the QP right after it: were that one
    /// copy lost, the peer would resend to a QP that no longer exists
    /// until its retry budget ran out. Sent here rather than twice at
    /// once, where the copy cost every message a second frame on both
    /// hosts.
    pub(crate) fn say_last_word(&self, tx: &TxCtx<'_>) {
        // Not `lock_tx`: letting it go would take and pump posts of a QP
        // that is going away.
        let mut i = self.lock();
        let (Some(peer), Some(path_id)) = (i.peer, i.recv.last_word.take()) else {
            return;
        };
        if let Some(ack) = i.recv.receiver.ack_for(path_id) {
            self.send_ack_back(&i, tx, &peer, &ack);
        }
    }

    /// The device tick's visit (the QP was marked): counts a QP that
    /// received data lately and gives it its rate hint from the device's
    /// last count (`shares`), flushes receives posted in error, sends the
    /// ACKs the receiver held and our PLANES when due, and has the
    /// transmit worker fire the engine's timers that are due and retry a
    /// request window. Marked again if work is left. Returns whether the
    /// QP counts as receiving now (protocol.md 6.5).
    pub(crate) fn tick(&self, tx: &TxCtx<'_>, shares: &Shares) -> bool {
        let receiving = self.tick_locked(&mut self.lock_tx(tx), tx, shares);
        self.deliver_cq_events();
        receiving
    }

    fn tick_locked(&self, i: &mut Inner, tx: &TxCtx<'_>, shares: &Shares) -> bool {
        let now = now_ns();
        let work = self.tick_work(i);
        // Before the held ACKs go: they carry the new hint. A QP whose
        // window has passed is counted no more and has no such work left.
        let receiving = work.rcn_count && i.recv.receiver.rcn_count(shares, now);
        let Some(peer) = i.peer else {
            return receiving;
        };
        if work.flush_receives
            && self
                .rq
                .as_ref()
                .is_some_and(|rq| rq.producer() != rq.consumer())
        {
            self.flush_locked(i);
        }
        if work.held_acks {
            // Every ACK the receiver engine held goes now: the next tick
            // would be later than protocol.md 3.4 lets a packet wait.
            while let Some(ack) = i.recv.receiver.flush(u64::MAX) {
                self.send_ack_back(i, tx, &peer, &ack);
            }
        }
        // Our plane list goes out until the peer confirms it (only needed
        // when we have planes besides plane 0 or a payload size to
        // advertise; we answer the peer's anyway).
        if work.planes && i.recv.peer_planes.due(now) {
            self.send_planes(tx, peer, &i.recv.peer_planes);
        }
        if work.room_wanted {
            // Work waits for memory the heap refused: the transmit worker
            // takes the requests and answers again.
            self.kick_deferred.store(true, Ordering::Release);
            tx.defer(self.qpn);
        }
        if work.tx_blocked {
            // The stack may have sent what the QP waited for, with no ACK
            // to tell: the transmit worker looks again.
            self.tx_deferred.store(true, Ordering::Release);
            tx.defer(self.qpn);
        }
        if work.deadline.is_some_and(|d| d <= now) {
            // The engine's timers are judged by the transmit worker: this
            // timer softirq runs before the receive softirq, so ACKs that
            // a stalled host has not read yet (a TCG vCPU descheduled for
            // milliseconds) would otherwise count as lost, and each such
            // spurious timeout cuts a window and resends a path's packets.
            self.timers_deferred.store(true, Ordering::Release);
            tx.defer(self.qpn);
        }
        receiving
    }

    /// New send work requests may be in the ring: turn them into messages
    /// and send what the windows allow. In the error state they are
    /// flushed.
    pub(crate) fn kick(&self, tx: &TxCtx<'_>) {
        self.kick_locked(&mut self.lock_tx(tx), tx);
        self.deliver_cq_events();
    }

    fn kick_locked(&self, i: &mut Inner, tx: &TxCtx<'_>) {
        // What waited for memory is tried again here, and asks again if
        // it still finds none.
        i.room_wanted = false;
        i.unrung = false;
        if i.failed {
            self.flush_locked(i);
        } else if i.peer.is_some() {
            self.answer_reads(i);
            self.take_requests(i, tx);
            self.pump(i, tx);
        }
    }

    /// Leaves the next [`Transport::kick`] to the transmit worker.
    pub(crate) fn defer_kick(&self, tx: &TxCtx<'_>) {
        self.kick_deferred.store(true, Ordering::Release);
        tx.defer(self.qpn);
    }

    /// Leaves sending the packets the engine has ready to the transmit
    /// worker.
    fn defer_tx(&self, tx: &TxCtx<'_>) {
        self.tx_deferred.store(true, Ordering::Release);
        tx.defer(self.qpn);
    }

    /// The transmit worker's turn (`tx`: with a budget): fires the
    /// engine's timers the tick found due, takes what was posted and
    /// sends what is ready, as far as the budget goes (the rest is
    /// deferred again). One hold of the QP's lock: what the timers
    /// release (resends, probes) is sent in the same hold.
    pub(crate) fn run_deferred(&self, tx: &TxCtx<'_>) {
        let kick = self.kick_deferred.swap(false, Ordering::AcqRel);
        let timers = self.timers_deferred.swap(false, Ordering::AcqRel);
        // Woken as the stack released the packets it waited for.
        let send = self.tx_deferred.swap(false, Ordering::AcqRel) | self.in_flight.take_woken();
        if !(kick || timers || send) {
            return;
        }
        {
            let mut i = self.lock_tx(tx);
            let now = now_ns();
            if timers
                && i.peer.is_some()
                && !i.failed
                && i.send.sender.next_deadline().is_some_and(|d| d <= now)
            {
                i.send.sender.on_timer(now);
                self.trace_events(&mut i);
            }
            if timers && i.send.response_due.is_some_and(|d| d <= now) && !i.failed {
                self.responses_overdue(&mut i);
            }
            if kick {
                self.kick_locked(&mut i, tx);
            } else if (send || timers) && !i.failed {
                self.pump(&mut i, tx);
            }
        }
        self.deliver_cq_events();
    }

    /// The largest engine message at the QP's MTU.
    fn max_msg(i: &Inner) -> u32 {
        i.send
            .sender
            .config()
            .mtu
            .saturating_mul(MAX_MSG_PKTS as u32)
    }

    /// A packet for this QP arrived on `ndev` (receive softirq).
    pub(crate) fn receive(
        &self,
        tx: &TxCtx<'_>,
        ndev: &NetDevice,
        pkt: &Packet<'_>,
        meta: &RxMeta,
    ) -> RxFate {
        let fate = self.receive_locked(&mut self.lock_tx(tx), tx, ndev, pkt, meta);
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
        let plane = tx.planes.lock().index_of(ndev);
        if i.failed {
            // In error the QP places, answers and acknowledges nothing; its
            // peer's requests end in its retry budget. Only a packet of the
            // message that failed here gets that message's NAK again: the
            // requester whose NAK was lost learns why (protocol.md 3.2).
            tx.counters.inc(Counter::RxQpInError);
            if let Packet::Data { header, .. } = pkt {
                if self.from_peer(i, tx, plane, pkt, meta) {
                    if let Some(nak) = i.recv.receiver.nak_again(header) {
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
        if !self.from_peer(i, tx, plane, pkt, meta) {
            tx.counters.inc(Counter::RxNotPeer);
            return RxFate::Dropped;
        }
        if i.send.response_due.is_some()
            && matches!(pkt, Packet::Data { .. } | Packet::Ack(_) | Packet::Nak(_))
        {
            i.send.heard_from_peer(now_ns());
        }
        match pkt {
            Packet::Data { header, payload } => {
                self.receive_data(i, tx, ndev, plane, header, payload, meta)
            }
            Packet::Ack(ack) => self.receive_ack(i, tx, ack),
            Packet::Nak(nak) => self.receive_nak(i, tx, nak),
            Packet::ProbeReply(probe) => {
                i.send.sender.on_probe_reply(probe, now_ns());
                self.pump(i, tx);
            }
            Packet::Planes(pl) => self.receive_planes(i, tx, pl),
            Packet::Probe(_) => {}
        }
        RxFate::Consumed
    }

    /// Whether `pkt` comes from the connected peer: from its address on the
    /// plane it arrived on (`plane`); a PLANES packet from its plane-0
    /// address (the one the QP was connected to), or on plane k > 0 from
    /// the plane-k address it lists if it lists that plane-0 address first
    /// (sent there while the peer's plane 0 is down) and the peer's plane-k
    /// address, if already known (this QP's exchange, else the device's
    /// directory), is that one (protocol.md 1.8, 3).
    fn from_peer(
        &self,
        i: &Inner,
        tx: &TxCtx<'_>,
        plane: Option<u8>,
        pkt: &Packet<'_>,
        meta: &RxMeta,
    ) -> bool {
        let Some(peer) = i.peer else { return false };
        if let Packet::Planes(pl) = pkt {
            if meta.src == peer.remote {
                return true;
            }
            let Some(k @ 1..) = plane else { return false };
            // The listed addresses of the QP's family only, as `learn`
            // takes them.
            let listed = |k: u8| {
                (k < pl.count)
                    .then(|| pl.addrs.get(usize::from(k)).copied().map(IpAddr))
                    .flatten()
                    .filter(|a| !a.is_unspecified() && a.family() == peer.remote.family())
            };
            let known = i
                .recv
                .peer_planes
                .addr(k)
                .or_else(|| tx.peers.lock().get(peer.remote)?.addr(k));
            return listed(k) == Some(meta.src)
                && listed(0) == Some(peer.remote)
                && known.is_none_or(|a| a == meta.src);
        }
        plane.and_then(|k| i.recv.peer_planes.addr(k)) == Some(meta.src)
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
}
