//! Ring index arithmetic of `struct metaroce_queue_buf`.
//!
//! Indices are free-running `u32` counters; the slot of index `i` is
//! `i & index_mask`; the ring holds `index_mask + 1` elements and is full
//! when `producer - consumer == index_mask + 1` (wrapping arithmetic).
//! The index a peer writes may be anything: a distance of more than a
//! ring is refused, so that no index makes a reader do more than a ring's
//! worth of work.

use core::ops::Range;
use core::sync::atomic::{fence, AtomicU32, Ordering};

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

/// `kernel_flags` of a ring's header (`enum metaroce_kernel_flags`): what
/// the kernel tells the producer of a send queue. Only the kernel writes
/// the word and it never reads it back, so whatever a process writes there
/// misleads only that process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelFlags(u32);

impl KernelFlags {
    /// None set: every post needs a doorbell (also what a kernel that
    /// predates the word leaves there: it was reserved, zero).
    pub const NONE: Self = Self(0);
    /// `METAROCE_KF_TAKES_POSTS`: the kernel will look at the send ring
    /// again without a doorbell, and take what was published by then.
    pub const TAKES_POSTS: Self = Self(1 << 0);

    /// The flags of the word's value; bits this side does not know are
    /// ignored (a newer kernel's).
    pub const fn from_bits(bits: u32) -> Self {
        Self(bits & Self::TAKES_POSTS.0)
    }

    /// The word's value.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether requests published before the word was read (with a full
    /// barrier between the producer index's store and this read, on the
    /// producer's side) need a doorbell: unless the kernel said it takes
    /// them on its own.
    pub const fn doorbell_needed(self) -> bool {
        self.0 & Self::TAKES_POSTS.0 == 0
    }
}

/// Doorbell suppression, the producer's side: after publishing its index,
/// whether the requests need a doorbell (`flags` is the header's
/// `kernel_flags`). The full barrier orders the index's store before the
/// flag's load; with [`withdraw_takes_posts`] on the kernel's side, a post
/// racing with the withdrawal is either seen by the kernel or sees the
/// flag gone (metaroce-abi.h).
pub fn doorbell_needed_after_publish(flags: &AtomicU32) -> bool {
    fence(Ordering::SeqCst);
    KernelFlags::from_bits(flags.load(Ordering::Relaxed)).doorbell_needed()
}

/// The kernel's side: says it takes posts without a doorbell. Relaxed: the
/// word carries no data, and what makes it true is the kernel's state.
pub fn advertise_takes_posts(flags: &AtomicU32) {
    flags.store(KernelFlags::TAKES_POSTS.bits(), Ordering::Relaxed);
}

/// The kernel's side, before it stops looking at the ring: clears the
/// flag, a full barrier, then reads the producer index (acquire: the
/// elements before it are visible), which the caller takes up to.
pub fn withdraw_takes_posts(flags: &AtomicU32, producer: &AtomicU32) -> u32 {
    flags.store(KernelFlags::NONE.bits(), Ordering::Relaxed);
    fence(Ordering::SeqCst);
    producer.load(Ordering::Acquire)
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
    fn a_doorbell_is_needed_unless_the_kernel_takes_posts() {
        assert!(KernelFlags::NONE.doorbell_needed());
        assert!(KernelFlags::from_bits(0).doorbell_needed());
        assert!(!KernelFlags::TAKES_POSTS.doorbell_needed());
        assert!(!KernelFlags::from_bits(1).doorbell_needed());
        // Unknown bits (a newer kernel's) are ignored.
        assert!(KernelFlags::from_bits(!1).doorbell_needed());
        assert_eq!(KernelFlags::from_bits(u32::MAX), KernelFlags::TAKES_POSTS);
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
