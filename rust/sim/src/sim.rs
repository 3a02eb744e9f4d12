//! The event loop, topology and hosts.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use metaroce_engine::completion::CompletionStatus;
use metaroce_engine::config::{ReceiverConfig, SenderConfig};
use metaroce_engine::events::{CutCause, SenderEvent};
use metaroce_engine::rcn::Shares;
use metaroce_engine::receiver::{Receiver, RxVerdict};
use metaroce_engine::sender::{Message, Sender, TxKind};
use metaroce_engine::wire::{
    encode_data_packet, parse_packet, DataHeader, Opcode, Packet, DATA_HEADER_LEN, ICRC_LEN,
};

use super::rng::Rng;

/// Ethernet + IPv4 + UDP + FCS bytes added to every MetaRoCE packet.
pub const FRAME_OVERHEAD: u32 = 14 + 20 + 8 + 4;

/// One link (queue + serialiser + propagation).
#[derive(Clone, Copy, Debug)]
pub struct LinkSpec {
    /// Rate in Gbit/s.
    pub gbps: f64,
    /// Propagation delay (ns).
    pub prop_ns: u64,
    /// Backlog above which packets are ECN-CE marked (bytes).
    pub ecn_bytes: u64,
    /// Buffer size; arrivals beyond it are dropped (bytes).
    pub buffer_bytes: u64,
    /// Random loss probability per packet.
    pub loss: f64,
}

/// Per-packet chaos for property tests: within-path reordering and
/// duplication on top of link loss.
#[derive(Clone, Copy, Debug)]
pub struct Chaos {
    /// Extra random delay added to each packet, uniform in `[0, jitter_ns)`.
    pub jitter_ns: u64,
    /// Probability that a data packet is delivered twice.
    pub dup: f64,
}

/// The receiving host stops now and then (a descheduled vCPU): packets
/// that reach it while it is stopped wait, in order, and are taken (and
/// answered) when it runs again.
#[derive(Clone, Copy, Debug)]
pub struct RxPause {
    /// Start of the first pause (ns).
    pub first_ns: u64,
    /// A pause starts every `period_ns`.
    pub period_ns: u64,
    /// Length of each pause (ns).
    pub dur_ns: u64,
}

impl RxPause {
    /// End of the pause `now` falls in, if any.
    pub fn until(&self, now: u64) -> Option<u64> {
        let phase = now.checked_sub(self.first_ns)? % self.period_ns.max(1);
        (phase < self.dur_ns).then(|| now - phase + self.dur_ns)
    }
}

/// The receiving host's rate hints (protocol.md 6.5) as the driver
/// computes them: every `tick_ns` it counts its QPs that received data
/// within `metaroce_engine::rcn::RECEIVING_WINDOW_NS` and each QP
/// advertises its share of `capacity_mbps` from then on
/// (`Receiver::rcn_count`).
#[derive(Clone, Copy, Debug)]
pub struct Rcn {
    /// Receive capacity shared (Mbit/s): the downlinks' rate.
    pub capacity_mbps: u32,
    /// Period of the count (the driver's tick: 1 ms).
    pub tick_ns: u64,
}

/// A complete scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Name for the report.
    pub name: String,
    /// PRNG seed.
    pub seed: u64,
    /// Planes (ports per host).
    pub planes: usize,
    /// ECMP core links per plane.
    pub links_per_plane: usize,
    /// Host port rate per plane (Gbit/s).
    pub host_gbps: f64,
    /// Core link template.
    pub core: LinkSpec,
    /// Extra propagation delay per core link, uniform in `[0, spread)`.
    pub core_delay_spread_ns: u64,
    /// Receiver downlink template (one per plane).
    pub down: LinkSpec,
    /// Number of senders (each one QP to the receiver).
    pub senders: usize,
    /// Messages per sender.
    pub msgs_per_sender: usize,
    /// Bytes per message.
    pub msg_bytes: u32,
    /// Random message sizes in `[0, msg_bytes]` and random opcodes.
    pub random_msgs: bool,
    /// A sender posts a message only once the previous one completed
    /// (its send completion): perftest's latency tests, one message in
    /// flight, the next as soon as the last is done.
    pub one_at_a_time: bool,
    /// Sender `s` posts its first message at `s * start_stagger_ns` (0:
    /// all at once): flows that start apart end apart, so the last one
    /// runs alone for a while, as perftest's clients started one by one do.
    pub start_stagger_ns: u64,
    /// Engine configuration of every sender.
    pub sender_cfg: SenderConfig,
    /// Receiver rate hints; `None`: ACKs carry none.
    pub rcn: Option<Rcn>,
    /// Longest wait of a received packet for its ACK (ns,
    /// `Receiver::set_ack_delay`): below the RTO floor by more than an
    /// RTT (protocol.md 3.4).
    pub ack_delay_ns: u64,
    /// Fail a whole plane at a time.
    pub fail_plane: Option<(usize, u64)>,
    /// Bring a failed plane back (plane, time).
    pub restore_plane: Option<(usize, u64)>,
    /// The host reports the failed plane down this long after it fails
    /// (as a NIC link-down event would); `None` = rely on RTO/probes only.
    pub report_plane_down_after: Option<u64>,
    /// Queue maxima are also recorded separately after this time (ns).
    pub warmup_ns: u64,
    /// Fail one core link (plane, link, time).
    pub fail_link: Option<(usize, usize, u64)>,
    /// Chaos (reorder within path, duplicates).
    pub chaos: Option<Chaos>,
    /// The receiver host pauses.
    pub rx_pause: Option<RxPause>,
    /// Carry and verify real payload bytes end to end.
    pub check_payload: bool,
    /// Give up at this simulated time.
    pub time_limit_ns: u64,
    /// Width of goodput bins (ns).
    pub bin_ns: u64,
}

/// Measured results.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// All messages completed at the receiver.
    pub finished: bool,
    /// Time of the last completion (ns).
    pub duration_ns: u64,
    /// Message payload bytes completed.
    pub payload_bytes: u64,
    /// Goodput over the whole run (Gbit/s).
    pub goodput_gbps: f64,
    /// Retransmitted data packets.
    pub retx_packets: u64,
    /// Retransmitted payload bytes.
    pub retx_bytes: u64,
    /// Duplicate data packets at receivers (wasted / spurious copies).
    pub duplicates: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Retransmission timeouts undone by late ACKs (spurious).
    pub spurious_timeouts: u64,
    /// Delay trials that raised a QP's delay floor (protocol.md 6.3).
    pub delay_floor_raised: u64,
    /// Packets declared lost from SACK.
    pub sack_losses: u64,
    /// Paths replaced after failing.
    pub paths_replaced: u64,
    /// Largest path count of any sender.
    pub max_paths: usize,
    /// Largest backlog seen on any downlink (bytes).
    pub max_down_queue: u64,
    /// Largest downlink backlog after the warm-up (bytes).
    pub max_down_queue_steady: u64,
    /// Mean downlink backlog met by the packets arriving there (bytes).
    pub mean_down_queue: u64,
    /// Planes usable (an active path) by sender 0 at the end.
    pub planes_usable_at_end: Vec<bool>,
    /// Largest backlog seen on any core link (bytes).
    pub max_core_queue: u64,
    /// Packets dropped by links (loss, buffer, failure).
    pub link_drops: u64,
    /// Completion time of each message (sender-major order), ns.
    pub msg_done_ns: Vec<u64>,
    /// Each message's time from its post to its send completion (ns), in
    /// completion order, every sender's.
    pub msg_latency_ns: Vec<u64>,
    /// Payload bytes placed per bin.
    pub bins: Vec<u64>,
    /// Bytes serialised on the downlinks (all planes).
    pub down_bytes: u64,
    /// Correctness violations (must be empty).
    pub errors: Vec<String>,
    /// Completions with error status.
    pub qp_errors: u64,
    /// Window cuts over all senders' paths, by cause: ECN, queueing
    /// delay, SACK losses, timeouts (`SenderEvent::WindowDecrease`).
    pub cuts: [u64; 4],
    /// Data packets the senders sent (retransmissions included).
    pub data_frames: u64,
    /// ACKs the receivers sent.
    pub ack_frames: u64,
}

struct Link {
    spec: LinkSpec,
    up: bool,
    free_at: f64,
    max_backlog: u64,
    max_backlog_steady: u64,
    warmup_ns: u64,
    /// Backlogs met by arrivals, summed, and the arrivals counted.
    backlog_sum: u128,
    arrivals: u64,
}

impl Link {
    fn new(spec: LinkSpec, warmup_ns: u64) -> Self {
        Self {
            spec,
            up: true,
            free_at: 0.0,
            max_backlog: 0,
            max_backlog_steady: 0,
            warmup_ns,
            backlog_sum: 0,
            arrivals: 0,
        }
    }

    fn ser_ns(&self, bytes: u32) -> f64 {
        bytes as f64 * 8.0 / self.spec.gbps
    }

    /// Enqueue at `now`; returns (arrival time at far end, CE) or None if dropped.
    fn send(&mut self, now: u64, bytes: u32, rng: &mut Rng) -> Option<(u64, bool)> {
        if !self.up || rng.chance(self.spec.loss) {
            return None;
        }
        let t = now as f64;
        let backlog = ((self.free_at - t).max(0.0) * self.spec.gbps / 8.0) as u64;
        if backlog + bytes as u64 > self.spec.buffer_bytes {
            return None;
        }
        self.max_backlog = self.max_backlog.max(backlog);
        self.backlog_sum += u128::from(backlog);
        self.arrivals += 1;
        if now >= self.warmup_ns {
            self.max_backlog_steady = self.max_backlog_steady.max(backlog);
        }
        let ce = backlog > self.spec.ecn_bytes;
        let start = self.free_at.max(t);
        self.free_at = start + self.ser_ns(bytes);
        Some((self.free_at.ceil() as u64 + self.spec.prop_ns, ce))
    }

    /// Reverse-direction control packet: delay and loss only.
    fn control(&self, rng: &mut Rng) -> Option<u64> {
        if !self.up || rng.chance(self.spec.loss) {
            return None;
        }
        Some(self.spec.prop_ns)
    }
}

#[derive(Clone)]
struct Pkt {
    sender: usize,
    plane: usize,
    core: usize,
    bytes: Vec<u8>,
    wire: u32,
    ce: bool,
}

enum Ev {
    PortFree {
        s: usize,
        plane: usize,
    },
    AtDown(Pkt),
    AtRx(Pkt),
    ToSender {
        s: usize,
        bytes: Vec<u8>,
    },
    Timer {
        s: usize,
    },
    /// The receiver of sender `s`'s QP sends the ACKs that waited.
    AckTimer {
        s: usize,
    },
    /// The receiving host counts its receiving QPs (`Scenario::rcn`).
    RcnTick,
    /// Sender `s` posts its first messages (`Scenario::start_stagger_ns`).
    Start {
        s: usize,
    },
    FailPlane(usize),
    RestorePlane(usize),
    ReportPlane(usize, bool),
    FailLink(usize, usize),
}

struct Item {
    t: u64,
    seq: u64,
    ev: Ev,
}
impl PartialEq for Item {
    fn eq(&self, o: &Self) -> bool {
        (self.t, self.seq) == (o.t, o.seq)
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
        (o.t, o.seq).cmp(&(self.t, self.seq))
    }
}

struct MsgSpec {
    opcode: Opcode,
    len: u32,
    /// Receive sequence number, assigned like a driver does: the count of
    /// earlier receive-consuming messages (SEND*, WRITE_IMM), wrapping.
    rsn: u16,
}

/// Where an ACK of a path goes back: the route (plane, core link) of the
/// path's last packet.
type Route = (usize, usize);

struct Host {
    tx: Box<Sender>,
    rx: Box<Receiver>,
    port_busy: Vec<bool>,
    timer_at: Option<u64>,
    /// The receiver's ACK timer, when armed.
    ack_timer_at: Option<u64>,
    /// Route of each path id's last packet at the receiver.
    routes: HashMap<u16, Route>,
    msgs: Vec<MsgSpec>,
    posted: usize,
    tx_done: usize,
    rx_done: usize,
    /// When each message was posted (ns).
    posted_at: Vec<u64>,
    /// Receive buffers keyed by MSN: (bytes, placement count per byte).
    bufs: HashMap<u32, (Vec<u8>, Vec<u8>)>,
}

/// Byte `off` of message `msn` from sender `s` (deterministic content).
fn content(s: usize, msn: u32, off: u32) -> u8 {
    let x = (s as u32).wrapping_mul(0x9E37_79B1)
        ^ msn.wrapping_mul(0x85EB_CA6B)
        ^ off.wrapping_mul(0xC2B2_AE35);
    (x ^ (x >> 13) ^ (x >> 24)) as u8
}

/// Run a scenario to completion (or the time limit).
pub fn run(sc: &Scenario) -> Outcome {
    let mut rng = Rng::new(sc.seed);
    let mut out = Outcome::default();
    let mut core: Vec<Vec<Link>> = (0..sc.planes)
        .map(|_| {
            (0..sc.links_per_plane)
                .map(|_| {
                    let mut spec = sc.core;
                    spec.prop_ns += rng.below(sc.core_delay_spread_ns.max(1));
                    Link::new(spec, sc.warmup_ns)
                })
                .collect()
        })
        .collect();
    let mut down: Vec<Link> = (0..sc.planes)
        .map(|_| Link::new(sc.down, sc.warmup_ns))
        .collect();
    let mtu = sc.sender_cfg.mtu;
    let mut hosts: Vec<Host> = (0..sc.senders)
        .map(|s| {
            let mut cfg = sc.sender_cfg;
            cfg.planes = sc.planes as u8;
            cfg.dst_qpn = 100 + s as u32;
            cfg.entropy_seed = rng.next_u64() as u32;
            cfg.peer_ack_delay_ns = sc.ack_delay_ns;
            let mut next_rsn = 0u16;
            let msgs = (0..sc.msgs_per_sender)
                .map(|_| {
                    let mut m = if sc.random_msgs {
                        let ops = [
                            Opcode::Send,
                            Opcode::SendImm,
                            Opcode::Write,
                            Opcode::WriteImm,
                        ];
                        MsgSpec {
                            opcode: ops[rng.below(4) as usize],
                            len: rng.below(sc.msg_bytes as u64 + 1) as u32,
                            rsn: 0,
                        }
                    } else {
                        MsgSpec {
                            opcode: Opcode::Write,
                            len: sc.msg_bytes,
                            rsn: 0,
                        }
                    };
                    if m.opcode.has_rsn() {
                        m.rsn = next_rsn;
                        next_rsn = next_rsn.wrapping_add(1);
                    }
                    m
                })
                .collect();
            let mut rx = Box::new(
                Receiver::new(ReceiverConfig {
                    peer_qpn: 200 + s as u32,
                    mtu,
                })
                .expect("receiver config"),
            );
            rx.set_ack_delay(sc.ack_delay_ns);
            Host {
                tx: Box::new(Sender::new(cfg, 0).expect("sender config")),
                rx,
                port_busy: vec![false; sc.planes],
                timer_at: None,
                ack_timer_at: None,
                routes: HashMap::new(),
                msgs,
                posted: 0,
                tx_done: 0,
                rx_done: 0,
                posted_at: Vec::new(),
                bufs: HashMap::new(),
            }
        })
        .collect();
    out.msg_done_ns = vec![0; sc.senders * sc.msgs_per_sender];
    let nbins = (sc.time_limit_ns / sc.bin_ns.max(1) + 1) as usize;
    out.bins = vec![0; nbins.min(1 << 22)];

    let mut heap = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |heap: &mut BinaryHeap<Item>, t: u64, ev: Ev| {
        seq += 1;
        heap.push(Item { t, seq, ev });
    };
    if let Some((p, t)) = sc.fail_plane {
        push(&mut heap, t, Ev::FailPlane(p));
    }
    if let Some((p, t)) = sc.fail_plane {
        if let Some(d) = sc.report_plane_down_after {
            push(&mut heap, t + d, Ev::ReportPlane(p, false));
        }
    }
    if let Some((p, t)) = sc.restore_plane {
        push(&mut heap, t, Ev::RestorePlane(p));
        if sc.report_plane_down_after.is_some() {
            push(&mut heap, t, Ev::ReportPlane(p, true));
        }
    }
    if let Some((p, l, t)) = sc.fail_link {
        push(&mut heap, t, Ev::FailLink(p, l));
    }
    for s in 0..sc.senders {
        for p in 0..sc.planes {
            push(&mut heap, 0, Ev::PortFree { s, plane: p });
        }
    }
    // The last count's hints: the device counted before the QPs started
    // (none receiving), as the driver's tick runs from the device's start.
    let mut shares = sc
        .rcn
        .map_or(Shares::NONE, |r| Shares::new(r.capacity_mbps, 0));
    // Newcomers that joined since the last count (`Receiver::rcn_join`).
    let mut newcomers = 0u32;
    if let Some(r) = sc.rcn {
        push(&mut heap, r.tick_ns, Ev::RcnTick);
    }
    let total_msgs = sc.senders * sc.msgs_per_sender;
    let mut completed = 0usize;
    let mut scratch = vec![0u8; 16384];

    // Post as many messages as the engine window allows (one at a time:
    // one once the last completed).
    fn post_more(h: &mut Host, one_at_a_time: bool, now: u64) {
        while h.posted < h.msgs.len() && !(one_at_a_time && h.posted > h.tx_done) {
            let m = &h.msgs[h.posted];
            let msg = Message {
                opcode: m.opcode,
                len: m.len,
                remote_va: 0x1000_0000,
                rkey: 7,
                imm: h.posted as u32,
                rsn: m.rsn,
            };
            if h.tx.post(&msg).is_err() {
                break;
            }
            h.posted += 1;
            h.posted_at.push(now);
        }
    }
    for (s, h) in hosts.iter_mut().enumerate() {
        let start = s as u64 * sc.start_stagger_ns;
        if start == 0 {
            post_more(h, sc.one_at_a_time, 0);
        } else {
            push(&mut heap, start, Ev::Start { s });
        }
    }

    while let Some(Item { t: now, ev, .. }) = heap.pop() {
        if now > sc.time_limit_ns {
            break;
        }
        // A paused receiver takes the packet when it runs again.
        let ev = match (ev, sc.rx_pause.and_then(|p| p.until(now))) {
            (Ev::AtRx(pkt), Some(end)) => {
                push(&mut heap, end, Ev::AtRx(pkt));
                continue;
            }
            (ev, _) => ev,
        };
        // Senders whose state changed and need ports kicked / timer rearmed.
        let mut touched: Option<usize> = None;
        match ev {
            Ev::FailPlane(p) => {
                for l in core[p].iter_mut() {
                    l.up = false;
                }
                down[p].up = false;
            }
            Ev::RestorePlane(p) => {
                for l in core[p].iter_mut() {
                    l.up = true;
                }
                down[p].up = true;
            }
            Ev::ReportPlane(p, up) => {
                for (s, h) in hosts.iter_mut().enumerate() {
                    if up {
                        h.tx.plane_up(p as u8, now);
                    } else {
                        h.tx.plane_down(p as u8, now);
                    }
                    for q in 0..sc.planes {
                        if !h.port_busy[q] {
                            h.port_busy[q] = true;
                            push(&mut heap, now, Ev::PortFree { s, plane: q });
                        }
                    }
                }
            }
            Ev::FailLink(p, l) => core[p][l].up = false,
            Ev::Start { s } => {
                post_more(&mut hosts[s], sc.one_at_a_time, now);
                touched = Some(s);
            }
            Ev::Timer { s } => {
                let h = &mut hosts[s];
                if h.timer_at == Some(now) {
                    h.timer_at = None;
                }
                h.tx.on_timer(now);
                count_cuts(&mut h.tx, &mut out.cuts);
                touched = Some(s);
            }
            Ev::PortFree { s, plane } => {
                let h = &mut hosts[s];
                h.port_busy[plane] = false;
                let Some(tp) = h.tx.next_packet_on_plane(now, plane as u8) else {
                    // Nothing to send: the port idles until an ACK, timer
                    // or post kicks it.
                    continue_timer(&mut heap, &mut push, h, s, now);
                    continue;
                };
                let (bytes, wire) = match tp.kind {
                    TxKind::Data { header, .. } => {
                        out.data_frames += 1;
                        let n = if sc.check_payload {
                            let payload: Vec<u8> = (0..header.payload_len as u32)
                                .map(|i| content(s, header.msn, header.offset + i))
                                .collect();
                            encode_data_packet(&header, &payload, &mut scratch).expect("encode")
                        } else {
                            header.encode(&mut scratch).expect("encode")
                        };
                        let wire =
                            DATA_HEADER_LEN as u32 + header.payload_len as u32 + ICRC_LEN as u32;
                        (scratch[..n].to_vec(), wire + FRAME_OVERHEAD)
                    }
                    TxKind::Probe(p) => {
                        let n = p.encode(false, &mut scratch).expect("encode");
                        (scratch[..n].to_vec(), n as u32 + FRAME_OVERHEAD)
                    }
                };
                let ser = (wire as f64 * 8.0 / sc.host_gbps).ceil() as u64;
                h.port_busy[plane] = true;
                push(&mut heap, now + ser.max(1), Ev::PortFree { s, plane });
                // ECMP: the source port picks the core link of this plane.
                let hsh = (tp.src_port as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
                let c = (hsh % sc.links_per_plane as u64) as usize;
                let pkt = Pkt {
                    sender: s,
                    plane,
                    core: c,
                    bytes,
                    wire,
                    ce: false,
                };
                match core[plane][c].send(now + ser, wire, &mut rng) {
                    Some((t, ce)) => push(&mut heap, t, Ev::AtDown(Pkt { ce, ..pkt })),
                    None => out.link_drops += 1,
                }
                let h = &mut hosts[s];
                continue_timer(&mut heap, &mut push, h, s, now);
            }
            Ev::AtDown(pkt) => match down[pkt.plane].send(now, pkt.wire, &mut rng) {
                Some((mut t, ce)) => {
                    out.down_bytes += pkt.wire as u64;
                    let ce = ce || pkt.ce;
                    if let Some(ch) = sc.chaos {
                        t += rng.below(ch.jitter_ns.max(1));
                        if rng.chance(ch.dup) {
                            push(
                                &mut heap,
                                t + rng.below(ch.jitter_ns.max(1)),
                                Ev::AtRx(Pkt { ce, ..pkt.clone() }),
                            );
                        }
                    }
                    push(&mut heap, t, Ev::AtRx(Pkt { ce, ..pkt }));
                }
                None => out.link_drops += 1,
            },
            Ev::RcnTick => {
                if let Some(r) = sc.rcn {
                    let n = hosts
                        .iter_mut()
                        .map(|h| h.rx.rcn_count(&shares, now))
                        .filter(|&c| c)
                        .count();
                    shares = Shares::new(r.capacity_mbps, n as u32);
                    newcomers = 0;
                    push(&mut heap, now + r.tick_ns.max(1), Ev::RcnTick);
                }
            }
            Ev::AckTimer { s } => {
                let h = &mut hosts[s];
                if h.ack_timer_at == Some(now) {
                    h.ack_timer_at = None;
                }
                let acks = flush_acks(h, now, &mut scratch);
                out.ack_frames += acks.len() as u64;
                for ((plane, c), bytes) in acks {
                    if let (Some(a), Some(b)) = (
                        down[plane].control(&mut rng),
                        core[plane][c].control(&mut rng),
                    ) {
                        push(&mut heap, now + a + b, Ev::ToSender { s, bytes });
                    }
                }
                arm_ack_timer(&mut heap, &mut push, h, s, now);
            }
            Ev::AtRx(pkt) => {
                let s = pkt.sender;
                let h = &mut hosts[s];
                // A QP the last count did not find receiving advertises a
                // newcomer's share of it (the driver's responder does so
                // before its ACKs go, protocol.md 6.5).
                if sc.rcn.is_some() && h.rx.rcn_join() {
                    h.rx.set_rate_hint(shares.joining(newcomers));
                    newcomers += 1;
                }
                let reply: Option<Vec<u8>> = if sc.check_payload {
                    match parse_packet(&pkt.bytes) {
                        Ok(Packet::Data { header, payload }) => rx_data(
                            h,
                            s,
                            (pkt.plane, pkt.core),
                            &header,
                            Some(payload),
                            pkt.ce,
                            now,
                            &mut out,
                            &mut scratch,
                            sc.bin_ns,
                        ),
                        Ok(Packet::Probe(p)) => {
                            let r = h.rx.on_probe(&p);
                            let n = r.encode(true, &mut scratch).expect("encode");
                            Some(scratch[..n].to_vec())
                        }
                        Ok(_) => None,
                        Err(e) => {
                            out.errors
                                .push(format!("parse error on valid packet: {e:?}"));
                            None
                        }
                    }
                } else if pkt.bytes.get(1) == Some(&(Opcode::Probe as u8)) {
                    match parse_packet(&pkt.bytes) {
                        Ok(Packet::Probe(p)) => {
                            let r = h.rx.on_probe(&p);
                            let n = r.encode(true, &mut scratch).expect("encode");
                            Some(scratch[..n].to_vec())
                        }
                        _ => None,
                    }
                } else {
                    match DataHeader::decode(&pkt.bytes) {
                        Ok(header) => rx_data(
                            h,
                            s,
                            (pkt.plane, pkt.core),
                            &header,
                            None,
                            pkt.ce,
                            now,
                            &mut out,
                            &mut scratch,
                            sc.bin_ns,
                        ),
                        Err(e) => {
                            out.errors
                                .push(format!("decode error on valid header: {e:?}"));
                            None
                        }
                    }
                };
                // Completions, strictly in order, each exactly once.
                while let Some(c) = h.rx.pop_completion() {
                    let idx = h.rx_done;
                    if c.msn != idx as u32 {
                        out.errors.push(format!(
                            "sender {s}: completion msn {} expected {idx}",
                            c.msn
                        ));
                    }
                    if c.status != CompletionStatus::Success {
                        out.qp_errors += 1;
                    }
                    if let Some(m) = h.msgs.get(idx) {
                        if c.len != m.len || c.opcode != m.opcode {
                            out.errors
                                .push(format!("sender {s} msn {idx}: wrong length/opcode"));
                        }
                        if m.opcode.has_imm() && c.imm != Some(idx as u32) {
                            out.errors.push(format!("sender {s} msn {idx}: wrong imm"));
                        }
                        if c.rsn != m.rsn {
                            out.errors.push(format!("sender {s} msn {idx}: wrong rsn"));
                        }
                        out.payload_bytes += m.len as u64;
                    } else {
                        out.errors
                            .push(format!("sender {s}: completion beyond posted messages"));
                    }
                    if sc.check_payload {
                        match h.bufs.remove(&c.msn) {
                            Some((data, count)) => {
                                if count.iter().any(|&k| k != 1) {
                                    out.errors.push(format!(
                                        "sender {s} msn {}: bytes not placed exactly once",
                                        c.msn
                                    ));
                                }
                                if data
                                    .iter()
                                    .enumerate()
                                    .any(|(i, &b)| b != content(s, c.msn, i as u32))
                                {
                                    out.errors
                                        .push(format!("sender {s} msn {}: corrupt bytes", c.msn));
                                }
                            }
                            None if c.len == 0 => {}
                            None => out
                                .errors
                                .push(format!("sender {s} msn {}: nothing placed", c.msn)),
                        }
                    }
                    if let Some(d) = out.msg_done_ns.get_mut(s * sc.msgs_per_sender + idx) {
                        *d = now;
                    }
                    h.rx_done += 1;
                    completed += 1;
                    out.duration_ns = now;
                }
                if let Some(nak) = h.rx.pop_nak() {
                    let n = nak.encode(&mut scratch).expect("encode");
                    push(
                        &mut heap,
                        now + sc.core.prop_ns + sc.down.prop_ns,
                        Ev::ToSender {
                            s,
                            bytes: scratch[..n].to_vec(),
                        },
                    );
                }
                // The packet's own ACK (or PROBE_REPLY) first, then what
                // waited on other paths and goes now.
                let mut replies: Vec<(Route, Vec<u8>)> = reply
                    .map(|b| ((pkt.plane, pkt.core), b))
                    .into_iter()
                    .collect();
                replies.extend(flush_acks(h, now, &mut scratch));
                out.ack_frames += replies
                    .iter()
                    .filter(|(_, b)| b.get(1) == Some(&(Opcode::Ack as u8)))
                    .count() as u64;
                for ((plane, c), bytes) in replies {
                    if let (Some(a), Some(b)) = (
                        down[plane].control(&mut rng),
                        core[plane][c].control(&mut rng),
                    ) {
                        push(&mut heap, now + a + b, Ev::ToSender { s, bytes });
                    }
                }
                arm_ack_timer(&mut heap, &mut push, h, s, now);
            }
            Ev::ToSender { s, bytes } => {
                let h = &mut hosts[s];
                match parse_packet(&bytes) {
                    Ok(Packet::Ack(a)) => h.tx.on_ack(&a, now),
                    Ok(Packet::Nak(n)) => h.tx.on_nak(&n),
                    Ok(Packet::ProbeReply(p)) => h.tx.on_probe_reply(&p, now),
                    Ok(_) => {}
                    Err(e) => out
                        .errors
                        .push(format!("parse error on control packet: {e:?}")),
                }
                count_cuts(&mut h.tx, &mut out.cuts);
                while let Some(c) = h.tx.pop_completion() {
                    if c.status != CompletionStatus::Success {
                        out.qp_errors += 1;
                    }
                    if let Some(&t) = h.posted_at.get(h.tx_done) {
                        out.msg_latency_ns.push(now - t);
                    }
                    h.tx_done += 1;
                }
                post_more(h, sc.one_at_a_time, now);
                touched = Some(s);
            }
        }
        if let Some(s) = touched {
            let h = &mut hosts[s];
            for p in 0..sc.planes {
                if !h.port_busy[p] {
                    h.port_busy[p] = true;
                    push(&mut heap, now, Ev::PortFree { s, plane: p });
                }
            }
            continue_timer(&mut heap, &mut push, h, s, now);
            out.max_paths = out.max_paths.max(h.tx.path_count());
        }
        if completed == total_msgs {
            out.finished = true;
            break;
        }
    }

    for h in &hosts {
        let st = h.tx.stats();
        out.retx_packets += st.retransmits;
        out.retx_bytes += st.retransmit_bytes;
        out.timeouts += st.timeouts;
        out.spurious_timeouts += st.spurious_timeouts;
        out.delay_floor_raised += st.delay_floor_raised;
        out.sack_losses += st.sack_losses;
        out.paths_replaced += st.paths_replaced;
        out.duplicates += h.rx.stats().duplicates;
    }
    out.max_down_queue = down.iter().map(|l| l.max_backlog).max().unwrap_or(0);
    out.max_down_queue_steady = down.iter().map(|l| l.max_backlog_steady).max().unwrap_or(0);
    let (sum, n) = down.iter().fold((0u128, 0u64), |(s, n), l| {
        (s + l.backlog_sum, n + l.arrivals)
    });
    out.mean_down_queue = (sum / u128::from(n.max(1))) as u64;
    if let Some(h) = hosts.first() {
        out.planes_usable_at_end = (0..sc.planes).map(|p| h.tx.plane_usable(p as u8)).collect();
    }
    out.max_core_queue = core
        .iter()
        .flatten()
        .map(|l| l.max_backlog)
        .max()
        .unwrap_or(0);
    if out.duration_ns > 0 {
        out.goodput_gbps = out.payload_bytes as f64 * 8.0 / out.duration_ns as f64;
    }
    let used = (out.duration_ns / sc.bin_ns.max(1) + 1) as usize;
    out.bins.truncate(used);
    out
}

/// Arm the sender's timer event if its deadline moved earlier.
fn continue_timer(
    heap: &mut BinaryHeap<Item>,
    push: &mut impl FnMut(&mut BinaryHeap<Item>, u64, Ev),
    h: &mut Host,
    s: usize,
    now: u64,
) {
    let d = h.tx.next_deadline();
    arm(heap, push, &mut h.timer_at, d, now, Ev::Timer { s });
}

/// Arm the receiver's ACK timer if its deadline moved earlier.
fn arm_ack_timer(
    heap: &mut BinaryHeap<Item>,
    push: &mut impl FnMut(&mut BinaryHeap<Item>, u64, Ev),
    h: &mut Host,
    s: usize,
    now: u64,
) {
    let d = h.rx.ack_deadline();
    arm(heap, push, &mut h.ack_timer_at, d, now, Ev::AckTimer { s });
}

/// Schedule `ev` at `deadline` (not before `now`) unless the timer
/// `armed` already fires earlier.
fn arm(
    heap: &mut BinaryHeap<Item>,
    push: &mut impl FnMut(&mut BinaryHeap<Item>, u64, Ev),
    armed: &mut Option<u64>,
    deadline: Option<u64>,
    now: u64,
    ev: Ev,
) {
    if let Some(d) = deadline {
        let d = d.max(now);
        if armed.is_none_or(|t| d < t) {
            *armed = Some(d);
            push(heap, d, ev);
        }
    }
}

/// The ACKs the receiver sends now besides a packet's own, each with the
/// route of its path's last packet.
fn flush_acks(h: &mut Host, now: u64, scratch: &mut [u8]) -> Vec<(Route, Vec<u8>)> {
    let mut acks = Vec::new();
    while let Some(ack) = h.rx.flush(now) {
        if let (Some(&route), Ok(n)) = (h.routes.get(&ack.path_id), ack.encode(scratch)) {
            acks.push((route, scratch[..n].to_vec()));
        }
    }
    acks
}

#[allow(clippy::too_many_arguments)]
fn rx_data(
    h: &mut Host,
    s: usize,
    route: Route,
    header: &DataHeader,
    payload: Option<&[u8]>,
    ce: bool,
    now: u64,
    out: &mut Outcome,
    scratch: &mut [u8],
    bin_ns: u64,
) -> Option<Vec<u8>> {
    match h.rx.on_data(header, ce, now) {
        RxVerdict::Place(p) => {
            // A driver binds the receive buffer by rsn, from any packet.
            if h.msgs.get(p.msn as usize).is_none_or(|m| m.rsn != p.rsn) {
                out.errors
                    .push(format!("sender {s} msn {}: placement rsn {}", p.msn, p.rsn));
            }
            if let Some(b) = out.bins.get_mut((now / bin_ns.max(1)) as usize) {
                *b += p.len as u64;
            }
            if let Some(payload) = payload {
                let (data, count) = h
                    .bufs
                    .entry(p.msn)
                    .or_insert_with(|| (vec![0; p.msg_len as usize], vec![0; p.msg_len as usize]));
                let start = p.offset as usize;
                let end = start + p.len as usize;
                if end > data.len() || payload.len() != p.len as usize {
                    out.errors
                        .push(format!("sender {s}: placement out of bounds"));
                } else {
                    data[start..end].copy_from_slice(payload);
                    for k in &mut count[start..end] {
                        *k = k.saturating_add(1);
                    }
                }
            }
        }
        RxVerdict::Duplicate | RxVerdict::Discard => {}
        RxVerdict::Drop(r) => {
            out.errors
                .push(format!("sender {s}: valid packet dropped: {r:?}"));
            return None;
        }
    }
    h.routes.insert(header.path_id, route);
    let ack = h.rx.ack_now(header.path_id)?;
    let n = ack.encode(scratch).ok()?;
    Some(scratch[..n].to_vec())
}

/// Takes the sender's events, counting its window cuts by cause.
fn count_cuts(tx: &mut Sender, cuts: &mut [u64; 4]) {
    while let Some(ev) = tx.pop_event() {
        if let SenderEvent::WindowDecrease { cause, .. } = ev {
            cuts[match cause {
                CutCause::Ecn => 0,
                CutCause::Delay => 1,
                CutCause::Loss => 2,
                CutCause::Timeout => 3,
            }] += 1;
        }
    }
}
