#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# RoCE v2 over IPv6 GIDs between host A and host B (issue #14 item 4): the
# unmodified ibv_rc_pingpong --chk, ibv_ud_pingpong --chk (datagrams: an
# address handle to an IPv6 GID, the GRH an IPv6 header), ib_write_bw and
# rping -V over the
# plane-0 link-local address (fe80::, usually GID index 0: the `-g 0` /
# `-x 0` every soft-RoCE guide shows) and over a unique-local address
# (fd00:4d52:P::N/64 on plane P, added here and removed at the end). With
# two planes, mr0 spans both and the IPv6 QPs must spray over plane 1 too
# (PLANES lists IPv6 addresses of the QP's scope, protocol.md 1.8).
# Checked besides: the packets are IPv6 (host A's Udp6InDatagrams grows),
# none failed the UDP checksum (mandatory over IPv6, protocol.md 1:
# Udp6InCsumErrors unchanged on both hosts), and no malformed packet.
. "$(dirname "$0")/lib.sh"
need_tools ibv_rc_pingpong ib_write_bw rping
[ -e /proc/net/if_inet6 ] || skip "the kernel has no IPv6"

planes="$PLANE0_DEV ${PLANE1_DEV:-}"
n=${PLANE0_IP##*.} peer_n=${PEER_PLANE0_IP##*.}
ula() { echo "fd00:4d52:$1::$2"; } # plane host

# ula_addrs add|del [nodad]: the unique-local addresses on both hosts'
# planes (nodad: usable at once; the two hosts' addresses differ by
# construction). Both hosts are done whatever the first one says.
ula_addrs() {
	local p=0 d cmd_a="" cmd_b="" rc
	for d in $planes; do
		cmd_a+="ip -6 addr $1 $(ula $p "$n")/64 dev $d ${2:-}; "
		# shellcheck disable=SC2016
		cmd_b+="ip -6 addr $1 $(ula $p "$peer_n")/64 dev \$PLANE${p}_DEV ${2:-}; "
		p=$((p + 1))
	done
	bash -c "$cmd_a"
	rc=$?
	peer "$cmd_b" && [ $rc = 0 ]
}
cleanup() {
	ula_addrs del > /dev/null 2>&1
	two_host_cleanup -k rping -k ib_write_bw
}
trap cleanup EXIT
reset_rdma
ula_addrs del > /dev/null 2>&1
ula_addrs add nodad || fail "cannot add the unique-local addresses"

if [ -n "${PLANE1_DEV:-}" ]; then
	mr0_on_both_planes
else
	mr0_on_both_hosts
fi

# Both hosts' plane-0 link-local addresses (once DAD is done) and the GID
# indexes of the IPv6 addresses on mr0 (the core adds a GID when an
# address appears).
for _ in $(seq 50); do
	ll=$(ipv6_ll "$PLANE0_DEV") && pll=$(peer ". $METAROCE_REPO/selftests/lib.sh; ipv6_ll \$PLANE0_DEV") &&
		ll_gid=$(gid6_index mr0 "$ll") &&
		ll_pgid=$(peer ". $METAROCE_REPO/selftests/lib.sh; gid6_index mr0 $pll") &&
		ula_gid=$(gid6_index mr0 "$(ula 0 "$n")") &&
		ula_pgid=$(peer ". $METAROCE_REPO/selftests/lib.sh; gid6_index mr0 $(ula 0 "$peer_n")") &&
		break
	ll_gid="" ula_gid=""
	sleep 0.2
done
[ -n "$ll_gid" ] && [ -n "$ula_gid" ] ||
	fail "no IPv6 GIDs on mr0 (A: ${ll:-no link-local} ${ll_gid:-?}, $(ula 0 "$n") ${ula_gid:-?})"
log "link-local: A $ll GID $ll_gid, B $pll GID $ll_pgid; unique-local: A GID $ula_gid, B GID $ula_pgid"
[ "$ll_gid" = 0 ] || log "note: the link-local GID is not index 0 on host A"

snmp6() { awk -v k="$1" '$1 == k { print $2 }' /proc/net/snmp6; }
peer_snmp6() { peer "awk '\$1 == \"$1\" { print \$2 }' /proc/net/snmp6"; }
udp6_in0=$(snmp6 Udp6InDatagrams) csum0=$(snmp6 Udp6InCsumErrors) pcsum0=$(peer_snmp6 Udp6InCsumErrors)

# plane1_tx: packets mr0 sent on plane 1 so far (0 with one plane).
plane1_tx() { [ -n "${PLANE1_DEV:-}" ] && mr0_stat plane1_tx_packets || echo 0; }

port=18950
for kind in link-local unique-local; do
	# Ports of their own for each run (a server's port may linger).
	port=$((port + 2))
	if [ $kind = link-local ]; then
		gid=$ll_gid pgid=$ll_pgid
		rping_srv="$pll%\$PLANE0_DEV" rping_dst="$pll%$PLANE0_DEV"
	else
		gid=$ula_gid pgid=$ula_pgid
		rping_srv=$(ula 0 "$peer_n") rping_dst=$(ula 0 "$peer_n")
	fi

	# The pingpong (its TCP exchange over IPv4; the QPs over IPv6 GIDs).
	for size in 64 16384; do
		pingpong_run ibv_rc_pingpong 120 "$kind, $size B" -d mr0 -n 100 -s $size -c
		log "ok: ibv_rc_pingpong --chk over $kind GIDs $gid/$pgid: $size B x 100 round trips"
	done
	pingpong_run ibv_ud_pingpong 120 "$kind, UD" -d mr0 -n 100 -s 512 -c
	log "ok: ibv_ud_pingpong --chk over $kind GIDs $gid/$pgid: 512 B x 100 round trips"

	# ib_write_bw -x: a few iterations, one QP; with two planes plane 1
	# must carry part of it.
	p1=$(plane1_tx)
	perftest_pair 180 "-d mr0 -x $pgid -p $port" "-d mr0 -x $gid -p $port" "$METAROCE_PEER_ADDR" \
		ib_write_bw -n 50 -s 65536
	awk '{ exit !($2 > 0) }' <<< "$res" || fail "ib_write_bw -x $gid: no iterations completed: $res"
	log "ok: ib_write_bw -x $gid ($kind): $res"
	if [ -n "${PLANE1_DEV:-}" ]; then
		sent=$(($(plane1_tx) - p1))
		[ "$sent" -gt 0 ] || { mr0_counters; fail "ib_write_bw over $kind GIDs sent nothing on plane 1"; }
		log "ok: $sent packets of it on plane 1"
	fi

	# rping -V over the IPv6 address (rdma_cm: its MADs as GSI datagrams
	# over IPv6, the RC QP it connects over IPv6 too).
	rping_validated 10 "$rping_srv" "$rping_dst" $((port + 1)) /tmp/ipv6_rping
done

# The traffic was IPv6, its UDP checksums right (the IPv6 sockets drop a
# zero or wrong one, and count it), and nothing malformed.
udp6_in=$(($(snmp6 Udp6InDatagrams) - udp6_in0))
[ "$udp6_in" -ge 1000 ] || fail "host A received only $udp6_in UDP datagrams over IPv6"
csum=$(($(snmp6 Udp6InCsumErrors) - csum0)) pcsum=$(($(peer_snmp6 Udp6InCsumErrors) - pcsum0))
if [ "$csum" != 0 ] || [ "$pcsum" != 0 ]; then
	fail "UDP checksum errors over IPv6: host A $csum, host B $pcsum"
fi
log "ok: $udp6_in UDP datagrams in over IPv6 on host A, no checksum error on either host"
stats=$(mr0_stats)
log "$stats"
bad=$(stat_of rx_malformed "$stats")
[ "${bad:-1}" = 0 ] || fail "$bad malformed packets received on host A"
pbad=$(stat_of rx_malformed "$(mr0_stats peer)")
[ "${pbad:-1}" = 0 ] || fail "$pbad malformed packets received on host B"
log "ok: no malformed packet on either host"
