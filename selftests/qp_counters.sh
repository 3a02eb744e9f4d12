#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Per-QP counters through the core's counter objects: `rdma statistic qp
# bind` (manual) and `rdma statistic qp set ... auto type on` bind the RC
# QP of a running ibv_rc_pingpong on host A to a counter object, whose
# packets/bytes must grow with the ping-pong traffic (one message each way
# per iteration: as many packets in as out), while the port totals stay
# the device's. Binding a QP that does not exist, or one already bound,
# fails.
. "$(dirname "$0")/lib.sh"
client=""
cleanup() {
	[ -n "$client" ] && kill "$client" 2>/dev/null
	rdma statistic qp set link mr0/1 auto off 2>/dev/null
	two_host_cleanup -k ibv_rc_pingpong
}
trap cleanup EXIT
reset_rdma
command -v ibv_rc_pingpong > /dev/null || skip "ibverbs-utils not installed"

mr0_on_both_hosts

# (start_pingpong, stop_pingpong: lib.sh)

# check_counter LABEL: the counter object bound to $qpn counts its traffic.
check_counter() {
	local s1 s2 tx1 tx2 rx2 txb2 port ptx
	s1=$(rdma -j statistic qp show link mr0/1 lqpn "$qpn" 2>&1)
	sleep 2
	s2=$(rdma -j statistic qp show link mr0/1 lqpn "$qpn" 2>&1)
	log "$s2"
	tx1=$(stat_of tx_packets "$s1")
	tx2=$(stat_of tx_packets "$s2")
	rx2=$(stat_of rx_packets "$s2")
	txb2=$(stat_of tx_bytes "$s2")
	[ -n "$tx2" ] && [ -n "$rx2" ] || fail "$1: no per-QP counters for QP $qpn: $s2"
	[ "$tx2" -gt 0 ] && [ "$rx2" -gt 0 ] || fail "$1: per-QP packets are zero ($tx2 out, $rx2 in)"
	[ "$tx2" -gt "${tx1:-0}" ] || fail "$1: per-QP tx_packets did not grow with the traffic ($tx1 -> $tx2)"
	# Ping-pong: every message and its ACK has a counterpart in the other
	# direction, so in and out differ by what is in flight.
	[ $((tx2 - rx2)) -le $((tx2 / 10 + 8)) ] && [ $((rx2 - tx2)) -le $((rx2 / 10 + 8)) ] ||
		fail "$1: per-QP packets do not match a ping-pong: $tx2 out, $rx2 in"
	# 64-byte messages: every packet carries at most one header, payload
	# and integrity check (and ACKs are of a fixed size).
	[ "$txb2" -ge $((tx2 * 60)) ] && [ "$txb2" -le $((tx2 * 140)) ] ||
		fail "$1: $txb2 bytes for $tx2 packets"
	port=$(mr0_stats)
	ptx=$(stat_of tx_packets "$port")
	[ "${ptx:-0}" -ge "$tx2" ] || fail "$1: port tx_packets ($ptx) below the QP's ($tx2): $port"
	log "ok: $1: QP $qpn counted $tx2 packets out, $rx2 in, $txb2 bytes out (port: $ptx out)"
}

# check_details: the transport's per-path state of $qpn in `rdma resource
# show qp -dd` (rust/driver/qp_details.rs) describes the running ping-pong:
# its paths are on plane 0 with source ports from the dynamic range, every
# active path carried data (spraying), what they sent grew with the
# traffic, and the QP's totals hold its paths' counts; the unprivileged
# view without -dd has none of it.
check_details() {
	local d1 d2
	d1=$(rdma -j -dd resource show qp link mr0/1 lqpn "$qpn" 2>&1)
	sleep 2
	d2=$(rdma -j -dd resource show qp link mr0/1 lqpn "$qpn" 2>&1)
	log "$d2"
	python3 - "$d1" "$d2" <<'PY' || fail "per-path details of QP $qpn"
import json, sys

def details(text):
    (qp,) = json.loads(text)
    # iproute2 prints driver attributes with a drv_ prefix.
    return {k.removeprefix("drv_"): v for k, v in qp.items()}

before, after = (details(t) for t in sys.argv[1:])
paths = [int(k[1:-len("_state")]) for k in after if k.startswith("p") and k.endswith("_state")]
assert after["paths"] >= 1 and len(paths) == after["paths"], f"paths {after.get('paths')}, listed {paths}"
active = [k for k in paths if after[f"p{k}_state"] == "active"]
assert len(active) == after["active_paths"] >= 1, f"active {active} vs {after['active_paths']}"
for k in paths:
    assert after[f"p{k}_plane"] == 0, f"path {k} on plane {after[f'p{k}_plane']}"
    assert 49152 <= after[f"p{k}_sport"] <= 65535, f"path {k} source port {after[f'p{k}_sport']}"
    assert after[f"p{k}_retx"] <= after[f"p{k}_sent"]
for k in active:
    assert after[f"p{k}_sent"] > before.get(f"p{k}_sent", 0), f"path {k} sent nothing in 2 s"
    assert after[f"p{k}_srtt_us"] > 0, f"path {k} has no RTT sample"
    assert after[f"p{k}_acks"] > 0, f"path {k} had no ACK acknowledge anything"
    assert after[f"p{k}_span"] >= after[f"p{k}_inflight"], f"path {k}: span below in flight"
# With samples taken, the QP has a base its queueing delay is measured from.
assert after["base_rtt_us"] > 0, f"base RTT {after.get('base_rtt_us')}"
# The QP's totals count its paths' packets, and those of paths closed since.
assert after["sent"] >= sum(after[f"p{k}_sent"] for k in paths), f"QP sent {after['sent']}"
assert after["retx"] <= after["sent"] and after["retx"] >= sum(after[f"p{k}_retx"] for k in paths)
assert after["sent"] > before["sent"], "the QP sent nothing in 2 s"
print("paths", len(paths), "sent", [after[f"p{k}_sent"] for k in paths], "QP sent", after["sent"], "retx", after["retx"], "base RTT", after["base_rtt_us"], "us")
PY
	rdma -j resource show qp link mr0/1 lqpn "$qpn" | grep -q '"drv_\|p0_sent' &&
		fail "driver details shown without -dd"
	log "ok: per-path details of QP $qpn"
}

# Manual binding.
start_pingpong
check_details
expect_err "" rdma statistic qp bind link mr0/1 lqpn 999999
expect_ok rdma statistic qp bind link mr0/1 lqpn "$qpn"
expect_err "" rdma statistic qp bind link mr0/1 lqpn "$qpn"
check_counter "manual bind"
cntn=$(stat_of cntn "$(rdma -j statistic qp show link mr0/1 lqpn "$qpn")")
[ -n "$cntn" ] || fail "no counter id for QP $qpn"
expect_err "" rdma statistic qp unbind link mr0/1 cntn $((cntn + 100)) lqpn "$qpn"
expect_ok rdma statistic qp unbind link mr0/1 cntn "$cntn" lqpn "$qpn"
s=$(rdma -j statistic qp show link mr0/1 lqpn "$qpn" 2>&1)
[ -z "$(stat_of tx_packets "$s")" ] || fail "QP $qpn still bound after unbind: $s"
log "ok: unbound"
stop_pingpong

# Auto mode: QPs are bound by type as they are created.
expect_ok rdma statistic qp set link mr0/1 auto type on
start_pingpong
check_counter "auto mode"
stop_pingpong
s=$(rdma -j statistic qp show link mr0/1 2>&1)
[ -z "$(stat_of tx_packets "$s")" ] || fail "a counter object outlived its QP: $s"
expect_ok rdma statistic qp set link mr0/1 auto off

# The port counters still add up to the device's traffic, released counter
# objects included; no malformed packets on the way.
port=$(mr0_stats)
log "$port"
[ "$(stat_of rx_malformed "$port")" = 0 ] || fail "malformed packets received"
log "ok: per-QP counters"
