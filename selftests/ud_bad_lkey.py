#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A user UD QP must never reach kernel memory: sends whose SGE names a
kernel virtual address, with the lkeys of the device's first regions (the
kernel's DMA regions: the MAD layer's PD registers the first one) or with
the process's own lkey, complete with IBV_WC_LOC_PROT_ERR and send
nothing. A valid send from the same QP completes successfully (so the
check can tell the two apart).

  ud_bad_lkey.py DEV GID_INDEX
"""
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR

QKEY = 0x11111111
# The start of x86-64's direct map (without KASLR) and a kernel text address.
KERNEL_ADDRS = [0xFFFF888000001000, 0xFFFFFFFF81000000]


def poll(cq):
    deadline = time.time() + 5
    while time.time() < deadline:
        n, wcs = cq.poll()
        if n:
            return wcs[0]
        time.sleep(0.01)
    sys.exit("FAIL: no completion within 5 s")


def main():
    dev, gid_index = sys.argv[1], int(sys.argv[2])
    ctx = Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 64)
    cap = QPCap(max_send_wr=32, max_recv_wr=32, max_send_sge=1, max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq, cap=cap))
    qa = QPAttr()
    qa.qkey = QKEY
    qa.port_num = 1
    qp.to_rts(qa)
    gr = GlobalRoute(dgid=ctx.query_gid(1, gid_index), sgid_index=gid_index)
    ah = AH(pd, attr=AHAttr(gr=gr, is_global=1, port_num=1))
    mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)

    def send(addr, lkey):
        wr = SendWR(wr_id=lkey, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(addr, 64, lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_ud(ah, qp.qp_num, QKEY)
        qp.post_send(wr)
        return poll(cq).status

    st = send(mr.buf, mr.lkey)
    if st != e.IBV_WC_SUCCESS:
        sys.exit(f"FAIL: a valid send completed with status {st}")
    print("ok: a send from the process's own region succeeds")
    cases = [(a, k) for a in KERNEL_ADDRS for k in list(range(0, 0x800, 0x100)) + list(range(8))]
    cases += [(a, mr.lkey) for a in KERNEL_ADDRS]
    for addr, lkey in cases:
        st = send(addr, lkey)
        if st != e.IBV_WC_LOC_PROT_ERR:
            sys.exit(f"FAIL: send of kernel address {addr:#x} with lkey {lkey:#x}: status {st}, "
                     f"want LOC_PROT_ERR ({e.IBV_WC_LOC_PROT_ERR})")
    print(f"ok: {len(cases)} sends naming kernel addresses all failed with LOC_PROT_ERR")


if __name__ == "__main__":
    main()
