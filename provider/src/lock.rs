//! A lock whose hold may span several C calls.
//!
//! The `ibv_wr_*` API takes the send queue in `wr_start` and gives it back
//! in `wr_complete`/`wr_abort`; the extended CQ API holds the CQ from
//! `start_poll` to `end_poll`. A guard can be `leak`ed at the end of one
//! call and `resume`d by the next one.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, Ordering};

/// A spin lock (yielding) around `T`.
pub(crate) struct FfiLock<T> {
    locked: AtomicBool,
    data: UnsafeCell<T>,
}

// SAFETY: access to `data` is serialised by `locked` (acquire on lock,
// release on unlock), like std's Mutex.
unsafe impl<T: Send> Sync for FfiLock<T> {}
// SAFETY: moving the lock moves the owned `T`.
unsafe impl<T: Send> Send for FfiLock<T> {}

impl<T> FfiLock<T> {
    pub(crate) fn new(v: T) -> Self {
        FfiLock {
            locked: AtomicBool::new(false),
            data: UnsafeCell::new(v),
        }
    }

    /// Takes the lock, spinning then yielding while another holder has it.
    pub(crate) fn lock(&self) -> FfiGuard<'_, T> {
        let mut spins = 0u32;
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins = spins.saturating_add(1);
            if spins < 64 {
                core::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        FfiGuard { lock: self }
    }

    /// A guard for a lock taken by a guard that was `leak`ed.
    ///
    /// # Safety
    ///
    /// The calling thread's logical owner (one `wr_start`..`wr_complete` or
    /// `start_poll`..`end_poll` sequence) must hold the lock through a
    /// leaked guard, and no other guard for it may exist.
    pub(crate) unsafe fn resume(&self) -> FfiGuard<'_, T> {
        FfiGuard { lock: self }
    }

    /// Whether the lock is held (for tests).
    #[cfg(test)]
    pub(crate) fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Relaxed)
    }

    /// The value, through exclusive access to the lock.
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }
}

/// Exclusive access to the locked value; unlocks on drop.
pub(crate) struct FfiGuard<'a, T> {
    lock: &'a FfiLock<T>,
}

impl<T> FfiGuard<'_, T> {
    /// Keeps the lock held after this guard goes away (see `resume`).
    pub(crate) fn leak(self) {
        core::mem::forget(self);
    }
}

impl<T> Deref for FfiGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard proves the lock is held, so no other reference
        // to the data exists.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for FfiGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only borrow.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for FfiGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

/// A guard that keeps the lock held when it goes out of scope: for the
/// calls in the middle of a `wr_start`..`wr_complete` or
/// `start_poll`..`end_poll` sequence.
pub(crate) struct Held<'a, T>(Option<FfiGuard<'a, T>>);

/// Wraps `g` so that dropping it leaks it.
pub(crate) fn held<T>(g: FfiGuard<'_, T>) -> Held<'_, T> {
    Held(Some(g))
}

impl<T> Deref for Held<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0.as_ref().expect("guard present until drop")
    }
}

impl<T> DerefMut for Held<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0.as_mut().expect("guard present until drop")
    }
}

impl<T> Drop for Held<'_, T> {
    fn drop(&mut self) {
        if let Some(g) = self.0.take() {
            g.leak();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn leak_and_resume_keep_the_lock() {
        let l = FfiLock::new(1u32);
        let mut g = l.lock();
        *g += 1;
        g.leak();
        assert!(l.is_locked());
        // SAFETY: the guard above was leaked by this test and nothing else
        // holds a guard.
        let g = unsafe { l.resume() };
        assert_eq!(*g, 2);
        drop(g);
        assert!(!l.is_locked());
    }

    #[test]
    fn serialises_threads() {
        let l = Arc::new(FfiLock::new(0u64));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let l = Arc::clone(&l);
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *l.lock() += 1;
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(*l.lock(), 40_000);
    }
}
