#!/bin/bash
# The demo, run on host A of the rig (make demo): a MetaRoCE device spanning
# both planes on each host, what the RDMA tools show of it, then the
# unmodified ib_write_bw between the hosts over MetaRoCE and over rxe on the
# same rig, lossless and with 1% random loss on every plane in both
# directions, side by side.
. "$(dirname "$0")/../lib.sh"
say() { printf '\n== %s\n' "$*"; }
planes=$METAROCE_PLANES

say "rdma link add mr0 type metaroce: one device over all $planes planes, on both hosts"
for p in $(seq 0 $((planes - 1))); do
	dev=PLANE${p}_DEV
	# The first command creates mr0; each further one adds a plane to it.
	echo "# rdma link add mr0 type metaroce netdev ${!dev}"
	rdma link add mr0 type metaroce netdev "${!dev}" || exit 1
	peer "rdma link add mr0 type metaroce netdev \$PLANE${p}_DEV" || exit 1
done
modprobe rdma_rxe && rdma link add rxe0 type rxe netdev "$PLANE0_DEV" || exit 1
peer "modprobe rdma_rxe && rdma link add rxe0 type rxe netdev \$PLANE0_DEV" || exit 1
say "host A: rdma link"; rdma link show
say "host A: ibv_devices (MetaRoCE through its provider, rxe through rdma-core's)"; ibv_devices
plane0_gids mr0

# plane_bytes: bytes sent on each plane's netdev of host A, space separated.
plane_bytes() {
	local p dev
	for p in $(seq 0 $((planes - 1))); do
		dev=PLANE${p}_DEV
		printf '%s ' "$(cat /sys/class/net/${!dev}/statistics/tx_bytes)"
	done
}

port=18600
# write_bw DEV: ib_write_bw 64 KiB for 10 s from A to B; prints MiB/s.
write_bw() {
	local dev=$1 g pg job out
	port=$((port + 1))
	g=$(gid_index "$dev" "$PLANE0_IP") || { echo "n/a"; return; }
	pg=$(peer ". $METAROCE_REPO/selftests/lib.sh; gid_index $dev $PEER_PLANE0_IP") || { echo "n/a"; return; }
	job=$(peer_spawn "timeout 60 ib_write_bw -d $dev -x $pg -p $port -s 65536 -D 10 -Q 1")
	sleep 3
	out=$(timeout 60 ib_write_bw -d "$dev" -x "$g" -p "$port" -s 65536 -D 10 -Q 1 "$METAROCE_PEER_ADDR" 2>&1)
	peer_wait "$job" 70 > /dev/null
	# Result line: size iterations BW-peak BW-average MsgRate (MB/s = MiB/s).
	awk '$1 == 65536 && NF >= 5 { print $4; exit }' <<< "$out" | grep . || echo "failed"
}

say "ib_write_bw, 64 KiB messages for 10 s, host A -> host B"
printf '%-22s %10s %10s %8s   %s\n' "loss" "MetaRoCE" "rxe" "ratio" "MetaRoCE bytes per plane"
for loss in 0 1; do
	for p in $(seq 0 $((planes - 1))); do
		dev=PLANE${p}_DEV
		tc qdisc del dev "${!dev}" root 2> /dev/null
		peer "tc qdisc del dev \$PLANE${p}_DEV root" > /dev/null 2>&1
		if [ "$loss" != 0 ]; then
			tc qdisc add dev "${!dev}" root netem loss "$loss%"
			peer "tc qdisc add dev \$PLANE${p}_DEV root netem loss $loss%"
		fi
	done
	before=($(plane_bytes))
	m=$(write_bw mr0)
	after=($(plane_bytes))
	spread=""
	for p in $(seq 0 $((planes - 1))); do
		spread+="plane$p $(((after[p] - before[p]) / 1048576)) MiB  "
	done
	r=$(write_bw rxe0)
	ratio=$(awk -v a="$m" -v b="$r" 'BEGIN { if (b + 0 > 0 && a + 0 > 0) printf "%.2f", a / b; else print "-" }')
	printf '%-22s %10s %10s %8s   %s\n' "$loss% on every plane" "$m" "$r" "$ratio" "$spread"
done
for p in $(seq 0 $((planes - 1))); do
	dev=PLANE${p}_DEV
	tc qdisc del dev "${!dev}" root 2> /dev/null
	peer "tc qdisc del dev \$PLANE${p}_DEV root" > /dev/null 2>&1
done
echo "(MiB/s; two TCG VMs on one machine: compare the ratio, not the absolute rate)"

say "MetaRoCE counters on host A (retransmissions are the lost packets only)"
rdma statistic show link mr0/1
reset_rdma
peer "rdma link delete mr0; rdma link delete rxe0; rmmod metaroce" > /dev/null 2>&1
say "done"
