//! The two-host simulator (duplex.rs) under random loss: every kind of
//! work request completes, every byte is placed once and right, atomics
//! execute once, and each run's captures replay without difference.

use metaroce_sim::duplex::{self, Op, OpKind, Scenario, A, ATOMIC_INIT, B};
use metaroce_sim::pcap;
use metaroce_sim::replay::{self, Options};

fn mixed(seed: u64, loss: f64, planes: u8) -> Scenario {
    let mut sc = Scenario::new("mixed", seed);
    sc.planes = planes;
    sc.loss = loss;
    let kinds = [
        OpKind::Write {
            len: 3000,
            off: 1024,
            bad_key: false,
        },
        OpKind::Send { len: 700 },
        OpKind::Read {
            len: 2000,
            off: 1024,
        },
        OpKind::FetchAdd { add: 3 },
        OpKind::Send { len: 0 },
        OpKind::CmpSwap {
            compare: ATOMIC_INIT + 3,
            swap: 1,
        },
        OpKind::Read { len: 8, off: 0 },
    ];
    sc.ops = kinds
        .iter()
        .enumerate()
        .map(|(i, &kind)| Op {
            at_ns: i as u64 * 2_000,
            kind,
        })
        .collect();
    sc
}

#[test]
fn every_operation_under_loss() {
    let mut lost = 0;
    for seed in 1..9 {
        for planes in [1, 2] {
            let sc = mixed(seed, 0.05, planes);
            let o = duplex::run(&sc);
            lost += o.lost;
            let errors: Vec<&String> = o.verbs.iter().flat_map(|v| &v.errors).collect();
            assert!(errors.is_empty(), "seed {seed}: {errors:?}");
            assert!(o.finished, "seed {seed} planes {planes}: not finished");
            assert!(o.verbs[B].executions.values().all(|&n| n == 1));
            let m = &o.verbs[B].memory;
            assert_eq!(u64::from_le_bytes(m[..8].try_into().unwrap()), 1);
            // The first READ returns what the WRITE put there.
            let reads: Vec<&(Vec<u8>, Vec<u8>)> = {
                let mut r: Vec<_> = o.verbs[A].responses.iter().collect();
                r.sort_by_key(|(msn, _)| msn.wrapping_sub(sc.psn[A]));
                r.into_iter().map(|(_, v)| v).collect()
            };
            assert_eq!(reads.len(), 4);
            assert_eq!(reads[0].0, m[1024..3024]);
            assert!(reads.iter().all(|(_, n)| n.iter().all(|&c| c == 1)));
            let ca = pcap::read(&pcap::write(&o.taps[A])).unwrap();
            let cb = pcap::read(&pcap::write(&o.taps[B])).unwrap();
            let rep = replay::replay(("a", &ca), Some(("b", &cb)), &Options::default()).unwrap();
            assert_eq!(rep.differences(), 0, "seed {seed} planes {planes}:\n{rep}");
        }
    }
    assert!(lost > 20, "{lost} packets lost");
}

/// Two losses that SACK reveals: whatever the seed routes where, they are
/// resent without a timeout. An ACK whose `cum_psn` lies behind the
/// sender's floor (it left the receiver before the floor moved) still
/// carries SACK news; when the sender dropped it whole, packets the
/// receiver held waited for an RTO (seed 1516 did).
#[test]
fn sack_losses_never_need_a_timeout() {
    let sack = metaroce_sim::captures::find("sack").expect("the sack scenario");
    let mut timed_out = Vec::new();
    for seed in 1500..1540 {
        let out = duplex::run(&(sack.scenario)(seed));
        assert!(out.finished, "seed {seed}: not finished");
        if out.tx_stats[A].timeouts != 0 {
            timed_out.push(seed);
        }
    }
    assert!(timed_out.is_empty(), "seeds with an RTO: {timed_out:?}");
}
