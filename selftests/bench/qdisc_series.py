#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The bottleneck of a benchmark point from its tc samples (suite.sh `rcn`).

    qdisc_series.py FILE

FILE: one line per sample, "NOW_US TC_JSON" (`tc -s -j qdisc show` of a
tbf root with a RED child), as suite.sh's sampler writes them; a line tc
or the sampler cut short is skipped. Prints "METRIC VALUE" lines:

- queue_avg_bytes, queue_max_bytes: the tbf backlog over all samples
  (the first RTT's burst included: the queue from the start is the point);
- drops: tbf's drops at the last sample (its RED child's included), marked:
  RED's CE marks there;
- link_MiBps: what tbf sent from the sample at a quarter of the run to the
  one at three quarters, over the sampler's clock (all flows running, none
  starting or draining), and samples: how many there were.
"""
import os
import sys

# The selftests' reader of the same samples (rcn.sh's), one directory up.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from qdisc_samples import samples  # noqa: E402


def metrics(s):
    if not s:
        return [("samples", 0)]
    backlog = [x[1] for x in s]
    m = [("queue_avg_bytes", round(sum(backlog) / len(backlog))),
         ("queue_max_bytes", max(backlog)),
         ("drops", s[-1][3]),
         ("marked", s[-1][4])]
    t0, t1 = s[0][0], s[-1][0]
    a = next(x for x in s if x[0] >= t0 + (t1 - t0) // 4)
    b = next(x for x in reversed(s) if x[0] <= t1 - (t1 - t0) // 4)
    if b[0] > a[0]:
        m.append(("link_MiBps", round((b[2] - a[2]) / ((b[0] - a[0]) / 1e6) / 1048576, 3)))
    m.append(("samples", len(s)))
    return m


if __name__ == "__main__":
    for k, v in metrics(samples(sys.argv[1])):
        print(k, v)
