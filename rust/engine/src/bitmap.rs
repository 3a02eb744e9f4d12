//! Fixed-size bitmap over the packets of one message.

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

#[cfg(test)]
mod tests {
    use super::*;

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
