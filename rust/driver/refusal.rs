// SPDX-License-Identifier: GPL-2.0

//! Why a verb was refused. The errno alone (`EINVAL` for a dozen causes)
//! does not tell the user which attribute to change; every refusal of a
//! request's attribute also logs one line naming the device, the verb, the
//! QP where there is one, the attribute and the reason
//! (Documentation/user-guide.md, "When a verb is refused"). Info level and
//! rate-limited: a process can cause them at will. Only the device's name
//! is read, so these take a device of any driver data (`Device<D>`): the
//! objects below the device state refuse with them too.

use core::fmt;

use kernel::prelude::*;

use crate::ib::device::Device;
use crate::ib::log::info_ratelimited;
use crate::ib::types::{QpState, QpType};

/// Logs why `verb` on `dev` (on QP `qpn`, if any) was refused and returns
/// `err`, the errno the verb returns: unchanged by the logging.
pub(crate) fn refuse<D>(
    dev: &Device<D>,
    verb: &str,
    qpn: Option<u32>,
    err: Error,
    why: fmt::Arguments<'_>,
) -> Error {
    match qpn {
        Some(qpn) => info_ratelimited(format_args!(
            "{}: {} QP {:#x}: {}",
            dev.name(),
            verb,
            qpn,
            why
        )),
        None => info_ratelimited(format_args!("{}: {}: {}", dev.name(), verb, why)),
    }
    err
}

/// The first `(attribute, value, limit)` whose value is above its limit,
/// refused as "ATTRIBUTE VALUE above the device's LIMIT" (`EINVAL`).
pub(crate) fn check_limits<D, T: Copy + PartialOrd + fmt::Display>(
    dev: &Device<D>,
    verb: &str,
    limits: &[(&str, T, T)],
) -> Result {
    match limits.iter().find(|&&(_, value, max)| value > max) {
        Some(&(attr, value, max)) => Err(refuse(
            dev,
            verb,
            None,
            EINVAL,
            format_args!("{attr} {value} above the device's {max}"),
        )),
        None => Ok(()),
    }
}

/// The name of QP state `state`, as the IBA writes it (`None`: a value
/// that is no state).
pub(crate) fn qp_state_name(state: Option<QpState>) -> &'static str {
    match state {
        Some(QpState::Reset) => "RESET",
        Some(QpState::Init) => "INIT",
        Some(QpState::Rtr) => "RTR",
        Some(QpState::Rts) => "RTS",
        Some(QpState::Sqd) => "SQD",
        Some(QpState::Sqe) => "SQE",
        Some(QpState::Err) => "ERR",
        None => "an unknown state",
    }
}

/// The name of QP type `qp_type`.
pub(crate) fn qp_type_name(qp_type: QpType) -> &'static str {
    match qp_type {
        QpType::Rc => "RC",
        QpType::Uc => "UC",
        QpType::Ud => "UD",
        QpType::Gsi => "GSI",
    }
}
