//! A token bucket: at most `burst` events at once and `per_sec` a second on
//! average. The receiver answers unsolicited packets (a PROBE from anyone
//! but the connected peer, protocol.md 1.6) within one, so that it cannot be
//! made to reflect traffic at an arbitrary rate.

const NS_PER_SEC: u64 = 1_000_000_000;

/// Tokens refilled with time; the caller supplies the clock (nanoseconds).
#[derive(Clone, Copy, Debug)]
pub struct TokenBucket {
    tokens: u32,
    burst: u32,
    per_sec: u32,
    /// When `tokens` was last refilled.
    at_ns: u64,
}

impl TokenBucket {
    /// A full bucket of `burst` tokens refilled at `per_sec`.
    pub const fn new(burst: u32, per_sec: u32) -> Self {
        Self {
            tokens: burst,
            burst,
            per_sec,
            at_ns: 0,
        }
    }

    /// Takes one token at `now_ns`; `false` when the bucket is empty. A
    /// clock that goes backwards refills nothing.
    pub fn take(&mut self, now_ns: u64) -> bool {
        let elapsed = now_ns.saturating_sub(self.at_ns);
        let refill = elapsed.saturating_mul(u64::from(self.per_sec)) / NS_PER_SEC;
        if refill > 0 {
            self.tokens = u64::from(self.tokens)
                .saturating_add(refill)
                .min(u64::from(self.burst)) as u32;
            self.at_ns = now_ns;
        } else if self.tokens == self.burst {
            // Full: time passing adds nothing, so a later refill counts
            // from now (not from an idle period's start).
            self.at_ns = now_ns;
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate() {
        let mut b = TokenBucket::new(4, 1000);
        let t0 = 5 * NS_PER_SEC;
        assert_eq!((0..10).filter(|_| b.take(t0)).count(), 4);
        // 1000/s: one token a millisecond.
        assert!(!b.take(t0 + 999_999));
        assert!(b.take(t0 + 1_000_000));
        assert!(!b.take(t0 + 1_000_000));
        // A long pause refills no more than the burst.
        let t1 = t0 + 60 * NS_PER_SEC;
        assert_eq!((0..10).filter(|_| b.take(t1)).count(), 4);
        // A clock that goes back gives nothing.
        assert!(!b.take(t0));
    }

    #[test]
    fn a_second_allows_burst_plus_rate() {
        let mut b = TokenBucket::new(64, 1000);
        let mut n = 0;
        for us in 0..1_000_000u64 {
            if b.take(NS_PER_SEC + us * 1000) {
                n += 1;
            }
        }
        assert!((1000..=1064).contains(&n), "{n}");
    }
}
