//! Property tests: ordered exactly-once completions under random loss,
//! reordering and duplication; the engine survives hostile input.

use metaroce_engine::config::{ReceiverConfig, SenderConfig};
use metaroce_engine::receiver::{Receiver, RxVerdict};
use metaroce_engine::sender::{Message, Sender, TxKind};
use metaroce_engine::wire::{Ack, DataHeader, Nak, Opcode, Probe, Syndrome};
use metaroce_sim::rng::Rng;
use metaroce_sim::scenarios::chaos;
use metaroce_sim::sim::run;

#[test]
fn completions_in_order_exactly_once_with_correct_bytes() {
    let mut rng = Rng::new(0xC0FFEE);
    for case in 0..24u64 {
        let loss = [0.0, 0.01, 0.05, 0.15, 0.3][rng.below(5) as usize];
        let dup = [0.0, 0.02, 0.2][rng.below(3) as usize];
        let jitter = [0, 500, 3_000, 20_000][rng.below(4) as usize];
        let mut sc = chaos(case, loss, dup, jitter);
        if case % 4 == 3 {
            sc.fail_link = Some((0, 1, 20_000));
        }
        let o = run(&sc);
        assert!(
            o.errors.is_empty(),
            "case {case} loss {loss} dup {dup} jitter {jitter}: {:?}",
            &o.errors[..o.errors.len().min(5)]
        );
        assert!(
            o.finished,
            "case {case} loss {loss} dup {dup} jitter {jitter}: not finished"
        );
        assert_eq!(o.qp_errors, 0);
    }
}

fn random_header(rng: &mut Rng) -> DataHeader {
    let ops = [
        Opcode::Send,
        Opcode::SendImm,
        Opcode::Write,
        Opcode::WriteImm,
        Opcode::ReadReq,
        Opcode::ReadResp,
        Opcode::UdSend,
        Opcode::CmpSwap,
        Opcode::FetchAdd,
        Opcode::AtomicWrite,
        Opcode::AtomicResp,
    ];
    let small = |rng: &mut Rng| -> u32 {
        match rng.below(4) {
            0 => rng.next_u64() as u32,
            1 => rng.below(8) as u32,
            2 => u32::MAX - rng.below(8) as u32,
            _ => rng.below(70_000) as u32,
        }
    };
    DataHeader {
        opcode: ops[rng.below(ops.len() as u64) as usize],
        flags: rng.below(4) as u16,
        dst_qpn: rng.next_u64() as u32,
        path_id: rng.next_u64() as u16,
        floor_delta: rng.below(300) as u16,
        psn: small(rng),
        msn: small(rng),
        offset: small(rng),
        msg_len: small(rng),
        payload_len: rng.below(9000) as u16,
        rsn: if rng.chance(0.5) {
            0
        } else {
            rng.next_u64() as u16
        },
        remote_va: rng.next_u64(),
        rkey: rng.next_u64() as u32,
        imm: rng.next_u64() as u32,
        timestamp: rng.next_u64(),
    }
}

/// Feed the engine random, mostly invalid, input: it must never panic and
/// must keep its invariants.
#[test]
fn engine_survives_hostile_input() {
    let mut rng = Rng::new(7);
    let mut rx = Box::new(
        Receiver::new(ReceiverConfig {
            peer_qpn: 1,
            mtu: 1024,
        })
        .unwrap(),
    );
    let cfg = SenderConfig {
        mtu: 1024,
        ..SenderConfig::default()
    };
    let mut tx = Box::new(Sender::new(cfg, 0).unwrap());
    let mut now = 1u64;
    for _ in 0..20 {
        let _ = tx.post(&Message {
            opcode: Opcode::Write,
            len: 5000,
            remote_va: 0,
            rkey: 1,
            imm: 0,
            rsn: 0,
        });
    }
    let mut placed = 0u64;
    for i in 0..200_000u32 {
        now += rng.below(5_000);
        let mut h = random_header(&mut rng);
        if rng.chance(0.3) {
            // Plausible header so that the deeper state is exercised too.
            let len = 1 + rng.below(20_000) as u32;
            let pkts = len.div_ceil(1024);
            h.opcode = Opcode::Write;
            h.flags = 0;
            h.rsn = 0;
            h.msg_len = len;
            h.offset = rng.below(pkts as u64) as u32 * 1024;
            h.payload_len = (len - h.offset).min(1024) as u16;
            h.msn = rng.below(70) as u32;
            h.psn = rng.below(600) as u32;
            h.path_id = rng.below(130) as u16;
            h.floor_delta = rng.below(20) as u16;
        }
        if let RxVerdict::Place(p) = rx.on_data(&h, rng.chance(0.5), now) {
            assert!(p.offset as u64 + p.len as u64 <= p.msg_len as u64);
            placed += 1;
        }
        let _ = rx.ack_for(h.path_id);
        if rng.chance(0.01) {
            rx.fail_message(h.msn, Syndrome::RemoteAccess, h.path_id, h.psn);
        }
        let _ = rx.pop_nak();
        while rx.pop_completion().is_some() {}
        let mut sack = [0u64; 4];
        for w in sack.iter_mut() {
            *w = rng.next_u64() & rng.next_u64();
        }
        let ack = Ack {
            dst_qpn: 0,
            path_id: if rng.chance(0.7) {
                (rng.below(8)) as u16
            } else {
                rng.next_u64() as u16
            },
            ce: rng.chance(0.3),
            cum_psn: if rng.chance(0.5) {
                rng.below(300) as u32
            } else {
                rng.next_u64() as u32
            },
            sack,
            ts_echo: if rng.chance(0.5) {
                now.saturating_sub(rng.below(50_000))
            } else {
                rng.next_u64()
            },
            cum_msn: if rng.chance(0.5) {
                rng.below(40) as u32
            } else {
                rng.next_u64() as u32
            },
            rate_hint_kbps: if rng.chance(0.9) {
                0
            } else {
                rng.next_u64() as u32
            },
            msg_window: rng.next_u64() as u16,
        };
        tx.on_ack(&ack, now);
        if rng.chance(0.01) {
            tx.on_nak(&Nak {
                dst_qpn: 0,
                path_id: 0,
                syndrome: Syndrome::RemoteOperation,
                psn: rng.next_u64() as u32,
                msn: rng.below(40) as u32,
            });
        }
        if rng.chance(0.05) {
            tx.on_probe_reply(
                &Probe {
                    dst_qpn: 0,
                    path_id: rng.below(64) as u16,
                    seq: rng.below(4) as u32,
                    timestamp: rng.next_u64(),
                },
                now,
            );
        }
        if i % 97 == 0 {
            tx.plane_down(0, now);
        }
        if i % 89 == 0 {
            tx.plane_up(0, now);
        }
        tx.on_timer(now);
        for _ in 0..4 {
            match tx.next_packet(now) {
                Some(p) => {
                    if let TxKind::Data { header, .. } = p.kind {
                        assert!(header.validate().is_ok());
                    }
                }
                None => break,
            }
        }
        while tx.pop_completion().is_some() {
            let _ = tx.post(&Message {
                opcode: Opcode::SendImm,
                len: rng.below(20_000) as u32,
                remote_va: 0,
                rkey: 0,
                imm: 1,
                rsn: rng.next_u64() as u16,
            });
        }
        assert!(tx.outstanding() as usize <= metaroce_engine::config::MSG_WINDOW_MAX);
        for s in 0..64 {
            let p = tx.path(s).unwrap();
            assert!(p.span() as usize <= metaroce_engine::wire::SACK_BITS);
            assert!(p.inflight <= p.span());
        }
    }
    assert!(placed > 0);
}
