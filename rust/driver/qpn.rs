// SPDX-License-Identifier: GPL-2.0

//! QP numbers: the 24-bit QPN every packet names holds a table index in its
//! low bits and a random tag above them. A QPN is thus not guessed from
//! another one, and a QP created in the slot of a destroyed one gets another
//! number, so packets still on their way to its predecessor (its peer's
//! retransmissions, a replay) find no QP at all.

use kernel::prelude::*;

use super::ids::IdPool;
use super::limits::{FIRST_QPN, MAX_QP};

/// Low bits of a QPN: `FIRST_QPN + index`.
const INDEX_BITS: u32 = 12;
const INDEX_MASK: u32 = (1 << INDEX_BITS) - 1;
/// Tags: the rest of the 24 bits.
const TAGS: u32 = 1 << (24 - INDEX_BITS);

const _: () = assert!(FIRST_QPN + MAX_QP <= 1 << INDEX_BITS);

/// The table index of `qpn` if it can be one of ours (not QP0/QP1, not
/// beyond 24 bits). The tables check the whole QPN against the QP they
/// hold there.
pub(crate) fn index(qpn: u32) -> Option<usize> {
    let i = (qpn & INDEX_MASK).checked_sub(FIRST_QPN)?;
    (qpn < 1 << 24 && i < MAX_QP).then_some(i as usize)
}

/// The slot of `qpn` in the device's QP tables and marks: its index, or
/// the one after the last index for QP1 (the GSI QP, in the datagram
/// table only).
pub(crate) fn slot(qpn: u32) -> Option<usize> {
    if qpn == 1 {
        return Some(MAX_QP as usize);
    }
    index(qpn)
}

/// The QPNs a device hands out: free indices, and the tag each index had
/// last (never given again right after).
pub(crate) struct QpnPool {
    ids: IdPool,
    tags: KVec<u16>,
}

impl QpnPool {
    /// All `MAX_QP` indices free.
    pub(crate) fn new() -> Result<Self> {
        Ok(Self {
            ids: IdPool::new(MAX_QP)?,
            tags: KVec::from_elem(0u16, MAX_QP as usize, GFP_KERNEL)?,
        })
    }

    /// A free QPN: the lowest free index, with a tag drawn from `random`
    /// among those other than the index's last one. `ENOSPC` when full.
    pub(crate) fn take(&mut self, random: u32) -> Result<u32> {
        let i = self.ids.take()?;
        let last = self.tags.get(i as usize).copied().unwrap_or(0);
        let mut tag = (random % (TAGS - 1)) as u16;
        if tag >= last {
            tag += 1;
        }
        if let Some(t) = self.tags.get_mut(i as usize) {
            *t = tag;
        }
        Ok((u32::from(tag) << INDEX_BITS) | (FIRST_QPN + i))
    }

    /// Frees `qpn` (ignores numbers this pool does not hold).
    pub(crate) fn give_back(&mut self, qpn: u32) {
        let Some(i) = index(qpn) else { return };
        if self
            .tags
            .get(i)
            .is_some_and(|&t| u32::from(t) == qpn >> INDEX_BITS)
        {
            self.ids.give_back(i as u32);
        }
    }
}
