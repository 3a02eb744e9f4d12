//! A verbs object between its allocation and its hand-over to libibverbs.
//!
//! Creating a CQ, QP or SRQ takes steps that can each fail: allocate our
//! object, create it in the kernel (an `ibv_cmd_create_*` command, which
//! also fills the libibverbs part), map its rings. A `Creating` owns the
//! object until `finish` hands it over; dropped before that (an early
//! return on any failure), it undoes the steps taken: it destroys the
//! kernel's object, then frees ours.

use core::ffi::c_int;
use core::ptr::NonNull;

use crate::errno::Errno;

/// A provider object whose libibverbs part the kernel creates.
pub(crate) trait KernelObject {
    /// Destroys the kernel's object (`ibv_cmd_destroy_*`). Its status is
    /// not reported: the caller is already failing with the error that made
    /// it undo the create, and an object the kernel keeps is released when
    /// the context's uverbs file is closed.
    ///
    /// # Safety
    ///
    /// `obj` must be live and created in the kernel, not destroyed yet, and
    /// known to no one else (libibverbs has not been handed it).
    unsafe fn destroy_in_kernel(obj: *mut Self);
}

/// # Invariants
///
/// `obj` comes from `Box::into_raw` and is owned by this value alone;
/// `in_kernel` is true exactly when the kernel has created it.
pub(crate) struct Creating<T: KernelObject> {
    obj: NonNull<T>,
    in_kernel: bool,
}

impl<T: KernelObject> Creating<T> {
    pub(crate) fn new(obj: T) -> Self {
        Creating {
            obj: NonNull::from(Box::leak(Box::new(obj))),
            in_kernel: false,
        }
    }

    /// The object, for the create command to fill in place (its address
    /// does not change until it is freed).
    pub(crate) fn as_ptr(&self) -> *mut T {
        self.obj.as_ptr()
    }

    /// The object, still ours alone.
    pub(crate) fn get_mut(&mut self) -> &mut T {
        // SAFETY: by the invariants the allocation is live and owned by
        // `self`; `&mut self` makes this the only reference.
        unsafe { self.obj.as_mut() }
    }

    /// Runs `create`, a command that creates the object in the kernel, on
    /// the object; from its success on, dropping `self` destroys it there.
    ///
    /// # Safety
    ///
    /// `create` must return 0 exactly when the kernel created the object it
    /// was given (as `ibv_cmd_create_*` do), else an errno.
    pub(crate) unsafe fn create_in_kernel(
        &mut self,
        create: impl FnOnce(*mut T) -> c_int,
    ) -> Result<(), Errno> {
        Errno::check(create(self.as_ptr()))?;
        self.in_kernel = true;
        Ok(())
    }

    /// Hands the object over: it is the caller's (then libibverbs') to
    /// destroy and free.
    pub(crate) fn finish(self) -> *mut T {
        let obj = self.obj.as_ptr();
        core::mem::forget(self);
        obj
    }
}

impl<T: KernelObject> Drop for Creating<T> {
    fn drop(&mut self) {
        if self.in_kernel {
            // SAFETY: created in the kernel (in_kernel) and never handed
            // over (`finish` does not drop), so not destroyed and ours.
            unsafe { T::destroy_in_kernel(self.obj.as_ptr()) };
        }
        // SAFETY: by the invariants, from Box::into_raw and ours alone; it
        // is freed once, here.
        drop(unsafe { Box::from_raw(self.obj.as_ptr()) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        static DESTROYED: Cell<u32> = const { Cell::new(0) };
        static FREED: Cell<u32> = const { Cell::new(0) };
    }

    struct Probe;

    impl KernelObject for Probe {
        unsafe fn destroy_in_kernel(_obj: *mut Self) {
            DESTROYED.with(|d| d.set(d.get() + 1));
        }
    }

    impl Drop for Probe {
        fn drop(&mut self) {
            FREED.with(|f| f.set(f.get() + 1));
        }
    }

    fn counts() -> (u32, u32) {
        (DESTROYED.with(Cell::get), FREED.with(Cell::get))
    }

    #[test]
    fn undoes_what_was_done() {
        drop(Creating::new(Probe));
        assert_eq!(counts(), (0, 1), "never created: only freed");

        let mut c = Creating::new(Probe);
        // SAFETY: the stand-in command fails, so nothing is created.
        let r = unsafe { c.create_in_kernel(|_| 22) };
        assert_eq!(r, Err(Errno(22)));
        drop(c);
        assert_eq!(counts(), (0, 2), "failed create: only freed");

        let mut c = Creating::new(Probe);
        // SAFETY: the stand-in command "creates" the object.
        unsafe { c.create_in_kernel(|_| 0) }.unwrap();
        drop(c);
        assert_eq!(counts(), (1, 3), "created, then a later step failed");
    }

    #[test]
    fn finish_hands_over() {
        let mut c = Creating::new(Probe);
        // SAFETY: as above.
        unsafe { c.create_in_kernel(|_| 0) }.unwrap();
        let p = c.finish();
        assert_eq!(counts(), (0, 0));
        // SAFETY: handed over by finish; freed once, here.
        drop(unsafe { Box::from_raw(p) });
        assert_eq!(counts(), (0, 1));
    }
}
