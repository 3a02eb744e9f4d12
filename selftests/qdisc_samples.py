#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The bottleneck's samples, as rcn.sh's sampler and the benchmark's
(bench/suite.sh `rcn`) write them: one line per sample, "NOW_US TC_JSON"
(`tc -s -j qdisc show` of a tbf root with a RED child); a line tc or the
sampler cut short is skipped.

    qdisc_samples.py FILE FROM TO

prints "MAX MEAN COUNT DROPS MARKED" of the window from FROM to TO
(now_us): rcn_readings.sh's qdisc_window, which says what each is.
bench/qdisc_series.py reads the whole run with samples().
"""
import json
import sys


def samples(path):
    """(now_us, backlog, bytes, drops, marked) of each sample in the file
    at path: tbf's backlog, bytes sent and drops (its RED child's
    included), and RED's CE marks."""
    out = []
    for line in open(path, errors="replace"):
        t, _, doc = line.strip().partition(" ")
        try:
            t, qs = int(t), json.loads(doc)
        except ValueError:
            continue
        tbf = next((q for q in qs if q.get("kind") == "tbf"), None)
        red = next((q for q in qs if q.get("kind") == "red"), {})
        if tbf is None:
            continue
        marked = red.get("marked", red.get("options", {}).get("marked", 0))
        out.append((t, tbf.get("backlog", 0), tbf.get("bytes", 0), tbf.get("drops", 0), marked))
    return out


def window(s, lo, hi):
    """The backlog's maximum, mean and sample count from lo to hi, and the
    drops and marks from the last sample at or before lo to the first at
    or after hi (the run's first and last where there is none)."""
    inside = [x[1] for x in s if lo <= x[0] <= hi]
    before = [x for x in s if x[0] <= lo] or s[:1]
    after = [x for x in s if x[0] >= hi] or s[-1:]
    drops = after[0][3] - before[-1][3] if s else 0
    marked = after[0][4] - before[-1][4] if s else 0
    return max(inside, default=0), sum(inside) // max(len(inside), 1), len(inside), drops, marked


if __name__ == "__main__":
    print(*window(samples(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])))
