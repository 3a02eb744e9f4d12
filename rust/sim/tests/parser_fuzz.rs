//! The packet parser rejects every malformed, truncated or hostile input
//! with a reason and never panics.

use metaroce_engine::wire::*;
use metaroce_sim::rng::Rng;

fn valid_packets() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 512];
    let h = DataHeader {
        opcode: Opcode::WriteImm,
        flags: FLAG_IMM | FLAG_RETRANSMIT,
        dst_qpn: 5,
        path_id: 0x0443,
        floor_delta: 3,
        psn: 77,
        msn: 9,
        offset: 256,
        msg_len: 1000,
        payload_len: 200,
        rsn: 0x1234,
        remote_va: 0xAB00,
        rkey: 3,
        imm: 99,
        timestamp: 12345,
    };
    let payload = vec![0x5Au8; 200];
    let n = encode_data_packet(&h, &payload, &mut buf).unwrap();
    out.push(buf[..n].to_vec());
    let rr = DataHeader {
        opcode: Opcode::ReadReq,
        flags: 0,
        offset: 0,
        payload_len: 0,
        msg_len: 1 << 20,
        imm: 0,
        rsn: 0,
        ..h
    };
    let n = encode_data_packet(&rr, &[], &mut buf).unwrap();
    out.push(buf[..n].to_vec());
    let ack = Ack {
        dst_qpn: 1,
        path_id: 2,
        ce: true,
        cum_psn: 3,
        sack: [0xF0F0, 0, 1, 1 << 63],
        ts_echo: 4,
        cum_msn: 5,
        rate_hint_kbps: 6_000,
        msg_window: 1024,
    };
    let n = ack.encode(&mut buf).unwrap();
    out.push(buf[..n].to_vec());
    let nak = Nak {
        dst_qpn: 1,
        path_id: 2,
        syndrome: Syndrome::InvalidRequest,
        psn: 3,
        msn: 4,
    };
    let n = nak.encode(&mut buf).unwrap();
    out.push(buf[..n].to_vec());
    let p = Probe {
        dst_qpn: 1,
        path_id: 2,
        seq: 3,
        timestamp: 4,
    };
    let n = p.encode(false, &mut buf).unwrap();
    out.push(buf[..n].to_vec());
    let n = p.encode(true, &mut buf).unwrap();
    out.push(buf[..n].to_vec());
    out
}

#[test]
fn valid_packets_parse() {
    for p in valid_packets() {
        parse_packet(&p).unwrap();
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng::new(1);
    let mut accepted = 0;
    for _ in 0..300_000 {
        let len = rng.below(400) as usize;
        let mut b: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        // Make a fair share look plausible so deeper checks are reached.
        if len > 2 && rng.chance(0.7) {
            b[0] = VERSION;
            b[1] = [
                0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x10, 0x11, 0x20, 0x21,
            ][rng.below(11) as usize];
        }
        if parse_packet(&b).is_ok() {
            accepted += 1;
        }
        let _ = DataHeader::decode(&b);
    }
    // Random bytes essentially never carry a valid ICRC.
    assert!(accepted < 3, "accepted {accepted} random packets");
}

#[test]
fn mutated_valid_packets_are_rejected_with_a_reason() {
    let mut rng = Rng::new(2);
    let valid = valid_packets();
    for i in 0..200_000 {
        let base = &valid[i % valid.len()];
        let mut b = base.clone();
        match rng.below(4) {
            0 => {
                // Flip 1..4 random bits.
                for _ in 0..1 + rng.below(4) {
                    let k = rng.below(b.len() as u64 * 8) as usize;
                    b[k / 8] ^= 1 << (k % 8);
                }
            }
            1 => {
                let l = rng.below(b.len() as u64) as usize;
                b.truncate(l);
            }
            2 => {
                for _ in 0..1 + rng.below(8) {
                    b.push(rng.next_u64() as u8);
                }
            }
            _ => {
                let k = rng.below(b.len() as u64) as usize;
                b[k] = b[k].wrapping_add(1 + rng.below(255) as u8);
            }
        }
        if &b == base {
            continue; // two flips of the same bit cancel out
        }
        match parse_packet(&b) {
            Ok(p) => panic!("mutated packet accepted: {p:?}"),
            Err(_reason) => {}
        }
    }
}

#[test]
fn hostile_but_well_sealed_headers_are_rejected() {
    // Correct ICRC but inconsistent fields: the ICRC is no excuse.
    let mut rng = Rng::new(3);
    let mut buf = [0u8; 256];
    let mut rejected = 0;
    for _ in 0..100_000 {
        let mut hdr = [0u8; DATA_HEADER_LEN];
        for b in hdr.iter_mut() {
            *b = rng.next_u64() as u8;
        }
        hdr[0] = VERSION;
        hdr[1] = 1 + rng.below(7) as u8;
        let plen = u16::from_be_bytes([hdr[28], hdr[29]]) as usize % 64;
        hdr[28..30].copy_from_slice(&(plen as u16).to_be_bytes());
        buf[..DATA_HEADER_LEN].copy_from_slice(&hdr);
        let n = DATA_HEADER_LEN + plen;
        let c = metaroce_engine::crc::crc32(&buf[..n]);
        buf[n..n + 4].copy_from_slice(&c.to_be_bytes());
        match parse_packet(&buf[..n + 4]) {
            Ok(Packet::Data { header, payload }) => {
                header.validate().unwrap();
                assert_eq!(payload.len(), header.payload_len as usize);
            }
            Ok(other) => panic!("unexpected {other:?}"),
            Err(_) => rejected += 1,
        }
    }
    assert!(rejected > 90_000);
}
