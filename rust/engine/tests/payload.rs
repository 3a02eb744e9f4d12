//! The payload size the ends of a QP agree in their PLANES exchange
//! (protocol.md 1.8, issue 11 item 5): messages flagged `FLAG_WIDE` are
//! split at sizes that are no power of two (a 1500-byte plane's 1,436,
//! a jumbo plane's 8,936), every byte placed exactly once in any order,
//! and losses found by SACK and resent as before.

use std::collections::{BTreeMap, VecDeque};

use metaroce_engine::config::{ReceiverConfig, SenderConfig};
use metaroce_engine::receiver::{DropReason, Receiver, RxVerdict};
use metaroce_engine::sender::{Message, Sender, TxKind};
use metaroce_engine::wire::{DataHeader, Opcode, FLAG_RETRANSMIT, FLAG_WIDE};

/// The path MTU both ends set (perftest's pick on a 1500-byte link).
const PATH_MTU: u32 = 1024;
const MS: u64 = 1_000_000;

fn write(len: u32) -> Message {
    Message {
        opcode: Opcode::Write,
        len,
        remote_va: 0x10_0000,
        rkey: 7,
        imm: 0,
        rsn: 0,
    }
}

fn pair(payload: Option<u32>) -> (Sender, Receiver) {
    let mut tx = Sender::new(
        SenderConfig {
            dst_qpn: 2,
            mtu: PATH_MTU,
            ..SenderConfig::DEFAULT
        },
        0,
    )
    .unwrap();
    let mut rx = Receiver::new(ReceiverConfig {
        peer_qpn: 1,
        mtu: PATH_MTU,
    })
    .unwrap();
    if let Some(p) = payload {
        assert!(tx.set_payload(Some(p)));
        assert!(rx.set_payload(p));
    }
    (tx, rx)
}

/// What the receiver placed, per MSN: (offset, len) of each placement.
type Placed = BTreeMap<u32, Vec<(u32, u32)>>;

/// Runs `tx` to `rx` until `msgs` complete: the first transmission of
/// every `drop_every`-th data packet is lost (0: none), and each batch
/// of packets arrives in reverse order. Returns the placements and the
/// headers sent.
fn run(
    tx: &mut Sender,
    rx: &mut Receiver,
    msgs: usize,
    drop_every: usize,
) -> (Placed, Vec<DataHeader>) {
    let mut placed = Placed::new();
    let mut sent = Vec::new();
    let mut acks = VecDeque::new();
    let (mut done, mut n) = (0, 0usize);
    let mut now = MS;
    while done < msgs {
        assert!(now < 20_000 * MS, "stuck: {done} of {msgs} done");
        for a in acks.drain(..) {
            tx.on_ack(&a, now);
        }
        while tx.pop_completion().is_some() {
            done += 1;
        }
        tx.on_timer(now);
        let mut batch = Vec::new();
        while let Some(p) = tx.next_packet(now) {
            if let TxKind::Data { header, .. } = p.kind {
                sent.push(header);
                n += 1;
                let lost = drop_every != 0
                    && n.is_multiple_of(drop_every)
                    && header.flags & FLAG_RETRANSMIT == 0;
                if !lost {
                    batch.push(header);
                }
            }
        }
        for h in batch.iter().rev() {
            match rx.on_data(h, false, now) {
                RxVerdict::Place(p) => placed.entry(p.msn).or_default().push((p.offset, p.len)),
                RxVerdict::Duplicate => {}
                v => panic!("msn {} offset {}: {v:?}", h.msn, h.offset),
            }
            if let Some(a) = rx.ack_now(h.path_id) {
                acks.push_back(a);
            }
        }
        acks.extend(rx.flush(now));
        while rx.pop_completion().is_some() {}
        now += 100_000;
    }
    (placed, sent)
}

/// Every byte of each message placed exactly once, in packets of
/// `payload` bytes but the last.
fn assert_exact(placed: &Placed, lens: &[(u32, u32)], payload: u32) {
    for &(msn, len) in lens {
        let mut parts = placed.get(&msn).cloned().unwrap_or_default();
        parts.sort_unstable();
        let mut at = 0;
        for &(off, n) in &parts {
            assert_eq!(off, at, "msn {msn}: gap or overlap at {at}");
            assert!(
                n == payload || off + n == len,
                "msn {msn}: {n} bytes at {off}"
            );
            at += n;
        }
        assert_eq!(at, len, "msn {msn} of {len} bytes");
        assert_eq!(
            parts.len() as u32,
            len.div_ceil(payload).max(1),
            "msn {msn}"
        );
    }
}

fn lens_for(payload: u32) -> Vec<u32> {
    vec![
        1,
        PATH_MTU + 1,
        payload - 1,
        payload,
        payload + 1,
        3 * payload + 17,
        64 * 1024,
        // The longest message the path MTU allows: fewer packets here.
        PATH_MTU * 1024,
    ]
}

fn split_and_place(payload: u32, drop_every: usize) {
    let (mut tx, mut rx) = pair(Some(payload));
    let mut lens = Vec::new();
    for len in lens_for(payload) {
        lens.push((tx.post(&write(len)).unwrap(), len));
    }
    let (placed, sent) = run(&mut tx, &mut rx, lens.len(), drop_every);
    assert_exact(&placed, &lens[1..], payload);
    // A one-packet message is no wider at the agreed size: not flagged.
    assert_eq!(placed[&lens[0].0], vec![(0, 1)]);
    for h in &sent {
        let wide = h.flags & FLAG_WIDE != 0;
        assert_eq!(wide, h.msn != lens[0].0, "msn {}", h.msn);
        assert!(u32::from(h.payload_len) <= payload);
    }
    if drop_every != 0 {
        assert!(tx.stats().retransmits > 0, "losses were resent");
        assert!(tx.stats().sack_losses > 0, "found by SACK");
    }
}

#[test]
fn messages_split_and_place_exactly_at_1436_byte_payloads() {
    split_and_place(1436, 0);
}

#[test]
fn messages_split_and_place_exactly_at_8936_byte_payloads() {
    split_and_place(8936, 0);
}

#[test]
fn losses_at_agreed_sizes_are_found_by_sack_and_resent() {
    split_and_place(1436, 7);
    split_and_place(8936, 5);
}

#[test]
fn a_sender_switched_back_to_the_path_mtu_keeps_its_wide_messages_whole() {
    let (mut tx, mut rx) = pair(Some(1436));
    let wide = tx.post(&write(10_000)).unwrap();
    // A plane can no longer carry 1,436 bytes: new messages at the path MTU.
    assert!(tx.set_payload(None));
    assert_eq!(tx.payload(), PATH_MTU);
    let narrow = tx.post(&write(10_000)).unwrap();
    let (placed, sent) = run(&mut tx, &mut rx, 2, 4);
    assert_exact(&placed, &[(wide, 10_000)], 1436);
    assert_exact(&placed, &[(narrow, 10_000)], PATH_MTU);
    assert!(sent
        .iter()
        .all(|h| (h.flags & FLAG_WIDE != 0) == (h.msn == wide)));
    // The agreed size is the connection's: back on, another is refused.
    assert!(!tx.set_payload(Some(2000)));
    assert!(tx.set_payload(Some(1436)));
    assert_eq!(tx.payload(), 1436);
}

#[test]
fn the_agreed_size_is_fixed_and_above_the_path_mtu() {
    let (mut tx, mut rx) = pair(None);
    assert!(!rx.set_payload(PATH_MTU), "no wider than the path MTU");
    assert!(!rx.set_payload(9217), "above MAX_PAYLOAD");
    assert!(rx.set_payload(8936));
    assert!(!rx.set_payload(1436), "fixed once agreed");
    assert_eq!(rx.payload(), 8936);
    // No wider than the path MTU: the sender stays at it.
    assert!(tx.set_payload(Some(PATH_MTU)));
    assert_eq!(tx.payload(), PATH_MTU);
}

#[test]
fn wide_packets_before_agreement_or_disagreeing_are_dropped() {
    let (mut tx, _) = pair(Some(1436));
    let msn = tx.post(&write(5000)).unwrap();
    let mut hs = Vec::new();
    while let Some(p) = tx.next_packet(MS) {
        if let TxKind::Data { header, .. } = p.kind {
            hs.push(header);
        }
    }
    assert!(hs.len() >= 2 && hs.iter().all(|h| h.msn == msn));
    // A receiver that agreed nothing cannot tell where a wide packet goes.
    let (_, mut rx) = pair(None);
    assert_eq!(
        rx.on_data(&hs[0], false, MS),
        RxVerdict::Drop(DropReason::BadSegmentation)
    );
    // One agreed at another size neither.
    let mut other = pair(None).1;
    assert!(other.set_payload(2000));
    assert_eq!(
        other.on_data(&hs[0], false, MS),
        RxVerdict::Drop(DropReason::BadSegmentation)
    );
    // A packet of the same message without the flag disagrees with it.
    let (_, mut rx) = pair(Some(1436));
    assert!(matches!(rx.on_data(&hs[0], false, MS), RxVerdict::Place(_)));
    let mut narrow = hs[1];
    narrow.flags &= !FLAG_WIDE;
    narrow.offset = PATH_MTU;
    narrow.payload_len = PATH_MTU as u16;
    assert_eq!(
        rx.on_data(&narrow, false, MS),
        RxVerdict::Drop(DropReason::Inconsistent)
    );
}
