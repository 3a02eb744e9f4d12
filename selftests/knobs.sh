#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The knobs (Documentation/user-guide.md, "Knobs"): module parameters set
# the values a new device starts from, and are refused at load when not a
# number, out of range or out of order; a device's files
# (/sys/class/infiniband/mr0/metaroce/) show its values, refuse the same
# writes with EINVAL or ERANGE and a log line, and leave the value as it
# was. A QP takes its device's values when it connects: an ibv_rc_pingpong
# QP on host A started after initial_paths=2 and pwnd_max=4 has 2 paths,
# each with a window of at most 4 packets (rdma resource show qp -dd),
# while one connected before the change keeps its 4 paths.
. "$(dirname "$0")/lib.sh"
client=""
cleanup() {
	[ -n "$client" ] && kill "$client" 2>/dev/null
	two_host_cleanup -k ibv_rc_pingpong
}
trap cleanup EXIT
reset_rdma
command -v ibv_rc_pingpong > /dev/null || skip "ibverbs-utils not installed"

params=/sys/module/metaroce/parameters
knobs=/sys/class/infiniband/mr0/metaroce
# Every knob and its default, in the order of the documentation.
defaults="initial_paths=4 max_paths=64 pwnd_init=8 pwnd_min=2 pwnd_max=256
	loss_md_threshold=8 reorder_threshold=1 delay_target_us=5000 delay_excuse_us=5000
	min_rto_us=10000"

# expect_values DIR NAME=VALUE...: each file NAME in DIR reads VALUE.
expect_values() {
	local dir=$1 kv got
	shift
	for kv in "$@"; do
		got=$(cat "$dir/${kv%%=*}" 2>&1) || fail "cannot read $dir/${kv%%=*}: $got"
		[ "$got" = "${kv#*=}" ] || fail "$dir/${kv%%=*} reads '$got', expected ${kv#*=}"
	done
	log "ok: $dir: $*"
}

# knob_write NAME VALUE: writes VALUE (with echo's newline) to mr0's NAME.
knob_write() { echo "$2" > "$knobs/$1"; }

# --- Module parameters (host A) ---
expect_err "Numerical result out of range" modprobe metaroce initial_paths=0
expect_dmesg "metaroce: module parameter initial_paths=0 refused: out of range 1-64"
expect_err "Invalid argument" modprobe metaroce pwnd_min=two
expect_dmesg "metaroce: module parameter pwnd_min=two refused: not a decimal number"
# Each in range, but out of order together: refused once all are set.
expect_err "Invalid argument" modprobe metaroce pwnd_min=16
expect_dmesg "metaroce: module parameters refused: pwnd_min (16) must not exceed pwnd_init (8)"
grep -q '^metaroce ' /proc/modules && fail "metaroce loaded with refused parameters"
# pwnd_min before pwnd_init on the command line: the order is checked on
# the whole set, not as each is given.
expect_ok modprobe metaroce initial_paths=2 pwnd_min=16 pwnd_init=32 min_rto_us=2000
expect_values "$params" initial_paths=2 pwnd_min=16 pwnd_init=32 min_rto_us=2000 max_paths=64
expect_err "Permission denied" bash -c "echo 3 > $params/initial_paths"
expect_ok rdma link add mr0 type metaroce netdev "$PLANE0_DEV"
expect_values "$knobs" initial_paths=2 pwnd_min=16 pwnd_init=32 min_rto_us=2000 pwnd_max=256
expect_ok rdma link delete mr0
expect_ok rmmod metaroce

# --- A device's files ---
mr0_on_both_hosts # autoloads the module without parameters
# shellcheck disable=SC2086
expect_values "$knobs" $defaults
expect_err "Invalid argument" knob_write initial_paths abc
expect_dmesg "mr0: initial_paths=abc refused: not a decimal number"
expect_err "Invalid argument" knob_write min_rto_us -1
expect_err "Invalid argument" knob_write pwnd_init " 8"
expect_err "Numerical result out of range" knob_write initial_paths 0
expect_dmesg "mr0: initial_paths=0 refused: out of range 1-64"
expect_err "Numerical result out of range" knob_write max_paths 65
expect_err "Numerical result out of range" knob_write pwnd_max 257
expect_err "Numerical result out of range" knob_write reorder_threshold 256
expect_err "Numerical result out of range" knob_write min_rto_us 100001
expect_err "Numerical result out of range" knob_write delay_target_us 1000001
# Too large for 64 bits is out of range too.
expect_err "Numerical result out of range" knob_write loss_md_threshold 99999999999999999999
# In range, out of order with another knob.
expect_err "Invalid argument" knob_write pwnd_min 16
expect_dmesg "mr0: pwnd_min=16 refused: pwnd_min (16) must not exceed pwnd_init (8)"
expect_err "Invalid argument" knob_write pwnd_max 4
expect_dmesg "mr0: pwnd_max=4 refused: pwnd_init (8) must not exceed pwnd_max (4)"
expect_err "Invalid argument" knob_write max_paths 3
expect_dmesg "mr0: max_paths=3 refused: initial_paths (4) must not exceed max_paths (3)"
# None of the refused writes changed anything.
# shellcheck disable=SC2086
expect_values "$knobs" $defaults
# Written without a newline, and back.
expect_ok bash -c "printf 0 > $knobs/delay_target_us"
expect_values "$knobs" delay_target_us=0
expect_ok knob_write delay_target_us 5000

# --- QPs take the values when they connect ---
# (start_pingpong, stop_pingpong: lib.sh)

# qp_paths QPN: "PATHS MAX_CWND" of host A's QP QPN: its path count and
# the largest window among its paths (rust/driver/qp_details.rs).
qp_paths() {
	rdma -j -dd resource show qp link mr0/1 lqpn "$1" 2>&1 | /usr/bin/python3 -c '
import json, sys
(qp,) = json.load(sys.stdin)
# iproute2 prints driver attributes with a drv_ prefix.
d = {k.removeprefix("drv_"): v for k, v in qp.items()}
cwnd = [v for k, v in d.items() if k.startswith("p") and k.endswith("_cwnd")]
print(d["paths"], max(cwnd))' || fail "no transport details for QP $1"
}

start_pingpong
first=$qpn
read -r paths cwnd <<< "$(qp_paths "$first")"
[ "$paths" = 4 ] || fail "QP $first connected with the defaults has $paths paths, not 4"
log "ok: QP $first: $paths paths, largest window $cwnd"
# pwnd_max 4 needs pwnd_init at most 4 first.
expect_ok knob_write initial_paths 2
expect_ok knob_write pwnd_init 4
expect_ok knob_write pwnd_max 4
expect_values "$knobs" initial_paths=2 pwnd_init=4 pwnd_max=4
# The module's defaults are not the device's values.
expect_values "$params" initial_paths=4 pwnd_init=8 pwnd_max=256
sleep 2
read -r paths cwnd <<< "$(qp_paths "$first")"
[ "$paths" = 4 ] || fail "live QP $first changed to $paths paths with the knob"
log "ok: live QP $first kept its $paths paths (largest window $cwnd)"
stop_pingpong

start_pingpong
[ "$qpn" != "$first" ] || fail "the second ping-pong found the first QP $first"
sleep 2 # two seconds of ACKs: windows grow up to their bound
read -r paths cwnd <<< "$(qp_paths "$qpn")"
[ "$paths" = 2 ] || fail "QP $qpn connected after initial_paths=2 has $paths paths"
[ "$cwnd" -le 4 ] || fail "QP $qpn connected after pwnd_max=4 has a path window of $cwnd"
log "ok: QP $qpn: $paths paths, largest window $cwnd (pwnd_max 4)"
stop_pingpong

port=$(mr0_stats)
[ "$(stat_of rx_malformed "$port")" = 0 ] || fail "malformed packets received: $port"
log "ok: knobs"
