// SPDX-License-Identifier: GPL-2.0

//! Memory regions: user memory pinned for direct placement, the device's
//! table the data path finds them in by key, and the access checks.
//!
//! Memory windows share the table (and the key space) with regions: a
//! window's rkey reaches a range of the region it is bound to, with the
//! window's own remote rights. So do the fast-registration regions of
//! kernel consumers (`fastreg.rs`), reachable only while registered.

use kernel::prelude::*;
use kernel::sync::Arc;

use super::fastreg::FastRegion;
use super::limits::{MAX_FAST_REG_PAGES, MAX_MR, MAX_MR_SIZE};
use super::refusal::{check_limits, refuse};
use crate::engine::wire::{Syndrome, ATOMIC_LEN};
use crate::ib::device::Device;
use crate::ib::kdma::{self, KernelConsumer};
use crate::ib::lock::SpinLockBh;
use crate::ib::skb::TxTail;
use crate::ib::types::{AccessFlags, MwType};
use crate::ib::umem::{PinnedPage, Umem, PAGE_SIZE};

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
    access: AccessFlags,
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
    fn walk(
        &self,
        iova: u64,
        len: usize,
        mut f: impl FnMut(&PinnedPage, usize, core::ops::Range<usize>) -> Result,
    ) -> Result {
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
        let Some(p) = self.pages.as_ref() else {
            return iova.checked_add(len).is_some();
        };
        iova.checked_sub(p.iova)
            .and_then(|off| off.checked_add(len))
            .is_some_and(|end| end <= p.length)
    }

    /// Appends `len` bytes of the region at `iova` to `out`.
    fn copy_out(&self, iova: u64, len: usize, out: &mut TxTail<'_>) -> Result {
        self.walk(iova, len, |page, at, r| page.read_to(at, r.len(), out))
    }

    /// Copies `data` into the region at `iova`.
    fn copy_in(&self, iova: u64, data: &[u8]) -> Result {
        self.walk(iova, data.len(), |page, at, r| page.write(at, &data[r]))
    }

    /// A local read by `who`: a DMA region only for kernel QPs.
    fn read_for(&self, who: &Requester, iova: u64, len: usize, out: &mut TxTail<'_>) -> Result {
        match (&self.pages, who.kernel) {
            (Some(_), _) => self.copy_out(iova, len, out),
            (None, Some(k)) => kdma::read_to(k, iova, len, out),
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

/// A memory window: a range of a region that a peer reaches through the
/// window's own rkey and rights. Type 1 windows are bound and unbound with
/// `ibv_bind_mw`, type 2 ones bound by a BIND_MW work request and unbound by
/// invalidation (LOCAL_INV, or a peer's SEND_WITH_INV). Windows belong to a
/// protection domain, and so do the QPs that reach them (type 2 windows are
/// not tied to the QP that bound them).
struct Window {
    /// The current rkey: the index stays, the low byte is the binder's.
    key: u32,
    /// The protection domain (address of its `ib_pd`).
    pd: usize,
    type2: bool,
    bound: Option<Binding>,
}

/// What a bound window reaches.
#[derive(Clone, Copy)]
struct Binding {
    /// The region's key, looked up at every access (a deregistered region
    /// unbinds its windows).
    region_key: u32,
    addr: u64,
    length: u64,
    /// The remote rights the window grants.
    access: AccessFlags,
}

/// A slot of the key table.
enum Entry {
    Region(Arc<Region>),
    Window(Window),
    Fast(KBox<FastRegion>),
}

/// Memory a key names: a registered region, or a fast-registration region
/// while registered.
#[derive(Clone, Copy)]
enum Mem<'a> {
    Region(&'a Region),
    Fast(&'a FastRegion),
}

impl Mem<'_> {
    fn access(&self) -> AccessFlags {
        match self {
            Mem::Region(r) => r.access,
            Mem::Fast(f) => f.access,
        }
    }

    fn contains(&self, iova: u64, len: u64) -> bool {
        match self {
            Mem::Region(r) => r.contains(iova, len),
            Mem::Fast(f) => f.contains(iova, len),
        }
    }

    /// Kernel memory (a DMA or fast-registration region): only kernel QPs
    /// name it locally.
    fn is_kernel(&self) -> bool {
        !matches!(self, Mem::Region(Region { pages: Some(_), .. }))
    }

    /// A peer's access (user pages or a fast-registration region; never
    /// the DMA region).
    fn copy_in(&self, iova: u64, data: &[u8]) -> Result {
        match self {
            Mem::Region(r) => r.copy_in(iova, data),
            Mem::Fast(f) => f.copy_in(iova, data),
        }
    }

    fn copy_out(&self, iova: u64, len: usize, out: &mut TxTail<'_>) -> Result {
        match self {
            Mem::Region(r) => r.copy_out(iova, len, out),
            Mem::Fast(f) => f.copy_out(iova, len, out),
        }
    }

    /// A local access by `who`: kernel memory only for kernel QPs.
    fn write_for(&self, who: &Requester, iova: u64, data: &[u8]) -> Result {
        match self {
            Mem::Region(r) => r.write_for(who, iova, data),
            Mem::Fast(_) if who.kernel.is_none() => Err(EACCES),
            Mem::Fast(f) => f.copy_in(iova, data),
        }
    }

    fn read_for(&self, who: &Requester, iova: u64, len: usize, out: &mut TxTail<'_>) -> Result {
        match self {
            Mem::Region(r) => r.read_for(who, iova, len, out),
            Mem::Fast(_) if who.kernel.is_none() => Err(EACCES),
            Mem::Fast(f) => f.copy_out(iova, len, out),
        }
    }
}

/// What an rkey reaches: a region, with the rights of the key (the
/// region's or a window's) and, for a window, its range.
struct Reach<'a> {
    region: Mem<'a>,
    access: AccessFlags,
    window: Option<(u64, u64)>,
}

impl Reach<'_> {
    /// The key grants `right` (one remote right) on `[va, va + len)`.
    fn allows(&self, right: AccessFlags, va: u64, len: u64) -> bool {
        let in_window = self.window.is_none_or(|(addr, length)| {
            va.checked_sub(addr)
                .and_then(|off| off.checked_add(len))
                .is_some_and(|end| end <= length)
        });
        self.access.intersects(right) && in_window && self.region.contains(va, len)
    }
}

/// A BIND_MW work request: bind window `window_key` to `[addr, addr +
/// length)` of region `region_key` with rights `access`, under the new key
/// byte of `new_key`. Length 0 unbinds a type 1 window.
#[derive(Clone, Copy)]
pub(crate) struct Bind {
    pub(crate) window_key: u32,
    pub(crate) new_key: u32,
    pub(crate) region_key: u32,
    pub(crate) addr: u64,
    pub(crate) length: u64,
    pub(crate) access: AccessFlags,
}

/// Rights a window may grant (LOCAL_WRITE means nothing for a window and
/// is accepted, as other providers do).
const WINDOW_ACCESS: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_ATOMIC);

/// The regions and windows of a device by key index. Lookups happen under
/// the device's bh-safe lock of this table, so a region is never unpinned
/// while the data path copies through it (unregistration removes it under
/// the same lock).
pub(crate) struct MrTable {
    slots: KVec<Option<Entry>>,
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

    fn entry(&self, key: u32) -> Option<&Entry> {
        self.slots.get((key >> 8) as usize)?.as_ref()
    }

    fn window_mut(&mut self, key: u32, pd: usize) -> Option<&mut Window> {
        match self.slots.get_mut((key >> 8) as usize)?.as_mut()? {
            Entry::Window(w) if w.pd == pd => Some(w),
            _ => None,
        }
    }

    /// The memory named by `key` (an lkey or a region's rkey) in `pd`.
    fn find(&self, key: u32, pd: usize) -> Option<Mem<'_>> {
        match self.entry(key)? {
            Entry::Region(r) => (r.key == key && r.pd == pd).then_some(Mem::Region(r)),
            Entry::Fast(f) => (f.valid && f.key == key && f.pd == pd).then_some(Mem::Fast(f)),
            Entry::Window(_) => None,
        }
    }

    fn fast_mut(&mut self, index: u32) -> Option<&mut FastRegion> {
        match self.slots.get_mut(index as usize)?.as_mut()? {
            Entry::Fast(f) => Some(f),
            _ => None,
        }
    }

    /// `IB_WR_REG_MR` by a kernel QP of `pd`: the fast-registration region
    /// `req.region_key` names becomes reachable (see
    /// [`FastRegion::register`]); `req.window_key` is unused.
    pub(crate) fn fast_register(&mut self, pd: usize, req: &Bind) -> Result {
        if !req.access.without(SUPPORTED_ACCESS).is_empty()
            || req.access.intersects(AccessFlags::MW_BIND)
        {
            return Err(EINVAL);
        }
        let f = self
            .fast_mut(req.region_key >> 8)
            .filter(|f| f.pd == pd)
            .ok_or(EINVAL)?;
        f.register(req.new_key, req.addr, req.length, req.access)
    }

    /// What the peer reaches with `rkey` through a QP of `pd`: a region's
    /// rkey, or a bound window's.
    fn find_remote(&self, rkey: u32, pd: usize) -> Option<Reach<'_>> {
        match self.entry(rkey)? {
            Entry::Region(_) | Entry::Fast(_) => {
                let region = self.find(rkey, pd)?;
                Some(Reach {
                    region,
                    access: region.access(),
                    window: None,
                })
            }
            Entry::Window(w) => {
                let b = w.bound.filter(|_| w.key == rkey && w.pd == pd)?;
                let region = self.find(b.region_key, pd)?;
                Some(Reach {
                    region,
                    access: b.access,
                    window: Some((b.addr, b.length)),
                })
            }
        }
    }

    /// Binds (or, type 1 with length 0, unbinds) a window for a QP of `pd`;
    /// returns the window's new rkey. `EINVAL` for whatever the bind rules
    /// refuse (IBA 10.6.7.2: the region allows binding, and local writes if
    /// the window grants remote writes; the range lies inside the region).
    pub(crate) fn bind(&mut self, pd: usize, req: &Bind) -> Result<u32> {
        if !req.access.without(WINDOW_ACCESS).is_empty() {
            return Err(EINVAL);
        }
        let binding = if req.length == 0 {
            None
        } else {
            let Some(Mem::Region(r)) = self.find(req.region_key, pd) else {
                return Err(EINVAL);
            };
            let writes = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC;
            if r.pages.is_none()
                || !r.access.intersects(AccessFlags::MW_BIND)
                || (req.access.intersects(writes) && !r.access.intersects(AccessFlags::LOCAL_WRITE))
                || !r.contains(req.addr, req.length)
            {
                return Err(EINVAL);
            }
            Some(Binding {
                region_key: req.region_key,
                addr: req.addr,
                length: req.length,
                access: req.access,
            })
        };
        let w = self.window_mut(req.window_key, pd).ok_or(EINVAL)?;
        if w.type2 && (binding.is_none() || w.bound.is_some()) {
            // A type 2 window is bound only when free, and freed only by
            // invalidation.
            return Err(EINVAL);
        }
        if !w.type2 && w.key != req.window_key {
            return Err(EINVAL);
        }
        w.key = (w.key & !0xff) | (req.new_key & 0xff);
        w.bound = binding;
        Ok(w.key)
    }

    /// Whether `key` names a bound type 2 window or a registered
    /// fast-registration region of `pd` (what LOCAL_INV and SEND_WITH_INV
    /// may invalidate).
    pub(crate) fn can_invalidate(&self, key: u32, pd: usize) -> bool {
        match self.entry(key) {
            Some(Entry::Window(w)) => w.type2 && w.key == key && w.pd == pd && w.bound.is_some(),
            Some(Entry::Fast(f)) => f.valid && f.key == key && f.pd == pd,
            _ => false,
        }
    }

    /// Invalidates `key` for a QP of `pd`: the window is unbound, or the
    /// fast-registration region unregistered, and the key reaches nothing
    /// until bound (registered) again. `EINVAL` unless
    /// [`Self::can_invalidate`].
    pub(crate) fn invalidate(&mut self, key: u32, pd: usize) -> Result {
        if !self.can_invalidate(key, pd) {
            return Err(EINVAL);
        }
        match self
            .slots
            .get_mut((key >> 8) as usize)
            .and_then(Option::as_mut)
        {
            Some(Entry::Window(w)) => w.bound = None,
            Some(Entry::Fast(f)) => f.valid = false,
            _ => return Err(EINVAL),
        }
        Ok(())
    }

    /// Region `key` goes away: the windows bound to it are unbound.
    fn unbind_windows_of(&mut self, key: u32) {
        for slot in self.slots.iter_mut() {
            if let Some(Entry::Window(w)) = slot {
                if w.bound.is_some_and(|b| b.region_key == key) {
                    w.bound = None;
                }
            }
        }
    }

    /// The peer writes (RDMA WRITE) bytes `offset..` of its `msg_len`-byte
    /// message to `va`: needs REMOTE_WRITE on the whole message's range
    /// (protocol.md 3.2: checked per message, so that a message that does
    /// not fit places nothing, whichever of its packets comes first).
    pub(crate) fn write_remote(
        &self,
        rkey: u32,
        pd: usize,
        va: u64,
        msg_len: u32,
        offset: u64,
        data: &[u8],
    ) -> core::result::Result<(), Syndrome> {
        if names_no_memory(u64::from(msg_len)) {
            return if data.is_empty() {
                Ok(())
            } else {
                Err(Syndrome::RemoteAccess)
            };
        }
        let r = self.find_remote(rkey, pd).ok_or(Syndrome::RemoteAccess)?;
        let iova = va.checked_add(offset).ok_or(Syndrome::RemoteAccess)?;
        let in_msg = offset
            .checked_add(data.len() as u64)
            .is_some_and(|end| end <= u64::from(msg_len));
        if !in_msg || !r.allows(AccessFlags::REMOTE_WRITE, va, u64::from(msg_len)) {
            return Err(Syndrome::RemoteAccess);
        }
        r.region
            .copy_in(iova, data)
            .map_err(|_| Syndrome::RemoteAccess)
    }

    /// The peer may read `[va, va + len)` (RDMA READ, checked once for the
    /// whole request): the key, the PD, REMOTE_READ and the bounds.
    pub(crate) fn check_remote_read(
        &self,
        rkey: u32,
        pd: usize,
        va: u64,
        len: u64,
    ) -> core::result::Result<(), Syndrome> {
        if names_no_memory(len) {
            return Ok(());
        }
        let r = self.find_remote(rkey, pd).ok_or(Syndrome::RemoteAccess)?;
        if !r.allows(AccessFlags::REMOTE_READ, va, len) {
            return Err(Syndrome::RemoteAccess);
        }
        Ok(())
    }

    /// The region an atomic of the peer names (protocol.md 5.1): the key
    /// (a region's or a bound window's), the PD, `access` (REMOTE_ATOMIC, or
    /// REMOTE_WRITE for ATOMIC_WRITE) and the 8 bytes at `va` inside user
    /// memory (the DMA and fast-registration regions of kernel consumers
    /// take no atomics).
    fn atomic_target(
        &self,
        rkey: u32,
        pd: usize,
        va: u64,
        access: AccessFlags,
    ) -> core::result::Result<&Region, Syndrome> {
        let r = self.find_remote(rkey, pd).ok_or(Syndrome::RemoteAccess)?;
        if !r.allows(access, va, u64::from(ATOMIC_LEN)) {
            return Err(Syndrome::RemoteAccess);
        }
        match r.region {
            Mem::Region(region) if region.pages.is_some() => Ok(region),
            // Kernel memory (DMA or fast-registration regions).
            _ => Err(Syndrome::RemoteAccess),
        }
    }

    /// The peer may run an atomic on the 8 bytes at `va` (checked when the
    /// request arrives; it runs when the request completes).
    pub(crate) fn check_remote_atomic(
        &self,
        rkey: u32,
        pd: usize,
        va: u64,
        access: AccessFlags,
    ) -> core::result::Result<(), Syndrome> {
        self.atomic_target(rkey, pd, va, access).map(|_| ())
    }

    /// Runs the peer's atomic: the 8 bytes at `va` become `op(old)` in one
    /// atomic step; returns `old`. Checked again: the region may have gone
    /// since the request was accepted.
    pub(crate) fn atomic_remote(
        &self,
        rkey: u32,
        pd: usize,
        va: u64,
        access: AccessFlags,
        op: impl Fn(u64) -> u64,
    ) -> core::result::Result<u64, Syndrome> {
        let r = self.atomic_target(rkey, pd, va, access)?;
        let p = r.pages.as_ref().ok_or(Syndrome::RemoteAccess)?;
        let at = va.checked_sub(p.iova).ok_or(Syndrome::RemoteAccess)? as usize + p.first_offset;
        let page = p.pages.get(at / PAGE_SIZE).ok_or(Syndrome::RemoteAccess)?;
        // An iova whose alignment differs from the memory's: the 8 bytes
        // are not one aligned word.
        page.atomic_u64(at % PAGE_SIZE, op)
            .map_err(|_| Syndrome::InvalidRequest)
    }

    /// The send path reads the bytes of a READ response: needs REMOTE_READ
    /// (checked again per packet: the region may have gone since the
    /// request was accepted).
    /// Appends the `len` bytes at `va` to `out`.
    pub(crate) fn read_remote(
        &self,
        rkey: u32,
        pd: usize,
        va: u64,
        len: usize,
        out: &mut TxTail<'_>,
    ) -> Result {
        if names_no_memory(len as u64) {
            return Ok(());
        }
        let r = self.find_remote(rkey, pd).ok_or(EACCES)?;
        if !r.allows(AccessFlags::REMOTE_READ, va, len as u64) {
            return Err(EACCES);
        }
        r.region.copy_out(va, len, out)
    }

    /// A local buffer of a work request is usable: its key names a region
    /// of the PD that holds `[va, va + len)`, with LOCAL_WRITE when the
    /// device writes into it (RDMA READ targets).
    pub(crate) fn check_local(
        &self,
        lkey: u32,
        who: &Requester,
        va: u64,
        len: u32,
        write: bool,
    ) -> Result {
        let r = self.find(lkey, who.pd).ok_or(EACCES)?;
        if r.is_kernel() && who.kernel.is_none() {
            // Kernel memory named by a user QP.
            return Err(EACCES);
        }
        if write && !r.access().intersects(AccessFlags::LOCAL_WRITE) {
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
        if !r.access().intersects(AccessFlags::LOCAL_WRITE) {
            return Err(EACCES);
        }
        r.write_for(who, va, data)
    }

    /// The send path reads a local buffer (any registered region): appends
    /// the `len` bytes at `va` to `out`.
    pub(crate) fn read_local(
        &self,
        lkey: u32,
        who: &Requester,
        va: u64,
        len: usize,
        out: &mut TxTail<'_>,
    ) -> Result {
        let r = self.find(lkey, who.pd).ok_or(EACCES)?;
        r.read_for(who, va, len, out)
    }
}

/// What a region or a window takes from its device: a key, and the table
/// the data path finds it in by key, both the device state's (`device.rs`).
/// A trait, so that this file, whose table the state holds and the data
/// path reads, does not import the state.
pub(crate) trait MrKeys {
    /// A free memory key: `(index, key)`.
    fn take_mr_key(&self) -> Result<(u32, u32)>;
    /// Frees a memory key's index.
    fn give_back_mr_key(&self, index: u32);
    /// The device's table of regions and windows.
    fn mrs(&self) -> &SpinLockBh<MrTable>;
}

/// Driver state of an MR: its slot in the device table.
pub(crate) struct MrState {
    index: u32,
    /// A registered region (the table holds a fast-registration region
    /// alone).
    _region: Option<Arc<Region>>,
}

/// Access flags this device accepts. `MW_BIND` permits binding memory
/// windows to the MR.
/// A WRITE or READ of `len` bytes names no memory when `len` is 0: its
/// key and address are not checked (InfiniBand C9-88; protocol.md 5), and
/// requesters put anything there. UCX's RC transport flushes a connection
/// with a zero-length WRITE of key 0 to address 0, which a key check
/// failed with a remote access error, the QP with it.
fn names_no_memory(len: u64) -> bool {
    len == 0
}

const SUPPORTED_ACCESS: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_ATOMIC)
    .union(AccessFlags::MW_BIND)
    .union(AccessFlags::RELAXED_ORDERING);

/// Refuses (`EINVAL`, logged) access flags outside [`SUPPORTED_ACCESS`].
fn check_access<D>(dev: &Device<D>, verb: &str, access: AccessFlags) -> Result {
    let bad = access.without(SUPPORTED_ACCESS);
    if bad.is_empty() {
        return Ok(());
    }
    Err(refuse(
        dev,
        verb,
        None,
        EINVAL,
        format_args!("access flags {:#x} not supported", bad.raw()),
    ))
}

impl MrState {
    fn insert<D: MrKeys>(
        dev: &Device<D>,
        pd: usize,
        access: AccessFlags,
        pages: Option<UserPages>,
    ) -> Result<((u32, u32), Self)> {
        let (index, key) = dev.data().take_mr_key()?;
        let region = match Arc::new(
            Region {
                key,
                access,
                pd,
                pages,
            },
            GFP_KERNEL,
        ) {
            Ok(r) => r,
            Err(e) => {
                dev.data().give_back_mr_key(index);
                return Err(e.into());
            }
        };
        if let Some(slot) = dev.data().mrs().lock().slots.get_mut(index as usize) {
            *slot = Some(Entry::Region(region.clone()));
        }
        Ok((
            (key, key),
            Self {
                index,
                _region: Some(region),
            },
        ))
    }

    /// A fast-registration region of a kernel consumer for up to
    /// `max_pages` pages (`ib_alloc_mr`), unregistered.
    pub(crate) fn alloc_fast<D: MrKeys>(
        dev: &Device<D>,
        pd: usize,
        max_pages: u32,
        who: KernelConsumer,
    ) -> Result<((u32, u32), Self)> {
        if max_pages == 0 {
            return Err(refuse(
                dev,
                "alloc_mr",
                None,
                EINVAL,
                format_args!("max_num_sg 0: a region maps at least one page"),
            ));
        }
        check_limits(
            dev,
            "alloc_mr",
            &[("max_num_sg", max_pages, MAX_FAST_REG_PAGES)],
        )?;
        let (index, key) = dev.data().take_mr_key()?;
        let fast = match FastRegion::new(key, pd, max_pages, who)
            .and_then(|f| Ok(KBox::new(f, GFP_KERNEL)?))
        {
            Ok(f) => f,
            Err(e) => {
                dev.data().give_back_mr_key(index);
                return Err(e);
            }
        };
        if let Some(slot) = dev.data().mrs().lock().slots.get_mut(index as usize) {
            *slot = Some(Entry::Fast(fast));
        }
        Ok((
            (key, key),
            Self {
                index,
                _region: None,
            },
        ))
    }

    /// `ib_map_mr_sg` of a fast-registration region starts, with pages of
    /// `page_size` bytes.
    pub(crate) fn map_begin<D: MrKeys>(&self, dev: &Device<D>, page_size: u32) -> Result {
        dev.data()
            .mrs()
            .lock()
            .fast_mut(self.index)
            .ok_or(EINVAL)?
            .map_begin(page_size)
    }

    /// The next page address of the mapping.
    pub(crate) fn map_page<D: MrKeys>(&self, dev: &Device<D>, addr: u64) -> Result {
        dev.data()
            .mrs()
            .lock()
            .fast_mut(self.index)
            .ok_or(EINVAL)?
            .map_page(addr)
    }

    /// The mapping spans `[iova, iova + length)`.
    pub(crate) fn map_end<D: MrKeys>(&self, dev: &Device<D>, iova: u64, length: u64) {
        if let Some(f) = dev.data().mrs().lock().fast_mut(self.index) {
            f.map_end(iova, length);
        }
    }

    /// Registers `[start, start + length)` of the calling process.
    pub(crate) fn register_user<D: MrKeys>(
        dev: &Device<D>,
        pd: usize,
        start: u64,
        length: u64,
        iova: u64,
        access: AccessFlags,
    ) -> Result<((u32, u32), Self)> {
        if length == 0 {
            return Err(refuse(
                dev,
                "reg_mr",
                None,
                EINVAL,
                format_args!("length 0"),
            ));
        }
        check_limits(dev, "reg_mr", &[("length", length, MAX_MR_SIZE)])?;
        check_access(dev, "reg_mr", access)?;
        if iova.checked_add(length).is_none() {
            let why = format_args!(
                "iova {iova:#x} plus length {length} passes the end of the address space"
            );
            return Err(refuse(dev, "reg_mr", None, EINVAL, why));
        }
        let umem = Umem::get(dev, start, length, access)?;
        let pages = umem.pages()?;
        let first_offset = (start as usize) & (PAGE_SIZE - 1);
        if (pages.len() * PAGE_SIZE) < first_offset + length as usize {
            return Err(EFAULT);
        }
        let user = UserPages {
            _umem: umem,
            pages,
            iova,
            length,
            first_offset,
        };
        Self::insert(dev, pd, access, Some(user))
    }

    /// The region of all memory, for kernel consumers.
    pub(crate) fn register_dma<D: MrKeys>(
        dev: &Device<D>,
        pd: usize,
        access: AccessFlags,
    ) -> Result<((u32, u32), Self)> {
        check_access(dev, "get_dma_mr", access)?;
        Self::insert(dev, pd, access, None)
    }

    /// Removes the region from the table (the data path no longer finds it)
    /// and gives the key back; the pages are unpinned when `self` drops.
    pub(crate) fn release<D: MrKeys>(&self, dev: &Device<D>) {
        {
            let mut mrs = dev.data().mrs().lock();
            if let Some(slot) = mrs.slots.get_mut(self.index as usize) {
                if let Some(Entry::Region(r)) = slot.take() {
                    mrs.unbind_windows_of(r.key);
                }
            }
            // (A fast-registration region dropped with its slot: windows
            // never bind to it.)
        }
        dev.data().give_back_mr_key(self.index);
    }
}

/// Driver state of a memory window: its slot in the device table.
pub(crate) struct MwState {
    index: u32,
}

impl MwState {
    /// A new, unbound window of type `mw_type` in `pd` (`EINVAL` for a type
    /// the core does not name); returns its rkey. A type 1 window reaches
    /// nothing until bound.
    pub(crate) fn alloc<D: MrKeys>(
        dev: &Device<D>,
        pd: usize,
        mw_type: Option<MwType>,
    ) -> Result<(u32, Self)> {
        let type2 = match mw_type {
            Some(MwType::Type1) => false,
            Some(MwType::Type2) => true,
            None => return Err(EINVAL),
        };
        let (index, key) = dev.data().take_mr_key()?;
        if let Some(slot) = dev.data().mrs().lock().slots.get_mut(index as usize) {
            *slot = Some(Entry::Window(Window {
                key,
                pd,
                type2,
                bound: None,
            }));
        }
        Ok((key, Self { index }))
    }

    /// Removes the window: its rkey reaches nothing from now on.
    pub(crate) fn release<D: MrKeys>(&self, dev: &Device<D>) {
        if let Some(slot) = dev.data().mrs().lock().slots.get_mut(self.index as usize) {
            *slot = None;
        }
        dev.data().give_back_mr_key(self.index);
    }
}
