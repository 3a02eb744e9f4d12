#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""RDMA atomics over MetaRoCE between two hosts, with pyverbs.

    atomics.py server DEV GID_INDEX PORT               (host B)
    atomics.py client DEV GID_INDEX HOST PORT MODE     (host A)

MODE "cases": for each case the server registers a fresh buffer with the
case's access rights, writes a known pattern and connects a fresh RC QP
that grants the case's QP access; the client connects to it (QPN, GID,
rkey and address go over TCP on the management link), runs the case's
atomics and checks each completion status and each original value that
comes back; then the server sends its buffer back and the client checks
every byte: what the atomics must have changed, and that nothing else (or,
for a refused atomic, nothing at all) changed.

MODE "once N": N fetch-and-adds of 1 on one word, up to 16 in flight (run
under packet loss by atomics.sh): the original values must come back as
0, 1, ..., N-1 in posting order and the word must end at N, so no atomic
ran twice (a retransmitted request) or was lost, and they ran in order.

Prints one line per check; exits non-zero on the first failure.
"""

import struct
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import GID
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QPCap, QPEx, QPInitAttrEx
from pyverbs.wr import SGE, SendWR
from verbs_util import Link, connect_qp, fail, ok, poll_one, qp_state

BUF = 4096
PATTERN = bytes((i * 11 + 5) & 0xFF for i in range(BUF))
LW, RW, RA = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_ATOMIC
OK = e.IBV_WC_SUCCESS
WINDOW = 16


def word(b, off=0):
    """The native-order u64 at `off` of `b` (the responder's memory order)."""
    return struct.unpack_from("=Q", b, off)[0]


def put_word(b, off, v):
    b[off:off + 8] = struct.pack("=Q", v)


W0 = word(PATTERN, 0)
WRONG = W0 ^ 0x0101
SWAP = 0xDEADBEEFCAFEF00D
ADD = 0x1000000000000001
STORE = b"MetaRoCE"

# name: (region access, QP access, what the client does, expected status).
# Actions: ("fa"|"cs"|"aw", word offset, ...), see run_case.
CASES = [
    ("fetch-add, compare-swap (miss, hit), atomic write", LW | RW | RA, RW | RA, "good", OK),
    ("bad rkey", LW | RW | RA, RW | RA, "rkey", e.IBV_WC_REM_ACCESS_ERR),
    ("region without REMOTE_ATOMIC", LW | RW, RW | RA, None, e.IBV_WC_REM_ACCESS_ERR),
    ("outside the region", LW | RW | RA, RW | RA, "bounds", e.IBV_WC_REM_ACCESS_ERR),
    ("misaligned address", LW | RW | RA, RW | RA, "align", e.IBV_WC_REM_INV_REQ_ERR),
    ("QP without REMOTE_ATOMIC", LW | RW | RA, RW, None, e.IBV_WC_REM_INV_REQ_ERR),
    ("atomic write without REMOTE_WRITE", LW | RA, RW | RA, "write", e.IBV_WC_REM_ACCESS_ERR),
    ("bad lkey", LW | RW | RA, RW | RA, "lkey", e.IBV_WC_LOC_PROT_ERR),
]


class End:
    """A CQ and an extended RC QP (legacy post_send and ibv_wr_* both)."""

    def __init__(self, ctx, pd, gid_index, depth=64):
        self.gid_index = gid_index
        self.cq = CQ(ctx, 2 * depth)
        cap = QPCap(max_send_wr=depth, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
        ops = (e.IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | e.IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
               | e.IBV_QP_EX_WITH_ATOMIC_WRITE)
        init = QPInitAttrEx(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq, pd=pd, cap=cap,
                            send_ops_flags=ops,
                            comp_mask=e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
        self.qp = QPEx(ctx, init)
        self.gid = str(ctx.query_gid(1, gid_index))

    def info(self):
        return {"qpn": self.qp.qp_num, "gid": self.gid}

    def connect(self, peer, access):
        connect_qp(self.qp, self.gid_index, peer["qpn"], GID(peer["gid"]), access, WINDOW)

    def state(self):
        return qp_state(self.qp)

    def poll(self, what, timeout=30.0):
        return poll_one(self.cq, what, timeout, 0.005)

    def atomic(self, opcode, sge, rkey, addr, compare_add, swap, wr_id):
        """Legacy post_send of CMP_AND_SWP or FETCH_AND_ADD."""
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[sge], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_atomic(rkey=rkey, addr=addr, compare_add=compare_add, swap=swap)
        self.qp.post_send(wr)

    def atomic_write(self, rkey, addr, data, wr_id):
        """ibv_wr_atomic_write (it has no legacy form)."""
        self.qp.wr_start()
        self.qp.wr_id = wr_id
        self.qp.wr_flags = e.IBV_SEND_SIGNALED
        self.qp.wr_atomic_write(rkey, addr, data)
        self.qp.wr_complete()


def serve(link, ctx, pd, gid_index, access, qp_access, depth=64):
    """One server side: a buffer, a QP; sends the buffer back when told."""
    mr = MR(pd, BUF, access)
    mr.write(PATTERN, BUF, 0)
    end = End(ctx, pd, gid_index, depth)
    link.send({**end.info(), "rkey": mr.rkey, "addr": mr.buf})
    end.connect(link.recv(), qp_access)
    link.send({"ready": True})
    link.recv()  # the client is done
    link.send({"memory": mr.read(BUF, 0).hex()})
    end.qp.close()
    end.cq.close()
    mr.close()


def server(dev, gid_index, port):
    ctx = Context(name=dev)
    pd = PD(ctx)
    link = Link.accept(port)
    while True:
        req = link.recv()
        if req.get("bye"):
            break
        serve(link, ctx, pd, gid_index, req["access"], req["qp_access"], req.get("depth", 64))
    link.close()


def check_wc(end, what, status, wr_id=None):
    wc = end.poll(what)
    if wc.status != status:
        fail(f"{what}: completion status {wc.status}, expected {status}")
    if wr_id is not None and wc.wr_id != wr_id:
        fail(f"{what}: completion of wr_id {wc.wr_id}, expected {wr_id}")
    return wc


def run_good(end, local, rkey, addr):
    """Returns the responder memory the case must leave."""
    want = bytearray(PATTERN)
    sge = SGE(local.buf, 8, local.lkey)
    end.atomic(e.IBV_WR_ATOMIC_FETCH_AND_ADD, sge, rkey, addr, ADD, 0, 1)
    wc = check_wc(end, "fetch-add", OK, 1)
    if wc.opcode != e.IBV_WC_FETCH_ADD:
        fail(f"fetch-add: completion opcode {wc.opcode}, expected {e.IBV_WC_FETCH_ADD}")
    got = word(local.read(8, 0))
    if got != W0:
        fail(f"fetch-add returned {got:#x}, expected the original {W0:#x}")
    ok(f"fetch-add: IBV_WC_FETCH_ADD, original {got:#x} returned")
    now = (W0 + ADD) & (2**64 - 1)
    end.atomic(e.IBV_WR_ATOMIC_CMP_AND_SWP, sge, rkey, addr, WRONG, SWAP, 2)
    wc = check_wc(end, "compare-swap (miss)", OK, 2)
    if wc.opcode != e.IBV_WC_COMP_SWAP:
        fail(f"compare-swap: completion opcode {wc.opcode}, expected {e.IBV_WC_COMP_SWAP}")
    got = word(local.read(8, 0))
    if got != now:
        fail(f"compare-swap (miss) returned {got:#x}, expected {now:#x}")
    ok(f"compare-swap with another value: original {got:#x} returned, nothing swapped")
    end.atomic(e.IBV_WR_ATOMIC_CMP_AND_SWP, sge, rkey, addr + 8, word(PATTERN, 8), SWAP, 3)
    check_wc(end, "compare-swap (hit)", OK, 3)
    got = word(local.read(8, 0))
    if got != word(PATTERN, 8):
        fail(f"compare-swap (hit) returned {got:#x}, expected {word(PATTERN, 8):#x}")
    ok(f"compare-swap with the value: original {got:#x} returned")
    end.atomic_write(rkey, addr + 24, STORE, 4)
    wc = check_wc(end, "atomic write", OK, 4)
    if wc.opcode != e.IBV_WC_ATOMIC_WRITE:
        fail(f"atomic write: completion opcode {wc.opcode}, expected {e.IBV_WC_ATOMIC_WRITE}")
    ok("atomic write: IBV_WC_ATOMIC_WRITE")
    put_word(want, 0, now)
    put_word(want, 8, SWAP)
    want[24:32] = STORE
    return bytes(want)


def run_refused(end, local, rkey, addr, change, status, name):
    lkey = local.lkey
    if change == "rkey":
        rkey ^= 0x5A5A00
    elif change == "bounds":
        addr += BUF
    elif change == "align":
        addr += 4
    elif change == "lkey":
        lkey ^= 0x5A5A00
    if change == "write":
        end.atomic_write(rkey, addr, STORE, 1)
    else:
        end.atomic(e.IBV_WR_ATOMIC_FETCH_AND_ADD, SGE(local.buf, 8, lkey), rkey, addr, 1, 0, 1)
    check_wc(end, name, status, 1)
    ok(f"{name}: completion status {status}")
    if end.state() != e.IBV_QPS_ERR:
        fail(f"{name}: QP state {end.state()} after the error, expected ERR")
    end.atomic(e.IBV_WR_ATOMIC_FETCH_AND_ADD, SGE(local.buf, 8, local.lkey), rkey, addr, 1, 0, 2)
    check_wc(end, f"{name}: request after the error", e.IBV_WC_WR_FLUSH_ERR, 2)
    ok(f"{name}: requester QP in error, a later atomic flushed")
    return PATTERN


def open_case(link, ctx, pd, gid_index, access, qp_access, depth=64):
    link.send({"access": access, "qp_access": qp_access, "depth": depth})
    peer = link.recv()
    end = End(ctx, pd, gid_index, depth)
    link.send(end.info())
    end.connect(peer, RW | RA)
    link.recv()  # the server's QP is ready
    return end, peer


def close_case(link, end, want, name):
    link.send({"done": True})
    memory = bytes.fromhex(link.recv()["memory"])
    if memory != want:
        diff = [i for i in range(BUF) if memory[i] != want[i]]
        fail(f"{name}: responder memory differs at bytes {diff[:16]}")
    ok(f"{name}: responder memory as expected")
    end.qp.close()
    end.cq.close()


def run_once(link, ctx, pd, gid_index, n):
    end, peer = open_case(link, ctx, pd, gid_index, LW | RA, RA, depth=2 * WINDOW)
    local = MR(pd, 8 * n, LW)
    rkey, addr = peer["rkey"], peer["addr"] + 64
    start = word(PATTERN, 64)
    posted = done = 0
    t0 = time.time()
    while done < n:
        while posted < n and posted - done < WINDOW:
            end.atomic(e.IBV_WR_ATOMIC_FETCH_AND_ADD, SGE(local.buf + 8 * posted, 8, local.lkey),
                       rkey, addr, 1, 0, posted)
            posted += 1
        check_wc(end, f"fetch-add {done}", OK, done)
        done += 1
    originals = [(word(local.read(8, 8 * i)) - start) % 2**64 for i in range(n)]
    if originals != list(range(n)):
        bad = [(i, v) for i, v in enumerate(originals) if v != i]
        fail(f"fetch-add originals not 0..{n - 1} in order: first differences {bad[:8]}")
    ok(f"{n} fetch-adds in {time.time() - t0:.1f} s: originals 0..{n - 1} in order (none ran twice)")
    want = bytearray(PATTERN)
    put_word(want, 64, (start + n) % 2**64)
    close_case(link, end, bytes(want), f"{n} fetch-adds")
    local.close()


def client(dev, gid_index, host, port, mode):
    ctx = Context(name=dev)
    if ctx.query_device().atomic_caps == e.IBV_ATOMIC_NONE:
        fail(f"{dev} reports no atomics")
    pd = PD(ctx)
    link = Link.dial(host, port)
    if mode[0] == "once":
        run_once(link, ctx, pd, gid_index, int(mode[1]))
    else:
        local = MR(pd, 64, LW)
        for name, access, qp_access, change, status in CASES:
            end, peer = open_case(link, ctx, pd, gid_index, access, qp_access)
            if change == "good":
                want = run_good(end, local, peer["rkey"], peer["addr"])
            else:
                want = run_refused(end, local, peer["rkey"], peer["addr"], change, status, name)
            close_case(link, end, want, name)
    link.send({"bye": True})
    link.close()


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "server":
        server(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) >= 7 and sys.argv[1] == "client":
        client(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6:])
    else:
        fail(__doc__)


if __name__ == "__main__":
    main()
