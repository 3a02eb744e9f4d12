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
  metaroce_pkt.py forge --dst IP [--src IP] --qpn N --peer-qpn M [--count R]
                        [--seed S] [--no-planes]
      R rounds of packets aimed at connected QP N whose values no
      connection of it can have sent: a SEND far outside the message
      window, an ACK and a NAK on random path ids with PSNs and MSNs far
      ahead, a PROBE_REPLY, and (unless --no-planes) a PLANES naming M as
      its sender with bogus plane addresses. From a third address every one
      must be dropped as not from the peer; from the peer's address each
      must be dropped by its window check. Prints what it sent
  metaroce_pkt.py capture --dev DEV [--dev DEV]... [--both] --seconds S
                          [--until FILE] [--ready FILE] --out FILE [--pcap]
      record the MetaRoCE packets (IPv4 UDP to port 4792) this host sends
      on the netdevs DEV (with --both also those it receives) for S
      seconds or until FILE exists (AF_PACKET), as length-prefixed
      payloads, or with --pcap as a pcap file of the IPv4 packets with
      kernel timestamps (for tools/wireshark/summary.sh). Prints how many,
      and the socket's drops: packets the kernel could not queue for the
      capture (0: the capture holds every packet DEV carried)
  metaroce_pkt.py replay --file FILE --dst IP [--src IP] [--qpn QPN]
      send the recorded payloads again, in order, to IP:4792 (with --qpn
      aimed at QP QPN: dst_qpn rewritten, ICRC resealed); prints how many
      were data packets and how many ACKs
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
      with our probe's source port as its source port, and a zero UDP
      checksum, section 1, seen on a raw socket). Exit 0 if the reply is
      right (mode good) or if no reply came (other modes).
"""
import argparse
import ctypes
import os
import select
import socket
import struct
import sys
import time
import zlib

UDP_PORT = 4792
VERSION = 1
OP_PROBE = 0x20
OP_PROBE_REPLY = 0x21
PROBE_LEN = 24
OP_PLANES = 0x22
PLANES_LEN = 144
MAX_PLANES = 8
ICRC_LEN = 4


def crc32_bitwise(data: bytes) -> int:
    """Section 1.7: reflected 0xEDB88320, init and final XOR 0xFFFFFFFF."""
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0xEDB88320 if c & 1 else 0)
    return c ^ 0xFFFFFFFF


def crc32(data: bytes) -> int:
    """Section 1.7's CRC as zlib computes it (IEEE 802.3, the same
    parameters), checked against crc32_bitwise by `check`: a Python loop per
    bit took ~5 ms per 1 KiB packet, too slow for the conformance tester's
    messages."""
    return zlib.crc32(data) & 0xFFFFFFFF


def seal(body: bytes) -> bytes:
    """Append the ICRC, big-endian, over every MetaRoCE byte."""
    return body + struct.pack(">I", crc32(body))


def probe(opcode, dst_qpn, path_id, seq, timestamp) -> bytes:
    """Section 1.6 (prefix of 1.1: version, opcode, flags 0, dst_qpn)."""
    body = struct.pack(">BBHIHHIQ", VERSION, opcode, 0, dst_qpn, path_id, 0, seq, timestamp)
    assert len(body) == PROBE_LEN
    return seal(body)


# Table 1.2: every opcode of v1 (0x0C-0x0E are reserved).
OP_SEND = 0x01
OP_SEND_IMM = 0x02
OP_WRITE = 0x03
OP_WRITE_IMM = 0x04
OP_READ_REQ = 0x05
OP_READ_RESP = 0x06
OP_UD_SEND = 0x07
OP_CMP_SWAP = 0x08
OP_FETCH_ADD = 0x09
OP_ATOMIC_WRITE = 0x0A
OP_ATOMIC_RESP = 0x0B
OP_SEND_INV = 0x0F
OP_ACK = 0x10
OP_NAK = 0x11
DATA_OPCODES = (OP_SEND, OP_SEND_IMM, OP_WRITE, OP_WRITE_IMM, OP_READ_REQ, OP_READ_RESP,
                OP_UD_SEND, OP_CMP_SWAP, OP_FETCH_ADD, OP_ATOMIC_WRITE, OP_ATOMIC_RESP, OP_SEND_INV)
FLAG_RETRANSMIT = 0x0001
FLAG_IMM = 0x0002
FLAG_PEER_PSN = 0x0004
FLAG_WIDE = 0x0008
PLANES_KNOWN = 0x0001
PLANES_CONFIRM = 0x0002
SEND_MORE = 1 << 63
GSI_QKEY = 0x80010000


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


def cmp_swap_operands(compare, swap) -> bytes:
    """Section 5.1: CMP_SWAP's 16-byte payload, compare then swap, big-endian."""
    return struct.pack(">QQ", compare, swap)


def u64_operand(value) -> bytes:
    """Section 5.1: FETCH_ADD's addend, ATOMIC_RESP's original value."""
    return struct.pack(">Q", value)


def ack(dst_qpn, path_id, ce, cum_psn, sack_bits, ts_echo, cum_msn, rate_hint, msg_window=0):
    """Section 1.4: SACK bit i is byte 16 + i/8, mask 1 << (i mod 8);
    rate_hint in kbit/s (6.5), 0: none; msg_window 0: the receiver does
    not say (the v1 window, 64)."""
    sack = bytearray(32)
    for i in sack_bits:
        sack[i // 8] |= 1 << (i % 8)
    body = struct.pack(">BBHIHHI", VERSION, OP_ACK, 1 if ce else 0, dst_qpn, path_id, msg_window,
                       cum_psn)
    body += bytes(sack) + struct.pack(">QII", ts_echo, cum_msn, rate_hint)
    assert len(body) == 64
    return seal(body)


def nak(dst_qpn, path_id, syndrome, psn, msn):
    """Section 1.5."""
    body = struct.pack(">BBHIHBBIII", VERSION, OP_NAK, 0, dst_qpn, path_id, syndrome, 0, psn, msn, 0)
    assert len(body) == 24
    return seal(body)


def planes(dst_qpn, src_qpn, known, addrs, confirm=False, max_payload=0):
    """Section 1.8: flags bit 0 KNOWN and bit 1 CONFIRM, the sending QP, the
    plane count, a reserved byte, the largest payload the sender's planes
    carry (0: none advertised), then 8 16-byte addresses in GID form (IPv6 as it is, IPv4
    mapped as ::ffff:a.b.c.d; zero = no such plane, and every entry from
    the count on is zero)."""
    assert 1 <= len(addrs) <= MAX_PLANES
    flags = (PLANES_KNOWN if known else 0) | (PLANES_CONFIRM if confirm else 0)
    body = struct.pack(">BBHIIBxH", VERSION, OP_PLANES, flags, dst_qpn, src_qpn, len(addrs),
                       max_payload)
    for i in range(MAX_PLANES):
        ip = addrs[i] if i < len(addrs) else None
        if not ip:
            body += bytes(16)
        elif ":" in ip:
            body += socket.inet_pton(socket.AF_INET6, ip)
        else:
            body += bytes(10) + b"\xff\xff" + socket.inet_aton(ip)
    assert len(body) == PLANES_LEN
    return seal(body)


ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
LINKTYPE_ETHERNET = 1
LINKTYPE_IPV4 = 228


def ipv4_udp(src, dst, sport, payload, dport=UDP_PORT, ecn=2) -> bytes:
    """An IPv4 packet (ECN ECT(0) by default, section 1) carrying UDP with
    checksum 0 (allowed, section 1)."""
    udp = struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload
    hdr = struct.pack(">BBHHHBBH4s4s", 0x45, ecn, 20 + len(udp), 0, 0x4000, 64, 17, 0,
                      socket.inet_aton(src), socket.inet_aton(dst))
    words = sum(struct.unpack(">10H", hdr))
    while words >> 16:
        words = (words & 0xFFFF) + (words >> 16)
    return hdr[:10] + struct.pack(">H", ~words & 0xFFFF) + hdr[12:] + udp


def ipv6_udp(src, dst, sport, payload, dport=UDP_PORT, ecn=2) -> bytes:
    """An IPv6 packet carrying UDP. The UDP checksum is mandatory over IPv6."""
    s6, d6 = socket.inet_pton(socket.AF_INET6, src), socket.inet_pton(socket.AF_INET6, dst)
    n = 8 + len(payload)
    pseudo = s6 + d6 + struct.pack(">I3xB", n, 17) + struct.pack(">HHHH", sport, dport, n, 0) + payload
    if len(pseudo) % 2:
        pseudo += b"\0"
    c = sum(struct.unpack(f">{len(pseudo) // 2}H", pseudo))
    while c >> 16:
        c = (c & 0xFFFF) + (c >> 16)
    c = ~c & 0xFFFF or 0xFFFF
    udp = struct.pack(">HHHH", sport, dport, n, c) + payload
    return struct.pack(">IHBB", (6 << 28) | (ecn << 20), n, 17, 64) + s6 + d6 + udp


def ethernet(ip_packet) -> bytes:
    """An Ethernet frame around an IPv4 or IPv6 packet (locally administered MACs)."""
    etype = ETH_P_IPV6 if ip_packet[0] >> 4 == 6 else ETH_P_IP
    return b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01" + struct.pack(">H", etype) + ip_packet


def write_pcap(path, frames, linktype=LINKTYPE_ETHERNET):
    """A classic pcap file of `frames`: each bytes (then 1 ms apart), or
    (seconds, bytes), or (seconds, bytes, length on the wire) for a frame
    the capture cut short."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, linktype))
        for i, fr in enumerate(frames):
            t, b, wire = (i / 1000, fr, len(fr)) if isinstance(fr, bytes) else (fr + (len(fr[1]),))[:3]
            sec = int(t)
            f.write(struct.pack("<IIII", sec, int(round((t - sec) * 1e6)), len(b), wire) + b)


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
    sample = bytes(range(256)) * 5
    assert crc32(sample) == crc32_bitwise(sample) and crc32_bitwise(b"123456789") == 0xCBF43926
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
    # A copy of every UDP packet this host receives, IP header included:
    # the reply's UDP checksum field (root only, as the selftests run).
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
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
        csum = reply_udp_checksum(raw, a.dst, a.sport)
        if csum != 0:
            errors.append(f"UDP checksum {csum}, want 0 (section 1)")
        if errors:
            print("FAIL: " + "; ".join(errors))
            return 1
        print(f"ok: PROBE_REPLY echoes path_id {path_id} seq {a.seq} timestamp; dst_qpn {r['dst_qpn']}")
        return 0


def reply_udp_checksum(raw, src_ip, sport):
    """The UDP checksum field of the first packet on `raw` from
    src_ip:sport to our port 4792, or None if none arrives within 1 s."""
    deadline = time.monotonic() + 1.0
    while (left := deadline - time.monotonic()) > 0 and select.select([raw], [], [], left)[0]:
        pkt, (ip, _) = raw.recvfrom(65535)
        ihl = (pkt[0] & 0xF) * 4
        if ip != src_ip or len(pkt) < ihl + 8:
            continue
        src_port, dst_port, _, csum = struct.unpack(">HHHH", pkt[ihl:ihl + 8])
        if (src_port, dst_port) == (sport, UDP_PORT):
            return csum
    return None


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


def forge(a):
    import random
    rnd = random.Random(a.seed)
    tx = open_tx(a, a.sport)
    sent = {}
    for _ in range(a.count):
        # Path ids with a random slot and generation: a live path of the QP
        # is hit with the right generation 1 time in 1024 at most, and even
        # then the PSNs are far beyond what it carried.
        path = rnd.randrange(1 << 16)
        far = 0x400000 + rnd.randrange(0x100000)
        pkts = {
            "data": data(OP_SEND, 0, a.qpn, path, 0, far, 0x40000000 + far, 0, 16, bytes(16)),
            "ack": ack(a.qpn, path, False, far, [0, 1], 0, 0x40000000 + far, 1),
            "nak": nak(a.qpn, path, 1, far, 0x40000000 + far),
            "reply": probe(OP_PROBE_REPLY, a.qpn, path, far, 0),
        }
        if not a.no_planes:
            pkts["planes"] = planes(a.qpn, a.peer_qpn, True, [a.src or "0.0.0.0", "10.99.0.1", "10.99.1.1"])
        for kind, pkt in pkts.items():
            tx.sendto(pkt, (a.dst, UDP_PORT))
            sent[kind] = sent.get(kind, 0) + 1
        time.sleep(0.002)
    print("sent " + " ".join(f"{k} {v}" for k, v in sent.items()) + f" to QP {a.qpn:#x} at {a.dst} from {a.src}")
    return 0


# Classic BPF (linux/filter.h) run on each frame before it is queued to
# the capture socket: a SOCK_DGRAM packet socket's filter sees the frame
# from its network header, so this keeps IPv4 UDP to port 4792 (not a
# later fragment) and nothing else. The kernel then counts only MetaRoCE
# packets in the socket's drops, and a busy host wakes the capture only
# for them.
BPF_METAROCE = [
    (0x30, 0, 0, 0),           # ldb [0]              version and IHL
    (0x54, 0, 0, 0xF0),        # and #0xf0
    (0x15, 0, 8, 0x40),        # jeq #0x40 (IPv4)     else drop
    (0x30, 0, 0, 9),           # ldb [9]              protocol
    (0x15, 0, 6, 17),          # jeq #17 (UDP)        else drop
    (0x28, 0, 0, 6),           # ldh [6]              flags, fragment offset
    (0x45, 4, 0, 0x1FFF),      # jset #0x1fff         a later fragment: drop
    (0xB1, 0, 0, 0),           # ldxb 4*([0]&0xf)     IP header length
    (0x48, 0, 0, 2),           # ldh [x+2]            UDP destination port
    (0x15, 0, 1, UDP_PORT),    # jeq #4792            else drop
    (0x06, 0, 0, 0x40000),     # ret #262144          keep the frame
    (0x06, 0, 0, 0),           # ret #0               drop it
]
SO_ATTACH_FILTER, SO_RCVBUFFORCE, SO_TIMESTAMPNS = 26, 33, 35
SOL_PACKET, PACKET_STATISTICS = 263, 6
PACKET_HOST, PACKET_OUTGOING = 0, 4
CAPTURE_RCVBUF = 64 << 20


def capture_socket(devs):
    """A packet socket that sees the MetaRoCE packets of every netdev (bound
    to `devs[0]` when there is one), with a large receive buffer and
    kernel timestamps."""
    eth_p_all = 0x0003
    # Bound to ETH_P_ALL: the kernel hands a host's own transmitted frames
    # only to ETH_P_ALL taps (dev_queue_xmit_nit walks ptype_all); a socket
    # bound to ETH_P_IP sees received frames only.
    s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(eth_p_all))
    code = b"".join(struct.pack("HBBI", *ins) for ins in BPF_METAROCE)
    buf = ctypes.create_string_buffer(code)
    prog = struct.pack("HL", len(BPF_METAROCE), ctypes.addressof(buf))
    s.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, prog)
    # A TCG guest's one vCPU runs the traffic and this loop in turn: a deep
    # queue rides out the bursts (as root, past net.core.rmem_max).
    try:
        s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, CAPTURE_RCVBUF)
    except OSError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, CAPTURE_RCVBUF)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    if len(devs) == 1:
        s.bind((devs[0], eth_p_all))
    return s


def capture(a):
    devs = [d for arg in a.dev for d in arg.split(",") if d]
    kinds = (PACKET_OUTGOING, PACKET_HOST) if a.both else (PACKET_OUTGOING,)
    s = capture_socket(devs)
    s.settimeout(0.2)
    if a.ready:
        # The socket sees packets from here on: a caller may start traffic.
        with open(a.ready, "w") as r:
            r.write("capturing\n")
    n = {PACKET_OUTGOING: 0, PACKET_HOST: 0}
    end = time.monotonic() + a.seconds
    draining, next_look = False, 0.0

    def stop_now():
        """Whether to stop (looked at twice a second at most): then what the
        socket already queued is still read, without waiting for more."""
        nonlocal next_look
        now = time.monotonic()
        if now < next_look:
            return False
        next_look = now + 0.5
        return now >= end or bool(a.until and os.path.exists(a.until))

    with open(a.out, "wb") as f:
        if a.pcap:
            f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, LINKTYPE_IPV4))
        while True:
            if not draining and stop_now():
                draining = True
                s.setblocking(False)
            try:
                pkt, anc, _, addr = s.recvmsg(65535, 64)
            except (socket.timeout, BlockingIOError):
                if draining:
                    break
                continue
            if addr[0] not in devs or addr[2] not in kinds or len(pkt) < 28:
                continue
            ihl = (pkt[0] & 0x0F) * 4
            if pkt[0] >> 4 != 4 or pkt[9] != 17 or struct.unpack(">H", pkt[ihl + 2:ihl + 4])[0] != UDP_PORT:
                continue
            # The IP packet: a short frame's Ethernet padding is not part of it.
            pkt = pkt[:struct.unpack(">H", pkt[2:4])[0]]
            if a.pcap:
                t = next((struct.unpack("qq", data[:16]) for level, kind, data in anc
                          if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS), None)
                sec, usec = (t[0], t[1] // 1000) if t else divmod(int(time.time() * 1e6), 1000000)
                f.write(struct.pack("<IIII", sec, usec, len(pkt), len(pkt)) + pkt)
            else:
                payload = pkt[ihl + 8:]
                f.write(struct.pack(">I", len(payload)) + payload)
            n[addr[2]] += 1
    # Frames the kernel dropped because this socket's queue was full (the
    # counters reset as they are read): a capture with none is complete.
    _, drops = struct.unpack("II", s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
    where = ",".join(devs)
    detail = f" ({n[PACKET_OUTGOING]} sent, {n[PACKET_HOST]} received)" if a.both else ""
    print(f"captured {sum(n.values())} packets on {where}{detail}, socket drops {drops}")
    return 0


def replay(a):
    tx = open_tx(a, a.sport)
    kinds = {"data": 0, "ack": 0, "other": 0}
    with open(a.file, "rb") as f:
        blob = f.read()
    at = 0
    while at + 4 <= len(blob):
        (n,) = struct.unpack(">I", blob[at:at + 4])
        pkt = blob[at + 4:at + 4 + n]
        at += 4 + n
        op = pkt[1] if len(pkt) > 1 else 0xFF
        kinds["data" if op < 0x10 else "ack" if op == OP_ACK else "other"] += 1
        if a.qpn is not None and len(pkt) >= 12:
            # Aimed at another QP: dst_qpn (1.1) rewritten, ICRC resealed.
            pkt = seal(pkt[:4] + struct.pack(">I", a.qpn) + pkt[8:-4])
        tx.sendto(pkt, (a.dst, UDP_PORT))
        time.sleep(0.0005)
    print(f"replayed data {kinds['data']} ack {kinds['ack']} other {kinds['other']} to {a.dst}")
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
    p = sub.add_parser("forge")
    p.add_argument("--dst", required=True)
    p.add_argument("--src")
    p.add_argument("--sport", type=int, default=50300)
    p.add_argument("--qpn", type=lambda v: int(v, 0), required=True)
    p.add_argument("--peer-qpn", type=lambda v: int(v, 0), required=True)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-planes", action="store_true")
    p = sub.add_parser("capture")
    p.add_argument("--dev", required=True, action="append",
                   help="a netdev; repeat it (or DEV,DEV) for several")
    p.add_argument("--both", action="store_true", help="also the packets the host receives")
    p.add_argument("--ready", help="file written once the capture socket is bound")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--until", help="stop once this file exists (or after --seconds)")
    p.add_argument("--out", required=True)
    p.add_argument("--pcap", action="store_true")
    p = sub.add_parser("replay")
    p.add_argument("--file", required=True)
    p.add_argument("--dst", required=True)
    p.add_argument("--src")
    p.add_argument("--qpn", type=lambda v: int(v, 0), help="rewrite every packet's dst_qpn")
    p.add_argument("--sport", type=int, default=50400)
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
    if a.cmd == "capture":
        return capture(a)
    if a.cmd == "replay":
        return replay(a)
    if a.cmd == "forge":
        return forge(a)
    if a.cmd == "burst":
        return burst(a)
    return send_probe(a)


if __name__ == "__main__":
    sys.exit(main())
