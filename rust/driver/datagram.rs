// SPDX-License-Identifier: GPL-2.0

//! Datagrams: UD and GSI (QP1) queue pairs on the wire (protocol.md
//! section 5). A send work request becomes one UD_SEND packet (`rkey` =
//! Q_Key, `remote_va` = source QPN, `imm` = immediate data with the IMM
//! flag) to the IPv4 or IPv6 address of its address handle (on plane 0,
//! or while plane 0 has no carrier on a plane that has:
//! `Datagram::transmit`); no ACK, no retransmission. A received datagram
//! takes the next receive buffer of its QP (or SRQ): a 40-byte GRH area
//! first, which holds the IPv6 header as received, or over IPv4 the IPv4
//! header in bytes 20..40, addresses as on plane 0 ([`as_on_plane0`])
//! (RoCE v2, what `ib_init_ah_attr_from_wc` and `ibv_init_ah_from_wc`
//! read), then the payload.
//!
//! User QPs send when the process rings the doorbell. Kernel QPs (the MAD
//! layer's GSI QP) post from atomic context, often with interrupts disabled,
//! where the bh-safe locks and the UDP transmit path must not run: their
//! requests are sent from the device tick (at most a millisecond later).

use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use kernel::prelude::*;
use kernel::sync::Arc;

use super::limits::{MAX_AH, MAX_QP};
use super::mr::MrTable;
use super::peers::PeerDirectory;
use super::qpn;
use super::stats::Counter;
use super::transport::{gather_sges, now_ns, put_data_packet, scatter, Transport, TxCtx};
use super::tx::send_data;
use super::wqe::{self, Completion};
use crate::abi::opcode::{SendFlags, WcFlags};
use crate::engine::wire::{self, DataHeader, Opcode, Syndrome};
use crate::ib::ip::IpAddr;
use crate::ib::lock::{new_spinlock_bh, SpinLockBh};
use crate::ib::skb::{Ecn, GrhArea, Ipv4Addr, IPV4_HEADER_LEN};
use crate::ib::types::{WcOpcode, WcStatus, WrOpcode};
use crate::ib::udp::TxTo;
use crate::ib::verbs::AddressVector;

/// The Q_Key of the GSI QP (QP1), which every GSI datagram carries.
pub(crate) const GSI_QKEY: u32 = 0x8001_0000;

/// Bytes of the GRH area in front of every UD receive.
const GRH_LEN: usize = 40;

/// Q_Keys with this bit set in a work request mean "the QP's own Q_Key".
const QKEY_CONTROLLED: u32 = 0x8000_0000;

/// The destinations of address handles by AH number, for the send path.
/// Lock-free: kernel consumers create and destroy AHs in atomic context
/// (the CM with a spinlock held and interrupts disabled).
pub(crate) struct AhTable {
    slots: KVec<AhSlot>,
}

struct AhSlot {
    /// The AH's protection domain (0: free slot).
    pd: AtomicUsize,
    /// Source and destination address in GID form, 8 bytes a word (source
    /// first); all zero when the AH addresses no IP destination. Written
    /// before `pd` is published; an AH is not changed while a send uses it
    /// (the verbs' contract), so its words are read whole.
    addrs: [AtomicU64; 4],
}

impl AhTable {
    /// An empty table.
    pub(crate) fn new() -> Result<Self> {
        let mut slots = KVec::with_capacity(MAX_AH as usize, GFP_KERNEL)?;
        for _ in 0..MAX_AH {
            slots.push(
                AhSlot {
                    pd: AtomicUsize::new(0),
                    addrs: [const { AtomicU64::new(0) }; 4],
                },
                GFP_KERNEL,
            )?;
        }
        Ok(Self { slots })
    }

    /// AH `n` of PD `pd` sends to `av`.
    pub(crate) fn set(&self, n: u32, pd: usize, av: &AddressVector) {
        let Some(slot) = self.slots.get(n as usize) else {
            return;
        };
        // One family end to end (else no destination: sends complete in
        // error, as to an AH with no IP address).
        let (src, dst) = (IpAddr(av.sgid), IpAddr(av.dgid));
        let mut bytes = [0u8; 32];
        if src.family() == dst.family() && !dst.is_unspecified() {
            bytes[..16].copy_from_slice(&src.0);
            bytes[16..].copy_from_slice(&dst.0);
        }
        for (w, chunk) in slot.addrs.iter().zip(bytes.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            w.store(u64::from_ne_bytes(b), Ordering::Relaxed);
        }
        slot.pd.store(pd, Ordering::Release);
    }

    /// AH `n` is gone.
    pub(crate) fn clear(&self, n: u32) {
        if let Some(slot) = self.slots.get(n as usize) {
            slot.pd.store(0, Ordering::Release);
        }
    }

    /// (source, destination) of AH `n`, if it is an IP AH of PD `pd`.
    fn get(&self, n: u32, pd: usize) -> Option<(IpAddr, IpAddr)> {
        let slot = self.slots.get(n as usize)?;
        if pd == 0 || slot.pd.load(Ordering::Acquire) != pd {
            return None;
        }
        let mut bytes = [0u8; 32];
        for (w, chunk) in slot.addrs.iter().zip(bytes.chunks_exact_mut(8)) {
            chunk.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
        }
        let (mut src, mut dst) = ([0u8; 16], [0u8; 16]);
        src.copy_from_slice(&bytes[..16]);
        dst.copy_from_slice(&bytes[16..]);
        let (src, dst) = (IpAddr(src), IpAddr(dst));
        (!dst.is_unspecified()).then_some((src, dst))
    }
}

/// Send state of a datagram QP, changed under its lock.
struct Inner {
    /// The QP reached RTR: it sends.
    attached: bool,
    /// Largest datagram payload (the port's active MTU at RTR).
    mtu: u32,
    /// Numbers the QP's datagrams (`psn` and `msn` on the wire).
    next_psn: u32,
}

/// The datagram side of a UD or GSI QP.
pub(crate) struct Datagram {
    t: Arc<Transport>,
    gsi: bool,
    /// The QP's Q_Key (`modify_qp`).
    qkey: AtomicU32,
    inner: Pin<KBox<SpinLockBh<Inner>>>,
}

/// The datagram QPs that receive, by QP slot (`qpn::slot`: the numbers
/// from `FIRST_QPN` on, then QP1).
pub(crate) struct DatagramTable {
    slots: KVec<Option<Arc<Datagram>>>,
}

impl DatagramTable {
    /// An empty table.
    pub(crate) fn new() -> Result<Self> {
        let mut slots = KVec::with_capacity(MAX_QP as usize + 1, GFP_KERNEL)?;
        for _ in 0..=MAX_QP {
            slots.push(None, GFP_KERNEL)?;
        }
        Ok(Self { slots })
    }

    /// QP `qpn` receives datagrams from now on.
    pub(crate) fn insert(&mut self, qpn: u32, d: Arc<Datagram>) {
        if let Some(slot) = qpn::slot(qpn).and_then(|i| self.slots.get_mut(i)) {
            *slot = Some(d);
        }
    }

    /// QP `qpn` no longer receives or sends.
    pub(crate) fn remove(&mut self, qpn: u32) -> Option<Arc<Datagram>> {
        self.slots
            .get_mut(qpn::slot(qpn)?)?
            .take_if(|d| d.t.qpn == qpn)
    }

    /// The datagram QP `qpn` (the whole number must match, `qpn.rs`).
    fn get(&self, qpn: u32) -> Option<&Arc<Datagram>> {
        self.slots
            .get(qpn::slot(qpn)?)?
            .as_ref()
            .filter(|d| d.t.qpn == qpn)
    }
}

impl Datagram {
    /// The datagram side of QP `t` (`gsi`: QP1).
    pub(crate) fn new(t: Arc<Transport>, gsi: bool) -> Result<Arc<Self>> {
        let inner = Inner {
            attached: false,
            mtu: 256,
            next_psn: 0,
        };
        Ok(Arc::new(
            Self {
                t,
                gsi,
                qkey: AtomicU32::new(if gsi { GSI_QKEY } else { 0 }),
                inner: KBox::pin_init(new_spinlock_bh!(inner, "metaroce_datagram"), GFP_KERNEL)?,
            },
            GFP_KERNEL,
        )?)
    }

    /// `modify_qp` set the Q_Key.
    pub(crate) fn set_qkey(&self, qkey: u32) {
        self.qkey.store(qkey, Ordering::Relaxed);
    }

    /// RTR: datagrams go out from now on, payloads up to `mtu` bytes.
    pub(crate) fn attach(&self, mtu: u32) {
        let mut i = self.inner.lock();
        i.attached = true;
        i.mtu = mtu;
    }

    /// The QP went to the error state: flushes its work requests, serialised
    /// with the send path.
    pub(crate) fn flush(&self) {
        {
            let _i = self.inner.lock();
            self.t.flush_quietly();
        }
        self.t.deliver_cq_events();
    }

    /// Whether the QP belongs to a kernel consumer.
    fn is_kernel(&self) -> bool {
        self.t.local.kernel.is_some()
    }

    /// Sends the send ring's new requests, one datagram each, and completes
    /// them. Process context (user doorbell) or softirq (the tick).
    ///
    /// At most one ring's worth per call; indices more than a ring apart
    /// (written by the process) put the QP in the error state: `EIO`.
    pub(crate) fn send_queued(&self, tx: &TxCtx<'_>, ahs: &AhTable) -> Result {
        let sent = self.send_queued_locked(tx, ahs, &mut self.inner.lock());
        self.t.deliver_cq_events();
        sent
    }

    fn send_queued_locked(&self, tx: &TxCtx<'_>, ahs: &AhTable, i: &mut Inner) -> Result {
        if !i.attached {
            return Ok(());
        }
        let sq = &self.t.sq;
        let mut cons = sq.consumer();
        let Some(pending) = sq.pending_from(cons) else {
            pr_warn!(
                "QP {}: send ring indices corrupted by the process; QP in error\n",
                self.t.qpn
            );
            self.t.flush_quietly();
            return Err(EIO);
        };
        for _ in 0..pending {
            let status = self.send_one(tx, ahs, i, cons);
            cons = cons.wrapping_add(1);
            sq.set_consumer(cons);
            if status.is_err() {
                // CQ overrun: the QP is in error too.
                self.t.flush_quietly();
                break;
            }
        }
        Ok(())
    }

    /// Sends request `index` of the send ring and completes it; `Err` when
    /// the completion queue overflowed.
    fn send_one(&self, tx: &TxCtx<'_>, ahs: &AhTable, i: &mut Inner, index: u32) -> Result {
        let t = &*self.t;
        let (status, wr_id, len, signaled) = match wqe::get_send(&t.sq, index) {
            Err(_) => (WcStatus::LocQpOpErr, 0, 0, true),
            Ok(req) => {
                let signaled = t.sq_sig_all || req.send_flags & SendFlags::SIGNALED != 0;
                let len = u32::try_from(req.len()).unwrap_or(u32::MAX);
                // The `ud` member of the WQE's `wr` union: remote QPN and
                // Q_Key where `remote_addr` sits, the AH number at `rkey`.
                let ud = req.remote_addr.to_ne_bytes();
                let qpn = u32::from_ne_bytes([ud[0], ud[1], ud[2], ud[3]]) & 0xff_ffff;
                let mut qkey = u32::from_ne_bytes([ud[4], ud[5], ud[6], ud[7]]);
                if qkey & QKEY_CONTROLLED != 0 {
                    qkey = self.qkey.load(Ordering::Relaxed);
                }
                let with_imm = req.wr_opcode() == Some(WrOpcode::SendWithImm);
                let status = if req.wr_opcode() != Some(WrOpcode::Send) && !with_imm {
                    WcStatus::LocQpOpErr
                } else if len > i.mtu || len as usize > wire::MAX_PAYLOAD {
                    WcStatus::LocLenErr
                } else {
                    match ahs.get(req.rkey, t.local.pd) {
                        None => WcStatus::LocQpOpErr,
                        Some((src, dst)) => {
                            let psn = i.next_psn;
                            i.next_psn = psn.wrapping_add(1);
                            let h = DataHeader {
                                opcode: Opcode::UdSend,
                                flags: if with_imm { wire::FLAG_IMM } else { 0 },
                                dst_qpn: qpn,
                                path_id: 0,
                                floor_delta: 0,
                                psn,
                                msn: psn,
                                offset: 0,
                                msg_len: len,
                                payload_len: len as u16,
                                rsn: 0,
                                remote_va: u64::from(t.qpn),
                                rkey: qkey,
                                imm: if with_imm { u32::from_be(req.ex) } else { 0 },
                                timestamp: now_ns(),
                            };
                            // Any entropy will do: vary the port per datagram.
                            let src_port = 0xc000
                                | ((t.qpn.wrapping_mul(0x9e37_79b1)
                                    ^ psn.wrapping_mul(0x85eb_ca6b))
                                    >> 18) as u16;
                            self.transmit(tx, src, dst, src_port, &h, &req)
                        }
                    }
                };
                (status, req.wr_id, len, signaled)
            }
        };
        if !signaled && status == WcStatus::Success {
            return Ok(());
        }
        let wc = Completion {
            byte_len: len,
            ..Completion::new(wr_id, status, WcOpcode::Send, t.qpn)
        };
        t.send_cq.data().push(&t.send_cq, &wc, t.qp_addr, false)
    }

    /// Puts one datagram from `src` to `dst` (the AH's plane-0 addresses)
    /// on the wire, on a plane that has carrier (protocol.md 5): plane 0,
    /// or while it has none another plane where the device knows the
    /// peer's address (`peers.rs`). A peer it knows nothing of is sent to
    /// on plane 0 all the same. Returns the work request's status.
    fn transmit(
        &self,
        tx: &TxCtx<'_>,
        src: IpAddr,
        dst: IpAddr,
        src_port: u16,
        h: &DataHeader,
        req: &wqe::SendReq,
    ) -> WcStatus {
        let known = tx.peers.lock().get(dst);
        let planes = tx.planes.lock();
        let Some((ndev, src, dst)) = planes.live_route(src, dst, |k| known?.addr(k)) else {
            // No plane 0 (the device is going away): lost like on the wire.
            return WcStatus::Success;
        };
        let to = TxTo {
            src,
            dst,
            src_port,
            ecn: Ecn::Ect0,
        };
        let n = h.payload_len as usize;
        let len = wire::DATA_HEADER_LEN + n + wire::ICRC_LEN;
        let mut unreadable = false;
        let sent = send_data(tx.counters, tx.sock, ndev, &to, len, None, |buf| {
            put_data_packet(buf, h, |body| {
                let read = if req.is_inline {
                    body.put(req.inline.get(..n).ok_or(EINVAL)?)
                } else {
                    gather_sges(
                        &req.sges[..req.num_sge],
                        0,
                        n,
                        body,
                        &tx.mrs.lock(),
                        &self.t.local,
                    )
                };
                if read.is_err() {
                    unreadable = true;
                    return Err(EFAULT);
                }
                Ok(())
            })
        });
        if unreadable {
            return WcStatus::LocProtErr;
        }
        if sent.is_ok() {
            tx.counters.inc(Counter::UdTxPackets);
        }
        // A datagram lost on the way out is lost like one on the wire.
        WcStatus::Success
    }

    /// Places a received datagram into the next receive buffer and
    /// completes it. Returns whether it was delivered.
    fn receive(&self, tx: &TxCtx<'_>, h: &DataHeader, payload: &[u8], grh: &GrhArea) -> bool {
        let want = if self.gsi {
            GSI_QKEY
        } else {
            self.qkey.load(Ordering::Relaxed)
        };
        if h.rkey != want {
            return false;
        }
        let delivered = {
            let _i = self.inner.lock();
            self.receive_locked(tx, payload, grh, h)
        };
        self.t.deliver_cq_events();
        delivered
    }

    /// [`Datagram::receive`] under the QP's lock.
    fn receive_locked(
        &self,
        tx: &TxCtx<'_>,
        payload: &[u8],
        grh: &GrhArea,
        h: &DataHeader,
    ) -> bool {
        let t = &*self.t;
        // In error (its CQ overran, or the process corrupted its ring) the
        // QP takes nothing more, though it stays reachable until RESET.
        if t.failed() {
            tx.counters.inc(Counter::RxQpInError);
            return false;
        }
        // The receive: the QP's next one, or one taken from its SRQ (which
        // other QPs take from too). None posted: the datagram is dropped.
        let (w, own_index) = match (&t.srq, &t.rq) {
            (Some(srq), _) => match srq.data().take() {
                Some(w) => (w, None),
                None => return false,
            },
            (None, Some(rq)) => {
                let cons = rq.consumer();
                if cons == rq.producer() {
                    return false;
                }
                let w = wqe::get_recv(rq, cons)
                    .unwrap_or_else(|_| wqe::RecvWqe::without_buffer(wqe::recv_wr_id(rq, cons)));
                (w, Some(cons))
            }
            (None, None) => return false,
        };
        let (wr_id, placed) = (
            w.wr_id,
            place(&w.sges[..w.num_sge], grh, payload, &tx.mrs.lock(), t),
        );
        let status = match placed {
            Ok(()) => WcStatus::Success,
            Err(Syndrome::InvalidRequest) => WcStatus::LocLenErr,
            Err(_) => WcStatus::LocProtErr,
        };
        let with_imm = h.flags & wire::FLAG_IMM != 0;
        let wc = Completion {
            byte_len: (GRH_LEN + payload.len()) as u32,
            // The parser holds it to 24 bits.
            src_qp: h.remote_va as u32,
            ex: if with_imm { h.imm.to_be() } else { 0 },
            wc_flags: WcFlags::GRH
                | if with_imm { WcFlags::WITH_IMM } else { 0 }
                | if grh[0] >> 4 == 6 {
                    WcFlags::GRH_IPV6
                } else {
                    0
                },
            ..Completion::new(wr_id, status, WcOpcode::Recv, t.qpn)
        };
        if t.recv_cq
            .data()
            .push(&t.recv_cq, &wc, t.qp_addr, false)
            .is_err()
        {
            // CQ overrun: the QP is in error too.
            t.flush_quietly();
            return false;
        }
        if let (Some(rq), Some(cons)) = (&t.rq, own_index) {
            rq.set_consumer(cons.wrapping_add(1));
        }
        status == WcStatus::Success
    }
}

/// Writes the GRH area and the payload into a receive buffer.
fn place(
    sges: &[wqe::Sge],
    grh: &GrhArea,
    payload: &[u8],
    mrs: &MrTable,
    t: &Transport,
) -> core::result::Result<(), Syndrome> {
    let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
    if total < (GRH_LEN + payload.len()) as u64 {
        return Err(Syndrome::InvalidRequest);
    }
    scatter(sges, 0, grh, mrs, &t.local)?;
    scatter(sges, GRH_LEN, payload, mrs, &t.local)
}

/// The GRH area of a datagram that arrived on plane `k`, rewritten as if
/// it had come on plane 0 (protocol.md 5): the sender's plane-0 address as
/// source and ours, as that sender knows it, as destination (for IPv4 the
/// header checksum recomputed; an IPv6 header has none). The GRH area then
/// names addresses of the port's GID table, so a reply built from it
/// (`ib_init_ah_attr_from_wc`, `ibv_init_ah_from_wc`, the CM) is valid and
/// goes where the device knows the sender. A sender the directory does not
/// know (`peers.rs`), or plane 0 itself, leaves the header as received.
pub(crate) fn as_on_plane0(grh: &mut GrhArea, k: u8, peers: &SpinLockBh<PeerDirectory>) {
    if grh[0] >> 4 == 6 {
        // IPv6: source at bytes 8..24, destination at 24..40.
        let mut src = [0u8; 16];
        src.copy_from_slice(&grh[8..24]);
        let Some(peer) = peers.lock().by_plane_addr(k, IpAddr(src)) else {
            return;
        };
        let Some(remote) = peer.addr(0) else { return };
        grh[8..24].copy_from_slice(&remote.0);
        grh[24..40].copy_from_slice(&peer.local.0);
        return;
    }
    // IPv4: the header in the last 20 bytes.
    let Some(ip) = grh.last_chunk_mut::<IPV4_HEADER_LEN>() else {
        return;
    };
    let src = Ipv4Addr([ip[12], ip[13], ip[14], ip[15]]);
    let Some(peer) = peers.lock().by_plane_addr(k, src.into()) else {
        return;
    };
    let (Some(remote), Some(local)) = (peer.addr(0).and_then(|a| a.v4()), peer.local.v4()) else {
        return;
    };
    ip[12..16].copy_from_slice(&remote.0);
    ip[16..20].copy_from_slice(&local.0);
    ip[10..12].fill(0);
    let sum = ip.chunks_exact(2).fold(0u32, |acc, w| {
        acc + u32::from(u16::from_be_bytes([w[0], w[1]]))
    });
    let folded = (sum & 0xffff) + (sum >> 16);
    let folded = (folded & 0xffff) + (folded >> 16);
    ip[10..12].copy_from_slice(&(!(folded as u16)).to_be_bytes());
}

/// A UD_SEND packet arrived (receive softirq): hands it to its QP in `uds`.
/// Returns whether it was delivered; counts it either way.
pub(crate) fn receive(
    uds: &SpinLockBh<DatagramTable>,
    tx: &TxCtx<'_>,
    h: &DataHeader,
    payload: &[u8],
    grh: Option<&GrhArea>,
) -> bool {
    let delivered = match grh {
        // The table's lock is held through the QP's work: see
        // `deliver` in net.rs.
        Some(grh) => uds
            .lock()
            .get(h.dst_qpn)
            .is_some_and(|d| d.receive(tx, h, payload, grh)),
        None => false,
    };
    tx.counters.inc(if delivered {
        Counter::UdRxPackets
    } else {
        Counter::UdRxDropped
    });
    delivered
}

/// The device tick's visit of QP slot `slot` (`qpn::slot`), marked by a
/// kernel datagram QP that posted: sends what it posted since.
pub(crate) fn tick(uds: &SpinLockBh<DatagramTable>, slot: usize, tx: &TxCtx<'_>, ahs: &AhTable) {
    let uds = uds.lock();
    let Some(d) = uds.slots.get(slot).and_then(Option::as_ref) else {
        return;
    };
    if d.is_kernel() && d.t.sq.producer() != d.t.sq.consumer() {
        // A failure was logged and put the QP in error; nobody to tell.
        d.send_queued(tx, ahs).ok();
    }
}
