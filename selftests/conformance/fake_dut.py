#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A small MetaRoCE responder in Python, with its agent, so that the
conformance suite can be run, and shown to fail, without the rig.

  fake_dut.py --addr 127.0.0.2 --port 14792 --agent-port 14793 [--bug NAME]

It is the receiver half of an RC QP after protocol.md 3: per-path SACK
tracking with floors and generations (3.1), the message window, duplicate
detection and direct placement of WRITE/WRITE_IMM/SEND/SEND_IMM (3.2),
completions in MSN order (3.3), an ACK per packet (k = 1, allowed by 3.4),
the last one that moved cum_msn sent again when the QP is destroyed, NAKs with the QP then in error, PROBE
replies (strangers rate-limited, 1.6) and PLANES answers (1.8); and a
plain sender after 4 (four paths sprayed round robin, SACK loss detection
with retransmission on another path, RTO, probes and path replacement,
verdict probes, the retry budget), which carries the agent's WRITEs and
the READ_RESP and ATOMIC_RESP answers. It is no reference: timers are
fixed (RTO 30 ms) and windows are 8 packets a path. Each --bug breaks one
rule on purpose, for the demonstration that the suite names the clause:

  accept-rsn-on-write   places a WRITE whose rsn is not 0 (1.3, BadRsn)
  no-ce-echo            never sets CE in ACKs (1, 3.4)
  no-last-word          destroys a QP without sending again the ACK that
                        last moved its cum_msn (3.4)
  go-back-n             resends a lost packet and every later one of its
                        path (4.2)
  planes-no-backoff     repeats its PLANES every 1 ms, never doubling
                        (1.8)
"""

import argparse
import json
import random
import select
import socket
import socketserver
import struct
import threading
import time

import codec
from codec import P

BUGS = ("accept-rsn-on-write", "no-ce-echo", "no-last-word", "go-back-n", "planes-no-backoff")
PATHS, PWND, RTO, PROBES_TO_FAIL, GIVE_UP = 4, 8, 0.03, 3, 1.0
MSG_WINDOW = 64  # protocol.md 1.4: its ACKs say no msg_window, so 64
MR_VA = 0x10000


class Qp:
    def __init__(self, qpn, req, rnd):
        self.qpn, self.psn = qpn, rnd.randrange(1 << 24)
        self.peer_qpn, self.peer, self.head = req["peer_qpn"], req["peer_addr"], req["peer_psn"]
        self.mtu = req["mtu"]
        self.mem = bytearray(req.get("buf_len", 1 << 16))
        self.rkey = rnd.randrange(1, 1 << 32)
        self.error = False
        self.last_word = None       # (ACK, port, address): the last that moved cum_msn
        self.failed = None          # (msn, syndrome, path_id, psn) of the failed message
        self.paths = {}             # slot -> [generation, cum_psn, set of SACKed PSNs]
        self.msgs = {}              # msn -> dict(opcode, msg_len, rsn, got, imm)
        self.recvs = []             # posted receives: (wr_id, offset, len)
        self.recv_cq = []
        self.send_cq = []
        self.got_known = False      # the peer said it holds our plane list
        self.known = False          # we hold the peer's
        self.announce_at, self.announce_gap = time.monotonic() + 0.001, 0.001
        # The sender (section 4): messages by MSN, paths by slot, the
        # packets waiting to go (retransmissions first).
        self.next_msn = self.psn
        self.tx = {}                # msn -> dict(opcode, data, remote_va, rkey, imm, wr_id, sent, done, ...)
        self.tx_paths = {slot: TxPath(slot, 0, rnd) for slot in range(PATHS)}
        self.queue = []             # (msn, packet index), retransmissions first
        self.rr = 0
        self.progress_at = None     # the retry budget's clock
        self.pending_atomics = {}   # msn -> (opcode, remote_va, operands) checked, run at completion


class UdQp:
    """A UD QP: datagrams to the next posted receive (after a 40-byte GRH
    slot, as verbs lays them out), when the Q_Key matches."""

    def __init__(self, qpn, qkey, buf_len):
        self.qpn, self.qkey, self.psn = qpn, qkey, 0
        self.mem = bytearray(buf_len)
        self.recvs, self.recv_cq, self.send_cq = [], [], []
        self.error = False
        self.tx = {}


class TxPath:
    """A sender path (4.1): slot, generation, UDP source port, PSNs."""

    def __init__(self, slot, gen, rnd):
        self.slot, self.gen = slot, gen
        self.sport = rnd.randrange(49152, 65536)
        self.next_psn = self.floor = 0
        self.inflight = {}          # psn -> (msn, index)
        self.acked = set()
        self.state = "active"
        self.rto_at = None
        self.unanswered = 0

    @property
    def pid(self):
        return codec.path_id(self.gen, self.slot)


def failed_status(m):
    """The ibv_wc_status of a message a NAK failed: remote access, remote
    operation or remote invalid request error."""
    return {1: 10, 2: 11, 3: 9}.get(m.get("syndrome"), 11)


class Fake:
    def __init__(self, addr, port, bug=None, planes=1):
        self.addr, self.port, self.bug = addr, port, bug
        # Plane i's address: 127.0.i.2 style, for the PLANES lists (1.8).
        self.plane_addrs = [addr] + [f"127.0.{i}.{addr.rsplit('.', 1)[1]}" for i in range(1, planes)]
        self.rnd = random.Random()
        self.qps = {}
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
        self.sock.bind((addr, port))
        self.tx = {}
        self.bucket, self.bucket_at = 32.0, time.monotonic()

    # ---- the wire ----
    def send(self, raw, sport, dst):
        s = self.tx.get(sport)
        if s is None:
            s = self.tx[sport] = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 2)
            s.bind((self.addr, sport))
        s.sendto(raw, (dst, self.port))

    def serve(self):
        while True:
            if not select.select([self.sock], [], [], 0.5)[0]:
                continue
            raw, anc, _, (src, sport) = self.sock.recvmsg(65535, socket.CMSG_SPACE(4))
            tos = next((c[2][0] for c in anc if c[1] == socket.IP_TOS), 0)
            with self.lock:
                self.receive(raw, src, sport, tos & 3 == 3)

    def receive(self, raw, src, sport, ce):
        try:
            pkt = codec.decode(raw)
        except codec.Malformed as e:
            if not (self.bug == "accept-rsn-on-write" and e.reason == "BadRsn"):
                return
            pkt = codec.decode(codec._set(raw, 30, ">H", 0))
        if isinstance(pkt, codec.Probe):
            if pkt.reply:
                qp = self.qps.get(pkt.dst_qpn)
                return qp and self.probe_reply(qp, pkt)
            return self.probe(pkt, src, sport)
        qp = self.qps.get(pkt.dst_qpn)
        if isinstance(qp, UdQp):
            if isinstance(pkt, codec.Data) and pkt.opcode == P.OP_UD_SEND and pkt.rkey == qp.qkey and qp.recvs:
                wr_id, off, n = qp.recvs.pop(0)
                if 40 + len(pkt.payload) <= n:
                    qp.mem[off + 40:off + 40 + len(pkt.payload)] = pkt.payload
                    qp.recv_cq.append(dict(wr_id=wr_id, status=0, byte_len=40 + len(pkt.payload),
                                           src_qp=pkt.remote_va, imm=pkt.imm if pkt.flags & P.FLAG_IMM else None))
            return
        if qp is None or src != qp.peer:
            return
        if isinstance(pkt, codec.Planes):
            return self.planes(qp, pkt, src)
        if isinstance(pkt, codec.Data):
            return self.data(qp, pkt, src, sport, ce)
        if isinstance(pkt, codec.Ack):
            return self.ack(qp, pkt)
        if isinstance(pkt, codec.Nak):
            return self.nak_in(qp, pkt)

    def probe(self, p, src, sport):
        if p.reply:
            return
        qp = self.qps.get(p.dst_qpn)
        if qp is not None and qp.peer == src:
            qpn = qp.peer_qpn
        else:
            now = time.monotonic()
            self.bucket = min(32.0, self.bucket + 100 * (now - self.bucket_at))
            self.bucket_at = now
            if self.bucket < 1:
                return
            self.bucket -= 1
            qpn = 0
        self.send(codec.Probe(qpn, p.path_id, p.seq, p.timestamp, True).encode(), sport, src)

    def planes(self, qp, p, src):
        if p.src_qpn != qp.peer_qpn:
            return
        qp.got_known |= p.known
        qp.known = True
        if not p.known or p.confirm:
            answer = codec.Planes(qp.peer_qpn, qp.qpn, self.plane_addrs, True, not qp.got_known)
            self.sock.sendto(answer.encode(), (src, self.port))

    # ---- 3.1-3.4 ----
    def data(self, qp, d, src, sport, ce):
        rel = (d.msn - qp.head + (1 << 31)) % (1 << 32) - (1 << 31)
        if qp.error:
            if qp.failed and d.msn == qp.failed[0]:
                self.nak(qp, src, sport)
            return
        if codec.check_segmentation(d, qp.mtu) or rel >= MSG_WINDOW or rel < -MSG_WINDOW:
            return
        if d.flags & P.FLAG_PEER_PSN:
            return  # this fake's directions are numbered from the peer's PSN
        m = qp.msgs.get(d.msn)
        if m is not None and (m["opcode"], m["msg_len"], m["rsn"]) != (d.opcode, d.msg_len, d.rsn):
            return  # Inconsistent
        gen, slot = codec.split_path_id(d.path_id)
        st = qp.paths.get(slot)
        newer = st is None or 0 < (gen - st[0]) % 1024 < 512
        if newer:
            st = qp.paths[slot] = [gen, 0, set()]
        track = st[0] == gen
        if track:
            floor = d.psn - d.floor_delta
            if floor > st[1]:
                st[1] = floor
                st[2] = {p for p in st[2] if p >= floor}
            if d.psn - st[1] > 256:
                return  # PathOutOfWindow
            st[2].add(d.psn)
            while st[1] in st[2]:
                st[2].discard(st[1])
                st[1] += 1
        duplicate = rel < 0 or (m is not None and d.offset // qp.mtu in m["got"])
        moved = False
        if not duplicate:
            if m is None:
                m = qp.msgs[d.msn] = dict(opcode=d.opcode, msg_len=d.msg_len, rsn=d.rsn, got=set(), imm=d.imm,
                                          remote_va=d.remote_va)
            syndrome = self.place(qp, d)
            if syndrome:
                qp.failed = (d.msn, syndrome, d.path_id, d.psn)
                qp.error = True
                self.nak(qp, src, sport)
            else:
                m["got"].add(d.offset // qp.mtu)
                moved = self.complete(qp)
        if not track:
            return  # stale generation: placed, never acknowledged
        ack = codec.Ack(qp.peer_qpn, d.path_id, st[1] & 0xFFFFFFFF,
                        sum(1 << (p - st[1] - 1) for p in st[2] if 0 <= p - st[1] - 1 < 256),
                        d.timestamp, qp.head, 0, ce and self.bug != "no-ce-echo").encode()
        self.send(ack, sport, src)
        if moved:
            qp.last_word = (ack, sport, src)

    def place(self, qp, d):
        """Places `d`; returns a NAK syndrome when it cannot (3.2)."""
        if d.opcode in (P.OP_WRITE, P.OP_WRITE_IMM):
            at = d.remote_va - MR_VA
            if d.rkey != qp.rkey:
                return 1
            if at < 0 or at + d.msg_len > len(qp.mem):
                return 1
            qp.mem[at + d.offset:at + d.offset + len(d.payload)] = d.payload
        elif d.opcode == P.OP_READ_REQ:
            if d.msg_len > codec.MAX_MSG_PACKETS * qp.mtu:
                return 3
            at = d.remote_va - MR_VA
            if d.rkey != qp.rkey or at < 0 or at + d.msg_len > len(qp.mem):
                return 1
            return 0
        elif d.opcode in (P.OP_FETCH_ADD, P.OP_CMP_SWAP):
            at = d.remote_va - MR_VA
            if d.rkey != qp.rkey or at < 0 or at + 8 > len(qp.mem):
                return 1
            if at % 8:
                return 3
            qp.pending_atomics[d.msn] = (d.opcode, at, d.payload)
            return 0
        if d.opcode in (P.OP_SEND, P.OP_SEND_IMM, P.OP_WRITE_IMM):
            n = d.rsn  # receive rsn, counted from the first (1.3)
            if n >= len(qp.recvs) or (d.opcode != P.OP_WRITE_IMM and qp.recvs[n][2] < d.msg_len):
                return 3
            if d.opcode != P.OP_WRITE_IMM:
                at = qp.recvs[n][1] + d.offset
                qp.mem[at:at + len(d.payload)] = d.payload
        elif d.opcode not in (P.OP_WRITE, P.OP_READ_REQ, P.OP_FETCH_ADD, P.OP_CMP_SWAP):
            return 2
        return 0

    def complete(self, qp):
        """Releases completions in MSN order (3.3); True if cum_msn moved."""
        moved = False
        while True:
            m = qp.msgs.get(qp.head)
            packets = 1 if m and m["opcode"] == P.OP_READ_REQ else len(codec.segments(m["msg_len"], qp.mtu)) if m else 0
            if m is None or len(m["got"]) < packets:
                return moved
            if m["opcode"] in (P.OP_SEND, P.OP_SEND_IMM, P.OP_WRITE_IMM):
                wr_id = qp.recvs[m["rsn"]][0]
                qp.recv_cq.append(dict(wr_id=wr_id, status=0, byte_len=m["msg_len"],
                                       imm=m["imm"] if m["opcode"] != P.OP_SEND else None))
            if m["opcode"] == P.OP_READ_REQ:
                at = m["remote_va"] - MR_VA
                self.post(qp, P.OP_READ_RESP, bytes(qp.mem[at:at + m["msg_len"]]), imm=qp.head)
            elif qp.head in qp.pending_atomics:
                op, at, operands = qp.pending_atomics.pop(qp.head)
                old = int.from_bytes(qp.mem[at:at + 8], "little")
                if op == P.OP_FETCH_ADD:
                    new = (old + struct.unpack(">Q", operands)[0]) & (2**64 - 1)
                else:
                    compare, swap = struct.unpack(">QQ", operands)
                    new = swap if old == compare else old
                qp.mem[at:at + 8] = new.to_bytes(8, "little")
                self.post(qp, P.OP_ATOMIC_RESP, struct.pack(">Q", old), imm=qp.head)
            del qp.msgs[qp.head]
            qp.head = (qp.head + 1) & 0xFFFFFFFF
            moved = True

    def nak(self, qp, src, sport):
        msn, syndrome, pid, psn = qp.failed
        self.send(codec.Nak(qp.peer_qpn, pid, syndrome, psn, msn).encode(), sport, src)

    # ---- section 4: the sender ----
    def post(self, qp, opcode, data, remote_va=0, rkey=0, imm=0, wr_id=None):
        msn = qp.next_msn
        qp.next_msn = (msn + 1) & 0xFFFFFFFF
        segs = codec.segments(len(data), qp.mtu)
        qp.tx[msn] = dict(opcode=opcode, data=data, remote_va=remote_va, rkey=rkey, imm=imm, wr_id=wr_id,
                          segs=segs, delivered=set(), done=False, verdict_at=None)
        qp.queue += [(msn, i) for i in range(len(segs))]
        if qp.progress_at is None:
            qp.progress_at = time.monotonic()

    def emit(self, qp, path, msn, i, retransmit=False):
        m = qp.tx[msn]
        off, n = m["segs"][i]
        psn = path.next_psn
        path.next_psn += 1
        path.inflight[psn] = (msn, i)
        if path.rto_at is None:
            path.rto_at = time.monotonic() + RTO
        d = codec.Data(m["opcode"], qp.peer_qpn, path.pid, psn, msn, off, len(m["data"]), m["data"][off:off + n],
                       P.FLAG_RETRANSMIT if retransmit else 0, psn - path.floor, 0, m["remote_va"], m["rkey"],
                       m["imm"], time.monotonic_ns())
        self.send(d.encode(), path.sport, qp.peer)

    def pump(self, qp):
        """Sends what waits, round robin over the active paths with room."""
        while qp.queue:
            avoid = qp.queue[0][3] if len(qp.queue[0]) > 3 else None
            open_paths = [qp.tx_paths[(qp.rr + k) % PATHS] for k in range(PATHS)]
            open_paths = [p for p in open_paths if p.state == "active" and len(p.inflight) < PWND
                          and p.next_psn - p.floor < 256]
            if not open_paths:
                return
            # 4.1: a retransmission avoids the path that lost it if it can.
            path = next((p for p in open_paths if p.slot != avoid), open_paths[0])
            qp.rr = (path.slot + 1) % PATHS
            msn, i, *rest = qp.queue.pop(0)
            m = qp.tx.get(msn)
            if m and not m["done"] and i not in m["delivered"]:
                self.emit(qp, path, msn, i, retransmit=bool(rest))

    def lost(self, qp, path, psns):
        for psn in sorted(psns):
            msn, i = path.inflight.pop(psn)
            qp.queue.insert(0, (msn, i, "retransmit", path.slot))

    def ack(self, qp, a):
        slot = a.path_id & 0x3F
        path = qp.tx_paths.get(slot)
        if path is None or path.pid != a.path_id or a.cum_psn > path.next_psn:
            return  # 4.2: a stale path id or a cum_psn after next_psn moves nothing
        acked = {p for p in path.inflight
                 if p < a.cum_psn or (p > a.cum_psn and a.sack >> (p - a.cum_psn - 1) & 1)}
        for psn in acked:
            msn, i = path.inflight.pop(psn)
            path.acked.add(psn)
            if msn in qp.tx:
                qp.tx[msn]["delivered"].add(i)
        if acked:
            qp.progress_at = time.monotonic()
            path.unanswered = 0
            path.state = "active"
            path.rto_at = time.monotonic() + RTO if path.inflight else None
            top = max(path.acked)
            holes = {p for p in path.inflight if p < top}
            if self.bug == "go-back-n" and holes:
                holes = set(path.inflight)
            self.lost(qp, path, holes)
        path.floor = min(path.inflight) if path.inflight else path.next_psn
        self.completions(qp, a.cum_msn)
        self.pump(qp)

    def completions(self, qp, cum_msn, failed=None):
        for msn in sorted(qp.tx, key=lambda x: (x - qp.psn) & 0xFFFFFFFF):
            m = qp.tx[msn]
            passed = 0 < (cum_msn - msn) & 0xFFFFFFFF < 1 << 31
            if not (passed or msn == failed):
                break
            if m["wr_id"] is not None:
                qp.send_cq.append(dict(wr_id=m["wr_id"], status=0 if passed else failed_status(m), opcode=0,
                                       byte_len=len(m["data"]), imm=None))
            del qp.tx[msn]
        if not qp.tx:
            qp.progress_at = None

    def nak_in(self, qp, n):
        path = qp.tx_paths.get(n.path_id & 0x3F)
        if path is None or path.pid != n.path_id or n.psn >= path.next_psn or n.msn not in qp.tx:
            return  # 4.2: others are ignored
        qp.tx[n.msn]["syndrome"] = n.syndrome
        self.completions(qp, qp.psn, failed=n.msn)

    def probe_reply(self, qp, r):
        path = qp.tx_paths.get(r.path_id & 0x3F)
        if path is not None and path.pid == r.path_id:
            path.state, path.unanswered, path.rto_at = "active", 0, None
            self.pump(qp)

    def tick(self):
        now = time.monotonic()
        for qp in self.qps.values():
            if isinstance(qp, UdQp):
                continue
            if len(self.plane_addrs) > 1 and not qp.got_known and now >= qp.announce_at:
                # 1.8: our planes, repeated with doubling intervals up to
                # 100 ms until the peer's KNOWN; CONFIRM on every one.
                self.sock.sendto(codec.Planes(qp.peer_qpn, qp.qpn, self.plane_addrs, qp.known, True).encode(),
                                 (qp.peer, self.port))
                gap = qp.announce_gap if self.bug == "planes-no-backoff" else min(0.1, 2 * qp.announce_gap)
                qp.announce_at, qp.announce_gap = now + qp.announce_gap, gap
            for path in qp.tx_paths.values():
                if path.rto_at is None or now < path.rto_at or (not path.inflight and path.state == "active"):
                    continue
                # RTO (4.3): the path's packets go to the others, it probes.
                self.lost(qp, path, set(path.inflight))
                if path.state == "probing":
                    path.unanswered += 1
                if path.unanswered >= PROBES_TO_FAIL:
                    gen = (path.gen + 1) % 1024
                    path.__init__(path.slot, gen, self.rnd)
                path.state = "probing"
                path.rto_at = now + RTO
                self.send(codec.Probe(qp.peer_qpn, path.pid, self.rnd.getrandbits(32), time.monotonic_ns()).encode(),
                          path.sport, qp.peer)
            for msn, m in list(qp.tx.items()):
                if len(m["delivered"]) == len(m["segs"]):
                    # Verdict probe (4.3): delivered, no cum_msn, no NAK.
                    if m["verdict_at"] is None:
                        m["verdict_at"] = now + RTO
                    elif now >= m["verdict_at"]:
                        m["verdict_at"] = now + RTO
                        qp.queue.insert(0, (msn, len(m["segs"]) - 1, "retransmit"))
                        m["delivered"].discard(len(m["segs"]) - 1)
                break  # only the oldest unfinished message
            if qp.progress_at is not None and now - qp.progress_at > GIVE_UP:
                for msn, m in list(qp.tx.items()):
                    if m["wr_id"] is not None:
                        qp.send_cq.append(dict(wr_id=m["wr_id"], status=12, opcode=0, byte_len=0, imm=None))
                qp.tx.clear()
                qp.queue.clear()
                qp.progress_at = None
            self.pump(qp)

    def ticker(self):
        while True:
            time.sleep(0.003)
            with self.lock:
                self.tick()

    # ---- the agent's requests (agent.py's protocol) ----
    def request(self, r):
        op = r.get("op")
        with self.lock:
            if op == "hello":
                return dict(ok=True, device=f"fake_dut.py bug={self.bug}", byteorder="little", sends=True)
            if op == "bye":
                return dict(ok=True)
            if op == "create_qp":
                qpn = self.rnd.randrange(0x100, 1 << 24)
                qp = self.qps[qpn] = Qp(qpn, r, self.rnd)
                return dict(ok=True, qp=qpn, qpn=qpn, psn=qp.psn, rkey=qp.rkey, addr=MR_VA)
            if op == "create_ud":
                qpn = self.rnd.randrange(0x100, 1 << 24)
                self.qps[qpn] = UdQp(qpn, r["qkey"], r.get("buf_len", 1 << 16))
                return dict(ok=True, qp=qpn, qpn=qpn, psn=0, rkey=0, addr=MR_VA)
            qp = self.qps.get(r.get("qp"))
            if qp is None:
                return dict(ok=False, error="no such qp")
            if op == "destroy_qp":
                del self.qps[qp.qpn]
                if getattr(qp, "last_word", None) and self.bug != "no-last-word":
                    self.send(*qp.last_word)
                return dict(ok=True)
            if op == "post_recv":
                qp.recvs.append((r["wr_id"], r["offset"], r["len"]))
                return dict(ok=True)
            if op == "read_mem":
                return dict(ok=True, hex=qp.mem[r["offset"]:r["offset"] + r["len"]].hex())
            if op == "write_mem":
                b = bytes.fromhex(r["hex"])
                qp.mem[r["offset"]:r["offset"] + len(b)] = b
                return dict(ok=True)
            if op == "qp_state":
                return dict(ok=True, state=6 if qp.error else 3)
            if op == "post_send":
                if r["opcode"] != "write":
                    return dict(ok=False, unsupported=True, error=f"the fake DUT posts no {r['opcode']}")
                data = bytes(qp.mem[r["offset"]:r["offset"] + r["len"]])
                self.post(qp, P.OP_WRITE, data, r["remote_addr"], r["rkey"], wr_id=r["wr_id"])
                self.pump(qp)
                return dict(ok=True)
            if op != "poll":
                return dict(ok=False, error=f"unknown op {op}")
        end = time.monotonic() + r.get("timeout", 1)
        while True:
            with self.lock:
                cq = qp.send_cq if r.get("cq") == "send" else qp.recv_cq
                if len(cq) >= r.get("max", 1) or time.monotonic() >= end:
                    wcs, cq[:] = cq[:r.get("max", 1)], cq[r.get("max", 1):]
                    return dict(ok=True, wcs=wcs)
            time.sleep(0.01)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", default="127.0.0.2")
    ap.add_argument("--port", type=int, default=14792)
    ap.add_argument("--agent-port", type=int, default=14793)
    ap.add_argument("--bug", choices=BUGS)
    ap.add_argument("--planes", type=int, default=1, help="planes of the fake device (PLANES announcements)")
    a = ap.parse_args()
    fake = Fake(a.addr, a.port, a.bug, a.planes)

    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            for line in self.rfile:
                reply = fake.request(json.loads(line))
                self.wfile.write((json.dumps(reply) + "\n").encode())

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    srv = socketserver.ThreadingTCPServer((a.addr, a.agent_port), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    print(f"fake DUT on {a.addr}:{a.port}, agent on {a.agent_port}, bug {a.bug}", flush=True)
    threading.Thread(target=fake.ticker, daemon=True).start()
    fake.serve()


if __name__ == "__main__":
    main()
