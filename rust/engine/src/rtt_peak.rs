//! The largest RTT a QP saw lately, which its retransmission timeouts do
//! not undercut (protocol.md 4.3).
//!
//! SRTT + 4·RTTVAR follows the samples of the last few ACKs: after a
//! scheduling gap of a software host (a vCPU or softirq that did not run
//! for some milliseconds, routine in TCG guests) RTTVAR has decayed within
//! a dozen ACKs, and the next gap of the same length fires the timer again.
//! Such gaps recur on a host; a sample proves only that an ACK that late
//! still came. So the QP holds its largest sample for one to two
//! [`RttPeak::INTERVAL_NS`], the late ACK of a spurious timeout included
//! (RFC 4015's response to one, held in time rather than decayed per ACK),
//! and every RTO of the QP stays above it. On a fabric of microsecond RTTs
//! the peak is microseconds and the configured floor rules.

/// The largest RTT sample (ns) in the current interval and in the one
/// before it.
///
/// # Invariants
///
/// `since` is when the current interval began; `prev` is the largest
/// sample of the interval that ended then, 0 if none or if it was longer
/// ago than one interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RttPeak {
    cur: u64,
    prev: u64,
    since: u64,
}

impl RttPeak {
    /// No sample yet.
    pub const NONE: Self = Self {
        cur: 0,
        prev: 0,
        since: 0,
    };

    /// Length of one interval: a sample is held for one to two of them.
    /// Long against the gaps it covers (tens of milliseconds) and short
    /// against a run: a one-off stall raises the floor for a second or
    /// two, not for the QP's life.
    pub const INTERVAL_NS: u64 = 1_000_000_000;

    /// RTOs stay this much above the peak (numerator over 4): a gap a
    /// little longer than the longest seen is not a loss either.
    const MARGIN_QUARTERS: u64 = 5;

    /// Takes the sample `rtt` measured at `now`.
    pub fn sample(&mut self, rtt: u64, now: u64) {
        let age = now.saturating_sub(self.since);
        if age >= Self::INTERVAL_NS {
            (self.cur, self.prev) = self.at(now);
            self.since = now;
        }
        self.cur = self.cur.max(rtt);
    }

    /// The peak as of `now`: the largest sample of the last one to two
    /// intervals, 0 if none.
    pub fn get(&self, now: u64) -> u64 {
        let (cur, prev) = self.at(now);
        cur.max(prev)
    }

    /// The least RTO the peak allows as of `now`: the peak with its
    /// margin, 0 with no sample.
    pub fn rto_floor(&self, now: u64) -> u64 {
        self.get(now).saturating_mul(Self::MARGIN_QUARTERS) / 4
    }

    /// (current, previous) as of `now`: an interval that has ended is the
    /// previous one; one that ended more than an interval ago is gone.
    fn at(&self, now: u64) -> (u64, u64) {
        let age = now.saturating_sub(self.since);
        if age >= 2 * Self::INTERVAL_NS {
            (0, 0)
        } else if age >= Self::INTERVAL_NS {
            (0, self.cur)
        } else {
            (self.cur, self.prev)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RttPeak;

    const MS: u64 = 1_000_000;
    const I: u64 = RttPeak::INTERVAL_NS;

    #[test]
    fn a_late_sample_is_held_for_one_to_two_intervals() {
        let mut p = RttPeak::NONE;
        assert_eq!(p.get(5 * I), 0);
        let t0 = 5 * I;
        p.sample(2 * MS, t0);
        p.sample(24 * MS, t0 + 10 * MS);
        // Many small samples after the gap do not wear it down.
        for k in 0..900 {
            p.sample(2 * MS, t0 + 20 * MS + k * MS);
        }
        assert_eq!(p.get(t0 + I - 1), 24 * MS);
        assert_eq!(p.rto_floor(t0 + I - 1), 30 * MS);
        // The next interval still holds it...
        p.sample(3 * MS, t0 + I + 5 * MS);
        assert_eq!(p.get(t0 + 2 * I - 1), 24 * MS);
        // ...the one after does not.
        p.sample(3 * MS, t0 + 2 * I + 5 * MS);
        assert_eq!(p.get(t0 + 2 * I + 6 * MS), 3 * MS);
    }

    #[test]
    fn a_peak_expires_without_samples() {
        let mut p = RttPeak::NONE;
        p.sample(40 * MS, I);
        assert_eq!(p.get(2 * I - 1), 40 * MS);
        assert_eq!(p.get(2 * I), 40 * MS);
        assert_eq!(p.get(3 * I), 0);
        // A sample after a long silence starts afresh.
        p.sample(MS, 10 * I);
        assert_eq!(p.get(10 * I), MS);
    }
}
