// SPDX-License-Identifier: GPL-2.0

//! A spinlock that disables bottom halves while held: safe to share between
//! process context and softirq (the UDP receive path, timers).
//!
//! The kernel crate's `SpinLock` takes `spin_lock`, so a softirq interrupting
//! a process-context holder on the same CPU would deadlock (and lockdep
//! reports an inconsistent lock state). [`SpinLockBh`] takes `spin_lock_bh`.
//! Do not take it in hard-irq context or with interrupts disabled.

use kernel::sync::lock::{Backend, Lock};

use crate::sys::bindings;

/// Creates a [`SpinLockBh`] initialiser with the given name and a new lock
/// class (one per call site, as `new_spinlock!`).
macro_rules! new_spinlock_bh {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::ib::lock::SpinLockBh::new(
            $inner, ::kernel::optional_name!($($name)?), ::kernel::static_lock_class!())
    };
}
pub(crate) use new_spinlock_bh;

/// A `spinlock_t` taken with `spin_lock_bh`; see the module documentation.
pub(crate) type SpinLockBh<T> = Lock<T, SpinLockBhBackend>;

/// The [`Backend`] of [`SpinLockBh`]: `spin_lock_bh`/`spin_unlock_bh`.
pub(crate) struct SpinLockBhBackend;

// SAFETY: `spinlock_t` ensures mutual exclusion between `lock` and `unlock`;
// `relock` uses the default implementation, which calls `lock` again, the
// same locking method.
unsafe impl Backend for SpinLockBhBackend {
    type State = kernel::bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: the caller guarantees `ptr` is valid for writes and that
        // `name` and `key` stay valid for reads indefinitely; this is the
        // initialiser `spin_lock_init` expands to, with our own class.
        unsafe { kernel::bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: the caller guarantees `ptr` is an initialised lock. The
        // helper takes the same C `spinlock_t`, bound by our own bindgen run.
        unsafe { bindings::metaroce_helper_spin_lock_bh(ptr.cast()) }
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: the caller owns the lock, taken by `lock` with bottom
        // halves disabled, which this re-enables.
        unsafe { bindings::metaroce_helper_spin_unlock_bh(ptr.cast()) }
    }
}
