// SPDX-License-Identifier: GPL-2.0

//! Memory regions: user memory pinned for direct placement, the device's
//! table the data path finds them in by key, and the access checks.

use kernel::prelude::*;
use kernel::sync::Arc;

use super::device::MetaRoceIbDevice;
use super::limits::{MAX_MR, MAX_MR_SIZE};
use crate::engine::wire::Syndrome;
use crate::ib::kdma::{self, KernelConsumer};
use crate::ib::umem::{PinnedPage, Umem, PAGE_SIZE};
use crate::sys::bindings as b;

/// Pinned user pages; byte `iova + i` of the region is byte
/// `first_offset + i` of the page list.
pub(crate) struct UserPages {
    /// Keeps the pages pinned.
    _umem: Umem,
    pages: KVec<PinnedPage>,
    iova: u64,
    length: u64,
    first_offset: usize,
}

/// A registered region as the data path sees it.
pub(crate) struct Region {
    key: u32,
    /// `IB_ACCESS_*`.
    access: u32,
    /// The protection domain (address of its `ib_pd`).
    pd: usize,
    /// `None`: the all-memory DMA region of kernel consumers (addresses are
    /// kernel virtual addresses), served only to kernel QPs.
    pages: Option<UserPages>,
}

/// Who reaches local memory through an lkey: the QP's protection domain and,
/// for a kernel QP, the proof that lets it use DMA regions.
#[derive(Clone, Copy)]
pub(crate) struct Requester {
    /// The protection domain (address of its `ib_pd`).
    pub(crate) pd: usize,
    /// Set for kernel QPs; a user QP never reaches kernel memory.
    pub(crate) kernel: Option<KernelConsumer>,
}

impl Region {
    /// Walks `len` bytes of the region from `iova` page by page, calling
    /// `f(page, offset in page, range of the caller's buffer)`; `EFAULT`
    /// outside the region.
    fn walk(&self, iova: u64, len: usize, mut f: impl FnMut(&PinnedPage, usize, core::ops::Range<usize>) -> Result) -> Result {
        let p = self.pages.as_ref().ok_or(EINVAL)?;
        let off = iova.checked_sub(p.iova).ok_or(EFAULT)?;
        let end = off.checked_add(len as u64).ok_or(EFAULT)?;
        if end > p.length {
            return Err(EFAULT);
        }
        let mut at = p.first_offset + off as usize;
        let mut done = 0;
        while done < len {
            let page = p.pages.get(at / PAGE_SIZE).ok_or(EFAULT)?;
            let in_page = at % PAGE_SIZE;
            let n = (len - done).min(PAGE_SIZE - in_page);
            f(page, in_page, done..done + n)?;
            done += n;
            at += n;
        }
        Ok(())
    }

    /// Whether `[iova, iova + len)` lies inside the region (the DMA region
    /// spans all memory).
    fn contains(&self, iova: u64, len: u64) -> bool {
        let Some(p) = self.pages.as_ref() else { return iova.checked_add(len).is_some() };
        iova.checked_sub(p.iova)
            .and_then(|off| off.checked_add(len))
            .is_some_and(|end| end <= p.length)
    }

    /// Copies from the region at `iova` into `buf`.
    fn copy_out(&self, iova: u64, buf: &mut [u8]) -> Result {
        self.walk(iova, buf.len(), |page, at, r| page.read(at, &mut buf[r]))
    }

    /// Copies `data` into the region at `iova`.
    fn copy_in(&self, iova: u64, data: &[u8]) -> Result {
        self.walk(iova, data.len(), |page, at, r| page.write(at, &data[r]))
    }

    /// A local read by `who`: a DMA region only for kernel QPs.
    fn read_for(&self, who: &Requester, iova: u64, buf: &mut [u8]) -> Result {
        match (&self.pages, who.kernel) {
            (Some(_), _) => self.copy_out(iova, buf),
            (None, Some(k)) => kdma::read(k, iova, buf),
            (None, None) => Err(EACCES),
        }
    }

    /// A local write by `who`: a DMA region only for kernel QPs.
    fn write_for(&self, who: &Requester, iova: u64, data: &[u8]) -> Result {
        match (&self.pages, who.kernel) {
            (Some(_), _) => self.copy_in(iova, data),
            (None, Some(k)) => kdma::write(k, iova, data),
            (None, None) => Err(EACCES),
        }
    }
}

/// The regions of a device by key index. Lookups happen under the device's
/// bh-safe lock of this table, so a region is never unpinned while the data
/// path copies through it (unregistration removes it under the same lock).
pub(crate) struct MrTable {
    slots: KVec<Option<Arc<Region>>>,
}

impl MrTable {
    /// An empty table.
    pub(crate) fn new() -> Result<Self> {
        let mut slots = KVec::with_capacity(MAX_MR as usize, GFP_KERNEL)?;
        for _ in 0..MAX_MR {
            slots.push(None, GFP_KERNEL)?;
        }
        Ok(Self { slots })
    }

    fn find(&self, key: u32, pd: usize) -> Option<&Region> {
        let r = self.slots.get((key >> 8) as usize)?.as_deref()?;
        (r.key == key && r.pd == pd).then_some(r)
    }

    /// The peer writes (RDMA WRITE): needs REMOTE_WRITE.
    pub(crate) fn write_remote(&self, rkey: u32, pd: usize, va: u64, offset: u64, data: &[u8]) -> core::result::Result<(), Syndrome> {
        let r = self.find(rkey, pd).ok_or(Syndrome::RemoteAccess)?;
        if r.access & b::ib_access_flags_IB_ACCESS_REMOTE_WRITE == 0 {
            return Err(Syndrome::RemoteAccess);
        }
        let iova = va.checked_add(offset).ok_or(Syndrome::RemoteAccess)?;
        r.copy_in(iova, data).map_err(|_| Syndrome::RemoteAccess)
    }

    /// The peer may read `[va, va + len)` (RDMA READ, checked once for the
    /// whole request): the key, the PD, REMOTE_READ and the bounds.
    pub(crate) fn check_remote_read(&self, rkey: u32, pd: usize, va: u64, len: u64) -> core::result::Result<(), Syndrome> {
        let r = self.find(rkey, pd).ok_or(Syndrome::RemoteAccess)?;
        if r.access & b::ib_access_flags_IB_ACCESS_REMOTE_READ == 0 || !r.contains(va, len) {
            return Err(Syndrome::RemoteAccess);
        }
        Ok(())
    }

    /// The send path reads the bytes of a READ response: needs REMOTE_READ
    /// (checked again per packet: the region may have gone since the
    /// request was accepted).
    pub(crate) fn read_remote(&self, rkey: u32, pd: usize, va: u64, out: &mut [u8]) -> Result {
        let r = self.find(rkey, pd).ok_or(EACCES)?;
        if r.access & b::ib_access_flags_IB_ACCESS_REMOTE_READ == 0 {
            return Err(EACCES);
        }
        r.copy_out(va, out)
    }

    /// A local buffer of a work request is usable: its key names a region
    /// of the PD that holds `[va, va + len)`, with LOCAL_WRITE when the
    /// device writes into it (RDMA READ targets).
    pub(crate) fn check_local(&self, lkey: u32, who: &Requester, va: u64, len: u32, write: bool) -> Result {
        let r = self.find(lkey, who.pd).ok_or(EACCES)?;
        if r.pages.is_none() && who.kernel.is_none() {
            // A DMA region (kernel memory) named by a user QP.
            return Err(EACCES);
        }
        if write && r.access & b::ib_access_flags_IB_ACCESS_LOCAL_WRITE == 0 {
            return Err(EACCES);
        }
        if !r.contains(va, u64::from(len)) {
            return Err(EACCES);
        }
        Ok(())
    }

    /// The receive path fills a posted buffer: needs LOCAL_WRITE.
    pub(crate) fn write_local(&self, lkey: u32, who: &Requester, va: u64, data: &[u8]) -> Result {
        let r = self.find(lkey, who.pd).ok_or(EACCES)?;
        if r.access & b::ib_access_flags_IB_ACCESS_LOCAL_WRITE == 0 {
            return Err(EACCES);
        }
        r.write_for(who, va, data)
    }

    /// The send path reads a local buffer (any registered region).
    pub(crate) fn read_local(&self, lkey: u32, who: &Requester, va: u64, out: &mut [u8]) -> Result {
        let r = self.find(lkey, who.pd).ok_or(EACCES)?;
        r.read_for(who, va, out)
    }
}

/// Driver state of an MR: its slot in the device table.
pub(crate) struct MrState {
    index: u32,
    _region: Arc<Region>,
}

/// Access flags this device accepts. `MW_BIND` permits binding memory
/// windows to the MR; the device has no memory windows (`alloc_mw` fails
/// with `EOPNOTSUPP`), so the permission is accepted and can never be used.
const SUPPORTED_ACCESS: u32 = b::ib_access_flags_IB_ACCESS_LOCAL_WRITE
    | b::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    | b::ib_access_flags_IB_ACCESS_REMOTE_READ
    | b::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC
    | b::ib_access_flags_IB_ACCESS_MW_BIND
    | b::ib_access_flags_IB_ACCESS_RELAXED_ORDERING;

impl MrState {
    fn insert(dev: &MetaRoceIbDevice, pd: usize, access: u32, pages: Option<UserPages>) -> Result<((u32, u32), Self)> {
        let (index, key) = dev.data().take_mr_key()?;
        let region = match Arc::new(Region { key, access, pd, pages }, GFP_KERNEL) {
            Ok(r) => r,
            Err(e) => {
                dev.data().give_back_mr_key(index);
                return Err(e.into());
            }
        };
        if let Some(slot) = dev.data().mrs.lock().slots.get_mut(index as usize) {
            *slot = Some(region.clone());
        }
        Ok(((key, key), Self { index, _region: region }))
    }

    /// Registers `[start, start + length)` of the calling process.
    pub(crate) fn register_user(
        dev: &MetaRoceIbDevice,
        pd: usize,
        start: u64,
        length: u64,
        iova: u64,
        access: u32,
    ) -> Result<((u32, u32), Self)> {
        if length == 0 || length > MAX_MR_SIZE || access & !SUPPORTED_ACCESS != 0 {
            return Err(EINVAL);
        }
        iova.checked_add(length).ok_or(EINVAL)?;
        let umem = Umem::get(dev, start, length, access)?;
        let pages = umem.pages()?;
        let first_offset = (start as usize) & (PAGE_SIZE - 1);
        if (pages.len() * PAGE_SIZE) < first_offset + length as usize {
            return Err(EFAULT);
        }
        let user = UserPages { _umem: umem, pages, iova, length, first_offset };
        Self::insert(dev, pd, access, Some(user))
    }

    /// The region of all memory, for kernel consumers.
    pub(crate) fn register_dma(dev: &MetaRoceIbDevice, pd: usize, access: u32) -> Result<((u32, u32), Self)> {
        if access & !SUPPORTED_ACCESS != 0 {
            return Err(EINVAL);
        }
        Self::insert(dev, pd, access, None)
    }

    /// Removes the region from the table (the data path no longer finds it)
    /// and gives the key back; the pages are unpinned when `self` drops.
    pub(crate) fn release(&self, dev: &MetaRoceIbDevice) {
        if let Some(slot) = dev.data().mrs.lock().slots.get_mut(self.index as usize) {
            *slot = None;
        }
        dev.data().give_back_mr_key(self.index);
    }
}
