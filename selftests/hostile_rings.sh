#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A process writes hostile values into its own MetaRoCE rings, the queues
# it shares with the kernel (include/uapi/rdma/metaroce-abi.h), and rings
# the send doorbell by hand: hostile_rings.c, built here against
# libibverbs, on host A alone (its RC QPs connect to each other over the
# host's own plane-0 address, through lo; its UD QP sends to itself):
#  1. receive WQEs whose SGE wraps past 2^64, or with num_sge 1000, then a
#     16 KiB SEND into them;
#  2. send-ring indices far apart: the consumer index one past the
#     producer on a UD QP, the producer 2^31 ahead on an RC QP, and an RC
#     QP's producer moved back behind requests the kernel has taken;
#  3. send WQEs with num_sge 1000, an inline length of 100000, an SGE
#     wrapping past 2^64.
# For each, the kernel must answer promptly (the doorbell within 2 s) with
# an error, error completions or the QP in the error state, and never more
# completions than the ring holds; it must never oops, lock up, stall or
# hang: the kernel log since the test started must show no report, and
# the UD ring's corruption must not make the device send more datagrams
# than the ring holds.
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'tc qdisc del dev lo root 2> /dev/null; rm -rf "$tmp"; timeout 60 bash -c ". \"$here/lib.sh\"; reset_rdma"' EXIT
timeout 60 bash -c ". \"$here/lib.sh\"; reset_rdma"
command -v cc > /dev/null || skip "no C compiler (cc) on host A"
[ -f /usr/include/infiniband/verbs.h ] || skip "libibverbs-dev not installed"

out=$(timeout 120 cc -O2 -Wall -o "$tmp/hostile_rings" "$here/hostile_rings.c" -libverbs 2>&1) ||
	fail "cannot build hostile_rings.c: $out"
[ -z "$out" ] || log "$out"
log "ok: built hostile_rings"

expect_ok timeout 30 rdma link add mr0 type metaroce netdev "$PLANE0_DEV"
timeout 30 ibv_devices | grep -q "mr0" || fail "libibverbs does not list mr0 (provider not loaded)"
# Host A's plane-0 RoCE v2 GID (lib.sh's plane0_gids also wants host B's).
gid=""
for _ in $(seq 50); do
	gid=$(gid_index mr0 "$PLANE0_IP") && break
	gid=""
	sleep 0.2
done
[ -n "$gid" ] || fail "no RoCE v2 GID for $PLANE0_IP on mr0"
log "ok: mr0 GID index $gid ($PLANE0_IP)"

# mr0_counter NAME: counter NAME of mr0/1 (lib.sh's mr0_stat, time-bounded).
mr0_counter() { stat_of "$1" "$(timeout 10 rdma -j statistic show link mr0/1)"; }
ud0=$(mr0_counter ud_tx_packets)
[ -n "$ud0" ] || fail "mr0 shows no ud_tx_packets counter"

# The two QPs talk over lo. Jitter on lo reorders their packets, so that a
# packet from inside a message, not its first, is often the first to reach
# the hostile receive SGE: the offset arithmetic is then done on the hostile
# address itself (in order, the first packet fails the message and the
# later ones are discarded unplaced).
expect_ok tc qdisc add dev lo root netem delay 1ms 1ms
# The cases run one by one, each in a child with a 30 s deadline.
timeout --kill-after=10 240 "$tmp/hostile_rings" mr0 "$gid"
rc=$?
expect_ok tc qdisc del dev lo root

# Whatever the program said, the kernel must not have complained. The
# patterns of the rig's dmesg check (rig/dmesg-check.sh) plus lockups and
# Rust panics, in the log since this test started (lib.sh's dmesg_mark); a
# user-space fault ("traps: prog[pid] general protection fault") is the
# program's own crash, reported by its exit status.
pattern='WARNING: |BUG: |kernel BUG at|Oops|general protection fault|KASAN:|KFENCE:|UBSAN:|Call Trace:|blocked for more than|rcu_.* detected stalls|self-detected stall|soft lockup|hard LOCKUP|possible (circular|recursive) locking|inconsistent lock state|Kernel panic|panicked at'
reports=$(dmesg | tail -n +"$((dmesg_mark + 1))" | grep -Ev '\] traps: [^ ]+\[[0-9]+\] general protection fault ip:' |
	grep -E -A3 "$pattern" | head -40)
[ -z "$reports" ] || fail "the kernel reported a problem:
$reports"
log "ok: no kernel report (oops, lockup, stall, hung task, lockdep, KASAN) in dmesg"
if dmesg_has "send ring indices corrupted by the process"; then
	log "ok: dmesg: the driver noticed the corrupted send ring"
fi
if dmesg_has "send ring producer moved back behind taken requests"; then
	log "ok: dmesg: the driver noticed the producer moved back"
fi

if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
	fail "hostile_rings did not finish within 240 s (hung?)"
fi
[ "$rc" = 0 ] || fail "hostile_rings failed (exit $rc): see the FAIL lines above"

ud1=$(mr0_counter ud_tx_packets)
log "$(timeout 10 rdma statistic show link mr0/1)"
# One valid datagram, plus at most the UD send ring's 64 entries.
ud=$(( ${ud1:-0} - ${ud0:-0} ))
[ "$ud" -le 65 ] || fail "$ud datagrams sent: more than the valid one and a 64-entry ring's worth"
log "ok: $ud datagram(s) sent in all (at most 1 + 64)"
