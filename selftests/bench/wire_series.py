#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The host agent's answer (selftests/rig/hostctl.py) as benchmark samples.

    wire_series.py ANSWER.json PLANES

PLANES: how many planes (from 0) the transport uses. Prints one sample per
line, "METRIC COND VALUE", for suite.sh's csv():

    host_MiBps t=T R     R: MiB/s host A sent on those planes in the interval
                         ending T s after the agent's time 0
    planeK_MiBps t=T R   the same for plane K alone (when PLANES > 1)
    down_s planeK T      when the agent took plane K's link down (s)
    up_s planeK T        when it brought it back
    down_plane_bytes planeK N
                         bytes host A sent on plane K while it was down
                         (from 0.2 s after the down, for frames already in
                         flight, to the up); nonzero means the down did not
                         take effect

Exits 1 (with the agent's error on stderr) if the agent failed.
"""

import json
import sys


def main():
    ans = json.load(open(sys.argv[1]))
    planes = int(sys.argv[2])
    if not ans.get("ok"):
        print(f"host agent: {ans.get('error', 'failed')}", file=sys.stderr)
        return 1
    samples = ans["samples"]
    prev = None
    for t, a_to_b, _ in samples:
        if prev and t > prev[0]:
            dt = (t - prev[0]) * 1048576
            print(f"host_MiBps t={t:.4f} {(sum(a_to_b[:planes]) - sum(prev[1][:planes])) / dt:.3f}")
            for k in range(planes if planes > 1 else 0):
                print(f"plane{k}_MiBps t={t:.4f} {(a_to_b[k] - prev[1][k]) / dt:.3f}")
        prev = (t, a_to_b)
    downs = {}
    for e in ans["events"]:
        k = e["plane"]
        print(f"{'up_s' if e['up'] else 'down_s'} plane{k} {e['at_s']:.2f}")
        if not e["up"]:
            downs[k] = e["at_s"]
        elif k in downs:
            lo, hi = downs.pop(k) + 0.2, e["at_s"]
            inside = [s[1][k] for s in samples if lo <= s[0] <= hi]
            if len(inside) >= 2:
                print(f"down_plane_bytes plane{k} {inside[-1] - inside[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
