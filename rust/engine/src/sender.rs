//! Sending side of a QP: message segmentation, spraying over paths,
//! per-path windows, SACK loss detection, selective retransmission, RTO,
//! path health (probe, replace, plane drain), path growth on long RTT and
//! in-order send completions.

use super::bitmap::{PktBitmap, MAX_MSG_PKTS};
use super::cc::{AckSignal, Aimd, CcParams, CongestionControl};
use super::completion::{CompletionStatus, TxCompletion};
use super::config::{ConfigError, SenderConfig, MAX_PATHS, MSG_WINDOW, PATH_GENERATIONS};
use super::path::{EntryState, InflightEntry, PathState, RttEstimator, TxPath, PATH_RING};
use super::seq::{seq_diff, seq_in_window};
use super::wire::{Ack, DataHeader, Nak, Opcode, Probe, FLAG_IMM, FLAG_RETRANSMIT, SACK_BITS};

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
    /// `MSG_WINDOW` messages are already outstanding.
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
}

/// What `next_packet` produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxKind {
    /// A data packet: the caller attaches `header.payload_len` bytes of
    /// message `header.msn` starting at `header.offset`.
    Data {
        /// Ready-to-encode header (timestamp = now).
        header: DataHeader,
        /// This packet was sent before and declared lost.
        retransmit: bool,
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
    /// Acknowledgements for packets already declared lost (the original
    /// arrived after all: a sign of spurious loss declaration).
    pub late_acks: u64,
    /// Probes sent.
    pub probes: u64,
    /// Paths replaced after unanswered probes.
    pub paths_replaced: u64,
    /// Paths opened beyond the initial set (long RTT growth).
    pub paths_opened: u64,
    /// ACKs for an unknown or stale path id.
    pub stale_acks: u64,
    /// NAKs received.
    pub naks: u64,
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
        late_acks: 0,
        probes: 0,
        paths_replaced: 0,
        paths_opened: 0,
        stale_acks: 0,
        naks: 0,
        verdict_probes: 0,
        give_ups: 0,
    };
}

#[derive(Clone, Copy, Debug)]
struct TxMsg {
    msn: u32,
    live: bool,
    opcode: Opcode,
    len: u32,
    npkts: u32,
    next_pkt: u32,
    acked: PktBitmap,
    acked_count: u32,
    lost: PktBitmap,
    lost_count: u32,
    remote_va: u64,
    rkey: u32,
    imm: u32,
    rsn: u16,
    failed: Option<super::wire::Syndrome>,
    /// The receiver's `cum_msn` passed it: completely received, not failed.
    confirmed: bool,
    /// The QP's retry budget passed without progress (`give_up`).
    retry_exceeded: bool,
    last_loss_slot: usize,
}

impl TxMsg {
    const EMPTY: Self = Self {
        msn: 0,
        live: false,
        opcode: Opcode::Send,
        len: 0,
        npkts: 0,
        next_pkt: 0,
        acked: PktBitmap::new(),
        acked_count: 0,
        lost: PktBitmap::new(),
        lost_count: 0,
        remote_va: 0,
        rkey: 0,
        imm: 0,
        rsn: 0,
        failed: None,
        confirmed: false,
        retry_exceeded: false,
        last_loss_slot: usize::MAX,
    };

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
    fn of(p: &TxPath) -> Self {
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

/// Number of packets of a message of `len` bytes.
pub fn packets_for(opcode: Opcode, len: u32, mtu: u32) -> u32 {
    if opcode == Opcode::ReadReq || len == 0 || mtu == 0 {
        1
    } else {
        len.div_ceil(mtu)
    }
}

/// The sending side of one QP, generic over the congestion control.
///
/// Plain data (`Copy`): a caller that must not build one on its stack (the
/// kernel: ~160 KiB) copies an [`Sender::empty`] value into heap memory.
#[derive(Clone, Copy)]
pub struct Sender<C: CongestionControl = Aimd> {
    cfg: SenderConfig,
    ccp: CcParams,
    cc: C,
    paths: [TxPath; MAX_PATHS],
    msgs: [TxMsg; MSG_WINDOW],
    head: u32,
    tail: u32,
    cursor: u32,
    lost_total: u32,
    rr: usize,
    qp_rtt: RttEstimator,
    rate_hint_mbps: u32,
    window_limited: bool,
    congested: bool,
    last_growth: u64,
    /// (MSN, time): when the oldest unfinished message, delivered but
    /// without a verdict, gets a packet resent to draw one (4.3).
    verdict_deadline: Option<(u32, u64)>,
    /// Last acknowledgement progress while messages are outstanding (None
    /// while none is on the wire): the retry budget's clock.
    progress_at: Option<u64>,
    stats: SenderStats,
}

impl Sender<Aimd> {
    /// A sender with the default AIMD congestion control.
    pub fn new(cfg: SenderConfig, now: u64) -> Result<Self, ConfigError> {
        Self::with_cc(cfg, Aimd, now)
    }
}

impl<C: CongestionControl> Sender<C> {
    /// A sender with a caller-chosen congestion control.
    pub fn with_cc(cfg: SenderConfig, cc: C, now: u64) -> Result<Self, ConfigError> {
        let mut s = Self::empty(cc);
        s.reset(cfg, now)?;
        Ok(s)
    }

    /// An idle sender with no paths, usable only after [`Sender::reset`].
    /// A `const fn`, so a kernel can box it (≈160 KB) without building it
    /// on the stack, then `reset` it in place.
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
            paths: [TxPath::UNUSED; MAX_PATHS],
            msgs: [TxMsg::EMPTY; MSG_WINDOW],
            head: 0,
            tail: 0,
            cursor: 0,
            lost_total: 0,
            rr: 0,
            qp_rtt: RttEstimator::NONE,
            rate_hint_mbps: 0,
            window_limited: false,
            congested: false,
            last_growth: 0,
            verdict_deadline: None,
            progress_at: None,
            stats: SenderStats::ZERO,
        }
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
            *p = TxPath::UNUSED;
        }
        for m in self.msgs.iter_mut() {
            *m = TxMsg::EMPTY;
        }
        self.head = 0;
        self.tail = 0;
        self.cursor = 0;
        self.lost_total = 0;
        self.rr = 0;
        self.qp_rtt = RttEstimator::NONE;
        self.rate_hint_mbps = 0;
        self.window_limited = false;
        self.congested = false;
        self.last_growth = now;
        self.verdict_deadline = None;
        self.progress_at = None;
        self.stats = SenderStats::ZERO;
        for slot in 0..usize::from(cfg.initial_paths) {
            self.open_path(slot, 0, PathState::Active, now);
        }
        Ok(())
    }

    /// Change the retry budget (`SenderConfig::give_up_ns`) in place; the
    /// verbs layer learns it after the QP started (RTR, then RTS).
    pub fn set_give_up_ns(&mut self, ns: u64) {
        self.cfg.give_up_ns = ns;
    }

    /// Configuration in use.
    pub fn config(&self) -> &SenderConfig {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> &SenderStats {
        &self.stats
    }

    /// Paths in use (any state but unused).
    pub fn path_count(&self) -> usize {
        self.paths
            .iter()
            .filter(|p| p.state != PathState::Unused)
            .count()
    }

    /// Paths currently carrying data.
    pub fn active_paths(&self) -> usize {
        self.paths
            .iter()
            .filter(|p| p.state == PathState::Active)
            .count()
    }

    /// True if at least one path of `plane` carries data.
    pub fn plane_usable(&self, plane: u8) -> bool {
        self.paths
            .iter()
            .any(|p| p.state == PathState::Active && p.plane == plane)
    }

    /// Read-only view of a path slot.
    pub fn path(&self, slot: usize) -> Option<&TxPath> {
        self.paths.get(slot)
    }

    /// Sum of per-path windows of active paths (QWND), in packets.
    pub fn qwnd(&self) -> u32 {
        self.paths
            .iter()
            .filter(|p| p.state == PathState::Active)
            .map(|p| p.cc.window())
            .sum()
    }

    /// Packets in flight over all paths.
    pub fn inflight(&self) -> u32 {
        self.paths.iter().map(|p| p.inflight).sum()
    }

    /// Messages posted but not yet returned by `pop_completion`.
    pub fn outstanding(&self) -> u32 {
        self.tail.wrapping_sub(self.head)
    }

    /// Receiver rate hint currently honoured (Mbit/s, 0 = none).
    pub fn rate_hint_mbps(&self) -> u32 {
        self.rate_hint_mbps
    }

    fn open_path(&mut self, slot: usize, generation: u16, state: PathState, now: u64) {
        let planes = self.cfg.planes.max(1) as usize;
        let seed = self.cfg.entropy_seed;
        let qp_rtt = self.qp_rtt;
        let ccp = self.ccp;
        if let Some(p) = self.paths.get_mut(slot) {
            p.reset(slot, generation, (slot % planes) as u8, seed);
            p.state = state;
            p.rtt = qp_rtt;
            p.probe_due = state == PathState::Probing;
            self.cc.init_path(&mut p.cc, &ccp, now);
        }
    }

    fn rto_of(&self, p: &TxPath) -> u64 {
        let base = p.rtt.rto(
            self.cfg.initial_rto_ns,
            self.cfg.min_rto_ns,
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
        let i = msn as usize % MSG_WINDOW;
        match self.msgs.get(i) {
            Some(m) if m.live && m.msn == msn => Some(i),
            _ => None,
        }
    }

    /// Queue a message; returns its MSN. Completions come back in MSN order.
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
        let npkts = packets_for(msg.opcode, msg.len, self.cfg.mtu);
        if npkts as usize > MAX_MSG_PKTS {
            return Err(PostError::TooLong);
        }
        if self.tail.wrapping_sub(self.head) as usize >= MSG_WINDOW {
            return Err(PostError::QueueFull);
        }
        let msn = self.tail;
        let m = self
            .msgs
            .get_mut(msn as usize % MSG_WINDOW)
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
            ..TxMsg::EMPTY
        };
        self.tail = self.tail.wrapping_add(1);
        Ok(msn)
    }

    /// Return the oldest message if it is finished (acknowledged or failed).
    pub fn pop_completion(&mut self) -> Option<TxCompletion> {
        if self.head == self.tail {
            return None;
        }
        let m = self.msgs.get_mut(self.head as usize % MSG_WINDOW)?;
        if !m.live || !m.done() {
            return None;
        }
        m.live = false;
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
    fn mark_lost(&mut self, msn: u32, pkt: u32, slot: usize) {
        let Some(i) = self.msg_index(msn) else { return };
        let Some(m) = self.msgs.get_mut(i) else {
            return;
        };
        if m.failed.is_none() && !m.acked.get(pkt) && m.lost.set(pkt) {
            m.lost_count += 1;
            m.last_loss_slot = slot;
            self.lost_total += 1;
        }
    }

    /// Move the floor of a path past resolved PSNs.
    fn advance_floor(&mut self, slot: usize) {
        let Some(p) = self.paths.get_mut(slot) else {
            return;
        };
        while p.una != p.next_psn {
            let e = p.entry(p.una);
            if e.state == EntryState::InFlight {
                break;
            }
            if let Some(e) = p.entry_mut(p.una) {
                *e = InflightEntry::EMPTY;
            }
            p.una = p.una.wrapping_add(1);
        }
    }

    /// Declare everything in flight on a path lost and empty it.
    fn drain_path(&mut self, slot: usize) {
        let Some(p) = self.paths.get(slot).map(PathView::of) else {
            return;
        };
        let mut psn = p.una;
        while psn != p.next_psn {
            let Some(p) = self.paths.get(slot) else {
                return;
            };
            let e = p.entry(psn);
            if e.state == EntryState::InFlight {
                self.mark_lost(e.msn, u32::from(e.pkt), slot);
            }
            psn = psn.wrapping_add(1);
        }
        if let Some(p) = self.paths.get_mut(slot) {
            p.ring = [InflightEntry::EMPTY; PATH_RING];
            p.una = p.next_psn;
            p.inflight = 0;
            p.timer = None;
        }
    }

    /// Process an ACK.
    pub fn on_ack(&mut self, ack: &Ack, now: u64) {
        self.rate_hint_mbps = ack.rate_hint_mbps;
        self.on_cum_msn(ack.cum_msn);
        let slot = (ack.path_id & super::config::PATH_SLOT_MASK) as usize;
        let Some(p) = self.paths.get(slot).map(PathView::of) else {
            return;
        };
        if p.state == PathState::Unused || p.id != ack.path_id {
            self.stats.stale_acks += 1;
            return;
        }
        let mut newly = 0u32;
        // Cumulative part: only meaningful if it lies within what we sent.
        let cum_ahead = seq_diff(ack.cum_psn, p.una);
        if cum_ahead < 0 || cum_ahead as u32 > p.span() {
            self.stats.stale_acks += 1;
            return;
        }
        let mut psn = p.una;
        while psn != ack.cum_psn {
            newly += self.ack_psn(slot, psn);
            psn = psn.wrapping_add(1);
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
        // Loss detection: a PSN with >= reorder_threshold acknowledged PSNs
        // above it on the same (order-preserving) path is lost.
        let mut lost = 0u32;
        if let Some(hi) = highest {
            let mut above = 0u32;
            let mut psn = hi;
            loop {
                let e = self.paths.get(slot).map(|p| p.entry(psn));
                match e {
                    Some(e) if e.state == EntryState::Acked => above += 1,
                    Some(e)
                        if e.state == EntryState::InFlight
                            && above >= self.cfg.reorder_threshold =>
                    {
                        self.mark_lost(e.msn, u32::from(e.pkt), slot);
                        if let Some(p) = self.paths.get_mut(slot) {
                            if let Some(en) = p.entry_mut(psn) {
                                en.state = EntryState::Lost;
                            }
                            p.inflight = p.inflight.saturating_sub(1);
                        }
                        lost += 1;
                    }
                    _ => {}
                }
                if psn == p.una {
                    break;
                }
                psn = psn.wrapping_sub(1);
            }
        }
        self.advance_floor(slot);
        let rto_now;
        let delayed_seen;
        {
            let Some(p) = self.paths.get_mut(slot) else {
                return;
            };
            if ack.ts_echo <= now {
                let r = now - ack.ts_echo;
                p.rtt.sample(r);
                self.qp_rtt.sample(r);
            }
            if newly > 0 {
                p.timeouts = 0;
                p.backoff = 0;
                if p.state == PathState::Probing {
                    p.state = PathState::Active;
                    p.probe_due = false;
                    p.probe_deadline = None;
                    p.probes_failed = 0;
                }
            }
            rto_now = p.rtt.rto(
                self.cfg.initial_rto_ns,
                self.cfg.min_rto_ns,
                self.cfg.max_rto_ns,
            );
            let srtt = if p.rtt.sampled { p.rtt.srtt } else { rto_now };
            // Twice the base RTT at least: jitter of the hosts themselves
            // (scheduling, a VM's vCPU) must not read as a queue.
            let target = self
                .cfg
                .delay_target_ns
                .max(p.rtt.min_rtt.saturating_mul(2));
            let delayed = self.cfg.delay_target_ns != 0
                && p.rtt.sampled
                && p.rtt.srtt.saturating_sub(p.rtt.min_rtt) > target;
            let sig = AckSignal {
                now,
                newly_acked: newly,
                ce: ack.ce,
                srtt,
                delayed,
            };
            delayed_seen = delayed;
            self.cc.on_ack(&mut p.cc, &self.ccp, &sig);
            if lost > 0 {
                self.cc.on_loss(&mut p.cc, &self.ccp, lost, now, srtt);
            }
            if p.inflight == 0 {
                p.timer = None;
            } else if newly > 0 || p.timer.is_none() {
                p.timer = Some(now.saturating_add(rto_now));
            }
        }
        self.stats.sack_losses += u64::from(lost);
        if newly > 0 && self.progress_at.is_some() {
            self.progress_at = Some(now);
        }
        if ack.ce || lost > 0 || delayed_seen {
            self.congested = true;
        }
        self.maybe_grow(now);
        self.watch_verdict(now);
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
            match self.msgs.get(msn as usize % MSG_WINDOW) {
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
            self.cfg.min_rto_ns,
            self.cfg.max_rto_ns,
        );
        match self.verdict_deadline {
            Some((m, t)) if m == msn && now >= t => {
                if let Some(m) = self.msgs.get_mut(msn as usize % MSG_WINDOW) {
                    let pkt = m.npkts.saturating_sub(1);
                    // Queued like a lost packet although it is acknowledged;
                    // its ACK changes nothing but brings `cum_msn`.
                    if m.lost.set(pkt) {
                        m.lost_count += 1;
                        m.last_loss_slot = usize::MAX;
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
        let Some(p) = self.paths.get_mut(slot) else {
            return 0;
        };
        let Some(e) = p.entry_mut(psn) else { return 0 };
        let prev = *e;
        match prev.state {
            EntryState::InFlight => {
                e.state = EntryState::Acked;
                p.inflight = p.inflight.saturating_sub(1);
                self.mark_acked(prev.msn, u32::from(prev.pkt));
                1
            }
            EntryState::Lost => {
                e.state = EntryState::Acked;
                self.stats.late_acks += 1;
                self.mark_acked(prev.msn, u32::from(prev.pkt));
                0
            }
            _ => 0,
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
            }
            if m.failed.is_none() && m.acked_count < m.npkts {
                for k in 0..m.npkts {
                    m.acked.set(k);
                }
                m.acked_count = m.npkts;
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
        let Some(i) = self.msg_index(nak.msn) else {
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
        let Some(p) = self.paths.get_mut(slot) else {
            return;
        };
        if p.id != probe.path_id || p.state != PathState::Probing || probe.seq != p.probe_seq {
            return;
        }
        if probe.timestamp <= now {
            let r = now - probe.timestamp;
            p.rtt.sample(r);
            self.qp_rtt.sample(r);
        }
        p.state = PathState::Active;
        p.probe_due = false;
        p.probe_deadline = None;
        p.probes_failed = 0;
        p.timeouts = 0;
        p.backoff = 0;
    }

    /// The caller learned that `plane` is down: drain its paths now.
    pub fn plane_down(&mut self, plane: u8) {
        for slot in 0..MAX_PATHS {
            let Some(p) = self.paths.get(slot) else {
                continue;
            };
            if p.state == PathState::Unused || p.plane != plane {
                continue;
            }
            self.drain_path(slot);
            if let Some(p) = self.paths.get_mut(slot) {
                p.state = PathState::Suspended;
                p.probe_due = false;
                p.probe_deadline = None;
            }
        }
    }

    /// The caller learned that `plane` is up: probe its paths.
    pub fn plane_up(&mut self, plane: u8) {
        for p in self.paths.iter_mut() {
            if p.state == PathState::Suspended && p.plane == plane {
                p.state = PathState::Probing;
                p.probe_due = true;
                p.probes_failed = 0;
                p.backoff = 0;
            }
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
        let mut msn = self.head;
        while msn != self.tail {
            if let Some(m) = self.msgs.get_mut(msn as usize % MSG_WINDOW) {
                if m.live && m.msn == msn && !m.done() {
                    m.retry_exceeded = true;
                    m.next_pkt = m.npkts;
                    m.lost.clear_all();
                    m.lost_count = 0;
                }
            }
            msn = msn.wrapping_add(1);
        }
        self.lost_total = 0;
        self.cursor = self.tail;
        self.verdict_deadline = None;
        self.progress_at = None;
        for p in self.paths.iter_mut() {
            p.ring = [InflightEntry::EMPTY; PATH_RING];
            p.una = p.next_psn;
            p.inflight = 0;
            p.timer = None;
        }
    }

    /// Earliest time `on_timer` has work to do.
    pub fn next_deadline(&self) -> Option<u64> {
        self.paths
            .iter()
            .filter(|p| p.state != PathState::Unused)
            .flat_map(|p| [p.timer, p.probe_deadline])
            .chain([self.verdict_deadline.map(|(_, t)| t), self.give_up_at()])
            .flatten()
            .min()
    }

    /// Run expired timers: RTO (drain path, start probing) and probe
    /// timeouts (retry, then replace the path with a fresh source port).
    pub fn on_timer(&mut self, now: u64) {
        if self.give_up_due(now) {
            self.give_up();
            return;
        }
        self.watch_verdict(now);
        for slot in 0..MAX_PATHS {
            let Some(p) = self.paths.get(slot).map(PathView::of) else {
                continue;
            };
            if p.state == PathState::Unused {
                continue;
            }
            if let Some(t) = p.timer {
                if now >= t {
                    self.stats.timeouts += 1;
                    self.drain_path(slot);
                    if let Some(p) = self.paths.get_mut(slot) {
                        p.timeouts = p.timeouts.saturating_add(1);
                        p.backoff = (p.backoff + 1).min(8);
                        self.cc.on_timeout(&mut p.cc, &self.ccp, now);
                        if p.state == PathState::Active {
                            p.state = PathState::Probing;
                            p.probe_due = true;
                        }
                    }
                }
            }
            let Some(p) = self.paths.get(slot).map(PathView::of) else {
                continue;
            };
            if let Some(t) = p.probe_deadline {
                if now >= t && p.state == PathState::Probing {
                    let failed = p.probes_failed + 1;
                    if failed >= self.cfg.path_fail_probes {
                        self.stats.paths_replaced += 1;
                        let gen = ((p.id >> super::config::PATH_SLOT_BITS) + 1) % PATH_GENERATIONS;
                        self.open_path(slot, gen, PathState::Probing, now);
                    } else if let Some(p) = self.paths.get_mut(slot) {
                        p.probes_failed = failed;
                        p.probe_deadline = None;
                        p.probe_due = true;
                        p.backoff = (p.backoff + 1).min(8);
                    }
                }
            }
        }
    }

    /// Open more paths when every active path is pinned at its window cap,
    /// the QP is window-limited and no congestion was seen for an RTT: the
    /// per-path cap cannot fill the bandwidth-delay product.
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
        let capped = self
            .paths
            .iter()
            .filter(|p| p.state == PathState::Active)
            .all(|p| p.cc.window() >= self.cfg.pwnd_max);
        if self.window_limited
            && !self.congested
            && capped
            && active > 0
            && used < self.cfg.max_paths as usize
        {
            let want = (active / 2 + 1).min(self.cfg.max_paths as usize - used);
            let mut opened = 0;
            for slot in 0..MAX_PATHS {
                if opened == want {
                    break;
                }
                if self.paths.get(slot).map(|p| p.state) == Some(PathState::Unused) {
                    self.open_path(slot, 0, PathState::Active, now);
                    opened += 1;
                    self.stats.paths_opened += 1;
                }
            }
        }
        self.window_limited = false;
        self.congested = false;
        self.last_growth = now;
    }

    /// QP-level cap in packets from the receiver rate hint.
    fn hint_cap(&self) -> Option<u32> {
        if self.rate_hint_mbps == 0 || !self.qp_rtt.sampled {
            return None;
        }
        // bytes = Mbit/s * ns / 8000; 25% headroom over the base RTT.
        let bytes = u64::from(self.rate_hint_mbps).saturating_mul(self.qp_rtt.min_rtt) / 8000;
        let pkts = bytes.saturating_mul(5) / 4 / u64::from(self.cfg.mtu.max(1));
        Some(pkts.clamp(2, u64::from(u32::MAX)) as u32)
    }

    fn find_lost(&self) -> Option<(u32, u32, usize)> {
        if self.lost_total == 0 {
            return None;
        }
        let mut msn = self.head;
        while msn != self.tail {
            if let Some(m) = self.msgs.get(msn as usize % MSG_WINDOW) {
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
            match self.msgs.get(self.cursor as usize % MSG_WINDOW) {
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
        for slot in 0..MAX_PATHS {
            let rto = match self.paths.get(slot) {
                Some(p)
                    if p.state == PathState::Probing
                        && p.probe_due
                        && plane.is_none_or(|pl| pl == p.plane) =>
                {
                    self.rto_of(p)
                }
                _ => continue,
            };
            let Some(p) = self.paths.get_mut(slot) else {
                continue;
            };
            p.probe_due = false;
            p.probe_seq = p.probe_seq.wrapping_add(1);
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
        let retx = self.find_lost();
        let (msn, pkt, avoid, is_retx) = match retx {
            Some((msn, pkt, avoid)) => (msn, pkt, avoid, true),
            None => {
                let msn = self.find_new()?;
                let m = self.msgs.get(msn as usize % MSG_WINDOW)?;
                (msn, m.next_pkt, usize::MAX, false)
            }
        };
        if let Some(cap) = self.hint_cap() {
            if self.inflight() >= cap {
                return None;
            }
        }
        // Spray: round-robin over paths with an open window, avoiding the
        // path that lost this packet when another one is available.
        let mut chosen = None;
        let mut fallback = None;
        for k in 0..MAX_PATHS {
            let slot = (self.rr + k) % MAX_PATHS;
            let Some(p) = self.paths.get(slot) else {
                continue;
            };
            if !self.path_open(p, plane) {
                continue;
            }
            if slot == avoid {
                fallback = Some(slot);
                continue;
            }
            chosen = Some(slot);
            break;
        }
        let Some(slot) = chosen.or(fallback) else {
            // Window-limited only if there were usable paths, all full (a
            // plane without active paths says nothing about the windows).
            let any_active = self
                .paths
                .iter()
                .any(|p| p.state == PathState::Active && plane.is_none_or(|pl| pl == p.plane));
            if any_active {
                self.window_limited = true;
            }
            return None;
        };
        self.rr = (slot + 1) % MAX_PATHS;
        let mtu = self.cfg.mtu;
        let m = self.msgs.get_mut(msn as usize % MSG_WINDOW)?;
        if is_retx {
            if m.lost.clear(pkt) {
                m.lost_count = m.lost_count.saturating_sub(1);
                self.lost_total = self.lost_total.saturating_sub(1);
            }
        } else {
            m.next_pkt += 1;
        }
        let offset = pkt.saturating_mul(mtu);
        let payload_len = if m.opcode == Opcode::ReadReq {
            0
        } else {
            m.len.saturating_sub(offset).min(mtu)
        };
        let mut flags = 0;
        if m.opcode.has_imm() {
            flags |= FLAG_IMM;
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
        let rto = self
            .paths
            .get(slot)
            .map(|p| self.rto_of(p))
            .unwrap_or(self.cfg.max_rto_ns);
        let p = self.paths.get_mut(slot)?;
        let psn = p.next_psn;
        if let Some(e) = p.entry_mut(psn) {
            *e = InflightEntry {
                msn,
                pkt: pkt as u16,
                state: EntryState::InFlight,
            };
        }
        let floor_delta = psn.wrapping_sub(p.una).min(SACK_BITS as u32) as u16;
        p.next_psn = psn.wrapping_add(1);
        p.inflight += 1;
        if p.timer.is_none() {
            p.timer = Some(now.saturating_add(rto));
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
                    timestamp: now,
                },
                retransmit: is_retx,
            },
            src_port: p.src_port,
            plane: p.plane,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::config::ReceiverConfig;
    use super::super::receiver::{Receiver, RxVerdict};
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

    fn cfg(paths: u16, planes: u8) -> SenderConfig {
        SenderConfig {
            mtu: MTU,
            planes,
            initial_paths: paths,
            max_paths: 8,
            min_rto_ns: 1_000,
            initial_rto_ns: 10_000,
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
        let mut tx = Sender::empty(Aimd);
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
        let mut rx = Receiver::EMPTY;
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
        tx.plane_down(1);
        assert!(!tx.plane_usable(1));
        // The 4 packets that were on plane 1 are re-sprayed on plane 0.
        for _ in 0..4 {
            let p = tx.next_packet(1).unwrap();
            assert_eq!(p.plane, 0);
            assert!(matches!(
                p.kind,
                TxKind::Data {
                    retransmit: true,
                    ..
                }
            ));
        }
        tx.plane_up(1);
        let p = tx.next_packet(2).unwrap();
        assert!(matches!(p.kind, TxKind::Probe(_)));
        if let TxKind::Probe(pr) = p.kind {
            tx.on_probe_reply(&pr, 3);
        }
        assert!(tx.plane_usable(1));
    }

    #[test]
    fn lost_nak_never_completes_the_failed_message_as_success() {
        let mut tx = Sender::new(cfg(2, 1), 0).unwrap();
        let mut rx = receiver();
        let m0 = tx.post(&write(3 * MTU)).unwrap();
        let mut now = 0;
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
        let mut failed = None;
        for _ in 0..100 {
            now += 5_000;
            tx.on_timer(now);
            while let Some(p) = tx.next_packet(now) {
                let h = data(&p);
                assert_eq!((h.msn, h.offset), (m0, 2 * MTU));
                assert_eq!(deliver(&mut rx, &mut tx, &h, now), RxVerdict::Discard);
                if let Some(nak) = rx.pop_nak() {
                    tx.on_nak(&nak);
                }
            }
            failed = tx.pop_completion();
            if failed.is_some() {
                break;
            }
        }
        assert_eq!(
            failed.map(|c| (c.msn, c.status)),
            Some((m0, CompletionStatus::Failed(Syndrome::RemoteAccess)))
        );
        assert!(tx.stats().verdict_probes >= 1);
        assert_eq!(tx.next_deadline(), None, "nothing left to watch");
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
}
