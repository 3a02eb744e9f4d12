# SPDX-License-Identifier: GPL-2.0
# Benchmark helpers (sourced on host A by suite.sh, and on host B through
# the peer channel for the tc helpers). Every sample goes to
# $METAROCE_OUT/bench/samples.csv; every tool's raw output to
# $METAROCE_OUT/bench/raw/.
# shellcheck source=/dev/null
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BOUT=$METAROCE_OUT/bench
CSV=$BOUT/samples.csv
RAW=$BOUT/raw

# ---------------------------------------------------------------- output
csv_init() {
	mkdir -p "$RAW"
	[ -f "$CSV" ] || echo "transport,scenario,test,size,qps,planes,cond,rep,metric,value,note" > "$CSV"
}
# csv TRANSPORT SCENARIO TEST SIZE QPS PLANES COND REP METRIC VALUE [NOTE]
csv() {
	local note=${11:-}
	note=${note//,/;}
	note=${note//$'\n'/ }
	echo "$1,$2,$3,$4,$5,$6,$7,$8,$9,${10},$note" >> "$CSV"
}
note() { echo "bench: $*"; echo "$(date +%T) $*" >> "$BOUT/log.txt"; }
raw_name() { local n="$*"; echo "$RAW/$(date +%H%M%S)-${n//[^A-Za-z0-9_.%-]/_}"; }

# report_check: for the host checks (collcheck, sharecheck, costcheck):
# report.py over $BOUT with the venv's Python, its output in
# $BOUT/report.log, and an "ok" line for it; status 2, and a skip line,
# without matplotlib (selftests/rig/deps.sh installs it), 1 if it failed.
report_check() {
	local venv=${METAROCE_VENV:-/opt/metaroce-venv}
	if ! "$venv/bin/python" -c 'import matplotlib' 2> /dev/null; then
		echo "# skip: report.py (no matplotlib in $venv)"
		return 2
	fi
	"$venv/bin/python" "$BENCH_DIR/report.py" --dir "$BOUT" > "$BOUT/report.log" 2>&1
	local rc=$?
	expect "report.py runs" "$rc" 0
	[ "$rc" = 0 ] || { sed 's/^/#   /' "$BOUT/report.log" | tail -20; return 1; }
}

# ---------------------------------------------------------------- both hosts
# on_both 'CMD': CMD (a bash string that may use these helpers and the rig's
# PLANE* variables) on host A and on host B.
on_both() {
	bash -c ". $BENCH_DIR/lib.sh; $1" || return 1
	peer ". $BENCH_DIR/lib.sh; $1"
}
plane_dev() { local v=PLANE${1}_DEV; echo "${!v}"; }
plane_ip() { local v=PLANE${1}_IP; echo "${!v}"; }
peer_plane_ip() { local v=PEER_PLANE${1}_IP; echo "${!v}"; }

# Helpers for on_both (run on the host they are called on).
tc_clear() { # all planes
	local p
	for ((p = 0; p < METAROCE_PLANES; p++)); do
		tc qdisc del dev "$(plane_dev $p)" root 2> /dev/null
	done
	return 0
}
mtu_all() { # BYTES: every plane's MTU
	local p
	for ((p = 0; p < METAROCE_PLANES; p++)); do
		ip link set dev "$(plane_dev $p)" mtu "$1" || return 1
	done
}
tc_loss_all() { # PERCENT: netem loss on every plane's egress
	local p
	for ((p = 0; p < METAROCE_PLANES; p++)); do
		tc qdisc replace dev "$(plane_dev $p)" root netem loss "$1%" limit 10000 || return 1
	done
}
tc_jitter() { # PLANE DELAY JITTER: netem delay with jitter (reorders) on one plane
	tc qdisc replace dev "$(plane_dev "$1")" root netem delay "$2" "$3" limit 10000
}
# The queue holds 1 MiB: more than the 4 x 64 KiB that perftest -t 4 keeps
# in flight, so a transport without congestion control (rxe) is limited by
# the rate, not by tail drops it cannot recover from.
tc_rate_all() { # KBIT: tbf on every plane's egress
	local p burst limit=1048576
	burst=$(($1 * 1000 / 8 / 50)) # 20 ms of tokens
	((burst < 4096)) && burst=4096
	for ((p = 0; p < METAROCE_PLANES; p++)); do
		tc qdisc replace dev "$(plane_dev $p)" root tbf rate "${1}kbit" burst "$burst" limit "$limit" || return 1
	done
}
# tc_delay_rate_all DELAY KBIT: every plane's egress delayed by DELAY
# (netem, one way; on both hosts the RTT is twice it) under a tbf at KBIT:
# a long-haul link of that rate. netem is tbf's queue: the packets of the
# delay line and those waiting for tokens, 10,000 at most (more than the
# rates and RTTs of the scale scenario keep in flight). The burst holds 20
# ms of tokens, at least 16 KiB (tbf drops a packet larger than its burst).
tc_delay_rate_all() {
	local p dev burst
	burst=$(($2 * 1000 / 8 / 50))
	((burst < 16384)) && burst=16384
	for ((p = 0; p < METAROCE_PLANES; p++)); do
		dev=$(plane_dev $p)
		tc qdisc del dev "$dev" root 2> /dev/null
		tc qdisc add dev "$dev" root handle 1: tbf rate "${2}kbit" burst "$burst" limit 1048576 &&
			tc qdisc add dev "$dev" parent 1:1 handle 10: netem delay "$1" limit 10000 || return 1
	done
}
# tc_ecn_bottleneck PLANE KBIT: tbf at KBIT with a RED/ECN queue under it.
tc_ecn_bottleneck() {
	local dev bps min max limit burst
	dev=$(plane_dev "$1")
	bps=$(($2 * 1000 / 8))
	min=$((bps / 50)) # 20 ms
	((min < 4500)) && min=4500
	max=$((min * 3))
	limit=$((max * 4))
	burst=$(((2 * min + max) / 3000 + 1))
	tc qdisc del dev "$dev" root 2> /dev/null
	tc qdisc add dev "$dev" root handle 1: tbf rate "${2}kbit" burst 4096 limit "$limit" &&
		tc qdisc add dev "$dev" parent 1:1 handle 10: red limit "$limit" min "$min" max "$max" \
			avpkt 1000 burst "$burst" probability 0.1 bandwidth "${2}kbit" ecn
}

# tc_rcn_bottleneck PLANE KBIT: selftests/rcn.sh's bottleneck: tbf at KBIT
# with a RED child marking CE between 15 and 45 KB of average queue, 160 KB
# hard limit (the RCN incast, suite.sh `rcn`).
RCN_RED_MIN=15000
tc_rcn_bottleneck() {
	local dev
	dev=$(plane_dev "$1")
	tc qdisc del dev "$dev" root 2> /dev/null
	tc qdisc add dev "$dev" root handle 1: tbf rate "${2}kbit" burst 16kb latency 200ms &&
		tc qdisc add dev "$dev" parent 1:1 handle 10: red limit 160000 min $RCN_RED_MIN max 45000 \
			avpkt 1100 burst 23 probability 0.2 bandwidth "${2}kbit" ecn
}

# ---------------------------------------------------------------- statistics
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) exit 1; print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# plane_tx_bytes PLANES: the bytes this host has sent on planes 0 to
# PLANES-1, one line. The management link is apart, so the planes carry
# the test's traffic and little else (ARP, neighbour discovery).
PLANE_SYSFS=${PLANE_SYSFS:-/sys/class/net}
plane_tx_bytes() {
	local p out=""
	for ((p = 0; p < $1; p++)); do
		out+="$(cat "$PLANE_SYSFS/$(plane_dev $p)/statistics/tx_bytes") "
	done
	echo "${out% }"
}
# plane_shares T SCENARIO TEST SIZE QPS PLANES COND REP BEFORE AFTER: one
# sample plane{k}_share per plane, the percent of the bytes sent on all of
# them between the readings BEFORE and AFTER (plane_tx_bytes) that plane k
# carried (issue #14 item 3: an even spread is 100/PLANES each). Nothing
# when nothing was sent.
plane_shares() {
	local k share bytes total
	while read -r k share bytes total; do
		csv "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "plane${k}_share" "$share" "$bytes of $total bytes host A sent on the planes"
	done < <(awk -v b="$9" -v a="${10}" 'BEGIN {
		n = split(b, x, " "); split(a, y, " ")
		for (k = 1; k <= n; k++) { d[k] = y[k] - x[k]; t += d[k] }
		if (t > 0) for (k = 1; k <= n; k++) printf "%d %.3f %d %d\n", k - 1, 100 * d[k] / t, d[k], t
	}')
}

# ---------------------------------------------------------------- transports
# tp_up NAME PLANES: bring transport NAME up on both hosts, using up to
# PLANES planes. Sets TP_PLANES (planes it really uses), TP_CLI/TP_SRV
# (perftest device arguments on A/B) and TP_TARGET (what the client
# connects to). On failure returns 1 with the reason in TP_REASON.
# NAME: rxe | siw | metaroce | tcp.
TP_REASON=""
wait_gid_a() { local i; for i in $(seq 50); do gid_index "$1" "$2" && return 0; sleep 0.2; done; return 1; }
wait_gid_b() { peer ". $METAROCE_REPO/selftests/lib.sh; for i in \$(seq 50); do gid_index $1 $2 && exit 0; sleep 0.2; done; exit 1"; }

tp_up() {
	local name=$1 planes=$2 gid pgid out
	TP_REASON="" TP_PLANES=1
	case $name in
	tcp) TP_PLANES=$planes; return 0 ;;
	rxe)
		out=$(modprobe rdma_rxe 2>&1 && rdma link add rxe0 type rxe netdev "$PLANE0_DEV" 2>&1) ||
			{ TP_REASON="rxe on host A: $out"; return 1; }
		out=$(peer "modprobe rdma_rxe && rdma link add rxe0 type rxe netdev \$PLANE0_DEV" 2>&1) ||
			{ TP_REASON="rxe on host B: $out"; return 1; }
		gid=$(wait_gid_a rxe0 "$PLANE0_IP") || { TP_REASON="rxe0: no RoCE v2 GID for $PLANE0_IP"; return 1; }
		pgid=$(wait_gid_b rxe0 "$PEER_PLANE0_IP") || { TP_REASON="rxe0 on B: no RoCE v2 GID"; return 1; }
		# Out-of-band exchange over the management link, so that netem and
		# link-down on the planes never hit perftest's own TCP connection.
		TP_CLI="-d rxe0 -x $gid" TP_SRV="-d rxe0 -x $pgid" TP_TARGET=$METAROCE_PEER_ADDR
		;;
	siw)
		out=$(modprobe siw 2>&1 && rdma link add siw0 type siw netdev "$PLANE0_DEV" 2>&1) ||
			{ TP_REASON="siw on host A: $out"; return 1; }
		out=$(peer "modprobe siw && rdma link add siw0 type siw netdev \$PLANE0_DEV" 2>&1) ||
			{ TP_REASON="siw on host B: $out"; return 1; }
		# iWARP connects through rdma_cm only (-R), over the plane itself.
		TP_CLI="-d siw0 -R" TP_SRV="-d siw0 -R" TP_TARGET=$PEER_PLANE0_IP
		;;
	metaroce) mr_up "$planes" || return 1 ;;
	*) TP_REASON="unknown transport $name"; return 1 ;;
	esac
}

tp_down() {
	case $1 in
	tcp) ;;
	rxe) rdma link delete rxe0 2> /dev/null; peer "rdma link delete rxe0" > /dev/null 2>&1 ;;
	siw) rdma link delete siw0 2> /dev/null; peer "rdma link delete siw0" > /dev/null 2>&1 ;;
	metaroce) mr_down ;;
	esac
	return 0
}

# MetaRoCE. The ONE place that knows how a MetaRoCE device is made:
# `rdma link add mr0 type metaroce netdev PLANE0` creates mr0 on its first
# plane, the same command with another plane's netdev adds that plane
# (README "Several planes"); everything else (scaling, failover) follows
# TP_PLANES.
mr_add_plane() { # HOST(A|B) PLANE -> 0 if plane PLANE was added to mr0
	if [ "$1" = A ]; then
		rdma link add mr0 type metaroce netdev "$(plane_dev "$2")" > /dev/null 2>&1
	else
		peer "rdma link add mr0 type metaroce netdev \$PLANE${2}_DEV" > /dev/null 2>&1
	fi
}
mr_up() {
	local planes=$1 out gid pgid p
	out=$(rdma link add mr0 type metaroce netdev "$PLANE0_DEV" 2>&1) ||
		{ TP_REASON="rdma link add mr0 type metaroce on host A: $out"; return 1; }
	out=$(peer "rdma link add mr0 type metaroce netdev \$PLANE0_DEV" 2>&1) ||
		{ TP_REASON="rdma link add mr0 type metaroce on host B: $out"; return 1; }
	TP_PLANES=1
	for ((p = 1; p < planes; p++)); do
		mr_add_plane A "$p" && mr_add_plane B "$p" || break
		TP_PLANES=$((p + 1))
	done
	ibv_devices 2> /dev/null | grep -qw mr0 ||
		{ TP_REASON="the kernel device exists but libibverbs does not list mr0 (MetaRoCE provider not installed?)"; return 1; }
	gid=$(wait_gid_a mr0 "$PLANE0_IP") || { TP_REASON="mr0 has no RoCE v2 GID for $PLANE0_IP"; return 1; }
	pgid=$(wait_gid_b mr0 "$PEER_PLANE0_IP") || { TP_REASON="mr0 on host B has no RoCE v2 GID"; return 1; }
	TP_CLI="-d mr0 -x $gid" TP_SRV="-d mr0 -x $pgid" TP_TARGET=$METAROCE_PEER_ADDR
	# The gate: a short ib_write_bw must work, else MetaRoCE is "not available".
	# A run whose duration clock failed (iterations, but 0.00 MB/s: TCG) is
	# tried again; twice is chance, three times is not.
	local try
	for try in 1 2 3; do
		pt_run ib_write_bw 20 -s 65536 -D 3 -f 1 -Q 1 ||
			{ TP_REASON="ib_write_bw -d mr0 fails: $(grep -vE '^ *$|^-+$' "$PT_OUT" | tail -3 | tr '\n' ' ')"; return 1; }
		pt_bw 65536 > /dev/null && return 0
		[ -n "$(pt_err)" ] || break
	done
	TP_REASON="ib_write_bw -d mr0 printed no bandwidth ($try tries: $(pt_err))"
	return 1
}
mr_down() {
	rdma link delete mr0 2> /dev/null
	peer "rdma link delete mr0" > /dev/null 2>&1
	return 0
}

# ko_load KO [OPTS]: the module built at KO (for the running kernel) loaded
# afresh on both hosts, with module parameters OPTS (ko_ab.sh, diagnostics).
ko_load() {
	local cmd="rdma link delete mr0 2> /dev/null; rmmod metaroce 2> /dev/null;
		cp $1 /lib/modules/\$(uname -r)/extra/metaroce.ko && depmod -a && modprobe metaroce ${2:-}"
	bash -c "$cmd" && peer "$cmd"
}

# ---------------------------------------------------------------- cost
# host_cost (on the host it runs on): "TX_PACKETS RETX RTO RTO_LOST": the
# packets sent on the planes' netdevs, and mr0's retransmissions,
# rto_timeouts and rto_losses (0 without mr0 or without the counter).
COST_HW_COUNTERS=${COST_HW_COUNTERS:-/sys/class/infiniband/mr0/ports/1/hw_counters}
host_cost() {
	local p d txp=0 retx=0 rto=0 rto_lost=0 hc=$COST_HW_COUNTERS
	for ((p = 0; p < METAROCE_PLANES; p++)); do
		d=$PLANE_SYSFS/$(plane_dev "$p")/statistics
		[ -d "$d" ] || continue
		txp=$((txp + $(< "$d/tx_packets")))
	done
	[ -r "$hc/retransmissions" ] && retx=$(< "$hc/retransmissions") rto=$(< "$hc/rto_timeouts")
	[ -r "$hc/rto_losses" ] && rto_lost=$(< "$hc/rto_losses")
	echo "$txp $retx $rto $rto_lost"
}
# cost_window START SECS WAIT: cost_window.py on this host's planes (exec:
# a kill of the background job reaches it).
cost_window() {
	local p devs=()
	for ((p = 0; p < METAROCE_PLANES; p++)); do devs+=("$(plane_dev "$p")"); done
	exec /usr/bin/python3 "$BENCH_DIR/cost_window.py" "$1" "$2" "$3" "${devs[@]}"
}
# cost_begin START SECS WAIT / cost_end T SCENARIO TEST SIZE QPS PLANES
# COND REP: what a point cost both hosts (issue #11: CPU per byte, ACK
# frames, timer retransmissions), as samples. While data moves, in a
# window of SECS seconds from START seconds after the data began (each
# host's cost_window, started before the client so that its start-up is
# not counted; none when the point moved no data within WAIT seconds):
#   cpu_ms_per_MiB  both guests' busy CPU time per MiB the data sender put
#                   on its planes (frames with headers: one yardstick for
#                   every transport); the sum of each host's busy share of
#                   its window over the sender's MiB/s in its window
#   busy_pct_A, busy_pct_B  each guest's busy share of its window
# Over the whole point, from both hosts' host_cost before and after it:
#   back_per_data   frames the data receiver sent per frame the data sender
#                   sent (a one-way transfer: its ACKs; RDMA only, as
#                   TCP's segmentation offload sends many segments as one
#                   frame of the netdev's count)
#   retx_per_data, rto_per_data, rto_loss_per_data  MetaRoCE: the
#                   sender's retransmitted packets, retransmission timeouts
#                   and packets the timeouts declared lost (the timer-driven
#                   retransmissions' upper bound) per frame it sent
# The data sender is host A, except for ib_read_bw (B answers the reads).
cost_begin() {
	COST_A=$(host_cost)
	COST_B=$(peer ". $BENCH_DIR/lib.sh; host_cost" 2> /dev/null)
	COST_WIN_A=$BOUT/.cost_window_a
	cost_window "$1" "$2" "$3" > "$COST_WIN_A" 2>&1 &
	COST_WIN_PID=$!
	COST_WIN_JOB=$(peer_spawn ". $BENCH_DIR/lib.sh; cost_window $1 $2 $3" 2> /dev/null)
}
# cost_abort: a point that failed leaves no samples and no sampler.
cost_abort() {
	kill "$COST_WIN_PID" 2> /dev/null
	wait "$COST_WIN_PID" 2> /dev/null
	[ -n "$COST_WIN_JOB" ] || return 0
	peer "pkill -f -- '[c]ost_window.py'" > /dev/null 2>&1
	peer_wait "$COST_WIN_JOB" 10 > /dev/null 2>&1
	return 0
}
cost_end() {
	local a b wa wb line fixed k v
	a=$(host_cost)
	b=$(peer ". $BENCH_DIR/lib.sh; host_cost" 2> /dev/null)
	# A window ends before the transfer does; a sampler still running
	# saw no transfer (a slow point: loss, a rate limit) and is stopped.
	wa="" wb=""
	if kill -0 "$COST_WIN_PID" 2> /dev/null; then
		kill "$COST_WIN_PID" 2> /dev/null
	else
		wa=$(tail -1 "$COST_WIN_A" 2> /dev/null)
	fi
	wait "$COST_WIN_PID" 2> /dev/null
	if [ -n "$COST_WIN_JOB" ]; then
		wb=$(peer_poll "$COST_WIN_JOB" 2 2> /dev/null | tail -1)
		if [ "$wb" = "peer: job $COST_WIN_JOB still running" ]; then
			cost_abort
			wb=""
		fi
	fi
	line=$(awk -v a0="$COST_A" -v a1="$a" -v b0="$COST_B" -v b1="$b" -v wa="$wa" -v wb="$wb" \
		-v hz="$(getconf CLK_TCK)" -v t="$1" -v test="$3" '
	BEGIN {
		if (split(wa, WA) == 7 && split(wb, WB) == 7 && WA[1] > 0 && WB[1] > 0) {
			ba = (WA[3] - WA[2]) / hz / WA[1]; bb = (WB[3] - WB[2]) / hz / WB[1]
			printf "busy_pct_A %.1f busy_pct_B %.1f ", 100 * ba, 100 * bb
			# MiB/s the sender sent in its window
			rate = (test == "ib_read_bw") ? (WB[7] - WB[6]) / WB[1] : (WA[7] - WA[6]) / WA[1]
			if (rate > 0) printf "cpu_ms_per_MiB %.2f ", (ba + bb) * 1000 / (rate / 1048576)
		}
		if (split(a0, A0) != 4 || split(a1, A1) != 4 || split(b0, B0) != 4 || split(b1, B1) != 4) exit
		# s: the data sender, r: the data receiver
		for (i = 1; i <= 4; i++) {
			s[i] = A1[i] - A0[i]; r[i] = B1[i] - B0[i]
			if (test == "ib_read_bw") { x = s[i]; s[i] = r[i]; r[i] = x }
		}
		if (t != "tcp" && s[1] > 0) printf "back_per_data %.4f ", r[1] / s[1]
		if (t == "metaroce" && s[1] > 0) printf "retx_per_data %.6f rto_per_data %.6f rto_loss_per_data %.6f ", s[2] / s[1], s[3] / s[1], s[4] / s[1]
		print ""
	}')
	fixed=("${@:1:8}")
	# shellcheck disable=SC2086
	set -- $line
	while [ $# -ge 2 ]; do
		k=$1 v=$2
		shift 2
		csv "${fixed[@]}" "$k" "$v"
	done
}

# ---------------------------------------------------------------- perftest
# pt_run TOOL TIMEOUT ARGS...: server on B, client on A, with the current
# transport's device arguments. Client output in $PT_OUT (the server's is
# appended). Returns the client's exit status.
# perftest times a run in CPU cycles, their rate fitted to gettimeofday over
# 200 short busy waits; a TCG scheduling gap among them spoils the fit
# ("Correlation coefficient r^2 < 0.9", "Can't produce a report") and that
# side exits after its traffic without the closing exchange, so its peer
# waits for its bound. That is perftest's failure, not the transport's: the
# point is run again, twice at most (as perftest_pair does in the
# selftests), each try's output kept in raw/ and the retry in the log.
PT_PORT=18515
pt_run() {
	local tool=$1 tmo=$2 job rc=1 try attempt t0 stall
	shift 2
	for attempt in 1 2 3; do
		t0=$(date +%s)
		PT_OUT=$(raw_name "$tool $*")
		[ "$attempt" -gt 1 ] && PT_OUT=$PT_OUT.try$attempt
		job=$(peer_spawn "timeout $tmo $tool $TP_SRV $* -p $PT_PORT -F 2>&1") ||
			{ echo "peer_spawn failed: $job" > "$PT_OUT"; return 1; }
		for try in 1 2 3 4 5 6 7 8; do
			sleep 1
			timeout "$tmo" "$tool" $TP_CLI "$@" -p "$PT_PORT" -F "$TP_TARGET" > "$PT_OUT" 2>&1
			rc=$?
			# Retry only while the server is not listening yet.
			grep -qE "Couldn't connect|Unable to perform rdma_client|Failed to connect|Connection refused" "$PT_OUT" || break
		done
		# A client that gave up on its clock leaves the server waiting
		# for the closing exchange: end that server (this port's only)
		# rather than wait for its bound.
		echo "--- server (host B)" >> "$PT_OUT"
		if grep -q "Can't produce a report" "$PT_OUT"; then
			local srv
			srv=$(peer_poll "$job" 10 2>&1)
			if grep -q "^peer: job $job still running" <<< "$srv"; then
				# [x]yz: the pattern does not match the shell that runs pkill.
				peer "pkill -f -- '[${tool:0:1}]${tool:1} .*-p $PT_PORT -F'" > /dev/null 2>&1
				srv=$(peer_wait "$job" 30 2>&1)
			fi
			echo "$srv" >> "$PT_OUT"
		else
			peer_wait "$job" $((tmo + 15)) >> "$PT_OUT" 2>&1
		fi
		grep -q "Can't produce a report" "$PT_OUT" && [ "$attempt" -lt 3 ] || break
		note "$tool $*: perftest's CPU clock estimate failed ($(grep -m1 "Correlation coefficient" "$PT_OUT")): once more"
	done
	# A VM's stall shown beside the run it marred (lib.sh longest_stall).
	stall=$(longest_stall "$t0")
	[ "$stall" = 0 ] || echo "--- the longest time either VM's user space did not run during the run: $stall ms" >> "$PT_OUT"
	return $rc
}
# pt_bw SIZE -> BW average [MiB/s] of the client output. A line with
# iterations but 0.00 MB/s is no sample: perftest's duration clock failed
# (seen in TCG guests for every transport: 88 iterations of 64 KiB in the
# 2 s window read 0.00), while a real stall counts no iterations.
pt_bw() {
	awk -v s="$1" '$1 == s && NF >= 5 && $4 ~ /^[0-9.]+$/ {
		if ($2 > 0 && $4 == 0) exit
		print $4; f = 1; exit
	} END { exit !f }' "$PT_OUT"
}
pt_lat() { # SIZE -> "typical(median) p99" [usec]
	awk -v s="$1" '$1 == s && NF >= 9 && $5 ~ /^[0-9.]+$/ { print $5, $8; f = 1; exit } END { exit !f }' "$PT_OUT"
}
pt_err() {
	awk '$2 ~ /^[0-9]+$/ && $2 > 0 && NF >= 5 && $4 == "0.00" { printf "perftest printed 0.00 MB/s for %s iterations (its duration clock failed) ", $2; exit }' "$PT_OUT"
	grep -vE '^ *$|^-+$' "$PT_OUT" | grep -iE 'error|fail|couldn|unable|not supported|timed out' | head -2 | tr '\n' ' '
}

# ---------------------------------------------------------------- QP details
# mr_qp_reading: of host A's MetaRoCE ib_write_bw RC QPs in RTS (the
# client's, the senders), "PATHS OUTSTANDING MSG_WINDOW" of the one with
# the most paths, from the driver's attributes in `rdma -dd resource show
# qp` (rust/driver/qp_details.rs; as selftests/rcn_readings.sh reads
# them); nothing if there is none.
mr_qp_reading() {
	rdma -dd resource show qp 2> /dev/null | awk '
	/ type RC / && / state RTS / && / comm ib_write_bw( |$)/ {
		paths = out = win = "?"
		for (i = 1; i < NF; i++) {
			if ($i == "drv_paths") paths = $(i + 1)
			else if ($i == "drv_outstanding") out = $(i + 1)
			else if ($i == "drv_msg_window") win = $(i + 1)
		}
		if (best == "" || paths + 0 > bp) { best = paths " " out " " win; bp = paths + 0 }
	}
	END { if (best != "") print best }'
}

# ---------------------------------------------------------------- iperf3
# ip_run PLANE TIME PARALLEL [PORT]: one iperf3 TCP flow set A -> B on PLANE;
# echoes MiB/s (receiver side, the same units as perftest's "MB/sec").
ip_run() {
	local p=$1 t=$2 par=$3 port=${4:-5201} job out
	out=$(raw_name "iperf3 plane$p t$t P$par port$port")
	job=$(peer_spawn "timeout $((t + 30)) iperf3 -s -1 -B $(peer_plane_ip "$p") -p $port 2>&1")
	sleep 1
	timeout $((t + 25)) iperf3 -c "$(peer_plane_ip "$p")" -B "$(plane_ip "$p")" -p "$port" -t "$t" -P "$par" -J > "$out" 2>&1
	peer_wait "$job" $((t + 40)) > "$out.server" 2>&1
	python3 -c 'import json,sys; print("%.3f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 8 / 1048576))' "$out" 2> /dev/null
}

# ---------------------------------------------------------------- MPI collectives
# coll_job PATH DEV GID TIMEOUT OUT ARGS...: one collectives.py job
# (mpi_coll.sh) between this host (COLL_ADDR, default the address that
# reaches the peer) and host B, BENCH_COLL_RANKS (default 2) ranks on each;
# its output in OUT, its status returned (124: TIMEOUT ran out).
coll_job() {
	local path=$1 dev=$2 gid=$3 tmo=$4 out=$5 addr
	shift 5
	addr=${COLL_ADDR:-$(ip -4 -o route get "$METAROCE_PEER_ADDR" | sed -n 's/.* src \([0-9.]*\).*/\1/p')}
	"$BENCH_DIR/mpi_coll.sh" "$addr" "$METAROCE_PEER_ADDR" "${BENCH_COLL_RANKS:-2}" "$path" "$dev" "$gid" "$tmo" "$@" > "$out" 2>&1
}
# coll_record T RANKS PLANES COND SIZES RC TIMEOUT OUT: the samples of one
# job's output OUT (collectives.py's "coll OP SIZE BYTES ITERS AVG MIN MAX
# RANKS" lines): avg_us, min_us and max_us per point; a job that ended with
# status RC != 0 leaves an error, with the reason, for every point of SIZES
# (comma-separated) it did not print.
coll_record() {
	local t=$1 n=$2 pl=$3 cond=$4 sizes=$5 rc=$6 tmo=$7 out=$8 op size bytes iters avg lo hi why
	while read -r _ op size bytes iters avg lo hi _; do
		csv "$t" collectives "$op" "$size" "$n" "$pl" "$cond" 1 avg_us "$avg" "$iters operations of $bytes B per rank"
		csv "$t" collectives "$op" "$size" "$n" "$pl" "$cond" 1 min_us "$lo"
		csv "$t" collectives "$op" "$size" "$n" "$pl" "$cond" 1 max_us "$hi"
	done < <(grep -a '^coll ' "$out")
	[ "$rc" = 0 ] && return 0
	if [ "$rc" = 124 ]; then
		why="the job did not finish in $tmo s"
	else
		why="exit $rc: $(grep -aE '^coll-error|error|fail|abort' "$out" | head -2 | tr '\n' ' ')"
	fi
	for size in ${sizes//,/ }; do
		for op in allreduce alltoall; do
			grep -aqE "^coll $op $size " "$out" || csv "$t" collectives "$op" "$size" "$n" "$pl" "$cond" 1 error "" "$why"
		done
	done
}
# ip_streams PLANE TIME PARALLEL: as ip_run, but echoes each stream's MiB/s
# (receiver side), one line each.
ip_streams() {
	local p=$1 t=$2 par=$3 port=5201 job out
	out=$(raw_name "iperf3 plane$p t$t P$par streams")
	job=$(peer_spawn "timeout $((t + 30)) iperf3 -s -1 -B $(peer_plane_ip "$p") -p $port 2>&1")
	sleep 1
	timeout $((t + 25)) iperf3 -c "$(peer_plane_ip "$p")" -B "$(plane_ip "$p")" -p "$port" -t "$t" -P "$par" -J > "$out" 2>&1
	peer_wait "$job" $((t + 40)) > "$out.server" 2>&1
	python3 -c '
import json, sys
for s in json.load(open(sys.argv[1]))["end"]["streams"]:
    print("%.3f" % (s["receiver"]["bits_per_second"] / 8 / 1048576))' "$out" 2> /dev/null
}
