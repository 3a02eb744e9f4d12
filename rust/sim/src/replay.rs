//! Replay: re-drive one host's capture through the engine and report where
//! the engine would have behaved otherwise.
//!
//! A capture taken at one host (its tap: what it sent and what it received,
//! in the order it handled them) is replayed by a fresh [`Host`] (the
//! engine's `Sender` and `Receiver` with the driver's rules, host.rs): every
//! received packet is fed to it at its capture time, its timers run at
//! their deadlines in between, and at every packet the capture shows it
//! sending, it is asked for its next packet on that plane. What is compared:
//!
//! * a sent control packet (ACK, NAK, PROBE, PROBE_REPLY, PLANES): every
//!   byte, the UDP source port, the destination address and the plane;
//! * a sent data packet: the 56 header bytes (so opcode, flags, path,
//!   PSN, floor, MSN, offset, lengths, timestamp...), source port,
//!   destination and plane; its payload is the verbs layer's, so it is only
//!   checked to be the same in every transmission of a packet (MSN, offset);
//! * a sent packet must be valid (`wire::parse_packet`);
//! * control packets the engine still had queued when the capture ends;
//! * received packets the host drops (parse errors, receiver drop reasons,
//!   not from the peer, QP in error) are listed, not counted as differences.
//!
//! Given the peer's capture too, each direction is also cross-checked: a
//! packet one host received that the other never sent is a difference;
//! packets sent and not received are listed as lost in the network.
//!
//! What is taken from the capture rather than the engine (not on the wire,
//! or the verbs layer's): the QP numbers, addresses, planes (from the
//! host's PLANES), initial PSNs (the lowest MSN of each direction), the MTU
//! (the largest payload, unless given), the engine configuration (the
//! defaults and the driver's entropy seed, host::sender_config); the host's
//! own work requests are posted when the capture shows their first packet
//! (their post time is not on the wire, so a message the engine would have
//! sent earlier than the capture shows is not detected); and which messages
//! the verbs layer refused: a message the host NAKs in the capture is
//! failed at the packet its first NAK names. A pull that found nothing is
//! not in a capture: the engine's window-limited flag (path growth, 4.4)
//! is not reproduced.

use std::collections::HashMap;
use std::fmt;

use metaroce_engine::completion::{RxCompletion, TxCompletion};
use metaroce_engine::config::{SenderConfig, MSG_WINDOW_MAX};
use metaroce_engine::receiver::Placement;
use metaroce_engine::sender::Message;
use metaroce_engine::seq::seq_diff;
use metaroce_engine::wire::{
    parse_packet, DataHeader, Packet, Syndrome, DATA_HEADER_LEN, MAX_PLANES, UDP_PORT,
};

use super::duplex::is_router;
use super::host::{Dropped, Host, HostConfig, OutPkt, Verbs};
use super::pcap::{Capture, Frame};
use super::show;

/// Replay options.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Addresses of the capturing host (needed for captures not written by
    /// the simulator, whose frames do not name its router).
    pub local: Vec<[u8; 4]>,
    /// Payload MTU of the connection (default: the largest payload seen).
    pub mtu: Option<u32>,
}

/// A difference between the capture and the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diff {
    /// Frame number in its file (1-based), if one.
    pub frame: Option<usize>,
    /// Capture time (ns).
    pub t_ns: u64,
    /// What differs.
    pub what: String,
}

impl fmt::Display for Diff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.frame {
            Some(n) => write!(f, "frame {n} at {}: {}", secs(self.t_ns), self.what),
            None => write!(f, "at {}: {}", secs(self.t_ns), self.what),
        }
    }
}

fn secs(t: u64) -> String {
    format!("{}.{:09}", t / 1_000_000_000, t % 1_000_000_000)
}

fn ip(a: &[u8; 4]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

/// The replay of one capture.
#[derive(Clone, Debug, Default)]
pub struct TapReport {
    /// File name.
    pub name: String,
    /// The connection as reconstructed.
    pub setup: String,
    /// MetaRoCE frames the host sent (each compared).
    pub sent: usize,
    /// MetaRoCE frames the host received (each fed to it).
    pub received: usize,
    /// Other frames (not IPv4/UDP/4792, or not the host's).
    pub other: usize,
    /// Received packets the host dropped: frame number and reason.
    pub drops: Vec<(usize, String)>,
    /// Differences.
    pub diffs: Vec<Diff>,
}

/// The whole replay.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// One per capture.
    pub taps: Vec<TapReport>,
    /// Cross-check of two captures: packets received that were never sent.
    pub cross: Vec<Diff>,
    /// Cross-check notes: lost and duplicated in the network.
    pub network: Vec<String>,
}

impl Report {
    /// Differences found.
    pub fn differences(&self) -> usize {
        self.taps.iter().map(|t| t.diffs.len()).sum::<usize>() + self.cross.len()
    }
}

/// How many differences of one kind are printed.
const SHOWN: usize = 20;

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for t in &self.taps {
            writeln!(f, "{}: {}", t.name, t.setup)?;
            writeln!(
                f,
                "  {} sent (compared with the engine's), {} received (fed to it), {} other frames",
                t.sent, t.received, t.other
            )?;
            for (n, why) in t.drops.iter().take(SHOWN) {
                writeln!(f, "  frame {n}: the host drops it: {why}")?;
            }
            if t.drops.len() > SHOWN {
                writeln!(f, "  ... {} more drops", t.drops.len() - SHOWN)?;
            }
            writeln!(f, "  {} differences", t.diffs.len())?;
            for d in t.diffs.iter().take(SHOWN) {
                writeln!(f, "  {d}")?;
            }
            if t.diffs.len() > SHOWN {
                writeln!(f, "  ... {} more (after the first difference the engine's state and the capture's diverge)", t.diffs.len() - SHOWN)?;
            }
        }
        for n in &self.network {
            writeln!(f, "{n}")?;
        }
        for d in self.cross.iter().take(SHOWN) {
            writeln!(f, "{d}")?;
        }
        write!(f, "replay: {} differences", self.differences())
    }
}

/// The verbs layer of a replayed host: it places everything, except the
/// messages the capture shows it NAKing (failed at the packet the first
/// NAK names).
#[derive(Default)]
struct ReplayVerbs {
    refused: HashMap<u32, (u16, u32, Syndrome)>,
}

impl Verbs for ReplayVerbs {
    fn place(&mut self, p: &Placement, h: &DataHeader, _: &[u8]) -> Result<(), Syndrome> {
        match self.refused.get(&p.msn) {
            Some(&(path, psn, s)) if path == h.path_id && psn == h.psn => Err(s),
            _ => Ok(()),
        }
    }
    fn received(&mut self, _: &RxCompletion) {}
    fn sent(&mut self, _: &TxCompletion) {}
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Sent,
    Received,
}

/// A MetaRoCE frame of the tap: number, direction, frame.
type Tapped<'a> = (usize, Dir, &'a Frame);

/// The capturing host's addresses: given, or the frames to and from the
/// simulator's router.
fn local_addrs(cap: &Capture, opts: &Options) -> Option<Vec<[u8; 4]>> {
    if !opts.local.is_empty() {
        return Some(opts.local.clone());
    }
    let mut v = Vec::new();
    for (_, f) in &cap.frames {
        let a = if is_router(&f.dst_mac) {
            f.src
        } else if is_router(&f.src_mac) {
            f.dst
        } else {
            continue;
        };
        if !v.contains(&a) {
            v.push(a);
        }
    }
    (!v.is_empty()).then_some(v)
}

fn serial_min(v: impl Iterator<Item = u32>) -> Option<u32> {
    v.reduce(|m, x| if seq_diff(x, m) < 0 { x } else { m })
}

fn data_of(f: &Frame) -> Option<DataHeader> {
    match parse_packet(&f.payload) {
        Ok(Packet::Data { header, .. }) => Some(header),
        _ => None,
    }
}

/// The connection setup a tap implies.
fn setup(tap: &[Tapped<'_>], local: &[[u8; 4]], opts: &Options) -> Result<HostConfig, String> {
    let mut qpn = None;
    let mut peer_qpn = None;
    let one = |slot: &mut Option<u32>, q: u32, what: &str| -> Result<(), String> {
        match *slot {
            _ if q == 0 => Ok(()),
            None => {
                *slot = Some(q);
                Ok(())
            }
            Some(x) if x == q => Ok(()),
            Some(x) => Err(format!(
                "packets {what} QPs {x:#x} and {q:#x}: replay takes one connection per capture"
            )),
        }
    };
    let mut addrs: Option<Vec<[u8; 4]>> = None;
    for &(_, dir, f) in tap {
        let Ok(p) = parse_packet(&f.payload) else {
            continue;
        };
        let dst = match p {
            Packet::Data { header, .. } => header.dst_qpn,
            Packet::Ack(a) => a.dst_qpn,
            Packet::Nak(n) => n.dst_qpn,
            Packet::Probe(x) | Packet::ProbeReply(x) => x.dst_qpn,
            Packet::Planes(pl) => {
                if dir == Dir::Sent && addrs.is_none() {
                    let list = pl.addrs[..usize::from(pl.count).min(MAX_PLANES)]
                        .iter()
                        .map(|g| [g[12], g[13], g[14], g[15]])
                        .collect();
                    addrs = Some(list);
                    one(&mut qpn, pl.src_qpn, "from")?;
                }
                pl.dst_qpn
            }
        };
        match dir {
            Dir::Sent => one(&mut peer_qpn, dst, "to")?,
            Dir::Received => one(&mut qpn, dst, "to")?,
        }
    }
    let addrs = match addrs {
        Some(a) => a,
        None if local.len() == 1 => local.to_vec(),
        None => {
            return Err("several local addresses but no PLANES sent: which plane is which?".into())
        }
    };
    let plane0 = addrs[0];
    let peer = tap
        .iter()
        .find_map(|&(_, dir, f)| match dir {
            Dir::Sent if f.src == plane0 => Some(f.dst),
            Dir::Received if f.dst == plane0 => Some(f.src),
            _ => None,
        })
        .ok_or("no packet on plane 0")?;
    // M is not on the wire: a packet that is not its message's last
    // carries exactly M bytes (as the dissector learns it); if every
    // message is one packet, any M from the largest payload up behaves the
    // same, so the default.
    let data: Vec<DataHeader> = tap.iter().filter_map(|t| data_of(t.2)).collect();
    let mtu = opts
        .mtu
        .or_else(|| {
            data.iter()
                .find(|h| h.offset + u32::from(h.payload_len) < h.msg_len)
                .map(|h| u32::from(h.payload_len))
        })
        .unwrap_or_else(|| {
            let largest = data.iter().map(|h| u32::from(h.payload_len)).max();
            largest.unwrap_or(0).max(SenderConfig::DEFAULT.mtu)
        })
        .max(1);
    let first = |want: Dir| {
        serial_min(
            tap.iter()
                .filter(|t| t.1 == want)
                .filter_map(|t| data_of(t.2))
                .map(|h| h.msn),
        )
        .unwrap_or(0)
    };
    Ok(HostConfig {
        qpn: qpn.ok_or("no packet names the capturing host's QP")?,
        peer_qpn: peer_qpn.ok_or("the host sends nothing to a QP")?,
        mtu,
        addrs,
        peer,
        sq_psn: first(Dir::Sent),
        rq_psn: first(Dir::Received),
        // The window the host's ACKs advertised (protocol.md 1.4).
        msg_window: tap
            .iter()
            .filter(|t| t.1 == Dir::Sent)
            .find_map(|t| match parse_packet(&t.2.payload) {
                Ok(Packet::Ack(a)) => Some(usize::from(a.msg_window)),
                _ => None,
            })
            .unwrap_or(MSG_WINDOW_MAX),
    })
}

fn dropped(d: &Dropped) -> String {
    match d {
        Dropped::Parse(e) => format!("invalid packet ({e:?})"),
        Dropped::Receiver(r) => format!("receiver drop reason {r:?} (no ACK)"),
        Dropped::NotPeer => "not from the peer's address on its plane (rx_not_peer)".into(),
        Dropped::QpInError => "QP in error (rx_qp_in_error)".into(),
    }
}

/// Replay one capture (`name` for the report).
pub fn replay_tap(name: &str, cap: &Capture, opts: &Options) -> Result<TapReport, String> {
    let local = local_addrs(cap, opts).ok_or_else(|| {
        format!("{name}: cannot tell which host captured it (no frame to or from the simulator's router): give --local ADDR")
    })?;
    let mut rep = TapReport {
        name: name.into(),
        ..TapReport::default()
    };
    let mut tap: Vec<Tapped<'_>> = Vec::new();
    for (n, f) in &cap.frames {
        let dir = match (local.contains(&f.src), local.contains(&f.dst)) {
            _ if f.dst_port != UDP_PORT => None,
            (true, false) => Some(Dir::Sent),
            (false, true) => Some(Dir::Received),
            _ => None,
        };
        match dir {
            Some(d) => tap.push((*n, d, f)),
            None => rep.other += 1,
        }
    }
    rep.other += cap.skipped;
    let cfg = setup(&tap, &local, opts).map_err(|e| format!("{name}: {e}"))?;
    rep.setup = format!(
        "host {} QP {:#x}, peer {} QP {:#x}; {} plane(s), MTU {}, MSNs from {} (peer's from {})",
        ip(&cfg.addrs[0]),
        cfg.qpn,
        ip(&cfg.peer),
        cfg.peer_qpn,
        cfg.addrs.len(),
        cfg.mtu,
        cfg.sq_psn,
        cfg.rq_psn
    );
    // Our own messages, posted when their first packet goes out.
    let mut own: Vec<(u32, Message)> = Vec::new();
    let mut verbs = ReplayVerbs::default();
    for &(_, dir, f) in &tap {
        match (dir, parse_packet(&f.payload)) {
            (Dir::Sent, Ok(Packet::Data { header: h, .. }))
                if !h.opcode.is_response() && !own.iter().any(|o| o.0 == h.msn) =>
            {
                own.push((
                    h.msn,
                    Message {
                        opcode: h.opcode,
                        len: h.msg_len,
                        remote_va: h.remote_va,
                        rkey: h.rkey,
                        imm: h.imm,
                        rsn: h.rsn,
                    },
                ));
            }
            (Dir::Sent, Ok(Packet::Nak(k))) => {
                verbs
                    .refused
                    .entry(k.msn)
                    .or_insert((k.path_id, k.psn, k.syndrome));
            }
            _ => {}
        }
    }
    own.sort_by_key(|o| o.0.wrapping_sub(cfg.sq_psn));
    let planes = cfg.addrs.clone();
    let mut host = Host::new(cfg, verbs, 0).map_err(|e| format!("{name}: engine config: {e:?}"))?;
    let mut next_own = 0usize;
    let mut clock = 0u64;
    let mut payloads: HashMap<(u32, u32), &[u8]> = HashMap::new();
    for &(n, dir, f) in &tap {
        let t = f.t_ns;
        if t < clock {
            rep.diffs.push(Diff {
                frame: Some(n),
                t_ns: t,
                what: "earlier than the frame before it: replay needs capture order".into(),
            });
        }
        // Timers due up to this frame run first (the simulator's order).
        let mut guard = 0;
        while let Some(d) = host.next_deadline() {
            let at = d.max(clock);
            if at > t || guard > 10_000 {
                break;
            }
            host.timer(at);
            clock = at;
            guard += 1;
        }
        clock = clock.max(t);
        let addr = if dir == Dir::Sent { f.src } else { f.dst };
        let Some(plane) = planes.iter().position(|a| *a == addr) else {
            rep.diffs.push(Diff {
                frame: Some(n),
                t_ns: t,
                what: format!("address {} is on no plane of the host", ip(&addr)),
            });
            continue;
        };
        let plane = plane as u8;
        if dir == Dir::Received {
            rep.received += 1;
            let before = host.drops.len();
            host.ingress(t, plane, f.src, f.src_port, &f.payload, f.ecn == 3);
            for (_, d) in &host.drops[before..] {
                rep.drops.push((n, dropped(d)));
            }
            continue;
        }
        rep.sent += 1;
        let parsed = parse_packet(&f.payload);
        if let Err(e) = &parsed {
            rep.diffs.push(Diff {
                frame: Some(n),
                t_ns: t,
                what: format!("the capture sends an invalid packet ({e:?})"),
            });
        }
        let header = DataHeader::decode(&f.payload).ok();
        if let Some(h) = header.filter(|h| !h.opcode.is_response()) {
            while let Some((msn, m)) = own.get(next_own) {
                if seq_diff(*msn, h.msn) > 0 {
                    break;
                }
                match host.post(m) {
                    Ok(got) if got == *msn => {}
                    r => rep.diffs.push(Diff {
                        frame: Some(n),
                        t_ns: t,
                        what: format!(
                            "posting message {msn} of the capture: the engine says {r:?}"
                        ),
                    }),
                }
                next_own += 1;
            }
        }
        if let Ok(Packet::Data { header: h, payload }) = parsed {
            let first = payloads.entry((h.msn, h.offset)).or_insert(payload);
            if *first != payload {
                rep.diffs.push(Diff {
                    frame: Some(n),
                    t_ns: t,
                    what: format!(
                        "{}: other payload bytes than the first transmission of this packet",
                        show::data(&h)
                    ),
                });
            }
        }
        let out = host.pull(t, plane);
        if let Some(what) = compare(out.as_ref(), f, plane) {
            rep.diffs.push(Diff {
                frame: Some(n),
                t_ns: t,
                what,
            });
        }
    }
    for o in host.take_control() {
        if let OutPkt::Control(b) = &o.pkt {
            rep.diffs.push(Diff {
                frame: None,
                t_ns: clock,
                what: format!(
                    "the engine would also send {} (plane {}), not in the capture",
                    show::packet(b),
                    o.plane
                ),
            });
        }
    }
    Ok(rep)
}

/// What differs between the engine's next packet and the captured one.
fn compare(out: Option<&super::host::Out>, f: &Frame, plane: u8) -> Option<String> {
    let captured = show::packet(&f.payload);
    let Some(o) = out else {
        return Some(format!(
            "the capture sends {captured}; the engine has nothing to send on plane {plane}"
        ));
    };
    let (same, engine) = match &o.pkt {
        OutPkt::Control(b) => (*b == f.payload, show::packet(b)),
        OutPkt::Data(h) => {
            let mut b = [0u8; DATA_HEADER_LEN];
            let ok = h.encode(&mut b).is_ok();
            (
                ok && f.payload.get(..DATA_HEADER_LEN) == Some(&b[..]),
                show::data(h),
            )
        }
    };
    let mut route = Vec::new();
    if o.src_port != f.src_port {
        route.push(format!(
            "source port {} (capture {})",
            o.src_port, f.src_port
        ));
    }
    if o.dst != f.dst {
        route.push(format!("to {} (capture {})", ip(&o.dst), ip(&f.dst)));
    }
    if o.plane != plane {
        route.push(format!("plane {} (capture {plane})", o.plane));
    }
    if same && route.is_empty() {
        return None;
    }
    let mut s = format!("the capture sends {captured}; the engine sends {engine}");
    if !route.is_empty() {
        s += &format!(" with {}", route.join(", "));
    }
    Some(s)
}

/// Frames of `c` from one of `from` to one of `to`.
fn between<'c>(
    c: &'c Capture,
    from: &'c [[u8; 4]],
    to: &'c [[u8; 4]],
) -> impl Iterator<Item = &'c (usize, Frame)> {
    c.frames.iter().filter(move |(_, f)| {
        f.dst_port == UDP_PORT && from.contains(&f.src) && to.contains(&f.dst)
    })
}

/// One direction of the cross-check: what `rn` received from `sn`.
fn cross(s: (&str, &Capture, &[[u8; 4]]), r: (&str, &Capture, &[[u8; 4]]), rep: &mut Report) {
    type Key<'k> = ([u8; 4], [u8; 4], u16, &'k [u8]);
    let (sn, sc, sl) = s;
    let (rn, rc, rl) = r;
    let mut sent: HashMap<Key<'_>, usize> = HashMap::new();
    let mut nsent = 0;
    for (_, f) in between(sc, sl, rl) {
        *sent
            .entry((f.src, f.dst, f.src_port, &f.payload))
            .or_default() += 1;
        nsent += 1;
    }
    let mut got: HashMap<Key<'_>, usize> = HashMap::new();
    let (mut ngot, mut dup) = (0, 0);
    for (n, f) in between(rc, sl, rl) {
        ngot += 1;
        let k = (f.src, f.dst, f.src_port, f.payload.as_slice());
        let seen = got.entry(k).or_default();
        *seen += 1;
        match sent.get(&k) {
            Some(&total) if *seen > total => dup += 1,
            Some(_) => {}
            None => rep.cross.push(Diff {
                frame: Some(*n),
                t_ns: f.t_ns,
                what: format!(
                    "{rn} received {}, which {sn} never sent",
                    show::packet(&f.payload)
                ),
            }),
        }
    }
    // Of identical packets, the first ones count as received.
    let mut lost = Vec::new();
    for (n, f) in between(sc, sl, rl) {
        match got.get_mut(&(f.src, f.dst, f.src_port, f.payload.as_slice())) {
            Some(c) if *c > 0 => *c -= 1,
            _ => lost.push(n.to_string()),
        }
    }
    let shown = lost.len().min(SHOWN);
    rep.network.push(format!(
        "{sn} -> {rn}: {nsent} sent, {ngot} received, {} lost in the network{}, {dup} duplicated by it",
        lost.len(),
        if lost.is_empty() {
            String::new()
        } else {
            format!(
                " ({sn} frames {}{})",
                lost[..shown].join(", "),
                if lost.len() > shown { ", ..." } else { "" }
            )
        }
    ));
}

/// Replay a capture, and with the peer's capture both and their
/// cross-check. `opts.local` names the first capture's host; the second's
/// is found from the simulator's router, or else is every other address
/// of its file.
pub fn replay(
    a: (&str, &Capture),
    b: Option<(&str, &Capture)>,
    opts: &Options,
) -> Result<Report, String> {
    let mut rep = Report::default();
    rep.taps.push(replay_tap(a.0, a.1, opts)?);
    let Some(b) = b else {
        return Ok(rep);
    };
    let la = local_addrs(a.1, opts).unwrap_or_default();
    let lb = local_addrs(b.1, &Options::default()).unwrap_or_else(|| {
        let mut v: Vec<[u8; 4]> = Vec::new();
        for (_, f) in &b.1.frames {
            for x in [f.src, f.dst] {
                if f.dst_port == UDP_PORT && !la.contains(&x) && !v.contains(&x) {
                    v.push(x);
                }
            }
        }
        v
    });
    let bo = Options {
        local: lb.clone(),
        ..opts.clone()
    };
    rep.taps.push(replay_tap(b.0, b.1, &bo)?);
    cross((a.0, a.1, &la), (b.0, b.1, &lb), &mut rep);
    cross((b.0, b.1, &lb), (a.0, a.1, &la), &mut rep);
    Ok(rep)
}
