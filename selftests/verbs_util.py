# SPDX-License-Identifier: GPL-2.0
"""What the pyverbs selftests share: TAP-style messages, the JSON line
channel between host A and host B, connecting a QP through INIT, RTR and
RTS, waiting for one completion, and dropping chosen MetaRoCE packets on
this host's way out."""

import json
import os
import re
import socket
import subprocess
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.qp import QPAttr


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def ok(msg):
    print(f"ok: {msg}", flush=True)


class Link:
    """One JSON object per line over a TCP connection."""

    def __init__(self, sock):
        self.sock = sock
        self.f = sock.makefile("rw")

    def send(self, obj):
        self.f.write(json.dumps(obj) + "\n")
        self.f.flush()

    def recv(self):
        line = self.f.readline()
        if not line:
            fail("peer closed the connection")
        return json.loads(line)

    @classmethod
    def accept(cls, port, timeout=120):
        """The server's end: waits up to `timeout` s for one client on `port`."""
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind(("", port))
        lsock.listen(1)
        lsock.settimeout(timeout)
        conn, _ = lsock.accept()
        lsock.close()
        return cls(conn)

    @classmethod
    def dial(cls, host, port, timeout=120):
        """The client's end: retries for ~20 s while the server starts."""
        for _ in range(100):
            try:
                return cls(socket.create_connection((host, port), timeout=timeout))
            except OSError:
                time.sleep(0.2)
        fail(f"cannot connect to {host}:{port}")

    def close(self):
        self.f.close()
        self.sock.close()


def _attr(state):
    a = QPAttr()
    a.qp_state = state
    return a


def connect_qp(qp, gid_index, dest_qpn, dgid, access, rd_atomic=None):
    """Moves `qp` to RTS towards `dest_qpn` at `dgid` (port 1, PSNs 0, MTU
    1024). `rd_atomic` set: an RC QP with that many READs/atomics each way
    and RC's timers; None: UC, whose transitions take none of them."""
    a = _attr(e.IBV_QPS_INIT)
    a.pkey_index = 0
    a.port_num = 1
    a.qp_access_flags = access
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
    a = _attr(e.IBV_QPS_RTR)
    a.path_mtu = e.IBV_MTU_1024
    a.dest_qp_num = dest_qpn
    a.rq_psn = 0
    gr = GlobalRoute(dgid=dgid, sgid_index=gid_index, hop_limit=64)
    a.ah_attr = AHAttr(is_global=1, port_num=1, gr=gr)
    mask = e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN
    if rd_atomic is not None:
        a.max_dest_rd_atomic = rd_atomic
        a.min_rnr_timer = 12
        mask |= e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER
    qp.modify(a, mask)
    a = _attr(e.IBV_QPS_RTS)
    a.sq_psn = 0
    mask = e.IBV_QP_STATE | e.IBV_QP_SQ_PSN
    if rd_atomic is not None:
        a.timeout = 14
        a.retry_cnt = 7
        a.rnr_retry = 7
        a.max_rd_atomic = rd_atomic
        mask |= e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY | e.IBV_QP_MAX_QP_RD_ATOMIC
    qp.modify(a, mask)


def qp_state(qp):
    attr, _ = qp.query(e.IBV_QP_STATE)
    return attr.qp_state


def poll_one(cq, what, timeout, interval=0.01):
    """The next completion of `cq`, or FAIL after `timeout` seconds."""
    end = time.time() + timeout
    while time.time() < end:
        n, wcs = cq.poll()
        if n:
            return wcs[0]
        time.sleep(interval)
    fail(f"{what}: no completion within {timeout:.0f} s")


# Offsets in an IPv4 packet without options (20 IP + 8 UDP bytes) of the
# MetaRoCE fields the drop filters look at (Documentation/protocol.md 1).
AT_OPCODE = 28 + 1
AT_DATA_OFFSET = 28 + 20


def packet_payloads(path_mtu_bytes):
    """The payload sizes a message's packets may have on this host's
    planes (IPv4): the path MTU, and the wider payload both ends agree
    when the path MTU is the largest the port offers (protocol.md 1.8):
    the smallest plane MTU minus IP, UDP, data header and ICRC, at most
    9216. Which one a message gets depends on whether the PLANES exchange
    was done when it was posted."""
    mtus = []
    for d in (os.environ.get("PLANE0_DEV"), os.environ.get("PLANE1_DEV")):
        if d:
            with open(f"/sys/class/net/{d}/mtu") as f:
                mtus.append(int(f.read()))
    sizes = {path_mtu_bytes}
    if mtus:
        sizes.add(min(min(mtus) - 20 - 8 - 56 - 4, 9216))
    return sorted(sizes)


class TcDrop:
    """Drops this host's outgoing MetaRoCE packets that match every
    (size, value, at) of `matches` (size "u8" or "u32", `at` an offset in
    the IP packet), or of any of `more` (further such lists: one filter
    each), on its plane netdevs (PLANE0_DEV, PLANE1_DEV from the rig's
    environment), until `remove`."""

    def __init__(self, matches, *more):
        self.devs = [d for d in (os.environ.get("PLANE0_DEV"), os.environ.get("PLANE1_DEV")) if d]
        if not self.devs:
            fail("no PLANE0_DEV in the environment: cannot install a drop filter")
        rules = []
        for m in (matches, *more):
            rule = []
            for size, value, at in m:
                rule += ["match", size, hex(value), "0xff" if size == "u8" else "0xffffffff", "at", str(at)]
            rules.append(rule)
        for d in self.devs:
            self._tc("qdisc", "add", "dev", d, "root", "handle", "1:", "prio")
            for rule in rules:
                self._tc("filter", "add", "dev", d, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                         "match", "ip", "protocol", "17", "0xff", *rule, "action", "drop")
        self.dropped = None

    @staticmethod
    def _tc(*args, check=True):
        r = subprocess.run(["tc", *args], capture_output=True, text=True)
        if check and r.returncode != 0:
            fail(f"tc {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def remove(self):
        """Removes the filters (once); returns how many packets they dropped."""
        if self.dropped is None:
            self.dropped = 0
            for d in self.devs:
                out = self._tc("-s", "filter", "show", "dev", d, "parent", "1:", check=False)
                self.dropped += sum(int(n) for n in re.findall(r"Sent \d+ bytes (\d+) pkt", out))
                self._tc("qdisc", "del", "dev", d, "root", check=False)
        return self.dropped
