//! Ring index arithmetic of `struct metaroce_queue_buf`.
//!
//! Indices are free-running `u32` counters; the slot of index `i` is
//! `i & index_mask`; the ring holds `index_mask + 1` elements and is full
//! when `producer - consumer == index_mask + 1` (wrapping arithmetic).
//! The index a peer writes may be anything: a distance of more than a
//! ring is refused, so that no index makes a reader do more than a ring's
//! worth of work.

use core::ops::Range;

use super::layout::queue_buf::DATA;
use super::reject::Reject;

/// Largest element a ring may have (64 KiB): bounds the arithmetic below.
pub const MAX_LOG2_ELEM: u32 = 16;
/// Most elements a ring may have (2^24).
pub const MAX_ELEMS: u32 = 1 << 24;

/// The shape of a ring: element size and count, both powers of two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    log2_elem: u32,
    mask: u32,
}

impl Geometry {
    /// A ring of `count` elements of `elem_size` bytes (the side that
    /// creates it); `None` unless both are powers of two within the limits.
    pub fn new(count: u32, elem_size: u32) -> Option<Self> {
        if !count.is_power_of_two() || count > MAX_ELEMS || !elem_size.is_power_of_two() {
            return None;
        }
        let log2_elem = elem_size.trailing_zeros();
        (log2_elem <= MAX_LOG2_ELEM).then_some(Self {
            log2_elem,
            mask: count - 1,
        })
    }

    /// Validates the header the other side wrote (`log2_elem_size`,
    /// `index_mask`) against the length of the mapping and the smallest
    /// element the queue's users need.
    pub fn from_header(
        log2_elem: u32,
        index_mask: u32,
        map_len: usize,
        min_elem: usize,
    ) -> Result<Self, Reject> {
        if log2_elem > MAX_LOG2_ELEM || (1usize << log2_elem) < min_elem {
            return Err(Reject::BadHeader);
        }
        let elems = u64::from(index_mask) + 1;
        if !elems.is_power_of_two() || elems > u64::from(MAX_ELEMS) {
            return Err(Reject::BadHeader);
        }
        let bytes = (elems << log2_elem) + DATA as u64;
        if bytes > map_len as u64 {
            return Err(Reject::BadHeader);
        }
        Ok(Self {
            log2_elem,
            mask: index_mask,
        })
    }

    /// `log2_elem_size` of the header.
    pub fn log2_elem_size(self) -> u32 {
        self.log2_elem
    }

    /// `index_mask` of the header.
    pub fn index_mask(self) -> u32 {
        self.mask
    }

    /// Bytes per element.
    pub fn elem_size(self) -> usize {
        1 << self.log2_elem
    }

    /// Elements the ring holds.
    pub fn capacity(self) -> u32 {
        self.mask + 1
    }

    /// Bytes of the header and all elements.
    pub fn bytes(self) -> usize {
        DATA + ((self.capacity() as usize) << self.log2_elem)
    }

    /// Byte range of index `idx`'s element from the start of the header.
    pub fn slot_range(self, idx: u32) -> Range<usize> {
        let start = DATA + (((idx & self.mask) as usize) << self.log2_elem);
        start..start + self.elem_size()
    }

    /// Elements between the indices; refused if they are more than a ring
    /// apart (the peer wrote its index wrong).
    pub fn used(self, producer: u32, consumer: u32) -> Result<u32, Reject> {
        let used = producer.wrapping_sub(consumer);
        if used > self.capacity() {
            Err(Reject::IndicesApart)
        } else {
            Ok(used)
        }
    }

    /// Free slots for a producer; refused as [`Geometry::used`].
    pub fn free(self, producer: u32, consumer: u32) -> Result<u32, Reject> {
        Ok(self.capacity() - self.used(producer, consumer)?)
    }

    /// Whether a producer must not add an element: the ring is full, or
    /// the indices are more than a ring apart.
    pub fn is_full(self, producer: u32, consumer: u32) -> bool {
        producer.wrapping_sub(consumer) >= self.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(elems: u32, log2: u32) -> Geometry {
        let len = DATA + ((elems as usize) << log2);
        Geometry::from_header(log2, elems - 1, len, 16).unwrap()
    }

    #[test]
    fn hostile_headers_are_refused() {
        let bad = Err(Reject::BadHeader);
        assert_eq!(Geometry::from_header(6, 6, 1 << 20, 16), bad); // 7 elems
        assert_eq!(Geometry::from_header(3, 7, 1 << 20, 16), bad); // 8 B < 16 B
        assert_eq!(Geometry::from_header(17, 7, 1 << 30, 16), bad);
        assert_eq!(Geometry::from_header(u32::MAX, 7, usize::MAX, 16), bad);
        assert_eq!(Geometry::from_header(6, 7, DATA + 7 * 64, 16), bad);
        assert!(Geometry::from_header(6, 7, DATA + 8 * 64, 16).is_ok());
        assert_eq!(Geometry::from_header(4, u32::MAX, usize::MAX, 16), bad);
        assert_eq!(Geometry::from_header(4, 1 << 24, usize::MAX, 16), bad);
        assert!(Geometry::from_header(4, (1 << 24) - 1, usize::MAX, 16).is_ok());
    }

    #[test]
    fn created_rings_are_powers_of_two_within_the_limits() {
        let g = Geometry::new(8, 64).unwrap();
        assert_eq!((g.capacity(), g.elem_size(), g.index_mask()), (8, 64, 7));
        assert_eq!((g.log2_elem_size(), g.bytes()), (6, DATA + 512));
        assert_eq!(Geometry::from_header(6, 7, g.bytes(), 64), Ok(g));
        assert_eq!(Geometry::new(6, 64), None);
        assert_eq!(Geometry::new(8, 48), None);
        assert_eq!(Geometry::new(0, 64), None);
        assert_eq!(Geometry::new(MAX_ELEMS * 2, 64), None);
        assert_eq!(Geometry::new(8, 1 << 17), None);
    }

    #[test]
    fn slots_wrap_with_the_mask() {
        let g = geo(8, 6);
        assert_eq!(g.slot_range(0), DATA..DATA + 64);
        assert_eq!(g.slot_range(9), g.slot_range(1));
        assert_eq!(g.slot_range(u32::MAX), g.slot_range(7));
        assert_eq!(g.slot_range(7).end, g.bytes());
    }

    #[test]
    fn full_and_empty_with_free_running_indices() {
        let g = geo(8, 6);
        assert_eq!(g.used(0, 0), Ok(0));
        assert_eq!(g.free(0, 0), Ok(8));
        assert_eq!(g.free(8, 0), Ok(0));
        assert!(!g.is_full(7, 0));
        assert!(g.is_full(8, 0));
        // Across the u32 wrap.
        let c = u32::MAX - 2;
        assert_eq!(g.used(c.wrapping_add(8), c), Ok(8));
        assert_eq!(g.free(c.wrapping_add(5), c), Ok(3));
        assert!(g.is_full(c.wrapping_add(8), c));
    }

    #[test]
    fn indices_more_than_a_ring_apart_are_refused() {
        let g = geo(8, 6);
        assert_eq!(g.used(9, 0), Err(Reject::IndicesApart));
        assert_eq!(g.used(0, 1), Err(Reject::IndicesApart));
        assert_eq!(g.free(9, 0), Err(Reject::IndicesApart));
        assert!(g.is_full(9, 0), "a producer never writes past a ring");
        assert!(g.is_full(0, 1));
    }
}
