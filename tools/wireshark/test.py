#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Tests of the MetaRoCE Wireshark dissector (tools/wireshark/metaroce.lua).

Builds pcaps with selftests/metaroce_pkt.py (written from the spec, apart
from the dissector), dissects them with tshark and checks:
  valid.pcap   one or more packets of every opcode, two planes, IPv4 and
               IPv6: no malformed packet, no drop reason, ICRC good, and
               exact values of chosen fields (path sub-fields, SACK PSNs,
               streams and links between packets)
  broken.pcap  one packet per validity rule of protocol.md section 1 (and
               the receiver's segmentation and consistency rules), each with
               a correct ICRC unless the ICRC is the point: the expected
               drop reason and expert item, and no other
  learn.pcap   the payload MTU learnt from a QP's traffic (preference 0)
  sample       preference icrc_sample N: the ICRCs of the first N packets
               of each opcode verified (a bad one found), the others not;
               summary.sh --icrc-sample's count of them
  rig.pcap     two devices on two planes as selftests/dissect.sh captures
               them: summary.sh --device's totals per counter, and
               counters.py's verdicts against snapshots that agree and
               snapshots that are wrong by one packet
  golden       the golden captures of the simulator (tools/golden/*/*.pcap,
               written by the engine), end to end in one pcap: every frame
               MetaRoCE, valid, ICRC good, no expert error
and that vectors.txt, the same packets with the engine's expected verdicts
(rust/engine/tests/wire_vectors.rs), is current.

  test.py [--lua FILE] [--tshark PATH] [--mutants] [-v] [--write-vectors]
    --mutants  also run the checks on copies of the dissector with one
               deliberate bug each; every copy must fail them

Prints one line per check and "N passed, N failed"; exit 1 on a failure.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "selftests"))
import metaroce_pkt as P  # noqa: E402

A0, B0 = "198.18.0.1", "198.18.0.2"  # plane 0 of hosts A and B
A1, B1 = "198.18.1.1", "198.18.1.2"  # plane 1
A6, B6 = "fd00::a", "fd00::b"
A16 = "fd00:1::a"  # host A's IPv6 address on plane 1
QA, QB = 0x11, 0x12  # the connected QPs at A and B
M = 1024  # payload MTU of the connection


def pid(gen, slot):
    return gen << 6 | slot


FIELDS = [
    "frame.number", "frame.protocols", "_ws.malformed", "_ws.expert.message",
    "metaroce.valid", "metaroce.drop_reason", "metaroce.opcode", "metaroce.flags",
    "metaroce.flags.retransmit", "metaroce.flags.imm", "metaroce.flags.ce", "metaroce.flags.known",
    "metaroce.flags.peer_psn", "metaroce.flags.confirm",
    "metaroce.dst_qpn", "metaroce.path_id", "metaroce.path_id.generation", "metaroce.path_id.slot",
    "metaroce.floor_delta", "metaroce.floor", "metaroce.psn", "metaroce.msn", "metaroce.offset",
    "metaroce.msg_len", "metaroce.payload_len", "metaroce.rsn", "metaroce.remote_va",
    "metaroce.send_part.offset", "metaroce.send_part.more", "metaroce.ud.src_qpn", "metaroce.rkey",
    "metaroce.qkey", "metaroce.inv_rkey", "metaroce.imm", "metaroce.req_msn", "metaroce.timestamp",
    "metaroce.mtu", "metaroce.pkt_index", "metaroce.last", "metaroce.atomic.compare",
    "metaroce.atomic.swap", "metaroce.atomic.add", "metaroce.atomic.data", "metaroce.atomic.orig",
    "metaroce.ack.cum_psn", "metaroce.ack.sack_psn", "metaroce.ack.sack_rel",
    "metaroce.ack.sack_count", "metaroce.ack.sack_ranges", "metaroce.ack.ts_echo",
    "metaroce.ack.cum_msn", "metaroce.ack.rate_hint", "metaroce.ack.msg_window", "metaroce.ack.data_frame", "metaroce.ack_frame",
    "metaroce.nak.syndrome", "metaroce.nak.psn", "metaroce.nak.msn", "metaroce.nak.data_frame",
    "metaroce.probe.seq", "metaroce.probe.timestamp", "metaroce.probe.request_frame",
    "metaroce.probe.reply_frame", "metaroce.planes.src_qpn", "metaroce.planes.count",
    "metaroce.planes.addr", "metaroce.planes.addr_v4", "metaroce.icrc", "metaroce.icrc.status",
    "metaroce.qp_stream", "metaroce.path_stream",
]
AGG = "|"
REASONS = ["Truncated", "TrailingBytes", "BadVersion", "BadOpcode", "BadFlags", "ReservedNonZero",
           "BadRsn", "BadLength", "PayloadTooLarge", "BadSyndrome", "IcrcMismatch",
           "BadSegmentation", "Inconsistent"]


class Capture:
    """Frames of a pcap under construction, each with a name for the checks."""

    def __init__(self):
        self.frames, self.names, self.payloads = [], {}, {}

    def add(self, name, src, dst, sport, payload, dport=P.UDP_PORT, cut=None, ecn=2):
        ip = P.ipv6_udp if ":" in src else P.ipv4_udp
        frame = P.ethernet(ip(src, dst, sport, payload, dport, ecn))
        t = len(self.frames) / 1000
        self.frames.append((t, frame[:cut], len(frame)) if cut else (t, frame))
        self.names[name] = len(self.frames)  # tshark numbers frames from 1
        self.payloads[name] = payload

    def write(self, path):
        P.write_pcap(path, self.frames)


def data(op, path, psn, msn, offset, msg_len, payload_len=None, flags=None, **kw):
    """A data packet (1.3) with a payload of its length's bytes."""
    n = min(M, msg_len - offset) if payload_len is None else payload_len
    if flags is None:
        flags = P.FLAG_IMM if op in (P.OP_SEND_IMM, P.OP_WRITE_IMM) else 0
    payload = kw.pop("payload", bytes((offset + i) & 0xFF for i in range(n)))
    kw.setdefault("timestamp", 1_000_000 + psn * 7 + msn)
    return P.data(op, flags, kw.pop("dst_qpn", QB), path, kw.pop("floor_delta", 0), psn, msn,
                  offset, msg_len, payload, **kw)


def valid_capture():
    c = Capture()
    # Plane lists first, on plane 0 (1.8): A's without KNOWN, B's answer with.
    c.add("planes_a", A0, B0, 50000, P.planes(QB, QA, False, [A0, A1], confirm=True))
    c.add("planes_b", B0, A0, 50001, P.planes(QA, QB, True, [B0, B1], confirm=True))
    c.add("planes_a2", A0, B0, 50000, P.planes(QB, QA, True, [A0, A1]))
    # MSN 0: a 2500-byte SEND in 3 packets over two paths on two planes.
    p0, p1 = pid(2, 0), pid(0, 1)
    c.add("send0", A0, B0, 50010, data(P.OP_SEND, p0, 0, 0, 0, 2500))
    c.add("send1", A1, B1, 50011, data(P.OP_SEND, p1, 0, 0, M, 2500))
    c.add("send2", A0, B0, 50010, data(P.OP_SEND, p0, 1, 0, 2 * M, 2500), ecn=3)  # CE
    c.add("ack_send1", B1, A1, 50011, P.ack(QA, p1, False, 1, [], 1_000_000, 0, 0))
    c.add("ack_sack", B0, A0, 50010, P.ack(QA, p0, True, 2, [1, 2, 3, 9, 255],
                                           1_000_000 + 7, 1, 25_000_000, msg_window=1024))
    c.add("send_imm", A0, B0, 50010, data(P.OP_SEND_IMM, p0, 2, 1, 0, 100, imm=0xDEADBEEF, rsn=1))
    c.add("write0", A0, B0, 50010, data(P.OP_WRITE, p0, 3, 2, 0, 2 * M, remote_va=0x7F0000001000,
                                        rkey=0x1234, floor_delta=2))
    c.add("write1", A1, B1, 50011, data(P.OP_WRITE, p1, 1, 2, M, 2 * M, remote_va=0x7F0000001000,
                                        rkey=0x1234))
    c.add("write_imm", A0, B0, 50010, data(P.OP_WRITE_IMM, p0, 4, 3, 0, 16, remote_va=0x5000,
                                           rkey=0x1234, imm=7, rsn=2))
    c.add("read_req", A0, B0, 50010, data(P.OP_READ_REQ, p0, 5, 4, 0, 3000, payload_len=0,
                                          remote_va=0x9000, rkey=0x77))
    # B's own send stream: READ_RESP and ATOMIC_RESP on B's path 1:0, B
    # answering before it had its own initial PSN (PEER_PSN, section 2).
    q0 = pid(1, 0)
    for i in range(3):
        c.add(f"read_resp{i}", B0, A0, 50020, data(P.OP_READ_RESP, q0, i, 0, i * M, 3000,
                                                   dst_qpn=QA, imm=4, flags=P.FLAG_PEER_PSN))
    c.add("cmp_swap", A0, B0, 50010, data(P.OP_CMP_SWAP, p0, 6, 5, 0, 16, remote_va=0x1008,
                                          rkey=0x4201, payload=P.cmp_swap_operands(1, 0x22)))
    c.add("fetch_add", A0, B0, 50010, data(P.OP_FETCH_ADD, p0, 7, 6, 0, 8, remote_va=0x1010,
                                           rkey=0x4201, payload=P.u64_operand(5)))
    c.add("atomic_write", A0, B0, 50010, data(P.OP_ATOMIC_WRITE, p0, 8, 7, 0, 8, remote_va=0x1018,
                                              rkey=0x4201, payload=b"ABCDEFGH"))
    c.add("atomic_resp", B0, A0, 50020, data(P.OP_ATOMIC_RESP, q0, 3, 1, 0, 8, dst_qpn=QA, imm=5,
                                             payload=P.u64_operand(0x1122334455667788),
                                             flags=P.FLAG_PEER_PSN))
    c.add("send_inv", A0, B0, 50010, data(P.OP_SEND_INV, p0, 9, 8, 0, 64, rkey=0xABCD01, rsn=3))
    # A SEND larger than one message: two parts sharing rsn 4 (section 5).
    c.add("part_more", A0, B0, 50010, data(P.OP_SEND, p0, 10, 9, 0, M, remote_va=P.SEND_MORE,
                                           rsn=4))
    c.add("part_last", A0, B0, 50010, data(P.OP_SEND, p0, 11, 10, 0, 10, remote_va=M, rsn=4))
    c.add("empty_send", A0, B0, 50010, data(P.OP_SEND, p0, 12, 11, 0, 0, rsn=5))
    # MSN 0's packet 1 again, under a new PSN on the other path.
    c.add("retransmit", A0, B0, 50010, data(P.OP_SEND, p0, 13, 0, M, 2500, flags=P.FLAG_RETRANSMIT))
    c.add("nak", B0, A0, 50010, P.nak(QA, p0, 1, 9, 8))
    # Slot 0 replaced (4.3): generation 3, a new source port, PSNs from 0.
    c.add("replaced", A0, B0, 50012, data(P.OP_WRITE, pid(3, 0), 0, 13, 0, 100, remote_va=0x1,
                                          rkey=1))
    c.add("probe", A0, B0, 50030, P.probe(P.OP_PROBE, QB, pid(3, 2), 9, 123456))
    c.add("probe_reply", B0, A0, 50030, P.probe(P.OP_PROBE_REPLY, QA, pid(3, 2), 9, 123456))
    c.add("ud_imm", A0, B0, 50040, data(P.OP_UD_SEND, 0, 7, 7, 0, 256, dst_qpn=1, flags=P.FLAG_IMM,
                                        remote_va=0x21, rkey=P.GSI_QKEY, imm=0x55))
    c.add("ud", A0, B0, 50041, data(P.OP_UD_SEND, 0, 8, 8, 0, 32, dst_qpn=1, remote_va=0xABCDEF,
                                    rkey=P.GSI_QKEY))
    c.add("probe6", A6, B6, 50050, P.probe(P.OP_PROBE, QB, pid(0, 0), 1, 5))
    c.add("probe6_reply", B6, A6, 50050, P.probe(P.OP_PROBE_REPLY, QA, pid(0, 0), 1, 5))
    c.add("write_imm6", A6, B6, 50051, data(P.OP_WRITE_IMM, pid(1023, 63), 0, 12, 0, 4, imm=1,
                                             rsn=6))
    # An IPv6 QP's plane list: IPv6 entries (1.8, of the QP's family).
    c.add("planes6", A6, B6, 50052, P.planes(QB, QA, True, [A6, A16]))
    return c


def reseal(pkt):
    return P.seal(pkt[:-4])


def patch(pkt, off, raw):
    """`pkt` with bytes at `off` replaced, ICRC recomputed."""
    b = bytearray(pkt)
    b[off:off + len(raw)] = raw
    return reseal(bytes(b))


def be(n, v):
    return v.to_bytes(n, "big")


def broken_capture():
    """(capture, {name: expected drop reason or None})"""
    c, want = Capture(), {}
    msn = [100]

    def add(name, reason, pkt, **kw):
        c.add(name, A0, B0, 50100, pkt, **kw)
        want[name] = reason

    def d(op=P.OP_WRITE, offset=0, msg_len=64, payload_len=None, **kw):
        msn[0] += 1
        kw.setdefault("remote_va", 0x10000 if op != P.OP_UD_SEND else 0x21)
        return data(op, pid(5, 3), msn[0], msn[0], offset, msg_len, payload_len, **kw)

    good = d()
    add("good", None, good)
    add("bad_icrc", "IcrcMismatch", good[:-1] + bytes([good[-1] ^ 1]))
    add("truncated", "Truncated", good[:-3])
    add("trailing", "TrailingBytes", good + b"\0")
    add("truncated_hdr", "Truncated", good[:40])
    add("truncated_prefix", "Truncated", good[:6])
    add("one_byte", "Truncated", b"\x01")  # (UDP hands on no empty payload)
    add("bad_version", "BadVersion", patch(good, 0, b"\x02"))
    add("bad_opcode", "BadOpcode", patch(good, 1, b"\x99"))
    add("reserved_opcode", "BadOpcode", patch(good, 1, b"\x0c"))
    add("undefined_flag", "BadFlags", patch(good, 2, be(2, 0x0010)))
    add("imm_missing", "BadFlags", d(P.OP_SEND_IMM, flags=0, rsn=1, remote_va=0))
    add("imm_on_write", "BadFlags", d(P.OP_WRITE, flags=P.FLAG_IMM))
    add("peer_psn_on_ud", "BadFlags", d(P.OP_UD_SEND, flags=P.FLAG_PEER_PSN, offset=0, msg_len=32,
                                        dst_qpn=1, remote_va=0x21, rkey=P.GSI_QKEY))
    add("payload_too_large", "PayloadTooLarge", d(msg_len=10000, payload_len=9300))
    add("floor_delta", "BadLength", d(floor_delta=257))
    add("rsn_on_write", "BadRsn", d(rsn=3))
    add("read_req_offset", "BadLength", d(P.OP_READ_REQ, offset=M, msg_len=3000, payload_len=0))
    add("read_req_payload", "BadLength", d(P.OP_READ_REQ, msg_len=3000, payload_len=8))
    add("ud_offset", "BadLength", d(P.OP_UD_SEND, offset=8, msg_len=16, payload_len=8,
                                    dst_qpn=1, rkey=P.GSI_QKEY))
    add("ud_len", "BadLength", d(P.OP_UD_SEND, msg_len=16, payload_len=8, dst_qpn=1))
    add("ud_src_qpn", "ReservedNonZero", d(P.OP_UD_SEND, msg_len=8, dst_qpn=1, remote_va=1 << 24))
    add("ud_imm_no_flag", "ReservedNonZero", d(P.OP_UD_SEND, msg_len=8, dst_qpn=1, imm=9))
    add("cmp_swap_len", "BadLength", d(P.OP_CMP_SWAP, msg_len=8))
    add("fetch_add_len", "BadLength", d(P.OP_FETCH_ADD, msg_len=16))
    add("atomic_write_offset", "BadLength", d(P.OP_ATOMIC_WRITE, offset=8, msg_len=8, payload_len=8))
    add("atomic_resp_len", "BadLength", d(P.OP_ATOMIC_RESP, msg_len=16, payload_len=16, remote_va=0))
    add("beyond_msg_len", "BadLength", d(offset=M, msg_len=M + 8, payload_len=16))
    add("offset_overflow", "BadLength", d(offset=0xFFFFFC00, msg_len=0xFFFFFFFF, payload_len=M))
    add("empty_of_nonempty", "BadLength", d(msg_len=64, payload_len=0))
    # Receiver rules (MTU 1024 from the preference).
    add("seg_offset", "BadSegmentation", d(offset=100, msg_len=2000, payload_len=M))
    add("seg_short", "BadSegmentation", d(offset=0, msg_len=2000, payload_len=512))
    add("seg_too_many", "BadSegmentation", d(offset=0, msg_len=1025 * M, payload_len=M))
    msn[0] += 1
    first = data(P.OP_WRITE, pid(5, 3), 900, msn[0], 0, 2 * M, remote_va=0x10000)
    add("msg_first", None, first)
    add("inconsistent", "Inconsistent", data(P.OP_WRITE, pid(5, 3), 901, msn[0], M, 3 * M,
                                             remote_va=0x10000))
    # Control packets.
    ack = P.ack(QA, pid(5, 3), False, 3, [0], 0, 0, 0)
    add("ack_flags", "BadFlags", patch(ack, 2, be(2, 0x0002)))
    add("ack_truncated", "Truncated", ack[:-1])
    nak = P.nak(QA, pid(5, 3), 2, 1, 1)
    add("nak_syndrome", "BadSyndrome", patch(nak, 10, b"\x04"))
    add("nak_reserved11", "ReservedNonZero", patch(nak, 11, b"\x01"))
    add("nak_reserved20", "ReservedNonZero", patch(nak, 20, be(4, 1)))
    add("nak_flags", "BadFlags", patch(nak, 2, be(2, 0x0001)))
    probe = P.probe(P.OP_PROBE, QB, pid(5, 3), 1, 2)
    add("probe_reserved", "ReservedNonZero", patch(probe, 10, b"\x80\x00"))
    add("probe_flags", "BadFlags", patch(probe, 2, be(2, 0x8000)))
    add("reply_trailing", "TrailingBytes", P.probe(P.OP_PROBE_REPLY, QA, 1, 1, 2) + b"\0\0")
    planes = P.planes(QB, QA, False, [A0, A1])
    add("planes_count0", "BadLength", patch(planes, 12, b"\x00"))
    add("planes_count9", "BadLength", patch(planes, 12, b"\x09"))
    add("planes_past_count", "ReservedNonZero", patch(planes, 16 + 16 * 2 + 15, b"\x01"))
    add("planes_reserved", "ReservedNonZero", patch(planes, 13, b"\x01"))
    add("planes_flags", "BadFlags", patch(planes, 2, be(2, 0x0004)))
    # Beyond the rules: a frame the capture cut short (ICRC unverified, not
    # Truncated), and the heuristic on another port.
    c.add("snaplen", A0, B0, 50100, d(msg_len=M), cut=14 + 20 + 8 + 100)
    want["snaplen"] = None
    add("snaplen_trailing", "TrailingBytes", good + bytes(50), cut=14 + 20 + 8 + 60)
    c.add("heur_probe", A0, B0, 50101, P.probe(P.OP_PROBE, QB, 1, 1, 2), dport=9999)
    want["heur_probe"] = None
    c.add("heur_other", A0, B0, 50102, bytes(range(40)), dport=9999)
    return c, want


def learn_capture():
    c = Capture()
    c.add("first", A0, B0, 50200, data(P.OP_WRITE, pid(0, 0), 0, 0, 0, 4000, payload_len=1000,
                                       payload=bytes(1000), remote_va=0x1000))
    c.add("second", A0, B0, 50200, data(P.OP_WRITE, pid(0, 0), 1, 0, 1000, 4000, payload_len=1000,
                                        payload=bytes(1000), remote_va=0x1000))
    c.add("misaligned", A0, B0, 50200, data(P.OP_WRITE, pid(0, 0), 2, 0, 1500, 4000,
                                            payload_len=1000, payload=bytes(1000), remote_va=0x1000))
    return c


RECEIVER_REASONS = ("BadSegmentation", "Inconsistent")
VECTORS = os.path.join(HERE, "vectors.txt")
GOLDEN = os.path.join(HERE, "..", "golden")


# The counters a device would show for rig_capture(): (device, counter) ->
# packets, frame names listed where the count is not obvious.
RIG_DEVICES = {"A": f"{A0},{A1}", "B": f"{B0},{B1}"}
RIG_WANT = {
    "A": {"tx_packets": 9, "rx_packets": 6, "retransmissions": 2, "path_failures": 1,
          "ecn_marks": 1, "rx_malformed": 1, "ud_tx_packets": 1, "ud_rx_packets+ud_rx_dropped": 1,
          "probes_answered": 1, "probes_answered+rx_probes_limited": 1,
          "plane0_tx_packets": 4, "plane1_tx_packets": 5, "plane0_rx_packets": 4,
          "plane1_rx_packets": 2, "plane0_retransmissions": 1, "plane1_retransmissions": 1},
    "B": {"tx_packets": 6, "rx_packets": 9, "retransmissions": 0, "path_failures": 0,
          "ecn_marks": 0, "rx_malformed": 0, "ud_tx_packets": 1, "ud_rx_packets+ud_rx_dropped": 1,
          "probes_answered": 1, "probes_answered+rx_probes_limited": 2,
          "plane0_tx_packets": 4, "plane1_tx_packets": 2, "plane0_rx_packets": 4,
          "plane1_rx_packets": 5, "plane0_retransmissions": 0, "plane1_retransmissions": 0},
}


def rig_capture():
    """Hosts A and B with one device each on planes 0 and 1, as
    selftests/dissect.sh records them on A (both directions): a
    retransmission on each plane, a path of A replaced (shown only by its
    PROBE's new generation), probes answered both ways, datagrams, an
    ECN-CE mark, a malformed packet and a frame that is not MetaRoCE."""
    c = Capture()
    w = dict(remote_va=0x1000, rkey=9)
    c.add("planes_a", A0, B0, 50000, P.planes(QB, QA, False, [A0, A1], confirm=True))
    c.add("planes_b", B0, A0, 50001, P.planes(QA, QB, True, [B0, B1]))
    c.add("w0", A0, B0, 50010, data(P.OP_WRITE, pid(0, 0), 0, 0, 0, 2 * M, **w))
    c.add("w1", A1, B1, 50011, data(P.OP_WRITE, pid(0, 1), 0, 0, M, 2 * M, **w))
    c.add("ack_ce", B0, A0, 50010, P.ack(QA, pid(0, 0), False, 1, [], 1_000_000, 0, 0), ecn=3)
    c.add("w1_again", A0, B0, 50010, data(P.OP_WRITE, pid(0, 0), 1, 0, M, 2 * M,
                                          flags=P.FLAG_RETRANSMIT, **w))
    c.add("probe", A1, B1, 50011, P.probe(P.OP_PROBE, QB, pid(0, 1), 1, 5))
    c.add("probe_new", A1, B1, 50012, P.probe(P.OP_PROBE, QB, pid(1, 1), 2, 6))
    c.add("reply_b", B1, A1, 50012, P.probe(P.OP_PROBE_REPLY, QA, pid(1, 1), 2, 6))
    c.add("probe_b", B1, A1, 50020, P.probe(P.OP_PROBE, QA, pid(0, 3), 7, 8))
    c.add("reply_a", A1, B1, 50020, P.probe(P.OP_PROBE_REPLY, QB, pid(0, 3), 7, 8))
    c.add("w2", A1, B1, 50012, data(P.OP_WRITE, pid(1, 1), 0, 1, 0, 8, flags=P.FLAG_RETRANSMIT,
                                    **w))
    c.add("ud_a", A0, B0, 50030, data(P.OP_UD_SEND, 0, 1, 1, 0, 32, dst_qpn=1, remote_va=0x21,
                                      rkey=P.GSI_QKEY))
    c.add("ud_b", B0, A0, 50031, data(P.OP_UD_SEND, 0, 1, 1, 0, 32, dst_qpn=1, remote_va=0x21,
                                      rkey=P.GSI_QKEY))
    c.add("bad_version", B0, A0, 50040, patch(P.probe(P.OP_PROBE, QA, 0, 1, 1), 0, b"\x02"))
    c.add("not_metaroce", A0, B0, 50050, b"\x01\x00" * 20, dport=53)
    return c


def vectors():
    """The test packets as the engine must judge them, for
    rust/engine/tests/wire_vectors.rs: `name parse receiver hex` per line,
    parse = what wire::parse_packet returns (ok or the WireError), receiver
    = what a Receiver with MTU 1024 makes of a parsed reliable data packet
    (place or the DropReason; - for other packets)."""
    valid = valid_capture()
    broken, want = broken_capture()
    lines = []
    for cap, expect in ((valid, {}), (broken, want)):
        for name, pkt in cap.payloads.items():
            if name in ("snaplen", "heur_other"):
                continue
            reason = expect.get(name)
            parse = reason if reason and reason not in RECEIVER_REASONS else "ok"
            reliable = len(pkt) > 1 and pkt[1] in P.DATA_OPCODES and pkt[1] != P.OP_UD_SEND
            rx = "-"
            if parse == "ok" and reliable:
                rx = reason if reason in RECEIVER_REASONS else "place"
            lines.append(f"{name} {parse} {rx} {pkt.hex() or '-'}")
    return "# generated by tools/wireshark/test.py --write-vectors\n" + "\n".join(lines) + "\n"


def check_vectors(ck):
    try:
        with open(VECTORS) as f:
            current = f.read() == vectors()
    except OSError:
        current = False
    ck.check("vectors.txt (the engine's test of these packets) is current", current,
             "run tools/wireshark/test.py --write-vectors")


def dissect(tshark, lua, pcap, prefs=(), two_pass=False):
    cmd = [tshark, "-n", "-X", f"lua_script:{lua}", "-r", pcap, "-T", "fields",
           "-E", "separator=\t", "-E", "occurrence=a", "-E", f"aggregator={AGG}"]
    if two_pass:
        cmd.append("-2")
    for p in prefs:
        cmd += ["-o", p]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0 or "Lua" in out.stderr and "rror" in out.stderr:
        raise RuntimeError(f"tshark failed ({out.returncode}): {out.stderr.strip()}")
    rows = {}
    for line in out.stdout.splitlines():
        vals = line.split("\t")
        row = dict(zip(FIELDS, vals))
        rows[int(row["frame.number"])] = row
    return rows


class Checks:
    """Counts checks; prints failures (and with `verbose` passes too) unless `silent`."""

    def __init__(self, verbose=False, silent=False):
        self.passed, self.failed, self.verbose, self.silent = 0, 0, verbose, silent

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        if self.silent or (ok and not self.verbose):
            return
        print(("ok - " if ok else "not ok - ") + name + ("" if ok or not detail else f": {detail}"))


def values(row, field):
    v = row.get(field, "")
    return v.split(AGG) if v else []


def reasons_of(row):
    """Drop reasons named by the row's expert items."""
    return sorted({m.split(":")[0] for m in values(row, "_ws.expert.message")
                   if m.split(":")[0] in REASONS})


def run(tshark, lua, verbose=False, silent=False):
    ck = Checks(verbose, silent)
    with tempfile.TemporaryDirectory() as tmp:
        valid = valid_capture()
        vpath = os.path.join(tmp, "valid.pcap")
        valid.write(vpath)
        broken, want = broken_capture()
        bpath = os.path.join(tmp, "broken.pcap")
        broken.write(bpath)
        learn = learn_capture()
        lpath = os.path.join(tmp, "learn.pcap")
        learn.write(lpath)
        rig = rig_capture()
        rpath = os.path.join(tmp, "rig.pcap")
        rig.write(rpath)
        try:
            vrows = dissect(tshark, lua, vpath)
            vrows_mtu = dissect(tshark, lua, vpath, [f"metaroce.mtu:{M}"], two_pass=True)
            brows = dissect(tshark, lua, bpath, [f"metaroce.mtu:{M}"])
            lrows = dissect(tshark, lua, lpath)
        except RuntimeError as e:
            ck.check("tshark runs the dissector", False, str(e))
            return ck
        check_valid(ck, valid, vrows, "learnt MTU")
        check_valid(ck, valid, vrows_mtu, "MTU preference")
        check_fields(ck, valid.names, vrows)
        check_two_pass(ck, valid.names, vrows, vrows_mtu)
        check_broken(ck, broken.names, want, brows)
        check_learn(ck, learn.names, lrows)
        check_sample(ck, tshark, lua, vpath, valid, tmp)
        check_summary(ck, valid, vpath, want, bpath)
        check_rig_counters(ck, rig, rpath, tmp)
        check_golden(ck, tshark, lua, tmp)
    check_documented(ck, tshark, lua)
    check_vectors(ck)
    return ck


def check_valid(ck, cap, rows, how):
    ck.check(f"valid ({how}): every frame dissected", len(rows) == len(cap.frames),
             f"{len(rows)} of {len(cap.frames)}")
    ops = set()
    for name, n in cap.names.items():
        r = rows.get(n, {})
        problems = []
        if "metaroce" not in r.get("frame.protocols", "").split(":"):
            problems.append("not MetaRoCE")
        if r.get("_ws.malformed"):
            problems.append("malformed")
        if r.get("metaroce.valid") != "1" or r.get("metaroce.drop_reason"):
            problems.append(f"valid={r.get('metaroce.valid')} reason={r.get('metaroce.drop_reason')}")
        if reasons_of(r):
            problems.append(f"expert {reasons_of(r)}")
        if r.get("metaroce.icrc.status") != "1":
            problems.append(f"ICRC status {r.get('metaroce.icrc.status')}")
        ck.check(f"valid ({how}): {name} clean", not problems, "; ".join(problems))
        ops.add(r.get("metaroce.opcode"))
    every = {f"{v:#04x}" for v in list(P.DATA_OPCODES) + [0x10, 0x11, 0x20, 0x21, 0x22]}
    ck.check(f"valid ({how}): every opcode present", every <= ops, f"missing {sorted(every - ops)}")


def check_fields(ck, names, rows):
    def eq(name, field, want):
        got = values(rows.get(names[name], {}), field)
        want = [str(w) for w in want] if isinstance(want, list) else [str(want)]
        ck.check(f"{name}: {field} = {AGG.join(want)}", got == want, f"got {AGG.join(got)}")

    def field(name, f):
        return rows.get(names[name], {}).get(f)

    eq("send0", "metaroce.opcode", "0x01")
    eq("send0", "metaroce.path_id", pid(2, 0))
    eq("send0", "metaroce.path_id.generation", 2)
    eq("send0", "metaroce.path_id.slot", 0)
    eq("send1", "metaroce.path_id.generation", 0)
    eq("send1", "metaroce.path_id.slot", 1)
    eq("write_imm6", "metaroce.path_id", 0xFFFF)
    eq("write_imm6", "metaroce.path_id.generation", 1023)
    eq("write_imm6", "metaroce.path_id.slot", 63)
    eq("send2", "metaroce.psn", 1)
    eq("send2", "metaroce.msn", 0)
    eq("send_imm", "metaroce.psn", 2)
    eq("send_imm", "metaroce.msn", 1)
    eq("write1", "metaroce.psn", 1)
    eq("write1", "metaroce.msn", 2)
    eq("cmp_swap", "metaroce.msn", 5)
    eq("retransmit", "metaroce.psn", 13)
    eq("send2", "metaroce.offset", 2 * M)
    eq("send2", "metaroce.payload_len", 2500 - 2 * M)
    eq("send2", "metaroce.mtu", M)
    eq("send2", "metaroce.pkt_index", 2)
    eq("send2", "metaroce.last", 1)
    eq("send0", "metaroce.last", 0)
    eq("ack_sack", "metaroce.ack.cum_psn", 2)
    eq("ack_sack", "metaroce.flags.ce", 1)
    eq("ack_sack", "metaroce.ack.sack_psn", [4, 5, 6, 12, 258])
    eq("ack_sack", "metaroce.ack.sack_rel", [2, 3, 4, 10, 256])
    eq("ack_sack", "metaroce.ack.sack_count", 5)
    eq("ack_sack", "metaroce.ack.sack_ranges", "4-6,12,258")
    eq("ack_sack", "metaroce.ack.rate_hint", 25_000_000)
    eq("ack_sack", "metaroce.ack.cum_msn", 1)
    eq("ack_sack", "metaroce.ack.msg_window", 1024)
    eq("ack_send1", "metaroce.ack.msg_window", 0)
    eq("ack_send1", "metaroce.ack.sack_count", 0)
    eq("send_imm", "metaroce.imm", "0xdeadbeef")
    eq("send_imm", "metaroce.flags.imm", 1)
    eq("send_imm", "metaroce.rsn", 1)
    eq("write0", "metaroce.remote_va", "0x00007f0000001000")
    eq("write0", "metaroce.floor_delta", 2)
    eq("write0", "metaroce.floor", 1)
    eq("read_req", "metaroce.msg_len", 3000)
    eq("read_resp1", "metaroce.req_msn", 4)
    eq("read_resp1", "metaroce.flags.peer_psn", 1)
    eq("send0", "metaroce.flags.peer_psn", 0)
    eq("planes_a", "metaroce.flags.confirm", 1)
    eq("planes_a", "metaroce.flags.known", 0)
    eq("planes_b", "metaroce.flags.known", 1)
    eq("planes_a2", "metaroce.flags.confirm", 0)
    eq("read_resp1", "metaroce.offset", M)
    eq("cmp_swap", "metaroce.atomic.compare", "0x0000000000000001")
    eq("cmp_swap", "metaroce.atomic.swap", "0x0000000000000022")
    eq("fetch_add", "metaroce.atomic.add", "0x0000000000000005")
    eq("atomic_write", "metaroce.atomic.data", "4142434445464748")
    eq("atomic_resp", "metaroce.atomic.orig", "0x1122334455667788")
    eq("atomic_resp", "metaroce.req_msn", 5)
    eq("send_inv", "metaroce.inv_rkey", "0x00abcd01")
    eq("part_more", "metaroce.send_part.more", 1)
    eq("part_more", "metaroce.send_part.offset", 0)
    eq("part_last", "metaroce.send_part.more", 0)
    eq("part_last", "metaroce.send_part.offset", M)
    eq("retransmit", "metaroce.flags.retransmit", 1)
    eq("send0", "metaroce.flags.retransmit", 0)
    eq("ud_imm", "metaroce.ud.src_qpn", "0x00000021")
    eq("ud_imm", "metaroce.qkey", f"{P.GSI_QKEY:#010x}")
    eq("ud_imm", "metaroce.imm", "0x00000055")
    eq("ud", "metaroce.ud.src_qpn", "0x00abcdef")
    eq("nak", "metaroce.nak.syndrome", 1)
    eq("nak", "metaroce.nak.psn", 9)
    eq("probe_reply", "metaroce.probe.seq", 9)
    eq("planes_a", "metaroce.planes.count", 2)
    eq("planes_a", "metaroce.planes.addr_v4", [A0, A1])
    eq("planes6", "metaroce.planes.addr", [A6, A16] + ["::"] * (P.MAX_PLANES - 2))
    eq("planes6", "metaroce.planes.addr_v4", [])
    eq("planes_b", "metaroce.flags.known", 1)
    eq("planes_b", "metaroce.planes.src_qpn", f"{QB:#010x}")
    # Links between packets.
    eq("ack_send1", "metaroce.ack.data_frame", names["send1"])
    eq("ack_sack", "metaroce.ack.data_frame", names["send2"])
    eq("nak", "metaroce.nak.data_frame", names["send_inv"])
    eq("probe_reply", "metaroce.probe.request_frame", names["probe"])
    eq("probe6_reply", "metaroce.probe.request_frame", names["probe6"])
    # Streams: one QP direction across both planes (addresses from PLANES),
    # the path of send0/send2 shared with its ACKs and NAK; B's direction apart.
    qp = field("send0", "metaroce.qp_stream")
    same_qp = [n for n in ("send1", "send2", "write1", "send_inv", "probe") if
               field(n, "metaroce.qp_stream") != qp]
    ck.check("A->QB packets on both planes share a qp_stream", not same_qp, f"differ: {same_qp}")
    ck.check("B->QA data has its own qp_stream", field("read_resp0", "metaroce.qp_stream") != qp)
    path = field("send0", "metaroce.path_stream")
    same_path = [n for n in ("send2", "ack_sack", "nak", "retransmit", "write0") if
                 field(n, "metaroce.path_stream") != path]
    ck.check("path 2:0 data, ACK and NAK share a path_stream", not same_path, f"differ: {same_path}")
    ck.check("a replaced path (generation 3) has another path_stream",
             field("replaced", "metaroce.path_stream") != path)
    ck.check("path 0:1 has another path_stream",
             field("send1", "metaroce.path_stream") not in (path, None, "")
             and field("ack_send1", "metaroce.path_stream") == field("send1", "metaroce.path_stream"))


def check_two_pass(ck, names, one, two):
    """With tshark -2 the second pass shows the same streams, and the links
    to later frames."""
    keys = ("metaroce.qp_stream", "metaroce.path_stream", "metaroce.ack.data_frame")
    differ = [n for n, f in names.items() if any(one[f].get(k) != two[f].get(k) for k in keys)]
    ck.check("two passes: same streams and links", not differ, f"differ: {differ}")
    for name, field, later in (("send2", "metaroce.ack_frame", "ack_sack"),
                               ("send1", "metaroce.ack_frame", "ack_send1"),
                               ("probe", "metaroce.probe.reply_frame", "probe_reply")):
        got = two[names[name]].get(field)
        ck.check(f"two passes: {name} {field} = frame of {later}", got == str(names[later]), got)


def check_broken(ck, names, want, rows):
    for name, reason in want.items():
        r = rows.get(names[name], {})
        if name.startswith("heur_"):
            ok = "metaroce" in r.get("frame.protocols", "").split(":") and r.get("metaroce.valid") == "1"
            ck.check(f"{name}: found by the heuristic", ok, r.get("frame.protocols"))
            continue
        got, experts = r.get("metaroce.drop_reason", ""), reasons_of(r)
        if reason is None:
            ok = not got and not experts and r.get("metaroce.valid") == "1"
            detail = f"reason {got!r} experts {experts}"
        else:
            ok = got == reason and experts == [reason] and r.get("metaroce.valid") == "0"
            detail = f"reason {got!r} experts {experts} valid {r.get('metaroce.valid')}"
        ck.check(f"broken: {name} -> {reason or 'accepted'}", ok, detail)
    r = rows.get(names["snaplen"], {})
    ck.check("snaplen: ICRC unverified", r.get("metaroce.icrc.status") == "2",
             r.get("metaroce.icrc.status"))
    unfinished = [n for n in want if not n.startswith("heur_other")
                  and not rows.get(names[n], {}).get("metaroce.valid")]
    ck.check("the dissector runs to its end on every broken packet", not unfinished,
             f"not on {unfinished}")
    r = rows.get(names["bad_version"], {})
    ck.check("a dropped packet is _ws.malformed", r.get("_ws.malformed") == "_ws.malformed")
    r = rows.get(names["bad_icrc"], {})
    ck.check("bad_icrc: ICRC status bad", r.get("metaroce.icrc.status") == "0")
    r = rows.get(names["heur_other"], {})
    ck.check("heur_other: not taken by the heuristic",
             "metaroce" not in r.get("frame.protocols", "").split(":"))
    ck.check("every rule of 1.x exercised", set(REASONS) <= set(want.values()),
             f"missing {sorted(set(REASONS) - set(want.values()))}")


def sample_capture():
    """Three WRITEs, the second with a bad ICRC, then two ACKs."""
    c = Capture()
    for i in range(3):
        c.add(f"write{i}", A0, B0, 50010, data(P.OP_WRITE, pid(0, 0), i, i, 0, 16, remote_va=0x100,
                                               rkey=1))
    bad = c.payloads["write1"]
    c.payloads["write1"] = bad[:-1] + bytes([bad[-1] ^ 1])
    c.frames[1] = (c.frames[1][0], P.ethernet(P.ipv4_udp(A0, B0, 50010, c.payloads["write1"])))
    for i in range(2):
        c.add(f"ack{i}", B0, A0, 50010, P.ack(QA, pid(0, 0), False, i, [], 1_000_000, i, 0))
    return c


def check_sample(ck, tshark, lua, vpath, valid, tmp):
    """Preference icrc_sample, and summary.sh --icrc-sample."""
    cap = sample_capture()
    spath = os.path.join(tmp, "sample.pcap")
    cap.write(spath)
    status = {1: ["1", "2", "2", "1", "2"], 2: ["1", "0", "2", "1", "1"], 0: ["1", "0", "1", "1", "1"]}
    for n, want in status.items():
        rows = dissect(tshark, lua, spath, [f"metaroce.icrc_sample:{n}"])
        got = [rows.get(i, {}).get("metaroce.icrc.status") for i in range(1, len(cap.frames) + 1)]
        ck.check(f"icrc_sample {n}: ICRC status per frame {want}", got == want, got)
        reason = rows.get(cap.names["write1"], {}).get("metaroce.drop_reason", "")
        ck.check(f"icrc_sample {n}: the bad ICRC {'found' if want[1] == '0' else 'not verified'}",
                 reason == ("IcrcMismatch" if want[1] == "0" else ""), reason)
    rows = dissect(tshark, lua, spath, ["metaroce.icrc_sample:2", "metaroce.check_icrc:FALSE"])
    got = {r.get("metaroce.icrc.status") for r in rows.values()}
    ck.check("icrc_sample with check_icrc off: nothing verified", got == {"2"}, got)
    out = subprocess.run([os.path.join(HERE, "summary.sh"), "--icrc-sample", "2", spath],
                         capture_output=True, text=True)
    rows = summary_rows(out.stdout)
    ck.check("summary.sh --icrc-sample 2: 4 ICRCs verified, the bad one malformed",
             out.returncode == 0 and rows.get("ICRCs verified") == 4 and rows.get("malformed") == 1,
             out.stdout + out.stderr)
    out = subprocess.run([os.path.join(HERE, "summary.sh"), "--icrc-sample", "1", vpath],
                         capture_output=True, text=True)
    nops = len({p[1] for p in valid.payloads.values()})
    ck.check(f"summary.sh --icrc-sample 1: one ICRC verified per opcode ({nops})",
             out.returncode == 0 and summary_rows(out.stdout).get("ICRCs verified") == nops,
             out.stdout + out.stderr)


def summary_rows(text):
    """summary.sh's rows as {label: number}."""
    rows = {}
    for line in text.splitlines():
        label, rest = line[:28].strip(), line[28:].split()
        if rest and rest[0].isdigit():
            rows[label] = int(rest[0])
    return rows


def check_learn(ck, names, rows):
    r = rows.get(names["second"], {})
    ck.check("learn: MTU 1000 from the first packet", r.get("metaroce.mtu") == "1000"
             and r.get("metaroce.pkt_index") == "1" and not reasons_of(r), str(reasons_of(r)))
    r = rows.get(names["misaligned"], {})
    ck.check("learn: offset 1500 at MTU 1000 is BadSegmentation",
             r.get("metaroce.drop_reason") == "BadSegmentation", r.get("metaroce.drop_reason"))


def check_summary(ck, valid, vpath, want, bpath):
    def summary(*args):
        """summary.sh's rows as {label: number}, and its output."""
        out = subprocess.run([os.path.join(HERE, "summary.sh"), *args], capture_output=True,
                             text=True)
        return out.returncode, summary_rows(out.stdout), out.stdout

    rc, rows, text = summary(vpath)
    expect = {"SEND": 7, "ACK": 2, "data flagged RETRANSMIT": 1, "IP ECN-CE marked": 1,
              "ACKs echoing CE": 1, "malformed": 0, "path replacements": 1}
    bad = {k: rows.get(k) for k, v in expect.items() if rows.get(k) != v}
    ck.check("summary.sh counts the valid capture", rc == 0 and not bad, f"{bad}\n{text}")
    ck.check("summary.sh: packet total", f"{len(valid.frames)} MetaRoCE packets" in text,
             text.splitlines()[:1])
    parse = sum(1 for r in want.values() if r and r not in ("BadSegmentation", "Inconsistent"))
    rc, rows, text = summary("--icrc", bpath)
    ck.check(f"summary.sh --icrc: {parse} malformed, 4 receiver drops in the broken capture",
             rc == 0 and rows.get("malformed") == parse
             and rows.get("dropped by receiver rules") == 4, text)


def rig_bytes(cap, names):
    return sum(len(cap.payloads[n]) for n in names)


def check_rig_counters(ck, rig, rpath, tmp):
    """summary.sh --device on rig.pcap, then counters.py against snapshots."""
    args = [os.path.join(HERE, "summary.sh"), "--icrc"]
    for d in RIG_DEVICES.values():
        args += ["--device", d]
    out = subprocess.run(args + [rpath], capture_output=True, text=True)
    spath = os.path.join(tmp, "rig.summary")
    with open(spath, "w") as f:
        f.write(out.stdout)
    sys.path.insert(0, HERE)
    import counters as C  # noqa: E402
    a_tx = ["planes_a", "w0", "w1", "w1_again", "probe", "probe_new", "reply_a", "w2", "ud_a"]
    a_rx = ["planes_b", "ack_ce", "reply_b", "probe_b", "ud_b", "bad_version"]
    want = {d: dict(w) for d, w in RIG_WANT.items()}
    for d, tx, rx in (("A", a_tx, a_rx), ("B", a_rx, a_tx)):
        want[d]["tx_bytes"], want[d]["rx_bytes"] = rig_bytes(rig, tx), rig_bytes(rig, rx)
    planes = {"A": (["planes_a", "w0", "w1_again", "ud_a"], ["w1", "probe", "probe_new", "reply_a", "w2"],
                    ["planes_b", "ack_ce", "ud_b", "bad_version"], ["reply_b", "probe_b"])}
    planes["B"] = planes["A"][2:] + planes["A"][:2]
    for d, (tx0, tx1, rx0, rx1) in planes.items():
        for name, frames in (("plane0_tx_bytes", tx0), ("plane1_tx_bytes", tx1),
                             ("plane0_rx_bytes", rx0), ("plane1_rx_bytes", rx1)):
            want[d][name] = rig_bytes(rig, frames)
    for d in want:
        got = C.capture_totals(out.stdout, RIG_DEVICES[d])
        diff = {k: (got.get(k), v) for k, v in want[d].items() if got.get(k) != v}
        ck.check(f"summary.sh --device: host {d}'s counters in the rig capture",
                 out.returncode == 0 and not diff, f"(got, want) {diff}\n{out.stdout}")
    rows = summary_rows(out.stdout)
    ck.check("summary.sh: 1 frame not MetaRoCE, no dissector error, 1 path replacement (a PROBE's)",
             rows.get("not MetaRoCE") == 1 and rows.get("dissector errors") == 0
             and rows.get("path replacements") == 1, out.stdout)

    # counters.py: snapshots whose deltas are exactly the capture's pass;
    # each one packet off fails, unless within the slack on its side.
    names = {c for k in want["A"] for c in k.split("+")} | {"ud_rx_dropped", "rx_probes_limited",
                                                            "tx_errors"}
    before = {n: 1000 + i for i, n in enumerate(sorted(names))}
    exact = {n: before[n] + want["A"].get(n, 0) for n in names}
    exact["ud_rx_packets"] = before["ud_rx_packets"] + want["A"]["ud_rx_packets+ud_rx_dropped"]
    exact["probes_answered"] = before["probes_answered"] + want["A"]["probes_answered"]
    exact["rx_probes_limited"] = (before["rx_probes_limited"]
                                  + want["A"]["probes_answered+rx_probes_limited"]
                                  - want["A"]["probes_answered"])

    def verdict(after, *opts):
        paths = []
        for name, snap in (("before", before), ("after", after)):
            paths.append(os.path.join(tmp, f"{name}.json"))
            with open(paths[-1], "w") as f:
                json.dump([dict(ifname="mr0", port=1, **snap)], f)
        r = subprocess.run([sys.executable, os.path.join(HERE, "counters.py"), "--summary", spath,
                            "--device", RIG_DEVICES["A"], "--before", paths[0], "--after",
                            paths[1], *opts], capture_output=True, text=True)
        return r.returncode, r.stdout

    def off(name, by):
        return dict(exact, **{name: exact[name] + by})

    cases = [
        ("counters that match", exact, [], 0),
        ("one more packet sent than captured", off("tx_packets", 1), [], 1),
        ("... within --tx-slack 1", off("tx_packets", 1), ["--tx-slack", "1"], 0),
        ("... but --rx-slack does not cover tx", off("tx_packets", 1), ["--rx-slack", "5"], 1),
        ("one retransmission fewer than flagged", off("retransmissions", -1), ["--tx-slack", "5"], 1),
        ("one path failure more than replacements shown", off("path_failures", 1), [], 1),
        ("one datagram dropped more than received", off("ud_rx_dropped", 1), [], 1),
        ("plane 1 off by one", off("plane1_rx_packets", -1), [], 1),
        ("... outside --only ^plane0_", off("plane1_rx_packets", -1), ["--only", "^plane0_"], 0),
        ("a byte counter off by one", off("rx_bytes", 1), [], 1),
        ("a counter missing", {k: v for k, v in exact.items() if k != "ecn_marks"}, [], 2),
        ("one more sent, tx_errors +1, --tx-slack-counter tx_errors",
         dict(off("tx_packets", 1), tx_errors=exact["tx_errors"] + 1),
         ["--tx-slack-counter", "tx_errors"], 0),
        ("... two more sent", dict(off("tx_packets", 2), tx_errors=exact["tx_errors"] + 1),
         ["--tx-slack-counter", "tx_errors"], 1),
        ("--tx-slack-counter of a counter not in the snapshots", exact,
         ["--tx-slack-counter", "no_such_counter"], 2),
    ]
    for what, after, opts, want_rc in cases:
        rc, text = verdict(after, *opts)
        ck.check(f"counters.py: {what}: exit {want_rc}", rc == want_rc, f"exit {rc}\n{text}")


def golden_capture(path):
    """The golden captures end to end in one pcap at `path` (one tshark run
    instead of one per file; each scenario has QPNs of its own, so no QP
    stream spans two), and for each frame its file and frame number."""
    origin, header, out = [], None, []
    files = sorted(os.path.join(d, n) for d in os.listdir(GOLDEN)
                   if os.path.isdir(os.path.join(GOLDEN, d))
                   for n in os.listdir(os.path.join(GOLDEN, d)) if n.endswith(".pcap"))
    for name in files:
        with open(os.path.join(GOLDEN, name), "rb") as f:
            data = f.read()
        if header is None:
            header = data[:24]
            out.append(header)
        if data[:24] != header:
            raise RuntimeError(f"{name}: another pcap header")
        off, n = 24, 0
        while off < len(data):
            caplen = struct.unpack_from("<I", data, off + 8)[0]
            out.append(data[off:off + 16 + caplen])
            off += 16 + caplen
            n += 1
            origin.append((name, n))
    with open(path, "wb") as f:
        f.write(b"".join(out))
    return origin


def check_golden(ck, tshark, lua, tmp):
    path = os.path.join(tmp, "golden.pcap")
    try:
        origin = golden_capture(path)
        rows = dissect(tshark, lua, path)
    except (OSError, RuntimeError) as e:
        ck.check("golden captures dissected", False, str(e))
        return
    ck.check(f"golden: all {len(origin)} frames dissected", len(rows) == len(origin) > 0,
             f"{len(rows)} of {len(origin)}")
    files = {}
    for i, (name, n) in enumerate(origin, 1):
        r = rows.get(i, {})
        problems = []
        if "metaroce" not in r.get("frame.protocols", "").split(":"):
            problems.append("not MetaRoCE")
        if r.get("_ws.malformed"):
            problems.append("malformed")
        if r.get("metaroce.valid") != "1" or reasons_of(r):
            problems.append(f"invalid ({r.get('metaroce.drop_reason')})")
        if r.get("metaroce.icrc.status") != "1":
            problems.append("ICRC not good")
        if problems:
            files.setdefault(name, []).append(f"frame {n}: {', '.join(problems)}")
        else:
            files.setdefault(name, [])
    for name, problems in sorted(files.items()):
        ck.check(f"golden {name}: every frame clean", not problems, "; ".join(problems[:5]))


def check_documented(ck, tshark, lua):
    """Every field and expert item the dissector registers is in README.md,
    in full or (after the first of a row) as `.suffix`."""
    out = subprocess.run([tshark, "-G", "fields", "-X", f"lua_script:{lua}"], capture_output=True,
                         text=True).stdout
    names = [c[2] for c in (line.split("\t") for line in out.splitlines())
             if len(c) > 4 and c[0] == "F" and c[4] == "metaroce"]
    with open(os.path.join(HERE, "README.md")) as f:
        doc = f.read()
    missing = []
    for n in names:
        short = n[len("metaroce."):]
        if n.startswith("metaroce.expert."):
            short = short[len("expert."):]
            ok = f"`{short}`" in doc
        else:
            ok = f"`{n}`" in doc or f"`.{short}`" in doc or f"`metaroce.{short}`" in doc
        if not ok:
            missing.append(n)
    ck.check(f"README.md documents all {len(names)} fields and expert items", names and not missing,
             f"missing {missing}")


MUTANTS = [
    ("PSN read at the MSN's offset", "tree:add(F.psn, tvb(12, 4))", "tree:add(F.psn, tvb(16, 4))"),
    ("SACK PSNs from cum_psn instead of cum_psn + 1", "local rel = i + 1", "local rel = i"),
    ("slot mask one bit short", "nil, 0x003F)", "nil, 0x001F)"),
    ("BadRsn rule left out", "if h.rsn ~= 0 and not o.rsn then", "if false then"),
    ("CRC polynomial not reflected", "bxor(0xEDB88320,", "bxor(0x04C11DB7,"),
]


def mutants(tshark, lua):
    ck = Checks(True)
    src = open(lua).read()
    with tempfile.TemporaryDirectory() as tmp:
        for what, old, new in MUTANTS:
            if src.count(old) != 1:
                ck.check(f"mutant '{what}': applies", False, f"{old!r} found {src.count(old)} times")
                continue
            path = os.path.join(tmp, "mutant.lua")
            with open(path, "w") as f:
                f.write(src.replace(old, new))
            res = run(tshark, path, silent=True)
            ck.check(f"mutant '{what}' fails the checks", res.failed > 0,
                     f"{res.passed} passed, {res.failed} failed")
    return ck


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lua", default=os.path.join(HERE, "metaroce.lua"))
    ap.add_argument("--tshark", default="tshark")
    ap.add_argument("--mutants", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--write-vectors", action="store_true",
                    help=f"write {os.path.relpath(VECTORS)} and exit")
    a = ap.parse_args()
    if a.write_vectors:
        with open(VECTORS, "w") as f:
            f.write(vectors())
        return 0
    ck = run(a.tshark, a.lua, a.verbose)
    passed, failed = ck.passed, ck.failed
    if a.mutants:
        mk = mutants(a.tshark, a.lua)
        passed, failed = passed + mk.passed, failed + mk.failed
    print(f"wireshark: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
