# SPDX-License-Identifier: GPL-2.0
"""The clause table of the conformance suite: every normative rule of
Documentation/protocol.md sections 1-4 (and the section 5 operations the
tests exercise), each with the tests that check it from outside or the
reason an outside observer cannot see it.

  clauses.py md            print clauses.md (the committed table)
  clauses.py check         fail if protocol.md 1-4 has a normative
                           sentence (MUST, MUST NOT, SHALL, "dropped")
                           that no clause quotes, if a clause quotes text
                           the spec no longer has, or if clauses.md is
                           not what `md` prints

Each clause quotes a piece of its sentence verbatim (whitespace aside):
the quote is how the check ties the table to the spec, so that a new or
reworded rule shows up as a failure here instead of silently untested.
"""

import os
import re
import sys
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = os.path.join(HERE, "..", "..", "Documentation", "protocol.md")
TABLE_MD = os.path.join(HERE, "clauses.md")


@dataclass
class Clause:
    cid: str       # section + letter, the TAP line's name
    section: str   # protocol.md section the quote is in
    quote: str     # verbatim piece of the rule (ties the row to the spec)
    rule: str      # the rule in short
    tests: tuple = ()   # tests that check it
    unseen: str = ""    # else: why a black-box peer cannot observe it


C = Clause
# Timing caveat shared by the "at once" ACK rules: the timer backstop
# (at most ack_delay, about 1 ms on the reference driver) also acknowledges
# a packet, so "at once" and "by the timer" differ by less than the
# scheduling jitter of a software DUT; the tests check that the ACK comes
# (and what it carries), not how soon.
AT_ONCE = " (an ACK must come; 'at once' vs the timer is below a software DUT's jitter)"

CLAUSES = [
    # ---- 1 Encapsulation ----
    C("1.a", "1", "UDP destination port **4792**", "data and replies go to UDP port 4792",
      ("write_out_of_order", "dut_write_spray")),
    C("1.b", "1", "Receivers MUST NOT use it for demultiplexing",
      "the UDP source port does not select the QP or path: one path's packets may change port",
      ("source_port_not_demux",)),
    C("1.c", "1", "It is in 49152..65535", "a sender's path source ports are in 49152..65535",
      ("dut_write_spray",)),
    C("1.d", "1", "data packets are sent ECT(0)", "data packets leave with ECN ECT(0)",
      ("dut_write_spray",)),
    C("1.e", "1", "The receiver echoes CE in ACKs", "CE on a data packet comes back as the ACK's CE flag",
      ("ce_and_ts_echo",)),
    C("1.f", "1", "Receivers MUST accept zero", "a zero UDP checksum is accepted (the tester sends only zero)",
      ("udp_checksum",)),
    C("1.g", "1", "Reserved fields MUST be sent as zero", "every packet the DUT sends has zero reserved fields",
      ("dut_packets_valid",)),
    C("1.h", "1", "a v1 receiver MUST drop packets with non-zero reserved fields or undefined flags",
      "non-zero reserved fields and undefined flags are dropped",
      ("drop_undefined_flag", "drop_control_reserved")),
    C("1.i", "1", "senders MUST compute it", "over IPv6 the UDP checksum is computed",
      unseen="the suite's tester is IPv4 only (README, Limits); ipv6.sh carries the "
      "pingpongs, perftest and rping over IPv6 between two modules, whose UDP layer drops "
      "a zero or wrong checksum"),
    C("1.j", "1", "Receivers MUST drop a packet with a zero checksum and MUST check a non-zero one",
      "over IPv6 a zero or wrong UDP checksum is dropped",
      unseen="the suite's tester is IPv4 only (README, Limits); the reference driver leaves "
      "it to the host's UDP layer (an IPv6 socket with zero checksums refused)"),
    # ---- 1.1 / 1.2 ----
    C("1.1.a", "1.1", "other values are dropped (`BadVersion`)", "version other than 1 is dropped",
      ("drop_bad_version",)),
    C("1.1.b", "1.1", "unknown values dropped (`BadOpcode`)", "an unknown opcode is dropped",
      ("drop_unknown_opcode",)),
    C("1.2.a", "1.2", "Opcode values 0x0C–0x0E are reserved", "reserved opcodes 0x0C-0x0E are dropped as unknown",
      ("drop_reserved_opcode_0x0C",)),
    # ---- 1.3 data header ----
    C("1.3.a", "1.3", "MUST be set exactly for SEND_IMM and WRITE_IMM",
      "flag IMM exactly on SEND_IMM/WRITE_IMM (BadFlags), and set by the DUT's senders",
      ("drop_imm_flag_on_write", "send_imm_write_imm")),
    C("1.3.b", "1.3", "MUST be set on every data packet of such a direction",
      "PEER_PSN: set on every packet of a direction numbered from the receiver's PSN; a flag that "
      "differs from the direction's first packet is out of window",
      ("peer_psn_flag",)),
    C("1.3.c", "1.3", "MUST NOT be set on UD_SEND, `BadFlags`", "PEER_PSN on UD_SEND is dropped",
      ("ud_send_rules",)),
    C("1.3.d", "1.3", "Other bits MUST be zero", "undefined data flag bits are dropped",
      ("drop_undefined_flag",)),
    C("1.3.e", "1.3", "Validity rules (a packet violating any is dropped with the given reason)",
      "offset + payload_len <= msg_len, and no empty payload in a non-empty message (BadLength)",
      ("drop_offset_past_msg_len",)),
    C("1.3.f", "1.3", "READ_REQ: `offset = 0`, `payload_len = 0` (`BadLength`)",
      "a READ_REQ with offset or payload is dropped", ("drop_read_req_payload",)),
    C("1.3.g", "1.3", "UD_SEND: `offset = 0`, `payload_len = msg_len` (`BadLength`)",
      "UD_SEND length and remote_va/imm rules", ("ud_send_rules",)),
    C("1.3.h", "1.3", "CMP_SWAP: `offset = 0`, `payload_len = msg_len = 16`",
      "atomic operand lengths (BadLength)", ("drop_atomic_len",)),
    C("1.3.i", "1.3", "`floor_delta ≤ 256` (`BadLength`)", "floor_delta > 256 is dropped",
      ("drop_floor_delta_257",)),
    C("1.3.j", "1.3", "`payload_len ≤ 9216` (`PayloadTooLarge`)", "payload_len > 9216 is dropped",
      ("drop_payload_too_large",)),
    C("1.3.k", "1.3", "`rsn = 0` unless the opcode is SEND, SEND_IMM, SEND_INV or WRITE_IMM",
      "rsn on another opcode is dropped (BadRsn)", ("drop_rsn_on_write",)),
    C("1.3.l", "1.3", "A receiver drops packets whose offset is not a multiple of `M`",
      "segmentation: offset a multiple of M, payload_len as the rule (BadSegmentation)",
      ("drop_segmentation",)),
    C("1.3.m", "1.3", "Packet `i` of a message carries bytes",
      "a sender segments messages by M (every DUT packet checked)", ("dut_write_spray", "read_responder")),
    C("1.3.n", "1.3", "every packet of the message carries the same `rsn`",
      "rsn binds receive buffer r, whichever packet arrives first", ("send_out_of_order",)),
    # ---- 1.4 / 1.5 / 1.6 ----
    C("1.4.a", "1.4", "path being acknowledged (copied from data)",
      "an ACK carries the data packet's path_id, cum_psn, SACK bits as specified", ("floor_and_sack",)),
    C("1.4.b", "1.4", "every message with MSN < cum_msn is completely received and not failed",
      "cum_msn passes only complete, unfailed messages", ("write_out_of_order", "nak_bad_rkey")),
    C("1.5.a", "1.5", "others dropped (`BadSyndrome`)", "a NAK with an undefined syndrome is dropped",
      ("dut_nak_rules",)),
    C("1.5.b", "1.5", "1 remote access error (rkey/bounds/permission)",
      "NAK syndromes: 1 for rkey/bounds, 3 for invalid request", ("nak_bad_rkey", "nak_bounds", "nak_send_too_big")),
    C("1.6.a", "1.6", "with every field echoed except dst_qpn",
      "PROBE_REPLY echoes path_id, seq, timestamp; sent like an ACK (source port, port 4792)", ("probe_reply",)),
    C("1.6.b", "1.6", "the peer QP of `dst_qpn` when the PROBE came from that peer's address",
      "reply's dst_qpn: the peer QP for the peer's probe, else 0", ("probe_reply",)),
    C("1.6.c", "1.6", "PROBEs of the second kind are answered at a bounded rate",
      "a stranger's probes are rate-limited, the peer's always answered", ("probe_rate_limit",)),
    C("1.6.d", "1.6", "a peer's own probes are always answered", "the peer's probes are all answered",
      ("probe_rate_limit",)),
    # ---- 1.7 ----
    C("1.7.a", "1.7", "The UDP length MUST equal header + payload + 4",
      "shorter (Truncated) or longer (TrailingBytes) packets are dropped",
      ("drop_truncated", "drop_trailing_bytes")),
    C("1.7.b", "1.7", "as are packets whose ICRC does not match (`IcrcMismatch`)",
      "a wrong ICRC is dropped", ("drop_bad_icrc", "drop_control_reserved")),
    C("1.7.c", "1.7", "computed over **every byte of the MetaRoCE header and the payload**",
      "the DUT's ICRCs are right (every DUT packet decoded)", ("dut_packets_valid",)),
    # ---- 1.8 PLANES ----
    C("1.8.a", "1.8", "a receiver ignores PLANES whose src_qpn is not its peer QP",
      "PLANES naming another src_qpn gets no answer", ("planes_exchange",)),
    C("1.8.b", "1.8", "count   | planes listed, 1..8 (`BadLength` otherwise)",
      "PLANES count 0 or 9 is dropped", ("planes_malformed",)),
    C("1.8.c", "1.8", "Entries *i* ≥ count MUST be zero (`ReservedNonZero`)",
      "PLANES entries past count non-zero: dropped; the DUT's own PLANES obey it",
      ("planes_malformed", "planes_exchange")),
    C("1.8.d", "1.8", "Every end (whatever its plane count) answers each PLANES without `KNOWN`",
      "PLANES without KNOWN or with CONFIRM is answered with KNOWN (and CONFIRM while it lacks ours)",
      ("planes_exchange",)),
    C("1.8.e", "1.8", "a PLANES with `KNOWN` and without `CONFIRM` is not answered",
      "KNOWN without CONFIRM ends the exchange", ("planes_exchange",)),
    C("1.8.f", "1.8", "Only plane 0 carries packets until both hold",
      "no packet on plane i before the exchange completed", (),
      "needs a tester on two planes; the rig's tester has one (planes.sh checks it between two modules)"),
    C("1.8.h", "1.8", "repeats it, with intervals doubling from 1 ms up to",
      "an end with several planes announces PLANES (CONFIRM) after RTR, repeated with doubling intervals "
      "until the peer's KNOWN", ("planes_announce",)),
    C("1.8.g", "1.8", "Entry 0 is the address the sender connected from",
      "the DUT's PLANES entry 0 is its plane-0 address", ("planes_exchange",)),
    # ---- 2 Concepts ----
    C("2.a", "2", "Both ends of a connection MUST use the same pair of initial PSNs",
      "MSNs start at the exchanged initial PSNs (DUT's sends from its sq_psn; ours accepted from our PSN)",
      ("dut_write_spray", "write_out_of_order")),
    C("2.b", "2", "a flagged packet before the receiver has its own initial PSN",
      "a packet whose PEER_PSN flag differs from the direction's is out of window", ("peer_psn_flag",)),
    C("2.c", "2", "receivers accept a QP's packets on any plane and answer on the plane a packet came in on",
      "answers go out on the plane the packet came in on", ("write_out_of_order",)),
    # ---- 3 receiver ----
    C("3.a", "3", "Anything else is dropped unprocessed and counted (`rx_not_peer`)",
      "packets not from the peer's address (PLANES: not from its plane-0 address) are dropped",
      ("not_peer",)),
    C("3.1.a", "3.1", "`d > 256` drop the packet without processing it (`PathOutOfWindow`)",
      "a PSN more than 256 past cum_psn is dropped unprocessed", (),
      "unreachable by a valid packet: the floor step before it moves cum_psn to psn - floor_delta >= "
      "psn - 256, so d <= 256 always (floor_and_sack checks that a PSN 1000 ahead with floor_delta 0 "
      "is taken; see the README's ambiguities)"),
    C("3.1.b", "3.1", "if `floor` is after `cum_psn`, advance `cum_psn` to `floor`",
      "floor_delta moves cum_psn past PSNs the sender gave up", ("floor_and_sack",)),
    C("3.1.c", "3.1", "the slot is reset to the new path id with `cum_psn = 0`",
      "a newer generation resets the slot", ("generation",)),
    C("3.1.d", "3.1", "Packets of an older generation are still placed (3.2) but not tracked or acknowledged",
      "stale-generation packets are placed, not acknowledged", ("generation",)),
    C("3.2.a", "3.2", "Packets with MSN ≥ head + W or < head − W are dropped",
      "MSNs outside [head-W, head+W) are dropped without an ACK, W the DUT's msg_window",
      ("message_window",)),
    C("3.2.b", "3.2", "later packets with a different opcode, msg_len or rsn are dropped (`Inconsistent`)",
      "packets disagreeing with their MSN's first are dropped", ("inconsistent",)),
    C("3.2.c", "3.2", "is a **duplicate**: not placed, still acknowledged",
      "a duplicate (bit set, or MSN before head) is not placed and is acknowledged",
      ("duplicate_not_placed", "message_window")),
    C("3.2.d", "3.2", "Bytes are therefore written exactly once, in any order",
      "placement at remote_va + offset / receive rsn at offset, in any order",
      ("write_out_of_order", "send_out_of_order")),
    C("3.2.e", "3.2", "If placement is impossible (bad rkey, bounds, missing or too small receive",
      "a failed placement is NAKed, cum_msn stays, later packets get the NAK again",
      ("nak_bad_rkey", "nak_bounds", "nak_send_too_big")),
    C("3.2.f", "3.2", "A READ_REQ whose `msg_len` is longer than one message",
      "a READ_REQ over 1024 packets is NAKed InvalidRequest", ("nak_read_too_long",)),
    C("3.2.g", "3.2", "A QP in the error state (after a failed message",
      "a QP in error places and acknowledges nothing", ("nak_bad_rkey",)),
    C("3.3.a", "3.3", "Completions are released strictly in MSN order, each exactly once",
      "receive completions in MSN order, exactly once", ("send_out_of_order", "send_imm_write_imm")),
    C("3.3.b", "3.3", "so atomics execute in MSN order", "an atomic executes after every earlier message is placed",
      ("atomic_exactly_once",)),
    C("3.4.a", "3.4", "An ACK goes on the plane the acknowledged packets arrived on",
      "ACK from the packet's destination address, source port = the path's, to port 4792",
      ("write_out_of_order", "source_port_not_demux")),
    C("3.4.b", "3.4", "A receiver MUST acknowledge a path once",
      "every k packets" + AT_ONCE, ("ack_policy",)),
    C("3.4.c", "3.4", "A receiver MUST acknowledge the path at once",
      "on a message's last packet, CE, a hole as it opens (path not reordering) or as the lowest fills, a duplicate or a discard" + AT_ONCE,
      ("ack_policy", "ce_and_ts_echo", "floor_and_sack", "duplicate_not_placed")),
    C("3.4.d", "3.4", "A receiver MUST acknowledge a path whose oldest",
      "the timer backstop acknowledges a lone packet", ("ack_policy",)),
    C("3.4.e", "3.4", "plus an RTT MUST stay below the sender's RTO floor",
      "ack_delay + RTT below the sender's RTO floor", (),
      "a bound between the DUT's timer and its peer's RTO floor; the tester sees ACK delays including "
      "the DUT's scheduling, not ack_delay itself (ack_policy logs the delays it saw)"),
    C("3.4.f", "3.4", "`ts_echo` is the `timestamp` of the path's last packet to arrive",
      "ts_echo and the CE flag as specified", ("ce_and_ts_echo",)),
    C("3.4.g", "3.4", "A receiving QP that is destroyed first sends the ACK of the path that last advanced its",
      "a QP destroyed sends the ACK that last moved cum_msn once more", ("ack_last_word",)),
    # ---- 4 sender ----
    C("4.1.a", "4.1", "are sprayed over all usable paths",
      "a message's packets go over several paths, PSNs per path from 0", ("dut_write_spray",)),
    C("4.1.b", "4.1", "Data packets carry `floor_delta = psn − floor`", "floor_delta = psn - floor",
      ("dut_write_spray",)),
    C("4.1.c", "4.1", "A retransmission avoids the path on which the packet was lost",
      "a retransmission goes on another path", ("dut_sack_retransmit",)),
    C("4.1.d", "4.1", "a lost PSN is never resent on the same PSN", "a retransmission takes a new PSN",
      ("dut_sack_retransmit",)),
    C("4.2.a", "4.2", "is ignored entirely, `cum_msn` and the rate hint",
      "an ACK of a stale path id (or cum_psn after next_psn) moves nothing", ("dut_stale_ack",)),
    C("4.2.b", "4.2", "exactly that packet, never go-back-N",
      "a SACK hole is resent alone, never go-back-N", ("dut_sack_retransmit",)),
    C("4.2.c", "4.2", "A message completes at the sender (send CQE) successfully when `cum_msn`",
      "a send completes on cum_msn, with an error on a NAK", ("dut_write_spray", "dut_nak_rules")),
    C("4.2.d", "4.2", "A NAK counts only if its `path_id` is a live path's current id",
      "a NAK of a stale path, unsent PSN or message not in flight is ignored", ("dut_nak_rules",)),
    C("4.3.a", "4.3", "every in-flight packet of the path is declared",
      "RTO: the path's packets re-sprayed, a PROBE on it",
      ("dut_rto_probe",)),
    C("4.3.b", "4.3", "the path is **replaced**", "after unanswered probes the slot's next generation, new source port",
      ("dut_rto_probe",)),
    C("4.3.c", "4.3", "Each drained PSN it acknowledges", "a spurious timeout is undone", (),
      "sender-internal (its congestion state and queued retransmissions); no packet shows it reliably"),
    C("4.3.d", "4.3", "the sender resends its last packet one QP RTO",
      "verdict probe: a delivered message without verdict has its last packet resent", ("dut_write_spray",)),
    C("4.3.e", "4.3", "every outstanding message completes with *retry exceeded*",
      "retry budget: no ACK progress ends the messages with retry exceeded", ("dut_retry_budget",)),
    C("4.3.f", "4.3", "the requester MUST hear from the peer's QP",
      "a READ acknowledged but never answered, the peer silent, completes with retry exceeded",
      ("dut_read_response_budget",)),
    C("4.4.a", "4.4", "up to `used + active/2 + 1` rounded up to a multiple of the plane count",
      "path count growth", (),
      "needs windows full at pwnd_max on every path over an SRTT: a line-rate, long-RTT run beyond a "
      "black-box peer on the rig"),
    # ---- 5 operations the tests exercise (outside the 1-4 coverage rule) ----
    C("5.a", "5", "When the READ_REQ completes at the responder",
      "READ_RESP: imm = READ_REQ's MSN, in the responder's send stream", ("read_responder",)),
    C("5.1.a", "5.1", "a retransmitted request must not execute again",
      "an atomic runs exactly once; a duplicate request is only acknowledged", ("atomic_exactly_once",)),
    # ---- 6.5 receiver rate hints ----
    C("6.5.a", "6.5", "Every ACK MUST carry its QP's current hint",
      "each ACK carries its QP's rate hint: the device's capacity shared among its receiving QPs",
      unseen="the hint is a share of the DUT's receive capacity, a local setting (a knob or its "
      "links' speeds) no peer knows; with the tester's one receiving QP the share is none (0), "
      "which a DUT without hints also sends (host tests: rust/engine/tests/rcn.rs)"),
]


def spec_sections(text):
    """{section: [lines]} for sections 1-4 of protocol.md."""
    sec, out = None, {}
    for line in text.splitlines():
        m = re.match(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", line)
        if m:
            sec = m.group(1) if int(m.group(1).split(".")[0]) <= 4 else None
            continue
        if line.startswith("## "):
            sec = None
            continue
        if sec:
            out.setdefault(sec, []).append(line)
    return out


def norm(s):
    return re.sub(r"\s+", " ", s).strip()


def sentences(lines):
    """A section's sentences: table rows whole, bullets and paragraphs
    split after '.', ';' or ':' before a capital."""
    paras, cur = [], []
    for line in lines:
        if line.startswith("|") or not line.strip() or line.lstrip().startswith("* ") or line.startswith("```"):
            if cur:
                paras.append(" ".join(cur))
            cur = []
            if line.startswith("|"):
                paras.append(line)
            elif line.strip() and not line.startswith("```"):
                cur = [line.strip()]
            continue
        cur.append(line.strip())
    if cur:
        paras.append(" ".join(cur))
    for p in paras:
        p = norm(p)
        if p.startswith("|"):
            yield p
        else:
            yield from re.split(r"(?<=[.;:])\s+(?=[A-Z`(*])", p)


NORMATIVE = re.compile(r"\bMUST\b|\bSHALL\b|\bREQUIRED\b|\bdropped\b|\bdrops?\b")


def check(spec_text, md_text):
    """The problems of the table against the spec; empty when it covers it."""
    problems = []
    secs = spec_sections(spec_text)
    joined = {s: norm(" ".join(lines)) for s, lines in secs.items()}
    whole = norm(spec_text)
    for c in CLAUSES:
        where = joined.get(c.section, whole)
        if norm(c.quote) not in where:
            problems.append(f"clause {c.cid}: its quote is not in section {c.section}: {c.quote!r}")
        if bool(c.tests) == bool(c.unseen):
            problems.append(f"clause {c.cid}: needs tests or a reason it cannot be observed (not both)")
    ids = [c.cid for c in CLAUSES]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        problems.append(f"duplicate clause ids {sorted(dup)}")
    for sec, lines in secs.items():
        quotes = [norm(c.quote) for c in CLAUSES if c.section == sec]
        for s in sentences(lines):
            if NORMATIVE.search(s) and not any(q in s for q in quotes):
                problems.append(f"section {sec}: normative sentence without a clause: {s[:160]!r}")
    if md_text is not None and md_text != markdown():
        problems.append("clauses.md is not what `clauses.py md` prints: regenerate it")
    return problems


def markdown():
    rows = ["<!-- generated by selftests/conformance/clauses.py md: do not edit -->",
            "# MetaRoCE conformance clauses",
            "",
            "Every normative rule of Documentation/protocol.md sections 1-4 (and the section 5",
            "operations the suite uses), with the tests that check it from outside or why a",
            "black-box peer cannot. `run.py` prints one TAP line per clause.",
            "",
            "| clause | spec | rule | checked by |",
            "|--------|------|------|------------|"]
    for c in CLAUSES:
        how = ", ".join(f"`{t}`" for t in c.tests) if c.tests else f"not observable: {c.unseen}"
        quote = c.quote.replace("|", "\\|")
        rows.append(f"| {c.cid} | {c.section}: \"{quote}\" | {c.rule} | {how} |")
    seen = sum(1 for c in CLAUSES if c.tests)
    rows += ["", f"{len(CLAUSES)} clauses: {seen} tested, {len(CLAUSES) - seen} not observable from outside."]
    return "\n".join(rows) + "\n"


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else "check"
    if cmd == "md":
        sys.stdout.write(markdown())
        return 0
    with open(SPEC) as f:
        spec = f.read()
    md = open(TABLE_MD).read() if os.path.exists(TABLE_MD) else ""
    problems = check(spec, md)
    for p in problems:
        print(f"FAIL: {p}")
    if not problems:
        print(f"clauses: {len(CLAUSES)} clauses cover every normative sentence of protocol.md 1-4")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
