#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The conformance suite's agent on the DUT's host: it opens the RDMA
device under test with pyverbs and does, on the tester's command, what an
application would: RC QPs connected to the tester's address and QPN,
receives and sends posted, completions and buffer contents reported. It
never touches the wire itself, so it works the same over our kernel module
and over a vendor NIC (any verbs device with RoCE v2-style GIDs).

  agent.py --dev mr0 --addr DUT_IP [--port 18700] [--listen ADDR] [--once]

--addr is the device's address the tester talks to (its GID ::ffff:IP
picks the source GID index). The tester connects over TCP and sends one
JSON object per line, {"op": NAME, ...}; each gets {"ok": true, ...} or
{"ok": false, "error": ...}. Operations:

  hello                       device, byte order, sends: true
  create_qp  peer_qpn peer_addr peer_psn mtu buf_len
                              an RC QP, a zeroed region of buf_len bytes
                              (local write, remote read/write/atomic), moved
                              INIT -> RTR (dest = the tester, rq_psn =
                              peer_psn) -> RTS (sq_psn random, 24 bits);
                              answers qp (an id), qpn, psn, rkey, addr
  create_ud  qkey buf_len      a UD QP (RTS) with its region; qp, qpn
  post_recv  qp wr_id offset len      a receive into the region
  post_send  qp opcode wr_id offset len remote_addr rkey [imm add compare swap]
                              opcode: send send_imm write write_imm read
                              fetch_add cmp_swap; signaled
  poll       qp cq(send|recv) timeout max   up to max completions
  read_mem / write_mem  qp offset (len | hex)
  qp_state   qp               the QP's state (ibv_qp_state)
  destroy_qp qp
  bye                         (with --once the agent then exits)
"""

import argparse
import json
import os
import random
import socket
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

MTUS = {256: e.IBV_MTU_256, 512: e.IBV_MTU_512, 1024: e.IBV_MTU_1024, 2048: e.IBV_MTU_2048,
        4096: e.IBV_MTU_4096}
ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
          | e.IBV_ACCESS_REMOTE_ATOMIC)
RD_ATOMIC = 16
SEND_OPS = {
    "send": e.IBV_WR_SEND, "send_imm": e.IBV_WR_SEND_WITH_IMM, "write": e.IBV_WR_RDMA_WRITE,
    "write_imm": e.IBV_WR_RDMA_WRITE_WITH_IMM, "read": e.IBV_WR_RDMA_READ,
    "fetch_add": e.IBV_WR_ATOMIC_FETCH_AND_ADD, "cmp_swap": e.IBV_WR_ATOMIC_CMP_AND_SWP,
}


def gid_of(ip):
    """The RoCE v2 GID of an IPv4 address, in pyverbs' notation."""
    b = bytes(10) + b"\xff\xff" + socket.inet_aton(ip)
    return ":".join(b[i:i + 2].hex() for i in range(0, 16, 2))


def gid_index(ctx, dev, ip):
    """The index of `ip`'s RoCE v2 GID on port 1 (sysfs gives the type)."""
    want = gid_of(ip)
    base = f"/sys/class/infiniband/{dev}/ports/1"
    for i in range(ctx.query_port(1).gid_tbl_len):
        try:
            if str(ctx.query_gid(1, i)) != want:
                continue
        except Exception:  # an empty slot
            continue
        try:
            with open(f"{base}/gid_attrs/types/{i}") as f:
                if "v2" not in f.read():
                    continue
        except OSError:
            pass  # no type in sysfs: take the address match
        return i
    raise RuntimeError(f"no RoCE v2 GID for {ip} on {dev}")


def state_attr(state):
    a = QPAttr()
    a.qp_state = state
    return a


class Conn:
    """One RC QP with its CQs and region."""

    def __init__(self, agent, r):
        ctx, pd = agent.ctx, agent.pd
        self.len = r.get("buf_len", 1 << 16)
        self.mr = MR(pd, self.len, ACCESS)
        self.mr.write(bytes(self.len), self.len, 0)
        self.scq, self.rcq = CQ(ctx, 256), CQ(ctx, 256)
        cap = QPCap(max_send_wr=64, max_recv_wr=64, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.scq, rcq=self.rcq, cap=cap))
        self.psn = random.randrange(1 << 24)
        a = state_attr(e.IBV_QPS_INIT)
        a.pkey_index, a.port_num, a.qp_access_flags = 0, 1, ACCESS
        self.qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
        a = state_attr(e.IBV_QPS_RTR)
        a.path_mtu = MTUS[r["mtu"]]
        a.dest_qp_num = r["peer_qpn"]
        a.rq_psn = r["peer_psn"]
        a.max_dest_rd_atomic = RD_ATOMIC
        a.min_rnr_timer = 12
        gr = GlobalRoute(dgid=GID(gid_of(r["peer_addr"])), sgid_index=agent.gid_index, hop_limit=64)
        a.ah_attr = AHAttr(is_global=1, port_num=1, gr=gr)
        self.qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN
                       | e.IBV_QP_RQ_PSN | e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
        a = state_attr(e.IBV_QPS_RTS)
        a.sq_psn = self.psn
        # RC's timers: 4.096 us * 2^14 * 8 retries, about 0.5 s (the
        # reference driver's retry budget is then its 5 s floor, 4.3).
        a.timeout, a.retry_cnt, a.rnr_retry, a.max_rd_atomic = 14, 7, 7, RD_ATOMIC
        self.qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT
                       | e.IBV_QP_RNR_RETRY | e.IBV_QP_MAX_QP_RD_ATOMIC)

    def sge(self, offset, n):
        if offset < 0 or offset + n > self.len:
            raise ValueError(f"[{offset}, {offset + n}) is outside the {self.len}-byte region")
        return SGE(self.mr.buf + offset, n, self.mr.lkey)

    def post_send(self, r):
        op = SEND_OPS[r["opcode"]]
        n = r.get("len", 0)
        atomic = r["opcode"] in ("fetch_add", "cmp_swap")
        # pyverbs wants one SGE even for an empty message (length 0).
        sg = [self.sge(r.get("offset", 0), 8 if atomic else n)]
        kw = {"imm_data": socket.htonl(r.get("imm", 0))} if r["opcode"].endswith("_imm") else {}
        wr = SendWR(wr_id=r["wr_id"], opcode=op, num_sge=1, sg=sg, send_flags=e.IBV_SEND_SIGNALED, **kw)
        if r["opcode"] in ("write", "write_imm", "read"):
            wr.set_wr_rdma(rkey=r["rkey"], addr=r["remote_addr"])
        elif atomic:
            wr.set_wr_atomic(rkey=r["rkey"], addr=r["remote_addr"],
                             compare_add=r.get("add", r.get("compare", 0)), swap=r.get("swap", 0))
        self.qp.post_send(wr)

    def poll(self, r):
        cq = self.scq if r["cq"] == "send" else self.rcq
        want, end, wcs = r.get("max", 1), time.monotonic() + r.get("timeout", 1.0), []
        while len(wcs) < want and time.monotonic() < end:
            n, got = cq.poll()
            if not n:
                time.sleep(0.005)
                continue
            for wc in got:
                imm = socket.ntohl(wc.imm_data) if wc.wc_flags & e.IBV_WC_WITH_IMM else None
                wcs.append(dict(wr_id=wc.wr_id, status=wc.status, opcode=wc.opcode, byte_len=wc.byte_len,
                                imm=imm, src_qp=wc.src_qp))
        return wcs

    def close(self):
        for obj in (self.qp, self.scq, self.rcq, self.mr):
            obj.close()


class UdConn(Conn):
    """A UD QP (datagrams, protocol.md 5): receives only, for the tests of
    UD_SEND's header rules."""

    def __init__(self, agent, r):
        ctx, pd = agent.ctx, agent.pd
        self.len = r.get("buf_len", 1 << 16)
        self.mr = MR(pd, self.len, e.IBV_ACCESS_LOCAL_WRITE)
        self.scq, self.rcq = CQ(ctx, 64), CQ(ctx, 256)
        cap = QPCap(max_send_wr=8, max_recv_wr=64, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=self.scq, rcq=self.rcq, cap=cap))
        self.psn = random.randrange(1 << 24)
        a = state_attr(e.IBV_QPS_INIT)
        a.pkey_index, a.port_num, a.qkey = 0, 1, r["qkey"]
        self.qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY)
        self.qp.modify(state_attr(e.IBV_QPS_RTR), e.IBV_QP_STATE)
        a = state_attr(e.IBV_QPS_RTS)
        a.sq_psn = self.psn
        self.qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)


class Agent:
    def __init__(self, dev, addr):
        self.dev, self.addr = dev, addr
        self.ctx = Context(name=dev)
        self.pd = PD(self.ctx)
        self.gid_index = gid_index(self.ctx, dev, addr)
        self.conns, self.next_id = {}, 1

    def handle(self, r):
        op = r["op"]
        if op == "hello":
            return dict(device=f"{self.dev} ({self.addr}, GID index {self.gid_index})", byteorder=sys.byteorder,
                        sends=True)
        if op == "bye":
            return {}
        if op in ("create_qp", "create_ud"):
            c = (Conn if op == "create_qp" else UdConn)(self, r)
            qid, self.next_id = self.next_id, self.next_id + 1
            self.conns[qid] = c
            return dict(qp=qid, qpn=c.qp.qp_num, psn=c.psn, rkey=c.mr.rkey, addr=c.mr.buf)
        c = self.conns[r["qp"]]
        if op == "post_recv":
            c.qp.post_recv(RecvWR(wr_id=r["wr_id"], num_sge=1, sg=[c.sge(r["offset"], r["len"])]))
            return {}
        if op == "post_send":
            c.post_send(r)
            return {}
        if op == "poll":
            return dict(wcs=c.poll(r))
        if op == "read_mem":
            c.sge(r["offset"], r["len"])
            return dict(hex=c.mr.read(r["len"], r["offset"]).hex())
        if op == "write_mem":
            b = bytes.fromhex(r["hex"])
            c.sge(r["offset"], len(b))
            c.mr.write(b, len(b), r["offset"])
            return {}
        if op == "qp_state":
            attr, _ = c.qp.query(e.IBV_QP_STATE)
            return dict(state=attr.qp_state)
        if op == "destroy_qp":
            self.conns.pop(r["qp"]).close()
            return {}
        raise ValueError(f"unknown op {op!r}")

    def serve(self, listen, port, once):
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((listen, port))
        ls.listen(1)
        print(f"agent: {self.dev} ({self.addr}), listening on {listen}:{port}", flush=True)
        while True:
            sock, _ = ls.accept()
            f = sock.makefile("rw")
            bye = False
            for line in f:
                r = json.loads(line)
                try:
                    reply = dict(ok=True, **self.handle(r))
                except Exception as ex:  # the tester reads the reason
                    reply = dict(ok=False, error=f"{type(ex).__name__}: {ex}")
                f.write(json.dumps(reply) + "\n")
                f.flush()
                bye = r.get("op") == "bye"
                if bye:
                    break
            sock.close()
            for qid in list(self.conns):
                self.conns.pop(qid).close()
            if once and bye:
                return


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dev", required=True, help="the RDMA device under test (e.g. mr0)")
    ap.add_argument("--addr", required=True, help="its IPv4 address the tester sends to")
    ap.add_argument("--port", type=int, default=18700)
    ap.add_argument("--listen", default="0.0.0.0")
    ap.add_argument("--once", action="store_true", help="exit after the first tester says bye")
    a = ap.parse_args()
    Agent(a.dev, a.addr).serve(a.listen, a.port, a.once)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
