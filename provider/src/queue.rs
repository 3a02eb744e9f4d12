//! A shared ring in memory mapped from the uverbs fd.
//!
//! The only unsafe code touching ring memory: it turns the mapping into
//! atomics for the two indices and byte slices for the elements, always
//! within the bounds that `Geometry` validated.

use core::ffi::{c_int, c_void};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};

use metaroce_abi::layout::queue_buf::{
    CONSUMER_INDEX, DATA, INDEX_MASK, KERNEL_FLAGS, LOG2_ELEM_SIZE, PRODUCER_INDEX,
};
use metaroce_abi::ring::Geometry;

use crate::abi;
use crate::errno::Errno;
use crate::sys;

enum Backing {
    Mmap,
    #[cfg(test)]
    Heap(#[allow(dead_code)] Box<[u64]>),
}

/// A memory region holding one ring.
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    backing: Backing,
}

// SAFETY: the mapping is plain memory owned by this object; the provider
// serialises access to it with its locks.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps the queue the kernel described in `mi` from `cmd_fd`.
    pub(crate) fn map(cmd_fd: c_int, mi: &sys::metaroce_mmap_info) -> Result<Self, Errno> {
        let len = mi.size as usize;
        let offset = i64::try_from(mi.offset).map_err(|_| crate::errno::EINVAL)?;
        if len < DATA {
            return Err(crate::errno::EINVAL);
        }
        // SAFETY: a fresh shared mapping chosen by the kernel (addr NULL);
        // nothing else in this process refers to that address range.
        let p = unsafe {
            abi::mmap(
                core::ptr::null_mut(),
                len,
                abi::PROT_READ | abi::PROT_WRITE,
                abi::MAP_SHARED,
                cmd_fd,
                offset,
            )
        };
        if p == abi::MAP_FAILED {
            return Err(Errno::from_os(
                std::io::Error::last_os_error().raw_os_error(),
            ));
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or(crate::errno::EIO)?;
        Ok(Mapping {
            ptr,
            len,
            backing: Backing::Mmap,
        })
    }

    /// A zeroed heap region standing in for the kernel's mapping in tests.
    #[cfg(test)]
    pub(crate) fn heap(len: usize) -> Self {
        let mut b = vec![0u64; len.div_ceil(8)].into_boxed_slice();
        let ptr = NonNull::new(b.as_mut_ptr().cast::<u8>()).unwrap();
        Mapping {
            ptr,
            len,
            backing: Backing::Heap(b),
        }
    }

    fn header_u32(&self, off: usize) -> &AtomicU32 {
        assert!(off + 4 <= self.len && off.is_multiple_of(4));
        // SAFETY: in bounds (checked above), 4-byte aligned (the mapping is
        // page- or 8-byte-aligned), and shared memory is only ever accessed
        // atomically at these header offsets.
        unsafe { &*self.ptr.as_ptr().add(off).cast::<AtomicU32>() }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        #[allow(irrefutable_let_patterns)]
        if let Backing::Mmap = self.backing {
            // SAFETY: unmapping exactly the range `map` created; no
            // references into it outlive `self`.
            unsafe { abi::munmap(self.ptr.as_ptr().cast::<c_void>(), self.len) };
        }
    }
}

/// A validated ring over a `Mapping`.
pub(crate) struct SharedQueue {
    map: Mapping,
    geo: Geometry,
}

impl SharedQueue {
    /// Reads and checks the header; `min_elem` is the smallest element size
    /// the queue's user can work with.
    pub(crate) fn new(map: Mapping, min_elem: usize) -> Result<Self, Errno> {
        let log2 = map.header_u32(LOG2_ELEM_SIZE).load(Ordering::Relaxed);
        let mask = map.header_u32(INDEX_MASK).load(Ordering::Relaxed);
        let geo = Geometry::from_header(log2, mask, map.len, min_elem)?;
        Ok(SharedQueue { map, geo })
    }

    pub(crate) fn geometry(&self) -> Geometry {
        self.geo
    }

    pub(crate) fn producer(&self) -> &AtomicU32 {
        self.map.header_u32(PRODUCER_INDEX)
    }

    pub(crate) fn consumer(&self) -> &AtomicU32 {
        self.map.header_u32(CONSUMER_INDEX)
    }

    /// `kernel_flags`: written by the kernel only (the provider reads it).
    pub(crate) fn kernel_flags(&self) -> &AtomicU32 {
        self.map.header_u32(KERNEL_FLAGS)
    }

    /// The element at index `idx`, for the side that owns it now (the
    /// producer before publishing it).
    pub(crate) fn slot_mut(&mut self, idx: u32) -> &mut [u8] {
        let r = self.geo.slot_range(idx);
        assert!(r.end <= self.map.len);
        // SAFETY: in bounds (Geometry::new checked the whole ring fits);
        // `&mut self` excludes other references from this process, and the
        // ring protocol keeps the kernel off an element it has not been
        // handed.
        unsafe { core::slice::from_raw_parts_mut(self.map.ptr.as_ptr().add(r.start), r.len()) }
    }

    /// The element at index `idx`, for a consumer that has seen it
    /// published (load-acquire of the producer index).
    pub(crate) fn slot(&self, idx: u32) -> &[u8] {
        let r = self.geo.slot_range(idx);
        assert!(r.end <= self.map.len);
        // SAFETY: in bounds; the kernel does not rewrite a published
        // element until the consumer index moves past it.
        unsafe { core::slice::from_raw_parts(self.map.ptr.as_ptr().add(r.start), r.len()) }
    }

    /// A test ring: zeroed memory with a header for `elems` elements of
    /// `1 << log2_elem` bytes.
    #[cfg(test)]
    pub(crate) fn for_test(elems: u32, log2_elem: u32) -> Self {
        let len = DATA + ((elems as usize) << log2_elem);
        let map = Mapping::heap(len);
        map.header_u32(LOG2_ELEM_SIZE)
            .store(log2_elem, Ordering::Relaxed);
        map.header_u32(INDEX_MASK)
            .store(elems - 1, Ordering::Relaxed);
        SharedQueue::new(map, 16).unwrap()
    }
}
