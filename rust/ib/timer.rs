// SPDX-License-Identifier: GPL-2.0

//! A periodic kernel timer (`timer_list`) that calls its owner's [`Tick`]
//! from softirq, and is shut down (waiting for a running callback) when
//! dropped.

use core::marker::PhantomPinned;
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use kernel::prelude::*;
use kernel::types::Opaque;

use super::sys::bindings;

/// What a [`Ticker`] calls, in softirq context: must not sleep.
pub(crate) trait Tick: Sync {
    /// One period has passed.
    fn tick(&self);
}

/// A periodic timer owned by (a field of) a pinned `T`.
///
/// # Invariants
///
/// `timer` was set up with [`callback::<T>`] and never moves (pinned);
/// once `owner` is set it points to the pinned `T` that contains this
/// ticker, which outlives it (the ticker is shut down in `drop`, before the
/// rest of its owner is dropped: it must be the owner's first field).
#[pin_data(PinnedDrop)]
#[repr(C)]
pub(crate) struct Ticker<T: Tick> {
    #[pin]
    timer: Opaque<bindings::timer_list>,
    owner: AtomicPtr<T>,
    started: AtomicBool,
    period: u64,
    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: the timer is only touched through the timer core's own locking
// (`mod_timer`, `timer_shutdown_sync`), from any thread; the owner pointer
// is atomic and refers to a `Sync` owner.
unsafe impl<T: Tick> Send for Ticker<T> {}
// SAFETY: as above.
unsafe impl<T: Tick> Sync for Ticker<T> {}

impl<T: Tick> Ticker<T> {
    /// A stopped ticker firing every `period` jiffies once started.
    pub(crate) fn new(period: u64) -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `timer_setup` initialises the timer in place.
            timer <- Opaque::ffi_init(|t| unsafe { bindings::metaroce_helper_timer_setup(t, Some(callback::<T>)) }),
            owner: AtomicPtr::new(core::ptr::null_mut()),
            started: AtomicBool::new(false),
            period: period.max(1),
            _pin: PhantomPinned,
        })
    }

    /// Starts ticking for `owner`, the pinned value this ticker is a field
    /// of. Later calls do nothing.
    pub(crate) fn start(&self, owner: &T) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        self.owner
            .store((owner as *const T).cast_mut(), Ordering::Release);
        // SAFETY: the timer is set up and pinned (invariant).
        unsafe {
            bindings::mod_timer(
                self.timer.get(),
                bindings::metaroce_helper_jiffies()
                    .wrapping_add(self.period as kernel::ffi::c_ulong),
            )
        };
    }
}

/// # Safety
///
/// Called by the timer core with the `timer` field of a live `Ticker<T>`.
unsafe extern "C" fn callback<T: Tick>(timer: *mut bindings::timer_list) {
    // `timer` is the first field of the `repr(C)` ticker.
    let ticker = timer.cast::<Ticker<T>>();
    // SAFETY: the ticker is alive while its timer can fire (it is shut down
    // before being dropped); `owner` was set before the timer was armed and
    // the owner outlives the ticker (invariant).
    unsafe {
        if let Some(owner) = (*ticker).owner.load(Ordering::Acquire).as_ref() {
            owner.tick();
        }
        bindings::mod_timer(
            timer,
            bindings::metaroce_helper_jiffies()
                .wrapping_add((*ticker).period as kernel::ffi::c_ulong),
        );
    }
}

#[pinned_drop]
impl<T: Tick> PinnedDrop for Ticker<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: set up in `new`; shutting down waits for a running callback
        // and keeps it from re-arming.
        unsafe { bindings::timer_shutdown_sync(self.timer.get()) };
    }
}
