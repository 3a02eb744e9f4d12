#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Receiver rate hints (RCN, protocol.md 6.5; user guide section 9) in an
# incast: one ib_write_bw on host A with N = 4 QPs (-q 4) writes into one on
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
#
# How a run is read, for the TCG rig (one vCPU per host, which perftest's
# client busy-polls; a Python start takes about a second):
# - One client process with N QPs, not N processes: its QPs start and end
#   together, so a reading during the transfer finds all N on both hosts.
#   N processes started and ended seconds apart, and a reading with all N
#   on both hosts was luck (one run had none in 80 s).
# - -t 16 (16 messages of 64 KiB queued per QP, not 128) keeps the drain
#   after -D's end short: 4 MiB, about 3 s at 10 Mbit/s, not 27 s, and
#   the QPs end within those seconds.
# - A reading: `rdma -dd resource show qp` on each host at once, A's run
#   here, B's through the peer channel from bash, each reduced by awk
#   (rcn_readings.sh), no Python in the loop; one every 2 s before the
#   traffic, 5-6 s during it, and 12-17 s late in a long suite run.
# - So a run lasts until STEADY readings are steady, not a fixed time:
#   then both sides are stopped (SECS, perftest's -D, is the cap). With
#   -D 30 a run sometimes had one steady reading.
# - A reading is steady when both hosts list the N QPs and every sender on
#   A sent new data both since the reading before and by the reading after
#   it: all N were sending around it, none starting or draining. The hints
#   checked are the middle steady reading's, the farthest from the start
#   and the drain (rate_hint_kbps on A's senders, rx_rate_hint_kbps on B's
#   receivers).
# - Goodput per QP, for Jain's fairness index: the data packets each
#   sender sent between the first and the last steady reading, from its
#   totals (sent - retx; not its listed paths' counters, which a dump of
#   4 QPs cut short for one of them), one window for all N. perftest
#   reports one number for all its QPs, and times it with the TSC at
#   /proc/cpuinfo's MHz, which TCG does not keep to.
# - The bottleneck's backlog: sampled every 0.5 s by tc alone (about
#   every 2 s while the client spins), its mean and maximum taken over the
#   same window; its drops and CE marks from the sample before the window
#   to the one after it (a window enclosing the steady one), and over the
#   whole run (logged only: the first RTT's burst is the engine's first
#   flight, protocol.md 4.1).
# Asserts (rcn_judge, rcn_readings.sh): with RCN on every sender's hint
# and every receiver's is non-zero and C/N (between C/(N+1) and C/(N-1),
# in kbit/s as the driver shows them, rounded down); off and unknown, all
# are 0. In the steady window:
# RCN off keeps the backlog at RED's minimum or above (the qdisc is the
# bottleneck); RCN on drops nothing, keeps the backlog below RED's minimum
# (no CE mark), sends at least 90% of RCN off's data packets/s, and its
# QPs' goodputs have Jain's index 0.9 or more.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rcn_readings.sh"
N=4
RATE=${METAROCE_RCN_RATE:-10}     # Mbit/s at the bottleneck
SECS=${METAROCE_RCN_SECS:-120}    # ib_write_bw -D: the most a run lasts
STEADY=4                          # steady readings that end a run
SIZE=65536
DEPTH=16
PORT=18830
knobs=/sys/class/infiniband/mr0/metaroce
sampler=""
work=$(mktemp -d)
cleanup() {
	[ -n "$sampler" ] && kill "$sampler" 2> /dev/null
	rm -rf "$work"
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
peer_text "true" || fail "no answer from host B's peer channel to bash (/dev/tcp/$METAROCE_PEER_ADDR)"

# bottleneck: tbf at $RATE on A's plane 0, RED child marking CE (ecn)
# between RED_MIN and 45 KB of average queue, 160 KB hard limit.
RED_MIN=15000
bottleneck() {
	tc qdisc del dev "$PLANE0_DEV" root 2> /dev/null
	tc qdisc add dev "$PLANE0_DEV" root handle 1: tbf rate "${RATE}mbit" burst 16kb latency 200ms ||
		skip "tc cannot add tbf (CONFIG_NET_SCH_TBF)"
	tc qdisc add dev "$PLANE0_DEV" parent 1:1 handle 10: red limit 160000 min $RED_MIN max 45000 \
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

# backlog_sampler FILE: the root qdisc's statistics every 0.5 s into FILE
# until killed, one line each: the time (now_us) and tc's JSON (tc alone in
# the loop).
backlog_sampler() {
	while :; do
		printf '%s ' "${EPOCHREALTIME/[.,]/}"
		tc -s -j qdisc show dev "$PLANE0_DEV"
		echo
		sleep 0.5
	done > "$1" 2> /dev/null
}

# incast LABEL: ib_write_bw with N QPs from A into B through a fresh
# bottleneck, until STEADY readings are steady (then both sides are
# stopped) or for SECS seconds; logs and sets $goodputs (data packets per
# QP over the steady window), $jain, $rate (data packets/s of all), $drops
# and $marked (whole run), $wdrops and $wmarked (steady window), $bmax,
# $bmean, $bcount, $hints_a, $hints_b.
incast() {
	local label=$1 args="-d mr0 -p $PORT -s $SIZE -q $N -t $DEPTH -D $SECS" job pid out dir
	local k=0 steadies=() first last mid t0 t1 n
	bottleneck
	job=$(peer_spawn "timeout $((SECS + 90)) ib_write_bw $args -x $pgid") ||
		fail "$label: cannot start the server on B"
	sleep 3
	out=$work/client.out dir=$work/readings
	rm -rf "$dir" && mkdir "$dir"
	# shellcheck disable=SC2086 # $args: options, split on purpose
	timeout $((SECS + 90)) nice -n 19 ib_write_bw $args -x "$gid" "$METAROCE_PEER_ADDR" > "$out" 2>&1 &
	pid=$!
	backlog_sampler "$work/backlog" &
	sampler=$!
	t0=$(now_us)
	while [ ${#steadies[@]} -lt $STEADY ] && kill -0 "$pid" 2> /dev/null; do
		k=$((k + 1))
		qp_reading "$dir" $k
		log "$label: +$((($(< "$dir/t.$k") - t0) / 1000)) ms: A hints (kbit/s) [$(qp_hints "$dir/a.$k")] data [$(qp_data "$dir/a.$k")], B hints [$(qp_hints "$dir/b.$k")]"
		if [ $k -ge 3 ] && qp_steady "$dir" $((k - 1)) $N; then
			steadies+=($((k - 1)))
		fi
		sleep 1
	done
	if kill -0 "$pid" 2> /dev/null; then
		# Enough readings: what perftest would say at -D's end is not
		# used (its clock is the TSC, above).
		kill "$pid"
		wait "$pid"
		peer "pkill -x ib_write_bw" > /dev/null
		peer_wait "$job" 30 > /dev/null
	else
		wait "$pid" || fail "$label: the client failed on A: $(tail -5 "$out")"
		peer_wait "$job" 90 > /dev/null || fail "$label: the server failed on B"
		log "$label: perftest (all $N QPs): $(awk -v s=$SIZE '$1 == s { print; exit }' "$out")"
	fi
	kill "$sampler" 2> /dev/null
	wait "$sampler" 2> /dev/null
	sampler=""
	read -r drops marked <<< "$(qdisc_stat)"
	log "$label: bottleneck: $(tc -s qdisc show dev "$PLANE0_DEV" | tr '\n' ' ')"
	[ ${#steadies[@]} -ge 2 ] ||
		fail "$label: fewer than 2 steady readings (the $N QPs on both hosts, every sender sending before and after) in $k"
	first=${steadies[0]} last=${steadies[-1]} mid=${steadies[${#steadies[@]} / 2]}
	hints_a=$(qp_hints "$dir/a.$mid") hints_b=$(qp_hints "$dir/b.$mid")
	goodputs=$(qp_sent_between "$dir/a.$first" "$dir/a.$last")
	t0=$(< "$dir/t.$first") t1=$(< "$dir/t.$last")
	# shellcheck disable=SC2086 # $goodputs: one argument per QP
	read -r jain n <<< "$(jain $goodputs)"
	rate=$((n * 1000000 / (t1 - t0)))
	read -r bmax bmean bcount wdrops wmarked <<< "$(qdisc_window "$work/backlog" "$t0" "$t1")"
	log "$label: over $(((t1 - t0) / 1000)) ms (steady readings ${steadies[*]} of $k): data packets per QP $goodputs ($rate/s in all, Jain $jain); backlog max $bmax B, mean $bmean B over $bcount samples; drops $wdrops, CE marks $wmarked (whole run: $drops, $marked); hints (kbit/s) at reading $mid: A (rate_hint_kbps) [$hints_a], B (rx_rate_hint_kbps) [$hints_b]"
	# Each sender's paths (slot/source port=data packets) at the last
	# steady reading: a QP with less than its share shows why here.
	log "$label: A's senders at reading $last: $(tr '\n' ';' < "$dir/a.$last")"
}

# expect_hints LABEL LOW HIGH: every hint on both hosts is in LOW..HIGH
# kbit/s, one per QP.
expect_hints() {
	local h count=0
	for h in $hints_a $hints_b; do
		[[ "$h" =~ ^[0-9]+$ ]] || fail "$1: hint '$h' (A: [$hints_a], B: [$hints_b])"
		if [ "$h" -lt "$2" ] || [ "$h" -gt "$3" ]; then
			fail "$1: hint $h outside $2..$3 kbit/s (A: [$hints_a], B: [$hints_b])"
		fi
		count=$((count + 1))
	done
	[ "$count" = $((2 * N)) ] || fail "$1: $count hints for $N QPs on each host (A: [$hints_a], B: [$hints_b])"
	log "ok: $1: every hint in $2..$3 kbit/s"
}

# --- RCN on: the capacity is the bottleneck's ---
peer "echo 1 > $knobs/rcn && echo $RATE > $knobs/rcn_capacity_mbps" > /dev/null || fail "cannot set B's RCN knobs"
incast "RCN on (C $RATE Mbit/s)"
expect_hints "RCN on" $((RATE * 1000 / (N + 1))) $((RATE * 1000 / (N - 1)))
on_wdrops=$wdrops on_jain=$jain on_rate=$rate on_bmax=$bmax on_bcount=$bcount on_bmean=$bmean

# --- RCN off ---
peer "echo 0 > $knobs/rcn" > /dev/null || fail "cannot turn B's hints off"
incast "RCN off"
expect_hints "RCN off" 0 0
off_jain=$jain off_rate=$rate off_bmean=$bmean

log "summary (steady windows): RCN on: $on_rate data packets/s, Jain $on_jain, drops $on_wdrops, backlog max $on_bmax B, mean $on_bmean B; off: $off_rate data packets/s, Jain $off_jain, mean backlog $off_bmean B"
verdict=$(rcn_judge $RED_MIN "$on_wdrops" "$on_bmax" "$on_bcount" "$on_rate" "$on_jain" "$off_bmean" "$off_rate")
judged=$?
while read -r line; do log "$line"; done <<< "$verdict"
[ $judged = 0 ] || fail "RCN on did not keep the queue small, the link busy and the QPs fair (above)"

# --- Unknown link speed (virtio-net): no hints unless the knob gives one ---
if peer "ethtool \$PLANE0_DEV 2>/dev/null | grep -q 'Speed: Unknown'"; then
	peer "echo 0 > $knobs/rcn_capacity_mbps && echo 1 > $knobs/rcn" > /dev/null ||
		fail "cannot set B's RCN knobs"
	incast "RCN on, capacity from an unknown link speed"
	expect_hints "unknown link speed" 0 0
else
	log "B's plane 0 reports a link speed: the unknown-speed case is not run"
fi
log "ok: rcn"
