//! The packets of the Wireshark dissector's tests (tools/wireshark/test.py,
//! built by selftests/metaroce_pkt.py from the spec) through the engine:
//! `parse_packet` rejects each broken one with the reason the dissector
//! reports for it and accepts the rest, and a receiver with the tests'
//! payload MTU drops the segmentation and consistency cases. So the
//! dissector's reason names are the engine's, packet by packet.

use metaroce_engine::config::ReceiverConfig;
use metaroce_engine::receiver::{Receiver, RxVerdict};
use metaroce_engine::wire::{parse_packet, Packet};

/// The payload MTU of tools/wireshark/test.py.
const MTU: u32 = 1024;

fn unhex(s: &str) -> Vec<u8> {
    if s == "-" {
        return Vec::new();
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// `BadVersion(2)` -> `BadVersion`.
fn name(debug: String) -> String {
    debug.split('(').next().unwrap_or_default().to_string()
}

#[test]
fn dissector_test_packets_get_the_engines_verdicts() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tools/wireshark/vectors.txt"
    );
    let text = std::fs::read_to_string(path).expect("tools/wireshark/vectors.txt");
    let cfg = ReceiverConfig {
        peer_qpn: 0x11,
        mtu: MTU,
    };
    let mut rx = Receiver::new(cfg).unwrap();
    let mut last_msn = None;
    let mut seen = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split(' ').collect();
        let [case, want_parse, want_rx, hex] = f[..] else {
            panic!("bad line {line:.60}");
        };
        let pkt = unhex(hex);
        let got = match parse_packet(&pkt) {
            Ok(p) => Ok(p),
            Err(e) => Err(name(format!("{e:?}"))),
        };
        match (&got, want_parse) {
            (Ok(_), "ok") => {}
            (Err(e), w) if e == w => {}
            _ => panic!("{case}: parse_packet gives {got:?}, the dissector says {want_parse}"),
        }
        seen += 1;
        if let Ok(Packet::Data { header, .. }) = got {
            if want_rx == "-" {
                continue;
            }
            // A fresh receiver expecting this message, unless it is one more
            // packet of the previous line's message.
            if last_msn != Some(header.msn) {
                rx = Receiver::new(cfg).unwrap();
                // Either numbering (protocol.md 2): the peer's start, or
                // ours for a direction flagged PEER_PSN.
                rx.start_at(header.msn);
                rx.own_start(header.msn);
                last_msn = Some(header.msn);
            }
            let v = rx.on_data(&header, false, 0);
            let ok = match (v, want_rx) {
                (RxVerdict::Place(_), "place") => true,
                (RxVerdict::Drop(r), w) => name(format!("{r:?}")) == w,
                _ => false,
            };
            assert!(
                ok,
                "{case}: the receiver gives {v:?}, the dissector says {want_rx}"
            );
        }
    }
    assert!(seen > 50, "only {seen} vectors");
}
