#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A small MetaRoCE responder in Python, with its agent, so that the
conformance suite can be run, and shown to fail, without the rig.

  fake_dut.py --addr 127.0.0.2 --port 14792 --agent-port 14793 [--bug NAME]

It is the receiver half of an RC QP after protocol.md 3: per-path SACK
tracking with floors and generations (3.1), the message window, duplicate
detection and direct placement of WRITE/WRITE_IMM/SEND/SEND_IMM (3.2),
completions in MSN order (3.3), an ACK per packet (k = 1, allowed by 3.4)
sent twice when it moves cum_msn, NAKs with the QP then in error, PROBE
replies (strangers rate-limited, 1.6) and PLANES answers (1.8). It sends no
data of its own: the agent answers post_send with "unsupported", and the
suite skips the tests that need it. Each --bug breaks one rule on
purpose, for the demonstration that the suite names the clause:

  accept-rsn-on-write   places a WRITE whose rsn is not 0 (1.3, BadRsn)
  no-ce-echo            never sets CE in ACKs (1, 3.4)
  ack-once              sends an ACK that moves cum_msn once (3.4)
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

BUGS = ("accept-rsn-on-write", "no-ce-echo", "ack-once")
MSG_WINDOW = 64
MR_VA = 0x10000


class Qp:
    def __init__(self, qpn, req, rnd):
        self.qpn, self.psn = qpn, rnd.randrange(1 << 24)
        self.peer_qpn, self.peer, self.head = req["peer_qpn"], req["peer_addr"], req["peer_psn"]
        self.mtu = req["mtu"]
        self.mem = bytearray(req.get("buf_len", 1 << 16))
        self.rkey = rnd.randrange(1, 1 << 32)
        self.error = False
        self.failed = None          # (msn, syndrome, path_id, psn) of the failed message
        self.paths = {}             # slot -> [generation, cum_psn, set of SACKed PSNs]
        self.msgs = {}              # msn -> dict(opcode, msg_len, rsn, got, imm)
        self.recvs = []             # posted receives: (wr_id, offset, len)
        self.recv_cq = []
        self.got_known = False


class Fake:
    def __init__(self, addr, port, bug=None):
        self.addr, self.port, self.bug = addr, port, bug
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
            return self.probe(pkt, src, sport)
        qp = self.qps.get(pkt.dst_qpn)
        if qp is None or src != qp.peer:
            return
        if isinstance(pkt, codec.Planes):
            return self.planes(qp, pkt, src)
        if isinstance(pkt, codec.Data):
            return self.data(qp, pkt, src, sport, ce)

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
        if not p.known or p.confirm:
            answer = codec.Planes(qp.peer_qpn, qp.qpn, [self.addr], True, not qp.got_known)
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
                m = qp.msgs[d.msn] = dict(opcode=d.opcode, msg_len=d.msg_len, rsn=d.rsn, got=set(), imm=d.imm)
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
        for _ in range(2 if moved and self.bug != "ack-once" else 1):
            self.send(ack, sport, src)

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
            return 2  # this fake answers no READ
        if d.opcode in (P.OP_SEND, P.OP_SEND_IMM, P.OP_WRITE_IMM):
            n = d.rsn  # receive rsn, counted from the first (1.3)
            if n >= len(qp.recvs) or (d.opcode != P.OP_WRITE_IMM and qp.recvs[n][2] < d.msg_len):
                return 3
            if d.opcode != P.OP_WRITE_IMM:
                at = qp.recvs[n][1] + d.offset
                qp.mem[at:at + len(d.payload)] = d.payload
        elif d.opcode not in (P.OP_WRITE,):
            return 2
        return 0

    def complete(self, qp):
        """Releases completions in MSN order (3.3); True if cum_msn moved."""
        moved = False
        while True:
            m = qp.msgs.get(qp.head)
            if m is None or len(m["got"]) < len(codec.segments(m["msg_len"], qp.mtu)):
                return moved
            if m["opcode"] in (P.OP_SEND, P.OP_SEND_IMM, P.OP_WRITE_IMM):
                wr_id = qp.recvs[m["rsn"]][0]
                qp.recv_cq.append(dict(wr_id=wr_id, status=0, byte_len=m["msg_len"],
                                       imm=m["imm"] if m["opcode"] != P.OP_SEND else None))
            del qp.msgs[qp.head]
            qp.head = (qp.head + 1) & 0xFFFFFFFF
            moved = True

    def nak(self, qp, src, sport):
        msn, syndrome, pid, psn = qp.failed
        self.send(codec.Nak(qp.peer_qpn, pid, syndrome, psn, msn).encode(), sport, src)

    # ---- the agent's requests (agent.py's protocol) ----
    def request(self, r):
        op = r.get("op")
        with self.lock:
            if op == "hello":
                return dict(ok=True, device=f"fake_dut.py bug={self.bug}", byteorder="little", sends=False)
            if op == "bye":
                return dict(ok=True)
            if op == "create_qp":
                qpn = self.rnd.randrange(0x100, 1 << 24)
                qp = self.qps[qpn] = Qp(qpn, r, self.rnd)
                return dict(ok=True, qp=qpn, qpn=qpn, psn=qp.psn, rkey=qp.rkey, addr=MR_VA)
            qp = self.qps.get(r.get("qp"))
            if qp is None:
                return dict(ok=False, error="no such qp")
            if op == "destroy_qp":
                del self.qps[qp.qpn]
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
            if op == "poll" and r.get("cq") == "recv":
                pass
            else:
                return dict(ok=False, unsupported=True, error=f"{op} {r.get('cq', '')}: the fake DUT sends nothing")
        end = time.monotonic() + r.get("timeout", 1)
        while True:
            with self.lock:
                if len(qp.recv_cq) >= r.get("max", 1) or time.monotonic() >= end:
                    wcs, qp.recv_cq[:] = qp.recv_cq[:r.get("max", 1)], qp.recv_cq[r.get("max", 1):]
                    return dict(ok=True, wcs=wcs)
            time.sleep(0.01)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", default="127.0.0.2")
    ap.add_argument("--port", type=int, default=14792)
    ap.add_argument("--agent-port", type=int, default=14793)
    ap.add_argument("--bug", choices=BUGS)
    a = ap.parse_args()
    fake = Fake(a.addr, a.port, a.bug)

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
    fake.serve()


if __name__ == "__main__":
    main()
