//! Prints the acceptance scenarios' numbers as a table.

use std::time::Instant;

use metaroce_sim::scenarios::*;

fn sweep() {
    println!("seed sweep (ratios vs lossless of the same seed)");
    for seed in 100..106u64 {
        let base = go(loss(0.0, seed)).1;
        let l1 = go(loss(0.01, seed)).1;
        let l10 = go(loss(0.10, seed)).1;
        let r = go(reorder(seed)).1;
        let ok8 = go(planes8(false, seed)).1;
        let (sf, f8) = go(planes8(true, seed));
        let t_fail = sf.fail_plane.map(|f| f.1).unwrap_or(0);
        let rec = recovery(&f8, sf.bin_ns, t_fail, 0.95 * 7.0 / 8.0 * ok8.goodput_gbps);
        let (si, inc) = go(incast(seed));
        let (sl, lr) = go(long_rtt(seed));
        let nb = lr.bins.len();
        let steady = bin_goodput(&lr, sl.bin_ns, nb / 2, nb.saturating_sub(1));
        println!(
            "seed {seed}: 1% {:.3} 10% {:.3} reorder-retx {} plane-after {:.3} stall {:.0}us incast-util {:.3} incast-RTO {} longrtt {:.3}",
            l1.goodput_gbps / base.goodput_gbps,
            l10.goodput_gbps / base.goodput_gbps,
            r.retx_packets,
            rec.goodput_after_gbps / ok8.goodput_gbps,
            completion_stall(&f8, t_fail) as f64 / 1e3,
            down_utilisation(&inc, &si),
            inc.timeouts,
            steady / (100.0 * 4096.0 / 4202.0)
        );
    }
}

fn main() {
    if std::env::args().any(|a| a == "--sweep") {
        sweep();
        return;
    }
    let t0 = Instant::now();
    println!("MetaRoCE simulator report (seeded, deterministic)\n");
    println!(
        "{:<28} {:>9} {:>9} {:>8} {:>8} {:>6} {:>6} {:>6} {:>9} {:>8} {:>5}",
        "scenario",
        "time(us)",
        "Gbit/s",
        "retx",
        "dups",
        "RTOs",
        "paths",
        "errs",
        "maxQ(KB)",
        "ACKs/pkt",
        "done"
    );
    let row = |sc: &metaroce_sim::sim::Scenario, o: &metaroce_sim::sim::Outcome| {
        println!(
            "{:<28} {:>9.1} {:>9.1} {:>8} {:>8} {:>6} {:>6} {:>6} {:>9} {:>8.3} {:>5}",
            sc.name,
            o.duration_ns as f64 / 1e3,
            o.goodput_gbps,
            o.retx_packets,
            o.duplicates,
            o.timeouts,
            o.max_paths,
            o.qp_errors + o.errors.len() as u64,
            o.max_down_queue.max(o.max_core_queue) / 1000,
            o.ack_frames as f64 / o.data_frames.max(1) as f64,
            if o.finished { "yes" } else { "NO" }
        );
    };
    let (s0, lossless) = go(loss(0.0, 1));
    row(&s0, &lossless);
    let (s1, l1) = go(loss(0.01, 1));
    row(&s1, &l1);
    let (s10, l10) = go(loss(0.10, 1));
    row(&s10, &l10);
    let (sr, r) = go(reorder(2));
    row(&sr, &r);
    let (s8, p8) = go(planes8(false, 3));
    row(&s8, &p8);
    let (sf, pf) = go(planes8(true, 3));
    row(&sf, &pf);
    let (sp, pr) = go(planes8_reported(3));
    row(&sp, &pr);
    let (si, inc) = go(incast(4));
    row(&si, &inc);
    // The same incast without hints, and with the driver's 1 ms count.
    let (sio, inco) = go(incast_rcn(4, None));
    row(&sio, &inco);
    let (sid, incd) = go(incast_rcn(4, Some(1_000_000)));
    row(&sid, &incd);
    let (sl, lr) = go(long_rtt(5));
    row(&sl, &lr);
    // Scale-across (issue 14): rate-limited long-haul links.
    for (rtt, gbps, size) in [
        (1_500_000, 10.0, 4096),
        (10_000_000, 2.0, 4096),
        (10_000_000, 25.0, 65536),
    ] {
        let (ss, so) = go(scale(rtt, gbps, size, 7));
        row(&ss, &so);
    }
    let (sq, pq) = go(receiver_pauses(3));
    row(&sq, &pq);
    let (ss, sm) = go(small_messages(6));
    row(&ss, &sm);

    println!("\nacceptance:");
    println!(
        "  1% loss goodput  = {:.1}% of lossless (target >= 90%)",
        100.0 * l1.goodput_gbps / lossless.goodput_gbps
    );
    println!(
        "  10% loss goodput = {:.1}% of lossless (target >= 50%)",
        100.0 * l10.goodput_gbps / lossless.goodput_gbps
    );
    println!(
        "  reordering: {} retransmissions, {} duplicates, {} RTOs (target 0)",
        r.retx_packets, r.duplicates, r.timeouts
    );
    let t_fail = sf.fail_plane.map(|f| f.1).unwrap_or(0);
    let rec = recovery(&pf, sf.bin_ns, t_fail, 0.95 * 7.0 / 8.0 * p8.goodput_gbps);
    let stall = completion_stall(&pf, t_fail);
    println!(
        "  plane failure: recovery time (in-order completion stall) {:.1} us; 50-us goodput fell below 95% of 7/8 line rate for {:.1} us; goodput after recovery {:.1} Gbit/s = {:.1}% of 8-plane lossless (target >= 85%), QP errors {}, paths replaced {}",
        stall as f64 / 1e3,
        rec.recovery_ns as f64 / 1e3,
        rec.goodput_after_gbps,
        100.0 * rec.goodput_after_gbps / p8.goodput_gbps,
        pf.qp_errors,
        pf.paths_replaced
    );
    let tp = sp.fail_plane.map(|f| f.1).unwrap_or(0);
    println!(
        "  plane failure reported by host after 5 us, plane back at 3 ms: stall {:.1} us, retx {}, plane 3 usable again at end: {}, total {:.1} Gbit/s",
        completion_stall(&pr, tp) as f64 / 1e3,
        pr.retx_packets,
        pr.planes_usable_at_end.get(3).copied().unwrap_or(false),
        pr.goodput_gbps
    );
    println!(
        "  incast: downlink utilisation {:.1}% (target >= 90%), max queue {} KB (after 1 ms warm-up: {} KB, buffer {} KB), RTOs {}",
        100.0 * down_utilisation(&inc, &si),
        inc.max_down_queue / 1000,
        inc.max_down_queue_steady / 1000,
        si.down.buffer_bytes / 1000,
        inc.timeouts
    );
    let nb = lr.bins.len();
    let steady = bin_goodput(&lr, sl.bin_ns, nb / 2, nb.saturating_sub(1));
    println!(
        "  long RTT: overall {:.1} Gbit/s, second half {:.1} Gbit/s = {:.1}% of payload line rate (target >= 90%), paths {}",
        lr.goodput_gbps,
        steady,
        100.0 * steady / (100.0 * 4096.0 / (4096.0 + 106.0)),
        lr.max_paths
    );
    println!(
        "  receiver pauses (300 us every 3 ms): {} RTOs, {} undone as spurious (target all), paths replaced {} (target 0), retx {}, {:.1} Gbit/s = {:.1}% of 8-plane lossless",
        pq.timeouts,
        pq.spurious_timeouts,
        pq.paths_replaced,
        pq.retx_packets,
        pq.goodput_gbps,
        100.0 * pq.goodput_gbps / p8.goodput_gbps
    );
    println!(
        "  64 KiB messages: {:.3} ACKs per data packet (target <= 0.25), RTOs {}",
        sm.ack_frames as f64 / sm.data_frames.max(1) as f64,
        sm.timeouts
    );
    println!(
        "\nengine state sizes: Sender {} B, Receiver {} B (per QP direction)",
        std::mem::size_of::<metaroce_engine::sender::Sender>(),
        std::mem::size_of::<metaroce_engine::receiver::Receiver>()
    );
    println!("\n(report ran in {:.2} s)", t0.elapsed().as_secs_f64());
}
