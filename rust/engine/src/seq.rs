//! Serial-number arithmetic for wrapping 32-bit sequence numbers (PSN, MSN).
//!
//! Sequence numbers wrap at 2^32; comparisons are only meaningful between
//! numbers less than 2^31 apart, which the windows in this engine guarantee.

/// Signed distance `a - b` in serial-number space.
#[inline]
pub fn seq_diff(a: u32, b: u32) -> i32 {
    a.wrapping_sub(b) as i32
}

/// True if `a` comes strictly before `b`.
#[inline]
pub fn seq_lt(a: u32, b: u32) -> bool {
    seq_diff(a, b) < 0
}

/// True if `a` comes before or is equal to `b`.
#[inline]
pub fn seq_le(a: u32, b: u32) -> bool {
    seq_diff(a, b) <= 0
}

/// True if `x` lies in the half-open window `[lo, lo + len)`.
#[inline]
pub fn seq_in_window(x: u32, lo: u32, len: u32) -> bool {
    x.wrapping_sub(lo) < len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps() {
        assert!(seq_lt(u32::MAX, 0));
        assert!(seq_lt(0xFFFF_FFF0, 5));
        assert!(!seq_lt(5, 0xFFFF_FFF0));
        assert_eq!(seq_diff(2, u32::MAX), 3);
        assert!(seq_in_window(1, u32::MAX, 3));
        assert!(!seq_in_window(2, u32::MAX, 3));
        assert!(seq_le(7, 7));
    }
}
