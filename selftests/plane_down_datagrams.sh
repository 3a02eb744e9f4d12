#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Plane 0 fails (both hosts' plane-0 NICs lose carrier, the rig's host
# agent: selftests/rig/hostctl.py) under one MetaRoCE device on two planes
# on hosts A and B (protocol.md 1.8, 4.3 and 5):
#  - datagrams follow the failover: ibv_ud_pingpong --chk completes, and
#    rping -V (rdma_cm: the CM's MADs as GSI datagrams, then new RC QPs
#    whose PLANES exchange runs on plane 1) sets up a connection and
#    passes its validated pings, both with plane 0 down;
#  - path slots are re-homed: a running RC QP keeps its active path count
#    (rdma resource show qp -dd, rust/driver/qp_details.rs) through the
#    plane-down window, all its paths on plane 1 meanwhile, and after
#    recovery its slots go home: plane 0 carries traffic again
#    (plane0_tx_packets in rdma statistic).
# The devices learn each other's plane-1 address from an RC QP's PLANES
# exchange before the failure (a datagram to a peer never met goes on plane
# 0). The kernel's address resolution for the peer's plane-0 address
# (rdma_cm, ibv_create_ah) needs a neighbour entry on plane 0's netdev,
# which the kernel flushes on carrier loss: pinned (permanent) on both
# hosts for the test, as the user guide (section 3) tells users to.
. "$(dirname "$0")/lib.sh"

hostctl_job=""
client=""
cleanup() {
	[ -n "$client" ] && kill "$client" 2> /dev/null
	# The agent brings plane 0 back up by the end of its request.
	[ -n "$hostctl_job" ] && wait "$hostctl_job" 2> /dev/null
	ip neigh del "$PEER_PLANE0_IP" dev "$PLANE0_DEV" 2> /dev/null
	peer 'ip neigh del $PEER_PLANE0_IP dev $PLANE0_DEV' > /dev/null 2>&1
	two_host_cleanup -k ibv_rc_pingpong -k ibv_ud_pingpong -k rping -q
}
trap cleanup EXIT
reset_rdma
[ -n "${PLANE1_DEV:-}" ] || skip "the rig has a single plane"
[ -d "$METAROCE_OUT/hostctl" ] || skip "the rig runs no host-side agent"
need_tools ibv_ud_pingpong rping

mr0_on_both_planes

# --- Each device learns the other's planes (an RC QP's PLANES exchange) ---
pingpong_run ibv_rc_pingpong 60 "two planes, before the failure" -d mr0 -n 50 -s 4096 -c
log "ok: an RC QP connected: each device holds the other's plane addresses"

# --- Neighbour entries for the plane-0 addresses, pinned ---
amac=$(cat "/sys/class/net/$PLANE0_DEV/address")
bmac=$(peer 'cat /sys/class/net/$PLANE0_DEV/address') || fail "B's plane-0 MAC"
expect_ok ip neigh replace "$PEER_PLANE0_IP" lladdr "$bmac" dev "$PLANE0_DEV" nud permanent
peer "ip neigh replace \$PEER_PLANE0_IP lladdr $amac dev \$PLANE0_DEV nud permanent" > /dev/null ||
	fail "pinning A's plane-0 neighbour on B"

# --- A running RC QP, its path count before the failure ---
args="-d mr0 -n 1000000 -s 1024 -c"
peer_spawn "timeout 400 ibv_rc_pingpong $args -g $pgid" > /dev/null || fail "cannot start the RC server"
sleep 2
# The TCP exchange goes over the management link: plane 0 goes down.
# shellcheck disable=SC2086 # $args: options, split on purpose
timeout 400 ibv_rc_pingpong $args -g "$gid" "$METAROCE_PEER_ADDR" > /tmp/pdd_rc.out 2>&1 &
client=$!
qpn=$(rc_pingpong_qpn) ||
	fail "the RC ping-pong QP never reached RTS: $(cat /tmp/pdd_rc.out)"
# Both planes in use (the PLANES exchange done) and every path active.
for _ in $(seq 30); do
	read -r paths0 active0 planes0 <<< "$(qp_details "$qpn")"
	[ "$active0" = "$paths0" ] && [[ ",$planes0," == *,1,* ]] && break
	sleep 0.5
done
log "QP $qpn before the failure: $paths0 paths, $active0 active, planes by slot $planes0"
[ "$active0" = "$paths0" ] || fail "QP $qpn: only $active0 of $paths0 paths active before the failure"
[[ ",$planes0," == *,0,* && ",$planes0," == *,1,* ]] || fail "QP $qpn does not use both planes: $planes0"

# --- Plane 0 down on both hosts (carrier loss) ---
# The checks below took 101 s on the rig (2026-12-04): half as much again.
window=$((160 * ${METAROCE_TIMEOUT_SCALE:-1}))
req="{\"duration_s\": $window, \"interval_s\": 1, \"events\": [{\"at_s\": 1, \"plane\": 0, \"up\": false}, {\"at_s\": $((window - 2)), \"plane\": 0, \"up\": true}]}"
host_ctl plane0-down "$req" $((window + 60)) > /tmp/pdd_hostctl.out 2>&1 &
hostctl_job=$!
carrier() { cat "/sys/class/net/$PLANE0_DEV/carrier" 2> /dev/null; }
for _ in $(seq 100); do
	[ "$(carrier)" = 0 ] && break
	sleep 0.2
done
[ "$(carrier)" = 0 ] || fail "plane 0 ($PLANE0_DEV) kept its carrier: $(cat /tmp/pdd_hostctl.out)"
down_t=$(date +%s)
log "plane 0 ($PLANE0_DEV) has no carrier on host A (host B: carrier $(peer 'cat /sys/class/net/$PLANE0_DEV/carrier'))"

# --- Path slots re-homed: the active path count stays ---
sleep 2
for i in 1 2 3; do
	read -r paths active planes <<< "$(qp_details "$qpn")"
	log "QP $qpn with plane 0 down ($i): $paths paths, $active active, planes by slot $planes"
	[ "$paths" = "$paths0" ] && [ "$active" = "$active0" ] ||
		fail "QP $qpn: $active of $paths paths active with plane 0 down, $active0 of $paths0 before"
	[[ ",$planes," != *,0,* ]] || fail "QP $qpn still has a path on plane 0 while it is down: $planes"
	sleep 1
done
kill -0 "$client" 2> /dev/null || fail "the RC ping-pong ended with plane 0 down: $(tail -3 /tmp/pdd_rc.out)"
log "ok: QP $qpn kept $active0 active paths, all on plane 1, with plane 0 down"

# --- UD with plane 0 down ---
s0=$(mr0_stats)
ud_job=$(peer_spawn "timeout 60 ibv_ud_pingpong -d mr0 -n 200 -s 512 -c -g $pgid") || fail "cannot start the UD server"
out=""
for _ in $(seq 10); do
	sleep 1
	out=$(timeout 60 ibv_ud_pingpong -d mr0 -n 200 -s 512 -c -g "$gid" "$METAROCE_PEER_ADDR" 2>&1) && break
done
log "$out"
grep -q "iters in" <<< "$out" || { mr0_counters; fail "ibv_ud_pingpong did not complete with plane 0 down"; }
peer_wait "$ud_job" 70 > /dev/null || fail "the ibv_ud_pingpong server failed with plane 0 down"
s1=$(mr0_stats)
ud=$(($(stat_of ud_tx_packets "$s1") - $(stat_of ud_tx_packets "$s0")))
p0=$(($(stat_of plane0_tx_packets "$s1") - $(stat_of plane0_tx_packets "$s0")))
p1=$(($(stat_of plane1_tx_packets "$s1") - $(stat_of plane1_tx_packets "$s0")))
log "host A during the UD run: $ud datagrams out; plane 0 sent $p0 packets, plane 1 $p1"
[ "$ud" -ge 200 ] || fail "host A sent $ud datagrams for 200 round trips"
[ "$p1" -ge "$ud" ] || fail "plane 1 sent $p1 packets, fewer than the $ud datagrams"
# Nothing leaves a plane without carrier: the datagrams (and the RC QP's
# packets, its slots re-homed) all went on plane 1.
[ "$p0" = 0 ] || fail "host A sent $p0 packets on plane 0 while it had no carrier"
log "ok: ibv_ud_pingpong --chk: 200 x 512 B with plane 0 down"

# --- rdma_cm (rping) with plane 0 down ---
rping_job=$(peer_spawn "timeout 90 rping -s -V -C 10 -a $PEER_PLANE0_IP -p 18951 2>&1") ||
	fail "cannot start the rping server"
sleep 3
timeout 90 stdbuf -oL rping -c -v -V -C 10 -a "$PEER_PLANE0_IP" -p 18951 > /tmp/pdd_rping.out 2> /tmp/pdd_rping.err
rc=$?
rping_exit_ok $rc "$(cat /tmp/pdd_rping.err)" || {
	mr0_counters
	log "rping server: $(peer_wait "$rping_job" 30 2>&1 | tail -5)"
	fail "rping with plane 0 down failed ($rc): $(tail -5 /tmp/pdd_rping.err)"
}
server=$(peer_wait "$rping_job" 100) || fail "the rping server failed with plane 0 down: $(tail -5 <<< "$server")"
pings=$(rping_pings /tmp/pdd_rping.out)
[ "$pings" = "10 10" ] || fail "rping with plane 0 down: $pings (lines, in order), want 10 10"
log "ok: rping -V: connection set up and 10 validated pings with plane 0 down"
[ "$(carrier)" = 0 ] || fail "plane 0 came back before the checks ended ($(($(date +%s) - down_t)) s): make the window longer"

# --- Recovery: the slots go home, plane 0 carries traffic again ---
wait "$hostctl_job" || fail "the host agent's request failed: $(cat /tmp/pdd_hostctl.out)"
hostctl_job=""
for _ in $(seq 50); do
	[ "$(carrier)" = 1 ] && break
	sleep 0.2
done
[ "$(carrier)" = 1 ] || fail "plane 0 has no carrier after the window"
sleep 3
r0=$(mr0_stats)
sleep 3
r1=$(mr0_stats)
read -r paths active planes <<< "$(qp_details "$qpn")"
p0=$(($(stat_of plane0_tx_packets "$r1") - $(stat_of plane0_tx_packets "$r0")))
p1=$(($(stat_of plane1_tx_packets "$r1") - $(stat_of plane1_tx_packets "$r0")))
log "QP $qpn after recovery: $paths paths, $active active, planes by slot $planes; host A sent $p0 packets on plane 0, $p1 on plane 1 in 3 s"
[ "$planes" = "$planes0" ] || fail "QP $qpn's slots did not go home: planes by slot $planes, $planes0 before"
[ "$active" = "$active0" ] || fail "QP $qpn: $active of $paths paths active after recovery, $active0 before"
[ "$p0" -gt 50 ] || fail "plane 0 carried $p0 packets in 3 s after recovery"
kill -0 "$client" 2> /dev/null || fail "the RC ping-pong ended: $(tail -3 /tmp/pdd_rc.out)"
log "ok: plane 0 carries QP $qpn's traffic again"
kill "$client" 2> /dev/null
wait "$client" 2> /dev/null
client=""
