//! Golden captures (tools/golden, see its README.md): each is regenerated
//! by the engine through the two-host simulator and compared byte for byte
//! with the committed file; a change in what the engine puts on the wire
//! fails here with the capture's name and the first frame that differs.
//! After an intended change: `METAROCE_BLESS=1 cargo test -p metaroce-sim
//! --test golden` rewrites them (review the new captures).
//!
//! Replay (replay.rs): every committed golden capture replays with no
//! difference (edited captures: tests/replay.rs).

use std::path::PathBuf;

use metaroce_sim::captures;
use metaroce_sim::pcap;
use metaroce_sim::replay::{self, Options};

fn golden_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tools/golden");
    dir.canonicalize().unwrap_or(dir)
}

fn blessing() -> bool {
    std::env::var("METAROCE_BLESS").is_ok_and(|v| !v.is_empty() && v != "0")
}

#[test]
fn golden_captures_are_current() {
    let (ok, bad) = captures::golden(&golden_dir(), blessing());
    assert!(bad.is_empty(), "\n{}", bad.join("\n"));
    assert_eq!(ok.len(), 2 * captures::all().len());
}

#[test]
fn golden_captures_are_small() {
    for c in captures::all() {
        let (files, _) = captures::files(&c);
        for (name, bytes) in files {
            assert!(
                bytes.len() < 32 * 1024,
                "{}/{name}: {} bytes",
                c.name,
                bytes.len()
            );
        }
    }
}

#[test]
fn golden_captures_replay_without_difference() {
    // The files are being rewritten: run again without METAROCE_BLESS.
    if blessing() {
        return;
    }
    for c in captures::all() {
        let dir = golden_dir().join(c.name);
        let read = |f: &str| {
            let bytes = std::fs::read(dir.join(f)).expect("golden capture");
            pcap::read(&bytes).expect("pcap")
        };
        let (a, b) = (read("a.pcap"), read("b.pcap"));
        let rep = replay::replay(("a.pcap", &a), Some(("b.pcap", &b)), &Options::default())
            .expect("replay");
        assert_eq!(rep.differences(), 0, "{}:\n{rep}", c.name);
        assert_eq!(rep.taps[0].sent + rep.taps[0].received, a.frames.len());
        assert_eq!(rep.taps[1].sent + rep.taps[1].received, b.frames.len());
    }
}
