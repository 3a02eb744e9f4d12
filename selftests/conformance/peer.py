# SPDX-License-Identifier: GPL-2.0
"""The tester's side of the wire: it plays the peer of an RC QP of the
implementation under test (the DUT) with plain UDP sockets.

`Wire` owns the MetaRoCE UDP port on the tester's address (everything the
DUT sends, ACKs, NAKs, probe replies, PLANES and data, comes to that port,
protocol.md 3.4), logs every packet it receives with its IP source,
UDP source port and ECN bits, and sends packets from any UDP source port
(a path's entropy, section 1) with a zero UDP checksum and the ECN
codepoint asked for. `Agent` is the control channel to agent.py on the
DUT's host (JSON lines over TCP). `Conn` is one connection: the DUT QP the
agent made, the tester's QPN, initial PSNs, paths and message numbers, and
what the DUT sent back on it.
"""

import errno
import json
import random
import select
import socket
import threading
import time
from dataclasses import dataclass, field

import codec
from codec import P

ECT0, CE, NOT_ECT = 2, 3, 0
SO_NO_CHECK = 11  # socket(7): IPv4 UDP sends a zero checksum
IP_MTU_DISCOVER, IP_PMTUDISC_DONT = 10, 0  # ip(7): fragment, never EMSGSIZE


@dataclass
class Rx:
    """One packet the tester received."""
    t: float
    local: str        # the tester address it came to
    src: str
    sport: int
    ecn: int
    raw: bytes
    pkt: object = None   # decoded packet, or None
    error: str = ""      # the Malformed reason when it did not decode


class Wire:
    def __init__(self, src, dut, port=P.UDP_PORT, extra=()):
        self.src, self.dut, self.port = src, dut, port
        self.log = []
        self.cond = threading.Condition()
        self.rx = []
        for addr in (src,) + tuple(extra):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
            s.bind((addr, port))
            self.rx.append((s, addr))
        self.tx = {}
        self.reserved = {}
        self.closed = False
        self.thread = threading.Thread(target=self._receive, daemon=True)
        self.thread.start()

    def _receive(self):
        socks = {s: a for s, a in self.rx}
        while not self.closed:
            ready = select.select(list(socks), [], [], 0.2)[0]
            for s in ready:
                try:
                    raw, anc, _, (ip, sport) = s.recvmsg(65535, socket.CMSG_SPACE(4))
                except OSError:
                    continue
                tos = next((c[2][0] for c in anc if c[0] == socket.IPPROTO_IP and c[1] == socket.IP_TOS), 0)
                rx = Rx(time.monotonic(), socks[s], ip, sport, tos & 3, raw)
                try:
                    rx.pkt = codec.decode(raw)
                except codec.Malformed as e:
                    rx.error = e.reason
                with self.cond:
                    self.log.append(rx)
                    self.cond.notify_all()

    def spare_port(self, rnd):
        """A random UDP source port (49152-65535) that no earlier call
        returned, bound on every tester address and held until close. A
        port that another socket of the host holds (a rig's link on
        loopback, an ephemeral port) is passed over: which ports the host
        uses is not the DUT's business, and a clause once failed with
        EADDRINUSE for it. Held, a path's port (the DUT's name for the path)
        cannot be taken between clauses; the senders of `send` share it
        through SO_REUSEADDR."""
        while True:
            sport = rnd.randrange(49152, 65536)
            if sport in self.reserved:
                continue
            held = []
            try:
                for _, addr in self.rx:
                    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    held.append(s)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind((addr, sport))
            except OSError as e:
                for s in held:
                    s.close()
                if e.errno == errno.EADDRINUSE:
                    continue
                raise
            self.reserved[sport] = held
            return sport

    def send(self, raw, sport, ecn=ECT0, src=None, checksum=False):
        """Sends `raw` to the DUT's MetaRoCE port from src:sport."""
        key = (src or self.src, sport, ecn, checksum)
        s = self.tx.get(key)
        if s is None:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, ecn)
            if not checksum:
                s.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
            # The PayloadTooLarge case is an 8 KiB datagram: fragmented on a
            # 1500-byte link, reassembled before the DUT's UDP layer.
            s.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DONT)
            s.bind((key[0], sport))
            self.tx[key] = s
        s.sendto(raw, (self.dut, self.port))

    def mark(self):
        with self.cond:
            return len(self.log)

    def since(self, mark, pred=None):
        with self.cond:
            got = self.log[mark:]
        return [r for r in got if pred is None or pred(r)]

    def wait(self, pred, timeout, mark=0, count=1):
        """The first `count` packets from index `mark` that match `pred`
        (fewer if `timeout` seconds pass first)."""
        end = time.monotonic() + timeout
        with self.cond:
            while True:
                got = [r for r in self.log[mark:] if pred(r)]
                left = end - time.monotonic()
                if len(got) >= count or left <= 0:
                    return got[:count]
                self.cond.wait(min(left, 0.1))

    def wait_new(self, mark, timeout):
        """Every packet from index `mark` on, as soon as there is one (or
        none after `timeout` seconds)."""
        end = time.monotonic() + timeout
        with self.cond:
            while len(self.log) <= mark:
                left = end - time.monotonic()
                if left <= 0:
                    return []
                self.cond.wait(left)
            return self.log[mark:]

    def quiet(self, pred, seconds, mark):
        """Waits `seconds` and returns what matched `pred` since `mark`."""
        time.sleep(seconds)
        return self.since(mark, pred)

    def close(self):
        self.closed = True
        self.thread.join(1)
        for s, _ in self.rx:
            s.close()
        for s in self.tx.values():
            s.close()
        for held in self.reserved.values():
            for s in held:
                s.close()


class AgentError(RuntimeError):
    pass


class Unsupported(AgentError):
    """The DUT's agent cannot do this (a fake DUT, a NIC without it)."""


class Agent:
    """JSON lines to agent.py: {"op": ..., ...} -> {"ok": true, ...}."""

    def __init__(self, host, port, timeout=120):
        end = time.monotonic() + 30
        while True:
            try:
                self.sock = socket.create_connection((host, port), timeout=timeout)
                break
            except OSError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.3)
        self.f = self.sock.makefile("rw")
        self.lock = threading.Lock()

    def call(self, op, **kw):
        with self.lock:
            self.f.write(json.dumps(dict(op=op, **kw)) + "\n")
            self.f.flush()
            line = self.f.readline()
        if not line:
            raise AgentError(f"agent closed the connection during {op}")
        r = json.loads(line)
        if r.get("unsupported"):
            raise Unsupported(f"agent: {op}: {r.get('error')}")
        if not r.get("ok"):
            raise AgentError(f"agent: {op}: {r.get('error')}")
        return r

    def close(self):
        try:
            self.call("bye")
        except (AgentError, OSError):
            pass
        self.sock.close()


@dataclass
class Path:
    """A tester path: slot, generation, UDP source port, next PSN, and the
    floor (lowest PSN the DUT has not acknowledged cumulatively)."""
    slot: int
    gen: int
    sport: int
    next_psn: int = 0
    floor: int = 0

    @property
    def pid(self):
        return codec.path_id(self.gen, self.slot)


@dataclass
class Inbound:
    """What the tester, as receiver, holds of one DUT path (3.1): cum_psn
    and the SACKed PSNs, with the path's last source port and timestamp."""
    pid: int
    sport: int
    cum_psn: int = 0
    got: set = field(default_factory=set)
    ts: int = 0

    def take(self, psn, floor_delta=0):
        floor = psn - floor_delta  # 3.1: PSNs below the floor are resolved
        if floor > self.cum_psn:
            self.cum_psn = floor
            self.got = {p for p in self.got if p >= floor}
        if psn >= self.cum_psn:
            self.got.add(psn)
        while self.cum_psn in self.got:
            self.got.discard(self.cum_psn)
            self.cum_psn += 1

    def sack(self, skip=()):
        bits = 0
        for psn in self.got:
            d = psn - self.cum_psn - 1
            if 0 <= d < 256 and psn not in skip:
                bits |= 1 << d
        return bits


class Conn:
    """One RC connection between a DUT QP and the tester."""

    def __init__(self, wire, agent, mtu, buf_len=1 << 16, rnd=None, tester_mem=1 << 16):
        self.wire, self.agent, self.mtu = wire, agent, mtu
        self.rnd = rnd or random.Random()
        self.my_qpn = self.rnd.randrange(0x100, 0xFFFFFF)
        # InfiniBand PSNs are 24 bits; MSNs (32 bits) start there (section 2).
        self.my_psn = self.rnd.randrange(0, 1 << 24)
        info = agent.call("create_qp", peer_qpn=self.my_qpn, peer_addr=wire.src, peer_psn=self.my_psn,
                          mtu=mtu, buf_len=buf_len)
        self.qp = info["qp"]
        self.dut_qpn, self.dut_psn = info["qpn"], info["psn"]
        self.rkey, self.addr, self.len = info["rkey"], info["addr"], buf_len
        self.next_msn = self.my_psn
        self.next_rsn = 0
        self.paths = {}
        # The tester's own region, target of the DUT's WRITEs and READs.
        self.mem = bytearray(tester_mem)
        self.mem_va, self.mem_rkey = 0x7E5700000000, self.rnd.randrange(1, 1 << 32)
        self.inbound = {}
        self.dut_msgs = {}

    # ---- sending as the DUT's peer ----
    def path(self, slot, gen=0):
        key = (slot, gen)
        if key not in self.paths:
            port = self.wire.spare_port(self.rnd)
            self.paths[key] = Path(slot, gen, port)
        return self.paths[key]

    def msn(self):
        m = self.next_msn
        self.next_msn = (m + 1) & 0xFFFFFFFF
        return m

    def rsn(self):
        r = self.next_rsn
        self.next_rsn = (r + 1) & 0xFFFF
        return r

    def packet(self, path, opcode, msn, offset=0, msg_len=0, payload=b"", psn=None, floor_delta=None, **kw):
        """A data packet of this connection on `path` (its next PSN unless
        given; floor_delta from the path's floor unless given)."""
        if psn is None:
            psn = path.next_psn
            path.next_psn += 1
        if floor_delta is None:
            floor_delta = min(256, max(0, psn - path.floor))
        kw.setdefault("timestamp", time.monotonic_ns())
        return codec.Data(opcode, self.dut_qpn, path.pid, psn, msn, offset, msg_len, payload,
                          floor_delta=floor_delta, **kw)

    def write_packets(self, msn, paths, offset_in_mr, data, opcode=P.OP_WRITE, **kw):
        """Every packet of one WRITE-like message of `data` at MR offset
        `offset_in_mr`, packet i on paths[i % len(paths)] (round robin,
        4.1)."""
        out = []
        for i, (off, n) in enumerate(codec.segments(len(data), self.mtu)):
            out.append(self.packet(paths[i % len(paths)], opcode, msn, off, len(data), data[off:off + n],
                                   remote_va=self.addr + offset_in_mr, rkey=self.rkey, **kw))
        return out

    def send(self, d, ecn=ECT0, raw=None, src=None, checksum=False):
        """Sends packet `d` (or bytes `raw` in its place) on d's path's
        source port."""
        sport = next(p.sport for p in self.paths.values() if p.pid == d.path_id)
        self.wire.send(raw if raw is not None else d.encode(), sport, ecn, src=src, checksum=checksum)

    # ---- what came back ----
    def from_dut(self, r):
        return r.src == self.wire.dut and r.pkt is not None and getattr(r.pkt, "dst_qpn", None) == self.my_qpn

    def acks(self, mark, pid=None):
        return [r for r in self.wire.since(mark, self.from_dut) if isinstance(r.pkt, codec.Ack)
                and (pid is None or r.pkt.path_id == pid)]

    def wait_ack(self, mark, pred, timeout):
        got = self.wire.wait(lambda r: self.from_dut(r) and isinstance(r.pkt, codec.Ack) and pred(r.pkt),
                             timeout, mark)
        if got:
            self.note_acks(mark)
        return got[0] if got else None

    def note_acks(self, mark):
        """Moves each path's floor to the DUT's cum_psn (a sender whose
        packets were all delivered)."""
        for r in self.acks(mark):
            for p in self.paths.values():
                if p.pid == r.pkt.path_id and r.pkt.cum_psn <= p.next_psn:
                    p.floor = max(p.floor, r.pkt.cum_psn)

    def cum_msn_seen(self, mark):
        """The highest cum_msn of this connection's ACKs since `mark` (MSN
        arithmetic relative to our initial PSN)."""
        best = None
        for r in self.acks(mark):
            rel = (r.pkt.cum_msn - self.my_psn) & 0xFFFFFFFF
            if rel < 1 << 31 and (best is None or rel > best):
                best = rel
        return None if best is None else (self.my_psn + best) & 0xFFFFFFFF

    def wait_cum_msn(self, mark, msn_after, timeout):
        """An ACK whose cum_msn passed `msn_after` (the message `msn_after`
        completed), or None."""
        want = (msn_after + 1 - self.my_psn) & 0xFFFFFFFF
        return self.wait_ack(mark, lambda a: want <= (a.cum_msn - self.my_psn) & 0xFFFFFFFF < 1 << 31, timeout)

    def naks(self, mark):
        return [r for r in self.wire.since(mark, self.from_dut) if isinstance(r.pkt, codec.Nak)]

    def mem_read(self, offset, n):
        return bytes.fromhex(self.agent.call("read_mem", qp=self.qp, offset=offset, len=n)["hex"])

    def mem_write(self, offset, data):
        self.agent.call("write_mem", qp=self.qp, offset=offset, hex=data.hex())

    def poll(self, cq, timeout, want=1):
        return self.agent.call("poll", qp=self.qp, cq=cq, timeout=timeout, max=want)["wcs"]

    def destroy(self):
        try:
            self.agent.call("destroy_qp", qp=self.qp)
        except Exception:
            pass

    # ---- receiving the DUT's data (the tester as responder) ----
    def dut_data(self, mark):
        return [r for r in self.wire.since(mark, self.from_dut) if isinstance(r.pkt, codec.Data)]

    def take(self, r):
        """Records DUT data packet `r` as the receiver of 3.1/3.2 would:
        per-path PSN state, the message's bytes (WRITE into the tester's
        memory), and returns its Inbound path."""
        d = r.pkt
        slot = codec.split_path_id(d.path_id)[1]
        ib = self.inbound.get(slot)
        if ib is None or ib.pid != d.path_id:
            ib = self.inbound[slot] = Inbound(d.path_id, r.sport)
        ib.sport, ib.ts = r.sport, d.timestamp
        ib.take(d.psn, d.floor_delta)
        m = self.dut_msgs.setdefault(d.msn, dict(opcode=d.opcode, msg_len=d.msg_len, got=set(),
                                                 data=bytearray(d.msg_len), imm=d.imm))
        m["got"].add(d.offset)
        m["data"][d.offset:d.offset + len(d.payload)] = d.payload
        if d.opcode in (P.OP_WRITE, P.OP_WRITE_IMM):
            at = d.remote_va - self.mem_va + d.offset
            if 0 <= at and at + len(d.payload) <= len(self.mem):
                self.mem[at:at + len(d.payload)] = d.payload
        return ib

    def dut_msg_done(self, msn):
        m = self.dut_msgs.get(msn)
        if m is None:
            return False
        # A READ_REQ is one packet whatever the msg_len it asks for (1.3).
        want = 1 if m["opcode"] == P.OP_READ_REQ else len(codec.segments(m["msg_len"], self.mtu))
        return len(m["got"]) == want

    def dut_cum_msn(self):
        """The first DUT MSN not completely received (the tester's cum_msn)."""
        m = self.dut_psn
        while self.dut_msg_done(m):
            m = (m + 1) & 0xFFFFFFFF
        return m

    def ack_dut(self, ib, cum_msn=None, pid=None, cum_psn=None, sack=None, ce=False):
        """Sends the ACK of DUT path `ib` (from our 3.1 state unless the
        fields are given) back on its source port (3.4)."""
        a = codec.Ack(self.dut_qpn, ib.pid if pid is None else pid,
                      ib.cum_psn if cum_psn is None else cum_psn,
                      ib.sack() if sack is None else sack, ib.ts,
                      self.dut_cum_msn() if cum_msn is None else cum_msn, 0, ce)
        self.wire.send(a.encode(), ib.sport)
        return a
