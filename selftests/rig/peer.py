#!/usr/bin/python3
"""The rig's command channel between the two hosts.

Host B runs `peer.py serve ADDR PORT`; tests on host A run commands on B
with `peer.py run -- CMD` (exit status and output come back), or start
one in the background with `spawn` and collect it later with `wait`.
The channel is a TCP connection over the rig's management link, which
is separate from the planes under test. One JSON object per line.
"""
import argparse
import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time

DEFAULT_ADDR = os.environ.get("METAROCE_PEER_ADDR", "198.19.0.2")
DEFAULT_PORT = int(os.environ.get("METAROCE_PEER_PORT", "7000"))

jobs = {}
jobs_lock = threading.Lock()
next_job = [1]


def finish(proc, timeout):
    """Wait for proc; kill it (and report rc 124, as timeout(1)) on timeout."""
    try:
        out, _ = proc.communicate(timeout=timeout)
        return {"rc": proc.returncode, "out": out}
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        return {"rc": 124, "out": out + f"\npeer: timed out after {timeout} s\n"}


def start(cmd):
    return subprocess.Popen(["/bin/bash", "-c", cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            errors="replace", start_new_session=True)


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        line = self.rfile.readline()
        try:
            req = json.loads(line)
            op = req["op"]
        except (ValueError, KeyError, TypeError) as e:
            return self.reply({"rc": 2, "out": f"peer: bad request: {e}\n"})
        timeout = float(req.get("timeout", 300))
        if op == "ping":
            self.reply({"rc": 0, "out": ""})
        elif op == "run":
            self.reply(finish(start(req["cmd"]), timeout))
        elif op == "spawn":
            with jobs_lock:
                job = next_job[0]
                next_job[0] += 1
                jobs[job] = start(req["cmd"])
            self.reply({"rc": 0, "out": f"{job}\n"})
        elif op == "wait":
            with jobs_lock:
                proc = jobs.pop(int(req["id"]), None)
            if proc is None:
                self.reply({"rc": 2, "out": f"peer: no job {req['id']}\n"})
            else:
                self.reply(finish(proc, timeout))
        elif op == "poll":
            # As wait, but a job still running after the timeout is left
            # running (rc 124): the caller may look at it, then wait.
            with jobs_lock:
                proc = jobs.get(int(req["id"]))
            if proc is None:
                self.reply({"rc": 2, "out": f"peer: no job {req['id']}\n"})
                return
            try:
                # Retrying communicate after its timeout loses no output.
                out, _ = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.reply({"rc": 124, "out": f"peer: job {req['id']} still running\n"})
                return
            with jobs_lock:
                jobs.pop(int(req["id"]), None)
            self.reply({"rc": proc.returncode, "out": out})
        elif op == "shutdown":
            self.reply({"rc": 0, "out": ""})
            threading.Thread(target=self.server.shutdown).start()
        else:
            self.reply({"rc": 2, "out": f"peer: unknown op {op}\n"})

    def reply(self, obj):
        self.wfile.write((json.dumps(obj) + "\n").encode())


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def request(obj, addr, port, timeout):
    with socket.create_connection((addr, port), timeout=10) as s:
        s.settimeout(timeout + 30)
        s.sendall((json.dumps(obj) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("peer closed the connection")
            data += chunk
    return json.loads(data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--addr", default=DEFAULT_ADDR)
    ap.add_argument("--port", type=int, default=DEFAULT_PORT)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("op", choices=["serve", "ping", "run", "spawn", "wait", "poll", "shutdown"])
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    args = a.args[1:] if a.args[:1] == ["--"] else a.args

    if a.op == "serve":
        with Server((a.addr, a.port), Handler) as srv:
            srv.serve_forever()
        return 0
    if a.op == "ping":
        deadline = time.monotonic() + a.timeout
        while True:
            try:
                return request({"op": "ping"}, a.addr, a.port, 10)["rc"]
            except OSError:
                if time.monotonic() > deadline:
                    print(f"peer: {a.addr}:{a.port} unreachable", file=sys.stderr)
                    return 1
                time.sleep(0.5)
    req = {"op": a.op, "timeout": a.timeout}
    if a.op in ("run", "spawn"):
        req["cmd"] = " ".join(args)
    elif a.op in ("wait", "poll"):
        req["id"] = args[0]
    resp = request(req, a.addr, a.port, a.timeout)
    sys.stdout.write(resp["out"])
    sys.stdout.flush()
    return resp["rc"]


if __name__ == "__main__":
    sys.exit(main())
