#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Many RC QPs on one device (issue 11): N QPs (default 1000) on each host,
# connected pairwise; every one completes an RDMA WRITE and a SEND, and
# the memory per idle connected QP is measured on both hosts (client
# fails above MANY_QPS_MAX_BYTES, default 16384; see many_qps.py for what
# is counted). The 4,000-QP run is manual:
#   METAROCE_MANY_QPS=4000 METAROCE_TESTS="many_qps.sh" selftests/rig/run.sh selftests
# Not in TEST_PROGS: how long 1,000 QPs take under TCG is not known yet.
. "$(dirname "$0")/lib.sh"
trap 'two_host_cleanup -q' EXIT
reset_rdma
/usr/bin/python3 -c "import pyverbs" 2> /dev/null || skip "python3-pyverbs not installed"

n=${METAROCE_MANY_QPS:-1000}
max=${MANY_QPS_MAX_BYTES:-16384}
secs=$((300 + n / 5))
mr0_on_both_hosts

here=$(cd "$(dirname "$0")" && pwd)
port=18660
job=$(peer_spawn "timeout $secs /usr/bin/python3 $METAROCE_REPO/selftests/many_qps.py server mr0 $pgid $port $n") ||
	fail "cannot start the server on host B"
out=$(timeout "$secs" /usr/bin/python3 "$here/many_qps.py" client mr0 "$gid" "$METAROCE_PEER_ADDR" "$port" "$n" "$max" 2>&1)
rc=$?
echo "$out"
server=$(peer_wait "$job" "$secs")
srv_rc=$?
echo "$server" | sed 's/^/B: /'
[ $rc -eq 0 ] || fail "client (host A) failed"
[ $srv_rc -eq 0 ] || fail "server (host B) failed"
log "ok: $n QPs on one device each completed their work"
