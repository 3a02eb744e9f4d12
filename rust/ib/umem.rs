// SPDX-License-Identifier: GPL-2.0

//! Pinned user memory (`ib_umem`) of a memory region, and the pages behind
//! it, which received payload is copied into directly.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};

use kernel::error::from_err_ptr;
use kernel::prelude::*;

use super::device::Device;
use super::skb::TxTail;
use super::sys::bindings;
use super::types::AccessFlags;

/// Bytes per page.
pub(crate) const PAGE_SIZE: usize = 1 << bindings::PAGE_SHIFT;

/// One pinned page of a region.
///
/// # Invariants
///
/// Points to a `struct page` pinned by the `Umem` it came from, for as long
/// as that `Umem` lives (the owner keeps both together).
#[derive(Clone, Copy)]
pub(crate) struct PinnedPage(NonNull<bindings::page>);

// SAFETY: a page pointer is a plain address; access goes through
// kmap_local, valid in any context.
unsafe impl Send for PinnedPage {}
// SAFETY: as above.
unsafe impl Sync for PinnedPage {}

impl PinnedPage {
    /// Copies `src` into the page at `offset`; the range must fit the page.
    pub(crate) fn write(&self, offset: usize, src: &[u8]) -> Result {
        if offset
            .checked_add(src.len())
            .is_none_or(|end| end > PAGE_SIZE)
        {
            return Err(EINVAL);
        }
        // SAFETY: the page is pinned (invariant); kmap_local is valid in any
        // context and the range is inside the page.
        unsafe {
            let va = bindings::metaroce_helper_kmap_local_page(self.0.as_ptr()).cast::<u8>();
            core::ptr::copy_nonoverlapping(src.as_ptr(), va.add(offset), src.len());
            bindings::metaroce_helper_kunmap_local(va.cast());
        }
        Ok(())
    }
}

impl PinnedPage {
    /// Appends the `len` bytes of the page at `offset` to `dst`; the range
    /// must fit the page.
    pub(crate) fn read_to(&self, offset: usize, len: usize, dst: &mut TxTail<'_>) -> Result {
        if offset.checked_add(len).is_none_or(|end| end > PAGE_SIZE) {
            return Err(EINVAL);
        }
        // SAFETY: as in `write`; the mapped range is inside the page, which
        // is not the packet's buffer (a pinned user page).
        unsafe {
            let va = bindings::metaroce_helper_kmap_local_page(self.0.as_ptr()).cast::<u8>();
            let res = dst.put_raw(va.add(offset), len);
            bindings::metaroce_helper_kunmap_local(va.cast());
            res
        }
    }
}

impl PinnedPage {
    /// Replaces the 8-byte value at `offset` (a multiple of 8) with
    /// `op(old)` as one atomic step (a compare-and-exchange loop, so the
    /// update is atomic with respect to the CPUs too) and returns `old`.
    /// `op` may run more than once when the value changes under it.
    pub(crate) fn atomic_u64(&self, offset: usize, op: impl Fn(u64) -> u64) -> Result<u64> {
        if !offset.is_multiple_of(8) || offset.checked_add(8).is_none_or(|end| end > PAGE_SIZE) {
            return Err(EINVAL);
        }
        // SAFETY: the page is pinned (invariant) and kmap_local is valid in
        // any context; the 8 bytes at `offset` are inside the page and
        // aligned for a u64, and are only accessed through atomics here
        // (other writers of the page are CPUs or copies of whole ranges,
        // which is the sharing RDMA memory has by nature).
        unsafe {
            let va = bindings::metaroce_helper_kmap_local_page(self.0.as_ptr()).cast::<u8>();
            let cell = AtomicU64::from_ptr(va.add(offset).cast::<u64>());
            let mut old = cell.load(Ordering::SeqCst);
            loop {
                match cell.compare_exchange(old, op(old), Ordering::SeqCst, Ordering::SeqCst) {
                    Ok(_) => break,
                    Err(now) => old = now,
                }
            }
            bindings::metaroce_helper_kunmap_local(va.cast());
            Ok(old)
        }
    }
}

/// User memory pinned for a memory region; unpinned on drop.
///
/// # Invariants
///
/// `ptr` is a live umem from `ib_umem_get` that this object releases.
pub(crate) struct Umem {
    ptr: NonNull<bindings::ib_umem>,
}

// SAFETY: the umem is only released on drop; nothing else is thread-bound.
unsafe impl Send for Umem {}
// SAFETY: `&Umem` only reads the page list.
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `[addr, addr + len)` of the calling process for `access`.
    pub(crate) fn get<D>(
        dev: &Device<D>,
        addr: u64,
        len: u64,
        access: AccessFlags,
    ) -> Result<Self> {
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        let addr = usize::try_from(addr).map_err(|_| EINVAL)?;
        // SAFETY: the device is live; the core checks the range and access
        // and returns an ERR_PTR on failure.
        let ptr = from_err_ptr(unsafe {
            bindings::ib_umem_get(dev.as_raw(), addr as _, len, access.raw() as i32)
        })?;
        Ok(Self {
            ptr: NonNull::new(ptr).ok_or(ENOMEM)?,
        })
    }

    /// The pinned pages in order: page `i` holds bytes
    /// `[i * PAGE_SIZE - first_offset, ...)` of the region.
    pub(crate) fn pages(&self) -> Result<KVec<PinnedPage>> {
        let mut pages = KVec::new();
        let mut iter = bindings::sg_page_iter::default();
        // SAFETY: the umem is live; its sg table lists the pinned pages and
        // the iterator walks it without modifying it.
        unsafe {
            let sgt = &(*self.ptr.as_ptr()).sgt_append.sgt;
            bindings::__sg_page_iter_start(&mut iter, sgt.sgl, sgt.orig_nents, 0);
            while bindings::__sg_page_iter_next(&mut iter) {
                let page = bindings::metaroce_helper_sg_page_iter_page(&mut iter);
                pages.push(PinnedPage(NonNull::new(page).ok_or(EFAULT)?), GFP_KERNEL)?;
            }
        }
        Ok(pages)
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: ours to release (invariant).
        unsafe { bindings::ib_umem_release(self.ptr.as_ptr()) };
    }
}
