#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The tracepoints (metaroce:*) and the per-plane counters of `rdma
# statistic` (Documentation/user-guide.md, "Tracing").
# 1. A clean ib_write_bw over mr0 on two planes: the per-plane counters
#    sum to the device totals, both planes carried traffic, and the
#    plane 0 / plane 1 split is logged with the paths' state mid-run (the
#    plane imbalance of Documentation/benchmarks/report.md).
# 2. With the metaroce events enabled (tracefs), a run with 3% loss and
#    then 30 ms of delay on host A's plane 0, plane 1 taken down for 4 s and
#    brought back: retransmit, window_decrease and path_failed (plane_down,
#    plane 1) events appear with sane fields; the per-plane counters still
#    sum to the totals.
. "$(dirname "$0")/lib.sh"
T=/sys/kernel/tracing
cleanup() {
	[ -w "$T/events/metaroce/enable" ] && echo 0 > "$T/events/metaroce/enable"
	tc qdisc del dev "$PLANE0_DEV" root 2> /dev/null
	planes_cleanup
}
trap cleanup EXIT
reset_rdma
[ -n "${PLANE1_DEV:-}" ] || skip "the rig has a single plane"
command -v ib_write_bw > /dev/null || skip "perftest not installed"

expect_ok modprobe metaroce
mr0_on_both_planes

# --- The events are registered, in tracefs ---
[ -d "$T/events" ] || mount -t tracefs nodev "$T" 2> /dev/null
[ -d "$T/events" ] || skip "no tracefs at $T (CONFIG_TRACING off?)"
events="path_failed path_recovered path_replaced retransmit window_decrease nak give_up"
for e in $events; do
	[ -f "$T/events/metaroce/$e/format" ] || fail "metaroce:$e not in $T/events"
done
grep -q "field:u32 qpn" "$T/events/metaroce/retransmit/format" ||
	fail "metaroce:retransmit has no qpn field: $(cat "$T/events/metaroce/retransmit/format")"
log "ok: metaroce:{${events// /,}} registered"
if command -v perf > /dev/null; then
	log "perf list: $(perf list 'metaroce:*' 2> /dev/null | grep -c 'metaroce:') metaroce events"
fi

# plane_sums SNAPSHOT: each per-plane counter summed over the planes must
# equal its device total, read in the same snapshot (taken with no traffic).
plane_sums() {
	local c total sum k v
	for c in tx_packets tx_bytes rx_packets rx_bytes retransmissions; do
		total=$(stat_of "$c" "$1") || fail "no $c counter"
		sum=0
		for k in 0 1 2 3 4 5 6 7; do
			v=$(stat_of "plane${k}_$c" "$1") || fail "no plane${k}_$c counter"
			sum=$((sum + v))
		done
		[ "$sum" = "$total" ] || fail "plane counters: sum of plane*_$c is $sum, $c is $total"
	done
	log "ok: per-plane tx/rx packets, bytes and retransmissions sum to the device's"
}

# write_bw SECS LABEL: ib_write_bw for SECS seconds (64 KiB, one QP), B the
# server, A the client, over the plane 0 GIDs. $res is the client's line.
write_bw() {
	local job
	job=$(peer_spawn "timeout $(($1 + 60)) ib_write_bw -d mr0 -x $pgid -p 18811 -D $1 -s 65536") ||
		fail "cannot start ib_write_bw on B"
	sleep 3
	timeout $(($1 + 60)) ib_write_bw -d mr0 -x "$gid" -p 18811 -D "$1" -s 65536 \
		"$METAROCE_PEER_ADDR" > /tmp/tracing_bw.out 2>&1 &
	bw_client=$!
	bw_job=$job
	log "$2: ib_write_bw -D $1 started"
}
write_bw_end() {
	wait "$bw_client" || fail "ib_write_bw failed on host A: $(tail -3 /tmp/tracing_bw.out)"
	peer_wait "$bw_job" 120 > /dev/null || fail "ib_write_bw failed on host B"
	res=$(awk '$1 == 65536 { print; exit }' /tmp/tracing_bw.out)
	log "ok: ib_write_bw: $res"
}

# --- 1. Clean run: the split between the planes ---
s0=$(mr0_stats)
write_bw 10 "clean run"
sleep 6
# The QP's paths halfway through (rdma resource show qp -dd).
paths=$(rdma -dd resource show qp link mr0/1 2>&1 | grep -E 'type RC|p[0-9]+_')
log "paths mid-run: $paths"
write_bw_end
s1=$(mr0_stats)
plane_sums "$s1"
d0=$(($(stat_of plane0_tx_bytes "$s1") - $(stat_of plane0_tx_bytes "$s0")))
d1=$(($(stat_of plane1_tx_bytes "$s1") - $(stat_of plane1_tx_bytes "$s0")))
p0=$(($(stat_of plane0_tx_packets "$s1") - $(stat_of plane0_tx_packets "$s0")))
p1=$(($(stat_of plane1_tx_packets "$s1") - $(stat_of plane1_tx_packets "$s0")))
[ "$p0" -gt 100 ] && [ "$p1" -gt 100 ] || fail "clean run: not both planes carried traffic (plane 0: $p0 packets, plane 1: $p1)"
log "plane split, clean 2-plane run, host A: plane 0 $d0 B in $p0 packets, plane 1 $d1 B in $p1 packets (plane1/plane0 bytes = $(awk -v a="$d1" -v b="$d0" 'BEGIN { printf "%.2f", b ? a / b : 0 }'))"

# --- 2. Loss, delay and a plane down, traced ---
echo 0 > "$T/tracing_on"
echo > "$T/trace"
echo 4096 > "$T/buffer_size_kb" 2> /dev/null || true
echo 1 > "$T/events/metaroce/enable" || fail "cannot enable the metaroce events"
echo 1 > "$T/tracing_on"
expect_ok tc qdisc add dev "$PLANE0_DEV" root netem loss 3%
write_bw 20 "traced run"
sleep 5
expect_ok tc qdisc change dev "$PLANE0_DEV" root netem loss 3% delay 30ms
sleep 3
expect_ok ip link set "$PLANE1_DEV" down
sleep 4
expect_ok ip link set "$PLANE1_DEV" up
sleep 3
expect_ok tc qdisc del dev "$PLANE0_DEV" root
write_bw_end
sleep 1
echo 0 > "$T/events/metaroce/enable"
cp "$T/trace" /tmp/tracing_trace.txt
for e in $events; do
	log "metaroce:$e: $(grep -c " $e: " /tmp/tracing_trace.txt) events"
done
grep -m 3 -E ' (path_failed|window_decrease|retransmit): ' /tmp/tracing_trace.txt | sed 's/^/  /'

# Sane fields: the device, a QP number, a plane of the device's two.
sane='dev=mr0 qpn=[1-9][0-9]* .*plane=[01] '
n=$(grep -cE " retransmit: ${sane}psn=[0-9]+ msn=[0-9]+ offset=[0-9]+ cause=(sack|timeout|plane_down|verdict)$" /tmp/tracing_trace.txt)
[ "$n" -gt 0 ] || fail "no metaroce:retransmit event with sane fields"
n=$(awk '/ window_decrease: dev=mr0 qpn=[1-9]/ && match($0, /cwnd=[0-9]+->[0-9]+/) {
	split(substr($0, RSTART + 5, RLENGTH - 5), w, "->"); if (w[2] + 0 < w[1] + 0) n++ } END { print n + 0 }' /tmp/tracing_trace.txt)
[ "$n" -gt 0 ] || fail "no metaroce:window_decrease event with a smaller new window"
# A path's source port is in 0xC000..0xFFFF (protocol.md 1.2).
n=$(awk 'match($0, / path_failed: dev=mr0 qpn=[1-9][0-9]* path=[0-9]+ plane=1 sport=[0-9]+ cause=plane_down$/) &&
	match($0, /sport=[0-9]+/) { p = substr($0, RSTART + 6, RLENGTH - 6) + 0; if (p >= 49152 && p <= 65535) n++ }
	END { print n + 0 }' /tmp/tracing_trace.txt)
[ "$n" -gt 0 ] || fail "no metaroce:path_failed event for plane 1 going down"
log "ok: retransmit, window_decrease and path_failed (plane_down, plane 1) traced with sane fields"
grep -qE ' path_recovered: dev=mr0 .*plane=1 ' /tmp/tracing_trace.txt ||
	log "note: no path_recovered event on plane 1 after it came back"
plane_sums "$(mr0_stats)"
log "$(rdma statistic show link mr0/1)"
