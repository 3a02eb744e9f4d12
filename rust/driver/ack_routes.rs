// SPDX-License-Identifier: GPL-2.0

//! Where a QP's held ACKs go. The receiver engine acknowledges a path every
//! few packets (protocol.md 3.4), so a packet's ACK may be sent later, by
//! the tick; it then goes back on the route of the path's newest waiting
//! packet: its plane and UDP source port, remembered per path slot, and
//! the addresses, remembered per plane (a connected QP takes a plane's
//! packets only from the peer's one address there, protocol.md 3, and
//! our address on a plane is the one its packets are sent to). Kept
//! small (256 B, not 64 full routes) because every connected QP has one
//! (design.md, "Per-QP memory").

use crate::engine::config::{MAX_PATHS, PATH_SLOT_MASK};
use crate::engine::wire::MAX_PLANES;
use crate::ib::skb::{Ecn, Ipv4Addr};
use crate::ib::udp::TxV4;

/// `AckRoutes::planes` of a path slot with no held packet.
const NO_PLANE: u8 = u8::MAX;

/// The plane and reply destination of each path slot's newest packet whose
/// ACK the engine held.
pub(crate) struct AckRoutes {
    /// The plane of each path slot's newest held packet, or `NO_PLANE`.
    planes: [u8; MAX_PATHS],
    /// The UDP source port the ACK of each path slot leaves from.
    ports: [u16; MAX_PATHS],
    /// Per plane: our address and the peer's, of the newest held packet.
    addrs: [(Ipv4Addr, Ipv4Addr); MAX_PLANES],
}

const _: () = assert!(core::mem::size_of::<AckRoutes>() <= 256);

impl AckRoutes {
    /// No route known.
    pub(crate) const NONE: Self = Self {
        planes: [NO_PLANE; MAX_PATHS],
        ports: [0; MAX_PATHS],
        addrs: [(Ipv4Addr([0; 4]), Ipv4Addr([0; 4])); MAX_PLANES],
    };

    /// A packet of `path_id` that came in on plane `plane` waits for its
    /// ACK, which goes to `to` (a reply: ECT(0)).
    pub(crate) fn wait(&mut self, path_id: u16, plane: u8, to: TxV4) {
        let slot = usize::from(path_id & PATH_SLOT_MASK);
        let (Some(p), Some(port), Some(addrs)) = (
            self.planes.get_mut(slot),
            self.ports.get_mut(slot),
            self.addrs.get_mut(usize::from(plane)),
        ) else {
            return;
        };
        *p = plane;
        *port = to.src_port;
        *addrs = (to.src, to.dst);
    }

    /// Where the ACK of `path_id` goes: the plane and the destination.
    pub(crate) fn of(&self, path_id: u16) -> Option<(u8, TxV4)> {
        let slot = usize::from(path_id & PATH_SLOT_MASK);
        let plane = *self.planes.get(slot).filter(|&&p| p != NO_PLANE)?;
        let (src, dst) = *self.addrs.get(usize::from(plane))?;
        Some((
            plane,
            TxV4 {
                src,
                dst,
                src_port: *self.ports.get(slot)?,
                ecn: Ecn::Ect0,
            },
        ))
    }
}
