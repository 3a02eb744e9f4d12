//! Ring index arithmetic of `struct metaroce_queue_buf` (safe, pure).
//!
//! Indices are free-running `u32` counters; the slot of index `i` is
//! `i & index_mask`; the ring holds `index_mask + 1` elements and is full
//! when `producer - consumer == index_mask + 1` (wrapping arithmetic).

use core::mem::{offset_of, size_of};

use crate::errno::{Errno, EINVAL, EIO};
use crate::sys::metaroce_queue_buf;

/// Byte offset of the first element (`data[]`).
pub(crate) const DATA_OFFSET: usize = offset_of!(metaroce_queue_buf, data);
pub(crate) const PRODUCER_OFFSET: usize = offset_of!(metaroce_queue_buf, producer_index);
pub(crate) const CONSUMER_OFFSET: usize = offset_of!(metaroce_queue_buf, consumer_index);

const _: () = assert!(size_of::<metaroce_queue_buf>() == 384);
const _: () = assert!(PRODUCER_OFFSET == 128);
const _: () = assert!(CONSUMER_OFFSET == 256);
const _: () = assert!(DATA_OFFSET == 384);

/// Largest element we accept (64 KiB): bounds the arithmetic below.
const MAX_LOG2_ELEM: u32 = 16;
/// Most elements we accept (2^24).
const MAX_ELEMS: u64 = 1 << 24;

/// The shape of a ring, read once from the header the kernel wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    log2_elem: u32,
    mask: u32,
}

impl Geometry {
    /// Validates a header against the mapping length and the smallest
    /// element the queue's users need.
    pub(crate) fn new(
        log2_elem: u32,
        index_mask: u32,
        map_len: usize,
        min_elem: usize,
    ) -> Result<Self, Errno> {
        if log2_elem > MAX_LOG2_ELEM || (1usize << log2_elem) < min_elem {
            return Err(EINVAL);
        }
        let elems = u64::from(index_mask) + 1;
        if !elems.is_power_of_two() || elems > MAX_ELEMS {
            return Err(EINVAL);
        }
        let bytes = (elems << log2_elem) + DATA_OFFSET as u64;
        if bytes > map_len as u64 {
            return Err(EINVAL);
        }
        Ok(Geometry {
            log2_elem,
            mask: index_mask,
        })
    }

    pub(crate) fn elem_size(self) -> usize {
        1 << self.log2_elem
    }

    pub(crate) fn capacity(self) -> u32 {
        self.mask.wrapping_add(1)
    }

    /// Byte range of index `idx`'s element within the mapping.
    pub(crate) fn slot_range(self, idx: u32) -> core::ops::Range<usize> {
        let start = DATA_OFFSET + (((idx & self.mask) as usize) << self.log2_elem);
        start..start + self.elem_size()
    }

    /// Elements in the ring, or EIO if the indices are inconsistent (more
    /// than a full ring apart: the peer corrupted them).
    pub(crate) fn used(self, producer: u32, consumer: u32) -> Result<u32, Errno> {
        let used = producer.wrapping_sub(consumer);
        if u64::from(used) > u64::from(self.mask) + 1 {
            Err(EIO)
        } else {
            Ok(used)
        }
    }

    /// Free slots for a producer.
    pub(crate) fn free(self, producer: u32, consumer: u32) -> Result<u32, Errno> {
        Ok(self.capacity().wrapping_sub(self.used(producer, consumer)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errno::EIO;

    fn geo(elems: u32, log2: u32) -> Geometry {
        let len = DATA_OFFSET + ((elems as usize) << log2);
        Geometry::new(log2, elems - 1, len, 16).unwrap()
    }

    #[test]
    fn rejects_bad_headers() {
        assert_eq!(Geometry::new(6, 6, 1 << 20, 16), Err(EINVAL)); // 7 elems
        assert_eq!(Geometry::new(3, 7, 1 << 20, 16), Err(EINVAL)); // 8 B < 16 B
        assert_eq!(Geometry::new(17, 7, 1 << 30, 16), Err(EINVAL));
        assert_eq!(Geometry::new(6, 7, DATA_OFFSET + 7 * 64, 16), Err(EINVAL));
        assert!(Geometry::new(6, 7, DATA_OFFSET + 8 * 64, 16).is_ok());
        assert_eq!(Geometry::new(4, u32::MAX, usize::MAX, 16), Err(EINVAL));
    }

    #[test]
    fn slots_wrap_with_the_mask() {
        let g = geo(8, 6);
        assert_eq!(g.slot_range(0), DATA_OFFSET..DATA_OFFSET + 64);
        assert_eq!(g.slot_range(9), g.slot_range(1));
        assert_eq!(g.slot_range(u32::MAX), g.slot_range(7));
    }

    #[test]
    fn full_and_empty_with_free_running_indices() {
        let g = geo(8, 6);
        assert_eq!(g.used(0, 0), Ok(0));
        assert_eq!(g.free(0, 0), Ok(8));
        assert_eq!(g.free(8, 0), Ok(0));
        // Across the u32 wrap.
        let c = u32::MAX - 2;
        assert_eq!(g.used(c.wrapping_add(8), c), Ok(8));
        assert_eq!(g.free(c.wrapping_add(5), c), Ok(3));
        // More than a ring apart is corruption.
        assert_eq!(g.used(9, 0), Err(EIO));
        assert_eq!(g.used(0, 1), Err(EIO));
    }
}
