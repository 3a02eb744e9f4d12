# SPDX-License-Identifier: GPL-2.0
"""The conformance tester's codec: every MetaRoCE v1 packet of
Documentation/protocol.md 1.x encoded and decoded, with the format-level
drop reasons of 1.1-1.8 (the names the reference engine's parser reports).

Encoders are selftests/metaroce_pkt.py's, written from the spec apart from
rust/engine; this module adds what a peer that checks another
implementation needs: a strict decoder (every reserved field, flag and
length rule of section 1), the receiver-state rules that need the payload
MTU (segmentation, 1.3), a way to build the malformed variants a v1
receiver must drop, and a reader for the golden pcaps (tools/golden).
"""

import os
import socket
import struct
import sys
import zlib
from dataclasses import dataclass, field, replace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import metaroce_pkt as P  # noqa: E402  (selftests/, the shared encoders)

UDP_PORT = P.UDP_PORT
VERSION = P.VERSION
ICRC_LEN = P.ICRC_LEN
DATA_HDR_LEN = 56
ACK_LEN = 64
NAK_LEN = 24
PROBE_LEN = P.PROBE_LEN
PLANES_LEN = P.PLANES_LEN
MAX_PAYLOAD = 9216
MAX_FLOOR_DELTA = 256
MAX_MSG_PACKETS = 1024
ENTROPY_PORTS = range(49152, 65536)  # section 1: a path's UDP source port

OP_NAMES = {
    P.OP_SEND: "SEND", P.OP_SEND_IMM: "SEND_IMM", P.OP_WRITE: "WRITE",
    P.OP_WRITE_IMM: "WRITE_IMM", P.OP_READ_REQ: "READ_REQ", P.OP_READ_RESP: "READ_RESP",
    P.OP_UD_SEND: "UD_SEND", P.OP_CMP_SWAP: "CMP_SWAP", P.OP_FETCH_ADD: "FETCH_ADD",
    P.OP_ATOMIC_WRITE: "ATOMIC_WRITE", P.OP_ATOMIC_RESP: "ATOMIC_RESP",
    P.OP_SEND_INV: "SEND_INV", P.OP_ACK: "ACK", P.OP_NAK: "NAK", P.OP_PROBE: "PROBE",
    P.OP_PROBE_REPLY: "PROBE_REPLY", P.OP_PLANES: "PLANES",
}
RSN_OPCODES = (P.OP_SEND, P.OP_SEND_IMM, P.OP_SEND_INV, P.OP_WRITE_IMM)
IMM_OPCODES = (P.OP_SEND_IMM, P.OP_WRITE_IMM)
DATA_FLAGS = P.FLAG_RETRANSMIT | P.FLAG_IMM | P.FLAG_PEER_PSN | P.FLAG_WIDE
# 1.3 / 5.1: the one-packet opcodes with fixed operand lengths.
FIXED_LEN = {P.OP_CMP_SWAP: 16, P.OP_FETCH_ADD: 8, P.OP_ATOMIC_WRITE: 8, P.OP_ATOMIC_RESP: 8}
SYNDROMES = {1: "RemoteAccess", 2: "RemoteOperation", 3: "InvalidRequest"}


class Malformed(ValueError):
    """A packet a v1 receiver drops for its format; `reason` is the name
    protocol.md gives the rule (BadVersion, IcrcMismatch, ...)."""

    def __init__(self, reason, detail=""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def crc32(body: bytes) -> int:
    """Section 1.7's CRC-32 (the IEEE one zlib computes; checked against
    metaroce_pkt's bit-by-bit version by the host tests)."""
    return zlib.crc32(body) & 0xFFFFFFFF


def seal(body: bytes) -> bytes:
    return body + struct.pack(">I", crc32(body))


def path_id(generation, slot):
    """Section 1.3: generation in the high 10 bits, slot in the low 6."""
    return ((generation & 0x3FF) << 6) | (slot & 0x3F)


def split_path_id(pid):
    return pid >> 6, pid & 0x3F


@dataclass
class Data:
    """A data packet (1.3). `payload` is the bytes after the header."""
    opcode: int
    dst_qpn: int
    path_id: int
    psn: int
    msn: int
    offset: int = 0
    msg_len: int = 0
    payload: bytes = b""
    flags: int = 0
    floor_delta: int = 0
    rsn: int = 0
    remote_va: int = 0
    rkey: int = 0
    imm: int = 0
    timestamp: int = 0
    kind: str = field(default="data", repr=False)

    def encode(self) -> bytes:
        raw = P.data(self.opcode, self.flags, self.dst_qpn, self.path_id, self.floor_delta,
                     self.psn, self.msn, self.offset, self.msg_len, self.payload,
                     remote_va=self.remote_va, rkey=self.rkey, imm=self.imm,
                     timestamp=self.timestamp, rsn=self.rsn)
        return reseal(raw)


@dataclass
class Ack:
    """1.4; `sack` is the 256 bits as an int, bit i = PSN cum_psn + 1 + i."""
    dst_qpn: int
    path_id: int
    cum_psn: int
    sack: int = 0
    ts_echo: int = 0
    cum_msn: int = 0
    rate_hint_kbps: int = 0
    ce: bool = False
    msg_window: int = 0
    kind: str = field(default="ack", repr=False)
    opcode: int = field(default=P.OP_ACK, repr=False)

    def sack_psns(self):
        return [(self.cum_psn + 1 + i) & 0xFFFFFFFF for i in range(256) if self.sack >> i & 1]

    def encode(self) -> bytes:
        bits = [i for i in range(256) if self.sack >> i & 1]
        return reseal(P.ack(self.dst_qpn, self.path_id, self.ce, self.cum_psn, bits,
                            self.ts_echo, self.cum_msn, self.rate_hint_kbps, self.msg_window))


@dataclass
class Nak:
    """1.5."""
    dst_qpn: int
    path_id: int
    syndrome: int
    psn: int
    msn: int
    kind: str = field(default="nak", repr=False)
    opcode: int = field(default=P.OP_NAK, repr=False)

    def encode(self) -> bytes:
        return reseal(P.nak(self.dst_qpn, self.path_id, self.syndrome, self.psn, self.msn))


@dataclass
class Probe:
    """1.6: PROBE (reply False) or PROBE_REPLY."""
    dst_qpn: int
    path_id: int
    seq: int
    timestamp: int
    reply: bool = False
    kind: str = field(default="probe", repr=False)

    @property
    def opcode(self):
        return P.OP_PROBE_REPLY if self.reply else P.OP_PROBE

    def encode(self) -> bytes:
        return reseal(P.probe(self.opcode, self.dst_qpn, self.path_id, self.seq, self.timestamp))


@dataclass
class Planes:
    """1.8; `addrs` one entry per listed plane: an IPv4 or IPv6 address
    string, or None for an all-zero (unusable) entry."""
    dst_qpn: int
    src_qpn: int
    addrs: list
    known: bool = False
    confirm: bool = False
    max_payload: int = 0
    kind: str = field(default="planes", repr=False)
    opcode: int = field(default=P.OP_PLANES, repr=False)

    def encode(self) -> bytes:
        body = struct.pack(">BBHIIBxH", VERSION, P.OP_PLANES,
                           (P.PLANES_KNOWN if self.known else 0) | (P.PLANES_CONFIRM if self.confirm else 0),
                           self.dst_qpn, self.src_qpn, len(self.addrs), self.max_payload)
        for i in range(P.MAX_PLANES):
            body += gid_bytes(self.addrs[i]) if i < len(self.addrs) else bytes(16)
        return seal(body)


def reseal(raw: bytes) -> bytes:
    """The packet with its ICRC computed again (after metaroce_pkt's, or an
    edit of the body)."""
    return seal(raw[:-ICRC_LEN])


def gid_bytes(addr):
    """An address in GID form (1.8): IPv4 as ::ffff:a.b.c.d; None as zeros."""
    if addr is None:
        return bytes(16)
    if ":" in addr:
        return socket.inet_pton(socket.AF_INET6, addr)
    return bytes(10) + b"\xff\xff" + socket.inet_aton(addr)


def gid_addr(b: bytes):
    if b == bytes(16):
        return None
    if b[:12] == bytes(10) + b"\xff\xff":
        return socket.inet_ntoa(b[12:])
    return socket.inet_ntop(socket.AF_INET6, b)


def _need(buf, n):
    """1.7: the UDP length must be exactly the packet's."""
    if len(buf) < n:
        raise Malformed("Truncated", f"{len(buf)} bytes, want {n}")
    if len(buf) > n:
        raise Malformed("TrailingBytes", f"{len(buf)} bytes, want {n}")


def _check_icrc(buf):
    (got,) = struct.unpack(">I", buf[-ICRC_LEN:])
    want = crc32(buf[:-ICRC_LEN])
    if got != want:
        raise Malformed("IcrcMismatch", f"ICRC {got:#010x}, computed {want:#010x}")


def _no_flags(flags, what):
    if flags:
        raise Malformed("BadFlags", f"{what} flags {flags:#x}")


def decode(buf: bytes):
    """A UDP payload as a packet object, or Malformed with the reason a v1
    receiver drops it for (section 1; the per-connection rules are
    `check_segmentation` and the receiver's windows)."""
    if len(buf) < 8 + ICRC_LEN:
        raise Malformed("Truncated", f"{len(buf)} bytes")
    version, opcode, flags, dst_qpn = struct.unpack(">BBHI", buf[:8])
    if version != VERSION:
        raise Malformed("BadVersion", f"version {version}")
    if opcode in OP_NAMES and opcode < P.OP_ACK:
        return _decode_data(buf, opcode, flags, dst_qpn)
    if opcode == P.OP_ACK:
        _need(buf, ACK_LEN + ICRC_LEN)
        _check_icrc(buf)
        if flags & ~1:
            raise Malformed("BadFlags", f"ACK flags {flags:#x}")
        pid, msg_window, cum_psn = struct.unpack(">HHI", buf[8:16])
        ts, cum_msn, rate = struct.unpack(">QII", buf[48:64])
        return Ack(dst_qpn, pid, cum_psn, int.from_bytes(buf[16:48], "little"), ts, cum_msn, rate,
                   bool(flags & 1), msg_window)
    if opcode == P.OP_NAK:
        _need(buf, NAK_LEN + ICRC_LEN)
        _check_icrc(buf)
        _no_flags(flags, "NAK")
        pid, syndrome, rsvd11, psn, msn, rsvd20 = struct.unpack(">HBBIII", buf[8:24])
        if syndrome not in SYNDROMES:
            raise Malformed("BadSyndrome", f"syndrome {syndrome}")
        if rsvd11 or rsvd20:
            raise Malformed("ReservedNonZero", "NAK offset 11 or 20")
        return Nak(dst_qpn, pid, syndrome, psn, msn)
    if opcode in (P.OP_PROBE, P.OP_PROBE_REPLY):
        _need(buf, PROBE_LEN + ICRC_LEN)
        _check_icrc(buf)
        _no_flags(flags, "PROBE")
        pid, rsvd, seq, ts = struct.unpack(">HHIQ", buf[8:24])
        if rsvd:
            raise Malformed("ReservedNonZero", "PROBE offset 10")
        return Probe(dst_qpn, pid, seq, ts, opcode == P.OP_PROBE_REPLY)
    if opcode == P.OP_PLANES:
        _need(buf, PLANES_LEN + ICRC_LEN)
        _check_icrc(buf)
        if flags & ~(P.PLANES_KNOWN | P.PLANES_CONFIRM):
            raise Malformed("BadFlags", f"PLANES flags {flags:#x}")
        src_qpn, count = struct.unpack(">IB", buf[8:13])
        if not 1 <= count <= P.MAX_PLANES:
            raise Malformed("BadLength", f"PLANES count {count}")
        if buf[13] != 0:
            raise Malformed("ReservedNonZero", "PLANES offset 13")
        (max_payload,) = struct.unpack(">H", buf[14:16])
        entries = [buf[16 + 16 * i:32 + 16 * i] for i in range(P.MAX_PLANES)]
        if any(e != bytes(16) for e in entries[count:]):
            raise Malformed("ReservedNonZero", "PLANES entry past count")
        return Planes(dst_qpn, src_qpn, [gid_addr(e) for e in entries[:count]],
                      bool(flags & P.PLANES_KNOWN), bool(flags & P.PLANES_CONFIRM), max_payload)
    raise Malformed("BadOpcode", f"opcode {opcode:#x}")


def _decode_data(buf, opcode, flags, dst_qpn):
    if len(buf) < DATA_HDR_LEN + ICRC_LEN:
        raise Malformed("Truncated", f"{len(buf)} bytes, data header needs {DATA_HDR_LEN + ICRC_LEN}")
    (pid, floor_delta, psn, msn, offset, msg_len, payload_len, rsn, remote_va, rkey, imm,
     ts) = struct.unpack(">HHIIIIHHQIIQ", buf[8:DATA_HDR_LEN])
    _need(buf, DATA_HDR_LEN + payload_len + ICRC_LEN)
    _check_icrc(buf)
    if flags & ~DATA_FLAGS:
        raise Malformed("BadFlags", f"undefined data flags {flags:#x}")
    if opcode in IMM_OPCODES and not flags & P.FLAG_IMM:
        raise Malformed("BadFlags", f"{OP_NAMES[opcode]} without IMM")
    if opcode not in IMM_OPCODES + (P.OP_UD_SEND,) and flags & P.FLAG_IMM:
        raise Malformed("BadFlags", f"IMM on {OP_NAMES[opcode]}")
    if opcode == P.OP_UD_SEND and flags & P.FLAG_PEER_PSN:
        raise Malformed("BadFlags", "PEER_PSN on UD_SEND")
    if opcode == P.OP_UD_SEND and flags & P.FLAG_WIDE:
        raise Malformed("BadFlags", "WIDE on UD_SEND")
    if payload_len > MAX_PAYLOAD:
        raise Malformed("PayloadTooLarge", f"payload_len {payload_len}")
    if floor_delta > MAX_FLOOR_DELTA:
        raise Malformed("BadLength", f"floor_delta {floor_delta}")
    if offset + payload_len > msg_len:
        raise Malformed("BadLength", f"offset {offset} + payload_len {payload_len} > msg_len {msg_len}")
    if payload_len == 0 and msg_len != 0 and opcode != P.OP_READ_REQ:
        raise Malformed("BadLength", f"empty payload of a {msg_len}-byte message")
    if opcode == P.OP_READ_REQ and (offset or payload_len):
        raise Malformed("BadLength", "READ_REQ with offset or payload")
    if opcode == P.OP_UD_SEND:
        if offset or payload_len != msg_len:
            raise Malformed("BadLength", "UD_SEND not one whole packet")
        if remote_va >= 1 << 24:
            raise Malformed("ReservedNonZero", f"UD_SEND source QPN {remote_va:#x}")
        if not flags & P.FLAG_IMM and imm:
            raise Malformed("ReservedNonZero", "UD_SEND imm without IMM")
    if opcode in FIXED_LEN and (offset or payload_len != FIXED_LEN[opcode] or msg_len != FIXED_LEN[opcode]):
        raise Malformed("BadLength", f"{OP_NAMES[opcode]} operands {payload_len}/{msg_len}")
    if rsn and opcode not in RSN_OPCODES:
        raise Malformed("BadRsn", f"rsn {rsn} on {OP_NAMES[opcode]}")
    return Data(opcode, dst_qpn, pid, psn, msn, offset, msg_len, buf[DATA_HDR_LEN:-ICRC_LEN], flags,
                floor_delta, rsn, remote_va, rkey, imm, ts)


def check_segmentation(d: Data, mtu: int):
    """1.3's receiver rule for payload MTU `mtu`: None, or the drop reason."""
    if d.opcode == P.OP_UD_SEND:
        return None
    packets = 1 if d.opcode == P.OP_READ_REQ else max(1, -(-d.msg_len // mtu))
    if packets > MAX_MSG_PACKETS and d.opcode != P.OP_READ_REQ:
        return "BadSegmentation"
    if d.offset % mtu:
        return "BadSegmentation"
    want = 0 if d.opcode == P.OP_READ_REQ else min(mtu, d.msg_len - d.offset)
    return None if len(d.payload) == want else "BadSegmentation"


def segments(msg_len, mtu):
    """(offset, length) of each packet of a message (1.3)."""
    if msg_len == 0:
        return [(0, 0)]
    return [(o, min(mtu, msg_len - o)) for o in range(0, msg_len, mtu)]


# Malformed variants: (name, the reason a receiver drops it for, edit).
# Each edit takes the encoded valid packet and returns the bad one; the
# conformance tests send them where the valid one would be placed.
def _set(raw, at, fmt, value, seal_again=True):
    b = bytearray(raw)
    struct.pack_into(fmt, b, at, value)
    return reseal(bytes(b)) if seal_again else bytes(b)


DATA_MUTATIONS = [
    ("bad_version", "BadVersion", "1.1", lambda r: _set(r, 0, ">B", 2)),
    ("unknown_opcode", "BadOpcode", "1.1", lambda r: _set(r, 1, ">B", 0x30)),
    ("reserved_opcode_0x0C", "BadOpcode", "1.2", lambda r: _set(r, 1, ">B", 0x0C)),
    ("undefined_flag", "BadFlags", "1.3", lambda r: _set(r, 2, ">H", struct.unpack(">H", r[2:4])[0] | 0x0100)),
    ("imm_flag_on_write", "BadFlags", "1.3", lambda r: _set(r, 2, ">H", struct.unpack(">H", r[2:4])[0] | P.FLAG_IMM)),
    ("floor_delta_257", "BadLength", "1.3", lambda r: _set(r, 10, ">H", 257)),
    ("rsn_on_write", "BadRsn", "1.3", lambda r: _set(r, 30, ">H", 1)),
    ("offset_past_msg_len", "BadLength", "1.3",
     lambda r: _set(r, 20, ">I", struct.unpack(">I", r[24:28])[0])),
    ("bad_icrc", "IcrcMismatch", "1.7", lambda r: r[:-1] + bytes([r[-1] ^ 0x5A])),
    ("truncated", "Truncated", "1.7", lambda r: r[:-6] + r[-4:]),
    ("trailing_bytes", "TrailingBytes", "1.7", lambda r: reseal(r[:-4] + b"\0\0" + r[-4:])),
]


def too_large_payload(d: Data):
    """1.3: payload_len 9217 (PayloadTooLarge), the rest consistent."""
    return replace(d, payload=bytes(MAX_PAYLOAD + 1), msg_len=d.offset + MAX_PAYLOAD + 1).encode()


# ---- pcap (the golden captures: classic pcap, ns or us, Ethernet/IPv4/IPv6) ----

def read_pcap(path):
    """[(seconds, frame bytes)] of a classic pcap file; Ethernet link type."""
    with open(path, "rb") as f:
        blob = f.read()
    magic = blob[:4]
    endian = {b"\xd4\xc3\xb2\xa1": "<", b"\x4d\x3c\xb2\xa1": "<", b"\xa1\xb2\xc3\xd4": ">",
              b"\xa1\xb2\x3c\x4d": ">"}.get(magic)
    if endian is None:
        raise ValueError(f"{path}: not a classic pcap")
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    linktype = struct.unpack(endian + "I", blob[20:24])[0]
    if linktype != P.LINKTYPE_ETHERNET:
        raise ValueError(f"{path}: link type {linktype}, want Ethernet")
    frames, at = [], 24
    while at + 16 <= len(blob):
        sec, frac, caplen, _ = struct.unpack(endian + "IIII", blob[at:at + 16])
        frames.append((sec + frac / (1e9 if nano else 1e6), blob[at + 16:at + 16 + caplen]))
        at += 16 + caplen
    return frames


def udp_of_frame(frame):
    """(src ip, dst ip, sport, dport, ecn, UDP payload) of an Ethernet frame
    carrying IPv4 or IPv6 UDP; ValueError for anything else or for a UDP
    length that disagrees with the IP one."""
    etype = struct.unpack(">H", frame[12:14])[0]
    ip = frame[14:]
    if etype == P.ETH_P_IP:
        ihl = (ip[0] & 0xF) * 4
        total = struct.unpack(">H", ip[2:4])[0]
        if ip[9] != 17:
            raise ValueError("not UDP")
        src, dst, ecn, udp = socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20]), ip[1] & 3, ip[ihl:total]
    elif etype == P.ETH_P_IPV6:
        if ip[6] != 17:
            raise ValueError("not UDP")
        n = struct.unpack(">H", ip[4:6])[0]
        src = socket.inet_ntop(socket.AF_INET6, ip[8:24])
        dst = socket.inet_ntop(socket.AF_INET6, ip[24:40])
        ecn, udp = (struct.unpack(">I", ip[:4])[0] >> 20) & 3, ip[40:40 + n]
    else:
        raise ValueError(f"ethertype {etype:#x}")
    sport, dport, ulen = struct.unpack(">HHH", udp[:6])
    if ulen != len(udp):
        raise ValueError(f"UDP length {ulen}, IP carries {len(udp)}")
    return src, dst, sport, dport, ecn, udp[8:]


def describe(p):
    """One line for a log: opcode name and the fields that identify it."""
    if isinstance(p, Data):
        g, s = split_path_id(p.path_id)
        return (f"{OP_NAMES[p.opcode]} path {g}:{s} psn {p.psn} msn {p.msn} off {p.offset}"
                f"/{p.msg_len} flags {p.flags:#x} fd {p.floor_delta}")
    if isinstance(p, Ack):
        g, s = split_path_id(p.path_id)
        return f"ACK path {g}:{s} cum_psn {p.cum_psn} sack {p.sack_psns()[:4]} cum_msn {p.cum_msn} ce {int(p.ce)}"
    if isinstance(p, Nak):
        return f"NAK path {p.path_id} syndrome {p.syndrome} psn {p.psn} msn {p.msn}"
    if isinstance(p, Probe):
        return f"{'PROBE_REPLY' if p.reply else 'PROBE'} path {p.path_id} seq {p.seq} qpn {p.dst_qpn:#x}"
    return (f"PLANES {p.src_qpn:#x}->{p.dst_qpn:#x} known {int(p.known)} confirm {int(p.confirm)} "
            f"max_payload {p.max_payload} {p.addrs}")
