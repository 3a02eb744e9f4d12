#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Resources are released whatever way traffic ends:
#  1. the sender is killed (SIGKILL) in the middle of an ib_write_bw run;
#  2. the receiver is killed in the middle of a run, so the sender's
#     packets meet a peer QP that no longer exists: the sender's work
#     requests must complete with "retry exceeded" once the QP's retry
#     budget (protocol.md 4.3: 5 s for perftest's timeout 14) passes
#     without progress, and ib_write_bw must end by itself with an error;
#  3. after traffic, `rdma link delete` and `rmmod metaroce` succeed.
# After each kill, both hosts must be back to their baseline: no user
# QP/CQ/MR/PD left in the core's resource tracking (`rdma resource`), every
# page pinned for an MR unpinned again (/proc/vmstat nr_foll_pin_*), and
# the module's reference count back to its idle value. The core itself
# reports leaked verbs objects at unregistration ("RESTRACK detected leak"),
# which the rig's dmesg check turns into a failure.
. "$(dirname "$0")/lib.sh"
trap 'pkill -9 ib_write_bw; reset_rdma; peer "pkill -9 ib_write_bw; rdma link delete mr0; rmmod metaroce" > /dev/null 2>&1' EXIT
reset_rdma
command -v ib_write_bw > /dev/null || skip "perftest not installed"

mr0_on_both_hosts

snapshot() { resource_snapshot mr0; }
peer_snapshot() { peer ". $METAROCE_REPO/selftests/lib.sh; resource_snapshot mr0"; }

# expect_baseline HOST BASELINE WHAT: within 30 s, host A or B must be back
# at BASELINE after WHAT.
expect_baseline() {
	local host=$1 want=$2 now end=$((SECONDS + 30))
	while :; do
		if [ "$host" = A ]; then now=$(snapshot); else now=$(peer_snapshot); fi
		[ "$now" = "$want" ] && { log "ok: host $host back to baseline: $now"; return 0; }
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

base_a=$(snapshot)
base_b=$(peer_snapshot) || fail "snapshot on host B"
log "baseline A: $base_a"
log "baseline B: $base_b"

# While an ib_write_bw pair runs, the user objects must be visible (so the
# baseline comparison is able to see a leak); then kill one side.
port=18800
transfer_and_kill() { # victim: A (sender) or B (receiver)
	local victim=$1 job during
	port=$((port + 1))
	job=$(peer_spawn "timeout 100 ib_write_bw -d mr0 -x $pgid -p $port -s 65536 -D 60") ||
		fail "cannot start the receiver on host B"
	sleep 3
	timeout 100 ib_write_bw -d mr0 -x "$gid" -p "$port" -s 65536 -D 60 "$METAROCE_PEER_ADDR" > /tmp/rr_client.out 2>&1 &
	local client=$!
	sleep 8
	kill -0 "$client" 2> /dev/null || fail "the transfer ended before the kill (nothing was interrupted)"
	during=$(snapshot)
	grep -q 'qp=0 ' <<< "$during" && fail "no user QP on host A during the transfer: $during"
	log "during the transfer, host A: $during"
	if [ "$victim" = A ]; then
		kill -9 "$client"
		wait "$client" 2> /dev/null
		# The receiver's peer is gone: it ends by itself or by timeout.
		peer "pkill -9 ib_write_bw" > /dev/null 2>&1
	else
		peer "pkill -9 ib_write_bw" > /dev/null 2>&1
		local t0=$SECONDS rc
		# Budget 5 s, then the error completion; 25 s for a slow VM.
		while kill -0 "$client" 2> /dev/null && [ $((SECONDS - t0)) -lt 25 ]; do sleep 1; done
		if kill -0 "$client" 2> /dev/null; then
			kill -9 "$client" 2> /dev/null
			wait "$client" 2> /dev/null
			fail "ib_write_bw still runs $((SECONDS - t0)) s after its peer was killed: $(tail -3 /tmp/rr_client.out)"
		fi
		wait "$client"
		rc=$?
		[ $rc != 0 ] || fail "ib_write_bw succeeded although its peer was killed mid-run"
		# perftest names the status: 12 is IBV_WC_RETRY_EXC_ERR.
		grep -q "status 12\|retry counter exceeded\|RETRY_EXC" /tmp/rr_client.out ||
			fail "ib_write_bw failed without a retry-exceeded completion (rc $rc): $(tail -5 /tmp/rr_client.out)"
		log "ok: the sender's requests completed with retry exceeded $((SECONDS - t0)) s after its peer was killed: $(grep -m1 -i 'status' /tmp/rr_client.out)"
	fi
	peer_wait "$job" 110 > /dev/null 2>&1
	expect_baseline A "$base_a" "killing host $victim's side"
	expect_baseline B "$base_b" "killing host $victim's side"
}
transfer_and_kill A
transfer_and_kill B

stats=$(rdma statistic show link mr0/1)
tx=$(sed -n 's/.* tx_packets \([0-9]*\).*/\1/p' <<< "$stats")
[ "${tx:-0}" -ge 100 ] || fail "only ${tx:-0} packets sent: the runs carried no traffic"
log "ok: $tx packets sent by host A in the interrupted runs"

expect_ok rdma link delete mr0
expect_ok rmmod metaroce
peer "rdma link delete mr0 && rmmod metaroce" > /dev/null || fail "delete/rmmod after traffic on host B"
lsmod | grep -q '^metaroce ' && fail "metaroce still loaded"
log "ok: link deleted and module unloaded on both hosts after traffic"
