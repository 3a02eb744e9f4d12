// SPDX-License-Identifier: GPL-2.0

//! Rings in memory shared with user space (`struct metaroce_queue_buf`,
//! include/uapi/rdma/metaroce-abi.h), and their mmap entries.
//!
//! The buffer comes from `vmalloc_user`. Once exposed, it belongs to its
//! `rdma_user_mmap_entry`: dropping the ring removes the entry, and the
//! buffer is freed in `mmap_free` once no `mmap` call holds the entry. A
//! mapping does not hold it: `remap_vmalloc_range` takes a reference on
//! each page it maps, so the pages of a destroyed queue stay allocated
//! until the process unmaps them, and it never sees memory given to
//! anyone else (Documentation/security.md, "Decisions").

use core::mem::offset_of;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};

use kernel::error::to_result;
use kernel::prelude::*;

use super::sys::bindings;
use super::udata::Udata;
use crate::abi::ring::{self, Geometry};

const PAGE_SIZE: usize = 1 << bindings::PAGE_SHIFT;

// The ring format of `crate::abi` (the WQE and CQE layout) is that of
// include/uapi/rdma/metaroce-abi.h as bindgen sees it.
crate::check_layout!(crate::abi, crate::ib::sys::bindings);

// The driver reads the opcodes a process writes (`IB_UVERBS_WR_*`, the
// ring format's) as the kernel's `IB_WR_*`: the same values.
const _: () = {
    use crate::abi::opcode::WrOpcode;
    use bindings as b;
    let same = [
        (WrOpcode::RdmaWrite, b::ib_wr_opcode_IB_WR_RDMA_WRITE),
        (
            WrOpcode::RdmaWriteWithImm,
            b::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM,
        ),
        (WrOpcode::Send, b::ib_wr_opcode_IB_WR_SEND),
        (WrOpcode::SendWithImm, b::ib_wr_opcode_IB_WR_SEND_WITH_IMM),
        (WrOpcode::RdmaRead, b::ib_wr_opcode_IB_WR_RDMA_READ),
        (
            WrOpcode::AtomicCmpAndSwp,
            b::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP,
        ),
        (
            WrOpcode::AtomicFetchAndAdd,
            b::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD,
        ),
        (WrOpcode::LocalInv, b::ib_wr_opcode_IB_WR_LOCAL_INV),
        (
            WrOpcode::BindMw,
            b::ib_uverbs_wr_opcode_IB_UVERBS_WR_BIND_MW,
        ),
        (WrOpcode::SendWithInv, b::ib_wr_opcode_IB_WR_SEND_WITH_INV),
        (WrOpcode::AtomicWrite, b::ib_wr_opcode_IB_WR_ATOMIC_WRITE),
    ];
    let mut i = 0;
    while i < same.len() {
        assert!(same[i].0 as u32 == same[i].1);
        i += 1;
    }
    use crate::abi::opcode::{SendFlags, WcFlags};
    assert!(SendFlags::SIGNALED == b::ib_send_flags_IB_SEND_SIGNALED as u32);
    assert!(SendFlags::SOLICITED == b::ib_send_flags_IB_SEND_SOLICITED as u32);
    assert!(SendFlags::INLINE == b::ib_send_flags_IB_SEND_INLINE as u32);
    assert!(WcFlags::GRH == b::ib_wc_flags_IB_WC_GRH);
    assert!(WcFlags::WITH_IMM == b::ib_wc_flags_IB_WC_WITH_IMM);
    assert!(WcFlags::WITH_INVALIDATE == b::ib_wc_flags_IB_WC_WITH_INVALIDATE);
    // Our own bit is none of the kernel's (they end at this one).
    let kernel_bits = 2 * b::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE - 1;
    assert!(WcFlags::GRH_IPV6 & kernel_bits == 0);
};

/// Where user space maps an exposed ring (the uapi `metaroce_mmap_info`).
pub(crate) type MmapInfo = bindings::metaroce_mmap_info;

/// The mmap entry a ring's buffer hangs on.
#[repr(C)]
struct RingMmapEntry {
    rdma: bindings::rdma_user_mmap_entry,
    buf: *mut u8,
}

/// A ring of the shape `geo` (the ring format's index arithmetic).
///
/// # Invariants
///
/// `buf` is a live `vmalloc_user` block of `size` bytes, at least
/// `geo.bytes()`: the header and every element. If `entry` is set, it
/// owns `buf` (freed in [`mmap_free`]), else the ring does.
pub(crate) struct SharedRing {
    buf: NonNull<u8>,
    size: usize,
    geo: Geometry,
    entry: Option<NonNull<RingMmapEntry>>,
}

// SAFETY: the buffer is plain shared memory accessed with atomics and
// volatile copies; the handle is not tied to a thread.
unsafe impl Send for SharedRing {}
// SAFETY: `&SharedRing` only offers atomic index accesses and element
// copies; callers serialise producers and consumers themselves.
unsafe impl Sync for SharedRing {}

impl SharedRing {
    /// Allocates a zeroed ring; `count` and `elem_size` are powers of two.
    pub(crate) fn new(count: u32, elem_size: u32) -> Result<Self> {
        let geo = Geometry::new(count, elem_size).ok_or(EINVAL)?;
        let size = geo
            .bytes()
            .checked_next_multiple_of(PAGE_SIZE)
            .ok_or(EINVAL)?;
        // SAFETY: plain allocation; NULL on failure.
        let buf = unsafe { bindings::metaroce_helper_vmalloc_user(size as _) };
        let buf = NonNull::new(buf.cast::<u8>()).ok_or(ENOMEM)?;
        let ring = Self {
            buf,
            size,
            geo,
            entry: None,
        };
        let hdr = buf.as_ptr().cast::<bindings::metaroce_queue_buf>();
        // SAFETY: the block is ours, zeroed and holds the header.
        unsafe {
            (*hdr).log2_elem_size = geo.log2_elem_size();
            (*hdr).index_mask = geo.index_mask();
        }
        Ok(ring)
    }

    /// The ring's shape and index arithmetic.
    pub(crate) fn geometry(&self) -> Geometry {
        self.geo
    }

    /// Number of elements.
    pub(crate) fn count(&self) -> u32 {
        self.geo.capacity()
    }

    /// Bytes per element.
    pub(crate) fn elem_size(&self) -> usize {
        self.geo.elem_size()
    }

    /// Makes the ring mappable by the process making the call `udata`
    /// belongs to; returns where.
    pub(crate) fn expose_for(&mut self, udata: &Udata<'_>) -> Result<MmapInfo> {
        let ucontext = udata.ucontext_raw();
        if self.entry.is_some() || ucontext.is_null() {
            return Err(EINVAL);
        }
        let entry = KBox::new(
            RingMmapEntry {
                rdma: Default::default(),
                buf: self.buf.as_ptr(),
            },
            GFP_KERNEL,
        )?;
        let entry = KBox::into_raw(entry);
        // SAFETY: `entry` is a fresh allocation the core may keep until
        // `mmap_free`; `ucontext` is the live context of the current call.
        let ret = unsafe {
            bindings::rdma_user_mmap_entry_insert(
                ucontext,
                core::ptr::addr_of_mut!((*entry).rdma),
                self.size,
            )
        };
        if let Err(e) = to_result(ret) {
            // SAFETY: not inserted, so still solely ours.
            drop(unsafe { KBox::from_raw(entry) });
            return Err(e);
        }
        // SAFETY: inserted above; the offset is fixed for its lifetime.
        let offset =
            unsafe { bindings::metaroce_helper_mmap_offset(core::ptr::addr_of!((*entry).rdma)) };
        self.entry = NonNull::new(entry);
        Ok(MmapInfo {
            offset,
            size: self.size as u32,
            reserved: 0,
        })
    }

    fn index(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: `offset` is that of a 4-byte aligned u32 inside the live
        // header (callers pass offset_of! values); shared with user space,
        // so only ever accessed atomically.
        unsafe { AtomicU32::from_ptr(self.buf.as_ptr().add(offset).cast()) }
    }

    /// The producer index, read with acquire (elements before it are visible).
    pub(crate) fn producer(&self) -> u32 {
        self.index(offset_of!(bindings::metaroce_queue_buf, producer_index))
            .load(Ordering::Acquire)
    }

    /// The consumer index, read with acquire.
    pub(crate) fn consumer(&self) -> u32 {
        self.index(offset_of!(bindings::metaroce_queue_buf, consumer_index))
            .load(Ordering::Acquire)
    }

    /// Elements from `consumer` up to the producer index; `None` when they
    /// are more than the ring holds (a process wrote its indices far apart).
    /// Every loop over a ring's entries is bounded by this, so that no
    /// index a process writes makes the kernel do more than a ring's worth
    /// of work per call.
    pub(crate) fn pending_from(&self, consumer: u32) -> Option<u32> {
        self.geo.used(self.producer(), consumer).ok()
    }

    /// Publishes the producer index (release: written elements first).
    pub(crate) fn set_producer(&self, value: u32) {
        self.index(offset_of!(bindings::metaroce_queue_buf, producer_index))
            .store(value, Ordering::Release)
    }

    /// Publishes the consumer index (release: reads of the slot are done).
    pub(crate) fn set_consumer(&self, value: u32) {
        self.index(offset_of!(bindings::metaroce_queue_buf, consumer_index))
            .store(value, Ordering::Release)
    }

    fn kernel_flags(&self) -> &AtomicU32 {
        self.index(offset_of!(bindings::metaroce_queue_buf, kernel_flags))
    }

    /// Tells the producer that the kernel will look at the ring again on
    /// its own (`KernelFlags::TAKES_POSTS`): a post needs no doorbell.
    /// The kernel never reads the word back, so a process that writes it
    /// misleads only itself.
    pub(crate) fn advertise_takes_posts(&self) {
        ring::advertise_takes_posts(self.kernel_flags());
    }

    /// Withdraws [`SharedRing::advertise_takes_posts`] before the kernel
    /// stops looking at the ring, and returns the producer index read
    /// after that: the flag's store, a full barrier, then the load, as
    /// `crate::abi::ring::withdraw_takes_posts` states. Of a post racing
    /// with this call, either the producer sees the flag gone (and rings)
    /// or the index returned includes it (and the caller takes it).
    pub(crate) fn withdraw_takes_posts(&self) -> u32 {
        let producer = self.index(offset_of!(bindings::metaroce_queue_buf, producer_index));
        ring::withdraw_takes_posts(self.kernel_flags(), producer)
    }

    fn slot(&self, index: u32) -> *mut u8 {
        let at = self.geo.slot_range(index).start;
        // SAFETY: `slot_range` masks the index, so the element lies inside
        // `geo.bytes()`, inside the block (invariant).
        unsafe { self.buf.as_ptr().add(at) }
    }

    /// Copies element `index` (masked) into `out`, up to the element size.
    /// User space may write the slot concurrently: the copy is volatile and
    /// callers validate what they read.
    pub(crate) fn read(&self, index: u32, out: &mut [u8]) {
        let src = self.slot(index);
        for (i, b) in out.iter_mut().take(self.elem_size()).enumerate() {
            // SAFETY: `i` is inside the element (bounded by `take`).
            *b = unsafe { src.add(i).read_volatile() };
        }
    }

    /// Writes `data` (up to the element size) into element `index` (masked).
    pub(crate) fn write(&self, index: u32, data: &[u8]) {
        let dst = self.slot(index);
        for (i, b) in data.iter().take(self.elem_size()).enumerate() {
            // SAFETY: `i` is inside the element (bounded by `take`).
            unsafe { dst.add(i).write_volatile(*b) };
        }
    }
}

impl Drop for SharedRing {
    fn drop(&mut self) {
        match self.entry {
            // SAFETY: inserted in `expose`; the core calls `mmap_free` (which
            // frees the buffer) once no mapping is left.
            Some(entry) => unsafe {
                bindings::rdma_user_mmap_entry_remove(core::ptr::addr_of_mut!(
                    (*entry.as_ptr()).rdma
                ))
            },
            // SAFETY: never exposed, so the buffer is ours alone.
            None => unsafe { bindings::vfree(self.buf.as_ptr().cast()) },
        }
    }
}

/// The device's `mmap` op: maps the ring behind the offset of `vma`.
///
/// # Safety
///
/// Called by the core with a live user context and VMA.
pub(crate) unsafe extern "C" fn mmap(
    ucontext: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> kernel::ffi::c_int {
    // SAFETY: the core's arguments; the lookup checks the VMA's size against
    // the entry and takes a reference we drop below.
    let rdma = unsafe { bindings::rdma_user_mmap_entry_get(ucontext, vma) };
    if rdma.is_null() {
        return EINVAL.to_errno();
    }
    let entry = rdma.cast::<RingMmapEntry>();
    // SAFETY: every entry this driver inserts is a `RingMmapEntry` with
    // `rdma` first; the buffer is a vmalloc_user block owned by the entry.
    let ret = unsafe { bindings::remap_vmalloc_range(vma, (*entry).buf.cast(), 0) };
    // SAFETY: drops the reference taken by the lookup.
    unsafe { bindings::rdma_user_mmap_entry_put(rdma) };
    ret
}

/// The device's `mmap_free` op: the last user of an entry is gone.
///
/// # Safety
///
/// Called by the core once per entry, after its refcount dropped to zero.
pub(crate) unsafe extern "C" fn mmap_free(rdma: *mut bindings::rdma_user_mmap_entry) {
    let entry = rdma.cast::<RingMmapEntry>();
    // SAFETY: allocated by `KBox::new` in `expose` and given to the core,
    // which hands it back exactly once, here; it owns the buffer.
    let entry = unsafe { KBox::from_raw(entry) };
    // SAFETY: the buffer's owner is this entry and no `mmap` call uses it;
    // the pages a process still maps keep the references the mapping took.
    unsafe { bindings::vfree(entry.buf.cast()) };
}
