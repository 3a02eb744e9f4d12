// SPDX-License-Identifier: GPL-2.0

//! Which QPs have work for the device's transmit worker
//! (`tx_worker.rs`): one bit per QP table slot, set from any context,
//! taken a word at a time by the worker.

use core::sync::atomic::{AtomicU64, Ordering};

use super::limits::MAX_QP;
use super::qpn;

const WORDS: usize = (MAX_QP as usize).div_ceil(64);

/// The QPs (by table index) with transmit work left to the worker.
pub(crate) struct TxPending {
    words: [AtomicU64; WORDS],
}

impl TxPending {
    pub(crate) const fn new() -> Self {
        Self {
            words: [const { AtomicU64::new(0) }; WORDS],
        }
    }

    /// QP `qpn` has work for the worker (the caller queues it). Any
    /// context.
    pub(crate) fn mark(&self, qpn: u32) {
        let Some(i) = qpn::index(qpn) else { return };
        if let Some(w) = self.words.get(i / 64) {
            w.fetch_or(1 << (i % 64), Ordering::AcqRel);
        }
    }

    /// Takes every mark: the table indices of the QPs marked since the
    /// last call, lowest first.
    pub(crate) fn take(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(k, word)| {
            let mut bits = word.swap(0, Ordering::AcqRel);
            core::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let index = k * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    index
                })
            })
        })
    }
}
