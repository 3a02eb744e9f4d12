//! The named two-host scenarios: each shows one part of the spec, in a
//! capture small enough to read packet by packet. They are the golden
//! captures (tools/golden/NAME/{a,b}.pcap, checked byte for byte by
//! `cargo test -p metaroce-sim --test golden`), and `metaroce-sim run NAME`
//! writes them for any seed. Each has a check of what it claims.

use metaroce_engine::completion::CompletionStatus;
use metaroce_engine::config::MSG_WINDOW_V1;
use metaroce_engine::receiver::DropReason;
use metaroce_engine::wire::{parse_packet, Opcode, Packet, Syndrome, FLAG_RETRANSMIT};

use super::duplex::{
    addr, Action, Fault, LinkFailure, Op, OpKind, Outcome, Scenario, A, ATOMIC_INIT, B,
};
use super::host::Dropped;
use super::pcap::Frame;

/// A named scenario.
pub struct Capture {
    /// Name (the golden capture's directory).
    pub name: &'static str,
    /// The spec sections it shows.
    pub sections: &'static str,
    /// One line on what it shows.
    pub summary: &'static str,
    /// The seed of its golden capture (each its own, so that the captures'
    /// QPNs and PSNs differ).
    pub seed: u64,
    /// The scenario for a seed.
    pub scenario: fn(u64) -> Scenario,
    /// What the run must show (with its golden seed; other seeds route
    /// packets otherwise).
    pub check: fn(&Outcome) -> Result<(), String>,
}

/// Every named scenario.
pub fn all() -> Vec<Capture> {
    vec![
        Capture {
            name: "spray",
            seed: 1501,
            sections: "4.1, 3.2, 3.3, 3.4",
            summary: "one WRITE sprayed over 4 paths, placed in arrival order, completed once",
            scenario: spray,
            check: check_spray,
        },
        Capture {
            name: "sack",
            seed: 1511,
            sections: "3.1, 3.4, 4.1, 4.2",
            summary: "two lost packets: SACK holes, exactly those two resent, on other paths",
            scenario: sack,
            check: check_sack,
        },
        Capture {
            name: "nak-verdict",
            seed: 1503,
            sections: "1.5, 3.2, 4.2, 4.3",
            summary: "a WRITE with a bad rkey: its NAK is lost, the verdict probe draws it again",
            scenario: nak_verdict,
            check: check_nak_verdict,
        },
        Capture {
            name: "planes",
            seed: 1504,
            sections: "1.8, 2, 4.3",
            summary: "two planes: PLANES exchange (first one lost), then plane 1's paths probe and carry data",
            scenario: planes,
            check: check_planes,
        },
        Capture {
            name: "path-fail",
            seed: 1510,
            sections: "1.6, 4.3",
            summary: "a link fails: RTO, three unanswered probes, the path replaced on a new port",
            scenario: path_fail,
            check: check_path_fail,
        },
        Capture {
            name: "atomics",
            seed: 1506,
            sections: "5.1, 3.2, 3.3",
            summary: "FETCH_ADD, CMP_SWAP, FETCH_ADD: a duplicated request and a lost response, each executed once",
            scenario: atomics,
            check: check_atomics,
        },
        Capture {
            name: "late-dup",
            seed: 1507,
            sections: "3.2",
            summary: "late copies of a packet: a duplicate (ACKed, not placed), then out of window (dropped)",
            scenario: late_dup,
            check: check_late_dup,
        },
    ]
}

/// The named scenario.
pub fn find(name: &str) -> Option<Capture> {
    all().into_iter().find(|c| c.name == name)
}

fn write(len: u32, off: u32) -> OpKind {
    OpKind::Write {
        len,
        off,
        bad_key: false,
    }
}

fn at(at_ns: u64, kind: OpKind) -> Op {
    Op { at_ns, kind }
}

/// The data packets host `h` sent, with their time.
fn sent_data(o: &Outcome, h: usize) -> Vec<(u64, metaroce_engine::wire::DataHeader)> {
    o.taps[h]
        .iter()
        .filter(|f| f.src == addr(h, f.src[2]))
        .filter_map(|f| match parse_packet(&f.payload) {
            Ok(Packet::Data { header, .. }) => Some((f.t_ns, header)),
            _ => None,
        })
        .collect()
}

/// The packets host `h` received.
fn received<'a>(o: &'a Outcome, h: usize) -> impl Iterator<Item = (&'a Frame, Packet<'a>)> {
    o.taps[h]
        .iter()
        .filter(move |f| f.dst == addr(h, f.dst[2]))
        .filter_map(|f| parse_packet(&f.payload).ok().map(|p| (f, p)))
}

fn clean(o: &Outcome) -> Result<(), String> {
    let errors: Vec<&String> = o.verbs.iter().flat_map(|v| &v.errors).collect();
    if !errors.is_empty() {
        return Err(format!("verbs errors: {errors:?}"));
    }
    if !o.finished {
        return Err("A's work requests did not all complete".into());
    }
    Ok(())
}

fn ensure(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(what())
    }
}

// spray: 4.1 spraying, 3.2 placement in any order.
fn spray(seed: u64) -> Scenario {
    let mut sc = Scenario::new("spray", seed);
    sc.link_delay_ns = vec![1_000, 6_000, 2_500, 4_000];
    sc.ops = vec![at(0, write(16 * 256, 0))];
    sc
}

fn check_spray(o: &Outcome) -> Result<(), String> {
    clean(o)?;
    let offs: Vec<u32> = received(o, B)
        .filter_map(|(_, p)| match p {
            Packet::Data { header, .. } => Some(header.offset),
            _ => None,
        })
        .collect();
    ensure(offs.len() == 16, || {
        format!("{} data packets at B", offs.len())
    })?;
    ensure(offs.windows(2).any(|w| w[1] < w[0]), || {
        format!("arrived in offset order: {offs:?}")
    })?;
    let paths: std::collections::BTreeSet<u16> =
        sent_data(o, A).iter().map(|(_, h)| h.path_id).collect();
    ensure(paths.len() == 4, || format!("paths used: {paths:?}"))?;
    ensure(o.tx_stats[A].retransmits == 0, || "retransmissions".into())
}

// sack: 3.1 SACK, 4.2 loss detection, selective retransmission.
// Packets 25 and 26 of 32: PSN 6 of paths 1 and 2, each followed by one
// more packet on its path (whose ACK shows the hole).
const SACK_LOST: [u32; 2] = [25 * 256, 26 * 256];

fn sack(seed: u64) -> Scenario {
    let mut sc = Scenario::new("sack", seed);
    sc.ops = vec![at(0, write(32 * 256, 0))];
    let pick = |off: u32| -> fn(&Packet<'_>, &Scenario) -> bool {
        if off == SACK_LOST[0] {
            |p, sc| matches!(p, Packet::Data { header, .. } if header.msn == sc.msn_a(0) && header.offset == SACK_LOST[0])
        } else {
            |p, sc| matches!(p, Packet::Data { header, .. } if header.msn == sc.msn_a(0) && header.offset == SACK_LOST[1])
        }
    };
    sc.faults = SACK_LOST
        .iter()
        .map(|&off| Fault {
            from: A,
            pick: pick(off),
            nth: 1,
            action: Action::Drop,
        })
        .collect();
    sc
}

fn check_sack(o: &Outcome) -> Result<(), String> {
    clean(o)?;
    let st = &o.tx_stats[A];
    ensure(st.timeouts == 0, || format!("{} RTOs", st.timeouts))?;
    ensure(st.sack_losses == 2 && st.retransmits == 2, || {
        format!(
            "{} SACK losses, {} retransmits",
            st.sack_losses, st.retransmits
        )
    })?;
    let data = sent_data(o, A);
    let mut resent: Vec<u32> = data
        .iter()
        .filter(|(_, h)| h.flags & FLAG_RETRANSMIT != 0)
        .map(|(_, h)| h.offset)
        .collect();
    resent.sort_unstable();
    ensure(resent == SACK_LOST, || format!("resent offsets {resent:?}"))?;
    // Each resent on a path other than the one it was lost on.
    for off in SACK_LOST {
        let on: Vec<u16> = data
            .iter()
            .filter(|(_, h)| h.offset == off)
            .map(|(_, h)| h.path_id)
            .collect();
        ensure(on.len() == 2 && on[0] != on[1], || {
            format!("offset {off} sent on paths {on:?}")
        })?;
    }
    let holes = received(o, A).any(|(_, p)| matches!(p, Packet::Ack(a) if a.sack != [0; 4]));
    ensure(holes, || "no ACK with SACK bits".into())
}

// nak-verdict: 3.2 failure, 1.5 NAK, 4.3 verdict probe.
fn nak_verdict(seed: u64) -> Scenario {
    let mut sc = Scenario::new("nak-verdict", seed);
    sc.ops = vec![
        at(0, write(2 * 256, 0)),
        at(
            0,
            OpKind::Write {
                len: 200,
                off: 4096,
                bad_key: true,
            },
        ),
    ];
    sc.faults = vec![Fault {
        from: B,
        pick: |p, _| matches!(p, Packet::Nak(_)),
        nth: 1,
        action: Action::Drop,
    }];
    sc
}

fn check_nak_verdict(o: &Outcome) -> Result<(), String> {
    ensure(o.faults_applied == 1, || "the NAK was not dropped".into())?;
    ensure(o.tx_stats[A].verdict_probes >= 1, || {
        "no verdict probe".into()
    })?;
    let st: Vec<CompletionStatus> = o.verbs[A].sent.iter().map(|c| c.status).collect();
    ensure(
        st == [
            CompletionStatus::Success,
            CompletionStatus::Failed(Syndrome::RemoteAccess),
        ],
        || format!("A's completions {st:?}"),
    )?;
    let naks = received(o, A)
        .filter(|(_, p)| matches!(p, Packet::Nak(_)))
        .count();
    ensure(naks == 1, || format!("{naks} NAKs reached A"))?;
    ensure(o.failed == [true, true], || "both QPs in error".into())?;
    ensure(
        o.drops[B].contains(&(o.drops[B][0].0, Dropped::QpInError)),
        || "B did not see the probe in error".into(),
    )
}

// planes: 1.8.
fn planes(seed: u64) -> Scenario {
    let mut sc = Scenario::new("planes", seed);
    sc.planes = 2;
    sc.ops = vec![at(0, write(16 * 256, 0)), at(40_000, write(16 * 256, 8192))];
    sc.faults = vec![Fault {
        from: A,
        pick: |p, _| matches!(p, Packet::Planes(_)),
        nth: 1,
        action: Action::Drop,
    }];
    sc
}

fn check_planes(o: &Outcome) -> Result<(), String> {
    clean(o)?;
    // A probes or sends on plane 1 only after B's PLANES with KNOWN.
    let tap = &o.taps[A];
    let known = tap
        .iter()
        .position(|f| matches!(parse_packet(&f.payload), Ok(Packet::Planes(pl)) if pl.known && f.dst[3] == 1))
        .ok_or("A never got KNOWN")?;
    let own = |f: &Frame| {
        f.src == addr(A, 1)
            && matches!(
                parse_packet(&f.payload),
                Ok(Packet::Probe(_) | Packet::Data { .. })
            )
    };
    let first = tap
        .iter()
        .position(own)
        .ok_or("A sent nothing on plane 1")?;
    ensure(first > known, || "plane 1 used before KNOWN".into())?;
    let data = tap[first..]
        .iter()
        .filter(|f| own(f) && matches!(parse_packet(&f.payload), Ok(Packet::Data { .. })))
        .count();
    ensure(data > 0, || "no data on plane 1".into())?;
    ensure(o.faults_applied == 1, || "first PLANES not dropped".into())
}

// path-fail: 4.3 RTO, probing, replacement.
fn path_fail(seed: u64) -> Scenario {
    let mut sc = Scenario::new("path-fail", seed);
    sc.ops = vec![
        at(0, write(8 * 256, 0)),
        at(30_000, write(16 * 256, 4096)),
        at(200_000_000, write(16 * 256, 8192)),
    ];
    sc.link_failure = Some(LinkFailure {
        plane: 0,
        slot: 1,
        at_ns: 20_000,
    });
    sc
}

fn check_path_fail(o: &Outcome) -> Result<(), String> {
    clean(o)?;
    let st = &o.tx_stats[A];
    ensure(
        st.timeouts >= 1 && st.paths_replaced >= 1 && st.probes >= 4,
        || {
            format!(
                "{} RTOs, {} replaced, {} probes",
                st.timeouts, st.paths_replaced, st.probes
            )
        },
    )?;
    let new_gen = sent_data(o, A).iter().any(|(_, h)| h.path_id >> 6 >= 1);
    ensure(new_gen, || "no data on a replaced path".into())?;
    let replies = received(o, A)
        .filter(|(_, p)| matches!(p, Packet::ProbeReply(_)))
        .count();
    ensure(replies >= 1, || "no PROBE_REPLY".into())
}

// atomics: 5.1 exactly once.
fn atomics(seed: u64) -> Scenario {
    let mut sc = Scenario::new("atomics", seed);
    sc.ops = vec![
        at(0, OpKind::FetchAdd { add: 5 }),
        at(
            0,
            OpKind::CmpSwap {
                compare: ATOMIC_INIT + 5,
                swap: 7,
            },
        ),
        at(0, OpKind::FetchAdd { add: 1 }),
    ];
    sc.faults = vec![
        Fault {
            from: A,
            pick: |p, _| matches!(p, Packet::Data { header, .. } if header.opcode == Opcode::FetchAdd),
            nth: 1,
            action: Action::Duplicate(30_000),
        },
        Fault {
            from: B,
            pick: |p, _| matches!(p, Packet::Data { header, .. } if header.opcode == Opcode::AtomicResp),
            nth: 1,
            action: Action::Drop,
        },
    ];
    sc
}

fn check_atomics(o: &Outcome) -> Result<(), String> {
    clean(o)?;
    let ex = &o.verbs[B].executions;
    ensure(ex.len() == 3 && ex.values().all(|&n| n == 1), || {
        format!("executions {ex:?}")
    })?;
    let m = u64::from_le_bytes(o.verbs[B].memory[..8].try_into().unwrap_or([0; 8]));
    ensure(m == 8, || format!("memory {m}"))?;
    let mut got: Vec<(u32, u64)> = o.verbs[A]
        .responses
        .iter()
        .map(|(msn, (b, _))| {
            (
                *msn,
                u64::from_be_bytes(b[..8].try_into().unwrap_or([0; 8])),
            )
        })
        .collect();
    got.sort_unstable();
    let orig: Vec<u64> = got.iter().map(|g| g.1).collect();
    ensure(orig == [ATOMIC_INIT, ATOMIC_INIT + 5, 7], || {
        format!("originals {orig:?}")
    })?;
    ensure(o.rx_stats[B].duplicates >= 1, || {
        "no duplicate request".into()
    })?;
    ensure(o.tx_stats[B].retransmits >= 1, || {
        "response not resent".into()
    })
}

// late-dup: 3.2 duplicates and the message window.
const LATE_MSGS: u32 = 68;

fn late_dup(seed: u64) -> Scenario {
    let mut sc = Scenario::new("late-dup", seed);
    // B's receiver keeps the v1 window (as the driver's UC and SRQ QPs
    // do, protocol.md 1.4), so 68 messages pass it.
    sc.msg_window[B] = MSG_WINDOW_V1;
    sc.ops = (0..LATE_MSGS).map(|k| at(0, write(0, k * 8))).collect();
    let first: fn(&Packet<'_>, &Scenario) -> bool =
        |p, sc| matches!(p, Packet::Data { header, .. } if header.msn == sc.msn_a(0));
    sc.faults = vec![
        Fault {
            from: A,
            pick: first,
            nth: 1,
            action: Action::Duplicate(500),
        },
        Fault {
            from: A,
            pick: first,
            nth: 1,
            action: Action::Duplicate(500_000),
        },
    ];
    sc
}

fn check_late_dup(o: &Outcome) -> Result<(), String> {
    clean(o)?;
    ensure(o.rx_stats[B].duplicates == 1, || {
        format!("{} duplicates", o.rx_stats[B].duplicates)
    })?;
    let oow = o.drops[B]
        .iter()
        .filter(|d| d.1 == Dropped::Receiver(DropReason::MessageOutOfWindow))
        .count();
    ensure(oow == 1 && o.drops[B].len() == 1, || {
        format!("drops at B: {:?}", o.drops[B])
    })
}

/// The files of a capture's golden set: host A's tap (`a.pcap`)
/// and host B's (`b.pcap`), and the run.
pub fn files(c: &Capture) -> (Vec<(&'static str, Vec<u8>)>, Outcome) {
    let o = super::duplex::run(&(c.scenario)(c.seed));
    let files = vec![
        ("a.pcap", super::pcap::write(&o.taps[A])),
        ("b.pcap", super::pcap::write(&o.taps[B])),
    ];
    (files, o)
}

/// How to regenerate the golden captures after an intended change.
pub const BLESS: &str = "METAROCE_BLESS=1 cargo test -p metaroce-sim --test golden \
(or: cargo run -p metaroce-sim --bin metaroce-sim -- golden --bless)";

/// Regenerate every golden capture and compare it with the file under
/// `dir` (`dir/NAME/{a,b}.pcap`), or with `bless` write it. Each
/// scenario's check runs too. Returns one line per capture, and the
/// failures.
pub fn golden(dir: &std::path::Path, bless: bool) -> (Vec<String>, Vec<String>) {
    let (mut ok, mut bad) = (Vec::new(), Vec::new());
    for c in all() {
        let (files, o) = files(&c);
        if let Err(e) = (c.check)(&o) {
            bad.push(format!(
                "{}: the run no longer shows what it is for: {e}",
                c.name
            ));
        }
        for (file, bytes) in files {
            let path = dir.join(c.name).join(file);
            let shown = path.display();
            if bless {
                let written = std::fs::create_dir_all(dir.join(c.name))
                    .and_then(|_| std::fs::write(&path, &bytes));
                match written {
                    Ok(()) => ok.push(format!("{shown}: written ({} bytes)", bytes.len())),
                    Err(e) => bad.push(format!("{shown}: {e}")),
                }
                continue;
            }
            match std::fs::read(&path) {
                Ok(old) if old == bytes => ok.push(format!("{shown}: same ({} bytes)", bytes.len())),
                Ok(old) => bad.push(format!(
                    "{shown}: golden capture differs from what the engine and simulator produce now ({}); \
                     if the change is intended, regenerate with {BLESS} and review the new capture",
                    first_difference(&old, &bytes)
                )),
                Err(e) => bad.push(format!("{shown}: {e}; generate it with {BLESS}")),
            }
        }
    }
    (ok, bad)
}

/// Where two pcap files first differ, in frames.
fn first_difference(old: &[u8], new: &[u8]) -> String {
    let (Ok(a), Ok(b)) = (super::pcap::read(old), super::pcap::read(new)) else {
        return "the committed file is not a pcap".into();
    };
    for (x, y) in a.frames.iter().zip(&b.frames) {
        if x != y {
            return format!(
                "frame {} was {} at {} ns, now {} at {} ns",
                x.0,
                super::show::packet(&x.1.payload),
                x.1.t_ns,
                super::show::packet(&y.1.payload),
                y.1.t_ns
            );
        }
    }
    format!("{} frames, now {}", a.frames.len(), b.frames.len())
}
