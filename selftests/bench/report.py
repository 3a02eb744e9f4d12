#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turn the suite's samples.csv into report.md and PNG plots (on the host).

    report.py --dir OUT/bench [--command CMD] [--seconds N] [--rig-log FILE]

Every number in the report comes from samples.csv; a transport that was not
available shows "not available" with its reason, never a number.
"""
import argparse
import csv
import datetime
import os
import platform
import re
import statistics
from collections import defaultdict

TRANSPORTS = ["metaroce", "rxe", "siw", "tcp"]
# What the suite's passes over the transports covered (env.txt passes_over).
PASSED = {"throughput": "the throughput, latency, loss and reordering points",
          "lossless": "the lossless throughput points"}

LABEL = {"metaroce": "MetaRoCE", "rxe": "rxe", "siw": "siw", "tcp": "TCP (iperf3)"}
COLOR = {"metaroce": "tab:red", "rxe": "tab:blue", "siw": "tab:green", "tcp": "tab:gray"}


def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


BW_RAW = re.compile(r"^\d{6}-(ib_(?:write|send|read)_bw)_-s_(\d+)_-q_(\d+)_-D_\d+_-f_1_-Q_1(?:_-t_4)?$")


def reclassify_clock_failures(rows, raw_dir):
    """Samples of 0.00 MB/s whose perftest output counted iterations are not
    zeros: perftest's duration clock failed (TCG guests). Suites since the
    fix record them as errors; for older runs, pair the bandwidth points
    with their raw outputs (both in execution order) and do the same. Any
    mismatch in the pairing leaves the rows as they are."""
    if not os.path.isdir(raw_dir):
        return 0
    files = sorted(f for f in os.listdir(raw_dir) if BW_RAW.match(f))
    points = [r for r in rows if r["transport"] not in ("tcp", "all") and r["test"].endswith("_bw")
              and r["scenario"] in ("throughput", "loss", "reorder", "scaling") and r["metric"] in ("MiBps", "error")]
    if len(files) != len(points):
        return 0
    for f, r in zip(files, points):
        test, size, qps = BW_RAW.match(f).groups()
        if (test, size, qps) != (r["test"], r["size"], r["qps"]):
            return 0
    n = 0
    for f, r in zip(files, points):
        if r["metric"] != "MiBps" or fnum(r["value"]) != 0:
            continue
        for line in open(os.path.join(raw_dir, f)):
            x = line.split()
            if len(x) >= 5 and x[0] == r["size"] and x[1].isdigit() and int(x[1]) > 0 and fnum(x[3]) == 0:
                r.update(metric="error", value="", note=f"perftest printed 0.00 MB/s for {x[1]} iterations "
                         "(its duration clock failed); reclassified by report.py from the raw output")
                n += 1
                break
    return n


def fnum(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def med(vals):
    return statistics.median(vals) if vals else None


def fmt(v, d=2):
    if v is None:
        return "n/a"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    if 0 < abs(v) < 0.1:
        return f"{v:.2g}"
    return f"{v:.{d}f}"


def cell(vals, d=2):
    """median [min-max] (n)"""
    if not vals:
        return None
    if len(vals) == 1:
        return f"{fmt(vals[0], d)} (n=1)"
    return f"{fmt(med(vals), d)} [{fmt(min(vals), d)}–{fmt(max(vals), d)}] (n={len(vals)})"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "n/a"
    return f"{a / b:.2f}×"


class Data:
    def __init__(self, rows):
        self.rows = rows
        self.transports = [t for t in TRANSPORTS if any(r["transport"] == t for r in rows)]
        self.unavail = {}
        self.avail_planes = {}
        for r in rows:
            if r["scenario"] == "availability":
                if r["metric"] == "unavailable":
                    self.unavail[r["transport"]] = r["note"]
                else:
                    self.avail_planes[r["transport"]] = r["planes"]

    def vals(self, **kw):
        out = []
        for r in self.rows:
            if all((r[k] == v) if not callable(v) else v(r[k]) for k, v in kw.items()):
                x = fnum(r["value"])
                if x is not None:
                    out.append(x)
        return out

    def errors(self, **kw):
        return [r for r in self.rows if r["metric"] in ("error", "unavailable")
                and all(r[k] == v for k, v in kw.items())]

    def missing(self, t, **kw):
        """Why transport t has no numbers for this point: the reason text."""
        if t in self.unavail:
            return "not available: " + self.unavail[t]
        errs = self.errors(transport=t, **kw)
        if errs:
            notes = sorted({e["note"] for e in errs if e["note"]})
            return f"failed ({len(errs)}×): " + ("; ".join(notes)[:160] or "no output")
        return None


def bw_key(test, size, qps):
    return dict(test=test, size=str(size), qps=str(qps))


def tcp_equiv(test, size, qps):
    if test == "ib_write_bw" and str(size) == "65536":
        return dict(test="iperf3", qps=str(qps))
    return None


def point(d, t, scenario, test, size, qps, cond=None, metric="MiBps"):
    kw = dict(transport=t, scenario=scenario, metric=metric)
    if t == "tcp":
        eq = tcp_equiv(test, size, qps)
        if eq is None:
            return None, "no TCP equivalent"
        kw.update(eq)
    else:
        kw.update(bw_key(test, size, qps))
    if cond is not None:
        kw["cond"] = cond
    v = d.vals(**kw)
    if v:
        return v, None
    kw.pop("metric")
    kw.pop("transport")
    return None, d.missing(t, **kw) or "not measured"


def lossless(d, t):
    v, _ = point(d, t, "throughput", "ib_write_bw", 65536, 1, cond="loss=0")
    return med(v) if v else None


def netem0(d, t):
    """The median under netem with 0% loss on every plane (the loss sweep's
    reference with the loss points' qdisc), or None when not run."""
    v, _ = point(d, t, "loss", "ib_write_bw", 65536, 1, cond="loss=0")
    return med(v) if v else None


# The reordering point's cond, and its reference's: the same mean delay
# on plane 0 with no jitter.
REORDER = "jitter=2ms+-2ms@plane0"
REORDER_REF = "delay=2ms@plane0"


def cells_row(d, label, getter, ts, extra=None):
    out = [label]
    for t in ts:
        v, why = getter(t)
        out.append(cell(v) if v else f"— ({why})" if why else "—")
    if extra:
        out += extra
    return out


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def window_rate(ser, a, b):
    """Mean MiB/s over [a, b] of a series of (t, MiB/s over the interval ending t)."""
    tot = span = 0.0
    for (t0, _), (t1, v) in zip(ser, ser[1:]):
        lo, hi = max(t0, a), min(t1, b)
        if hi > lo:
            tot += v * (hi - lo)
            span += hi - lo
    return tot / span if span >= 0.5 * (b - a) and span > 0 else None


def failover_stats(d, t):
    """Per rep, from the host agent's 0.1 s samples: rates before, during and
    after the plane's down (over time windows), and how long the rate took to
    come back (on 0.5 s windows)."""
    win = 0.5
    reps = sorted({r["rep"] for r in d.rows if r["transport"] == t and r["scenario"] == "failover"
                   and r["metric"] == "host_MiBps"})
    res = []
    for rep in reps:
        rows = [r for r in d.rows if r["transport"] == t and r["scenario"] == "failover" and r["rep"] == rep]
        ser = sorted((fnum(r["cond"][2:]), fnum(r["value"])) for r in rows if r["metric"] == "host_MiBps")
        ev = {r["metric"]: fnum(r["value"]) for r in rows if r["metric"] in ("down_s", "up_s", "run_s", "down_plane_bytes")}
        planes = next((int(r["planes"]) for r in rows), 1)
        per_plane = {k: sorted((fnum(r["cond"][2:]), fnum(r["value"])) for r in rows if r["metric"] == f"plane{k}_MiBps")
                     for k in range(planes)}
        per_plane = {k: v for k, v in per_plane.items() if v}
        down, up = ev.get("down_s"), ev.get("up_s")
        if down is None or up is None:
            continue
        last = ser[-1][0]
        ends = [ts for ts, _ in ser]

        def first_window(frm, to, ok):
            """End of the first 0.5 s window in [frm, to] where ok(rate over it, its end), minus frm."""
            for te in ends:
                if te - win >= frm - 1e-6 and te <= to:
                    r = window_rate(ser, te - win, te)
                    if r is not None and ok(r, te):
                        return te - frm
            return None
        pre = window_rate(ser, 2, down - 0.1)
        during = window_rate(ser, down + 1, up - 0.1)
        after = window_rate(ser, up + 2, last)
        rec_down = rec_up = plane_back = None
        if pre:
            if planes > 1:
                rec_down = first_window(down, up, lambda r, _: r >= pre * (planes - 1) / planes * 0.9)
            rec_up = first_window(up, last, lambda r, _: r >= 0.9 * pre)
        dips = [window_rate(ser, te - win, te) for te in ends if down + win <= te <= min(up, down + 3)]
        dip = min((x for x in dips if x is not None), default=None)
        # When the plane that came back carries its part again: at least half
        # an even share of the bytes.
        back = per_plane.get(planes - 1)
        if planes > 1 and back:
            plane_back = first_window(up, last, lambda r, te: (window_rate(back, te - win, te) or 0) >= r / (2 * planes) > 0)
        res.append(dict(rep=rep, planes=planes, ser=ser, down=down, up=up, pre=pre, during=during,
                        after=after, rec_down=rec_down, rec_up=rec_up, last=last, n=len(ser), dip=dip,
                        run=ev.get("run_s"), leak=ev.get("down_plane_bytes"), per_plane=per_plane,
                        plane_back=plane_back, shares_before=plane_shares_before(per_plane, down)))
    return res


def plane_shares_before(per_plane, down):
    """Each plane's share (percent) of the bytes in the window before the
    down [2 s, down]: the unlimited steady state (no tbf in this scenario)."""
    rates = [window_rate(per_plane.get(k, []), 2, down - 0.1) for k in sorted(per_plane)]
    if len(rates) < 2 or any(r is None for r in rates) or sum(rates) <= 0:
        return None
    return [100 * r / sum(rates) for r in rates]


# ---------------------------------------------------------------- collectives
COLL_OPS = ["allreduce", "alltoall"]
COLL_LABEL = {"allreduce": "all-reduce", "alltoall": "all-to-all"}


def size_label(b):
    b = int(b)
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k and b % k == 0:
            return f"{b // k} {unit}"
    return f"{b} B"


def coll_conds(d):
    """The collectives' conditions, lossless first ("loss=0", "loss=1")."""
    return sorted({r["cond"] for r in d.rows if r["scenario"] == "collectives" and r["cond"].startswith("loss=")},
                  key=lambda c: fnum(c[5:]) or 0)


def coll_series(d, t, op, cond):
    """[(size, avg_us)] of one transport, operation and condition."""
    pts = [(int(r["size"]), fnum(r["value"])) for r in d.rows
           if r["transport"] == t and r["scenario"] == "collectives" and r["test"] == op
           and r["cond"] == cond and r["metric"] == "avg_us" and fnum(r["value"]) is not None]
    return sorted(pts)


def coll_section(d, w):
    """The collectives' report section; returns the transports measured."""
    ts = [t for t in ("metaroce", "rxe") if any(r["transport"] == t and r["scenario"] == "collectives" for r in d.rows)]
    if not ts:
        return []
    w("\n## Collectives: all-reduce and all-to-all completion time (Open MPI)\n\n")
    rows = []
    for t in ts:
        path = next((r for r in d.rows if r["transport"] == t and r["scenario"] == "collectives" and r["metric"] == "path"), None)
        if path:
            how = {"ucx": "pml ucx: UCX rc_verbs, ud_verbs for connection set-up",
                   "openib": "pml ob1, openib BTL (rdma_cm connections)"}.get(path["value"], path["value"])
            rows.append([LABEL[t], f"{path['value']} ({how})", f"{path['qps']} ranks, {path['planes']} plane(s)"
                         + (f"; {path['note']}" if path["note"] else "")])
        else:
            why = d.missing(t, scenario="collectives") or "not measured"
            rows.append([LABEL[t], "**not measured**", why])
    w(table(["transport", "Open MPI path", "ranks, notes"], rows))
    conds = coll_conds(d)
    w("\nTime of one operation on the slowest rank, **ms**, by the bytes each rank contributes (SIZE: the all-reduce "
      "vector of float32 sums; the all-to-all send buffer, SIZE / ranks to each rank). Each point is the mean of "
      "its operations (up to 20, at least one; the note column of samples.csv says how many), every result checked. "
      "A cell without a number says why.\n\n")
    sizes = sorted({int(r["size"]) for r in d.rows if r["scenario"] == "collectives" and r["size"].isdigit()})
    header = ["operation", "size"]
    for c in conds:
        lbl = "lossless" if c == "loss=0" else f"{c[5:]}% loss"
        header += [f"{LABEL[t]}, {lbl}" for t in ts]
        if len(ts) == 2:
            header.append(f"rxe/MetaRoCE, {lbl}")
    rows = []
    notes = {}
    for op in COLL_OPS:
        for size in sizes:
            row = [COLL_LABEL[op], size_label(size)]
            for c in conds:
                got = {}
                for t in ts:
                    v = d.vals(transport=t, scenario="collectives", test=op, size=str(size), cond=c, metric="avg_us")
                    if v:
                        got[t] = med(v)
                        row.append(fmt(got[t] / 1000))
                        continue
                    errs = d.errors(transport=t, scenario="collectives", test=op, size=str(size), cond=c)
                    why = "; ".join(sorted({e["note"] for e in errs if e["note"]})) or "not measured"
                    k = notes.setdefault(why, len(notes) + 1)
                    row.append(f"— [{k}]")
                if len(ts) == 2:
                    row.append(ratio(got.get("rxe"), got.get("metaroce")))
            rows.append(row)
    w(table(header, rows))
    for why, k in notes.items():
        w(f"\n[{k}] {why}\n")
    w("\nrxe/MetaRoCE above 1 means MetaRoCE completed the operation sooner. Loss is netem on every plane of both "
      "hosts; Open MPI's own start-up runs over the management link.\n")
    return ts


def coll_plot(out, d, ts):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    conds = coll_conds(d)
    fig, axes = plt.subplots(len(COLL_OPS), max(1, len(conds)), figsize=(5.2 * max(1, len(conds)), 7.2), squeeze=False)
    for i, op in enumerate(COLL_OPS):
        for j, c in enumerate(conds):
            ax = axes[i, j]
            for t in ts:
                pts = coll_series(d, t, op, c)
                if pts:
                    ax.plot([s for s, _ in pts], [v / 1000 for _, v in pts], marker="o", label=LABEL[t], color=COLOR[t])
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            xs = sorted({s for t in ts for s, _ in coll_series(d, t, op, c)})
            if xs:
                ax.set_xticks(xs, [size_label(x) for x in xs], rotation=45, fontsize=7)
                ax.minorticks_off()
            ax.set_title(f"{COLL_LABEL[op]}, {'lossless' if c == 'loss=0' else c[5:] + '% loss'}", fontsize=10)
            ax.set_xlabel("bytes per rank")
            ax.set_ylabel("completion time, ms (log)")
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "collectives.png"), dpi=110)
    plt.close(fig)


SHARE_TOLERANCE = 0.10  # issue #14 item 3: every plane within +-10% of an even share


def plane_shares(d, t, p):
    """The median over reps of each plane's share (%) of the bytes host A sent
    on the planes in the scaling point of P planes, and the reps counted."""
    rows = [r for r in d.rows if r["transport"] == t and r["scenario"] == "scaling" and r["planes"] == str(p)
            and re.fullmatch(r"plane\d+_share", r["metric"]) and fnum(r["value"]) is not None]
    shares = [med([fnum(r["value"]) for r in rows if r["metric"] == f"plane{k}_share"]) for k in range(p)]
    return shares, len({r["rep"] for r in rows})


def share_section(d, ts, planes_set, w):
    """Plane share (issue #14 item 3): how evenly each plane scaling point
    spread its bytes over the planes."""
    multi = [p for p in planes_set if p >= 2]
    if not multi:
        return
    w("\n## Plane share: each plane's part of the bytes in the plane scaling points\n\n")
    w("The bytes host A sent on each plane's netdev (`tx_bytes`, Ethernet frames with headers and "
      "retransmissions) over the whole point, connection set-up and perftest's 1 s margins included; "
      "the management link is separate, so the planes carry the test's traffic and little else "
      "(ARP, neighbour discovery). Cells: each plane's share, median over the reps; *largest deviation* "
      "from the even share 1/P in percentage points and relative to 1/P (|share − 1/P| / (1/P)). "
      f"MetaRoCE's target: every plane within ±{100 * SHARE_TOLERANCE:.0f}% of 1/P. TCP: one iperf3 "
      "flow bound to each plane, the reference spread. rxe and siw are bound to one netdev: nothing "
      "to spread.\n\n")
    rows = []
    for t in ts:
        if t in ("rxe", "siw"):
            rows.append([LABEL[t], "1 plane (no spread)", "", "", "", ""])
            continue
        for p in multi:
            shares, n = plane_shares(d, t, p)
            if None in shares:
                why = d.missing(t, scenario="scaling", planes=str(p)) or "not measured"
                rows.append([LABEL[t], str(p), f"— ({why})", "", "", ""])
                continue
            even = 100 / p
            dev = max(abs(s - even) for s in shares)
            verdict = ("yes" if dev / even <= SHARE_TOLERANCE else "**no**") if t == "metaroce" else "— (reference)"
            rows.append([LABEL[t], str(p), " / ".join(f"{s:.1f}%" for s in shares) + f" (n={n})",
                         f"{dev:.1f} pp", f"{100 * dev / even:.1f}%", verdict])
    w(table(["transport", "planes", "share per plane (plane 0 / 1 / …)", "largest deviation",
             "relative to 1/P", f"within ±{100 * SHARE_TOLERANCE:.0f}%"], rows))


def delay_ms(cond):
    """The one-way delay (ms) of a scale cond "delay=1.5ms;rate=...kbit"."""
    m = re.match(r"delay=([0-9.]+)ms", cond)
    return float(m.group(1)) if m else None


def scale_section(d, ts, w):
    """Scale-across (issue #14 item 2): goodput over the tbf rate at long
    RTTs, and MetaRoCE's paths, messages outstanding and message window."""
    rate = d.vals(transport="all", scenario="scale", metric="rate_kbit")
    rows_sc = [r for r in d.rows if r["scenario"] == "scale"]
    conds = sorted({r["cond"] for r in rows_sc if delay_ms(r["cond"]) is not None},
                   key=lambda c: (delay_ms(c), ";pwnd_max=" in c, c))
    if not rate and not conds:
        return
    w("\n## Scale-across: one plane as a long-haul link (netem delay one way on both hosts, under tbf)\n\n")
    rate_mib = rate[0] * 1000 / 8 / 1048576 if rate else None
    w(f"Link rate {rate[0]:.0f} kbit/s = {rate_mib:.3f} MiB/s (1/4 of the CPU ceiling unless "
      "`BENCH_SCALE_RATE`); RTT = twice the delay. `ib_write_bw -t 1024` (room for 1,024 messages in "
      "flight), 1 QP; TCP: one iperf3 flow. Cells: median MiB/s (min–max, n) and its share of the link "
      "rate. *v1 bound*: what the v1 window of 64 messages carries at this RTT, as a share of the "
      "rate (below 100%: the point needs the lifted window, protocol.md 1.4). MetaRoCE: its sender's "
      "paths, messages outstanding and message window (the peer's ACKs'), the reading with the most "
      "paths (`rdma -dd resource show qp` every 2 s). Rows *pwnd_max N*: the longest delay again with "
      "host A's per-path window cap lowered from 256 to N packets (knobs `pwnd_init` and `pwnd_max`), "
      "so that the rig's BDP needs more than the 4 paths a QP opens, as a campus link's needs more than "
      "4 × 256 packets: there the link is filled only by growing paths (protocol.md 4.4).\n\n"
      if rate else "Link rate unknown.\n\n")
    sizes = sorted({int(r["size"]) for r in rows_sc if r["size"].isdigit()})
    rows = []
    for cond in conds:
        rtt_s = 2 * delay_ms(cond) / 1000
        cap = re.search(r";pwnd_max=(\d+)", cond)
        for size in sizes:
            label = f"{delay_ms(cond):g} ms" + (f", pwnd_max {cap.group(1)}" if cap else "")
            row = [label, f"{size // 1024} KiB"]
            bound = 64 * size / rtt_s / 1048576
            row.append(f"{100 * bound / rate_mib:.0f}%" if rate_mib else "?")
            for t in ts:
                if cap and t != "metaroce":
                    row.append("— (a MetaRoCE knob)")
                    continue
                if t == "tcp":
                    kw = dict(test="iperf3")
                else:
                    kw = dict(test="ib_write_bw", size=str(size))
                v = d.vals(transport=t, scenario="scale", cond=cond, metric="MiBps", **kw)
                if v:
                    share = f" = {100 * med(v) / rate_mib:.0f}%" if rate_mib else ""
                    row.append(cell(v) + share)
                else:
                    why = d.missing(t, scenario="scale", cond=cond) or d.missing(t, scenario="scale")
                    row.append(f"— ({why or 'not measured'})")
            got = [med(d.vals(transport="metaroce", scenario="scale", cond=cond, size=str(size), metric=m))
                   if d.vals(transport="metaroce", scenario="scale", cond=cond, size=str(size), metric=m) else None
                   for m in ("paths", "outstanding", "msg_window")]
            row.append(" / ".join("?" if g is None else f"{g:.0f}" for g in got))
            rows.append(row)
    w(table(["delay", "size", "v1 bound"] + [LABEL[t] for t in ts] + ["MetaRoCE paths / outstanding / window"],
            rows))


def jumbo_section(d, ts, w):
    """Jumbo planes (issue #11 item 5): the same points at plane MTU 1500
    and 9000, reported apart from the other scenarios' (MTU 1500) ones."""
    if not any(r["scenario"] == "jumbo" for r in d.rows):
        return
    w("\n## Jumbo planes: ib_write_bw, 1 QP, every plane at MTU 1500, then 9000\n\n")
    w("Both hosts' planes set to the MTU before the transport comes up. MetaRoCE segments at the "
      "payload its planes agree (protocol.md 1.8: 1,412 bytes at 1500, 8,912 at 9000 over IPv4), rxe "
      "and siw at the IB MTU the port offers (1024, 4096); TCP: one iperf3 flow (64 KiB row). Cells: "
      "median MiB/s (min–max, n); *9000/1500*: the gain of the jumbo planes. These points are "
      "separate from the other sections, which run at the rig's MTU.\n\n")
    rows = []
    for size in (65536, 1048576):
        for t in ts:
            if t == "tcp" and size != 65536:
                continue
            got = {}
            row = [f"{size // 1024} KiB" if size < 1048576 else "1 MiB", LABEL[t]]
            for mtu in (1500, 9000):
                v, why = point(d, t, "jumbo", "ib_write_bw", size, 1, cond=f"mtu={mtu}")
                got[mtu] = med(v) if v else None
                row.append(cell(v) if v else f"— ({why})")
            row.append(ratio(got[9000], got[1500]))
            rows.append(row)
    w(table(["size", "transport", "MTU 1500", "MTU 9000", "9000/1500"], rows))


def cost_section(d, ts, tests, w):
    """What the lossless throughput points cost (suite.sh cost_end): CPU per
    MiB on both guests, frames back per data frame, MetaRoCE's timers."""
    if not d.vals(scenario="throughput", metric="cpu_ms_per_MiB"):
        return
    w("\n## Cost per byte, acknowledgements and timers (the lossless throughput points)\n\n")
    w("*CPU ms per MiB*: both guests' busy CPU time (user, system, irq, softirq in /proc/stat) per MiB of "
      "frames the data sender put on its planes (headers and retransmissions included: one yardstick for "
      "every transport), in a window while data moves (perftest: 0.5 to 3 s after the planes start "
      "carrying it, inside its 4 s run; iperf3: 0.3 to 1.7 s of its 2 s), so that set-up and tear-down "
      "are not counted (`cost_window.py`); target MetaRoCE ≤ 0.7× rxe. *Busy*: each guest's busy share of "
      "its window (1 vCPU each; the rest is idle, waiting for the other guest or for QEMU). Busy time "
      "includes the benchmark programs' own: perftest busy-polls its completion queue whatever the "
      "transport, so a guest whose client spins reads busy while it waits. Over the whole "
      "point, from the counters before and after it: *back per data*, the frames the data receiver sent per "
      "frame the data sender sent, i.e. its acknowledgements (and probe answers) per data frame; target "
      "≤ 0.25 at 64 KiB (TCP's segmentation offload makes its frame count no comparison); MetaRoCE's "
      "*retransmissions*, *timeouts* and *timer-declared losses* per data frame, the sender's "
      "`retransmissions`, `rto_timeouts` and `rto_losses`: lossless, a retransmission is a timeout's (it "
      "resends the path's packets in flight, `rto_losses`, less those a late ACK showed delivered) or a "
      "SACK hole's (a reorder, or a drop on the way: until 7d8047e, in the rig's link sockets); timer-driven retransmissions, at most "
      "the timer-declared losses, target ≤ 0.1%.\n\n")
    rows = []
    for test, size, qps in tests:
        label = f"{test} {int(size) // 1024} KiB, {qps} QP"
        row = [label]
        per = {}
        for t in ts:
            kw = dict(transport=t, scenario="throughput", cond="loss=0")
            if t == "tcp":
                eq = tcp_equiv(test, size, qps)
                if eq is None:
                    row.append("—")
                    continue
                kw.update(eq)
            else:
                kw.update(bw_key(test, size, qps))
            c = d.vals(metric="cpu_ms_per_MiB", **kw)
            per[t] = med(c) if c else None
            row.append(cell(c, 1) if c else "—")
        row.append(ratio(per.get("metaroce"), per.get("rxe")))
        for t in [t for t in ts if t != "tcp"]:
            b = d.vals(metric="back_per_data", transport=t, scenario="throughput", cond="loss=0", **bw_key(test, size, qps))
            row.append(fmt(med(b), 3) if b else "—")
        kw = dict(transport="metaroce", scenario="throughput", cond="loss=0", **bw_key(test, size, qps))
        for m in ("retx_per_data", "rto_per_data", "rto_loss_per_data"):
            v = d.vals(metric=m, **kw)
            row.append(f"{100 * med(v):.3f}% (max {100 * max(v):.3f}%)" if v else "—")
        busy = []
        for t in ts:
            kw = dict(transport=t, scenario="throughput", cond="loss=0")
            kw.update(tcp_equiv(test, size, qps) or {"test": "none"} if t == "tcp" else bw_key(test, size, qps))
            a, b = d.vals(metric="busy_pct_A", **kw), d.vals(metric="busy_pct_B", **kw)
            if a and b:
                busy.append(f"{LABEL[t]} {med(a):.0f}/{med(b):.0f}")
        row.append(", ".join(busy) or "—")
        rows.append(row)
    rd = [t for t in ts if t != "tcp"]
    w(table(["test"] + [f"{LABEL[t]} CPU ms/MiB" for t in ts] + ["MetaRoCE/rxe CPU"]
            + [f"{LABEL[t]} back per data" for t in rd]
            + ["MetaRoCE retransmissions / data", "MetaRoCE timeouts / data",
               "MetaRoCE timer-declared losses / data", "busy % A/B"], rows))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--command", default="selftests/bench/run.sh")
    ap.add_argument("--seconds", type=int, default=None)
    ap.add_argument("--rig-log", default=None)
    ap.add_argument("--rig-rc", default="0")
    ap.add_argument("--quick", default="0")
    a = ap.parse_args()
    rows = load(os.path.join(a.dir, "samples.csv"))
    fixed = reclassify_clock_failures(rows, os.path.join(a.dir, "raw"))
    if fixed:
        with open(os.path.join(a.dir, "samples.csv"), "w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            wr.writeheader()
            wr.writerows(rows)
        print(f"report: {fixed} samples of 0.00 MB/s with iterations reclassified as errors (see their note)")
    d = Data(rows)
    env = {}
    envf = os.path.join(a.dir, "env.txt")
    if os.path.exists(envf):
        for line in open(envf):
            for m in re.finditer(r"(\S+?)=(.*?)(?= \S+=|$)", line.strip()):
                env[m.group(1)] = m.group(2)
    accel = "?"
    # The links' socket receive buffer (selftests/rig/run.sh): the host's
    # default unless the rig raised it.
    link_buffer = "the host's default receive buffer"
    if a.rig_log and os.path.exists(a.rig_log):
        rig_text = open(a.rig_log, errors="replace").read()
        b = re.search(r"rig: link sockets' receive buffer (\d+) bytes", rig_text)
        if b:
            link_buffer = f"{int(b.group(1)) // 1024} KiB receive buffer each"
        m = re.search(r"rig: kernel \S+, (\d+) planes, (\w+)", rig_text)
        if m:
            accel = m.group(2)
    host_cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    host_mem = next((l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal")), "0")
    ts = d.transports
    rdma = [t for t in ts if t != "tcp"]
    md = []
    w = md.append
    w("# MetaRoCE benchmark report\n")
    w(f"- **Date:** {datetime.datetime.now().strftime('%Y-%m-%d %H:%M %Z').strip()}\n"
      f"- **Command:** `{a.command}` (from the repository root)"
      + (" — **quick subset** (BENCH_QUICK=1)" if a.quick == "1" else "") + "\n"
      f"- **Machine:** {host_cpu}, {os.cpu_count()} CPUs, {int(host_mem) // 1024 // 1024} GiB, "
      f"host kernel {platform.release()}\n"
      f"- **Rig:** two QEMU guests ({accel.upper()}), {env.get('cpus', '?')} vCPU and {env.get('mem', '?')} each, "
      f"{env.get('planes', '?')} plane links + a management link (QEMU UDP sockets on loopback, {link_buffer}); "
      f"guest kernel {env.get('kernel', '?')}, "
      + (f"the benchmark kernel (no lock or memory debugging)" if env.get('kdebug') == 'none'
         else f"a debug kernel ({env.get('kdebug', '?').replace('+', ', ')}: every transport runs ~3x slower)")
      + "\n"
      f"- **Tools:** perftest {env.get('perftest', '?')}, iperf3 {env.get('iperf3', '?')}, rdma-core {env.get('rdma-core', '?')}\n"
      f"- **Settings:** {env.get('reps', '?')} repetitions per point"
      + (f" ({PASSED.get(env.get('passes_over'), 'the throughput points')} in {env['passes']} passes over the "
         "transports, every transport's repetition r before any transport's r + 1, the order reversed on even passes)"
         if int(env.get("passes", "0") or 0) > 1 else "")
      + f", perftest `-D {env.get('dur', '?')} -f 1` "
      f"(measures {int(env.get('dur', '4')) - 2} s), latency `-n {env.get('lat_n', '?')}`\n"
      + (f"- **Duration:** {a.seconds} s for the rig run (boot, suite, shutdown)\n" if a.seconds else "")
      + (f"- **Rig result:** FAILED (exit {a.rig_rc}; see the rig log: a test or a kernel report)\n" if a.rig_rc != "0" else ""))
    w("\nUnits: MiB/s (perftest's \"MB/sec\" is 2^20 bytes/s; iperf3 converted to the same). "
      "Cells are *median [min–max] (n = repetitions)*. Everything runs in emulated (TCG) "
      "VMs on 2 host cores, so the absolute numbers are CPU-bound and tiny; compare columns, not "
      "against hardware.\n")

    # Availability
    w("\n## Transports\n\n")
    rows = []
    for t in ts:
        if t in d.unavail:
            rows.append([LABEL[t], "**not available**", d.unavail[t]])
        else:
            p = d.avail_planes.get(t, "?")
            desc = {"rxe": "soft-RoCE (rdma_rxe) on plane 0, GID-addressed",
                    "siw": "soft-iWARP (siw) on plane 0, rdma_cm (-R)",
                    "tcp": "kernel TCP, iperf3, the rig's ceiling",
                    "metaroce": "metaroce.ko + provider"}[t]
            rows.append([LABEL[t], f"available, {p} plane(s)", desc])
    w(table(["transport", "status", "how"], rows))

    # Throughput
    w("\n## Throughput, lossless (MiB/s)\n\n")
    tests = []
    for r in d.rows:
        if r["scenario"] == "throughput" and r["transport"] != "tcp":
            k = (r["test"], r["size"], r["qps"])
            if k not in tests:
                tests.append(k)
    if not tests:
        tests = [("ib_write_bw", "65536", "1")]
    rows = []
    for test, size, qps in tests:
        label = f"{test} {int(size) // 1024} KiB, {qps} QP"
        getter = lambda t, test=test, size=size, qps=qps: point(d, t, "throughput", test, size, qps)
        mr, _ = getter("metaroce")
        rx, _ = getter("rxe")
        rows.append(cells_row(d, label, getter, ts, [ratio(med(mr), med(rx))]))
    w(table(["test"] + [LABEL[t] for t in ts] + ["MetaRoCE/rxe"], rows))
    w("\nTCP rows: one iperf3 stream for 1 QP, `-P 8` for 8 QPs; TCP has no send/read/1 MiB equivalent.\n")
    reruns = [r for r in d.rows if r["metric"] == "MiBps" and "duration clock" in r["note"]]
    if reruns:
        w(f"\nperftest's duration clock failed (iterations counted, 0.00 MB/s printed) and the point was run "
          f"again in {len(reruns)} sample(s): "
          + "; ".join(f"{LABEL.get(r['transport'], r['transport'])} {r['scenario']} {r['test']} {r['size']} B "
                      f"{r['qps']} QP {r['cond']} rep {r['rep']} ({r['note']})" for r in reruns) + ".\n")
    cost_section(d, ts, tests, w)

    # Latency
    lat_tests = []
    for r in d.rows:
        if r["scenario"] == "latency" and r["test"] != "-":
            k = (r["test"], r["size"])
            if k not in lat_tests:
                lat_tests.append(k)
    w("\n## Latency (µs; perftest t_typical = median, and the 99th percentile)\n\n")
    rows = []
    for test, size in lat_tests:
        row = [f"{test} {size} B"]
        mrm = rxm = None
        for t in rdma:
            m = d.vals(transport=t, scenario="latency", test=test, size=size, metric="median_us")
            p = d.vals(transport=t, scenario="latency", test=test, size=size, metric="p99_us")
            if m:
                row.append(f"{fmt(med(m))} / {fmt(med(p))} [{fmt(min(m))}–{fmt(max(m))}] (n={len(m)})")
            else:
                row.append("— (" + (d.missing(t, scenario="latency", test=test, size=size) or "not measured") + ")")
            if t == "metaroce":
                mrm = med(m) if m else None
            if t == "rxe":
                rxm = med(m) if m else None
        row.append(ratio(mrm, rxm))
        rows.append(row)
    w(table(["test"] + [LABEL[t] + " median / p99 [median range]" for t in rdma] + ["MetaRoCE/rxe (median)"], rows))

    # Loss sweep
    losses = sorted({fnum(r["cond"][5:]) for r in d.rows if r["scenario"] == "loss" and r["cond"].startswith("loss=")})
    losses = [0.0] + [x for x in losses if x]
    # Each transport's two references: lossless (no qdisc) and netem at 0%.
    bases = {t: (lossless(d, t), netem0(d, t)) for t in ts}
    has_netem0 = any(n for _, n in bases.values())
    w("\n## Loss sweep: ib_write_bw 64 KiB, 1 QP, netem loss on every plane, both directions\n\n")
    w("Cells: MiB/s median [range], the share of the transport's own lossless median, and "
      + ("after the slash its share of the transport's median under netem with 0% loss (the row "
         "\"0% (netem)\"): the loss points' own qdisc, which every packet goes through, where the "
         "lossless points' idle pfifo_fast is bypassed. " if has_netem0 else "")
      + "\n\n")
    rows = []
    loss_series = defaultdict(list)
    # (loss, under netem): the lossless point, netem at 0%, the losses.
    conds = [(0.0, False)] + ([(0.0, True)] if has_netem0 else []) + [(x, True) for x in losses[1:]]
    for L, netem in conds:
        row = [f"{L:g}%" + (" (netem)" if L == 0 and netem else "")]
        mrv = rxv = None
        for t in ts:
            if not netem:
                v, why = point(d, t, "throughput", "ib_write_bw", 65536, 1, cond="loss=0")
            else:
                v, why = point(d, t, "loss", "ib_write_bw", 65536, 1, cond=f"loss={L:g}")
            base, nbase = bases[t]
            if v:
                share = f", {100 * med(v) / base:.0f}%" if base else ""
                if L and nbase:
                    share += f" / {100 * med(v) / nbase:.0f}%"
                row.append(cell(v) + share)
                if L or not netem:
                    loss_series[t].append((L, med(v), min(v), max(v), 100 * med(v) / base if base else None))
            else:
                row.append(f"— ({why})")
            if t == "metaroce" and v:
                mrv = med(v)
            if t == "rxe" and v:
                rxv = med(v)
        mr0, mrn = bases.get("metaroce", (None, None))
        row += [ratio(mrv, rxv), ratio(mrv, mr0)] + ([ratio(mrv, mrn) if L else "—"] if has_netem0 else [])
        rows.append(row)
    w(table(["loss"] + [LABEL[t] for t in ts] + ["MetaRoCE/rxe", "MetaRoCE/own lossless"]
            + (["MetaRoCE/own netem 0%"] if has_netem0 else []), rows))

    # Reordering
    w("\n## Reordering: netem delay 2 ms ± 2 ms on plane 0, both directions\n\n")
    w("netem's jitter reorders packets within the plane (packets are a fraction of a millisecond apart here), "
      "so a one-plane transport sees heavy reordering on its only path.\n\n")
    has_delay = any(r["scenario"] == "reorder" and r["cond"] == REORDER_REF for r in d.rows)
    if has_delay:
        w("Before it, each transport ran the same mean delay with no jitter (`netem delay 2ms` on plane 0), "
          "which reorders nothing: the share of that tells the reordering's cost from the delay's and the qdisc's.\n\n")
    rows = []
    for t in ts:
        v, why = point(d, t, "reorder", "ib_write_bw", 65536, 1, cond=REORDER)
        ref, _ = point(d, t, "reorder", "ib_write_bw", 65536, 1, cond=REORDER_REF) if has_delay else (None, None)
        base = lossless(d, t)
        row = [LABEL[t], cell(v) if v else f"— ({why})",
               f"{100 * med(v) / base:.0f}%" if v and base else "n/a"]
        if has_delay:
            row += [cell(ref) if ref else "—", f"{100 * med(v) / med(ref):.0f}%" if v and ref else "n/a"]
        rows.append(row)
    w(table(["transport", "MiB/s", "share of own lossless"]
            + (["delay 2 ms, no jitter: MiB/s", "share of it"] if has_delay else []), rows))

    # Scaling
    ceiling = d.vals(transport="all", scenario="scaling", metric="ceiling_MiBps")
    rate = d.vals(transport="all", scenario="scaling", metric="plane_rate_kbit")
    planes_set = sorted({int(r["planes"]) for r in d.rows if r["scenario"] == "scaling" and r["planes"].isdigit()})
    w("\n## Plane scaling: ib_write_bw 64 KiB, 1 QP; every plane rate-limited with tbf\n\n")
    if rate:
        w(f"CPU ceiling (the slowest RDMA transport's lossless 64 KiB write): "
          f"{fmt(ceiling[0]) if ceiling else 'unknown'} MiB/s; per-plane rate {rate[0]:.0f} kbit/s "
          f"= {rate[0] * 1000 / 8 / 1048576:.3f} MiB/s (1/8 of the ceiling, so 4 planes stay at half of it); "
          "tbf queue 1 MiB, perftest `-t 4` (4 × 64 KiB in flight, so rxe, which has no congestion control, "
          "is limited by the rate and not by tail drops). "
          "rxe and siw are bound to one netdev: they use plane 0 whatever the plane count. TCP: one "
          "iperf3 flow per plane (the aggregate the planes can carry).\n\n")
    rows = []
    scale_series = defaultdict(list)
    for t in ts:
        one = None
        row = [LABEL[t]]
        for p in planes_set:
            v = d.vals(transport=t, scenario="scaling", planes=str(p), metric="MiBps")
            if v:
                if p == 1:
                    one = med(v)
                row.append(cell(v) + (f", {med(v) / one:.2f}× one plane" if one and p > 1 else ""))
                scale_series[t].append((p, med(v), min(v), max(v)))
            else:
                why = d.missing(t, scenario="scaling", planes=str(p)) or "not measured"
                row.append(f"— ({why})")
        rows.append(row)
    w(table(["transport"] + [f"{p} plane(s)" for p in planes_set], rows))
    share_section(d, ts, planes_set, w)

    scale_section(d, ts, w)
    jumbo_section(d, ts, w)

    # Failover
    w("\n## Plane failure: ib_write_bw 64 KiB, 1 QP; the transport's last plane goes down on host A, then comes back\n\n")
    w("For a one-plane transport that plane is its only one. Series *host* (this suite): bytes host A "
      "sent on the transport's planes (Ethernet frames with headers and retransmissions), counted on the "
      "machine that runs both VMs (nftables counters on the planes' QEMU sockets) every 0.1 s; the same "
      "agent takes the plane's link down and up on both hosts (QEMU `set_link`: the NICs lose carrier) on "
      "the host's clock, t = 0 when data flows. Rates below are over time windows: *before* [2 s, down], "
      "*plane down* [down + 1 s, up], *after up* [up + 2 s, end]; *lowest* = the lowest 0.5 s window in "
      "the 3 s after the down; *degraded after* = end of the first 0.5 s window after the down at ≥ 90% "
      "of (P−1)/P of the before rate (P > 1 only; 0.5 s is the finest this reports); *recovered after* = "
      "the same after the up at ≥ 90% of the before rate; *plane back after* = end of the first 0.5 s window "
      "after the up in which the plane that came back carried at least half an even share (1/(2P)) of the "
      "bytes (P > 1); *plane shares before* = each plane's share of the bytes before the down, with no rate "
      "limit (the steady-state spread; protocol wants each within ±10% of 1/P).\n\n")
    rows = []
    fo = {}
    for t in ts:
        st = failover_stats(d, t)
        fo[t] = st
        if not st:
            why = d.missing(t, scenario="failover") or "not measured"
            rows.append([LABEL[t], "—", f"— ({why})", "", "", "", "", "", "", "", ""])
            continue
        for s in st:
            errs = d.errors(transport=t, scenario="failover", rep=s["rep"])
            extra = [e["note"] for e in errs]
            if s["leak"]:
                extra.append(f"{s['leak']:.0f} B sent on the downed plane: the down did not take effect")
            rows.append([LABEL[t], f"{s['planes']} (rep {s['rep']})", fmt(s["pre"]), fmt(s["during"]), fmt(s["after"]),
                         fmt(s["dip"]) if s["dip"] is not None else "",
                         f"{s['rec_down']:.1f} s" if s["rec_down"] is not None else ("n/a (1 plane)" if s["planes"] == 1 else "never"),
                         f"{s['rec_up']:.1f} s" if s["rec_up"] is not None else "never",
                         (f"{s['plane_back']:.1f} s" if s["plane_back"] is not None else "never")
                         if s["planes"] > 1 else "n/a",
                         " / ".join(f"{x:.0f}%" for x in s["shares_before"]) if s["shares_before"] else "",
                         f"{s['n']} samples, {s['run']:.0f} s run"
                         + ("; " + "; ".join(sorted(set(extra)))[:160] if extra else "")])
    w(table(["transport", "planes", "before (MiB/s)", "plane down", "after up", "lowest", "degraded after",
             "recovered after", "plane back after", "plane shares before", "run"], rows))

    # Congestion
    w("\n## Congestion: two flows through one ECN-marking bottleneck (tbf + RED ecn on plane 0 of host A)\n\n")
    rows = []
    for t in ts:
        f0 = d.vals(transport=t, scenario="congestion", metric="MiBps", cond=lambda c: c.startswith("flow0"))
        f1 = d.vals(transport=t, scenario="congestion", metric="MiBps", cond=lambda c: c.startswith("flow1"))
        if not f0 and not f1:
            why = d.missing(t, scenario="congestion") or "not measured"
            rows.append([LABEL[t], f"— ({why})", "", "", "", "", ""])
            continue
        reps = sorted({r["rep"] for r in d.rows if r["transport"] == t and r["scenario"] == "congestion" and r["metric"] == "MiBps"})
        jain = []
        for rep in reps:
            x = d.vals(transport=t, scenario="congestion", metric="MiBps", rep=rep)
            if len(x) == 2 and sum(x) > 0:
                jain.append(sum(x) ** 2 / (2 * sum(v * v for v in x)))
            elif len(x) < 2:
                jain.append(0.5)  # one flow starved or failed
        g = lambda m: d.vals(transport=t, scenario="congestion", metric=m)
        rows.append([LABEL[t], cell(f0) or "failed", cell(f1) or "failed", fmt(med(jain), 3) if jain else "n/a",
                     f"{fmt(med(g('queue_avg_pkts')), 1)} pkts / {fmt(med(g('queue_avg_bytes')) / 1024 if g('queue_avg_bytes') else None, 1)} KiB",
                     f"{fmt(med(g('queue_max_bytes')) / 1024 if g('queue_max_bytes') else None, 1)} KiB",
                     f"{fmt(med(g('marked')), 0)} / {fmt(med(g('early')), 0)} / {fmt(med(g('pdrop')), 0)}"])
    w(table(["transport", "flow 1 MiB/s", "flow 2 MiB/s", "Jain fairness", "queue avg (when busy)", "queue max",
             "ECN marked / early drop / tail drop (pkts)"], rows))
    if rate:
        w(f"\nBottleneck {rate[0]:.0f} kbit/s; RED min/max at 20/60 ms of queue, tx depth 4 per RDMA flow, probability 0.1, `ecn`. "
          "TCP runs with net.ipv4.tcp_ecn=1. A transport that sends no ECT packets is dropped, not marked.\n")

    # RCN incast
    rcn_rate = sorted({c.split("rate=")[1].rstrip("kbit") for c in
                       (r["cond"] for r in d.rows if r["scenario"] == "rcn") if "rate=" in c})
    if any(r["scenario"] == "rcn" for r in d.rows):
        w("\n## RCN incast: four flows into one host through one ECN-marking bottleneck (selftests/rcn.sh's)\n\n")
        w("Four flows A → B for the whole run: four `ib_write_bw` of one QP each (`-s 65536 -t 16`), "
          "TCP `iperf3 -P 4` (`tcp_ecn=1`), through tbf + RED `ecn` on plane 0 of host A "
          f"({', '.join(rcn_rate) or '?'} kbit/s; RED marks between 15 and 45 KB of average queue, "
          "holds 160 KB). MetaRoCE with its receiver rate hints (RCN, protocol.md 6.5) on, host B's "
          "capacity set to the bottleneck's rate, and off. *Flows* is the sum of the tools' rates "
          "(perftest's clock is the TSC, which TCG guests do not keep to); *link* is what tbf sent in "
          "the middle half of the run over the sampler's clock. Queue average and maximum over every "
          "0.5 s sample of the run, its first RTT included; drops and CE marks over the run. "
          "Jain's index over the four flows' rates (1: equal shares).\n\n")
        rows = []
        for t in ts:
            for mode in (("on", "off") if t == "metaroce" else ("n/a",)):
                label = LABEL[t] + (f", RCN {mode}" if t == "metaroce" else "")
                is_mode = lambda c, m=mode: c.split(";")[0] == f"rcn={m}"
                flows = [r for r in d.rows if r["transport"] == t and r["scenario"] == "rcn"
                         and r["metric"] == "MiBps" and is_mode(r["cond"])]
                if not flows:
                    why = d.missing(t, scenario="rcn") or "not measured"
                    rows.append([label, f"— ({why})", "", "", "", "", "", ""])
                    continue
                sums, jain = [], []
                for rep in sorted({r["rep"] for r in flows}):
                    x = [fnum(r["value"]) for r in flows if r["rep"] == rep and fnum(r["value"]) is not None]
                    x += [0.0] * (4 - len(x))  # a failed flow counts as starved
                    sums.append(sum(x))
                    jain.append(sum(x) ** 2 / (len(x) * sum(v * v for v in x)) if sum(x) > 0 else 0.0)
                g = lambda m: d.vals(transport=t, scenario="rcn", metric=m, cond=is_mode)
                kib = lambda m: fmt(med(g(m)) / 1024, 1) if g(m) else "n/a"
                rows.append([label, cell(sums), fmt(med(jain), 3), cell(g("link_MiBps")) or "n/a",
                             kib("queue_avg_bytes"), kib("queue_max_bytes"),
                             fmt(med(g("drops")), 0) if g("drops") else "n/a",
                             fmt(med(g("marked")), 0) if g("marked") else "n/a"])
        w(table(["transport", "flows (MiB/s)", "Jain", "link (MiB/s)", "queue avg (KiB)", "queue max (KiB)",
                 "drops (pkts)", "CE marked (pkts)"], rows))

    # Targets
    w("\n## Issue #5 targets\n\n")
    mr_ok = "metaroce" in ts and "metaroce" not in d.unavail
    tgt = []
    mr0, rx0 = lossless(d, "metaroce"), lossless(d, "rxe")

    def at_loss(t, L):
        v, _ = point(d, t, "loss", "ib_write_bw", 65536, 1, cond=f"loss={L:g}")
        return med(v) if v else None
    why_na = "MetaRoCE not available: " + d.unavail.get("metaroce", "not run") if not mr_ok else None
    def status(val, bar):
        if why_na:
            return why_na
        return "n/a" if val is None else ("met" if val >= bar else "missed")
    r = mr0 / rx0 if mr0 and rx0 else None
    tgt.append(["lossless ib_write_bw ≥ 2× rxe", fmt(r) + "×" if r else "n/a", status(r, 2)])
    for L, bar in ((1, 0.9), (10, 0.5)):
        m, x = at_loss("metaroce", L), at_loss("rxe", L)
        val = m / mr0 if m and mr0 else None
        rxs = f" (rxe keeps {100 * x / rx0:.0f}%)" if x is not None and rx0 else ""
        tgt.append([f"{L}% loss ≥ {int(bar * 100)}% of own lossless", (f"{100 * val:.0f}%" if val else "n/a") + rxs, status(val, bar)])
    sm = {p: v for p, v, *_ in scale_series.get("metaroce", [])}
    val = sm[4] / sm[1] if 1 in sm and 4 in sm else None
    tgt.append(["4 rate-limited planes ≥ 3.6× one plane", f"{val:.2f}×" if val else "n/a", status(val, 3.6)])
    st = fo.get("metaroce") or []
    # Every rep must have degraded gracefully, with no error and the down
    # really taking effect.
    rd = [s["rec_down"] for s in st]
    ok = (st and None not in rd and max(rd) <= 1 and not any(s["leak"] for s in st)
          and not d.errors(transport="metaroce", scenario="failover"))
    tgt.append(["plane down: no error, (P−1)/P within 1 s",
                (f"{max(x for x in rd if x is not None):.1f} s" if any(x is not None for x in rd) else "n/a")
                + ("" if None not in rd else f" ({rd.count(None)} of {len(rd)} reps never)"),
                why_na or ("met" if ok else "missed")])
    w(table(["target", "measured", "status"], tgt))

    coll_ts = coll_section(d, w)

    # Notes: skipped/failed points (the collectives' are in their section)
    notes = sorted({(r["transport"], r["scenario"], r["test"], r["note"]) for r in d.rows
                    if r["metric"] == "error" and r["transport"] != "metaroce" and r["scenario"] != "collectives"})
    w("\n## Failed or skipped points\n\n")
    if notes:
        for t, sc, test, n in notes:
            w(f"- {LABEL.get(t, t)} {sc} {test}: {n or 'no output'}\n")
    else:
        w("- none\n")
    for r in d.rows:
        if r["metric"] == "skipped":
            w(f"- {LABEL.get(r['transport'], r['transport'])} {r['scenario']}: {r['note']}\n")
    w("\nEvery sample is in `samples.csv` (columns: transport, scenario, test, size, qps, planes, cond, rep, metric, value, note); "
      "the raw tool outputs of the run are in the run directory's `raw/`.\n")
    w("\n## Plots\n\n![throughput vs loss](loss.png)\n\n![throughput vs planes](scaling.png)\n\n![plane failure](failover.png)\n")
    if coll_ts:
        w("\n![collectives](collectives.png)\n")

    with open(os.path.join(a.dir, "report.md"), "w") as f:
        f.write("".join(md))
    plots(a.dir, ts, d, loss_series, scale_series, fo, rate)
    if coll_ts:
        coll_plot(a.dir, d, coll_ts)


def plots(out, ts, d, loss_series, scale_series, fo, rate):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def unavailable_note(ax):
        miss = [f"{LABEL[t]}: not available" for t in ts if t in d.unavail]
        if miss:
            ax.text(0.01, 0.01, "\n".join(miss), transform=ax.transAxes, fontsize=8, va="bottom", color="dimgray")

    # Loss: absolute and share of own lossless.
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    xs_all = sorted({L for s in loss_series.values() for L, *_ in s})
    pos = {L: i for i, L in enumerate(xs_all)}
    for t, s in loss_series.items():
        x = [pos[L] for L, *_ in s]
        a1.errorbar(x, [m for _, m, *_ in s], yerr=[[m - lo for _, m, lo, _, _ in s], [hi - m for _, m, _, hi, _ in s]],
                    marker="o", capsize=3, label=LABEL[t], color=COLOR[t])
        a2.plot(x, [p for *_, p in s], marker="o", label=LABEL[t], color=COLOR[t])
    for ax in (a1, a2):
        ax.set_xticks(range(len(xs_all)), [f"{L:g}%" for L in xs_all])
        ax.set_xlabel("netem loss on every plane, both directions")
        ax.grid(alpha=0.3)
    a1.set_yscale("log")
    a1.set_ylabel("ib_write_bw 64 KiB, MiB/s (log)")
    a1.set_title("Throughput vs loss")
    a2.set_ylabel("% of own lossless")
    a2.set_ylim(0, 110)
    a2.set_title("Share of own lossless throughput")
    a1.legend()
    unavailable_note(a1)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "loss.png"), dpi=110)
    plt.close(fig)

    # Scaling.
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for t, s in scale_series.items():
        ax.errorbar([p for p, *_ in s], [m for _, m, *_ in s],
                    yerr=[[m - lo for _, m, lo, _ in s], [hi - m for _, m, _, hi in s]],
                    marker="o", capsize=3, label=LABEL[t], color=COLOR[t])
    if rate:
        ps = sorted({p for s in scale_series.values() for p, *_ in s}) or [1, 2, 4]
        ax.plot(ps, [p * rate[0] * 1000 / 8 / 1048576 for p in ps], "k--", lw=1, label="P × plane rate")
    ax.set_xlabel("planes (each tbf rate-limited)")
    ax.set_ylabel("MiB/s")
    ax.set_xticks(sorted({p for s in scale_series.values() for p, *_ in s}) or [1, 2, 4])
    ax.set_ylim(bottom=0)
    ax.set_title("Throughput vs plane count")
    ax.grid(alpha=0.3)
    ax.legend()
    unavailable_note(ax)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "scaling.png"), dpi=110)
    plt.close(fig)

    # Failover: one panel per transport (each has its own down/up times).
    shown = [t for t in ts if fo.get(t)]
    fig, axes = plt.subplots(max(1, len(shown)), 1, figsize=(9, 1.2 + 2.0 * max(1, len(shown))), sharex=True, squeeze=False)
    for ax, t in zip(axes[:, 0], shown):
        for i, s in enumerate(fo[t]):
            # 0.1 s samples are noisy in TCG: their 0.5 s mean.
            pts = [(x, window_rate(s["ser"], x - 0.5, x)) for x, _ in s["ser"] if x >= 0.5]
            pts = [(x, v) for x, v in pts if v is not None]
            ax.plot([x for x, _ in pts], [v for _, v in pts], color=COLOR[t], alpha=1 if i == 0 else 0.45,
                    label=f"rep {s['rep']}")
            if i == 0:  # how the first rep's traffic split over the planes
                for k, ser in s["per_plane"].items():
                    pts = [(x, window_rate(ser, x - 0.5, x)) for x, _ in ser if x >= 0.5]
                    ax.plot([x for x, v in pts if v is not None], [v for _, v in pts if v is not None],
                            lw=0.8, ls=("--", ":", "-.", (0, (1, 3)))[k % 4], color="gray", label=f"rep 1, plane {k}")
            ax.axvspan(s["down"], s["up"], color="orange", alpha=0.12 if i else 0.2,
                       label="plane down" if i == 0 else None)
        p = fo[t][0]["planes"]
        ax.set_title(f"{LABEL[t]}, {p} plane{'s' if p > 1 else ''}: its plane {p - 1} down, then up", fontsize=10)
        ax.set_ylabel("MiB/s")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    if not shown:
        axes[0, 0].text(0.5, 0.5, "no failover data", ha="center", transform=axes[0, 0].transAxes)
    axes[-1, 0].set_xlabel("seconds since the agent started (host series: 0.1 s samples, 0.5 s mean drawn)")
    unavailable_note(axes[-1, 0])
    fig.tight_layout()
    fig.savefig(os.path.join(out, "failover.png"), dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
