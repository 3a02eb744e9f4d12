#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Bad requests get a clear error (errno + a kernel log line) and no oops:
# unknown netdev, non-Ethernet netdev, bad names, names of other drivers'
# devices, the same netdev twice, deleting what is not there, rmmod while devices exist.
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

# rmmod with devices present removes them all and leaves rxe alone.
expect_ok rdma link add mr1 type metaroce netdev "$PLANE1_DEV"
expect_ok rmmod metaroce
rdma_dev_exists mr0 && fail "mr0 survived rmmod"
rdma_dev_exists mr1 && fail "mr1 survived rmmod"
rdma_dev_exists rxe0 || fail "rmmod metaroce removed rxe0"
rdma_dev_exists rxe1 || fail "rmmod metaroce removed rxe1"
log "ok: rmmod removed mr0 and mr1, rxe0 and rxe1 untouched"
