#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Many RC QPs on one device (issue 11: 4,000 connections per device, at
most 16 KiB per idle connected QP). Host B (server) and host A (client)
each create N RC QPs on their device and connect them pairwise (QPNs and
GIDs exchanged over TCP); each end measures the kernel memory its N idle
connected QPs took; then every client QP does an RDMA WRITE and a SEND to
its peer QP, and every QP on both sides must complete its work.

Memory per idle connected QP: the growth of Slab + VmallocUsed
(/proc/meminfo) from before the QPs were created to after all are in
RTS, less the user-mapped rings (the vmalloc areas flagged "user" in
/proc/vmallocinfo: sized by the process, not by the driver), over N. It
includes the RDMA core's own objects for each QP (uverbs object,
`ib_qp`), not only the driver's (whose sizes design.md "Per-QP memory"
accounts for). The ring sizes are perftest's defaults for ib_write_bw
(send queue 128, one SGE; a small receive queue).

usage: many_qps.py server DEV GID_INDEX PORT N
       many_qps.py client DEV GID_INDEX PEER_ADDR PORT N [MAX_BYTES]"""

import re
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import GID
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR
from verbs_util import Link, connect_qp, fail, ok

SLOT = 64  # bytes of the region each QP writes
SEND_WR = 128  # perftest's default send queue depth
RECV_WR = 4


def meminfo():
    """Slab + VmallocUsed and the user-mapped vmalloc bytes, in bytes."""
    kb = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":")
            kb[k] = int(v.split()[0])
    user = 0
    with open("/proc/vmallocinfo") as f:
        for line in f:
            m = re.search(r"pages=(\d+)", line)
            if m and " user" in line:
                user += int(m.group(1)) * 4096
    return (kb["Slab"] + kb["VmallocUsed"]) * 1024, user


class Side:
    """N RC QPs on one CQ pair, one region they all reach."""

    def __init__(self, dev, gid_index, n):
        self.n = n
        self.ctx = Context(name=dev)
        self.pd = PD(self.ctx)
        self.gid_index = gid_index
        self.gid = str(self.ctx.query_gid(1, gid_index))
        depth = min(2 * n + 16, 16384)
        self.scq = CQ(self.ctx, depth)
        self.rcq = CQ(self.ctx, depth)
        access = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
        self.mr = MR(self.pd, SLOT * n, access)
        self.before = meminfo()
        cap = QPCap(max_send_wr=SEND_WR, max_recv_wr=RECV_WR, max_send_sge=1, max_recv_sge=1)
        attr = QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.scq, rcq=self.rcq, cap=cap)
        t = time.time()
        self.qps = [QP(self.pd, attr) for _ in range(n)]
        ok(f"{n} RC QPs created in {time.time() - t:.1f} s")

    def info(self):
        return {"qpns": [q.qp_num for q in self.qps], "gid": self.gid,
                "addr": self.mr.buf, "rkey": self.mr.rkey}

    def connect(self, peer):
        t = time.time()
        dgid = GID(peer["gid"])
        for q, qpn in zip(self.qps, peer["qpns"]):
            connect_qp(q, self.gid_index, qpn, dgid, e.IBV_ACCESS_REMOTE_WRITE, 1)
        ok(f"{self.n} QPs in RTS in {time.time() - t:.1f} s")

    def measure(self, who):
        """Memory per idle connected QP since the QPs were created."""
        total, user = meminfo()
        grew = total - self.before[0]
        rings = user - self.before[1]
        per_qp = (grew - rings) // self.n
        ok(f"{who}: {self.n} idle connected QPs took {grew // 1024} KiB "
           f"(Slab + VmallocUsed), of which {rings // 1024} KiB user-mapped rings: "
           f"{per_qp} B per QP without the rings, {grew // self.n} B with them")
        return per_qp

    def poll(self, cq, want, timeout, what):
        """`want` completions of `cq`, all successful; their QP numbers."""
        qpns = []
        end = time.time() + timeout
        while len(qpns) < want and time.time() < end:
            n, wcs = cq.poll(min(64, want - len(qpns)))
            for wc in wcs[:n]:
                if wc.status != e.IBV_WC_SUCCESS:
                    fail(f"{what}: QP {wc.qp_num:#x} completed with status {wc.status}")
                qpns.append(wc.qp_num)
            if not n:
                time.sleep(0.01)
        if len(qpns) < want:
            fail(f"{what}: {len(qpns)} of {want} completions within {timeout} s")
        return qpns


def server(dev, gid_index, port, n):
    s = Side(dev, gid_index, n)
    link = Link.accept(port, timeout=300)
    link.send(s.info())
    s.connect(link.recv())
    # Receives are posted once the QPs are past RESET (a RESET QP refuses
    # them with EINVAL, as in rxe), before the client is told to send.
    for i, q in enumerate(s.qps):
        q.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(s.mr.buf + i * SLOT, SLOT, s.mr.lkey)]))
    link.send({"connected": True})
    link.recv()  # the client is connected too
    s.measure("B")
    link.send({"measured": True})
    got = s.poll(s.rcq, n, 120 + n // 10, "B's receives")
    mine = {q.qp_num for q in s.qps}
    if set(got) != mine:
        fail(f"B: receives completed on {len(set(got) & mine)} of {n} QPs")
    ok(f"B: each of the {n} QPs received its SEND")
    # Every client QP wrote its index into its slot, then sent it.
    data = s.mr.read(SLOT * n, 0)
    bad = [i for i in range(n) if data[i * SLOT:i * SLOT + 8] != i.to_bytes(8, "little")]
    if bad:
        fail(f"B: {len(bad)} of {n} WRITEs missing, first at QP index {bad[0]}")
    ok(f"B: all {n} RDMA WRITEs landed")
    link.send({"done": True})
    link.close()


def client(dev, gid_index, peer, port, n, max_bytes):
    s = Side(dev, gid_index, n)
    for i in range(n):
        s.mr.write(i.to_bytes(8, "little") * (SLOT // 8), SLOT, i * SLOT)
    link = Link.dial(peer, port)
    p = link.recv()
    link.send(s.info())
    s.connect(p)
    link.recv()  # the server is connected
    link.send({"connected": True})
    per_qp = s.measure("A")
    link.recv()  # the server has measured: traffic may start
    t = time.time()
    for i, q in enumerate(s.qps):
        sge = SGE(s.mr.buf + i * SLOT, SLOT, s.mr.lkey)
        wr = SendWR(wr_id=2 * i, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[sge],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(p["rkey"], p["addr"] + i * SLOT)
        q.post_send(wr)
        sge = SGE(s.mr.buf + i * SLOT, 8, s.mr.lkey)
        q.post_send(SendWR(wr_id=2 * i + 1, opcode=e.IBV_WR_SEND, num_sge=1, sg=[sge],
                           send_flags=e.IBV_SEND_SIGNALED))
    got = s.poll(s.scq, 2 * n, 120 + n // 10, "A's sends")
    counts = {}
    for qpn in got:
        counts[qpn] = counts.get(qpn, 0) + 1
    short = [q.qp_num for q in s.qps if counts.get(q.qp_num) != 2]
    if short:
        fail(f"A: {len(short)} QPs did not complete both requests, first {short[0]:#x}")
    ok(f"A: all {n} QPs completed a WRITE and a SEND in {time.time() - t:.1f} s")
    link.recv()  # the server checked its side
    link.close()
    if per_qp > max_bytes:
        fail(f"A: {per_qp} B per idle connected QP, over {max_bytes} B")
    ok(f"A: {per_qp} B per idle connected QP, within {max_bytes} B")


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        max_b = int(sys.argv[7]) if len(sys.argv) > 7 else 16384
        client(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), max_b)
