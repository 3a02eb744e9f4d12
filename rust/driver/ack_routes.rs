// SPDX-License-Identifier: GPL-2.0

//! Where a QP's held ACKs go. The receiver engine acknowledges a path every
//! few packets (protocol.md 3.4), so a packet's ACK may be sent later, by
//! the tick; it then goes back on the route of the path's newest waiting
//! packet, remembered here per path slot.

use crate::engine::config::{MAX_PATHS, PATH_SLOT_MASK};
use crate::ib::udp::TxV4;

/// The plane and reply destination of each path slot's newest packet whose
/// ACK the engine held.
pub(crate) struct AckRoutes([Option<(u8, TxV4)>; MAX_PATHS]);

impl AckRoutes {
    /// No route known.
    pub(crate) const NONE: Self = Self([None; MAX_PATHS]);

    /// A packet of `path_id` that came in on plane `plane` waits for its
    /// ACK, which goes to `to`.
    pub(crate) fn wait(&mut self, path_id: u16, plane: u8, to: TxV4) {
        if let Some(r) = self.0.get_mut(usize::from(path_id & PATH_SLOT_MASK)) {
            *r = Some((plane, to));
        }
    }

    /// Where the ACK of `path_id` goes: the plane and the destination.
    pub(crate) fn of(&self, path_id: u16) -> Option<(u8, TxV4)> {
        self.0
            .get(usize::from(path_id & PATH_SLOT_MASK))
            .copied()
            .flatten()
    }
}
