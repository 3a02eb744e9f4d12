//! The sender's event report (`Sender::pop_event`) and the cause of each
//! retransmission: what the driver turns into tracepoints. Each state
//! change is reported once, with the path as it was.

mod common;

use common::{receiver, write};
use metaroce_engine::cc::CWND_ONE;
use metaroce_engine::completion::CompletionStatus;
use metaroce_engine::config::SenderConfig;
use metaroce_engine::events::{CutCause, FailCause, LossCause, PathTag, RecoverCause, SenderEvent};
use metaroce_engine::sender::{Sender, TxKind, TxPacket};
use metaroce_engine::wire::DataHeader;

const MTU: u32 = 1000;

fn cfg(paths: u16, planes: u8) -> SenderConfig {
    SenderConfig {
        // Whole windows before the first ACK: the tests fill paths at once.
        first_flight: 0,
        ..common::quick_rto(MTU, paths, planes, 8)
    }
}

fn data(p: &TxPacket) -> (DataHeader, Option<LossCause>) {
    match p.kind {
        TxKind::Data { header, retransmit } => (header, retransmit),
        TxKind::Probe(_) => panic!("expected data"),
    }
}

fn events(tx: &mut Sender) -> Vec<SenderEvent> {
    std::iter::from_fn(|| tx.pop_event()).collect()
}

fn tag(tx: &Sender, slot: usize) -> PathTag {
    tx.path(slot).unwrap().tag()
}

#[test]
fn a_timeout_cuts_fails_and_a_probe_reply_recovers() {
    let mut tx = Sender::new(cfg(1, 1), 0).unwrap();
    let mut rx = receiver(MTU);
    tx.post(&write(4 * MTU)).unwrap();
    while tx.next_packet(0).is_some() {}
    let before = tx.path(0).unwrap().cc.cwnd;
    let path = tag(&tx, 0);
    assert!(events(&mut tx).is_empty(), "sending makes no event");
    tx.on_timer(20_000);
    let after = tx.path(0).unwrap().cc.cwnd;
    assert_eq!(
        events(&mut tx),
        [
            SenderEvent::WindowDecrease {
                path,
                old: before,
                new: after,
                cause: CutCause::Timeout,
            },
            SenderEvent::PathFailed {
                path,
                cause: FailCause::Timeout,
            },
        ]
    );
    // The probe is answered: recovered; the drained packets go out again,
    // resent because of the timeout.
    let probe = match tx.next_packet(20_000).map(|p| p.kind) {
        Some(TxKind::Probe(pr)) => pr,
        k => panic!("expected a probe, got {k:?}"),
    };
    tx.on_probe_reply(&rx.on_probe(&probe), 20_010);
    assert_eq!(
        events(&mut tx),
        [SenderEvent::PathRecovered {
            path,
            cause: RecoverCause::ProbeReply,
        }]
    );
    let mut resent = 0;
    while let Some(p) = tx.next_packet(20_020) {
        let (h, cause) = data(&p);
        assert_eq!(cause, Some(LossCause::Timeout));
        rx.on_data(&h, false, 20_020);
        if let Some(a) = rx.ack_for(h.path_id) {
            tx.on_ack(&a, 20_030);
        }
        resent += 1;
    }
    assert_eq!(resent, 4);
    assert_eq!(
        tx.pop_completion().map(|c| c.status),
        Some(CompletionStatus::Success)
    );
}

#[test]
fn sack_losses_are_resent_as_such_and_cut_once_past_the_threshold() {
    let mut tx = Sender::new(
        SenderConfig {
            loss_md_threshold: 2,
            ..cfg(1, 1)
        },
        0,
    )
    .unwrap();
    let mut rx = receiver(MTU);
    tx.post(&write(6 * MTU)).unwrap();
    let sent: Vec<_> = std::iter::from_fn(|| tx.next_packet(0)).collect();
    assert_eq!(sent.len(), 6);
    // The first two are lost; the rest arrive and are acknowledged.
    for p in &sent[2..] {
        let (h, _) = data(p);
        rx.on_data(&h, false, 100);
        if let Some(a) = rx.ack_for(h.path_id) {
            tx.on_ack(&a, 100);
        }
    }
    if let Some(a) = rx.flush(u64::MAX) {
        tx.on_ack(&a, 100);
    }
    let path = tag(&tx, 0);
    let ev = events(&mut tx);
    assert!(
        ev.iter().any(|e| matches!(
            e,
            SenderEvent::WindowDecrease {
                path: p,
                cause: CutCause::Loss,
                old,
                new,
            } if *p == path && new < old
        )),
        "{ev:?}"
    );
    let mut resent = 0;
    while let Some(p) = tx.next_packet(200) {
        let (h, cause) = data(&p);
        assert_eq!(cause, Some(LossCause::Sack));
        rx.on_data(&h, false, 200);
        if let Some(a) = rx.ack_for(h.path_id) {
            tx.on_ack(&a, 210);
        }
        resent += 1;
    }
    assert_eq!(resent, 2);
}

#[test]
fn ecn_marks_cut_with_their_cause() {
    let mut tx = Sender::new(cfg(1, 1), 0).unwrap();
    let mut rx = receiver(MTU);
    let mut now = 0;
    let mut cut = None;
    for _ in 0..50 {
        let _ = tx.post(&write(4 * MTU));
        while let Some(p) = tx.next_packet(now) {
            let (h, _) = data(&p);
            rx.on_data(&h, true, now);
            if let Some(a) = rx.ack_for(h.path_id) {
                tx.on_ack(&a, now + 1_000);
            }
        }
        while tx.pop_completion().is_some() {}
        now += 5_000;
        if let Some(e) = events(&mut tx)
            .into_iter()
            .find(|e| matches!(e, SenderEvent::WindowDecrease { .. }))
        {
            cut = Some(e);
            break;
        }
    }
    match cut {
        Some(SenderEvent::WindowDecrease {
            cause, old, new, ..
        }) => {
            assert_eq!(cause, CutCause::Ecn);
            assert!(new < old && new >= CWND_ONE);
        }
        e => panic!("no window decrease: {e:?}"),
    }
}

#[test]
fn a_plane_down_fails_its_paths_once_and_their_packets_go_elsewhere() {
    let mut tx = Sender::new(cfg(4, 2), 0).unwrap();
    tx.post(&write(8 * MTU)).unwrap();
    for _ in 0..8 {
        tx.next_packet(0).unwrap();
    }
    let (old1, old3) = (tag(&tx, 1), tag(&tx, 3));
    tx.plane_down(1, 0);
    tx.plane_down(1, 0);
    // Failed on plane 1, then each slot's next generation opened on plane 0.
    let (new1, new3) = (tag(&tx, 1), tag(&tx, 3));
    assert_eq!((new1.plane, new3.plane), (0, 0));
    assert_eq!(
        events(&mut tx),
        [
            SenderEvent::PathFailed {
                path: old1,
                cause: FailCause::PlaneDown,
            },
            SenderEvent::PathFailed {
                path: old3,
                cause: FailCause::PlaneDown,
            },
            SenderEvent::PathReplaced {
                old: old1,
                new: new1
            },
            SenderEvent::PathReplaced {
                old: old3,
                new: new3
            },
        ]
    );
    for _ in 0..4 {
        let p = tx.next_packet(1).unwrap();
        assert_eq!(p.plane, 0);
        assert_eq!(data(&p).1, Some(LossCause::PlaneDown));
    }
    // Back up: the slots go home (replaced again), probed, not yet
    // recovered.
    tx.plane_up(1, 0);
    let (home1, home3) = (tag(&tx, 1), tag(&tx, 3));
    assert_eq!((home1.plane, home3.plane), (1, 1));
    assert_eq!(
        events(&mut tx),
        [
            SenderEvent::PathReplaced {
                old: new1,
                new: home1
            },
            SenderEvent::PathReplaced {
                old: new3,
                new: home3
            },
        ]
    );
}

#[test]
fn unanswered_probes_replace_the_path_on_its_plane() {
    let mut tx = Sender::new(cfg(2, 2), 0).unwrap();
    let mut rx = receiver(MTU);
    let old = tag(&tx, 1);
    tx.post(&write(8 * MTU)).unwrap();
    let mut now = 0;
    let mut replaced = None;
    for _ in 0..200 {
        now += 5_000;
        tx.on_timer(now);
        // Only path slot 0 delivers.
        while let Some(p) = tx.next_packet(now) {
            match p.kind {
                TxKind::Data { header, .. } if header.path_id & 63 == 0 => {
                    rx.on_data(&header, false, now);
                    if let Some(a) = rx.ack_for(header.path_id) {
                        tx.on_ack(&a, now + 10);
                    }
                }
                TxKind::Probe(pr) if pr.path_id & 63 == 0 => {
                    tx.on_probe_reply(&rx.on_probe(&pr), now + 10);
                }
                _ => {}
            }
        }
        while tx.pop_completion().is_some() {}
        if let Some(e) = events(&mut tx)
            .into_iter()
            .find(|e| matches!(e, SenderEvent::PathReplaced { .. }))
        {
            replaced = Some(e);
            break;
        }
    }
    let new = tag(&tx, 1);
    assert_eq!(replaced, Some(SenderEvent::PathReplaced { old, new }));
    assert_ne!(old.id, new.id);
    assert_ne!(old.src_port, new.src_port);
    assert_eq!((old.plane, new.plane), (1, 1));
}

#[test]
fn giving_up_reports_the_messages_failed() {
    let mut tx = Sender::new(
        SenderConfig {
            give_up_ns: 1_000_000,
            ..cfg(2, 1)
        },
        0,
    )
    .unwrap();
    tx.post(&write(2 * MTU)).unwrap();
    tx.post(&write(2 * MTU)).unwrap();
    let mut now = 0;
    while tx.pop_completion().is_none() && now < 10_000_000 {
        while tx.next_packet(now).is_some() {}
        now += 1_000;
        tx.on_timer(now);
    }
    let ev = events(&mut tx);
    assert_eq!(
        ev.last(),
        Some(&SenderEvent::GiveUp { outstanding: 2 }),
        "{ev:?}"
    );
    assert_eq!(tx.events_dropped(), 0);
}

#[test]
fn reset_and_clear_forget_held_events() {
    let mut tx = Sender::new(cfg(4, 2), 0).unwrap();
    tx.plane_down(1, 0);
    tx.clear_events();
    assert!(events(&mut tx).is_empty());
    tx.plane_down(0, 0);
    tx.reset(cfg(4, 2), 0).unwrap();
    assert!(events(&mut tx).is_empty());
}
