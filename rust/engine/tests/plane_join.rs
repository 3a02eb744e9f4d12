//! A plane added to the device while the QP is connected (protocol.md
//! 1.8, planes joining): the connection spreads over the new count, the
//! new planes wait, down, for the PLANES exchange to name the peer's
//! address there, and no data is lost or doubled on the way.

mod common;

use common::{planes_of, receiver, write};
use std::collections::VecDeque;

use metaroce_engine::completion::CompletionStatus;
use metaroce_engine::config::SenderConfig;
use metaroce_engine::path::PathState;
use metaroce_engine::receiver::Receiver;
use metaroce_engine::sender::{Sender, TxKind};
use metaroce_engine::wire::{Ack, Probe};

const MTU: u32 = 1000;

fn sender(paths: u16, planes: u8, max_paths: u16) -> Sender {
    Sender::new(common::quick_rto(MTU, paths, planes, max_paths), 0).unwrap()
}

/// One round: post what fits, send it all (every packet delivered, ACKs
/// back at once), run the timers. Returns messages completed at each end
/// and packets sent per plane.
fn round(tx: &mut Sender, rx: &mut Receiver, now: u64, per_plane: &mut [u64]) -> (u32, u32) {
    while tx.post(&write(16 * MTU)).is_ok() {}
    while let Some(p) = tx.next_packet(now) {
        match p.kind {
            TxKind::Data { header, .. } => {
                per_plane[usize::from(p.plane)] += 1;
                rx.on_data(&header, false, now);
                if let Some(a) = rx.ack_for(header.path_id) {
                    tx.on_ack(&a, now + 100);
                }
            }
            TxKind::Probe(pr) => tx.on_probe_reply(&rx.on_probe(&pr), now + 100),
        }
    }
    let mut done = (0, 0);
    while let Some(c) = tx.pop_completion() {
        assert_eq!(c.status, CompletionStatus::Success, "{c:?}");
        done.0 += 1;
    }
    while rx.pop_completion().is_some() {
        done.1 += 1;
    }
    tx.on_timer(now);
    done
}

#[test]
fn slots_wait_on_the_old_planes_until_the_new_one_is_up() {
    let mut tx = sender(4, 1, 16);
    assert_eq!(planes_of(&tx), [0, 0, 0, 0]);
    let ids: Vec<u16> = tx.used_paths().map(|p| p.id).collect();
    assert!(tx.add_planes(2, 10));
    assert_eq!(tx.config().planes, 2);
    // Plane 1 is not usable yet (its PLANES exchange is under way): no
    // path moves, none is replaced, nothing is opened.
    assert_eq!(planes_of(&tx), [0, 0, 0, 0]);
    assert_eq!(tx.used_paths().map(|p| p.id).collect::<Vec<_>>(), ids);
    assert!(!tx.plane_usable(1));
    tx.plane_up(1, 20);
    // Slots 1 and 3 are plane 1's now: probed there first.
    assert_eq!(planes_of(&tx), [0, 1, 0, 1]);
    assert_eq!(tx.path(1).unwrap().state, PathState::Probing);
    assert_eq!(tx.stats().paths_rehomed, 2);
    // Fewer or as many planes: nothing happens.
    assert!(!tx.add_planes(2, 30));
    assert!(!tx.add_planes(1, 30));
    assert!(!tx.add_planes(9, 30));
}

#[test]
fn more_slots_open_so_that_every_plane_homes_as_many() {
    // 4 paths over 2 planes, then 3: 6 paths, 2 a plane.
    let mut tx = sender(4, 2, 16);
    assert!(tx.add_planes(3, 10));
    assert_eq!(tx.path_count(), 6);
    // Slot 4's home (1) is up; slot 5's (2) is not: the less loaded plane
    // up holds it meanwhile. Slot 3 (home 0 now) left plane 1.
    assert_eq!(planes_of(&tx), [0, 1, 0, 0, 1, 1]);
    tx.plane_up(2, 20);
    assert_eq!(planes_of(&tx), [0, 1, 2, 0, 1, 2]);
    // A bound that is no multiple of the planes: as far as it allows.
    let mut tx = sender(4, 2, 7);
    assert!(tx.add_planes(3, 10));
    assert_eq!(tx.path_count(), 6);
    let mut tx = sender(4, 2, 5);
    assert!(tx.add_planes(4, 10));
    assert_eq!(tx.path_count(), 4);
}

#[test]
fn messages_complete_once_through_a_plane_joining_under_traffic() {
    let mut tx = sender(4, 1, 16);
    let mut rx = receiver(MTU);
    let mut per_plane = [0u64; 2];
    let (mut tx_done, mut rx_done) = (0, 0);
    for step in 0..300u64 {
        let now = step * 1_000;
        if step == 100 {
            assert!(tx.add_planes(2, now));
        }
        if step == 150 {
            tx.plane_up(1, now);
        }
        if step == 200 {
            per_plane = [0; 2];
        }
        let (t, r) = round(&mut tx, &mut rx, now, &mut per_plane);
        tx_done += t;
        rx_done += r;
        if (100..150).contains(&step) {
            assert_eq!(planes_of(&tx), [0, 0, 0, 0], "step {step}");
        }
    }
    assert_eq!(tx_done, rx_done);
    assert!(tx_done > 200, "{tx_done} messages");
    assert_eq!(tx.stats().give_ups, 0);
    // Both planes carry data, evenly.
    assert_eq!(per_plane[0], per_plane[1], "{per_plane:?}");
}

/// What crosses the wire back to the sender.
enum Back {
    Ack(Ack),
    ProbeReply(Probe),
}

/// The join's timing under traffic, with the default timers (RTO at
/// least 10 ms) and a 1 ms one-way delay: host A adds plane 1 at `ADD`
/// (host B added its own earlier, which changed nothing in A's sender:
/// its count was 1). A's PLANES reaches B and B's answer comes back one
/// round trip later, when the driver reports plane 1 up
/// (`receive_planes`); the slots homed there probe first, another round
/// trip. Plane 1 must deliver data from then on: within 3 round trips
/// of the add, not after an RTO or a path replacement.
#[test]
fn a_plane_added_under_traffic_carries_data_within_three_round_trips() {
    const DELAY: u64 = 1_000_000;
    const STEP: u64 = 50_000;
    const ADD: u64 = 100_000_000;
    let cfg = SenderConfig {
        mtu: MTU,
        planes: 1,
        initial_paths: 4,
        max_paths: 16,
        ..SenderConfig::default()
    };
    let mut tx = Sender::new(cfg, 0).unwrap();
    let mut rx = receiver(MTU);
    // Packets in flight, each with its arrival time (and plane).
    let mut out: VecDeque<(u64, u8, TxKind)> = VecDeque::new();
    let mut back: VecDeque<(u64, Back)> = VecDeque::new();
    let mut first_on_plane1 = None;
    for step in 0..(ADD + 20 * DELAY) / STEP {
        let now = step * STEP;
        if now == ADD {
            assert!(tx.add_planes(2, now));
        }
        if now == ADD + 2 * DELAY {
            tx.plane_up(1, now);
        }
        while tx.post(&write(16 * MTU)).is_ok() {}
        while let Some(p) = tx.next_packet(now) {
            out.push_back((now + DELAY, p.plane, p.kind));
        }
        while out.front().is_some_and(|(at, ..)| *at <= now) {
            let Some((_, plane, kind)) = out.pop_front() else {
                break;
            };
            match kind {
                TxKind::Data { header, .. } => {
                    if plane == 1 && first_on_plane1.is_none() {
                        first_on_plane1 = Some(now);
                    }
                    rx.on_data(&header, false, now);
                    if let Some(a) = rx.ack_for(header.path_id) {
                        back.push_back((now + DELAY, Back::Ack(a)));
                    }
                }
                TxKind::Probe(pr) => {
                    back.push_back((now + DELAY, Back::ProbeReply(rx.on_probe(&pr))));
                }
            }
        }
        while let Some(a) = rx.flush(now) {
            back.push_back((now + DELAY, Back::Ack(a)));
        }
        while back.front().is_some_and(|(at, _)| *at <= now) {
            match back.pop_front().map(|(_, b)| b) {
                Some(Back::Ack(a)) => tx.on_ack(&a, now),
                Some(Back::ProbeReply(p)) => tx.on_probe_reply(&p, now),
                None => break,
            }
        }
        while let Some(c) = tx.pop_completion() {
            assert_eq!(c.status, CompletionStatus::Success, "{c:?}");
        }
        while rx.pop_completion().is_some() {}
        tx.on_timer(now);
        if now < ADD + 2 * DELAY {
            assert!(first_on_plane1.is_none(), "plane 1 used before it was up");
        }
    }
    // Exchange (1 RTT), probe (1 RTT), then the first data's one-way trip.
    let at = first_on_plane1.expect("plane 1 never carried data") - ADD;
    assert!(
        at <= 6 * DELAY,
        "plane 1's first data {at} ns after the add"
    );
    assert_eq!(tx.stats().give_ups, 0);
    assert_eq!(tx.stats().paths_replaced, 0, "a probe went unanswered");
    assert!(tx.used_paths().all(|p| p.state == PathState::Active));
}
