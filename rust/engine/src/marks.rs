//! A set of marks, one bit per slot, that any context sets without a lock
//! and one taker takes a 64-slot word at a time: how the reference
//! driver's transmit worker and device tick find the QPs with work for
//! them among thousands (`rust/driver/qp_marks.rs`, design.md "The tick
//! and many QPs"). Kept here, beside the engine, for its host tests.
//!
//! The rule that makes a mark never lost: whoever leaves work for the
//! taker publishes the work first and marks after, and the taker takes a
//! word before it looks at the work of its slots. A mark set after the
//! taker took its word is seen by the next take, so the work is found
//! late by at most one round, never missed. A slot the taker visits and
//! leaves work in is marked again by whoever left it.

use core::sync::atomic::{AtomicU64, Ordering};

/// Marks for `WORDS * 64` slots.
pub struct Marks<const WORDS: usize> {
    words: [AtomicU64; WORDS],
}

impl<const WORDS: usize> Default for Marks<WORDS> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const WORDS: usize> Marks<WORDS> {
    /// Slots the set holds.
    pub const SLOTS: usize = WORDS * 64;

    /// No slot marked.
    pub const fn new() -> Self {
        Self {
            words: [const { AtomicU64::new(0) }; WORDS],
        }
    }

    /// The word of `slot` and its bit there.
    fn word_bit(&self, slot: usize) -> Option<(&AtomicU64, u64)> {
        Some((self.words.get(slot / 64)?, 1 << (slot % 64)))
    }

    /// Marks `slot` (a slot beyond the set is ignored). The caller
    /// published the work the mark stands for before this call.
    pub fn mark(&self, slot: usize) {
        if let Some((word, bit)) = self.word_bit(slot) {
            word.fetch_or(bit, Ordering::AcqRel);
        }
    }

    /// Marks `slot` if it is not marked and `work` says it has work: the
    /// shared word is read first, and `work` asked only for a slot not
    /// marked (a busy slot is nearly always marked, and its word is
    /// shared by 63 others: a read, not a write, and no judging). For a
    /// caller that holds the lock under which the taker looks at the
    /// slot's work: a mark this call sees was taken, if at all, by a
    /// taker that takes that lock after this hold, so it finds the work.
    pub fn mark_if(&self, slot: usize, work: impl FnOnce() -> bool) {
        if let Some((word, bit)) = self.word_bit(slot) {
            if word.load(Ordering::Acquire) & bit == 0 && work() {
                word.fetch_or(bit, Ordering::AcqRel);
            }
        }
    }

    /// Whether `slot` is marked now.
    pub fn is_marked(&self, slot: usize) -> bool {
        self.word_bit(slot)
            .is_some_and(|(word, bit)| word.load(Ordering::Acquire) & bit != 0)
    }

    /// Takes every mark, a word at a time as the iterator reaches it: the
    /// slots marked since their word was last taken, lowest first. A word
    /// read as empty is not written (an idle set costs reads only).
    pub fn take(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(k, word)| {
            let mut bits = if word.load(Ordering::Relaxed) == 0 {
                0
            } else {
                word.swap(0, Ordering::AcqRel)
            };
            core::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let slot = k * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    slot
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;

    #[test]
    fn takes_each_mark_once_lowest_first() {
        let m = Marks::<3>::new();
        for slot in [130, 0, 63, 64, 5, 63] {
            m.mark(slot);
        }
        m.mark(Marks::<3>::SLOTS); // beyond the set: ignored
        assert!(m.is_marked(64) && !m.is_marked(65));
        assert_eq!(m.take().collect::<Vec<_>>(), [0, 5, 63, 64, 130]);
        assert_eq!(m.take().count(), 0, "taken");
        assert!(!m.is_marked(64));
    }

    #[test]
    fn a_mark_after_its_word_was_taken_waits_for_the_next_take() {
        let m = Marks::<2>::new();
        m.mark(1);
        m.mark(70);
        let mut take = m.take();
        assert_eq!(take.next(), Some(1));
        // Word 0 is taken, word 1 not yet.
        m.mark(2);
        m.mark(71);
        assert_eq!(take.collect::<Vec<_>>(), [70, 71]);
        assert_eq!(m.take().collect::<Vec<_>>(), [2]);
    }

    #[test]
    fn work_is_judged_only_for_a_slot_not_marked() {
        let m = Marks::<1>::new();
        m.mark_if(9, || false);
        assert!(!m.is_marked(9), "no work, no mark");
        m.mark_if(9, || true);
        m.mark_if(9, || unreachable!("marked: not judged"));
        m.mark(9);
        assert_eq!(m.take().collect::<Vec<_>>(), [9]);
        m.mark_if(9, || true);
        assert_eq!(m.take().collect::<Vec<_>>(), [9], "taken: marked again");
        m.mark_if(64, || unreachable!("beyond the set"));
    }
}
