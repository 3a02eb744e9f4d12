#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Many RC QPs on one device (issue 11): N QPs (default 1000) on each host,
# connected pairwise; every one completes an RDMA WRITE and a SEND, and
# the memory per idle connected QP is measured on both hosts (see
# many_qps.py for what is counted). The client fails above
# MANY_QPS_MAX_BYTES, default 13312: a regression bound (the expected
# measurement plus ~10%). Issue 11 asks for at most 16 KiB per idle
# connected QP. The first rig run (2026-12-03, debug test kernel)
# measured 20,148 B: the driver's and engine's 16,256 B then plus the
# RDMA core's own per-QP objects and the rings' metadata (3,892 B). The
# engines' message windows are now taken with a QP's first message: ours
# are 8,072 B (asserted at build time, rust/driver/qp.rs; design.md
# "Per-QP memory"), so ~11,950 B are expected here; on the benchmark
# kernel 4,000 QPs measured 10,531 B (18,722 B before the cut).
# 1,000 QPs took 105 s of rig time. The 4,000-QP run is manual:
#   METAROCE_MANY_QPS=4000 METAROCE_TESTS="many_qps.sh" selftests/rig/run.sh selftests
. "$(dirname "$0")/lib.sh"
trap 'two_host_cleanup -q' EXIT
reset_rdma
/usr/bin/python3 -c "import pyverbs" 2> /dev/null || skip "python3-pyverbs not installed"

n=${METAROCE_MANY_QPS:-1000}
max=${MANY_QPS_MAX_BYTES:-13312}
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
