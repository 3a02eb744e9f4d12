#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The benchmark suite (issue #5), run on host A of the rig by
# selftests/bench/run.sh. Every transport gets the same scenarios on the
# same two hosts; every sample lands in $METAROCE_OUT/bench/samples.csv,
# which report.py turns into the report and plots on the build host.
#
# Environment: BENCH_QUICK=1 (the ~5 minute subset), BENCH_TRANSPORTS
# (default "rxe siw metaroce tcp"), BENCH_SCENARIOS (below), BENCH_REPS,
# BENCH_PLANE_RATE (kbit/s per plane for the scaling and congestion runs;
# default measured), BENCH_COLL_RANKS (MPI ranks per host, default 2),
# BENCH_COLL_LOSS (the lossy collectives' netem loss %, default 1),
# BENCH_COLL_PATHS (Open MPI paths tried in order, default "ucx openib"),
# BENCH_SCALE_RATE (kbit/s of the scale run's link; default measured),
# BENCH_RCN_RATE (kbit/s of the RCN incast's bottleneck; default 10000,
# selftests/rcn.sh's).
. "$(dirname "$0")/lib.sh"
csv_init
start_s=$(date +%s)
quick=${BENCH_QUICK:-0}
transports=${BENCH_TRANSPORTS:-rxe siw metaroce tcp}
# BENCH_SCENARIOS: some of "throughput scaling failover congestion
# collectives rcn scale jumbo" (throughput also runs latency, the loss
# sweep and reordering; scale, ~15 minutes, and jumbo, ~5, only when
# named until the full suite's time allows them).
scenarios=" ${BENCH_SCENARIOS:-throughput scaling failover congestion collectives rcn} "
want() { [[ $scenarios == *" $1 "* ]]; }
if [ "$quick" = 1 ]; then
	reps=${BENCH_REPS:-1} dur=4 lat_n=200 fail_t=15 cong_t=6 rcn_t=10
	bw_tests=("ib_write_bw 65536 1" "ib_write_bw 65536 8")
	lat_tests=("ib_write_lat 2")
	losses=(1 10) plane_set=(1 2)
	coll_sizes=8,512,32768,1048576 coll_tmo=240
	scale_delays=(10ms) scale_sizes=(4096) scale_t=10 scale_cap=4
else
	reps=${BENCH_REPS:-3} dur=4 lat_n=500 fail_t=30 cong_t=10 rcn_t=15
	bw_tests=("ib_write_bw 65536 1" "ib_write_bw 1048576 1" "ib_write_bw 65536 8"
		"ib_write_bw 1048576 8" "ib_send_bw 65536 1" "ib_read_bw 65536 1")
	lat_tests=("ib_write_lat 2" "ib_write_lat 4096" "ib_write_lat 65536" "ib_send_lat 2" "ib_send_lat 4096" "ib_send_lat 65536")
	losses=(0.1 1 5 10) plane_set=(1 2 4)
	# 8 B to 64 MiB, every 8x, then 4x from 1 MiB: each point sends at
	# least one operation, at the rig's few MB/s the largest take seconds.
	coll_sizes=8,64,512,4096,32768,262144,1048576,4194304,16777216,67108864 coll_tmo=600
	scale_delays=(1.5ms 10ms) scale_sizes=(4096 65536) scale_t=12 scale_cap=4
fi
((METAROCE_PLANES >= plane_set[-1])) || plane_set=(1 "$METAROCE_PLANES")
# The throughput scenario's passes over the transports (the run, below):
# how many, and over which points.
per_pass=0 passes_over=-
if want throughput; then
	per_pass=$reps passes_over=throughput
elif want lossless; then
	per_pass=$reps passes_over=lossless
fi
# MetaRoCE's own configuration for the non-scaling runs: the rig's usual 2.
main_planes=$((METAROCE_PLANES < 2 ? METAROCE_PLANES : 2))
# perftest -D: measures D-2*margin seconds (margin -f 1) and counts only
# signaled completions, by default one every 100 WRs (-Q, cq_mod): at the
# rig's few MB/s that is one count per 6.4 MB of 64 KiB messages, so a
# short window or a slow flow (8 QPs, a shared bottleneck) reads 0. -Q 1
# signals every WR, for every transport alike.
bw_args="-D $dur -f 1 -Q 1"
tmo=$((dur + 25))

{
	echo "quick=$quick reps=$reps passes=$per_pass passes_over=$passes_over dur=$dur lat_n=$lat_n fail_t=$fail_t cong_t=$cong_t rcn_t=$rcn_t"
	echo "transports=$transports planes=$METAROCE_PLANES main_planes=$main_planes"
	echo "kernel=$(uname -r) cpus=$(nproc) mem=$(awk '/MemTotal/ {print $2" kB"}' /proc/meminfo)"
	# Which kernel ran: the benchmark kernel has no lock or memory
	# debugging (selftests/rig/bench.config), the test kernel has both.
	debug=$(zcat /proc/config.gz 2> /dev/null | grep -oE '^CONFIG_(PROVE_LOCKING|DEBUG_ATOMIC_SLEEP|KFENCE)=y' | sed 's/^CONFIG_//; s/=y$//' | paste -sd+)
	[ -n "$debug" ] || { [ -e /proc/lockdep ] && debug=PROVE_LOCKING; }
	echo "kdebug=${debug:-none}"
	echo "cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
	echo "perftest=$(dpkg-query -W -f='${Version}' perftest 2> /dev/null) iperf3=$(dpkg-query -W -f='${Version}' iperf3 2> /dev/null)"
	echo "rdma-core=$(dpkg-query -W -f='${Version}' rdma-core 2> /dev/null)"
	echo "openmpi=$(dpkg-query -W -f='${Version}' openmpi-bin 2> /dev/null) ucx=$(dpkg-query -W -f='${Version}' libucx0 2> /dev/null) mpi4py=$(dpkg-query -W -f='${Version}' python3-mpi4py 2> /dev/null)"
} > "$BOUT/env.txt"
cat "$BOUT/env.txt"

on_both tc_clear > /dev/null
reset_rdma
peer ". $METAROCE_REPO/selftests/lib.sh; reset_rdma" > /dev/null 2>&1
declare -A avail reason planes_of

# ---------------------------------------------------------------- one point
# bw_point T SCENARIO TEST SIZE QPS PLANES COND REP: one throughput sample,
# and what it cost both hosts (cost_end: CPU, frames, timers).
bw_point() {
	local t=$1 sc=$2 test=$3 size=$4 qps=$5 pl=$6 cond=$7 rep=$8 v
	if [ "$t" = tcp ]; then
		# iperf3 -t 2: its CPU window from 0.3 to 1.7 s of the transfer.
		cost_begin 0.3 1.4 60
		v=$(ip_run 0 $((dur - 2)) "$qps")
		if [ -n "$v" ]; then
			csv tcp "$sc" iperf3 - "$qps" "$pl" "$cond" "$rep" MiBps "$v"
			cost_end tcp "$sc" iperf3 - "$qps" "$pl" "$cond" "$rep"
		else
			cost_abort
			csv tcp "$sc" iperf3 - "$qps" "$pl" "$cond" "$rep" error "" "iperf3 failed"
		fi
		note "tcp $sc iperf3 P=$qps planes=$pl $cond rep$rep: ${v:-error} MiB/s"
		[ -n "$v" ]
		return
	fi
	# perftest -D 4 -f 1 moves data for 4 s: the CPU window is 0.5 to 3 s.
	# A run whose duration clock failed (iterations, 0.00 MB/s: perftest's
	# clock under TCG, pt_bw) is run again, twice at most; the sample's
	# note says so.
	local try clock=""
	for try in 1 2 3; do
		cost_begin 0.5 $((dur - 2)).5 "$tmo"
		if pt_run "$test" "$tmo" -s "$size" -q "$qps" $bw_args && v=$(pt_bw "$size"); then
			break
		fi
		v=""
		[ "$try" -lt 3 ] && [[ "$(pt_err)" == *"duration clock failed"* ]] || break
		cost_abort
		clock+="$(pt_err | sed 's/ (its duration clock failed).*//'); "
		note "$t $sc $test size=$size qps=$qps $cond rep$rep: perftest's duration clock failed: once more"
	done
	if [ -n "$v" ]; then
		csv "$t" "$sc" "$test" "$size" "$qps" "$pl" "$cond" "$rep" MiBps "$v" "${clock:+after a failed perftest duration clock: $clock}"
		cost_end "$t" "$sc" "$test" "$size" "$qps" "$pl" "$cond" "$rep"
	else
		cost_abort
		v=""
		csv "$t" "$sc" "$test" "$size" "$qps" "$pl" "$cond" "$rep" error "" "$(pt_err)"
	fi
	note "$t $sc $test size=$size qps=$qps planes=$pl $cond rep$rep: ${v:-error} MiB/s"
	[ -n "$v" ]
}

# ---------------------------------------------------------------- scenarios
lossless() { # T REP: the lossless throughput points (and their cost), once
	local t=$1 rep=$2 spec test size qps
	for spec in "${bw_tests[@]}"; do
		read -r test size qps <<< "$spec"
		[ "$t" = tcp ] && [ "$test" != ib_write_bw -o "$size" != 65536 ] && continue
		bw_point "$t" throughput "$test" "$size" "$qps" "${planes_of[$t]}" loss=0 "$rep"
	done
}
throughput_latency_loss() { # T REP: lossless throughput + latency, loss sweep, reordering, once
	local t=$1 rep=$2 spec test size l lat loss cond
	lossless "$t" "$rep"
	if [ "$t" = tcp ]; then
		[ "$rep" = 1 ] && csv tcp latency - - - - - - skipped "" "TCP is the throughput ceiling only"
	else
		for spec in "${lat_tests[@]}"; do
			read -r test size <<< "$spec"
			if pt_run "$test" 60 -s "$size" -n "$lat_n" && l=$(pt_lat "$size"); then
				read -r lat p99 <<< "$l"
				csv "$t" latency "$test" "$size" 1 "${planes_of[$t]}" - "$rep" median_us "$lat"
				csv "$t" latency "$test" "$size" 1 "${planes_of[$t]}" - "$rep" p99_us "$p99"
			else
				csv "$t" latency "$test" "$size" 1 "${planes_of[$t]}" - "$rep" error "" "$(pt_err)"
			fi
			note "$t latency $test size=$size rep$rep: ${l:-error} us (median p99)"
		done
	fi
	# Loss 0 first: netem on every plane with no loss, the reference that
	# has the loss points' qdisc (netem enqueues and dequeues every packet,
	# where an idle pfifo_fast is bypassed: a per-packet cost on these
	# CPU-bound guests, paid more by small-packet transports than by TCP's
	# 64 KiB GSO skbs), so that the sweep's shares can be read both ways.
	for loss in 0 "${losses[@]}"; do
		on_both "tc_loss_all $loss" || { note "netem loss $loss failed"; continue; }
		bw_point "$t" loss ib_write_bw 65536 1 "${planes_of[$t]}" "loss=$loss" "$rep"
	done
	on_both tc_clear
	# Reordering: 2 ms +- 2 ms on plane 0 (both directions), which every
	# transport uses; before it the same mean delay with no jitter, which
	# reorders nothing, so that the delay and the qdisc's own cost can be
	# told from the reordering's.
	for cond in "delay=2ms@plane0 0 2ms 0ms" "jitter=2ms+-2ms@plane0 0 2ms 2ms"; do
		on_both "tc_jitter ${cond#* }" || { note "netem ${cond%% *} failed"; continue; }
		bw_point "$t" reorder ib_write_bw 65536 1 "${planes_of[$t]}" "${cond%% *}" "$rep"
	done
	on_both tc_clear
}

# scaling T RATE_KBIT: 1, 2, 4 planes, each under tbf at RATE. For
# MetaRoCE and TCP on P >= 2 planes also each plane's share of the bytes
# host A sent on the planes during the point (issue #14 item 3: within
# +-10% of 1/P), from the planes' tx_bytes before and after it; rxe and
# siw use plane 0 alone.
scaling() {
	local t=$1 rate=$2 p rep v f sum i before cond ok test size
	for p in "${plane_set[@]}"; do
		tp_up "$t" "$p" || { csv "$t" scaling ib_write_bw 65536 1 "$p" "rate=${rate}kbit" - unavailable "" "$TP_REASON"; tp_down "$t"; continue; }
		on_both "tc_clear; tc_rate_all $rate"
		for ((rep = 1; rep <= reps; rep++)); do
			before=$(plane_tx_bytes "$p")
			if [ "$t" = tcp ]; then
				# One TCP flow per plane: what the planes carry in aggregate.
				for ((i = 0; i < p; i++)); do ip_run "$i" $((dur - 2)) 1 $((5201 + i)) > "$BOUT/.ip$i" & done
				wait
				sum=0
				for ((i = 0; i < p; i++)); do
					f=$(cat "$BOUT/.ip$i")
					[ -n "$f" ] || { sum=""; break; }
					sum=$(awk -v a="$sum" -v b="$f" 'BEGIN { print a + b }')
				done
				if [ -n "$sum" ]; then csv tcp scaling iperf3 - 1 "$p" "rate=${rate}kbit" "$rep" MiBps "$sum" "$p flows, one per plane"; else csv tcp scaling iperf3 - 1 "$p" "rate=${rate}kbit" "$rep" error "" "iperf3 failed"; fi
				note "tcp scaling planes=$p rep$rep: ${sum:-error}"
				ok=$sum cond=rate=${rate}kbit test=iperf3 size=-
			else
				cond="rate=${rate}kbit;uses=$TP_PLANES;tx-depth=4" test=ib_write_bw size=65536
				ok=""
				bw_args="-D $dur -f 1 -Q 1 -t 4" bw_point "$t" scaling "$test" "$size" 1 "$p" "$cond" "$rep" && ok=1
			fi
			if ((p >= 2)) && [ -n "$ok" ] && [[ $t == metaroce || $t == tcp ]]; then
				plane_shares "$t" scaling "$test" "$size" 1 "$p" "$cond" "$rep" "$before" "$(plane_tx_bytes "$p")"
			fi
		done
		on_both tc_clear
		tp_down "$t"
	done
}

# scale T RATE_KBIT (issue #14 item 2): one plane as a long-haul link,
# netem delay (one way, on both hosts) under a tbf at RATE, for each of
# scale_delays; ib_write_bw of each of scale_sizes with -t 1024 (room
# for 1,024 messages in flight, MetaRoCE's message window), or one iperf3
# flow. Goodput over the rate is what the report shows; for MetaRoCE also
# its sender's paths, messages outstanding and message window.
#
# At the rig's rates the longest delay's BDP (tens of packets) fits in the
# 4 paths a QP opens, each allowed 256 packets (pwnd_max): path growth
# (protocol.md 4.4) never has to start. So MetaRoCE runs the longest delay
# once more with pwnd_max = scale_cap on host A's new QPs, a path's cap
# scaled down to the rig's BDP as a campus link's is large against 256
# packets (25 Gbit/s at 10 ms: 30 paths of 256 packets of 4 KiB,
# protocol.md 4.4): it must fill the link by growing paths.
scale() {
	local t=$1 rate=$2 d size rep cond
	if [ "$t" = siw ]; then
		csv siw scale - - - - - - skipped "" "the scale run compares MetaRoCE, rxe and TCP"
		return
	fi
	tp_up "$t" 1 || { csv "$t" scale - - - - - - unavailable "" "$TP_REASON"; tp_down "$t"; return; }
	for d in "${scale_delays[@]}"; do
		cond="delay=$d;rate=${rate}kbit"
		on_both "tc_clear; tc_delay_rate_all $d $rate" || { csv "$t" scale - - 1 1 "$cond" - error "" "netem delay under tbf failed"; continue; }
		for size in "${scale_sizes[@]}"; do
			[ "$t" = tcp ] && [ "$size" != "${scale_sizes[0]}" ] && continue
			for ((rep = 1; rep <= reps; rep++)); do
				scale_point "$t" "$size" "$cond" "$rep"
			done
		done
		if [ "$t" = metaroce ] && [ "$d" = "${scale_delays[-1]}" ]; then
			local knobs=/sys/class/infiniband/mr0/metaroce old_init old_max
			old_init=$(cat "$knobs/pwnd_init") old_max=$(cat "$knobs/pwnd_max")
			# pwnd_init <= pwnd_max: the initial window first.
			if echo "$scale_cap" > "$knobs/pwnd_init" && echo "$scale_cap" > "$knobs/pwnd_max"; then
				for size in "${scale_sizes[@]}"; do
					for ((rep = 1; rep <= reps; rep++)); do
						scale_point "$t" "$size" "$cond;pwnd_max=$scale_cap" "$rep"
					done
				done
			else
				csv "$t" scale ib_write_bw - 1 1 "$cond;pwnd_max=$scale_cap" - error "" "cannot set host A's pwnd_init/pwnd_max knobs"
			fi
			echo "$old_max" > "$knobs/pwnd_max" && echo "$old_init" > "$knobs/pwnd_init" ||
				note "metaroce: host A's pwnd_max/pwnd_init not restored"
		fi
		on_both tc_clear
	done
	tp_down "$t"
}

# scale_point T SIZE COND REP: one scale run (iperf3 for TCP), its csv
# lines; MetaRoCE's paths, messages outstanding and message window (the
# peer's ACKs', protocol.md 1.4) read from `rdma -dd resource show qp`
# every 2 s while the client runs: the most paths seen, with the
# outstanding and window of that reading.
scale_point() {
	local t=$1 size=$2 cond=$3 rep=$4 v pid r best i r_paths r_out r_win
	if [ "$t" = tcp ]; then
		v=$(ip_run 0 "$scale_t" 1)
		if [ -n "$v" ]; then csv tcp scale iperf3 - 1 1 "$cond" "$rep" MiBps "$v"; else csv tcp scale iperf3 - 1 1 "$cond" "$rep" error "" "iperf3 failed"; fi
		note "tcp scale $cond rep$rep: ${v:-error} MiB/s"
		return
	fi
	: > "$BOUT/.sc"
	: > "$BOUT/.sc.err"
	(
		if ! { pt_run ib_write_bw $((scale_t + 30)) -s "$size" -D "$scale_t" -f 1 -Q 1 -t 1024 &&
			pt_bw "$size" > "$BOUT/.sc"; }; then
			pt_err > "$BOUT/.sc.err"
		fi
	) &
	pid=$!
	best=""
	if [ "$t" = metaroce ]; then
		for ((i = 0; i < (scale_t + 30) / 2; i++)); do
			sleep 2
			kill -0 "$pid" 2> /dev/null || break
			r=$(mr_qp_reading)
			[[ ${r%% *} =~ ^[0-9]+$ ]] || continue
			if [ -z "$best" ] || ((${r%% *} >= ${best%% *})); then best=$r; fi
		done
	fi
	wait "$pid"
	v=$(cat "$BOUT/.sc")
	if [ -n "$v" ]; then
		csv "$t" scale ib_write_bw "$size" 1 1 "$cond" "$rep" MiBps "$v"
	else
		csv "$t" scale ib_write_bw "$size" 1 1 "$cond" "$rep" error "" "$(cat "$BOUT/.sc.err" 2> /dev/null)"
	fi
	if [ -n "$best" ]; then
		read -r r_paths r_out r_win <<< "$best"
		csv "$t" scale ib_write_bw "$size" 1 1 "$cond" "$rep" paths "$r_paths"
		csv "$t" scale ib_write_bw "$size" 1 1 "$cond" "$rep" outstanding "$r_out"
		csv "$t" scale ib_write_bw "$size" 1 1 "$cond" "$rep" msg_window "$r_win"
	fi
	note "$t scale size=$size $cond rep$rep: ${v:-error} MiB/s${best:+, paths/outstanding/window $best}"
}

# failover T: fail_t s of traffic; the last plane the transport uses goes
# down at fail_t/3 and comes back at 2*fail_t/3. Both the link events and the
# throughput series come from the rig's host-side agent (hostctl.py): in a
# TCG guest the spinning client owns the vCPU, and a guest-side sampler or
# `ip link set down` ran seconds late. The agent takes the plane's link down
# on both hosts' NICs (carrier loss, as a pulled cable) and samples the bytes
# host A sends on each plane every 0.1 s, on the host's clock. Time 0 is when
# the agent starts, once the tool has printed its first line (data flows).
failover() {
	local t=$1 rep plane down_at up_at series cmd srv pid i pat ans req metric cond v
	down_at=$((fail_t / 3)) up_at=$((2 * fail_t / 3))
	for ((rep = 1; rep <= reps; rep++)); do
		tp_up "$t" "$([ "$t" = tcp ] && echo 1 || echo "$main_planes")" || { csv "$t" failover - - - - - - unavailable "" "$TP_REASON"; tp_down "$t"; return; }
		plane=$((TP_PLANES - 1))
		[ "$t" = tcp ] && plane=0
		series=$(raw_name "$t failover rep$rep")
		if [ "$t" = tcp ]; then
			srv="iperf3 -s -1 -B $PEER_PLANE0_IP"
			cmd="iperf3 -c $PEER_PLANE0_IP -B $PLANE0_IP -t $((fail_t + 30)) -i 1 -f k --forceflush"
			pat='Kbits/sec'
		else
			srv="ib_write_bw $TP_SRV -s 65536 -D 1 -Q 1 --run_infinitely -p $PT_PORT -F"
			cmd="stdbuf -oL ib_write_bw $TP_CLI -s 65536 -D 1 -Q 1 --run_infinitely -p $PT_PORT -F $TP_TARGET"
			pat='^ *65536 +[0-9]+ +[0-9.]+ +[0-9.]+'
		fi
		peer_spawn "echo \$\$ > /run/bench-failover.pid; exec timeout $((fail_t + 90)) $srv" > /dev/null
		sleep 2
		# shellcheck disable=SC2086
		timeout $((fail_t + 80)) $cmd > "$series" 2>&1 &
		pid=$!
		for ((i = 0; i < 600; i++)); do
			grep -qE "$pat" "$series" 2> /dev/null && break
			kill -0 "$pid" 2> /dev/null || break
			sleep 0.1
		done
		if ! grep -qE "$pat" "$series" 2> /dev/null; then
			csv "$t" failover ib_write_bw 65536 1 "$TP_PLANES" "plane$plane" "$rep" error "" "no traffic: $(grep -iE 'error|fail|unable' "$series" | head -2 | tr '\n' ' ')"
			kill "$pid" 2> /dev/null
			peer 'kill $(cat /run/bench-failover.pid) 2> /dev/null' > /dev/null
			tp_down "$t"
			continue
		fi
		req="{\"duration_s\": $((fail_t + 2)), \"interval_s\": 0.1, \"events\": [{\"at_s\": $down_at, \"plane\": $plane, \"up\": false}, {\"at_s\": $up_at, \"plane\": $plane, \"up\": true}]}"
		ans=$(host_ctl "failover-$t-rep$rep" "$req" $((fail_t + 60)) 2> "$series.err")
		kill "$pid" 2> /dev/null
		wait "$pid" 2> /dev/null
		sleep 1
		peer 'kill $(cat /run/bench-failover.pid) 2> /dev/null' > /dev/null
		if [ -z "$ans" ] || ! python3 "$BENCH_DIR/wire_series.py" "$ans" "$TP_PLANES" > "$series.tsv" 2>> "$series.err"; then
			csv "$t" failover ib_write_bw 65536 1 "$TP_PLANES" "plane$plane" "$rep" error "" "host agent: $(cat "$series.err" 2> /dev/null) (see $METAROCE_OUT/hostctl.log)"
			tp_down "$t"
			continue
		fi
		cp "$ans" "$series.json"
		while read -r metric cond v; do
			csv "$t" failover ib_write_bw 65536 1 "$TP_PLANES" "$cond" "$rep" "$metric" "$v"
		done < "$series.tsv"
		csv "$t" failover ib_write_bw 65536 1 "$TP_PLANES" "plane$plane" "$rep" run_s "$fail_t"
		grep -iqE 'error|fail' "$series" && csv "$t" failover ib_write_bw 65536 1 "$TP_PLANES" "plane$plane" "$rep" error "" "$(grep -iE 'error|fail' "$series" | head -2 | tr '\n' ' ')"
		note "$t failover rep$rep: $(grep -c ^host_MiBps "$series.tsv") host samples, plane $plane down at ${down_at}s, up at ${up_at}s"
		tp_down "$t"
		sleep 1
	done
}

# congestion T RATE_KBIT: two flows A -> B through one ECN-marking RED
# bottleneck (tbf at RATE on plane 0 of host A); fairness and the queue.
congestion() {
	local t=$1 rate=$2 rep qlog a b i v pid flows
	on_both "sysctl -qw net.ipv4.tcp_ecn=1"
	for ((rep = 1; rep <= reps; rep++)); do
		tp_up "$t" 1 || { csv "$t" congestion - - - - - - unavailable "" "$TP_REASON"; tp_down "$t"; break; }
		tc_ecn_bottleneck 0 "$rate" || { csv "$t" congestion - - - - - - error "" "tc red ecn failed"; tp_down "$t"; break; }
		qlog=$(raw_name "$t congestion qdisc rep$rep")
		(while :; do tc -s -j qdisc show dev "$PLANE0_DEV"; echo; sleep 0.5; done > "$qlog") &
		pid=$!
		flows=()
		for i in 0 1; do
			if [ "$t" = tcp ]; then
				ip_run 0 "$cong_t" 1 $((5201 + i)) > "$BOUT/.cg$i" &
			else
				(PT_PORT=$((18515 + i)) && pt_run ib_write_bw $((cong_t + 25)) -s 65536 -D "$cong_t" -f 1 -Q 1 -t 4 && pt_bw 65536 > "$BOUT/.cg$i" || : > "$BOUT/.cg$i") &
			fi
			flows+=($!)
		done
		wait "${flows[@]}"
		sleep 0.2
		kill "$pid" 2> /dev/null
		wait "$pid" 2> /dev/null
		tc -s -j qdisc show dev "$PLANE0_DEV" > "$qlog.final"
		a=$(cat "$BOUT/.cg0") b=$(cat "$BOUT/.cg1")
		for i in 0 1; do
			v=$(cat "$BOUT/.cg$i")
			if [ -n "$v" ]; then csv "$t" congestion ib_write_bw 65536 1 1 "flow$i;rate=${rate}kbit" "$rep" MiBps "$v"; else csv "$t" congestion ib_write_bw 65536 1 1 "flow$i;rate=${rate}kbit" "$rep" error "" "flow $i failed"; fi
		done
		python3 - "$qlog" "$qlog.final" << 'PY' | while read -r m v; do csv "$t" congestion red 65536 1 1 "rate=${rate}kbit" "$rep" "$m" "$v"; done
import json, sys
samples = []
for line in open(sys.argv[1]):
    line = line.strip()
    if not line:
        continue
    try:
        for q in json.loads(line):
            if q.get("kind") == "red":
                samples.append((q.get("backlog", 0), q.get("qlen", 0)))
    except ValueError:
        pass
fin = [q for q in json.load(open(sys.argv[2])) if q.get("kind") == "red"]
busy = [s for s in samples if s[1] > 0] or samples or [(0, 0)]
print("queue_avg_bytes", round(sum(s[0] for s in busy) / len(busy)))
print("queue_max_bytes", max(s[0] for s in samples or [(0, 0)]))
print("queue_avg_pkts", round(sum(s[1] for s in busy) / len(busy), 1))
if fin:
    x = fin[0].get("options", {})
    st = fin[0]
    for k in ("marked", "early", "pdrop", "other"):
        v = st.get(k, x.get(k))
        if v is not None:
            print(k, v)
    print("sent_pkts", st.get("packets", 0))
    print("drops", st.get("drops", 0))
PY
		note "$t congestion rep$rep: flows ${a:-error} / ${b:-error} MiB/s"
		tc qdisc del dev "$PLANE0_DEV" root 2> /dev/null
		tp_down "$t"
	done
	on_both "sysctl -qw net.ipv4.tcp_ecn=2"
}

# rcn_incast T RATE_KBIT: the RCN incast of selftests/rcn.sh as a benchmark
# point: 4 flows A -> B (4 ib_write_bw of one QP, -t 16; TCP: iperf3 -P 4)
# through one bottleneck, tbf at RATE + RED/ECN (tc_rcn_bottleneck) on
# plane 0 of host A, for rcn_t seconds. MetaRoCE twice: RCN on (host B's
# capacity knob set to RATE: virtio-net reports no link speed) and off.
# Samples: each flow's MiB/s (cond "rcn=MODE;flowI"), and of the queue
# (cond "rcn=MODE"; tc -s -j every 0.5 s, on the sampler's clock):
# queue_avg_bytes and queue_max_bytes over the whole run (the first RTT
# included), drops (tbf's, its RED child's included) and marked (RED's CE
# marks) at the end, link_MiBps: the bytes tbf sent in the middle half of
# the run (all flows running) over that time, which no tool's clock
# enters (perftest's is TSC-based, which TCG guests do not keep to).
rcn_incast() {
	local t=$1 rate=$2 rep mode modes=(n/a) qlog i v pid flows knobs=/sys/class/infiniband/mr0/metaroce
	[ "$t" = metaroce ] && modes=(on off)
	on_both "sysctl -qw net.ipv4.tcp_ecn=1"
	for ((rep = 1; rep <= reps; rep++)); do
		for mode in "${modes[@]}"; do
			tp_up "$t" 1 || { csv "$t" rcn - - - - "rcn=$mode" "$rep" unavailable "" "$TP_REASON"; tp_down "$t"; break 2; }
			if [ "$mode" = on ]; then
				peer "echo 1 > $knobs/rcn && echo $((rate / 1000)) > $knobs/rcn_capacity_mbps" > /dev/null
			elif [ "$mode" = off ]; then
				peer "echo 0 > $knobs/rcn" > /dev/null
			fi || { csv "$t" rcn - - - - "rcn=$mode" "$rep" error "" "cannot set host B's RCN knobs"; tp_down "$t"; continue; }
			tc_rcn_bottleneck 0 "$rate" || { csv "$t" rcn - - - - "rcn=$mode" "$rep" error "" "tc tbf + red ecn failed"; tp_down "$t"; break 2; }
			qlog=$(raw_name "$t rcn $mode qdisc rep$rep")
			(while :; do printf '%s ' "${EPOCHREALTIME/[.,]/}"; tc -s -j qdisc show dev "$PLANE0_DEV"; echo; sleep 0.5; done > "$qlog") &
			pid=$!
			flows=()
			if [ "$t" = tcp ]; then
				ip_streams 0 "$rcn_t" 4 > "$BOUT/.rcn" &
				flows+=($!)
			else
				for i in 0 1 2 3; do
					(PT_PORT=$((18530 + i)) && pt_run ib_write_bw $((rcn_t + 25)) -s 65536 -D "$rcn_t" -f 1 -Q 1 -t 16 && pt_bw 65536 > "$BOUT/.rcn$i" || : > "$BOUT/.rcn$i") &
					flows+=($!)
				done
			fi
			wait "${flows[@]}"
			kill "$pid" 2> /dev/null
			wait "$pid" 2> /dev/null
			[ "$t" = tcp ] && { for i in 0 1 2 3; do sed -n "$((i + 1))p" "$BOUT/.rcn" > "$BOUT/.rcn$i"; done; }
			for i in 0 1 2 3; do
				v=$(cat "$BOUT/.rcn$i")
				if [ -n "$v" ]; then
					csv "$t" rcn ib_write_bw 65536 1 1 "rcn=$mode;flow$i;rate=${rate}kbit" "$rep" MiBps "$v"
				else
					csv "$t" rcn ib_write_bw 65536 1 1 "rcn=$mode;flow$i;rate=${rate}kbit" "$rep" error "" "flow $i failed"
				fi
			done
			python3 "$BENCH_DIR/qdisc_series.py" "$qlog" | while read -r m v; do
				csv "$t" rcn tc - 4 1 "rcn=$mode;rate=${rate}kbit" "$rep" "$m" "$v"
			done
			note "$t rcn $mode rep$rep: flows $(cat "$BOUT/.rcn0" "$BOUT/.rcn1" "$BOUT/.rcn2" "$BOUT/.rcn3" | paste -sd' ') MiB/s; $(python3 "$BENCH_DIR/qdisc_series.py" "$qlog" | paste -sd' ')"
			tc qdisc del dev "$PLANE0_DEV" root 2> /dev/null
			tp_down "$t"
		done
	done
	on_both "sysctl -qw net.ipv4.tcp_ecn=2"
}

# collectives T: all-reduce and all-to-all completion time by size, lossless
# and at BENCH_COLL_LOSS% netem loss on every plane of both hosts, with
# BENCH_COLL_RANKS ranks on each host: collectives.py under Open MPI
# (mpi_coll.sh; README "Collectives"). RoCE devices only (MetaRoCE vs rxe):
# UCX has no iWARP, TCP has no verbs. The first Open MPI path of
# BENCH_COLL_PATHS that runs a small job on the device is measured; the
# samples name it (metric path).
coll_ranks=${BENCH_COLL_RANKS:-2}
coll_loss=${BENCH_COLL_LOSS:-1}
coll_paths=${BENCH_COLL_PATHS:-ucx openib}
collectives() {
	local t=$1 dev gid pgid path="" p out tried="" cond loss rc n
	case $t in
	rxe) dev=rxe0 ;;
	metaroce) dev=mr0 ;;
	*) csv "$t" collectives - - - - - - skipped "" "collectives compare the RoCE devices (MetaRoCE and rxe) only"; return ;;
	esac
	tp_up "$t" "$main_planes" || { csv "$t" collectives - - - - - - unavailable "" "$TP_REASON"; tp_down "$t"; return; }
	# UCX and the openib BTL take one GID index for every rank; the
	# hosts' are the same unless the GID tables differ.
	gid=${TP_CLI##*-x } pgid=${TP_SRV##*-x }
	[ "$gid" = "$pgid" ] || gid=auto
	n=$((2 * coll_ranks))
	for p in $coll_paths; do
		out=$(raw_name "$t collectives gate $p")
		coll_job "$p" "$dev" "$gid" 240 "$out" --sizes 8,65536 --max-iters 2
		rc=$?
		if [ $rc = 0 ] && grep -q '^coll-end' "$out"; then
			path=$p
			break
		fi
		if [ $rc = 124 ]; then
			tried+="$p: no answer in 240 s; "
		else
			tried+="$p: exit $rc $(grep -iE 'error|fail|unable|abort' "$out" | head -2 | tr '\n' ' '); "
		fi
	done
	if [ -z "$path" ]; then
		csv "$t" collectives - - "$n" "$TP_PLANES" - - unavailable "" "no Open MPI path ran a small job on $dev: $tried(raw/*collectives_gate*)"
		note "$t collectives: no Open MPI path works: $tried"
		tp_down "$t"
		return
	fi
	csv "$t" collectives - - "$n" "$TP_PLANES" - - path "$path" "${tried:+after $tried}"
	note "$t collectives over Open MPI path $path, $n ranks"
	for loss in 0 "$coll_loss"; do
		cond=loss=$loss
		if [ "$loss" != 0 ]; then
			on_both "tc_loss_all $loss" || { note "netem loss $loss failed"; continue; }
		fi
		out=$(raw_name "$t collectives $cond")
		coll_job "$path" "$dev" "$gid" "$coll_tmo" "$out" --sizes "$coll_sizes"
		rc=$?
		coll_record "$t" "$n" "$TP_PLANES" "$cond" "$coll_sizes" "$rc" "$coll_tmo" "$out"
		note "$t collectives $cond: $(grep -c '^coll ' "$out") points, exit $rc"
		on_both tc_clear
	done
	tp_down "$t"
}

# jumbo T (issue #11 item 5): ib_write_bw of 64 KiB and 1 MiB, 1 QP (TCP:
# one iperf3 flow), with every plane of both hosts at MTU 1500 and then at
# 9000 (cond mtu=BYTES): MetaRoCE carries the payload its planes agree
# (protocol.md 1.8: 1,412 and 8,912 bytes) where rxe and siw keep the IB
# MTU (1024, 4096) and TCP its MSS. The planes' MTU is set before the
# transport comes up and given back after.
jumbo_sizes=(65536 1048576)
jumbo() {
	local t=$1 mtu size rep orig
	orig=$(cat "/sys/class/net/$PLANE0_DEV/mtu")
	for mtu in 1500 9000; do
		on_both "mtu_all $mtu" || { csv "$t" jumbo - - - - "mtu=$mtu" - error "" "ip link set mtu $mtu failed"; continue; }
		tp_up "$t" "$([ "$t" = tcp ] && echo 1 || echo "$main_planes")" ||
			{ csv "$t" jumbo - - - - "mtu=$mtu" - unavailable "" "$TP_REASON"; tp_down "$t"; continue; }
		for size in "${jumbo_sizes[@]}"; do
			[ "$t" = tcp ] && [ "$size" != 65536 ] && continue
			for ((rep = 1; rep <= reps; rep++)); do
				bw_point "$t" jumbo ib_write_bw "$size" 1 "$TP_PLANES" "mtu=$mtu" "$rep"
			done
		done
		tp_down "$t"
	done
	on_both "mtu_all $orig"
}

# ---------------------------------------------------------------- the run
# Availability first: a transport that cannot come up is "not available"
# with its reason in every table.
# The throughput scenario (and its lossless subset) runs in passes, one per
# repetition: every transport runs its points of repetition r before any
# runs r + 1, in the given order on odd passes and reversed on even ones.
# Why: on this rig one transport's samples taken minutes or hours apart
# differ by tens of percent (rxe's 64 KiB write: 10.4-13.3 MiB/s in one
# run's block, 15.7-17.9 in the next run's, Documentation/benchmarks/
# partial-2026-12-07c and -07d), and with each transport's repetitions in
# one block, a ratio between transports compared one stretch of the run
# with another. In passes, every transport's median draws on every stretch.
read -r -a order_given <<< "$transports"
for ((pass = 1; pass <= (per_pass > 0 ? per_pass : 1); pass++)); do
	order=("${order_given[@]}")
	if ((pass % 2 == 0)); then
		order=()
		for ((i = ${#order_given[@]} - 1; i >= 0; i--)); do order+=("${order_given[i]}"); done
	fi
	for t in "${order[@]}"; do
		[ "$pass" = 1 ] || [ -n "${avail[$t]:-}" ] || continue
		want_planes=$([ "$t" = tcp ] && echo 1 || echo "$main_planes")
		if ! tp_up "$t" "$want_planes"; then
			if [ "$pass" = 1 ]; then
				reason[$t]=$TP_REASON
				note "$t: NOT available: $TP_REASON"
				csv "$t" availability - - - - - - unavailable "" "$TP_REASON"
			else
				# Up in pass 1, not now: this pass's samples are missing
				# (the report's n counts fewer), and the report says why.
				note "$t: pass $pass: could not come up: $TP_REASON"
				csv "$t" throughput - - - - - "$pass" error "" "pass $pass: could not come up: $TP_REASON"
			fi
		elif [ "$pass" != 1 ] && [ "$TP_PLANES" != "${planes_of[$t]}" ]; then
			# Samples are labelled with the planes of pass 1: a pass on
			# another count would mix two configurations in one row.
			note "$t: pass $pass: up on $TP_PLANES plane(s), not ${planes_of[$t]}: skipped"
			csv "$t" throughput - - - - - "$pass" error "" "pass $pass: up on $TP_PLANES plane(s), not ${planes_of[$t]}: skipped"
		else
			if [ "$pass" = 1 ]; then
				avail[$t]=1 planes_of[$t]=$TP_PLANES
				note "$t: available, $TP_PLANES plane(s)"
				csv "$t" availability - - - "$TP_PLANES" - - available 1
			fi
			if want throughput; then
				throughput_latency_loss "$t" "$pass"
			elif want lossless; then
				# The throughput scenario's lossless points alone.
				lossless "$t" "$pass"
			elif [ "$t" != tcp ] && { want scaling || want congestion || want scale; }; then
				# The rate-limited runs take their rates from the CPU ceiling
				# below: measure it when the throughput scenario does not.
				bw_point "$t" throughput ib_write_bw 65536 1 "${planes_of[$t]}" loss=0 1
			fi
		fi
		tp_down "$t"
		on_both tc_clear
	done
done

# The CPU ceiling: the slowest RDMA transport's lossless 64 KiB write. Each
# plane is limited to 1/8 of it, well below the 1/4 that would let 4 planes
# reach the CPU limit.
ceiling=$(awk -F, '$2 == "throughput" && $3 == "ib_write_bw" && $4 == 65536 && $5 == 1 && $9 == "MiBps" && $1 != "tcp" { print $1, $10 }' "$CSV" |
	sort -k1,1 | awk '{ v[$1] = v[$1] " " $2 } END { for (k in v) print v[k] }' |
	while read -r line; do tr ' ' '\n' <<< "$line" | median; done | sort -g | head -1)
rate=${BENCH_PLANE_RATE:-$(awk -v c="${ceiling:-1}" 'BEGIN { r = int(c * 1048576 * 8 / 1000 / 8); print (r < 256) ? 256 : r }')}
note "CPU ceiling (slowest RDMA transport, lossless 64 KiB write): ${ceiling:-unknown} MiB/s; per-plane rate ${rate} kbit/s"
csv all scaling - - - - "ceiling" - ceiling_MiBps "${ceiling:-}"
csv all scaling - - - - "ceiling" - plane_rate_kbit "$rate"
# The scale run's one link: 1/4 of the ceiling, unless BENCH_SCALE_RATE
# says. Fast enough that 64 messages of 4 KiB do not fill it at 20 ms RTT
# once the ceiling passes 50 MiB/s (the point then needs the lifted window;
# the report shows which do), slow enough that the CPU, which 4 KiB
# messages load more than the ceiling's 64 KiB ones, is not the limit.
scale_rate=${BENCH_SCALE_RATE:-$(awk -v c="${ceiling:-1}" 'BEGIN { r = int(c * 1048576 * 8 / 1000 / 4); print (r < 256) ? 256 : r }')}
csv all scale - - - - "ceiling" - rate_kbit "$scale_rate"

for t in $transports; do
	[ -n "${avail[$t]:-}" ] || continue
	want scaling && scaling "$t" "$rate"
	want failover && failover "$t"
	want congestion && congestion "$t" "$rate"
	want scale && scale "$t" "$scale_rate"
	want rcn && rcn_incast "$t" "${BENCH_RCN_RATE:-10000}"
	want jumbo && jumbo "$t"
	on_both tc_clear
done

# Collectives last: they bring their own transports up (RoCE only), and
# each host gets a name of its own for them (Open MPI tells its nodes and
# their session directories apart by name; the rig's guests share one).
if want collectives; then
	name_a=$(hostname) name_b=$(peer hostname)
	hostname coll-a && peer "hostname coll-b" > /dev/null
	for t in $transports; do
		[ -n "${avail[$t]:-}" ] || continue
		collectives "$t"
		on_both tc_clear
	done
	hostname "$name_a" && peer "hostname $name_b" > /dev/null
fi

note "suite finished in $(($(date +%s) - start_s)) s"
csv all suite - - - - - - duration_s $(($(date +%s) - start_s))
exit 0
