//! Errors inside the provider, and how they cross the C boundary.
//!
//! Internally every fallible operation returns `Result<_, Errno>`. At the
//! boundary rdma-core expects, per verb:
//! - verbs returning a pointer (create_*, alloc_*, reg_mr): NULL with `errno`
//!   set;
//! - verbs returning `int` (destroy_*, modify_*, query_*, post_*): 0 or the
//!   positive errno value (we also set `errno`, which some callers print);
//! - `poll_cq`: the number of completions, or a negative value.

use core::ffi::c_int;

/// A positive errno value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Errno(pub(crate) c_int);

pub(crate) const ENOENT: Errno = Errno(2);
pub(crate) const EIO: Errno = Errno(5);
pub(crate) const ENOMEM: Errno = Errno(12);
pub(crate) const EINVAL: Errno = Errno(22);
pub(crate) const EOPNOTSUPP: Errno = Errno(95);

/// A ring element or header the ring format refused: EIO for indices a
/// peer set more than a ring apart (the ring is corrupt), else EINVAL.
impl From<metaroce_abi::reject::Reject> for Errno {
    fn from(r: metaroce_abi::reject::Reject) -> Self {
        match r {
            metaroce_abi::reject::Reject::IndicesApart => EIO,
            _ => EINVAL,
        }
    }
}

impl Errno {
    /// Interprets the return value of an `ibv_cmd_*` helper, which is 0 or a
    /// positive errno; a negative value (not expected) is taken as its
    /// absolute value, and a zero errno is never produced.
    pub(crate) fn check(ret: c_int) -> Result<(), Errno> {
        match ret {
            0 => Ok(()),
            r if r > 0 => Err(Errno(r)),
            r => Err(Errno(r.checked_neg().filter(|v| *v > 0).unwrap_or(EIO.0))),
        }
    }

    /// The errno of a failed libc call: `errno` if it is set, else EIO.
    pub(crate) fn from_os(last: Option<i32>) -> Errno {
        match last {
            Some(e) if e > 0 => Errno(e),
            _ => EIO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_maps_returns() {
        assert_eq!(Errno::check(0), Ok(()));
        assert_eq!(Errno::check(22), Err(EINVAL));
        assert_eq!(Errno::check(-12), Err(ENOMEM));
        assert_eq!(Errno::check(c_int::MIN), Err(EIO));
    }

    #[test]
    fn os_errno_never_zero() {
        assert_eq!(Errno::from_os(Some(12)), ENOMEM);
        assert_eq!(Errno::from_os(Some(0)), EIO);
        assert_eq!(Errno::from_os(None), EIO);
    }
}
