#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Baseline: rxe's ib_write_bw runs between host A and host B over plane 0.
# Proves the rig carries RDMA traffic and records the rxe number that later
# benchmarks compare against (in $METAROCE_OUT/rxe_baseline.txt).
. "$(dirname "$0")/lib.sh"
trap 'two_host_cleanup rxe0 rdma_rxe' EXIT
reset_rdma
command -v ib_write_bw > /dev/null || skip "perftest not installed"

expect_ok modprobe rdma_rxe
expect_ok rdma link add rxe0 type rxe netdev "$PLANE0_DEV"
peer "modprobe rdma_rxe && rdma link add rxe0 type rxe netdev \$PLANE0_DEV" || fail "rxe on host B"

plane0_gids rxe0

args="-d rxe0 -s 65536 -n 300 -F"
job=$(peer_spawn "ib_write_bw $args -x $pgid") || fail "cannot start the server on host B"
out=""
for _ in $(seq 10); do
	sleep 1
	out=$(ib_write_bw $args -x "$gid" "$PEER_PLANE0_IP" 2>&1) && break
done
log "$out"
server=$(peer_wait "$job" 60) || fail "server on host B failed: $server"
bw=$(awk '$1 == 65536 { print $4 }' <<< "$out")
[ -n "$bw" ] || fail "no bandwidth line in the client output"
awk -v bw="$bw" 'BEGIN { exit !(bw > 0) }' || fail "bandwidth $bw MB/s is not positive"
echo "rxe ib_write_bw 64KiB: $bw MB/s" | tee "$METAROCE_OUT/rxe_baseline.txt"
