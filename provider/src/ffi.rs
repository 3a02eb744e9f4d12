//! Helpers for the `extern "C"` entry points: errno, panic containment.
//!
//! Every entry point runs its body through one of these, so a Rust panic
//! never unwinds into libibverbs or the application (it becomes EIO).

use core::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::abi;
use crate::errno::{Errno, EIO};

/// Sets the calling thread's `errno`.
pub(crate) fn set_errno(e: Errno) {
    // SAFETY: __errno_location returns the calling thread's errno slot,
    // valid for the thread's lifetime.
    unsafe { *abi::__errno_location() = e.0 };
}

/// Runs a verb that returns `int`: 0, or a positive errno (also stored in
/// `errno`).
pub(crate) fn int_verb(f: impl FnOnce() -> Result<(), Errno>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)).unwrap_or(Err(EIO)) {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e);
            e.0
        }
    }
}

/// Runs a verb that returns a pointer: NULL with `errno` set on failure.
pub(crate) fn ptr_verb<T>(f: impl FnOnce() -> Result<*mut T, Errno>) -> *mut T {
    match catch_unwind(AssertUnwindSafe(f)).unwrap_or(Err(EIO)) {
        Ok(p) => p,
        Err(e) => {
            set_errno(e);
            core::ptr::null_mut()
        }
    }
}

/// Runs a verb with no return value (a panic is swallowed).
pub(crate) fn void_verb(f: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(f));
}

/// One line of warning about this provider, where rdma-core's own go:
/// libibverbs' debug log (`__verbs_log`, what a provider's `verbs_warn`
/// calls; shown with `VERBS_LOG_LEVEL=2 VERBS_LOG_FILE=/dev/stderr`) and,
/// when `IBV_SHOW_WARNINGS` is set, stderr, as libibverbs prints "no
/// userspace device-specific driver found" there.
pub(crate) fn warn(msg: &str) {
    let line = format!("libmetaroce: {msg}\n");
    if let Ok(text) = std::ffi::CString::new(line.as_str()) {
        // SAFETY: a "%s" format with one NUL-terminated string argument,
        // both alive for the call; __verbs_log does not read ctx.
        unsafe {
            abi::__verbs_log(
                core::ptr::null_mut(),
                abi::VERBS_LOG_WARN,
                c"%s".as_ptr(),
                text.as_ptr(),
            )
        };
    }
    if std::env::var_os("IBV_SHOW_WARNINGS").is_some() {
        eprint!("{line}");
    }
}

/// Runs a verb returning a plain value, `dflt` if it panics.
pub(crate) fn value_verb<T>(dflt: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(dflt)
}

/// A zero-initialised C struct on the heap.
///
/// # Safety
///
/// All-zero bytes must be a valid `T` (true for the bindgen/mirrored C
/// structs: integers, raw pointers, nullable function pointers).
pub(crate) unsafe fn boxed_zeroed<T>() -> Box<T> {
    // SAFETY: per the caller, the zeroed value is valid.
    Box::new(unsafe { core::mem::zeroed() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errno::EINVAL;

    fn errno() -> i32 {
        std::io::Error::last_os_error().raw_os_error().unwrap()
    }

    #[test]
    fn int_and_ptr_conventions() {
        assert_eq!(int_verb(|| Ok(())), 0);
        assert_eq!(int_verb(|| Err(EINVAL)), 22);
        assert_eq!(errno(), 22);
        let p: *mut u8 = ptr_verb(|| Err(Errno(12)));
        assert!(p.is_null());
        assert_eq!(errno(), 12);
    }

    #[test]
    fn panics_become_eio() {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        assert_eq!(int_verb(|| panic!("boom")), 5);
        let p: *mut u8 = ptr_verb(|| panic!("boom"));
        assert!(p.is_null());
        assert_eq!(value_verb(7, || panic!("boom")), 7);
        std::panic::set_hook(prev);
    }
}
