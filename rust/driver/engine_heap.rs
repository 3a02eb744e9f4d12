// SPDX-License-Identifier: GPL-2.0

//! The engine's heap in the kernel (`rust/engine/src/heap.rs`): the memory
//! a QP's engine takes as it opens paths, carries its first message, sends
//! on its paths and carries long messages comes from kmalloc.
//!
//! Every engine call runs under the transport's bh-safe spinlock, from the
//! transmit worker, a posting task, the receive softirq or the tick, so
//! nothing here may sleep: `GFP_ATOMIC`, as the skbs of the same paths.
//! `__GFP_NOWARN`: a refusal is expected under memory pressure and handled
//! (a path stays closed, a packet waits for the engine's retry timer or is
//! dropped unacknowledged and resent), so it needs no allocation-failure
//! splat.

use crate::engine::heap::{Empty, Global, Heap};
use crate::ib::heap::kbox_copy;
use kernel::prelude::*;

impl Heap for Global {
    type Box<T> = KBox<T>;

    fn copy_of<T: Copy>(init: &T) -> Option<KBox<T>> {
        kbox_copy(init, GFP_ATOMIC | __GFP_NOWARN).ok()
    }

    fn empty<T: Empty>() -> Option<KBox<T>> {
        // A constant, written into the new memory from the module's data
        // as `Transport::new` writes the empty engines.
        KBox::new(T::EMPTY, GFP_ATOMIC | __GFP_NOWARN).ok()
    }
}
