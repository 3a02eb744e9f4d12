//! A message window whose memory is taken from the heap as the QP uses
//! it, in chunks of [`MSG_CHUNK`] slots, not when it connects: an idle
//! connected QP has no message (issue 11: 4,000 such QPs on a device,
//! design.md "Per-QP memory"), and one that keeps a few messages in
//! flight uses a chunk, while one that fills a long RTT takes up to
//! [`MSG_WINDOW_MAX`] slots (issue 14: 1,024 messages of 88 B sending,
//! 48 B receiving, would be most of an idle QP if they stayed in place).
//! The table of chunks is taken with the first chunk. Once taken, a chunk
//! stays until the QP is destroyed (a `reset` empties it), so the data
//! path takes each at most once.
//!
//! Without its chunk a slot reads as absent, as an unused slot of a
//! taken chunk reads as empty: the engines' loops and lookups treat both
//! as "no message here", so they need no second case.

use core::mem::size_of;

use super::config::MSG_WINDOW_MAX;
use super::heap::{kmalloc_size, Empty, Global, Heap};

/// Slots taken from the heap at once: the v1 window, so a QP that never
/// has more than 64 messages in flight holds what it held before.
pub const MSG_CHUNK: usize = 64;

/// Chunks of a full window.
const CHUNKS: usize = MSG_WINDOW_MAX / MSG_CHUNK;

const _: () = assert!(MSG_WINDOW_MAX.is_multiple_of(MSG_CHUNK));

/// The table of a window's chunks (`None`: not taken).
type Table<M, H> = [Option<<H as Heap>::Box<[M; MSG_CHUNK]>>; CHUNKS];

impl<T> Empty for Option<T> {
    const EMPTY: Self = None;
}

/// [`MSG_WINDOW_MAX`] messages of type `M` (a slot per
/// `msn % MSG_WINDOW_MAX`), each chunk from the heap `H` once
/// [`MsgWindow::take`] succeeds for one of its slots.
pub struct MsgWindow<M: Empty, H: Heap = Global> {
    table: Option<H::Box<Table<M, H>>>,
}

impl<M: Empty, H: Heap> MsgWindow<M, H> {
    /// No memory yet: every slot reads as absent.
    pub const NONE: Self = Self { table: None };

    /// Takes the memory of slot `i` (`i < MSG_WINDOW_MAX`) if it has none;
    /// false if the heap refused or `i` is out of range (nothing changed:
    /// the caller tries again later).
    pub fn take(&mut self, i: usize) -> bool {
        if i >= MSG_WINDOW_MAX {
            return false;
        }
        if self.table.is_none() {
            self.table = H::empty();
        }
        let Some(chunk) = self
            .table
            .as_deref_mut()
            .and_then(|t| t.get_mut(i / MSG_CHUNK))
        else {
            return false;
        };
        if chunk.is_none() {
            *chunk = H::empty();
        }
        chunk.is_some()
    }

    /// Whether any chunk has its memory.
    pub fn is_taken(&self) -> bool {
        self.chunks().next().is_some()
    }

    fn chunks(&self) -> impl Iterator<Item = &[M; MSG_CHUNK]> {
        self.table
            .as_deref()
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_deref())
    }

    /// Slot `i`; `None` out of range or before its chunk is taken.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&M> {
        self.table
            .as_deref()?
            .get(i / MSG_CHUNK)?
            .as_deref()?
            .get(i % MSG_CHUNK)
    }

    /// Slot `i`, to change; `None` out of range or before its chunk is
    /// taken.
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut M> {
        self.table
            .as_deref_mut()?
            .get_mut(i / MSG_CHUNK)?
            .as_deref_mut()?
            .get_mut(i % MSG_CHUNK)
    }

    /// Every slot of the taken chunks.
    pub fn iter(&self) -> impl Iterator<Item = &M> {
        self.chunks().flatten()
    }

    /// Every slot of the taken chunks, to change.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut M> {
        self.table
            .as_deref_mut()
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_deref_mut())
            .flatten()
    }

    /// Bytes held in the heap, in kmalloc classes (0 before a chunk is
    /// taken).
    pub fn footprint(&self) -> usize {
        match self.table {
            None => 0,
            Some(_) => Self::TABLE_SIZE + self.chunks().count() * Self::CHUNK_SIZE,
        }
    }

    /// What a chunk costs, in kmalloc classes.
    pub const CHUNK_SIZE: usize = kmalloc_size(size_of::<[M; MSG_CHUNK]>());

    /// What the table of chunks costs, in kmalloc classes.
    pub const TABLE_SIZE: usize = kmalloc_size(size_of::<Table<M, H>>());

    /// What the first message costs: the table and one chunk.
    pub const SIZE: usize = Self::TABLE_SIZE + Self::CHUNK_SIZE;
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
    fn reads_absent_until_taken_then_keeps_its_slots() {
        let mut w: MsgWindow<Slot> = MsgWindow::NONE;
        assert!(!w.is_taken());
        assert_eq!(w.get(0), None);
        assert_eq!(w.iter().count(), 0);
        assert_eq!(w.footprint(), 0);
        assert!(w.take(3));
        assert!(w.is_taken());
        assert_eq!(w.get(MSG_CHUNK - 1), Some(&Slot(7)));
        assert_eq!(w.get(MSG_CHUNK), None, "the next chunk is not taken");
        if let Some(s) = w.get_mut(3) {
            s.0 = 1;
        }
        assert!(w.take(0), "a second take keeps the memory");
        assert_eq!(w.get(3), Some(&Slot(1)));
        assert_eq!(w.iter_mut().count(), MSG_CHUNK);
        assert_eq!(
            w.footprint(),
            kmalloc_size(8 * CHUNKS) + kmalloc_size(4 * MSG_CHUNK)
        );
    }

    #[test]
    fn takes_chunks_as_slots_are_used() {
        let mut w: MsgWindow<Slot> = MsgWindow::NONE;
        assert!(w.take(MSG_WINDOW_MAX - 1));
        assert!(!w.take(MSG_WINDOW_MAX), "out of range");
        assert_eq!(w.get(MSG_WINDOW_MAX - 1), Some(&Slot(7)));
        assert_eq!(w.get(0), None);
        assert_eq!(w.iter().count(), MSG_CHUNK);
        for i in (0..MSG_WINDOW_MAX).step_by(MSG_CHUNK) {
            assert!(w.take(i));
        }
        assert_eq!(w.iter().count(), MSG_WINDOW_MAX);
        assert_eq!(
            w.footprint(),
            MsgWindow::<Slot>::TABLE_SIZE + CHUNKS * MsgWindow::<Slot>::CHUNK_SIZE
        );
    }
}
