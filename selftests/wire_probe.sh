#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The kernel datapath end to end: host B sends MetaRoCE PROBEs, built by
# metaroce_pkt.py from the spec (independently of rust/engine), over plane 0
# to host A's device; A answers a good probe with a PROBE_REPLY (same path:
# B's source port, ECT(0)) and counts it; a truncated and a bad-ICRC probe are
# counted as rx_malformed and not answered. The UDP socket on 4792 exists
# only while a device does; rmmod leaves nothing behind.
. "$(dirname "$0")/lib.sh"
pkt="/usr/bin/python3 $METAROCE_REPO/selftests/metaroce_pkt.py"
trap reset_rdma EXIT
reset_rdma
# B answers nothing itself: no MetaRoCE socket there, the script listens.
peer rmmod metaroce > /dev/null 2>&1

# 4792 = 0x12B8 in /proc/net/udp (kernel sockets are listed too).
port_open() { grep -qi ':12B8 ' /proc/net/udp; }

expect_stat() { # NAME WANT
	local got
	got=$(mr0_stat "$1")
	[ "$got" = "$2" ] || fail "$1 is '$got', want $2 ($(rdma statistic show link mr0/1))"
	log "ok: $1 = $2"
}

expect_ok $pkt check
expect_ok modprobe metaroce
port_open && fail "UDP 4792 open with no device"
expect_ok rdma link add mr0 type metaroce netdev "$PLANE0_DEV"
port_open || fail "UDP 4792 not open with mr0"
expect_dmesg "UDP port 4792 open"
log "$(rdma statistic show link mr0/1)"
for c in rx_packets rx_bytes tx_packets tx_bytes rx_malformed rx_no_qp probes_answered; do
	expect_stat $c 0
done

out=$(peer $pkt probe --dst "$PLANE0_IP" --src "$PEER_PLANE0_IP" --sport 50123 --seq 7) ||
	fail "good probe: $out"
log "$out"
expect_stat rx_packets 1
expect_stat rx_bytes 28
expect_stat probes_answered 1
expect_stat tx_packets 1
expect_stat tx_bytes 28
expect_stat rx_malformed 0

out=$(peer $pkt probe --dst "$PLANE0_IP" --src "$PEER_PLANE0_IP" --sport 50124 --mode truncated --timeout 2) ||
	fail "truncated probe: $out"
log "$out"
expect_stat rx_malformed 1
expect_dmesg "mr0: dropped malformed packet from $PEER_PLANE0_IP:50124 (23 bytes): Truncated"

out=$(peer $pkt probe --dst "$PLANE0_IP" --src "$PEER_PLANE0_IP" --sport 50125 --mode badcrc --timeout 2) ||
	fail "bad-ICRC probe: $out"
log "$out"
expect_stat rx_malformed 2
expect_dmesg "mr0: dropped malformed packet from $PEER_PLANE0_IP:50125 (28 bytes): IcrcMismatch"
expect_stat rx_packets 3
expect_stat probes_answered 1
expect_stat tx_packets 1

# Valid packets of every other kind parse (spec and engine agree on their
# layouts) and, with no QP yet, count as rx_no_qp.
for kind in data ack nak reply planes; do
	out=$(peer $pkt send --dst "$PLANE0_IP" --src "$PEER_PLANE0_IP" --kind $kind) || fail "send $kind: $out"
	log "$out"
done
for _ in $(seq 20); do [ "$(mr0_stat rx_no_qp)" = 5 ] && break; sleep 0.1; done
expect_stat rx_no_qp 5
expect_stat rx_malformed 2
expect_stat ecn_marks 0

# A burst of probes for no QP (not from any QP's peer): the first 32 and
# then 100 a second are answered and sent, the rest counted as
# rx_probes_limited (protocol.md 1.6); none is lost uncounted.
rx0=$(mr0_stat rx_packets) ans0=$(mr0_stat probes_answered) tx0=$(mr0_stat tx_packets) lim0=$(mr0_stat rx_probes_limited)
ndev_tx() { cat "/sys/class/net/$PLANE0_DEV/statistics/tx_packets"; }
peer_rx() { peer cat "/sys/class/net/\$PLANE0_DEV/statistics/rx_packets"; }
ntx0=$(ndev_tx) nrx0=$(peer_rx)
# Room on B for the whole burst of replies in the script's socket.
peer sysctl -qw net.core.rmem_max=16777216 || fail "sysctl on B"
out=$(peer $pkt burst --dst "$PLANE0_IP" --src "$PEER_PLANE0_IP" --count 1000 --timeout 3) || fail "burst: $out"
log "$out"
sleep 1
rx=$(( $(mr0_stat rx_packets) - rx0 )) ans=$(( $(mr0_stat probes_answered) - ans0 )) tx=$(( $(mr0_stat tx_packets) - tx0 ))
lim=$(( $(mr0_stat rx_probes_limited) - lim0 ))
ntx=$(( $(ndev_tx) - ntx0 )) nrx=$(( $(peer_rx) - nrx0 ))
log "burst on A: rx_packets +$rx, probes_answered +$ans, rx_probes_limited +$lim, tx_packets +$tx; $PLANE0_DEV sent +$ntx, B's received +$nrx"
[ "$rx" -gt 0 ] && [ "$rx" = $((ans + lim)) ] && [ "$ans" = "$tx" ] || fail "burst counters disagree"
[ "$ans" -ge 32 ] || fail "only $ans probes answered: fewer than the burst allowance of 32"
[ "$lim" -gt 0 ] || fail "all $ans probes of a 1000-probe burst from a non-peer answered: no rate limit"
[ "$ntx" -ge "$tx" ] || fail "$PLANE0_DEV sent $ntx packets, fewer than the $tx replies"
expect_stat rx_malformed 2
expect_stat tx_errors 0

# Fuzz: random, bit-flipped, truncated and extended packets are all
# counted as malformed, none answered, no oops (the rig checks dmesg).
rx0=$(mr0_stat rx_packets) bad0=$(mr0_stat rx_malformed) ans0=$(mr0_stat probes_answered)
out=$(peer $pkt fuzz --dst "$PLANE0_IP" --src "$PEER_PLANE0_IP" --count 2000) || fail "fuzz: $out"
log "$out"
sleep 1
rx=$(( $(mr0_stat rx_packets) - rx0 )) bad=$(( $(mr0_stat rx_malformed) - bad0 ))
log "fuzz on A: rx_packets +$rx, rx_malformed +$bad"
[ "$rx" -gt 0 ] && [ "$rx" = "$bad" ] || fail "fuzz: $rx received but $bad malformed"
expect_stat probes_answered "$ans0"

# A second device shares the socket; it closes with the last one.
expect_ok rdma link add mr1 type metaroce netdev "$PLANE1_DEV"
expect_ok rdma link delete mr0
port_open || fail "UDP 4792 closed while mr1 exists"
expect_ok rdma link delete mr1
port_open && fail "UDP 4792 still open after the last device went"
expect_dmesg "UDP port 4792 closed"

# rmmod with a device present closes it too.
expect_ok rdma link add mr0 type metaroce netdev "$PLANE0_DEV"
expect_ok rmmod metaroce
port_open && fail "UDP 4792 still open after rmmod"
log "ok: rmmod closed UDP 4792"
