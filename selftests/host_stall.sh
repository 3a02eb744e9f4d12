#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A host that stops running for a while: host A's VM frozen (the rig's host
# agent stops its QEMU process, as a loaded hypervisor stops a guest; its
# clock jumps when it runs again) in the middle of ib_read_bw -R with 8
# QPs, host A the requester (the run that once hung in CI, after a 27 s
# stall; -R: rdma_cm takes host B's QPs to RTS, with the retry budget that
# perftest's own exchange leaves at 0, never, on a server in RTR):
#  1. for 3 s, within the QPs' 5 s retry budget (protocol.md 4.3): the run
#     completes, every READ successful;
#  2. for 8 s, beyond it: host B's QPs give up on their READ responses and
#     host A's READs complete with retry exceeded (perftest's "status 12")
#     within 30 s of A running again, as InfiniBand's would. Nothing may
#     hang: before responses were held to the retry budget, READs whose
#     requests B had acknowledged waited for B's responses forever.
# Each freeze must be seen by the rig's stall watch (rig/stallwatch.sh,
# lib.sh longest_stall), which a failed perftest run shows beside its
# counters. The first runs of this test found host B's softirq walking
# 2^32 PSNs after the freeze (a tail probe answered after the floor had
# passed it: 26 s, an RCU stall report), which was also CI's 27 s.
. "$(dirname "$0")/lib.sh"

hostctl_job=""
cleanup() {
	# The agent continues the VM by the end of its request.
	[ -n "$hostctl_job" ] && wait "$hostctl_job" 2> /dev/null
	two_host_cleanup -k ib_read_bw
}
trap cleanup EXIT
reset_rdma
[ -d "$METAROCE_OUT/hostctl" ] || skip "the rig runs no host-side agent"
need_tools ib_read_bw

mr0_on_both_hosts

port=18850
# freeze_run SECS: host A frozen for SECS s once READ responses flow into
# it; leaves the client's exit status in $rc, its output in
# /tmp/host_stall.out and the time from A running again to the client's end
# in $after.
freeze_run() {
	local secs=$1 job client t0 thawed stall stall_b attempt
	for attempt in 1 2 3; do
		port=$((port + 1))
		# 8 QPs x 600 READs of 64 KiB: 300 MiB, about a minute at the rig's
		# rate (with 200, the run once ended before a busy guest read the
		# counters that say the READs flow).
		local args="-d mr0 -R -p $port -q 8 -s 65536 -n 600"
		job=$(peer_spawn "timeout 400 ib_read_bw $args") || fail "cannot start ib_read_bw on host B"
		peer_listening "$port" 60 "$args" || fail "ib_read_bw on host B does not listen on port $port"
		# shellcheck disable=SC2086 # $args: options, split on purpose
		# Line-buffered: its table's header, printed as the READs start,
		# shows in the file at once. The device's counters are no sign: a
		# guest this busy took so long to read them that the 300 MiB had
		# gone by.
		timeout 400 stdbuf -oL ib_read_bw $args "$PEER_PLANE0_IP" > /tmp/host_stall.out 2>&1 &
		client=$!
		for _ in $(seq 480); do
			grep -q "#bytes" /tmp/host_stall.out && break
			kill -0 "$client" 2> /dev/null || break
			sleep 0.25
		done
		kill -0 "$client" 2> /dev/null && grep -q "#bytes" /tmp/host_stall.out && break
		# perftest -R's own race (lib.sh perftest_pair): once more.
		grep -q "RDMA_CM_EVENT_REJECTED; error: 8\." /tmp/host_stall.out && [ "$attempt" -lt 3 ] ||
			fail "ib_read_bw ended, or never started its READs, before the freeze: $(tail -5 /tmp/host_stall.out)"
		log "perftest's -R race (REJ reason 8): once more"
		peer "pkill -x ib_read_bw" > /dev/null 2>&1
		peer_wait "$job" 30 > /dev/null 2>&1
	done
	t0=$(date +%s)
	log "ib_read_bw's READs started: host A freezes for $secs s"
	host_ctl "freeze-$secs" "{\"duration_s\": $((secs + 1)), \"events\": [{\"at_s\": 0, \"freeze\": \"A\", \"for_s\": $secs}]}" \
		$((secs + 60)) > /tmp/host_stall_hostctl.out 2>&1 &
	hostctl_job=$!
	wait "$hostctl_job" || fail "the host agent's freeze failed: $(cat /tmp/host_stall_hostctl.out)"
	hostctl_job=""
	thawed=$SECONDS
	grep -q '"thaw"' "$(cat /tmp/host_stall_hostctl.out)" ||
		fail "the host agent did not continue host A: $(cat "$(cat /tmp/host_stall_hostctl.out)")"
	read -r stall stall_b <<< "$(longest_stall "$t0" each)"
	log "host A ran again; the stall watch saw $stall ms on host A ($stall_b ms on host B)"
	[ "$stall" -ge $((secs * 1000 - 500)) ] || fail "the stall watch saw $stall ms of host A's $secs s freeze"
	while kill -0 "$client" 2> /dev/null && [ $((SECONDS - thawed)) -lt 300 ]; do sleep 1; done
	after=$((SECONDS - thawed))
	if kill -0 "$client" 2> /dev/null; then
		mr0_counters
		kill -9 "$client" 2> /dev/null
		fail "ib_read_bw still runs $after s after host A's $secs s freeze: $(tail -3 /tmp/host_stall.out)"
	fi
	wait "$client"
	rc=$?
	peer "pkill -x ib_read_bw" > /dev/null 2>&1
	peer_wait "$job" 60 > /dev/null 2>&1
}

freeze_run 3
[ "$rc" = 0 ] || { mr0_counters; fail "ib_read_bw failed (rc $rc) after a 3 s freeze: $(tail -5 /tmp/host_stall.out)"; }
log "ok: 8-QP ib_read_bw completed $after s after host A's 3 s freeze: $(grep -A1 'BW average' /tmp/host_stall.out | tail -1)"

freeze_run 8
[ "$rc" != 0 ] || fail "ib_read_bw succeeded although host A was frozen beyond the retry budget"
grep -q "status 12" /tmp/host_stall.out ||
	fail "ib_read_bw failed (rc $rc) without a retry-exceeded completion: $(tail -5 /tmp/host_stall.out)"
[ "$after" -le 30 ] || fail "the READs failed $after s after host A ran again (bound: 30 s)"
log "ok: after host A's 8 s freeze its READs completed with retry exceeded $after s after it ran again: $(grep -m1 'status 12' /tmp/host_stall.out)"
