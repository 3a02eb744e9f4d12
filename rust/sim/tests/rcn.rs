//! Receiver rate hints (protocol.md 6.5) in the 16-to-1 incast, with the
//! driver's formula (`Receiver::rcn_count`): the receiving host counts its
//! QPs that receive, and each advertises its share of the downlink. Hints
//! counted every 10 us (an RTT of this fabric, what a NIC would do) and
//! every 1 ms (the driver's tick), against none: with them the standing
//! queue shrinks to the hints' 25% headroom and a shallow buffer stops
//! dropping; without them only ECN and the queueing delay hold the senders
//! back. (The first RTT's burst is the same in all: no hint exists before
//! the first ACK.)

use metaroce_sim::scenarios::{
    down_utilisation, incast_rcn, jain_fairness, rig_incast, sender_goodputs,
};
use metaroce_sim::sim::{run, Scenario};

/// What the incast's comparison reports.
struct Row {
    queue_steady: u64,
    queue_mean: u64,
    drops: u64,
    jain: f64,
    goodput: f64,
    util: f64,
}

fn measure(sc: &Scenario) -> Row {
    let o = run(sc);
    assert!(o.finished, "{}: did not finish", sc.name);
    assert!(o.errors.is_empty(), "{}: {:?}", sc.name, o.errors);
    assert_eq!(o.qp_errors, 0, "{}", sc.name);
    let rates = sender_goodputs(&o, sc);
    let row = Row {
        queue_steady: o.max_down_queue_steady,
        queue_mean: o.mean_down_queue,
        drops: o.link_drops,
        jain: jain_fairness(&rates),
        goodput: o.goodput_gbps,
        util: down_utilisation(&o, sc),
    };
    println!(
        "{:<40} queue max {:>5} KB, after 1 ms {:>4} KB, mean {:>4} KB; drops {:>5}; Jain {:.4}; goodput {:.1} Gbit/s ({:.1}% of the downlink)",
        sc.name,
        o.max_down_queue / 1000,
        row.queue_steady / 1000,
        row.queue_mean / 1000,
        row.drops,
        row.jain,
        row.goodput,
        row.util * 100.0
    );
    row
}

/// The incast with hints counted every `tick_ns` (or none), the
/// downlink's buffer `buffer` bytes if given (default 4 MB).
fn incast(seed: u64, tick_ns: Option<u64>, buffer: Option<u64>) -> Scenario {
    let mut sc = incast_rcn(seed, tick_ns);
    if let Some(b) = buffer {
        sc.down.buffer_bytes = b;
        sc.name += &format!(", {} KB buffer", b / 1000);
    }
    sc
}

const NIC_TICK: Option<u64> = Some(10_000);
const DRIVER_TICK: Option<u64> = Some(1_000_000);

#[test]
fn hints_keep_the_standing_queue_small() {
    for seed in [4, 9] {
        let off = measure(&incast(seed, None, None));
        let on = measure(&incast(seed, NIC_TICK, None));
        let driver = measure(&incast(seed, DRIVER_TICK, None));
        // Without hints ECN holds the queue above its threshold (120 KB);
        // with them it is the hints' headroom, a quarter of the BDP.
        assert!(
            off.queue_steady > 120_000,
            "seed {seed}: {}",
            off.queue_steady
        );
        assert!(on.queue_steady * 4 <= off.queue_steady, "seed {seed}");
        assert!(on.queue_mean * 4 <= off.queue_mean, "seed {seed}");
        // The driver's count comes a millisecond late: the queue stands
        // until the first hints, then drains.
        assert!(driver.queue_mean * 2 <= off.queue_mean, "seed {seed}");
        for r in [&off, &on, &driver] {
            assert_eq!(r.drops, 0, "seed {seed}");
            assert!(r.jain >= 0.99, "seed {seed}: Jain {}", r.jain);
            assert!(r.util >= 0.95, "seed {seed}: utilisation {}", r.util);
        }
    }
}

#[test]
fn hints_stop_a_shallow_buffer_dropping() {
    for seed in [4, 9] {
        let off = measure(&incast(seed, None, Some(300_000)));
        let on = measure(&incast(seed, NIC_TICK, Some(300_000)));
        let driver = measure(&incast(seed, DRIVER_TICK, Some(300_000)));
        // Without hints the standing queue fills the buffer: thousands of
        // drops. With them only the first RTT's burst drops.
        assert!(off.drops > 5_000, "seed {seed}: {}", off.drops);
        assert!(on.drops * 20 <= off.drops, "seed {seed}");
        assert!(driver.drops * 5 <= off.drops, "seed {seed}");
        for r in [&on, &driver] {
            assert!(r.jain >= off.jain - 0.001, "seed {seed}: Jain {}", r.jain);
            assert!(r.goodput >= 0.95 * off.goodput, "seed {seed}");
        }
    }
}

/// Messages each sender completed from `from` to `to` (ns).
fn completed_between(
    o: &metaroce_sim::sim::Outcome,
    sc: &Scenario,
    from: u64,
    to: u64,
) -> Vec<f64> {
    o.msg_done_ns
        .chunks(sc.msgs_per_sender.max(1))
        .map(|done| done.iter().filter(|&&t| t >= from && t < to).count() as f64)
        .collect()
}

/// rcn.sh's RED minimum: no CE mark, nor queue worth one, below it.
const RED_MIN: u64 = 15_000;

#[test]
fn the_rigs_incast_queue_stays_below_red_from_the_first_rtt() {
    // 4 QPs into 10 Mbit/s at the driver's defaults. Before the first
    // flight was capped and newcomers numbered, every QP sent 4 paths x 8
    // packets before its first ACK and took all of C from it: 145 KB
    // queued in the first RTT (rcn.sh's qdisc holds 160 KB: the rig's
    // drops), RTOs, then the hints' 2-packet caps.
    for rtt in [300_000, 1_000_000] {
        let on_sc = rig_incast(4, true, rtt);
        let off_sc = rig_incast(4, false, rtt);
        let (on, off) = (run(&on_sc), run(&off_sc));
        for (sc, o) in [(&on_sc, &on), (&off_sc, &off)] {
            assert!(o.finished && o.errors.is_empty(), "{}", sc.name);
            println!(
                "{}: queue max {} B, after 100 ms {} B, mean {} B; drops {}; RTOs {}; utilisation {:.3}",
                sc.name,
                o.max_down_queue,
                o.max_down_queue_steady,
                o.mean_down_queue,
                o.link_drops,
                o.timeouts,
                down_utilisation(o, sc)
            );
        }
        assert!(off.max_down_queue_steady > 2 * RED_MIN, "off: ECN's queue");
        assert!(
            on.max_down_queue < RED_MIN,
            "RTT {rtt}: {} B",
            on.max_down_queue
        );
        assert_eq!(on.link_drops, 0);
        assert_eq!(on.timeouts, 0);
        assert!(down_utilisation(&on, &on_sc) >= 0.95);
        let steady = completed_between(&on, &on_sc, 1_000_000_000, 4_000_000_000);
        assert!(jain_fairness(&steady) >= 0.99, "{steady:?}");
        assert!(on.duration_ns <= off.duration_ns, "RCN on as fast as off");
    }
}

#[test]
fn the_rigs_incast_keeps_the_link_busy_at_a_slow_host_rtt() {
    // 2 packets in flight per QP (the cap's floor) are the hints' window
    // at 10 Mbit/s up to about 7 ms of ACK turnaround; at 3 ms (a slow
    // TCG host) the link still runs full and the queue under RED's
    // minimum once the first RTTs are over.
    let sc = rig_incast(4, true, 3_000_000);
    let o = run(&sc);
    assert!(o.finished);
    assert_eq!(o.link_drops, 0);
    assert!(down_utilisation(&o, &sc) >= 0.95);
    assert!(
        o.max_down_queue_steady < RED_MIN,
        "{} B",
        o.max_down_queue_steady
    );
}

/// Runs `sc` twice: once to find when all but its last QP had finished,
/// once more (the same seed: the same run) to take the downlink's queue
/// maximum from then on. Returns that time and that maximum.
fn queue_once_alone(mut sc: Scenario) -> (u64, u64) {
    let o = run(&sc);
    assert!(o.finished && o.errors.is_empty(), "{}", sc.name);
    let mut ends: Vec<u64> = o
        .msg_done_ns
        .chunks(sc.msgs_per_sender.max(1))
        .map(|done| done.iter().copied().max().unwrap_or(0))
        .collect();
    ends.sort_unstable();
    let alone = ends[ends.len().saturating_sub(2)];
    sc.warmup_ns = alone;
    let again = run(&sc);
    (alone, again.max_down_queue_steady)
}

#[test]
fn the_last_qp_of_an_incast_alone_sends_no_burst() {
    // rcn.sh's clients start one after another, so they end so: the last
    // runs alone, and a QP alone gets no hint (protocol.md 6.5). Its
    // paths' windows grew under the hint's cap on every ACK; lifted, the
    // cap left them all to send at once (the rig's bench: 130 KB in the
    // queue as 3 of 4 QPs finished; here 102 KB at 300 us). From twice
    // its flight, the last QP queues no more than a QP alone from its
    // start does (its slow start against ECN), on top of what the hints
    // had queued (their headroom, under RED's minimum).
    for rtt in [300_000, 1_000_000] {
        let mut incast = rig_incast(4, true, rtt);
        incast.start_stagger_ns = 300_000_000;
        let (from, last) = queue_once_alone(incast);
        let mut lone = rig_incast(4, true, rtt);
        lone.senders = 1;
        let lone = run(&lone);
        println!(
            "RTT {} us: the last QP alone from {} ms queued at most {last} B; a QP alone from its start, {} B",
            rtt / 1000,
            from / 1_000_000,
            lone.max_down_queue
        );
        assert!(last <= lone.max_down_queue + RED_MIN, "RTT {rtt}: {last} B");
    }
}
