#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The black-box conformance suite (selftests/conformance, issue 15) against
# our module: host A is the implementation under test (mr0 on plane 0,
# driven by conformance/agent.py through pyverbs), host B is the tester
# (conformance/run.py), which speaks the wire protocol itself from raw UDP
# sockets on port 4792, so host B runs no MetaRoCE device (its port 4792
# must be free). A second address on host B's plane 0 plays the stranger
# of the not-peer tests (protocol.md 3). The tester prints one TAP line
# per clause of conformance/clauses.md; any failed clause fails the test.
# Host A's counters are then logged: every malformed packet the suite sent
# must have been counted as rx_malformed.
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
agent_port=18700
third=${PEER_PLANE0_IP%.*}.98
agent_pid=""
cleanup() {
	[ -n "$agent_pid" ] && kill "$agent_pid" 2> /dev/null
	peer "ip addr del $third/24 dev \$PLANE0_DEV" > /dev/null 2>&1
	two_host_cleanup
}
trap cleanup EXIT
reset_rdma
/usr/bin/python3 -c "import pyverbs" 2> /dev/null || skip "python3-pyverbs not installed on host A"

# Host B: no MetaRoCE device, nothing on UDP 4792 (the tester's socket).
peer ". $METAROCE_REPO/selftests/lib.sh; reset_rdma" > /dev/null
peer "ss -lun | grep -q ':4792 '" && fail "host B still has UDP port 4792 open: the tester needs it"
peer "ip addr add $third/24 dev \$PLANE0_DEV" || fail "cannot add the stranger's address $third on host B"

expect_ok rdma link add mr0 type metaroce netdev "$PLANE0_DEV"
for _ in $(seq 50); do
	gid_index mr0 "$PLANE0_IP" > /dev/null && break
	sleep 0.2
done
gid_index mr0 "$PLANE0_IP" > /dev/null || fail "no RoCE v2 GID for $PLANE0_IP on mr0"
malformed0=$(mr0_stat rx_malformed)

log=/tmp/conformance_agent.log
/usr/bin/python3 "$here/conformance/agent.py" --dev mr0 --addr "$PLANE0_IP" --port $agent_port --once > "$log" 2>&1 &
agent_pid=$!
for _ in $(seq 100); do
	grep -q "listening" "$log" && break
	kill -0 "$agent_pid" 2> /dev/null || fail "the agent exited: $(cat "$log")"
	sleep 0.2
done
grep -q "listening" "$log" || fail "the agent never listened: $(cat "$log")"
log "ok: agent on host A: $(head -1 "$log")"

# The control channel goes over the management network (host A's address
# there is host B's METAROCE_PEER_ADDR): plane 0 carries MetaRoCE only.
# shellcheck disable=SC2016
a_mgmt=$(peer 'echo $METAROCE_PEER_ADDR') || a_mgmt=""
[ -n "$a_mgmt" ] || fail "cannot read host A's management address from host B (its METAROCE_PEER_ADDR)"
job=$(peer_spawn "timeout 1200 /usr/bin/python3 $METAROCE_REPO/selftests/conformance/run.py --dut $PLANE0_IP --agent $a_mgmt:$agent_port --src $PEER_PLANE0_IP --third $third") ||
	fail "cannot start the tester on host B"
out=$(peer_wait "$job" 1260)
rc=$?
echo "$out"
log "agent: $(tail -3 "$log")"
mr0_counters
malformed=$(( $(mr0_stat rx_malformed) - malformed0 ))
log "host A counted $malformed malformed packets during the suite"
# The failed clauses' details again in the one FAIL line: a CI log may
# keep only the end of a long run's output.
[ $rc = 0 ] || fail "conformance: $(grep '^# conformance:' <<< "$out" || echo "the tester exited $rc"):" \
	"$(grep -A5 '^not ok' <<< "$out" | grep -v '^ok ' | head -20 | tr '\n' ' ')"
# Malformed for the parser (section 1): 14 data packets of `drops` (its two
# segmentation cases are receiver drops), 4 PROBEs of drop_control, 3
# PLANES of planes_malformed, 1 NAK of dut_nak_rules (undefined syndrome).
[ "$malformed" -ge 22 ] || fail "host A counted $malformed malformed packets, the suite sent at least 22"
log "ok: $(grep '^# conformance:' <<< "$out")"
