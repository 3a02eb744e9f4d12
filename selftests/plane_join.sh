#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A plane added under live traffic (issue #14 item 3; protocol.md 1.8, a
# plane joining, and 4.3, plane added). mr0 on plane 0 only on hosts A and
# B, two RC QPs running: ibv_rc_pingpong --chk (16 KiB messages) and an
# ib_write_bw. Then plane 1 is added to mr0 on host B, then on host A:
#  - plane 1 carries MetaRoCE packets within 1 s of host A's add (its
#    netdev's tx counter, then mr0's plane1_tx_packets on both hosts);
#  - the ping-pong QP, connected on one plane, has path slots on both
#    planes, every path active (rdma resource show qp -dd);
#  - in steady state each plane carries its share of host A's packets
#    within ±10% (mr0's plane0_tx_packets and plane1_tx_packets);
#  - both runs complete, the ping-pong's data checked.
# Plane 1's netdevs have their addresses before the add (the rig's setup):
# a QP lists its planes to the peer when the plane is added.
. "$(dirname "$0")/lib.sh"

client=""
bw=""
cleanup() {
	[ -n "$client" ] && kill "$client" 2> /dev/null
	[ -n "$bw" ] && kill "$bw" 2> /dev/null
	two_host_cleanup -k ibv_rc_pingpong -k ib_write_bw -q
}
trap cleanup EXIT
reset_rdma
[ -n "${PLANE1_DEV:-}" ] || skip "the rig has a single plane"
need_tools ibv_rc_pingpong ib_write_bw

expect_ok modprobe metaroce
peer modprobe metaroce > /dev/null || fail "modprobe metaroce on host B"
mr0_on_both_hosts

# How long a 16 KiB round trip takes here, for a ping-pong of ~30 s.
pingpong_run ibv_rc_pingpong 60 "plane 0 only, calibration" -d mr0 -n 50 -s 16384 -c -e
usec=$(sed -n 's/.* = \([0-9]*\)\.[0-9]* usec\/iter.*/\1/p' <<< "$pp_out")
iters=$((30000000 / (${usec:-30000} > 0 ? ${usec:-30000} : 1)))
[ "$iters" -lt 300 ] && iters=300
[ "$iters" -gt 20000 ] && iters=20000
log "ping-pong: $iters round trips ($usec us each alone)"

# --- Two QPs running on plane 0 ---
bound=$((300 * ${METAROCE_TIMEOUT_SCALE:-1}))
bw_secs=50
bw_args="-d mr0 -p 18811 -s 65536 -D $bw_secs"
bw_job=$(peer_spawn "timeout $((bw_secs + 90)) ib_write_bw $bw_args -x $pgid") || fail "cannot start ib_write_bw on host B"
peer_listening 18811 60 "$bw_args" || log "ib_write_bw: no listener on host B after 60 s"
# Busy-polling: at nice 19, so that the ping-pong and the checks run.
# shellcheck disable=SC2086 # $bw_args: options, split on purpose
timeout $((bw_secs + 90)) nice -n 19 ib_write_bw $bw_args -x "$gid" "$METAROCE_PEER_ADDR" > /tmp/pj_bw.out 2>&1 &
bw=$!
sleep 4
kill -0 "$bw" 2> /dev/null || fail "ib_write_bw ended early: $(tail -5 /tmp/pj_bw.out)"
# The ping-pong starts once ib_write_bw runs, so that the listener wait
# above (up to a minute under TCG) does not eat into its ~30 s.
pp="-d mr0 -n $iters -s 16384 -c -e"
pp_job=$(peer_spawn "timeout $bound ibv_rc_pingpong $pp -g $pgid") || fail "cannot start the ping-pong server"
sleep 2
# shellcheck disable=SC2086 # $pp: options, split on purpose
timeout "$bound" ibv_rc_pingpong $pp -g "$gid" "$METAROCE_PEER_ADDR" > /tmp/pj_pp.out 2>&1 &
client=$!
qpn=$(rc_pingpong_qpn) ||
	fail "the ping-pong QP never reached RTS: $(cat /tmp/pj_pp.out)"
read -r paths0 active0 planes0 <<< "$(qp_details "$qpn")"
log "QP $qpn on one plane: $paths0 paths, $active0 active, planes by slot $planes0"
[[ ",$planes0," != *,1,* ]] || fail "QP $qpn has a path on plane 1 before it exists: $planes0"

# --- Plane 1 added under traffic: B first, then A ---
plane1_tx() { cat "/sys/class/net/$PLANE1_DEV/statistics/tx_packets"; }
b0=$(plane1_tx)
sleep 1
idle=$(($(plane1_tx) - b0))
log "host A's plane 1 ($PLANE1_DEV) sent $idle packets in 1 s before the add (not MetaRoCE's)"
peer 'rdma link add mr0 type metaroce netdev $PLANE1_DEV' > /dev/null || fail "adding plane 1 on host B"
kill -0 "$client" 2> /dev/null || fail "the ping-pong ended before the add: $(tail -3 /tmp/pj_pp.out)"
s0=$(mr0_stats)
b0=$(plane1_tx)
t0=$(date +%s%N)
expect_ok rdma link add mr0 type metaroce netdev "$PLANE1_DEV"
t1=$(date +%s%N)
expect_dmesg "mr0: plane 1 on $PLANE1_DEV"
# Carrying data: well above what the netdev sends by itself, and more
# than a PLANES exchange and a probe per path.
want=$((idle + 30))
joined=""
while [ $(($(date +%s%N) - t0)) -lt 3000000000 ]; do
	if [ $(($(plane1_tx) - b0)) -ge "$want" ]; then
		joined=$((($(date +%s%N) - t0) / 1000000))
		break
	fi
	sleep 0.05
done
log "host A's plane 1 sent $(($(plane1_tx) - b0)) packets; $want reached ${joined:-not} ms after the add began (the add took $(((t1 - t0) / 1000000)) ms)"
[ -n "$joined" ] || { mr0_counters; fail "plane 1 carried no traffic within 3 s of the add"; }
[ "$joined" -le 1000 ] || fail "plane 1 carried traffic only $joined ms after the add (want <= 1000)"
s1=$(mr0_stats)
a1=$(($(stat_of plane1_tx_packets "$s1") - $(stat_of plane1_tx_packets "$s0")))
b1=$(stat_of plane1_tx_packets "$(mr0_stats peer)") || fail "no plane1_tx_packets on host B"
log "mr0 plane 1 packets since the add: host A $a1, host B $b1"
[ "$a1" -gt 0 ] && [ "$b1" -gt 0 ] || fail "mr0 did not send on plane 1 on both hosts (A $a1, B $b1)"
log "ok: plane 1 carries traffic ${joined} ms after the add"

# --- The running QP spreads over both planes ---
for _ in $(seq 25); do
	read -r paths active planes <<< "$(qp_details "$qpn")"
	[ "$active" = "$paths" ] && [[ ",$planes," == *,0,* && ",$planes," == *,1,* ]] && break
	sleep 0.2
done
log "QP $qpn after the add: $paths paths, $active active, planes by slot $planes"
[[ ",$planes," == *,0,* && ",$planes," == *,1,* ]] || fail "QP $qpn does not use both planes: $planes"
[ "$active" = "$paths" ] || fail "QP $qpn: $active of $paths paths active"
log "ok: QP $qpn, connected on one plane, has its paths on both"

# --- Steady state: each plane its share of host A's packets ---
sleep 3
kill -0 "$bw" 2> /dev/null || fail "ib_write_bw ended before the share was measured: make it longer"
r0=$(mr0_stats)
sleep 8
r1=$(mr0_stats)
kill -0 "$bw" 2> /dev/null || fail "ib_write_bw ended while the share was measured: make it longer"
p0=$(($(stat_of plane0_tx_packets "$r1") - $(stat_of plane0_tx_packets "$r0")))
p1=$(($(stat_of plane1_tx_packets "$r1") - $(stat_of plane1_tx_packets "$r0")))
total=$((p0 + p1))
log "host A in 8 s of steady state: plane 0 sent $p0 packets, plane 1 $p1"
[ "$total" -ge 1000 ] || fail "host A sent only $total packets in 8 s"
# Within ±10% of an equal share: each plane 45-55% of the packets.
for p in "$p0" "$p1"; do
	[ $((p * 100)) -ge $((total * 45)) ] && [ $((p * 100)) -le $((total * 55)) ] ||
		fail "uneven planes: plane 0 $p0, plane 1 $p1 packets (each must be 45-55%)"
done
log "ok: plane 0 carried $((p0 * 100 / total))%, plane 1 $((p1 * 100 / total))% of host A's packets"

# --- Both runs complete ---
wait "$bw" || fail "ib_write_bw failed on host A: $(tail -5 /tmp/pj_bw.out)"
bw=""
peer_wait "$bw_job" 120 > /dev/null || fail "ib_write_bw failed on host B"
log "ok: ib_write_bw: $(awk '$1 == 65536 { print; exit }' /tmp/pj_bw.out)"
wait "$client" || fail "the ping-pong failed across the add: $(tail -5 /tmp/pj_pp.out)"
client=""
grep -q "iters in" /tmp/pj_pp.out || fail "the ping-pong did not complete: $(tail -5 /tmp/pj_pp.out)"
peer_wait "$pp_job" $((bound + 10)) > /dev/null || fail "the ping-pong server failed across the add"
log "$(cat /tmp/pj_pp.out)"
log "ok: $iters round trips of 16384 B, data checked, across plane 1's add"
log "$(rdma statistic show link mr0/1)"
