#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Receiver rate hints (RCN, protocol.md 6.5; user guide section 9) in an
# incast: 4 ib_write_bw processes on host A (4 QPs) write into 4 servers on
# host B over mr0 on plane 0, through a rate-limited, ECN-marking
# bottleneck: host A's plane-0 egress, the one link all 4 QPs share (tbf
# at $RATE Mbit/s with a RED child that marks ECT packets CE; the test
# kernel has no IFB, so B's ingress cannot be shaped, and B's egress
# carries only ACKs). Host B's capacity knob is set to the bottleneck's
# rate (virtio-net reports no link speed).
#
# Three runs, the qdisc made anew for each:
#  on:      rcn=1, rcn_capacity_mbps=$RATE on B
#  off:     rcn=0 on B
#  unknown: rcn=1, rcn_capacity_mbps=0 on B: the link speed as virtio-net
#           reports it; unknown there, so no hints (only if ethtool on B
#           says so)
# Each reports per-sender goodput (ib_write_bw's BW average), Jain's
# fairness index, the qdisc's drops and ECN marks (tc -s), its backlog
# sampled every 0.5 s, and the hints in `rdma resource show qp -dd`
# (rate_hint_mbps on A's senders, rx_rate_hint_mbps on B's receivers).
# Asserts: with RCN on every sender's hint and every receiver's is
# non-zero and C/N (between C/(N+1) and C/(N-1), Mbit/s rounded down);
# off and unknown, all are 0; with RCN on the bottleneck drops no more
# packets than with it off (3 packets of slack for the first RTT's burst,
# which no hint can cap).
. "$(dirname "$0")/lib.sh"
N=4
RATE=${METAROCE_RCN_RATE:-10}     # Mbit/s at the bottleneck
SECS=${METAROCE_RCN_SECS:-30}     # ib_write_bw -D (about 0.4 s each in TCG)
SIZE=65536
PORT0=18830
knobs=/sys/class/infiniband/mr0/metaroce
sampler=""
cleanup() {
	[ -n "$sampler" ] && kill "$sampler" 2> /dev/null
	tc qdisc del dev "$PLANE0_DEV" root 2> /dev/null
	two_host_cleanup -k ib_write_bw -q
}
trap cleanup EXIT
reset_rdma
command -v ib_write_bw > /dev/null || skip "perftest not installed"
command -v tc > /dev/null || skip "tc not installed"

mr0_on_both_hosts
[ -f "$knobs/rcn" ] || fail "no rcn knob in $knobs"
log "B's plane 0 link speed: $(peer "ethtool \$PLANE0_DEV 2>&1 | grep -i speed" 2>&1)"

# bottleneck: tbf at $RATE on A's plane 0, RED child marking CE (ecn)
# between 15 and 45 KB of average queue, 160 KB hard limit: the first
# RTT's burst (4 QPs x 4 paths x 8 packets, before any ACK or hint) fits.
bottleneck() {
	tc qdisc del dev "$PLANE0_DEV" root 2> /dev/null
	tc qdisc add dev "$PLANE0_DEV" root handle 1: tbf rate "${RATE}mbit" burst 16kb latency 200ms ||
		skip "tc cannot add tbf (CONFIG_NET_SCH_TBF)"
	tc qdisc add dev "$PLANE0_DEV" parent 1:1 handle 10: red limit 160000 min 15000 max 45000 \
		avpkt 1100 burst 23 probability 0.2 bandwidth "${RATE}mbit" ecn ||
		skip "tc cannot add red ecn (CONFIG_NET_SCH_RED)"
}

# qdisc_stat: "DROPS MARKED" of the bottleneck: the root's drops (tbf
# counts those of its RED child too) and RED's CE marks.
qdisc_stat() {
	tc -s -j qdisc show dev "$PLANE0_DEV" | /usr/bin/python3 -c '
import json, sys
qs = json.load(sys.stdin)
root = next((q for q in qs if q.get("kind") == "tbf"), {})
red = next((q for q in qs if q.get("kind") == "red"), {})
marked = red.get("marked", red.get("options", {}).get("marked", 0))
print(root.get("drops", 0), marked)' || echo "? ?"
}

# backlog_sampler FILE: the root qdisc's statistics every 0.5 s, one JSON
# line each, into FILE until killed (tc alone in the loop: a Python start
# per sample takes about a second in a TCG guest).
backlog_sampler() {
	while :; do
		tc -s -j qdisc show dev "$PLANE0_DEV"
		echo
		sleep 0.5
	done > "$1" 2> /dev/null
}

# backlogs FILE: the tbf backlogs (bytes) in a sampler's FILE, one a line.
backlogs() {
	/usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1]):
    try:
        qs = json.loads(line)
    except ValueError:
        continue
    b = next((q.get("backlog") for q in qs if q.get("kind") == "tbf"), None)
    if b is not None:
        print(b)' "$1"
}

# hints WHO: the hints of the ib_write_bw RC QPs on host WHO (A: the
# senders' rate_hint_mbps, B: the receivers' rx_rate_hint_mbps), space
# separated.
hints() {
	local cmd="rdma -j -dd resource show qp link mr0/1" field=rate_hint_mbps json
	if [ "$1" = B ]; then
		json=$(peer "$cmd" 2>&1)
		field=rx_rate_hint_mbps
	else
		json=$($cmd 2>&1)
	fi
	/usr/bin/python3 -c '
import json, sys
field = sys.argv[1]
qps = json.loads(sys.stdin.read())
mine = [q for q in qps if q.get("comm") == "ib_write_bw" and q.get("type") == "RC"
        and q.get("state") in ("RTR", "RTS")]
# None found: what there was, so that the check that fails says it.
print(" ".join(str(q.get("drv_" + field, q.get(field, "?"))) for q in mine) or
      "no-QP:" + ",".join("{}/{}/{}".format(q.get("comm"), q.get("type"), q.get("state")) for q in qps))
' "$field" <<< "$json" || echo "?:${json:0:200}"
}

# all_running PID...: whether every PID is still running.
all_running() {
	local p
	for p; do
		kill -0 "$p" 2> /dev/null || return 1
	done
}

# incast LABEL: N ib_write_bw clients on A into N servers on B for SECS
# seconds through a fresh bottleneck; logs and sets $goodputs (MB/s per
# sender), $jain, $total, $drops, $marked, $bmax, $bmean, $hints_a, $hints_b.
incast() {
	local label=$1 k j g jobs=() pids=() outs=() samples=() s n=0 sum=0 sampler_out ha="" hb="" start hb_out
	bottleneck
	for ((k = 0; k < N; k++)); do
		j=$(peer_spawn "timeout $((SECS + 60)) ib_write_bw -d mr0 -x $pgid -p $((PORT0 + k)) -s $SIZE -D $SECS") ||
			fail "$label: cannot start server $k on B"
		jobs+=("$j")
	done
	sleep 3
	for ((k = 0; k < N; k++)); do
		outs+=("$(mktemp)")
		timeout $((SECS + 60)) nice -n 19 ib_write_bw -d mr0 -x "$gid" -p $((PORT0 + k)) -s $SIZE -D "$SECS" \
			"$METAROCE_PEER_ADDR" > "${outs[k]}" 2>&1 &
		pids+=($!)
	done
	# The backlog every 0.5 s while the clients run; the hints as often as
	# they can be read (both hosts at once: a read takes seconds in TCG),
	# the last one taken while every client still ran kept. The clients
	# busy-poll their CQs (ib_write_bw has no -e) at nice 19: at the
	# default priority four of them left a reading 38 s of host A's vCPU. Not by the clock: perftest times
	# -D with the TSC at /proc/cpuinfo's MHz, which TCG does not keep to
	# (a -D 10 run took about 4 s of wall time on the rig).
	sampler_out=$(mktemp) hb_out=$(mktemp)
	backlog_sampler "$sampler_out" &
	sampler=$!
	hints_a="" hints_b=""
	start=$SECONDS
	while all_running "${pids[@]}"; do
		hints B > "$hb_out" &
		ha=$(hints A)
		wait $!
		hb=$(< "$hb_out")
		log "$label: hints at +$((SECONDS - start)) s: A [$ha], B [$hb]"
		# Every client ran when the reading began (the loop's test), and
		# it found all N QPs on both hosts.
		if [ "$(wc -w <<< "$ha")" = "$N" ] &&
			[ "$(wc -w <<< "$hb")" = "$N" ]; then
			hints_a=$ha hints_b=$hb
		fi
		sleep 0.5
	done
	if [ -z "$hints_a" ]; then
		for ((k = 0; k < N; k++)); do
			all_running "${pids[k]}" || log "$label: client $k ended: $(tail -3 "${outs[k]}" | tr '\n' ' ')"
		done
		fail "$label: no reading of the hints while all $N clients ran (last: A [$ha], B [$hb])"
	fi
	for ((k = 0; k < N; k++)); do
		wait "${pids[k]}" || fail "$label: client $k failed: $(tail -5 "${outs[k]}")"
		peer_wait "${jobs[k]}" 90 > /dev/null || fail "$label: server $k failed on B"
	done
	kill "$sampler" 2> /dev/null
	wait "$sampler" 2> /dev/null
	sampler=""
	mapfile -t samples < <(backlogs "$sampler_out")
	rm -f "$sampler_out" "$hb_out"
	read -r drops marked <<< "$(qdisc_stat)"
	log "$label: bottleneck: $(tc -s qdisc show dev "$PLANE0_DEV" | tr '\n' ' ')"
	goodputs=""
	for ((k = 0; k < N; k++)); do
		# The result line: "#bytes #iterations BW peak BW average MsgRate".
		g=$(awk -v s=$SIZE '$1 == s { print $4; exit }' "${outs[k]}")
		[ -n "$g" ] || fail "$label: client $k printed no result: $(tail -5 "${outs[k]}")"
		goodputs+="$g "
		rm -f "${outs[k]}"
	done
	# shellcheck disable=SC2086 # $goodputs: one argument per sender
	read -r jain total <<< "$(/usr/bin/python3 -c '
import sys
x = [float(v) for v in sys.argv[1:]]
s, q = sum(x), sum(v * v for v in x)
print(f"{s * s / (len(x) * q) if q else 1:.3f} {s:.3f}")' $goodputs)"
	for s in "${samples[@]}"; do
		n=$((n + 1))
		sum=$((sum + s))
		[ "$s" -gt "${bmax:-0}" ] && bmax=$s
	done
	bmean=$((sum / (n > 0 ? n : 1)))
	log "$label: goodput MB/s per sender: ${goodputs}(total $total, Jain $jain); drops $drops, CE marks $marked; backlog max ${bmax:-0} B, mean $bmean B over $n samples; hints A (rate_hint_mbps): [$hints_a], B (rx_rate_hint_mbps): [$hints_b]"
}

# expect_hints LABEL LOW HIGH: every hint on both hosts is in LOW..HIGH,
# one per QP.
expect_hints() {
	local h count=0
	for h in $hints_a $hints_b; do
		[[ "$h" =~ ^[0-9]+$ ]] || fail "$1: hint '$h' (A: [$hints_a], B: [$hints_b])"
		[ "$h" -ge "$2" ] && [ "$h" -le "$3" ] ||
			fail "$1: hint $h outside $2..$3 Mbit/s (A: [$hints_a], B: [$hints_b])"
		count=$((count + 1))
	done
	[ "$count" = $((2 * N)) ] || fail "$1: $count hints for $N QPs on each host (A: [$hints_a], B: [$hints_b])"
	log "ok: $1: every hint in $2..$3 Mbit/s"
}

# --- RCN on: the capacity is the bottleneck's ---
peer "echo 1 > $knobs/rcn && echo $RATE > $knobs/rcn_capacity_mbps" > /dev/null || fail "cannot set B's RCN knobs"
bmax=0
incast "RCN on (C $RATE Mbit/s)"
expect_hints "RCN on" $((RATE / (N + 1))) $((RATE / (N - 1)))
[ $((RATE / (N + 1))) -gt 0 ] || fail "RATE $RATE too low for $N hints to be non-zero"
on_drops=$drops on_jain=$jain on_total=$total on_bmean=$bmean

# --- RCN off ---
peer "echo 0 > $knobs/rcn" > /dev/null || fail "cannot turn B's hints off"
bmax=0
incast "RCN off"
expect_hints "RCN off" 0 0
off_drops=$drops off_jain=$jain off_total=$total off_bmean=$bmean

[ "$on_drops" -le $((off_drops + 3)) ] ||
	fail "more drops with RCN on ($on_drops) than off ($off_drops)"
log "ok: drops with RCN on $on_drops, off $off_drops"
log "summary: RCN on: goodput $on_total MB/s, Jain $on_jain, drops $on_drops, mean backlog $on_bmean B; off: goodput $off_total MB/s, Jain $off_jain, drops $off_drops, mean backlog $off_bmean B"

# --- Unknown link speed (virtio-net): no hints unless the knob gives one ---
if peer "ethtool \$PLANE0_DEV 2>/dev/null | grep -q 'Speed: Unknown'"; then
	peer "echo 0 > $knobs/rcn_capacity_mbps && echo 1 > $knobs/rcn" > /dev/null ||
		fail "cannot set B's RCN knobs"
	SECS=30
	bmax=0
	incast "RCN on, capacity from an unknown link speed"
	expect_hints "unknown link speed" 0 0
else
	log "B's plane 0 reports a link speed: the unknown-speed case is not run"
fi
log "ok: rcn"
