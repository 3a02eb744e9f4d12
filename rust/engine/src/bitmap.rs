//! Bitmaps over the packets of one message: [`PktBitmap`] for any message,
//! [`MsgBits`] in place for short ones and on the heap for long ones.

use core::ops::DerefMut;

/// Largest number of packets in one message (4 MiB at a 4 KiB MTU).
pub const MAX_MSG_PKTS: usize = 1024;
const WORDS: usize = MAX_MSG_PKTS / 64;

/// One bit per packet index of a message; out-of-range indices read as
/// clear and are never stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PktBitmap {
    words: [u64; WORDS],
}

impl Default for PktBitmap {
    fn default() -> Self {
        Self::new()
    }
}

impl PktBitmap {
    /// All clear.
    pub const fn new() -> Self {
        Self { words: [0; WORDS] }
    }

    /// Is bit `i` set?
    pub fn get(&self, i: u32) -> bool {
        let i = i as usize;
        self.words
            .get(i / 64)
            .map(|w| w & (1 << (i % 64)) != 0)
            .unwrap_or(false)
    }

    /// Set bit `i`; true if it was clear before.
    pub fn set(&mut self, i: u32) -> bool {
        let i = i as usize;
        match self.words.get_mut(i / 64) {
            Some(w) if *w & (1 << (i % 64)) == 0 => {
                *w |= 1 << (i % 64);
                true
            }
            _ => false,
        }
    }

    /// Clear bit `i`; true if it was set before.
    pub fn clear(&mut self, i: u32) -> bool {
        let i = i as usize;
        match self.words.get_mut(i / 64) {
            Some(w) if *w & (1 << (i % 64)) != 0 => {
                *w &= !(1 << (i % 64));
                true
            }
            _ => false,
        }
    }

    /// Lowest set bit.
    pub fn first_set(&self) -> Option<u32> {
        for (k, w) in self.words.iter().enumerate() {
            if *w != 0 {
                return Some((k * 64) as u32 + w.trailing_zeros());
            }
        }
        None
    }

    /// Clear every bit.
    pub fn clear_all(&mut self) {
        self.words = [0; WORDS];
    }
}

/// Packets a [`MsgBits`] holds in place.
pub const INLINE_PKTS: u32 = u64::BITS;

/// One bit per packet of a message: in a word for up to [`INLINE_PKTS`]
/// packets, in a [`PktBitmap`] of the engine's heap for longer messages
/// (`B`: its box). Out-of-range indices read as clear and are never
/// stored, as in [`PktBitmap`].
#[derive(Debug)]
pub struct MsgBits<B> {
    word: u64,
    large: Option<B>,
}

impl<B: DerefMut<Target = PktBitmap>> MsgBits<B> {
    /// All clear, holding [`INLINE_PKTS`] bits.
    pub const SHORT: Self = Self {
        word: 0,
        large: None,
    };

    /// All clear, holding [`MAX_MSG_PKTS`] bits in `large` (a cleared
    /// bitmap).
    pub fn long(large: B) -> Self {
        Self {
            word: 0,
            large: Some(large),
        }
    }

    /// Whether it holds bits beyond [`INLINE_PKTS`].
    #[inline]
    pub fn is_long(&self) -> bool {
        self.large.is_some()
    }

    /// Is bit `i` set?
    #[inline]
    pub fn get(&self, i: u32) -> bool {
        match &self.large {
            Some(b) => b.get(i),
            None => i < INLINE_PKTS && self.word & (1 << i) != 0,
        }
    }

    /// Set bit `i`; true if it was clear before.
    #[inline]
    pub fn set(&mut self, i: u32) -> bool {
        match &mut self.large {
            Some(b) => b.set(i),
            None if i < INLINE_PKTS && self.word & (1 << i) == 0 => {
                self.word |= 1 << i;
                true
            }
            None => false,
        }
    }

    /// Clear bit `i`; true if it was set before.
    #[inline]
    pub fn clear(&mut self, i: u32) -> bool {
        match &mut self.large {
            Some(b) => b.clear(i),
            None if i < INLINE_PKTS && self.word & (1 << i) != 0 => {
                self.word &= !(1 << i);
                true
            }
            None => false,
        }
    }

    /// Lowest set bit.
    #[inline]
    pub fn first_set(&self) -> Option<u32> {
        match &self.large {
            Some(b) => b.first_set(),
            None => (self.word != 0).then(|| self.word.trailing_zeros()),
        }
    }

    /// Clear every bit.
    #[inline]
    pub fn clear_all(&mut self) {
        match &mut self.large {
            Some(b) => b.clear_all(),
            None => self.word = 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_message_bits() {
        extern crate alloc;
        use alloc::boxed::Box;
        let mut s = MsgBits::<Box<PktBitmap>>::SHORT;
        assert!(!s.is_long());
        assert!(s.set(63) && !s.set(63) && !s.set(64));
        assert!(!s.get(64) && s.get(63));
        assert!(s.set(5));
        assert_eq!(s.first_set(), Some(5));
        assert!(s.clear(5) && !s.clear(5));
        assert_eq!(s.first_set(), Some(63));
        s.clear_all();
        assert_eq!(s.first_set(), None);
        let mut l = MsgBits::long(Box::new(PktBitmap::new()));
        assert!(l.is_long());
        assert!(l.set(1023) && !l.set(1024));
        assert_eq!(l.first_set(), Some(1023));
        l.clear_all();
        assert_eq!(l.first_set(), None);
    }

    #[test]
    fn basics() {
        let mut b = PktBitmap::new();
        assert!(b.set(1023));
        assert!(!b.set(1023));
        assert!(!b.set(1024));
        assert!(!b.get(5000));
        assert_eq!(b.first_set(), Some(1023));
        assert!(b.set(64));
        assert_eq!(b.first_set(), Some(64));
        assert!(b.clear(64));
        assert!(!b.clear(64));
        b.clear_all();
        assert_eq!(b.first_set(), None);
    }
}
