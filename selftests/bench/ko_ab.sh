#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A diagnostic, not part of the suite: two builds of metaroce.ko side by
# side in one rig run, alternated, the same perftest points each (a
# change's effect, where the rig's spread between runs is too wide for
# two separate runs to tell). Each build is loaded on both hosts in turn.
#
#   git worktree add /tmp/old <rev> && make -C /tmp/old      # build A
#   selftests/rig/run.sh 'AB_A=/tmp/old/metaroce.ko AB_B=$METAROCE_REPO/metaroce.ko bash selftests/bench/ko_ab.sh'
#
# AB_REPS (default 2); AB_POINTS, ';'-separated perftest client arguments
# (default: 1 MiB send and write, 64 KiB write, 8 QPs for 12 s);
# AB_A_OPTS, AB_B_OPTS: module parameters each side loads with (the knobs,
# Documentation/user-guide.md 8), so that one build with a knob two ways
# measures a lever that is a knob:
#   selftests/rig/run.sh 'AB_A=$METAROCE_REPO/metaroce.ko AB_B=$METAROCE_REPO/metaroce.ko AB_B_OPTS="min_rto_us=100" bash selftests/bench/ko_ab.sh'
# AB_SNAP=SECONDS: that long into each point, host A's (the client's, the
# sender's of WRITE and SEND) QPs' base RTT, delay floor and paths as "window/SRTT/min
# RTT" (packets, us; rust/driver/qp_details.rs), AB_SNAPS times (default
# 3) a second apart. perftest takes 5-6 s to connect on the TCG rig: a
# snapshot before that finds no QP (7 s suits a -D 4 point).
# Each point's line ends with the frames each host sent on its planes and
# the virtio-net notifications ("kicks") that took them to the device.
# AB_ON_BOTH: bench/lib.sh commands run on both hosts before the points,
# e.g. "tc_jitter 0 2ms 2ms" (the benchmark's reordering point); every
# plane's qdisc is cleared at the end.
. /run/metaroce/env
. "$METAROCE_REPO/selftests/bench/lib.sh"
csv_init
: "${AB_A:?AB_A=path of build A}" "${AB_B:?AB_B=path of build B}"
points=${AB_POINTS:-ib_send_bw -s 1048576 -n 10;ib_write_bw -s 1048576 -n 10;ib_write_bw -s 65536 -n 40;ib_write_bw -s 65536 -q 8 -D 12 -f 4 -Q 1}
# ab_result TOOL SIZE: the point's result from perftest's line for SIZE.
ab_result() {
	case $1 in
	*_lat) awk -v s="$2" '$1 == s && NF >= 9 { print $2 " iterations, median " $5 " us, p99 " $8 " us"; exit }' "$PT_OUT" ;;
	*) awk -v s="$2" '$1 == s && NF >= 5 { print $2 " iterations, " $4 " MB/s"; exit }' "$PT_OUT" ;;
	esac
}
IFS=';' read -r -a tests <<< "$points"
if [ -n "${AB_ON_BOTH:-}" ]; then
	trap 'on_both tc_clear' EXIT
	on_both "$AB_ON_BOTH" || { echo "ko_ab: $AB_ON_BOTH failed"; exit 1; }
	echo "ab: on both hosts: $AB_ON_BOTH"
fi
# snap_paths: one line per QP of host A with paths: "qpn N: W/S/M ...".
snap_paths() {
	rdma -j -dd resource show qp link mr0/1 2> /dev/null | /usr/bin/python3 -c '
import json, sys
for qp in json.load(sys.stdin):
    # iproute2 prints driver attributes with a drv_ prefix.
    d = {k.removeprefix("drv_"): v for k, v in qp.items()}
    slots = sorted(int(k[1:-len("_cwnd")]) for k in d if k.startswith("p") and k.endswith("_cwnd"))
    if slots:
        print("qpn %s: base %s us, delay floor %s us, paths" % (d.get("lqpn"), d.get("base_rtt_us"), d.get("delay_floor_us")), " ".join("%s/%s/%s" % tuple(
            d["p%d_%s" % (k, f)] for f in ("cwnd", "srtt_us", "min_rtt_us")) for k in slots))'
}
# rx_drops: this host's receive-side drops below the transport, as
# "softnet N, PLANEDEV rx_dropped N ...": the backlog's (/proc/net/softnet_stat,
# column 2) and each plane netdev's.
rx_drops() {
	local line d n=0 p dev out
	while read -r line; do
		read -r _ d _ <<< "$line"
		n=$((n + 16#$d))
	done < /proc/net/softnet_stat
	out="softnet $n"
	for ((p = 0; p < METAROCE_PLANES; p++)); do
		dev=PLANE${p}_DEV
		out+=", ${!dev} rx_dropped $(cat "/sys/class/net/${!dev}/statistics/rx_dropped")"
	done
	echo "$out"
}
# tx_kicks: this host's planes' "PACKETS KICKS": frames sent and the times
# virtio-net notified its device of new ones (ethtool -S tx0_kicks; 0 for
# a netdev that does not count them).
tx_kicks() {
	local p dev n=0 k=0
	for ((p = 0; p < METAROCE_PLANES; p++)); do
		dev=PLANE${p}_DEV
		n=$((n + $(cat "/sys/class/net/${!dev}/statistics/tx_packets")))
		k=$((k + $(ethtool -S "${!dev}" 2> /dev/null | awk '$1 == "tx0_kicks:" { print $2; f = 1 } END { if (!f) print 0 }')))
	done
	echo "$n $k"
}
# kicks_since "PACKETS KICKS" (of tx_kicks before): "N packets in M kicks".
kicks_since() {
	local now was
	read -r -a now <<< "$2"
	read -r -a was <<< "$1"
	[ ${#was[@]} -eq 2 ] && [ ${#now[@]} -eq 2 ] || { echo "no count (peer?)"; return; }
	echo "$((now[0] - was[0])) packets in $((now[1] - was[1])) kicks"
}
for ((rep = 1; rep <= ${AB_REPS:-2}; rep++)); do
	for side in A B; do
		ko=AB_$side opts=AB_${side}_OPTS
		ko_load "${!ko}" "${!opts:-}" || { echo "ko_ab: cannot load ${!ko} ${!opts:-}"; exit 1; }
		echo "ab: $side rep $rep = ${!ko}${!opts:+ (${!opts})}"
		mr_up 2 || { echo "ko_ab: $side: $TP_REASON"; continue; }
		for t in "${tests[@]}"; do
			read -r -a args <<< "$t"
			snaps=
			if [ -n "${AB_SNAP:-}" ]; then
				snaps=$(mktemp)
				(sleep "$AB_SNAP"; for ((i = 0; i < ${AB_SNAPS:-3}; i++)); do
					snap_paths | sed "s/^/ab: snap $i: /"; sleep 1; done) > "$snaps" &
			fi
			ka=$(tx_kicks) kb=$(peer "$(declare -f tx_kicks); tx_kicks")
			pt_run "${args[0]}" 240 "${args[@]:1}"
			ka=$(kicks_since "$ka" "$(tx_kicks)")
			kb=$(kicks_since "$kb" "$(peer "$(declare -f tx_kicks); tx_kicks")")
			if [ -n "$snaps" ]; then
				wait
				cat "$snaps"
				rm -f "$snaps"
			fi
			echo "ab: $side rep $rep $t: $(ab_result "${args[0]}" "${args[2]}")" \
				"| host A so far: retransmissions $(mr0_stat retransmissions) rto_timeouts $(mr0_stat rto_timeouts)" \
				"doorbells $(mr0_stat doorbells) posts_without_doorbell $(mr0_stat posts_without_doorbell)" \
				"tx_inflight_waits $(mr0_stat tx_inflight_waits) rto_spurious $(mr0_stat rto_spurious) rto_losses $(mr0_stat rto_losses) sack_losses $(mr0_stat sack_losses)" \
				"sack_reorders $(mr0_stat sack_reorders) tail_probes $(mr0_stat tail_probes) delay_floors_raised $(mr0_stat delay_floors_raised)" \
				"| host B drops: $(peer "$(declare -f rx_drops); rx_drops")" \
				"| sent: host A $ka, host B $kb | epoch $(date +%s)"
		done
		mr_down
	done
done
