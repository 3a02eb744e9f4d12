#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Network namespaces (issue #14 item 6). A MetaRoCE device belongs to its
# netdev's namespace: `rdma link add` run inside one opens UDP port 4792
# there (one socket per namespace with devices), and traffic is routed and
# received there. On host A alone: two namespaces joined by a veth pair,
# a device on each end, ibv_rc_pingpong --chk and ib_write_bw between
# them, and with IPv6 in the kernel each namespace's IPv6 socket and
# ibv_rc_pingpong --chk over IPv6 GIDs (unique-local addresses on the veth
# pair); then one namespace is deleted with its device in it (the veth pair
# goes with it, so both devices go, each closing its namespace's socket).
# With a second plane, host A's plane 1 NIC is moved into a third
# namespace, carries a device there that talks to host B's device on
# plane 1 (in B's initial namespace), and the namespace is deleted under
# it: the NIC comes back to the initial namespace and the device goes.
# Every teardown must leave no WARN/BUG and no netdev reference behind, and
# the initial namespace's devices work afterwards.
#
# The RDMA subsystem must be in shared netns mode (the default; `rdma
# system show`): devices are then visible from every namespace, and each
# device's GID table is its own netdev's addresses.
. "$(dirname "$0")/lib.sh"

NS1=mrns1 NS2=mrns2 NS3=mrns3
IP1=198.19.47.1 IP2=198.19.47.2
IP6_1=fd00:4d52:47::1 IP6_2=fd00:4d52:47::2

cleanup() {
	pkill -9 ibv_rc_pingpong
	pkill -9 ib_write_bw
	ip netns del $NS1 2> /dev/null
	ip netns del $NS2 2> /dev/null
	ip netns del $NS3 2> /dev/null
	# Plane 1 back from $NS3 (a deleted namespace returns it), addressed.
	if [ -n "${PLANE1_DEV:-}" ]; then
		for _ in $(seq 100); do
			ip link show "$PLANE1_DEV" > /dev/null 2>&1 && break
			sleep 0.2
		done
		ip link set "$PLANE1_DEV" up 2> /dev/null
		ip addr add "$PLANE1_IP/24" dev "$PLANE1_DEV" 2> /dev/null
	fi
	two_host_cleanup mrb1
}
trap cleanup EXIT
reset_rdma
need_tools ibv_rc_pingpong ib_write_bw
rdma system show 2> /dev/null | grep -q "netns shared" ||
	skip "RDMA subsystem not in shared netns mode: $(rdma system show 2>&1)"

# in_ns NS CMD...: CMD in namespace NS.
in_ns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
# gone DEV SECS: wait up to SECS for RDMA device DEV to disappear.
gone() {
	local i
	for ((i = 0; i < $2 * 5; i++)); do
		rdma_dev_exists "$1" || return 0
		sleep 0.2
	done
	return 1
}
# port_open NS: whether namespace NS (empty: the initial one) has a
# socket on UDP port 4792.
port_open() {
	if [ -n "$1" ]; then
		in_ns "$1" ss -Hlun 'sport = :4792' | grep -q .
	else
		ss -Hlun 'sport = :4792' | grep -q .
	fi
}
# no_kernel_report WHAT: nothing in the kernel log since the test began
# that says a teardown went wrong.
no_kernel_report() {
	local bad
	bad=$(dmesg | tail -n +"$((dmesg_mark + 1))" |
		grep -E 'WARNING:|BUG:|Oops|general protection|unregister_netdevice: waiting|refcount_t:' | head -5)
	[ -z "$bad" ] || fail "kernel report after $1: $bad"
	log "ok: no kernel report after $1"
}
# ns_gid DEV IP: DEV's RoCE v2 GID index for IP, waiting for the core to
# fill the table (the device is visible from the initial namespace too).
ns_gid() {
	local i
	for i in $(seq 50); do
		gid_index "$1" "$2" && return 0
		sleep 0.2
	done
	fail "no RoCE v2 GID for $2 on $1"
}
# ns_gid6 DEV IP6: the same for an IPv6 address.
ns_gid6() {
	local i
	for i in $(seq 50); do
		gid6_index "$1" "$2" && return 0
		sleep 0.2
	done
	fail "no RoCE v2 GID for $2 on $1"
}
# ns_pingpong LABEL DEV1 GID1 DEV2 GID2 ARGS...: ibv_rc_pingpong --chk,
# server on DEV2 in $NS2, client on DEV1 in $NS1.
ns_pingpong() {
	local label=$1 d1=$2 g1=$3 d2=$4 g2=$5 srv out=""
	shift 5
	in_ns $NS2 timeout 100 ibv_rc_pingpong -d "$d2" -g "$g2" -c "$@" > /tmp/mr_netns_srv.log 2>&1 &
	srv=$!
	for _ in $(seq 10); do
		sleep 1
		out=$(in_ns $NS1 timeout 100 ibv_rc_pingpong -d "$d1" -g "$g1" -c "$@" $IP2 2>&1) && break
	done
	log "$out"
	grep -q "iters in" <<< "$out" || {
		log "$NS1: $(rdma statistic show link "$d1/1" 2>&1)"
		log "$NS2: $(rdma statistic show link "$d2/1" 2>&1)"
		fail "ibv_rc_pingpong between namespaces did not complete ($label)"
	}
	wait $srv || fail "ibv_rc_pingpong server in $NS2 failed ($label): $(cat /tmp/mr_netns_srv.log)"
	log "ok: ibv_rc_pingpong --chk $*, $label"
}

# Two namespaces, one veth pair between them.
ip netns add $NS1 || skip "cannot create network namespaces"
expect_ok ip netns add $NS2
expect_ok ip link add mrnv1 netns $NS1 type veth peer name mrnv2 netns $NS2
for n in 1 2; do
	ns=mrns$n
	ip=IP$n
	expect_ok in_ns $ns ip link set lo up
	expect_ok in_ns $ns ip addr add "${!ip}/24" dev mrnv$n
	expect_ok in_ns $ns ip link set mrnv$n up
done

# A device in each, made from inside it: each namespace gets its socket,
# the initial namespace none.
expect_ok in_ns $NS1 rdma link add mrn1 type metaroce netdev mrnv1
expect_ok in_ns $NS2 rdma link add mrn2 type metaroce netdev mrnv2
port_open $NS1 || fail "no UDP port 4792 in $NS1"
port_open $NS2 || fail "no UDP port 4792 in $NS2"
port_open "" && fail "UDP port 4792 open in the initial namespace, which has no device"
log "ok: UDP port 4792 open in $NS1 and $NS2 only"
[ "$(dmesg | tail -n +"$((dmesg_mark + 1))" | grep -c 'UDP port 4792 open in net:\[')" -ge 2 ] ||
	fail "kernel log lacks two 'UDP port 4792 open in net:[N]' lines"
in_ns $NS1 ibv_devices | grep -q mrn1 || fail "libibverbs in $NS1 does not list mrn1"
rdma link show mrn1/1 | grep -q "state ACTIVE" || fail "mrn1 not ACTIVE: $(rdma link show mrn1/1)"

# A plane must be in its device's namespace: plane 0 of the initial
# namespace is refused as mrn1's second plane.
expect_err "Invalid cross-device link" rdma link add mrn1 type metaroce netdev "$PLANE0_DEV"
expect_dmesg "not in the network namespace of its first plane"

g1=$(ns_gid mrn1 $IP1)
g2=$(ns_gid mrn2 $IP2)
ns_pingpong "veth" mrn1 "$g1" mrn2 "$g2" -n 100 -s 64
ns_pingpong "veth" mrn1 "$g1" mrn2 "$g2" -n 50 -s 16384

in_ns $NS2 timeout 120 ib_write_bw -d mrn2 -x "$g2" -n 100 -s 65536 > /tmp/mr_netns_bw.log 2>&1 &
srv=$!
sleep 3
out=$(in_ns $NS1 timeout 120 ib_write_bw -d mrn1 -x "$g1" -n 100 -s 65536 $IP2 2>&1) ||
	fail "ib_write_bw between namespaces failed: $(tail -15 <<< "$out")"
wait $srv || fail "ib_write_bw server in $NS2 failed: $(tail -5 /tmp/mr_netns_bw.log)"
res=$(awk '$1 == 65536 { print; exit }' <<< "$out")
awk '{ exit !($2 > 0 && $4 > 0) }' <<< "$res" || fail "ib_write_bw: no result: $(tail -5 <<< "$out")"
log "ok: ib_write_bw 100 x 64 KiB between namespaces: $res"

stats=$(rdma -j statistic show link mrn1/1)
tx=$(stat_of tx_packets "$stats")
bad=$(stat_of rx_malformed "$stats")
[ "${tx:-0}" -ge 300 ] || fail "mrn1 sent only ${tx:-0} packets"
[ "${bad:-1}" = 0 ] || fail "mrn1 received $bad malformed packets"
veth_tx=$(in_ns $NS1 cat /sys/class/net/mrnv1/statistics/tx_packets)
[ "$veth_tx" -ge "$tx" ] || fail "mrnv1 sent $veth_tx packets, fewer than mrn1's $tx"
log "ok: mrn1 sent $tx packets, all through mrnv1 ($veth_tx)"

# IPv6: each namespace's tunnel has its IPv6 socket as well (the kernel
# socket pair: 0.0.0.0:4792 and [::]:4792), and a QP connected over IPv6
# GIDs works between the namespaces.
if [ -e /proc/net/if_inet6 ]; then
	for ns in $NS1 $NS2; do
		socks=$(in_ns "$ns" ss -Hlun 'sport = :4792')
		[ "$(grep -c . <<< "$socks")" -ge 2 ] || fail "$ns has no IPv6 socket on UDP port 4792: $socks"
	done
	[ "$(dmesg | tail -n +"$((dmesg_mark + 1))" | grep -c 'UDP port 4792 open for IPv6 in net:\[')" -ge 2 ] ||
		fail "kernel log lacks two 'UDP port 4792 open for IPv6 in net:[N]' lines"
	log "ok: UDP port 4792 open for IPv6 in $NS1 and $NS2"
	expect_ok in_ns $NS1 ip -6 addr add $IP6_1/64 dev mrnv1 nodad
	expect_ok in_ns $NS2 ip -6 addr add $IP6_2/64 dev mrnv2 nodad
	g61=$(ns_gid6 mrn1 $IP6_1)
	g62=$(ns_gid6 mrn2 $IP6_2)
	# The pingpong's TCP exchange stays on IPv4; its QPs use the IPv6 GIDs.
	ns_pingpong "veth, IPv6 GIDs $g61/$g62" mrn1 "$g61" mrn2 "$g62" -n 100 -s 4096
	udp6=$(in_ns $NS2 awk '$1 == "Udp6InDatagrams" { print $2 }' /proc/net/snmp6)
	[ "${udp6:-0}" -ge 200 ] || fail "$NS2 received only ${udp6:-0} UDP datagrams over IPv6"
	log "ok: $NS2 received $udp6 UDP datagrams over IPv6"
else
	log "the kernel has no IPv6: the IPv6 part is skipped"
fi

# Delete $NS1 with mrn1 in it: its veth end goes, and the peer end in $NS2
# with it, so both devices go and both sockets close.
mark=$(dmesg | wc -l)
expect_ok ip netns del $NS1
gone mrn1 60 || fail "mrn1 still exists 60 s after its namespace was deleted"
gone mrn2 60 || fail "mrn2 still exists 60 s after its veth peer's namespace was deleted"
for _ in $(seq 50); do
	[ "$(dmesg | tail -n +"$((mark + 1))" | grep -c 'UDP port 4792 closed')" -ge 2 ] && break
	sleep 0.2
done
[ "$(dmesg | tail -n +"$((mark + 1))" | grep -c 'UDP port 4792 closed')" -ge 2 ] ||
	fail "both namespaces' sockets did not close: $(dmesg | tail -n +"$((mark + 1))" | grep metaroce)"
port_open $NS2 && fail "UDP port 4792 still open in $NS2 after its last device went"
log "ok: $NS1 deleted: mrn1 and mrn2 gone, both sockets closed"
no_kernel_report "deleting a namespace with a device"
expect_ok ip netns del $NS2

# A NIC in a namespace carries a device that talks to host B; deleting the
# namespace moves the NIC back (it is not destroyed) and removes the device.
if [ -n "${PLANE1_DEV:-}" ]; then
	peer "rdma link add mrb1 type metaroce netdev \$PLANE1_DEV" > /dev/null || fail "mrb1 on host B"
	expect_ok ip netns add $NS3
	expect_ok ip link set "$PLANE1_DEV" netns $NS3
	expect_ok in_ns $NS3 ip link set lo up
	expect_ok in_ns $NS3 ip addr add "$PLANE1_IP/24" dev "$PLANE1_DEV"
	expect_ok in_ns $NS3 ip link set "$PLANE1_DEV" up
	expect_ok in_ns $NS3 rdma link add mrn3 type metaroce netdev "$PLANE1_DEV"
	g3=$(ns_gid mrn3 "$PLANE1_IP")
	for _ in $(seq 50); do
		pg3=$(peer ". $METAROCE_REPO/selftests/lib.sh; gid_index mrb1 $PEER_PLANE1_IP" 2> /dev/null) && break
		sleep 0.2
	done
	[ -n "${pg3:-}" ] || fail "no RoCE v2 GID for $PEER_PLANE1_IP on host B's mrb1"
	job=$(peer_spawn "timeout 100 ibv_rc_pingpong -d mrb1 -g $pg3 -c -n 100 -s 4096") ||
		fail "cannot start the server on host B"
	out=""
	for _ in $(seq 10); do
		sleep 1
		out=$(in_ns $NS3 timeout 100 ibv_rc_pingpong -d mrn3 -g "$g3" -c -n 100 -s 4096 "$PEER_PLANE1_IP" 2>&1) && break
	done
	log "$out"
	grep -q "iters in" <<< "$out" || fail "ibv_rc_pingpong from $NS3 to host B did not complete"
	peer_wait "$job" 110 > /dev/null || fail "ibv_rc_pingpong server on host B failed"
	log "ok: ibv_rc_pingpong --chk between mrn3 in $NS3 and host B's mrb1"

	mark=$(dmesg | wc -l)
	expect_ok ip netns del $NS3
	gone mrn3 60 || fail "mrn3 still exists 60 s after its namespace was deleted"
	for _ in $(seq 150); do
		ip link show "$PLANE1_DEV" > /dev/null 2>&1 && break
		sleep 0.2
	done
	ip link show "$PLANE1_DEV" > /dev/null 2>&1 || fail "$PLANE1_DEV did not come back from $NS3"
	for _ in $(seq 50); do
		dmesg | tail -n +"$((mark + 1))" | grep -q 'UDP port 4792 closed' && break
		sleep 0.2
	done
	dmesg | tail -n +"$((mark + 1))" | grep -q 'UDP port 4792 closed' ||
		fail "$NS3's socket did not close: $(dmesg | tail -n +"$((mark + 1))" | grep metaroce)"
	expect_ok ip link set "$PLANE1_DEV" up
	expect_ok ip addr add "$PLANE1_IP/24" dev "$PLANE1_DEV"
	log "ok: $NS3 deleted: mrn3 gone, $PLANE1_DEV back in the initial namespace"
	no_kernel_report "deleting a namespace holding a NIC with a device"
	peer 'rdma link delete mrb1' > /dev/null || fail "cannot delete mrb1 on host B"
else
	log "one plane: the NIC-in-a-namespace case is skipped"
fi

# The initial namespace as before: its socket, and a device that works.
mark=$(dmesg | wc -l)
mr0_on_both_hosts
port_open "" || fail "no UDP port 4792 in the initial namespace with mr0"
dmesg | tail -n +"$((mark + 1))" | grep -qE 'UDP port 4792 open$' ||
	fail "the initial namespace's socket did not log 'UDP port 4792 open'"
pingpong_run ibv_rc_pingpong 100 "initial namespace" -d mr0 -n 100 -s 4096 -c
log "ok: mr0 in the initial namespace works after the namespaces went"
no_kernel_report "the whole test"
