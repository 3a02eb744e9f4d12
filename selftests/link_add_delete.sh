#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# `rdma link add NAME type metaroce netdev DEV` creates an ib_device bound to
# DEV that shows in `rdma dev`, `rdma link` and sysfs; `rdma link delete`
# removes it. One device per plane netdev, on both hosts.
. "$(dirname "$0")/lib.sh"
trap reset_rdma EXIT
reset_rdma

expect_ok rdma link add mr0 type metaroce netdev "$PLANE0_DEV"
rdma_dev_exists mr0 || fail "rdma dev show mr0 failed"
[ -d /sys/class/infiniband/mr0 ] || fail "/sys/class/infiniband/mr0 missing"
link=$(rdma link show mr0/1)
log "$link"
grep -q "netdev $PLANE0_DEV" <<< "$link" || fail "mr0/1 not bound to $PLANE0_DEV"
grep -q "state ACTIVE" <<< "$link" || fail "mr0/1 not ACTIVE on an up link"
grep -q "physical_state LINK_UP" <<< "$link" || fail "mr0/1 physical state not LINK_UP"
[ "$(cat /sys/class/infiniband/mr0/node_type)" = "1: CA" ] || fail "node_type is not CA"
[ "$(cat /sys/class/infiniband/mr0/ports/1/link_layer)" = "Ethernet" ] || fail "link layer is not Ethernet"

# The node GUID is the EUI-64 of the netdev's MAC.
mac=$(cat /sys/class/net/"$PLANE0_DEV"/address)
IFS=: read -r m0 m1 m2 m3 m4 m5 <<< "$mac"
want=$(printf '%02x%s:%sff:fe%s:%s%s' $((0x$m0 ^ 2)) "$m1" "$m2" "$m3" "$m4" "$m5")
got=$(cat /sys/class/infiniband/mr0/node_guid)
[ "$got" = "$want" ] || fail "node_guid $got, expected $want from MAC $mac"
log "ok: node_guid $got"

# The core fills the RoCE GID table from the netdev's addresses.
gid_index mr0 "$PLANE0_IP" > /dev/null || fail "no RoCE v2 GID for $PLANE0_IP on mr0"
log "ok: GID for $PLANE0_IP"

# A second plane gets its own device.
expect_ok rdma link add mr1 type metaroce netdev "$PLANE1_DEV"
rdma link show mr1/1 | grep -q "netdev $PLANE1_DEV" || fail "mr1 not on $PLANE1_DEV"

expect_ok rdma link delete mr0
rdma_dev_exists mr0 && fail "mr0 still exists after delete"
[ -e /sys/class/infiniband/mr0 ] && fail "sysfs entry of mr0 still exists"
expect_ok rdma link delete mr1
rdma_dev_exists mr1 && fail "mr1 still exists after delete"

# Same on host B.
peer rdma link add mr0 type metaroce netdev '$PLANE0_DEV' || fail "link add on host B failed"
peer rdma link show mr0/1 | grep -q "state ACTIVE" || fail "mr0 on host B not ACTIVE"
peer rdma link delete mr0 || fail "link delete on host B failed"
peer rmmod metaroce || fail "rmmod on host B failed"
log "ok: host B add/delete"
