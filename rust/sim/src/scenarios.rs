//! The acceptance scenarios and the metrics derived from them.
//!
//! Scaling: link rates, MTU (4 KiB), RTTs and window caps are the real
//! ones (100 Gbit/s per plane, ~7 us fabric RTT, 1.5 ms long-haul RTT, PWND
//! cap 256); only the amount of data is scaled down (tens to hundreds of
//! MB per run) so that every scenario simulates a few to tens of
//! milliseconds and runs in well under a second.

use metaroce_engine::config::SenderConfig;

use super::sim::{run, Chaos, LinkSpec, Outcome, Rcn, RxPause, Scenario};

/// Default fabric: 4 planes x 4 ECMP core links, 100 Gbit/s everywhere.
pub fn base(name: &str, seed: u64) -> Scenario {
    Scenario {
        name: name.to_string(),
        seed,
        planes: 4,
        links_per_plane: 4,
        host_gbps: 100.0,
        core: LinkSpec {
            gbps: 100.0,
            prop_ns: 2_000,
            ecn_bytes: 120_000,
            buffer_bytes: 2_000_000,
            loss: 0.0,
        },
        core_delay_spread_ns: 0,
        down: LinkSpec {
            gbps: 100.0,
            prop_ns: 1_000,
            ecn_bytes: 120_000,
            buffer_bytes: 4_000_000,
            loss: 0.0,
        },
        senders: 1,
        msgs_per_sender: 192,
        msg_bytes: 1 << 20,
        random_msgs: false,
        one_at_a_time: false,
        start_stagger_ns: 0,
        sender_cfg: SenderConfig {
            initial_paths: 8,
            max_paths: 64,
            min_rto_ns: 50_000,
            initial_rto_ns: 1_000_000,
            // Whole windows from the first packet: with a 50 us RTO floor,
            // a 2-packet first flight's RTT sample, taken on an empty
            // fabric, sets the RTO below the 16-to-1 incast's first queue
            // (~1 MB, 80 us: 5 spurious timeouts); the driver's 10 ms
            // floor is far above such a queue (`rig_incast` has the
            // driver's first flight).
            first_flight: 0,
            ..SenderConfig::default()
        },
        rcn: None,
        ack_delay_ns: 10_000,
        fail_plane: None,
        restore_plane: None,
        report_plane_down_after: None,
        warmup_ns: 1_000_000,
        fail_link: None,
        chaos: None,
        rx_pause: None,
        check_payload: false,
        time_limit_ns: 2_000_000_000,
        bin_ns: 10_000,
    }
}

/// Random loss `p` on every link (data and ACK directions).
pub fn loss(p: f64, seed: u64) -> Scenario {
    let mut sc = base(&format!("loss {:.0}%", p * 100.0), seed);
    sc.core.loss = p;
    sc.down.loss = p;
    sc
}

/// Heavy cross-path reordering: core links differ by up to 40 us of delay.
pub fn reorder(seed: u64) -> Scenario {
    let mut sc = base("reorder (delays 2..42 us)", seed);
    sc.links_per_plane = 8;
    sc.core_delay_spread_ns = 40_000;
    sc
}

/// Reordering within paths: every data packet is delayed by a random
/// `0..jitter_ns` on its way to the receiver (netem's jitter), so a path's
/// packets overtake each other, which ECMP never does but a misbehaving
/// network (or the rig's `jitter=` points) may.
pub fn path_jitter(jitter_ns: u64, seed: u64) -> Scenario {
    let mut sc = base(
        &format!("within-path jitter 0..{} us", jitter_ns / 1000),
        seed,
    );
    sc.chaos = Some(Chaos {
        jitter_ns,
        dup: 0.0,
    });
    sc
}

/// 8 planes; optionally plane 3 fails at 1.5 ms.
pub fn planes8(fail: bool, seed: u64) -> Scenario {
    let mut sc = base(
        if fail {
            "8 planes, plane 3 fails"
        } else {
            "8 planes lossless"
        },
        seed,
    );
    sc.planes = 8;
    sc.msgs_per_sender = 512;
    sc.sender_cfg.initial_paths = 16;
    if fail {
        sc.fail_plane = Some((3, 1_500_000));
    }
    sc
}

/// 8 planes: plane 3 fails at 1.5 ms, the host reports link-down 5 us later,
/// and the plane comes back at 3 ms (paths revive via probes).
pub fn planes8_reported(seed: u64) -> Scenario {
    let mut sc = planes8(true, seed);
    sc.name = "8 planes, reported + back".to_string();
    sc.report_plane_down_after = Some(5_000);
    sc.restore_plane = Some((3, 3_000_000));
    sc
}

/// 16-to-1 incast onto one 100 Gbit/s downlink with receiver rate hints,
/// counted every 10 us (about an RTT of this fabric, as a NIC would).
pub fn incast(seed: u64) -> Scenario {
    incast_rcn(seed, Some(10_000))
}

/// 16-to-1 incast onto one 100 Gbit/s downlink; the receiver's rate hints
/// (the driver's formula, protocol.md 6.5) counted every `tick_ns`, or
/// none.
pub fn incast_rcn(seed: u64, tick_ns: Option<u64>) -> Scenario {
    let name = match tick_ns {
        Some(t) if t >= 1_000_000 => format!("16-to-1 incast, RCN {} ms", t / 1_000_000),
        Some(t) => format!("16-to-1 incast, RCN {} us", t / 1000),
        None => "16-to-1 incast, RCN off".to_string(),
    };
    let mut sc = base(&name, seed);
    sc.planes = 1;
    sc.links_per_plane = 8;
    sc.senders = 16;
    sc.msgs_per_sender = 16;
    sc.sender_cfg.initial_paths = 4;
    sc.sender_cfg.pwnd_init = 4;
    sc.rcn = tick_ns.map(|tick_ns| Rcn {
        capacity_mbps: (sc.down.gbps * 1000.0) as u32 * sc.planes as u32,
        tick_ns,
    });
    sc
}

/// Each sender's goodput (Gbit/s): its payload over the time its last
/// message completed (every sender sends as much).
pub fn sender_goodputs(out: &Outcome, sc: &Scenario) -> Vec<f64> {
    let per = sc.msgs_per_sender.max(1);
    out.msg_done_ns
        .chunks(per)
        .map(|done| {
            let end = done.iter().copied().max().unwrap_or(0).max(1);
            (per as u64 * u64::from(sc.msg_bytes)) as f64 * 8.0 / end as f64
        })
        .collect()
}

/// Jain's fairness index of `rates`: `(sum x)^2 / (n * sum x^2)`, 1 when
/// all are equal, `1/n` when one has everything; 1 for none.
pub fn jain_fairness(rates: &[f64]) -> f64 {
    let sum: f64 = rates.iter().sum();
    let squares: f64 = rates.iter().map(|x| x * x).sum();
    if rates.is_empty() || squares == 0.0 {
        return 1.0;
    }
    sum * sum / (rates.len() as f64 * squares)
}

/// 8-to-1 onto a 1 Gbit/s downlink that marks no ECN (a software switch,
/// a host or a VM as the bottleneck), no rate hints: only the queueing
/// delay (or loss) can tell the senders to stop growing. `delay_target_ns`
/// 0 turns the delay signal off for comparison.
pub fn no_ecn_slow_bottleneck(seed: u64, delay_target_ns: u64) -> Scenario {
    let mut sc = base("8-to-1, 1G, no ECN", seed);
    sc.planes = 1;
    sc.links_per_plane = 4;
    sc.senders = 8;
    sc.msgs_per_sender = 4;
    sc.down.gbps = 1.0;
    sc.down.ecn_bytes = u64::MAX;
    sc.core.ecn_bytes = u64::MAX;
    sc.sender_cfg.initial_paths = 4;
    sc.sender_cfg.delay_target_ns = delay_target_ns;
    sc.warmup_ns = 20_000_000;
    sc.bin_ns = 1_000_000;
    sc
}

/// The two-VM rig's single QP at the simulator: one sender with the
/// driver's defaults (1 KiB MTU, 10 ms RTO floor, ACKs held up to 1 ms)
/// writes 64 KiB messages over 2 planes into a receiver that marks
/// nothing, at 200 Mbit/s (about the rate a TCG guest takes packets at).
/// Besides the base RTT of 500 us, the receiving host runs only 1 ms in
/// every `period_ns` and takes what waited then (`None`: always runs):
/// TCG's scheduling, where a guest's network work waits for a host thread
/// whatever the load, and a lightly loaded path's SRTT was 5 to 7 ms on
/// the rig while its least sample was under 1 ms. `delay_target_ns` 0
/// turns the delay signal off.
pub fn rig_scheduled(seed: u64, period_ns: Option<u64>, delay_target_ns: u64) -> Scenario {
    let name = match period_ns {
        Some(p) => format!(
            "rig, 200 Mbit/s receiver running 1 ms in {} ms",
            p / 1_000_000
        ),
        None => "rig, 200 Mbit/s receiver always running".to_string(),
    };
    let mut sc = rig(&name, seed, 2, 250_000);
    sc.down = LinkSpec {
        gbps: 0.1,
        prop_ns: 125_000,
        ecn_bytes: u64::MAX,
        buffer_bytes: 4_000_000,
        loss: 0.0,
    };
    sc.msgs_per_sender = 600;
    sc.msg_bytes = 64 << 10;
    sc.sender_cfg.delay_target_ns = delay_target_ns;
    sc.rx_pause = period_ns.map(|period_ns| RxPause {
        first_ns: 0,
        period_ns,
        dur_ns: period_ns - 1_000_000,
    });
    sc
}

/// The rig's latency test at the simulator: `rig_scheduled`'s hosts and
/// 200 Mbit/s receiver, one QP writing `msg_bytes` messages one at a
/// time (perftest's `ib_write_lat`, one way: each message posted when the
/// last completed).
pub fn rig_ping_pong(
    seed: u64,
    period_ns: Option<u64>,
    msg_bytes: u32,
    delay_target_ns: u64,
) -> Scenario {
    let mut sc = rig_scheduled(seed, period_ns, delay_target_ns);
    sc.name = format!("{}, {} B one at a time", sc.name, msg_bytes);
    sc.msg_bytes = msg_bytes;
    sc.msgs_per_sender = 400;
    sc.one_at_a_time = true;
    sc
}

/// One 100 Gbit/s plane with a 1.5 ms RTT: paths must grow.
pub fn long_rtt(seed: u64) -> Scenario {
    let mut sc = base("1.5 ms RTT, 100G", seed);
    sc.planes = 1;
    sc.links_per_plane = 16;
    sc.core.prop_ns = 749_000;
    sc.core.buffer_bytes = 64_000_000;
    sc.core.ecn_bytes = 1_000_000;
    sc.msgs_per_sender = 480;
    sc.sender_cfg.initial_paths = 4;
    sc.sender_cfg.initial_rto_ns = 10_000_000;
    sc.bin_ns = 100_000;
    sc
}

/// One plane limited to `gbps` at `rtt_ns` (the bench's `scale`
/// scenario: netem delay under a tbf rate on the planes, issue 14) with
/// messages of `msg_bytes`: the message window (v1: 64 messages, 2.1
/// Gbit/s of 4 KiB ones at 1 ms RTT) and the path count (256 packets per
/// path) must both grow to fill it. About 40 RTTs of data.
pub fn scale(rtt_ns: u64, gbps: f64, msg_bytes: u32, seed: u64) -> Scenario {
    let name = format!(
        "{:.1} ms RTT, {gbps} Gbit/s, {} KiB messages",
        rtt_ns as f64 / 1e6,
        msg_bytes / 1024
    );
    let mut sc = base(&name, seed);
    sc.planes = 1;
    sc.links_per_plane = 16;
    sc.host_gbps = gbps;
    sc.core.gbps = gbps;
    sc.down.gbps = gbps;
    sc.core.prop_ns = rtt_ns / 2 - sc.down.prop_ns;
    // Marks at a millisecond of queue, as a tbf's queue of a few ms
    // would drop: the bottleneck's queue, not the window, sets the rate.
    sc.core.ecn_bytes = (gbps * 1e6 / 8.0) as u64;
    sc.core.buffer_bytes = 256_000_000;
    sc.down.ecn_bytes = sc.core.ecn_bytes;
    sc.down.buffer_bytes = sc.core.buffer_bytes;
    let bytes = gbps * 1e9 / 8.0 * 40.0 * rtt_ns as f64 / 1e9;
    sc.msg_bytes = msg_bytes;
    sc.msgs_per_sender = (bytes / f64::from(msg_bytes)) as usize;
    sc.sender_cfg.initial_paths = 4;
    sc.sender_cfg.initial_rto_ns = 3 * rtt_ns;
    sc.warmup_ns = 10 * rtt_ns;
    sc.bin_ns = rtt_ns / 4;
    sc.time_limit_ns = 200 * rtt_ns;
    sc
}

/// 8 planes; the receiver stops for 300 us every 3 ms (six times the RTO
/// floor of 50 us: a descheduled vCPU, at fabric speed). Every path with
/// packets in flight times out in each pause; the ACKs that come when it
/// runs again echo the originals' timestamps and must undo the timeouts.
pub fn receiver_pauses(seed: u64) -> Scenario {
    let mut sc = planes8(false, seed);
    sc.name = "rx pauses 300us every 3ms".to_string();
    sc.rx_pause = Some(RxPause {
        first_ns: 500_000,
        period_ns: 3_000_000,
        dur_ns: 300_000,
    });
    sc
}

/// Lossless 64 KiB messages on the default fabric: how many ACKs the
/// receiver sends per data packet.
pub fn small_messages(seed: u64) -> Scenario {
    let mut sc = base("64 KiB messages", seed);
    sc.msg_bytes = 64 << 10;
    sc.msgs_per_sender = 2048;
    sc
}

/// Small-scale chaos for the ordered-completion property test.
pub fn chaos(seed: u64, loss: f64, dup: f64, jitter_ns: u64) -> Scenario {
    let mut sc = base("chaos", seed);
    sc.planes = 2;
    sc.links_per_plane = 3;
    sc.senders = 2;
    sc.msgs_per_sender = 120;
    sc.msg_bytes = 3000;
    sc.random_msgs = true;
    sc.check_payload = true;
    sc.core.loss = loss;
    sc.down.loss = loss;
    sc.chaos = Some(Chaos { jitter_ns, dup });
    sc.sender_cfg.mtu = 256;
    sc.sender_cfg.initial_paths = 3;
    sc.sender_cfg.max_paths = 8;
    sc.time_limit_ns = 5_000_000_000;
    sc
}

/// Goodput after a failure: recovery time and the rate from then on.
#[derive(Clone, Copy, Debug)]
pub struct Recovery {
    /// From the failure to the first bin back at `threshold` of the
    /// reference rate (ns).
    pub recovery_ns: u64,
    /// Goodput from the recovery point to the end (Gbit/s).
    pub goodput_after_gbps: f64,
}

/// Find when per-bin goodput is back above `threshold_gbps` after `t_fail`.
pub fn recovery(out: &Outcome, bin_ns: u64, t_fail: u64, threshold_gbps: f64) -> Recovery {
    let first = (t_fail / bin_ns) as usize;
    let last = out.bins.len().saturating_sub(1); // last bin is partial
    let window = 5usize;
    let mut rec_bin = last;
    for b in first..last.saturating_sub(window) {
        let bytes: u64 = out.bins[b..b + window].iter().sum();
        let gbps = bytes as f64 * 8.0 / (window as u64 * bin_ns) as f64;
        if gbps >= threshold_gbps {
            rec_bin = b;
            break;
        }
    }
    let bytes: u64 = out.bins[rec_bin..last].iter().sum();
    let dur = ((last - rec_bin) as u64 * bin_ns).max(1);
    Recovery {
        recovery_ns: (rec_bin as u64 * bin_ns).saturating_sub(t_fail),
        goodput_after_gbps: bytes as f64 * 8.0 / dur as f64,
    }
}

/// Longest gap between consecutive completions after `t_fail` (ns): how
/// long the in-order completion stream stalled on the failure.
pub fn completion_stall(out: &Outcome, t_fail: u64) -> u64 {
    let mut done: Vec<u64> = out
        .msg_done_ns
        .iter()
        .copied()
        .filter(|&t| t >= t_fail)
        .collect();
    done.sort_unstable();
    let mut prev = t_fail;
    let mut gap = 0;
    for t in done {
        gap = gap.max(t - prev);
        prev = t;
    }
    gap
}

/// Mean goodput over bins `[from, to)` in Gbit/s.
pub fn bin_goodput(out: &Outcome, bin_ns: u64, from: usize, to: usize) -> f64 {
    let to = to.min(out.bins.len());
    if from >= to {
        return 0.0;
    }
    let bytes: u64 = out.bins[from..to].iter().sum();
    bytes as f64 * 8.0 / ((to - from) as u64 * bin_ns) as f64
}

/// Downlink utilisation: bytes on the wire / capacity over the run.
pub fn down_utilisation(out: &Outcome, sc: &Scenario) -> f64 {
    if out.duration_ns == 0 {
        return 0.0;
    }
    let cap = sc.down.gbps * sc.planes as f64 * out.duration_ns as f64 / 8.0;
    out.down_bytes as f64 / cap
}

/// Run and return both the scenario and its outcome.
pub fn go(sc: Scenario) -> (Scenario, Outcome) {
    let out = run(&sc);
    (sc, out)
}

/// The rig's incast (selftests/rcn.sh) at the simulator: 4 QPs of one
/// host write into another through a 10 Mbit/s bottleneck that marks CE
/// above 15 KB (the RED minimum of rcn.sh's qdisc) and holds 160 KB, with
/// the driver's defaults (1 KiB MTU at a 1500-byte plane, 4 paths of 8
/// packets, a 10 ms RTO floor, ACKs held up to its 1 ms tick) and its
/// hints counted at that tick (`rcn`) or none. The base RTT, under a
/// millisecond, is mostly the hosts' (`rtt_ns`, split over both ways).
pub fn rig_incast(seed: u64, rcn: bool, rtt_ns: u64) -> Scenario {
    let name = format!(
        "rig incast 4 x 10 Mbit/s, RTT {} us, RCN {}",
        rtt_ns / 1000,
        if rcn { "on" } else { "off" }
    );
    let mut sc = rig(&name, seed, 1, rtt_ns);
    sc.down = LinkSpec {
        gbps: 0.01,
        prop_ns: rtt_ns / 2,
        ecn_bytes: 15_000,
        buffer_bytes: 160_000,
        loss: 0.0,
    };
    sc.senders = 4;
    sc.msgs_per_sender = 24;
    sc.msg_bytes = 64 << 10;
    sc.rcn = rcn.then_some(Rcn {
        capacity_mbps: 10,
        tick_ns: 1_000_000,
    });
    sc
}

/// The two-VM rig's hosts at the simulator: `planes` planes of one link
/// each, 1 Gbit/s out of each host and across (no ECN, no drop), `rtt_ns`
/// of base RTT split over both ways, and the driver's defaults (1 KiB MTU
/// at a 1500-byte plane, a 10 ms RTO floor, ACKs held up to its 1 ms
/// tick). The caller sets the downlink, the bottleneck.
fn rig(name: &str, seed: u64, planes: usize, rtt_ns: u64) -> Scenario {
    let mut sc = base(name, seed);
    sc.planes = planes;
    sc.links_per_plane = 1;
    sc.host_gbps = 1.0;
    sc.core = LinkSpec {
        gbps: 1.0,
        prop_ns: rtt_ns / 2,
        ecn_bytes: u64::MAX,
        buffer_bytes: u64::MAX,
        loss: 0.0,
    };
    sc.sender_cfg = SenderConfig {
        mtu: 1024,
        ..SenderConfig::DEFAULT
    };
    sc.ack_delay_ns = 1_000_000;
    sc.warmup_ns = 100_000_000;
    sc.time_limit_ns = 60_000_000_000;
    sc.bin_ns = 10_000_000;
    sc
}
