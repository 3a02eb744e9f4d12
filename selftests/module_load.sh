#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# metaroce.ko loads and unloads on both hosts, declares the rdma link alias,
# and `rdma link add ... type metaroce` autoloads it.
. "$(dirname "$0")/lib.sh"
trap reset_rdma EXIT
reset_rdma

modinfo metaroce | grep -q "^alias: *rdma-link-metaroce$" || fail "modinfo lacks alias rdma-link-metaroce"
log "ok: alias rdma-link-metaroce"

expect_ok modprobe metaroce
grep -q '^metaroce ' /proc/modules || fail "metaroce not in /proc/modules after modprobe"
expect_dmesg "metaroce: loaded"
expect_ok rmmod metaroce
grep -q '^metaroce ' /proc/modules && fail "metaroce still loaded after rmmod"

# Autoload through the module alias.
expect_ok rdma link add mr0 type metaroce netdev "$PLANE0_DEV"
grep -q '^metaroce ' /proc/modules || fail "rdma link add did not autoload metaroce"
expect_ok rdma link delete mr0
expect_ok rmmod metaroce

# The peer loads and unloads too (the module is on both hosts).
peer modprobe metaroce || fail "modprobe on host B failed"
peer grep -q "'^metaroce '" /proc/modules || fail "metaroce not loaded on host B"
peer rmmod metaroce || fail "rmmod on host B failed"
log "ok: host B load/unload"
