// SPDX-License-Identifier: GPL-2.0

//! Where a QP's held ACKs go. The receiver engine acknowledges a path every
//! few packets (protocol.md 3.4), so a packet's ACK may be sent later, by
//! the tick; it then goes back on the route of the path's newest waiting
//! packet: its plane and UDP source port, remembered per path slot. The
//! addresses follow from the plane (a connected QP takes a plane's packets
//! only from the peer's one address there, protocol.md 3, and the peer
//! sends them to the address we named there), so they are not kept here.
//! Kept small (192 B, not 64 full routes) because every connected QP has
//! one (design.md, "Per-QP memory").

use crate::engine::config::{MAX_PATHS, PATH_SLOT_MASK};

/// `AckRoutes::planes` of a path slot with no held packet.
const NO_PLANE: u8 = u8::MAX;

/// The plane and UDP port of each path slot's newest packet whose ACK the
/// engine held.
pub(crate) struct AckRoutes {
    /// The plane of each path slot's newest held packet, or `NO_PLANE`.
    planes: [u8; MAX_PATHS],
    /// The UDP source port the ACK of each path slot leaves from.
    ports: [u16; MAX_PATHS],
}

const _: () = assert!(core::mem::size_of::<AckRoutes>() <= 192);

impl AckRoutes {
    /// No route known.
    pub(crate) const NONE: Self = Self {
        planes: [NO_PLANE; MAX_PATHS],
        ports: [0; MAX_PATHS],
    };

    /// A packet of `path_id` that came in on plane `plane` waits for its
    /// ACK, which leaves from UDP port `src_port` (the packet's).
    pub(crate) fn wait(&mut self, path_id: u16, plane: u8, src_port: u16) {
        let slot = usize::from(path_id & PATH_SLOT_MASK);
        let (Some(p), Some(port)) = (self.planes.get_mut(slot), self.ports.get_mut(slot)) else {
            return;
        };
        *p = plane;
        *port = src_port;
    }

    /// Where the ACK of `path_id` goes: the plane and the UDP source port.
    pub(crate) fn of(&self, path_id: u16) -> Option<(u8, u16)> {
        let slot = usize::from(path_id & PATH_SLOT_MASK);
        let plane = *self.planes.get(slot).filter(|&&p| p != NO_PLANE)?;
        Some((plane, *self.ports.get(slot)?))
    }
}
