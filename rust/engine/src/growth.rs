//! Path-count growth judged by what each step gained (protocol.md 4.4).
//!
//! A QP whose active paths all sit at the window cap, window-limited,
//! opens more paths. Capped windows wait alike on a pipe with room and on
//! a full one (the ACK clock is the same), so nothing before a step tells
//! whether it will help: the step is the experiment. Its delivery rate is
//! read over the first interval, from the second after it on, that every
//! active path spent at the cap (the new paths start below it and take a
//! few RTTs to reach it), or over the last of [`JUDGE_WITHIN`] intervals
//! if they never get there, and compared with the rate over the interval
//! before the step, itself spent at the cap: a rate read while windows
//! still grew is low, and made the next step look like a gain. A step that raised the rate by a quarter or
//! more stands and the next may follow; one that did not is taken back
//! (its paths retire once empty), and the QP holds its path count for a
//! while before it tries one step again, waiting twice as long after each
//! step that gains nothing. Judging by gain needs no estimate of the base
//! RTT, which a scheduled host's jitter skews, and does not stop growth on
//! a queue that the steps themselves are filling usefully.

/// Intervals after a step before it is judged: the first carries the new
/// paths' first flight, the second their acknowledgements.
const JUDGE_AFTER: u8 = 2;
/// Intervals after a step by which it is judged, its paths at the cap or
/// not (a congestion signal cut them, or the pipe never let them grow).
const JUDGE_WITHIN: u8 = 12;
/// Intervals held after the first step that gained nothing.
const FULL_WAIT_FIRST: u32 = 8;
/// The longest hold between trial steps.
const FULL_WAIT_MAX: u32 = 256;

/// What the sender does with its path count at the end of an interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrowthStep {
    /// Keep it.
    Hold,
    /// Open a step of paths.
    Grow,
    /// Retire the paths the last step opened.
    Revert,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Grows while the QP is eligible.
    Open,
    /// A step was taken at delivery rate `before`; `intervals` have
    /// ended since (window-limited ones only).
    Judging { before: u64, intervals: u8 },
    /// The last step gained nothing and was reverted; `waited` intervals
    /// held of the judge's `wait`.
    Full { waited: u32 },
}

/// The growth judge of one QP's sender.
#[derive(Clone, Copy, Debug)]
pub struct Growth {
    phase: Phase,
    /// Packets acknowledged since `since`.
    acked: u64,
    /// Start of the current interval (ns).
    since: u64,
    /// The hold after the next step that gains nothing.
    wait: u32,
    /// Every active path was at the cap when the last interval ended.
    was_capped: bool,
}

impl Growth {
    /// A fresh judge, its first interval starting at 0.
    pub const NEW: Self = Self {
        phase: Phase::Open,
        acked: 0,
        since: 0,
        wait: FULL_WAIT_FIRST,
        was_capped: false,
    };

    /// Forgets everything; the first interval starts at `now`.
    pub fn restart(&mut self, now: u64) {
        *self = Self {
            since: now,
            ..Self::NEW
        };
    }

    /// `packets` newly acknowledged.
    pub fn on_acked(&mut self, packets: u32) {
        self.acked = self.acked.saturating_add(u64::from(packets));
    }

    /// Whether a step is being judged (its paths are still on trial).
    pub fn judging(&self) -> bool {
        matches!(self.phase, Phase::Judging { .. })
    }

    /// Ends the interval at `now`. `limited`: the QP was window-limited
    /// in it (else its rate says nothing about the pipe); `capped`: every
    /// active path is at the window cap; `eligible`: the conditions of a
    /// step held (protocol.md 4.4: window-limited, capped, no congestion
    /// seen, room for more paths).
    pub fn end_interval(
        &mut self,
        now: u64,
        limited: bool,
        capped: bool,
        eligible: bool,
    ) -> GrowthStep {
        let us = now.saturating_sub(self.since) / 1000;
        // Packets per microsecond, in units of 2^-20 (no 128-bit division
        // in the kernel): exact enough for a ratio of a quarter.
        let rate = (self.acked.min(u64::MAX >> 21) << 20) / us.max(1);
        self.acked = 0;
        self.since = now;
        // The whole interval at the cap: it began and ended there.
        let at_cap = capped && self.was_capped;
        self.was_capped = capped;
        let eligible = eligible && at_cap;
        match self.phase {
            Phase::Open => self.try_step(rate, eligible),
            Phase::Judging { before, intervals } => {
                if !limited {
                    return GrowthStep::Hold;
                }
                let intervals = intervals.saturating_add(1);
                if intervals < JUDGE_AFTER || (!at_cap && intervals < JUDGE_WITHIN) {
                    self.phase = Phase::Judging { before, intervals };
                    return GrowthStep::Hold;
                }
                if rate > before && rate.saturating_mul(4) >= before.saturating_mul(5) {
                    self.wait = FULL_WAIT_FIRST;
                    self.phase = Phase::Open;
                    self.try_step(rate, eligible)
                } else {
                    self.phase = Phase::Full { waited: 0 };
                    GrowthStep::Revert
                }
            }
            Phase::Full { waited } => {
                let waited = waited.saturating_add(1);
                if waited >= self.wait && eligible {
                    self.wait = (self.wait * 2).min(FULL_WAIT_MAX);
                    self.try_step(rate, true)
                } else {
                    self.phase = Phase::Full { waited };
                    GrowthStep::Hold
                }
            }
        }
    }

    fn try_step(&mut self, rate: u64, eligible: bool) -> GrowthStep {
        if !eligible {
            return GrowthStep::Hold;
        }
        self.phase = Phase::Judging {
            before: rate,
            intervals: 0,
        };
        GrowthStep::Grow
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A judge whose last interval ended with the paths at the cap.
    fn at_cap() -> Growth {
        let mut g = Growth::NEW;
        assert_eq!(g.end_interval(0, true, true, false), GrowthStep::Hold);
        g
    }

    /// Ends an interval of 1 ms at `t` ms with `acked` packets.
    fn interval(g: &mut Growth, t: u64, acked: u32, eligible: bool) -> GrowthStep {
        g.on_acked(acked);
        g.end_interval(t * MS, true, true, eligible)
    }

    #[test]
    fn a_step_that_gains_a_quarter_stands_and_the_next_follows() {
        let mut g = at_cap();
        assert_eq!(interval(&mut g, 1, 100, true), GrowthStep::Grow);
        // The new paths' first flight: not judged yet.
        assert_eq!(interval(&mut g, 2, 100, true), GrowthStep::Hold);
        assert!(g.judging());
        assert_eq!(interval(&mut g, 3, 150, true), GrowthStep::Grow);
        assert_eq!(interval(&mut g, 4, 150, true), GrowthStep::Hold);
        assert_eq!(interval(&mut g, 5, 190, true), GrowthStep::Grow);
    }

    #[test]
    fn a_step_that_gains_nothing_is_reverted_then_tried_again_later_and_later() {
        let mut g = at_cap();
        assert_eq!(interval(&mut g, 1, 100, true), GrowthStep::Grow);
        assert_eq!(interval(&mut g, 2, 100, true), GrowthStep::Hold);
        // +20%: under a quarter.
        assert_eq!(interval(&mut g, 3, 120, true), GrowthStep::Revert);
        let mut t = 4;
        for _ in 1..FULL_WAIT_FIRST {
            assert_eq!(interval(&mut g, t, 100, true), GrowthStep::Hold);
            t += 1;
        }
        assert_eq!(interval(&mut g, t, 100, true), GrowthStep::Grow);
        assert_eq!(interval(&mut g, t + 1, 100, true), GrowthStep::Hold);
        assert_eq!(interval(&mut g, t + 2, 100, true), GrowthStep::Revert);
        t += 3;
        // Twice as long before the next trial.
        for _ in 1..2 * FULL_WAIT_FIRST {
            assert_eq!(interval(&mut g, t, 100, true), GrowthStep::Hold);
            t += 1;
        }
        assert_eq!(interval(&mut g, t, 100, true), GrowthStep::Grow);
    }

    #[test]
    fn intervals_the_qp_was_not_window_limited_are_not_judged() {
        let mut g = at_cap();
        assert_eq!(interval(&mut g, 1, 100, true), GrowthStep::Grow);
        // The application posted nothing for a while: no verdict.
        for t in 2..10 {
            g.on_acked(5);
            assert_eq!(g.end_interval(t * MS, false, true, false), GrowthStep::Hold);
        }
        assert_eq!(interval(&mut g, 10, 150, true), GrowthStep::Hold);
        assert_eq!(interval(&mut g, 11, 150, true), GrowthStep::Grow);
    }

    #[test]
    fn no_step_unless_eligible() {
        let mut g = at_cap();
        assert_eq!(interval(&mut g, 1, 100, false), GrowthStep::Hold);
        assert!(!g.judging());
        assert_eq!(interval(&mut g, 2, 100, true), GrowthStep::Grow);
    }

    #[test]
    fn rates_compare_over_intervals_of_different_lengths() {
        let mut g = at_cap();
        g.on_acked(100);
        assert_eq!(g.end_interval(MS, true, true, true), GrowthStep::Grow);
        g.on_acked(300);
        assert_eq!(g.end_interval(4 * MS, true, true, true), GrowthStep::Hold);
        // 100 per ms over 2 ms: the rate before, not a gain.
        g.on_acked(200);
        assert_eq!(g.end_interval(6 * MS, true, true, true), GrowthStep::Revert);
    }

    #[test]
    fn a_step_is_judged_once_its_paths_reach_the_cap_or_at_the_latest() {
        let mut g = at_cap();
        assert_eq!(interval(&mut g, 1, 100, true), GrowthStep::Grow);
        // The new paths ramp up: no verdict while they are below the cap.
        for t in 2..5 {
            g.on_acked(100);
            assert_eq!(g.end_interval(t * MS, true, false, false), GrowthStep::Hold);
        }
        // At the cap by the end of this one, but not through it.
        assert_eq!(interval(&mut g, 5, 150, true), GrowthStep::Hold);
        assert_eq!(interval(&mut g, 6, 150, true), GrowthStep::Grow);
        // Never capped: judged on the last interval allowed.
        let mut t = 7;
        for _ in 1..JUDGE_WITHIN {
            g.on_acked(150);
            assert_eq!(g.end_interval(t * MS, true, false, false), GrowthStep::Hold);
            t += 1;
        }
        g.on_acked(150);
        assert_eq!(
            g.end_interval(t * MS, true, false, false),
            GrowthStep::Revert
        );
    }

    #[test]
    fn a_step_waits_for_an_interval_spent_at_the_cap() {
        let mut g = Growth::NEW;
        // The windows reached the cap during this interval: its rate is
        // not yet theirs.
        assert_eq!(g.end_interval(MS, true, true, true), GrowthStep::Hold);
        g.on_acked(100);
        assert_eq!(g.end_interval(2 * MS, true, true, true), GrowthStep::Grow);
        // Capped at the end of the second interval after the step, but
        // not at the end of the first: not judged yet.
        g.on_acked(100);
        assert_eq!(g.end_interval(3 * MS, true, false, false), GrowthStep::Hold);
        g.on_acked(140);
        assert_eq!(g.end_interval(4 * MS, true, true, true), GrowthStep::Hold);
        g.on_acked(100);
        assert_eq!(g.end_interval(5 * MS, true, true, true), GrowthStep::Revert);
    }
}
