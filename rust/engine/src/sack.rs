//! Receiver-side per-path sequence tracking: cumulative PSN plus a 256-bit
//! selective-acknowledgement bitvector.
//!
//! Packets on one path travel one ECMP route and so arrive in order; a hole
//! below a received PSN is therefore evidence of loss. A link that reorders
//! within a path (one that jitters) shows itself by filling holes, which
//! the receiver remembers per path (protocol.md 3.4) and the sender learns
//! from (4.2).

use super::seq::seq_diff;
use super::wire::SACK_BITS;

/// Number of 64-bit words in the bitvector.
pub const SACK_WORDS: usize = SACK_BITS / 64;

/// What the tracker concluded about one arriving PSN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsnVerdict {
    /// First time this PSN was seen.
    New,
    /// Already seen (or below the cumulative point).
    Duplicate,
    /// Too far ahead of the cumulative point to be tracked.
    OutOfWindow,
}

/// What an arriving PSN does to its path's holes (the PSNs missing below
/// the highest received).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HoleChange {
    /// It extends the run at the top: the next PSN after the highest
    /// received (or the next expected, with nothing above it).
    Extends,
    /// It lies beyond that: a PSN below it is missing that was not.
    Opens,
    /// It is the lowest missing PSN, with PSNs above it received: it
    /// moves the cumulative point past them.
    FillsLowest,
    /// It lies below the highest received and is not the lowest missing
    /// PSN: it fills a higher hole, or is a duplicate (also one below the
    /// cumulative point; [`SackTracker::on_psn`] tells which).
    BelowTop,
}

/// Cumulative PSN + SACK bitvector for one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SackTracker {
    cum: u32,
    /// Bit i set = PSN `cum + 1 + i` received.
    bits: [u64; SACK_WORDS],
}

impl SackTracker {
    /// Fresh tracker expecting `start` next.
    pub const fn new(start: u32) -> Self {
        Self {
            cum: start,
            bits: [0; SACK_WORDS],
        }
    }

    /// Next PSN expected (all earlier ones received or resolved).
    pub fn cum(&self) -> u32 {
        self.cum
    }

    /// SACK bits relative to `cum() + 1`.
    pub fn bits(&self) -> [u64; SACK_WORDS] {
        self.bits
    }

    fn shift_down(&mut self, n: usize) {
        if n >= SACK_BITS {
            self.bits = [0; SACK_WORDS];
            return;
        }
        let words = n / 64;
        let sh = n % 64;
        let mut out = [0u64; SACK_WORDS];
        for (i, o) in out.iter_mut().enumerate() {
            let lo = self.bits.get(i + words).copied().unwrap_or(0);
            let hi = self.bits.get(i + words + 1).copied().unwrap_or(0);
            *o = if sh == 0 {
                lo
            } else {
                (lo >> sh) | (hi << (64 - sh))
            };
        }
        self.bits = out;
    }

    fn trailing_ones(&self) -> usize {
        let mut n = 0;
        for w in self.bits {
            let t = w.trailing_ones() as usize;
            n += t;
            if t < 64 {
                break;
            }
        }
        n
    }

    /// The PSN that would extend the run of received PSNs at the top: one
    /// past the highest received, or `cum()` if none above it was.
    fn run_end(&self) -> u32 {
        let top = self
            .bits
            .iter()
            .enumerate()
            .rev()
            .find(|(_, w)| **w != 0)
            .map(|(i, w)| i * 64 + 63 - w.leading_zeros() as usize);
        match top {
            Some(i) => self.cum.wrapping_add(2 + i as u32),
            None => self.cum,
        }
    }

    /// How `psn`, arriving now, would change the path's holes (protocol.md
    /// 3.4 acknowledges some of them at once).
    pub fn hole_change(&self, psn: u32) -> HoleChange {
        let end = self.run_end();
        if psn == end {
            HoleChange::Extends
        } else if seq_diff(psn, end) > 0 {
            HoleChange::Opens
        } else if psn == self.cum {
            HoleChange::FillsLowest
        } else {
            HoleChange::BelowTop
        }
    }

    /// Record an arriving PSN.
    pub fn on_psn(&mut self, psn: u32) -> PsnVerdict {
        let d = seq_diff(psn, self.cum);
        if d < 0 {
            return PsnVerdict::Duplicate;
        }
        if d == 0 {
            let k = self.trailing_ones();
            self.cum = self.cum.wrapping_add(1 + k as u32);
            self.shift_down(k + 1);
            return PsnVerdict::New;
        }
        let i = (d - 1) as usize;
        if i >= SACK_BITS {
            return PsnVerdict::OutOfWindow;
        }
        let (w, b) = (i / 64, i % 64);
        match self.bits.get_mut(w) {
            Some(word) if *word & (1 << b) != 0 => PsnVerdict::Duplicate,
            Some(word) => {
                *word |= 1 << b;
                PsnVerdict::New
            }
            None => PsnVerdict::OutOfWindow,
        }
    }

    /// The sender declared every PSN before `floor` resolved: move the
    /// cumulative point up to it (never backwards), then past received PSNs.
    pub fn advance_floor(&mut self, floor: u32) {
        let d = seq_diff(floor, self.cum);
        if d <= 0 {
            return;
        }
        // PSN `floor` itself may already have arrived (bit d-1).
        let floor_seen = self.bit(d as usize - 1);
        self.cum = floor;
        self.shift_down(d as usize);
        if floor_seen {
            let k = self.trailing_ones();
            self.cum = self.cum.wrapping_add(1 + k as u32);
            self.shift_down(k + 1);
        }
    }

    fn bit(&self, i: usize) -> bool {
        self.bits
            .get(i / 64)
            .map(|w| w & (1 << (i % 64)) != 0)
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_and_holes() {
        let mut t = SackTracker::new(0);
        assert_eq!(t.on_psn(0), PsnVerdict::New);
        assert_eq!(t.cum(), 1);
        assert_eq!(t.on_psn(3), PsnVerdict::New);
        assert_eq!(t.on_psn(3), PsnVerdict::Duplicate);
        assert_eq!(t.bits()[0], 0b10);
        assert_eq!(t.on_psn(2), PsnVerdict::New);
        assert_eq!(t.bits()[0], 0b11);
        assert_eq!(t.on_psn(1), PsnVerdict::New);
        assert_eq!(t.cum(), 4);
        assert_eq!(t.bits(), [0; 4]);
        assert_eq!(t.on_psn(0), PsnVerdict::Duplicate);
        assert_eq!(t.on_psn(4 + 257), PsnVerdict::OutOfWindow);
        assert_eq!(t.on_psn(4 + 256), PsnVerdict::New);
        assert_eq!(t.bits()[3] >> 63, 1);
    }

    #[test]
    fn hole_change_classifies_each_arrival() {
        use HoleChange::*;
        let mut t = SackTracker::new(u32::MAX - 1);
        assert_eq!(t.hole_change(u32::MAX - 1), Extends, "the next expected");
        assert_eq!(t.hole_change(u32::MAX), Opens, "skips the next expected");
        t.on_psn(u32::MAX);
        assert_eq!(
            t.hole_change(0),
            Extends,
            "extends the top run across the wrap"
        );
        assert_eq!(t.hole_change(u32::MAX - 1), FillsLowest);
        assert_eq!(t.hole_change(1), Opens, "a second hole");
        t.on_psn(1);
        assert_eq!(t.hole_change(0), BelowTop, "the second hole");
        assert_eq!(t.hole_change(u32::MAX - 1), FillsLowest);
        assert_eq!(t.hole_change(2), Extends);
        assert_eq!(t.hole_change(u32::MAX - 5), BelowTop, "below cum");
        t.on_psn(u32::MAX - 1);
        assert_eq!(
            t.hole_change(0),
            FillsLowest,
            "the first filled, the second is lowest"
        );
        // The top run's end found in the last SACK word.
        let mut t = SackTracker::new(0);
        t.on_psn(256);
        assert_eq!(t.hole_change(257), Extends);
        assert_eq!(t.hole_change(258), Opens);
        assert_eq!(t.hole_change(100), BelowTop);
        t.on_psn(0);
        assert_eq!(
            t.hole_change(257),
            Extends,
            "cum moved, the top run did not"
        );
        assert_eq!(t.hole_change(1), FillsLowest);
    }

    #[test]
    fn floor_skips_lost() {
        let mut t = SackTracker::new(u32::MAX - 1);
        t.on_psn(u32::MAX);
        t.on_psn(1);
        t.advance_floor(0);
        assert_eq!(t.cum(), 0);
        t.advance_floor(1);
        assert_eq!(t.cum(), 2);
        t.on_psn(4);
        t.advance_floor(3);
        assert_eq!(t.cum(), 3);
        t.advance_floor(4);
        assert_eq!(t.cum(), 5);
        t.advance_floor(1000);
        assert_eq!(t.cum(), 1000);
        assert_eq!(t.bits(), [0; 4]);
    }

    #[test]
    fn long_runs() {
        let mut t = SackTracker::new(0);
        for p in 1..=200 {
            t.on_psn(p);
        }
        t.on_psn(0);
        assert_eq!(t.cum(), 201);
        assert_eq!(t.bits(), [0; 4]);
    }
}
