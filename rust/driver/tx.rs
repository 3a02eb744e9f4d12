// SPDX-License-Identifier: GPL-2.0

//! Transmit: one MetaRoCE packet into an skb and out through the tunnel
//! socket on one plane, counted on the device. Any context (softirq
//! included). The leaf every sender uses: the data path, datagrams and
//! probe replies.

use kernel::prelude::*;
use kernel::sync::Arc;

use super::stats::{Counter, Counters};
use crate::ib::inflight::TxInFlight;
use crate::ib::netdev::NetDevice;
use crate::ib::skb::TxTail;
use crate::ib::udp::{TunnelSock, TxSkb, TxTo};

/// Sends one MetaRoCE packet of at most `len` bytes on plane `ndev` to `to`:
/// `fill` encodes it into the buffer and returns the length used. Counts
/// `tx_packets`/`tx_bytes` (and the plane's) or `tx_errors`. Any context (softirq included).
pub(crate) fn send(
    counters: &Counters,
    sock: &TunnelSock,
    ndev: &NetDevice,
    to: &TxTo,
    len: usize,
    fill: impl FnOnce(&mut [u8]) -> Result<usize>,
) -> Result {
    let res = (|| {
        let mut skb = TxSkb::alloc(ndev, len)?;
        let n = fill(skb.put(len)?)?;
        if n != len {
            return Err(EINVAL);
        }
        sock.xmit(ndev, skb, to)?;
        Ok(n)
    })();
    count_tx(counters, ndev, res)
}

/// Sends one data packet of exactly `len` bytes on plane `ndev` to `to`:
/// `fill` appends them front to back (header, payload, ICRC) into a buffer
/// that is not zeroed first (`TxSkb::put_with`: a byte left unwritten
/// fails the send instead). The packet counts in `owner` (its QP's packets
/// the network stack holds), if any, until the stack releases it. Counts like
/// [`send`].
pub(crate) fn send_data(
    counters: &Counters,
    sock: &TunnelSock,
    ndev: &NetDevice,
    to: &TxTo,
    len: usize,
    owner: Option<&Arc<TxInFlight>>,
    fill: impl FnOnce(&mut TxTail<'_>) -> Result,
) -> Result {
    let res = (|| {
        let mut skb = TxSkb::alloc(ndev, len)?;
        if let Some(owner) = owner {
            skb.charge(owner);
        }
        skb.put_with(len, fill)?;
        sock.xmit(ndev, skb, to)
    })();
    count_tx(counters, ndev, res.map(|()| len))
}

fn count_tx(counters: &Counters, ndev: &NetDevice, res: Result<usize>) -> Result {
    match res {
        Ok(n) => {
            counters.inc(Counter::TxPackets);
            counters.add(Counter::TxBytes, n as u64);
            counters.on_plane_packet(ndev.ifindex(), true, n as u64);
            Ok(())
        }
        Err(e) => {
            counters.inc(Counter::TxErrors);
            Err(e)
        }
    }
}
