#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The port state follows the netdev: admin down -> DOWN/DISABLED, up again ->
# ACTIVE/LINK_UP.
. "$(dirname "$0")/lib.sh"
trap 'ip link set "$PLANE1_DEV" up; reset_rdma' EXIT
reset_rdma

expect_ok rdma link add mr1 type metaroce netdev "$PLANE1_DEV"
rdma link show mr1/1 | grep -q "state ACTIVE" || fail "mr1 not ACTIVE at start"

expect_ok ip link set "$PLANE1_DEV" down
link=$(rdma link show mr1/1)
log "$link"
grep -q "state DOWN" <<< "$link" || fail "port not DOWN after link down"
grep -q "physical_state DISABLED" <<< "$link" || fail "physical state not DISABLED after link down"

expect_ok ip link set "$PLANE1_DEV" up
for _ in $(seq 50); do
	rdma link show mr1/1 | grep -q "state ACTIVE" && break
	sleep 0.1
done
link=$(rdma link show mr1/1)
log "$link"
grep -q "state ACTIVE" <<< "$link" || fail "port not ACTIVE after link up"
