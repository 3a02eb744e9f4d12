#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The rig's host-side agent: link events and wire counters from outside the VMs.

Inside a TCG guest a spinning benchmark client owns the only vCPU, so a
guest-side sampler or a scheduled `ip link set down` runs seconds late. This
agent runs on the machine that hosts both VMs and does both from there:

- link events through each VM's QMP socket (`set_link`): the guest's NIC
  loses carrier, as when a cable is pulled, on the time the request asked;
- freezes: a VM's QEMU process stopped (SIGSTOP, its PID the QMP socket's
  peer) for a while and continued, as a loaded hypervisor does to a guest:
  its clock jumps when it runs again, and its peer hears nothing meanwhile;
- wire counters: bytes of each plane's QEMU UDP socket pair on loopback
  (nftables counters on the host), sampled every `interval_s`.

Requests are files the guest writes into the rig's shared output directory
(OUT/hostctl/NAME.req, JSON, renamed into place):

    {"duration_s": 32, "interval_s": 0.1,
     "events": [{"at_s": 10, "plane": 1, "up": false},
                {"at_s": 20, "plane": 1, "up": true},
                {"at_s": 25, "freeze": "A", "for_s": 3}]}

Time 0 is when the agent picks the request up. Each link event applies to
both hosts' ends of the plane (both NICs lose carrier); a freeze, to the VM
it names (its end is reported as an event of its own, "thaw"). The agent answers with
OUT/hostctl/NAME.json:

    {"ok": true, "t0_epoch": ..., "events": [{"at_s": 10.001, ...}],
     "samples": [[t_s, [a_to_b bytes per plane], [b_to_a bytes per plane]], ...]}

or {"ok": false, "error": "..."}; then NAME.done. Byte counts are
cumulative UDP payload+header bytes as the host's loopback saw them (the
guests' Ethernet frames plus IP/UDP of the host socket).

    hostctl.py --out DIR --base PORT --planes N [--qmp-dir D] [--parent PID]
                                                    serve until killed (or PID exits)
    hostctl.py --selftest                           check QMP and nftables here
"""

import argparse
import json
import os
import signal
import socket
import struct
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

    def peer_pid(self):
        """The PID of the QEMU process at the other end of the socket."""
        cred = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", cred)[0]

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
        except subprocess.TimeoutExpired:
            raise OSError(f"nft {' '.join(args)}: no answer in 10 s") from None
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
        try:
            subprocess.run(["nft", "delete", "table", "inet", self.table], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass


def plane_ports(base, plane):
    """(A's port, B's port) of plane `plane` (selftests/rig/run.sh's layout)."""
    return base + 2 * plane, base + 2 * plane + 1


def parse_request(req, planes):
    """(duration, interval, events) of a request, or ValueError saying why not."""
    if not isinstance(req, dict):
        raise ValueError("a request is a JSON object")
    duration = float(req.get("duration_s", 30))
    interval = max(0.05, float(req.get("interval_s", 0.1)))
    if not 0 < duration <= 600:
        raise ValueError(f"duration_s {duration} out of range (0, 600]")
    events = req.get("events", [])
    if not isinstance(events, list):
        raise ValueError("events is a list")
    for e in events:
        if isinstance(e, dict) and "freeze" in e:
            if e["freeze"] not in ("A", "B"):
                raise ValueError(f"event {e!r}: freeze names a VM, A or B")
            if not 0 < float(e.get("for_s", 0)) <= 60:
                raise ValueError(f"event {e!r}: for_s out of range (0, 60]")
        elif not isinstance(e, dict) or not isinstance(e.get("up"), bool):
            raise ValueError(f"event {e!r}: needs at_s, plane and up (true/false), or freeze and for_s")
        elif not 0 <= int(e["plane"]) < planes:
            raise ValueError(f"event plane {e['plane']} not in 0..{planes - 1}")
        if not 0 <= float(e["at_s"]) <= duration:
            raise ValueError(f"event at_s {e['at_s']} not in [0, duration_s]")
    return duration, interval, sorted(events, key=lambda e: float(e["at_s"]))


def serve_one(req, base, planes, qmp_paths):
    duration, interval, events = parse_request(req, planes)
    flows = [plane_ports(base, p) for p in range(planes)]
    flows += [(b, a) for a, b in flows[:planes]]
    qmps = {}
    down = set()  # planes this request took down and has not brought back
    frozen = {}  # VM -> PID of a QEMU this request stopped and has not continued
    ctr = Counters(f"metaroce_rig_{base}", flows)
    try:
        if events:
            for role, path in qmp_paths.items():
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
                if "freeze" in e or "thaw" in e:
                    vm = e.get("freeze") or e["thaw"]
                    if "freeze" in e:
                        frozen[vm] = qmps[vm].peer_pid()
                        os.kill(frozen[vm], signal.SIGSTOP)
                        thaw = {"at_s": float(e["at_s"]) + float(e["for_s"]), "thaw": vm}
                        pending = sorted(pending + [thaw], key=lambda e: float(e["at_s"]))
                    else:
                        os.kill(frozen.pop(vm), signal.SIGCONT)
                    done.append({"at_s": round(time.monotonic() - t0, 4), **{k: v for k, v in e.items() if k != "at_s"},
                                 "asked_s": float(e["at_s"])})
                    continue
                plane, up = int(e["plane"]), e["up"]
                if not up:
                    down.add(plane)
                for q in qmps.values():
                    q.execute("set_link", name=f"n{plane}", up=up)
                if up:
                    down.discard(plane)
                done.append({"at_s": round(time.monotonic() - t0, 4), "plane": plane, "up": up,
                             "asked_s": float(e["at_s"])})
            if now >= next_sample:
                # The read forks nft (milliseconds on a busy host): stamp
                # the sample at the middle of it.
                before = time.monotonic()
                b = ctr.read()
                samples.append([round((before + time.monotonic()) / 2 - t0, 4), b[:planes], b[planes:]])
                # Late (behind a set_link, or a slow read): the next one a
                # whole interval later, never a burst to catch up.
                next_sample = max(next_sample + interval, time.monotonic() - t0 + interval / 2)
            if now >= duration and not pending:
                break
            wake = min([next_sample] + [float(e["at_s"]) for e in pending[:1]])
            time.sleep(max(0.0, min(wake - (time.monotonic() - t0), POLL_S * 5)))
        return {"ok": True, "t0_epoch": t0_epoch, "interval_s": interval, "events": done, "samples": samples}
    finally:
        # Nor a VM stopped: first, so that nothing below keeps it waiting.
        for pid in frozen.values():
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError as err:
                print(f"hostctl: cannot continue QEMU {pid}: {err}", flush=True)
        # A plane must never stay down past its request: the guests cannot
        # bring a link back that QEMU holds down.
        for plane in sorted(down):
            for role, path in qmp_paths.items():
                try:
                    q = qmps.get(role) or Qmp(path)
                    q.execute("set_link", name=f"n{plane}", up=True)
                except OSError as err:
                    print(f"hostctl: cannot bring plane {plane} of {role} back up: {err}", flush=True)
        for q in qmps.values():
            q.close()
        ctr.delete()


def answer(d, name, res):
    tmp = os.path.join(d, name + ".json.tmp")
    with open(tmp, "w") as fh:
        json.dump(res, fh)
    os.rename(tmp, os.path.join(d, name + ".json"))
    open(os.path.join(d, name + ".done"), "w").close()


def serve(out, qmp_dir, base, planes, parent):
    d = os.path.join(out, "hostctl")
    os.makedirs(d, exist_ok=True)
    qmp_paths = {r: os.path.join(qmp_dir, f"qmp-{r}.sock") for r in ("A", "B")}
    while parent is None or os.getppid() == parent:
        for f in sorted(os.listdir(d)):
            if not f.endswith(".req"):
                continue
            name = f[:-4]
            path = os.path.join(d, f)
            # Every failure becomes an answer: the guest waits for one, and
            # the agent must live on for the next request.
            try:
                with open(path) as fh:
                    req = json.load(fh)
                os.unlink(path)
                res = serve_one(req, base, planes, qmp_paths)
            except Exception as e:  # noqa: BLE001 - see above
                res = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            try:
                if os.path.exists(path):
                    os.unlink(path)
                answer(d, name, res)
            except OSError as e:
                print(f"hostctl: {name}: cannot answer: {e}", flush=True)
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
            res = serve_one({"duration_s": 0.6, "interval_s": 0.1, "events": [
                {"at_s": 0.2, "plane": 1, "up": False}, {"at_s": 0.4, "plane": 1, "up": True}]},
                base, 2, {"A": qmp})
            if not res["ok"] or [e["up"] for e in res["events"]] != [False, True] or len(res["samples"]) < 5:
                print(f"not ok - a down/up request: {res}")
                return 1
            print(f"ok - a down/up request: 2 events, {len(res['samples'])} samples in 0.6 s")
            res = serve_one({"duration_s": 0.2, "events": [{"at_s": 0.1, "freeze": "A", "for_s": 0.3}]},
                            base, 2, {"A": qmp})
            kinds = [("freeze" in e, "thaw" in e) for e in res.get("events", [])]
            with open(f"/proc/{vm.pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
            if (not res["ok"] or kinds != [(True, False), (False, True)]
                    or res["events"][1]["at_s"] - res["events"][0]["at_s"] < 0.29 or state == "T"):
                print(f"not ok - a freeze request: {res}, QEMU state {state} after it")
                return 1
            print(f"ok - a freeze request stops QEMU for {res['events'][1]['at_s'] - res['events'][0]['at_s']:.2f} s "
                  "and continues it")
            for bad in ([], {"duration_s": 0}, {"events": [{"at_s": 99, "plane": 0, "up": False}]},
                        {"events": [{"at_s": 1, "plane": 2, "up": False}]},
                        {"events": [{"at_s": 1, "plane": 0, "up": "no"}]},
                        {"events": [{"at_s": 1, "freeze": "C", "for_s": 1}]},
                        {"events": [{"at_s": 1, "freeze": "A", "for_s": 99}]}):
                try:
                    parse_request(bad, 2)
                    print(f"not ok - request {bad} accepted")
                    return 1
                except (ValueError, KeyError, TypeError):
                    pass
            print("ok - malformed requests are refused")
            return 0
        finally:
            vm.kill()
            vm.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--qmp-dir", help="where the VMs' QMP sockets qmp-A.sock, qmp-B.sock are (default --out)")
    ap.add_argument("--parent", type=int, help="exit when this process (the rig) is gone")
    ap.add_argument("--base", type=int)
    ap.add_argument("--planes", type=int)
    ap.add_argument("--selftest", action="store_true")
    a = ap.parse_args()
    if a.selftest:
        return selftest()
    if not (a.out and a.base and a.planes):
        ap.error("--out, --base and --planes are required")
    # SIGTERM (the rig's exit trap) runs the cleanups: links up, nft table gone.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve(a.out, a.qmp_dir or a.out, a.base, a.planes, a.parent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
