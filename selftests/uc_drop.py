#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A UC responder drops what it cannot take, and neither QP fails
(protocol.md 5, UC). Two UC QPs on DEV, connected to each other over one
host's GID (loopback), with pyverbs:

* an RDMA WRITE with a wrong rkey completes successfully at the requester
  (UC has no remote error reports), the target is unchanged, both QPs stay
  in RTS, and a WRITE with the right rkey then lands;
* a SEND that finds no receive posted is dropped without taking one: the
  receive posted afterwards gets the next SEND's bytes;
* a SEND longer than the posted receive completes that receive with
  IBV_WC_LOC_LEN_ERR, the QP stays in RTS and the next SEND arrives;
* a WRITE_IMM with a wrong rkey completes its receive with
  IBV_WC_REM_ACCESS_ERR (the QP stays in RTS);
* an RDMA READ is not a UC operation: post_send refuses it.

  uc_drop.py DEV GID_INDEX
Prints one line per check; exits non-zero on the first failure.
"""
import sys
import time

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR
from verbs_util import connect_qp, fail, ok, poll_one, qp_state

BUF = 4096


class End:
    def __init__(self, ctx, pd, gid_index):
        self.cq = CQ(ctx, 64)
        cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UC, scq=self.cq, rcq=self.cq, cap=cap))
        self.mr = MR(pd, BUF, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
        self.gid, self.gid_index = ctx.query_gid(1, gid_index), gid_index

    def connect(self, peer_qpn, dgid):
        connect_qp(self.qp, self.gid_index, peer_qpn, dgid, e.IBV_ACCESS_REMOTE_WRITE)

    def state(self):
        return qp_state(self.qp)

    def poll(self, what, timeout=10.0):
        return poll_one(self.cq, what, timeout)

    def no_completion(self, what, wait=0.5):
        time.sleep(wait)
        n, wcs = self.cq.poll()
        if n:
            fail(f"{what}: unexpected completion status {wcs[0].status} opcode {wcs[0].opcode}")

    def recv(self, wr_id, length):
        self.qp.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[SGE(self.mr.buf, length, self.mr.lkey)]))


def send(src, wr_id, data, opcode=e.IBV_WR_SEND, rkey=None, addr=0, imm=None):
    src.mr.write(data, len(data), 0)
    kw = {"imm_data": imm} if imm is not None else {}
    wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[SGE(src.mr.buf, len(data), src.mr.lkey)],
                send_flags=e.IBV_SEND_SIGNALED, **kw)
    if rkey is not None:
        wr.set_wr_rdma(rkey, addr)
    src.qp.post_send(wr)
    wc = src.poll(f"send {wr_id}")
    if wc.status != e.IBV_WC_SUCCESS or wc.wr_id != wr_id:
        fail(f"send {wr_id}: requester completion status {wc.status} wr_id {wc.wr_id}, want success")


def both_rts(a, b, what):
    if a.state() != e.IBV_QPS_RTS or b.state() != e.IBV_QPS_RTS:
        fail(f"{what}: QP states {a.state()} / {b.state()}, want RTS")


def main():
    dev, gid_index = sys.argv[1], int(sys.argv[2])
    ctx = Context(name=dev)
    pd = PD(ctx)
    a, b = End(ctx, pd, gid_index), End(ctx, pd, gid_index)
    a.connect(b.qp.qp_num, b.gid)
    b.connect(a.qp.qp_num, a.gid)
    zeros = bytes(BUF)

    # WRITE with a wrong rkey: dropped, nothing written, no error anywhere.
    b.mr.write(zeros, BUF, 0)
    send(a, 1, b"x" * 256, e.IBV_WR_RDMA_WRITE, rkey=b.mr.rkey ^ 0x5A5A00, addr=b.mr.buf)
    b.no_completion("write bad rkey")
    if b.mr.read(BUF, 0) != zeros:
        fail("write bad rkey: the target changed")
    both_rts(a, b, "write bad rkey")
    ok("WRITE with a wrong rkey: requester success, target unchanged, both QPs in RTS")
    data = bytes((i * 13 + 1) & 0xFF for i in range(2048))
    send(a, 2, data, e.IBV_WR_RDMA_WRITE, rkey=b.mr.rkey, addr=b.mr.buf)
    end = time.time() + 5
    while b.mr.read(len(data), 0) != data:
        if time.time() > end:
            fail("WRITE with the right rkey after the dropped one did not land")
        time.sleep(0.01)
    ok("WRITE with the right rkey then lands (2048 B, 2 packets)")

    # SEND without a receive: dropped, takes no receive.
    send(a, 3, b"first SEND, no receive posted")
    b.no_completion("send without receive")
    second = bytes((i * 7 + 5) & 0xFF for i in range(1500))
    b.recv(100, BUF)
    send(a, 4, second)
    wc = b.poll("receive after the dropped SEND")
    if wc.status != e.IBV_WC_SUCCESS or wc.byte_len != len(second) or b.mr.read(len(second), 0) != second:
        fail(f"receive after the dropped SEND: status {wc.status} byte_len {wc.byte_len}")
    both_rts(a, b, "send without receive")
    ok("SEND without a receive posted: dropped; the next receive gets the next SEND's 1500 B")

    # SEND longer than the receive: the receive completes in error.
    b.recv(101, 16)
    send(a, 5, b"y" * 200)
    wc = b.poll("receive too short")
    if wc.wr_id != 101 or wc.status != e.IBV_WC_LOC_LEN_ERR:
        fail(f"receive too short: wr_id {wc.wr_id} status {wc.status}, want IBV_WC_LOC_LEN_ERR")
    both_rts(a, b, "receive too short")
    b.recv(102, BUF)
    send(a, 6, second[:300])
    wc = b.poll("receive after the short one")
    if wc.wr_id != 102 or wc.status != e.IBV_WC_SUCCESS or b.mr.read(300, 0) != second[:300]:
        fail(f"receive after the short one: wr_id {wc.wr_id} status {wc.status}")
    ok("SEND longer than its receive: IBV_WC_LOC_LEN_ERR, QP in RTS, next SEND arrives")

    # WRITE_IMM with a wrong rkey and a receive posted: the receive fails.
    b.recv(103, BUF)
    send(a, 7, b"z" * 64, e.IBV_WR_RDMA_WRITE_WITH_IMM, rkey=b.mr.rkey ^ 0x77, addr=b.mr.buf, imm=0x1234)
    wc = b.poll("write_imm bad rkey")
    if wc.wr_id != 103 or wc.status != e.IBV_WC_REM_ACCESS_ERR:
        fail(f"write_imm bad rkey: wr_id {wc.wr_id} status {wc.status}, want IBV_WC_REM_ACCESS_ERR")
    both_rts(a, b, "write_imm bad rkey")
    ok("WRITE_IMM with a wrong rkey: its receive completes IBV_WC_REM_ACCESS_ERR, QP in RTS")

    # No READs on UC.
    wr = SendWR(wr_id=8, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[SGE(a.mr.buf, 64, a.mr.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(b.mr.rkey, b.mr.buf)
    try:
        a.qp.post_send(wr)
        fail("RDMA READ on a UC QP was accepted")
    except PyverbsRDMAError as ex:
        ok(f"RDMA READ on a UC QP refused by post_send ({ex.error_code})")


if __name__ == "__main__":
    main()
