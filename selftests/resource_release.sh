#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Resources are released whatever way traffic ends:
#  1. the sender is killed (SIGKILL) in the middle of an ib_write_bw run;
#  2. the receiver is killed in the middle of a run, so the sender's
#     packets meet a peer QP that no longer exists: the sender's work
#     requests must complete with "retry exceeded" once the QP's retry
#     budget (protocol.md 4.3: 5 s for perftest's timeout 14) passes
#     without progress, and ib_write_bw must end by itself with an error;
#     the same for ib_read_bw's responder, killed with READs whose
#     requests it acknowledged still waiting for its responses (they
#     waited forever: nothing else was outstanding to spend the budget);
#  3. after traffic, `rdma link delete` and `rmmod metaroce` succeed.
# After each kill, both hosts must be back to their baseline: no user
# QP/CQ/MR/PD left in the core's resource tracking (`rdma resource`), every
# page pinned for an MR unpinned again (/proc/vmstat nr_foll_pin_*), and
# the module's reference count back to its idle value. The core itself
# reports leaked verbs objects at unregistration ("RESTRACK detected leak"),
# which the rig's dmesg check turns into a failure.
. "$(dirname "$0")/lib.sh"
trap 'two_host_cleanup -k ib_write_bw -k ib_read_bw' EXIT
reset_rdma
command -v ib_write_bw > /dev/null || skip "perftest not installed"

mr0_on_both_hosts

snapshot() { resource_snapshot mr0; }
peer_snapshot() { peer ". $METAROCE_REPO/selftests/lib.sh; resource_snapshot mr0"; }

# at_baseline NOW BASELINE: the same objects and module references, and no
# more pinned pages than at the baseline. Fewer is no leak: the 9p root
# file system's own pins come and go (a baseline of -6 on host B once read
# -9 after the run, with every object released).
at_baseline() {
	local pin_now=${1##*pinned=} pin_want=${2##*pinned=}
	pin_now=${pin_now%% *} pin_want=${pin_want%% *}
	[ "${1/pinned=$pin_now/}" = "${2/pinned=$pin_want/}" ] && [ "$pin_now" -le "$pin_want" ]
}

# expect_baseline HOST BASELINE WHAT: within 30 s, host A or B must be back
# at BASELINE after WHAT.
expect_baseline() {
	local host=$1 want=$2 now end=$((SECONDS + 30))
	while :; do
		if [ "$host" = A ]; then now=$(snapshot); else now=$(peer_snapshot); fi
		at_baseline "$now" "$want" && { log "ok: host $host back to baseline: $now (baseline $want)"; return 0; }
		[ $SECONDS -lt $end ] || break
		sleep 1
	done
	if [ "$host" = A ]; then
		rdma resource show; ps -eo pid,stat,wchan:32,comm | grep -v ' \[' | tail -5
	else
		peer "rdma resource show; ps -eo pid,stat,wchan:32,args | grep -i ib_"
	fi
	fail "host $host holds resources after $3: now '$now', baseline '$want'"
}

# stable SNAPSHOT_FN: a reading that two in a row agree on (the root file
# system is 9p: its I/O pins and unpins pages for a moment, and a baseline
# caught in the middle of that never comes back).
stable() {
	local prev="" cur i
	for i in 1 2 3 4 5 6 7 8 9 10; do
		cur=$("$1") || return 1
		[ "$cur" = "$prev" ] && break
		prev=$cur
		sleep 1
	done
	echo "$cur"
}
base_a=$(stable snapshot)
base_b=$(stable peer_snapshot) || fail "snapshot on host B"
log "baseline A: $base_a"
log "baseline B: $base_b"

# While an ib_write_bw pair runs, the module must have a user (so the
# baseline comparison is able to see a leak); then one side is killed. The
# kill comes from `timeout -s KILL` on the victim's own host, at a fixed
# time into the run: a command sent to host B through the rig's channel
# while traffic saturates the TCG guests can arrive tens of seconds late,
# after the run ended by itself, and prove nothing.
port=18800
kill_at=20 # s after the receiver starts (the sender starts 3 s later and is
           # checked at 5 s)
transfer_and_kill() { # victim: A (sender) or B (receiver); test
	local victim=$1 t=${2:-ib_write_bw} job refs stime=100 ctime=100 t0 rc
	port=$((port + 1))
	# The victim's timeout kills it; the other side's only bounds the run.
	if [ "$victim" = A ]; then ctime="-s KILL $((kill_at - 3))"; else stime="-s KILL $kill_at"; fi
	job=$(peer_spawn "timeout $stime $t -d mr0 -x $pgid -p $port -s 65536 -D 60") ||
		fail "cannot start the receiver on host B"
	sleep 3
	# shellcheck disable=SC2086
	timeout $ctime "$t" -d mr0 -x "$gid" -p "$port" -s 65536 -D 60 "$METAROCE_PEER_ADDR" > /tmp/rr_client.out 2>&1 &
	local client=$!
	t0=$SECONDS
	sleep 5
	kill -0 "$client" 2> /dev/null || fail "the sender ended before the kill: $(tail -3 /tmp/rr_client.out)"
	# A busy TCG guest runs `rdma resource` for many seconds: the module's
	# reference count (a process's context holds one) is read at once.
	read -r refs < /sys/module/metaroce/refcnt
	[ "$refs" -gt 0 ] || fail "no user of metaroce on host A during the transfer (refcnt $refs)"
	log "during the transfer, host A: metaroce refcnt $refs"
	# The sender ends: killed (A), or (B) once its requests complete with
	# "retry exceeded", the QP's retry budget (protocol.md 4.3: 5 s for
	# perftest's timeout 14) after the receiver's QP vanished.
	while kill -0 "$client" 2> /dev/null && [ $((SECONDS - t0)) -lt 60 ]; do sleep 1; done
	if kill -0 "$client" 2> /dev/null; then
		kill -9 "$client" 2> /dev/null
		wait "$client" 2> /dev/null
		fail "$t still runs $((SECONDS - t0)) s into the run, its peer killed at $((kill_at - 3)) s: $(tail -3 /tmp/rr_client.out)"
	fi
	wait "$client"
	rc=$?
	if [ "$victim" = B ]; then
		[ $rc != 0 ] || fail "$t succeeded although its peer was killed mid-run: $(tail -3 /tmp/rr_client.out)"
		# perftest names the status: 12 is IBV_WC_RETRY_EXC_ERR.
		grep -q "status 12" /tmp/rr_client.out ||
			fail "$t failed without a retry-exceeded completion (rc $rc): $(tail -5 /tmp/rr_client.out)"
		log "ok: $t: the requester's work requests completed with retry exceeded, $((SECONDS - t0 - kill_at + 3)) s after its peer was killed: $(grep -m1 'status 12' /tmp/rr_client.out)"
	else
		[ $rc = 137 ] || fail "the sender was not killed by its timeout (rc $rc): $(tail -3 /tmp/rr_client.out)"
	fi
	# The receiver, if it still runs, ends by its timeout or here.
	peer "pkill -9 $t" > /dev/null 2>&1
	peer_wait "$job" 110 > /dev/null 2>&1
	expect_baseline A "$base_a" "killing host $victim's side of $t"
	expect_baseline B "$base_b" "killing host $victim's side of $t"
}
transfer_and_kill A
transfer_and_kill B
transfer_and_kill B ib_read_bw

tx=$(mr0_stat tx_packets)
[ "${tx:-0}" -ge 100 ] || fail "only ${tx:-0} packets sent: the runs carried no traffic"
log "ok: $tx packets sent by host A in the interrupted runs"

expect_ok rdma link delete mr0
expect_ok rmmod metaroce
peer "rdma link delete mr0 && rmmod metaroce" > /dev/null || fail "delete/rmmod after traffic on host B"
lsmod | grep -q '^metaroce ' && fail "metaroce still loaded"
log "ok: link deleted and module unloaded on both hosts after traffic"
