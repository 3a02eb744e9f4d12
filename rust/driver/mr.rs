// SPDX-License-Identifier: GPL-2.0

//! Memory regions: user memory pinned for direct placement, and the DMA
//! region kernel consumers use.

use kernel::prelude::*;

use super::device::MetaRoceIbDevice;
use super::limits::MAX_MR_SIZE;
use crate::ib::umem::{PinnedPage, Umem, PAGE_SIZE};
use crate::sys::bindings as b;

/// What a region covers.
pub(crate) enum Region {
    /// All kernel memory (`get_dma_mr`): addresses are kernel virtual.
    #[allow(dead_code)] // The data path reads kernel consumers' buffers.
    Dma,
    /// Pinned user pages; byte `iova + i` of the region is byte
    /// `first_offset + i` of the page list.
    User {
        /// Keeps the pages pinned.
        _umem: Umem,
        /// The pages, in order.
        pages: KVec<PinnedPage>,
        /// The region's first address as the peer names it.
        iova: u64,
        /// Bytes.
        length: u64,
        /// Offset of the region's start in its first page.
        first_offset: usize,
    },
}

/// Driver state of an MR.
pub(crate) struct MrState {
    index: u32,
    /// `IB_ACCESS_*`.
    #[allow(dead_code)] // The data path checks access rights.
    access: u32,
    #[allow(dead_code)] // The data path places and gathers through it.
    region: Region,
}

/// Access flags this device implements.
const SUPPORTED_ACCESS: u32 = b::ib_access_flags_IB_ACCESS_LOCAL_WRITE
    | b::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    | b::ib_access_flags_IB_ACCESS_REMOTE_READ
    | b::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC
    | b::ib_access_flags_IB_ACCESS_RELAXED_ORDERING;

impl MrState {
    /// Registers `[start, start + length)` of the calling process.
    pub(crate) fn register_user(
        dev: &MetaRoceIbDevice,
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
        let (index, key) = dev.data().take_mr_key()?;
        let region = Region::User { _umem: umem, pages, iova, length, first_offset };
        Ok(((key, key), Self { index, access, region }))
    }

    /// The region of all memory, for kernel consumers.
    pub(crate) fn register_dma(dev: &MetaRoceIbDevice, access: u32) -> Result<((u32, u32), Self)> {
        if access & !SUPPORTED_ACCESS != 0 {
            return Err(EINVAL);
        }
        let (index, key) = dev.data().take_mr_key()?;
        Ok(((key, key), Self { index, access, region: Region::Dma }))
    }

    /// Gives the key back.
    pub(crate) fn release(&self, dev: &MetaRoceIbDevice) {
        dev.data().give_back_mr_key(self.index);
    }

    /// Copies `data` to `iova` of a user region, page by page.
    #[allow(dead_code)] // The receive path places payload with it.
    pub(crate) fn write(&self, iova: u64, data: &[u8]) -> Result {
        let Region::User { pages, iova: base, length, first_offset, .. } = &self.region else {
            return Err(EINVAL);
        };
        let off = iova.checked_sub(*base).ok_or(EFAULT)?;
        let end = off.checked_add(data.len() as u64).ok_or(EFAULT)?;
        if end > *length {
            return Err(EFAULT);
        }
        let mut at = *first_offset + off as usize;
        let mut rest = data;
        while !rest.is_empty() {
            let page = pages.get(at / PAGE_SIZE).ok_or(EFAULT)?;
            let in_page = at % PAGE_SIZE;
            let n = rest.len().min(PAGE_SIZE - in_page);
            page.write(in_page, &rest[..n])?;
            rest = &rest[n..];
            at += n;
        }
        Ok(())
    }
}
