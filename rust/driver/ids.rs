// SPDX-License-Identifier: GPL-2.0

//! Number pools for QPs, memory keys, SRQs and AHs: the lowest free number,
//! so numbers stay small and a full pool is an error, not a wrap into one
//! still in use.

use kernel::prelude::*;

/// A set of `size` numbers, each free or taken.
pub(crate) struct IdPool {
    words: KVec<u64>,
    size: u32,
}

impl IdPool {
    /// A pool of numbers `0..size`, all free.
    pub(crate) fn new(size: u32) -> Result<Self> {
        let n = (size as usize).div_ceil(64);
        Ok(Self {
            words: KVec::from_elem(0u64, n, GFP_KERNEL)?,
            size,
        })
    }

    /// Takes the lowest free number; `ENOSPC` when all are taken.
    pub(crate) fn take(&mut self) -> Result<u32> {
        for (i, w) in self.words.iter_mut().enumerate() {
            if *w != u64::MAX {
                let bit = (!*w).trailing_zeros();
                let id = i as u32 * 64 + bit;
                if id >= self.size {
                    break;
                }
                *w |= 1 << bit;
                return Ok(id);
            }
        }
        Err(ENOSPC)
    }

    /// Returns `id` to the pool (ignores numbers it never gave out).
    pub(crate) fn give_back(&mut self, id: u32) {
        if id < self.size {
            if let Some(w) = self.words.get_mut(id as usize / 64) {
                *w &= !(1u64 << (id % 64));
            }
        }
    }
}
