#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The rig's host-side agent: link events and wire counters from outside the VMs.

Inside a TCG guest a spinning benchmark client owns the only vCPU, so a
guest-side sampler or a scheduled `ip link set down` runs seconds late. This
agent runs on the machine that hosts both VMs and does both from there:

- link events through each VM's QMP socket (`set_link`): the guest's NIC
  loses carrier, as when a cable is pulled, on the time the request asked;
- wire counters: bytes of each plane's QEMU UDP socket pair on loopback
  (nftables counters on the host), sampled every `interval_s`.

Requests are files the guest writes into the rig's shared output directory
(OUT/hostctl/NAME.req, JSON, renamed into place):

    {"duration_s": 32, "interval_s": 0.1,
     "events": [{"at_s": 10, "plane": 1, "up": false},
                {"at_s": 20, "plane": 1, "up": true}]}

Time 0 is when the agent picks the request up. Each event applies to both
hosts' ends of the plane (both NICs lose carrier). The agent answers with
OUT/hostctl/NAME.json:

    {"ok": true, "t0_epoch": ..., "events": [{"at_s": 10.001, ...}],
     "samples": [[t_s, [a_to_b bytes per plane], [b_to_a bytes per plane]], ...]}

or {"ok": false, "error": "..."}; then NAME.done. Byte counts are
cumulative UDP payload+header bytes as the host's loopback saw them (the
guests' Ethernet frames plus IP/UDP of the host socket).

    hostctl.py --out DIR --base PORT --planes N     serve until killed
    hostctl.py --selftest                           check QMP and nftables here
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

POLL_S = 0.02


class Qmp:
    """A minimal QMP client over a unix socket (one command at a time)."""

    def __init__(self, path, timeout=5.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""
        self._line()  # greeting
        self.execute("qmp_capabilities")

    def _line(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise OSError("QMP socket closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def execute(self, cmd, **args):
        msg = {"execute": cmd}
        if args:
            msg["arguments"] = args
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            reply = self._line()
            if "event" in reply:
                continue
            if "error" in reply:
                raise OSError(f"QMP {cmd}: {reply['error'].get('desc', reply['error'])}")
            return reply.get("return")

    def close(self):
        self.sock.close()


class Counters:
    """nftables byte counters for UDP flows on the host's loopback."""

    def __init__(self, table, flows):
        # flows: list of (sport, dport); counter i counts flow i.
        self.table = table
        self.flows = flows
        self.delete()
        rules = [f"add table inet {table}",
                 f"add chain inet {table} out {{ type filter hook output priority 0; policy accept; }}"]
        for i, (sp, dp) in enumerate(flows):
            rules.append(f"add counter inet {table} f{i}")
            rules.append(f"add rule inet {table} out udp sport {sp} udp dport {dp} counter name f{i}")
        self._nft("-f", "-", stdin="\n".join(rules) + "\n")

    @staticmethod
    def _nft(*args, stdin=None):
        try:
            p = subprocess.run(["nft", *args], input=stdin, capture_output=True, text=True, timeout=10)
        except FileNotFoundError:
            raise OSError("nft not found (apt install nftables; selftests/rig/deps.sh does)") from None
        if p.returncode:
            raise OSError(f"nft {' '.join(args)}: {p.stderr.strip()}")
        return p.stdout

    def read(self):
        out = json.loads(self._nft("-j", "list", "counters", "table", "inet", self.table))
        by_name = {}
        for item in out.get("nftables", []):
            c = item.get("counter")
            if c:
                by_name[c["name"]] = c["bytes"]
        return [by_name.get(f"f{i}", 0) for i in range(len(self.flows))]

    def delete(self):
        subprocess.run(["nft", "delete", "table", "inet", self.table], capture_output=True)


def plane_ports(base, plane):
    """(A's port, B's port) of plane `plane` (selftests/rig/run.sh's layout)."""
    return base + 2 * plane, base + 2 * plane + 1


def serve_one(req, out, base, planes, qmp_paths):
    duration = float(req.get("duration_s", 30))
    interval = max(0.05, float(req.get("interval_s", 0.1)))
    events = sorted(req.get("events", []), key=lambda e: float(e["at_s"]))
    if not 0 < duration <= 600:
        raise ValueError(f"duration_s {duration} out of range (0, 600]")
    for e in events:
        if not 0 <= int(e["plane"]) < planes:
            raise ValueError(f"event plane {e['plane']} not in 0..{planes - 1}")
    flows = [plane_ports(base, p) for p in range(planes)]
    flows += [(b, a) for a, b in flows[:planes]]
    ctr = Counters(f"metaroce_rig_{base}", flows)
    qmps = {}
    try:
        for role, path in qmp_paths.items():
            if events:
                qmps[role] = Qmp(path)
        t0 = time.monotonic()
        t0_epoch = time.time()
        samples, done = [], []
        pending = list(events)
        next_sample = 0.0
        while True:
            now = time.monotonic() - t0
            while pending and float(pending[0]["at_s"]) <= now:
                e = pending.pop(0)
                for role, q in qmps.items():
                    q.execute("set_link", name=f"n{int(e['plane'])}", up=bool(e["up"]))
                done.append({"at_s": round(time.monotonic() - t0, 4), "plane": int(e["plane"]),
                             "up": bool(e["up"]), "asked_s": float(e["at_s"])})
            if now >= next_sample:
                b = ctr.read()
                samples.append([round(time.monotonic() - t0, 4), b[:planes], b[planes:]])
                next_sample += interval
                if next_sample < now:  # fell behind: skip, never burst
                    next_sample = now + interval
            if now >= duration and not pending:
                break
            wake = min([next_sample] + [float(e["at_s"]) for e in pending[:1]])
            time.sleep(max(0.0, min(wake - (time.monotonic() - t0), POLL_S * 5)))
        return {"ok": True, "t0_epoch": t0_epoch, "interval_s": interval, "events": done, "samples": samples}
    finally:
        for q in qmps.values():
            q.close()
        ctr.delete()


def serve(out, base, planes):
    d = os.path.join(out, "hostctl")
    os.makedirs(d, exist_ok=True)
    qmp_paths = {r: os.path.join(out, f"qmp-{r}.sock") for r in ("A", "B")}
    while True:
        for f in sorted(os.listdir(d)):
            if not f.endswith(".req"):
                continue
            name = f[:-4]
            path = os.path.join(d, f)
            try:
                with open(path) as fh:
                    req = json.load(fh)
                res = serve_one(req, out, base, planes, qmp_paths)
            except (OSError, ValueError, KeyError, TypeError) as e:
                res = {"ok": False, "error": str(e)}
            os.unlink(path)
            tmp = os.path.join(d, name + ".json.tmp")
            with open(tmp, "w") as fh:
                json.dump(res, fh)
            os.rename(tmp, os.path.join(d, name + ".json"))
            open(os.path.join(d, name + ".done"), "w").close()
            print(f"hostctl: {name}: {'ok' if res['ok'] else res['error']}", flush=True)
        time.sleep(POLL_S)


def selftest():
    """QEMU with two socket netdevs and a QMP socket, no guest: the counters
    count the UDP bytes we send, set_link knows the rig's netdev names."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        base = 41000 + os.getpid() % 1000 * 4
        qmp = os.path.join(tmp, "qmp-A.sock")
        args = ["qemu-system-x86_64", "-nodefaults", "-display", "none", "-machine", "none", "-S",
                "-qmp", f"unix:{qmp},server=on,wait=off"]
        for p in range(2):
            a, b = plane_ports(base, p)
            args += ["-netdev", f"socket,id=n{p},udp=127.0.0.1:{b},localaddr=127.0.0.1:{a}"]
        vm = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            for _ in range(100):
                if os.path.exists(qmp):
                    break
                time.sleep(0.05)
            # QEMU holds A's end of plane 1: send from B's end towards it and
            # count that direction (B -> A), 10 datagrams of known size.
            a1, b1 = plane_ports(base, 1)
            tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            tx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            tx.bind(("127.0.0.1", b1))
            ctr = Counters(f"metaroce_rig_selftest_{base}", [plane_ports(base, 1), (b1, a1)])
            try:
                before = ctr.read()
                for _ in range(10):
                    tx.sendto(b"x" * 100, ("127.0.0.1", a1))
                after = ctr.read()
            finally:
                ctr.delete()
                tx.close()
            got = after[1] - before[1]
            if got != 10 * 128:  # 100 B payload + 8 UDP + 20 IP
                print(f"not ok - counters: {got} bytes for 10 x 128 B datagrams")
                return 1
            print("ok - nftables counts a plane's loopback UDP bytes")
            q = Qmp(qmp)
            q.execute("set_link", name="n1", up=False)
            q.execute("set_link", name="n1", up=True)
            try:
                q.execute("set_link", name="n9", up=False)
                print("not ok - QMP set_link accepted a netdev that does not exist")
                return 1
            except OSError:
                pass
            q.close()
            # That the guest's NIC then loses carrier and the plane's bytes stop is
            # checked where a guest exists: the failover benchmark fails a run whose
            # downed plane still carried bytes.
            print("ok - QMP set_link takes a plane's netdev down and up by name")
            return 0
        finally:
            vm.kill()
            vm.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--base", type=int)
    ap.add_argument("--planes", type=int)
    ap.add_argument("--selftest", action="store_true")
    a = ap.parse_args()
    if a.selftest:
        return selftest()
    if not (a.out and a.base and a.planes):
        ap.error("--out, --base and --planes are required")
    serve(a.out, a.base, a.planes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
