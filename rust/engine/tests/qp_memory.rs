//! What a QP's engine state costs (issue 11: 4,000 QPs on one device, at
//! most 16 KiB per idle connected QP, the RDMA core's own objects
//! included). Counted as a kernel's `kmalloc` counts it (`footprint`): the
//! sender and receiver themselves and what they took from their heap.
//! Run with `--nocapture` to see the numbers.

mod common;

use std::mem::size_of;

use common::write;
use metaroce_engine::config::{ReceiverConfig, SenderConfig};
use metaroce_engine::heap::kmalloc_size;
use metaroce_engine::path::PathRing;
use metaroce_engine::receiver::{Receiver, RxVerdict};
use metaroce_engine::sender::{Sender, TxKind};

/// What the reference driver's connect does (rust/driver/transport.rs):
/// the default configuration, `paths` paths.
fn connected(paths: u16) -> (Sender, Receiver) {
    let cfg = SenderConfig {
        dst_qpn: 7,
        mtu: 1024,
        initial_paths: paths,
        max_paths: paths,
        ..SenderConfig::DEFAULT
    };
    let mut tx = Sender::new(cfg, 0).unwrap();
    tx.start_at(1000, false);
    let mut rx = Receiver::new(ReceiverConfig {
        peer_qpn: 7,
        mtu: 1024,
    })
    .unwrap();
    rx.start_at(1000);
    (tx, rx)
}

/// Sends `msgs` messages of `len` bytes from `tx` to `rx`, everything
/// delivered and acknowledged; returns the footprints in the middle of
/// the transfer (all messages outstanding) and after it.
fn transfer(tx: &mut Sender, rx: &mut Receiver, msgs: u32, len: u32) -> (usize, usize) {
    let mut busy = 0;
    for _ in 0..msgs {
        tx.post(&write(len)).unwrap();
    }
    let mut now = 1;
    while tx.outstanding() > 0 {
        let mut sent = Vec::new();
        while let Some(p) = tx.next_packet(now) {
            if let TxKind::Data { header, .. } = p.kind {
                sent.push(header);
            }
        }
        busy = busy.max(tx.footprint() + rx.footprint());
        for h in &sent {
            assert!(!matches!(rx.on_data(h, false, now), RxVerdict::Drop(_)));
            if let Some(a) = rx.ack_for(h.path_id) {
                tx.on_ack(&a, now + 1);
            }
        }
        while rx.pop_completion().is_some() {}
        while tx.pop_completion().is_some() {}
        now += 10;
        assert!(now < 1_000_000, "transfer stalled");
    }
    (busy, tx.footprint() + rx.footprint())
}

const KIB: usize = 1024;

/// The engines' share of an idle connected QP: the sender (2 KiB class)
/// with its 4 first paths (512 B each) and the receiver (1 KiB class).
/// The driver's whole QP, these included, is held at build time
/// (`qp::IDLE_QP_BYTES`: 8,072 B on the test kernel, design.md "Per-QP
/// memory"); the RDMA core's own objects per QP come on top of it.
const IDLE_ENGINES: usize = 5 * KIB;

#[test]
fn an_idle_connected_qps_engines_stay_within_their_budget() {
    let (tx, rx) = connected(SenderConfig::DEFAULT.initial_paths);
    let idle = tx.footprint() + rx.footprint();
    println!(
        "idle connected QP ({} paths): sender {} B, receiver {} B, total {} B",
        SenderConfig::DEFAULT.initial_paths,
        tx.footprint(),
        rx.footprint(),
        idle
    );
    assert!(
        idle <= IDLE_ENGINES,
        "{idle} B per idle QP's engines: over their {IDLE_ENGINES} B"
    );
}

#[test]
fn the_message_windows_come_with_the_first_message_and_stay() {
    let (mut tx, mut rx) = connected(SenderConfig::DEFAULT.initial_paths);
    let (tx_idle, rx_idle) = (tx.footprint(), rx.footprint());
    transfer(&mut tx, &mut rx, 1, 100);
    // The windows, and the per-PSN records of the path that carried it.
    let ring = kmalloc_size(size_of::<PathRing>());
    assert_eq!(
        tx.footprint(),
        tx_idle + <Sender>::WINDOW_BYTES + ring,
        "the sender's window"
    );
    assert!(
        rx.footprint() > rx_idle + <Receiver>::WINDOW_BYTES,
        "the receiver's window and its path"
    );
    // A new connection empties them but keeps their memory.
    let cfg = *tx.config();
    tx.reset(cfg, 0).unwrap();
    rx.reset(ReceiverConfig {
        peer_qpn: 7,
        mtu: 1024,
    })
    .unwrap();
    assert_eq!(tx.footprint(), tx_idle + <Sender>::WINDOW_BYTES);
    assert_eq!(rx.footprint(), rx_idle + <Receiver>::WINDOW_BYTES);
}

#[test]
fn the_connects_plane_setup_events_leave_no_memory_behind() {
    // The driver's connect with 2 planes: plane 1's paths wait for the
    // PLANES exchange (`plane_down`), which the engine reports as path
    // failures; the driver clears those events, giving the queue back.
    let (idle_tx, _) = connected(SenderConfig::DEFAULT.initial_paths);
    let mut tx = Sender::new(
        SenderConfig {
            dst_qpn: 7,
            mtu: 1024,
            planes: 2,
            ..SenderConfig::DEFAULT
        },
        0,
    )
    .unwrap();
    tx.plane_down(1, 0);
    assert!(tx.footprint() > idle_tx.footprint(), "events were queued");
    tx.clear_events();
    tx.start_at(1000, false);
    assert_eq!(tx.footprint(), idle_tx.footprint());
    assert_eq!(tx.pop_event(), None);
}

#[test]
fn a_qp_grows_with_the_paths_it_uses_and_gives_long_messages_back() {
    let mut report = Vec::new();
    for paths in [4u16, 12, 64] {
        let (mut tx, mut rx) = connected(paths);
        let idle = tx.footprint() + rx.footprint();
        // Short messages over every path, then long ones (bitmaps from the
        // heap while they are in progress).
        let (_, after_short) = transfer(&mut tx, &mut rx, 64, 16 * 1024);
        let (busy_long, after_long) = transfer(&mut tx, &mut rx, 64, 1024 * 1024);
        assert_eq!(tx.path_count(), usize::from(paths));
        // MSNs 1064..1128 reach into a second chunk of each window (the
        // first transfer used slots 1000..1024 and 0..40).
        let chunks = <Sender>::WINDOW_CHUNK_BYTES + <Receiver>::WINDOW_CHUNK_BYTES;
        assert_eq!(
            after_long,
            after_short + chunks,
            "long messages' bitmaps given back"
        );
        report.push((paths, idle, after_short, busy_long));
    }
    for (paths, idle, used, busy) in &report {
        println!(
            "{paths:2} paths: idle {idle} B, after carrying data {used} B, \
             64 x 1 MiB in progress {busy} B"
        );
    }
    // Memory follows the paths: 64 used paths cost more than 12, which
    // cost more than 4; and no more than the old fixed layout's ~185 KiB
    // with the chunk of each window the second transfer took.
    assert!(report[0].2 < report[1].2 && report[1].2 < report[2].2);
    let chunks = <Sender>::WINDOW_CHUNK_BYTES + <Receiver>::WINDOW_CHUNK_BYTES;
    assert!(report[2].3 <= 200 * KIB + chunks);
}
