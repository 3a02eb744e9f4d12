#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# UD datagrams between host A and host B over MetaRoCE, data checked: the
# unmodified ibv_ud_pingpong (rdma-core) with --chk, through our provider,
# for a small datagram and one of the full port MTU. Each datagram is one
# UD_SEND packet (protocol.md section 5); the device counters must show
# them sent and received as datagrams, none dropped, none malformed.
. "$(dirname "$0")/lib.sh"
trap two_host_cleanup EXIT
reset_rdma
command -v ibv_ud_pingpong > /dev/null || skip "ibverbs-utils not installed"

mr0_on_both_hosts

mtu=$(ibv_devinfo -d mr0 | sed -n 's/.*active_mtu:[[:space:]]*\([0-9]*\).*/\1/p')
[ -n "$mtu" ] || fail "no active_mtu for mr0"
iters=100
pingpong() { # size
	pingpong_run ibv_ud_pingpong 100 "$1 B" -d mr0 -n "$iters" -s "$1" -c
	log "ok: $1 B x $iters round trips as datagrams, data checked"
}
tx0=$(mr0_stat ud_tx_packets) rx0=$(mr0_stat ud_rx_packets)
pingpong 64
pingpong "$mtu"

log "$(rdma statistic show link mr0/1)"
tx=$(($(mr0_stat ud_tx_packets) - tx0)) rx=$(($(mr0_stat ud_rx_packets) - rx0))
[ "$tx" -ge $((2 * iters)) ] || fail "only $tx datagrams sent, want >= $((2 * iters))"
[ "$rx" -ge $((2 * iters)) ] || fail "only $rx datagrams received, want >= $((2 * iters))"
[ "$(mr0_stat ud_rx_dropped)" = 0 ] || fail "$(mr0_stat ud_rx_dropped) datagrams dropped"
[ "$(mr0_stat rx_malformed)" = 0 ] || fail "$(mr0_stat rx_malformed) malformed packets"
[ "$(mr0_stat retransmissions)" = 0 ] || fail "datagrams are never retransmitted"
log "ok: $tx datagrams sent, $rx received, none dropped or malformed"

# A user QP never reaches kernel memory, whatever lkey it names.
out=$(/usr/bin/python3 "$METAROCE_REPO/selftests/ud_bad_lkey.py" mr0 "$gid" 2>&1)
rc=$?
log "$out"
[ $rc = 0 ] || fail "ud_bad_lkey.py failed"

# The receiver's checks, with datagrams built from the spec by
# metaroce_pkt.py on host B: a wrong Q_Key for QP1 and an unknown QP are
# dropped; a datagram with the GSI Q_Key reaches QP1 (the MAD layer then
# discards its empty MAD), also one with immediate data, and nothing
# breaks; a source QPN wider than 24 bits is malformed.
pkt="/usr/bin/python3 $METAROCE_REPO/selftests/metaroce_pkt.py send --dst $PLANE0_IP --kind ud"
rx0=$(mr0_stat ud_rx_packets) drop0=$(mr0_stat ud_rx_dropped) bad0=$(mr0_stat rx_malformed)
peer "$pkt --qpn 1 --qkey 0x1234" > /dev/null || fail "cannot send a datagram from host B"
peer "$pkt --qpn 0x3ff0" > /dev/null || fail "cannot send a datagram from host B"
peer "$pkt --qpn 1" > /dev/null || fail "cannot send a datagram from host B"
peer "$pkt --qpn 1 --imm 0x5eed1234" > /dev/null || fail "cannot send a datagram from host B"
peer "$pkt --qpn 1 --src-qpn 0x1000021" > /dev/null || fail "cannot send a datagram from host B"
sleep 1
drops=$(($(mr0_stat ud_rx_dropped) - drop0)) rx=$(($(mr0_stat ud_rx_packets) - rx0))
bad=$(($(mr0_stat rx_malformed) - bad0))
[ "$drops" = 2 ] || fail "$drops datagrams dropped, want 2 (wrong Q_Key, unknown QP)"
[ "$rx" = 2 ] || fail "$rx datagrams delivered, want 2 (to QP1 with the GSI Q_Key, with and without immediate)"
[ "$bad" = 1 ] || fail "$bad malformed packets, want 1 (a 25-bit source QPN)"
log "ok: wrong Q_Key and unknown QP dropped, GSI Q_Key delivered to QP1 (also with immediate data), a 25-bit source QPN malformed"
