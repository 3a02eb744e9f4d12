#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A diagnostic, not part of the suite: ib_write_bw 64 KiB over mr0 (2
# planes) PROBE_RUNS times with PROBE_QPS QPs, perftest `-D PROBE_D -f
# PROBE_F -Q 1`, with both hosts' device counters before and after each
# run, and host A sampled every 0.5 s while it runs: the client's state,
# user and system time, where it waits, and the CPU's softirq time. Does
# the wire carry data while perftest counts nothing, and who has the CPU?
#
#   METAROCE_PLANES=4 selftests/rig/run.sh 'bash selftests/bench/qp_probe.sh'
#   (in the rig command: PROBE_QPS=1 PROBE_RUNS=2 bash selftests/bench/qp_probe.sh)
. /run/metaroce/env
. "$METAROCE_REPO/selftests/bench/lib.sh"
csv_init
qps=${PROBE_QPS:-8} runs=${PROBE_RUNS:-4} dur=${PROBE_D:-4} margin=${PROBE_F:-1}
modprobe metaroce && peer modprobe metaroce || exit 1
mr_up 2 || { echo "qp_probe: MetaRoCE not available: $TP_REASON"; exit 1; }
counters() { # A|B
	local n line=$1
	for n in tx_packets rx_packets retransmissions sack_losses rto_timeouts rto_spurious rto_losses tx_errors; do
		line+=" $n $(mr0_stat $n $([ "$1" = B ] && echo peer))"
	done
	echo "$line"
}
# Every 0.5 s: the client's state, utime and stime (ticks), wait channel;
# the CPU's softirq and system ticks and host A's sent packets.
sample() {
	local pid t0=$SECONDS
	while sleep 0.5; do
		pid=$(pgrep -n -x ib_write_bw) || continue
		read -r -a s < "/proc/$pid/stat" 2> /dev/null || continue
		read -r -a c < /proc/stat
		echo "  t=$((SECONDS - t0)) client ${s[2]} utime ${s[13]} stime ${s[14]}" \
			"wchan $(cat /proc/$pid/wchan 2> /dev/null) | cpu sys ${c[3]} irq ${c[6]} softirq ${c[7]}" \
			"| tx $(rdma -j statistic show link mr0/1 | grep -o '"tx_packets":[0-9]*')"
	done
}
for ((r = 1; r <= runs; r++)); do
	a0=$(counters A) b0=$(counters B)
	sample > /tmp/qp_probe.samples & sampler=$!
	pt_run ib_write_bw 60 -s 65536 -q "$qps" -D "$dur" -f "$margin" -Q 1
	kill $sampler
	echo "=== run $r, $qps QPs: $(awk '$1 == 65536 && NF >= 5 { print $2 " iterations, " $4 " MB/s"; exit }' "$PT_OUT")"
	echo "  before: $a0 | $b0"
	echo "  after:  $(counters A) | $(counters B)"
	cat /tmp/qp_probe.samples
done
mr_down
