// SPDX-License-Identifier: GPL-2.0

//! The QP's tracepoints (`metaroce:*`, rust/ib/trace.rs): what its sender
//! engine reported since the last call into it (path failures,
//! replacements and recoveries, window decreases, give-ups). Retransmits
//! are traced where they are sent (`requester`), NAKs where they arrive
//! (`completer`).

use super::{Inner, Transport};
use crate::engine::events::SenderEvent;
use crate::ib::trace;

impl Transport {
    /// Takes the engine's events into the tracepoints. Called after every
    /// call into the sender that may make one (`pump`, the timers); cheap
    /// when there is none, and the engine's queue bounds what waits.
    pub(super) fn trace_events(&self, i: &mut Inner) {
        let send = &mut *i.send;
        let (dev, qpn) = (&send.dev_name, self.qpn);
        while let Some(e) = send.sender.pop_event() {
            match e {
                SenderEvent::PathFailed { path, cause } => {
                    trace::path_failed(dev, qpn, path, cause)
                }
                SenderEvent::PathReplaced { old, new } => trace::path_replaced(dev, qpn, old, new),
                SenderEvent::PathRecovered { path, cause } => {
                    trace::path_recovered(dev, qpn, path, cause)
                }
                SenderEvent::WindowDecrease {
                    path,
                    old,
                    new,
                    cause,
                } => trace::window_decrease(dev, qpn, path, (old, new), cause),
                SenderEvent::GiveUp { outstanding } => trace::give_up(dev, qpn, outstanding),
            }
        }
    }
}
