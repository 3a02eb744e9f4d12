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
use crate::sys::bindings as b;

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

/// The name of QP state `state` (`IB_QPS_*`), as the IBA writes it.
pub(crate) fn qp_state_name(state: u32) -> &'static str {
    match state {
        b::ib_qp_state_IB_QPS_RESET => "RESET",
        b::ib_qp_state_IB_QPS_INIT => "INIT",
        b::ib_qp_state_IB_QPS_RTR => "RTR",
        b::ib_qp_state_IB_QPS_RTS => "RTS",
        b::ib_qp_state_IB_QPS_SQD => "SQD",
        b::ib_qp_state_IB_QPS_SQE => "SQE",
        b::ib_qp_state_IB_QPS_ERR => "ERR",
        _ => "an unknown state",
    }
}

/// The name of QP type `qp_type` (`IB_QPT_*`) for the types the device
/// supports.
pub(crate) fn qp_type_name(qp_type: u32) -> &'static str {
    match qp_type {
        b::ib_qp_type_IB_QPT_RC => "RC",
        b::ib_qp_type_IB_QPT_UC => "UC",
        b::ib_qp_type_IB_QPT_UD => "UD",
        b::ib_qp_type_IB_QPT_GSI => "GSI",
        _ => "unsupported",
    }
}
