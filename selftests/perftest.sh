#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Debian's unmodified perftest over MetaRoCE between host A and host B:
# bandwidth and latency of WRITE, READ and SEND, with the legacy post_send
# API and with the default ibv_wr_* API, and 8 QPs; in the full suite
# (suite_full) also sizes from 2 B to 4 MiB. Each run must complete
# on both sides and report a result; the numbers are logged (TCG VMs: for
# ratios against rxe see make bench, not absolute speed).
. "$(dirname "$0")/lib.sh"
trap two_host_cleanup EXIT
reset_rdma
command -v ib_write_bw > /dev/null || skip "perftest not installed"

mr0_on_both_hosts

port=18700
run() { # test args...
	local t=$1 secs=60
	shift
	port=$((port + 1))
	# 8 QPs in one TCG guest: timeouts that fire on scheduling gaps, path
	# replacements (issue #11's work) make such a run take minutes, not
	# seconds; what is checked is that every QP completes its work.
	case " $* " in *" -q "*) secs=240 ;; esac
	perftest_pair $secs "-d mr0 -x $pgid -p $port" "-d mr0 -x $gid -p $port" "$METAROCE_PEER_ADDR" "$t" "$@"
	# Bandwidth tests: some iterations completed, and bytes moved (the
	# average column, MB/s, is 0.00 below ~10 kB/s: only sizes >= 4 KiB;
	# and not for timed runs, whose clock in a TCG guest sometimes fails
	# and prints 0.00 MB/s next to the iterations it counted).
	case $t in *_bw)
		awk '{ exit !($2 > 0) }' <<< "$res" || fail "$t $*: no iterations completed: $res"
		case " $* " in *" -D "*) ;; *)
			[ "$(awk '{ print $1 }' <<< "$res")" -lt 4096 ] || awk '{ exit !($4 > 0) }' <<< "$res" ||
				fail "$t $*: no bandwidth: $res"
		esac
	esac
	log "ok: $t $*: $res"
}
# The legacy post_send API; 4 MiB goes as four engine messages of 1 MiB,
# the most one carries (1024 packets at a 1024-byte MTU).
run ib_write_bw -n 200 -s 65536 --use_old_post_send
run ib_write_bw -n 5 -s 4194304 --use_old_post_send
run ib_send_bw -n 200 -s 4096 --use_old_post_send
run ib_read_bw -n 100 -s 65536 --use_old_post_send
run ib_write_lat -n 200 -s 2 --use_old_post_send
run ib_send_lat -n 200 -s 2 --use_old_post_send
run ib_read_lat -n 100 -s 2 --use_old_post_send
# The ibv_wr_* API (perftest's default): the six tests once each.
run ib_write_lat -n 200 -s 2
run ib_read_lat -n 100 -s 2
run ib_send_lat -n 200 -s 2
for t in ib_write_bw ib_read_bw ib_send_bw; do
	run "$t" -n 20 -s 65536
done
# Many QPs per test (see below).
run ib_write_bw -q 8 -n 50 -s 65536

if suite_full; then
	# Latency 4 KiB and 1 MiB; message sizes from 2 B to 1 MiB (1024
	# packets at a 1024-byte MTU: the most one engine message carries), and
	# 4 MiB (carried as 4 messages). TCG moves ~4 MB/s: fewer iterations
	# for bigger messages (perftest wants 5+).
	for t in ib_write_lat ib_read_lat ib_send_lat; do
		run "$t" -n 50 -s 4096
		run "$t" -n 5 -s 1048576
	done
	for t in ib_write_bw ib_read_bw ib_send_bw; do
		for s in 2 4096 1048576 4194304; do
			n=$((s >= 1048576 ? 5 : 100))
			run "$t" -n "$n" -s "$s"
		done
	done
	# Many QPs per test, by iterations and (as make bench runs it) by
	# time. By time, perftest counts only signaled completions (one per
	# 100 WRs by default): 8 QPs sharing ~4 MB/s would show none in the
	# window, so every WR is signaled (-Q 1). Its clock starts before it
	# posts 8 x 128 WRs, and it polls only after posting them, one system
	# call (a doorbell that also sends) per WR; in a starved TCG VM the 2 s
	# window of -D 4 -f 1 saw no completion (once, with a benchmark
	# running alongside), and so did the 4 s window of -D 8 -f 2 once,
	# after this script's other runs (standalone it counted 96 to 192
	# iterations): -D 12 -f 4 measures 4 s after a 4 s start.
	run ib_read_bw -q 8 -n 50 -s 65536
	run ib_send_bw -q 8 -n 50 -s 65536
	run ib_write_bw -q 8 -n 50 -s 65536 --use_old_post_send
	run ib_write_bw -q 8 -D 12 -f 4 -Q 1 -s 65536
else
	log "info: latency at 4 KiB and 1 MiB, bandwidth from 2 B to 4 MiB, 8 QPs on every test and a timed run: make test-full"
fi
# What the send rings' doorbell flag saved and how often a QP waited for
# the network stack (design.md: "Doorbell suppression", "Transmit
# backpressure"): informational, host A since the device came up.
log "info: doorbells $(mr0_stat doorbells || true)," \
	"posts_without_doorbell $(mr0_stat posts_without_doorbell || true)," \
	"tx_inflight_waits $(mr0_stat tx_inflight_waits || true)," \
	"retransmissions $(mr0_stat retransmissions || true)"
