//! Replay (replay.rs) against edited captures: a changed ACK, a removed
//! packet, a packet nobody sent, a corrupted one; and the simulator's
//! determinism (same seed, same bytes).

use metaroce_engine::crc::crc32;
use metaroce_engine::wire::{parse_packet, Packet};
use metaroce_sim::captures;
use metaroce_sim::duplex::{self, Outcome, A, B};
use metaroce_sim::pcap::{self, Frame};
use metaroce_sim::replay::{self, Options, Report};

/// A named scenario's run with its own seed.
fn run(name: &str) -> Outcome {
    let c = captures::find(name).expect("scenario");
    duplex::run(&(c.scenario)(c.seed))
}

fn replay_frames(a: &[Frame], b: Option<&[Frame]>) -> Report {
    let ca = pcap::read(&pcap::write(a)).expect("pcap");
    let cb = b.map(|b| pcap::read(&pcap::write(b)).expect("pcap"));
    replay::replay(
        ("a.pcap", &ca),
        cb.as_ref().map(|c| ("b.pcap", c)),
        &Options::default(),
    )
    .expect("replay")
}

#[test]
fn every_scenario_replays_without_difference() {
    for c in captures::all() {
        let o = run(c.name);
        let rep = replay_frames(&o.taps[A], Some(&o.taps[B]));
        assert_eq!(rep.differences(), 0, "{}:\n{rep}", c.name);
        assert_eq!(rep.taps[0].sent + rep.taps[0].received, o.taps[A].len());
    }
}

#[test]
fn same_seed_same_bytes() {
    let c = captures::find("sack").expect("sack");
    let run = |seed, loss| {
        let mut sc = (c.scenario)(seed);
        sc.loss = loss;
        let o = duplex::run(&sc);
        (pcap::write(&o.taps[A]), pcap::write(&o.taps[B]))
    };
    assert_eq!(run(7, 0.05), run(7, 0.05));
    assert_ne!(run(7, 0.05), run(8, 0.05));
    // A lossy run replays cleanly too.
    let mut sc = (c.scenario)(7);
    sc.loss = 0.05;
    let o = duplex::run(&sc);
    assert!(o.lost > 2);
    let rep = replay_frames(&o.taps[A], Some(&o.taps[B]));
    assert_eq!(rep.differences(), 0, "{rep}");
}

fn reseal(f: &mut Frame) {
    let n = f.payload.len() - 4;
    let icrc = crc32(&f.payload[..n]);
    f.payload[n..].copy_from_slice(&icrc.to_be_bytes());
}

fn is_sack_ack(f: &Frame) -> bool {
    matches!(parse_packet(&f.payload), Ok(Packet::Ack(a)) if a.sack != [0; 4])
}

#[test]
fn edited_ack_sent_is_reported() {
    let o = run("sack");
    let mut b = o.taps[B].clone();
    let i = b
        .iter()
        .position(is_sack_ack)
        .expect("an ACK with SACK bits");
    // Byte 16 holds SACK bits 0-7: claim PSN cum_psn + 2 received too.
    b[i].payload[16] ^= 0x02;
    reseal(&mut b[i]);
    let rep = replay_frames(&b, None);
    let d = &rep.taps[0].diffs;
    assert_eq!(d.len(), 1, "{rep}");
    assert_eq!(d[0].frame, Some(i + 1));
    assert!(
        d[0].what.contains("sack=+1-2") && d[0].what.contains("sack=+1 "),
        "{rep}"
    );
}

#[test]
fn edited_ack_received_changes_what_the_sender_does() {
    let o = run("sack");
    let mut a = o.taps[A].clone();
    // The first ACK showing a hole, as if the packet above it had not
    // arrived either: the sender no longer sees the loss then.
    let i = a
        .iter()
        .position(is_sack_ack)
        .expect("an ACK with SACK bits");
    a[i].payload[16..48].fill(0);
    reseal(&mut a[i]);
    let rep = replay_frames(&a, None);
    let d = &rep.taps[0].diffs;
    assert!(!d.is_empty(), "{rep}");
    // The capture's next packet is the retransmission the engine no longer sends.
    assert_eq!(d[0].frame, Some(i + 2), "{rep}");
    assert!(d[0].what.contains("RETRANSMIT"), "{rep}");
}

#[test]
fn removed_packet_is_reported() {
    let o = run("spray");
    let mut b = o.taps[B].clone();
    // Host B never got the third data packet: its ACKs say otherwise.
    let i = b
        .iter()
        .enumerate()
        .filter(|(_, f)| f.dst == duplex::addr(B, 0))
        .nth(2)
        .map(|(i, _)| i)
        .expect("a received packet");
    b.remove(i);
    let rep = replay_frames(&b, None);
    assert!(!rep.taps[0].diffs.is_empty(), "{rep}");
    // Cross-checked with A's capture: the same gap shows as a loss.
    let rep = replay_frames(&o.taps[A], Some(&b));
    assert!(rep.network[0].contains("1 lost in the network"), "{rep}");
}

#[test]
fn forged_packet_is_reported_by_the_cross_check() {
    let o = run("spray");
    let mut b = o.taps[B].clone();
    let i = b
        .iter()
        .position(|f| f.dst == duplex::addr(B, 0))
        .expect("a received packet");
    b[i].payload[20..24].copy_from_slice(&3072u32.to_be_bytes());
    reseal(&mut b[i]);
    let rep = replay_frames(&o.taps[A], Some(&b));
    assert_eq!(rep.cross.len(), 1, "{rep}");
    assert!(rep.cross[0].what.contains("never sent"), "{rep}");
}

#[test]
fn drops_are_listed() {
    let o = run("late-dup");
    let rep = replay_frames(&o.taps[B], None);
    assert_eq!(rep.differences(), 0, "{rep}");
    let drops = &rep.taps[0].drops;
    assert_eq!(drops.len(), 1, "{rep}");
    assert!(drops[0].1.contains("MessageOutOfWindow"), "{rep}");
    // A corrupted packet: dropped by the parser, and no ACK for it.
    let mut b = o.taps[B].clone();
    let i = b
        .iter()
        .position(|f| f.dst == duplex::addr(B, 0))
        .expect("rx");
    b[i].payload[50] ^= 0x40;
    let rep = replay_frames(&b, None);
    assert!(rep.taps[0].drops[0].1.contains("IcrcMismatch"), "{rep}");
    assert!(rep.differences() > 0, "{rep}");
}
