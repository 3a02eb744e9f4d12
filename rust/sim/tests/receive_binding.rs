//! Receive-buffer binding (spec 3.2): SEND / SEND_IMM / WRITE_IMM packets
//! carry the receive sequence number `rsn` the driver stamped, so a receiver
//! binds the right posted receive from whichever packet arrives first, even
//! when the packets of later messages overtake earlier ones. Other opcodes
//! must carry `rsn = 0`.

use metaroce_engine::config::{ReceiverConfig, SenderConfig};
use metaroce_engine::receiver::{DropReason, Receiver, RxVerdict};
use metaroce_engine::sender::{Message, PostError, Sender, TxKind};
use metaroce_engine::wire::{
    encode_data_packet, parse_packet, DataHeader, Opcode, Packet, WireError,
};

const MTU: u32 = 1024;

/// Deterministic payload byte of message `msn` at offset `off`.
fn byte(msn: u32, off: u32) -> u8 {
    (msn.wrapping_mul(131) ^ off.wrapping_mul(7)) as u8
}

#[test]
fn out_of_order_send_packets_bind_the_stamped_receive_buffer() {
    let mut tx = Sender::new(
        SenderConfig {
            mtu: MTU,
            initial_paths: 4,
            // All packets go before the first ACK (reordered by hand).
            first_flight: 0,
            ..SenderConfig::default()
        },
        1,
    )
    .unwrap();
    let mut rx = Receiver::new(ReceiverConfig {
        peer_qpn: 2,
        mtu: MTU,
    })
    .unwrap();

    // The driver numbers receive-consuming messages; WRITE does not consume.
    let plan = [
        (Opcode::Send, 3000),
        (Opcode::Write, 2100),
        (Opcode::SendImm, 2500),
        (Opcode::WriteImm, 2048),
        (Opcode::Send, 1),
        (Opcode::Send, 1500),
    ];
    let mut next_rsn = 0u16;
    let mut expect_rsn = Vec::new();
    for (i, &(opcode, len)) in plan.iter().enumerate() {
        let rsn = if opcode.has_rsn() {
            next_rsn = next_rsn.wrapping_add(1);
            next_rsn - 1
        } else {
            0
        };
        expect_rsn.push(rsn);
        let msn = tx
            .post(&Message {
                opcode,
                len,
                remote_va: 0x4000,
                rkey: 9,
                imm: i as u32,
                rsn,
            })
            .unwrap();
        assert_eq!(msn, i as u32);
    }
    assert_eq!(expect_rsn, [0, 0, 1, 2, 3, 4]);

    // Everything the sender emits, as wire bytes.
    let mut wire = Vec::new();
    let mut buf = vec![0u8; 4096];
    while let Some(p) = tx.next_packet(10) {
        let TxKind::Data { header, .. } = p.kind else {
            continue;
        };
        assert_eq!(header.rsn, expect_rsn[header.msn as usize]);
        let payload: Vec<u8> = (0..u32::from(header.payload_len))
            .map(|k| byte(header.msn, header.offset + k))
            .collect();
        let n = encode_data_packet(&header, &payload, &mut buf).unwrap();
        wire.push(buf[..n].to_vec());
    }
    let total: u32 = plan.iter().map(|&(_, l)| l.div_ceil(MTU).max(1)).sum();
    assert_eq!(
        wire.len() as u32,
        total,
        "all packets fit the initial window"
    );

    // Later messages overtake earlier ones: reverse, then interleave.
    wire.reverse();
    let (a, b) = wire.split_at(wire.len() / 2);
    let arrival: Vec<&Vec<u8>> = b.iter().zip(a.iter()).flat_map(|(x, y)| [x, y]).collect();
    let arrival: Vec<&Vec<u8>> = arrival
        .into_iter()
        .chain(if wire.len() % 2 == 1 { b.last() } else { None })
        .collect();
    assert_eq!(arrival.len(), wire.len());

    // Driver: posted receive buffers in posting order; bound by rsn alone.
    let mut recv_bufs: Vec<Vec<u8>> = vec![vec![0; 4096]; 5];
    let mut recv_bytes = [0u32; 5];
    let mut write_mem = vec![0u8; 4096];
    let mut first_msn = None;
    for pkt in arrival {
        let Ok(Packet::Data { header, payload }) = parse_packet(pkt) else {
            panic!("valid packet rejected");
        };
        match rx.on_data(&header, false, 20) {
            RxVerdict::Place(p) => {
                first_msn.get_or_insert(p.msn);
                assert_eq!(p.rsn, expect_rsn[p.msn as usize], "msn {}", p.msn);
                let (o, l) = (p.offset as usize, p.len as usize);
                if p.opcode.has_rsn() {
                    recv_bufs[p.rsn as usize][o..o + l].copy_from_slice(payload);
                    recv_bytes[p.rsn as usize] += p.len;
                } else {
                    write_mem[o..o + l].copy_from_slice(payload);
                }
            }
            v => panic!("unexpected {v:?}"),
        }
    }
    assert_ne!(first_msn, Some(0), "the first placed packet was not MSN 0");

    // Completions in MSN order name the buffer they consumed.
    for (msn, &(opcode, len)) in plan.iter().enumerate() {
        let c = rx.pop_completion().unwrap();
        assert_eq!((c.msn, c.opcode, c.len), (msn as u32, opcode, len));
        assert_eq!(c.rsn, expect_rsn[msn]);
        if opcode.has_rsn() {
            let r = c.rsn as usize;
            assert_eq!(recv_bytes[r], len);
            for k in 0..len {
                assert_eq!(recv_bufs[r][k as usize], byte(msn as u32, k));
            }
        }
    }
    assert!(rx.pop_completion().is_none());
}

#[test]
fn rsn_on_a_write_is_refused_and_dropped() {
    let write = Message {
        opcode: Opcode::Write,
        len: 100,
        remote_va: 0x4000,
        rkey: 9,
        imm: 0,
        rsn: 1,
    };
    let mut tx = Sender::new(
        SenderConfig {
            mtu: MTU,
            ..SenderConfig::default()
        },
        1,
    )
    .unwrap();
    assert_eq!(tx.post(&write), Err(PostError::BadRsn));
    tx.post(&Message { rsn: 0, ..write }).unwrap();
    let header: DataHeader = match tx.next_packet(1).unwrap().kind {
        TxKind::Data { header, .. } => header,
        TxKind::Probe(_) => panic!("expected data"),
    };
    assert_eq!(header.rsn, 0);

    // A well-sealed WRITE with rsn != 0 is rejected by the parser ...
    let mut buf = [0u8; 512];
    let n = encode_data_packet(&header, &[0xAA; 100], &mut buf).unwrap();
    buf[31] = 1;
    let c = metaroce_engine::crc::crc32(&buf[..n - 4]);
    buf[n - 4..n].copy_from_slice(&c.to_be_bytes());
    assert_eq!(parse_packet(&buf[..n]), Err(WireError::BadRsn));

    // ... and by the receiver, which drops it unacknowledged.
    let mut rx = Receiver::new(ReceiverConfig {
        peer_qpn: 2,
        mtu: MTU,
    })
    .unwrap();
    let bad = DataHeader { rsn: 1, ..header };
    assert_eq!(
        rx.on_data(&bad, false, 2),
        RxVerdict::Drop(DropReason::Malformed)
    );
    assert_eq!(rx.stats().placed, 0);
    assert!(matches!(
        rx.on_data(&header, false, 3),
        RxVerdict::Place(p) if p.rsn == 0
    ));
}
