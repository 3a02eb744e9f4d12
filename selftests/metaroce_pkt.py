#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""MetaRoCE v1 packets from Documentation/protocol.md, written independently
of rust/engine (so a selftest that uses it cross-checks spec and code).

  metaroce_pkt.py check
      offline self-test: the CRC check value and a probe round trip
  metaroce_pkt.py send --dst IP --kind data|ack|nak|reply|planes|ud [--src IP]
                       [--qpn N] [--qkey K] [--imm I] [--src-qpn N]
      send one valid packet of that kind (SEND with payload, ACK, NAK,
      PROBE_REPLY, PLANES, or a 256-byte UD_SEND datagram to QP N with
      Q_Key K, default QP1 and the GSI Q_Key, from source QPN --src-qpn,
      default 0x21, with immediate data I if given) to IP:4792; nothing
      is expected back. A --src-qpn wider than 24 bits makes the datagram
      one a v1 receiver must drop (malformed)
  metaroce_pkt.py burst --dst IP [--src IP] [--count N]
      send N PROBEs (one path each) and report how many replies came back
      and their round-trip times
  metaroce_pkt.py fuzz --dst IP [--src IP] [--count N] [--seed S]
      send N invalid packets (random bytes, valid packets with one bit
      flipped, truncated or extended), none of which a v1 receiver may
      accept; exit 0 if none of them was answered
  metaroce_pkt.py probe --dst IP [--src IP] [--sport N] [--seq N]
                        [--mode good|truncated|badcrc] [--timeout S]
      send a PROBE to IP:4792 from UDP port N and wait for the PROBE_REPLY
      (section 3.4: from the device's port 4792 socket to our port 4792,
      with our probe's source port as its source port). Exit 0 if the
      reply is right (mode good) or if no reply came (other modes).
"""
import argparse
import select
import socket
import struct
import sys
import time

UDP_PORT = 4792
VERSION = 1
OP_PROBE = 0x20
OP_PROBE_REPLY = 0x21
PROBE_LEN = 24
OP_PLANES = 0x22
PLANES_LEN = 144
MAX_PLANES = 8
ICRC_LEN = 4


def crc32(data: bytes) -> int:
    """Section 1.7: reflected 0xEDB88320, init and final XOR 0xFFFFFFFF."""
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0xEDB88320 if c & 1 else 0)
    return c ^ 0xFFFFFFFF


def seal(body: bytes) -> bytes:
    """Append the ICRC, big-endian, over every MetaRoCE byte."""
    return body + struct.pack(">I", crc32(body))


def probe(opcode, dst_qpn, path_id, seq, timestamp) -> bytes:
    """Section 1.6 (prefix of 1.1: version, opcode, flags 0, dst_qpn)."""
    body = struct.pack(">BBHIHHIQ", VERSION, opcode, 0, dst_qpn, path_id, 0, seq, timestamp)
    assert len(body) == PROBE_LEN
    return seal(body)


OP_SEND = 0x01
OP_UD_SEND = 0x07
FLAG_IMM = 0x0002
GSI_QKEY = 0x80010000
OP_ACK = 0x10
OP_NAK = 0x11


def data(opcode, flags, dst_qpn, path_id, floor_delta, psn, msn, offset, msg_len,
         payload, remote_va=0, rkey=0, imm=0, timestamp=0, rsn=0) -> bytes:
    """Section 1.3: the 56-byte data header, payload, ICRC. rsn (offset 30)
    numbers SEND/SEND_IMM/WRITE_IMM among receive-consuming messages (the
    first is 0); it must be 0 for every other opcode."""
    body = struct.pack(">BBHIHHIIIIHHQIIQ", VERSION, opcode, flags, dst_qpn, path_id,
                       floor_delta, psn, msn, offset, msg_len, len(payload), rsn,
                       remote_va, rkey, imm, timestamp)
    assert len(body) == 56
    return seal(body + payload)


def ack(dst_qpn, path_id, ce, cum_psn, sack_bits, ts_echo, cum_msn, rate_hint):
    """Section 1.4: SACK bit i is byte 16 + i/8, mask 1 << (i mod 8)."""
    sack = bytearray(32)
    for i in sack_bits:
        sack[i // 8] |= 1 << (i % 8)
    body = struct.pack(">BBHIHHI", VERSION, OP_ACK, 1 if ce else 0, dst_qpn, path_id, 0, cum_psn)
    body += bytes(sack) + struct.pack(">QII", ts_echo, cum_msn, rate_hint)
    assert len(body) == 64
    return seal(body)


def nak(dst_qpn, path_id, syndrome, psn, msn):
    """Section 1.5."""
    body = struct.pack(">BBHIHBBIII", VERSION, OP_NAK, 0, dst_qpn, path_id, syndrome, 0, psn, msn, 0)
    assert len(body) == 24
    return seal(body)


def planes(dst_qpn, src_qpn, known, addrs):
    """Section 1.8: flags bit 0 KNOWN, the sending QP, the plane count, then
    8 16-byte addresses (IPv4-mapped; zero = no such plane, and every entry
    from the count on is zero)."""
    assert 1 <= len(addrs) <= MAX_PLANES
    body = struct.pack(">BBHIIB3x", VERSION, OP_PLANES, 1 if known else 0, dst_qpn, src_qpn, len(addrs))
    for i in range(MAX_PLANES):
        ip = addrs[i] if i < len(addrs) else None
        body += bytes(10) + b"\xff\xff" + socket.inet_aton(ip) if ip else bytes(16)
    assert len(body) == PLANES_LEN
    return seal(body)


def parse_probe(pkt: bytes):
    """Validate a PROBE/PROBE_REPLY as a v1 receiver must; return its fields."""
    if len(pkt) != PROBE_LEN + ICRC_LEN:
        raise ValueError(f"length {len(pkt)}, want {PROBE_LEN + ICRC_LEN}")
    body, (icrc,) = pkt[:PROBE_LEN], struct.unpack(">I", pkt[PROBE_LEN:])
    if crc32(body) != icrc:
        raise ValueError(f"ICRC {icrc:#010x}, computed {crc32(body):#010x}")
    ver, op, flags, qpn, path_id, rsvd, seq, ts = struct.unpack(">BBHIHHIQ", body)
    if ver != VERSION or op not in (OP_PROBE, OP_PROBE_REPLY) or flags or rsvd:
        raise ValueError(f"bad header: version {ver} opcode {op:#x} flags {flags} reserved {rsvd}")
    return dict(opcode=op, dst_qpn=qpn, path_id=path_id, seq=seq, timestamp=ts)


def check():
    assert crc32(b"123456789") == 0xCBF43926, hex(crc32(b"123456789"))
    p = probe(OP_PROBE, 0x11, (3 << 6) | 5, 7, 123456)
    assert parse_probe(p) == dict(opcode=OP_PROBE, dst_qpn=0x11, path_id=197, seq=7, timestamp=123456)
    bad = bytearray(p)
    bad[13] ^= 1
    try:
        parse_probe(bytes(bad))
        raise AssertionError("bit flip not caught")
    except ValueError:
        pass
    pl = planes(0x12, 0x34, True, ["198.18.0.1", None, "198.18.2.1"])
    assert len(pl) == PLANES_LEN + ICRC_LEN and pl[1] == OP_PLANES and pl[12] == 3
    assert pl[16 + 10:16 + 16] == b"\xff\xff\xc6\x12\x00\x01" and pl[32:48] == bytes(16)
    print("metaroce_pkt: self-check ok")


def send_probe(a):
    ts = time.monotonic_ns()
    path_id = (1 << 6) | 3
    pkt = probe(OP_PROBE, 0x12, path_id, a.seq, ts)
    if a.mode == "truncated":
        pkt = pkt[:-5]
    elif a.mode == "badcrc":
        pkt = pkt[:-1] + bytes([pkt[-1] ^ 0xFF])

    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    rx.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    rx.bind(("0.0.0.0", UDP_PORT))
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.bind((a.src or "0.0.0.0", a.sport))
    tx.sendto(pkt, (a.dst, UDP_PORT))
    print(f"sent {a.mode} PROBE seq {a.seq} ({len(pkt)} bytes) {a.src or '*'}:{a.sport} -> {a.dst}:{UDP_PORT}")

    deadline = time.monotonic() + a.timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([rx], [], [], left)[0]:
            if a.mode == "good":
                print("FAIL: no PROBE_REPLY")
                return 1
            print("ok: no reply")
            return 0
        data, anc, _, (ip, port) = rx.recvmsg(2048, socket.CMSG_SPACE(4))
        if ip != a.dst:
            continue
        tos = next((c[2][0] for c in anc if c[0] == socket.IPPROTO_IP and c[1] == socket.IP_TOS), None)
        print(f"reply from {ip}:{port} tos {tos} ({len(data)} bytes): {data.hex()}")
        if a.mode != "good":
            print("FAIL: a malformed PROBE was answered")
            return 1
        try:
            r = parse_probe(data)
        except ValueError as e:
            print(f"FAIL: malformed reply: {e}")
            return 1
        want = dict(opcode=OP_PROBE_REPLY, path_id=path_id, seq=a.seq, timestamp=ts)
        got = {k: r[k] for k in want}
        errors = []
        if got != want:
            errors.append(f"fields {got}, want {want}")
        if port != a.sport:
            errors.append(f"source port {port}, want our probe's {a.sport} (section 3.4)")
        if tos is not None and tos & 3 != 2:
            errors.append(f"ECN {tos & 3}, want ECT(0)")
        if errors:
            print("FAIL: " + "; ".join(errors))
            return 1
        print(f"ok: PROBE_REPLY echoes path_id {path_id} seq {a.seq} timestamp; dst_qpn {r['dst_qpn']}")
        return 0


def open_tx(a, sport):
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.bind((a.src or "0.0.0.0", sport))
    return tx


def send_kind(a):
    pkts = {
        "data": data(OP_SEND, 0, 0x12, (2 << 6) | 1, 0, 5, 0, 0, 16, bytes(range(16)), timestamp=99),
        "ack": ack(0x12, (2 << 6) | 1, True, 6, [0, 9, 255], 99, 1, 25000),
        "nak": nak(0x12, (2 << 6) | 1, 1, 5, 0),
        "reply": probe(OP_PROBE_REPLY, 0x12, (2 << 6) | 1, 3, 99),
        "planes": planes(0x12, 0x34, False, [a.src or "198.18.0.2", "198.18.1.2"]),
        # Section 5: rkey = Q_Key, remote_va = source QPN, imm = immediate
        # data with the IMM flag (else 0), offset 0, whole payload.
        "ud": data(OP_UD_SEND, 0 if a.imm is None else FLAG_IMM, a.qpn, 0, 0, 7, 7, 0, 256, bytes(256),
                   remote_va=a.src_qpn, rkey=a.qkey, imm=a.imm or 0),
    }
    pkt = pkts[a.kind]
    open_tx(a, a.sport).sendto(pkt, (a.dst, UDP_PORT))
    print(f"sent {a.kind} ({len(pkt)} bytes) to {a.dst}:{UDP_PORT}")
    return 0


def burst(a):
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    rx.bind(("0.0.0.0", UDP_PORT))
    sent = {}
    tx = open_tx(a, 0)
    start = time.monotonic()
    for seq in range(a.count):
        ts = time.monotonic_ns()
        sent[seq] = ts
        tx.sendto(probe(OP_PROBE, 0x12, seq % 64, seq, ts), (a.dst, UDP_PORT))
    rtts, bad = [], 0
    deadline = time.monotonic() + a.timeout
    while len(rtts) + bad < a.count:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([rx], [], [], left)[0]:
            break
        pkt, (ip, _) = rx.recvfrom(2048)
        try:
            r = parse_probe(pkt)
            rtts.append(time.monotonic_ns() - sent[r["seq"]])
        except (ValueError, KeyError):
            bad += 1
    took = time.monotonic() - start
    rtts.sort()
    med = rtts[len(rtts) // 2] / 1000 if rtts else 0
    print(f"burst: sent {a.count}, replies {len(rtts)}, bad {bad}, {took:.2f} s, "
          f"rtt median {med:.0f} us")
    return 0 if bad == 0 and rtts else 1


def fuzz(a):
    import random
    rnd = random.Random(a.seed)
    valid = [
        probe(OP_PROBE, 1, 2, 3, 4),
        data(OP_SEND, 0, 0x12, 65, 0, 5, 0, 0, 100, bytes(100)),
        ack(0x12, 65, False, 6, [1, 2], 7, 1, 0),
        nak(0x12, 65, 2, 5, 0),
        planes(0x12, 0x34, False, ["198.18.0.2", "198.18.1.2"]),
    ]
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    rx.bind(("0.0.0.0", UDP_PORT))
    tx = open_tx(a, 0)
    for i in range(a.count):
        kind = i % 4
        if kind == 0:
            pkt = bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 200)))
        elif kind == 1:
            b = bytearray(rnd.choice(valid))
            bit = rnd.randrange(len(b) * 8)
            b[bit // 8] ^= 1 << (bit % 8)
            pkt = bytes(b)
        elif kind == 2:
            v = rnd.choice(valid)
            pkt = v[:rnd.randrange(0, len(v))]
        else:
            pkt = rnd.choice(valid) + bytes(rnd.randrange(1, 16))
        tx.sendto(pkt, (a.dst, UDP_PORT))
    if select.select([rx], [], [], 2.0)[0]:
        print(f"FAIL: an invalid packet was answered: {rx.recv(2048).hex()}")
        return 1
    print(f"fuzz: sent {a.count} invalid packets (seed {a.seed}), no reply")
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("check")
    p = sub.add_parser("probe")
    p.add_argument("--dst", required=True)
    p.add_argument("--src")
    p.add_argument("--sport", type=int, default=50123)
    p.add_argument("--seq", type=int, default=1)
    p.add_argument("--mode", choices=["good", "truncated", "badcrc"], default="good")
    p.add_argument("--timeout", type=float, default=5.0)
    p = sub.add_parser("send")
    p.add_argument("--dst", required=True)
    p.add_argument("--src")
    p.add_argument("--sport", type=int, default=50200)
    p.add_argument("--kind", choices=["data", "ack", "nak", "reply", "planes", "ud"], required=True)
    p.add_argument("--qpn", type=lambda v: int(v, 0), default=1)
    p.add_argument("--qkey", type=lambda v: int(v, 0), default=GSI_QKEY)
    p.add_argument("--imm", type=lambda v: int(v, 0))
    p.add_argument("--src-qpn", type=lambda v: int(v, 0), default=0x21)
    p = sub.add_parser("burst")
    p.add_argument("--dst", required=True)
    p.add_argument("--src")
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--timeout", type=float, default=10.0)
    p = sub.add_parser("fuzz")
    p.add_argument("--dst", required=True)
    p.add_argument("--src")
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.cmd == "check":
        check()
        return 0
    if a.cmd == "send":
        return send_kind(a)
    if a.cmd == "fuzz":
        return fuzz(a)
    if a.cmd == "burst":
        return burst(a)
    return send_probe(a)


if __name__ == "__main__":
    sys.exit(main())
