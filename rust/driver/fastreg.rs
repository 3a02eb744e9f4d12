// SPDX-License-Identifier: GPL-2.0

//! Fast-registration regions of kernel consumers: `ib_alloc_mr`
//! (`IB_MR_TYPE_MEM_REG`) reserves a key and a page list, `ib_map_mr_sg`
//! fills the list with the DMA addresses of a scatterlist (with virtual DMA,
//! kernel virtual addresses; see `rust/ib/kdma.rs`), an `IB_WR_REG_MR` work
//! request makes the region reachable under a key, rights and range, and
//! `IB_WR_LOCAL_INV` or a peer's SEND_WITH_INV makes it unreachable again.
//!
//! The region lives in the device's key table (`mr.rs`) and changes only
//! under that table's lock.

use core::ops::Range;

use kernel::prelude::*;

use crate::ib::kdma::{self, KernelConsumer};
use crate::ib::skb::TxTail;
use crate::ib::types::AccessFlags;

/// A page list: what `ib_map_mr_sg` produced.
struct Mapping {
    /// Page addresses, the first `mapped` of `max_num_sg` slots (allocated
    /// once: mapping may run in atomic context).
    pages: KVec<u64>,
    mapped: usize,
    /// log2 of the page size (0: not mapped). Shifts and masks only: no
    /// division on the data path.
    page_shift: u32,
    /// The iova and length the mapping spans.
    iova: u64,
    length: u64,
}

impl Mapping {
    fn new(max_pages: u32) -> Result<Self> {
        let mut pages = KVec::with_capacity(max_pages as usize, GFP_KERNEL)?;
        for _ in 0..max_pages {
            pages.push(0, GFP_KERNEL)?;
        }
        Ok(Self {
            pages,
            mapped: 0,
            page_shift: 0,
            iova: 0,
            length: 0,
        })
    }

    /// Becomes a copy of `other` (same capacity: both made by `new` with
    /// the region's `max_pages`).
    fn copy_from(&mut self, other: &Mapping) {
        let n = other.mapped.min(self.pages.len());
        self.pages[..n].copy_from_slice(&other.pages[..n]);
        self.mapped = n;
        self.page_shift = other.page_shift;
        self.iova = other.iova;
        self.length = other.length;
    }
}

/// A fast-registration region.
pub(crate) struct FastRegion {
    /// The key (index, and the key byte of the last registration).
    pub(super) key: u32,
    /// The protection domain (address of its `ib_pd`).
    pub(super) pd: usize,
    /// The rights of the last registration.
    pub(super) access: AccessFlags,
    /// Registered and not invalidated since.
    pub(super) valid: bool,
    /// Only kernel consumers allocate these (`ib_alloc_mr` is not a user
    /// verb): the page addresses are theirs to name.
    who: KernelConsumer,
    /// What `ib_map_mr_sg` last produced: staged until a REG_MR takes it,
    /// so that mapping while registered (iSER and NVMe map, then post
    /// LOCAL_INV and REG_MR in one chain) never changes what the current
    /// registration reaches.
    staged: Mapping,
    /// The mapping the current registration was made from.
    active: Mapping,
    /// What the last registration made reachable (inside `active`).
    iova: u64,
    length: u64,
}

impl FastRegion {
    /// An unregistered region for up to `max_pages` pages.
    pub(super) fn new(key: u32, pd: usize, max_pages: u32, who: KernelConsumer) -> Result<Self> {
        Ok(Self {
            key,
            pd,
            access: AccessFlags::NONE,
            valid: false,
            who,
            staged: Mapping::new(max_pages)?,
            active: Mapping::new(max_pages)?,
            iova: 0,
            length: 0,
        })
    }

    /// `ib_map_mr_sg` starts: an empty staged list of `page_size` pages.
    /// `EINVAL` for a page size that is not a power of two.
    pub(super) fn map_begin(&mut self, page_size: u32) -> Result {
        if !page_size.is_power_of_two() {
            return Err(EINVAL);
        }
        let m = &mut self.staged;
        m.mapped = 0;
        m.page_shift = page_size.trailing_zeros();
        m.iova = 0;
        m.length = 0;
        Ok(())
    }

    /// The next page; `ENOMEM` past `max_num_sg` (the core then maps fewer
    /// entries and tells the consumer).
    pub(super) fn map_page(&mut self, addr: u64) -> Result {
        let m = &mut self.staged;
        let slot = m.pages.get_mut(m.mapped).ok_or(ENOMEM)?;
        *slot = addr;
        m.mapped += 1;
        Ok(())
    }

    /// The mapping is done: it spans `[iova, iova + length)`, starting at
    /// byte `iova % page_size` of the first page.
    pub(super) fn map_end(&mut self, iova: u64, length: u64) {
        self.staged.iova = iova;
        self.staged.length = length;
    }

    /// `IB_WR_REG_MR`: `[iova, iova + length)`, inside the staged mapping,
    /// becomes reachable under the key byte of `new_key` with `access`.
    /// `EINVAL` when already registered or outside the mapping.
    pub(super) fn register(
        &mut self,
        new_key: u32,
        iova: u64,
        length: u64,
        access: AccessFlags,
    ) -> Result {
        let end = iova.checked_add(length).ok_or(EINVAL)?;
        let m = &self.staged;
        let map_end = m.iova.checked_add(m.length).ok_or(EINVAL)?;
        if self.valid || m.page_shift == 0 || iova < m.iova || end > map_end {
            return Err(EINVAL);
        }
        self.active.copy_from(&self.staged);
        self.key = (self.key & !0xff) | (new_key & 0xff);
        self.access = access;
        self.iova = iova;
        self.length = length;
        self.valid = true;
        Ok(())
    }

    /// Whether `[iova, iova + len)` is registered.
    pub(super) fn contains(&self, iova: u64, len: u64) -> bool {
        self.valid
            && iova
                .checked_sub(self.iova)
                .and_then(|off| off.checked_add(len))
                .is_some_and(|end| end <= self.length)
    }

    /// Walks `len` bytes from `iova`, calling `f(kernel address, range of
    /// the caller's buffer)` per page; `EFAULT` outside the registration.
    fn walk(
        &self,
        iova: u64,
        len: usize,
        mut f: impl FnMut(u64, Range<usize>) -> Result,
    ) -> Result {
        if !self.contains(iova, len as u64) {
            return Err(EFAULT);
        }
        let m = &self.active;
        let size = 1u64 << m.page_shift;
        // Byte `m.iova + i` is byte `m.iova % size + i` of the list (the
        // registration lies inside `active`, so this never underflows).
        let mut at = iova.checked_sub(m.iova).ok_or(EFAULT)? + (m.iova & (size - 1));
        let mut done = 0;
        while done < len {
            let page = *m.pages[..m.mapped]
                .get((at >> m.page_shift) as usize)
                .ok_or(EFAULT)?;
            let in_page = at & (size - 1);
            let n = (len - done).min((size - in_page) as usize);
            f(page.checked_add(in_page).ok_or(EFAULT)?, done..done + n)?;
            done += n;
            at += n as u64;
        }
        Ok(())
    }

    /// Appends `len` bytes of the region at `iova` to `out`.
    pub(super) fn copy_out(&self, iova: u64, len: usize, out: &mut TxTail<'_>) -> Result {
        self.walk(iova, len, |addr, r| {
            kdma::read_to(self.who, addr, r.len(), out)
        })
    }

    /// Copies `data` into the region at `iova`.
    pub(super) fn copy_in(&self, iova: u64, data: &[u8]) -> Result {
        self.walk(iova, data.len(), |addr, r| {
            kdma::write(self.who, addr, &data[r])
        })
    }
}
