// SPDX-License-Identifier: GPL-2.0

//! A spinlock that disables bottom halves while held: safe to share between
//! process context and softirq (the UDP receive path, timers); and one that
//! disables interrupts, for what kernel consumers may call from any context
//! (posting work requests: ULPs post from softirq and with interrupts off).
//!
//! The kernel crate's `SpinLock` takes `spin_lock`, so a softirq interrupting
//! a process-context holder on the same CPU would deadlock (and lockdep
//! reports an inconsistent lock state). [`SpinLockBh`] takes `spin_lock_bh`.
//! Do not take it in hard-irq context or with interrupts disabled.

use kernel::sync::lock::{Backend, Guard, Lock};

use super::sys::bindings;

/// An initialiser of lock type `$lock` with the given name and a new lock
/// class (one per call site, as `new_spinlock!`).
macro_rules! new_lock_of {
    ($lock:ident, $inner:expr $(, $name:literal)?) => {
        $crate::ib::lock::$lock::new($inner, ::kernel::optional_name!($($name)?), ::kernel::static_lock_class!())
    };
}
pub(crate) use new_lock_of;

/// Creates a [`SpinLockBh`] initialiser (see [`new_lock_of`]).
macro_rules! new_spinlock_bh {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::ib::lock::new_lock_of!(SpinLockBh, $inner $(, $name)?)
    };
}
pub(crate) use new_spinlock_bh;

/// Initialises the `spinlock_t` of either backend.
///
/// # Safety
///
/// `ptr` is valid for writes; `name` and `key` stay valid for reads
/// indefinitely (the [`Backend::init`] contract).
unsafe fn init_spinlock(
    ptr: *mut kernel::bindings::spinlock_t,
    name: *const kernel::ffi::c_char,
    key: *mut kernel::bindings::lock_class_key,
) {
    // SAFETY: per the caller; this is the initialiser `spin_lock_init`
    // expands to, with our own class.
    unsafe { kernel::bindings::__spin_lock_init(ptr, name, key) }
}

/// A `spinlock_t` taken with `spin_lock_bh`; see the module documentation.
pub(crate) type SpinLockBh<T> = Lock<T, SpinLockBhBackend>;

/// A held [`SpinLockBh`]: unlocked when dropped.
pub(crate) type SpinLockBhGuard<'a, T> = Guard<'a, T, SpinLockBhBackend>;

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
        // SAFETY: the caller's guarantees are `init_spinlock`'s.
        unsafe { init_spinlock(ptr, name, key) }
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

/// Creates a [`SpinLockIrq`] initialiser (see [`new_lock_of`]).
macro_rules! new_spinlock_irq {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::ib::lock::new_lock_of!(SpinLockIrq, $inner $(, $name)?)
    };
}
pub(crate) use new_spinlock_irq;

/// A `spinlock_t` taken with `spin_lock_irqsave`: any context, interrupts
/// disabled while held. Nothing that enables bottom halves (a
/// [`SpinLockBh`]) may be taken under it.
pub(crate) type SpinLockIrq<T> = Lock<T, SpinLockIrqBackend>;

/// The [`Backend`] of [`SpinLockIrq`]: `spin_lock_irqsave`/`spin_unlock_irqrestore`.
pub(crate) struct SpinLockIrqBackend;

// SAFETY: `spinlock_t` ensures mutual exclusion between `lock` and `unlock`;
// the guard keeps the saved interrupt flags for `unlock`; `relock` uses the
// default implementation, which calls `lock` again.
unsafe impl Backend for SpinLockIrqBackend {
    type State = kernel::bindings::spinlock_t;
    type GuardState = kernel::ffi::c_ulong;

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: the caller's guarantees are `init_spinlock`'s.
        unsafe { init_spinlock(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: the caller guarantees `ptr` is an initialised lock.
        unsafe { bindings::metaroce_helper_spin_lock_irqsave(ptr.cast()) }
    }

    unsafe fn unlock(ptr: *mut Self::State, guard_state: &Self::GuardState) {
        // SAFETY: the caller owns the lock, taken by `lock`, which returned
        // the flags this restores.
        unsafe { bindings::metaroce_helper_spin_unlock_irqrestore(ptr.cast(), *guard_state) }
    }
}

/// Whether the caller runs with interrupts disabled (or in hard-irq
/// context): then no [`SpinLockBh`] may be taken, and work that needs one
/// is left to the device tick.
pub(crate) fn irqs_disabled() -> bool {
    // SAFETY: reads the CPU's interrupt state; no preconditions.
    unsafe { bindings::metaroce_helper_irqs_disabled() }
}
