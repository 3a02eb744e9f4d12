#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# RC SEND between host A and host B over MetaRoCE, data checked: the
# unmodified ibv_rc_pingpong (rdma-core) with --chk, through our provider,
# for a small and a multi-packet message size, then again with 2% random
# loss (netem) on the link in both directions: MetaRoCE retransmits only the
# lost packets and the data still checks. The device counters must show the
# traffic, the retransmissions and no malformed packets.
. "$(dirname "$0")/lib.sh"
trap 'two_host_cleanup -q' EXIT
reset_rdma
command -v ibv_rc_pingpong > /dev/null || skip "ibverbs-utils not installed"

expect_ok rdma link add mr0 type metaroce netdev "$PLANE0_DEV"
peer "rdma link add mr0 type metaroce netdev \$PLANE0_DEV" > /dev/null || fail "mr0 on host B"
ibv_devices | grep -q "mr0" || fail "libibverbs does not list mr0 (provider not loaded)"

plane0_gids mr0

pingpong() { # size label
	pingpong_run ibv_rc_pingpong 100 "$1 B, $2" -d mr0 -n 100 -s "$1" -c
	log "ok: $1 B x 100 round trips, data checked, $2"
}
pingpong 64 lossless
pingpong 16384 lossless

expect_ok tc qdisc add dev "$PLANE0_DEV" root netem loss 2%
peer "tc qdisc add dev \$PLANE0_DEV root netem loss 2%" || fail "netem on host B"
pingpong 16384 "2% loss both ways"
dropped=$(tc -s qdisc show dev "$PLANE0_DEV" | sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -1)
log "netem dropped ${dropped:-0} packets leaving host A"
[ "${dropped:-0}" -gt 0 ] || fail "netem dropped nothing: the loss run proves nothing"

stats=$(mr0_stats)
log "$stats"
tx=$(stat_of tx_packets "$stats")
bad=$(stat_of rx_malformed "$stats")
[ "${tx:-0}" -ge 200 ] || fail "only ${tx:-0} packets sent"
[ "${bad:-1}" = 0 ] || fail "$bad malformed packets received"
retx=$(stat_of retransmissions "$stats")
[ "${retx:-0}" -gt 0 ] || fail "no retransmissions counted under loss"
log "ok: $retx retransmissions (selective: only lost packets)"
