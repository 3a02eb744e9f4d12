//! Memory an engine takes as its QP uses it: a path's state when the path
//! opens, its per-PSN records when it first carries data, a long message's
//! packet bitmaps, a receiving path's SACK state when its first packet
//! arrives. What stays in place per QP is only what every connected QP
//! needs (the message windows, the slots), so an idle QP is small and a
//! QP grows with the paths it opens.
//!
//! The engine stays `no_std` and allocation-free itself: the program it is
//! built into says where memory comes from by implementing [`Heap`] for
//! [`Global`] (the host crate's `lib.rs` with `alloc`'s `Box`; the kernel
//! module with `KBox`, atomic allocations: every engine call runs under a
//! bh-safe spinlock). A heap may refuse; the engine then goes without: a
//! path stays closed, a packet waits or is dropped unacknowledged, never a
//! panic.

use core::ops::DerefMut;

/// Where the engine's records come from.
pub trait Heap {
    /// An owned `T` in this heap's memory, freed when dropped.
    type Box<T>: DerefMut<Target = T>;

    /// A copy of `init` in new memory, or `None` if there is none to be had
    /// now. Implementations copy straight into the new memory: the records
    /// are up to a few KiB, too large for a kernel stack's temporaries.
    fn copy_of<T: Copy>(init: &T) -> Option<Self::Box<T>>;

    /// `T::EMPTY` in new memory, or `None` if there is none to be had now:
    /// for records that own heap memory themselves and so are not `Copy`
    /// (a message window, whose long messages hold their bitmaps).
    /// Implementations write the constant straight into the new memory,
    /// as [`Heap::copy_of`] copies.
    fn empty<T: Empty>() -> Option<Self::Box<T>>;
}

/// A record's empty value, a constant: what [`Heap::empty`] fills new
/// memory with.
pub trait Empty: Sized {
    /// The empty value.
    const EMPTY: Self;
}

impl<T: Empty, const N: usize> Empty for [T; N] {
    const EMPTY: Self = [const { T::EMPTY }; N];
}

/// The heap of the program the engine is built into: the default of every
/// engine type, implemented by that program.
#[derive(Clone, Copy, Debug, Default)]
pub struct Global;

/// Bytes a kernel spends on a `kmalloc` of `size` bytes: it rounds up to
/// its size classes (8 to 8192 bytes: powers of two, and 96 and 192), and
/// a larger one takes a power-of-two block of pages (as `KVBox` does too
/// unless memory is fragmented). Used to report and budget what a QP holds
/// ([`Sender::footprint`](super::sender::Sender::footprint)).
pub const fn kmalloc_size(size: usize) -> usize {
    if size == 0 {
        return 0;
    }
    if size <= 8 {
        return 8;
    }
    if size > 64 && size <= 96 {
        return 96;
    }
    if size > 128 && size <= 192 {
        return 192;
    }
    size.next_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::kmalloc_size;

    #[test]
    fn kmalloc_classes() {
        assert_eq!(kmalloc_size(1), 8);
        assert_eq!(kmalloc_size(72), 96);
        assert_eq!(kmalloc_size(100), 128);
        assert_eq!(kmalloc_size(129), 192);
        assert_eq!(kmalloc_size(288), 512);
        assert_eq!(kmalloc_size(2048), 2048);
        assert_eq!(kmalloc_size(4097), 8192);
        assert_eq!(kmalloc_size(8193), 16384);
        assert_eq!(kmalloc_size(169_824), 256 * 1024);
    }
}
