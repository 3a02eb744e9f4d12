//! Sender-side state of one path: a UDP source port (ECMP entropy) on one
//! plane, with its own PSN space, in-flight ring, RTT estimate, congestion
//! window, retransmission timer and health state.

use super::cc::PathCc;
use super::config::{PATH_GENERATIONS, PATH_SLOT_BITS, PATH_SLOT_MASK};
use super::delay_trial::DelayUndo;
use super::events::PathTag;
use super::wire::SACK_BITS;

/// In-flight ring size: PSNs in `[una, next_psn)` never exceed the SACK width.
pub const PATH_RING: usize = SACK_BITS;

/// A path's per-PSN records: PSN -> message packet, indexed by
/// `psn % PATH_RING`. Kept apart from [`TxPath`] and taken only when the
/// path first carries data (2 KiB: most of what a path costs).
pub type PathRing = [InflightEntry; PATH_RING];

/// A ring with every entry free.
pub const EMPTY_RING: PathRing = [InflightEntry::EMPTY; PATH_RING];

/// Largest reorder tolerance a path learns (protocol.md 4.2): beyond it a
/// reordering network costs spurious retransmissions rather than slower
/// loss detection.
pub const REORDER_TOLERANCE_MAX: u32 = 16;

/// Health of a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathState {
    /// Slot not in use.
    Unused,
    /// Carries data.
    Active,
    /// Timed out or new: carries only probes until one is answered.
    Probing,
    /// Its plane was reported down by the caller; silent until plane up.
    Suspended,
}

/// What became of one transmitted PSN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryState {
    /// Slot free.
    Empty,
    /// Sent, outcome unknown.
    InFlight,
    /// Acknowledged (cumulatively or selectively).
    Acked,
    /// Declared lost; its packet was queued for retransmission.
    Lost,
    /// In flight when its path was drained (retransmission timeout, plane
    /// down) and queued for retransmission. Kept behind the floor so that
    /// a late ACK of it can be told apart ([`RtoUndo`]).
    Drained,
}

/// Which message packet a PSN carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InflightEntry {
    /// Message sequence number.
    pub msn: u32,
    /// Packet index inside the message.
    pub pkt: u16,
    /// Outcome so far.
    pub state: EntryState,
}

impl InflightEntry {
    /// An unused ring entry.
    pub const EMPTY: Self = Self {
        msn: 0,
        pkt: 0,
        state: EntryState::Empty,
    };
}

/// RFC 6298-style smoothed RTT estimator (integer ns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RttEstimator {
    /// Smoothed RTT.
    pub srtt: u64,
    /// RTT variation.
    pub rttvar: u64,
    /// Smallest sample seen.
    pub min_rtt: u64,
    /// Smallest `srtt` since the first [`RttEstimator::SETTLED`] samples
    /// (0 before): the RTT with no queue of the path's own, as the average
    /// shows it rather than the luckiest sample (protocol.md 6.3).
    pub min_srtt: u64,
    /// Samples taken, up to [`RttEstimator::SETTLED`].
    pub samples: u8,
    /// At least one sample was taken.
    pub sampled: bool,
}

impl RttEstimator {
    /// No sample yet.
    pub const NONE: Self = Self {
        srtt: 0,
        rttvar: 0,
        min_rtt: 0,
        min_srtt: 0,
        samples: 0,
        sampled: false,
    };

    /// Samples after which `srtt` is an average rather than the first
    /// sample (its gain is 1/8) and counts towards `min_srtt`.
    pub const SETTLED: u8 = 8;

    /// Feed one RTT sample.
    pub fn sample(&mut self, rtt: u64) {
        if !self.sampled {
            self.srtt = rtt;
            self.rttvar = rtt / 2;
            self.min_rtt = rtt;
            self.sampled = true;
            self.samples = 1;
            return;
        }
        let err = self.srtt.abs_diff(rtt);
        self.rttvar = self.rttvar - self.rttvar / 4 + err / 4;
        self.srtt = self.srtt - self.srtt / 8 + rtt / 8;
        self.min_rtt = self.min_rtt.min(rtt);
        if self.samples < Self::SETTLED {
            self.samples += 1;
        } else if self.min_srtt == 0 || self.srtt < self.min_srtt {
            self.min_srtt = self.srtt;
        }
    }

    /// The least RTT a queue of the path's own is measured from: the
    /// least `srtt` once settled, else the least sample.
    pub fn base(&self) -> u64 {
        if self.min_srtt != 0 {
            self.min_srtt
        } else {
            self.min_rtt
        }
    }

    /// Retransmission timeout: `srtt + 4 * rttvar` within `[min, max]`.
    pub fn rto(&self, initial: u64, min: u64, max: u64) -> u64 {
        if !self.sampled {
            return initial.clamp(min, max);
        }
        self.srtt
            .saturating_add(self.rttvar.saturating_mul(4))
            .clamp(min, max)
    }
}

/// What a retransmission timeout changed on a path, kept until a data
/// packet sent since overwrites the drained PSNs' ring entries, so that a
/// late ACK can show the timeout was spurious and undo it (protocol.md 4.3).
#[derive(Clone, Copy, Debug)]
pub struct RtoUndo {
    /// When the timeout fired: an ACK whose `ts_echo` is before it answers
    /// a packet sent before the timeout, not a retransmission.
    pub at: u64,
    /// First drained PSN whose ring entry is still intact.
    pub lo: u32,
    /// The path's `next_psn` at the timeout: PSNs `[lo, hi)` were drained.
    pub hi: u32,
    /// A data packet went out on the path since the timeout: its floor
    /// (`hi` or later) may have moved the receiver's `cum_psn` past PSNs it
    /// never received, so only SACK bits still prove receipt.
    pub sent_since: bool,
    /// The timeout was found spurious and its effects restored.
    pub undone: bool,
    /// Congestion state before the timeout.
    pub cc: PathCc,
    /// Backoff before the timeout.
    pub backoff: u32,
    /// Consecutive timeouts before this one.
    pub timeouts: u32,
}

/// Sender-side state of one path.
#[derive(Clone, Copy, Debug)]
pub struct TxPath {
    /// Path id: generation << 6 | slot.
    pub id: u16,
    /// UDP source port (ECMP entropy) used by this path.
    pub src_port: u16,
    /// Plane (NIC port) this path leaves on.
    pub plane: u8,
    /// Health.
    pub state: PathState,
    /// Next PSN to send.
    pub next_psn: u32,
    /// Lowest PSN still in flight (the floor); `== next_psn` if none.
    pub una: u32,
    /// Packets in state `InFlight`. (Which PSN carried what is in the
    /// path's [`PathRing`], which the sender keeps.)
    pub inflight: u32,
    /// RTT estimate.
    pub rtt: RttEstimator,
    /// Congestion state.
    pub cc: PathCc,
    /// Retransmission timer deadline.
    pub timer: Option<u64>,
    /// Exponential backoff exponent for RTO and probes.
    pub backoff: u32,
    /// Consecutive timeouts without progress.
    pub timeouts: u32,
    /// Sequence number of the last probe sent.
    pub probe_seq: u32,
    /// A probe must be sent.
    pub probe_due: bool,
    /// Deadline of the outstanding probe.
    pub probe_deadline: Option<u64>,
    /// Consecutive unanswered probes.
    pub probes_failed: u32,
    /// When the outstanding (or last) probe was sent.
    pub probe_sent: u64,
    /// When the last ACK of this path (its current id, within what it
    /// sent) arrived: a path whose ACKs still arrive is not failed.
    pub last_ack: Option<u64>,
    /// The last retransmission timeout, while a late ACK may still undo it.
    pub undo: Option<RtoUndo>,
    /// Data packets sent on this path since it opened, retransmissions
    /// included (what it carried: the share of its plane).
    pub sent: u64,
    /// Of `sent`, retransmissions (of packets lost on any path).
    pub retransmitted: u64,
    /// Packets of this path declared lost from SACK holes.
    pub sack_lost: u64,
    /// Retransmission timeouts of this path.
    pub rtos: u64,
    /// ACKs of this path (its current id) that acknowledged something.
    pub acks: u64,
    /// Tail probes sent on this path.
    pub tail_probes: u64,
    /// Acknowledged PSNs above a hole that make it lost on this path:
    /// `reorder_threshold` until the path shows it reorders, then doubled
    /// at each loss the SACK rule declared wrongly, up to
    /// [`REORDER_TOLERANCE_MAX`] (protocol.md 4.2).
    pub reorder_tolerance: u32,
    /// After the SACK rule declared losses: what the ACK that did showed
    /// (see [`ReorderWatch`]).
    pub reorder_watch: Option<ReorderWatch>,
    /// How long a hole the SACK rule finds waits before it is declared lost
    /// (ns): 0 until a declaration on the path proves to be reordering,
    /// then 5/4 of the longest such reordering took to show, at most the
    /// path's smoothed RTT (protocol.md 4.2).
    pub reorder_window: u64,
    /// Holes waiting out `reorder_window`.
    pub reorder_wait: Option<ReorderWait>,
    /// When a tail probe is due if no ACK of the path brings progress
    /// first (protocol.md 4.3).
    pub tail_probe: Option<u64>,
    /// A tail probe must be sent.
    pub tail_probe_due: bool,
    /// PSN of the tail probe sent, until an ACK acknowledges it (or the
    /// path is drained).
    pub tail_probe_psn: Option<u32>,
    /// `timestamp` of the path's last data packet: a path's timestamps
    /// strictly increase (a burst sent at one clock reading takes 1 ns
    /// more a packet), so an echo tells which of two packets went first.
    pub last_ts: u64,
    /// The window before the path's first delayed ACK of the QP's open
    /// delay trial (protocol.md 6.3); dropped when a loss, ECN or timeout
    /// cut follows, which no trial undoes.
    pub delay_undo: Option<DelayUndo>,
}

/// The evidence on which the SACK rule declared losses on a path: `psn`,
/// the highest PSN the ACK that showed the holes acknowledged, `ts`, that
/// ACK's `ts_echo`, and `at`, when the losses were declared. A later ACK that
/// acknowledges `psn` too (so the receiver built it after that packet
/// arrived, not an ACK the network delayed) and echoes an earlier `ts`
/// answers a packet sent before the one that overtook the hole and
/// received after it: the path reorders (protocol.md 4.2). So does a later
/// ACK with the SACK bit of a PSN the declaration made lost (`lost`): that
/// PSN's own packet arrived, since resent data takes a new PSN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReorderWatch {
    /// `ts_echo` of the declaring ACK.
    pub ts: u64,
    /// Highest PSN the declaring ACK acknowledged.
    pub psn: u32,
    /// When the holes were seen (the declaring ACK's arrival, or the
    /// start of their wait): how long the reordering that proves them
    /// wrong took to show from then is how long a hole must wait.
    pub at: u64,
    /// The PSNs declared lost, the 64 below `psn`: bit `i` is PSN
    /// `psn - 1 - i` (lower ones are not watched).
    pub lost: u64,
    /// The path's `sent` at the declaration: `lost` names PSNs, which
    /// wrap, so it is read only until 2^31 more packets have gone.
    pub sent: u64,
}

impl ReorderWatch {
    /// The PSNs declared lost that the watch holds, while they are
    /// unambiguous (the path has sent `sent` packets).
    pub fn lost_psns(&self, sent: u64) -> impl Iterator<Item = u32> + '_ {
        let mut bits = if sent.wrapping_sub(self.sent) < 1 << 31 {
            self.lost
        } else {
            0
        };
        core::iter::from_fn(move || {
            (bits != 0).then(|| {
                let i = bits.trailing_zeros();
                bits &= bits - 1;
                self.psn.wrapping_sub(1).wrapping_sub(i)
            })
        })
    }
}

/// Holes the SACK rule found on a path with a reorder window, not yet
/// declared lost: they wait the window from `since` (protocol.md 4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReorderWait {
    /// Highest PSN acknowledged when the holes were seen: the holes below
    /// it are the ones waiting.
    pub psn: u32,
    /// `ts_echo` of the ACK that showed them (the evidence, as in
    /// [`ReorderWatch`]).
    pub ts: u64,
    /// When they were seen.
    pub since: u64,
}

impl TxPath {
    /// An unused slot.
    pub const UNUSED: Self = Self {
        id: 0,
        src_port: 0,
        plane: 0,
        state: PathState::Unused,
        next_psn: 0,
        una: 0,
        inflight: 0,
        rtt: RttEstimator::NONE,
        cc: PathCc {
            cwnd: 0,
            ssthresh: 0,
            alpha: 0,
            acked_in_epoch: 0,
            ce_in_epoch: 0,
            delayed_in_epoch: 0,
            undelayed_in_epoch: 0,
            losses_in_epoch: 0,
            epoch_end: 0,
            last_decrease: 0,
        },
        timer: None,
        backoff: 0,
        timeouts: 0,
        probe_seq: 0,
        probe_due: false,
        probe_deadline: None,
        probes_failed: 0,
        probe_sent: 0,
        last_ack: None,
        undo: None,
        sent: 0,
        retransmitted: 0,
        sack_lost: 0,
        rtos: 0,
        acks: 0,
        tail_probes: 0,
        reorder_tolerance: 0,
        reorder_watch: None,
        reorder_window: 0,
        reorder_wait: None,
        tail_probe: None,
        tail_probe_due: false,
        tail_probe_psn: None,
        last_ts: 0,
        delay_undo: None,
    };

    /// Slot part of the id.
    pub fn slot(&self) -> usize {
        (self.id & PATH_SLOT_MASK) as usize
    }

    /// Generation part of the id.
    pub fn generation(&self) -> u16 {
        self.id >> PATH_SLOT_BITS
    }

    /// The generation of the path that next takes this one's slot: a new
    /// id, whose PSNs the peer cannot mistake for this one's.
    pub fn next_generation(&self) -> u16 {
        (self.generation() + 1) % PATH_GENERATIONS
    }

    /// How events name this path.
    pub fn tag(&self) -> PathTag {
        PathTag {
            id: self.id,
            plane: self.plane,
            src_port: self.src_port,
        }
    }

    /// The `timestamp` of a data packet the path sends at `now`: `now`,
    /// or 1 ns after the path's last packet if that is later.
    pub fn stamp(&mut self, now: u64) -> u64 {
        let ts = if self.sent == 0 {
            now
        } else {
            now.max(self.last_ts.saturating_add(1))
        };
        self.last_ts = ts;
        ts
    }

    /// PSNs between the floor and the next PSN.
    pub fn span(&self) -> u32 {
        self.next_psn.wrapping_sub(self.una)
    }

    /// Acknowledged PSNs above a hole that make it lost now: the path's
    /// tolerance (at least `base`, the configured `reorder_threshold`),
    /// but never more than half the window (at least `base`), so that a
    /// small window still finds its losses by SACK, not by timeout.
    pub fn loss_threshold(&self, base: u32) -> u32 {
        let learned = self.reorder_tolerance.max(base);
        learned.min((self.cc.window() / 2).max(base))
    }

    /// The losses the SACK rule last declared on this path were
    /// reordering, shown `extent` ns after the declaration: its tolerance
    /// doubles (from `base`), and its reorder window grows to 5/4 of the
    /// extent, at most the path's SRTT: RACK's bound (RFC 8985), beyond
    /// which waiting costs a real loss more than a spurious resend costs.
    pub fn on_reordered(&mut self, base: u32, extent: u64) {
        self.reorder_tolerance = self
            .reorder_tolerance
            .max(base)
            .saturating_mul(2)
            .min(REORDER_TOLERANCE_MAX.max(base));
        let cap = if self.rtt.sampled { self.rtt.srtt } else { 0 };
        let want = extent.saturating_add(extent / 4).min(cap);
        self.reorder_window = self.reorder_window.max(want);
    }

    /// How long after an ACK that brought progress (or a first packet in
    /// flight) a path with no ACK since sends a tail probe: twice its SRTT
    /// plus `ack_delay`, the longest the peer's timer holds the ACK of a
    /// burst's tail (RFC 8985's PTO), but not before `peak`, the QP's peak
    /// RTT (an ACK may take that long without loss: a probe sooner is a
    /// duplicate, and on a scheduled host every path would send one at
    /// every gap); none before the path's first RTT sample.
    pub fn tail_probe_timeout(&self, ack_delay: u64, peak: u64) -> Option<u64> {
        self.rtt.sampled.then(|| {
            self.rtt
                .srtt
                .saturating_mul(2)
                .saturating_add(ack_delay)
                .max(peak)
        })
    }

    /// Arms the tail probe `pto` from `now` if it comes before the
    /// retransmission timeout `rto` (else the timer finds the loss first).
    pub fn arm_tail_probe(&mut self, now: u64, pto: Option<u64>, rto: u64) {
        self.tail_probe = pto.filter(|&t| t < rto).map(|t| now.saturating_add(t));
    }

    /// The reorder window as it applies now: at most the path's SRTT,
    /// which may have fallen since the window was learned.
    pub fn reorder_window_now(&self) -> u64 {
        if self.rtt.sampled {
            self.reorder_window.min(self.rtt.srtt)
        } else {
            self.reorder_window
        }
    }

    /// When the holes waiting out the reorder window are due.
    pub fn reorder_deadline(&self) -> Option<u64> {
        self.reorder_wait
            .map(|w| w.since.saturating_add(self.reorder_window_now()))
    }

    /// Nothing of the path is in flight any more (its packets drained, or
    /// the sender gave up on them): the floor at the next PSN, no timer, no
    /// tail probe armed, due or answered, no holes waiting.
    pub fn emptied(&mut self) {
        self.una = self.next_psn;
        self.inflight = 0;
        self.timer = None;
        self.tail_probe = None;
        self.tail_probe_due = false;
        self.tail_probe_psn = None;
        self.reorder_wait = None;
    }

    /// Reinitialise as generation `generation` of `slot`.
    pub fn reset(&mut self, slot: usize, generation: u16, plane: u8, seed: u32) {
        let generation = generation % PATH_GENERATIONS;
        *self = Self::UNUSED;
        self.id = (generation << PATH_SLOT_BITS) | (slot as u16 & PATH_SLOT_MASK);
        self.src_port = entropy_port(seed, self.id);
        self.plane = plane;
    }
}

/// UDP source port for a path id: a mixed hash into the dynamic range
/// 49152..=65535 so that each new generation lands on a new ECMP route.
pub fn entropy_port(seed: u32, path_id: u16) -> u16 {
    let mut x = seed ^ u32::from(path_id).wrapping_mul(0x9E37_79B1);
    x ^= x >> 16;
    x = x.wrapping_mul(0x85EB_CA6B);
    x ^= x >> 13;
    x = x.wrapping_mul(0xC2B2_AE35);
    x ^= x >> 16;
    0xC000 | (x as u16 & 0x3FFF)
}

#[cfg(test)]
mod tests {
    use super::super::cc::CWND_ONE;
    use super::*;

    /// The learned tolerance never exceeds half the path's window, nor
    /// [`REORDER_TOLERANCE_MAX`]: a small window still finds a real loss
    /// by SACK.
    #[test]
    fn the_loss_threshold_stays_within_half_the_window() {
        let mut p = TxPath::UNUSED;
        p.cc.cwnd = 8 * CWND_ONE;
        for _ in 0..10 {
            p.on_reordered(1, 0);
        }
        assert_eq!(p.reorder_tolerance, REORDER_TOLERANCE_MAX);
        assert_eq!(p.loss_threshold(1), 4);
        p.cc.cwnd = 2 * CWND_ONE;
        assert_eq!(p.loss_threshold(1), 1);
        p.cc.cwnd = 256 * CWND_ONE;
        assert_eq!(p.loss_threshold(1), REORDER_TOLERANCE_MAX);
        assert_eq!(
            p.loss_threshold(32),
            32,
            "a configured threshold above the cap stands"
        );
    }

    /// A watch names the PSNs it declared lost below its evidence PSN,
    /// across the PSN wrap, and none once the path has sent 2^31 more
    /// packets (a PSN named then may be a new packet's).
    #[test]
    fn a_watch_names_its_lost_psns_until_they_are_ambiguous() {
        let w = ReorderWatch {
            ts: 0,
            psn: 2,
            at: 0,
            lost: 1 | 1 << 3 | 1 << 63,
            sent: 1000,
        };
        let names = |sent| {
            let mut v = [0u32; 4];
            let mut n = 0;
            for psn in w.lost_psns(sent) {
                v[n] = psn;
                n += 1;
            }
            (n, v)
        };
        assert_eq!(names(1000), (3, [1, u32::MAX - 1, u32::MAX - 61, 0]));
        assert_eq!(names(1000 + (1 << 31) - 1).0, 3);
        assert_eq!(names(1000 + (1 << 31)).0, 0);
    }

    #[test]
    fn rtt_estimator() {
        let mut r = RttEstimator::default();
        assert_eq!(r.rto(500, 10, 1000), 500);
        r.sample(100);
        assert_eq!(r.rto(500, 10, 1000), 300);
        for _ in 0..100 {
            r.sample(100);
        }
        assert!(r.rto(500, 10, 1000) < 150);
        assert_eq!(r.rto(500, 200, 1000), 200);
    }

    #[test]
    fn ports_differ_per_generation() {
        let mut p = TxPath::UNUSED;
        p.reset(3, 0, 0, 1);
        let a = p.src_port;
        p.reset(3, 1, 0, 1);
        assert_ne!(a, p.src_port);
        assert!(p.src_port >= 0xC000);
        assert_eq!(p.slot(), 3);
        assert_eq!(p.generation(), 1);
    }
}
