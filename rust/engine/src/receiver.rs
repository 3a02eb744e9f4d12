//! Receiving side of a QP: validates data packets against per-path SACK
//! state and per-message packet bitmaps, tells the caller where to place
//! each payload (or that it is a duplicate), builds ACKs and NAKs, answers
//! probes and releases completions strictly in message order. It also
//! decides when each path is acknowledged ([`Receiver::ack_now`],
//! [`Receiver::flush`]; the policy is in [`ack_policy`](super::ack_policy)).

use super::ack_policy::{AckPending, DEFAULT_ACK_DELAY_NS};
use super::bitmap::{MsgBits, PktBitmap, INLINE_PKTS, MAX_MSG_PKTS};
use super::completion::{CompletionStatus, RxCompletion};
use super::config::{
    validate_mtu, ConfigError, ReceiverConfig, MAX_PATHS, MSG_WINDOW_MAX, MSG_WINDOW_V1,
    PATH_GENERATIONS, PATH_SLOT_BITS, PATH_SLOT_MASK,
};
use super::heap::{kmalloc_size, Empty, Global, Heap};
use super::rcn::{self, Shares};
use super::sack::{HoleChange, PsnVerdict, SackTracker};
use super::sender::packets_for;
use super::seq::seq_diff;
use super::window::MsgWindow;
use super::wire::{
    Ack, DataHeader, Nak, Opcode, Probe, Syndrome, FLAG_PEER_PSN, FLAG_WIDE, MAX_PAYLOAD,
};

/// Where to put the payload of an accepted packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Message sequence number.
    pub msn: u32,
    /// Operation of the message.
    pub opcode: Opcode,
    /// Byte offset inside the message (WRITE: add to `remote_va`; SEND:
    /// offset inside the receive buffer bound to `rsn`).
    pub offset: u32,
    /// Payload bytes to copy.
    pub len: u32,
    /// Total message length.
    pub msg_len: u32,
    /// Remote virtual address of the message start (WRITE).
    pub remote_va: u64,
    /// Remote key (WRITE).
    pub rkey: u32,
    /// Receive sequence number (SEND, SEND_IMM, WRITE_IMM): the payload
    /// belongs in the `rsn`-th (mod 2^16) receive buffer posted on this QP
    /// direction, known from any one packet of the message; 0 otherwise.
    pub rsn: u16,
}

/// Why a packet was dropped without acknowledgement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Not a reliable data packet (UD and control go elsewhere).
    NotReliableData,
    /// Header fields inconsistent (see `DataHeader::validate`).
    Malformed,
    /// Offset/length do not match the MTU segmentation.
    BadSegmentation,
    /// Message too far ahead of the completion point.
    MessageOutOfWindow,
    /// Opcode, length or `rsn` differ from earlier packets of the message.
    Inconsistent,
    /// PSN too far ahead on its path.
    PathOutOfWindow,
    /// The heap had no memory for the packet's path or its (long)
    /// message: nothing was recorded, so the sender resends it.
    NoMemory,
}

/// Decision for one data packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxVerdict {
    /// New data: place it, then send `ack_now(path_id)`.
    Place(Placement),
    /// Already placed: drop the payload, still acknowledge (`ack_now`).
    Duplicate,
    /// Message failed: drop the payload, send `pop_nak()`, then `ack_now`.
    Discard,
    /// Invalid: drop, no acknowledgement.
    Drop(DropReason),
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// Packets placed.
    pub placed: u64,
    /// Duplicate packets.
    pub duplicates: u64,
    /// Dropped packets.
    pub dropped: u64,
    /// Packets from a superseded path generation.
    pub stale_path: u64,
}

#[derive(Clone, Copy, Debug)]
struct RxPath {
    id: u16,
    live: bool,
    tracker: SackTracker,
    ce_pending: bool,
    last_ts: u64,
    ack: AckPending,
    /// A packet of this path filled a hole, so the path reorders (resent
    /// data takes a new PSN, so nothing else fills one). From then on a
    /// hole opening on it, or a hole other than the lowest filling, is no
    /// longer acknowledged at once (protocol.md 3.4).
    reorders: bool,
}

impl RxPath {
    const EMPTY: Self = Self {
        id: 0,
        live: false,
        tracker: SackTracker::new(0),
        ce_pending: false,
        last_ts: 0,
        ack: AckPending::NONE,
        reorders: false,
    };
}

/// A message of the window; its packet bitmap is in place for up to
/// [`INLINE_PKTS`] packets, from the heap for a longer one (taken with its
/// first packet, given back when it completes).
struct RxMsg<H: Heap> {
    msn: u32,
    live: bool,
    opcode: Opcode,
    len: u32,
    got: MsgBits<H::Box<PktBitmap>>,
    /// Packets received, at most [`MAX_MSG_PKTS`]. (How many it has comes
    /// from `opcode` and `len`, which every packet of it repeats.)
    got_count: u16,
    complete: bool,
    failed: Option<Syndrome>,
    imm: u32,
    remote_va: u64,
    rkey: u32,
    rsn: u16,
    /// Segmented at the agreed payload size (`FLAG_WIDE`): every packet of
    /// it says the same.
    wide: bool,
}

impl<H: Heap> Empty for RxMsg<H> {
    const EMPTY: Self = Self {
        msn: 0,
        live: false,
        opcode: Opcode::Send,
        len: 0,
        got: MsgBits::SHORT,
        got_count: 0,
        complete: false,
        failed: None,
        imm: 0,
        remote_va: 0,
        rkey: 0,
        rsn: 0,
        wide: false,
    };
}

/// Where the peer's first message is numbered (protocol.md 2). A peer
/// numbers from its own initial PSN (our `rq_psn`), or, when it answered
/// our requests before it had one, from ours (`sq_psn`, packets flagged
/// `PEER_PSN`); the first accepted packet settles which.
#[derive(Clone, Copy, Debug)]
struct Start {
    /// The peer's initial PSN.
    peer: u32,
    /// Our own initial PSN, once we have one.
    own: Option<u32>,
    /// `Some(flagged)` once a packet was accepted: every later packet of
    /// the connection carries the same `PEER_PSN` flag.
    settled: Option<bool>,
}

impl Start {
    const ZERO: Self = Self {
        peer: 0,
        own: None,
        settled: None,
    };
}

/// The receiving side of one QP, generic over the heap its paths and long
/// messages take memory from, like [`Sender`](super::sender::Sender): a
/// path's state is taken when its first packet arrives.
pub struct Receiver<H: Heap = Global> {
    cfg: ReceiverConfig,
    /// The paths packets arrived on, by slot (`None`: none yet since
    /// `reset`; a slot keeps its memory for later generations).
    paths: [Option<H::Box<RxPath>>; MAX_PATHS],
    /// The messages from `head` on, at `msn % MSG_WINDOW_MAX`; a chunk's
    /// memory is taken with the first data packet accepted for it (none
    /// is live before).
    msgs: MsgWindow<RxMsg<H>, H>,
    /// Messages from `head` on accepted (the rest are out of window), and
    /// advertised in every ACK: [`Receiver::set_msg_window`].
    msg_window: u16,
    start: Start,
    /// The payload size agreed with the peer (protocol.md 1.8) that its
    /// `FLAG_WIDE` messages are segmented at; 0 while none is.
    wide_payload: u32,
    head: u32,
    cum_msn: u32,
    rate_hint_kbps: u32,
    /// When the last data packet was accepted (placed, duplicate or
    /// discarded), for the device's count of receiving QPs (RCN); `None`
    /// once a count found that time out of the window (or none came).
    last_data_ns: Option<u64>,
    /// This QP was one of the receiving QPs at the last count that
    /// visited it, which a receiving QP's count always does.
    rcn_counted: bool,
    /// Not counted, this QP took a newcomer's hint since the last count
    /// ([`Receiver::rcn_join`]).
    rcn_joined: bool,
    pending_nak: Option<Nak>,
    /// The last message failed here and its syndrome, kept after its
    /// completion is released: a QP in error still answers that
    /// message's packets with its NAK ([`Receiver::nak_again`]).
    last_failure: Option<(u32, Syndrome)>,
    /// Longest wait of an accepted packet for its ACK (ns).
    ack_delay_ns: u64,
    stats: ReceiverStats,
}

impl<H: Heap> Receiver<H> {
    /// What the message window costs once the first data packet takes it
    /// (kmalloc classes).
    pub const WINDOW_BYTES: usize = MsgWindow::<RxMsg<H>, H>::SIZE;

    /// What each further chunk of the message window costs, taken as
    /// more messages are in flight (kmalloc classes).
    pub const WINDOW_CHUNK_BYTES: usize = MsgWindow::<RxMsg<H>, H>::CHUNK_SIZE;
}

impl Receiver {
    /// A receiver expecting MSN 0 next.
    pub fn new(cfg: ReceiverConfig) -> Result<Self, ConfigError> {
        let mut r = Self::EMPTY;
        r.reset(cfg)?;
        Ok(r)
    }
}

impl<H: Heap> Receiver<H> {
    const NO_PATH: Option<H::Box<RxPath>> = None;

    /// An idle receiver, usable only after [`Receiver::reset`]; a constant
    /// so a kernel can copy it into its own memory without building it on
    /// the stack.
    pub const EMPTY: Self = Self {
        cfg: ReceiverConfig {
            peer_qpn: 0,
            mtu: 1,
        },
        paths: [Self::NO_PATH; MAX_PATHS],
        msgs: MsgWindow::NONE,
        msg_window: MSG_WINDOW_MAX as u16,
        start: Start::ZERO,
        wide_payload: 0,
        head: 0,
        cum_msn: 0,
        rate_hint_kbps: 0,
        last_data_ns: None,
        rcn_counted: false,
        rcn_joined: false,
        pending_nak: None,
        last_failure: None,
        ack_delay_ns: DEFAULT_ACK_DELAY_NS,
        stats: ReceiverStats {
            placed: 0,
            duplicates: 0,
            dropped: 0,
            stale_path: 0,
        },
    };

    /// (Re)initialise in place, expecting MSN 0 next.
    pub fn reset(&mut self, cfg: ReceiverConfig) -> Result<(), ConfigError> {
        validate_mtu(cfg.mtu)?;
        self.cfg = cfg;
        for p in self.paths.iter_mut() {
            *p = None;
        }
        for m in self.msgs.iter_mut() {
            *m = RxMsg::EMPTY;
        }
        self.start = Start::ZERO;
        self.wide_payload = 0;
        self.head = 0;
        self.cum_msn = 0;
        self.rate_hint_kbps = 0;
        self.last_data_ns = None;
        self.rcn_counted = false;
        self.rcn_joined = false;
        self.pending_nak = None;
        self.last_failure = None;
        self.stats = ReceiverStats::default();
        Ok(())
    }

    /// Expects this connection's first message to be `msn`, the peer's
    /// initial PSN (see `Sender::start_at`). Call right after
    /// [`Receiver::reset`]; no effect once a packet was accepted.
    pub fn start_at(&mut self, msn: u32) {
        if self.start.settled.is_none() {
            self.start.peer = msn;
            self.head = msn;
            self.cum_msn = msn;
        }
    }

    /// Our own initial PSN, where a peer that answers before it has one
    /// numbers its messages (packets flagged `PEER_PSN`). Until this is
    /// known such packets are dropped.
    pub fn own_start(&mut self, msn: u32) {
        if self.start.settled.is_none() {
            self.start.own = Some(msn);
        }
    }

    /// The first accepted packet fixes the start; afterwards a packet must
    /// carry the same `PEER_PSN` flag. A packet that cannot belong to this
    /// connection's numbering is refused.
    fn settle_start(&mut self, h: &DataHeader) -> Result<(), DropReason> {
        let flagged = h.flags & FLAG_PEER_PSN != 0;
        match self.start.settled {
            Some(f) if f == flagged => Ok(()),
            Some(_) => Err(DropReason::MessageOutOfWindow),
            None => {
                let first = if flagged {
                    self.start.own.ok_or(DropReason::MessageOutOfWindow)?
                } else {
                    self.start.peer
                };
                let ahead = seq_diff(h.msn, first);
                if !(0..i32::from(self.msg_window)).contains(&ahead) {
                    return Err(DropReason::MessageOutOfWindow);
                }
                self.head = first;
                self.cum_msn = first;
                self.start.settled = Some(flagged);
                Ok(())
            }
        }
    }

    /// Counters.
    pub fn stats(&self) -> &ReceiverStats {
        &self.stats
    }

    /// Bytes this receiver holds, as a kernel's `kmalloc` would count them
    /// ([`kmalloc_size`]): the receiver itself, its paths' state and the
    /// bitmaps of its long messages in progress.
    pub fn footprint(&self) -> usize {
        use core::mem::size_of;
        let paths = self.paths.iter().flatten().count();
        let bitmaps = self.msgs.iter().filter(|m| m.got.is_long()).count();
        kmalloc_size(size_of::<Self>())
            + self.msgs.footprint()
            + paths * kmalloc_size(size_of::<RxPath>())
            + bitmaps * kmalloc_size(size_of::<PktBitmap>())
    }

    /// Accept and advertise `n` messages outstanding, within
    /// [`MSG_WINDOW_V1`]`..=`[`MSG_WINDOW_MAX`] (default the most): a
    /// caller whose own per-message tables hold fewer says so. Call before
    /// the connection's first packet; it stays across [`Receiver::reset`]
    /// (a window never shrinks under a sender that was told it).
    pub fn set_msg_window(&mut self, n: usize) {
        if self.start.settled.is_none() {
            self.msg_window = n.clamp(MSG_WINDOW_V1, MSG_WINDOW_MAX) as u16;
        }
    }

    /// Accept messages flagged `FLAG_WIDE`, segmented at `payload` bytes:
    /// the size both ends agreed in their PLANES exchange (protocol.md
    /// 1.8), above the path MTU and at most `MAX_PAYLOAD`. Fixed for the
    /// connection once set: a different size is refused (`false`), since
    /// the peer may have wide messages in flight. Until then wide packets
    /// are dropped (`BadSegmentation`).
    pub fn set_payload(&mut self, payload: u32) -> bool {
        if payload <= self.cfg.mtu || payload as usize > MAX_PAYLOAD {
            return false;
        }
        if self.wide_payload != 0 && self.wide_payload != payload {
            return false;
        }
        self.wide_payload = payload;
        true
    }

    /// The agreed payload size wide messages use, 0 while none is.
    pub fn payload(&self) -> u32 {
        self.wide_payload
    }

    /// Messages accepted outstanding ([`Receiver::set_msg_window`]).
    pub fn msg_window(&self) -> usize {
        usize::from(self.msg_window)
    }

    /// Next message not yet fully received.
    pub fn cum_msn(&self) -> u32 {
        self.cum_msn
    }

    /// Set the rate hint (RCN, kbit/s, 0 = none) advertised in ACKs; the
    /// device computes it from its line rate and the QPs receiving at once
    /// ([`Receiver::rcn_count`] does both for a device's count).
    pub fn set_rate_hint(&mut self, kbps: u32) {
        self.rate_hint_kbps = kbps;
    }

    /// The rate hint advertised in ACKs (kbit/s, 0 = none).
    pub fn rate_hint_kbps(&self) -> u32 {
        self.rate_hint_kbps
    }

    /// Whether a data packet was accepted within `window_ns` before `now`.
    pub fn receiving(&self, now: u64, window_ns: u64) -> bool {
        self.last_data_ns
            .is_some_and(|t| now.saturating_sub(t) < window_ns)
    }

    /// Whether the device's count must visit this QP (protocol.md 6.5):
    /// it accepted data since a count last found it idle, so it may be
    /// receiving. A device whose count visits only the QPs with work for
    /// it (the driver's tick) keeps such a QP marked until the count
    /// that finds its window passed, which lets it go
    /// ([`Receiver::rcn_count`]). No clock read: the data path pays one
    /// store per packet, and a QP's idleness is judged by the count.
    pub fn rcn_due(&self) -> bool {
        self.last_data_ns.is_some()
    }

    /// Whether this QP was one of the receiving QPs at the device's last
    /// count (a receiving QP is visited by every count, [`rcn_due`]). A
    /// QP that was not advertises the share a newcomer gets from the
    /// device's last count ([`Receiver::rcn_join`]), which the device
    /// sets before an ACK goes ([`Receiver::set_rate_hint`]): no count
    /// visits an idle QP to keep it current.
    ///
    /// [`rcn_due`]: Receiver::rcn_due
    pub fn rcn_counted(&self) -> bool {
        self.rcn_counted
    }

    /// Whether this QP, which the last count did not find receiving, is
    /// to take a newcomer's hint now: true once between two counts, at
    /// its first packet since the last, so that the device numbers its
    /// newcomers as they come (`Shares::joining`) and QPs that start
    /// together (an incast) share the capacity from their first ACKs
    /// instead of each taking all of it. False for a counted QP.
    pub fn rcn_join(&mut self) -> bool {
        let join = !self.rcn_counted && !self.rcn_joined;
        self.rcn_joined |= join;
        join
    }

    /// The device's count of its receiving QPs (protocol.md 6.5), at
    /// `now`, visiting this QP: takes its hint from the previous count's
    /// `shares` (as one of the QPs it counted, or not; a newcomer that
    /// joined since keeps the share it joined with, which knew of the
    /// newcomers before it, and `shares` did not), and returns
    /// whether this QP counts as receiving now
    /// ([`rcn::receiving_window_ns`] at its new hint), which the caller adds up into the
    /// next count's shares. A QP not receiving is no longer
    /// [`due`](Receiver::rcn_due) for counts until its next data packet.
    pub fn rcn_count(&mut self, shares: &Shares, now: u64) -> bool {
        if self.rcn_counted || !self.rcn_joined {
            self.rate_hint_kbps = shares.hint(self.rcn_counted);
        }
        self.rcn_joined = false;
        let window = rcn::receiving_window_ns(self.rate_hint_kbps, self.cfg.mtu);
        self.rcn_counted = self.receiving(now, window);
        if !self.rcn_counted {
            self.last_data_ns = None;
        }
        self.rcn_counted
    }

    /// Check a header against the segmentation (at the path MTU, or the
    /// agreed payload size for `FLAG_WIDE`); returns (packet index,
    /// packets in message).
    fn geometry(&self, h: &DataHeader) -> Result<(u32, u32), DropReason> {
        let mtu = if h.flags & FLAG_WIDE == 0 {
            self.cfg.mtu
        } else if self.wide_payload != 0 {
            self.wide_payload
        } else {
            return Err(DropReason::BadSegmentation);
        };
        let npkts = packets_for(h.opcode, h.msg_len, mtu);
        if npkts as usize > MAX_MSG_PKTS {
            return Err(DropReason::BadSegmentation);
        }
        if h.opcode == Opcode::ReadReq {
            return Ok((0, 1));
        }
        if !h.offset.is_multiple_of(mtu) {
            return Err(DropReason::BadSegmentation);
        }
        let idx = h.offset / mtu;
        let expect = h.msg_len.saturating_sub(h.offset).min(mtu);
        if idx >= npkts || u32::from(h.payload_len) != expect {
            return Err(DropReason::BadSegmentation);
        }
        Ok((idx, npkts))
    }

    fn drop(&mut self, r: DropReason) -> RxVerdict {
        self.stats.dropped += 1;
        RxVerdict::Drop(r)
    }

    /// How long an accepted packet may wait for its ACK at most (ns;
    /// default [`DEFAULT_ACK_DELAY_NS`]); kept across [`Receiver::reset`].
    /// Well below the sender's RTO floor: a packet waiting here looks lost
    /// to the sender once its RTO passes.
    pub fn set_ack_delay(&mut self, ns: u64) {
        self.ack_delay_ns = ns;
    }

    /// Process a data packet header (`ce`: the IP header carried ECN-CE),
    /// arriving at `now`. The caller then sends what [`Receiver::pop_nak`],
    /// [`Receiver::ack_now`] and [`Receiver::flush`] return.
    pub fn on_data(&mut self, h: &DataHeader, ce: bool, now: u64) -> RxVerdict {
        if !h.opcode.is_reliable_data() {
            return self.drop(DropReason::NotReliableData);
        }
        if h.validate().is_err() {
            return self.drop(DropReason::Malformed);
        }
        let (idx, npkts) = match self.geometry(h) {
            Ok(g) => g,
            Err(r) => return self.drop(r),
        };
        if let Err(r) = self.settle_start(h) {
            return self.drop(r);
        }
        let ahead = seq_diff(h.msn, self.head);
        // A sender has at most the advertised window in flight, so a real
        // duplicate is at most that far behind: anything further (a late
        // packet of an earlier connection, a forgery) is out of window too,
        // dropped before it can touch path state or draw an ACK.
        let window = i32::from(self.msg_window);
        if ahead >= window || ahead < -window {
            return self.drop(DropReason::MessageOutOfWindow);
        }
        let slot = h.msn as usize % MSG_WINDOW_MAX;
        if ahead >= 0 {
            if let Some(m) = self.msgs.get(slot) {
                if m.live
                    && m.msn == h.msn
                    && (m.opcode != h.opcode
                        || m.len != h.msg_len
                        || m.rsn != h.rsn
                        || m.wide != (h.flags & FLAG_WIDE != 0))
                {
                    return self.drop(DropReason::Inconsistent);
                }
            }
        }
        // Memory first: a refusal must leave no trace an ACK could report.
        let pslot = (h.path_id & PATH_SLOT_MASK) as usize;
        let Some(bits) = self.take_memory(h, ahead, pslot, npkts) else {
            return self.drop(DropReason::NoMemory);
        };
        // Path bookkeeping (loss detection at the sender).
        // The path to acknowledge, if the packet is tracked, and whether
        // its ACK must go at once (protocol.md 3.4).
        let mut tracked: Option<bool> = None;
        if let Some(rp) = self.paths.get_mut(pslot).and_then(|p| p.as_deref_mut()) {
            let gen = h.path_id >> PATH_SLOT_BITS;
            let cur = rp.id >> PATH_SLOT_BITS;
            let newer = gen.wrapping_sub(cur) % PATH_GENERATIONS;
            if !rp.live || (rp.id != h.path_id && newer < PATH_GENERATIONS / 2) {
                *rp = RxPath {
                    id: h.path_id,
                    live: true,
                    ..RxPath::EMPTY
                };
            }
            if rp.id == h.path_id {
                let mut t = rp.tracker;
                t.advance_floor(h.psn.wrapping_sub(u32::from(h.floor_delta)));
                let change = t.hole_change(h.psn);
                let verdict = t.on_psn(h.psn);
                if verdict == PsnVerdict::OutOfWindow {
                    self.stats.dropped += 1;
                    return RxVerdict::Drop(DropReason::PathOutOfWindow);
                }
                let filled = verdict == PsnVerdict::New
                    && matches!(change, HoleChange::FillsLowest | HoleChange::BelowTop);
                // At once (protocol.md 3.4): a hole opening or filling on a
                // path that has not reordered (a loss to report; the first
                // reordering, whose ACK echoing the late packet is the
                // sender's proof), the lowest hole filled on any path (the
                // end of a reordering, which a sender waiting out a reorder
                // window must see; its ACK moves `cum_psn`), a duplicate (a
                // verdict probe or a lost ACK's repeat). The rest wait for
                // `k`, each ACK carrying the whole SACK: on a path that
                // reorders, a hole opening and a higher hole filled (on a
                // jittering link nearly every packet does one or the other).
                let urgent = match change {
                    HoleChange::Opens | HoleChange::BelowTop => !rp.reorders,
                    HoleChange::FillsLowest => true,
                    HoleChange::Extends => false,
                };
                tracked = Some(ce || urgent || verdict == PsnVerdict::Duplicate);
                rp.reorders |= filled;
                rp.tracker = t;
                rp.ce_pending |= ce;
                rp.last_ts = h.timestamp;
            } else {
                self.stats.stale_path += 1;
            }
        }
        let v = self.on_message(h, ahead, idx, npkts, bits);
        // Duplicates and discarded packets are answered at once.
        let completed = match v {
            RxVerdict::Place(_) => self.msgs.get(slot).is_some_and(|m| m.complete),
            RxVerdict::Drop(_) => return v,
            RxVerdict::Duplicate | RxVerdict::Discard => true,
        };
        self.last_data_ns = Some(now);
        if let (Some(urgent), Some(rp)) = (
            tracked,
            self.paths.get_mut(pslot).and_then(|p| p.as_deref_mut()),
        ) {
            rp.ack.on_packet(now, h.floor_delta, urgent || completed);
        }
        v
    }

    /// Whether the packet `ahead` of `head` starts a message in the window
    /// (its first packet to arrive).
    fn starts_message(&self, h: &DataHeader, ahead: i32) -> bool {
        ahead >= 0
            && self
                .msgs
                .get(h.msn as usize % MSG_WINDOW_MAX)
                .is_some_and(|m| !m.live || m.msn != h.msn)
    }

    /// The memory an accepted packet needs before it is recorded: its
    /// path's state (the path's first packet), the message window (the
    /// QP's first data packet) and, for the first packet of a message
    /// longer than [`INLINE_PKTS`], the message's bitmap (returned, for
    /// [`Receiver::on_message`]). `None` if the heap refused.
    fn take_memory(
        &mut self,
        h: &DataHeader,
        ahead: i32,
        pslot: usize,
        npkts: u32,
    ) -> Option<MsgBits<H::Box<PktBitmap>>> {
        if let Some(p) = self.paths.get_mut(pslot) {
            if p.is_none() {
                *p = Some(H::copy_of(&RxPath::EMPTY)?);
            }
        }
        if !self.msgs.take(h.msn as usize % MSG_WINDOW_MAX) {
            return None;
        }
        if npkts > INLINE_PKTS && self.starts_message(h, ahead) {
            return Some(MsgBits::long(H::copy_of(&PktBitmap::new())?));
        }
        Some(MsgBits::SHORT)
    }

    /// Message bookkeeping (placement and completion) of an accepted
    /// packet, `ahead` of `head`, packet `idx` of `npkts`; `bits`: the
    /// bitmap for a message it starts ([`Receiver::take_memory`]).
    fn on_message(
        &mut self,
        h: &DataHeader,
        ahead: i32,
        idx: u32,
        npkts: u32,
        bits: MsgBits<H::Box<PktBitmap>>,
    ) -> RxVerdict {
        let slot = h.msn as usize % MSG_WINDOW_MAX;
        if ahead < 0 {
            self.stats.duplicates += 1;
            return RxVerdict::Duplicate;
        }
        let Some(m) = self.msgs.get_mut(slot) else {
            return self.drop(DropReason::MessageOutOfWindow);
        };
        if !m.live || m.msn != h.msn {
            *m = RxMsg {
                msn: h.msn,
                live: true,
                opcode: h.opcode,
                len: h.msg_len,
                imm: h.imm,
                remote_va: h.remote_va,
                rkey: h.rkey,
                rsn: h.rsn,
                wide: h.flags & FLAG_WIDE != 0,
                got: bits,
                ..RxMsg::EMPTY
            };
        }
        if m.failed.is_some() {
            if let Some(s) = m.failed {
                self.pending_nak = Some(Nak {
                    dst_qpn: self.cfg.peer_qpn,
                    path_id: h.path_id,
                    syndrome: s,
                    psn: h.psn,
                    msn: h.msn,
                });
            }
            return RxVerdict::Discard;
        }
        if !m.got.set(idx) {
            self.stats.duplicates += 1;
            return RxVerdict::Duplicate;
        }
        m.got_count = m.got_count.saturating_add(1);
        if u32::from(m.got_count) >= npkts {
            m.complete = true;
        }
        let placement = Placement {
            msn: h.msn,
            opcode: h.opcode,
            offset: h.offset,
            len: u32::from(h.payload_len),
            msg_len: h.msg_len,
            remote_va: h.remote_va,
            rkey: h.rkey,
            rsn: h.rsn,
        };
        self.advance_cum();
        self.stats.placed += 1;
        RxVerdict::Place(placement)
    }

    fn advance_cum(&mut self) {
        loop {
            if self.cum_msn.wrapping_sub(self.head) as usize >= usize::from(self.msg_window) {
                return;
            }
            match self.msgs.get(self.cum_msn as usize % MSG_WINDOW_MAX) {
                Some(m) if m.live && m.msn == self.cum_msn && m.complete && m.failed.is_none() => {
                    self.cum_msn = self.cum_msn.wrapping_add(1);
                }
                _ => return,
            }
        }
    }

    /// The caller could not place message `msn` (bad rkey, bounds, no
    /// receive buffer): fail it, queue a NAK. Fatal to the QP in v1.
    pub fn fail_message(&mut self, msn: u32, syndrome: Syndrome, path_id: u16, psn: u32) {
        let ahead = seq_diff(msn, self.head);
        if ahead < 0 || ahead >= i32::from(self.msg_window) {
            return;
        }
        if let Some(m) = self.msgs.get_mut(msn as usize % MSG_WINDOW_MAX) {
            if m.live && m.msn == msn {
                m.failed = Some(syndrome);
                m.complete = true;
                self.last_failure = Some((msn, syndrome));
                // `on_data` may have moved `cum_msn` past the message when
                // this packet completed it: no ACK may confirm it now.
                if seq_diff(self.cum_msn, msn) > 0 {
                    self.cum_msn = msn;
                }
                self.pending_nak = Some(Nak {
                    dst_qpn: self.cfg.peer_qpn,
                    path_id,
                    syndrome,
                    psn,
                    msn,
                });
                if let Some(rp) = self
                    .paths
                    .get_mut((path_id & PATH_SLOT_MASK) as usize)
                    .and_then(|p| p.as_deref_mut())
                {
                    rp.ack.flush();
                }
            }
        }
    }

    /// The NAK for a packet of the message that failed here, for a QP that
    /// is in error since (protocol.md 3.2): it processes nothing else, but
    /// a requester whose NAK was lost learns the failure from the answer
    /// to its verdict probe instead of running out of retries. Touches no
    /// state.
    pub fn nak_again(&self, h: &DataHeader) -> Option<Nak> {
        let (msn, syndrome) = self.last_failure?;
        (h.msn == msn && h.opcode.is_reliable_data()).then_some(Nak {
            dst_qpn: self.cfg.peer_qpn,
            path_id: h.path_id,
            syndrome,
            psn: h.psn,
            msn,
        })
    }

    /// Take the NAK to send, if any.
    pub fn pop_nak(&mut self) -> Option<Nak> {
        self.pending_nak.take()
    }

    /// The ACK of the packet just processed, if it must go now (protocol.md
    /// 3.4): its path waited for [`ack_every`](super::ack_policy::ack_every)
    /// packets, or the packet completed a message (so it moves `cum_msn`
    /// when it is the oldest), carried ECN-CE, filled its path's lowest
    /// hole, opened or filled another on a path that has not reordered,
    /// was a duplicate or discarded, or its message failed. Else
    /// it waits for a later ACK of its path or for [`Receiver::flush`].
    pub fn ack_now(&mut self, path_id: u16) -> Option<Ack> {
        let rp = self
            .paths
            .get((path_id & PATH_SLOT_MASK) as usize)?
            .as_deref()?;
        if rp.ack.due() {
            self.ack_for(path_id)
        } else {
            None
        }
    }

    /// An ACK of some path that must go by `now`: one whose packets waited
    /// [`Receiver::set_ack_delay`] long (or that is due and was not sent by
    /// [`Receiver::ack_now`]). Call until `None` when
    /// [`Receiver::ack_deadline`] passes (a timer, the driver's tick); the
    /// ACK goes where the path's last packet came from.
    pub fn flush(&mut self, now: u64) -> Option<Ack> {
        let delay = self.ack_delay_ns;
        let rp =
            self.paths.iter().flatten().find(|p| {
                p.live && (p.ack.due() || p.ack.deadline(delay).is_some_and(|d| d <= now))
            })?;
        let id = rp.id;
        self.ack_for(id)
    }

    /// When [`Receiver::flush`] has an ACK at the latest; `None` if no
    /// accepted packet waits for one.
    pub fn ack_deadline(&self) -> Option<u64> {
        let delay = self.ack_delay_ns;
        self.paths
            .iter()
            .flatten()
            .filter(|p| p.live)
            .filter_map(|p| p.ack.deadline(delay))
            .min()
    }

    /// Build the ACK for a path now, whether or not it is due (it reports
    /// everything received, so nothing of the path waits after it). `None`
    /// if the path id is unknown or superseded.
    pub fn ack_for(&mut self, path_id: u16) -> Option<Ack> {
        let rp = self
            .paths
            .get_mut((path_id & PATH_SLOT_MASK) as usize)?
            .as_deref_mut()?;
        if !rp.live || rp.id != path_id {
            return None;
        }
        rp.ack.sent();
        let ce = rp.ce_pending;
        rp.ce_pending = false;
        Some(Ack {
            dst_qpn: self.cfg.peer_qpn,
            path_id,
            ce,
            cum_psn: rp.tracker.cum(),
            sack: rp.tracker.bits(),
            ts_echo: rp.last_ts,
            cum_msn: self.cum_msn,
            rate_hint_kbps: self.rate_hint_kbps,
            msg_window: self.msg_window,
        })
    }

    /// Answer a probe (stateless echo).
    pub fn on_probe(&self, probe: &Probe) -> Probe {
        Probe {
            dst_qpn: self.cfg.peer_qpn,
            ..*probe
        }
    }

    /// Release the next completion, strictly in MSN order, exactly once.
    pub fn pop_completion(&mut self) -> Option<RxCompletion> {
        let m = self.msgs.get_mut(self.head as usize % MSG_WINDOW_MAX)?;
        if !m.live || m.msn != self.head || !m.complete {
            return None;
        }
        m.live = false;
        // A long message's bitmap goes back to the heap.
        if m.got.is_long() {
            m.got = MsgBits::SHORT;
        }
        let c = RxCompletion {
            msn: m.msn,
            opcode: m.opcode,
            len: m.len,
            imm: if m.opcode.has_imm() || m.opcode.is_response() {
                Some(m.imm)
            } else {
                None
            },
            remote_va: m.remote_va,
            rkey: m.rkey,
            rsn: m.rsn,
            status: match m.failed {
                Some(s) => CompletionStatus::Failed(s),
                None => CompletionStatus::Success,
            },
        };
        self.head = self.head.wrapping_add(1);
        // A failed message freezes cum_msn for good (fatal to the QP), so
        // no ACK can ever report it as delivered.
        if c.status == CompletionStatus::Success {
            if seq_diff(self.cum_msn, self.head) < 0 {
                self.cum_msn = self.head;
            }
            self.advance_cum();
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::FLAG_IMM;
    use super::*;

    fn rx() -> Receiver {
        Receiver::new(ReceiverConfig {
            peer_qpn: 9,
            mtu: 100,
        })
        .unwrap()
    }

    fn hdr(msn: u32, offset: u32, msg_len: u32, psn: u32) -> DataHeader {
        DataHeader {
            opcode: Opcode::SendImm,
            flags: FLAG_IMM,
            dst_qpn: 1,
            path_id: 0,
            floor_delta: 0,
            psn,
            msn,
            offset,
            msg_len,
            payload_len: msg_len.saturating_sub(offset).min(100) as u16,
            rsn: msn as u16,
            remote_va: 0,
            rkey: 0,
            imm: 0xAB,
            timestamp: 5,
        }
    }

    #[test]
    fn out_of_order_placement_in_order_completion() {
        let mut r = rx();
        // Message 1 (one packet) completes before message 0 (two packets).
        assert!(matches!(
            r.on_data(&hdr(1, 0, 50, 0), false, 0),
            RxVerdict::Place(_)
        ));
        assert!(r.pop_completion().is_none());
        assert!(
            matches!(r.on_data(&hdr(0, 100, 150, 1), true, 0), RxVerdict::Place(p) if p.offset == 100 && p.len == 50)
        );
        assert_eq!(
            r.on_data(&hdr(0, 100, 150, 1), false, 0),
            RxVerdict::Duplicate
        );
        let a = r.ack_for(0).unwrap();
        assert!(a.ce);
        assert_eq!(a.cum_psn, 2);
        assert_eq!(a.ts_echo, 5);
        assert!(matches!(
            r.on_data(&hdr(0, 0, 150, 2), false, 0),
            RxVerdict::Place(_)
        ));
        assert_eq!(r.ack_for(0).unwrap().cum_msn, 2);
        assert_eq!(
            r.pop_completion().map(|c| (c.msn, c.imm)),
            Some((0, Some(0xAB)))
        );
        assert_eq!(r.pop_completion().map(|c| c.msn), Some(1));
        assert!(r.pop_completion().is_none());
        assert_eq!(
            r.on_data(&hdr(0, 0, 150, 3), false, 0),
            RxVerdict::Duplicate
        );
    }

    #[test]
    fn rejects_bad_segmentation_and_inconsistency() {
        let mut r = rx();
        let mut h = hdr(0, 50, 150, 0);
        h.payload_len = 100;
        assert_eq!(
            r.on_data(&h, false, 0),
            RxVerdict::Drop(DropReason::BadSegmentation)
        );
        assert!(matches!(
            r.on_data(&hdr(0, 0, 150, 0), false, 0),
            RxVerdict::Place(_)
        ));
        let mut h = hdr(0, 100, 250, 1);
        h.payload_len = 100;
        assert_eq!(
            r.on_data(&h, false, 0),
            RxVerdict::Drop(DropReason::Inconsistent)
        );
        assert_eq!(
            r.on_data(&hdr(MSG_WINDOW_MAX as u32, 0, 10, 1), false, 0),
            RxVerdict::Drop(DropReason::MessageOutOfWindow)
        );
        // floor_delta bounds every PSN to within the SACK window of the
        // floor it declares, so a far PSN just moves the floor.
        let mut far = hdr(1, 0, 10, 300);
        far.floor_delta = 256;
        assert!(matches!(r.on_data(&far, false, 0), RxVerdict::Place(_)));
        assert_eq!(r.ack_for(0).unwrap().cum_psn, 44);
    }

    #[test]
    fn rsn_is_carried_checked_and_completed() {
        let mut r = rx();
        let mut h = hdr(0, 100, 150, 0);
        h.rsn = 7;
        assert!(matches!(r.on_data(&h, false, 0), RxVerdict::Place(p) if p.rsn == 7));
        let mut other = hdr(0, 0, 150, 1);
        other.rsn = 8;
        assert_eq!(
            r.on_data(&other, false, 0),
            RxVerdict::Drop(DropReason::Inconsistent)
        );
        other.rsn = 7;
        assert!(matches!(r.on_data(&other, false, 0), RxVerdict::Place(p) if p.rsn == 7));
        assert_eq!(r.pop_completion().map(|c| (c.msn, c.rsn)), Some((0, 7)));
        let mut w = hdr(1, 0, 10, 2);
        w.opcode = Opcode::Write;
        w.flags = 0;
        w.rsn = 1;
        assert_eq!(
            r.on_data(&w, false, 0),
            RxVerdict::Drop(DropReason::Malformed)
        );
    }

    #[test]
    fn failed_message_naks_and_completes_with_error() {
        let mut r = rx();
        let h = hdr(0, 0, 150, 0);
        assert!(matches!(r.on_data(&h, false, 0), RxVerdict::Place(_)));
        r.fail_message(0, Syndrome::RemoteAccess, 0, 0);
        assert_eq!(
            r.pop_nak().map(|n| n.syndrome),
            Some(Syndrome::RemoteAccess)
        );
        assert_eq!(
            r.on_data(&hdr(0, 100, 150, 1), false, 0),
            RxVerdict::Discard
        );
        assert!(r.pop_nak().is_some(), "NAK repeated");
        assert_eq!(
            r.ack_for(0).unwrap().cum_msn,
            0,
            "cum_msn does not pass a failed message"
        );
        assert_eq!(
            r.pop_completion().map(|c| c.status),
            Some(CompletionStatus::Failed(Syndrome::RemoteAccess))
        );
        assert!(matches!(
            r.on_data(&hdr(1, 0, 10, 2), false, 0),
            RxVerdict::Place(_)
        ));
        assert_eq!(
            r.ack_for(0).unwrap().cum_msn,
            0,
            "still frozen after the failure"
        );
    }

    /// Packet `i` of a 16-packet message on path 0, sent with `inflight`
    /// packets outstanding on the path.
    fn seg(i: u32, inflight: u16) -> DataHeader {
        let mut h = hdr(0, i * 100, 1600, i);
        h.floor_delta = inflight - 1;
        h.timestamp = 1000 + u64::from(i);
        h
    }

    #[test]
    fn acks_wait_for_half_the_path_window_or_the_message_end() {
        let mut r = rx();
        r.set_ack_delay(50);
        let mut sent = [false; 16];
        for i in 0..16 {
            assert!(matches!(
                r.on_data(&seg(i, 16), false, i.into()),
                RxVerdict::Place(_)
            ));
            sent[i as usize] = r.ack_now(0).is_some();
        }
        // Every 8th packet of a path with 16 outstanding, and the last.
        let acked: [usize; 2] = [7, 15];
        for (i, s) in sent.iter().enumerate() {
            assert_eq!(*s, acked.contains(&i), "packet {i}");
        }
        assert_eq!(r.ack_deadline(), None, "nothing waits");
        // A path with 2 outstanding is acknowledged every packet.
        let mut h = hdr(1, 0, 150, 16);
        h.floor_delta = 1;
        r.on_data(&h, false, 20);
        assert!(r.ack_now(0).is_some());
    }

    #[test]
    fn losses_marks_and_duplicates_are_acknowledged_at_once() {
        let mut r = rx();
        r.on_data(&seg(0, 16), false, 0);
        assert!(r.ack_now(0).is_none());
        r.on_data(&seg(1, 16), true, 1);
        let a = r.ack_now(0).expect("CE");
        assert!(a.ce);
        // PSN 3 arrives before 2: a hole, reported as it opens.
        r.on_data(&seg(3, 16), false, 2);
        assert_eq!(r.ack_now(0).map(|a| a.sack[0]), Some(1));
        r.on_data(&seg(4, 16), false, 3);
        assert!(r.ack_now(0).is_none(), "hole still open, already reported");
        r.on_data(&seg(6, 16), false, 3);
        assert_eq!(
            r.ack_now(0).map(|a| a.sack[0]),
            Some(0b1011),
            "a second hole"
        );
        r.on_data(&seg(7, 16), false, 3);
        assert!(r.ack_now(0).is_none(), "extends the top run: waits");
        r.on_data(&seg(2, 16), false, 4);
        assert!(r.ack_now(0).is_some(), "fills a hole");
        assert_eq!(r.on_data(&seg(2, 16), false, 5), RxVerdict::Duplicate);
        let a = r.ack_now(0).expect("duplicate");
        assert_eq!((a.cum_psn, a.ts_echo), (5, 1002));
    }

    #[test]
    fn a_path_that_reorders_has_only_its_lowest_hole_answered_at_once() {
        let mut r = rx();
        r.on_data(&seg(0, 16), false, 0);
        r.on_data(&seg(2, 16), false, 1);
        assert!(r.ack_now(0).is_some(), "a hole opens: a loss to report");
        r.on_data(&seg(4, 16), false, 2);
        assert!(r.ack_now(0).is_some(), "a second hole");
        r.on_data(&seg(3, 16), false, 3);
        let a = r.ack_now(0).expect("the path's first reordering");
        assert_eq!((a.cum_psn, a.ts_echo), (1, 1003), "echoes the late packet");
        r.on_data(&seg(1, 16), false, 4);
        let a = r.ack_now(0).expect("the lowest hole filled");
        assert_eq!((a.cum_psn, a.ts_echo), (5, 1001));
        // The path reorders now: neither a hole opening on it nor a
        // higher one filled is news the sender needs at once.
        r.on_data(&seg(7, 16), false, 5);
        assert!(r.ack_now(0).is_none(), "opens a hole on a reordering path");
        r.on_data(&seg(9, 16), false, 6);
        r.on_data(&seg(8, 16), false, 7);
        assert!(r.ack_now(0).is_none(), "fills a higher hole");
        r.on_data(&seg(5, 16), false, 8);
        let a = r.ack_now(0).expect("the lowest hole filled");
        assert_eq!(
            (a.cum_psn, a.sack[0]),
            (6, 0b111),
            "PSN 6 missing, 7-9 received"
        );
        r.on_data(&seg(5, 16), false, 9);
        assert!(r.ack_now(0).is_some(), "a duplicate");
        // A new path generation starts without the history.
        let mut h = seg(6, 16);
        (h.psn, h.path_id) = (2, 1 << PATH_SLOT_BITS);
        r.on_data(&h, false, 10);
        assert!(
            r.ack_now(h.path_id).is_some(),
            "opens a hole on a path that has not reordered"
        );
    }

    #[test]
    fn a_duplicate_is_no_reordering() {
        let mut r = rx();
        r.on_data(&seg(0, 16), false, 0);
        r.on_data(&seg(2, 16), false, 1);
        assert!(r.ack_now(0).is_some(), "opens");
        assert_eq!(r.on_data(&seg(2, 16), false, 2), RxVerdict::Duplicate);
        assert!(r.ack_now(0).is_some(), "a duplicate");
        r.on_data(&seg(4, 16), false, 3);
        assert!(
            r.ack_now(0).is_some(),
            "opens: the path still does not reorder"
        );
    }

    #[test]
    fn waiting_packets_are_flushed_after_the_ack_delay() {
        let mut r = rx();
        r.set_ack_delay(50);
        r.on_data(&seg(0, 16), false, 10);
        let mut other = seg(1, 16);
        other.path_id = 1;
        other.psn = 0;
        r.on_data(&other, false, 30);
        assert!(r.ack_now(0).is_none() && r.ack_now(1).is_none());
        assert_eq!(r.ack_deadline(), Some(60));
        assert!(r.flush(59).is_none());
        let a = r.flush(60).expect("path 0 waited 50 ns");
        assert_eq!((a.path_id, a.cum_psn, a.ts_echo), (0, 1, 1000));
        assert!(r.flush(60).is_none());
        assert_eq!(r.ack_deadline(), Some(80));
        assert_eq!(r.flush(80).map(|a| a.path_id), Some(1));
        assert_eq!(r.ack_deadline(), None);
    }

    #[test]
    fn a_failed_message_is_acknowledged_after_its_nak() {
        let mut r = rx();
        assert!(matches!(
            r.on_data(&seg(0, 16), false, 0),
            RxVerdict::Place(_)
        ));
        r.fail_message(0, Syndrome::RemoteAccess, 0, 0);
        assert!(r.pop_nak().is_some());
        assert!(r.ack_now(0).is_some());
    }

    #[test]
    fn new_path_generation_resets_tracking() {
        let mut r = rx();
        let mut h = hdr(0, 0, 10, 7);
        h.floor_delta = 7;
        r.on_data(&h, false, 0);
        assert_eq!(r.ack_for(0).unwrap().cum_psn, 0);
        h.path_id = 1 << 6;
        h.psn = 0;
        h.floor_delta = 0;
        h.msn = 1;
        r.on_data(&h, false, 0);
        assert!(
            r.ack_for(0).is_none(),
            "old generation no longer acknowledged"
        );
        assert_eq!(r.ack_for(1 << 6).unwrap().cum_psn, 1);
    }
}
