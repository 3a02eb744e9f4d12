#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""ibv_resize_cq on a MetaRoCE device (pyverbs), on one host: the pending
completions come from receive work requests flushed by moving an RC QP to
the error state. Usage: cq_resize.py DEV. Exit status 0 if every check held.
"""
import errno
import sys

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def flush_receives(pd, cq, mr, wr_ids):
    """Posts one receive per id on a new RC QP using cq, then errors the QP."""
    cap = QPCap(max_send_wr=1, max_recv_wr=len(wr_ids), max_send_sge=1, max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    attr = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
    attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE
    qp.to_init(attr)
    for i in wr_ids:
        qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)]))
    qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
    return qp


def expect_einval(cq, size, why):
    try:
        cq.resize(size)
    except PyverbsRDMAError as ex:
        if ex.error_code != errno.EINVAL:
            fail(f"resize to {size} ({why}): errno {ex.error_code}, not EINVAL")
        print(f"ok: resize to {size} refused with EINVAL ({why})")
        return
    fail(f"resize to {size} succeeded ({why})")


def poll_ids(cq, n):
    got = []
    for _ in range(1000):
        npolled, wcs = cq.poll(n - len(got))
        for wc in wcs[:npolled]:
            if wc.status != e.IBV_WC_WR_FLUSH_ERR:
                fail(f"completion {wc.wr_id} has status {wc.status}, not WR_FLUSH_ERR")
            got.append(wc.wr_id)
        if len(got) == n:
            return got
    fail(f"only {len(got)} of {n} completions")


def main():
    ctx = Context(name=sys.argv[1])
    pd = PD(ctx)
    mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
    cq = CQ(ctx, 4, None, None, 0)
    print(f"CQ of {cq.cqe} entries")

    qp1 = flush_receives(pd, cq, mr, [10, 11, 12])
    expect_einval(cq, 1, "3 completions pending")
    expect_einval(cq, 2, "3 completions pending")
    expect_einval(cq, 1 << 30, "beyond max_cqe")
    cq.resize(100)
    if cq.cqe < 100:
        fail(f"resized to 100 but the CQ holds {cq.cqe}")
    print(f"ok: resized with 3 pending, the CQ holds {cq.cqe}")
    got = poll_ids(cq, 3)
    if got != [10, 11, 12]:
        fail(f"completions after the resize: {got}, expected [10, 11, 12]")
    print("ok: the pending completions survived the resize, in order")

    cq.resize(1)
    print(f"ok: shrunk the empty CQ to {cq.cqe}")
    cq.resize(8)
    qp2 = flush_receives(pd, cq, mr, list(range(20, 26)))
    got = poll_ids(cq, 6)
    if got != list(range(20, 26)):
        fail(f"completions in the resized ring: {got}")
    print(f"ok: 6 new completions through the resized ring ({cq.cqe} entries)")
    for obj in (qp1, qp2, cq, mr, pd, ctx):
        obj.close()
    print("ok: cq_resize")


main()
