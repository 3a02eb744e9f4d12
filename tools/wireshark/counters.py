#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Compare a capture's totals with the device counters of the same window.

  counters.py --summary FILE --device ADDRS --before FILE --after FILE
              [--tx-slack N] [--tx-slack-counter NAME]... [--rx-slack N]
              [--only REGEX] [--label TEXT]

--summary: the output of `tools/wireshark/summary.sh --device ADDRS ...`
(its `device ADDRS: NAME N` lines: the device as its counters would count
the capture); --before/--after: `rdma -j statistic show link DEV/1` taken
when the capture window opened and closed. Every NAME (a sum `A+B` adds
counters) must have grown by what the capture shows, or by up to N more:
--tx-slack for what the device sends (tx_*, retransmissions,
path_failures, ud_tx_packets, probes_answered), --rx-slack for what it
receives; N packets, 8,252 bytes each for the byte counters. Slack is for
packets the device counted that the capture point could not see (a
qdisc's drops on the way out, netem's; a capture socket's own drops);
the counter never counts fewer than the capture holds.
--tx-slack-counter NAME: add counter NAME's growth between the snapshots
to the tx slack (tx_errors: sends the device counted before they
failed). --only: compare only the names this regular expression finds.

Prints one line per counter; exit 0 if all agree, 1 if any does not, 2 on
bad input (a counter missing from a snapshot, no summary lines).
"""
import argparse
import json
import re
import sys

MAX_PACKET_BYTES = 56 + 9216 + 4  # data header, largest payload (MAX_PAYLOAD), ICRC
TX_NAMES = re.compile(r"^(plane\d+_)?(tx_|retransmissions)|^(path_failures|ud_tx_packets|probes_answered)$")


def snapshot(text):
    """Counter name -> value of the first object in `rdma -j statistic`'s
    output that has it (the output is a JSON array of objects; text around
    the JSON, such as an error message, is skipped)."""
    decoder, at, objs = json.JSONDecoder(), 0, []
    while True:
        starts = [i for i in (text.find("[", at), text.find("{", at)) if i >= 0]
        if not starts:
            break
        try:
            doc, at = decoder.raw_decode(text, min(starts))
        except ValueError:
            at = min(starts) + 1
            continue
        objs += doc if isinstance(doc, list) else [doc]
    values = {}
    for obj in objs:
        if isinstance(obj, dict):
            for k, v in obj.items():
                if isinstance(v, int) and not isinstance(v, bool):
                    values.setdefault(k, v)
    return values


def capture_totals(text, device):
    """NAME -> N from summary.sh's `device DEVICE: NAME N` lines."""
    out = {}
    prefix = f"device {device}: "
    for line in text.splitlines():
        if line.startswith(prefix):
            name, n = line[len(prefix):].split()
            out[name] = int(n)
    return out


def compare(captured, before, after, tx_slack=0, rx_slack=0, only=None):
    """[(name, captured, counter delta, allowed excess, ok)] for each name
    of `captured`; KeyError for a counter missing from a snapshot."""
    rows = []
    for name, n in captured.items():
        if only and not re.search(only, name):
            continue
        delta = sum(after[c] - before[c] for c in name.split("+"))
        slack = tx_slack if TX_NAMES.search(name) else rx_slack
        if name.endswith("_bytes"):
            slack *= MAX_PACKET_BYTES
        rows.append((name, n, delta, slack, n <= delta <= n + slack))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--summary", required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--tx-slack", type=int, default=0)
    ap.add_argument("--tx-slack-counter", action="append", default=[])
    ap.add_argument("--rx-slack", type=int, default=0)
    ap.add_argument("--only")
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    with open(a.summary) as f:
        captured = capture_totals(f.read(), a.device)
    with open(a.before) as f:
        before = snapshot(f.read())
    with open(a.after) as f:
        after = snapshot(f.read())
    label = f"{a.label}: " if a.label else ""
    if not captured:
        print(f"{label}no 'device {a.device}:' lines in {a.summary}")
        return 2
    try:
        tx_slack = a.tx_slack
        for name in a.tx_slack_counter:
            grown = after[name] - before[name]
            print(f"{label}{name} +{grown}: tx slack")
            tx_slack += grown
        rows = compare(captured, before, after, tx_slack, a.rx_slack, a.only)
    except KeyError as e:
        print(f"{label}counter {e} missing from a snapshot")
        return 2
    bad = 0
    for name, n, delta, slack, ok in rows:
        bad += not ok
        allowed = f"{n}" if slack == 0 else f"{n}..{n + slack}"
        print(f"{label}{'ok' if ok else 'MISMATCH'} {name}: capture {n}, counter +{delta}"
              f"{'' if ok else f' (want {allowed})'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
