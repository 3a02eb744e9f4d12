//! The message window a receiver advertises (protocol.md 1.4, issue 14):
//! at a long RTT a QP of small messages keeps more than the v1 window's 64
//! in flight once the peer's ACKs say it may, and no more than 64 with a
//! peer that does not say.

mod common;

use std::collections::VecDeque;

use common::write;
use metaroce_engine::config::{ReceiverConfig, SenderConfig, MSG_WINDOW_MAX, MSG_WINDOW_V1};
use metaroce_engine::receiver::{Receiver, RxVerdict};
use metaroce_engine::sender::{Sender, TxKind};
use metaroce_engine::wire::{Ack, DataHeader};

const MS: u64 = 1_000_000;
const MSG_LEN: u32 = 4096;

/// Most messages outstanding and most packets in flight over `secs` of
/// 4 KiB WRITEs at `rtt_ns`, with an unlimited link; `advertise`: the
/// receiver's ACKs carry its window (else 0, a peer that does not say).
fn run(rtt_ns: u64, secs: u64, advertise: bool) -> (u32, u32, u64) {
    let cfg = SenderConfig {
        dst_qpn: 2,
        mtu: MSG_LEN,
        ..SenderConfig::DEFAULT
    };
    let mut tx = Sender::new(cfg, 0).unwrap();
    let mut rx = Receiver::new(ReceiverConfig {
        peer_qpn: 1,
        mtu: MSG_LEN,
    })
    .unwrap();
    let one_way = rtt_ns / 2;
    let mut to_rx: VecDeque<(u64, DataHeader)> = VecDeque::new();
    let mut to_tx: VecDeque<(u64, Ack)> = VecDeque::new();
    let (mut most_out, mut most_inflight, mut done) = (0, 0, 0u64);
    let step = 50_000;
    let mut now = 0;
    while now < secs * 1_000 * MS {
        while let Some(&(t, a)) = to_tx.front() {
            if t > now {
                break;
            }
            to_tx.pop_front();
            tx.on_ack(&a, now);
        }
        while tx.pop_completion().is_some() {
            done += 1;
        }
        while tx.post(&write(MSG_LEN)).is_ok() {}
        tx.on_timer(now);
        while let Some(p) = tx.next_packet(now) {
            if let TxKind::Data { header, .. } = p.kind {
                to_rx.push_back((now + one_way, header));
            }
        }
        most_out = most_out.max(tx.outstanding());
        most_inflight = most_inflight.max(tx.inflight());
        while let Some(&(t, h)) = to_rx.front() {
            if t > now {
                break;
            }
            to_rx.pop_front();
            assert!(
                !matches!(rx.on_data(&h, false, now), RxVerdict::Drop(_)),
                "msn {} dropped",
                h.msn
            );
            if let Some(mut a) = rx.ack_for(h.path_id) {
                if !advertise {
                    a.msg_window = 0;
                }
                to_tx.push_back((now + one_way, a));
            }
            while rx.pop_completion().is_some() {}
        }
        now += step;
    }
    (most_out, most_inflight, done)
}

#[test]
fn a_10ms_rtt_qp_of_4k_messages_keeps_more_than_64_in_flight() {
    let (out, inflight, done) = run(10 * MS, 3, true);
    println!("advertised: {out} messages outstanding, {inflight} packets in flight, {done} done");
    assert!(out as usize > MSG_WINDOW_V1, "{out} messages outstanding");
    assert!(out as usize <= MSG_WINDOW_MAX);
    assert!(
        inflight as usize > MSG_WINDOW_V1,
        "{inflight} packets in flight"
    );
}

#[test]
fn a_peer_that_advertises_no_window_keeps_the_v1_window() {
    let (out, inflight, done) = run(10 * MS, 1, false);
    println!(
        "not advertised: {out} messages outstanding, {inflight} packets in flight, {done} done"
    );
    assert_eq!(out as usize, MSG_WINDOW_V1);
    assert!(inflight as usize <= MSG_WINDOW_V1);
    assert!(done > 0);
}

#[test]
fn a_receiver_holds_and_advertises_the_window_it_was_given() {
    let mut rx = Receiver::new(ReceiverConfig {
        peer_qpn: 1,
        mtu: MSG_LEN,
    })
    .unwrap();
    assert_eq!(rx.msg_window(), MSG_WINDOW_MAX, "the default: the most");
    rx.set_msg_window(1);
    assert_eq!(rx.msg_window(), MSG_WINDOW_V1, "never below the v1 window");
    let mut tx = Sender::new(
        SenderConfig {
            dst_qpn: 2,
            mtu: MSG_LEN,
            ..SenderConfig::DEFAULT
        },
        0,
    )
    .unwrap();
    let m0 = tx.post(&write(0)).unwrap();
    let Some(TxKind::Data { header, .. }) = tx.next_packet(0).map(|p| p.kind) else {
        panic!("no data packet");
    };
    assert!(matches!(rx.on_data(&header, false, 0), RxVerdict::Place(_)));
    assert_eq!(rx.ack_for(header.path_id).unwrap().msg_window, 64);
    // An MSN 64 ahead of the (still unreleased) first is out of window.
    let far = DataHeader {
        msn: m0.wrapping_add(MSG_WINDOW_V1 as u32),
        psn: header.psn + 1,
        ..header
    };
    assert!(matches!(rx.on_data(&far, false, 0), RxVerdict::Drop(_)));
    // A connection's first packet fixed the window: it no longer changes.
    rx.set_msg_window(MSG_WINDOW_MAX);
    assert_eq!(rx.msg_window(), MSG_WINDOW_V1);
}
