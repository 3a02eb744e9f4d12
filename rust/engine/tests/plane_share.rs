//! Each plane carries its share (issue #14 item 3): one QP sending over 2
//! or 4 planes of equal links, each link its own bottleneck queue, sends
//! within ±10% of `1/planes` of its packets on every plane in steady
//! state: with all planes there from the start, with planes joining after
//! plane 0 built its queue (the PLANES exchange at connect), with a plane
//! added to the device while the QP is connected (`Sender::add_planes`),
//! after the QP grew its path count on a long RTT, and with every plane
//! queueing into one receiving host (the rig) after one plane stalled or
//! with one plane's round trip longer than the other's.

use std::collections::VecDeque;

use metaroce_engine::config::{ReceiverConfig, SenderConfig};
use metaroce_engine::receiver::Receiver;
use metaroce_engine::sender::{Message, Sender, TxKind};
use metaroce_engine::wire::{Ack, DataHeader, Opcode, Probe};

const MTU: u32 = 4096;
const STEP_NS: u64 = 20_000;
/// Packets are counted from 2 s on (the start settles first), to 6 s.
const COUNT_FROM_NS: u64 = 2_000_000_000;
const END_NS: u64 = 6_000_000_000;
/// When a `hiccup_ns` starts.
const HICCUP_AT: u64 = 1_000_000_000;

/// One plane's link: a queue served at a fixed rate, then a fixed delay
/// each way besides the queue.
struct Link {
    queue: VecDeque<DataHeader>,
    busy_until: u64,
}

/// The fabric of a run.
struct Fabric {
    planes: u8,
    /// One packet per `service_ns` on each plane's link.
    service_ns: u64,
    /// Round trip besides the queue.
    base_ns: u64,
    /// One queue for every plane's packets, served at one packet per
    /// `service_ns` (a receiving host's CPU, the rig's bottleneck: a
    /// guest takes packets at the same rate whichever NIC they come in
    /// on), instead of one per plane.
    shared: bool,
    /// Plane 0's ACKs held back this long from 1 s on, once, as a host's
    /// moment of jitter on one NIC: plane 0's paths time out and cut their
    /// windows, and the planes' windows differ from then on.
    hiccup_ns: u64,
    /// Packets the sender can make per step (its CPU; 0: unbounded). A
    /// sender that cannot fill its windows at once sprays into whichever
    /// paths have room as ACKs free them, as the rig's guests do.
    per_step: usize,
    /// Plane 0's round trip longer than the others' by this much besides
    /// the queue (its ACKs come back later): a NIC served after the
    /// others, a longer route.
    plane0_extra_ns: u64,
}

/// What happens to the sender's planes during a run.
#[derive(Clone, Copy)]
enum Start {
    /// Every plane usable from the start.
    AllUp,
    /// Planes other than 0 down at connect, up at `at` (the PLANES
    /// exchange done): the driver's connect.
    LateUp { at: u64 },
    /// Connected on `from` planes, the rest added to the device at `at`
    /// and usable a PLANES round trip later.
    Added { from: u8, at: u64 },
}

/// Data packets each plane carried while counted.
fn run(fabric: &Fabric, start: Start, paths: u16, max_paths: u16) -> Vec<u64> {
    let n = usize::from(fabric.planes);
    let connected_on = match start {
        Start::Added { from, .. } => from,
        _ => fabric.planes,
    };
    let cfg = SenderConfig {
        mtu: MTU,
        planes: connected_on,
        initial_paths: paths,
        max_paths,
        ..SenderConfig::default()
    };
    let mut tx = Sender::new(cfg, 0).unwrap();
    if let Start::LateUp { .. } = start {
        for k in 1..fabric.planes {
            tx.plane_down(k, 0);
        }
    }
    let mut rx = Receiver::new(ReceiverConfig {
        peer_qpn: 0,
        mtu: MTU,
    })
    .unwrap();
    let mut links: Vec<Link> = (0..n)
        .map(|_| Link {
            queue: VecDeque::new(),
            busy_until: 0,
        })
        .collect();
    let mut acks: VecDeque<(u64, Ack)> = VecDeque::new();
    let mut probes: VecDeque<(u64, Probe)> = VecDeque::new();
    let mut sent = vec![0u64; n];
    let mut now = 0;
    let msg = Message {
        opcode: Opcode::Write,
        len: 256 * 1024,
        remote_va: 0,
        rkey: 1,
        imm: 0,
        rsn: 0,
    };
    while now < END_NS {
        match start {
            Start::LateUp { at } if now == at => {
                for k in 1..fabric.planes {
                    tx.plane_up(k, now);
                }
            }
            Start::Added { from, at } if now == at => {
                assert!(tx.add_planes(fabric.planes, now));
                assert_eq!(tx.config().planes, fabric.planes);
                let _ = from;
            }
            Start::Added { from, at } if now == at + 2 * fabric.base_ns => {
                for k in from..fabric.planes {
                    tx.plane_up(k, now);
                }
            }
            _ => {}
        }
        while tx.post(&msg).is_ok() {}
        let mut made = 0;
        while fabric.per_step == 0 || made < fabric.per_step {
            let Some(p) = tx.next_packet(now) else {
                break;
            };
            made += 1;
            let k = usize::from(p.plane);
            match p.kind {
                TxKind::Data { header, .. } => {
                    if now >= COUNT_FROM_NS {
                        sent[k] += 1;
                    }
                    links[if fabric.shared { 0 } else { k }]
                        .queue
                        .push_back(header);
                }
                // A probe waits behind its plane's queue too.
                TxKind::Probe(pr) => {
                    let at = now + fabric.base_ns + links[k].queue.len() as u64 * fabric.service_ns;
                    probes.push_back((at, pr));
                }
            }
        }
        for link in links.iter_mut() {
            while link.busy_until <= now {
                let Some(h) = link.queue.pop_front() else {
                    break;
                };
                link.busy_until = link.busy_until.max(now) + fabric.service_ns;
                rx.on_data(&h, false, now);
                if let Some(a) = rx.ack_for(h.path_id) {
                    let mut at = link.busy_until + fabric.base_ns;
                    let on_plane0 = tx
                        .path(usize::from(a.path_id & 63))
                        .is_some_and(|p| p.plane == 0);
                    if on_plane0 {
                        at += fabric.plane0_extra_ns;
                    }
                    if fabric.hiccup_ns > 0
                        && on_plane0
                        && (HICCUP_AT..HICCUP_AT + fabric.hiccup_ns).contains(&at)
                    {
                        at = HICCUP_AT + fabric.hiccup_ns;
                    }
                    acks.push_back((at, a));
                }
            }
        }
        // Links of equal delay, but ACKs of different planes interleave:
        // deliver in time order.
        acks.make_contiguous().sort_by_key(|(t, _)| *t);
        while acks.front().is_some_and(|(t, _)| *t <= now) {
            let (_, a) = acks.pop_front().unwrap();
            tx.on_ack(&a, now);
        }
        probes.make_contiguous().sort_by_key(|(t, _)| *t);
        while probes.front().is_some_and(|(t, _)| *t <= now) {
            let (_, pr) = probes.pop_front().unwrap();
            tx.on_probe_reply(&rx.on_probe(&pr), now);
        }
        // The receiver's tick: held ACKs go every 1 ms.
        if now % 1_000_000 == 0 {
            while let Some(a) = rx.flush(u64::MAX) {
                acks.push_back((now + fabric.base_ns, a));
            }
        }
        while tx.pop_completion().is_some() {}
        while rx.pop_completion().is_some() {}
        tx.on_timer(now);
        now += STEP_NS;
    }
    sent
}

/// Every plane within ±10% of an equal share.
fn assert_even(sent: &[u64], what: &str) {
    let total: u64 = sent.iter().sum();
    assert!(total > 20_000, "{what}: only {total} packets");
    let n = sent.len() as u64;
    let (lo, hi) = (total * 9 / (10 * n), total * 11 / (10 * n));
    for (k, &s) in sent.iter().enumerate() {
        assert!(
            (lo..=hi).contains(&s),
            "{what}: plane {k} sent {s} of {total} ({sent:?})"
        );
    }
}

/// Equal links that a QP's default windows can queue on: 200 us RTT
/// besides the queue, ~80 MB/s per plane.
fn fabric(planes: u8) -> Fabric {
    Fabric {
        planes,
        service_ns: 50_000,
        base_ns: 200_000,
        shared: false,
        hiccup_ns: 0,
        per_step: 0,
        plane0_extra_ns: 0,
    }
}

#[test]
fn two_and_four_planes_from_the_start_share_evenly() {
    for planes in [2, 4] {
        let sent = run(&fabric(planes), Start::AllUp, 4, 64);
        assert_even(&sent, &format!("{planes} planes"));
    }
}

#[test]
fn planes_that_join_after_the_exchange_share_evenly() {
    for planes in [2, 4] {
        let sent = run(&fabric(planes), Start::LateUp { at: 50_000_000 }, 4, 64);
        assert_even(&sent, &format!("{planes} planes, late"));
    }
}

#[test]
fn a_plane_added_while_connected_takes_its_share() {
    for (from, planes) in [(1, 2), (2, 4), (1, 4)] {
        let sent = run(
            &fabric(planes),
            Start::Added {
                from,
                at: 500_000_000,
            },
            4,
            64,
        );
        assert_even(&sent, &format!("{from} -> {planes} planes"));
    }
}

#[test]
fn paths_grown_on_a_long_rtt_stay_even_over_the_planes() {
    // 20 ms round trip: the 4 paths' windows cap at 256 packets each
    // before they fill the links, and the QP opens more paths, up to a
    // bound that is no multiple of the plane count.
    for (planes, max_paths) in [(2, 9), (4, 10)] {
        let f = Fabric {
            planes,
            service_ns: 20_000,
            base_ns: 20_000_000,
            shared: false,
            hiccup_ns: 0,
            per_step: 0,
            plane0_extra_ns: 0,
        };
        let sent = run(&f, Start::AllUp, 4, max_paths);
        assert_even(
            &sent,
            &format!("{planes} planes, grown to {max_paths} paths at most"),
        );
    }
}

/// The rig's shape: every plane's packets queue for one receiving host,
/// and a sender that makes one packet per step (slightly faster than the
/// host takes them) sprays into whichever paths have room as ACKs free
/// them; plane 0's ACKs once held back 30 ms (its paths time out, and their
/// windows differ from the other plane's for a while).
#[test]
fn planes_into_one_host_share_evenly_after_one_plane_stalls() {
    for (from, planes, hiccup_ns) in [
        (2, 2, 0),
        (2, 2, 30_000_000),
        (1, 2, 30_000_000),
        (4, 4, 30_000_000),
    ] {
        let f = Fabric {
            planes,
            service_ns: 25_000,
            base_ns: 200_000,
            shared: true,
            hiccup_ns,
            per_step: 1,
            plane0_extra_ns: 0,
        };
        let start = if from == planes {
            Start::AllUp
        } else {
            Start::Added {
                from,
                at: 500_000_000,
            }
        };
        let sent = run(&f, start, 4, 64);
        assert_even(
            &sent,
            &format!(
                "{from} -> {planes} planes into one host, plane 0 stalled {} ms",
                hiccup_ns / 1_000_000
            ),
        );
    }
}

/// The rig's shape again, with plane 0's round trip longer than plane 1's
/// by 100 us, 300 us or 1 ms besides the queue (200 us): a NIC served
/// after the other, a longer route. Into one shared queue the slower
/// plane's paths read their extra RTT as queueing unless the plane's
/// excess over the fastest plane is taken off (protocol.md 6.3): without
/// it plane 0 carried 40%, 13% and 5.5% of the packets (2026-12-06). With
/// it the planes share within ±10% at 100 and 300 us; at 1 ms the windows
/// are even but plane 0's round trip is a sixth longer than plane 1's
/// (the queue sits near the 5 ms target), and it carries its windows'
/// rate, at least 40%.
#[test]
fn a_slower_plane_into_one_host_keeps_its_share() {
    for extra_ns in [100_000, 300_000, 1_000_000] {
        for start in [
            Start::AllUp,
            Start::Added {
                from: 1,
                at: 500_000_000,
            },
        ] {
            let f = Fabric {
                planes: 2,
                service_ns: 25_000,
                base_ns: 200_000,
                shared: true,
                hiccup_ns: 0,
                per_step: 1,
                plane0_extra_ns: extra_ns,
            };
            let sent = run(&f, start, 4, 64);
            let what = format!(
                "plane 0 slower by {} us into one host{}",
                extra_ns / 1000,
                if matches!(start, Start::Added { .. }) {
                    ", added"
                } else {
                    ""
                }
            );
            if extra_ns < 1_000_000 {
                assert_even(&sent, &what);
            } else {
                let total: u64 = sent.iter().sum();
                assert!(sent[0] * 10 >= total * 4, "{what}: {sent:?}");
            }
            println!("{what}: {sent:?}");
        }
    }
}
