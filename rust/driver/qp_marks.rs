// SPDX-License-Identifier: GPL-2.0

//! Which QPs have work for the device's transmit worker (`tx_worker.rs`)
//! or for its tick (`device.rs`): one mark per QP slot (`qpn::slot`), set
//! from any context, taken a word of 64 slots at a time (the engine's
//! `marks.rs`, where the rule that no mark is lost is stated and tested).

use super::limits::MAX_QP;
use super::qpn;
use crate::engine::marks::Marks;

/// Words of the set: a slot for every QP index and one for QP1.
const WORDS: usize = (MAX_QP as usize + 1).div_ceil(64);

/// The QPs (by slot) with work left to one taker.
pub(crate) struct QpMarks {
    marks: Marks<WORDS>,
}

impl QpMarks {
    pub(crate) const fn new() -> Self {
        Self {
            marks: Marks::new(),
        }
    }

    /// QP `qpn` has work for the taker (the caller published it first).
    /// Any context, interrupts off included.
    pub(crate) fn mark(&self, qpn: u32) {
        if let Some(slot) = qpn::slot(qpn) {
            self.marks.mark(slot);
        }
    }

    /// Marks QP `qpn` if it is not marked and `work` says it has work;
    /// the caller holds the lock the taker takes before it looks at the
    /// QP's work (the engine's `Marks::mark_if`).
    pub(crate) fn mark_if(&self, qpn: u32, work: impl FnOnce() -> bool) {
        if let Some(slot) = qpn::slot(qpn) {
            self.marks.mark_if(slot, work);
        }
    }

    /// Takes every mark: the slots of the QPs marked since their word was
    /// last taken, lowest first.
    pub(crate) fn take(&self) -> impl Iterator<Item = usize> + '_ {
        self.marks.take()
    }
}
