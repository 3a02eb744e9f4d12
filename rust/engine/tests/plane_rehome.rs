//! Re-homing path slots (protocol.md 1.8): while a plane is reported down
//! its slots' paths live on the planes that are up, so the QP keeps its
//! path count and window; when it comes up they go back, and each plane
//! again carries its share.

mod common;

use common::{planes_of, receiver, write};
use metaroce_engine::path::PathState;
use metaroce_engine::receiver::Receiver;
use metaroce_engine::sender::{Sender, TxKind};

const MTU: u32 = 1000;

fn sender(paths: u16, planes: u8) -> Sender {
    Sender::new(common::quick_rto(MTU, paths, planes, 16), 0).unwrap()
}

/// The path id of each used slot.
fn ids(tx: &Sender) -> Vec<u16> {
    tx.used_paths().map(|p| p.id).collect()
}

/// Sends what `tx` has, delivering data and probes on the planes not in
/// `lost` (a bit per plane), until nothing is left to send; then runs the
/// timers at `now`. Returns the messages `tx` completed.
fn exchange(tx: &mut Sender, rx: &mut Receiver, lost: u8, now: u64) -> u32 {
    while let Some(p) = tx.next_packet(now) {
        if lost & (1 << p.plane) != 0 {
            continue;
        }
        match p.kind {
            TxKind::Data { header, .. } => {
                rx.on_data(&header, false, now);
                if let Some(a) = rx.ack_for(header.path_id) {
                    tx.on_ack(&a, now + 100);
                }
            }
            TxKind::Probe(pr) => tx.on_probe_reply(&rx.on_probe(&pr), now + 100),
        }
    }
    let mut completed = 0;
    while tx.pop_completion().is_some() {
        completed += 1;
    }
    while rx.pop_completion().is_some() {}
    tx.on_timer(now);
    completed
}

#[test]
fn a_plane_down_moves_its_slots_to_the_others_and_keeps_the_count() {
    let mut tx = sender(4, 2);
    assert_eq!(planes_of(&tx), [0, 1, 0, 1]);
    let before = tx.active_paths();
    tx.plane_down(1, 0);
    // Plane 0 works (it has active paths): the moved paths start active.
    assert_eq!(planes_of(&tx), [0, 0, 0, 0]);
    assert_eq!((tx.path_count(), tx.active_paths()), (4, before));
    assert_eq!(tx.stats().paths_rehomed, 2);
    // Slots 0 and 2 were not touched.
    assert_eq!(tx.path(0).unwrap().id, 0);
    assert_eq!(tx.path(2).unwrap().id, 2);
    // Reported down again: nothing moves.
    let moved = ids(&tx);
    tx.plane_down(1, 0);
    assert_eq!(ids(&tx), moved);
}

#[test]
fn a_plane_up_takes_its_slots_back_probed_first() {
    let mut tx = sender(4, 2);
    let mut rx = receiver(MTU);
    tx.plane_down(1, 0);
    tx.plane_up(1, 10);
    assert_eq!(planes_of(&tx), [0, 1, 0, 1]);
    assert_eq!(tx.stats().paths_rehomed, 4);
    // Plane 1 had no active path left: its slots are probed before data.
    assert_eq!(tx.path(1).unwrap().state, PathState::Probing);
    assert_eq!(tx.active_paths(), 2);
    exchange(&mut tx, &mut rx, 0, 20);
    assert_eq!(tx.active_paths(), 4);
    // Each plane carries its share again.
    tx.post(&write(16 * MTU)).unwrap();
    let mut per_plane = [0u32; 2];
    while let Some(p) = tx.next_packet(30) {
        per_plane[usize::from(p.plane)] += 1;
    }
    assert_eq!(per_plane, [8, 8]);
}

#[test]
fn slots_spread_over_the_planes_left_and_stay_put_when_another_fails() {
    let mut tx = sender(6, 3);
    assert_eq!(planes_of(&tx), [0, 1, 2, 0, 1, 2]);
    tx.plane_down(0, 0);
    // Slot 0 to the least loaded plane up (1, the lower of two equals),
    // then slot 3 to plane 2.
    assert_eq!(planes_of(&tx), [1, 1, 2, 2, 1, 2]);
    assert_eq!(tx.active_paths(), 6);
    let slot0 = tx.path(0).unwrap().id;
    tx.plane_down(2, 0);
    // Plane 2's own slots and slot 3 (moved there) go to plane 1; slot 0,
    // away from home on a plane still up, is left alone.
    assert_eq!(planes_of(&tx), [1, 1, 1, 1, 1, 1]);
    assert_eq!(tx.path(0).unwrap().id, slot0);
    assert_eq!(tx.active_paths(), 6);
    tx.plane_up(0, 10);
    tx.plane_up(2, 10);
    assert_eq!(planes_of(&tx), [0, 1, 2, 0, 1, 2]);
}

#[test]
fn with_every_plane_down_paths_wait_on_their_own_and_follow_the_first_up() {
    let mut tx = sender(4, 2);
    tx.plane_down(0, 0);
    tx.plane_down(1, 0);
    assert_eq!(tx.active_paths(), 0);
    assert!(tx.used_paths().all(|p| p.state == PathState::Suspended));
    // Plane 1 comes back first (a QP connected with plane 0 down, its
    // PLANES exchange done on plane 1): every slot goes there.
    tx.plane_up(1, 10);
    assert_eq!(planes_of(&tx), [1, 1, 1, 1]);
    assert_eq!(tx.path_count(), 4);
}

#[test]
fn data_flows_through_a_plane_down_window_with_the_same_active_count() {
    let mut tx = sender(4, 2);
    let mut rx = receiver(MTU);
    let mut now = 0;
    let mut completed = 0;
    let before = tx.active_paths();
    for step in 0..300u64 {
        now += 1_000;
        if step == 100 {
            tx.plane_down(1, now);
        }
        if step == 200 {
            tx.plane_up(1, now);
        }
        // Plane 1 loses everything while it is down.
        let lost = if (100..200).contains(&step) { 0b10 } else { 0 };
        while tx.post(&write(16 * MTU)).is_ok() {}
        completed += exchange(&mut tx, &mut rx, lost, now);
        if (110..200).contains(&step) {
            assert_eq!(tx.active_paths(), before, "step {step}");
            assert!(tx.used_paths().all(|p| p.plane == 0));
        }
    }
    assert_eq!(tx.active_paths(), before);
    assert_eq!(planes_of(&tx), [0, 1, 0, 1]);
    assert!(completed > 100, "{completed} messages");
}
