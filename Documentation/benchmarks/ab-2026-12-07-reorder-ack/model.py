#!/usr/bin/env python3
"""ACKs per data packet on one path whose packets are jittered (ab-2026-12-07-reorder-ack).

An estimate, not a measurement: packets of one path leave `gap` us apart,
each is delayed by a uniform jitter of +-`jit` us (netem's jitter without a
distribution table), and the receiver acknowledges every `k` packets
(protocol.md 3.4, a path with 16 or more outstanding) plus those a rule
answers at once. No loss, no ACK timer, no cost: it counts frames only.
    python3 model.py
"""
import random


def acks_per_packet(rule, n=20000, gap=200.0, jit=2000.0, k=8, seed=1):
    rnd = random.Random(seed)
    arrivals = sorted((i * gap + rnd.uniform(-jit, jit), i) for i in range(n))
    got, cum, top, acks, waiting, reorders = set(), 0, -1, 0, 0, False
    for _, psn in arrivals:
        run_end = top + 1 if top >= cum else cum
        opens, below, lowest = psn > run_end, psn < run_end, psn == cum and psn != run_end
        got.add(psn)
        top = max(top, psn)
        while cum in got:
            cum += 1
        waiting += 1
        if rule == "578406a":  # a hole opening or filling, at once
            urgent = opens or below
        else:  # this change: on a path that reorders, the lowest hole's fill only
            urgent = lowest or ((opens or below) and not reorders)
            reorders |= below
        if urgent or waiting >= k:
            acks, waiting = acks + 1, 0
    return acks / n


if __name__ == "__main__":
    for jit in (500, 1000, 2000):
        print(f"jitter +-{jit} us, packets 200 us apart:",
              ", ".join(f"{r} {acks_per_packet(r, jit=jit):.3f}" for r in ("578406a", "reorder-ack")))
