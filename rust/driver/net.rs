// SPDX-License-Identifier: GPL-2.0

//! The packet dispatch: every packet received on UDP port 4792 (of any
//! network namespace) is parsed and checked (`engine::wire::parse_packet`,
//! ICRC included), counted on the device of its ingress netdev in that
//! namespace, and then answered (PROBE) or handed to the QP layer
//! ([`deliver`]). Runs in softirq: nothing here sleeps or
//! allocates with `GFP_KERNEL`, and every skb is consumed or freed.

use kernel::prelude::*;

use super::device::{device_of_plane, DeviceState, MetaRoceIbDevice};
use super::rx::{DropRecord, RxFate, RxMeta};
use super::stats::Counter;
use super::transport::now_ns;
use super::tx::send;
use crate::engine::wire::{self, Ack, Nak, Opcode, Packet, Probe};
use crate::ib::ip::IpAddr;
use crate::ib::netdev::NetDevice;
use crate::ib::skb::{Ecn, SkBuff};
use crate::ib::udp::{RxHandler, TunnelSock};

/// The tunnel's receive handler.
pub(crate) struct NetRx;

impl RxHandler for NetRx {
    fn receive(sock: &TunnelSock, ndev: &NetDevice, mut skb: SkBuff) {
        // Only a device of the socket's namespace takes the packet: one
        // whose netdev has since moved to another namespace is on its way
        // out (its netdev's unregistration removes it).
        let Some(dev) = device_of_plane(ndev).filter(|d| d.data().tunnel.is(sock)) else {
            // Not one of our planes: dropped (freed with the skb).
            return;
        };
        if receive_on(&dev, sock, ndev, &mut skb) == RxFate::Consumed {
            skb.consume();
        }
        // Otherwise `skb` is freed as a drop here.
    }
}

/// Parses, counts and dispatches one packet of device `dev`'s plane `ndev`.
fn receive_on(
    dev: &MetaRoceIbDevice,
    sock: &TunnelSock,
    ndev: &NetDevice,
    skb: &mut SkBuff,
) -> RxFate {
    let st = dev.data();
    let len = skb.len().saturating_sub(8) as u64;
    st.counters.inc(Counter::RxPackets);
    st.counters.add(Counter::RxBytes, len);
    st.counters.on_plane_packet(ndev.ifindex(), false, len);

    let to_host = skb.is_to_host();
    let (Some(ip), Some(src_port)) = (skb.ip(), skb.udp_src_port()) else {
        st.counters.inc(Counter::RxMalformed);
        return RxFate::Dropped;
    };
    let meta = RxMeta {
        src: ip.src,
        dst: ip.dst,
        src_port,
        ecn: ip.ecn,
    };
    // Datagram receives report the IP header in their GRH area.
    let mut grh = skb.grh_area();
    if meta.ecn == Ecn::Ce {
        st.counters.inc(Counter::EcnMarks);
    }
    let Ok(payload) = skb.udp_payload() else {
        st.counters.inc(Counter::RxMalformed);
        return RxFate::Dropped;
    };
    match wire::parse_packet(payload) {
        Err(reason) => {
            st.counters.inc(Counter::RxMalformed);
            let rec = DropRecord {
                reason,
                from: meta.src,
                port: src_port,
                len: payload.len(),
            };
            *st.last_drop.lock() = Some(rec);
            RxFate::Dropped
        }
        // Only a probe sent to this host is answered (never one that
        // reached us as a link-layer broadcast or multicast).
        Ok(Packet::Probe(probe)) if to_host => answer_probe(dev, st, sock, ndev, &probe, &meta),
        Ok(Packet::Probe(_)) => {
            st.counters.inc(Counter::RxNoQp);
            RxFate::Dropped
        }
        Ok(Packet::Data { header, payload }) if header.opcode == Opcode::UdSend => {
            let tx = st.tx(sock, 0);
            let plane = st.planes.lock().index_of(ndev);
            if let (Some(grh), Some(k @ 1..)) = (grh.as_mut(), plane) {
                super::datagram::as_on_plane0(grh, k, &st.peers);
            }
            if super::datagram::receive(&st.uds, &tx, &header, payload, grh.as_ref()) {
                RxFate::Consumed
            } else {
                RxFate::Dropped
            }
        }
        Ok(pkt) => deliver(dev, st, sock, ndev, &pkt, &meta).unwrap_or_else(|| {
            st.counters.inc(Counter::RxNoQp);
            RxFate::Dropped
        }),
    }
}

/// Looks up the QP of a valid data, ACK, NAK, PROBE_REPLY or PLANES packet
/// on `dev` and hands the packet to it: what became of it, `None` if no QP
/// has its number. Softirq context; `pkt` borrows the skb (data payloads
/// are placed from it before it is freed).
fn deliver(
    dev: &MetaRoceIbDevice,
    st: &DeviceState,
    sock: &TunnelSock,
    ndev: &NetDevice,
    pkt: &Packet<'_>,
    meta: &RxMeta,
) -> Option<RxFate> {
    let tx = st.tx(sock, 0);
    let qpn = match pkt {
        Packet::Data { header, .. } => header.dst_qpn,
        Packet::Ack(Ack { dst_qpn, .. }) | Packet::Nak(Nak { dst_qpn, .. }) => *dst_qpn,
        Packet::ProbeReply(p) => p.dst_qpn,
        Packet::Planes(p) => p.dst_qpn,
        Packet::Probe(_) => return None,
    };
    // The table's lock is held through the QP's work: `destroy_qp` takes
    // the QP out under it, and the CQs the QP completes to may go once it
    // is out.
    let qps = dev.data().qps.lock();
    let t = qps.get(qpn)?;
    t.counters.on_receive(
        tx.qp_counters,
        super::qp_counters::wire_len(pkt),
        meta.ecn == Ecn::Ce,
    );
    Some(t.receive(&tx, ndev, pkt, meta))
}

/// The QPN to put in the reply to a probe for local QP `qpn` that came
/// from `src` on `ndev`: when it is the QP's peer, the peer QP, whose
/// sender is waiting for it. Otherwise `None`: the reply goes to QPN 0,
/// which no MetaRoCE QP uses, so the prober drops it (the reply still
/// proves the path works to a tool like selftests/metaroce_pkt.py).
fn probe_reply_qpn(dev: &MetaRoceIbDevice, ndev: &NetDevice, qpn: u32, src: IpAddr) -> Option<u32> {
    let st = dev.data();
    st.qps
        .lock()
        .get(qpn)
        .and_then(|t| t.peer_qpn_from(&st.planes, ndev, src))
}

fn answer_probe(
    dev: &MetaRoceIbDevice,
    st: &DeviceState,
    sock: &TunnelSock,
    ndev: &NetDevice,
    probe: &Probe,
    meta: &RxMeta,
) -> RxFate {
    let dst_qpn = match probe_reply_qpn(dev, ndev, probe.dst_qpn, meta.src) {
        Some(qpn) => qpn,
        None if st.probe_budget.lock().take(now_ns()) => 0,
        None => {
            st.counters.inc(Counter::RxProbesLimited);
            return RxFate::Dropped;
        }
    };
    let reply = Probe { dst_qpn, ..*probe };
    let sent = send(
        &st.counters,
        sock,
        ndev,
        &meta.reply_to(),
        wire::PROBE_LEN + wire::ICRC_LEN,
        |buf| reply.encode(true, buf).map_err(|_| EINVAL),
    );
    if sent.is_err() {
        // Counted as tx_errors.
        return RxFate::Dropped;
    }
    st.counters.inc(Counter::ProbesAnswered);
    RxFate::Consumed
}

/// Logs the last malformed packet once (called from process context when
/// the counters are read).
pub(crate) fn log_last_drop(dev: &MetaRoceIbDevice) {
    let Some(rec) = dev.data().last_drop.lock().take() else {
        return;
    };
    pr_info!(
        "{}: dropped malformed packet from {}:{} ({} bytes): {:?}\n",
        dev.name(),
        rec.from,
        rec.port,
        rec.len,
        rec.reason
    );
}
