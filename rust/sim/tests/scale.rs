//! Scale-across (issue 14): at long RTTs one QP fills a rate-limited
//! link by opening more paths, once the message window is no longer the
//! limit (protocol.md 1.4, 4.4). Run with `--nocapture` for the numbers.

use metaroce_engine::config::MSG_WINDOW_V1;
use metaroce_sim::scenarios::{bin_goodput, scale};
use metaroce_sim::sim::{run, Outcome, Scenario};

const MS: u64 = 1_000_000;

/// Runs `sc`, which must end cleanly: its outcome, its second-half
/// goodput and the payload rate of a `gbps` link (4 KiB MTU, 106 B of
/// headers per packet), in Gbit/s.
fn run_clean(sc: &Scenario, gbps: f64) -> (Outcome, f64, f64) {
    let o = run(sc);
    assert!(o.finished, "{}: did not finish", sc.name);
    assert!(o.errors.is_empty(), "{}: {:?}", sc.name, o.errors.first());
    assert_eq!(o.qp_errors, 0);
    let nb = o.bins.len();
    let steady = bin_goodput(&o, sc.bin_ns, nb / 2, nb.saturating_sub(1));
    let line = gbps * 4096.0 / (4096.0 + 106.0);
    (o, steady, line)
}

/// Second-half goodput over the link's payload rate; the largest path
/// count.
fn fill(rtt_ns: u64, gbps: f64, msg_bytes: u32) -> (f64, usize) {
    let sc = scale(rtt_ns, gbps, msg_bytes, 7);
    let (o, steady, line) = run_clean(&sc, gbps);
    let util = steady / line;
    println!(
        "{}: second half {steady:.2} Gbit/s = {:.1}% of {line:.2}, paths {}, RTOs {}",
        sc.name,
        100.0 * util,
        o.max_paths,
        o.timeouts
    );
    (util, o.max_paths)
}

/// What 64 messages in flight would carry at this RTT, as a share of the
/// link: the v1 window's limit the test must beat.
fn v1_share(rtt_ns: u64, gbps: f64, msg_bytes: u32) -> f64 {
    let bits = (MSG_WINDOW_V1 as f64) * f64::from(msg_bytes) * 8.0;
    bits / (rtt_ns as f64 / 1e9) / (gbps * 1e9)
}

#[test]
fn small_messages_fill_a_1_5ms_link() {
    assert!(v1_share(3 * MS / 2, 10.0, 4096) < 0.2);
    let (util, _) = fill(3 * MS / 2, 10.0, 4096);
    assert!(util >= 0.90, "utilisation {util}");
}

#[test]
fn small_messages_fill_a_10ms_link() {
    assert!(v1_share(10 * MS, 2.0, 4096) < 0.2);
    let (util, _) = fill(10 * MS, 2.0, 4096);
    assert!(util >= 0.90, "utilisation {util}");
}

#[test]
fn large_messages_fill_a_10ms_link_over_30_paths() {
    assert!(v1_share(10 * MS, 25.0, 65536) < 0.2);
    let (util, paths) = fill(10 * MS, 25.0, 65536);
    assert!(util >= 0.90, "utilisation {util}");
    // 25 Gbit/s x 10 ms is ~7,600 packets of 4 KiB: 30 paths of 256.
    assert!(paths >= 30, "{paths} paths");
}

/// `scale` with no ECN marks anywhere: only the gain of each growth step
/// (protocol.md 4.4) can stop it. Utilisation, largest path count, and
/// the bottleneck's queue in RTTs: its mean as the packets met it (the
/// standing queue) and its largest (a trial step's).
fn fill_without_ecn(
    rtt_ns: u64,
    gbps: f64,
    msg_bytes: u32,
    edit: impl Fn(&mut Scenario),
) -> (f64, usize, f64, f64) {
    let mut sc = scale(rtt_ns, gbps, msg_bytes, 7);
    sc.core.ecn_bytes = u64::MAX;
    sc.down.ecn_bytes = u64::MAX;
    // The queue forms at the downlink, where its mean is measured, not
    // in the sending host or the core.
    sc.host_gbps = 4.0 * gbps;
    sc.core.gbps = 4.0 * gbps;
    edit(&mut sc);
    let (o, steady, line) = run_clean(&sc, gbps);
    let util = steady / line;
    let rtts = |bytes: u64| bytes as f64 * 8.0 / (gbps * 1e9) / (rtt_ns as f64 / 1e9);
    let (mean, max) = (rtts(o.mean_down_queue), rtts(o.max_down_queue));
    println!(
        "{} without ECN: second half {steady:.3} Gbit/s = {:.1}% of {line:.2}, paths {}, \
         queue {mean:.2} RTT mean, {max:.2} largest, RTOs {}, losses {}",
        sc.name,
        100.0 * util,
        o.max_paths,
        o.timeouts,
        o.sack_losses
    );
    (util, o.max_paths, mean, max)
}

#[test]
fn without_ecn_growth_stops_a_step_past_the_bdp() {
    // 10 Gbit/s x 10 ms is ~2,980 packets of 4 KiB: 12 paths of 256. The
    // steps go 4, 7, 11 (95% of it), 17, which gains under a quarter and
    // is taken back, and is tried again now and then. Growth judged by
    // congestion alone went on to 61 paths, a standing queue of 0.9 RTT.
    let (util, paths, mean, max) = fill_without_ecn(10 * MS, 10.0, 65536, |_| {});
    assert!(util >= 0.90, "utilisation {util}");
    assert!(paths <= 26, "{paths} paths");
    assert!(mean < 0.5, "a standing queue of {mean} RTTs");
    assert!(max < 1.5, "a queue of {max} RTTs");
}

#[test]
fn a_scheduled_receiver_does_not_stop_growth() {
    // The receiving host runs 1 ms in 17 (a TCG guest under load): its
    // ACKs come in bursts, RTT samples scatter far above the least one.
    // With windows capped at 4 only paths add rate, and each step does.
    let (util, paths, _, _) = fill_without_ecn(20 * MS, 1.0, 4096, |sc| {
        sc.sender_cfg.pwnd_max = 4;
        sc.sender_cfg.pwnd_init = 4;
        sc.rx_pause = Some(metaroce_sim::sim::RxPause {
            first_ns: 0,
            period_ns: 17 * MS,
            dur_ns: 16 * MS,
        });
    });
    assert!(paths >= 32, "{paths} paths");
    assert!(util >= 0.15, "utilisation {util}");
}
