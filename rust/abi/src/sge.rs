//! Scatter/gather entries (`struct metaroce_sge`), after the header of a
//! send or receive WQE.

use super::field::{get_u32, get_u64, put_u32, put_u64};
use super::layout::sge::{ADDR, LENGTH, LKEY, SIZE};
use super::reject::Reject;

/// One local buffer: `struct metaroce_sge` (and `struct ibv_sge`,
/// `struct ib_sge`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    /// Virtual address (the MR's iova space).
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// Local key of the MR.
    pub lkey: u32,
}

impl Sge {
    /// Writes the SGE at byte `at` of an element.
    pub fn encode(&self, b: &mut [u8], at: usize) {
        put_u64(b, at + ADDR, self.addr);
        put_u32(b, at + LENGTH, self.length);
        put_u32(b, at + LKEY, self.lkey);
    }

    /// Reads the SGE at byte `at`; refuses one whose range wraps past 2^64.
    pub fn decode(b: &[u8], at: usize) -> Result<Self, Reject> {
        let s = Sge {
            addr: get_u64(b, at + ADDR),
            length: get_u32(b, at + LENGTH),
            lkey: get_u32(b, at + LKEY),
        };
        s.addr
            .checked_add(u64::from(s.length))
            .ok_or(Reject::SgeWraps)?;
        Ok(s)
    }
}

/// Bytes `n` SGEs take after a header of `header` bytes.
pub fn bytes_with(header: usize, n: usize) -> usize {
    header + n * SIZE
}

/// SGEs that fit an element of `elem` bytes after a header of `header`
/// bytes.
pub fn fitting(elem: usize, header: usize) -> u32 {
    u32::try_from(elem.saturating_sub(header) / SIZE).unwrap_or(u32::MAX)
}

/// Writes `sges` from byte `at` on.
pub fn encode_all(b: &mut [u8], at: usize, sges: &[Sge]) {
    for (i, s) in sges.iter().enumerate() {
        s.encode(b, at + i * SIZE);
    }
}

/// Reads `n` SGEs from byte `at` of an element into `out`, refusing more
/// than `out` holds, more than the element holds and any that wraps.
pub fn decode_all(b: &[u8], at: usize, n: u32, out: &mut [Sge]) -> Result<usize, Reject> {
    let n = n as usize;
    if n > out.len() {
        return Err(Reject::TooManySges);
    }
    if bytes_with(at, n) > b.len() {
        return Err(Reject::BeyondElement);
    }
    for (i, s) in out.iter_mut().take(n).enumerate() {
        *s = Sge::decode(b, at + i * SIZE)?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_at_the_c_offsets() {
        let s = Sge {
            addr: 0x1122_3344_5566_7788,
            length: 0x99aa_bbcc,
            lkey: 0x0102_0304,
        };
        let mut b = [0u8; 20];
        s.encode(&mut b, 4);
        assert_eq!(&b[4..12], &s.addr.to_ne_bytes());
        assert_eq!(&b[12..16], &s.length.to_ne_bytes());
        assert_eq!(&b[16..20], &s.lkey.to_ne_bytes());
        assert_eq!(Sge::decode(&b, 4), Ok(s));
    }

    #[test]
    fn a_range_past_2_64_is_refused() {
        let mut b = [0u8; 16];
        Sge {
            addr: u64::MAX - 9,
            length: 10,
            lkey: 1,
        }
        .encode(&mut b, 0);
        assert_eq!(Sge::decode(&b, 0), Err(Reject::SgeWraps));
        // One byte less ends exactly at 2^64 - 1: representable.
        Sge {
            addr: u64::MAX - 9,
            length: 9,
            lkey: 1,
        }
        .encode(&mut b, 0);
        assert!(Sge::decode(&b, 0).is_ok());
    }

    #[test]
    fn decode_all_bounds_the_count() {
        let b = [0u8; 48];
        let mut out = [Sge::default(); 2];
        assert_eq!(decode_all(&b, 16, 2, &mut out), Ok(2));
        assert_eq!(decode_all(&b, 16, 3, &mut out), Err(Reject::TooManySges));
        let mut wide = [Sge::default(); 4];
        assert_eq!(decode_all(&b, 16, 3, &mut wide), Err(Reject::BeyondElement));
        assert_eq!(
            decode_all(&b, 16, u32::MAX, &mut wide),
            Err(Reject::TooManySges)
        );
        assert_eq!(fitting(96, 64), 2);
        assert_eq!(fitting(8, 64), 0);
    }
}
