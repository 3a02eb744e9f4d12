# SPDX-License-Identifier: GPL-2.0
# Shared helpers for the MetaRoCE selftests (sourced; runs on host A).
# shellcheck source=/dev/null
[ -f /run/metaroce/env ] && . /run/metaroce/env
set -u

KSFT_SKIP=4

log() { echo "$*"; }
# suite_full: true in the full suite (make test-full, METAROCE_SUITE=full),
# where a test also runs its exhaustive part (perftest.sh's size sweep).
suite_full() { [ "${METAROCE_SUITE:-}" = full ]; }
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit $KSFT_SKIP; }

# Run a command on host B; its output comes back, its exit status is ours.
peer() { /usr/bin/python3 "$METAROCE_RIG/peer.py" run -- "$@"; }
# Start a command on host B in the background; prints a job id for peer_wait.
peer_spawn() { /usr/bin/python3 "$METAROCE_RIG/peer.py" spawn -- "$@"; }
peer_wait() { /usr/bin/python3 "$METAROCE_RIG/peer.py" --timeout "${2:-120}" wait "$1"; }
# peer_poll JOB SECS: as peer_wait, but a job still running after SECS is
# left running (status 124), to be looked at and then waited for.
peer_poll() { /usr/bin/python3 "$METAROCE_RIG/peer.py" --timeout "$2" poll "$1"; }
# host_ctl NAME JSON TIMEOUT: a request to the rig's host-side agent
# (selftests/rig/hostctl.py: plane link events and wire counters, on the
# host's clock); waits up to TIMEOUT s and prints the answer's path.
host_ctl() {
	local d=$METAROCE_OUT/hostctl i
	[ -d "$d" ] || { echo "host_ctl: the rig runs no host-side agent ($d missing)" >&2; return 1; }
	rm -f "$d/$1.done" "$d/$1.json"
	echo "$2" > "$d/$1.req.tmp" && mv "$d/$1.req.tmp" "$d/$1.req" || return 1
	for ((i = 0; i < $3 * 2; i++)); do
		[ -f "$d/$1.done" ] && { echo "$d/$1.json"; return 0; }
		sleep 0.5
	done
	echo "host_ctl: no answer to $1 in $3 s" >&2
	return 1
}

# expect_ok CMD...: CMD must succeed.
expect_ok() {
	local out
	out=$("$@" 2>&1) || fail "'$*' failed: $out"
	log "ok: $*"
}

# expect_err TEXT CMD...: CMD must fail, and say TEXT (e.g. the strerror of
# the errno the kernel must return).
expect_err() {
	local want=$1 out
	shift
	if out=$("$@" 2>&1); then
		fail "'$*' succeeded, expected an error '$want'"
	fi
	grep -qF -- "$want" <<< "$out" || fail "'$*' failed without '$want': $out"
	log "ok: '$*' failed: $(echo "$out" | head -1)"
}

# dmesg_has TEXT: the kernel log since the test started contains TEXT.
dmesg_mark=$(dmesg | wc -l)
dmesg_has() { dmesg | tail -n +"$((dmesg_mark + 1))" | grep -qF -- "$1"; }
expect_dmesg() { dmesg_has "$1" || fail "kernel log lacks '$1'"; log "ok: dmesg says '$1'"; }
# expect_dmesg_re ERE: as expect_dmesg, a line matching the extended regular
# expression ERE.
expect_dmesg_re() {
	dmesg | tail -n +"$((dmesg_mark + 1))" | grep -qE -- "$1" || fail "kernel log lacks a line matching '$1'"
	log "ok: dmesg matches '$1'"
}

# rping_exit_ok STATUS STDERR: whether an rping client's exit STATUS, with
# its stderr in STDERR, is a success. rdma-core 44's rping returns from
# main right after closing its CM event channel, without
# joining the CM thread that reads it (rping.c: cm_thread loops on
# rdma_get_cm_event; main ends with rdma_destroy_event_channel; later
# rdma-core wakes and joins the thread first). If that thread is between
# two reads then, its next read fails with EBADF and it calls exit(-1):
# status 255 for a run that had finished. That case alone counts as
# success: status 255, "rdma_get_cm_event: Bad file descriptor" last, and
# no line but the disconnect and the ping data before it. The caller still
# checks every ping. Seen under 1% loss, where the DREP comes late.
rping_exit_ok() {
	[ "$1" = 0 ] && return 0
	[ "$1" = 255 ] || return 1
	[ "$(tail -1 <<< "$2")" = "rdma_get_cm_event: Bad file descriptor" ] || return 1
	! grep -vE '^(client DISCONNECT EVENT\.\.\.|rdma_get_cm_event: Bad file descriptor|ping data: .*)$' <<< "$2" | grep -q .
}

# rping_pings FILE [SIZE]: "LINES IN_ORDER" for the stdout (FILE) of an
# rping client run with -v -V (and -S SIZE, default 64): the number of
# "ping data: " lines, and how many of them, from the first, are whole
# lines of pings 0, 1, 2... in turn. rping -C N -V -v prints
# "ping data: rdma-ping-I: ..." (10 + SIZE bytes and a newline: the text
# fills the SIZE-byte buffer but its last byte) after ping I (0 to N-1)
# came back equal to what it sent, and nothing for one that did not ("data
# mismatch!" on stderr, and the loop stops): N validated pings read "N N";
# a missing, failed or cut ping reads less.
# FILE must be rping's stdout alone, not stdout and stderr in one file or
# pipe (2>&1): there stdout, block-buffered (4 KiB writes), and stderr,
# unbuffered, interleave at stdout's block boundaries, not at lines. The
# "client DISCONNECT EVENT..." rping's CM thread prints as a run ends goes
# out before the last partial block, which is written at exit, so it lands
# at byte 75 * N rounded down to 4096 of the ping lines: with N = 1034 that
# is byte 3 of ping 983's line ("pin" + "client DISCONNECT EVENT...\n" +
# "g data: rdma-ping-983: ..."), and a run of 1034 good pings read 1033.
# Run the client as `stdbuf -oL rping ... > OUT 2> ERR`: each ping line is
# then written whole as it is printed, so OUT also holds every ping so far
# while rping runs or if a timeout kills it (a block-buffered stdout loses
# up to 4 KiB of lines on a signal, and is current only at 4 KiB steps).
rping_pings() {
	awk -v len=$((10 + ${2:-64})) 'BEGIN { ok = 0 }
		/^ping data: / { n++; if (n == ok + 1 && $3 == "rdma-ping-" ok ":" && length($0) == len) ok++ }
		END { print n + 0, ok }' "$1"
}

# rping_validated COUNT SERVER_ADDR CLIENT_ADDR PORT OUT: an rping -V run
# of COUNT pings on PORT, the server on host B bound to SERVER_ADDR, the
# client on host A connecting to CLIENT_ADDR, its stdout and stderr apart
# in OUT.out and OUT.err (rping_pings; stdout line-buffered). Fails the
# test, with both hosts' counters when the client did, unless both ends
# succeed (rping_exit_ok), every ping came back validated and in order,
# and neither saw a data mismatch.
rping_validated() {
	local count=$1 srv=$2 dst=$3 port=$4 out=$5 job rc err server pings
	job=$(peer_spawn "timeout 90 rping -s -v -V -C $count -a $srv -p $port") ||
		fail "cannot start the rping server -a $srv"
	sleep 3
	timeout 90 stdbuf -oL rping -c -v -V -C "$count" -a "$dst" -p "$port" > "$out.out" 2> "$out.err"
	rc=$?
	err=$(cat "$out.err")
	log "$(tail -2 "$out.out")"
	[ -z "$err" ] || log "$err"
	rping_exit_ok $rc "$err" || { mr0_counters; fail "rping -a $dst failed ($rc): $(tail -5 <<< "$err")"; }
	server=$(peer_wait "$job" 110) || fail "rping server -a $srv failed: $(tail -5 <<< "$server")"
	pings=$(rping_pings "$out.out")
	[ "$pings" = "$count $count" ] ||
		fail "rping -a $dst: ${pings% *} validated pings (${pings#* } in order), want $count"
	grep -q "mismatch" <<< "$err$server" && fail "rping -a $dst: data mismatch"
	log "ok: rping -V -a $dst: $count pings, data validated"
}

# need_tools CMD...: skips the test unless every CMD is installed, naming
# the package that has it (ibv_*: ibverbs-utils, ib_*: perftest, rping:
# rdmacm-utils).
need_tools() {
	local c
	for c; do
		command -v "$c" > /dev/null && continue
		case $c in
		ibv_*) skip "ibverbs-utils not installed" ;;
		ib_*) skip "perftest not installed" ;;
		rping) skip "rdmacm-utils not installed" ;;
		*) skip "$c not installed" ;;
		esac
	done
}

rdma_dev_exists() { rdma dev show "$1" > /dev/null 2>&1; }

# Remove every metaroce and rxe link and unload the modules (test cleanup).
reset_rdma() {
	local d
	for d in $(rdma link show 2>/dev/null | awk '{print $2}' | cut -d/ -f1 | sort -u); do
		rdma link delete "$d" 2>/dev/null
	done
	rmmod metaroce 2>/dev/null
	rmmod rdma_rxe 2>/dev/null
	return 0
}

# planes_qdisc_del: a command that removes the root qdisc (netem,
# tc_drop_opcode's filters) of every plane netdev, as a string for `bash -c`
# or `peer`, so that the same loop runs on either host.
# shellcheck disable=SC2016
planes_qdisc_del='for d in $PLANE0_DEV ${PLANE1_DEV:-}; do tc qdisc del dev $d root 2> /dev/null; done; true'

# two_host_cleanup [-k PROG]... [-q] [LINK [MODULE]]: the EXIT trap of a
# test on both hosts; every step runs, whatever an earlier one found. On
# host A: each PROG killed (SIGKILL); with -q, no root qdisc on the planes;
# then no RDMA link or module (reset_rdma). On host B, in one command: the
# same kills and qdiscs, then link LINK deleted and MODULE unloaded
# (default mr0 and metaroce).
two_host_cleanup() {
	local progs="" qdiscs=false p b=""
	while [ $# -gt 0 ]; do
		case $1 in
		-k) progs+=" $2"; shift 2 ;;
		-q) qdiscs=true; shift ;;
		*) break ;;
		esac
	done
	for p in $progs; do
		pkill -9 "$p"
		b+="pkill -9 $p; "
	done
	if $qdiscs; then
		bash -c "$planes_qdisc_del"
		b+="$planes_qdisc_del; "
	fi
	reset_rdma
	peer "${b}rdma link delete ${1:-mr0}; rmmod ${2:-metaroce}" > /dev/null 2>&1
}

# planes_cleanup: the EXIT trap of the two-plane tests: on both hosts no
# qdisc on planes 0 and 1 and no MetaRoCE device; on A both planes up.
planes_cleanup() {
	local d
	for d in "$PLANE0_DEV" "${PLANE1_DEV:-}"; do
		[ -n "$d" ] && ip link set "$d" up
	done
	two_host_cleanup -q
}

# roce_v2_gid_index DEV GID: the index of RoCE v2 GID GID on device DEV,
# GID as sysfs writes it (eight groups of four hex digits); status 1 if
# DEV has none.
roce_v2_gid_index() {
	local dev=$1 f idx
	for f in /sys/class/infiniband/"$dev"/ports/1/gids/*; do
		idx=${f##*/}
		if [ "$(cat "$f" 2>/dev/null)" = "$2" ] &&
			grep -q "v2" "/sys/class/infiniband/$dev/ports/1/gid_attrs/types/$idx" 2>/dev/null; then
			echo "$idx"
			return 0
		fi
	done
	return 1
}

# The GID index of IPv4 address $2 (RoCE v2) on device $1: the address
# IPv4-mapped.
gid_index() {
	local ip=$2 hex
	hex=$(printf '%02x%02x:%02x%02x' ${ip//./ })
	roce_v2_gid_index "$1" "0000:0000:0000:0000:0000:ffff:$hex"
}

# gid6_index DEV ADDR: the GID index of IPv6 address ADDR (RoCE v2) on
# device DEV, as gid_index does for IPv4.
gid6_index() {
	local want
	want=$(/usr/bin/python3 -c 'import ipaddress, sys; print(ipaddress.IPv6Address(sys.argv[1]).exploded)' "$2") ||
		return 1
	roce_v2_gid_index "$1" "$want"
}

# ipv6_ll NETDEV: NETDEV's IPv6 link-local address once it is usable (not
# tentative: duplicate address detection done); status 1 if it has none.
ipv6_ll() {
	ip -6 -o addr show dev "$1" scope link -tentative | awk '{ sub(/\/.*/, "", $4); print $4; exit }' | grep .
}

# plane0_gids DEV: sets $gid (host A) and $pgid (host B) to DEV's RoCE v2 GID
# indices for the plane 0 addresses, waiting up to 10 s for the core to
# fill the GID tables; fails the test if they never appear.
plane0_gids() {
	local dev=$1 i
	for i in $(seq 50); do
		gid=$(gid_index "$dev" "$PLANE0_IP") &&
			pgid=$(peer ". $METAROCE_REPO/selftests/lib.sh; gid_index $dev $PEER_PLANE0_IP" 2>/dev/null) &&
			return 0
		sleep 0.2
	done
	fail "no RoCE v2 GIDs for plane 0 on $dev (host A $PLANE0_IP, host B $PEER_PLANE0_IP)"
}

# mr0_on_both_hosts: MetaRoCE device mr0 on plane 0 of host A and host B,
# and their plane-0 GID indexes in $gid (A) and $pgid (B).
mr0_on_both_hosts() {
	expect_ok rdma link add mr0 type metaroce netdev "$PLANE0_DEV"
	peer "rdma link add mr0 type metaroce netdev \$PLANE0_DEV" > /dev/null || fail "mr0 on host B"
	plane0_gids mr0
}

# mr0_on_both_planes: mr0 on planes 0 and 1 of host A and host B, and their
# plane-0 GID indexes in $gid (A) and $pgid (B).
mr0_on_both_planes() {
	expect_ok rdma link add mr0 type metaroce netdev "$PLANE0_DEV"
	expect_ok rdma link add mr0 type metaroce netdev "$PLANE1_DEV"
	peer 'rdma link add mr0 type metaroce netdev $PLANE0_DEV && rdma link add mr0 type metaroce netdev $PLANE1_DEV' > /dev/null ||
		fail "mr0 with two planes on host B"
	plane0_gids mr0
}

# peer_listening PORT SECS SERVER_ARGS: waits up to SECS for a perftest
# server on host B to listen on PORT (perftest's default 18515 if empty):
# an rdma_cm listener (-R, seen in the core's cm_id tracking) or a TCP
# socket. A fixed wait lost the race under
# TCG: a client whose connect request came before the listener was
# rejected (RDMA_CM_EVENT_REJECTED, reason 8: no such service ID).
peer_listening() {
	local port=${1:-18515} secs=$2 probe
	probe="ss -ltn | grep -Eq ':$port( |\$)'"
	case " $3 " in *" -R "*) probe="rdma resource show cm_id | grep 'state LISTEN' | grep -Eq ':$port( |\$)'" ;; esac
	peer "for i in \$(seq $((secs * 4))); do $probe && exit 0; sleep 0.25; done; exit 1" > /dev/null
}

# The QPs' retry budget for perftest's timeout 14 and retry_cnt 7
# (protocol.md 4.3: at least 5 s): a host stalled longer has its peer's
# QPs give up, as they must.
RETRY_BUDGET_MS=5000

# longest_stall SINCE: the longest time (ms) either VM's user space did not
# run, of the stalls that ended at or after epoch second SINCE
# (rig/stallwatch.sh's records, host A's in $METAROCE_STALLS if set; 0 for
# none of 2 s or more): its QEMU not run by the host, or its kernel busy.
# With "each": "A_MS B_MS", each host's.
longest_stall() {
	local prog='$1 >= t && $2 > m { m = $2 } END { print m + 0 }' a b
	a=$(awk -v t="$1" "$prog" "${METAROCE_STALLS:-/run/metaroce/stalls}" 2> /dev/null)
	b=$(peer "awk -v t=$1 '$prog' /run/metaroce/stalls 2> /dev/null")
	a=${a:-0} b=${b:-0}
	if [ "${2:-}" = each ]; then echo "$a $b"; else echo $((a > b ? a : b)); fi
}

# perftest_pair SECS "SERVER_ARGS" "CLIENT_ARGS" TARGET TEST ARGS...: perftest
# TEST with ARGS, server on host B, client on host A towards TARGET, each
# bounded by SECS; fails unless both sides complete and the client prints
# its result line (the one starting with the -s size), left in $res.
perftest_pair() {
	local secs=$1 srv=$2 cli=$3 target=$4 t=$5 job out server rc
	shift 5
	local attempt t0 stall
	for attempt in 1 2 3; do
		t0=$(date +%s)
		# shellcheck disable=SC2086
		job=$(peer_spawn "timeout $secs $t $srv $*") || fail "cannot start $t on host B"
		peer_listening "$(sed -n 's/.*-p \([0-9]*\).*/\1/p' <<< " $srv")" 60 "$srv" ||
			log "$t: no listener on host B after 60 s (its server's output will say why)"
		# shellcheck disable=SC2086
		out=$(timeout "$secs" "$t" $cli "$@" "$target" 2>&1) && break
		server=$(peer_poll "$job" 10)
		# Two failures of perftest itself under TCG, and only they, are run
		# again (twice at most):
		# - perftest -R connects twice on one port: its exchange channel,
		#   then the test QPs, for which the server listens anew after the
		#   exchange. Its client's connect request can come first: host
		#   B's CM then rejects it (reason 8, no listener for the service
		#   ID; host B lists the exchange connection and the new listener),
		#   and the client's retry path crashes in librdmacm (perftest
		#   4.5-0.20 reuses the IDs it destroyed).
		# - perftest times its run in CPU cycles, their rate fitted to
		#   gettimeofday over 200 short busy waits; a scheduling gap among
		#   them spoils the fit (r^2 < 0.9) and that side prints "Can't
		#   produce a report" and exits, after its traffic, without the
		#   closing exchange its peer then waits for until its bound.
		# A stall of either VM is not one of them: the stall watch cannot
		# tell a host that did not run its VM from a guest kernel busy in
		# softirq (the 27 s of CI's failed 8-QP READ at 0bb6b5f were the
		# engine walking 2^32 PSNs). It is shown, not excused.
		local why="" both
		both=$(printf '%s\n%s\n' "$out" "$server")
		if grep -q "RDMA_CM_EVENT_REJECTED; error: 8\." <<< "$out"; then
			cm_state
			why="perftest's -R race (test QPs' connect before the server's listen, REJ reason 8)"
		elif grep -q "Can't produce a report" <<< "$both"; then
			why="perftest's CPU clock estimate failed ($(grep -m1 "Correlation coefficient" <<< "$both"))"
		fi
		if [ -n "$why" ] && [ "$attempt" -lt 3 ]; then
			log "$t $cli $*: $why: once more"
			peer "pkill -x $t" > /dev/null
			peer_wait "$job" 30 > /dev/null || true
			continue
		fi
		# The refusal, if any, is in a kernel log; perftest's own
		# reason sits a dozen lines above its last.
		mr0_counters
		cm_state
		stall=$(longest_stall "$t0")
		[ "$stall" = 0 ] || log "the longest time either VM's user space did not run meanwhile: $stall ms (retry budget $RETRY_BUDGET_MS ms)"
		log "A dmesg: $(dmesg | tail -6)"
		log "B dmesg: $(peer 'dmesg | tail -6' 2>&1)"
		log "B server: $(tail -15 <<< "$server")"
		fail "$t $cli $* failed on host A${why:+ ($why, a third time)}: $(tail -15 <<< "$out")"
	done
	# A side that hangs leaves both hosts' counters and QP states behind
	# (a rare ib_send_bw server hang after a completed client is not
	# explained yet): a server not done 30 s after its client is shown
	# while it still hangs (its QPs and CQs, counters, kernel log, where
	# it waits), before its bound ends it and its QPs are gone.
	server=$(peer_poll "$job" 30)
	rc=$?
	if [ $rc = 124 ]; then
		log "$t: the server on host B has not finished 30 s after the client; while it waits:"
		mr0_counters
		log "B CQs: $(peer 'rdma -d resource show cq link mr0/1' 2>&1 | grep -v '\[')"
		log "B: $(peer "ps -o pid,stat,wchan:32,args -C $t" 2>&1)"
		log "B dmesg: $(peer 'dmesg | tail -5' 2>&1)"
		# Where each server thread is: "running" (its measurement loop
		# polls the CQ) or the system call it sleeps in (202, futex on
		# x86_64: libibverbs' destroy waiting for unacknowledged events),
		# and its kernel stack.
		log "B server threads: $(peer "for d in \$(pgrep -x $t | sed 's|^|/proc/|; s|$|/task/*|'); do echo \"\$d: \$(cat \$d/syscall)\"; cat \$d/stack; done" 2>&1)"
		# perftest's last TCP exchange (ctx_close_connection) waits for the
		# server to finish its loop and report; a client that exits 0 with
		# the server still in its loop had that exchange fail (its stderr).
		log "A client's last lines: $(tail -3 <<< "$out")"
		server=$(peer_wait "$job" $((secs + 20))) ||
			fail "$t $srv $* failed on host B: $(tail -5 <<< "$server")"
	elif [ $rc != 0 ]; then
		mr0_counters
		fail "$t $srv $* failed on host B: $(tail -5 <<< "$server")"
	fi
	res=$(awk -v s="$(sed -n 's/.*-s \([0-9]*\).*/\1/p' <<< " $*")" '$1 == s { print; exit }' <<< "$out")
	[ -n "$res" ] || fail "$t $cli $*: no result line: $(tail -5 <<< "$out")"
}

# resource_snapshot DEV: what this host holds for users of DEV: user
# objects by kind (the core's resource tracking), pages still pinned
# system-wide, and metaroce's module reference count.
resource_snapshot() {
	local kind n out=""
	for kind in qp cq mr pd; do
		# Kernel-owned objects (the GSI QP, the MAD layer's CQ/PD) are listed
		# with a comm in brackets; user ones with the process name.
		n=$(rdma resource show "$kind" 2>/dev/null | grep -E "^(link|dev) $1[/ ]" |
			grep -c 'comm [^[]') || true
		out+="$kind=$n "
	done
	local acq rel
	# vmstat keeps per-CPU deltas below a threshold out of /proc/vmstat (a
	# reading of acquired minus released once came out at -18): fold them in
	# first, so the difference is the pages pinned right now.
	echo 1 > /proc/sys/vm/stat_refresh 2>/dev/null || true
	acq=$(awk '$1 == "nr_foll_pin_acquired" { print $2 }' /proc/vmstat)
	rel=$(awk '$1 == "nr_foll_pin_released" { print $2 }' /proc/vmstat)
	out+="pinned=$((acq - rel)) refcnt=$(cat /sys/module/metaroce/refcnt)"
	echo "$out"
}

# mr0_stats [peer]: a snapshot of mr0/1's counters on host A (with any
# argument, host B) for stat_of: what `rdma -j statistic show` prints.
mr0_stats() {
	if [ -n "${1:-}" ]; then
		peer rdma -j statistic show link mr0/1
	else
		rdma -j statistic show link mr0/1
	fi
}

# stat_of NAME SNAPSHOT: counter NAME in SNAPSHOT, what an `rdma -j
# statistic` command printed: a JSON array of objects, one a link or
# counter object, whose counters are integer members (iproute2's
# rdma/stat.c). Prints NAME's value in the first object that has it, or
# nothing (status 1). Text around the JSON (an error message on stderr
# captured with it) is skipped.
stat_of() {
	/usr/bin/python3 -S -c '
import json, sys
name, text, at, objs = sys.argv[1], sys.stdin.read(), 0, []
decoder = json.JSONDecoder()
while True:
    starts = [i for i in (text.find("[", at), text.find("{", at)) if i >= 0]
    if not starts:
        break
    try:
        doc, at = decoder.raw_decode(text, min(starts))
    except ValueError:
        at = min(starts) + 1
        continue
    objs += doc if isinstance(doc, list) else [doc]
for obj in objs:
    value = obj.get(name) if isinstance(obj, dict) else None
    if isinstance(value, int) and not isinstance(value, bool):
        print(value)
        sys.exit(0)
sys.exit(1)' "$1" <<< "$2"
}

# mr0_stat NAME [peer]: the value of counter NAME of mr0/1 on host A (or,
# with "peer", on host B).
mr0_stat() { stat_of "$1" "$(mr0_stats "${2:-}")"; }

# tc_drop_opcode OPCODE [peer]: host A's (with "peer", host B's) outgoing
# MetaRoCE packets of OPCODE are dropped on its plane netdevs until
# tc_drop_clear: a u32 match on the opcode byte, 29 bytes into an IPv4
# packet without options (selftests/verbs_util.py TcDrop does the same
# from Python).
tc_drop_opcode() {
	# shellcheck disable=SC2016
	local cmd='for d in $PLANE0_DEV ${PLANE1_DEV:-}; do tc qdisc add dev $d root handle 1: prio && tc filter add dev $d parent 1: protocol ip prio 1 u32 match ip protocol 17 0xff match u8 '"$1"' 0xff at 29 action drop || exit 1; done'
	if [ "${2:-}" = peer ]; then peer "$cmd"; else bash -c "$cmd"; fi
}

# tc_drop_clear [peer]: removes tc_drop_opcode's filters (and any other
# root qdisc on the planes).
tc_drop_clear() {
	if [ "${1:-}" = peer ]; then peer "$planes_qdisc_del"; else bash -c "$planes_qdisc_del"; fi
}

# mr0_counters: both hosts' mr0 counters and QPs into the log, so that a
# failure (a stalled transfer) leaves what the transport saw.
# cm_state: both hosts' connection manager on mr0: its MAD counters by
# message (sent, received, retried, duplicates; zero counts left out) and
# the rdma_cm IDs that exist.
cm_state() {
	# shellcheck disable=SC2016
	local c='cd /sys/class/infiniband/mr0/ports/1 2>/dev/null && grep -r . cm_tx_msgs cm_rx_msgs cm_tx_retries cm_rx_duplicates 2>/dev/null | grep -v ":0$" | tr "\n" " "; rdma resource show cm_id 2>&1 | tr "\n" ";"'
	log "A CM: $(bash -c "$c")"
	log "B CM: $(peer "$c" 2>&1)"
}

mr0_counters() {
	log "A: $(rdma statistic show link mr0/1 2>&1)"
	log "B: $(peer rdma statistic show link mr0/1 2>&1)"
	log "A QPs: $(rdma resource show qp link mr0/1 2>&1 | grep -v '\[')"
	log "B QPs: $(peer rdma resource show qp link mr0/1 2>&1 | grep -v '\[')"
}

# rc_pingpong_qpn: the QP of host A's ibv_rc_pingpong on mr0 (RC) once it
# is in RTS, waiting up to 10 s for it; status 1 if none gets there.
rc_pingpong_qpn() {
	local qpn
	for _ in $(seq 50); do
		qpn=$(rdma resource show qp link mr0/1 2>/dev/null |
			sed -n 's/.*lqpn \([0-9]*\) .*type RC .*state RTS.*comm ibv_rc_pingpong.*/\1/p' | head -1)
		[ -n "$qpn" ] && { echo "$qpn"; return 0; }
		sleep 0.2
	done
	return 1
}

# start_pingpong: a long ibv_rc_pingpong (64-byte messages), server on
# host B, client on host A in the background ($client), over the plane 0
# GIDs $pgid/$gid (plane0_gids); sets $qpn to the client's QP once it is in
# RTS. The test kills $client when its checks are done; the bound only
# stops a stray one, so it is far above what the checks take (scaled: a
# KASAN kernel, METAROCE_TIMEOUT_SCALE=3, took longer than 60 s over
# qp_counters.sh's checks, and so did the debug kernel in a slow warm run
# on 2026-12-04: the QP was gone before the last of them).
start_pingpong() {
	local args="-d mr0 -n 1000000 -s 64" bound=$((240 * ${METAROCE_TIMEOUT_SCALE:-1}))
	peer_spawn "timeout $bound ibv_rc_pingpong $args -g $pgid" > /dev/null || fail "cannot start the server"
	sleep 1
	# shellcheck disable=SC2086 # $args: options, split on purpose
	timeout $bound ibv_rc_pingpong $args -g "$gid" "$PEER_PLANE0_IP" > /dev/null 2>&1 &
	# shellcheck disable=SC2034 # the caller's, to stop it
	client=$!
	qpn=$(rc_pingpong_qpn) || fail "the ping-pong QP never reached RTS"
	log "ok: ping-pong running, client QP $qpn"
}

# stop_pingpong: ends start_pingpong's client and its server on host B. A
# server left to its bound would hold its QP, and `rdma link delete` on B
# (the EXIT trap) waits for every user context of the device to close.
stop_pingpong() {
	[ -n "${client:-}" ] && kill "$client" 2>/dev/null && wait "$client" 2>/dev/null
	client=""
	peer pkill -x ibv_rc_pingpong > /dev/null 2>&1
	sleep 1
}

# qp_details QPN: "PATHS ACTIVE PLANES" of host A's QP QPN on mr0, PLANES
# the plane of each path by slot, comma-separated (`rdma resource show qp
# -dd`, rust/driver/qp_details.rs).
qp_details() {
	rdma -j -dd resource show qp link mr0/1 lqpn "$1" 2>&1 | /usr/bin/python3 -c '
import json, sys
(qp,) = json.load(sys.stdin)
# iproute2 prints driver attributes with a drv_ prefix.
d = {k.removeprefix("drv_"): v for k, v in qp.items()}
slots = sorted(int(k[1:-len("_plane")]) for k in d if k.startswith("p") and k.endswith("_plane"))
print(d["paths"], d["active_paths"], ",".join(str(d[f"p{s}_plane"]) for s in slots))' ||
		fail "no transport details for QP $1"
}

# pingpong_run TOOL SECONDS LABEL ARGS...: an rdma-core pingpong example
# (ibv_rc_pingpong, ibv_ud_pingpong) with its server on host B and its
# client on host A, retried while the server starts, over the plane 0 GIDs
# $pgid/$gid (plane0_gids). The client's output is left in $pp_out. Fails
# the test (naming LABEL) unless both sides complete.
pingpong_run() {
	local tool=$1 secs=$2 label=$3 job server
	shift 3
	job=$(peer_spawn "timeout $secs $tool $* -g $pgid") || fail "cannot start the $tool server ($label)"
	pp_out=""
	for _ in $(seq 10); do
		sleep 1
		pp_out=$(timeout "$secs" "$tool" "$@" -g "$gid" "$PEER_PLANE0_IP" 2>&1) && break
	done
	log "$pp_out"
	grep -q "iters in" <<< "$pp_out" || { mr0_counters; fail "$tool client did not complete ($label)"; }
	server=$(peer_wait "$job" $((secs + 10))) || fail "$tool server failed ($label): $server"
}
