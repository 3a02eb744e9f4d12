#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""What this host spends while a transfer runs: waits until the planes'
netdevs move data (sent plus received bytes grow by THRESHOLD within one
poll), then reads the host's CPU and counters at START seconds after that
and again SECS seconds later, and prints one line:

    SECS BUSY0 BUSY1 TXP0 TXP1 TXB0 TXB1

(the window's length on the monotonic clock, the busy CPU ticks of
/proc/stat's cpu line, user + nice + system + irq + softirq, in USER_HZ,
and the packets and bytes sent on the planes). "none" if no data moved
within WAIT seconds. Started before the benchmark's client (and on host
B through the peer channel) so that its own start-up, costly under TCG,
falls outside the window; it polls by reading sysfs files, with no
process started per poll (bench/lib.sh cost_begin, cost_end).

usage: cost_window.py START SECS WAIT DEV...
"""
import os
import sys
import time

THRESHOLD = 64 * 1024
POLL = 0.05


def read_int(path):
    with open(path) as f:
        return int(f.read())


def busy(stat):
    with open(stat) as f:
        for line in f:
            x = line.split()
            if x and x[0] == "cpu":
                return sum(int(v) for v in (x[1], x[2], x[3], x[6], x[7]))
    raise ValueError(f"no cpu line in {stat}")


def planes(sysfs, devs, what):
    return sum(read_int(os.path.join(sysfs, d, "statistics", what)) for d in devs)


def main():
    if len(sys.argv) < 5:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    start, secs, wait = (float(v) for v in sys.argv[1:4])
    devs = sys.argv[4:]
    sysfs = os.environ.get("PLANE_SYSFS", "/sys/class/net")
    stat = os.environ.get("COST_PROC_STAT", "/proc/stat")
    moved = lambda: planes(sysfs, devs, "tx_bytes") + planes(sysfs, devs, "rx_bytes")
    deadline = time.monotonic() + wait
    last = moved()
    while True:
        time.sleep(POLL)
        now = moved()
        if now - last >= THRESHOLD:
            break
        last = now
        if time.monotonic() > deadline:
            print("none")
            return 0
    time.sleep(start)
    t0 = time.monotonic()
    b0, p0, y0 = busy(stat), planes(sysfs, devs, "tx_packets"), planes(sysfs, devs, "tx_bytes")
    time.sleep(secs)
    t1 = time.monotonic()
    b1, p1, y1 = busy(stat), planes(sysfs, devs, "tx_packets"), planes(sysfs, devs, "tx_bytes")
    print(f"{t1 - t0:.3f} {b0} {b1} {p0} {p1} {y0} {y1}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
