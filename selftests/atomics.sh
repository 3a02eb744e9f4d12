#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# RDMA atomics between host A and host B over MetaRoCE (protocol.md 5.1),
# with pyverbs (atomics.py): fetch-and-add, compare-and-swap (a miss and a
# hit) and the 8-byte atomic write return the original values and leave
# exactly the expected bytes in B's memory; a bad rkey, a region without
# the access, an address outside the region, a misaligned address, a QP
# without REMOTE_ATOMIC and a bad lkey each complete with their error
# status and change nothing. Then, with 10% loss (netem) both ways on the
# link, 300 fetch-adds of 1 on one word: the originals must come back as
# 0..299 in order and the word must end 300 higher, so no retransmitted
# request ran twice; both hosts must have retransmitted.
. "$(dirname "$0")/lib.sh"
trap 'two_host_cleanup -q' EXIT
reset_rdma
/usr/bin/python3 -c "import pyverbs" 2> /dev/null || skip "python3-pyverbs not installed"

mr0_on_both_hosts
ibv_devinfo -d mr0 -v | grep -q "atomic_cap:.*ATOMIC_HCA" || fail "mr0 does not report atomic_cap ATOMIC_HCA"
log "ok: mr0 reports atomic_cap ATOMIC_HCA"

here=$(cd "$(dirname "$0")" && pwd)
port=18660
# run_atomics MODE...: atomics.py server on B, client on A.
run_atomics() {
	local job out rc server srv_rc
	job=$(peer_spawn "timeout 300 /usr/bin/python3 $METAROCE_REPO/selftests/atomics.py server mr0 $pgid $port") ||
		fail "cannot start the server on host B"
	out=$(timeout 300 /usr/bin/python3 "$here/atomics.py" client mr0 "$gid" "$METAROCE_PEER_ADDR" "$port" "$@" 2>&1)
	rc=$?
	echo "$out"
	server=$(peer_wait "$job" 120)
	srv_rc=$?
	[ -n "$server" ] && echo "$server" | sed 's/^/B: /'
	[ $rc -eq 0 ] || fail "client (host A) failed: atomics.py $*"
	[ $srv_rc -eq 0 ] || fail "server (host B) failed: atomics.py $*"
	port=$((port + 1))
}
run_atomics cases

expect_ok tc qdisc add dev "$PLANE0_DEV" root netem loss 10%
peer "tc qdisc add dev \$PLANE0_DEV root netem loss 10%" || fail "netem on host B"
run_atomics once 300
dropped=$(tc -s qdisc show dev "$PLANE0_DEV" | sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -1)
log "netem dropped ${dropped:-0} packets leaving host A"
[ "${dropped:-0}" -gt 0 ] || fail "netem dropped nothing: the loss run proves nothing"
stats=$(mr0_stats)
pstats=$(mr0_stats peer)
log "A: $stats"
log "B: $pstats"
retx=$(stat_of retransmissions "$stats")
pretx=$(stat_of retransmissions "$pstats")
[ "${retx:-0}" -gt 0 ] || fail "host A retransmitted no atomic request under loss"
[ "${pretx:-0}" -gt 0 ] || fail "host B retransmitted no atomic response under loss"
bad=$(stat_of rx_malformed "$stats")
[ "${bad:-1}" = 0 ] || fail "$bad malformed packets received"
log "ok: atomics ran exactly once under loss: $retx requests and $pretx responses retransmitted"
