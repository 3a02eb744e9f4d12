//! One QP over two planes through one shared queue (a software host's
//! CPU: every packet waits behind the others whatever its plane), with
//! plane 1 joining late, as the driver starts it: its paths are suspended
//! at connect and probed once the PLANES exchange names the peer's address
//! there, by which time plane 0's traffic has built a queue. The sender
//! must spread evenly over the planes anyway: the queueing-delay signal
//! judges every path against the QP's base RTT, so the late paths, whose
//! first RTT sample (their probe's) was taken in the queue, are cut like
//! the others. Judged against their own latched minimum they were never
//! cut while plane 0's were, and carried ~14 times as much here (the 3:1
//! plane split of Documentation/benchmarks/report.md's failover run).

use std::collections::VecDeque;

use metaroce_engine::config::{ReceiverConfig, SenderConfig};
use metaroce_engine::receiver::Receiver;
use metaroce_engine::sender::{Message, Sender, TxKind};
use metaroce_engine::wire::{Ack, DataHeader, Opcode, Probe};

const MTU: u32 = 4096;
/// The shared queue serves one packet per 200 us (~20 MB/s).
const SERVICE_NS: u64 = 200_000;
/// Round trip besides the queue.
const BASE_NS: u64 = 300_000;
const STEP_NS: u64 = 50_000;
/// Plane 1 comes up (its PLANES exchange done) after 50 ms.
const PLANE1_UP_NS: u64 = 50_000_000;
/// Packets are counted after 5 s (the start is plane 0's alone), to 20 s.
const COUNT_FROM_NS: u64 = 5_000_000_000;
const END_NS: u64 = 20_000_000_000;

/// Data packets each plane carried while counted.
fn run() -> [u64; 2] {
    let cfg = SenderConfig {
        mtu: MTU,
        planes: 2,
        ..SenderConfig::default()
    };
    let mut tx = Sender::new(cfg, 0).unwrap();
    tx.plane_down(1, 0);
    let mut rx = Receiver::new(ReceiverConfig {
        peer_qpn: 0,
        mtu: MTU,
    })
    .unwrap();
    let mut queue: VecDeque<DataHeader> = VecDeque::new();
    let mut busy_until = 0;
    let mut acks: VecDeque<(u64, Ack)> = VecDeque::new();
    let mut probes: VecDeque<(u64, Probe)> = VecDeque::new();
    let mut sent = [0u64; 2];
    let mut now = 0;
    while now < END_NS {
        if now == PLANE1_UP_NS {
            tx.plane_up(1, now);
        }
        let msg = Message {
            opcode: Opcode::Write,
            len: 65536,
            remote_va: 0,
            rkey: 1,
            imm: 0,
            rsn: 0,
        };
        while tx.post(&msg).is_ok() {}
        while let Some(p) = tx.next_packet(now) {
            match p.kind {
                TxKind::Data { header, .. } => {
                    if now >= COUNT_FROM_NS {
                        sent[usize::from(p.plane)] += 1;
                    }
                    queue.push_back(header);
                }
                // A probe waits behind the queue too.
                TxKind::Probe(pr) => {
                    let at = now + BASE_NS + queue.len() as u64 * SERVICE_NS;
                    probes.push_back((at, pr));
                }
            }
        }
        while busy_until <= now {
            let Some(h) = queue.pop_front() else { break };
            busy_until = busy_until.max(now) + SERVICE_NS;
            rx.on_data(&h, false, now);
            if let Some(a) = rx.ack_for(h.path_id) {
                acks.push_back((busy_until + BASE_NS, a));
            }
        }
        while acks.front().is_some_and(|(t, _)| *t <= now) {
            let (_, a) = acks.pop_front().unwrap();
            tx.on_ack(&a, now);
        }
        while probes.front().is_some_and(|(t, _)| *t <= now) {
            let (_, pr) = probes.pop_front().unwrap();
            tx.on_probe_reply(&rx.on_probe(&pr), now);
        }
        // The receiver's tick: held ACKs go every 1 ms.
        if now % 1_000_000 == 0 {
            if let Some(a) = rx.flush(u64::MAX) {
                acks.push_back((now + BASE_NS, a));
            }
        }
        while tx.pop_completion().is_some() {}
        while rx.pop_completion().is_some() {}
        tx.on_timer(now);
        now += STEP_NS;
    }
    sent
}

#[test]
fn a_late_plane_gets_an_even_share() {
    let [p0, p1] = run();
    let total = p0 + p1;
    println!("plane 0 sent {p0}, plane 1 {p1}");
    assert!(total > 50_000, "only {total} packets");
    // Within 10% of half each.
    let (lo, hi) = (total * 45 / 100, total * 55 / 100);
    assert!(
        (lo..=hi).contains(&p0) && (lo..=hi).contains(&p1),
        "plane 0 sent {p0}, plane 1 {p1}"
    );
}
