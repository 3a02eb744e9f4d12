// SPDX-License-Identifier: GPL-2.0

//! The PLANES exchange (protocol.md 1.8): telling the peer our address
//! on every plane, learning its own, and which planes may carry packets.

use kernel::prelude::*;

use super::{now_ns, Inner, Peer, Transport, TxCtx};
use crate::driver::plane::{PeerPlanes, PlaneTable};
use crate::engine::wire::{self, Planes};
use crate::ib::ip::IpAddr;
use crate::ib::lock::SpinLockBh;
use crate::ib::netdev::NetDevice;
use crate::ib::skb::Ecn;
use crate::ib::udp::TxTo;

impl Transport {
    /// Sends our plane list to the peer, saying whether we hold its list
    /// and asking for an answer until it said it holds ours: on plane 0,
    /// or while plane 0 has no carrier on the first plane that has and
    /// where the peer's address is known (from this QP's exchange or the
    /// device's directory, `peers.rs`); with none, on plane 0 anyway.
    pub(super) fn send_planes(&self, tx: &TxCtx<'_>, peer: Peer, pp: &PeerPlanes) {
        let known = tx.peers.lock().get(peer.remote);
        let planes = tx.planes.lock();
        let (count, addrs) = planes.addrs(&peer.local);
        let pl = Planes {
            dst_qpn: peer.qpn,
            src_qpn: self.qpn,
            known: pp.known,
            confirm: !pp.acked,
            count,
            max_payload: pp.own_payload,
            addrs,
        };
        let Some((ndev, src, dst)) = planes.live_route(peer.local, peer.remote, |k| {
            pp.addr(k).or_else(|| known?.addr(k))
        }) else {
            return;
        };
        let to = TxTo {
            src,
            dst,
            src_port: wire::UDP_PORT,
            ecn: Ecn::Ect0,
        };
        let _ = self.send(tx, ndev, &to, wire::PLANES_LEN + wire::ICRC_LEN, |buf| {
            pl.encode(buf).map_err(|_| EINVAL)
        });
    }

    /// Sets the engine to the payload size of protocol.md 1.8: once we
    /// hold the peer's list, the receiver takes the smaller of both
    /// advertisements (if above the path MTU: the engine refuses less)
    /// as the connection's agreed size; the sender segments new messages
    /// at it while the peer holds our list and both ends' latest
    /// advertisements still reach it, else at the path MTU.
    fn agree_payload(i: &mut Inner) {
        let pp = i.recv.peer_planes;
        let (own, peer) = (u32::from(pp.own_payload), u32::from(pp.peer_payload));
        if pp.known && i.recv.receiver.payload() == 0 && own != 0 && peer != 0 {
            let _ = i.recv.receiver.set_payload(own.min(peer));
        }
        let agreed = i.recv.receiver.payload();
        let wide = pp.acked && agreed != 0 && own >= agreed && peer >= agreed;
        let _ = i.send.sender.set_payload(wide.then_some(agreed));
    }

    /// What our planes carry for this QP now, if it advertises a payload
    /// size and that changed (a plane's MTU changed, or a plane joined):
    /// the sender falls back to the path MTU at once if the agreed size
    /// no longer fits, and the peer is told in a new exchange.
    fn refresh_payload(&self, i: &mut Inner, tx: &TxCtx<'_>, peer: Peer, now: u64) {
        if i.recv.peer_planes.own_payload == 0 {
            return;
        }
        // Never 0 once advertised: that would read as "none" rather than
        // "less than agreed".
        let own = tx.planes.lock().max_payload(&peer.local).max(1);
        if own == i.recv.peer_planes.own_payload {
            return;
        }
        i.recv.peer_planes.own_payload = own;
        Self::agree_payload(i);
        i.recv.peer_planes.restart(now);
        let _ = i.recv.peer_planes.due(now);
        self.send_planes(tx, peer, &i.recv.peer_planes);
    }

    /// The MTU of one of the device's planes changed: a QP whose agreed
    /// payload size no longer fits stops using it, and tells the peer.
    pub(crate) fn plane_mtu_changed(&self, tx: &TxCtx<'_>) {
        let mut i = self.lock();
        if let Some(peer) = i.peer.filter(|_| !i.failed) {
            self.refresh_payload(&mut i, tx, peer, now_ns());
        }
    }

    /// Whether plane `k` can carry the packets of this QP, connected from
    /// `local`: our netdev has carrier, both ends list the plane (the
    /// peer's address on it is known, and we have one of the QP's family
    /// and scope there), and the peer said it holds ours (before, it
    /// would drop what we send from there as not from its peer,
    /// protocol.md 1.8).
    fn plane_usable(tx: &TxCtx<'_>, pp: &PeerPlanes, local: &IpAddr, k: u8) -> bool {
        if (k != 0 && !(pp.known && pp.acked)) || pp.addr(k).is_none() {
            return false;
        }
        let planes = tx.planes.lock();
        planes.get(k).is_some_and(|n| n.is_running_with_carrier())
            && (k == 0 || planes.local_addr(k, local).is_some())
    }

    /// Plane `plane`'s netdev gained (`up`) or lost carrier or went away:
    /// its paths return (after a probe) or are drained onto the others.
    pub(crate) fn plane_event(&self, tx: &TxCtx<'_>, plane: u8, up: bool) {
        {
            let mut i = self.lock();
            let ours = !i.failed && plane < i.send.sender.config().planes;
            if let Some(peer) = i.peer.filter(|_| ours) {
                if !up {
                    i.send.sender.plane_down(plane, now_ns());
                } else if Self::plane_usable(tx, &i.recv.peer_planes, &peer.local, plane) {
                    i.send.sender.plane_up(plane, now_ns());
                }
                self.pump(&mut i, tx);
            }
        }
        self.deliver_cq_events();
    }

    /// Plane `plane` was added to the device, which has `planes` planes
    /// now (protocol.md 1.8, a plane joining): a connected QP spreads its
    /// paths over them (the new planes stay down until they are usable)
    /// and lists its planes to the peer again, until the peer confirms.
    pub(crate) fn plane_added(&self, tx: &TxCtx<'_>, plane: u8, planes: u8) {
        {
            let mut i = self.lock();
            let Some(peer) = i.peer.filter(|_| !i.failed) else {
                return;
            };
            let now = now_ns();
            if !i.send.sender.add_planes(planes, now) && plane < i.send.sender.config().planes {
                // A removed plane's number filled again (down since its
                // removal): its new address must reach the peer first.
                i.send.sender.plane_down(plane, now);
            }
            // The new plane's MTU counts in what we advertise.
            if i.recv.peer_planes.own_payload != 0 {
                i.recv.peer_planes.own_payload = tx.planes.lock().max_payload(&peer.local).max(1);
                Self::agree_payload(&mut i);
            }
            i.recv.peer_planes.restart(now);
            let _ = i.recv.peer_planes.due(now);
            self.send_planes(tx, peer, &i.recv.peer_planes);
            self.pump(&mut i, tx);
        }
        self.deliver_cq_events();
    }

    /// The peer's PLANES packet: learn its addresses (its planes become
    /// usable, a plane it no longer lists goes down), confirm that we have
    /// them, stop repeating ours once it confirms.
    pub(super) fn receive_planes(&self, i: &mut Inner, tx: &TxCtx<'_>, pl: &Planes) {
        let Some(peer) = i.peer else { return };
        if pl.src_qpn != peer.qpn || i.failed {
            return;
        }
        let confirmed = i.recv.peer_planes.acked;
        if pl.known {
            i.recv.peer_planes.acked = true;
        }
        let before = i.recv.peer_planes;
        let new = i.recv.peer_planes.learn(pl.count, &pl.addrs);
        i.recv.peer_planes.peer_payload = pl.max_payload;
        Self::agree_payload(i);
        if new {
            tx.peers
                .lock()
                .learn(i.recv.peer_planes.as_peer(peer.local));
        }
        // A list that changed, or the peer's first KNOWN since our exchange
        // (re)started: `restart` clears `acked`, so the answer to the list
        // of a plane we added brings it up even when the peer's list is
        // one we held already (it added that plane first).
        if new || confirmed != i.recv.peer_planes.acked {
            for k in 1..i.send.sender.config().planes {
                if Self::plane_usable(tx, &i.recv.peer_planes, &peer.local, k) {
                    i.send.sender.plane_up(k, now_ns());
                } else if before.addr(k).is_some() && i.recv.peer_planes.addr(k).is_none() {
                    i.send.sender.plane_down(k, now_ns());
                }
            }
        }
        if !pl.known || pl.confirm {
            self.send_planes(tx, peer, &i.recv.peer_planes);
        }
        self.pump(i, tx);
    }

    /// The connected peer QP, if `src` is the peer's address on `ndev`'s
    /// plane (protocol.md 3): who a probe of ours may be answered for.
    pub(crate) fn peer_qpn_from(
        &self,
        planes: &SpinLockBh<PlaneTable>,
        ndev: &NetDevice,
        src: IpAddr,
    ) -> Option<u32> {
        let i = self.lock();
        let peer = i.peer?;
        let plane = planes.lock().index_of(ndev)?;
        (i.recv.peer_planes.addr(plane) == Some(src)).then_some(peer.qpn)
    }
}
