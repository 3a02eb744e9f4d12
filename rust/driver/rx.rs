// SPDX-License-Identifier: GPL-2.0

//! What the receive path tells the rest of the driver about a packet:
//! where it came from ([`RxMeta`]), what became of it ([`RxFate`]), and the
//! last malformed one of a device ([`DropRecord`]). The dispatch itself is
//! `net.rs`.

use crate::engine::wire::WireError;
use crate::ib::ip::IpAddr;
use crate::ib::skb::Ecn;
use crate::ib::udp::TxTo;

/// Where a received packet came from, for the QP layer and for replies.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RxMeta {
    /// The peer's address (IPv4 or IPv6, as the packet was).
    pub(crate) src: IpAddr,
    /// Our address the packet was sent to (the source of replies).
    pub(crate) dst: IpAddr,
    /// The peer's UDP source port: the path entropy, reused by ACKs and
    /// probe replies as their source port.
    pub(crate) src_port: u16,
    /// The IP ECN field as received (`Ecn::Ce`: marked by a switch).
    pub(crate) ecn: Ecn,
}

impl RxMeta {
    /// The destination of a reply on the same path (section 3.4): back to
    /// the sender, from the packet's source port, ECT(0).
    pub(crate) fn reply_to(&self) -> TxTo {
        TxTo {
            src: self.dst,
            dst: self.src,
            src_port: self.src_port,
            ecn: Ecn::Ect0,
        }
    }
}

/// The last malformed packet of a device, logged when counters are read.
#[derive(Clone, Copy)]
pub(crate) struct DropRecord {
    pub(crate) reason: WireError,
    pub(crate) from: IpAddr,
    pub(crate) port: u16,
    pub(crate) len: usize,
}

/// What became of a received packet; decides how its skb is freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RxFate {
    /// Processed by the protocol (placed, answered, acknowledged, or read
    /// and found stale or duplicate by the engine): `consume_skb`.
    Consumed,
    /// Dropped before the protocol took it (malformed, not ours, no QP,
    /// not from the peer, a QP in error, over a rate limit): `kfree_skb`,
    /// so drop monitors see it. Each such path counts its own reason.
    Dropped,
}
