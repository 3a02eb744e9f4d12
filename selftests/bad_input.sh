#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Bad requests get a clear error (errno + a kernel log line) and no oops:
# unknown netdev, non-Ethernet netdev, bad names, names of other drivers'
# devices, the same netdev twice, deleting what is not there, refused verbs
# (a queue too deep, a path MTU above the active one, GIDs of two address
# families on one RC QP),
# rmmod while devices exist.
. "$(dirname "$0")/lib.sh"
trap reset_rdma EXIT
reset_rdma
expect_ok modprobe metaroce

expect_err "No such device" rdma link add mr0 type metaroce netdev nosuch0
expect_err "Invalid argument" rdma link add mr0 type metaroce netdev lo
expect_dmesg "cannot add mr0: lo is not an Ethernet device"
expect_err "Invalid argument" rdma link add 'mr%d' type metaroce netdev "$PLANE0_DEV"
rdma_dev_exists mr0 && fail "a failed add left mr0 behind"

expect_ok rdma link add mr0 type metaroce netdev "$PLANE0_DEV"
# The same name and netdev again. (The same name with another netdev adds
# a plane to mr0: selftests/planes.sh.)
expect_err "File exists" rdma link add mr0 type metaroce netdev "$PLANE0_DEV"
expect_dmesg "cannot add mr0: $PLANE0_DEV already carries MetaRoCE device mr0"
# The same netdev again, under another name: one MetaRoCE device per netdev.
expect_err "File exists" rdma link add mr9 type metaroce netdev "$PLANE0_DEV"
expect_dmesg "cannot add mr9: $PLANE0_DEV already carries MetaRoCE device mr0"
rdma_dev_exists mr9 && fail "mr9 exists after a refused add"

# rxe works beside us on the same netdev, in both orders; its names are
# taken too, and its devices are never mistaken for ours.
expect_ok modprobe rdma_rxe
expect_ok rdma link add rxe0 type rxe netdev "$PLANE0_DEV"
expect_ok rdma link add rxe1 type rxe netdev "$PLANE1_DEV"
# The name of a device of another driver.
expect_err "File exists" rdma link add rxe0 type metaroce netdev "$PLANE1_DEV"
expect_dmesg "cannot add rxe0: an RDMA device of that name exists"

expect_err "Invalid argument" rdma link add mr5 type nosuchtype netdev "$PLANE1_DEV"
expect_err "" rdma link delete nosuch0

# A refused verb says why in the kernel log (Documentation/user-guide.md,
# "When a verb is refused"): device, verb, QP, attribute and reason. Each
# provocation marks the log first, so only a line it caused counts. Fewer
# than the rate limit's 10 lines: the module was loaded above.
if command -v ibv_rc_pingpong > /dev/null; then
	ibv_devices | grep -qw mr0 || fail "libibverbs does not list mr0 (provider not loaded)"

	# create_qp: more receives than a queue holds. (The CQ, 8193 entries,
	# is within its limit.)
	dmesg_mark=$(dmesg | wc -l)
	expect_err "Couldn't create QP" timeout 20 ibv_rc_pingpong -d mr0 -r 8192
	expect_dmesg "mr0: create_qp: max_recv_wr 8192 above the device's 4096"

	# refused_rtr LABEL ARGS...: an ibv_rc_pingpong server and client, both
	# on host A's mr0 with ARGS (the client with -g $client_gid after them
	# when that is set): the modify_qp to RTR of whichever side gets there
	# first is refused, so neither completes (20 s each at most).
	refused_rtr() {
		local label=$1 srv out=""
		shift
		timeout 20 ibv_rc_pingpong -d mr0 -p 18601 -r 16 -n 1 "$@" > /dev/null 2>&1 &
		srv=$!
		for _ in $(seq 10); do
			sleep 1
			out=$(timeout 20 ibv_rc_pingpong -d mr0 -p 18601 -r 16 -n 1 "$@" \
				${client_gid:+-g "$client_gid"} localhost 2>&1) &&
				fail "ibv_rc_pingpong $label: completed: $out"
			grep -q "Couldn't connect to localhost" <<< "$out" || break
		done
		wait "$srv" && fail "ibv_rc_pingpong $label: the server completed"
		log "ok: ibv_rc_pingpong $label failed: $(tail -1 <<< "$out")"
	}

	gid=""
	for _ in $(seq 50); do
		gid=$(gid_index mr0 "$PLANE0_IP") && break
		sleep 0.2
	done
	[ -n "$gid" ] || fail "no RoCE v2 GID for $PLANE0_IP on mr0"

	# modify_qp: a path MTU above the active one (the netdev's MTU less the
	# headers), where the active MTU is below 4096.
	active=$(ibv_devinfo -d mr0 | awk '$1 == "active_mtu:" { print $2; exit }')
	if [ "${active:-4096}" -lt 4096 ]; then
		dmesg_mark=$(dmesg | wc -l)
		refused_rtr "path MTU 4096" -g "$gid" -m 4096
		expect_dmesg_re "mr0: modify_qp QP 0x[0-9a-f]+: path MTU 4096 above the active MTU $active\$"
	else
		log "active MTU ${active:-unknown}: no path MTU above it to refuse"
	fi

	# modify_qp: a link-local IPv6 GID on one side and an IPv4 one on the
	# other (a QP is one family end to end), where the netdev has that
	# address in use. The core resolves the peer's MAC from the two GIDs
	# before the driver sees the request, and may refuse two families
	# itself: then no line of ours, only the failure.
	v6="" ll=$(ip -6 -o addr show dev "$PLANE0_DEV" scope link | grep -v tentative)
	for f in /sys/class/infiniband/mr0/ports/1/gids/*; do
		g=$(cat "$f" 2>/dev/null) || continue
		case $g in fe80:*) ;; *) continue ;; esac
		grep -q v2 "/sys/class/infiniband/mr0/ports/1/gid_attrs/types/${f##*/}" 2>/dev/null || continue
		g=$(/usr/bin/python3 -c 'import ipaddress, sys; print(ipaddress.ip_address(sys.argv[1]))' "$g") || continue
		grep -qF " $g/" <<< "$ll" && { v6=${f##*/}; break; }
	done
	if [ -n "$v6" ]; then
		dmesg_mark=$(dmesg | wc -l)
		client_gid=$gid refused_rtr "IPv6 GID $v6 to IPv4 GID $gid" -g "$v6"
		mixed="mr0: modify_qp QP 0x[0-9a-f]+: source GID index ($v6|$gid) is an IPv[46] address and the destination GID [0-9a-f.:]+ an IPv[46] one: a QP is one family end to end\$"
		if dmesg | tail -n +"$((dmesg_mark + 1))" | grep -qE -- "$mixed"; then
			log "ok: dmesg matches '$mixed'"
		else
			log "the core refused the two families before the driver: no line of ours"
		fi
	else
		log "no link-local IPv6 GID in use on mr0: the mixed-family refusal not checked"
	fi
else
	log "ibverbs-utils not installed: the refusal messages not checked"
fi

# rmmod with devices present removes them all and leaves rxe alone.
expect_ok rdma link add mr1 type metaroce netdev "$PLANE1_DEV"
expect_ok rmmod metaroce
rdma_dev_exists mr0 && fail "mr0 survived rmmod"
rdma_dev_exists mr1 && fail "mr1 survived rmmod"
rdma_dev_exists rxe0 || fail "rmmod metaroce removed rxe0"
rdma_dev_exists rxe1 || fail "rmmod metaroce removed rxe1"
log "ok: rmmod removed mr0 and mr1, rxe0 and rxe1 untouched"
