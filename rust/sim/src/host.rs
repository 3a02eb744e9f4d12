//! One host's end of a connected QP: the engine's `Sender` and `Receiver`
//! with the rules protocol.md gives the layer above them, as the reference
//! driver (rust/driver/transport.rs, net.rs) applies them:
//!
//! * placement is checked by the verbs layer ([`Verbs::place`]); a refusal
//!   fails the message (`Receiver::fail_message`) and its NAK goes out
//!   before the packet's ACK (3.2); an ACK that moves `cum_msn` goes once,
//!   like any other (3.4: the copy a destroyed QP sends again has no
//!   counterpart here, where QPs outlive the run);
//! * ACKs are coalesced as the receiver decides (`Receiver::ack_now`,
//!   3.4); what waits is flushed by the timer, to where its path's last
//!   packet came from;
//! * a READ_REQ or atomic request, when it completes, is answered by a
//!   READ_RESP / ATOMIC_RESP message of our own send stream (5, 5.1);
//! * PROBEs are answered with the peer's QPN when they come from the
//!   peer's address on their plane, else with QPN 0 (1.6);
//! * packets other than PROBEs are taken only from the peer's address on
//!   their plane, PLANES only from its plane-0 address (3);
//! * the PLANES exchange (1.8): planes other than 0 are drained until both
//!   ends hold each other's list;
//! * a failed message puts the QP in error: it then answers only a data
//!   packet of the message that failed here, with its NAK (3.2).
//!
//! The duplex simulator and replay drive a `Host` through the same four
//! calls (`post`, `ingress`, `pull`, `timer`), so that replaying a capture
//! repeats the engine calls of the run that wrote it.

use std::collections::{HashMap, VecDeque};

use metaroce_engine::completion::{CompletionStatus, RxCompletion, TxCompletion};
use metaroce_engine::config::{ConfigError, ReceiverConfig, SenderConfig};
use metaroce_engine::receiver::{DropReason, Placement, Receiver, RxVerdict};
use metaroce_engine::sender::{Message, PostError, Sender, TxKind};
use metaroce_engine::wire::{
    parse_packet, DataHeader, Nak, Opcode, Packet, Planes, Syndrome, WireError, ATOMIC_LEN,
    MAX_PLANES, UDP_PORT,
};

/// Bytes of the largest packet (header, 8 KiB payload, ICRC).
const SCRATCH: usize = 8400;
/// First and longest interval between repeated PLANES packets (the
/// driver's, rust/driver/plane.rs).
const PLANES_RETRY_MIN_NS: u64 = 1_000_000;
const PLANES_RETRY_MAX_NS: u64 = 100_000_000;

/// What one end of the connection was set up with (out of band, as
/// rdma_cm would).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostConfig {
    /// Our QP number.
    pub qpn: u32,
    /// The peer's QP number.
    pub peer_qpn: u32,
    /// Payload MTU of the connection.
    pub mtu: u32,
    /// Our address on each plane (index = plane; at least one).
    pub addrs: Vec<[u8; 4]>,
    /// The peer's plane-0 address, the one the QP was connected to.
    pub peer: [u8; 4],
    /// Initial PSN of our messages (`sq_psn`).
    pub sq_psn: u32,
    /// Initial PSN of the peer's messages (`rq_psn`).
    pub rq_psn: u32,
    /// Messages our receiver accepts and advertises
    /// (`Receiver::set_msg_window`, protocol.md 1.4).
    pub msg_window: usize,
}

/// The engine configuration of a host's sender: the defaults, with the
/// reference driver's entropy seed (`qpn ^ 0x5eed`, transport.rs `connect`),
/// and whole windows before the first ACK (`first_flight` 0): the golden
/// captures and the rig captures replayed here (tests/replay.rs) were
/// taken so, each showing one thing from its first frame; the first-flight
/// cap is the fabric simulator's to show (`scenarios::rig_incast`).
pub fn sender_config(cfg: &HostConfig) -> SenderConfig {
    SenderConfig {
        dst_qpn: cfg.peer_qpn,
        mtu: cfg.mtu,
        planes: cfg.addrs.len().clamp(1, MAX_PLANES) as u8,
        entropy_seed: cfg.qpn ^ 0x5eed,
        first_flight: 0,
        ..SenderConfig::DEFAULT
    }
}

/// The verbs layer's part of receiving: memory, keys, work requests.
pub trait Verbs {
    /// Place one packet the receiver accepted; an error fails its message.
    fn place(&mut self, p: &Placement, h: &DataHeader, payload: &[u8]) -> Result<(), Syndrome>;
    /// A message of the peer completed here, in MSN order, exactly once
    /// (an atomic request executes now, 5.1).
    fn received(&mut self, c: &RxCompletion);
    /// One of our messages completed.
    fn sent(&mut self, c: &TxCompletion);
}

/// Why the host took no action on an arriving packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// `wire::parse_packet` refused it.
    Parse(WireError),
    /// The receiver refused a data packet (no ACK).
    Receiver(DropReason),
    /// Not from the peer's address on its plane (`rx_not_peer`).
    NotPeer,
    /// The QP is in error (`rx_qp_in_error`); a packet of the failed
    /// message was answered with its NAK.
    QpInError,
}

/// A packet to transmit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Out {
    /// Plane (NIC port).
    pub plane: u8,
    /// UDP source port.
    pub src_port: u16,
    /// IPv4 destination.
    pub dst: [u8; 4],
    /// Content.
    pub pkt: OutPkt,
}

/// Content of an [`Out`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutPkt {
    /// A data packet; the verbs layer attaches the payload.
    Data(DataHeader),
    /// A complete control packet (ACK, NAK, PROBE, PROBE_REPLY, PLANES).
    Control(Vec<u8>),
}

/// The PLANES exchange (protocol.md 1.8), as rust/driver/plane.rs keeps it.
#[derive(Clone, Debug)]
struct PeerPlanes {
    addrs: [Option<[u8; 4]>; MAX_PLANES],
    /// We hold the peer's list.
    known: bool,
    /// The peer said it holds ours.
    acked: bool,
    next_ns: u64,
    interval_ns: u64,
}

impl PeerPlanes {
    fn new(peer: [u8; 4], now: u64) -> Self {
        let mut addrs = [None; MAX_PLANES];
        addrs[0] = Some(peer);
        Self {
            addrs,
            known: false,
            acked: false,
            next_ns: now,
            interval_ns: PLANES_RETRY_MIN_NS,
        }
    }

    fn addr(&self, k: u8) -> Option<[u8; 4]> {
        self.addrs.get(usize::from(k)).copied().flatten()
    }

    /// Takes the peer's list; whether it was new.
    fn learn(&mut self, pl: &Planes) -> bool {
        for k in 1..MAX_PLANES {
            let a = pl.addrs[k];
            let v4 = a[..10] == [0; 10] && a[10..12] == [0xff, 0xff] && a[12..] != [0; 4];
            self.addrs[k] = (k < usize::from(pl.count) && v4).then(|| [a[12], a[13], a[14], a[15]]);
        }
        !std::mem::replace(&mut self.known, true)
    }
}

/// An IPv4 address as a GID (`::ffff:a.b.c.d`).
fn gid(a: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&a);
    g
}

/// One end of the connection.
pub struct Host<V: Verbs> {
    cfg: HostConfig,
    tx: Box<Sender>,
    rx: Box<Receiver>,
    /// The verbs layer (memory, work requests).
    pub verbs: V,
    planes: PeerPlanes,
    /// Control packets waiting for each plane's port (they go before data).
    ctrl: Vec<VecDeque<Out>>,
    /// READ/atomic responses waiting for the message window.
    answers: VecDeque<Message>,
    failed: bool,
    /// Packets taken no action on, with their arrival time.
    pub drops: Vec<(u64, Dropped)>,
    /// Where each path's ACKs go: the plane, source address and UDP source
    /// port of its last data packet.
    ack_routes: HashMap<u16, (u8, [u8; 4], u16)>,
    scratch: Vec<u8>,
}

impl<V: Verbs> Host<V> {
    /// Both ends are connected at `now` and reached RTS (their own initial
    /// PSN known); planes other than 0 wait for the PLANES exchange.
    pub fn new(cfg: HostConfig, verbs: V, now: u64) -> Result<Self, ConfigError> {
        let scfg = sender_config(&cfg);
        let mut tx = Box::new(Sender::new(scfg, now)?);
        for k in 1..scfg.planes {
            tx.plane_down(k, now);
        }
        tx.start_at(cfg.sq_psn, false);
        let mut rx = Box::new(Receiver::new(ReceiverConfig {
            peer_qpn: cfg.peer_qpn,
            mtu: cfg.mtu,
        })?);
        rx.set_msg_window(cfg.msg_window);
        rx.start_at(cfg.rq_psn);
        rx.own_start(cfg.sq_psn);
        Ok(Self {
            planes: PeerPlanes::new(cfg.peer, now),
            ctrl: vec![VecDeque::new(); usize::from(scfg.planes)],
            cfg,
            tx,
            rx,
            verbs,
            answers: VecDeque::new(),
            failed: false,
            drops: Vec::new(),
            ack_routes: HashMap::new(),
            scratch: vec![0; SCRATCH],
        })
    }

    /// The connection setup.
    pub fn config(&self) -> &HostConfig {
        &self.cfg
    }

    /// The engine's sender.
    pub fn sender(&self) -> &Sender {
        &self.tx
    }

    /// The engine's receiver.
    pub fn receiver(&self) -> &Receiver {
        &self.rx
    }

    /// The QP is in error (a message failed at either end).
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// Planes of this host.
    pub fn planes(&self) -> u8 {
        self.ctrl.len() as u8
    }

    /// Post a work request of ours; returns its MSN.
    pub fn post(&mut self, m: &Message) -> Result<u32, PostError> {
        self.tx.post(m)
    }

    fn queue(&mut self, plane: u8, src_port: u16, dst: [u8; 4], n: usize) {
        let bytes = self.scratch[..n].to_vec();
        if let Some(q) = self.ctrl.get_mut(usize::from(plane)) {
            q.push_back(Out {
                plane,
                src_port,
                dst,
                pkt: OutPkt::Control(bytes),
            });
        }
    }

    fn queue_nak(&mut self, nak: &Nak, plane: u8, src: [u8; 4], port: u16) {
        if let Ok(n) = nak.encode(&mut self.scratch) {
            self.queue(plane, port, src, n);
        }
    }

    /// Whether a packet from `src` on `plane` is the peer's (3).
    fn is_peer(&self, plane: u8, src: [u8; 4], planes_pkt: bool) -> bool {
        let plane = if planes_pkt { 0 } else { plane };
        self.planes.addr(plane) == Some(src)
    }

    /// A packet arrived on `plane` from `src`:`src_port` (`ce`: IP ECN-CE).
    pub fn ingress(
        &mut self,
        now: u64,
        plane: u8,
        src: [u8; 4],
        src_port: u16,
        bytes: &[u8],
        ce: bool,
    ) {
        let pkt = match parse_packet(bytes) {
            Ok(p) => p,
            Err(e) => return self.drops.push((now, Dropped::Parse(e))),
        };
        // PROBEs are the device's (rust/driver/net.rs), whatever the QP's state.
        if let Packet::Probe(p) = pkt {
            let mut reply = self.rx.on_probe(&p);
            if !self.is_peer(plane, src, false) {
                reply.dst_qpn = 0;
            }
            if let Ok(n) = reply.encode(true, &mut self.scratch) {
                self.queue(plane, src_port, src, n);
            }
            return;
        }
        let peer = self.is_peer(plane, src, matches!(pkt, Packet::Planes(_)));
        if self.failed {
            if let (Packet::Data { header, .. }, true) = (&pkt, peer) {
                if let Some(nak) = self.rx.nak_again(header) {
                    self.queue_nak(&nak, plane, src, src_port);
                }
            }
            return self.drops.push((now, Dropped::QpInError));
        }
        if !peer {
            return self.drops.push((now, Dropped::NotPeer));
        }
        match pkt {
            Packet::Data { header, payload } => {
                self.data(now, plane, src, src_port, &header, payload, ce)
            }
            Packet::Ack(a) => {
                self.tx.on_ack(&a, now);
                self.after_progress();
            }
            Packet::Nak(n) => {
                self.tx.on_nak(&n);
                self.after_progress();
            }
            Packet::ProbeReply(p) => self.tx.on_probe_reply(&p, now),
            Packet::Planes(pl) => self.receive_planes(&pl, now),
            Packet::Probe(_) => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn data(
        &mut self,
        now: u64,
        plane: u8,
        src: [u8; 4],
        port: u16,
        h: &DataHeader,
        payload: &[u8],
        ce: bool,
    ) {
        match self.rx.on_data(h, ce, now) {
            RxVerdict::Place(p) => {
                if let Err(s) = self.verbs.place(&p, h, payload) {
                    self.rx.fail_message(p.msn, s, h.path_id, h.psn);
                }
            }
            RxVerdict::Duplicate | RxVerdict::Discard => {}
            RxVerdict::Drop(r) => return self.drops.push((now, Dropped::Receiver(r))),
        }
        // The NAK first: the requester fails the message at once (3.2).
        while let Some(nak) = self.rx.pop_nak() {
            self.queue_nak(&nak, plane, src, port);
        }
        self.ack_routes.insert(h.path_id, (plane, src, port));
        if let Some(ack) = self.rx.ack_now(h.path_id) {
            if let Ok(n) = ack.encode(&mut self.scratch) {
                self.queue(plane, port, src, n);
            }
        }
        self.complete_receives();
    }

    /// Completions of the peer's messages, in MSN order: requests get
    /// their response message; a failed message puts the QP in error.
    fn complete_receives(&mut self) {
        while let Some(c) = self.rx.pop_completion() {
            self.verbs.received(&c);
            if c.status != CompletionStatus::Success {
                self.failed = true;
                continue;
            }
            let (opcode, len) = match c.opcode {
                Opcode::ReadReq => (Opcode::ReadResp, c.len),
                Opcode::CmpSwap | Opcode::FetchAdd | Opcode::AtomicWrite => {
                    (Opcode::AtomicResp, ATOMIC_LEN)
                }
                _ => continue,
            };
            self.answers.push_back(Message {
                opcode,
                len,
                remote_va: 0,
                rkey: 0,
                imm: c.msn,
                rsn: 0,
            });
        }
        self.post_answers();
    }

    fn post_answers(&mut self) {
        while let Some(m) = self.answers.front() {
            if self.failed || self.tx.post(m).is_err() {
                return;
            }
            self.answers.pop_front();
        }
    }

    /// Completions of our messages (in MSN order).
    fn after_progress(&mut self) {
        while let Some(c) = self.tx.pop_completion() {
            self.verbs.sent(&c);
            if c.status != CompletionStatus::Success {
                self.failed = true;
            }
        }
        self.post_answers();
    }

    fn send_planes(&mut self) {
        let mut addrs = [[0u8; 16]; MAX_PLANES];
        for (a, &ip) in addrs.iter_mut().zip(&self.cfg.addrs) {
            *a = gid(ip);
        }
        let pl = Planes {
            dst_qpn: self.cfg.peer_qpn,
            src_qpn: self.cfg.qpn,
            known: self.planes.known,
            confirm: !self.planes.acked,
            count: self.planes(),
            // The simulated hosts segment at the path MTU: they advertise
            // no wider payload (protocol.md 1.8), so the captures keep
            // the bytes they had.
            max_payload: 0,
            addrs,
        };
        if let Ok(n) = pl.encode(&mut self.scratch) {
            self.queue(0, UDP_PORT, self.cfg.peer, n);
        }
    }

    fn plane_usable(&self, k: u8) -> bool {
        (k == 0 || (self.planes.known && self.planes.acked)) && self.planes.addr(k).is_some()
    }

    fn receive_planes(&mut self, pl: &Planes, now: u64) {
        if pl.src_qpn != self.cfg.peer_qpn {
            return;
        }
        let confirmed = self.planes.acked;
        if pl.known {
            self.planes.acked = true;
        }
        if self.planes.learn(pl) || confirmed != self.planes.acked {
            for k in 1..self.planes() {
                if self.plane_usable(k) {
                    self.tx.plane_up(k, now);
                }
            }
        }
        if !pl.known || pl.confirm {
            self.send_planes();
        }
    }

    /// The next packet for `plane`'s port: control packets first, then the
    /// sender's (nothing from the sender once the QP is in error).
    pub fn pull(&mut self, now: u64, plane: u8) -> Option<Out> {
        if let Some(o) = self.ctrl.get_mut(usize::from(plane))?.pop_front() {
            return Some(o);
        }
        if self.failed {
            return None;
        }
        let tp = self.tx.next_packet_on_plane(now, plane)?;
        let dst = self.planes.addr(tp.plane).unwrap_or(self.cfg.peer);
        let pkt = match tp.kind {
            TxKind::Data { header, .. } => OutPkt::Data(header),
            TxKind::Probe(p) => {
                let n = p.encode(false, &mut self.scratch).ok()?;
                OutPkt::Control(self.scratch[..n].to_vec())
            }
        };
        Some(Out {
            plane: tp.plane,
            src_port: tp.src_port,
            dst,
            pkt,
        })
    }

    /// Earliest time `timer` has work: the engine's timers, ACKs that
    /// wait, our PLANES repetition.
    pub fn next_deadline(&self) -> Option<u64> {
        if self.failed {
            return None;
        }
        let planes = (self.planes() > 1 && !self.planes.acked).then_some(self.planes.next_ns);
        [self.tx.next_deadline(), self.rx.ack_deadline(), planes]
            .into_iter()
            .flatten()
            .min()
    }

    /// Run what is due at `now` (call when `next_deadline() <= now`).
    pub fn timer(&mut self, now: u64) {
        if self.failed {
            return;
        }
        if self.tx.next_deadline().is_some_and(|d| d <= now) {
            self.tx.on_timer(now);
            self.after_progress();
        }
        while let Some(ack) = self.rx.flush(now) {
            let route = self.ack_routes.get(&ack.path_id).copied();
            if let (Some((plane, src, port)), Ok(n)) = (route, ack.encode(&mut self.scratch)) {
                self.queue(plane, port, src, n);
            }
        }
        if self.planes() > 1 && !self.planes.acked && now >= self.planes.next_ns {
            self.planes.next_ns = now + self.planes.interval_ns;
            self.planes.interval_ns = (self.planes.interval_ns * 2).min(PLANES_RETRY_MAX_NS);
            self.send_planes();
        }
    }

    /// Control packets still queued (replay: what the engine would still
    /// have sent).
    pub fn take_control(&mut self) -> Vec<Out> {
        self.ctrl.iter_mut().flat_map(|q| q.drain(..)).collect()
    }
}
