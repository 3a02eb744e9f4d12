#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# UC (unreliable connected) QPs over MetaRoCE. UC rides the RC engine
# (protocol.md 5): its packets are acknowledged and retransmitted, which UC
# semantics permit, so the unmodified ibv_uc_pingpong --chk passes between
# host A and host B for a small and a multi-packet message, also with 2%
# random loss on the link in both directions (where a UC transport without
# retransmission would lose messages and hang the pingpong). Then
# uc_drop.py checks what makes UC differ from RC on one host: the responder
# drops what it cannot take (wrong rkey, no receive, receive too short)
# instead of failing both QPs, and READs are refused.
. "$(dirname "$0")/lib.sh"
trap 'two_host_cleanup -q' EXIT
reset_rdma
command -v ibv_uc_pingpong > /dev/null || skip "ibverbs-utils not installed"

mr0_on_both_hosts

pingpong() { # size label
	pingpong_run ibv_uc_pingpong 100 "$1 B, $2" -d mr0 -n 100 -s "$1" -c
	log "ok: UC $1 B x 100 round trips, data checked, $2"
}
pingpong 64 lossless
pingpong 16384 lossless

expect_ok tc qdisc add dev "$PLANE0_DEV" root netem loss 2%
peer "tc qdisc add dev \$PLANE0_DEV root netem loss 2%" || fail "netem on host B"
retx0=$(mr0_stat retransmissions)
pingpong 16384 "2% loss both ways"
dropped=$(tc -s qdisc show dev "$PLANE0_DEV" | sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -1)
log "netem dropped ${dropped:-0} packets leaving host A"
[ "${dropped:-0}" -gt 0 ] || fail "netem dropped nothing: the loss run proves nothing"
retx=$(($(mr0_stat retransmissions) - retx0))
[ "$retx" -gt 0 ] || fail "no retransmissions counted under loss"
[ "$(mr0_stat rx_malformed)" = 0 ] || fail "$(mr0_stat rx_malformed) malformed packets"
log "ok: $retx UC packets retransmitted under loss, none malformed"
tc qdisc del dev "$PLANE0_DEV" root
peer "tc qdisc del dev \$PLANE0_DEV root" > /dev/null

out=$(/usr/bin/python3 "$METAROCE_REPO/selftests/uc_drop.py" mr0 "$gid" 2>&1)
rc=$?
log "$out"
[ $rc = 0 ] || fail "uc_drop.py failed"
