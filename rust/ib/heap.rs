// SPDX-License-Identifier: GPL-2.0

//! Heap copies of plain values that must not pass through the kernel stack
//! (the engine's per-path records are up to 2 KiB, and are taken in
//! softirq and under bh-safe locks, where the stack is the interrupt's).

use kernel::alloc::Flags;
use kernel::prelude::*;

/// A new kmalloc'd box holding a copy of `src`, made without any temporary
/// on the stack; `flags` say how it may allocate (`GFP_ATOMIC` in atomic
/// context).
pub(crate) fn kbox_copy<T: Copy>(src: &T, flags: Flags) -> Result<KBox<T>> {
    let mut b = KBox::<T>::new_uninit(flags)?;
    // SAFETY: `T: Copy`, so a bitwise copy of `src` is a valid `T`; the box
    // has room for exactly one `T`, which is then initialised.
    unsafe {
        core::ptr::copy_nonoverlapping(src, b.as_mut_ptr(), 1);
        Ok(b.assume_init())
    }
}
