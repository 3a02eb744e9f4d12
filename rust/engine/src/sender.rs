//! Sending side of a QP: message segmentation, spraying over paths,
//! per-path windows, SACK loss detection, selective retransmission, RTO,
//! path health (probe, replace, plane drain), path growth on long RTT and
//! in-order send completions.

use core::ops::{Deref, DerefMut};

use super::bitmap::{MsgBits, PktBitmap, INLINE_PKTS, MAX_MSG_PKTS};
use super::cc::{AckSignal, Aimd, CcParams, CongestionControl, QueueDelay};
use super::completion::{CompletionStatus, TxCompletion};
use super::config::{ConfigError, SenderConfig, MAX_PATHS, MSG_WINDOW_MAX, MSG_WINDOW_V1};
use super::delay_trial::{DelayFloor, DelayUndo, TrialEnd};
use super::events::{CutCause, Events, FailCause, LossCause, RecoverCause, SenderEvent};
use super::growth::{Growth, GrowthStep};
use super::heap::{kmalloc_size, Empty, Global, Heap};
use super::path::{
    EntryState, InflightEntry, PathRing, PathState, ReorderWait, ReorderWatch, RtoUndo,
    RttEstimator, TxPath, EMPTY_RING, PATH_RING,
};
use super::rtt_peak::RttPeak;
use super::seq::{seq_diff, seq_in_window, seq_lt};
use super::window::MsgWindow;
use super::wire::{
    Ack, DataHeader, Nak, Opcode, Probe, FLAG_IMM, FLAG_PEER_PSN, FLAG_RETRANSMIT, FLAG_WIDE,
    MAX_PLANES, SACK_BITS,
};

/// A message to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    /// A reliable data opcode: SEND, SEND_IMM, WRITE, WRITE_IMM, READ_REQ,
    /// READ_RESP, CMP_SWAP, FETCH_ADD, ATOMIC_WRITE or ATOMIC_RESP.
    pub opcode: Opcode,
    /// Length in bytes (READ_REQ: bytes requested; atomics: exactly
    /// [`Opcode::atomic_len`], the operands the caller attaches).
    pub len: u32,
    /// Remote virtual address of the message start (WRITE, READ_REQ,
    /// atomic requests).
    pub remote_va: u64,
    /// Remote key (WRITE, READ_REQ, atomic requests).
    pub rkey: u32,
    /// Immediate data (*_IMM) or requester MSN (READ_RESP, ATOMIC_RESP).
    pub imm: u32,
    /// Receive sequence number, copied into every packet of the message.
    /// For SEND, SEND_IMM and WRITE_IMM the caller (the driver) numbers the
    /// messages that consume a receive buffer: 0 for the first such message
    /// of the QP direction, then +1 each (wrapping). Must be 0 for every
    /// other opcode. The sender does not assign it.
    pub rsn: u16,
}

/// Why `post` refused a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostError {
    /// As many messages are outstanding as the receiver accepts
    /// ([`Sender::msg_window`]).
    QueueFull,
    /// More than `MAX_MSG_PKTS` packets.
    TooLong,
    /// Not a reliable data opcode.
    BadOpcode,
    /// Non-zero `rsn` on an opcode that does not consume a receive
    /// (see [`Opcode::has_rsn`]).
    BadRsn,
    /// An atomic request or response whose length is not its operands'
    /// (see [`Opcode::atomic_len`]).
    BadLength,
    /// The message window's memory, taken with the first message, could
    /// not be had (the heap refused): nothing was queued, the caller
    /// tries again later.
    NoMemory,
}

/// What `next_packet` produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxKind {
    /// A data packet: the caller attaches `header.payload_len` bytes of
    /// message `header.msn` starting at `header.offset`.
    Data {
        /// Ready-to-encode header (timestamp = now).
        header: DataHeader,
        /// This packet was sent before and declared lost: why (the cause
        /// of the latest loss declared in its message).
        retransmit: Option<LossCause>,
    },
    /// A path probe.
    Probe(Probe),
}

/// One packet to transmit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxPacket {
    /// Content.
    pub kind: TxKind,
    /// UDP source port (ECMP entropy of the path).
    pub src_port: u16,
    /// Plane / NIC port to send on.
    pub plane: u8,
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Data packets sent, including retransmissions.
    pub data_packets: u64,
    /// Retransmitted data packets.
    pub retransmits: u64,
    /// Retransmitted payload bytes.
    pub retransmit_bytes: u64,
    /// Packets declared lost from SACK holes.
    pub sack_losses: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Packets declared lost by a retransmission timeout: in flight on the
    /// path when its timer expired. An upper bound on the retransmissions
    /// timers cause (a late ACK that undoes the timeout cancels those not
    /// yet resent); the rest of `retransmits` are SACK holes, plane
    /// failures and verdict probes.
    pub timeout_losses: u64,
    /// Delay trials that found a wait the QP's cuts did not lower: each
    /// raised the floor the delay is measured from (protocol.md 6.3).
    pub delay_floor_raised: u64,
    /// Retransmission timeouts undone: an ACK answering a packet sent
    /// before the timeout showed it was delivered (protocol.md 4.3).
    pub spurious_timeouts: u64,
    /// Probe intervals not counted as unanswered because ACKs of the path
    /// arrived meanwhile (protocol.md 4.3).
    pub probes_excused: u64,
    /// Acknowledgements for packets already declared lost (the original
    /// arrived after all: a sign of spurious loss declaration).
    pub late_acks: u64,
    /// SACK loss declarations shown wrong by reordering on their path
    /// (each doubled the path's loss threshold, protocol.md 4.2).
    pub reorders: u64,
    /// Tail probes sent: a path's newest packet in flight sent again when
    /// no ACK brought progress for its probe timeout (twice its SRTT plus
    /// the peer's ACK delay, at least the QP's peak RTT; protocol.md 4.3).
    pub tail_probes: u64,
    /// Probes sent.
    pub probes: u64,
    /// Paths replaced after unanswered probes.
    pub paths_replaced: u64,
    /// Paths opened beyond the initial set (long RTT growth).
    pub paths_opened: u64,
    /// Paths retired: opened by a growth step that gained no delivery
    /// rate, closed once empty (protocol.md 4.4).
    pub paths_retired: u64,
    /// Paths moved to another plane: off a plane reported down, or back
    /// to their home plane when it came up (protocol.md 1.8).
    pub paths_rehomed: u64,
    /// ACKs for an unknown or stale path id.
    pub stale_acks: u64,
    /// NAKs received.
    pub naks: u64,
    /// NAKs that named no message in flight, no live path or a PSN the
    /// path never carried: ignored (protocol.md 4.2).
    pub stale_naks: u64,
    /// Packets resent to draw the verdict (ACK or NAK) on a message whose
    /// packets were all acknowledged.
    pub verdict_probes: u64,
    /// Times the retry budget ran out (`CompletionStatus::RetryExceeded`).
    pub give_ups: u64,
}

impl SenderStats {
    /// All zero.
    pub const ZERO: Self = Self {
        data_packets: 0,
        retransmits: 0,
        retransmit_bytes: 0,
        sack_losses: 0,
        timeouts: 0,
        timeout_losses: 0,
        spurious_timeouts: 0,
        delay_floor_raised: 0,
        probes_excused: 0,
        late_acks: 0,
        reorders: 0,
        tail_probes: 0,
        probes: 0,
        paths_replaced: 0,
        paths_opened: 0,
        paths_retired: 0,
        paths_rehomed: 0,
        stale_acks: 0,
        stale_naks: 0,
        naks: 0,
        verdict_probes: 0,
        give_ups: 0,
    };
}

/// Bit of plane `k` in [`Sender`]'s `planes_down` (0 for a plane beyond
/// the eight a mask holds: never reported down).
fn plane_bit(k: u8) -> u8 {
    1u8.checked_shl(u32::from(k)).unwrap_or(0)
}

/// How long a sender the heap refused memory waits before it tries again
/// (ns): the reference driver's tick.
pub const ALLOC_RETRY_NS: u64 = 1_000_000;

/// A plane's spray clock advances by this over its carrying paths for each
/// packet sprayed on it: the unit is one packet per path.
const PLANE_CLOCK_UNIT: u32 = 1 << 12;

/// How far, in packets per path, a plane's spray clock may fall behind the
/// plane that leads: what a plane that could not send makes up.
const PLANE_CLOCK_LAG: u32 = 8 * PLANE_CLOCK_UNIT;

/// A message of the window. Its packet bitmaps are in place for up to
/// [`INLINE_PKTS`] packets; a longer message takes them from the heap
/// when its first packet goes out and gives them back when it completes.
struct TxMsg<H: Heap> {
    msn: u32,
    live: bool,
    opcode: Opcode,
    len: u32,
    npkts: u32,
    next_pkt: u32,
    acked: MsgBits<H::Box<PktBitmap>>,
    acked_count: u32,
    lost: MsgBits<H::Box<PktBitmap>>,
    lost_count: u32,
    remote_va: u64,
    rkey: u32,
    imm: u32,
    rsn: u16,
    /// Segmented at the agreed payload size, not the path MTU
    /// (`FLAG_WIDE`).
    wide: bool,
    failed: Option<super::wire::Syndrome>,
    /// The receiver's `cum_msn` passed it: completely received, not failed.
    confirmed: bool,
    /// The QP's retry budget passed without progress (`give_up`).
    retry_exceeded: bool,
    last_loss_slot: usize,
    /// Why the latest of its packets was declared lost.
    last_loss_cause: LossCause,
}

impl<H: Heap> Empty for TxMsg<H> {
    const EMPTY: Self = Self {
        msn: 0,
        live: false,
        opcode: Opcode::Send,
        len: 0,
        npkts: 0,
        next_pkt: 0,
        acked: MsgBits::SHORT,
        acked_count: 0,
        lost: MsgBits::SHORT,
        lost_count: 0,
        remote_va: 0,
        rkey: 0,
        imm: 0,
        rsn: 0,
        wide: false,
        failed: None,
        confirmed: false,
        retry_exceeded: false,
        last_loss_slot: usize::MAX,
        last_loss_cause: LossCause::Sack,
    };
}

impl<H: Heap> TxMsg<H> {
    /// Success needs the receiver's word (`cum_msn`), not only path ACKs of
    /// every packet: those also cover a message the receiver failed, whose
    /// NAK may be lost.
    fn done(&self) -> bool {
        self.failed.is_some() || self.confirmed || self.retry_exceeded
    }

    /// Every packet delivered, yet neither confirmed nor failed.
    fn awaiting_verdict(&self) -> bool {
        self.live && self.failed.is_none() && !self.confirmed && self.acked_count >= self.npkts
    }

    /// Its bitmaps hold every packet: in place, or taken from the heap
    /// for a long message. False if the heap refused.
    fn has_bits(&mut self) -> bool {
        if self.npkts <= INLINE_PKTS {
            return true;
        }
        if !self.acked.is_long() {
            match H::copy_of(&PktBitmap::new()) {
                Some(b) => self.acked = MsgBits::long(b),
                None => return false,
            }
        }
        if !self.lost.is_long() {
            match H::copy_of(&PktBitmap::new()) {
                Some(b) => self.lost = MsgBits::long(b),
                None => return false,
            }
        }
        true
    }
}

/// The scalar fields of a path, copied out so the ring is not copied.
#[derive(Clone, Copy)]
struct PathView {
    id: u16,
    state: PathState,
    una: u32,
    next_psn: u32,
    timer: Option<u64>,
    probe_deadline: Option<u64>,
    probes_failed: u32,
}

impl PathView {
    /// An unused slot's.
    const UNUSED: Self = Self::of(&TxPath::UNUSED);

    const fn of(p: &TxPath) -> Self {
        Self {
            id: p.id,
            state: p.state,
            una: p.una,
            next_psn: p.next_psn,
            timer: p.timer,
            probe_deadline: p.probe_deadline,
            probes_failed: p.probes_failed,
        }
    }

    fn span(&self) -> u32 {
        self.next_psn.wrapping_sub(self.una)
    }
}

/// The open path (or ring) in `slot`.
fn open<T, B: Deref<Target = T>>(slots: &[Option<B>], slot: usize) -> Option<&T> {
    slots.get(slot).and_then(|b| b.as_deref())
}

/// The open path (or ring) in `slot`, to change.
fn open_mut<T, B: DerefMut<Target = T>>(slots: &mut [Option<B>], slot: usize) -> Option<&mut T> {
    slots.get_mut(slot).and_then(|b| b.as_deref_mut())
}

/// The slots whose bits are set in a mask of [`MAX_PATHS`] bits, lowest
/// first.
#[derive(Clone, Copy)]
struct Slots(u64);

impl Iterator for Slots {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let slot = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(slot)
    }
}

const _: () = assert!(MAX_PATHS == u64::BITS as usize);

/// What [`Sender::emit`] sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Emit {
    /// A message's next packet.
    New,
    /// A packet declared lost (or the verdict probe's).
    Resend,
    /// A path's tail probe: a packet still in flight, sent again.
    TailProbe,
}

/// Congestion control hears of `lost` packets the SACK rule declared on
/// `p`; a cut it makes is an event.
fn cut_for_losses<C: CongestionControl, H: Heap>(
    cc: &mut C,
    ccp: &CcParams,
    events: &mut Events<H>,
    p: &mut TxPath,
    lost: u32,
    now: u64,
    srtt: u64,
) {
    let before = p.cc.cwnd;
    cc.on_loss(&mut p.cc, ccp, lost, now, srtt);
    if p.cc.cwnd < before {
        p.delay_undo = None;
        events.push(SenderEvent::WindowDecrease {
            path: p.tag(),
            old: before,
            new: p.cc.cwnd,
            cause: CutCause::Loss,
        });
    }
}

/// The window an ACK's `msg_window` gives (protocol.md 1.4): 0 (a
/// receiver that does not say) and anything below is the v1 window, and
/// no more than this side's tables hold.
fn peer_window(advertised: u16) -> u16 {
    advertised.clamp(MSG_WINDOW_V1 as u16, MSG_WINDOW_MAX as u16)
}

/// Whether the SACK of `ack` has `psn` (bit `psn - cum_psn - 1`).
fn sack_has(ack: &Ack, psn: u32) -> bool {
    let i = psn.wrapping_sub(ack.cum_psn).wrapping_sub(1) as usize;
    i < SACK_BITS && ack.sack.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 != 0)
}

/// `ack` acknowledges `psn`: below its `cum_psn`, or its SACK bit set.
fn ack_covers(ack: &Ack, psn: u32) -> bool {
    seq_diff(ack.cum_psn, psn) > 0 || sack_has(ack, psn)
}

/// Number of packets of a message of `len` bytes.
pub fn packets_for(opcode: Opcode, len: u32, mtu: u32) -> u32 {
    if opcode == Opcode::ReadReq || len == 0 || mtu == 0 {
        1
    } else {
        len.div_ceil(mtu)
    }
}

/// The sending side of one QP, generic over the congestion control and
/// the heap its paths and long messages take memory from.
///
/// What stays in place is the path slots and the QP-wide state (about
/// 1.4 KiB); the message window (5.5 KiB) comes from the heap with the
/// first message, a path's state when the path opens and its per-PSN
/// records when it first carries data ([`Sender::footprint`]).
pub struct Sender<C: CongestionControl = Aimd, H: Heap = Global> {
    cfg: SenderConfig,
    ccp: CcParams,
    cc: C,
    /// The open paths, by slot (`None`: unused).
    paths: [Option<H::Box<TxPath>>; MAX_PATHS],
    /// Each open path's per-PSN records, taken when it first sends data
    /// and kept (cleared when the slot's path is replaced) until `reset`.
    rings: [Option<H::Box<PathRing>>; MAX_PATHS],
    /// Bit `s` set iff `paths[s]` is open (slots are opened by
    /// `open_path` and only `reset` closes them): the loops over paths
    /// visit these, typically a few of the 64.
    used: u64,
    /// The messages from `head` to `tail`, at `msn % MSG_WINDOW_MAX`; a
    /// chunk's memory is taken by the first `post` into it (none is live
    /// before).
    msgs: MsgWindow<TxMsg<H>, H>,
    /// Messages the peer's receiver accepts outstanding, from its ACKs'
    /// `msg_window` (protocol.md 1.4), at most `MSG_WINDOW_MAX`;
    /// `MSG_WINDOW_V1` until one says more.
    peer_window: u16,
    head: u32,
    tail: u32,
    cursor: u32,
    lost_total: u32,
    rr: usize,
    /// Each plane's spray clock: every packet the spray sends on a plane
    /// advances it by [`PLANE_CLOCK_UNIT`] over the plane's carrying paths,
    /// and the spray takes the plane whose clock is least among those
    /// with an open window, so that planes carry equal shares per path
    /// whenever their windows allow (4.1).
    plane_clock: [u32; MAX_PLANES],
    qp_rtt: RttEstimator,
    /// What the delay signal measures from beside the base RTT, and the
    /// trial that tells a queue of the QP's own from a host's wait
    /// (protocol.md 6.3).
    delay_floor: DelayFloor,
    /// The QP's largest recent RTT sample, which no RTO undercuts (4.3).
    rtt_peak: RttPeak,
    rate_hint_kbps: u32,
    window_limited: bool,
    congested: bool,
    last_growth: u64,
    /// Judges each growth step by the delivery rate it gained (4.4).
    growth: Growth,
    /// The slots the last growth step opened (retired if it gained
    /// nothing).
    step_slots: u64,
    /// Slots whose paths take no new data and close once empty: a growth
    /// step that gained nothing, taken back.
    retiring: u64,
    /// (MSN, time): when the oldest unfinished message, delivered but
    /// without a verdict, gets a packet resent to draw one (4.3).
    verdict_deadline: Option<(u32, u64)>,
    /// Last acknowledgement progress while messages are outstanding (None
    /// while none is on the wire): the retry budget's clock.
    progress_at: Option<u64>,
    /// A message was posted since reset: the MSN start is fixed.
    numbered: bool,
    /// The MSNs start at the receiver's initial PSN: every data packet
    /// carries `FLAG_PEER_PSN` (protocol.md 2).
    peer_psn: bool,
    /// The payload size agreed with the peer in the PLANES exchange
    /// (protocol.md 1.8), 0 while none is; fixed for the connection once
    /// set, since the peer's receiver segments our `FLAG_WIDE` messages
    /// by it.
    wide_payload: u32,
    /// New messages are segmented at `wide_payload` (until a plane can no
    /// longer carry it).
    wide_on: bool,
    /// The heap refused a path's ring or a message's bitmaps: when to try
    /// again (a timer, so the caller comes back to send).
    alloc_retry: Option<u64>,
    /// Bit `k` set while the caller reports plane `k` down
    /// ([`Sender::plane_down`] until [`Sender::plane_up`]).
    planes_down: u8,
    stats: SenderStats,
    /// Path failures, recoveries, window cuts and give-ups not yet taken
    /// by the caller (`pop_event`); the queue is taken from the heap at the
    /// first event.
    events: Events<H>,
}

impl Sender<Aimd> {
    /// A sender with the default AIMD congestion control.
    pub fn new(cfg: SenderConfig, now: u64) -> Result<Self, ConfigError> {
        Self::with_cc(cfg, Aimd, now)
    }
}

impl<C: CongestionControl, H: Heap> Sender<C, H> {
    const NO_PATH: Option<H::Box<TxPath>> = None;
    const NO_RING: Option<H::Box<PathRing>> = None;

    /// What the message window costs once the first message takes it
    /// (kmalloc classes).
    pub const WINDOW_BYTES: usize = MsgWindow::<TxMsg<H>, H>::SIZE;

    /// What each further chunk of the message window costs, taken as
    /// more messages are in flight (kmalloc classes).
    pub const WINDOW_CHUNK_BYTES: usize = MsgWindow::<TxMsg<H>, H>::CHUNK_SIZE;

    /// A sender with a caller-chosen congestion control.
    pub fn with_cc(cfg: SenderConfig, cc: C, now: u64) -> Result<Self, ConfigError> {
        let mut s = Self::empty(cc);
        s.reset(cfg, now)?;
        Ok(s)
    }

    /// An idle sender with no paths, usable only after [`Sender::reset`].
    /// A `const fn`, so a kernel can copy it into memory of its own (about
    /// 1.4 KiB) without building it on the stack, then `reset` it in place.
    pub const fn empty(cc: C) -> Self {
        Self {
            cfg: SenderConfig::DEFAULT,
            ccp: CcParams {
                pwnd_init: 0,
                pwnd_min: 0,
                pwnd_max: 0,
                loss_md_threshold: 0,
            },
            cc,
            paths: [Self::NO_PATH; MAX_PATHS],
            rings: [Self::NO_RING; MAX_PATHS],
            used: 0,
            msgs: MsgWindow::NONE,
            peer_window: MSG_WINDOW_V1 as u16,
            head: 0,
            tail: 0,
            cursor: 0,
            lost_total: 0,
            rr: 0,
            plane_clock: [0; MAX_PLANES],
            qp_rtt: RttEstimator::NONE,
            delay_floor: DelayFloor::NONE,
            rtt_peak: RttPeak::NONE,
            rate_hint_kbps: 0,
            window_limited: false,
            congested: false,
            last_growth: 0,
            growth: Growth::NEW,
            step_slots: 0,
            retiring: 0,
            verdict_deadline: None,
            progress_at: None,
            numbered: false,
            peer_psn: false,
            wide_payload: 0,
            wide_on: false,
            alloc_retry: None,
            planes_down: 0,
            stats: SenderStats::ZERO,
            events: Events::EMPTY,
        }
    }

    /// Numbers this connection's first message `msn` (protocol.md 2: each
    /// connection starts its MSNs where the two ends agreed, so that packets
    /// of an earlier connection of the same QPN fall outside the window).
    /// `peer_psn`: `msn` is the receiver's own initial PSN, not ours (we
    /// answer before we have one); the packets say so (`FLAG_PEER_PSN`).
    /// Renumbering is allowed until the first message is posted; returns
    /// whether this call took effect.
    pub fn start_at(&mut self, msn: u32, peer_psn: bool) -> bool {
        if self.numbered {
            return false;
        }
        self.head = msn;
        self.tail = msn;
        self.cursor = msn;
        self.peer_psn = peer_psn;
        true
    }

    /// (Re)initialise in place: forget all messages and paths, open the
    /// initial paths. Uses only small temporaries.
    pub fn reset(&mut self, cfg: SenderConfig, now: u64) -> Result<(), ConfigError> {
        cfg.validate()?;
        self.cfg = cfg;
        self.ccp = CcParams {
            pwnd_init: cfg.pwnd_init,
            pwnd_min: cfg.pwnd_min,
            pwnd_max: cfg.pwnd_max,
            loss_md_threshold: cfg.loss_md_threshold,
        };
        for p in self.paths.iter_mut() {
            *p = None;
        }
        for r in self.rings.iter_mut() {
            *r = None;
        }
        self.used = 0;
        for m in self.msgs.iter_mut() {
            *m = TxMsg::EMPTY;
        }
        self.peer_window = MSG_WINDOW_V1 as u16;
        self.head = 0;
        self.tail = 0;
        self.cursor = 0;
        self.lost_total = 0;
        self.rr = 0;
        self.plane_clock = [0; MAX_PLANES];
        self.qp_rtt = RttEstimator::NONE;
        self.delay_floor = DelayFloor::NONE;
        self.rtt_peak = RttPeak::NONE;
        self.rate_hint_kbps = 0;
        self.window_limited = false;
        self.congested = false;
        self.last_growth = now;
        self.growth.restart(now);
        self.step_slots = 0;
        self.retiring = 0;
        self.numbered = false;
        self.peer_psn = false;
        self.wide_payload = 0;
        self.wide_on = false;
        self.verdict_deadline = None;
        self.progress_at = None;
        self.alloc_retry = None;
        self.planes_down = 0;
        self.stats = SenderStats::ZERO;
        self.events.clear();
        for slot in 0..usize::from(cfg.initial_paths) {
            self.open_path(slot, 0, PathState::Active, now);
        }
        // A path the heap had no memory for stays closed; with none open
        // nothing could be sent.
        if self.used == 0 {
            return Err(ConfigError::NoMemory);
        }
        Ok(())
    }

    /// Change the retry budget (`SenderConfig::give_up_ns`) in place; the
    /// verbs layer learns it after the QP started (RTR, then RTS).
    pub fn set_give_up_ns(&mut self, ns: u64) {
        self.cfg.give_up_ns = ns;
    }

    /// Segment the messages posted from now on at `payload` bytes, the
    /// size both ends agreed in their PLANES exchange (protocol.md 1.8),
    /// marking their packets `FLAG_WIDE`; `None`: at the path MTU again
    /// (a plane can no longer carry the agreed size). A size at or below
    /// the path MTU gains nothing and is not used. The agreed size is
    /// fixed for the connection: a different one is refused (`false`),
    /// since the peer places our earlier wide messages by the first.
    pub fn set_payload(&mut self, payload: Option<u32>) -> bool {
        let Some(size) = payload else {
            self.wide_on = false;
            return true;
        };
        if size <= self.cfg.mtu || size as usize > super::wire::MAX_PAYLOAD {
            self.wide_on = false;
            return size <= self.cfg.mtu;
        }
        if self.wide_payload != 0 && self.wide_payload != size {
            return false;
        }
        self.wide_payload = size;
        self.wide_on = true;
        true
    }

    /// Payload bytes per packet of the messages posted now: the agreed
    /// size while it is in use, else the path MTU.
    pub fn payload(&self) -> u32 {
        if self.wide_on {
            self.wide_payload
        } else {
            self.cfg.mtu
        }
    }

    /// Configuration in use.
    pub fn config(&self) -> &SenderConfig {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> &SenderStats {
        &self.stats
    }

    /// Bytes this sender holds, as a kernel's `kmalloc` would count them
    /// ([`kmalloc_size`]): the sender itself, its open paths, their rings,
    /// the bitmaps of its long messages in progress and its event queue
    /// (from its first event until the events are cleared).
    pub fn footprint(&self) -> usize {
        use core::mem::size_of;
        let paths = self.paths.iter().flatten().count();
        let rings = self.rings.iter().flatten().count();
        let bitmaps = self
            .msgs
            .iter()
            .map(|m| usize::from(m.acked.is_long()) + usize::from(m.lost.is_long()))
            .sum::<usize>();
        kmalloc_size(size_of::<Self>())
            + self.msgs.footprint()
            + paths * kmalloc_size(size_of::<TxPath>())
            + rings * kmalloc_size(size_of::<PathRing>())
            + bitmaps * kmalloc_size(size_of::<PktBitmap>())
            + self.events.footprint()
    }

    /// The oldest path event not yet taken (see [`super::events`]).
    pub fn pop_event(&mut self) -> Option<SenderEvent> {
        self.events.pop()
    }

    /// Events lost because the caller did not take them in time.
    pub fn events_dropped(&self) -> u64 {
        self.events.dropped()
    }

    /// Forgets the events not yet taken (a caller that reports none of
    /// those of a step, e.g. the plane setup of a new connection).
    pub fn clear_events(&mut self) {
        self.events.clear();
    }

    /// Paths in use (any state but unused).
    pub fn path_count(&self) -> usize {
        self.used.count_ones() as usize
    }

    /// The paths in use (not `Unused`), by slot.
    pub fn used_paths(&self) -> impl Iterator<Item = &TxPath> + '_ {
        Slots(self.used).filter_map(|s| open(&self.paths, s))
    }

    /// Paths currently carrying data.
    pub fn active_paths(&self) -> usize {
        self.carrying().count()
    }

    /// The active paths that take new data: not retiring (4.4).
    fn carrying(&self) -> impl Iterator<Item = &TxPath> + '_ {
        Slots(self.used & !self.retiring)
            .filter_map(|s| open(&self.paths, s))
            .filter(|p| p.state == PathState::Active)
    }

    /// How much longer the RTT of `plane` is than the fastest plane's: the
    /// mean SRTT of its active paths above the least such mean of any
    /// plane (0 for the fastest, and with one plane). Taken at the same
    /// moment, a queue the planes share lifts every plane's mean alike, so
    /// what remains is the plane's own longer round trip, which the delay
    /// signal must not read as queueing (protocol.md 6.3): planes that
    /// share one bottleneck but differ in RTT would see the slower plane's
    /// paths cut while the faster ones grow into the queue (a plane 300 us
    /// slower on a 200 us round trip carried 13% of the packets,
    /// `tests/plane_share.rs`).
    fn plane_excess(&self, plane: u8) -> u64 {
        let mut sum = [0u64; MAX_PLANES];
        let mut n = [0u64; MAX_PLANES];
        for q in self.carrying().filter(|q| q.rtt.sampled) {
            if let (Some(s), Some(c)) = (
                sum.get_mut(usize::from(q.plane)),
                n.get_mut(usize::from(q.plane)),
            ) {
                *s = s.saturating_add(q.rtt.srtt);
                *c += 1;
            }
        }
        let mean = |k: usize| match (sum.get(k), n.get(k)) {
            (Some(&s), Some(&c)) if c > 0 => Some(s / c),
            _ => None,
        };
        let fastest = (0..MAX_PLANES).filter_map(mean).min();
        match (mean(usize::from(plane)), fastest) {
            (Some(m), Some(f)) => m.saturating_sub(f),
            _ => 0,
        }
    }

    /// True if at least one path of `plane` carries data.
    pub fn plane_usable(&self, plane: u8) -> bool {
        self.carrying().any(|p| p.plane == plane)
    }

    /// Read-only view of a path slot (an unused one reads as
    /// [`TxPath::UNUSED`]); `None` beyond [`MAX_PATHS`].
    pub fn path(&self, slot: usize) -> Option<&TxPath> {
        let p = self.paths.get(slot)?;
        Some(p.as_deref().unwrap_or(&TxPath::UNUSED))
    }

    /// Sum of per-path windows of active paths (QWND), in packets.
    pub fn qwnd(&self) -> u32 {
        self.carrying().map(|p| p.cc.window()).sum()
    }

    /// Packets in flight over all paths.
    pub fn inflight(&self) -> u32 {
        self.used_paths().map(|p| p.inflight).sum()
    }

    /// Messages that may be outstanding: what the peer's receiver accepts
    /// (its ACKs' `msg_window`, [`MSG_WINDOW_V1`] until one came), at most
    /// [`MSG_WINDOW_MAX`].
    pub fn msg_window(&self) -> usize {
        usize::from(self.peer_window)
    }

    /// The MSN the next [`Sender::post`] numbers: a caller that keeps its
    /// own record per message takes that record's memory first.
    pub fn next_msn(&self) -> u32 {
        self.tail
    }

    /// Messages posted but not yet returned by `pop_completion`.
    pub fn outstanding(&self) -> u32 {
        self.tail.wrapping_sub(self.head)
    }

    /// The QP's base RTT (ns, 0 before its first sample): the least RTT
    /// its queueing delay is measured from (protocol.md 6.3).
    pub fn base_rtt(&self) -> u64 {
        // Unsampled, both of `base`'s minima are still 0.
        self.qp_rtt.base()
    }

    /// The floor below which the QP's RTT is not queueing (ns, 0 while no
    /// delay trial has found one, protocol.md 6.3).
    pub fn delay_floor(&self) -> u64 {
        self.delay_floor.floor()
    }

    /// Receiver rate hint currently honoured (kbit/s, 0 = none).
    pub fn rate_hint_kbps(&self) -> u32 {
        self.rate_hint_kbps
    }

    /// Opens generation `generation` of `slot`, in the slot's memory if it
    /// had a path (a replacement), else in new memory from the heap. False
    /// if the heap refused: the slot stays unused.
    fn open_path(&mut self, slot: usize, generation: u16, state: PathState, now: u64) -> bool {
        let plane = self
            .plane_for(slot)
            .unwrap_or_else(|| self.home_plane(slot));
        self.open_path_on(slot, generation, plane, state, now)
    }

    /// Opens the next generation of the path in `slot` on plane `to`, in
    /// `state`, and reports the replacement (a failed path replaced, or a
    /// path moved to another plane).
    fn replace_path(&mut self, slot: usize, to: u8, state: PathState, now: u64) {
        let Some((gen, old)) = open(&self.paths, slot).map(|p| (p.next_generation(), p.tag()))
        else {
            return;
        };
        self.open_path_on(slot, gen, to, state, now);
        if let Some(new) = open(&self.paths, slot).map(TxPath::tag) {
            self.events.push(SenderEvent::PathReplaced { old, new });
        }
    }

    /// [`Sender::open_path`] on plane `plane`.
    fn open_path_on(
        &mut self,
        slot: usize,
        generation: u16,
        plane: u8,
        state: PathState,
        now: u64,
    ) -> bool {
        let seed = self.cfg.entropy_seed;
        let qp_rtt = self.qp_rtt;
        let ccp = self.ccp;
        let Some(entry) = self.paths.get_mut(slot) else {
            return false;
        };
        if entry.is_none() {
            *entry = H::copy_of(&TxPath::UNUSED);
        }
        let Some(p) = entry.as_deref_mut() else {
            return false;
        };
        self.used |= 1 << slot;
        p.reset(slot, generation, plane, seed);
        p.state = state;
        p.rtt = qp_rtt;
        p.probe_due = state == PathState::Probing;
        self.cc.init_path(&mut p.cc, &ccp, now);
        if let Some(ring) = open_mut(&mut self.rings, slot) {
            ring.fill(InflightEntry::EMPTY);
        }
        true
    }

    /// The ring entry for `psn` of the path in `slot` (free if the path
    /// never sent).
    fn entry(&self, slot: usize, psn: u32) -> InflightEntry {
        open(&self.rings, slot)
            .and_then(|r| r.get(psn as usize % PATH_RING))
            .copied()
            .unwrap_or(InflightEntry::EMPTY)
    }

    /// The ring entry for `psn` of the path in `slot`, to change.
    fn entry_mut(&mut self, slot: usize, psn: u32) -> Option<&mut InflightEntry> {
        open_mut(&mut self.rings, slot)?.get_mut(psn as usize % PATH_RING)
    }

    /// Whether the path in `slot` has its ring, taking it from the heap
    /// the first time the path carries data. A refusal is tried again
    /// after [`ALLOC_RETRY_NS`] (see [`Sender::next_deadline`]).
    fn has_ring(&mut self, slot: usize, now: u64) -> bool {
        let Some(r) = self.rings.get_mut(slot) else {
            return false;
        };
        if r.is_none() {
            *r = H::copy_of(&EMPTY_RING);
        }
        if r.is_none() {
            self.alloc_retry = Some(now.saturating_add(ALLOC_RETRY_NS));
        }
        r.is_some()
    }

    /// The least RTO of the QP's paths as of `now`: the configured floor,
    /// or the recent peak RTT with its margin if higher, within `max_rto`.
    fn rto_floor(&self, now: u64) -> u64 {
        self.cfg
            .min_rto_ns
            .max(self.rtt_peak.rto_floor(now))
            .min(self.cfg.max_rto_ns)
    }

    fn rto_of(&self, p: &TxPath, now: u64) -> u64 {
        let base = p.rtt.rto(
            self.cfg.initial_rto_ns,
            self.rto_floor(now),
            self.cfg.max_rto_ns,
        );
        base.checked_shl(p.backoff)
            .unwrap_or(u64::MAX)
            .min(self.cfg.max_rto_ns)
    }

    fn msg_index(&self, msn: u32) -> Option<usize> {
        if !seq_in_window(msn, self.head, self.tail.wrapping_sub(self.head)) {
            return None;
        }
        let i = msn as usize % MSG_WINDOW_MAX;
        match self.msgs.get(i) {
            Some(m) if m.live && m.msn == msn => Some(i),
            _ => None,
        }
    }

    /// Queue a message; returns its MSN. Completions come back in MSN order.
    /// The first message takes the window's memory from the heap
    /// ([`PostError::NoMemory`] if it refuses).
    pub fn post(&mut self, msg: &Message) -> Result<u32, PostError> {
        if !msg.opcode.is_reliable_data() {
            return Err(PostError::BadOpcode);
        }
        if msg.rsn != 0 && !msg.opcode.has_rsn() {
            return Err(PostError::BadRsn);
        }
        if msg.opcode.atomic_len().is_some_and(|l| l != msg.len) {
            return Err(PostError::BadLength);
        }
        // At most MAX_MSG_PKTS at the path MTU (the limit callers split
        // by), so fewer at the agreed size.
        if packets_for(msg.opcode, msg.len, self.cfg.mtu) as usize > MAX_MSG_PKTS {
            return Err(PostError::TooLong);
        }
        // One packet messages gain nothing from the flag.
        let wide = self.wide_on && packets_for(msg.opcode, msg.len, self.cfg.mtu) > 1;
        let seg = if wide {
            self.wide_payload
        } else {
            self.cfg.mtu
        };
        let npkts = packets_for(msg.opcode, msg.len, seg);
        if npkts as usize > MAX_MSG_PKTS {
            return Err(PostError::TooLong);
        }
        if self.tail.wrapping_sub(self.head) as usize >= self.msg_window() {
            return Err(PostError::QueueFull);
        }
        if !self.msgs.take(self.tail as usize % MSG_WINDOW_MAX) {
            return Err(PostError::NoMemory);
        }
        let msn = self.tail;
        let m = self
            .msgs
            .get_mut(msn as usize % MSG_WINDOW_MAX)
            .ok_or(PostError::QueueFull)?;
        *m = TxMsg {
            msn,
            live: true,
            opcode: msg.opcode,
            len: msg.len,
            npkts,
            remote_va: msg.remote_va,
            rkey: msg.rkey,
            imm: msg.imm,
            rsn: msg.rsn,
            wide,
            ..TxMsg::EMPTY
        };
        self.tail = self.tail.wrapping_add(1);
        self.numbered = true;
        Ok(msn)
    }

    /// Return the oldest message if it is finished (acknowledged or failed).
    pub fn pop_completion(&mut self) -> Option<TxCompletion> {
        if self.head == self.tail {
            return None;
        }
        let m = self.msgs.get_mut(self.head as usize % MSG_WINDOW_MAX)?;
        if !m.live || !m.done() {
            return None;
        }
        m.live = false;
        // A long message's bitmaps go back to the heap.
        if m.acked.is_long() || m.lost.is_long() {
            m.acked = MsgBits::SHORT;
            m.lost = MsgBits::SHORT;
        }
        let c = TxCompletion {
            msn: m.msn,
            opcode: m.opcode,
            len: m.len,
            status: match m.failed {
                Some(s) => CompletionStatus::Failed(s),
                None if !m.confirmed => CompletionStatus::RetryExceeded,
                None => CompletionStatus::Success,
            },
        };
        self.head = self.head.wrapping_add(1);
        if seq_diff(self.cursor, self.head) < 0 {
            self.cursor = self.head;
        }
        if self.head == self.tail {
            self.progress_at = None;
        }
        Some(c)
    }

    /// Record that packet `pkt` of `msn` reached the receiver.
    fn mark_acked(&mut self, msn: u32, pkt: u32) {
        let Some(i) = self.msg_index(msn) else { return };
        let Some(m) = self.msgs.get_mut(i) else {
            return;
        };
        if m.acked.set(pkt) {
            m.acked_count += 1;
            if m.lost.clear(pkt) {
                m.lost_count = m.lost_count.saturating_sub(1);
                self.lost_total = self.lost_total.saturating_sub(1);
            }
        }
    }

    /// Queue packet `pkt` of `msn` for retransmission.
    fn mark_lost(&mut self, msn: u32, pkt: u32, slot: usize, cause: LossCause) {
        let Some(i) = self.msg_index(msn) else { return };
        let Some(m) = self.msgs.get_mut(i) else {
            return;
        };
        if m.failed.is_none() && !m.acked.get(pkt) && m.lost.set(pkt) {
            m.lost_count += 1;
            m.last_loss_slot = slot;
            m.last_loss_cause = cause;
            self.lost_total += 1;
            if cause == LossCause::Timeout {
                self.stats.timeout_losses += 1;
            }
        }
    }

    /// Move the floor of a path past resolved PSNs.
    fn advance_floor(&mut self, slot: usize) {
        let Some(p) = open_mut(&mut self.paths, slot) else {
            return;
        };
        let mut ring = open_mut(&mut self.rings, slot);
        while p.una != p.next_psn {
            if let Some(e) = ring
                .as_deref_mut()
                .and_then(|r| r.get_mut(p.una as usize % PATH_RING))
            {
                if e.state == EntryState::InFlight {
                    break;
                }
                *e = InflightEntry::EMPTY;
            }
            p.una = p.una.wrapping_add(1);
        }
    }

    /// Declare everything in flight on a path lost and empty it. The ring
    /// entries stay (in flight ones as `Drained`) behind the floor, for
    /// late ACKs to be matched (`on_late_ack`) until new PSNs reuse them.
    fn drain_path(&mut self, slot: usize, cause: LossCause) {
        let Some(p) = open(&self.paths, slot).map(PathView::of) else {
            return;
        };
        let mut psn = p.una;
        while psn != p.next_psn {
            let Some(e) = self.entry_mut(slot, psn) else {
                return;
            };
            let was = *e;
            if was.state == EntryState::InFlight {
                e.state = EntryState::Drained;
                self.mark_lost(was.msn, u32::from(was.pkt), slot, cause);
            }
            psn = psn.wrapping_add(1);
        }
        if let Some(p) = open_mut(&mut self.paths, slot) {
            p.emptied();
        }
    }

    /// An ACK of `slot` that answers a packet sent before the path's last
    /// retransmission timeout (`ts_echo` before it) and acknowledges PSNs
    /// the timeout drained: they were delivered after all. Marks them
    /// acknowledged (their retransmissions need not go out) and, the first
    /// time, undoes the timeout: the window cut, the backoff, and the
    /// probing (protocol.md 4.3).
    fn on_late_ack(&mut self, slot: usize, ack: &Ack, now: u64) {
        let Some(u) = open(&self.paths, slot).and_then(|p| p.undo) else {
            return;
        };
        if ack.ts_echo >= u.at {
            return;
        }
        // `cum_psn` proves receipt of the drained PSNs below it unless a
        // packet sent since, whose floor is `hi` or later, reached the
        // receiver: then `cum_psn` is at `hi` or beyond.
        let cum_proves = !u.sent_since || seq_diff(ack.cum_psn, u.hi) < 0;
        let mut proved = 0u32;
        let mut psn = u.lo;
        while psn != u.hi {
            let below_cum = cum_proves && seq_diff(psn, ack.cum_psn) < 0;
            if below_cum || sack_has(ack, psn) {
                if let Some(e) = self.entry_mut(slot, psn) {
                    let was = *e;
                    if was.state == EntryState::Drained {
                        e.state = EntryState::Acked;
                        self.mark_acked(was.msn, u32::from(was.pkt));
                        proved += 1;
                    }
                }
            }
            psn = psn.wrapping_add(1);
        }
        if proved == 0 {
            return;
        }
        self.stats.late_acks += u64::from(proved);
        if self.progress_at.is_some() {
            self.progress_at = Some(now);
        }
        let Some(p) = open_mut(&mut self.paths, slot) else {
            return;
        };
        if !u.undone {
            self.stats.spurious_timeouts += 1;
            p.cc = u.cc;
            p.backoff = u.backoff;
            p.timeouts = u.timeouts;
            if p.state == PathState::Probing {
                p.state = PathState::Active;
                p.probe_due = false;
                p.probe_deadline = None;
                p.probes_failed = 0;
                self.events.push(SenderEvent::PathRecovered {
                    path: p.tag(),
                    cause: RecoverCause::SpuriousTimeout,
                });
            }
            p.undo = Some(RtoUndo { undone: true, ..u });
        }
    }

    /// Feeds the RTT sample `now - echo` (an ACK's `ts_echo`, a probe
    /// reply's timestamp) to the path in `slot`, the QP's estimate and its
    /// peak, if the echo is a time past: the sample.
    fn sample_rtt(&mut self, slot: usize, echo: u64, now: u64) -> Option<u64> {
        if echo > now {
            return None;
        }
        let r = now - echo;
        if let Some(p) = open_mut(&mut self.paths, slot) {
            p.rtt.sample(r);
        }
        self.qp_rtt.sample(r);
        self.rtt_peak.sample(r, now);
        Some(r)
    }

    /// Process an ACK.
    pub fn on_ack(&mut self, ack: &Ack, now: u64) {
        let slot = (ack.path_id & super::config::PATH_SLOT_MASK) as usize;
        let p = open(&self.paths, slot).map_or(PathView::UNUSED, PathView::of);
        if p.state == PathState::Unused || p.id != ack.path_id {
            self.stats.stale_acks += 1;
            return;
        }
        let mut newly = 0u32;
        // Only an ACK of a live path that acknowledges nothing beyond what
        // that path carried moves `cum_msn` or the rate hint (protocol.md
        // 4.2): a forged ACK must name the path's generation and stay
        // within its PSNs, as a forged TCP segment must hit the window
        // (RFC 5961).
        let cum_ahead = seq_diff(ack.cum_psn, p.una);
        if cum_ahead > 0 && cum_ahead as u32 > p.span() {
            self.stats.stale_acks += 1;
            return;
        }
        if ack.rate_hint_kbps == 0 && self.rate_hint_kbps != 0 {
            self.on_hint_lifted();
        }
        self.rate_hint_kbps = ack.rate_hint_kbps;
        self.peer_window = peer_window(ack.msg_window);
        self.on_cum_msn(ack.cum_msn);
        if let Some(p) = open_mut(&mut self.paths, slot) {
            p.last_ack = Some(now);
        }
        self.on_late_ack(slot, ack, now);
        let (watch, sent) =
            open(&self.paths, slot).map_or((None, 0), |p| (p.reorder_watch, p.sent));
        // A packet sent before the one that proved the last SACK loss
        // arrived after it; or one of the PSNs it made lost arrived. That
        // SACK bit is the proof that needs no timestamp: on a path that
        // reorders, the receiver answers a fill other than the lowest
        // hole's with the next ACK (3.4), which echoes a newer packet, and
        // where the lowest hole is a real loss the fill above it is not
        // the lowest. Not `cum_psn`: the receiver's floor step (3.1) moves
        // it past PSNs declared lost.
        let echoed_earlier = |w: &ReorderWatch| ack_covers(ack, w.psn) && ack.ts_echo < w.ts;
        let lost_arrived = |w: &ReorderWatch| w.lost_psns(sent).any(|psn| sack_has(ack, psn));
        if watch.is_some_and(|w| echoed_earlier(&w) || lost_arrived(&w)) {
            self.sack_loss_was_reordering(slot, now);
        }
        // Cumulative part. An ACK of packets that carried an older floor
        // (before losses moved `una`) has nothing new there, but its SACK
        // bits from `una` on are still news: dropping them left packets
        // the receiver holds "in flight" until a (spurious) timeout.
        if cum_ahead > 0 {
            let mut psn = p.una;
            while psn != ack.cum_psn {
                newly += self.ack_psn(slot, psn);
                psn = psn.wrapping_add(1);
            }
        }
        // Selective part.
        let mut highest: Option<u32> = None;
        for (w, word) in ack.sack.iter().enumerate() {
            let mut bits = *word;
            while bits != 0 {
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                let off = (w as u32) * 64 + b + 1;
                let psn = ack.cum_psn.wrapping_add(off);
                if seq_in_window(psn, p.una, p.span()) {
                    newly += self.ack_psn(slot, psn);
                    highest = Some(psn);
                }
            }
        }
        // Loss detection: a PSN with at least the path's loss threshold of
        // acknowledged PSNs above it on the same (order-preserving) path is
        // lost; `reorder_threshold` unless the path showed it reorders.
        let mut lost = match highest {
            Some(hi) => self.sack_rule(slot, hi, ack.ts_echo, now),
            None => 0,
        };
        let probe = open(&self.paths, slot).and_then(|p| p.tail_probe_psn);
        if let Some(probe) = probe.filter(|&psn| ack_covers(ack, psn)) {
            lost += self.tail_probe_answered(slot, probe);
        }
        self.advance_floor(slot);
        if let Some(p) = open_mut(&mut self.paths, slot) {
            // The floor passed the waiting holes: each arrived or was lost.
            // (Holes a later ACK found above them wait again from the next
            // ACK that shows them.)
            if p.reorder_wait.is_some_and(|w| !seq_lt(p.una, w.psn)) {
                p.reorder_wait = None;
            }
        }
        let rtt_sample = self.sample_rtt(slot, ack.ts_echo, now);
        // What the delay verdict below leaves out of this path's SRTT (one
        // pass over the paths, so only when there is a verdict to make).
        let plane_excess = match open(&self.paths, slot) {
            Some(q) if rtt_sample.is_some() && self.cfg.delay_target_ns != 0 => {
                self.plane_excess(q.plane)
            }
            _ => 0,
        };
        let rto_floor = self.rto_floor(now);
        // A path keeps its window for a trial only if this ACK's delay
        // belongs to one: a window kept with no trial to end would be
        // given back by a later one, long stale.
        let keeps_undo = self.cfg.delay_excuse_ns != 0
            && self
                .delay_floor
                .trial_for_delay(self.qp_rtt.base().saturating_add(self.cfg.delay_excuse_ns));
        let (peak, ack_delay) = (self.rtt_peak.get(now), self.cfg.peer_ack_delay_ns);
        let rto_now;
        let delayed_seen;
        {
            let Some(p) = open_mut(&mut self.paths, slot) else {
                return;
            };
            if newly > 0 {
                p.acks += 1;
                p.timeouts = 0;
                p.backoff = 0;
                p.tail_probe_due = false;
                if p.state == PathState::Probing {
                    p.state = PathState::Active;
                    p.probe_due = false;
                    p.probe_deadline = None;
                    p.probes_failed = 0;
                    self.events.push(SenderEvent::PathRecovered {
                        path: p.tag(),
                        cause: RecoverCause::Ack,
                    });
                }
            }
            rto_now = p
                .rtt
                .rto(self.cfg.initial_rto_ns, rto_floor, self.cfg.max_rto_ns);
            let srtt = if p.rtt.sampled { p.rtt.srtt } else { rto_now };
            // Queueing is measured from the QP's base RTT, the least any of
            // its paths saw, not from the path's own: a path whose first
            // sample came under load (a plane that joined after the others
            // had filled the queue: its first RTT is its probe's) would
            // latch that as its base, never see the queue, and grow while
            // the others are cut for it (protocol.md 6.3).
            let base = if self.qp_rtt.sampled {
                p.rtt.base().min(self.qp_rtt.base())
            } else {
                p.rtt.base()
            };
            // Twice the base RTT at least: jitter of the hosts themselves
            // (scheduling, a VM's vCPU) must not read as a queue. SRTT
            // against the least SRTT, both averages: a scheduled host's
            // samples scatter from its least (a lucky one) to several
            // times the average, and against the least sample every RTT
            // read as a queue. An epoch cuts only if most of its ACKs
            // found SRTT above target (cc.rs): a moment's pause of either
            // host lifts the average for a few ACKs only.
            let target = self.cfg.delay_target_ns.max(base.saturating_mul(2));
            // A floor that a trial found (a wait the QP's cuts did not
            // lower) is not queueing either.
            let from = self.delay_floor.base(base);
            let delay = match rtt_sample {
                Some(_) if self.cfg.delay_target_ns != 0 => {
                    if p.rtt.srtt.saturating_sub(plane_excess).saturating_sub(from) > target {
                        QueueDelay::AboveTarget
                    } else {
                        QueueDelay::WithinTarget
                    }
                }
                _ => QueueDelay::Unmeasured,
            };
            let delayed = delay == QueueDelay::AboveTarget;
            if delayed && keeps_undo && p.delay_undo.is_none() {
                p.delay_undo = Some(DelayUndo {
                    cwnd: p.cc.cwnd,
                    ssthresh: p.cc.ssthresh,
                });
            }
            let sig = AckSignal {
                now,
                newly_acked: newly,
                ce: ack.ce,
                srtt,
                delay,
            };
            delayed_seen = delayed;
            // A cut on an ACK answers the epoch's signals: CE marks if
            // there were any (they take precedence), else delay.
            let ce_seen = ack.ce || p.cc.ce_in_epoch > 0;
            let before = p.cc.cwnd;
            self.cc.on_ack(&mut p.cc, &self.ccp, &sig);
            if p.cc.cwnd < before {
                if ce_seen {
                    p.delay_undo = None;
                }
                self.events.push(SenderEvent::WindowDecrease {
                    path: p.tag(),
                    old: before,
                    new: p.cc.cwnd,
                    cause: if ce_seen {
                        CutCause::Ecn
                    } else {
                        CutCause::Delay
                    },
                });
            }
            if lost > 0 {
                cut_for_losses(
                    &mut self.cc,
                    &self.ccp,
                    &mut self.events,
                    p,
                    lost,
                    now,
                    srtt,
                );
            }
            if p.inflight == 0 {
                p.timer = None;
                p.tail_probe = None;
            } else if newly > 0 || p.timer.is_none() {
                p.timer = Some(now.saturating_add(rto_now));
                let pto = p.tail_probe_timeout(ack_delay, peak);
                p.arm_tail_probe(now, pto, rto_now);
            }
        }
        if let Some(rtt) = rtt_sample.filter(|_| self.cfg.delay_target_ns != 0) {
            self.delay_trial(rtt, delayed_seen, now);
        }
        self.stats.sack_losses += u64::from(lost);
        if newly > 0 && self.progress_at.is_some() {
            self.progress_at = Some(now);
        }
        if ack.ce || lost > 0 || delayed_seen {
            self.congested = true;
        }
        self.growth.on_acked(newly);
        self.close_retired();
        self.maybe_grow(now);
        self.watch_verdict(now);
    }

    /// Feeds the QP's delay trial an ACK's RTT sample (and whether the ACK
    /// was delayed); an unanswered trial restores the windows its delayed
    /// ACKs cut, any other end keeps them (protocol.md 6.3).
    fn delay_trial(&mut self, rtt: u64, delayed: bool, now: u64) {
        let base = self.qp_rtt.base();
        let cap = base.saturating_add(self.cfg.delay_excuse_ns);
        let opens = delayed && self.cfg.delay_excuse_ns != 0;
        let watched = self.delay_floor.in_trial() || self.delay_floor.floor() != 0;
        if !opens && !watched {
            return;
        }
        // One pass over the paths, and only while a trial needs it.
        let flight = if opens || self.delay_floor.in_trial() {
            self.inflight()
        } else {
            0
        };
        if opens {
            let from = self.delay_floor.base(base);
            self.delay_floor
                .on_delayed(now, self.qp_rtt.srtt, from, flight, cap);
        }
        let Some(end) = self
            .delay_floor
            .on_sample(now, rtt, self.qp_rtt.srtt, flight, cap)
        else {
            return;
        };
        for slot in Slots(self.used) {
            let Some(p) = open_mut(&mut self.paths, slot) else {
                continue;
            };
            // Taken on every end: a drained or expired trial's cuts stand.
            if let (TrialEnd::Unanswered, Some(u)) = (end, p.delay_undo.take()) {
                p.cc.cwnd = p.cc.cwnd.max(u.cwnd);
                p.cc.ssthresh = p.cc.ssthresh.max(u.ssthresh);
            }
        }
        if end == TrialEnd::Unanswered {
            self.stats.delay_floor_raised += 1;
        }
    }

    /// The oldest unfinished message has every packet delivered but the
    /// receiver has neither passed it with `cum_msn` nor NAKed it: its NAK
    /// (or every ACK since the receiver completed it) may be lost, and
    /// nothing else of it would ever be sent. After one QP RTO, resend its
    /// last packet: the receiver answers with an ACK carrying `cum_msn` or
    /// repeats the NAK.
    fn watch_verdict(&mut self, now: u64) {
        let mut msn = self.head;
        let mut waiting = None;
        while msn != self.tail {
            match self.msgs.get(msn as usize % MSG_WINDOW_MAX) {
                Some(m) if m.live && m.msn == msn && m.done() => msn = msn.wrapping_add(1),
                Some(m) if m.live && m.msn == msn && m.awaiting_verdict() => {
                    waiting = Some(msn);
                    break;
                }
                _ => break,
            }
        }
        let Some(msn) = waiting else {
            self.verdict_deadline = None;
            return;
        };
        let rto = self.qp_rtt.rto(
            self.cfg.initial_rto_ns,
            self.rto_floor(now),
            self.cfg.max_rto_ns,
        );
        match self.verdict_deadline {
            Some((m, t)) if m == msn && now >= t => {
                if let Some(m) = self.msgs.get_mut(msn as usize % MSG_WINDOW_MAX) {
                    let pkt = m.npkts.saturating_sub(1);
                    // Queued like a lost packet although it is acknowledged;
                    // its ACK changes nothing but brings `cum_msn`.
                    if m.lost.set(pkt) {
                        m.lost_count += 1;
                        m.last_loss_slot = usize::MAX;
                        m.last_loss_cause = LossCause::Verdict;
                        self.lost_total += 1;
                        self.stats.verdict_probes += 1;
                    }
                }
                self.verdict_deadline = Some((msn, now.saturating_add(rto)));
            }
            Some((m, _)) if m == msn => {}
            _ => self.verdict_deadline = Some((msn, now.saturating_add(rto))),
        }
    }

    /// Acknowledge one PSN of a path; returns 1 if it was in flight.
    fn ack_psn(&mut self, slot: usize, psn: u32) -> u32 {
        if open(&self.paths, slot).is_none() {
            return 0;
        }
        let Some(e) = self.entry_mut(slot, psn) else {
            return 0;
        };
        let prev = *e;
        match prev.state {
            EntryState::InFlight => {
                e.state = EntryState::Acked;
                if let Some(p) = open_mut(&mut self.paths, slot) {
                    p.inflight = p.inflight.saturating_sub(1);
                }
                self.mark_acked(prev.msn, u32::from(prev.pkt));
                1
            }
            EntryState::Lost | EntryState::Drained => {
                e.state = EntryState::Acked;
                self.stats.late_acks += 1;
                self.mark_acked(prev.msn, u32::from(prev.pkt));
                0
            }
            _ => 0,
        }
    }

    /// The losses the SACK rule last declared on path `slot` were
    /// reordering (shown once per declaration): the path's loss threshold
    /// doubles (protocol.md 4.2).
    fn sack_loss_was_reordering(&mut self, slot: usize, now: u64) {
        let base = self.cfg.reorder_threshold;
        if let Some(p) = open_mut(&mut self.paths, slot) {
            if let Some(w) = p.reorder_watch.take() {
                p.on_reordered(base, now.saturating_sub(w.at));
                self.stats.reorders += 1;
            }
        }
    }

    /// The in-flight `psn` of `slot`, carrying `e`, is lost by SACK: its
    /// packet is queued for resending.
    fn declare_sack_loss(&mut self, slot: usize, psn: u32, e: InflightEntry) {
        self.mark_lost(e.msn, u32::from(e.pkt), slot, LossCause::Sack);
        if let Some(en) = self.entry_mut(slot, psn) {
            en.state = EntryState::Lost;
        }
        if let Some(p) = open_mut(&mut self.paths, slot) {
            p.inflight = p.inflight.saturating_sub(1);
            p.sack_lost += 1;
        }
    }

    /// An ACK acknowledged `slot`'s tail probe `probe`: every PSN sent
    /// before it and still in flight is lost, whatever the path's loss
    /// threshold (it had the probe's timeout and the probe's RTT to
    /// arrive: RACK-TLP's reasoning, RFC 8985), the probe's own original
    /// among them (its packet came with the probe: nothing is resent for
    /// it). Returns the PSNs declared.
    ///
    /// The floor may have passed the probe meanwhile (the probe itself
    /// declared lost by SACK, the floor moved over it, and only a later
    /// ACK covered its PSN): then nothing sent before it is in flight. A
    /// walk down from the probe to such a floor went round the whole PSN
    /// space, 2^32 steps in the softirq (26 s under TCG, an RCU stall),
    /// declaring the packets sent after the probe lost on its way.
    fn tail_probe_answered(&mut self, slot: usize, probe: u32) -> u32 {
        let Some(una) = open_mut(&mut self.paths, slot).map(|p| {
            p.tail_probe_psn = None;
            p.una
        }) else {
            return 0;
        };
        let mut lost = 0;
        let mut psn = probe;
        while seq_lt(una, psn) {
            psn = psn.wrapping_sub(1);
            let e = self.entry(slot, psn);
            if e.state == EntryState::InFlight {
                self.declare_sack_loss(slot, psn, e);
                lost += 1;
            }
        }
        lost
    }

    /// The SACK rule (protocol.md 4.2 step 3) over `slot`'s PSNs from `hi`,
    /// its highest acknowledged one, down to the floor: an in-flight PSN
    /// with at least the path's loss threshold of acknowledged PSNs above
    /// it is a hole. On a path without a reorder window a hole is lost at
    /// once, `echo` (the `ts_echo` that showed it) its evidence; on a path
    /// with one, the holes wait the window from when they were first seen
    /// ([`ReorderWait`]) and are lost only if still holes then. Returns the
    /// PSNs declared lost; the caller tells congestion control.
    fn sack_rule(&mut self, slot: usize, hi: u32, echo: u64, now: u64) -> u32 {
        let base = self.cfg.reorder_threshold;
        let Some((una, threshold, window, wait)) = open(&self.paths, slot).map(|p| {
            (
                p.una,
                p.loss_threshold(base),
                p.reorder_window_now(),
                p.reorder_wait,
            )
        }) else {
            return 0;
        };
        // Holes below the waiting ones' highest PSN were seen then and have
        // waited the window once it has passed.
        let due = wait.filter(|w| now >= w.since.saturating_add(window));
        // The wait a declaration ends (none with no window: every hole is
        // declared, those above the waiting ones too), whose ACK is the
        // evidence of the watch it sets (below), and the PSNs declared
        // below that ACK's highest.
        let ended = due.filter(|_| window != 0);
        let evidence = ended.map_or(hi, |w| w.psn);
        let mut declared = 0u64;
        let mut lost = 0u32;
        let mut waiting = false;
        let mut above = 0u32;
        let mut psn = hi;
        loop {
            let e = self.entry(slot, psn);
            match e.state {
                EntryState::Acked => above += 1,
                EntryState::InFlight
                    if above >= threshold
                        && (window == 0 || due.is_some_and(|w| seq_lt(psn, w.psn))) =>
                {
                    self.declare_sack_loss(slot, psn, e);
                    lost += 1;
                    let below = evidence.wrapping_sub(psn).wrapping_sub(1);
                    if below < 64 {
                        declared |= 1 << below;
                    }
                }
                EntryState::InFlight if above >= threshold => waiting = true,
                _ => {}
            }
            if psn == una {
                break;
            }
            psn = psn.wrapping_sub(1);
        }
        let Some(p) = open_mut(&mut self.paths, slot) else {
            return lost;
        };
        if lost > 0 {
            // The evidence: the ACK that showed the holes now declared, and
            // when it came (a reordering that proves them wrong took from
            // then: the window it needed).
            let (ts, at) = ended.map_or((echo, now), |w| (w.ts, w.since));
            p.reorder_watch = Some(ReorderWatch {
                ts,
                psn: evidence,
                at,
                lost: declared,
                sent: p.sent,
            });
        }
        p.reorder_wait = match (waiting, wait) {
            // This ACK's highest PSN is below the waiting holes' (a stale
            // or reordered ACK): it did not look at them.
            (_, Some(w)) if due.is_none() && seq_lt(hi, w.psn) => Some(w),
            (false, _) => None,
            // The holes seen first still wait.
            (true, Some(w)) if due.is_none() => Some(w),
            // Newer holes than those just declared wait from now.
            (true, _) => Some(ReorderWait {
                psn: hi,
                ts: echo,
                since: now,
            }),
        };
        lost
    }

    /// Holes waiting out their path's reorder window are due (on a timer,
    /// no ACK having come since to run the SACK rule): the rule runs from
    /// the path's highest acknowledged PSN, and congestion control hears
    /// of what it declares as it does from an ACK.
    fn on_reorder_deadline(&mut self, slot: usize, now: u64) {
        let Some((una, next, wait, srtt)) = open(&self.paths, slot).map(|p| {
            let srtt = if p.rtt.sampled { p.rtt.srtt } else { 0 };
            (p.una, p.next_psn, p.reorder_wait, srtt)
        }) else {
            return;
        };
        let Some(w) = wait else { return };
        let mut hi = None;
        let mut psn = next;
        while psn != una {
            psn = psn.wrapping_sub(1);
            if self.entry(slot, psn).state == EntryState::Acked {
                hi = Some(psn);
                break;
            }
        }
        let Some(hi) = hi else {
            // Nothing acknowledged above the floor: no hole is left.
            if let Some(p) = open_mut(&mut self.paths, slot) {
                p.reorder_wait = None;
            }
            return;
        };
        let lost = self.sack_rule(slot, hi, w.ts, now);
        if lost > 0 {
            self.stats.sack_losses += u64::from(lost);
            self.congested = true;
            if let Some(p) = open_mut(&mut self.paths, slot) {
                if p.inflight == 0 {
                    p.timer = None;
                }
                cut_for_losses(
                    &mut self.cc,
                    &self.ccp,
                    &mut self.events,
                    p,
                    lost,
                    now,
                    srtt,
                );
            }
        }
    }

    /// Every message before `cum_msn` is complete at the receiver.
    fn on_cum_msn(&mut self, cum_msn: u32) {
        let span = self.tail.wrapping_sub(self.head);
        let ahead = cum_msn.wrapping_sub(self.head);
        if ahead == 0 || ahead > span {
            return;
        }
        let mut msn = self.head;
        while msn != cum_msn {
            let Some(i) = self.msg_index(msn) else { break };
            let Some(m) = self.msgs.get_mut(i) else { break };
            // A receiver cannot have completed what was never fully sent.
            if m.next_pkt < m.npkts && m.failed.is_none() {
                break;
            }
            if m.failed.is_none() {
                m.confirmed = true;
                if m.acked_count < m.npkts {
                    for k in 0..m.npkts {
                        m.acked.set(k);
                    }
                    m.acked_count = m.npkts;
                }
                // Nothing of it is resent, a verdict probe's copy queued
                // for its acknowledged last packet included: left counted,
                // that copy kept `lost_total` above 0 for the QP's life
                // (every `next_packet` then searched the message window
                // for a loss that no message held).
                self.lost_total = self.lost_total.saturating_sub(m.lost_count);
                m.lost_count = 0;
                m.lost.clear_all();
            }
            msn = msn.wrapping_add(1);
        }
    }

    /// Process a NAK: the message failed at the responder.
    pub fn on_nak(&mut self, nak: &Nak) {
        self.stats.naks += 1;
        // The NAK must name a live path and a PSN it carried, and a message
        // in flight (a forger must hit the windows, RFC 5961).
        let slot = (nak.path_id & super::config::PATH_SLOT_MASK) as usize;
        let carried = open(&self.paths, slot).map(PathView::of).is_some_and(|p| {
            p.state != PathState::Unused && p.id == nak.path_id && seq_diff(nak.psn, p.next_psn) < 0
        });
        let Some(i) = self.msg_index(nak.msn).filter(|_| carried) else {
            self.stats.stale_naks += 1;
            return;
        };
        let Some(m) = self.msgs.get_mut(i) else {
            return;
        };
        if m.failed.is_none() {
            if self.verdict_deadline.is_some_and(|(w, _)| w == nak.msn) {
                self.verdict_deadline = None;
            }
            m.failed = Some(nak.syndrome);
            self.lost_total = self.lost_total.saturating_sub(m.lost_count);
            m.lost_count = 0;
            m.lost.clear_all();
            m.next_pkt = m.npkts;
        }
    }

    /// Process a probe reply: the path works again.
    pub fn on_probe_reply(&mut self, probe: &Probe, now: u64) {
        let slot = (probe.path_id & super::config::PATH_SLOT_MASK) as usize;
        let Some(p) = open(&self.paths, slot) else {
            return;
        };
        if p.id != probe.path_id || p.state != PathState::Probing || probe.seq != p.probe_seq {
            return;
        }
        self.sample_rtt(slot, probe.timestamp, now);
        let Some(p) = open_mut(&mut self.paths, slot) else {
            return;
        };
        p.state = PathState::Active;
        p.probe_due = false;
        p.probe_deadline = None;
        p.probes_failed = 0;
        p.timeouts = 0;
        p.backoff = 0;
        self.events.push(SenderEvent::PathRecovered {
            path: p.tag(),
            cause: RecoverCause::ProbeReply,
        });
    }

    /// The caller learned that `plane` is down: drain its paths now, and
    /// move their slots to the planes that are up (protocol.md 1.8), so the
    /// QP keeps its path count and window while the plane is down. With no
    /// plane up the paths stay suspended on their own plane.
    pub fn plane_down(&mut self, plane: u8, now: u64) {
        self.planes_down |= plane_bit(plane);
        for slot in Slots(self.used) {
            let Some(p) = open(&self.paths, slot) else {
                continue;
            };
            if p.plane != plane {
                continue;
            }
            let was = p.state;
            self.drain_path(slot, LossCause::PlaneDown);
            if let Some(p) = open_mut(&mut self.paths, slot) {
                if was != PathState::Suspended {
                    self.events.push(SenderEvent::PathFailed {
                        path: p.tag(),
                        cause: FailCause::PlaneDown,
                    });
                }
                p.state = PathState::Suspended;
                p.probe_due = false;
                p.probe_deadline = None;
            }
        }
        self.rehome(now);
        self.close_retired();
    }

    /// The caller learned that `plane` is up: the slots whose home it is
    /// come back to it, and its suspended paths are probed.
    pub fn plane_up(&mut self, plane: u8, now: u64) {
        self.planes_down &= !plane_bit(plane);
        for p in self.paths.iter_mut().filter_map(|p| p.as_deref_mut()) {
            if p.state == PathState::Suspended && p.plane == plane {
                p.state = PathState::Probing;
                p.probe_due = true;
                p.probes_failed = 0;
                p.backoff = 0;
            }
        }
        self.rehome(now);
    }

    /// The device gained planes while the QP was connected (protocol.md
    /// 1.8, a plane joining): the connection now spreads over `planes`
    /// planes, homing slot `s` on plane `s mod planes`. The planes from
    /// the old count on start down, as at connect, until the caller
    /// reports them up ([`Sender::plane_up`]: the PLANES exchange named
    /// the peer's address there); meanwhile a slot whose new home is one
    /// of them stays where it is. More slots are opened, when the bound
    /// allows, so that every plane homes as many as the others. False
    /// (nothing changes) unless `planes` is above the current count and at
    /// most [`MAX_PLANES`].
    pub fn add_planes(&mut self, planes: u8, now: u64) -> bool {
        let old = self.cfg.planes;
        if planes <= old || usize::from(planes) > MAX_PLANES {
            return false;
        }
        // The paths spread anew: a step being judged stands (the planes are
        // balanced with its slots counted), and retiring paths close now,
        // their packets in flight resent on the others (closing later,
        // their slots would unbalance the planes).
        self.step_slots = 0;
        self.growth.restart(now);
        for slot in Slots(self.retiring) {
            self.drain_path(slot, LossCause::PlaneDown);
        }
        self.close_retired();
        for k in old..planes {
            self.planes_down |= plane_bit(k);
        }
        self.cfg.planes = planes;
        self.rehome(now);
        let want = self
            .balanced(self.path_count())
            .saturating_sub(self.path_count());
        self.open_paths(want, now);
        true
    }

    /// A path count of at least `n` that every plane homes equally many
    /// slots of: `n` rounded up to a multiple of the plane count, or when
    /// that is above `max_paths`, `max_paths` rounded down to one (callers
    /// open only what goes beyond the count they have). With more planes
    /// than `max_paths`, `n` within the bound.
    fn balanced(&self, n: usize) -> usize {
        let planes = usize::from(self.cfg.planes.max(1));
        let bound = usize::from(self.cfg.max_paths).min(MAX_PATHS);
        if bound < planes {
            return n.min(bound);
        }
        let up = n.div_ceil(planes) * planes;
        if up <= bound {
            up
        } else {
            bound / planes * planes
        }
    }

    /// Opens `count` more paths in the lowest unused slots, active (on
    /// the plane [`Sender::plane_for`] chooses).
    fn open_paths(&mut self, count: usize, now: u64) {
        for slot in Slots(!self.used).take(count) {
            // A slot a retired path left opens under the next generation:
            // the peer may still hold the old one's PSNs.
            let gen = open(&self.paths, slot).map_or(0, TxPath::next_generation);
            if self.open_path(slot, gen, PathState::Active, now) {
                self.stats.paths_opened += 1;
            }
        }
    }

    /// Whether plane `k` is one of this connection's and not reported down.
    fn plane_live(&self, k: u8) -> bool {
        k < self.cfg.planes.max(1) && self.planes_down & plane_bit(k) == 0
    }

    /// The plane slot `slot` belongs on when all planes are up: planes
    /// take the slots in turn (protocol.md 1.8).
    fn home_plane(&self, slot: usize) -> u8 {
        (slot % self.cfg.planes.max(1) as usize) as u8
    }

    /// The plane a path opened in `slot` now goes on: its home plane when
    /// that is up, else the plane that is up with the fewest other paths
    /// (the lowest such number); `None` when no plane is up.
    fn plane_for(&self, slot: usize) -> Option<u8> {
        let home = self.home_plane(slot);
        if self.plane_live(home) {
            return Some(home);
        }
        (0..self.cfg.planes.max(1))
            .filter(|&k| self.plane_live(k))
            .min_by_key(|&k| {
                Slots(self.used & !(1u64 << slot))
                    .filter_map(|s| open(&self.paths, s))
                    .filter(|p| p.plane == k)
                    .count()
            })
    }

    /// Puts every slot's path on the plane [`Sender::plane_for`] chooses,
    /// after a plane went down or came up: a path on a plane that is down,
    /// or away from its home plane when that is up, is replaced in its
    /// slot by the next generation on the chosen plane (as after failed
    /// probes, `on_timer`), its packets in flight drained to be resent.
    /// A path already away from a home plane that is down stays where it
    /// is. The new path starts active when the chosen plane has an active
    /// path (the plane works), else probing.
    fn rehome(&mut self, now: u64) {
        for slot in Slots(self.used) {
            let Some(plane) = open(&self.paths, slot).map(|p| p.plane) else {
                continue;
            };
            let home = self.home_plane(slot);
            if self.plane_live(plane) && (plane == home || !self.plane_live(home)) {
                continue;
            }
            let Some(to) = self.plane_for(slot) else {
                continue;
            };
            if to == plane {
                continue;
            }
            self.drain_path(slot, LossCause::PlaneDown);
            let state = if self.plane_usable(to) {
                PathState::Active
            } else {
                PathState::Probing
            };
            self.replace_path(slot, to, state, now);
            self.stats.paths_rehomed += 1;
        }
    }

    fn give_up_at(&self) -> Option<u64> {
        let t = self.progress_at?;
        (self.cfg.give_up_ns != 0).then(|| t.saturating_add(self.cfg.give_up_ns))
    }

    fn give_up_due(&self, now: u64) -> bool {
        self.head != self.tail && self.give_up_at().is_some_and(|t| now >= t)
    }

    /// The retry budget passed without progress: every outstanding message
    /// fails with `RetryExceeded` (the verbs layer's retry-exceeded error),
    /// nothing more is sent for them, the paths are emptied.
    fn give_up(&mut self) {
        self.stats.give_ups += 1;
        let mut failed = 0u32;
        let mut msn = self.head;
        while msn != self.tail {
            if let Some(m) = self.msgs.get_mut(msn as usize % MSG_WINDOW_MAX) {
                if m.live && m.msn == msn && !m.done() {
                    failed += 1;
                    m.retry_exceeded = true;
                    m.next_pkt = m.npkts;
                    m.lost.clear_all();
                    m.lost_count = 0;
                }
            }
            msn = msn.wrapping_add(1);
        }
        self.events.push(SenderEvent::GiveUp {
            outstanding: failed,
        });
        self.lost_total = 0;
        self.cursor = self.tail;
        self.verdict_deadline = None;
        self.progress_at = None;
        for r in self.rings.iter_mut().filter_map(|r| r.as_deref_mut()) {
            r.fill(InflightEntry::EMPTY);
        }
        for p in self.paths.iter_mut().filter_map(|p| p.as_deref_mut()) {
            // As a drain leaves it (no probe of a tail, no holes either).
            p.emptied();
        }
    }

    /// Earliest time `on_timer` has work to do.
    pub fn next_deadline(&self) -> Option<u64> {
        self.used_paths()
            .flat_map(|p| {
                [
                    p.timer,
                    p.probe_deadline,
                    p.reorder_deadline(),
                    p.tail_probe,
                ]
            })
            .chain([
                self.verdict_deadline.map(|(_, t)| t),
                self.give_up_at(),
                self.alloc_retry,
            ])
            .flatten()
            .min()
    }

    /// Run expired timers: RTO (drain path, start probing) and probe
    /// timeouts (retry, then replace the path with a fresh source port).
    pub fn on_timer(&mut self, now: u64) {
        // The heap refused memory a while ago: the caller, sending after
        // this, tries again.
        if self.alloc_retry.is_some_and(|t| now >= t) {
            self.alloc_retry = None;
        }
        if self.give_up_due(now) {
            self.give_up();
            return;
        }
        self.watch_verdict(now);
        for slot in Slots(self.used) {
            if open(&self.paths, slot)
                .and_then(TxPath::reorder_deadline)
                .is_some_and(|t| now >= t)
            {
                self.on_reorder_deadline(slot, now);
            }
            if let Some(p) = open_mut(&mut self.paths, slot) {
                if p.tail_probe.is_some_and(|t| now >= t) {
                    p.tail_probe = None;
                    p.tail_probe_due = p.inflight > 0 && p.state == PathState::Active;
                }
            }
            let Some(p) = open(&self.paths, slot).map(PathView::of) else {
                continue;
            };
            if p.state == PathState::Unused {
                continue;
            }
            if let Some(t) = p.timer {
                if now >= t {
                    self.stats.timeouts += 1;
                    if let Some(p) = open_mut(&mut self.paths, slot) {
                        p.rtos += 1;
                    }
                    let undo = open(&self.paths, slot).map(|p| RtoUndo {
                        at: now,
                        lo: p.una,
                        hi: p.next_psn,
                        sent_since: false,
                        undone: false,
                        cc: p.cc,
                        backoff: p.backoff,
                        timeouts: p.timeouts,
                    });
                    self.drain_path(slot, LossCause::Timeout);
                    if let Some(p) = open_mut(&mut self.paths, slot) {
                        p.undo = undo;
                        p.timeouts = p.timeouts.saturating_add(1);
                        p.backoff = (p.backoff + 1).min(8);
                        let old = p.cc.cwnd;
                        self.cc.on_timeout(&mut p.cc, &self.ccp, now);
                        p.delay_undo = None;
                        if p.cc.cwnd < old {
                            self.events.push(SenderEvent::WindowDecrease {
                                path: p.tag(),
                                old,
                                new: p.cc.cwnd,
                                cause: CutCause::Timeout,
                            });
                        }
                        if p.state == PathState::Active {
                            p.state = PathState::Probing;
                            p.probe_due = true;
                            self.events.push(SenderEvent::PathFailed {
                                path: p.tag(),
                                cause: FailCause::Timeout,
                            });
                        }
                    }
                }
            }
            let Some(p) = open(&self.paths, slot).map(PathView::of) else {
                continue;
            };
            if let Some(t) = p.probe_deadline {
                // ACKs of the path arrived while the probe was out (late
                // ones, its reply maybe just slow): the path delivers, so
                // the interval does not count towards failing it.
                let acked = open(&self.paths, slot)
                    .and_then(|p| p.last_ack.map(|a| a >= p.probe_sent))
                    .unwrap_or(false);
                if now >= t && p.state == PathState::Probing && acked {
                    self.stats.probes_excused += 1;
                    if let Some(p) = open_mut(&mut self.paths, slot) {
                        p.probe_deadline = None;
                        p.probe_due = true;
                    }
                } else if now >= t && p.state == PathState::Probing {
                    let failed = p.probes_failed + 1;
                    if failed >= self.cfg.path_fail_probes {
                        self.stats.paths_replaced += 1;
                        let to = self
                            .plane_for(slot)
                            .unwrap_or_else(|| self.home_plane(slot));
                        self.replace_path(slot, to, PathState::Probing, now);
                    } else if let Some(p) = open_mut(&mut self.paths, slot) {
                        p.probes_failed = failed;
                        p.probe_deadline = None;
                        p.probe_due = true;
                        p.backoff = (p.backoff + 1).min(8);
                    }
                }
            }
        }
        // A timeout may have emptied a retiring path.
        self.close_retired();
    }

    /// Path growth (protocol.md 4.4), at most once per SRTT: a step of
    /// paths when every active path is pinned at its window cap, the QP is
    /// window-limited and no congestion was seen for an RTT (the per-path
    /// cap cannot fill the bandwidth-delay product), each step judged by
    /// the delivery rate it gained ([`Growth`]) and taken back if it
    /// gained nothing.
    fn maybe_grow(&mut self, now: u64) {
        let interval = if self.qp_rtt.sampled {
            self.qp_rtt.srtt
        } else {
            self.cfg.initial_rto_ns
        };
        if now.saturating_sub(self.last_growth) < interval {
            return;
        }
        let active = self.active_paths();
        let used = self.path_count();
        let capped = self.carrying().all(|p| p.cc.window() >= self.cfg.pwnd_max);
        // No step while a retired path is still open: the step would be
        // sized and placed around its slot, and the planes left unequal
        // once it closed.
        let eligible = self.window_limited
            && !self.congested
            && capped
            && active > 0
            && self.retiring == 0
            && used < self.cfg.max_paths as usize;
        match self
            .growth
            .end_interval(now, self.window_limited, capped, eligible)
        {
            GrowthStep::Grow => {
                // Half as many again, rounded so that the planes keep
                // homing equal numbers of slots (else one plane has one
                // more path, and window, than another).
                let want = self.balanced(used + active / 2 + 1).saturating_sub(used);
                let before = self.used;
                self.open_paths(want, now);
                self.step_slots = self.used & !before;
            }
            GrowthStep::Revert => {
                let retired = self.step_slots & self.used;
                self.retiring |= retired;
                self.stats.paths_retired += u64::from(retired.count_ones());
                self.step_slots = 0;
                self.close_retired();
            }
            GrowthStep::Hold => {}
        }
        self.window_limited = false;
        self.congested = false;
        self.last_growth = now;
    }

    /// Closes the retiring paths that have nothing in flight: their slots
    /// are free for a later step, which opens them under a new generation.
    fn close_retired(&mut self) {
        for slot in Slots(self.retiring) {
            let busy = open(&self.paths, slot)
                .is_some_and(|p| p.state != PathState::Unused && p.inflight > 0);
            if busy {
                continue;
            }
            if let Some(p) = open_mut(&mut self.paths, slot) {
                p.state = PathState::Unused;
            }
            self.used &= !(1u64 << slot);
            self.retiring &= !(1u64 << slot);
        }
    }

    /// The QP-wide cap on packets in flight over all paths (protocol.md
    /// 4.1, 6.5): the first flight until the first RTT sample, then the
    /// receiver's rate hint's, if it gives one.
    fn flight_cap(&self) -> Option<u32> {
        if !self.qp_rtt.sampled && self.cfg.first_flight != 0 {
            return Some(self.cfg.first_flight);
        }
        self.hint_cap()
    }

    /// The receiver stopped hinting a rate (its QP is alone there,
    /// protocol.md 6.5): the cap is gone, and each path's window, grown
    /// under it, goes back to what the path showed the network.
    fn on_hint_lifted(&mut self) {
        for slot in Slots(self.used) {
            if let Some(p) = open_mut(&mut self.paths, slot) {
                self.cc.on_cap_lifted(&mut p.cc, &self.ccp, p.inflight);
            }
        }
    }

    /// QP-level cap in packets from the receiver rate hint.
    fn hint_cap(&self) -> Option<u32> {
        if self.rate_hint_kbps == 0 {
            return None;
        }
        // bytes = kbit/s * ns / 8,000,000; 25% headroom over the base RTT.
        // Saturating: a hint near 2^32 kbit/s times an RTT over 4 s.
        let bytes = u64::from(self.rate_hint_kbps).saturating_mul(self.qp_rtt.min_rtt) / 8_000_000;
        let pkts = bytes.saturating_mul(5) / 4 / u64::from(self.payload().max(1));
        Some(pkts.clamp(2, u64::from(u32::MAX)) as u32)
    }

    fn find_lost(&self) -> Option<(u32, u32, usize)> {
        if self.lost_total == 0 {
            return None;
        }
        let mut msn = self.head;
        while msn != self.tail {
            if let Some(m) = self.msgs.get(msn as usize % MSG_WINDOW_MAX) {
                if m.live && m.msn == msn && m.lost_count > 0 {
                    if let Some(pkt) = m.lost.first_set() {
                        return Some((msn, pkt, m.last_loss_slot));
                    }
                }
            }
            msn = msn.wrapping_add(1);
        }
        None
    }

    fn find_new(&mut self) -> Option<u32> {
        while self.cursor != self.tail {
            match self.msgs.get(self.cursor as usize % MSG_WINDOW_MAX) {
                Some(m)
                    if m.live
                        && m.msn == self.cursor
                        && m.failed.is_none()
                        && m.next_pkt < m.npkts =>
                {
                    return Some(self.cursor);
                }
                _ => self.cursor = self.cursor.wrapping_add(1),
            }
        }
        None
    }

    fn path_open(&self, p: &TxPath, plane: Option<u8>) -> bool {
        p.state == PathState::Active
            && plane.is_none_or(|pl| pl == p.plane)
            && p.inflight < p.cc.window()
            && (p.span() as usize) < PATH_RING
    }

    /// Whether [`Sender::next_packet`] may have a packet: a probe due, a
    /// lost packet to resend, or a message not wholly sent (whether a
    /// window is open is not asked). False means it has none, so a caller
    /// that sends elsewhere (a deferred transmit) need not be woken.
    pub fn has_ready(&self) -> bool {
        self.lost_total > 0
            || self.cursor != self.tail
            || self
                .used_paths()
                .any(|p| (p.state == PathState::Probing && p.probe_due) || p.tail_probe_due)
    }

    /// Next packet to send on any plane.
    pub fn next_packet(&mut self, now: u64) -> Option<TxPacket> {
        self.next_packet_inner(now, None)
    }

    /// Next packet to send on `plane` (for per-port transmit queues).
    pub fn next_packet_on_plane(&mut self, now: u64, plane: u8) -> Option<TxPacket> {
        self.next_packet_inner(now, Some(plane))
    }

    fn next_packet_inner(&mut self, now: u64, plane: Option<u8>) -> Option<TxPacket> {
        // Probes first: they are tiny and decide path health.
        for slot in Slots(self.used) {
            let rto = match open(&self.paths, slot) {
                Some(p)
                    if p.state == PathState::Probing
                        && p.probe_due
                        && plane.is_none_or(|pl| pl == p.plane) =>
                {
                    self.rto_of(p, now)
                }
                _ => continue,
            };
            let Some(p) = open_mut(&mut self.paths, slot) else {
                continue;
            };
            p.probe_due = false;
            p.probe_seq = p.probe_seq.wrapping_add(1);
            p.probe_sent = now;
            p.probe_deadline = Some(now.saturating_add(rto));
            self.stats.probes += 1;
            return Some(TxPacket {
                kind: TxKind::Probe(Probe {
                    dst_qpn: self.cfg.dst_qpn,
                    path_id: p.id,
                    seq: p.probe_seq,
                    timestamp: now,
                }),
                src_port: p.src_port,
                plane: p.plane,
            });
        }
        if let Some(tp) = self.next_tail_probe(now, plane) {
            return Some(tp);
        }
        let retx = self.find_lost();
        let (msn, pkt, avoid, is_retx) = match retx {
            Some((msn, pkt, avoid)) => (msn, pkt, avoid, true),
            None => {
                let msn = self.find_new()?;
                let m = self.msgs.get_mut(msn as usize % MSG_WINDOW_MAX)?;
                // A long message takes its bitmaps as its first packet goes.
                if !m.has_bits() {
                    self.alloc_retry = Some(now.saturating_add(ALLOC_RETRY_NS));
                    return None;
                }
                (msn, m.next_pkt, usize::MAX, false)
            }
        };
        if let Some(cap) = self.flight_cap() {
            if self.inflight() >= cap {
                return None;
            }
        }
        // Spray: the plane that has carried least per path (its clock),
        // among the planes with a path whose window is open; on it, the
        // next such path in round-robin order; the path that lost this
        // packet only when no other path is open. Plain round-robin over
        // the slots, whose planes alternate, gave a full path's turn to the
        // next slot, a path of another plane: a plane whose windows were
        // smaller lost its share twice over.
        let mut first_on: [Option<usize>; MAX_PLANES] = [None; MAX_PLANES];
        let mut carrying_on = [0u32; MAX_PLANES];
        let mut fallback = None;
        // The used slots from `rr` on, wrapping: bit k of the rotated mask
        // is slot `rr + k`.
        let rr = self.rr;
        // Retiring paths take no new data (4.4).
        let from_rr = Slots((self.used & !self.retiring).rotate_right(rr as u32));
        // A path whose ring the heap refused is passed over like a full one.
        let mut starved = false;
        for slot in from_rr.map(|k| (rr + k) % MAX_PATHS) {
            let Some(p) = open(&self.paths, slot) else {
                continue;
            };
            let pl = usize::from(p.plane) % MAX_PLANES;
            if p.state == PathState::Active {
                carrying_on[pl] += 1;
            }
            if first_on[pl].is_some() || !self.path_open(p, plane) {
                continue;
            }
            if slot == avoid {
                fallback = Some(slot);
                continue;
            }
            if !self.has_ring(slot, now) {
                starved = true;
                continue;
            }
            first_on[pl] = Some(slot);
        }
        // The least clock; of equal ones, the slot nearest `rr`.
        let key =
            |pl: usize, slot: usize| (self.plane_clock[pl], (slot + MAX_PATHS - rr) % MAX_PATHS);
        let mut chosen = first_on
            .iter()
            .enumerate()
            .filter_map(|(pl, slot)| slot.map(|slot| (key(pl, slot), slot)))
            .min()
            .map(|(_, slot)| slot);
        if chosen.is_none() {
            if let Some(slot) = fallback {
                if self.has_ring(slot, now) {
                    chosen = Some(slot);
                } else {
                    starved = true;
                }
            }
        }
        let Some(slot) = chosen else {
            if starved {
                // Not the windows: memory (tried again at `alloc_retry`).
                return None;
            }
            // Window-limited only if there were usable paths, all full (a
            // plane without active paths says nothing about the windows).
            let any_active = self
                .carrying()
                .any(|p| plane.is_none_or(|pl| pl == p.plane));
            if any_active {
                self.window_limited = true;
            }
            return None;
        };
        self.rr = (slot + 1) % MAX_PATHS;
        if let Some(p) = open(&self.paths, slot) {
            let pl = usize::from(p.plane) % MAX_PLANES;
            self.advance_plane_clock(pl, carrying_on[pl]);
        }
        let send = if is_retx { Emit::Resend } else { Emit::New };
        self.emit(slot, msn, pkt, send, now)
    }

    /// Counts a packet sprayed on plane `pl`, which has `carrying` paths
    /// taking data: its clock advances by a path's share of the packet.
    /// No clock stays more than [`PLANE_CLOCK_LAG`] behind the one just
    /// advanced, so a plane that could not send for a while (its windows
    /// full, its paths down or just joined) makes up at most a few
    /// packets per path, not its whole absence at once.
    fn advance_plane_clock(&mut self, pl: usize, carrying: u32) {
        let step = PLANE_CLOCK_UNIT / carrying.max(1);
        let Some(c) = self.plane_clock.get_mut(pl) else {
            return;
        };
        *c = c.saturating_add(step);
        let lead = *c;
        // Rebased long before u32 runs out (about 2^20 packets per path).
        let rebase = if lead > 1 << 30 {
            lead - PLANE_CLOCK_LAG
        } else {
            0
        };
        for q in self.plane_clock.iter_mut() {
            *q = (*q).max(lead.saturating_sub(PLANE_CLOCK_LAG)) - rebase;
        }
    }

    /// A path with a tail probe due: the probe, its newest packet in flight
    /// (of a message still in the window) sent again on the same path
    /// under a new PSN, whatever its window (protocol.md 4.3).
    fn next_tail_probe(&mut self, now: u64, plane: Option<u8>) -> Option<TxPacket> {
        for slot in Slots(self.used) {
            let Some((una, next)) = open(&self.paths, slot)
                .filter(|p| p.tail_probe_due && plane.is_none_or(|pl| pl == p.plane))
                .map(|p| (p.una, p.next_psn))
            else {
                continue;
            };
            if let Some(p) = open_mut(&mut self.paths, slot) {
                p.tail_probe_due = false;
            }
            if !open(&self.paths, slot)
                .is_some_and(|p| p.state == PathState::Active && (p.span() as usize) < PATH_RING)
            {
                continue;
            }
            // Copies whose packet another copy delivered, or whose message
            // is gone, are not probed: retired, they no longer hold the
            // path in flight (nor, with nothing after them, run it into its
            // RTO). The newest copy left is the probe.
            let mut newest = None;
            let mut psn = next;
            while psn != una {
                psn = psn.wrapping_sub(1);
                let e = self.entry(slot, psn);
                if e.state != EntryState::InFlight {
                    continue;
                }
                let wanted = self
                    .msgs
                    .get(e.msn as usize % MSG_WINDOW_MAX)
                    .is_some_and(|m| {
                        m.live
                            && m.msn == e.msn
                            && m.failed.is_none()
                            && !m.acked.get(u32::from(e.pkt))
                    });
                if !wanted {
                    if let Some(en) = self.entry_mut(slot, psn) {
                        en.state = EntryState::Acked;
                    }
                    if let Some(p) = open_mut(&mut self.paths, slot) {
                        p.inflight = p.inflight.saturating_sub(1);
                    }
                } else if newest.is_none() {
                    newest = Some(e);
                }
            }
            self.advance_floor(slot);
            let Some(e) = newest else {
                if let Some(p) = open_mut(&mut self.paths, slot) {
                    if p.inflight == 0 {
                        p.timer = None;
                    }
                }
                continue;
            };
            self.stats.tail_probes += 1;
            let packet = self.emit(slot, e.msn, u32::from(e.pkt), Emit::TailProbe, now);
            if let (Some(TxKind::Data { header, .. }), Some(p)) = (
                packet.as_ref().map(|t| t.kind),
                open_mut(&mut self.paths, slot),
            ) {
                p.tail_probe_psn = Some(header.psn);
                p.tail_probes += 1;
            }
            return packet;
        }
        None
    }

    /// Packet `pkt` of message `msn` on path `slot`, under the path's next
    /// PSN.
    fn emit(&mut self, slot: usize, msn: u32, pkt: u32, send: Emit, now: u64) -> Option<TxPacket> {
        let is_retx = send != Emit::New;
        let (mtu, wide_payload) = (self.cfg.mtu, self.wide_payload);
        let m = self.msgs.get_mut(msn as usize % MSG_WINDOW_MAX)?;
        let seg = if m.wide { wide_payload } else { mtu };
        match send {
            Emit::Resend => {
                if m.lost.clear(pkt) {
                    m.lost_count = m.lost_count.saturating_sub(1);
                    self.lost_total = self.lost_total.saturating_sub(1);
                }
            }
            Emit::New => m.next_pkt += 1,
            Emit::TailProbe => {}
        }
        let offset = pkt.saturating_mul(seg);
        let payload_len = if m.opcode == Opcode::ReadReq {
            0
        } else {
            m.len.saturating_sub(offset).min(seg)
        };
        let mut flags = if m.wide { FLAG_WIDE } else { 0 };
        if m.opcode.has_imm() {
            flags |= FLAG_IMM;
        }
        if self.peer_psn {
            flags |= FLAG_PEER_PSN;
        }
        if is_retx {
            flags |= FLAG_RETRANSMIT;
            self.stats.retransmits += 1;
            self.stats.retransmit_bytes += u64::from(payload_len);
        }
        self.stats.data_packets += 1;
        if self.progress_at.is_none() {
            self.progress_at = Some(now);
        }
        let (opcode, msg_len, remote_va, rkey, imm, rsn) =
            (m.opcode, m.len, m.remote_va, m.rkey, m.imm, m.rsn);
        let loss_cause = if send == Emit::TailProbe {
            LossCause::TailProbe
        } else {
            m.last_loss_cause
        };
        let (rto, pto) = open(&self.paths, slot)
            .map(|p| {
                let peak = self.rtt_peak.get(now);
                let pto = p.tail_probe_timeout(self.cfg.peer_ack_delay_ns, peak);
                (self.rto_of(p, now), pto)
            })
            .unwrap_or((self.cfg.max_rto_ns, None));
        let p = open_mut(&mut self.paths, slot)?;
        let psn = p.next_psn;
        let timestamp = p.stamp(now);
        if let Some(e) =
            open_mut(&mut self.rings, slot).and_then(|r| r.get_mut(psn as usize % PATH_RING))
        {
            *e = InflightEntry {
                msn,
                pkt: pkt as u16,
                state: EntryState::InFlight,
            };
        }
        let floor_delta = psn.wrapping_sub(p.una).min(SACK_BITS as u32) as u16;
        if let Some(u) = p.undo.as_mut() {
            // This packet's floor may move the receiver past the drained
            // PSNs, and its ring entry replaces that of `psn - PATH_RING`.
            u.sent_since = true;
            let kept = psn.wrapping_sub(PATH_RING as u32 - 1);
            if seq_diff(kept, u.lo) > 0 {
                u.lo = kept;
            }
            if seq_diff(u.lo, u.hi) >= 0 {
                p.undo = None;
            }
        }
        p.next_psn = psn.wrapping_add(1);
        p.inflight += 1;
        p.sent += 1;
        if is_retx {
            p.retransmitted += 1;
        }
        if p.timer.is_none() {
            p.timer = Some(now.saturating_add(rto));
            p.arm_tail_probe(now, pto, rto);
        }
        Some(TxPacket {
            kind: TxKind::Data {
                header: DataHeader {
                    opcode,
                    flags,
                    dst_qpn: self.cfg.dst_qpn,
                    path_id: p.id,
                    floor_delta,
                    psn,
                    msn,
                    offset,
                    msg_len,
                    payload_len: payload_len as u16,
                    rsn,
                    remote_va,
                    rkey,
                    imm: if opcode.has_imm() || opcode.is_response() {
                        imm
                    } else {
                        0
                    },
                    timestamp,
                },
                retransmit: is_retx.then_some(loss_cause),
            },
            src_port: p.src_port,
            plane: p.plane,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::ack_policy::DEFAULT_ACK_DELAY_NS;
    use super::super::config::ReceiverConfig;
    use super::super::receiver::{DropReason, Receiver, RxVerdict};
    use super::super::wire::Syndrome;
    use super::*;

    const MTU: u32 = 1000;

    /// The peer's receiver for `cfg`'s MTU.
    fn receiver() -> Receiver {
        Receiver::new(ReceiverConfig {
            peer_qpn: 0,
            mtu: MTU,
        })
        .unwrap()
    }

    /// Paths' windows from the first packet (no first-flight cap): these
    /// tests send whole windows before the first ACK.
    fn cfg(paths: u16, planes: u8) -> SenderConfig {
        SenderConfig {
            mtu: MTU,
            planes,
            initial_paths: paths,
            max_paths: 8,
            min_rto_ns: 1_000,
            initial_rto_ns: 10_000,
            first_flight: 0,
            ..SenderConfig::default()
        }
    }

    fn write(len: u32) -> Message {
        Message {
            opcode: Opcode::Write,
            len,
            remote_va: 0x1000,
            rkey: 1,
            imm: 0,
            rsn: 0,
        }
    }

    fn data(p: &TxPacket) -> DataHeader {
        match p.kind {
            TxKind::Data { header, .. } => header,
            TxKind::Probe(_) => panic!("expected data"),
        }
    }

    fn deliver(rx: &mut Receiver, tx: &mut Sender, h: &DataHeader, now: u64) -> RxVerdict {
        let v = rx.on_data(h, false, now);
        if let Some(a) = rx.ack_for(h.path_id) {
            tx.on_ack(&a, now + 10);
        }
        v
    }

    /// Fires `tx`'s timers every 5 us from `now` (up to 100 times), handing
    /// each data packet they release to `on_data`, until a send completes.
    fn timers_until_completion(
        tx: &mut Sender,
        mut now: u64,
        mut on_data: impl FnMut(&mut Sender, &DataHeader, u64),
    ) -> Option<TxCompletion> {
        for _ in 0..100 {
            now += 5_000;
            tx.on_timer(now);
            while let Some(p) = tx.next_packet(now) {
                if let TxKind::Data { header, .. } = p.kind {
                    on_data(tx, &header, now);
                }
            }
            if let Some(c) = tx.pop_completion() {
                return Some(c);
            }
        }
        None
    }

    /// Move every packet from `tx` to `rx` (and ACKs back) until idle.
    fn pump(tx: &mut Sender, rx: &mut Receiver, now: u64) {
        while let Some(p) = tx.next_packet(now) {
            let h = data(&p);
            assert!(!matches!(deliver(rx, tx, &h, now), RxVerdict::Drop(_)));
        }
    }

    /// Send everything due at `now`; only path slot `slot` delivers (data,
    /// and probes with their replies): the other paths black-hole.
    fn pump_only_path(tx: &mut Sender, rx: &mut Receiver, now: u64, slot: u16) {
        while let Some(p) = tx.next_packet(now) {
            match p.kind {
                TxKind::Data { header, .. } if header.path_id & 63 == slot => {
                    deliver(rx, tx, &header, now);
                }
                TxKind::Probe(pr) if pr.path_id & 63 == slot => {
                    tx.on_probe_reply(&rx.on_probe(&pr), now + 10);
                }
                _ => {}
            }
        }
    }

    /// `has_ready` is never false while `next_packet` has a packet (a
    /// deferred transmit that trusted it would stall the QP), through
    /// loss, timeouts and probes, and is false once everything is
    /// delivered.
    #[test]
    fn has_ready_never_hides_a_packet() {
        let mut tx = Sender::new(cfg(4, 2), 0).unwrap();
        let mut rx = receiver();
        assert!(!tx.has_ready());
        for k in 0..20 {
            tx.post(&write(5 * MTU + k)).unwrap();
        }
        assert!(tx.has_ready());
        let (mut now, mut sent, mut done, mut probes) = (0u64, 0u32, 0, 0);
        for _ in 0..20_000 {
            now += 2_000;
            tx.on_timer(now);
            let ready = tx.has_ready();
            // Path slot 0 is black-holed for the first half (its packets
            // are resent elsewhere, then it is probed until it answers);
            // elsewhere every 7th packet is lost.
            let dead = |path_id: u16| path_id & 63 == 0 && now < 20_000_000;
            match tx.next_packet(now).map(|p| p.kind) {
                Some(TxKind::Data { header, .. }) => {
                    assert!(ready);
                    sent += 1;
                    if sent % 7 != 0 && !dead(header.path_id) {
                        deliver(&mut rx, &mut tx, &header, now);
                    }
                }
                Some(TxKind::Probe(pr)) => {
                    assert!(ready);
                    probes += 1;
                    if !dead(pr.path_id) {
                        tx.on_probe_reply(&rx.on_probe(&pr), now + 10);
                    }
                }
                None => {}
            }
            while tx.pop_completion().is_some() {
                done += 1;
            }
        }
        assert_eq!(done, 20);
        assert!(probes > 0);
        assert!(!tx.has_ready());
        assert!(tx.next_packet(now).is_none());
    }

    #[test]
    fn read_request_and_response_flow() {
        // Requester A -> responder B: READ_REQ in A's send stream;
        // READ_RESP in B's send stream back to A, tagged with A's MSN.
        let mut a_tx = Sender::new(cfg(2, 1), 0).unwrap();
        let mut b_rx = receiver();
        let mut b_tx = Sender::new(cfg(2, 1), 0).unwrap();
        let mut a_rx = receiver();
        a_tx.post(&write(10)).unwrap();
        let read_msn = a_tx
            .post(&Message {
                opcode: Opcode::ReadReq,
                len: 2500,
                remote_va: 0xBEEF,
                rkey: 42,
                imm: 0,
                rsn: 0,
            })
            .unwrap();
        pump(&mut a_tx, &mut b_rx, 1);
        assert_eq!(b_rx.pop_completion().map(|c| c.opcode), Some(Opcode::Write));
        let req = b_rx.pop_completion().unwrap();
        assert_eq!(
            (req.opcode, req.len, req.remote_va, req.rkey),
            (Opcode::ReadReq, 2500, 0xBEEF, 42)
        );
        b_tx.post(&Message {
            opcode: Opcode::ReadResp,
            len: req.len,
            remote_va: 0,
            rkey: 0,
            imm: req.msn,
            rsn: 0,
        })
        .unwrap();
        let mut placed = 0;
        while let Some(p) = b_tx.next_packet(2) {
            let h = data(&p);
            assert_eq!(h.imm, read_msn);
            if let RxVerdict::Place(pl) = deliver(&mut a_rx, &mut b_tx, &h, 2) {
                placed += pl.len;
            }
        }
        assert_eq!(placed, 2500);
        let resp = a_rx.pop_completion().unwrap();
        assert_eq!(
            (resp.opcode, resp.imm, resp.len),
            (Opcode::ReadResp, Some(read_msn), 2500)
        );
        assert_eq!(a_tx.pop_completion().map(|c| c.opcode), Some(Opcode::Write));
        assert_eq!(
            a_tx.pop_completion().map(|c| c.opcode),
            Some(Opcode::ReadReq)
        );
        assert_eq!(
            b_tx.pop_completion().map(|c| c.opcode),
            Some(Opcode::ReadResp)
        );
    }

    /// An atomic goes like a READ: the request is one packet placed once
    /// (a retransmitted copy is a duplicate, so the responder never runs
    /// it twice), the response is a message of the responder's own stream
    /// naming the request's MSN, and the request's length is its operands'.
    #[test]
    fn atomic_request_executes_once_and_is_answered() {
        let mut a_tx = Sender::new(cfg(2, 1), 0).unwrap();
        let mut b_rx = receiver();
        let mut b_tx = Sender::new(cfg(2, 1), 0).unwrap();
        let mut a_rx = receiver();
        let swap = |len| Message {
            opcode: Opcode::CmpSwap,
            len,
            remote_va: 0x1008,
            rkey: 7,
            imm: 0,
            rsn: 0,
        };
        assert_eq!(a_tx.post(&swap(8)), Err(PostError::BadLength));
        let req_msn = a_tx.post(&swap(16)).unwrap();
        let p = a_tx.next_packet(1).unwrap();
        let h = data(&p);
        assert_eq!(
            (h.opcode, h.msg_len, h.payload_len, h.offset),
            (Opcode::CmpSwap, 16, 16, 0)
        );
        // The first copy is placed (executed), a second copy of the same
        // packet (a retransmission whose ACK was lost) is not.
        let mut executed = 0;
        for _ in 0..2 {
            match b_rx.on_data(&h, false, 2) {
                RxVerdict::Place(pl) => {
                    assert_eq!(
                        (pl.opcode, pl.remote_va, pl.rkey, pl.len),
                        (Opcode::CmpSwap, 0x1008, 7, 16)
                    );
                    executed += 1;
                }
                v => assert_eq!(v, RxVerdict::Duplicate),
            }
        }
        assert_eq!(executed, 1);
        let req = b_rx.pop_completion().unwrap();
        assert_eq!(
            (req.opcode, req.msn, req.imm),
            (Opcode::CmpSwap, req_msn, None)
        );
        // Once the request has completed, a late copy is a duplicate too.
        assert_eq!(b_rx.on_data(&h, false, 3), RxVerdict::Duplicate);
        assert!(b_rx.pop_completion().is_none());
        let resp = |len| Message {
            opcode: Opcode::AtomicResp,
            len,
            remote_va: 0,
            rkey: 0,
            imm: req.msn,
            rsn: 0,
        };
        assert_eq!(b_tx.post(&resp(16)), Err(PostError::BadLength));
        b_tx.post(&resp(8)).unwrap();
        let r = data(&b_tx.next_packet(4).unwrap());
        assert_eq!(
            (r.opcode, r.imm, r.payload_len),
            (Opcode::AtomicResp, req_msn, 8)
        );
        assert!(matches!(
            deliver(&mut a_rx, &mut b_tx, &r, 4),
            RxVerdict::Place(_)
        ));
        let done = a_rx.pop_completion().unwrap();
        assert_eq!((done.opcode, done.imm), (Opcode::AtomicResp, Some(req_msn)));
        assert_eq!(
            b_tx.pop_completion().map(|c| c.opcode),
            Some(Opcode::AtomicResp)
        );
    }

    #[test]
    fn empty_then_reset_in_place() {
        let mut tx: Sender = Sender::empty(Aimd);
        assert_eq!(tx.path_count(), 0);
        assert!(tx.next_packet(0).is_none());
        tx.reset(cfg(3, 1), 0).unwrap();
        assert_eq!(tx.path_count(), 3);
        assert_eq!(
            tx.reset(
                SenderConfig {
                    mtu: 0,
                    ..cfg(3, 1)
                },
                0
            ),
            Err(ConfigError::BadMtu)
        );
        let mut rx: Receiver = Receiver::EMPTY;
        rx.reset(ReceiverConfig {
            peer_qpn: 1,
            mtu: MTU,
        })
        .unwrap();
        assert!(rx.pop_completion().is_none());
    }

    #[test]
    fn sprays_round_robin_over_paths() {
        let mut tx = Sender::new(cfg(4, 2), 0).unwrap();
        tx.post(&write(8 * MTU)).unwrap();
        let mut slots = [0u32; 4];
        for _ in 0..8 {
            let p = tx.next_packet(0).unwrap();
            let h = data(&p);
            slots[(h.path_id & 63) as usize] += 1;
            assert_eq!(p.plane as u16, (h.path_id & 63) % 2);
        }
        assert_eq!(slots, [2, 2, 2, 2]);
    }

    /// A path whose window is full does not hand its turns to the next
    /// slot, a path of the other plane: its plane's other path takes them,
    /// and each plane carries half.
    #[test]
    fn a_full_path_leaves_its_turns_to_its_own_plane() {
        let mut tx = Sender::new(cfg(4, 2), 0).unwrap();
        for slot in 0..4 {
            let p = open_mut(&mut tx.paths, slot).unwrap();
            p.cc.cwnd = if slot == 0 { 2 } else { 8 } * crate::cc::CWND_ONE;
        }
        tx.post(&write(12 * MTU)).unwrap();
        let mut by_plane = [0u32; 2];
        let mut by_slot = [0u32; 4];
        for _ in 0..12 {
            let p = tx.next_packet(0).unwrap();
            by_plane[usize::from(p.plane)] += 1;
            by_slot[usize::from(data(&p).path_id & 63)] += 1;
        }
        // Round-robin over the slots gave planes 5 and 7 (slot 1 took
        // slot 0's turns).
        assert_eq!(by_plane, [6, 6]);
        assert_eq!(by_slot, [2, 3, 4, 3]);
    }

    /// A plane that could not send (its windows full, its paths down or
    /// new) makes up at most `PLANE_CLOCK_LAG` of what it missed.
    #[test]
    fn a_plane_that_could_not_send_makes_up_a_bounded_share() {
        let mut tx = Sender::new(cfg(4, 2), 0).unwrap();
        for _ in 0..1000 {
            tx.advance_plane_clock(0, 2);
        }
        let [c0, c1] = [tx.plane_clock[0], tx.plane_clock[1]];
        assert_eq!(c0 - c1, PLANE_CLOCK_LAG);
        // So plane 1 now takes 8 packets per path (16) before plane 0
        // has the least clock again.
        for _ in 0..16 {
            tx.advance_plane_clock(1, 2);
        }
        assert_eq!(tx.plane_clock[1], tx.plane_clock[0]);
        // Rebased before u32 runs out, the difference kept.
        tx.plane_clock = [
            u32::MAX - 3 * PLANE_CLOCK_UNIT,
            u32::MAX - 4 * PLANE_CLOCK_UNIT,
            0,
            0,
            0,
            0,
            0,
            0,
        ];
        tx.advance_plane_clock(1, 1);
        assert_eq!(tx.plane_clock[0], PLANE_CLOCK_LAG);
        assert_eq!(tx.plane_clock[1], PLANE_CLOCK_LAG);
        assert!(tx.plane_clock[2..].iter().all(|&c| c == 0));
    }

    /// Posts an 8-packet message and sends it all at `now`.
    fn send_eight(tx: &mut Sender, now: u64) -> [DataHeader; 8] {
        tx.post(&write(8 * MTU)).unwrap();
        core::array::from_fn(|_| data(&tx.next_packet(now).unwrap()))
    }

    /// Posts an 8-packet message on a one-path sender, sends it all at
    /// `now` (one clock reading, as the driver's pump does), and delivers
    /// its packets in `order`; returns the completion once nothing is
    /// left to send.
    fn deliver_in_order(
        tx: &mut Sender,
        rx: &mut Receiver,
        order: [usize; 8],
        now: u64,
    ) -> Option<TxCompletion> {
        let pkts = send_eight(tx, now);
        for i in order {
            deliver(rx, tx, &pkts[i], now + 8);
        }
        pump(tx, rx, now + 20);
        tx.pop_completion()
    }

    /// A path's timestamps strictly increase, a burst sent at one clock
    /// reading included: the echo orders its packets.
    #[test]
    fn a_burst_at_one_instant_is_stamped_in_send_order() {
        let mut tx = Sender::new(cfg(1, 1), 0).unwrap();
        tx.post(&write(4 * MTU)).unwrap();
        let ts: [u64; 4] = core::array::from_fn(|_| data(&tx.next_packet(500).unwrap()).timestamp);
        assert_eq!(ts, [500, 501, 502, 503]);
        tx.post(&write(MTU)).unwrap();
        assert_eq!(data(&tx.next_packet(900).unwrap()).timestamp, 900);
    }

    /// An ACK the network delayed is not reordering: it echoes an earlier
    /// send time than the ACK that declared a loss, but the receiver built
    /// it before the packet that overtook the hole had arrived.
    #[test]
    fn a_delayed_ack_does_not_raise_the_loss_threshold() {
        let mut tx = Sender::new(cfg(1, 1), 0).unwrap();
        let mut rx = receiver();
        let pkts = send_eight(&mut tx, 0);
        for h in &pkts[..2] {
            deliver(&mut rx, &mut tx, h, 10);
        }
        rx.on_data(&pkts[2], false, 10);
        let held = rx.ack_for(pkts[2].path_id).unwrap();
        // Packet 3 is lost; packet 4 proves it.
        deliver(&mut rx, &mut tx, &pkts[4], 20);
        assert_eq!(tx.stats().sack_losses, 1);
        tx.on_ack(&held, 30);
        assert_eq!(tx.stats().reorders, 0);
        assert_eq!(tx.path(0).unwrap().loss_threshold(1), 1);
    }

    /// A path that reorders learns to wait: the first packet overtaken on
    /// it is declared lost, and when it arrives after all (completing the
    /// message first: nothing is resent) the path's loss threshold
    /// doubles, so the same reordering costs nothing more; deeper
    /// reordering doubles it again. A path that never reordered keeps
    /// `reorder_threshold`.
    #[test]
    fn a_path_that_reorders_raises_its_loss_threshold() {
        let mut tx = Sender::new(cfg(1, 1), 0).unwrap();
        let mut rx = receiver();
        let ok = Some(CompletionStatus::Success);
        let mut run = |tx: &mut Sender, order, now| {
            let c = deliver_in_order(tx, &mut rx, order, now).map(|c| c.status);
            let st = tx.stats();
            (c, st.sack_losses, st.retransmits, st.reorders)
        };
        assert_eq!(run(&mut tx, [0, 1, 2, 3, 4, 5, 6, 7], 0), (ok, 0, 0, 0));
        assert_eq!(tx.path(0).unwrap().loss_threshold(1), 1);
        // Packet 0 overtaken by packet 1: lost by the rule, and shown
        // reordered when it arrives (its ACK echoes an earlier send
        // time than the ACK that declared it lost).
        let by_one = [1, 0, 2, 3, 4, 5, 6, 7];
        assert_eq!(run(&mut tx, by_one, 100), (ok, 1, 0, 1));
        assert_eq!(tx.path(0).unwrap().loss_threshold(1), 2);
        // The same again: no loss declared.
        assert_eq!(run(&mut tx, by_one, 200), (ok, 1, 0, 1));
        // Two overtaken by two: both lost, the threshold doubles once.
        let by_two = [2, 3, 0, 1, 4, 5, 6, 7];
        assert_eq!(run(&mut tx, by_two, 300), (ok, 3, 0, 2));
        assert_eq!(tx.path(0).unwrap().loss_threshold(1), 4);
        assert_eq!(run(&mut tx, by_two, 400), (ok, 3, 0, 2));
    }

    /// A declaration is shown reordering by the SACK bit of a PSN it made
    /// lost (resent data takes a new PSN), also when that ACK echoes a
    /// newer packet: on a path that reorders, a receiver answers only the
    /// lowest hole's fill at once, and with the lowest hole a real loss,
    /// the fill of a higher one goes with the next ACK, after newer
    /// packets.
    #[test]
    fn a_declared_loss_whose_psn_is_sacked_was_reordering() {
        let mut tx = Sender::new(cfg(1, 1), 0).unwrap();
        let mut rx = receiver();
        // Packet 0 overtaken: the path reorders, at both ends (the
        // receiver saw a fill, the sender's threshold is 2).
        deliver_in_order(&mut tx, &mut rx, [1, 0, 2, 3, 4, 5, 6, 7], 0).unwrap();
        assert_eq!((tx.stats().sack_losses, tx.stats().reorders), (1, 1));
        assert_eq!(tx.path(0).unwrap().loss_threshold(1), 2);
        // Packet 1 lost; packet 4 overtaken by 5 and 6 (declared lost by
        // them) and arriving before 7. The receiver ACKs as it would.
        let pkts = send_eight(&mut tx, 100);
        let mut echoes = [0u64; 8];
        let mut n = 0;
        for i in [0, 2, 3, 5, 6, 4, 7] {
            rx.on_data(&pkts[i], false, 108);
            if let Some(a) = rx.ack_now(pkts[i].path_id) {
                echoes[n] = a.ts_echo;
                n += 1;
                tx.on_ack(&a, 118);
            }
        }
        assert_eq!(tx.stats().sack_losses, 3);
        let at = rx.ack_deadline().unwrap();
        while let Some(a) = rx.flush(at) {
            echoes[n] = a.ts_echo;
            n += 1;
            tx.on_ack(&a, at + 10);
        }
        // No ACK echoed packet 4's timestamp, and its PSN is below the
        // sender's floor (packet 1 was declared lost too): the SACK bit
        // alone shows the reordering, and the threshold doubles again.
        assert!(
            !echoes[..n].contains(&pkts[4].timestamp),
            "{:?}",
            &echoes[..n]
        );
        assert_eq!(tx.stats().reorders, 2);
        assert_eq!(tx.path(0).unwrap().loss_threshold(1), 4);
    }

    /// A path whose reordering took time to show learns to wait that
    /// long: its holes are declared lost only once they have waited the
    /// path's reorder window (5/4 of the time the reordering took, at
    /// most its SRTT), so the same reordering again costs nothing, and a
    /// real loss is still found by the SACK rule one window after it
    /// showed, by the timer when no ACK follows, before any RTO.
    #[test]
    fn a_path_whose_reordering_took_time_waits_that_long() {
        let mut tx = Sender::new(cfg(1, 1), 0).unwrap();
        let mut rx = receiver();
        // 8 packets sent at `at` and delivered 40 us later, packet 0 first
        // if `late` is 0, else `late` after the others (never if `None`).
        let mut send = |tx: &mut Sender, at: u64, late: Option<u64>| {
            let pkts = send_eight(tx, at);
            if late == Some(0) {
                deliver(&mut rx, tx, &pkts[0], at + 40_000);
            }
            for h in &pkts[1..] {
                deliver(&mut rx, tx, h, at + 40_000);
            }
            if let Some(late) = late.filter(|&l| l > 0) {
                deliver(&mut rx, tx, &pkts[0], at + 40_000 + late);
            }
            let c = tx.pop_completion().map(|c| c.status);
            (c, tx.stats().sack_losses, tx.stats().reorders)
        };
        let ok = Some(CompletionStatus::Success);
        assert_eq!(send(&mut tx, 0, Some(0)), (ok, 0, 0));
        assert_eq!(tx.path(0).unwrap().reorder_window, 0);
        // Packet 0 overtaken, arriving 10 us after the hole showed: lost by
        // the rule, then shown reordered; the path waits 12.5 us from now.
        assert_eq!(send(&mut tx, 100_000, Some(10_000)), (ok, 1, 1));
        assert_eq!(tx.path(0).unwrap().reorder_window, 12_500);
        // The same again: nothing declared, nothing waits.
        assert_eq!(send(&mut tx, 200_000, Some(10_000)), (ok, 1, 1));
        assert!(tx.path(0).unwrap().reorder_wait.is_none());
        assert_eq!(tx.next_packet(260_000), None);
        // A real loss: it waits the window from the ACK that showed it
        // (at 340,010), then the timer declares it and it is resent.
        assert_eq!(send(&mut tx, 300_000, None), (None, 1, 1));
        assert_eq!(tx.next_deadline(), Some(340_010 + 12_500));
        tx.on_timer(340_010 + 12_499);
        assert_eq!(tx.stats().sack_losses, 1);
        tx.on_timer(340_010 + 12_500);
        assert_eq!(tx.stats().sack_losses, 2);
        pump(&mut tx, &mut rx, 360_000);
        assert_eq!(tx.pop_completion().map(|c| c.status), ok);
        assert_eq!((tx.stats().retransmits, tx.stats().timeouts), (1, 0));
    }

    /// A one-path sender (`reorder_threshold` as given, a 10 ms RTO
    /// floor) that completed one 8-packet message delivered 40 us after
    /// sending it, then sent a second at 100 us of which only the first
    /// `kept` packets arrive (at 140 us). Returns it, its peer, the second
    /// message's packets and when the path's tail probe is due.
    fn tail_lost(reorder_threshold: u32, kept: usize) -> (Sender, Receiver, [DataHeader; 8], u64) {
        let cfg = SenderConfig {
            min_rto_ns: 10_000_000,
            reorder_threshold,
            ..cfg(1, 1)
        };
        let mut tx = Sender::new(cfg, 0).unwrap();
        let mut rx = receiver();
        for h in send_eight(&mut tx, 0) {
            deliver(&mut rx, &mut tx, &h, 40_000);
        }
        assert!(tx.pop_completion().is_some());
        let pkts = send_eight(&mut tx, 100_000);
        for h in &pkts[..kept] {
            deliver(&mut rx, &mut tx, h, 140_000);
        }
        let srtt = tx.path(0).unwrap().rtt.srtt;
        (tx, rx, pkts, 140_010 + 2 * srtt + DEFAULT_ACK_DELAY_NS)
    }

    /// Delivers tail probe `probe` sent at `due` 40 us later and what
    /// its ACK releases; the message completes. Returns the sender's tail
    /// probes, retransmissions and timeouts.
    fn answer_probe(
        tx: &mut Sender,
        rx: &mut Receiver,
        probe: &DataHeader,
        due: u64,
    ) -> (u64, u64, u64) {
        deliver(rx, tx, probe, due + 40_000);
        pump(tx, rx, due + 50_000);
        assert_eq!(
            tx.pop_completion().map(|c| c.status),
            Some(CompletionStatus::Success)
        );
        let st = tx.stats();
        let on_paths: u64 = tx.used_paths().map(|p| p.tail_probes).sum();
        assert_eq!(on_paths, st.tail_probes, "each path counts its own");
        (st.tail_probes, st.retransmits, st.timeouts)
    }

    /// A path whose last packets are lost has nothing after them for the
    /// SACK rule: twice its SRTT (plus the peer's ACK delay) after its last
    /// ACK it sends its newest packet in flight again, whose ACK shows the
    /// holes, and the loss is repaired long before the retransmission
    /// timeout.
    #[test]
    fn a_lost_tail_is_found_by_a_tail_probe_not_a_timeout() {
        // Packets 6 and 7 are lost.
        let (mut tx, mut rx, pkts, due) = tail_lost(1, 6);
        assert_eq!(tx.next_deadline(), Some(due));
        tx.on_timer(due - 1);
        assert!(!tx.path(0).unwrap().tail_probe_due);
        tx.on_timer(due);
        assert!(tx.has_ready());
        let probe = data(&tx.next_packet(due).unwrap());
        assert_eq!((probe.psn, probe.offset), (16, pkts[7].offset));
        assert_ne!(probe.flags & FLAG_RETRANSMIT, 0);
        assert_eq!(tx.next_packet(due), None);
        // Its ACK shows PSNs 14 and 15 missing: packet 6 is resent (7
        // came with the probe), and the message completes.
        assert_eq!(answer_probe(&mut tx, &mut rx, &probe, due), (1, 2, 0));
        assert_eq!(tx.stats().timeout_losses, 0);
    }

    /// The tail probe is lost with the holes it was to show: the floor
    /// passes its PSN, and the ACK that covers it later finds nothing sent
    /// before it in flight (ef926c6: the walk down to such a floor went
    /// round the PSN space, declaring the packets after the probe lost).
    #[test]
    fn a_tail_probe_the_floor_passed_is_answered_without_a_walk() {
        // Packets 5, 6 and 7 of the second message (PSNs 13-15) are lost,
        // and so is the tail probe that resends packet 7 (PSN 16).
        let (mut tx, mut rx, _, due) = tail_lost(2, 5);
        tx.on_timer(due);
        let probe = data(&tx.next_packet(due).unwrap());
        assert_eq!(probe.psn, 16);
        // A third message (PSNs 17-24) arrives whole: the SACK rule
        // declares 13-16 lost and the floor passes them, the probe's PSN
        // among them, while the probe is still unanswered.
        for h in &send_eight(&mut tx, due + 1_000) {
            deliver(&mut rx, &mut tx, h, due + 40_000);
        }
        let p = tx.path(0).unwrap();
        assert_eq!((p.una, p.tail_probe_psn), (25, Some(16)));
        let before = tx.stats().retransmits;
        // Three resends (PSNs 25-27) tell the receiver the new floor; the
        // ACK of the second covers the probe's PSN. The third is in
        // flight: nothing says it is lost.
        let resends: [DataHeader; 3] =
            core::array::from_fn(|_| data(&tx.next_packet(due + 50_000).unwrap()));
        assert_eq!(resends.map(|h| h.psn), [25, 26, 27]);
        for h in &resends[..2] {
            deliver(&mut rx, &mut tx, h, due + 90_000);
        }
        let p = tx.path(0).unwrap();
        assert_eq!((p.una, p.inflight, p.tail_probe_psn), (27, 1, None));
        assert_eq!(tx.stats().retransmits, before + 3);
        assert_eq!(tx.stats().sack_losses, 4);
    }

    /// On a path that needs two PSNs above a hole (`reorder_threshold` 2,
    /// or a tolerance learned), the probe's ACK alone still ends a lost
    /// tail: what the path sent before the probe and still has in flight
    /// is lost. The probe's original, whose packet the probe delivered, is
    /// not resent and does not hold the path in flight into an RTO.
    #[test]
    fn a_tail_probe_answered_ends_the_tail_whatever_the_threshold() {
        // Packets 5, 6 and 7 are lost.
        let (mut tx, mut rx, pkts, due) = tail_lost(2, 5);
        tx.on_timer(due);
        let probe = data(&tx.next_packet(due).unwrap());
        assert_eq!((probe.psn, probe.offset), (16, pkts[7].offset));
        assert_eq!(answer_probe(&mut tx, &mut rx, &probe, due), (1, 3, 0));
        let p = tx.path(0).unwrap();
        assert_eq!((p.inflight, p.timer, p.tail_probe_psn), (0, None, None));
    }

    #[test]
    fn retransmits_exactly_the_lost_packet_on_another_path() {
        let mut tx = Sender::new(cfg(2, 1), 0).unwrap();
        let mut rx = receiver();
        tx.post(&write(6 * MTU)).unwrap();
        let pkts: [DataHeader; 6] = core::array::from_fn(|_| data(&tx.next_packet(0).unwrap()));
        // Lose the first packet of path 0; everything else arrives, with
        // path 1 overtaking path 0 (cross-path reordering).
        let lost = pkts[0];
        for i in [1, 3, 5, 2, 4] {
            let h = &pkts[i];
            assert!(matches!(
                deliver(&mut rx, &mut tx, h, 100),
                RxVerdict::Place(_)
            ));
        }
        assert_eq!(tx.stats().sack_losses, 1);
        let r = data(&tx.next_packet(200).unwrap());
        assert_eq!((r.msn, r.offset), (lost.msn, lost.offset));
        assert_ne!(
            r.path_id & 63,
            lost.path_id & 63,
            "retransmit avoids the lossy path"
        );
        assert!(r.flags & FLAG_RETRANSMIT != 0);
        assert!(tx.next_packet(200).is_none(), "nothing else is resent");
        assert!(matches!(
            deliver(&mut rx, &mut tx, &r, 300),
            RxVerdict::Place(_)
        ));
        assert_eq!(rx.pop_completion().map(|c| c.msn), Some(0));
        assert_eq!(
            tx.pop_completion().map(|c| c.status),
            Some(CompletionStatus::Success)
        );
        assert_eq!(tx.stats().retransmits, 1);
        assert_eq!(rx.stats().duplicates, 0);
    }

    #[test]
    fn each_path_counts_what_it_sent_and_lost() {
        let mut tx = Sender::new(cfg(2, 1), 0).unwrap();
        let mut rx = receiver();
        tx.post(&write(6 * MTU)).unwrap();
        let pkts: [DataHeader; 6] = core::array::from_fn(|_| data(&tx.next_packet(0).unwrap()));
        // The first packet is lost; the other five arrive.
        for h in &pkts[1..] {
            deliver(&mut rx, &mut tx, h, 100);
        }
        let r = data(&tx.next_packet(200).unwrap());
        let lossy = usize::from(pkts[0].path_id & 63);
        let other = usize::from(r.path_id & 63);
        let (a, b) = (tx.path(lossy).unwrap(), tx.path(other).unwrap());
        assert_ne!(lossy, other);
        // Three originals each; the retransmission went out on the other.
        assert_eq!((a.sent, a.retransmitted, a.sack_lost), (3, 0, 1));
        assert_eq!((b.sent, b.retransmitted, b.sack_lost), (4, 1, 0));
        assert_eq!(a.sent + b.sent, tx.stats().data_packets);
        assert_eq!((a.rtos, b.rtos), (0, 0));
    }

    #[test]
    fn dead_path_times_out_is_probed_then_replaced() {
        let mut tx = Sender::new(cfg(2, 1), 0).unwrap();
        let mut rx = receiver();
        tx.post(&write(4 * MTU)).unwrap();
        let old_port = tx.path(0).unwrap().src_port;
        let mut now = 0;
        // Path 0 black-holes everything; path 1 works.
        let mut done = false;
        for _ in 0..10_000 {
            now += 500;
            tx.on_timer(now);
            pump_only_path(&mut tx, &mut rx, now, 1);
            if rx.pop_completion().is_some() {
                done = true;
            }
            if done && tx.stats().paths_replaced > 0 {
                break;
            }
        }
        assert!(done, "message completes over the surviving path");
        assert!(tx.stats().timeouts >= 1);
        assert!(tx.stats().paths_replaced >= 1);
        let p0 = tx.path(0).unwrap();
        assert_ne!(p0.src_port, old_port, "replacement uses a new source port");
        assert_eq!(p0.state, PathState::Probing);
        assert_eq!(
            tx.pop_completion().map(|c| c.status),
            Some(CompletionStatus::Success)
        );
    }

    #[test]
    fn plane_down_drains_to_other_planes_and_comes_back() {
        let mut tx = Sender::new(cfg(4, 2), 0).unwrap();
        tx.post(&write(8 * MTU)).unwrap();
        for _ in 0..8 {
            tx.next_packet(0).unwrap();
        }
        tx.plane_down(1, 1);
        assert!(!tx.plane_usable(1));
        // The 4 packets that were on plane 1 are re-sprayed on plane 0.
        for _ in 0..4 {
            let p = tx.next_packet(1).unwrap();
            assert_eq!(p.plane, 0);
            assert!(matches!(
                p.kind,
                TxKind::Data {
                    retransmit: Some(LossCause::PlaneDown),
                    ..
                }
            ));
        }
        tx.plane_up(1, 2);
        let p = tx.next_packet(2).unwrap();
        assert!(matches!(p.kind, TxKind::Probe(_)));
        if let TxKind::Probe(pr) = p.kind {
            tx.on_probe_reply(&pr, 3);
        }
        assert!(tx.plane_usable(1));
    }

    #[test]
    fn a_connection_starting_elsewhere_drops_an_earlier_ones_packets() {
        // A packet of an earlier connection of the same QPN (MSN 0)...
        let mut old = Sender::new(cfg(1, 1), 0).unwrap();
        old.post(&write(MTU)).unwrap();
        let stale = data(&old.next_packet(0).unwrap());
        // ...reaches a connection whose ends agreed to start elsewhere.
        let start = 0x00ab_cdef;
        let mut tx = Sender::new(cfg(1, 1), 0).unwrap();
        assert!(tx.start_at(start, false));
        let mut rx = receiver();
        rx.start_at(start);
        assert_eq!(
            rx.on_data(&stale, false, 0),
            RxVerdict::Drop(DropReason::MessageOutOfWindow)
        );
        let m = tx.post(&write(MTU)).unwrap();
        assert_eq!(m, start);
        // Numbered once: renumbering after the first post does nothing.
        assert!(!tx.start_at(7, false));
        let h = data(&tx.next_packet(0).unwrap());
        assert_eq!(h.flags & FLAG_PEER_PSN, 0);
        assert!(matches!(rx.on_data(&h, false, 0), RxVerdict::Place(_)));
        tx.on_ack(&rx.ack_for(h.path_id).unwrap(), 10);
        assert_eq!(
            tx.pop_completion().map(|c| (c.msn, c.status)),
            Some((m, CompletionStatus::Success))
        );
        // The old connection's packet stays out once the start is settled.
        assert!(matches!(rx.on_data(&stale, false, 20), RxVerdict::Drop(_)));
    }

    /// A responder that answers READs before it has an initial PSN of its
    /// own (kept in RTR, as perftest's READ server is) numbers its
    /// responses from the requester's initial PSN and flags them; the
    /// requester's receiver takes them from that start only.
    #[test]
    fn a_responder_without_its_own_psn_numbers_from_the_requesters() {
        let (a_sq_psn, b_sq_psn) = (0x0012_3456, 0x0065_4321);
        // A: RTS; expects B's messages at B's PSN, or flagged at its own.
        let mut a_rx = receiver();
        a_rx.start_at(b_sq_psn);
        // B: RTR only; its rq_psn is A's sq_psn.
        let mut b_tx = Sender::new(cfg(1, 1), 0).unwrap();
        assert!(b_tx.start_at(a_sq_psn, true));
        let resp = |msn_of_req: u32| Message {
            opcode: Opcode::ReadResp,
            len: MTU,
            remote_va: 0,
            rkey: 0,
            imm: msn_of_req,
            rsn: 0,
        };
        assert_eq!(b_tx.post(&resp(a_sq_psn)).unwrap(), a_sq_psn);
        let h = data(&b_tx.next_packet(0).unwrap());
        assert_ne!(h.flags & FLAG_PEER_PSN, 0);
        // Until A knows its own start, a flagged packet has no window.
        assert_eq!(
            a_rx.on_data(&h, false, 0),
            RxVerdict::Drop(DropReason::MessageOutOfWindow)
        );
        a_rx.own_start(a_sq_psn);
        // The same MSN unflagged is not B's numbering: refused.
        let unflagged = DataHeader {
            flags: h.flags & !FLAG_PEER_PSN,
            ..h
        };
        assert!(matches!(
            a_rx.on_data(&unflagged, false, 0),
            RxVerdict::Drop(_)
        ));
        assert!(matches!(a_rx.on_data(&h, false, 1), RxVerdict::Place(_)));
        b_tx.on_ack(&a_rx.ack_for(h.path_id).unwrap(), 10);
        assert_eq!(
            b_tx.pop_completion().map(|c| (c.msn, c.status)),
            Some((a_sq_psn, CompletionStatus::Success))
        );
        // Settled: packets numbered from B's own PSN are now refused, and
        // the flagged numbering goes on.
        let mut other = Sender::new(cfg(1, 1), 0).unwrap();
        other.start_at(b_sq_psn, false);
        other.post(&write(MTU)).unwrap();
        let h2 = data(&other.next_packet(0).unwrap());
        assert_eq!(
            a_rx.on_data(&h2, false, 20),
            RxVerdict::Drop(DropReason::MessageOutOfWindow)
        );
        b_tx.post(&resp(a_sq_psn + 1)).unwrap();
        let h3 = data(&b_tx.next_packet(30).unwrap());
        assert_eq!(h3.msn, a_sq_psn + 1);
        assert!(matches!(a_rx.on_data(&h3, false, 30), RxVerdict::Place(_)));
    }

    /// A datagram has no connection and no start: the flag is malformed.
    #[test]
    fn peer_psn_flag_is_refused_on_a_datagram() {
        let h = DataHeader {
            opcode: Opcode::UdSend,
            flags: FLAG_PEER_PSN,
            dst_qpn: 1,
            path_id: 0,
            floor_delta: 0,
            psn: 0,
            msn: 0,
            offset: 0,
            msg_len: 4,
            payload_len: 4,
            rsn: 0,
            remote_va: 2,
            rkey: 0,
            imm: 0,
            timestamp: 0,
        };
        assert!(h.validate().is_err());
        assert!(DataHeader { flags: 0, ..h }.validate().is_ok());
    }

    #[test]
    fn forged_acks_off_path_or_window_confirm_nothing() {
        let mut tx = Sender::new(cfg(1, 1), 0).unwrap();
        let m0 = tx.post(&write(3 * MTU)).unwrap();
        // Every packet is sent and lost; only forged ACKs come back.
        let mut sent = [0u32; 3];
        let mut path = 0;
        for s in sent.iter_mut() {
            let h = data(&tx.next_packet(0).unwrap());
            (*s, path) = (h.psn, h.path_id);
            assert_eq!(h.msn, m0);
        }
        let forged = |path_id: u16, cum_psn: u32| Ack {
            dst_qpn: 0,
            path_id,
            ce: false,
            cum_psn,
            sack: [0; 4],
            ts_echo: 0,
            cum_msn: m0.wrapping_add(1),
            rate_hint_kbps: 1,
            msg_window: 0,
        };
        // Another generation of the path (a stale or guessed path id).
        let other_gen = path.wrapping_add(1 << crate::config::PATH_SLOT_BITS);
        tx.on_ack(&forged(other_gen, sent[0]), 10);
        // The right path, a cumulative PSN beyond what it carried.
        tx.on_ack(&forged(path, sent[2].wrapping_add(100)), 10);
        assert!(
            tx.pop_completion().is_none(),
            "a forged cum_msn confirmed a lost message"
        );
        assert_eq!(tx.rate_hint_kbps(), 0, "a forged ACK set the rate hint");
        assert_eq!(tx.stats().stale_acks, 2);
        // NAKs naming another generation, or a PSN the path never carried,
        // fail nothing.
        let nak = |path_id: u16, psn: u32| Nak {
            dst_qpn: 0,
            path_id,
            syndrome: Syndrome::RemoteAccess,
            psn,
            msn: m0,
        };
        tx.on_nak(&nak(other_gen, sent[0]));
        tx.on_nak(&nak(path, sent[2].wrapping_add(100)));
        assert_eq!(tx.stats().stale_naks, 2);
        assert!(
            tx.pop_completion().is_none(),
            "a forged NAK failed the message"
        );
        // The same NAK on the path and PSN that carried the message fails it.
        tx.on_nak(&nak(path, sent[0]));
        assert_eq!(
            tx.pop_completion().map(|c| c.status),
            Some(CompletionStatus::Failed(Syndrome::RemoteAccess))
        );
    }

    #[test]
    fn lost_nak_never_completes_the_failed_message_as_success() {
        let mut tx = Sender::new(cfg(2, 1), 0).unwrap();
        let mut rx = receiver();
        let m0 = tx.post(&write(3 * MTU)).unwrap();
        let now = 0;
        // The receiver fails the message on its first packet (say a bad
        // rkey); its NAK is lost, every ACK arrives.
        let first = data(&tx.next_packet(now).unwrap());
        assert!(matches!(
            rx.on_data(&first, false, now),
            RxVerdict::Place(_)
        ));
        rx.fail_message(m0, Syndrome::RemoteAccess, first.path_id, first.psn);
        assert!(rx.pop_nak().is_some());
        tx.on_ack(&rx.ack_for(first.path_id).unwrap(), now + 10);
        while let Some(p) = tx.next_packet(now) {
            let h = data(&p);
            assert_eq!(deliver(&mut rx, &mut tx, &h, now), RxVerdict::Discard);
            let _lost = rx.pop_nak();
        }
        // Every packet is acknowledged, but that is no verdict.
        assert!(
            tx.pop_completion().is_none(),
            "path ACKs alone complete nothing"
        );
        assert_eq!(tx.stats().verdict_probes, 0);
        // One RTO later the last packet goes again; this NAK arrives.
        let failed = timers_until_completion(&mut tx, now, |tx, h, now| {
            assert_eq!((h.msn, h.offset), (m0, 2 * MTU));
            assert_eq!(deliver(&mut rx, tx, h, now), RxVerdict::Discard);
            if let Some(nak) = rx.pop_nak() {
                tx.on_nak(&nak);
            }
        });
        assert_eq!(
            failed.map(|c| (c.msn, c.status)),
            Some((m0, CompletionStatus::Failed(Syndrome::RemoteAccess)))
        );
        assert!(tx.stats().verdict_probes >= 1);
        assert_eq!(tx.next_deadline(), None, "nothing left to watch");
    }

    /// The verdict probe's copy of an acknowledged last packet is queued,
    /// and `cum_msn` arrives before it goes (every path window full, say):
    /// nothing of the completed message is left to send.
    #[test]
    fn a_verdict_probe_not_sent_is_forgotten_at_the_verdict() {
        let mut tx = Sender::new(cfg(1, 1), 0).unwrap();
        let mut rx = receiver();
        let m0 = tx.post(&write(MTU)).unwrap();
        let h = data(&tx.next_packet(0).unwrap());
        assert!(matches!(rx.on_data(&h, false, 0), RxVerdict::Place(_)));
        // The ACK that carried the new cum_msn is lost; one of the path's
        // alone comes.
        let verdict = rx.ack_for(h.path_id).unwrap();
        assert_eq!(verdict.cum_msn, m0.wrapping_add(1));
        tx.on_ack(
            &Ack {
                cum_msn: m0,
                ..verdict
            },
            10,
        );
        assert!(tx.pop_completion().is_none());
        let due = tx.next_deadline().unwrap();
        tx.on_timer(due);
        assert_eq!(tx.stats().verdict_probes, 1);
        assert!(tx.has_ready(), "the last packet is queued again");
        tx.on_ack(&verdict, due + 10);
        assert_eq!(
            tx.pop_completion().map(|c| (c.msn, c.status)),
            Some((m0, CompletionStatus::Success))
        );
        assert!(!tx.has_ready(), "a completed message holds no loss");
        assert!(tx.next_packet(due + 20).is_none());
    }

    /// The responder's verbs layer put its QP in error after the failure
    /// (it processes no packet then), and every NAK so far was lost: the
    /// verdict probe is answered from `nak_again` alone, so the requester
    /// still learns the syndrome instead of exhausting its retries.
    #[test]
    fn a_responder_in_error_still_naks_the_failed_message() {
        let mut tx = Sender::new(cfg(1, 1), 0).unwrap();
        let mut rx = receiver();
        let m0 = tx.post(&write(MTU)).unwrap();
        let first = data(&tx.next_packet(0).unwrap());
        assert!(matches!(rx.on_data(&first, false, 0), RxVerdict::Place(_)));
        rx.fail_message(m0, Syndrome::RemoteAccess, first.path_id, first.psn);
        let _lost = rx.pop_nak();
        // The packet completed the message before it failed: still, its
        // ACK must not confirm it.
        tx.on_ack(&rx.ack_for(first.path_id).unwrap(), 10);
        assert!(tx.pop_completion().is_none());
        let c = rx.pop_completion().unwrap();
        assert_eq!(c.status, CompletionStatus::Failed(Syndrome::RemoteAccess));
        // From here on the QP is in error: packets go to `nak_again` only.
        let failed = timers_until_completion(&mut tx, 10, |tx, h, _| {
            if let Some(nak) = rx.nak_again(h) {
                tx.on_nak(&nak);
            }
        });
        assert_eq!(
            failed.map(|c| (c.msn, c.status)),
            Some((m0, CompletionStatus::Failed(Syndrome::RemoteAccess)))
        );
        // Another message's packet draws nothing.
        let other = DataHeader {
            msn: m0.wrapping_add(1),
            ..first
        };
        assert_eq!(rx.nak_again(&other), None);
    }

    #[test]
    fn delivered_message_waits_for_cum_msn_and_draws_it_when_acks_are_lost() {
        let mut tx = Sender::new(cfg(1, 1), 0).unwrap();
        let mut rx = receiver();
        let m0 = tx.post(&write(2 * MTU)).unwrap();
        let a = data(&tx.next_packet(0).unwrap());
        let b = data(&tx.next_packet(0).unwrap());
        // The first ACK (cum_msn 0, packet 0 delivered) arrives; the second
        // one, which would carry cum_msn 1, is lost. A SACK-only view of
        // packet 1 comes from a later ACK with a stale cum_msn.
        assert!(matches!(rx.on_data(&a, false, 0), RxVerdict::Place(_)));
        let stale = rx.ack_for(a.path_id).unwrap();
        assert!(matches!(rx.on_data(&b, false, 0), RxVerdict::Place(_)));
        let mut sacked = rx.ack_for(b.path_id).unwrap();
        assert_eq!(sacked.cum_msn, 1);
        sacked.cum_msn = stale.cum_msn;
        tx.on_ack(&sacked, 10);
        assert!(tx.pop_completion().is_none());
        // The verdict probe resends packet 1; its ACK brings cum_msn 1.
        tx.on_timer(20_000);
        let again = data(&tx.next_packet(20_000).unwrap());
        assert_eq!((again.msn, again.offset), (m0, MTU));
        assert_eq!(
            deliver(&mut rx, &mut tx, &again, 20_000),
            RxVerdict::Duplicate
        );
        assert_eq!(
            tx.pop_completion().map(|c| (c.msn, c.status)),
            Some((m0, CompletionStatus::Success))
        );
    }

    /// Two paths on one plane, giving up after `budget` ns without progress.
    fn with_retry_budget(budget: u64) -> Sender {
        Sender::new(
            SenderConfig {
                give_up_ns: budget,
                ..cfg(2, 1)
            },
            0,
        )
        .unwrap()
    }

    #[test]
    fn retry_budget_fails_every_outstanding_message_when_the_peer_is_gone() {
        let budget = 1_000_000;
        let mut tx = with_retry_budget(budget);
        let mut rx = receiver();
        // Idle for long, then a message that gets through: no give-up.
        let m0 = tx.post(&write(2 * MTU)).unwrap();
        pump(&mut tx, &mut rx, 10 * budget);
        assert_eq!(
            tx.pop_completion().map(|c| c.status),
            Some(CompletionStatus::Success)
        );
        assert_eq!(
            tx.next_deadline(),
            None,
            "no clock while nothing is outstanding"
        );
        // The peer disappears: nothing is acknowledged any more.
        let m1 = tx.post(&write(3 * MTU)).unwrap();
        let m2 = tx.post(&write(MTU)).unwrap();
        let mut now = 20 * budget;
        let mut out = None;
        while now < 23 * budget && out.is_none() {
            while tx.next_packet(now).is_some() {}
            now += 1_000;
            tx.on_timer(now);
            out = tx.pop_completion();
        }
        let gave_up = now - 20 * budget;
        assert!(
            (budget..budget + 10_000).contains(&gave_up),
            "gave up after {gave_up} ns"
        );
        assert_eq!(
            out.map(|c| (c.msn, c.status)),
            Some((m1, CompletionStatus::RetryExceeded))
        );
        assert_eq!(
            tx.pop_completion().map(|c| (c.msn, c.status)),
            Some((m2, CompletionStatus::RetryExceeded))
        );
        assert_eq!(tx.stats().give_ups, 1);
        assert!(m0 != m1);
        assert!(tx.next_packet(now).is_none(), "nothing left to send");
    }

    #[test]
    fn a_dead_path_does_not_spend_the_retry_budget_while_another_works() {
        let budget = 1_000_000;
        let mut tx = with_retry_budget(budget);
        let mut rx = receiver();
        let mut now = 0;
        let mut done = 0;
        // Path 0 black-holes everything for 5 budgets; path 1 works.
        while now < 5 * budget {
            if tx.outstanding() < 2 {
                tx.post(&write(4 * MTU)).unwrap();
            }
            pump_only_path(&mut tx, &mut rx, now, 1);
            while rx.pop_completion().is_some() {}
            while let Some(c) = tx.pop_completion() {
                assert_eq!(c.status, CompletionStatus::Success);
                done += 1;
            }
            now += 5_000;
            tx.on_timer(now);
        }
        assert!(done > 10, "{done} messages completed");
        assert_eq!(tx.stats().give_ups, 0);
    }

    #[test]
    fn nak_fails_only_that_message() {
        let mut tx = Sender::new(cfg(1, 1), 0).unwrap();
        let m0 = tx.post(&write(MTU)).unwrap();
        tx.next_packet(0).unwrap();
        tx.on_nak(&Nak {
            dst_qpn: 0,
            path_id: 0,
            syndrome: super::super::wire::Syndrome::RemoteAccess,
            psn: 0,
            msn: m0,
        });
        let c = tx.pop_completion().unwrap();
        assert_eq!(
            c.status,
            CompletionStatus::Failed(super::super::wire::Syndrome::RemoteAccess)
        );
        assert_eq!(tx.post(&write(0)), Ok(1));
        assert_eq!(
            tx.post(&Message {
                opcode: Opcode::UdSend,
                ..write(1)
            }),
            Err(PostError::BadOpcode)
        );
        assert_eq!(tx.post(&write(MTU * 1025)), Err(PostError::TooLong));
        assert_eq!(
            tx.post(&Message { rsn: 1, ..write(1) }),
            Err(PostError::BadRsn)
        );
        assert_eq!(
            tx.post(&Message {
                opcode: Opcode::Send,
                rsn: 1,
                ..write(1)
            }),
            Ok(2)
        );
    }

    /// A one-path sender whose first message went through: PSNs 0..4
    /// acknowledged, RTT 10 ns, RTO at the 1 us floor of `cfg`. Returns
    /// the last ACK it got.
    fn warmed_up() -> (Sender, Receiver, Ack) {
        let mut tx = Sender::new(cfg(1, 1), 0).unwrap();
        let mut rx = receiver();
        tx.post(&write(4 * MTU)).unwrap();
        let mut last = None;
        while let Some(p) = tx.next_packet(0) {
            let h = data(&p);
            rx.on_data(&h, false, 0);
            last = rx.ack_for(h.path_id);
            tx.on_ack(&last.unwrap(), 10);
        }
        assert_eq!(
            tx.pop_completion().map(|c| c.status),
            Some(CompletionStatus::Success)
        );
        (tx, rx, last.unwrap())
    }

    /// Sends every packet of one new 4-packet message at `now` and returns
    /// them, undelivered.
    fn send_held(tx: &mut Sender, now: u64) -> [DataHeader; 4] {
        tx.post(&write(4 * MTU)).unwrap();
        let held = core::array::from_fn(|_| data(&tx.next_packet(now).unwrap()));
        assert!(tx.next_packet(now).is_none());
        held
    }

    #[test]
    fn the_default_rto_floor_outlasts_a_scheduling_gap() {
        use super::super::config::MIN_RTO_NS;
        assert_eq!(SenderConfig::DEFAULT.min_rto_ns, MIN_RTO_NS);
        let mut r = RttEstimator::NONE;
        for _ in 0..32 {
            r.sample(7_000); // the simulator's fabric
        }
        let d = SenderConfig::DEFAULT;
        assert_eq!(
            r.rto(d.initial_rto_ns, d.min_rto_ns, d.max_rto_ns),
            MIN_RTO_NS
        );
        // Above the floor the RTO is SRTT + 4 RTTVAR.
        let mut slow = RttEstimator::NONE;
        slow.sample(20_000_000);
        assert_eq!(
            slow.rto(d.initial_rto_ns, d.min_rto_ns, d.max_rto_ns),
            60_000_000
        );
        // A packet whose ACK is held up 5 ms behind 7 us RTTs: no timeout.
        let (mut tx, mut rx) = one_path_with_defaults();
        tx.post(&write(2 * d.mtu)).unwrap();
        let first = data(&tx.next_packet(0).unwrap());
        rx.on_data(&first, false, 0);
        tx.on_ack(&rx.ack_for(first.path_id).unwrap(), 7_000);
        let second = data(&tx.next_packet(7_000).unwrap());
        tx.on_timer(5_007_000);
        assert_eq!(tx.stats().timeouts, 0);
        rx.on_data(&second, false, 5_007_000);
        tx.on_ack(&rx.ack_for(second.path_id).unwrap(), 5_007_000);
        assert_eq!(
            tx.pop_completion().map(|c| c.status),
            Some(CompletionStatus::Success)
        );
    }

    /// A sender with the default configuration on one path, and its peer's
    /// receiver.
    fn one_path_with_defaults() -> (Sender, Receiver) {
        let d = SenderConfig::DEFAULT;
        let tx = Sender::new(
            SenderConfig {
                initial_paths: 1,
                ..d
            },
            0,
        )
        .unwrap();
        let rx = Receiver::new(ReceiverConfig {
            peer_qpn: 0,
            mtu: d.mtu,
        })
        .unwrap();
        (tx, rx)
    }

    /// One message of one packet at `now`, its ACK `rtt` later, the
    /// timer run every millisecond in between (the driver's tick): the
    /// time the ACK came.
    fn ping_with_ticks(tx: &mut Sender, rx: &mut Receiver, now: u64, rtt: u64) -> u64 {
        tx.post(&write(MTU)).unwrap();
        let h = data(&tx.next_packet(now).unwrap());
        let mut t = now;
        while t + 1_000_000 < now + rtt {
            t += 1_000_000;
            tx.on_timer(t);
            // A timeout resends the packet (or probes): what goes out is
            // not what this test times.
            while tx.next_packet(t).is_some() {}
        }
        rx.on_data(&h, false, now + rtt);
        if let Some(a) = rx.ack_for(h.path_id) {
            tx.on_ack(&a, now + rtt);
        }
        while tx.pop_completion().is_some() {}
        now + rtt
    }

    #[test]
    fn a_scheduling_gap_seen_once_does_not_time_out_again() {
        const MS: u64 = 1_000_000;
        let d = SenderConfig::DEFAULT;
        let (mut tx, mut rx) = one_path_with_defaults();
        let mut now = MS;
        let steady = |tx: &mut Sender, rx: &mut Receiver, mut now: u64| {
            for _ in 0..100 {
                now = ping_with_ticks(tx, rx, now, 2 * MS);
            }
            now
        };
        now = steady(&mut tx, &mut rx, now);
        // A host that does not run for 15 ms: the ACK comes after the 10 ms
        // floor, the timeout was spurious.
        now = ping_with_ticks(&mut tx, &mut rx, now, 15 * MS);
        assert_eq!(tx.stats().timeouts, 1);
        assert_eq!(tx.stats().spurious_timeouts, 1);
        // A hundred ACKs later SRTT and RTTVAR have forgotten it; the QP's
        // peak has not, and the same gap again is not a timeout.
        now = steady(&mut tx, &mut rx, now);
        assert!(
            tx.path(0)
                .unwrap()
                .rtt
                .rto(d.initial_rto_ns, d.min_rto_ns, d.max_rto_ns)
                < 15 * MS
        );
        now = ping_with_ticks(&mut tx, &mut rx, now, 15 * MS);
        assert_eq!(tx.stats().timeouts, 1, "the same gap timed out twice");
        // Two seconds without a gap: the floor is the configured one again,
        // and a real tail loss is found within it.
        for _ in 0..2 {
            now = steady(&mut tx, &mut rx, now);
            now += RttPeak::INTERVAL_NS / 2;
            now = steady(&mut tx, &mut rx, now);
            now += RttPeak::INTERVAL_NS / 2;
        }
        now = steady(&mut tx, &mut rx, now);
        assert_eq!(tx.rto_floor(now), d.min_rto_ns);
        tx.post(&write(MTU)).unwrap();
        let _lost = tx.next_packet(now).unwrap();
        tx.on_timer(now + d.min_rto_ns + MS);
        assert_eq!(tx.stats().timeouts, 2);
    }

    #[test]
    fn a_late_ack_of_the_originals_undoes_a_spurious_timeout() {
        let (mut tx, mut rx, _) = warmed_up();
        let before = tx.path(0).unwrap().cc;
        let held = send_held(&mut tx, 100);
        // The ACKs are held up (a descheduled vCPU): the RTO fires.
        tx.on_timer(2_000);
        let p = tx.path(0).unwrap();
        assert_eq!((tx.stats().timeouts, p.state), (1, PathState::Probing));
        assert_eq!(p.rtos, 1, "the path counts its own timeout");
        assert!(p.acks > 0, "the path counts the ACKs that acknowledged");
        assert!(
            p.cc.window() < before.window(),
            "the timeout cut the window"
        );
        // Then the originals' ACKs arrive, echoing their timestamps (100,
        // before the timeout).
        for h in &held {
            assert!(!matches!(rx.on_data(h, false, 2_100), RxVerdict::Drop(_)));
            tx.on_ack(&rx.ack_for(h.path_id).unwrap(), 2_110);
        }
        let p = tx.path(0).unwrap();
        assert_eq!(tx.stats().spurious_timeouts, 1);
        assert_eq!(
            tx.stats().timeout_losses,
            4,
            "the timeout declared all four lost"
        );
        assert_eq!(p.state, PathState::Active);
        assert_eq!(
            (p.cc.cwnd, p.cc.ssthresh, p.backoff),
            (before.cwnd, before.ssthresh, 0),
            "window and backoff restored"
        );
        assert_eq!(tx.stats().late_acks, 4);
        // Nothing is left to resend: the late ACKs cancelled the queued
        // retransmissions, and cum_msn completed the message.
        assert_eq!(
            tx.pop_completion().map(|c| c.status),
            Some(CompletionStatus::Success)
        );
        assert!(tx.next_packet(2_200).is_none());
        assert_eq!(tx.stats().retransmits, 0);
    }

    #[test]
    fn a_timeout_answered_only_by_its_retransmissions_stays() {
        let (mut tx, mut rx, _) = warmed_up();
        let before = tx.path(0).unwrap().cc;
        let _lost = send_held(&mut tx, 100);
        tx.on_timer(2_000);
        // The probe is answered; the four packets go out again (new PSNs,
        // new timestamps) and their ACKs come back: nothing shows the
        // originals arrived, so the cut stays.
        let pr = match tx.next_packet(2_000).map(|p| p.kind) {
            Some(TxKind::Probe(pr)) => pr,
            k => panic!("expected a probe, got {k:?}"),
        };
        tx.on_probe_reply(&rx.on_probe(&pr), 2_010);
        pump(&mut tx, &mut rx, 2_020);
        assert_eq!(tx.stats().retransmits, 4);
        assert_eq!(tx.stats().timeout_losses, 4);
        assert_eq!(tx.stats().spurious_timeouts, 0);
        assert!(tx.path(0).unwrap().cc.window() < before.window());
        assert_eq!(
            tx.pop_completion().map(|c| c.status),
            Some(CompletionStatus::Success)
        );
    }

    /// Once the path sent again after the timeout, its packets' floor moves
    /// the receiver's `cum_psn` past drained PSNs it never got: a late ACK
    /// (an original that arrived after them) proves nothing by `cum_psn`,
    /// so a lost original is still resent and the message completes.
    #[test]
    fn a_late_ack_behind_a_newer_floor_acknowledges_no_lost_original() {
        let (mut tx, mut rx, _) = warmed_up();
        let held = send_held(&mut tx, 100);
        tx.on_timer(2_000);
        let pr = match tx.next_packet(2_000).map(|p| p.kind) {
            Some(TxKind::Probe(pr)) => pr,
            k => panic!("expected a probe, got {k:?}"),
        };
        tx.on_probe_reply(&rx.on_probe(&pr), 2_010);
        // One retransmission (floor = the drained PSNs' end) is delivered...
        let re = data(&tx.next_packet(2_020).unwrap());
        assert_eq!(re.flags & FLAG_RETRANSMIT, FLAG_RETRANSMIT);
        rx.on_data(&re, false, 2_030);
        tx.on_ack(&rx.ack_for(re.path_id).unwrap(), 2_040);
        // ...then the last original, reordered behind it (its ts_echo is
        // before the timeout, its cum_psn beyond every drained PSN).
        let last = held.last().unwrap();
        rx.on_data(last, false, 2_050);
        let late = rx.ack_for(last.path_id).unwrap();
        assert!(seq_diff(late.cum_psn, last.psn) > 0);
        tx.on_ack(&late, 2_060);
        assert_eq!(tx.stats().spurious_timeouts, 0);
        // The two originals that never arrived are still resent.
        let mut now = 2_100;
        for _ in 0..100 {
            pump(&mut tx, &mut rx, now);
            while rx.pop_completion().is_some() {}
            if tx.outstanding() == 0 || tx.pop_completion().is_some() {
                break;
            }
            now += 1_000;
            tx.on_timer(now);
        }
        assert_eq!(tx.outstanding(), 0, "the message completed");
    }

    #[test]
    fn acks_still_arriving_keep_a_probing_path_from_failing() {
        let (mut tx, _rx, old_ack) = warmed_up();
        let _lost = send_held(&mut tx, 100);
        let id = tx.path(0).unwrap().id;
        let mut now = 2_000;
        tx.on_timer(now);
        // Probes go unanswered, but an ACK of the path (a copy of an old
        // one: the path delivers, its probe replies are just slow) arrives
        // in every probe interval.
        for _ in 0..20 {
            while tx.next_packet(now).is_some() {}
            tx.on_ack(&old_ack, now + 1);
            now = tx.next_deadline().unwrap();
            tx.on_timer(now);
        }
        assert_eq!(tx.stats().paths_replaced, 0);
        assert!(tx.stats().probes_excused >= 19);
        assert_eq!(tx.path(0).unwrap().id, id);
        // Once nothing arrives any more, unanswered probes fail it.
        let mut rounds = 0;
        while tx.stats().paths_replaced == 0 && rounds < 10 {
            while tx.next_packet(now).is_some() {}
            now = tx.next_deadline().unwrap();
            tx.on_timer(now);
            rounds += 1;
        }
        assert_eq!(rounds, cfg(1, 1).path_fail_probes);
        assert_ne!(tx.path(0).unwrap().id, id);
    }

    /// The slots whose path is in use, from the states.
    fn in_use(tx: &Sender) -> u64 {
        (0..MAX_PATHS)
            .filter(|&s| tx.path(s).unwrap().state != PathState::Unused)
            .fold(0, |m, s| m | 1 << s)
    }

    /// A sender of `paths` paths over `planes` planes that may grow to 64.
    fn grower(paths: u16, planes: u8) -> Sender {
        Sender::new(
            SenderConfig {
                max_paths: 64,
                ..cfg(paths, planes)
            },
            0,
        )
        .unwrap()
    }

    #[test]
    fn a_growth_step_that_gains_nothing_retires_and_its_slots_reopen_anew() {
        let mut tx = grower(3, 1);
        growth_interval(&mut tx, 1, 100);
        growth_interval(&mut tx, 2, 100);
        assert_eq!((tx.used, tx.path_count()), (0b1_1111, 5));
        // The step's two paths carry nothing more: the rate stays.
        growth_interval(&mut tx, 3, 100);
        growth_interval(&mut tx, 4, 100);
        assert_eq!((tx.used, tx.path_count()), (0b111, 3));
        assert_eq!(tx.stats().paths_retired, 2);
        // Tried again after the hold: the slots open under generation 1.
        let mut k = 5;
        while tx.path_count() == 3 && k < 30 {
            growth_interval(&mut tx, k, 100);
            k += 1;
        }
        assert_eq!(tx.path_count(), 5, "no trial step by {k} RTOs");
        assert!(k >= 4 + 8, "a trial after {} intervals", k - 5);
        for slot in [3, 4] {
            assert_eq!(
                tx.path(slot).unwrap().id >> super::super::config::PATH_SLOT_BITS,
                1
            );
        }
    }

    /// One growth interval of `acked` packets ending at `k` initial RTOs,
    /// every path at the cap and the QP window-limited.
    fn growth_interval(tx: &mut Sender, k: u64, acked: u32) {
        let cap = tx.cfg.pwnd_max * super::super::cc::CWND_ONE;
        for p in tx.paths.iter_mut().flatten() {
            p.cc.cwnd = cap;
        }
        tx.window_limited = true;
        tx.growth.on_acked(acked);
        tx.maybe_grow(k * tx.cfg.initial_rto_ns);
    }

    /// Paths in use per plane.
    fn per_plane(tx: &Sender) -> [usize; MAX_PLANES] {
        let mut v = [0; MAX_PLANES];
        for p in tx.used_paths() {
            v[usize::from(p.plane)] += 1;
        }
        v
    }

    fn even(tx: &Sender) -> bool {
        let v = per_plane(tx);
        let planes = &v[..usize::from(tx.cfg.planes)];
        planes.iter().all(|&n| n == planes[0])
    }

    #[test]
    fn a_plane_added_while_a_step_is_judged_keeps_the_planes_even() {
        let mut tx = grower(3, 1);
        let rto = tx.cfg.initial_rto_ns;
        growth_interval(&mut tx, 1, 100);
        growth_interval(&mut tx, 2, 100);
        assert_eq!(tx.used, 0b1_1111);
        assert!(tx.add_planes(3, 2 * rto + 1));
        tx.plane_up(1, 2 * rto + 2);
        tx.plane_up(2, 2 * rto + 3);
        assert!(even(&tx), "{:?}", per_plane(&tx));
        // The step stood (the rate never grows: later steps are taken
        // back, not it), and the planes stay even.
        for k in 3..30 {
            growth_interval(&mut tx, k, 100);
            assert!(even(&tx), "after {k} intervals: {:?}", per_plane(&tx));
            assert!(tx.path_count() >= 6, "after {k} intervals: {:#b}", tx.used);
        }
        assert!(tx.stats().paths_retired > 0);
    }

    #[test]
    fn no_trial_step_while_a_retired_path_is_still_open() {
        let mut tx = grower(4, 2);
        growth_interval(&mut tx, 1, 100);
        growth_interval(&mut tx, 2, 100);
        assert_eq!(tx.used, 0xff);
        // Slot 5's last packet is still unanswered (its tail probe or
        // RTO pending) when the step is reverted.
        tx.paths[5].as_deref_mut().unwrap().inflight = 1;
        growth_interval(&mut tx, 3, 100);
        growth_interval(&mut tx, 4, 100);
        assert_eq!((tx.used, tx.retiring), (0b10_1111, 0b10_0000));
        for k in 5..40 {
            growth_interval(&mut tx, k, 100);
        }
        assert_eq!(tx.path_count(), 5, "a trial step beside a retiring path");
        tx.paths[5].as_deref_mut().unwrap().inflight = 0;
        tx.close_retired();
        let mut k = 40;
        while tx.path_count() == 4 && k < 400 {
            growth_interval(&mut tx, k, 100);
            k += 1;
        }
        assert_eq!((tx.used, even(&tx)), (0xff, true));
    }

    /// A path with packets in flight retires only once they are answered
    /// for: no new data goes on it meanwhile.
    #[test]
    fn a_retiring_path_takes_no_new_data_and_closes_when_empty() {
        let mut tx = Sender::new(cfg(2, 1), 0).unwrap();
        let mut rx = receiver();
        tx.post(&write(2 * MTU)).unwrap();
        let a = tx.next_packet(0).unwrap();
        assert_eq!(data(&a).path_id & 63, 0);
        tx.retiring = 1;
        tx.close_retired();
        assert_eq!(tx.path_count(), 2, "closed with a packet in flight");
        let b = tx.next_packet(0).unwrap();
        assert_eq!(data(&b).path_id & 63, 1);
        tx.post(&write(MTU)).unwrap();
        let c = tx.next_packet(0).unwrap();
        assert_eq!(data(&c).path_id & 63, 1, "new data on a retiring path");
        for pkt in [a, b, c] {
            deliver(&mut rx, &mut tx, &data(&pkt), 1_000);
        }
        assert_eq!((tx.used, tx.path_count()), (0b10, 1));
    }

    #[test]
    fn the_slot_mask_follows_opening_growth_replacement_and_reset() {
        let mut tx = Sender::new(
            SenderConfig {
                max_paths: 64,
                ..cfg(3, 1)
            },
            0,
        )
        .unwrap();
        assert_eq!((tx.used, in_use(&tx)), (0b111, 0b111));
        // Growth (the conditions of `maybe_grow`, set by hand, for two
        // intervals: the step needs one spent at the cap): 3 active paths
        // at their cap open 3 / 2 + 1 = 2 more, in the lowest free slots.
        for p in tx.paths.iter_mut().take(3).flatten() {
            p.cc.cwnd = tx.cfg.pwnd_max * super::super::cc::CWND_ONE;
        }
        tx.window_limited = true;
        tx.maybe_grow(tx.cfg.initial_rto_ns);
        assert_eq!(tx.path_count(), 3);
        tx.window_limited = true;
        tx.maybe_grow(2 * tx.cfg.initial_rto_ns);
        assert_eq!(
            (tx.used, in_use(&tx), tx.path_count()),
            (0b1_1111, 0b1_1111, 5)
        );
        // A replaced path keeps its slot; a drained plane keeps its slots.
        let mut rx = receiver();
        tx.post(&write(8 * MTU)).unwrap();
        let mut now = tx.cfg.initial_rto_ns;
        for _ in 0..200 {
            now += 5_000;
            tx.on_timer(now);
            pump_only_path(&mut tx, &mut rx, now, 1);
        }
        assert!(tx.stats().paths_replaced > 0);
        tx.plane_down(0, now);
        assert_eq!((tx.used, in_use(&tx)), (0b1_1111, 0b1_1111));
        // The spray visits exactly the used slots, round-robin from `rr`.
        tx.reset(cfg(2, 1), now).unwrap();
        assert_eq!((tx.used, in_use(&tx)), (0b11, 0b11));
        tx.post(&write(4 * MTU)).unwrap();
        let slots: [u16; 4] =
            core::array::from_fn(|_| data(&tx.next_packet(now).unwrap()).path_id & 63);
        assert_eq!(slots, [0, 1, 0, 1]);
    }

    /// Host timing of the data path's engine work per packet: 4 paths of
    /// 64 possible, every packet sent, received and acknowledged, the
    /// completions taken after each ACK (not an assertion: the machine may
    /// be busy; `valgrind --tool=callgrind` on the test binary counts
    /// instructions instead). Run with
    /// `cargo test -p metaroce-engine --release per_packet -- --ignored --nocapture`.
    #[test]
    #[ignore = "timing, prints ns per packet"]
    fn per_packet_engine_time() {
        extern crate std;
        use std::time::Instant;
        let mut tx = Sender::new(
            SenderConfig {
                max_paths: 64,
                ..cfg(4, 1)
            },
            0,
        )
        .unwrap();
        let mut rx = receiver();
        let mut now = 0;
        let mut packets = 0u64;
        let t = Instant::now();
        while packets < 2_000_000 {
            while tx.post(&write(64 * MTU)).is_ok() {}
            while let Some(p) = tx.next_packet(now) {
                let h = data(&p);
                rx.on_data(&h, false, now);
                if let Some(a) = rx.ack_for(h.path_id) {
                    tx.on_ack(&a, now + 1_000);
                }
                // As the driver does after each ACK.
                while rx.pop_completion().is_some() {}
                while tx.pop_completion().is_some() {}
                packets += 1;
            }
            now += 2_000;
            tx.on_timer(now);
        }
        let ns = t.elapsed().as_nanos() as f64 / packets as f64;
        std::println!("engine: {ns:.0} ns per packet (sender + receiver, 4 of 64 paths)");
    }
}
