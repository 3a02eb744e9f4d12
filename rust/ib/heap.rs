// SPDX-License-Identifier: GPL-2.0

//! Heap copies of large plain values (the engine's per-QP state is tens to
//! hundreds of KiB: far more than a kernel stack may hold even briefly).

use kernel::prelude::*;

/// A new vmalloc-backed box holding a copy of `src`, made without any
/// temporary on the stack.
pub(crate) fn kvbox_copy<T: Copy>(src: &T) -> Result<KVBox<T>> {
    let mut b = KVBox::<T>::new_uninit(GFP_KERNEL)?;
    // SAFETY: `T: Copy`, so a bitwise copy of `src` is a valid `T`; the box
    // has room for exactly one `T`, which is then initialised.
    unsafe {
        core::ptr::copy_nonoverlapping(src, b.as_mut_ptr(), 1);
        Ok(b.assume_init())
    }
}
