// SPDX-License-Identifier: GPL-2.0

//! The module's tracepoints (system `metaroce`, defined in
//! `rust/sys/metaroce_trace.h`): safe calls into their C forwarders
//! (`rust/sys/trace.c`). The kernel crate of 6.12 cannot define
//! tracepoints, so they are C; each forwarder tests its event's static key
//! first, so a disabled event costs a call and a not-taken branch. The
//! cause codes below are the `__print_symbolic` tables of the header.

use kernel::prelude::*;

use super::sys::bindings;
use crate::engine::events::{CutCause, FailCause, LossCause, PathTag, RecoverCause};
use crate::engine::wire::Nak;

/// Bytes of an RDMA device name, NUL included (`IB_DEVICE_NAME_MAX`).
const NAME_LEN: usize = 64;

/// A device name as the events carry it, copied when a QP is created (a
/// later `rdma dev set ... name` is not seen by that QP's events).
///
/// # Invariants
///
/// The last byte is NUL.
pub(crate) struct DevName([u8; NAME_LEN]);

impl DevName {
    /// The empty name (until the QP's is copied in).
    pub(crate) const NONE: Self = Self([0; NAME_LEN]);

    /// A copy of `name`, cut to `NAME_LEN - 1` bytes.
    pub(crate) fn new(name: &CStr) -> Self {
        let mut out = [0u8; NAME_LEN];
        for (o, b) in out
            .iter_mut()
            .zip(name.as_bytes().iter().take(NAME_LEN - 1))
        {
            *o = *b;
        }
        Self(out)
    }

    fn as_ptr(&self) -> *const kernel::ffi::c_char {
        self.0.as_ptr().cast()
    }
}

fn fail_code(c: FailCause) -> u8 {
    match c {
        FailCause::Timeout => 0,
        FailCause::PlaneDown => 1,
    }
}

fn recover_code(c: RecoverCause) -> u8 {
    match c {
        RecoverCause::Ack => 0,
        RecoverCause::ProbeReply => 1,
        RecoverCause::SpuriousTimeout => 2,
    }
}

fn loss_code(c: LossCause) -> u8 {
    match c {
        LossCause::Sack => 0,
        LossCause::Timeout => 1,
        LossCause::PlaneDown => 2,
        LossCause::Verdict => 3,
        LossCause::TailProbe => 4,
    }
}

fn cut_code(c: CutCause) -> u8 {
    match c {
        CutCause::Ecn => 0,
        CutCause::Delay => 1,
        CutCause::Loss => 2,
        CutCause::Timeout => 3,
    }
}

/// `metaroce:path_failed`: `path` of QP `qpn` stopped carrying data.
pub(crate) fn path_failed(dev: &DevName, qpn: u32, path: PathTag, cause: FailCause) {
    // SAFETY: `dev` is NUL-terminated (type invariant) and lives through
    // the call, which copies it into the event; the rest are scalars.
    unsafe {
        bindings::metaroce_trace_path_failed(
            dev.as_ptr(),
            qpn,
            path.id,
            path.plane,
            path.src_port,
            fail_code(cause),
        )
    }
}

/// `metaroce:path_recovered`: `path` of QP `qpn` carries data again.
pub(crate) fn path_recovered(dev: &DevName, qpn: u32, path: PathTag, cause: RecoverCause) {
    // SAFETY: as in `path_failed`.
    unsafe {
        bindings::metaroce_trace_path_recovered(
            dev.as_ptr(),
            qpn,
            path.id,
            path.plane,
            path.src_port,
            recover_code(cause),
        )
    }
}

/// `metaroce:path_replaced`: QP `qpn`'s path `old` failed its probes, or
/// was re-homed to or from a plane that went down or came back, and `new`
/// took its slot.
pub(crate) fn path_replaced(dev: &DevName, qpn: u32, old: PathTag, new: PathTag) {
    // SAFETY: as in `path_failed`.
    unsafe {
        bindings::metaroce_trace_path_replaced(
            dev.as_ptr(),
            qpn,
            old.id,
            new.id,
            new.plane,
            old.src_port,
            new.src_port,
        )
    }
}

/// One data packet QP `qpn` resends.
pub(crate) struct Resent {
    /// The path it goes out on now, and its plane.
    pub(crate) path: u16,
    pub(crate) plane: u8,
    /// Its new PSN on that path, its message and its offset there.
    pub(crate) psn: u32,
    pub(crate) msn: u32,
    pub(crate) offset: u32,
    /// Why it was declared lost.
    pub(crate) cause: LossCause,
}

/// `metaroce:retransmit`.
pub(crate) fn retransmit(dev: &DevName, qpn: u32, r: &Resent) {
    // SAFETY: as in `path_failed`.
    unsafe {
        bindings::metaroce_trace_retransmit(
            dev.as_ptr(),
            qpn,
            r.path,
            r.plane,
            r.psn,
            r.msn,
            r.offset,
            loss_code(r.cause),
        )
    }
}

/// `metaroce:window_decrease`: `path`'s window went from `old` to `new`
/// (1/1024 packet units).
pub(crate) fn window_decrease(
    dev: &DevName,
    qpn: u32,
    path: PathTag,
    (old, new): (u32, u32),
    cause: CutCause,
) {
    // SAFETY: as in `path_failed`.
    unsafe {
        bindings::metaroce_trace_window_decrease(
            dev.as_ptr(),
            qpn,
            path.id,
            path.plane,
            old,
            new,
            cut_code(cause),
        )
    }
}

/// `metaroce:nak`: QP `qpn` received `nak`; `stale` if it failed nothing.
pub(crate) fn nak(dev: &DevName, qpn: u32, nak: &Nak, stale: bool) {
    // SAFETY: as in `path_failed`.
    unsafe {
        bindings::metaroce_trace_nak(
            dev.as_ptr(),
            qpn,
            nak.path_id,
            nak.psn,
            nak.msn,
            nak.syndrome as u8,
            stale,
        )
    }
}

/// `metaroce:give_up`: QP `qpn`'s retry budget ran out; `outstanding`
/// messages failed.
pub(crate) fn give_up(dev: &DevName, qpn: u32, outstanding: u32) {
    // SAFETY: as in `path_failed`.
    unsafe { bindings::metaroce_trace_give_up(dev.as_ptr(), qpn, outstanding) }
}
