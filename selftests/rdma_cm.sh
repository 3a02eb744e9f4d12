#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rdma_cm over MetaRoCE between host A and host B: the connection manager's
# MADs travel as GSI datagrams (QP1, UD_SEND) between the two devices, then
# the RC QPs it connected carry the data. Debian's unmodified perftest with
# -R (all six bandwidth and latency tests, bandwidth also with 8 QPs; in
# the full suite both post_send APIs on each, 2 B to 1 MiB) and rping -V
# (RDMA READ and WRITE, ping data validated) must complete on both sides;
# the device counters of both hosts must show the CM's datagrams sent and
# received.
. "$(dirname "$0")/lib.sh"
trap two_host_cleanup EXIT
reset_rdma
need_tools ib_send_bw rping

mr0_on_both_hosts

ud_a0=$(mr0_stat ud_rx_packets) ud_b0=$(mr0_stat ud_rx_packets peer)

port=18800
conns=0
run() { # test args...
	local t=$1
	shift
	port=$((port + 1))
	# At least one CM connection per run (one per QP with -q).
	conns=$((conns + 1))
	# 8 QPs: as in perftest.sh, minutes under TCG (issue #11).
	local secs=90
	case " $* " in *" -q "*) secs=240 ;; esac
	perftest_pair $secs "-R -p $port" "-R -p $port" "$PEER_PLANE0_IP" "$t" "$@"
	# Bandwidth tests: iterations completed (see perftest.sh).
	case $t in *_bw)
		awk '{ exit !($2 > 0) }' <<< "$res" || fail "$t -R $*: no iterations completed: $res"
	esac
	log "ok: $t -R $*: $res"
}
# Each test with the default ibv_wr_* API, and the legacy post_send API
# for WRITE; bandwidth also with 8 QPs, each connected by its own CM
# exchange. The full suite (suite_full) adds the legacy API everywhere,
# 2 B and 1 MiB (1024 packets: the largest single engine message at the
# CM's 1024-byte path MTU). TCG moves ~4 MB/s: few iterations for big
# messages.
for t in ib_write_bw ib_read_bw ib_send_bw; do
	run "$t" -n 200 -s 65536
	run "$t" -q 8 -n 20 -s 65536
	if suite_full; then
		run "$t" -n 200 -s 65536 --use_old_post_send
		run "$t" -n 200 -s 2
		run "$t" -n 5 -s 1048576
	fi
done
run ib_write_bw -n 200 -s 65536 --use_old_post_send
for t in ib_write_lat ib_read_lat ib_send_lat; do
	run "$t" -n 100 -s 2
	if suite_full; then
		run "$t" -n 100 -s 2 --use_old_post_send
		run "$t" -n 100 -s 4096
		run "$t" -n 5 -s 1048576
	fi
done
suite_full || log "info: both APIs on every test, 2 B to 1 MiB: make test-full"

# The client's stdout (the ping lines, line-buffered) and stderr apart
# (lib.sh rping_validated). In one pipe, block-buffered, the ping lines
# came at exit, after what the CM thread printed: in rping's exit race
# (lib.sh rping_exit_ok) its EBADF error was then not the last line.
rping_validated 20 "$PEER_PLANE0_IP" "$PEER_PLANE0_IP" 18899 /tmp/rdma_cm_rping
conns=$((conns + 1))

# Each connection from A (the active side) to B is at least REQ and RTU
# into B and REP into A, as datagrams to QP1 (then DREQ/DREP).
ud_a=$(($(mr0_stat ud_rx_packets) - ud_a0)) ud_b=$(($(mr0_stat ud_rx_packets peer) - ud_b0))
log "A: $(rdma statistic show link mr0/1)"
log "B: $(peer rdma statistic show link mr0/1)"
[ "$ud_a" -ge "$conns" ] || fail "host A received only $ud_a CM datagrams for $conns connections"
[ "$ud_b" -ge $((2 * conns)) ] || fail "host B received only $ud_b CM datagrams for $conns connections"
log "ok: the CM's MADs went over MetaRoCE: $ud_a datagrams received on A, $ud_b on B"
