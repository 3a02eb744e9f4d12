#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A diagnostic, not part of the suite: ib_write_bw 64 KiB over mr0 (2
# planes) PROBE_RUNS times with PROBE_QPS QPs, perftest `-D PROBE_D -f 1`,
# with both hosts' device counters before and after each run: does the
# wire carry data while perftest counts nothing?
#
#   METAROCE_PLANES=4 selftests/rig/run.sh 'bash selftests/bench/qp_probe.sh'
#   (in the rig command: PROBE_QPS=1 PROBE_RUNS=2 bash selftests/bench/qp_probe.sh)
. /run/metaroce/env
. "$METAROCE_REPO/selftests/bench/lib.sh"
csv_init
qps=${PROBE_QPS:-8} runs=${PROBE_RUNS:-4} dur=${PROBE_D:-4}
modprobe metaroce && peer modprobe metaroce || exit 1
mr_up 2 || { echo "qp_probe: MetaRoCE not available: $TP_REASON"; exit 1; }
counters() { # A|B
	local n line=$1
	for n in tx_packets tx_bytes retransmissions sack_losses; do
		line+=" $n $(mr0_stat $n $([ "$1" = B ] && echo peer))"
	done
	echo "$line"
}
for ((r = 1; r <= runs; r++)); do
	a0=$(counters A) b0=$(counters B)
	pt_run ib_write_bw 60 -s 65536 -q "$qps" -D "$dur" -f 1 -Q 1
	echo "=== run $r, $qps QPs: $(awk '$1 == 65536 && NF >= 5 { print $2 " iterations, " $4 " MB/s"; exit }' "$PT_OUT")"
	echo "  before: $a0 | $b0"
	echo "  after:  $(counters A) | $(counters B)"
done
mr_down
