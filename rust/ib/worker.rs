// SPDX-License-Identifier: GPL-2.0

//! Work deferred to process context: a `work_struct` on the system's
//! high-priority workqueue (its kworkers run at nice -20) that calls its
//! owner's [`Job`], and is disabled (waiting for a running call, refusing
//! later queueing) when dropped.
//!
//! Why the driver wants it: work done in a softirq preempts every task on
//! the CPU, while a kworker is scheduled like any other thread. Transmit
//! work that the receive softirq would otherwise do without bound (every
//! ACK opening a window) runs here instead, so the applications on the
//! same CPU keep their share of it. High priority, because the work is
//! what a NIC's engine would do while the application busy-polls its CQ:
//! at nice 0 the scheduler split the CPU evenly between the two, and a
//! 1 MiB ib_write_bw ran at half its rate.

use core::marker::PhantomPinned;
use core::sync::atomic::{AtomicPtr, Ordering};

use kernel::prelude::*;
use kernel::types::Opaque;

use super::sys::bindings;

/// What a [`Worker`] calls, in process context (a kworker): may not sleep
/// while it holds the driver's spinlocks, like any other caller.
pub(crate) trait Job: Sync {
    /// The work was queued at least once since the last call.
    fn run(&self);
}

/// The work item of a [`Worker`], which is all that queueing it needs (so
/// code that queues work need not name the owner's type).
///
/// # Invariants
///
/// Only exists as the first field of a pinned [`Worker`], set up by it.
#[repr(transparent)]
pub(crate) struct WorkItem(Opaque<bindings::work_struct>);

impl WorkItem {
    /// A work item that calls `f` when it runs.
    fn new(f: unsafe extern "C" fn(*mut bindings::work_struct)) -> impl PinInit<Self> {
        // SAFETY: `INIT_WORK` initialises the work item in place; the
        // `repr(transparent)` wrapper has its layout.
        unsafe {
            kernel::init::pin_init_from_closure(move |slot: *mut Self| {
                bindings::metaroce_helper_init_work(slot.cast(), Some(f));
                Ok(())
            })
        }
    }

    /// Queues the work unless it is queued already (then the queued call
    /// will see whatever the caller made due). Any context, hard irq and
    /// interrupts off included. Before [`Worker::start`] the call it makes
    /// does nothing; after the worker is dropped, queueing does nothing.
    pub(crate) fn schedule(&self) {
        // SAFETY: the work item is set up and pinned inside its worker
        // (invariant); the workqueue core serialises queueing against
        // `disable_work_sync`.
        unsafe { bindings::metaroce_helper_queue_work(self.0.get()) };
    }
}

/// A work item owned by (a field of) a pinned `T`.
///
/// # Invariants
///
/// `work` was set up with [`callback::<T>`] and never moves (pinned); once
/// `owner` is set it points to the pinned `T` that contains this worker,
/// which outlives it (the work is disabled in `drop`, before the fields
/// after it are dropped; the owner's fields that can queue it must be
/// dropped or quiet by then).
#[pin_data(PinnedDrop)]
#[repr(C)]
pub(crate) struct Worker<T: Job> {
    #[pin]
    work: WorkItem,
    owner: AtomicPtr<T>,
    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: the work item is only touched through the workqueue core's own
// locking (`queue_work`, `disable_work_sync`), from any context; the owner
// pointer is atomic and refers to a `Sync` owner.
unsafe impl<T: Job> Send for Worker<T> {}
// SAFETY: as above.
unsafe impl<T: Job> Sync for Worker<T> {}

impl<T: Job> Worker<T> {
    /// A worker that does nothing until [`Worker::start`].
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            work <- WorkItem::new(callback::<T>),
            owner: AtomicPtr::new(core::ptr::null_mut()),
            _pin: PhantomPinned,
        })
    }

    /// Names `owner`, the pinned value this worker is a field of, as the
    /// one to call. Later calls do nothing.
    pub(crate) fn start(&self, owner: &T) {
        let _ = self.owner.compare_exchange(
            core::ptr::null_mut(),
            (owner as *const T).cast_mut(),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// The work item, to queue it by.
    pub(crate) fn item(&self) -> &WorkItem {
        &self.work
    }
}

/// Whether the caller runs in task context: not in a hard or soft
/// interrupt (bottom halves may be disabled by a lock it holds).
pub(crate) fn in_task() -> bool {
    // SAFETY: reads the preempt count of the current task; no state.
    unsafe { bindings::metaroce_helper_in_task() }
}

/// # Safety
///
/// Called by the workqueue core with the `work` field of a live
/// `Worker<T>`.
unsafe extern "C" fn callback<T: Job>(work: *mut bindings::work_struct) {
    // `work` is the first field of the `repr(C)` worker.
    let worker = work.cast::<Worker<T>>();
    // SAFETY: the worker is alive while its work can run (it is disabled,
    // waiting for a running call, before being dropped); `owner` was set
    // before the work could be queued and outlives the worker (invariant).
    unsafe {
        if let Some(owner) = (*worker).owner.load(Ordering::Acquire).as_ref() {
            owner.run();
        }
    }
}

#[pinned_drop]
impl<T: Job> PinnedDrop for Worker<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: set up in `new`; disabling waits for a running call and
        // makes later `queue_work` calls fail, so the work never runs again.
        unsafe { bindings::disable_work_sync(self.work.0.get()) };
    }
}
