#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Receive-side semantics of MetaRoCE RC QPs between two hosts, with pyverbs.

    rq_semantics.py requester DEV GID_INDEX PORT CASE         (host B)
    rq_semantics.py responder DEV GID_INDEX HOST PORT CASE    (host A)

Host A is the responder (it receives) in every case; host B sends. The
requester listens on PORT (TCP on the management link), the responder
connects; QPNs, GIDs, keys and results go over that link as JSON lines.

CASE "srq": A has one SRQ serving two RC QPs (qa1, qa2) and one CQ, with
32 receives of 64 KiB each (regions of one MR, wr_id = buffer index); B
connects two RC QPs one-to-one to them and posts N SENDs on each before it
polls either, message k 20000 + 1000*k bytes long (several packets at the
path MTU), every 8-byte word naming (sender, message, word). rq_semantics.sh
runs it with netem delaying B's packets by 2 ms +- 1 ms (reordering). For
each of the 2N receive completions A checks: success; the QP (qp_num) is
the one whose peer sent what its buffer (wr_id) holds; byte_len is that
message's length; every word up to byte_len is that message's and nothing
after it was written; each QP's messages complete in order. Every mismatch
is reported.

CASE "overflow": A's RC QP has a receive CQ created with cqe=1; A posts
cq.cqe + 3 receives and never polls, B sends that many small SENDs. Within
10 s A must get IBV_EVENT_CQ_ERR on its context's async event queue and
its QP must query as IBV_QPS_ERR. B's completions are only reported.

CASE "error": A's RC QP (connected, REMOTE_WRITE) has a pattern-filled MR
and one receive posted into a second pattern-filled buffer; A moves it to
IBV_QPS_ERR and gets the receive back flushed. Then B, still in RTS, posts
an RDMA WRITE into the MR and a SEND: within 20 s they may only complete in
error (or not at all), never successfully. A checks both buffers are
unchanged, that the device counter rx_qp_in_error grew (rdma -j statistic),
and that a receive posted now completes flushed within 2 s.

CASE "ud_error": A's UD QP has a receive CQ created with cqe=1 and
cq.cqe + 8 receives (1 KiB each, filled with 0xEE); B sends cq.cqe + 3
datagrams, so A's CQ overruns and its QP goes to IBV_QPS_ERR by itself
(no modify_qp), then, once A reports the state, 4 more, each datagram's
bytes naming its index. A QP in error takes nothing: the device counter
rx_qp_in_error must grow by at least the 4 late datagrams, and no receive
buffer may hold a late datagram's bytes.

CASE "reset": A's RC QP receives through an SRQ. B's second packet of a
SEND of many packets is dropped on B's way out (verbs_util.TcDrop), so the SEND's
first packet has taken an SRQ receive on A; A's own WRITEs to B are dropped
on A's way out, so they are in flight. A moves its QP to RESET: the SRQ
receive (and only it) must come back flushed, the WRITEs must complete
neither then nor after RESET -> INIT -> ERR, where only a request posted
in ERR is flushed. Then A reconnects the same QP (RESET -> INIT -> RTR -> RTS) to a
fresh QP of B: a SEND from B lands in the next SRQ receive with its bytes,
and a WRITE from A succeeds. Last, a WRITE_IMM from B to a QP of A on an
empty SRQ must complete in error at B (the responder NAKs it), never
successfully.

Prints one line per check ("ok: ..."/"FAIL: ..."); exits non-zero on any
failure. Every wait has a deadline.
"""

import array
import fcntl
import json
import os
import select
import socket
import subprocess
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR
from verbs_util import AT_DATA_OFFSET, AT_OPCODE, Link, TcDrop, connect_qp, ok, packet_payloads, qp_state

LW, RW = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE
SUCCESS, FLUSH = e.IBV_WC_SUCCESS, e.IBV_WC_WR_FLUSH_ERR
LINK_TIMEOUT = 90

# Case "srq".
SRQ_WR = 64
RECVS = 32
RBUF = 64 * 1024
MSGS = 12  # SENDs per requester QP
SLOT = 32 * 1024  # B's send buffer per message
FILL = 0xEE  # A's receive buffers before the run

# Case "error".
EBUF = 4096
PAT_W = bytes((i * 13 + 7) & 0xFF for i in range(EBUF))
PAT_R = bytes((i * 29 + 1) & 0xFF for i in range(EBUF))
PAT_B = bytes((i * 3 + 0x40) & 0xFF for i in range(EBUF))


def die(msg):
    """FAIL and exit at once: os._exit, not sys.exit, so that no pyverbs
    destructor runs (ibv_destroy_cq waits for unacknowledged async events:
    a failure around the CQ error must not turn into a hang)."""
    print(f"FAIL: {msg}", flush=True)
    sys.stdout.flush()
    os._exit(1)


def msg_len(k):
    return 20000 + 1000 * k


def msg_base(s, k):
    return (0x5A << 56) | (s << 48) | (k << 40)


def msg_bytes(s, k):
    base = msg_base(s, k)
    return array.array("Q", (base | w for w in range(msg_len(k) // 8))).tobytes()


def decode(word):
    """(sender, message, word) of a payload word, None if not one."""
    if word >> 56 != 0x5A:
        return None
    return (word >> 48) & 0xFF, (word >> 40) & 0xFF, word & 0xFF_FFFF_FFFF


def wc_str(wc):
    return f"wr_id {wc.wr_id} status {wc.status} opcode {wc.opcode} byte_len {wc.byte_len} qp_num {wc.qp_num}"


def poll_n(cq, n, timeout, what):
    """Up to n completions of cq within timeout s (fewer if it passes)."""
    got = []
    end = time.time() + timeout
    while len(got) < n and time.time() < end:
        npolled, wcs = cq.poll(n - len(got))
        got.extend(wcs[:npolled])
        if not npolled:
            time.sleep(0.002)
    if len(got) < n:
        print(f"# {what}: {len(got)} of {n} completions within {timeout:.0f} s", flush=True)
    return got


def expect_one(cq, wr_id, status, timeout, what):
    got = poll_n(cq, 1, timeout, what)
    if not got:
        die(f"{what}: no completion within {timeout:.0f} s")
    wc = got[0]
    if wc.wr_id != wr_id or wc.status != status:
        die(f"{what}: completion {wc_str(wc)}, expected wr_id {wr_id} status {status}")
    return wc


def expect_none(cq, timeout, what):
    got = []
    end = time.time() + timeout
    while time.time() < end:
        npolled, wcs = cq.poll(1)
        if npolled:
            got.append(wcs[0])
        time.sleep(0.01)
    if got:
        die(f"{what}: unexpected completions: {[wc_str(w) for w in got]}")


def recv(link, what):
    try:
        return link.recv()
    except (OSError, ValueError) as ex:
        die(f"link to the peer: no {what}: {ex!r}")
    return None


def rc_qp(pd, scq, rcq, send_wr, recv_wr, srq=None):
    cap = QPCap(max_send_wr=send_wr, max_recv_wr=recv_wr, max_send_sge=1, max_recv_sge=1)
    return QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=scq, rcq=rcq, srq=srq, cap=cap))


def gid_of(ctx, gid_index):
    return str(ctx.query_gid(1, gid_index))


def post_send(qp, wr_id, opcode, addr, length, lkey, rkey=None, raddr=None):
    wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[SGE(addr, length, lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    if rkey is not None:
        wr.set_wr_rdma(rkey, raddr)
    qp.post_send(wr)


# ---- case "srq" ----

def srq_requester(link, ctx, pd, gid_index):
    peer = recv(link, "responder QPs")
    cq = CQ(ctx, 4 * MSGS)
    qps = [rc_qp(pd, cq, cq, 2 * MSGS, 1) for _ in range(2)]
    mr = MR(pd, 2 * MSGS * SLOT, LW)
    for s in range(2):
        for k in range(MSGS):
            data = msg_bytes(s, k)
            mr.write(data, len(data), (s * MSGS + k) * SLOT)
    for s, qp in enumerate(qps):
        connect_qp(qp, gid_index, peer["qpns"][s], GID(peer["gid"]), 0, 1)
    link.send({"qpns": [qp.qp_num for qp in qps], "gid": gid_of(ctx, gid_index)})
    recv(link, "ready")
    # Every SEND of both QPs is posted before either is polled.
    for k in range(MSGS):
        for s, qp in enumerate(qps):
            post_send(qp, s * 1000 + k, e.IBV_WR_SEND, mr.buf + (s * MSGS + k) * SLOT, msg_len(k), mr.lkey)
    t0 = time.time()
    wcs = poll_n(cq, 2 * MSGS, 60, "B's SEND completions")
    bad = [wc_str(wc) for wc in wcs if wc.status != SUCCESS]
    done = len(wcs) == 2 * MSGS and not bad
    link.send({"sends": len(wcs), "bad": bad, "secs": round(time.time() - t0, 2)})
    recv(link, "the responder's verdict")
    if not done:
        die(f"{len(wcs)} of {2 * MSGS} SEND completions, in error: {bad}")
    ok(f"{2 * MSGS} SENDs from 2 QPs completed successfully in {time.time() - t0:.1f} s")


def check_recv(j, s, wc, mr, seen_wr_ids):
    """The errors of completion j of qa[s] (expected: message j of sender s)."""
    errs = []
    where = f"qa{s + 1} (qpn {wc.qp_num}) completion {j}, wr_id {wc.wr_id}"
    if wc.status != SUCCESS:
        return [f"{where}: status {wc.status}, expected {SUCCESS} (success)"]
    if wc.opcode != e.IBV_WC_RECV:
        errs.append(f"{where}: opcode {wc.opcode}, expected IBV_WC_RECV ({e.IBV_WC_RECV})")
    if not 0 <= wc.wr_id < RECVS:
        return errs + [f"{where}: wr_id {wc.wr_id} names no posted buffer (0..{RECVS - 1})"]
    if wc.wr_id in seen_wr_ids:
        errs.append(f"{where}: buffer {wc.wr_id} completed twice")
    seen_wr_ids.add(wc.wr_id)
    buf = mr.read(RBUF, wc.wr_id * RBUF)
    held = decode(array.array("Q", buf[:8])[0])
    if held is None:
        errs.append(f"{where}: buffer holds no message (first word {buf[:8].hex()})")
    elif held[:2] != (s, j):
        sender, k = held[:2]
        why = "out of order" if sender == s else "qp_num is not the QP whose peer sent it"
        errs.append(f"{where}: buffer holds message {k} of B's QP {sender + 1} (peer of qa{sender + 1}), "
                    f"expected message {j} of B's QP {s + 1}: {why}")
    want_len = msg_len(j)
    if wc.byte_len != want_len:
        errs.append(f"{where}: byte_len {wc.byte_len}, expected {want_len}")
    want = msg_bytes(s, j)
    if buf[:want_len] != want:
        got_w = array.array("Q", buf[:want_len])
        want_w = array.array("Q", want)
        diff = [w for w in range(len(want_w)) if got_w[w] != want_w[w]]
        w0 = diff[0]
        errs.append(f"{where}: {len(diff)} of {len(want_w)} words differ from message ({s}, {j}); "
                    f"first at byte {8 * w0}: {got_w[w0]:#018x} (decodes as {decode(got_w[w0])}), "
                    f"expected {want_w[w0]:#018x}")
    tail = buf[want_len:]
    if tail.count(FILL) != len(tail):
        at = next(i for i, b in enumerate(tail) if b != FILL)
        errs.append(f"{where}: bytes written beyond the message's {want_len}: first at byte {want_len + at}")
    return errs


def srq_responder(link, ctx, pd, gid_index):
    cq = CQ(ctx, 2 * SRQ_WR)
    srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=SRQ_WR, max_sge=1)))
    qas = [rc_qp(pd, cq, cq, 4, 0, srq) for _ in range(2)]
    mr = MR(pd, RECVS * RBUF, LW)
    mr.write(bytes([FILL]) * (RECVS * RBUF), RECVS * RBUF, 0)
    for i in range(RECVS):
        srq.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf + i * RBUF, RBUF, mr.lkey)]))
    ok(f"SRQ ({SRQ_WR} WRs) for qa1 {qas[0].qp_num} and qa2 {qas[1].qp_num}, {RECVS} receives of {RBUF} bytes posted")
    link.send({"qpns": [qa.qp_num for qa in qas], "gid": gid_of(ctx, gid_index)})
    peer = recv(link, "requester QPs")
    for s, qa in enumerate(qas):
        connect_qp(qa, gid_index, peer["qpns"][s], GID(peer["gid"]), 0, 1)
    link.send({"ready": True})
    total = 2 * MSGS
    wcs = poll_n(cq, total, 60, "receive completions")
    report = recv(link, "the requester's result")
    errs = []
    if report["bad"] or report["sends"] != total:
        errs.append(f"host B: {report['sends']} of {total} SEND completions, in error: {report['bad']}")
    qpn_index = {qa.qp_num: s for s, qa in enumerate(qas)}
    count = [0, 0]
    order = [[], []]
    seen = set()
    for wc in wcs:
        s = qpn_index.get(wc.qp_num)
        if s is None:
            errs.append(f"completion {wc_str(wc)}: qp_num is neither qa1 {qas[0].qp_num} nor qa2 {qas[1].qp_num}")
            continue
        if count[s] >= MSGS:
            errs.append(f"qa{s + 1}: completion beyond its peer's {MSGS} SENDs: {wc_str(wc)}")
            continue
        errs.extend(check_recv(count[s], s, wc, mr, seen))
        order[s].append(wc.wr_id)
        count[s] += 1
    if len(wcs) < total:
        errs.append(f"{len(wcs)} of {total} receive completions within 60 s (qa1 {count[0]}, qa2 {count[1]})")
    npolled, extra = cq.poll(4)
    if npolled:
        errs.append(f"completions beyond the {total} sent: {[wc_str(w) for w in extra[:npolled]]}")
    for msg in errs:
        print(f"FAIL: {msg}", flush=True)
    link.send({"ok": not errs})
    if errs:
        die(f"case srq: {len(errs)} mismatches")
    for s in range(2):
        ok(f"qa{s + 1}: {MSGS} messages in order, lengths, data and qp_num right; SRQ buffers taken: {order[s]}")
    if any(o != sorted(o) for o in order):
        ok("the SRQ handed out receives out of message order at least once (reordering reached the responder)")
    ok(f"shared SRQ: {total} SENDs from 2 QPs placed, none mixed up, in order per QP")


# ---- case "overflow" ----

def overflow_requester(link, ctx, pd, gid_index):
    peer = recv(link, "responder QP")
    n = peer["n"]
    cq = CQ(ctx, 2 * n + 4)
    qp = rc_qp(pd, cq, cq, n, 1)
    mr = MR(pd, 512, LW)
    connect_qp(qp, gid_index, peer["qpn"], GID(peer["gid"]), 0, 1)
    link.send({"qpn": qp.qp_num, "gid": gid_of(ctx, gid_index)})
    recv(link, "ready")
    for k in range(n):
        post_send(qp, k, e.IBV_WR_SEND, mr.buf, 512, mr.lkey)
    t0 = time.time()
    wcs = poll_n(cq, n, 20, "B's SEND completions")
    statuses = [(wc.wr_id, wc.status) for wc in wcs]
    ok(f"{n} SENDs posted; completions (wr_id, status) within {time.time() - t0:.1f} s: {statuses}")
    link.send({"statuses": statuses})
    recv(link, "the responder's verdict")


def event_fds(before):
    """The fds opened since `before` that are uverbs event files (the new
    context's async event fd: it opens no completion channel)."""
    fds = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd in before:
            continue
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if "infinibandevent" in target:
            fds.append(fd)
    return fds


def event_name(t):
    try:
        from pyverbs.device import translate_event_type
        return translate_event_type(t)
    except (ImportError, KeyError):
        return str(t)


def overflow_responder(link, dev, gid_index):
    before = set(int(n) for n in os.listdir("/proc/self/fd"))
    ctx = Context(name=dev)
    fds = event_fds(before)
    if not fds:
        die("cannot find the context's async event fd (no new anon_inode:[infinibandevent] in /proc/self/fd)")
    for fd in fds:
        # get_async_event must not block (pyverbs holds the GIL in it).
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
    pd = PD(ctx)
    rcq = CQ(ctx, 1)
    scq = CQ(ctx, 8)
    n = rcq.cqe + 3
    ok(f"receive CQ created with cqe=1 holds {rcq.cqe}: {n} receives and SENDs")
    qp = rc_qp(pd, scq, rcq, 4, n)
    mr = MR(pd, n * 1024, LW)
    link.send({"qpn": qp.qp_num, "gid": gid_of(ctx, gid_index), "n": n})
    peer = recv(link, "requester QP")
    connect_qp(qp, gid_index, peer["qpn"], GID(peer["gid"]), 0, 1)
    # Receives are posted once the QP left RESET (posting there is invalid).
    for k in range(n):
        qp.post_recv(RecvWR(wr_id=k, num_sge=1, sg=[SGE(mr.buf + k * 1024, 1024, mr.lkey)]))
    link.send({"ready": True})
    t0 = time.time()
    deadline = t0 + 10
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    events, cq_err_at, err_at, state = [], None, None, None
    while time.time() < deadline and (cq_err_at is None or err_at is None):
        if cq_err_at is None:
            left = max(1, int((deadline - time.time()) * 1000))
            if poller.poll(min(20, left)):
                try:
                    ev = ctx.get_async_event()
                except PyverbsRDMAError:
                    ev = None  # another fd, or nothing after all
                if ev is not None:
                    t = ev.event_type
                    ev.ack()
                    events.append(event_name(t))
                    if t == e.IBV_EVENT_CQ_ERR:
                        cq_err_at = time.time() - t0
        else:
            time.sleep(0.01)
        state = qp_state(qp)
        if state == e.IBV_QPS_ERR and err_at is None:
            err_at = time.time() - t0
    while cq_err_at is not None and poller.poll(0):
        # Events queued behind it: acknowledged and logged.
        try:
            ev = ctx.get_async_event()
        except PyverbsRDMAError:
            break
        events.append(event_name(ev.event_type))
        ev.ack()
    report = recv(link, "the requester's completions")
    print(f"# host B's SEND completions (wr_id, status): {report['statuses']}", flush=True)
    errs = []
    if cq_err_at is None:
        errs.append(f"no IBV_EVENT_CQ_ERR within 10 s of {n} SENDs into a CQ of {rcq.cqe} "
                    f"(async events seen: {events or 'none'})")
    if err_at is None:
        errs.append(f"QP state {state} 10 s after the CQ overflowed, expected IBV_QPS_ERR ({e.IBV_QPS_ERR})")
    link.send({"ok": not errs})
    for msg in errs:
        print(f"FAIL: {msg}", flush=True)
    if errs:
        die("case overflow")
    ok(f"IBV_EVENT_CQ_ERR after {cq_err_at:.3f} s (async events: {events})")
    ok(f"QP in IBV_QPS_ERR after {err_at:.3f} s")
    # The event is acknowledged; exit without destroying (see die()).
    sys.stdout.flush()
    os._exit(0)


# ---- case "error" ----

def error_requester(link, ctx, pd, gid_index):
    peer = recv(link, "responder QP")
    cq = CQ(ctx, 8)
    qp = rc_qp(pd, cq, cq, 4, 1)
    mr = MR(pd, EBUF, LW)
    mr.write(PAT_B, EBUF, 0)
    connect_qp(qp, gid_index, peer["qpn"], GID(peer["gid"]), 0, 1)
    link.send({"qpn": qp.qp_num, "gid": gid_of(ctx, gid_index)})
    recv(link, "go (the responder is in error)")
    post_send(qp, 1, e.IBV_WR_RDMA_WRITE, mr.buf, EBUF, mr.lkey, peer["rkey"], peer["addr"])
    post_send(qp, 2, e.IBV_WR_SEND, mr.buf, EBUF, mr.lkey)
    t0 = time.time()
    wcs = poll_n(cq, 2, 20, "B's WRITE and SEND completions")
    secs = time.time() - t0
    got = [(wc.wr_id, wc.status) for wc in wcs]
    good = [wc_str(wc) for wc in wcs if wc.status == SUCCESS]
    link.send({"wcs": got, "good": good, "secs": round(secs, 2), "state": qp_state(qp)})
    recv(link, "the responder's verdict")
    if good:
        die(f"towards a responder in error, completed successfully: {good}")
    ok(f"WRITE and SEND towards a responder in error: completions (wr_id, status) {got or 'none'} "
       f"within {secs:.1f} s, none successful; B's QP state {qp_state(qp)}")


# ---- case "ud_error" ----

UD_QKEY = 0x11111111
UD_LATE = 4
UD_LEN = 256


def ud_qp(ctx, pd, scq, rcq, send_wr, recv_wr):
    cap = QPCap(max_send_wr=send_wr, max_recv_wr=recv_wr, max_send_sge=1, max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=scq, rcq=rcq, cap=cap))
    a = QPAttr()
    a.qkey = UD_QKEY
    a.port_num = 1
    qp.to_rts(a)
    return qp


def ud_bytes(k):
    return bytes([0x80 | k]) * UD_LEN


def ud_error_requester(link, ctx, pd, gid_index):
    peer = recv(link, "responder UD QP")
    first = peer["first"]
    cq = CQ(ctx, 64)
    qp = ud_qp(ctx, pd, cq, cq, 32, 1)
    mr = MR(pd, UD_LEN * (first + UD_LATE), LW)
    gr = GlobalRoute(dgid=GID(peer["gid"]), sgid_index=gid_index)
    ah = AH(pd, attr=AHAttr(gr=gr, is_global=1, port_num=1))

    def send(k):
        mr.write(ud_bytes(k), UD_LEN, k * UD_LEN)
        wr = SendWR(wr_id=k, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf + k * UD_LEN, UD_LEN, mr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_ud(ah, peer["qpn"], UD_QKEY)
        qp.post_send(wr)
        poll_n(cq, 1, 10, f"datagram {k} sent")
        time.sleep(0.05)

    for k in range(first):
        send(k)
    link.send({"sent": first})
    recv(link, "the responder is in error")
    for k in range(first, first + UD_LATE):
        send(k)
    link.send({"sent": UD_LATE})
    recv(link, "the responder's verdict")
    ok(f"{first} datagrams, then {UD_LATE} more to the responder in error")


def ud_error_responder(link, ctx, pd, gid_index, dev):
    rcq = CQ(ctx, 1)
    scq = CQ(ctx, 4)
    first = rcq.cqe + 3
    n = rcq.cqe + 8
    qp = ud_qp(ctx, pd, scq, rcq, 1, n)
    mr = MR(pd, n * 1024, LW)
    mr.write(bytes([FILL]) * (n * 1024), n * 1024, 0)
    for k in range(n):
        qp.post_recv(RecvWR(wr_id=k, num_sge=1, sg=[SGE(mr.buf + k * 1024, 1024, mr.lkey)]))
    link.send({"qpn": qp.qp_num, "gid": gid_of(ctx, gid_index), "first": first})
    recv(link, "the first datagrams sent")
    deadline = time.time() + 10
    while qp_state(qp) != e.IBV_QPS_ERR and time.time() < deadline:
        time.sleep(0.05)
    state = qp_state(qp)
    if state != e.IBV_QPS_ERR:
        link.send({"error": False})
        die(f"UD QP state {state} after {first} datagrams into a CQ of {rcq.cqe}, expected IBV_QPS_ERR")
    ok(f"UD QP in IBV_QPS_ERR after {first} datagrams into a receive CQ of {rcq.cqe}")
    before = rx_qp_in_error(dev)
    link.send({"error": True})
    recv(link, "the late datagrams sent")
    time.sleep(1)
    grown = rx_qp_in_error(dev) - before
    late = {ud_bytes(k)[:1] for k in range(first, first + UD_LATE)}
    # A datagram lands after the 40-byte GRH area of its receive.
    holders = [k for k in range(n) if mr.read(1, k * 1024 + 40) in late]
    link.send({"done": True})
    if holders:
        die(f"receives {holders} hold a datagram that arrived after the QP was in error")
    ok("no receive holds a late datagram's bytes")
    if grown < UD_LATE:
        die(f"rx_qp_in_error grew by {grown} for {UD_LATE} datagrams to the QP in error")
    ok(f"rx_qp_in_error +{grown} for the {UD_LATE} late datagrams")
    sys.stdout.flush()
    os._exit(0)


# ---- case "reset" ----

OP_SEND, OP_WRITE = 0x01, 0x03
R_MTU = 1024  # connect_qp's path MTU
# Several packets whatever the payload size (up to 9216 B on jumbo planes).
R_SEND = 4 * 9216
R_PAT = bytes((i * 11 + 5) & 0xFF for i in range(R_SEND))


def reset_requester(link, ctx, pd, gid_index):
    peer = recv(link, "A's QP")
    cq = CQ(ctx, 32)
    mr = MR(pd, R_SEND, LW | RW)
    mr.write(R_PAT, R_SEND, 0)

    def qp_to(p):
        qp = rc_qp(pd, cq, cq, 8, 1)
        connect_qp(qp, gid_index, p["qpn"], GID(p["gid"]), RW, 1)
        link.send({"qpn": qp.qp_num, "gid": gid_of(ctx, gid_index), "rkey": mr.rkey, "addr": mr.buf})
        return qp

    qb = qp_to(peer)
    recv(link, "A connected")
    # The SEND's second packet, at the path MTU or at the wider payload.
    drop = TcDrop(*([("u8", OP_SEND, AT_OPCODE), ("u32", size, AT_DATA_OFFSET)]
                    for size in packet_payloads(R_MTU)))
    post_send(qb, 1, e.IBV_WR_SEND, mr.buf, R_SEND, mr.lkey)
    link.send({"sent": True})
    recv(link, "A reset its QP")
    dropped = drop.remove()
    link.send({"dropped": dropped})
    # A's QP is gone: qb's SEND ends in error by its retry budget.
    wcs = poll_n(cq, 1, 20, "the SEND to the QP that was reset")
    qb2 = qp_to(recv(link, "A's QP again"))
    recv(link, "A reconnected")
    post_send(qb2, 2, e.IBV_WR_SEND, mr.buf, 100, mr.lkey)
    wc = poll_n(cq, 1, 20, "the SEND after the reconnect")
    link.send({"send": [(w.wr_id, w.status) for w in wc], "first": [(w.wr_id, w.status) for w in wcs]})
    qb3 = qp_to(recv(link, "A's QP on an empty SRQ"))
    recv(link, "A connected it")
    wr = SendWR(wr_id=3, opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)],
                send_flags=e.IBV_SEND_SIGNALED, imm_data=7)
    p3 = recv(link, "A's region")
    wr.set_wr_rdma(p3["rkey"], p3["addr"])
    qb3.post_send(wr)
    wc = poll_n(cq, 1, 20, "the WRITE_IMM to an empty SRQ")
    link.send({"write_imm": [(w.wr_id, w.status) for w in wc]})
    recv(link, "the responder's verdict")
    for q in (qb, qb2, qb3):
        q.close()


def reset_responder(link, ctx, pd, gid_index):
    cq = CQ(ctx, 32)
    srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=8, max_sge=1)))
    mr = MR(pd, 8 * R_SEND, LW | RW)
    mr.write(bytes([FILL]) * (8 * R_SEND), 8 * R_SEND, 0)
    for k in range(4):
        srq.post_recv(RecvWR(wr_id=10 + k, num_sge=1, sg=[SGE(mr.buf + k * R_SEND, R_SEND, mr.lkey)]))
    qa = rc_qp(pd, cq, cq, 8, 1, srq=srq)
    link.send({"qpn": qa.qp_num, "gid": gid_of(ctx, gid_index)})
    peer = recv(link, "B's QP")
    connect_qp(qa, gid_index, peer["qpn"], GID(peer["gid"]), RW, 1)
    drop = TcDrop([("u8", OP_WRITE, AT_OPCODE)])
    link.send({"connected": True})
    recv(link, "B's SEND posted")
    # Posted only now, 1.5 s before the RESET: WRITEs posted before B had
    # set up its filter and posted its SEND (seconds on a slow host) ran
    # out of their retry budget (5 s without an ACK) before the RESET, and
    # completed in error instead of being in flight.
    for k in (1, 2, 3):
        post_send(qa, k, e.IBV_WR_RDMA_WRITE, mr.buf + 4 * R_SEND, 64, mr.lkey, peer["rkey"], peer["addr"])
    time.sleep(1.5)
    qa.modify(QPAttr(qp_state=e.IBV_QPS_RESET), e.IBV_QP_STATE)
    held = drop.remove()
    link.send({"reset": True})
    if recv(link, "B's drop count")["dropped"] < 1:
        die("B's filter dropped no second packet: the SRQ receive was maybe never partly filled")
    if held < 3:
        die(f"A's filter dropped {held} WRITE packets, expected at least 3: they were not in flight")
    expect_one(cq, 10, FLUSH, 2, "the SRQ receive the partial SEND took, at RESET")
    expect_none(cq, 1, "after RESET (the WRITEs in flight are discarded)")
    ok("RESET: the SRQ receive a partial SEND held came back flushed; the WRITEs in flight completed nothing")
    # RESET -> ERR is not a transition the RDMA core allows; through INIT.
    init = QPAttr(qp_state=e.IBV_QPS_INIT)
    init.pkey_index, init.port_num, init.qp_access_flags = 0, 1, RW
    qa.modify(init, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
    qa.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
    post_send(qa, 99, e.IBV_WR_RDMA_WRITE, mr.buf, 8, mr.lkey, peer["rkey"], peer["addr"])
    expect_one(cq, 99, FLUSH, 2, "the request posted in ERR")
    expect_none(cq, 1, "after RESET -> INIT -> ERR")
    ok("RESET -> INIT -> ERR: only the request posted in ERR was flushed")
    qa.modify(QPAttr(qp_state=e.IBV_QPS_RESET), e.IBV_QP_STATE)
    link.send({"qpn": qa.qp_num, "gid": gid_of(ctx, gid_index)})
    peer2 = recv(link, "B's new QP")
    connect_qp(qa, gid_index, peer2["qpn"], GID(peer2["gid"]), RW, 1)
    link.send({"connected": True})
    wc = expect_one(cq, 11, SUCCESS, 20, "the SEND after the reconnect")
    if wc.byte_len != 100 or mr.read(100, R_SEND) != R_PAT[:100]:
        die(f"the SEND after the reconnect: byte_len {wc.byte_len}, bytes differ from B's")
    post_send(qa, 5, e.IBV_WR_RDMA_WRITE, mr.buf, 64, mr.lkey, peer2["rkey"], peer2["addr"])
    expect_one(cq, 5, SUCCESS, 20, "a WRITE after the reconnect")
    report = recv(link, "B's completions")
    ok(f"reconnected after RESET: B's SEND landed in the next SRQ receive, A's WRITE succeeded "
       f"(B's SEND to the reset QP: {report['first']})")
    # WRITE_IMM to a QP whose SRQ has no receive.
    srq0 = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=4, max_sge=1)))
    q0 = rc_qp(pd, cq, cq, 2, 1, srq=srq0)
    link.send({"qpn": q0.qp_num, "gid": gid_of(ctx, gid_index)})
    p3 = recv(link, "B's third QP")
    connect_qp(q0, gid_index, p3["qpn"], GID(p3["gid"]), RW, 1)
    link.send({"connected": True})
    link.send({"rkey": mr.rkey, "addr": mr.buf + 6 * R_SEND})
    wcs = recv(link, "B's WRITE_IMM completion")["write_imm"]
    bad = [w for w in wcs if w[1] == SUCCESS]
    link.send({"ok": not bad and bool(wcs)})
    if not wcs:
        die("B's WRITE_IMM to an empty SRQ did not complete within 20 s")
    if bad:
        die(f"B's WRITE_IMM to an empty SRQ completed successfully: {wcs}")
    ok(f"WRITE_IMM to an empty SRQ: B's completion (wr_id, status) {wcs}, an error")
    sys.stdout.flush()
    os._exit(0)


def rx_qp_in_error(dev):
    """The device counter rx_qp_in_error of DEV/1 (rdma -j statistic)."""
    try:
        out = subprocess.run(["rdma", "-j", "statistic", "show", "link", f"{dev}/1"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
        data = json.loads(out)
    except (OSError, subprocess.SubprocessError, ValueError) as ex:
        die(f"rdma -j statistic show link {dev}/1: {ex!r}")
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if "rx_qp_in_error" in x:
                return int(x["rx_qp_in_error"])
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    die(f"rdma -j statistic show link {dev}/1 has no rx_qp_in_error: {out.strip()[:400]}")
    return None


def error_responder(link, ctx, pd, gid_index, dev):
    cq = CQ(ctx, 16)
    qp = rc_qp(pd, cq, cq, 4, 4)
    mr_w = MR(pd, EBUF, LW | RW)
    mr_w.write(PAT_W, EBUF, 0)
    mr_r = MR(pd, EBUF, LW)
    mr_r.write(PAT_R, EBUF, 0)
    link.send({"qpn": qp.qp_num, "gid": gid_of(ctx, gid_index), "rkey": mr_w.rkey, "addr": mr_w.buf})
    peer = recv(link, "requester QP")
    connect_qp(qp, gid_index, peer["qpn"], GID(peer["gid"]), RW, 1)
    qp.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(mr_r.buf, EBUF, mr_r.lkey)]))
    qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
    if qp_state(qp) != e.IBV_QPS_ERR:
        die(f"QP state {qp_state(qp)} after modify to IBV_QPS_ERR")
    expect_one(cq, 1, FLUSH, 2, "the receive posted before the error")
    expect_none(cq, 0.3, "after the flush")
    ok("QP moved to IBV_QPS_ERR, its posted receive flushed (IBV_WC_WR_FLUSH_ERR)")
    c0 = rx_qp_in_error(dev)
    link.send({"go": True})
    report = recv(link, "the requester's completions")
    c1 = rx_qp_in_error(dev)
    errs = []
    if report["good"]:
        errs.append(f"host B's requests towards a QP in error completed successfully: {report['good']}")
    print(f"# host B's completions (wr_id, status) {report['wcs']} in {report['secs']} s, its QP state {report['state']}",
          flush=True)
    w = mr_w.read(EBUF, 0)
    if w != PAT_W:
        diff = [i for i in range(EBUF) if w[i] != PAT_W[i]]
        errs.append(f"the REMOTE_WRITE region changed at {len(diff)} bytes (first {diff[:8]}): a WRITE was placed")
    r = mr_r.read(EBUF, 0)
    if r != PAT_R:
        diff = [i for i in range(EBUF) if r[i] != PAT_R[i]]
        errs.append(f"the flushed receive's buffer changed at {len(diff)} bytes (first {diff[:8]}): a SEND was placed")
    if c1 <= c0:
        errs.append(f"rx_qp_in_error did not grow: {c0} before B's requests, {c1} after")
    if qp_state(qp) != e.IBV_QPS_ERR:
        errs.append(f"QP state {qp_state(qp)} after B's requests, expected IBV_QPS_ERR")
    for msg in errs:
        print(f"FAIL: {msg}", flush=True)
    if not errs:
        ok(f"nothing placed: both buffers unchanged; rx_qp_in_error {c0} -> {c1}")
        # Posted in error (no system call): the device tick flushes it.
        qp.post_recv(RecvWR(wr_id=2, num_sge=1, sg=[SGE(mr_r.buf, EBUF, mr_r.lkey)]))
        t0 = time.time()
        got = poll_n(cq, 1, 2, "a receive posted in error")
        if not got:
            errs.append("a receive posted in error did not complete within 2 s")
        elif got[0].wr_id != 2 or got[0].status != FLUSH:
            errs.append(f"a receive posted in error completed {wc_str(got[0])}, expected wr_id 2 status {FLUSH} (WR_FLUSH_ERR)")
        else:
            ok(f"a receive posted in error completed flushed after {time.time() - t0:.3f} s")
        for msg in errs:
            print(f"FAIL: {msg}", flush=True)
    link.send({"ok": not errs})
    if errs:
        die("case error")
    ok("a responder in error placed nothing")


CASES = ("srq", "overflow", "error", "ud_error", "reset")


def requester(dev, gid_index, port, case):
    ctx = Context(name=dev)
    pd = PD(ctx)
    link = Link.accept(port, timeout=LINK_TIMEOUT)
    link.sock.settimeout(LINK_TIMEOUT)
    hello = recv(link, "hello")
    if hello.get("case") != case:
        die(f"the responder runs case {hello.get('case')}, this requester {case}")
    {"srq": srq_requester, "overflow": overflow_requester, "error": error_requester,
     "ud_error": ud_error_requester, "reset": reset_requester}[case](link, ctx, pd, gid_index)
    link.close()


def responder(dev, gid_index, host, port, case):
    link = Link.dial(host, port, timeout=LINK_TIMEOUT)
    link.send({"case": case})
    if case == "overflow":
        overflow_responder(link, dev, gid_index)  # opens its own context
        return
    ctx = Context(name=dev)
    pd = PD(ctx)
    if case == "srq":
        srq_responder(link, ctx, pd, gid_index)
    elif case == "ud_error":
        ud_error_responder(link, ctx, pd, gid_index, dev)
    elif case == "reset":
        reset_responder(link, ctx, pd, gid_index)
    else:
        error_responder(link, ctx, pd, gid_index, dev)
    link.close()


def main():
    a = sys.argv[1:]
    try:
        if len(a) == 5 and a[0] == "requester" and a[4] in CASES:
            requester(a[1], int(a[2]), int(a[3]), a[4])
        elif len(a) == 6 and a[0] == "responder" and a[5] in CASES:
            responder(a[1], int(a[2]), a[3], int(a[4]), a[5])
        else:
            die(__doc__)
    except PyverbsError as ex:
        die(f"verbs call failed: {ex}")
    except (socket.timeout, ConnectionError) as ex:
        die(f"link to the peer: {ex!r}")


if __name__ == "__main__":
    main()
