//! Receiver rate hints (protocol.md 6.5) end to end in the engine: a
//! device's count of its receiving QPs gives each the share the spec
//! says, the share rides in every ACK, and the sender caps its packets in
//! flight at what the hint allows over its base RTT.

mod common;

use common::{receiver, write};
use metaroce_engine::config::SenderConfig;
use metaroce_engine::rcn::{receiving_window_ns, Shares, RECEIVING_WINDOW_NS};
use metaroce_engine::receiver::Receiver;
use metaroce_engine::sender::{Sender, TxKind};
use metaroce_engine::wire::DataHeader;

const MTU: u32 = 4096;
const MS: u64 = 1_000_000;

fn sender() -> Sender {
    Sender::new(
        SenderConfig {
            mtu: MTU,
            initial_paths: 4,
            pwnd_init: 16,
            ..SenderConfig::default()
        },
        0,
    )
    .unwrap()
}

/// One data packet from a fresh sender, for a receiver to accept.
fn one_packet() -> DataHeader {
    let mut tx = sender();
    tx.post(&write(MTU)).unwrap();
    match tx.next_packet(0).unwrap().kind {
        TxKind::Data { header, .. } => header,
        TxKind::Probe(_) => unreachable!(),
    }
}

/// A device's tick: each QP takes its hint from the last count and is
/// counted again; returns the new count's shares.
fn count(qps: &mut [Receiver], capacity: u32, last: Shares, now: u64) -> Shares {
    let n = qps
        .iter_mut()
        .map(|r| r.rcn_count(&last, now))
        .filter(|&c| c)
        .count();
    Shares::new(capacity, n as u32)
}

#[test]
fn n_receiving_qps_each_advertise_a_share_and_a_newcomer_the_next() {
    const C: u32 = 100_000;
    // The hints are in kbit/s, the capacity in Mbit/s.
    const K: u32 = C * 1000;
    let pkt = one_packet();
    for n in 0..=8usize {
        let mut qps: Vec<Receiver> = (0..10).map(|_| receiver(MTU)).collect();
        for rx in &mut qps[..n] {
            rx.on_data(&pkt, false, MS);
        }
        let first = count(&mut qps, C, Shares::NONE, 2 * MS);
        assert_eq!(first.receiving(), n as u32);
        // The count's hints, from the next tick on; and in the ACKs.
        let second = count(&mut qps, C, first, 3 * MS);
        assert_eq!(second, first, "nothing changed within the window");
        // Counted alone: no hint; a newcomer beside n: C / (n + 1), all of
        // it on an idle device.
        let share = |k: usize| if k < 2 { 0 } else { K / k as u32 };
        for (i, rx) in qps.iter_mut().enumerate() {
            let want = if i < n { share(n) } else { K / (n as u32 + 1) };
            assert_eq!(rx.rate_hint_kbps(), want, "QP {i} of {n} receiving");
            if i < n {
                let ack = rx.ack_for(pkt.path_id).expect("a path to acknowledge");
                assert_eq!(ack.rate_hint_kbps, want);
            }
        }
        // Quiet for the window: nobody counts, nobody is hinted.
        let later = 2 * MS + RECEIVING_WINDOW_NS;
        let idle = count(&mut qps, C, second, later);
        assert_eq!(idle.receiving(), 0);
        count(&mut qps, C, idle, later + MS);
        assert!(qps.iter().all(|r| r.rate_hint_kbps() == K), "newcomers all");
        count(&mut qps, 0, Shares::NONE, later + 2 * MS);
        assert!(qps.iter().all(|r| r.rate_hint_kbps() == 0));
    }
}

#[test]
fn qps_held_to_a_small_share_stay_counted_at_every_tick() {
    // The rig's incast: 4 QPs into 10 Mbit/s. At its 2,500 kbit/s share
    // a QP's 4 KiB packet takes 13 ms, three times the 4 ms floor: with a
    // fixed 4 ms window a QP sending at its share would drop out of most
    // counts and the others' hints would double.
    const C: u32 = 10;
    let pkt = one_packet();
    let mut qps: Vec<Receiver> = (0..4).map(|_| receiver(MTU)).collect();
    const SHARE: u32 = C * 1000 / 4;
    let packet_ns = u64::from(MTU) * 8 * 1_000_000 / u64::from(SHARE);
    assert_eq!(receiving_window_ns(SHARE, MTU), 8 * packet_ns);
    assert_eq!(
        receiving_window_ns(0, MTU),
        RECEIVING_WINDOW_NS,
        "no hint: the floor"
    );
    assert_eq!(
        receiving_window_ns(100_000_000, MTU),
        RECEIVING_WINDOW_NS,
        "a fast share: the floor"
    );
    let mut shares = Shares::NONE;
    let mut next = [0u64; 4];
    for tick in 1..2_000u64 {
        let now = tick * MS;
        for (i, rx) in qps.iter_mut().enumerate() {
            // Each QP a packet every 1.5 packet times, staggered.
            if now >= next[i] {
                rx.on_data(&pkt, false, now);
                next[i] = now + packet_ns * 3 / 2 + i as u64 * MS;
            }
        }
        shares = count(&mut qps, C, shares, now);
        if tick > 2 {
            assert_eq!(shares.receiving(), 4, "tick {tick}");
            assert!(
                qps.iter().all(|r| r.rate_hint_kbps() == SHARE),
                "tick {tick}"
            );
        }
    }
    // Stopped: each gives its share back within its window and a tick.
    let stop = 2_000 * MS;
    let window = receiving_window_ns(SHARE, MTU);
    let mut t = stop;
    while shares.receiving() > 0 {
        t += MS;
        assert!(
            t <= stop + window + 2 * MS,
            "still {} receiving",
            shares.receiving()
        );
        shares = count(&mut qps, C, shares, t);
    }
}

#[test]
fn no_capacity_means_no_hints_but_the_count_goes_on() {
    let pkt = one_packet();
    let mut qps: Vec<Receiver> = (0..4).map(|_| receiver(MTU)).collect();
    for rx in &mut qps {
        rx.on_data(&pkt, false, 0);
    }
    let s = count(&mut qps, 0, Shares::NONE, MS);
    assert_eq!(s.receiving(), 4);
    count(&mut qps, 0, s, 2 * MS);
    assert!(qps.iter().all(|r| r.rate_hint_kbps() == 0));
}

/// What [`run_lifting`] measured.
struct Flight {
    /// The most packets in flight once the first ACK arrived.
    most: u32,
    /// The rate (kbit/s) from the first ACK on.
    rate: u64,
    /// The most packets in flight under the hint.
    under_hint: u32,
    /// The most in flight in the RTT after the sender took the lift.
    after_lift: u32,
}

/// Sends a long WRITE over a path of `rtt` ns with every packet delivered
/// and acknowledged one RTT later, the receiver advertising `hint`
/// (kbit/s); returns the most packets in flight once the first ACK
/// arrived, and the rate (kbit/s) from then on.
fn run(hint: u32, rtt: u64) -> (u32, u64) {
    let f = run_lifting(hint, rtt, u64::MAX);
    (f.most, f.rate)
}

/// [`run`], the receiver advertising no hint from `lift_at` (ns) on, as
/// when the QP's fellow receivers stop.
fn run_lifting(hint: u32, rtt: u64, lift_at: u64) -> Flight {
    let mut tx = sender();
    let mut rx = receiver(MTU);
    rx.set_rate_hint(hint);
    let len = 1000 * MTU;
    tx.post(&write(len)).unwrap();
    // Data packets on the way to the receiver, ACKs on the way back,
    // each with its arrival time: half the RTT each way.
    let mut to_rx: Vec<(u64, DataHeader)> = Vec::new();
    let mut to_tx = Vec::new();
    let mut now = 0u64;
    let (mut most, mut under_hint, mut after_lift) = (0, 0, 0);
    let mut acked_once = false;
    // When the sender took the first ACK without a hint.
    let mut lifted: Option<u64> = None;
    // Packets sent before the first ACK (uncapped: no RTT sample yet),
    // and when that ACK came.
    let (mut early, mut first_ack) = (0u64, 0u64);
    let step = rtt / 20;
    while tx.outstanding() > 0 && now < 10_000 * rtt {
        while let Some(p) = tx.next_packet(now) {
            if let TxKind::Data { header, .. } = p.kind {
                to_rx.push((now + rtt / 2, header));
                early += u64::from(!acked_once);
            }
        }
        if acked_once {
            most = most.max(tx.inflight());
            match lifted {
                None => under_hint = under_hint.max(tx.inflight()),
                Some(t) if now < t + rtt => after_lift = after_lift.max(tx.inflight()),
                Some(_) => {}
            }
        }
        now += step;
        if now >= lift_at {
            rx.set_rate_hint(0);
        }
        let (due, rest): (Vec<_>, Vec<_>) = to_rx.into_iter().partition(|(t, _)| *t <= now);
        to_rx = rest;
        for (_, h) in due {
            rx.on_data(&h, false, now);
            if let Some(a) = rx.ack_for(h.path_id) {
                to_tx.push((now + rtt / 2, a));
            }
        }
        let (due, rest): (Vec<_>, Vec<_>) = to_tx.into_iter().partition(|(t, _)| *t <= now);
        to_tx = rest;
        for (_, a) in due {
            tx.on_ack(&a, now);
            if !acked_once {
                acked_once = true;
                first_ack = now;
            }
            if lifted.is_none() && tx.rate_hint_kbps() == 0 && now > lift_at {
                lifted = Some(now);
            }
        }
        while tx.pop_completion().is_some() {}
    }
    assert_eq!(tx.outstanding(), 0, "the message completed");
    let bits = (u64::from(len) - early * u64::from(MTU)) * 8;
    Flight {
        most,
        rate: bits * 1_000_000 / (now - first_ack).max(1),
        under_hint,
        after_lift,
    }
}

#[test]
fn a_lifted_hint_leaves_no_burst_of_the_windows_it_hid() {
    // rcn.sh's incast at its end: three of four QPs finished, and the
    // last, alone, gets no hint. Under the hint its paths' windows grew
    // on every ACK, never filled; sent at once they queued 130 KB at the
    // 10 Mbit/s bottleneck. From the lift on each path may have twice its
    // packets in flight then, and slow start from there.
    let rtt = 100_000;
    let f = run_lifting(2_000_000, rtt, 100 * rtt);
    assert!(
        f.under_hint > 0 && f.under_hint <= 8,
        "capped: {}",
        f.under_hint
    );
    assert!(
        f.after_lift <= 3 * f.under_hint + 4,
        "{} in flight in the RTT after the lift, {} under the hint",
        f.after_lift,
        f.under_hint
    );
    assert!(f.after_lift > f.under_hint, "the QP speeds up");
}

#[test]
fn the_sender_caps_packets_in_flight_at_the_hint_over_its_base_rtt() {
    let rtt = 100_000; // 100 us
                       // No hint: the windows alone (4 paths of 16 and growing).
    let (free, free_rate) = run(0, rtt);
    assert!(free > 64, "no cap: {free} in flight");
    // kbit/s: 2, 2.5, 5 and 10 Gbit/s.
    for hint in [2_000_000, 2_500_000, 5_000_000, 10_000_000] {
        // max(2, 1.25 * hint * base RTT / (8 * MTU)) packets.
        let cap = ((u64::from(hint) * rtt / 8_000_000) * 5 / 4 / u64::from(MTU)).max(2) as u32;
        let (most, rate) = run(hint, rtt);
        assert!(most <= cap, "hint {hint}: {most} in flight, cap {cap}");
        assert!(
            most + 2 >= cap,
            "hint {hint}: {most} in flight, cap {cap} not used"
        );
        // The rate follows the hint: within its 25% headroom, and not
        // below what the window of `cap` packets per RTT gives.
        assert!(
            rate <= u64::from(hint) * 5 / 4 + 100_000,
            "hint {hint}: {rate} kbit/s"
        );
        assert!(
            rate * 10 >= u64::from(hint) * 8,
            "hint {hint}: only {rate} kbit/s"
        );
        assert!(
            rate < free_rate,
            "hint {hint}: {rate} vs {free_rate} uncapped"
        );
    }
}

#[test]
fn newcomers_between_two_counts_are_numbered_as_they_come() {
    // rcn.sh's incast: 4 QPs start together on an idle device (its last
    // count found none receiving). Each takes a newcomer's hint at its
    // first packet, once until the next count: C, C/2, C/3, C/4, so that
    // their first ACKs already cap them near their shares, not at C each.
    // In kbit/s: 10,000, 5,000, 3,333, 2,500 (whole Mbit/s gave 3 and 2).
    const C: u32 = 10;
    let pkt = one_packet();
    let idle = Shares::new(C, 0);
    let mut qps: Vec<Receiver> = (0..4).map(|_| receiver(MTU)).collect();
    for (ahead, rx) in qps.iter_mut().enumerate() {
        rx.on_data(&pkt, false, MS);
        assert!(rx.rcn_join(), "a newcomer's first packet");
        rx.set_rate_hint(idle.joining(ahead as u32));
        rx.on_data(&pkt, false, MS);
        assert!(!rx.rcn_join(), "once between two counts");
    }
    let hints = |qps: &[Receiver]| qps.iter().map(|r| r.rate_hint_kbps()).collect::<Vec<_>>();
    assert_eq!(hints(&qps), [10_000, 5_000, 3_333, 2_500]);
    // The next count's visit, with the shares of the count that found
    // none receiving, leaves the newcomers their places (not C each: that
    // count did not see them), and counts them.
    let counted = count(&mut qps, C, idle, 2 * MS);
    assert_eq!(hints(&qps), [10_000, 5_000, 3_333, 2_500]);
    // The count after: C / N for all, and none joins again.
    let counted = count(&mut qps, C, counted, 3 * MS);
    assert_eq!(counted.receiving(), 4);
    for rx in &mut qps {
        assert_eq!(rx.rate_hint_kbps(), C * 1000 / 4);
        assert!(!rx.rcn_join(), "counted: the tick's hint");
    }
}

#[test]
fn the_first_flight_waits_for_the_first_ack_which_brings_the_hint() {
    // Before any ACK a QP of 4 paths of 16 packets sends `first_flight`
    // packets in all, not 64: an incast's first RTT, which no hint can
    // reach, is what queued 140 KB at rcn.sh's 10 Mbit/s bottleneck.
    let mut tx = sender();
    let mut rx = receiver(MTU);
    assert_eq!(tx.config().first_flight, 2, "the default");
    tx.post(&write(64 * MTU)).unwrap();
    let mut first = Vec::new();
    while let Some(p) = tx.next_packet(0) {
        if let TxKind::Data { header, .. } = p.kind {
            first.push(header);
        }
    }
    assert_eq!(first.len(), 2);
    // Its ACK, 1 ms later, carries a 2 Mbit/s hint: the cap, max(2,
    // 1.25 * 2 Mbit/s * 1 ms / 4 KiB), holds the QP at 2 in flight.
    rx.set_rate_hint(2_000);
    let mut ack = None;
    for h in &first {
        rx.on_data(h, false, 0);
        ack = rx.ack_for(h.path_id).or(ack);
    }
    tx.on_ack(&ack.expect("an ACK"), MS);
    let mut sent = 0;
    while tx.next_packet(MS).is_some() {
        sent += 1;
    }
    assert_eq!(tx.inflight(), 2, "{sent} sent after the ACK");
    // No hint: the paths' windows from the first ACK on.
    let mut free = Sender::new(
        SenderConfig {
            first_flight: 0,
            ..*tx.config()
        },
        0,
    )
    .unwrap();
    free.post(&write(64 * MTU)).unwrap();
    let mut n = 0;
    while free.next_packet(0).is_some() {
        n += 1;
    }
    assert_eq!(n, 64, "first_flight 0: 4 paths x 16");
}

#[test]
fn an_incast_s_hints_sum_to_the_capacity() {
    // 10 Mbit/s over 4 and over 16 receiving QPs, each counted by the
    // device's tick: every hint is the kbit/s share (2,500; 625), and
    // the hints sum to the capacity less under N kbit/s. Whole Mbit/s
    // gave 2 each (80% of the link) and 1 each (160%).
    const C: u32 = 10;
    let pkt = one_packet();
    for (n, each) in [(4usize, 2_500u32), (16, 625)] {
        let mut qps: Vec<Receiver> = (0..n).map(|_| receiver(MTU)).collect();
        for rx in &mut qps {
            rx.on_data(&pkt, false, MS);
        }
        let first = count(&mut qps, C, Shares::NONE, 2 * MS);
        assert_eq!(first.receiving(), n as u32);
        count(&mut qps, C, first, 3 * MS);
        let mut sum = 0u64;
        for rx in &mut qps {
            assert_eq!(rx.rate_hint_kbps(), each, "{n} QPs");
            let ack = rx.ack_for(pkt.path_id).expect("a path to acknowledge");
            assert_eq!(ack.rate_hint_kbps, each, "the ACK carries the share");
            sum += u64::from(ack.rate_hint_kbps);
        }
        let kbps = u64::from(C) * 1000;
        assert!(
            sum <= kbps && kbps - sum < n as u64,
            "{n} QPs: {sum} of {kbps} kbit/s"
        );
    }
}
