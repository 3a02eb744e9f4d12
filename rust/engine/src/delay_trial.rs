//! The delay signal's check that its cuts lower the delay (protocol.md 6.3).
//!
//! A wait that the QP's own flight does not make (a host that runs its
//! network work in scheduled slices: a VM's vCPU, a busy softirq) reads as
//! queueing just as a queue does, and a base RTT taken while the hosts were
//! idle makes the loaded hosts' wait look like a standing queue. What tells
//! them apart is what sending less does: a queue the QP fills drains, a
//! host's wait stays. So a delayed ACK opens a *trial*, which averages the
//! QP's RTT samples over one SRTT, waits for the QP's flight to halve (the
//! delay cuts do that), lets one SRTT pass and averages again. The trial
//! ends
//! - *drained* when the delay above the base fell by a quarter: the queue
//!   was the QP's own, or one the others drain with it, and the cuts stand;
//! - *unanswered* when it did not: the delay is then measured from a
//!   *floor* at the second average (at most the excuse above the base, so
//!   that a standing queue of others never excuses more than that), and the
//!   windows the trial's delayed ACKs cut are given back;
//! - *expired* when the flight did not halve within [`TRIAL_SRTTS`] SRTTs
//!   (windows at their least, or the delay went away first): no change.
//!
//! No trial opens while the floor is at its cap (it could raise nothing).
//! The floor comes down to the mean RTT of any [`TRIAL_SRTTS`] SRTTs whose
//! mean is below it, so that a wait that goes away stops excusing, while a
//! wait that scatters (a scheduled host's does) keeps it.

/// A trial whose flight did not halve within this many of its first
/// SRTT ends without a verdict.
pub const TRIAL_SRTTS: u64 = 16;

/// The mean of the RTT samples of an interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Mean {
    sum: u64,
    n: u32,
}

impl Mean {
    fn add(&mut self, rtt: u64) {
        self.sum = self.sum.saturating_add(rtt);
        self.n = self.n.saturating_add(1);
    }

    fn get(&self) -> Option<u64> {
        (self.n > 0).then(|| self.sum / u64::from(self.n))
    }
}

/// An open trial.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Trial {
    /// When it opened (ns).
    at: u64,
    /// The QP's SRTT then: the length of the intervals it averages.
    span: u64,
    /// The base the delay was measured from then.
    base: u64,
    /// Packets the QP had in flight then.
    flight: u32,
    /// The samples of the first span.
    before: Mean,
    /// When the QP's flight first was at most half of `flight`.
    halved_at: Option<u64>,
    /// The samples of the second span after `halved_at` (the first lets
    /// a queue drain).
    after: Mean,
}

/// What a path's window was before the first delayed ACK of an open
/// trial: what an unanswered trial restores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DelayUndo {
    /// The window then (`CWND_ONE` units).
    pub cwnd: u32,
    /// Its slow-start threshold then.
    pub ssthresh: u32,
}

/// How a trial ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrialEnd {
    /// The delay fell with the flight: the cuts stand.
    Drained,
    /// Half the flight left three quarters of the delay: the floor rose,
    /// and the trial's delay cuts are to be undone.
    Unanswered,
    /// The flight did not halve in time: no verdict.
    Expired,
}

/// A QP's delay floor and its open trial.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DelayFloor {
    /// The least RTT the delay is measured from beside the base (ns; 0:
    /// none yet).
    floor: u64,
    trial: Option<Trial>,
    /// The samples since `watch_from`, whose mean lowers the floor.
    watch: Mean,
    watch_from: u64,
}

impl DelayFloor {
    /// No floor, no trial.
    pub const NONE: Self = Self {
        floor: 0,
        trial: None,
        watch: Mean { sum: 0, n: 0 },
        watch_from: 0,
    };

    /// What the delay is measured from, given the base RTT.
    pub fn base(&self, base: u64) -> u64 {
        base.max(self.floor)
    }

    /// The floor (ns, 0: none).
    pub fn floor(&self) -> u64 {
        self.floor
    }

    /// A trial is open: delayed ACKs now keep what their cuts would undo.
    pub fn in_trial(&self) -> bool {
        self.trial.is_some()
    }

    /// Whether a delayed ACK now belongs to a trial, open or to be opened
    /// by it (`cap` the highest floor allowed): only then does a path keep
    /// the window the trial would give back.
    pub fn trial_for_delay(&self, cap: u64) -> bool {
        self.trial.is_some() || self.floor < cap
    }

    /// A delayed ACK at `now`, the QP's SRTT `srtt` and `flight` packets in
    /// flight, the delay measured from `base` (already floored), `cap` the
    /// highest floor allowed (the base plus the excuse): opens a trial
    /// unless one is open or the floor is at its cap.
    pub fn on_delayed(&mut self, now: u64, srtt: u64, base: u64, flight: u32, cap: u64) {
        if self.trial.is_none() && self.trial_for_delay(cap) {
            self.trial = Some(Trial {
                at: now,
                span: srtt.max(1),
                base,
                flight,
                before: Mean::default(),
                halved_at: None,
                after: Mean::default(),
            });
        }
    }

    /// An RTT sample `rtt` at `now` made the QP's SRTT `srtt`; it has
    /// `flight` packets in flight, and `cap` is the highest floor allowed.
    /// Ends the open trial when it has a verdict.
    pub fn on_sample(
        &mut self,
        now: u64,
        rtt: u64,
        srtt: u64,
        flight: u32,
        cap: u64,
    ) -> Option<TrialEnd> {
        self.watch_floor(now, rtt, srtt);
        let t = self.trial.as_mut()?;
        let since = now.saturating_sub(t.at);
        let Some(h) = t.halved_at else {
            if since < t.span {
                t.before.add(rtt);
            } else if flight.saturating_mul(2) <= t.flight {
                t.halved_at = Some(now);
            } else if since >= t.span.saturating_mul(TRIAL_SRTTS) {
                self.trial = None;
                return Some(TrialEnd::Expired);
            }
            return None;
        };
        let since = now.saturating_sub(h);
        if since < t.span {
            return None;
        }
        if since < t.span.saturating_mul(2) {
            t.after.add(rtt);
            return None;
        }
        let (Some(before), Some(after)) = (t.before.get(), t.after.get()) else {
            self.trial = None;
            return Some(TrialEnd::Expired);
        };
        let (b, a) = (before.saturating_sub(t.base), after.saturating_sub(t.base));
        self.trial = None;
        if a.saturating_mul(4) <= b.saturating_mul(3) {
            return Some(TrialEnd::Drained);
        }
        self.floor = self.floor.max(after.min(cap));
        self.watch = Mean::default();
        self.watch_from = now;
        Some(TrialEnd::Unanswered)
    }

    /// Lowers the floor to the mean of the samples of each
    /// [`TRIAL_SRTTS`] SRTTs if that is below it.
    fn watch_floor(&mut self, now: u64, rtt: u64, srtt: u64) {
        if self.floor == 0 {
            return;
        }
        self.watch.add(rtt);
        if now.saturating_sub(self.watch_from) < srtt.saturating_mul(TRIAL_SRTTS) {
            return;
        }
        if let Some(m) = self.watch.get() {
            self.floor = self.floor.min(m);
        }
        self.watch = Mean::default();
        self.watch_from = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Opens a trial at 0 (SRTT 10 ms, base 2 ms, 100 packets in flight)
    /// and feeds it `before` for its first span, then `after` once the
    /// flight is `flight`, one sample a millisecond until it ends.
    fn trial(f: &mut DelayFloor, before: u64, flight: u32, after: u64) -> (u64, TrialEnd) {
        f.on_delayed(0, 10 * MS, 2 * MS, 100, 7 * MS);
        let mut now = 0;
        while now < 10 * MS {
            assert_eq!(f.on_sample(now, before, before, 100, 7 * MS), None);
            now += MS;
        }
        loop {
            if let Some(end) = f.on_sample(now, after, after, flight, 7 * MS) {
                return (now, end);
            }
            now += MS;
            assert!(now < 1000 * MS, "a trial ends");
        }
    }

    #[test]
    fn a_delay_that_falls_with_the_flight_drains_the_trial() {
        let mut f = DelayFloor::NONE;
        // 10 ms of delay before, 7 after: down by more than a quarter.
        let (at, end) = trial(&mut f, 12 * MS, 50, 9 * MS);
        assert_eq!(end, TrialEnd::Drained);
        assert_eq!(at, 30 * MS, "halved at 10, drained to 20, averaged to 30");
        assert_eq!(f.base(2 * MS), 2 * MS, "no floor");
        assert!(!f.in_trial());
    }

    #[test]
    fn a_delay_that_half_the_flight_leaves_raises_the_floor() {
        let mut f = DelayFloor::NONE;
        let (_, end) = trial(&mut f, 8 * MS, 50, 7 * MS);
        assert_eq!(end, TrialEnd::Unanswered, "5 of 6 ms stayed");
        assert_eq!(f.base(2 * MS), 7 * MS);
        // The floor comes down to a mean of 16 SRTTs below it, never up
        // but by a trial: a scattered wait whose mean stays keeps it.
        let mut now = 100 * MS;
        for i in 0..200 {
            // Samples of 3 and 13 ms: single ones far below the floor.
            let rtt = if i % 2 == 0 { 3 * MS } else { 13 * MS };
            f.on_sample(now, rtt, 8 * MS, 50, 7 * MS);
            now += MS;
        }
        assert_eq!(f.base(2 * MS), 7 * MS, "a mean of 8 ms");
        for _ in 0..200 {
            f.on_sample(now, 5 * MS, 5 * MS, 50, 7 * MS);
            now += MS;
        }
        assert_eq!(f.base(2 * MS), 5 * MS, "the wait shrank");
        for _ in 0..200 {
            f.on_sample(now, 20 * MS, 20 * MS, 50, 7 * MS);
            now += MS;
        }
        assert_eq!(f.base(2 * MS), 5 * MS, "never up but by a trial");
        // And never above the cap.
        let mut g = DelayFloor::NONE;
        let (_, end) = trial(&mut g, 12 * MS, 50, 12 * MS);
        assert_eq!(end, TrialEnd::Unanswered);
        assert_eq!(g.base(2 * MS), 7 * MS, "capped");
        assert!(!g.trial_for_delay(7 * MS), "no path keeps a window for it");
        g.on_delayed(500 * MS, 10 * MS, 7 * MS, 100, 7 * MS);
        assert!(!g.in_trial(), "a floor at its cap opens no trial");
    }

    #[test]
    fn a_trial_whose_flight_does_not_halve_expires() {
        let mut f = DelayFloor::NONE;
        let (at, end) = trial(&mut f, 12 * MS, 51, 12 * MS);
        assert_eq!(end, TrialEnd::Expired);
        assert_eq!(at, 160 * MS);
        assert_eq!(f.base(2 * MS), 2 * MS);
        f.on_delayed(170 * MS, 10 * MS, 2 * MS, 6, 7 * MS);
        assert!(f.in_trial(), "the next delayed ACK opens the next");
    }
}
