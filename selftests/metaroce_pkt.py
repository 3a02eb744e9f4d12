#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""MetaRoCE v1 packets from Documentation/protocol.md, written independently
of rust/engine (so a selftest that uses it cross-checks spec and code).

  metaroce_pkt.py check
      offline self-test: the CRC check value and a probe round trip
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
    a = ap.parse_args()
    if a.cmd == "check":
        check()
        return 0
    return send_probe(a)


if __name__ == "__main__":
    sys.exit(main())
