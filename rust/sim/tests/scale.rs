//! Scale-across (issue 14): at long RTTs one QP fills a rate-limited
//! link by opening more paths, once the message window is no longer the
//! limit (protocol.md 1.4, 4.4). Run with `--nocapture` for the numbers.

use metaroce_engine::config::MSG_WINDOW_V1;
use metaroce_sim::scenarios::{bin_goodput, scale};
use metaroce_sim::sim::run;

const MS: u64 = 1_000_000;

/// Second-half goodput over the link's payload rate (4 KiB MTU, 106 B of
/// headers per packet); the largest path count.
fn fill(rtt_ns: u64, gbps: f64, msg_bytes: u32) -> (f64, usize) {
    let sc = scale(rtt_ns, gbps, msg_bytes, 7);
    let o = run(&sc);
    assert!(o.finished, "{}: did not finish", sc.name);
    assert!(o.errors.is_empty(), "{}: {:?}", sc.name, o.errors.first());
    assert_eq!(o.qp_errors, 0);
    let nb = o.bins.len();
    let steady = bin_goodput(&o, sc.bin_ns, nb / 2, nb.saturating_sub(1));
    let line = gbps * 4096.0 / (4096.0 + 106.0);
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
