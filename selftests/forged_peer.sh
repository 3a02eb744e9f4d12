#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Only the connected peer moves a QP (Documentation/security.md). First,
# with host B's PLANES packets lost for a while, the real peer's packets
# must never be taken for a forger's (B waits for A to hold its plane
# list before it uses plane 1: rx_not_peer stays 0). Then, while
# ibv_rc_pingpong --chk runs between host A (client) and host B (server)
# over two planes, host B forges packets aimed at A's QP with
# metaroce_pkt.py: first from a third address on its plane 0 (DATA, ACK,
# NAK, PROBE_REPLY and a PLANES naming the real peer QP with bogus plane
# addresses), then from its own plane-0 address with values outside every
# window (a SEND far past the message window, ACKs and NAKs on random
# path ids with PSNs and MSNs far ahead). The transfer must complete with
# its data checked; host A must count each forged packet under its reason
# (rx_not_peer, rx_data_dropped, rx_stale_acks, rx_stale_naks); and the
# peer's plane addresses must be unchanged: after the forged PLANES, host
# A's QP still delivers to host B's real plane-1 address.
#
# The pingpongs are sized to last about 2.5 minutes at the speed a short
# calibration run measured (the speed varies with the machine: a fixed
# count once ended before the forger had sent anything).
. "$(dirname "$0")/lib.sh"
third=${PEER_PLANE0_IP%.*}.99
cleanup() {
	peer "ip addr del $third/24 dev \$PLANE0_DEV" > /dev/null 2>&1
	planes_cleanup
}
trap cleanup EXIT
reset_rdma
[ -n "${PLANE1_DEV:-}" ] || skip "the rig has a single plane"
command -v ibv_rc_pingpong > /dev/null || skip "ibverbs-utils not installed"

mr0_on_both_planes
peer "ip addr add $third/24 dev \$PLANE0_DEV" || fail "cannot add the third address $third on host B"
log "ok: host B also owns $third (the forger's third address)"

# The QP numbers of the pingpong's two ends, once both exist.
qpn_of() { # [peer]
	local cmd="rdma resource show qp link mr0/1"
	[ -n "${1:-}" ] && cmd="peer $cmd"
	$cmd 2> /dev/null | awk '$0 ~ / type RC / { for (i = 1; i < NF; i++) if ($i == "lqpn") { print $(i + 1); exit } }'
}
stat() { mr0_stat "$1"; }
plane1_rx_b() { peer "cat /sys/class/net/\$PLANE1_DEV/statistics/rx_packets"; }

# Calibration: a short connection's own usec/iter sizes the long ones.
# Its first 3 s, host B's PLANES packets are lost: B holds A's plane list
# long before A holds B's, and must not use plane 1 until A says so (A
# would drop what B sent from an address it does not know yet, protocol.md
# 1.8). Nothing is forged yet, so neither host may count rx_not_peer.
tc_drop_opcode 0x22 peer || fail "cannot drop host B's PLANES"
pjob=$(peer_spawn "sleep 3; for d in \$PLANE0_DEV \$PLANE1_DEV; do tc qdisc del dev \$d root; done") ||
	fail "cannot schedule the end of the PLANES loss on host B"
pingpong_run ibv_rc_pingpong 60 "calibration" -d mr0 -n 200 -s 4096 -c -e
peer_wait "$pjob" 20 > /dev/null || fail "host B's PLANES loss did not end"
for h in "" peer; do
	n=$(mr0_stat rx_not_peer $h)
	[ "$n" = 0 ] || fail "host ${h:+B}${h:-A} counted $n packets of its real peer as not from the peer after a PLANES loss"
done
log "ok: host B's PLANES lost for 3 s: no packet of the real peer dropped as not from it"
us=$(sed -n 's/.* = \([0-9]*\)\.[0-9]* usec\/iter.*/\1/p' <<< "$pp_out" | tail -1)
iters=$((150000000 / (${us:-1000} > 0 ? ${us:-1000} : 1)))
[ $iters -lt 2000 ] && iters=2000
[ $iters -gt 100000 ] && iters=100000
log "calibration: ${us:-?} usec/iter: the long connections run $iters iterations"

# pp_start: a long pingpong, server on host B and client on host A in the
# background (-e: both wait for completion events instead of spinning, so
# that the forger and the capture on host B's one vCPU get to run).
pp_start() {
	job=$(peer_spawn "timeout 600 ibv_rc_pingpong -d mr0 -n $iters -s 4096 -c -e -g $pgid") || fail "cannot start the server on host B"
	sleep 2
	timeout 600 ibv_rc_pingpong -d mr0 -n $iters -s 4096 -c -e -g "$gid" "$PEER_PLANE0_IP" > /tmp/forged_pp.out 2>&1 &
	client=$!
}
# alive: the connection outlived what was just done, else the step proves
# nothing (and the client's own words say why).
alive() {
	kill -0 "$client" 2> /dev/null && [ -n "$(qpn_of)" ] && return 0
	wait "$client"
	fail "the connection ended (client exit $?) before the forgery was over: it proves nothing: $(tail -3 /tmp/forged_pp.out)"
}
# pp_finish LABEL: both ends completed every iteration with data checked.
pp_finish() {
	wait "$client" || { mr0_counters; fail "$1: the client failed: $(tail -3 /tmp/forged_pp.out)"; }
	server=$(peer_wait "$job" 620) || fail "$1: the server failed: $server"
	grep -q "$iters iters in" /tmp/forged_pp.out || fail "$1: the client did not complete $iters iterations: $(tail -3 /tmp/forged_pp.out)"
}

pp_start
lqpn="" rqpn=""
for _ in $(seq 100); do
	lqpn=$(qpn_of) rqpn=$(qpn_of peer)
	[ -n "$lqpn" ] && [ -n "$rqpn" ] && break
	sleep 0.2
done
[ -n "$lqpn" ] && [ -n "$rqpn" ] || fail "no RC QPs seen (A: '$lqpn', B: '$rqpn')"
log "ok: pingpong running: host A's QP $lqpn, host B's QP $rqpn"
sleep 2

before() { for c in rx_not_peer rx_data_dropped rx_stale_acks rx_stale_naks; do eval "b_$c=$(stat $c)"; done; }
grown() { # COUNTER: its growth since `before`
	local v b="b_$1"
	v=$(stat "$1")
	echo $((v - ${!b}))
}
pkt="/usr/bin/python3 $METAROCE_REPO/selftests/metaroce_pkt.py forge --dst $PLANE0_IP --qpn $lqpn"
rounds=100

# 1. From the third address: every packet is not from the peer.
before
peer "$pkt --src $third --peer-qpn $rqpn --count $rounds" || fail "the forger failed on host B"
alive
n=$(grown rx_not_peer)
log "third address: rx_not_peer +$n for $((5 * rounds)) forged packets"
[ "$n" -ge $((5 * rounds)) ] || fail "host A counted $n of $((5 * rounds)) forged packets from $third as not from the peer"
rx1=$(plane1_rx_b)

# 2. From the peer's own address, outside every window (no PLANES: from the
# peer's address, naming its QP, a PLANES is the peer's to send).
before
peer "$pkt --src $PEER_PLANE0_IP --peer-qpn $rqpn --count $rounds --no-planes" || fail "the forger failed on host B"
alive
for c in rx_data_dropped rx_stale_acks rx_stale_naks; do
	n=$(grown $c)
	log "peer's address: $c +$n for $rounds forged packets"
	[ "$n" -ge "$rounds" ] || fail "host A counted $n of $rounds out-of-window packets from the peer's address under $c"
done
n=$(grown rx_not_peer)
[ "$n" = 0 ] || fail "host A counted $n packets from the peer's own address as not from the peer"

pp_finish "the forged connection"
log "ok: $iters x 4 KiB round trips, data checked (--chk), through the forgery"
# The forged PLANES named bogus addresses for plane 1: had host A taken
# them, its plane-1 packets would no longer reach host B's plane 1.
rx2=$(plane1_rx_b)
log "host B's plane 1 received $((rx2 - rx1)) packets after the forged PLANES"
[ $((rx2 - rx1)) -ge 100 ] || fail "host B's plane 1 got $((rx2 - rx1)) packets after the forged PLANES: host A's QP lost the peer's plane-1 address"
log "ok: only the connected peer moved the QP; every forged packet counted under its reason"

# 3. A finished connection's packets, replayed from the peer's own address
# to a new connection in the same QP slot. The new QP has another number
# (a random tag, rust/driver/qpn.rs), so the packets as recorded find no
# QP; aimed at the new QP's number, they belong to another MSN range (each
# connection numbers its messages from the initial PSNs the ends
# exchanged, protocol.md 2), so nothing of them is placed either.
cap=/tmp/forged_peer.capture
peer "rm -f $cap.ready" || true
cjob=$(peer_spawn "timeout 90 /usr/bin/python3 $METAROCE_REPO/selftests/metaroce_pkt.py capture --dev \$PLANE0_DEV --seconds 40 --out $cap --ready $cap.ready") ||
	fail "cannot start the capture on host B"
# Traffic only once the capture sees it (Python starts slowly on a busy
# TCG vCPU: a fixed sleep once let the whole connection pass unrecorded).
for _ in $(seq 60); do peer "test -f $cap.ready" && break; sleep 0.5; done
peer "test -f $cap.ready" || fail "the capture on host B never started"
pingpong_run ibv_rc_pingpong 60 "the recorded connection" -d mr0 -n 300 -s 4096 -c -e
old_qpn=$(sed -n 's/.*local address:.*QPN \(0x[0-9a-fA-F]*\).*/\1/p' <<< "$pp_out" | head -1)
out=$(peer_wait "$cjob" 100) || fail "the capture failed on host B: $out"
log "B: $out (the recorded connection's QP on host A: $old_qpn)"

pp_start
lqpn=""
for _ in $(seq 100); do
	lqpn=$(qpn_of)
	[ -n "$lqpn" ] && break
	sleep 0.2
done
[ -n "$lqpn" ] || fail "the new connection has no QP on host A"
[ $((lqpn & 0xfff)) = $((old_qpn & 0xfff)) ] && [ $((lqpn)) != $((old_qpn)) ] ||
	fail "the new connection's QP is $lqpn: want the recorded one's slot ($old_qpn & 0xfff) with another number"
log "ok: the new QP $lqpn took the slot of the recorded $old_qpn under another number"
sleep 1
replay() { # [--qpn N]: replays the capture; sets $replayed
	local out
	out=$(peer "/usr/bin/python3 $METAROCE_REPO/selftests/metaroce_pkt.py replay --file $cap --dst $PLANE0_IP --src $PEER_PLANE0_IP $*") ||
		fail "the replay failed on host B"
	log "B: $out"
	replayed=$(sed -n 's/^replayed data \([0-9]*\) .*/\1/p' <<< "$out")
	[ "${replayed:-0}" -ge 100 ] || fail "only ${replayed:-0} data packets of the recorded connection to replay"
}
no_qp0=$(stat rx_no_qp)
replay
alive
n=$(( $(stat rx_no_qp) - no_qp0 ))
log "replay as recorded: rx_no_qp +$n for $replayed data packets"
[ "$n" -ge "$replayed" ] || fail "only $n of $replayed replayed data packets found no QP"
before
replay --qpn "$lqpn"
alive
pp_finish "the new connection"
n=$(grown rx_data_dropped)
log "replay aimed at QP $lqpn: rx_data_dropped +$n for $replayed replayed data packets"
[ "$n" -ge "$replayed" ] || fail "host A dropped $n of $replayed replayed data packets: the rest may have been placed"
log "ok: a finished connection's $replayed data packets replayed to the new QP placed nothing; the new connection's data checked"
