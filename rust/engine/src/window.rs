//! A message window taken from the heap when the QP first carries a
//! message, not when it connects: the windows are most of an engine's
//! fixed size (64 messages of 88 B sending, 48 B receiving), and an idle
//! connected QP has no message (issue 11: 4,000 such QPs on a device,
//! design.md "Per-QP memory"). Once taken, a window stays until the QP is
//! destroyed (a `reset` empties it), so the data path takes it at most
//! once.
//!
//! Without its memory the window reads as empty: every slot is an
//! unused one, as in a taken window before the first message, so the
//! engines' loops and lookups need no second case.

use core::mem::size_of;

use super::config::MSG_WINDOW;
use super::heap::{kmalloc_size, Empty, Global, Heap};

/// `MSG_WINDOW` messages of type `M` (a slot per `msn % MSG_WINDOW`),
/// from the heap `H` once [`MsgWindow::take`] succeeds.
pub struct MsgWindow<M: Empty, H: Heap = Global> {
    msgs: Option<H::Box<[M; MSG_WINDOW]>>,
}

impl<M: Empty, H: Heap> MsgWindow<M, H> {
    /// No memory yet: every slot reads as unused.
    pub const NONE: Self = Self { msgs: None };

    /// Takes the window's memory if it has none; false if the heap
    /// refused (nothing changed: the caller tries again later).
    pub fn take(&mut self) -> bool {
        if self.msgs.is_none() {
            self.msgs = H::empty();
        }
        self.msgs.is_some()
    }

    /// Whether the window has its memory.
    pub fn is_taken(&self) -> bool {
        self.msgs.is_some()
    }

    /// Slot `i`; `None` out of range or before the window is taken.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&M> {
        self.msgs.as_deref().and_then(|m| m.get(i))
    }

    /// Slot `i`, to change; `None` out of range or before the window is
    /// taken.
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut M> {
        self.msgs.as_deref_mut().and_then(|m| m.get_mut(i))
    }

    /// Every slot (none before the window is taken).
    pub fn iter(&self) -> impl Iterator<Item = &M> {
        self.msgs.as_deref().into_iter().flatten()
    }

    /// Every slot, to change (none before the window is taken).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut M> {
        self.msgs.as_deref_mut().into_iter().flatten()
    }

    /// Bytes held in the heap, in kmalloc classes (0 before it is taken).
    pub fn footprint(&self) -> usize {
        if self.msgs.is_some() {
            Self::SIZE
        } else {
            0
        }
    }

    /// What a taken window costs, in kmalloc classes.
    pub const SIZE: usize = kmalloc_size(size_of::<[M; MSG_WINDOW]>());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Slot(u32);

    impl Empty for Slot {
        const EMPTY: Self = Slot(7);
    }

    #[test]
    fn reads_empty_until_taken_then_keeps_its_slots() {
        let mut w: MsgWindow<Slot> = MsgWindow::NONE;
        assert!(!w.is_taken());
        assert_eq!(w.get(0), None);
        assert_eq!(w.iter().count(), 0);
        assert_eq!(w.footprint(), 0);
        assert!(w.take());
        assert_eq!(w.get(MSG_WINDOW - 1), Some(&Slot(7)));
        assert_eq!(w.get(MSG_WINDOW), None);
        if let Some(s) = w.get_mut(3) {
            s.0 = 1;
        }
        assert!(w.take(), "a second take keeps the memory");
        assert_eq!(w.get(3), Some(&Slot(1)));
        assert_eq!(w.iter_mut().count(), MSG_WINDOW);
        assert_eq!(w.footprint(), kmalloc_size(4 * MSG_WINDOW));
    }
}
