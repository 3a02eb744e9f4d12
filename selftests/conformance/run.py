#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Runs the MetaRoCE conformance suite against an implementation (the DUT)
and prints one TAP line per clause of clauses.py.

  run.py --dut IP --agent HOST:PORT [--src IP] [--third IP] [--only T,..]

The tester owns UDP port 4792 on --src (its host must not run a MetaRoCE
implementation of its own on that address) and plays the peer of RC QPs
that agent.py, on the DUT's host, creates and connects to it. --third is a
second address of the tester's host on the same network (the not-peer
tests); without it they are skipped. Exit status 0 when no clause failed.
"""

import argparse
import random
import socket
import sys
import time
import traceback

import clauses
import tests
from peer import Agent, Unsupported, Wire


def clause_keys():
    """For each check key (a clause id or a test name), the clause ids."""
    keys = {c.cid: [c.cid] for c in clauses.CLAUSES}
    for c in clauses.CLAUSES:
        for t in c.tests:
            keys.setdefault(t, []).append(c.cid)
    return keys


def run(a, out=print):
    rnd = random.Random(a.seed)
    wire = Wire(a.src, a.dut, a.port, extra=(a.third,) if a.third else ())
    host, port = a.agent.rsplit(":", 1)
    agent = Agent(host, int(port))
    hello = agent.call("hello")
    out(f"# DUT {a.dut}: {hello.get('device', '?')}; tester {a.src}:{a.port}; seed {a.seed}")
    keys = clause_keys()
    results = {c.cid: [] for c in clauses.CLAUSES}   # (ok, test, detail)
    ran = {}                                          # clause id -> "ran" | "skip: why"
    selected = tests.by_name(a.only.split(",")) if a.only else list(tests.TESTS)
    if a.skip:
        drop = set(a.skip.split(","))
        selected = [(fn, ns) for fn, ns in selected if fn.__name__ not in drop]
    for fn, names in selected:
        mine = sorted({cid for n in names for cid in keys.get(n, [])})
        ctx = tests.Ctx(wire, agent, a.mtu, a.timeout, a.quiet, rnd, a.third,
                        log=lambda m: out(f"#   {m}"), hello=hello)
        out(f"# test {fn.__name__} ({', '.join(mine)})")
        begin = time.monotonic()
        status = "ran"
        try:
            fn(ctx)
        except (tests.Skip, Unsupported) as e:
            status = f"skip: {e}"
            out(f"#   SKIP {e}")
        except Exception as e:  # a broken exchange fails the test's clauses
            ctx.checks.append((fn.__name__, False, f"{type(e).__name__}: {e}"))
            out("#   " + traceback.format_exc().replace("\n", "\n#   "))
        finally:
            ctx.close()
        out(f"#   {fn.__name__}: {time.monotonic() - begin:.1f} s")
        for cid in mine:
            if status == "ran" or cid not in ran:
                ran[cid] = status
        if status == "ran":
            checked = set()
            for key, ok, detail in ctx.checks:
                for cid in keys.get(key, []):
                    if cid in mine or key == cid:
                        results[cid].append((ok, fn.__name__, detail))
                        checked.add(cid)
            for cid in set(mine) - checked:
                results[cid].append((False, fn.__name__, "the test ended without checking this clause"))
    agent.close()
    wire.close()
    return report(results, ran, out)


def report(results, ran, out=print):
    out("TAP version 13")
    out(f"1..{len(clauses.CLAUSES)}")
    failed = []
    for i, c in enumerate(clauses.CLAUSES, 1):
        name = f"{c.cid} {c.rule}"
        if c.unseen:
            out(f"ok {i} - {name} # SKIP not observable: {c.unseen}")
            continue
        res = results[c.cid]
        if not res:
            why = ran.get(c.cid, "not run")
            out(f"ok {i} - {name} # SKIP {why}")
            continue
        bad = [r for r in res if not r[0]]
        if bad:
            failed.append(c.cid)
            out(f"not ok {i} - {name}")
            for _, t, detail in bad[:5]:
                out(f"#   {t}: {detail}")
        else:
            out(f"ok {i} - {name} # {len(res)} checks by {', '.join(sorted({r[1] for r in res}))}")
    out(f"# conformance: {len(clauses.CLAUSES)} clauses, {len(failed)} failed"
        + (f": {' '.join(failed)}" if failed else ""))
    return failed


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dut", required=True, help="the DUT's address (its plane-0 IPv4 address)")
    ap.add_argument("--agent", required=True, help="HOST:PORT of agent.py on the DUT's host")
    ap.add_argument("--src", help="the tester's address towards the DUT (default: the route's)")
    ap.add_argument("--third", help="another address of the tester's host, for the not-peer tests")
    ap.add_argument("--port", type=int, default=4792, help="MetaRoCE UDP port (4792; tests may change it)")
    ap.add_argument("--mtu", type=int, default=1024, help="payload MTU M of the QPs (path MTU)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for an expected answer")
    ap.add_argument("--quiet", type=float, default=1.5, help="seconds of silence that mean 'no answer'")
    ap.add_argument("--only", help="comma-separated tests (or clause-table test names) to run")
    ap.add_argument("--skip", help="comma-separated tests not to run")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    a = ap.parse_args(argv)
    if not a.src:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect((a.dut, a.port))
        a.src = s.getsockname()[0]
        s.close()
    return a


if __name__ == "__main__":
    sys.exit(1 if run(parse()) else 0)
