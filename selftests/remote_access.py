#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Remote access violations over MetaRoCE, with pyverbs.

    remote_access.py server DEV GID_INDEX PORT          (host B)
    remote_access.py client DEV GID_INDEX HOST PORT     (host A)

For each case the server registers a fresh buffer (the case says with which
access rights), fills it with a pattern and creates an RC QP that grants
remote READ and WRITE; the client connects a fresh QP to it (QPN, GID,
rkey and address go over a TCP connection on the management link) and posts
one RDMA operation that the responder must refuse. The client checks the
error completion, that its QP is then in the error state, that a request
posted afterwards is flushed, and the server checks its buffer is
unchanged. A READ that is allowed checks the bytes that come back; local
errors (a bad lkey, a QP transition that skips states) are checked too, and
a zero-length WRITE and READ with key 0 succeed: they name no memory.
In one case the responder drops its own NAKs for a while (a tc filter on
its plane netdevs, verbs_util.TcDrop): it is in
error by the time the requester's verdict probe arrives, and must still
answer it with the NAK, so the requester sees the access error rather
than running out of retries (protocol.md 3.2).
Prints one line per check; exits non-zero on the first failure.
"""

import sys
import threading

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR
from verbs_util import AT_OPCODE, Link, TcDrop, connect_qp, fail, ok, poll_one, qp_state

BUF = 4096
PATTERN = bytes((i * 7 + 3) & 0xFF for i in range(BUF))
LW, RW, RR = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_READ

# name: (access of the server's buffer, operation, what the client changes,
#        expected completion status)
CASES = [
    ("read allowed", LW | RW | RR, "read", None, e.IBV_WC_SUCCESS),
    ("write bad rkey", LW | RW | RR, "write", "rkey", e.IBV_WC_REM_ACCESS_ERR),
    ("write bad rkey, NAKs lost", LW | RW | RR, "write", "rkey-nak-lost", e.IBV_WC_REM_ACCESS_ERR),
    ("write out of bounds", LW | RW | RR, "write", "bounds", e.IBV_WC_REM_ACCESS_ERR),
    ("write without REMOTE_WRITE", LW | RR, "write", None, e.IBV_WC_REM_ACCESS_ERR),
    ("read bad rkey", LW | RW | RR, "read", "rkey", e.IBV_WC_REM_ACCESS_ERR),
    ("read out of bounds", LW | RW | RR, "read", "bounds", e.IBV_WC_REM_ACCESS_ERR),
    ("read without REMOTE_READ", LW | RW, "read", None, e.IBV_WC_REM_ACCESS_ERR),
    ("write with a bad lkey", LW | RW | RR, "write", "lkey", e.IBV_WC_LOC_PROT_ERR),
    # Zero bytes name no memory: key 0 at address 0 is not checked
    # (InfiniBand C9-88). UCX's RC transport flushes with such a WRITE.
    ("zero-length write, key 0", LW | RW | RR, "write", "zero", e.IBV_WC_SUCCESS),
    ("zero-length read, key 0", LW | RW | RR, "read", "zero", e.IBV_WC_SUCCESS),
]


class End:
    """A PD, CQ and RC QP on DEV."""

    def __init__(self, ctx, pd, gid_index):
        self.ctx, self.pd, self.gid_index = ctx, pd, gid_index
        self.cq = CQ(ctx, 32)
        cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq, cap=cap))
        self.gid = str(ctx.query_gid(1, gid_index))

    def info(self):
        return {"qpn": self.qp.qp_num, "gid": self.gid}

    def connect(self, peer):
        connect_qp(self.qp, self.gid_index, peer["qpn"], GID(peer["gid"]), RW | RR, 1)

    def state(self):
        return qp_state(self.qp)

    def poll(self, what, timeout=20.0):
        return poll_one(self.cq, what, timeout)


OP_NAK = 0x11
NAK_LOST_S = 2.0


def server(dev, gid_index, port):
    ctx = Context(name=dev)
    pd = PD(ctx)
    link = Link.accept(port)
    for name, access, _op, change, _status in CASES:
        mr = MR(pd, BUF, access)
        mr.write(PATTERN, BUF, 0)
        end = End(ctx, pd, gid_index)
        link.send({**end.info(), "rkey": mr.rkey, "addr": mr.buf, "len": BUF})
        end.connect(link.recv())
        drop, timer = None, None
        if change == "rkey-nak-lost":
            drop = TcDrop([("u8", OP_NAK, AT_OPCODE)])
            timer = threading.Timer(NAK_LOST_S, drop.remove)
        link.send({"ready": True})
        if timer:
            timer.start()
        try:
            link.recv()  # the client is done with the case
        finally:
            if timer:
                timer.cancel()
                timer.join()
                drop.remove()
        if drop:
            if not drop.dropped:
                fail(f"{name}: no NAK was dropped: the case proves nothing")
            ok(f"{name}: {drop.dropped} NAK(s) dropped in the first {NAK_LOST_S} s")
        same = mr.read(BUF, 0) == PATTERN
        link.send({"unchanged": same})
        if not same:
            fail(f"{name}: the responder's buffer changed")
        ok(f"{name}: responder buffer unchanged")
        end.qp.close()
        end.cq.close()
        mr.close()
    link.close()


def post(end, op, sge, rkey, addr, wr_id):
    opcode = e.IBV_WR_RDMA_READ if op == "read" else e.IBV_WR_RDMA_WRITE
    wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[sge], send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(rkey, addr)
    end.qp.post_send(wr)


def client(dev, gid_index, host, port):
    ctx = Context(name=dev)
    pd = PD(ctx)
    link = Link.dial(host, port, timeout=60)
    local = MR(pd, BUF, LW)
    for name, _access, op, change, status in CASES:
        peer = link.recv()
        end = End(ctx, pd, gid_index)
        link.send(end.info())
        end.connect(peer)
        link.recv()  # the server's QP is ready
        local.write(bytes(BUF), BUF, 0)
        rkey, addr, n, lkey = peer["rkey"], peer["addr"], 64, local.lkey
        if change in ("rkey", "rkey-nak-lost"):
            rkey ^= 0x5A5A00
        elif change == "bounds":
            addr += BUF - 32
        elif change == "lkey":
            lkey ^= 0x5A5A00
        elif change == "zero":
            rkey, addr, n = 0, 0, 0
        post(end, op, SGE(local.buf, n, lkey), rkey, addr, 1)
        wc = end.poll(name)
        if wc.status != status:
            fail(f"{name}: completion status {wc.status}, expected {status}")
        if status == e.IBV_WC_SUCCESS:
            if op == "read" and local.read(n, 0) != PATTERN[:n]:
                fail(f"{name}: READ returned other bytes than the responder's")
            ok(f"{name}: status {wc.status}, bytes match")
            if change == "zero":
                post(end, "read", SGE(local.buf, 8, local.lkey), peer["rkey"], peer["addr"], 3)
                wc = end.poll(f"{name}: a READ after it")
                if wc.status != e.IBV_WC_SUCCESS or local.read(8, 0) != PATTERN[:8]:
                    fail(f"{name}: a READ after it completed with status {wc.status} or other bytes")
                ok(f"{name}: the QP still works")
        else:
            ok(f"{name}: completion status {wc.status}")
            st = end.state()
            if st != e.IBV_QPS_ERR:
                fail(f"{name}: QP state {st} after the error, expected {e.IBV_QPS_ERR} (ERR)")
            ok(f"{name}: requester QP in the error state")
            post(end, "write", SGE(local.buf, 8, local.lkey), peer["rkey"], peer["addr"], 2)
            wc = end.poll(f"{name}: request after the error")
            if wc.status != e.IBV_WC_WR_FLUSH_ERR or wc.wr_id != 2:
                fail(f"{name}: later request completed with status {wc.status}, expected WR_FLUSH_ERR")
            ok(f"{name}: later request flushed")
        link.send({"done": True})
        if not link.recv()["unchanged"]:
            fail(f"{name}: the responder's buffer changed")
        end.qp.close()
        end.cq.close()
    # A transition that skips a state (RESET -> RTR) is refused.
    end = End(ctx, pd, gid_index)
    a = QPAttr()
    a.qp_state = e.IBV_QPS_RTR
    a.path_mtu = e.IBV_MTU_1024
    a.dest_qp_num = 1
    a.rq_psn = 0
    a.max_dest_rd_atomic = 1
    a.min_rnr_timer = 12
    a.ah_attr = AHAttr(is_global=1, port_num=1, gr=GlobalRoute(dgid=GID(end.gid), sgid_index=gid_index))
    try:
        end.qp.modify(
            a,
            e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN
            | e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER,
        )
        fail("RESET -> RTR succeeded")
    except PyverbsRDMAError as err:
        if err.error_code != 22:
            fail(f"RESET -> RTR failed with errno {err.error_code}, expected EINVAL (22)")
        ok("RESET -> RTR refused with EINVAL")
    if end.state() != e.IBV_QPS_RESET:
        fail("the QP left RESET after a refused transition")
    ok("QP still in RESET")
    link.close()


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "server":
        server(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) == 6 and sys.argv[1] == "client":
        client(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
    else:
        fail(__doc__)


if __name__ == "__main__":
    main()
