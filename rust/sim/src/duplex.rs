//! Two hosts, one connected QP, every packet whole and captured.
//!
//! Host A (the requester) posts a scenario's work requests; host B (the
//! responder) holds a memory region and answers READs and atomics. Each
//! [`Host`] is the engine plus the driver's rules (host.rs). Every packet is
//! a complete MetaRoCE packet (header, payload, ICRC) and goes through a
//! host port (one per plane, control packets before data), then one of the
//! plane's ECMP links of its direction, picked by the UDP source port, with
//! rate, FIFO queue and its own propagation delay. Scripted faults drop,
//! delay or duplicate chosen packets; a link can fail; optional random
//! loss uses the seeded PRNG. Each host has a capture tap on its ports:
//! what it sends, at the time its port starts sending it, and what it
//! receives, at arrival, in the order the host handled them.
//!
//! Events at the same time run timers first, then arrivals and posts, then
//! ports: replay (replay.rs) relies on that order.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use metaroce_engine::completion::{CompletionStatus, RxCompletion, TxCompletion};
use metaroce_engine::config::MSG_WINDOW_MAX;
use metaroce_engine::path::entropy_port;
use metaroce_engine::receiver::Placement;
use metaroce_engine::sender::Message;
use metaroce_engine::wire::{
    encode_data_packet, DataHeader, Opcode, Packet, Syndrome, ATOMIC_CMP_SWAP_LEN, ATOMIC_LEN,
    DATA_HEADER_LEN, ICRC_LEN, UDP_PORT,
};

use super::host::{Dropped, Host, HostConfig, OutPkt, Verbs};
use super::pcap::Frame;
use super::rng::Rng;

/// The two hosts.
pub const A: usize = 0;
/// The responder.
pub const B: usize = 1;
/// IP ECN ECT(0), on every packet (protocol.md 1).
const ECT0: u8 = 2;
/// Ethernet + IPv4 + UDP + FCS bytes around a MetaRoCE packet.
const FRAME_OVERHEAD: usize = 14 + 20 + 8 + 4;
/// Base of host B's memory region.
pub const REGION_VA: u64 = 0x7f00_0000_0000;
/// Size of host B's memory region.
pub const REGION_LEN: usize = 64 * 1024;
/// Events after which a run stops whatever its state (a guard).
const MAX_EVENTS: u64 = 10_000_000;
/// Initial value of the 8 bytes at the start of the region (the atomics'
/// target), little-endian ("native" order of the simulated hosts).
pub const ATOMIC_INIT: u64 = 100;

/// Host `h`'s address on plane `p`: 198.18.p.(h+1) (RFC 2544 test range).
pub fn addr(h: usize, p: u8) -> [u8; 4] {
    [198, 18, p, h as u8 + 1]
}

/// Host `h`'s NIC on plane `p`.
pub fn host_mac(h: usize, p: u8) -> [u8; 6] {
    [2, 0, 0, 0, h as u8 + 1, p]
}

/// The router every host port is attached to, on plane `p`. A frame to it
/// is one the capturing host sent; a frame from it one it received.
pub fn router_mac(p: u8) -> [u8; 6] {
    [2, 0, 0, 0, 0xfe, p]
}

/// Whether `mac` is a simulated router port.
pub fn is_router(mac: &[u8; 6]) -> bool {
    mac[..5] == [2, 0, 0, 0, 0xfe]
}

/// One work request of host A.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// RDMA WRITE of `len` bytes at `off` in B's region; `bad_key` uses a
    /// key B does not know (NAK RemoteAccess).
    Write {
        /// Bytes.
        len: u32,
        /// Offset in the region.
        off: u32,
        /// Use a wrong rkey.
        bad_key: bool,
    },
    /// SEND of `len` bytes (B has receives posted).
    Send {
        /// Bytes.
        len: u32,
    },
    /// RDMA READ of `len` bytes at `off` of B's region.
    Read {
        /// Bytes.
        len: u32,
        /// Offset in the region.
        off: u32,
    },
    /// FETCH_ADD on the region's first 8 bytes.
    FetchAdd {
        /// Addend.
        add: u64,
    },
    /// CMP_SWAP on the region's first 8 bytes.
    CmpSwap {
        /// Compare value.
        compare: u64,
        /// Swap value.
        swap: u64,
    },
}

/// A work request posted at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    /// Post time (ns).
    pub at_ns: u64,
    /// What.
    pub kind: OpKind,
}

/// What a fault does to the packets it picks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The network loses it.
    Drop,
    /// It arrives this much later than it would.
    Delay(u64),
    /// It arrives, and a copy arrives this much later.
    Duplicate(u64),
}

/// A scripted fault: the `nth` (1-based) packet sent by `from` for which
/// `pick` holds gets `action`.
#[derive(Clone, Copy, Debug)]
pub struct Fault {
    /// Sending host.
    pub from: usize,
    /// Which packets (the host's initial PSNs are `Scenario::psn`).
    pub pick: fn(&Packet<'_>, &Scenario) -> bool,
    /// Occurrence among the picked ones.
    pub nth: u32,
    /// What happens.
    pub action: Action,
}

/// A link failure: from `at_ns` the plane's link that `slot`'s first path
/// of host A hashes onto is down in both directions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkFailure {
    /// Plane.
    pub plane: u8,
    /// Path slot of host A whose (generation 0) route fails.
    pub slot: u16,
    /// Time.
    pub at_ns: u64,
}

/// A two-host run.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Name.
    pub name: String,
    /// PRNG seed: QPNs, initial PSNs, random loss.
    pub seed: u64,
    /// Planes (ports per host), 1..=8.
    pub planes: u8,
    /// Propagation delay of each ECMP link of a plane (their count is the
    /// ECMP width), the same in both directions.
    pub link_delay_ns: Vec<u64>,
    /// Rate of ports and links (Gbit/s).
    pub gbps: u64,
    /// Payload MTU.
    pub mtu: u32,
    /// Host A's work requests.
    pub ops: Vec<Op>,
    /// Scripted faults.
    pub faults: Vec<Fault>,
    /// A link failure.
    pub link_failure: Option<LinkFailure>,
    /// Random loss probability per packet (both directions).
    pub loss: f64,
    /// Stop at this simulated time.
    pub time_limit_ns: u64,
    /// QP numbers of A and B (from the seed, like the driver's: a random
    /// 13-bit tag above an 11-bit slot index).
    pub qpn: [u32; 2],
    /// Initial PSNs of A's and B's messages (24 bits, from the seed).
    pub psn: [u32; 2],
    /// Messages A's and B's receivers accept (protocol.md 1.4).
    pub msg_window: [usize; 2],
}

impl Scenario {
    /// A scenario with the seed's QPNs and PSNs and no traffic: one plane,
    /// four ECMP links of 1, 2, 3, 4 us, 100 Gbit/s, MTU 256.
    pub fn new(name: &str, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let mut qpn = || ((rng.next_u64() as u32 & 0x1FFF) << 11) | 2;
        let qpn = [qpn(), qpn() | 1];
        let psn = [
            rng.next_u64() as u32 & 0xFF_FFFF,
            rng.next_u64() as u32 & 0xFF_FFFF,
        ];
        Self {
            name: name.into(),
            seed,
            planes: 1,
            link_delay_ns: vec![1_000, 2_000, 3_000, 4_000],
            gbps: 100,
            mtu: 256,
            ops: Vec::new(),
            faults: Vec::new(),
            link_failure: None,
            loss: 0.0,
            time_limit_ns: 1_000_000_000,
            qpn,
            psn,
            msg_window: [MSG_WINDOW_MAX; 2],
        }
    }

    /// Host `h`'s connection setup.
    pub fn host_config(&self, h: usize) -> HostConfig {
        let peer = 1 - h;
        HostConfig {
            qpn: self.qpn[h],
            peer_qpn: self.qpn[peer],
            mtu: self.mtu,
            addrs: (0..self.planes).map(|p| addr(h, p)).collect(),
            peer: addr(peer, 0),
            sq_psn: self.psn[h],
            rq_psn: self.psn[peer],
            msg_window: self.msg_window[h],
        }
    }

    /// The ECMP link of a UDP source port.
    pub fn link_of(&self, src_port: u16) -> usize {
        let h = u64::from(src_port).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        (h % self.link_delay_ns.len().max(1) as u64) as usize
    }

    /// MSN of host A's `k`-th message.
    pub fn msn_a(&self, k: u32) -> u32 {
        self.psn[A].wrapping_add(k)
    }
}

/// The rkey of B's region.
pub const RKEY: u32 = 0x0000_5a17;

/// Byte `off` of A's message `msn`.
pub fn content(msn: u32, off: u32) -> u8 {
    let x = msn.wrapping_mul(0x85EB_CA6B) ^ off.wrapping_mul(0xC2B2_AE35);
    (x ^ (x >> 13) ^ (x >> 24)) as u8
}

/// The verbs layer of a simulated host: B's memory region and receives,
/// A's request operands and result buffers, and checks that every byte is
/// placed once and right.
#[derive(Debug, Default)]
pub struct SimVerbs {
    /// The region (B); empty at A.
    pub memory: Vec<u8>,
    /// Times each region byte was written by a WRITE.
    written: Vec<u8>,
    /// SEND payloads by rsn, with per-byte placement counts.
    recvs: HashMap<u16, (Vec<u8>, Vec<u8>)>,
    /// Operands of accepted atomic requests, by MSN.
    atomics: HashMap<u32, (Opcode, u64, Vec<u8>)>,
    /// Atomic results by request MSN (responder), kept for retransmission.
    results: HashMap<u32, u64>,
    /// Executions per request MSN.
    pub executions: HashMap<u32, u32>,
    /// READ requests by MSN: (address, length).
    reads: HashMap<u32, (u64, u32)>,
    /// Our requests' operands by MSN (requester).
    operands: HashMap<u32, Vec<u8>>,
    /// Responses received, by request MSN: bytes and placement counts.
    pub responses: HashMap<u32, (Vec<u8>, Vec<u8>)>,
    /// Our completions.
    pub sent: Vec<TxCompletion>,
    /// The peer's completions.
    pub received: Vec<RxCompletion>,
    /// Violations found (must stay empty).
    pub errors: Vec<String>,
}

impl SimVerbs {
    fn responder() -> Self {
        let mut memory = vec![0u8; REGION_LEN];
        memory[..8].copy_from_slice(&ATOMIC_INIT.to_le_bytes());
        Self {
            written: vec![0; REGION_LEN],
            memory,
            ..Self::default()
        }
    }

    /// The region slice for `[va, va + len)` if the key and bounds allow.
    fn range(&self, rkey: u32, va: u64, len: u64) -> Result<std::ops::Range<usize>, Syndrome> {
        let off = va.checked_sub(REGION_VA).ok_or(Syndrome::RemoteAccess)?;
        let end = off.checked_add(len).ok_or(Syndrome::RemoteAccess)?;
        if rkey != RKEY || end > self.memory.len() as u64 {
            return Err(Syndrome::RemoteAccess);
        }
        Ok(off as usize..end as usize)
    }

    /// The payload of our data packet `h`.
    pub fn payload(&self, h: &DataHeader) -> Vec<u8> {
        let (off, n) = (h.offset, u32::from(h.payload_len));
        match h.opcode {
            Opcode::ReadResp => {
                let (va, _) = self.reads.get(&h.imm).copied().unwrap_or((REGION_VA, 0));
                let at = (va - REGION_VA) as usize + off as usize;
                self.memory
                    .get(at..at + n as usize)
                    .map(<[u8]>::to_vec)
                    .unwrap_or_else(|| vec![0; n as usize])
            }
            Opcode::AtomicResp => self
                .results
                .get(&h.imm)
                .copied()
                .unwrap_or(0)
                .to_be_bytes()
                .to_vec(),
            Opcode::CmpSwap | Opcode::FetchAdd | Opcode::AtomicWrite => self
                .operands
                .get(&h.msn)
                .cloned()
                .unwrap_or_else(|| vec![0; n as usize]),
            _ => (off..off + n).map(|i| content(h.msn, i)).collect(),
        }
    }

    /// A message's bytes and how often each was placed.
    fn buffer(p: &Placement) -> (Vec<u8>, Vec<u8>) {
        (vec![0; p.msg_len as usize], vec![0; p.msg_len as usize])
    }

    /// Places `payload` at `p.offset` in a message buffer, counting each
    /// byte (`what` names the message in the error of a byte placed twice).
    fn fill(
        errors: &mut Vec<String>,
        (buf, n): &mut (Vec<u8>, Vec<u8>),
        p: &Placement,
        payload: &[u8],
        what: impl FnOnce() -> String,
    ) -> Result<(), Syndrome> {
        let at = p.offset as usize;
        let end = at + payload.len();
        if end > buf.len() {
            return Err(Syndrome::InvalidRequest);
        }
        buf[at..end].copy_from_slice(payload);
        Self::count(errors, &mut n[at..end], &what());
        Ok(())
    }

    fn count(errors: &mut Vec<String>, counts: &mut [u8], what: &str) {
        for c in counts.iter_mut() {
            *c = c.saturating_add(1);
        }
        if counts.iter().any(|&c| c > 1) {
            errors.push(format!("{what}: bytes placed twice"));
        }
    }
}

impl Verbs for SimVerbs {
    fn place(&mut self, p: &Placement, h: &DataHeader, payload: &[u8]) -> Result<(), Syndrome> {
        let ok = payload.iter().enumerate().all(|(i, &b)| match p.opcode {
            Opcode::Write | Opcode::WriteImm | Opcode::Send | Opcode::SendImm => {
                b == content(p.msn, p.offset + i as u32)
            }
            _ => true,
        });
        if !ok {
            self.errors.push(format!("msn {}: corrupt payload", p.msn));
        }
        match p.opcode {
            Opcode::Write | Opcode::WriteImm => {
                let r = self.range(p.rkey, p.remote_va, u64::from(p.msg_len))?;
                let at = r.start + p.offset as usize;
                self.memory[at..at + payload.len()].copy_from_slice(payload);
                let what = format!("WRITE msn {}", p.msn);
                Self::count(
                    &mut self.errors,
                    &mut self.written[at..at + payload.len()],
                    &what,
                );
            }
            Opcode::Send | Opcode::SendImm => {
                let buf = self.recvs.entry(p.rsn).or_insert_with(|| Self::buffer(p));
                Self::fill(&mut self.errors, buf, p, payload, || {
                    format!("SEND rsn {}", p.rsn)
                })?;
            }
            Opcode::ReadReq => {
                self.range(p.rkey, p.remote_va, u64::from(p.msg_len))?;
            }
            Opcode::CmpSwap | Opcode::FetchAdd | Opcode::AtomicWrite => {
                if !p.remote_va.is_multiple_of(8) {
                    return Err(Syndrome::InvalidRequest);
                }
                self.range(p.rkey, p.remote_va, 8)?;
                self.atomics
                    .insert(p.msn, (p.opcode, p.remote_va, payload.to_vec()));
            }
            Opcode::ReadResp | Opcode::AtomicResp => {
                let buf = self
                    .responses
                    .entry(h.imm)
                    .or_insert_with(|| Self::buffer(p));
                Self::fill(&mut self.errors, buf, p, payload, || {
                    format!("response to msn {}", h.imm)
                })?;
            }
            _ => return Err(Syndrome::InvalidRequest),
        }
        Ok(())
    }

    fn received(&mut self, c: &RxCompletion) {
        self.received.push(*c);
        if c.status != CompletionStatus::Success {
            return;
        }
        match c.opcode {
            Opcode::ReadReq => {
                self.reads.insert(c.msn, (c.remote_va, c.len));
            }
            Opcode::CmpSwap | Opcode::FetchAdd | Opcode::AtomicWrite => {
                let Some((op, va, operands)) = self.atomics.remove(&c.msn) else {
                    self.errors
                        .push(format!("atomic msn {}: completed, never placed", c.msn));
                    return;
                };
                *self.executions.entry(c.msn).or_default() += 1;
                let at = (va - REGION_VA) as usize;
                let word = |b: &[u8]| u64::from_be_bytes(b.try_into().unwrap_or([0; 8]));
                let m = u64::from_le_bytes(self.memory[at..at + 8].try_into().unwrap_or([0; 8]));
                let new = match op {
                    Opcode::CmpSwap if m == word(&operands[..8]) => word(&operands[8..16]),
                    Opcode::CmpSwap => m,
                    Opcode::FetchAdd => m.wrapping_add(word(&operands[..8])),
                    _ => u64::from_le_bytes(operands[..8].try_into().unwrap_or([0; 8])),
                };
                self.memory[at..at + 8].copy_from_slice(&new.to_le_bytes());
                self.results.insert(c.msn, m);
            }
            _ => {}
        }
    }

    fn sent(&mut self, c: &TxCompletion) {
        self.sent.push(*c);
    }
}

/// What a run produced.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Each host's capture tap, in the order the host handled the packets.
    pub taps: [Vec<Frame>; 2],
    /// Faults applied (of the scripted ones).
    pub faults_applied: usize,
    /// Packets the network lost (faults, failed link, random loss).
    pub lost: usize,
    /// Each host's verbs layer at the end.
    pub verbs: [SimVerbs; 2],
    /// Each host's drops.
    pub drops: [Vec<(u64, Dropped)>; 2],
    /// Each host's engine counters.
    pub tx_stats: [metaroce_engine::sender::SenderStats; 2],
    /// Each host's receiver counters.
    pub rx_stats: [metaroce_engine::receiver::ReceiverStats; 2],
    /// QP in error at the end.
    pub failed: [bool; 2],
    /// All of A's work requests completed (responses received).
    pub finished: bool,
    /// Time of the last event.
    pub end_ns: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Port {
    Idle,
    Scheduled,
    Busy,
}

enum Ev {
    Timer(usize),
    LinkDown(u8, usize),
    Post(usize),
    Arrive { to: usize, plane: u8, frame: Frame },
    PortFree(usize, u8),
}

impl Ev {
    /// Order of events at the same time.
    fn class(&self) -> u8 {
        match self {
            Ev::Timer(_) | Ev::LinkDown(..) => 0,
            Ev::Post(_) | Ev::Arrive { .. } => 1,
            Ev::PortFree(..) => 2,
        }
    }
}

struct Item {
    t: u64,
    class: u8,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Item {
    fn eq(&self, o: &Self) -> bool {
        (self.t, self.class, self.seq) == (o.t, o.class, o.seq)
    }
}
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Item {
    fn cmp(&self, o: &Self) -> Ordering {
        (o.t, o.class, o.seq).cmp(&(self.t, self.class, self.seq))
    }
}

struct Link {
    delay_ns: u64,
    free_at: u64,
    up: bool,
}

struct Net<'a> {
    sc: &'a Scenario,
    heap: BinaryHeap<Item>,
    seq: u64,
    /// [plane][direction (sender)][link]
    links: Vec<[Vec<Link>; 2]>,
    ports: [Vec<Port>; 2],
    timer_at: [Option<u64>; 2],
    fault_hits: Vec<u32>,
    rng: Rng,
    out: Outcome,
}

impl Net<'_> {
    fn push(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        let class = ev.class();
        self.heap.push(Item {
            t,
            class,
            seq: self.seq,
            ev,
        });
    }

    fn ser_ns(&self, bytes: usize) -> u64 {
        ((bytes as u64) * 8).div_ceil(self.sc.gbps.max(1))
    }

    /// After host `h` changed: idle ports look for work, the timer follows
    /// the host's deadline.
    fn kick(&mut self, h: usize, host: &Host<SimVerbs>, now: u64) {
        for p in 0..self.ports[h].len() {
            if self.ports[h][p] == Port::Idle {
                self.ports[h][p] = Port::Scheduled;
                self.push(now, Ev::PortFree(h, p as u8));
            }
        }
        if let Some(d) = host.next_deadline() {
            let d = d.max(now);
            if self.timer_at[h].is_none_or(|t| d < t) {
                self.timer_at[h] = Some(d);
                self.push(d, Ev::Timer(h));
            }
        }
    }

    /// A frame leaves host `from` on `plane`: faults, link, arrival.
    fn transmit(&mut self, from: usize, plane: u8, frame: Frame, now: u64) {
        let sc = self.sc;
        let mut delays = vec![0u64];
        if let Ok(pkt) = metaroce_engine::wire::parse_packet(&frame.payload) {
            for (i, f) in sc.faults.iter().enumerate() {
                if f.from != from || !(f.pick)(&pkt, sc) {
                    continue;
                }
                self.fault_hits[i] += 1;
                if self.fault_hits[i] != f.nth {
                    continue;
                }
                self.out.faults_applied += 1;
                match f.action {
                    Action::Drop => delays.clear(),
                    Action::Delay(d) => delays.iter_mut().for_each(|x| *x += d),
                    Action::Duplicate(d) => delays.push(d),
                }
            }
        }
        if self.rng.chance(sc.loss) {
            delays.clear();
        }
        let l = sc.link_of(frame.src_port);
        let wire = frame.payload.len() + FRAME_OVERHEAD;
        let ser = self.ser_ns(wire);
        let link = &mut self.links[usize::from(plane)][from][l];
        if !link.up || delays.is_empty() {
            self.out.lost += 1;
            return;
        }
        // Store and forward: after the port, the link's queue.
        let start = link.free_at.max(now + ser);
        link.free_at = start + ser;
        let arrive = link.free_at + link.delay_ns;
        for d in delays {
            self.push(
                arrive + d,
                Ev::Arrive {
                    to: 1 - from,
                    plane,
                    frame: frame.clone(),
                },
            );
        }
    }
}

/// A frame of host `h`'s tap on `plane`: sent (`egress`) or received.
fn tap_frame(h: usize, plane: u8, t_ns: u64, egress: bool, f: Frame) -> Frame {
    let (src_mac, dst_mac) = if egress {
        (host_mac(h, plane), router_mac(plane))
    } else {
        (router_mac(plane), host_mac(h, plane))
    };
    Frame {
        t_ns,
        src_mac,
        dst_mac,
        ..f
    }
}

/// Post host A's work requests that are due, as long as the engine takes them.
fn post_due(host: &mut Host<SimVerbs>, ops: &[Op], next: &mut usize, rsn: &mut u16, now: u64) {
    while let Some(op) = ops.get(*next).filter(|o| o.at_ns <= now) {
        if !post_op(host, op, rsn) {
            return;
        }
        *next += 1;
    }
}

fn post_op(host: &mut Host<SimVerbs>, op: &Op, rsn: &mut u16) -> bool {
    let at = |off: u32| REGION_VA + u64::from(off);
    let (m, operands) = match op.kind {
        OpKind::Write { len, off, bad_key } => (
            Message {
                opcode: Opcode::Write,
                len,
                remote_va: at(off),
                rkey: if bad_key { RKEY ^ 0xbad } else { RKEY },
                imm: 0,
                rsn: 0,
            },
            None,
        ),
        OpKind::Send { len } => (
            Message {
                opcode: Opcode::Send,
                len,
                remote_va: 0,
                rkey: 0,
                imm: 0,
                rsn: *rsn,
            },
            None,
        ),
        OpKind::Read { len, off } => (
            Message {
                opcode: Opcode::ReadReq,
                len,
                remote_va: at(off),
                rkey: RKEY,
                imm: 0,
                rsn: 0,
            },
            None,
        ),
        OpKind::FetchAdd { add } => (
            Message {
                opcode: Opcode::FetchAdd,
                len: ATOMIC_LEN,
                remote_va: at(0),
                rkey: RKEY,
                imm: 0,
                rsn: 0,
            },
            Some(add.to_be_bytes().to_vec()),
        ),
        OpKind::CmpSwap { compare, swap } => {
            let mut v = compare.to_be_bytes().to_vec();
            v.extend_from_slice(&swap.to_be_bytes());
            (
                Message {
                    opcode: Opcode::CmpSwap,
                    len: ATOMIC_CMP_SWAP_LEN,
                    remote_va: at(0),
                    rkey: RKEY,
                    imm: 0,
                    rsn: 0,
                },
                Some(v),
            )
        }
    };
    match host.post(&m) {
        Ok(msn) => {
            if m.opcode.has_rsn() {
                *rsn = rsn.wrapping_add(1);
            }
            if let Some(v) = operands {
                host.verbs.operands.insert(msn, v);
            }
            true
        }
        Err(_) => false,
    }
}

/// Run a scenario.
pub fn run(sc: &Scenario) -> Outcome {
    let mut hosts: Vec<Host<SimVerbs>> = [A, B]
        .iter()
        .map(|&h| {
            let verbs = if h == B {
                SimVerbs::responder()
            } else {
                SimVerbs::default()
            };
            Host::new(sc.host_config(h), verbs, 0).expect("host config")
        })
        .collect();
    let ecmp = sc.link_delay_ns.len().max(1);
    let mut net = Net {
        sc,
        heap: BinaryHeap::new(),
        seq: 0,
        links: (0..sc.planes)
            .map(|_| {
                let dir = || {
                    (0..ecmp)
                        .map(|l| Link {
                            delay_ns: sc.link_delay_ns.get(l).copied().unwrap_or(1_000),
                            free_at: 0,
                            up: true,
                        })
                        .collect::<Vec<_>>()
                };
                [dir(), dir()]
            })
            .collect(),
        ports: [
            vec![Port::Idle; usize::from(sc.planes)],
            vec![Port::Idle; usize::from(sc.planes)],
        ],
        timer_at: [None; 2],
        fault_hits: vec![0; sc.faults.len()],
        rng: Rng::new(sc.seed ^ 0x1055),
        out: Outcome::default(),
    };
    let mut ops: Vec<Op> = sc.ops.clone();
    ops.sort_by_key(|o| o.at_ns);
    let mut next_op = 0usize;
    let mut rsn = 0u16;
    if let Some(f) = sc.link_failure {
        let id = f.slot & metaroce_engine::config::PATH_SLOT_MASK;
        let port = entropy_port(sc.qpn[A] ^ 0x5eed, id);
        net.push(f.at_ns, Ev::LinkDown(f.plane, sc.link_of(port)));
    }
    for (i, op) in ops.iter().enumerate() {
        if i == 0 || op.at_ns != ops[i - 1].at_ns {
            net.push(op.at_ns, Ev::Post(A));
        }
    }
    for (h, host) in hosts.iter().enumerate() {
        net.kick(h, host, 0);
    }
    let mut events = 0u64;
    while let Some(Item { t: now, ev, .. }) = net.heap.pop() {
        if now > sc.time_limit_ns {
            break;
        }
        net.out.end_ns = now;
        let h = match ev {
            Ev::LinkDown(p, l) => {
                for dir in net.links[usize::from(p)].iter_mut() {
                    dir[l].up = false;
                }
                continue;
            }
            Ev::Timer(h) => {
                if net.timer_at[h] == Some(now) {
                    net.timer_at[h] = None;
                }
                if hosts[h].next_deadline().is_some_and(|d| d <= now) {
                    hosts[h].timer(now);
                }
                h
            }
            Ev::Post(h) => h,
            Ev::Arrive {
                to,
                plane,
                frame: f,
            } => {
                hosts[to].ingress(now, plane, f.src, f.src_port, &f.payload, f.ecn == 3);
                net.out.taps[to].push(tap_frame(to, plane, now, false, f));
                to
            }
            Ev::PortFree(h, plane) => {
                let p = usize::from(plane);
                net.ports[h][p] = Port::Idle;
                let Some(o) = hosts[h].pull(now, plane) else {
                    continue;
                };
                let bytes = match &o.pkt {
                    OutPkt::Control(b) => b.clone(),
                    OutPkt::Data(hd) => {
                        let payload = hosts[h].verbs.payload(hd);
                        let mut buf = vec![0u8; DATA_HEADER_LEN + payload.len() + ICRC_LEN];
                        let n = encode_data_packet(hd, &payload, &mut buf).expect("encode");
                        buf.truncate(n);
                        buf
                    }
                };
                let f = Frame {
                    t_ns: now,
                    src_mac: [0; 6],
                    dst_mac: [0; 6],
                    src: addr(h, o.plane),
                    dst: o.dst,
                    ecn: ECT0,
                    src_port: o.src_port,
                    dst_port: UDP_PORT,
                    payload: bytes,
                };
                let f = tap_frame(h, o.plane, now, true, f);
                net.out.taps[h].push(f.clone());
                let ser = net.ser_ns(f.payload.len() + FRAME_OVERHEAD);
                net.ports[h][p] = Port::Busy;
                net.push(now + ser, Ev::PortFree(h, plane));
                net.transmit(h, o.plane, f, now);
                h
            }
        };
        if h == A {
            post_due(&mut hosts[A], &ops, &mut next_op, &mut rsn, now);
        }
        let host = &hosts[h];
        net.kick(h, host, now);
        events += 1;
        if events > MAX_EVENTS {
            break;
        }
    }
    let mut out = net.out;
    // Finished: every work request posted and completed, and every READ
    // and atomic answered.
    let requests = ops
        .iter()
        .filter(|o| !matches!(o.kind, OpKind::Write { .. } | OpKind::Send { .. }))
        .count();
    let answered = hosts[A]
        .verbs
        .received
        .iter()
        .filter(|c| c.opcode.is_response())
        .count();
    out.finished =
        next_op == ops.len() && hosts[A].verbs.sent.len() == ops.len() && answered == requests;
    for (h, host) in hosts.into_iter().enumerate() {
        out.tx_stats[h] = *host.sender().stats();
        out.rx_stats[h] = *host.receiver().stats();
        out.failed[h] = host.failed();
        out.drops[h] = host.drops.clone();
        out.verbs[h] = host.verbs;
    }
    out
}
