#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# One device over two planes, one QP spraying over both.
# `rdma link add mr0 type metaroce netdev DEV` with the name of an existing
# MetaRoCE device adds DEV as its next plane; conflicts keep their errors.
# Then on hosts A and B: ibv_rc_pingpong --chk and ib_write_bw over mr0
# must send packets on BOTH planes (netdev counters); the data-checking run
# again with 1% loss on every plane; a long run during which plane 1 goes
# down on host A (link down, then 100% loss) must complete without a QP
# error, and traffic must come back to plane 1 afterwards.
. "$(dirname "$0")/lib.sh"
cleanup() {
	ip link del mrveth0 2> /dev/null
	planes_cleanup
}
trap cleanup EXIT
reset_rdma
[ -n "${PLANE1_DEV:-}" ] || skip "the rig has a single plane"
need_tools ibv_rc_pingpong ib_write_bw

# --- The command and its errors (host A) ---
expect_ok modprobe metaroce
expect_ok rdma link add mr0 type metaroce netdev "$PLANE0_DEV"
# The same netdev twice: it already is mr0's first plane.
expect_err "File exists" rdma link add mr0 type metaroce netdev "$PLANE0_DEV"
expect_dmesg "cannot add mr0: $PLANE0_DEV already carries MetaRoCE device mr0"
expect_ok rdma link add mr0 type metaroce netdev "$PLANE1_DEV"
expect_dmesg "mr0: plane 1 on $PLANE1_DEV"
expect_err "File exists" rdma link add mr0 type metaroce netdev "$PLANE1_DEV"
# A plane of mr0 cannot carry another device either.
expect_err "File exists" rdma link add mr7 type metaroce netdev "$PLANE1_DEV"
expect_dmesg "cannot add mr7: $PLANE1_DEV already carries MetaRoCE device mr0"
rdma_dev_exists mr7 && fail "mr7 exists after a refused add"
expect_err "No such device" rdma link add mr0 type metaroce netdev nosuch0
expect_err "Invalid argument" rdma link add mr0 type metaroce netdev lo
# A plane whose netdev is unregistered leaves the device; the device stays.
expect_ok ip link add mrveth0 type veth peer name mrveth1
expect_ok rdma link add mr0 type metaroce netdev mrveth0
expect_dmesg "mr0: plane 2 on mrveth0"
expect_ok ip link del mrveth0
expect_dmesg "mr0: plane 2 (mrveth0) removed with its netdev"
rdma_dev_exists mr0 || fail "mr0 went with its third plane's netdev"
# Port state: ACTIVE while any plane has carrier.
expect_ok ip link set "$PLANE0_DEV" down
rdma link show mr0/1 | grep -q "state ACTIVE" || fail "mr0 not ACTIVE with plane 1 up: $(rdma link show mr0/1)"
expect_ok ip link set "$PLANE1_DEV" down
rdma link show mr0/1 | grep -q "state DOWN" || fail "mr0 not DOWN with both planes down: $(rdma link show mr0/1)"
expect_ok ip link set "$PLANE1_DEV" up
expect_ok ip link set "$PLANE0_DEV" up
for _ in $(seq 50); do rdma link show mr0/1 | grep -q "state ACTIVE" && break; sleep 0.1; done
rdma link show mr0/1 | grep -q "state ACTIVE" || fail "mr0 not ACTIVE after links up"
log "ok: port ACTIVE while any plane has carrier"
# Deleting the device frees its planes for a new device.
expect_ok rdma link delete mr0
expect_ok rdma link add mr1 type metaroce netdev "$PLANE1_DEV"
expect_ok rdma link delete mr1

# --- Traffic over both planes ---
mr0_on_both_planes

# Packets sent by host A's and host B's plane netdevs so far.
sent() { # DEV-VARIABLE-NAME
	local a b
	a=$(cat "/sys/class/net/${!1}/statistics/tx_packets")
	b=$(peer "cat /sys/class/net/\$$1/statistics/tx_packets") || fail "counters on B"
	echo $((a + b))
}
snap() { p0=$(sent PLANE0_DEV) p1=$(sent PLANE1_DEV); }
# both_planes LABEL MIN: each plane carried at least MIN packets since snap.
both_planes() {
	local d0 d1
	d0=$(($(sent PLANE0_DEV) - p0)) d1=$(($(sent PLANE1_DEV) - p1))
	log "$1: plane 0 ($PLANE0_DEV) sent $d0 packets, plane 1 ($PLANE1_DEV) $d1 (hosts A+B)"
	[ "$d0" -ge "$2" ] && [ "$d1" -ge "$2" ] || fail "$1: not both planes carried >= $2 packets"
}

pingpong() { # iterations size label
	pingpong_run ibv_rc_pingpong 200 "$1 x $2 B, $3" -d mr0 -n "$1" -s "$2" -c
	usec=$(sed -n 's/.* = \([0-9]*\)\.[0-9]* usec\/iter.*/\1/p' <<< "$pp_out")
	log "ok: $2 B x $1 round trips, data checked, $3"
}

snap
pingpong 100 16384 "two planes"
usec100=${usec:-30000}
both_planes "rc_pingpong" 200

snap
job=$(peer_spawn "timeout 60 ib_write_bw -d mr0 -x $pgid -p 18801 -n 200 -s 65536") || fail "cannot start ib_write_bw on B"
sleep 3
out=$(timeout 60 ib_write_bw -d mr0 -x "$gid" -p 18801 -n 200 -s 65536 "$METAROCE_PEER_ADDR" 2>&1) ||
	fail "ib_write_bw failed on host A: $(tail -3 <<< "$out")"
peer_wait "$job" 80 > /dev/null || fail "ib_write_bw failed on host B"
log "ok: ib_write_bw: $(awk '$1 == 65536 { print; exit }' <<< "$out")"
both_planes "ib_write_bw" 1000

# --- 1% loss on every plane, both hosts ---
for d in PLANE0_DEV PLANE1_DEV; do
	expect_ok tc qdisc add dev "${!d}" root netem loss 1%
	peer "tc qdisc add dev \$$d root netem loss 1%" || fail "netem on host B"
done
retx0=$(mr0_stat retransmissions)
snap
pingpong 200 16384 "1% loss on both planes"
both_planes "rc_pingpong, 1% loss" 200
dropped=0
for d in PLANE0_DEV PLANE1_DEV; do
	n=$(tc -s qdisc show dev "${!d}" | sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -1)
	log "netem dropped ${n:-0} packets leaving host A on ${!d}"
	[ "${n:-0}" -gt 0 ] || fail "netem dropped nothing on ${!d}: the loss run proves nothing"
	dropped=$((dropped + n))
	expect_ok tc qdisc del dev "${!d}" root
	peer "tc qdisc del dev \$$d root" || fail "removing netem on host B"
done
retx=$(mr0_stat retransmissions)
log "ok: host A retransmitted $((retx - retx0)) packets"

# --- Plane 1 fails in the middle of a run, then comes back ---
# plane1_sent: packets host A's plane 1 netdev sent so far.
plane1_sent() { cat "/sys/class/net/$PLANE1_DEV/statistics/tx_packets"; }
# About 70 s at the speed of the first run, for the ~35 s of phases below.
iters=$((70000000 / (usec100 > 0 ? usec100 : 1)))
[ "$iters" -lt 1000 ] && iters=1000
[ "$iters" -gt 50000 ] && iters=50000
log "long run: $iters round trips ($usec100 us each in the first run)"
job=$(peer_spawn "timeout 280 ibv_rc_pingpong -d mr0 -n $iters -s 16384 -c -g $pgid") || fail "cannot start the server"
sleep 2
timeout 280 ibv_rc_pingpong -d mr0 -n "$iters" -s 16384 -c -g "$gid" "$PEER_PLANE0_IP" > /tmp/planes_client.out 2>&1 &
client=$!
sleep 4
kill -0 $client 2> /dev/null || fail "the client ended early: $(cat /tmp/planes_client.out)"
s0=$(plane1_sent)
expect_ok ip link set "$PLANE1_DEV" down
log "plane 1 ($PLANE1_DEV) down on host A"
sleep 1
s0b=$(plane1_sent)
sleep 3
s1=$(plane1_sent)
expect_ok ip link set "$PLANE1_DEV" up
sleep 4
s2=$(plane1_sent)
log "host A plane 1 sent: before down $s0, in the first second down +$((s0b - s0)), then +$((s1 - s0b)), after up +$((s2 - s1))"
[ $((s2 - s1)) -gt 50 ] || fail "traffic did not return to plane 1 after link up"
kill -0 $client 2> /dev/null || fail "the run ended before the loss phase: make it longer"
# Now loss instead of carrier: the QP only sees unanswered packets.
expect_ok tc qdisc add dev "$PLANE1_DEV" root netem loss 100%
log "plane 1 ($PLANE1_DEV) loses every packet leaving host A"
sleep 4
kill -0 $client 2> /dev/null || fail "the run ended during the loss phase: make it longer"
expect_ok tc qdisc del dev "$PLANE1_DEV" root
s3=$(plane1_sent)
for i in $(seq 30); do
	sleep 0.5
	s4=$(plane1_sent)
	[ $((s4 - s3)) -gt 50 ] && break
done
log "host A plane 1 sent +$((s4 - s3)) packets in the $((i * 500)) ms after the loss ended"
[ $((s4 - s3)) -gt 50 ] || fail "traffic did not return to plane 1 after the loss ended"
wait $client || fail "client failed across the plane failures: $(tail -5 /tmp/planes_client.out)"
out=$(cat /tmp/planes_client.out)
log "$out"
grep -q "iters in" <<< "$out" || fail "client did not complete across the plane failures"
peer_wait "$job" 290 > /dev/null || fail "server failed across the plane failures"
log "ok: $iters round trips of 16384 B, data checked, through plane 1 down and 100% loss"
stats=$(rdma statistic show link mr0/1)
log "$stats"
