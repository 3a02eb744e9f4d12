#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Receive-side semantics of RC QPs between host A (responder) and host B
# (requester) over MetaRoCE, with pyverbs (rq_semantics.py):
#  - srq: one SRQ serving two QPs on A; B sends 12 multi-packet SENDs of
#    varying length on each of two QPs at once, with netem delaying B's
#    packets by 2 ms +- 1 ms (reordering). Every receive completion must be
#    a success on the QP whose peer sent the data in its buffer, with that
#    message's byte_len and bytes, each QP's messages in order;
#  - overflow: a receive CQ of one entry that A never polls, more SENDs than
#    it holds: IBV_EVENT_CQ_ERR on A's context and A's QP in error, in 10 s;
#  - error: A moves its QP to the error state (its receive flushed); B's
#    WRITE and SEND must not complete successfully, neither A's region nor
#    its receive buffer may change, rx_qp_in_error must grow and a receive
#    posted in error must complete flushed within 2 s;
#  - ud_error: A's UD QP goes to the error state by a CQ overrun; the
#    datagrams B sends after that must be counted (rx_qp_in_error) and land
#    in no receive buffer;
#  - reset: RESET with an SRQ receive partly filled and WRITEs in flight,
#    RESET -> INIT -> ERR, reconnecting the same QP, WRITE_IMM to an empty SRQ
#    (rq_semantics.py's docstring has the checks).
. "$(dirname "$0")/lib.sh"
# A case that failed may leave a drop filter (verbs_util.TcDrop) behind:
# planes_cleanup removes the planes' qdiscs on both hosts.
trap planes_cleanup EXIT
reset_rdma
/usr/bin/python3 -c "import pyverbs" 2> /dev/null || skip "python3-pyverbs not installed"

mr0_on_both_hosts

here=$(cd "$(dirname "$0")" && pwd)
port=18680
# run_case CASE: rq_semantics.py's requester on B, its responder on A.
run_case() {
	local job out rc server srv_rc
	job=$(peer_spawn "timeout 150 /usr/bin/python3 $METAROCE_REPO/selftests/rq_semantics.py requester mr0 $pgid $port $1") ||
		fail "cannot start the requester on host B ($1)"
	out=$(timeout 150 /usr/bin/python3 "$here/rq_semantics.py" responder mr0 "$gid" "$METAROCE_PEER_ADDR" "$port" "$1" 2>&1)
	rc=$?
	echo "$out"
	server=$(peer_wait "$job" 180)
	srv_rc=$?
	# shellcheck disable=SC2001
	[ -n "$server" ] && echo "$server" | sed 's/^/B: /'
	port=$((port + 1))
	[ $rc -eq 0 ] || { mr0_counters; fail "case $1: responder (host A) failed (exit $rc)"; }
	[ $srv_rc -eq 0 ] || { mr0_counters; fail "case $1: requester (host B) failed"; }
}

# B's packets through netem on each of its planes: delay with jitter
# reorders them (netem's queue is sorted by send time). The variables
# are host B's.
# shellcheck disable=SC2016
peer 'for d in $PLANE0_DEV $PLANE1_DEV; do tc qdisc replace dev $d root netem delay 2ms 1ms || exit 1; done' ||
	fail "netem on host B"
log "ok: netem delay 2ms 1ms on host B's planes"
run_case srq
# The 24 SENDs (rq_semantics.py's msg_len: 12 of 20,000..31,000 bytes on
# each QP, 612,000 bytes of payload) must have gone through netem, or the
# run proved nothing about reordering. Counted in bytes, which headers only
# add to: the packets depend on the payload size the hosts agreed (1,412
# bytes at a 1500-byte MTU, 444 packets) and on how many the sender resent.
sent=$(peer "tc -s qdisc show dev \$PLANE0_DEV" | sed -n 's/.*Sent \([0-9]*\) bytes \([0-9]*\) pkt.*/\1 \2/p' | head -1)
read -r bytes pkts <<< "${sent:-0 0}"
log "netem on host B's plane 0 sent $bytes bytes in $pkts packets"
[ "$bytes" -ge 612000 ] || fail "netem on host B's plane 0 sent $bytes bytes, expected >= 612000 (the SENDs' payload)"
log "B: retransmissions $(mr0_stat retransmissions peer), sack_losses $(mr0_stat sack_losses peer), sack_reorders $(mr0_stat sack_reorders peer)"
# shellcheck disable=SC2016
peer 'for d in $PLANE0_DEV $PLANE1_DEV; do tc qdisc del dev $d root || exit 1; done' ||
	fail "cannot remove netem on host B"
log "ok: netem removed"

run_case overflow
dmesg_has "CQ overrun" && log "host A's kernel log: $(dmesg | grep -F 'CQ overrun' | tail -1)"
run_case error
run_case ud_error
run_case reset
log "ok: SRQ placement under reordering, CQ overrun, a responder in error (RC, UD) placed nothing, RESET forgets the queues but returns SRQ receives"
