#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A device goes away with its netdev.
. "$(dirname "$0")/lib.sh"
trap 'ip link del mrv0 2>/dev/null; reset_rdma' EXIT
reset_rdma

expect_ok ip link add mrv0 type veth peer name mrv1
expect_ok ip link set mrv0 up
expect_ok rdma link add mrv type metaroce netdev mrv0
rdma_dev_exists mrv || fail "mrv not created"
expect_ok ip link del mrv0
for _ in $(seq 50); do
	rdma_dev_exists mrv || break
	sleep 0.1
done
rdma_dev_exists mrv && fail "mrv still exists 5 s after its netdev was deleted"
log "ok: mrv removed with mrv0"
# The module is still healthy: a new device can be made.
expect_ok rdma link add mr0 type metaroce netdev "$PLANE0_DEV"
