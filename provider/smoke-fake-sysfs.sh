#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# Host smoke test of the built provider inside the real libibverbs 44: a fake
# sysfs (SYSFS_PATH, used when RDMA netlink has no devices) describes three
# devices with arbitrary names, one whose node_desc is "MetaRoCE", one
# "MetaRoCE" whose kernel speaks another uverbs ABI (a module and provider
# from different builds); with the provider loaded through RDMAV_DRIVERS,
# ibv_devices must list exactly the first, and with IBV_SHOW_WARNINGS say
# why the second is missing. Needs root (a private mount namespace gives libibverbs a fake
# /dev/infiniband); prints SKIP otherwise. Builds nothing: run after
# `cargo build --release -p metaroce-provider`.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
so=${CARGO_TARGET_DIR:-$root/target}/release/libmetaroce_provider.so
if [ "$(id -u)" != 0 ] || ! command -v ibv_devices >/dev/null || ! command -v unshare >/dev/null; then
	echo "SKIP: needs root, ibv_devices and unshare"
	exit 0
fi
[ -f "$so" ] || { echo "FAIL: $so not built"; exit 1; }
if [ -d /sys/class/infiniband ] && [ -n "$(ls /sys/class/infiniband)" ]; then
	echo "SKIP: this host has RDMA devices; netlink would list them instead"
	exit 0
fi
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/lib" "$t/dev/infiniband" "$t/sys/class/infiniband_verbs"
cp "$so" "$t/lib/libmetaroce-rdmav34.so"
echo 6 >"$t/sys/class/infiniband_verbs/abi_version"
dev() { # uverbsN ibdev node_desc [uverbs ABI]
	u="$t/sys/class/infiniband_verbs/$1" d="$t/sys/class/infiniband/$2"
	mkdir -p "$u" "$d"
	echo "$2" >"$u/ibdev"
	echo "${4:-1}" >"$u/abi_version"
	echo "231:19${1#uverbs}" >"$u/dev"
	echo "$3" >"$d/node_desc"
	echo "1: CA" >"$d/node_type"
	echo "5054:00ff:fe00:0a0${1#uverbs}" >"$d/node_guid"
	touch "$t/dev/infiniband/$1"
}
dev uverbs0 some-fabric "MetaRoCE"
dev uverbs1 notours0 "other device"
dev uverbs2 skewed0 "MetaRoCE" 2
touch "$t/dev/null"
out=$(unshare -m sh -c "mount --bind '$t/dev' /dev && IBV_SHOW_WARNINGS=1 SYSFS_PATH='$t/sys' RDMAV_DRIVERS='$t/lib/libmetaroce' ibv_devices" 2>&1)
echo "$out"
if echo "$out" | grep -q "^ *some-fabric" && ! echo "$out" | grep -q "^ *notours0" &&
	! echo "$out" | grep -q "^ *skewed0"; then
	echo "PASS: libibverbs loaded the provider and matched by node_desc"
else
	echo "FAIL"
	exit 1
fi
if echo "$out" | grep -q "^libmetaroce: skewed0: its kernel driver speaks uverbs ABI 2"; then
	echo "PASS: a device of another uverbs ABI is refused with a warning"
else
	echo "FAIL: no warning for skewed0"
	exit 1
fi
