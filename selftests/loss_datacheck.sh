#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The data-checking tests beyond ibv_rc_pingpong (planes.sh) under loss and
# plane failure, over one MetaRoCE device on two planes on hosts A and B:
#  - rping -V (rdma_cm: the CM's MADs as GSI datagrams, then RC QPs with
#    READ and WRITE, ping data validated) and ibv_uc_pingpong --chk (UC),
#    each with 1% netem loss on every plane of both hosts, then each in a
#    longer run during which host A's plane 1 link goes down and comes back
#    up: the run completes (no QP error) and plane 1 carries traffic again;
#  - ibv_ud_pingpong --chk (UD) through the same plane 1 down/up: datagrams
#    use plane 0 only (protocol.md 5) and are not retransmitted, so the run
#    is unaffected. There is no UD loss run: a lost datagram is gone on any
#    transport (UD's contract), and ibv_ud_pingpong, which never resends,
#    then waits forever, so loss cannot be a pass/fail data check for UD.
. "$(dirname "$0")/lib.sh"
trap planes_cleanup EXIT
reset_rdma
[ -n "${PLANE1_DEV:-}" ] || skip "the rig has a single plane"
command -v ibv_uc_pingpong > /dev/null || skip "ibverbs-utils not installed"
command -v rping > /dev/null || skip "rdmacm-utils not installed"

mr0_on_both_planes

plane1_sent() { cat "/sys/class/net/$PLANE1_DEV/statistics/tx_packets"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# rping_start COUNT: rping -V, server on B, client on A in the background
# ($client); rping_check COUNT LABEL waits for both and checks the pings
# (client run time in $client_ms).
# The client's stdout (one line per validated ping), line-buffered, and
# its stderr go to separate files (lib.sh rping_pings: in one file a stderr
# line split a ping line, and a run of 1034 good pings read 1033); stderr,
# unbuffered, is what a failure shows.
# The server learns that a run ended only from the client's DREQ
# (rdma_disconnect). rping's client destroys its CM ID right after
# rdma_disconnect, and the kernel's CM cancels a DREQ it has not had
# answered when its ID goes (cm.c, cm_destroy_id in DREQ_SENT): a DREQ that
# netem drops (1% of runs under 1% loss) is never sent again, and the
# server waits for a next ping forever, printing nothing. rping_check tells
# that case from a stuck server by the CM's own counters: the DREQ host A
# sent that host B never received. The server's PID (that of the timeout
# wrapping it) is kept to end it then.
port=18900
srv_pid=/tmp/ldc_rping_srv.pid
# cm_count COUNTER [peer]: host A's (host B's) CM counter on mr0 port 1
# (e.g. cm_rx_msgs/dreq), 0 if unreadable.
cm_count() {
	local f=/sys/class/infiniband/mr0/ports/1/$1 n
	if [ "${2:-}" = peer ]; then n=$(peer "cat $f" 2> /dev/null); else n=$(cat "$f" 2> /dev/null); fi
	echo "${n:-0}"
}
rping_start() { # count
	port=$((port + 1))
	dreq_a0=$(cm_count cm_tx_msgs/dreq)
	dreq_b0=$(cm_count cm_rx_msgs/dreq peer)
	rping_job=$(peer_spawn "echo \$\$ > $srv_pid; exec timeout 200 rping -s -V -C $1 -a $PEER_PLANE0_IP -p $port 2>&1") ||
		fail "cannot start the rping server"
	sleep 3
	client_t0=$(now_ms)
	timeout 200 stdbuf -oL rping -c -v -V -C "$1" -a "$PEER_PLANE0_IP" -p "$port" > /tmp/ldc_rping.out 2> /tmp/ldc_rping.err &
	client=$!
}
# rping_failed LABEL WHAT: the failure, with what both ends saw: the
# client's whole stderr and run time, the server's output, the counters
# and QP states of both hosts, and each kernel log's last lines.
rping_failed() { # label what
	local srv
	log "rping client ran $(($(now_ms) - client_t0)) ms, showed $(rping_pings /tmp/ldc_rping.out | cut -d' ' -f1) pings; its stderr:"
	cat /tmp/ldc_rping.err
	srv=$(peer_wait "$rping_job" 30 2>&1)
	log "rping server (status $?): $(tail -8 <<< "$srv")"
	mr0_counters
	log "A dmesg: $(dmesg | tail -5)"
	log "B dmesg: $(peer 'dmesg | tail -5')"
	fail "rping $2 ($1)"
}
# rping_server_waits LABEL: the server still runs after the client ended.
# If host A's CM sent a DREQ during the run and host B's received none, the
# DREQ was lost on the way (rping_start): the server is ended, and the run
# stands on the client's pings. Otherwise the server is stuck: a failure.
rping_server_waits() {
	local sent got
	sent=$(($(cm_count cm_tx_msgs/dreq) - dreq_a0))
	got=$(($(cm_count cm_rx_msgs/dreq peer) - dreq_b0))
	peer "kill \$(cat $srv_pid)" > /dev/null 2>&1
	if [ "$sent" -ge 1 ] && [ "$got" = 0 ]; then
		peer_wait "$rping_job" 30 > /dev/null
		log "rping server ($1): host A's CM sent $sent DREQ, host B's received none: the client's DREQ was lost, and rping's client had destroyed its CM ID (no resend); server ended here"
		return
	fi
	cm_state
	rping_failed "$1" "server still waiting 20 s after the client ended (host A's CM sent $sent DREQ, host B's received $got)"
}
rping_check() { # count label
	wait $client
	rc=$?
	rping_exit_ok $rc "$(cat /tmp/ldc_rping.err)" ||
		rping_failed "$2" "client failed ($rc): $(tail -5 /tmp/ldc_rping.err)"
	[ $rc = 0 ] || log "rping client: status $rc from rping's own exit race (lib.sh rping_exit_ok)"
	client_ms=$(($(now_ms) - client_t0))
	# The client validates the data. The server's loop may wait for one
	# more ping after the last and see the client's disconnect instead
	# (rping prints "wait for RDMA_READ_ADV state 10", DISCONNECTED, and
	# exits non-zero): the normal end of a run, not a failure. It ends
	# within moments of the client; one still waiting after 20 s either
	# never got the client's DREQ (rping_start) or is stuck.
	server=$(peer_poll "$rping_job" $((20 * ${METAROCE_TIMEOUT_SCALE:-1})))
	rc=$?
	if [ $rc = 124 ] && [ "$server" = "peer: job $rping_job still running" ]; then
		rping_server_waits "$2"
	else
		[ $rc = 0 ] || grep -qx "wait for RDMA_READ_ADV state 10" <<< "$server" ||
			rping_failed "$2" "server failed ($rc): $(tail -5 <<< "$server")"
	fi
	# The client's exit status does not say all pings were done: it also
	# exits 0 when a disconnect stops it early. COUNT "ping data" lines,
	# numbered in order, are COUNT validated pings (lib.sh rping_pings).
	pings=$(rping_pings /tmp/ldc_rping.out)
	[ "$pings" = "$1 $1" ] ||
		rping_failed "$2" "client shows ${pings% *} validated pings (${pings#* } numbered in order), want $1"
	grep -q "mismatch" /tmp/ldc_rping.err && fail "rping data mismatch ($2)"
	log "ok: rping -V: $1 pings, data validated, $2"
}

# uc_start ITERS: ibv_uc_pingpong --chk, 16 KiB messages, server on B.
uc_start() {
	uc_job=$(peer_spawn "timeout 200 ibv_uc_pingpong -d mr0 -n $1 -s 16384 -c -g $pgid") || fail "cannot start the UC server"
	sleep 2
	client_t0=$(now_ms)
	timeout 200 ibv_uc_pingpong -d mr0 -n "$1" -s 16384 -c -g "$gid" "$PEER_PLANE0_IP" > /tmp/ldc_uc.out 2>&1 &
	client=$!
}
uc_check() { # iters label
	wait $client || fail "ibv_uc_pingpong client failed ($2): $(tail -5 /tmp/ldc_uc.out)"
	client_ms=$(($(now_ms) - client_t0))
	grep -q "iters in" /tmp/ldc_uc.out || fail "ibv_uc_pingpong client did not complete ($2)"
	peer_wait "$uc_job" 220 > /dev/null || fail "ibv_uc_pingpong server failed ($2)"
	log "ok: ibv_uc_pingpong --chk: $1 x 16384 B, data checked, $2"
}

# ud_start ITERS / ud_check ITERS LABEL: ibv_ud_pingpong --chk, 512 B.
ud_start() {
	ud_job=$(peer_spawn "timeout 200 ibv_ud_pingpong -d mr0 -n $1 -s 512 -c -g $pgid") || fail "cannot start the UD server"
	sleep 2
	client_t0=$(now_ms)
	timeout 200 ibv_ud_pingpong -d mr0 -n "$1" -s 512 -c -g "$gid" "$PEER_PLANE0_IP" > /tmp/ldc_ud.out 2>&1 &
	client=$!
}
ud_check() {
	wait $client || fail "ibv_ud_pingpong client failed ($2): $(tail -5 /tmp/ldc_ud.out)"
	client_ms=$(($(now_ms) - client_t0))
	grep -q "iters in" /tmp/ldc_ud.out || fail "ibv_ud_pingpong client did not complete ($2)"
	peer_wait "$ud_job" 220 > /dev/null || fail "ibv_ud_pingpong server failed ($2)"
	log "ok: ibv_ud_pingpong --chk: $1 x 512 B datagrams, data checked, $2"
}

# flap_failed NAME OUTPUT WHAT: a run ended during the flap; what both
# hosts saw (for rping the server's output too: its QP's error, if any, is
# what made the client's CM see a disconnect).
flap_failed() {
	[ "$1" = rping ] && rping_failed "plane 1 down and up mid-run" "$3: $(tail -3 "$2")"
	log "$1 output: $(tail -5 "$2")"
	mr0_counters
	log "A dmesg: $(dmesg | tail -5)"
	log "B dmesg: $(peer 'dmesg | tail -5')"
	fail "$1: $3"
}
# flap_plane1 NAME OUTPUT [uses-plane1]: host A's plane 1 link goes down
# and up while the client $client (writing OUTPUT, shown if it ended: for
# rping its stderr) runs; it must still be running throughout, and (for a
# QP spraying over both planes) plane 1 must carry traffic again.
flap_plane1() {
	sleep 3
	kill -0 $client 2> /dev/null || flap_failed "$1" "$2" "the run ended before plane 1 went down"
	expect_ok ip link set "$PLANE1_DEV" down
	sleep 3
	kill -0 $client 2> /dev/null || flap_failed "$1" "$2" "the run ended while plane 1 was down"
	expect_ok ip link set "$PLANE1_DEV" up
	s1=$(plane1_sent)
	sleep 4
	s2=$(plane1_sent)
	log "$1: host A plane 1 sent +$((s2 - s1)) packets in the 4 s after link up"
	if [ -n "${3:-}" ]; then
		[ $((s2 - s1)) -gt 50 ] || fail "$1: traffic did not return to plane 1 after link up"
	fi
}

# --- Lossless runs: the speed of each, to size the long runs below ---
rping_start 100
rping_check 100 "lossless, two planes"
rping_ms=$((client_ms / 100))
# iter_ms FILE: ms per iteration from a pingpong's own "usec/iter" line
# (rounded down, at least 1), else the client's run time per iteration.
# The run time includes the start and the connection exchange: a 100
# iteration UD run read 15 ms/round trip where the long run then did 3, and
# ended before plane 1 came back up.
iter_ms() {
	local us
	us=$(sed -n 's/.* = \([0-9]*\)\.[0-9]* usec\/iter.*/\1/p' "$1" | tail -1)
	[ -n "$us" ] && { echo $((us / 1000 > 0 ? us / 1000 : 1)); return; }
	echo $((client_ms / 100))
}
uc_start 100
uc_check 100 "lossless, two planes"
uc_ms=$(iter_ms /tmp/ldc_uc.out)
ud_start 100
ud_check 100 "lossless"
ud_ms=$(iter_ms /tmp/ldc_ud.out)
log "rping ~${rping_ms} ms/ping (client run time), ibv_uc_pingpong ~${uc_ms} ms, ibv_ud_pingpong ~${ud_ms} ms/round trip (their usec/iter)"

# --- 1% loss on every plane, both hosts ---
for d in PLANE0_DEV PLANE1_DEV; do
	expect_ok tc qdisc add dev "${!d}" root netem loss 1%
	peer "tc qdisc add dev \$$d root netem loss 1%" || fail "netem on host B"
done
retx0=$(mr0_stat retransmissions)
# METAROCE_REPEAT=N repeats the lossy rping run and the rping run through
# plane 1's flap N times each (a soak for rare failures: run it alone, with
# METAROCE_TIMEOUT_SCALE to match).
for rep in $(seq "${METAROCE_REPEAT:-1}"); do
	rping_start 100
	rping_check 100 "1% loss on both planes, run $rep"
done
uc_start 200
uc_check 200 "1% loss on both planes"
for d in PLANE0_DEV PLANE1_DEV; do
	n=$(tc -s qdisc show dev "${!d}" | sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -1)
	log "netem dropped ${n:-0} packets leaving host A on ${!d}"
	[ "${n:-0}" -gt 0 ] || fail "netem dropped nothing on ${!d}: the loss run proves nothing"
	expect_ok tc qdisc del dev "${!d}" root
	peer "tc qdisc del dev \$$d root" || fail "removing netem on host B"
done
retx=$(($(mr0_stat retransmissions) - retx0))
[ "$retx" -gt 0 ] || fail "no retransmissions under loss"
log "ok: host A retransmitted $retx packets under loss"

# --- Plane 1 down and up in the middle of each run ---
# Runs of about 30 s at the lossless speed (the flap takes ~10 s).
iters_for() { # ms-per-iteration
	local n=$((30000 / ($1 > 0 ? $1 : 1)))
	[ $n -lt 300 ] && n=300
	[ $n -gt 20000 ] && n=20000
	echo $n
}
n=$(iters_for "$rping_ms")
for rep in $(seq "${METAROCE_REPEAT:-1}"); do
	rping_start "$n"
	flap_plane1 "rping" /tmp/ldc_rping.err uses-plane1
	rping_check "$n" "plane 1 down and up mid-run, run $rep"
done

n=$(iters_for "$uc_ms")
uc_start "$n"
flap_plane1 "ibv_uc_pingpong" /tmp/ldc_uc.out uses-plane1
uc_check "$n" "plane 1 down and up mid-run"

n=$(iters_for "$ud_ms")
ud0=$(mr0_stat ud_tx_packets)
ud_start "$n"
flap_plane1 "ibv_ud_pingpong" /tmp/ldc_ud.out
ud_check "$n" "plane 1 down and up mid-run"
log "ok: host A sent $(($(mr0_stat ud_tx_packets) - ud0)) datagrams in that run"
[ "$(mr0_stat rx_malformed)" = 0 ] || fail "$(mr0_stat rx_malformed) malformed packets"
log "$(rdma statistic show link mr0/1)"
