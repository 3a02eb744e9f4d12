#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rdma_cm over MetaRoCE between host A and host B: the connection manager's
# MADs travel as GSI datagrams (QP1, UD_SEND) between the two devices, then
# the RC QPs it connected carry the data. Debian's unmodified perftest with
# -R (ib_send_bw, ib_write_bw, ib_write_lat) and rping -V (RDMA READ and
# WRITE, ping data validated) must complete on both sides; the device
# counters of both hosts must show the CM's datagrams sent and received.
. "$(dirname "$0")/lib.sh"
trap 'reset_rdma; peer "rdma link delete mr0; rmmod metaroce" > /dev/null 2>&1' EXIT
reset_rdma
command -v ib_send_bw > /dev/null || skip "perftest not installed"
command -v rping > /dev/null || skip "rdmacm-utils not installed"

mr0_on_both_hosts

# stat NAME [peer]: the value of counter NAME of mr0/1 on host A (or B).
stat() {
	local cmd="rdma statistic show link mr0/1"
	[ -n "${2:-}" ] && cmd="peer $cmd"
	$cmd | tr -s ' ' '\n' | awk -v n="$1" 'p { print; exit } $0 == n { p = 1 }'
}
ud_a0=$(stat ud_rx_packets) ud_b0=$(stat ud_rx_packets peer)

port=18800
run() { # test args...
	local t=$1
	shift
	port=$((port + 1))
	perftest_pair 90 "-R -p $port" "-R -p $port" "$PEER_PLANE0_IP" "$t" "$@"
	log "ok: $t -R $*: $res"
}
run ib_send_bw -n 200 -s 4096
run ib_write_bw -n 200 -s 65536
run ib_write_lat -n 200 -s 2

count=20
job=$(peer_spawn "timeout 90 rping -s -v -V -C $count -a $PEER_PLANE0_IP -p 18899") || fail "cannot start the rping server"
sleep 3
out=$(timeout 90 rping -c -v -V -C $count -a "$PEER_PLANE0_IP" -p 18899 2>&1)
rc=$?
log "$(tail -3 <<< "$out")"
[ $rc = 0 ] || fail "rping client failed ($rc): $(tail -5 <<< "$out")"
server=$(peer_wait "$job" 110) || fail "rping server failed: $(tail -5 <<< "$server")"
pings=$(grep -c "^ping data: rdma-ping-" <<< "$out")
[ "$pings" = "$count" ] || fail "rping client shows $pings validated pings, want $count"
grep -q "mismatch" <<< "$out$server" && fail "rping data mismatch"
log "ok: rping -V: $count pings, data validated"

# Each connection from A (the active side) to B is at least REQ and RTU
# into B and REP into A, as datagrams to QP1 (then DREQ/DREP).
ud_a=$(($(stat ud_rx_packets) - ud_a0)) ud_b=$(($(stat ud_rx_packets peer) - ud_b0))
log "A: $(rdma statistic show link mr0/1)"
log "B: $(peer rdma statistic show link mr0/1)"
[ "$ud_a" -ge 4 ] || fail "host A received only $ud_a CM datagrams for 4 connections"
[ "$ud_b" -ge 8 ] || fail "host B received only $ud_b CM datagrams for 4 connections"
log "ok: the CM's MADs went over MetaRoCE: $ud_a datagrams received on A, $ud_b on B"
