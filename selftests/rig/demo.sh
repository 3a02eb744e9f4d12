#!/bin/bash
# The demo, run on host A of the rig (make demo): MetaRoCE devices on both
# planes of both hosts, what the RDMA tools show of them, and the unmodified
# ibv_rc_pingpong (data checked) over MetaRoCE and over rxe on the same
# link, lossless and with 1% random loss in both directions, side by side.
. "$(dirname "$0")/../lib.sh"
say() { printf '\n== %s\n' "$*"; }

say "rdma link add mr0/mr1 type metaroce, on both planes of both hosts"
for p in $(seq 0 $((METAROCE_PLANES - 1))); do
	dev=PLANE${p}_DEV
	rdma link add "mr$p" type metaroce netdev "${!dev}" || exit 1
	peer "rdma link add mr$p type metaroce netdev \$PLANE${p}_DEV" || exit 1
done
modprobe rdma_rxe && rdma link add rxe0 type rxe netdev "$PLANE0_DEV" || exit 1
peer "modprobe rdma_rxe && rdma link add rxe0 type rxe netdev \$PLANE0_DEV" || exit 1
say "host A: rdma link"; rdma link show
say "host A: ibv_devices (MetaRoCE through its provider, rxe through rdma-core's)"; ibv_devices
sleep 2

# pingpong DEV LABEL: 200 round trips of 16 KiB, data checked; prints Mbit/s.
pingpong() {
	local dev=$1 g pg job out
	g=$(gid_index "$dev" "$PLANE0_IP") || { echo "n/a"; return; }
	pg=$(peer ". $METAROCE_REPO/selftests/lib.sh; gid_index $dev $PEER_PLANE0_IP") || { echo "n/a"; return; }
	job=$(peer_spawn "timeout 150 ibv_rc_pingpong -d $dev -g $pg -n 200 -s 16384 -c")
	for _ in $(seq 10); do
		sleep 1
		out=$(timeout 150 ibv_rc_pingpong -d "$dev" -g "$g" -n 200 -s 16384 -c "$PEER_PLANE0_IP" 2>&1) && break
	done
	peer_wait "$job" 160 > /dev/null
	sed -n 's/.* = \([0-9.]*\) Mbit\/sec/\1/p' <<< "$out" | head -1 | grep . || echo "failed"
}

say "ibv_rc_pingpong --chk, 16 KiB x 200, host A <-> host B over plane 0"
printf '%-10s %10s %10s\n' "loss" "MetaRoCE" "rxe"
for loss in 0 1; do
	if [ "$loss" != 0 ]; then
		tc qdisc add dev "$PLANE0_DEV" root netem loss "$loss%"
		peer "tc qdisc add dev \$PLANE0_DEV root netem loss $loss%"
	fi
	printf '%-10s %10s %10s   (Mbit/s)\n' "$loss%" "$(pingpong mr0)" "$(pingpong rxe0)"
done
tc qdisc del dev "$PLANE0_DEV" root 2>/dev/null
peer "tc qdisc del dev \$PLANE0_DEV root" 2>/dev/null

say "MetaRoCE counters on host A (retransmissions are the lost packets only)"
rdma statistic show link mr0/1
reset_rdma
peer "rdma link delete mr0; rdma link delete mr1; rdma link delete rxe0; rmmod metaroce" > /dev/null 2>&1
say "done"
