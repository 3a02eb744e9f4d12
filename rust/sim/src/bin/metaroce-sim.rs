//! metaroce-sim: two simulated hosts, their captures, golden captures and
//! replay (rust/sim/README.md).
//!
//! ```text
//! metaroce-sim list
//! metaroce-sim run [NAME] [--seed N] [--loss P] [--pcap A.pcap] [--peer-pcap B.pcap] [-v]
//! metaroce-sim --pcap A.pcap ...            (run spray)
//! metaroce-sim golden [--bless] [--dir DIR]
//! metaroce-sim replay A.pcap [B.pcap] [--local ADDR]... [--mtu N]
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use metaroce_sim::captures;
use metaroce_sim::replay::{self, Options};
use metaroce_sim::{duplex, pcap, show};

const USAGE: &str = "usage:
  metaroce-sim list                 the scenarios
  metaroce-sim run [NAME] [--seed N] [--loss P] [--pcap A.pcap] [--peer-pcap B.pcap] [-v]
                                    run NAME (default spray); --pcap: host A's capture,
                                    --peer-pcap: host B's; -v: print both
  metaroce-sim golden [--bless] [--dir DIR]
                                    compare (--bless: rewrite) the golden captures
                                    (default DIR: tools/golden of this source tree)
  metaroce-sim replay A.pcap [B.pcap] [--local ADDR]... [--mtu N]
                                    re-drive a capture through the engine, report differences";

/// A line on stdout; a reader that went away (`| head`) ends the output
/// quietly.
fn out(args: std::fmt::Arguments<'_>) {
    use std::io::{ErrorKind, Write};
    match writeln!(std::io::stdout().lock(), "{args}") {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("metaroce-sim: stdout: {e}");
            std::process::exit(2)
        }
    }
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("metaroce-sim: {msg}");
    ExitCode::from(2)
}

fn value<'a>(it: &mut impl Iterator<Item = &'a String>, opt: &str) -> Result<&'a String, String> {
    it.next().ok_or_else(|| format!("{opt} needs a value"))
}

fn ip(s: &str) -> Result<[u8; 4], String> {
    let v: Vec<u8> = s
        .split('.')
        .map(|x| x.parse::<u8>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("not an IPv4 address: {s}"))?;
    v.try_into()
        .map_err(|_| format!("not an IPv4 address: {s}"))
}

fn list() -> ExitCode {
    for c in captures::all() {
        out(format_args!(
            "{:<12} sections {:<20} {}",
            c.name, c.sections, c.summary
        ));
    }
    ExitCode::SUCCESS
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    let mut name = "spray".to_string();
    let (mut seed, mut loss, mut verbose) = (None, 0.0, false);
    let (mut a, mut b): (Option<PathBuf>, Option<PathBuf>) = (None, None);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--seed" => {
                let v: u64 = value(&mut it, arg)?
                    .parse()
                    .map_err(|e| format!("--seed: {e}"))?;
                seed = Some(v);
            }
            "--loss" => {
                loss = value(&mut it, arg)?
                    .parse()
                    .map_err(|e| format!("--loss: {e}"))?
            }
            "--pcap" => a = Some(value(&mut it, arg)?.into()),
            "--peer-pcap" => b = Some(value(&mut it, arg)?.into()),
            "-v" => verbose = true,
            s if !s.starts_with('-') => name = s.to_string(),
            s => return Err(format!("unknown option {s}\n{USAGE}")),
        }
    }
    let c =
        captures::find(&name).ok_or_else(|| format!("no scenario {name} (metaroce-sim list)"))?;
    let seed = seed.unwrap_or(c.seed);
    let mut sc = (c.scenario)(seed);
    sc.loss = loss;
    let o = duplex::run(&sc);
    for (h, path) in [(duplex::A, &a), (duplex::B, &b)] {
        if let Some(p) = path {
            std::fs::write(p, pcap::write(&o.taps[h]))
                .map_err(|e| format!("{}: {e}", p.display()))?;
        }
    }
    if verbose {
        for (h, label) in [(duplex::A, "A"), (duplex::B, "B")] {
            out(format_args!("host {label}'s capture:"));
            for (n, f) in o.taps[h].iter().enumerate() {
                let dir = if f.src == duplex::addr(h, f.src[2]) {
                    "sent"
                } else {
                    "recv"
                };
                out(format_args!(
                    "{:>5} {:>13} {dir} plane {} port {:>5} {}",
                    n + 1,
                    f.t_ns,
                    f.src[2],
                    f.src_port,
                    show::packet(&f.payload)
                ));
            }
        }
    }
    out(format_args!(
        "{name} (seed {seed}): {} packets captured at A, {} at B, {} lost in the network, {} faults applied; \
         A: {} work requests completed, {} retransmitted, {} RTOs, {} probes, {} paths replaced; \
         B: {} drops; finished: {}",
        o.taps[duplex::A].len(),
        o.taps[duplex::B].len(),
        o.lost,
        o.faults_applied,
        o.verbs[duplex::A].sent.len(),
        o.tx_stats[duplex::A].retransmits,
        o.tx_stats[duplex::A].timeouts,
        o.tx_stats[duplex::A].probes,
        o.tx_stats[duplex::A].paths_replaced,
        o.drops[duplex::B].len(),
        o.finished
    ));
    // The check is written for the golden seed; others may route otherwise.
    if loss == 0.0 {
        if let Err(e) = (c.check)(&o) {
            out(format_args!("check: {e}"));
            if seed == c.seed {
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn golden(args: &[String]) -> Result<ExitCode, String> {
    let mut bless = false;
    let mut dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/golden");
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--bless" => bless = true,
            "--dir" => dir = value(&mut it, arg)?.into(),
            s => return Err(format!("unknown option {s}\n{USAGE}")),
        }
    }
    let dir = dir.canonicalize().unwrap_or(dir);
    let (ok, bad) = captures::golden(&dir, bless);
    for l in ok.iter().chain(&bad) {
        out(format_args!("{l}"));
    }
    Ok(if bad.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn read(path: &str) -> Result<pcap::Capture, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    pcap::read(&bytes).map_err(|e| format!("{path}: {e}"))
}

fn replay(args: &[String]) -> Result<ExitCode, String> {
    let mut files = Vec::new();
    let mut opts = Options::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--local" => opts.local.push(ip(value(&mut it, arg)?)?),
            "--mtu" => {
                opts.mtu = Some(
                    value(&mut it, arg)?
                        .parse()
                        .map_err(|e| format!("--mtu: {e}"))?,
                )
            }
            s if !s.starts_with('-') => files.push(s.to_string()),
            s => return Err(format!("unknown option {s}\n{USAGE}")),
        }
    }
    if files.is_empty() || files.len() > 2 {
        return Err(USAGE.into());
    }
    let a = read(&files[0])?;
    let b = files.get(1).map(|f| read(f)).transpose()?;
    let rep = replay::replay(
        (&files[0], &a),
        b.as_ref().map(|b| (files[1].as_str(), b)),
        &opts,
    )?;
    out(format_args!("{rep}"));
    Ok(if rep.differences() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.first().map(String::as_str) {
        Some("list") => return list(),
        Some("run") => run(&args[1..]),
        Some("golden") => golden(&args[1..]),
        Some("replay") => replay(&args[1..]),
        Some("-h" | "--help") => {
            out(format_args!("{USAGE}"));
            return ExitCode::SUCCESS;
        }
        Some(s) if s.starts_with("--") => run(&args),
        _ => Err(USAGE.into()),
    };
    r.unwrap_or_else(|e| fail(&e))
}
