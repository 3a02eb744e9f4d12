#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A user UD QP must never reach kernel memory: sends whose SGE names a
kernel virtual address, with the lkeys of the device's first regions (the
kernel's DMA regions: the MAD layer's PD registers the first one) or with
the process's own lkey, complete with IBV_WC_LOC_PROT_ERR and send
nothing. A valid send from the same QP completes successfully (so the
check can tell the two apart). Last, the QP sends itself a datagram with
immediate data (SEND_WITH_IMM, over loopback): the receive completion
carries the immediate, IBV_WC_WITH_IMM, the QP's own number as source QPN
and the payload after the 40-byte GRH area.

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
from pyverbs.wr import SGE, RecvWR, SendWR

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

    # Immediate data on a datagram, to ourselves.
    payload = bytes((i * 11 + 7) & 0xFF for i in range(64))
    rmr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
    qp.post_recv(RecvWR(wr_id=0xEC, num_sge=1, sg=[SGE(rmr.buf, 40 + 64, rmr.lkey)]))
    mr.write(payload, len(payload), 0)
    imm = 0x12345678
    wr = SendWR(wr_id=0x1A, opcode=e.IBV_WR_SEND_WITH_IMM, num_sge=1, imm_data=imm,
                sg=[SGE(mr.buf, 64, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_ud(ah, qp.qp_num, QKEY)
    qp.post_send(wr)
    wcs = {}
    for _ in range(2):
        wc = poll(cq)
        wcs[wc.wr_id] = wc
    if set(wcs) != {0x1A, 0xEC}:
        sys.exit(f"FAIL: completions {sorted(wcs)}, want the send 0x1a and the receive 0xec")
    s, r = wcs[0x1A], wcs[0xEC]
    if s.status != e.IBV_WC_SUCCESS:
        sys.exit(f"FAIL: SEND_WITH_IMM on UD completed with status {s.status}")
    if r.status != e.IBV_WC_SUCCESS or not r.wc_flags & e.IBV_WC_WITH_IMM or r.imm_data != imm:
        sys.exit(f"FAIL: datagram receive status {r.status} flags {r.wc_flags:#x} imm {r.imm_data:#x}, "
                 f"want success, IBV_WC_WITH_IMM and {imm:#x}")
    if r.src_qp != qp.qp_num or r.byte_len != 40 + 64 or rmr.read(64, 40) != payload:
        sys.exit(f"FAIL: datagram receive src_qp {r.src_qp:#x} byte_len {r.byte_len}, "
                 f"want {qp.qp_num:#x} and {40 + 64} with the payload after the GRH")
    print(f"ok: a datagram with immediate data arrives with imm {imm:#x}, IBV_WC_WITH_IMM, "
          f"source QPN {qp.qp_num:#x} and its 64 bytes")


if __name__ == "__main__":
    main()
