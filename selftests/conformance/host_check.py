#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The conformance suite's host-side checks (`make check`, ~10 s, no rig):

  * the codec: every opcode encodes and decodes back to the same fields;
    every hand-built vector of tools/wireshark/vectors.txt decodes with the
    drop reason the engine gives it; every packet of the golden captures
    (tools/golden) decodes, none malformed or unknown; each malformed
    variant the tests send is malformed for the reason the test names;
  * the clause table: protocol.md 1-4 has no normative sentence it lacks,
    and the check itself catches a new MUST and a stale quote;
  * the suite against fake_dut.py on localhost: the conforming fake passes
    every clause it can be tested on, and each --bug mode fails exactly the
    clause it breaks (the "one failing case" of issue 15).
"""

import os
import random
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import clauses  # noqa: E402
import codec  # noqa: E402
from codec import P  # noqa: E402

REPO = os.path.join(HERE, "..", "..")
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}")
    return ok


def rand_data(rnd, opcode):
    """A valid data packet of `opcode` with random fields (1.3's rules)."""
    flags = P.FLAG_IMM if opcode in codec.IMM_OPCODES else 0
    flags |= rnd.choice((0, P.FLAG_RETRANSMIT)) | (0 if opcode == P.OP_UD_SEND else rnd.choice((0, P.FLAG_PEER_PSN)))
    n = codec.FIXED_LEN.get(opcode, 0 if opcode == P.OP_READ_REQ else rnd.randrange(1, 300))
    msg_len = rnd.randrange(1, 1 << 20) if opcode == P.OP_READ_REQ else n
    d = codec.Data(opcode, rnd.getrandbits(24), rnd.getrandbits(16), rnd.getrandbits(32), rnd.getrandbits(32),
                   0, msg_len, bytes(rnd.getrandbits(8) for _ in range(n)), flags, rnd.randrange(257),
                   rnd.getrandbits(16) if opcode in codec.RSN_OPCODES else 0,
                   rnd.getrandbits(24) if opcode == P.OP_UD_SEND else rnd.getrandbits(64),
                   rnd.getrandbits(32), rnd.getrandbits(32) if flags & P.FLAG_IMM or opcode != P.OP_UD_SEND else 0,
                   rnd.getrandbits(64))
    return d


def codec_checks():
    rnd = random.Random(15)
    sample = bytes(range(256)) * 3
    check(codec.crc32(sample) == P.crc32_bitwise(sample) and codec.crc32(b"123456789") == 0xCBF43926,
          "codec CRC-32 differs from metaroce_pkt's bit-by-bit one (1.7)")
    n = 0
    for opcode in sorted(codec.OP_NAMES):
        for _ in range(20):
            if opcode < P.OP_ACK:
                p = rand_data(rnd, opcode)
            elif opcode == P.OP_ACK:
                p = codec.Ack(rnd.getrandbits(24), rnd.getrandbits(16), rnd.getrandbits(32), rnd.getrandbits(256),
                              rnd.getrandbits(64), rnd.getrandbits(32), rnd.getrandbits(32), rnd.random() < .5,
                              rnd.getrandbits(16))
            elif opcode == P.OP_NAK:
                p = codec.Nak(rnd.getrandbits(24), rnd.getrandbits(16), rnd.choice((1, 2, 3)), rnd.getrandbits(32),
                              rnd.getrandbits(32))
            elif opcode in (P.OP_PROBE, P.OP_PROBE_REPLY):
                p = codec.Probe(rnd.getrandbits(24), rnd.getrandbits(16), rnd.getrandbits(32), rnd.getrandbits(64),
                                opcode == P.OP_PROBE_REPLY)
            else:
                v6 = [socket.inet_ntop(socket.AF_INET6, bytes([0xFD] + [0] * 14 + [i])) for i in range(8)]
                addrs = [rnd.choice((None, f"198.18.{i}.{rnd.randrange(1, 255)}", v6[i]))
                         for i in range(rnd.randrange(1, 9))]
                p = codec.Planes(rnd.getrandbits(24), rnd.getrandbits(24), addrs, rnd.random() < .5, rnd.random() < .5)
            try:
                back = codec.decode(p.encode())
            except codec.Malformed as e:
                check(False, f"round trip of {codec.OP_NAMES[opcode]}: {e}")
                break
            check(back == p, f"round trip of {codec.OP_NAMES[opcode]}: {p} came back as {back}")
            n += 1
    print(f"codec: {n} round trips over {len(codec.OP_NAMES)} opcodes")

    vectors = os.path.join(REPO, "tools", "wireshark", "vectors.txt")
    count = 0
    for line in open(vectors):
        if line.startswith("#") or not line.strip():
            continue
        name, fmt, state, hx = line.split()
        try:
            d = codec.decode(bytes.fromhex(hx))
            got = "ok"
        except codec.Malformed as e:
            got, d = e.reason, None
        check(got == fmt, f"vectors.txt {name}: decoded as {got}, the engine says {fmt}")
        if state == "BadSegmentation":
            check(codec.check_segmentation(d, 1024) == state, f"vectors.txt {name}: segmentation rule missed")
        elif state == "place" and isinstance(d, codec.Data):
            check(codec.check_segmentation(d, 1024) is None, f"vectors.txt {name}: placeable but segmentation fails")
        count += 1
    print(f"codec: {count} vectors of tools/wireshark/vectors.txt decode as the engine parses them")

    golden = os.path.join(REPO, "tools", "golden")
    frames, ops = 0, {}
    for case in sorted(os.listdir(golden)):
        for f in ("a.pcap", "b.pcap"):
            path = os.path.join(golden, case, f)
            if not os.path.exists(path):
                continue
            for i, (_, frame) in enumerate(codec.read_pcap(path), 1):
                try:
                    _, _, _, dport, _, payload = codec.udp_of_frame(frame)
                    check(dport == P.UDP_PORT, f"{case}/{f} frame {i}: UDP port {dport}")
                    p = codec.decode(payload)
                    ops[p.opcode] = ops.get(p.opcode, 0) + 1
                except (ValueError, codec.Malformed) as e:
                    check(False, f"{case}/{f} frame {i}: {e}")
                frames += 1
    check(frames > 0, "no golden capture frames found")
    print(f"codec: {frames} golden frames decode, 0 malformed or unknown: "
          + ", ".join(f"{codec.OP_NAMES[o]} {n}" for o, n in sorted(ops.items())))

    good = codec.Data(P.OP_WRITE, 0x12, 65, 3, 9, 0, 64, bytes(64), remote_va=0x1000, rkey=7).encode()
    for name, reason, _, mutate in codec.DATA_MUTATIONS:
        try:
            codec.decode(mutate(good))
            got = "ok"
        except codec.Malformed as e:
            got = e.reason
        check(got == reason, f"mutation {name}: decodes as {got}, want {reason}")
    d = codec.decode(good)
    try:
        codec.decode(codec.too_large_payload(d))
        check(False, "too_large_payload decodes")
    except codec.Malformed as e:
        check(e.reason == "PayloadTooLarge", f"too_large_payload: {e.reason}")
    print(f"codec: {len(codec.DATA_MUTATIONS) + 1} malformed variants are malformed for their reason")


def clause_checks():
    spec = open(clauses.SPEC).read()
    md = open(clauses.TABLE_MD).read()
    for p in clauses.check(spec, md):
        check(False, p)
    # The check must be able to fail: a new MUST in section 3.2 and a
    # reworded rule are both reported.
    grown = spec.replace("### 3.3 Completions", "A receiver MUST frobnicate every packet.\n\n### 3.3 Completions")
    check(any("frobnicate" in p for p in clauses.check(grown, None)), "a new MUST sentence went unnoticed")
    reworded = spec.replace("demultiplexing", "routing")
    check(any("1.b" in p for p in clauses.check(reworded, None)), "a stale clause quote went unnoticed")
    import tests
    names = {n for _, ns in tests.TESTS for n in ns}
    listed = {t for c in clauses.CLAUSES for t in c.tests}
    check(listed <= names, f"clause table names tests that do not exist: {sorted(listed - names)}")
    check(names <= listed, f"tests no clause lists: {sorted(names - listed)}")
    seen = sum(1 for c in clauses.CLAUSES if c.tests)
    print(f"clauses: {len(clauses.CLAUSES)} ({seen} tested, {len(clauses.CLAUSES) - seen} not observable) "
          "cover protocol.md 1-4; the check catches a new MUST and a stale quote")


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def fake_run(bug=None, only=None, planes=1):
    """The suite against fake_dut.py: the clause ids that failed, or None."""
    port = free_port()
    agent_port = free_port()
    fake = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_dut.py"), "--addr", "127.0.0.2",
                             "--port", str(port), "--agent-port", str(agent_port), "--planes", str(planes)]
                            + (["--bug", bug] if bug else []),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        fake.stdout.readline()  # its banner: bound and listening
        import run
        args = ["--dut", "127.0.0.2", "--src", "127.0.0.1", "--port", str(port), "--agent",
                f"127.0.0.2:{agent_port}", "--timeout", "3", "--quiet", "0.3", "--third", "127.0.0.3", "--seed", "15"]
        lines = []
        failed = run.run(run.parse(args + (["--only", only] if only else [])), out=lines.append)
        return failed, lines
    finally:
        fake.kill()
        fake.wait()


def port_checks():
    """A path's source port that another socket of the host holds is passed
    over, not a failed clause: CI's machine runs the rig (whose links are
    UDP sockets on loopback) before this suite, and a clause once failed
    with EADDRINUSE when a seeded pick collided with one."""
    import types
    import peer
    wire = peer.Wire("127.0.0.1", "127.0.0.2", port=free_port())
    blocker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        # The first port a seed picks, held by a socket without
        # SO_REUSEADDR (a seed whose port is free, so that this test holds it).
        for seed in range(15, 115):
            first = random.Random(seed).randrange(49152, 65536)
            try:
                blocker.bind(("127.0.0.1", first))
                break
            except OSError:
                continue
        stub = types.SimpleNamespace(paths={}, rnd=random.Random(seed), wire=wire)
        sport = peer.Conn.path(stub, 0).sport
        check(sport != first, f"path took source port {sport}, which another socket holds")
        taken = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            taken.bind(("127.0.0.1", sport))
            check(False, f"path's source port {sport} is not held until the wire closes")
        except OSError:
            pass
        finally:
            taken.close()
        try:
            wire.send(b"port check", sport)
        except OSError as e:
            check(False, f"sending from the path's reserved port {sport}: {e}")
        if not failures:
            print(f"source ports: a held port ({first}) is passed over, the path's ({sport}) is held")
    finally:
        blocker.close()
        wire.close()


def fake_checks():
    begin = time.monotonic()
    failed, lines = fake_run(planes=2)
    passed = sum(1 for x in lines if x.startswith("ok ") and "# SKIP" not in x)
    if not check(not failed, f"the conforming fake DUT failed clauses {failed}"):
        print("\n".join(lines))
    print(f"fake DUT: conforming, {passed} clauses pass ({time.monotonic() - begin:.1f} s)")
    for bug, clause, only, planes in (("accept-rsn-on-write", "1.3.k", "drops", 1),
                                      ("no-ce-echo", "1.e", "ce_and_ts_echo", 1),
                                      ("no-last-word", "3.4.g", "ack_last_word", 1),
                                      ("go-back-n", "4.2.b", "dut_sack_retransmit", 1),
                                      ("planes-no-backoff", "1.8.h", "planes_announce", 2)):
        failed, lines = fake_run(bug, only, planes)
        if not check(failed == [clause], f"fake DUT --bug {bug}: failed clauses {failed}, want [{clause}]"):
            print("\n".join(lines))
        else:
            line = next(x for x in lines if x.startswith("not ok"))
            print(f"fake DUT --bug {bug}: the suite reports '{line}'")


def main():
    codec_checks()
    clause_checks()
    port_checks()
    fake_checks()
    if failures:
        print(f"conformance host checks: {len(failures)} failed")
        return 1
    print("conformance host checks: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
