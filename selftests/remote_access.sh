#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Remote access violations between host A and host B over MetaRoCE: a bad
# rkey, an address outside the region, a region without REMOTE_WRITE or
# REMOTE_READ, each with WRITE and READ. The requester must complete with
# a remote access error, its QP must be in the error state and flush what
# is posted later, and B's memory must be unchanged; also when B's first
# NAKs are lost and B is in error by the time the requester's verdict
# probe arrives (B still NAKs it). Also a bad lkey (local
# protection error) and a QP transition that skips a state (EINVAL); a
# zero-length WRITE and READ with key 0 succeed (they name no memory). The
# verbs work is in remote_access.py (pyverbs); this script sets up the
# devices and runs its two halves.
. "$(dirname "$0")/lib.sh"
trap 'two_host_cleanup -q' EXIT
reset_rdma
/usr/bin/python3 -c "import pyverbs" 2> /dev/null || skip "python3-pyverbs not installed"

mr0_on_both_hosts

here=$(cd "$(dirname "$0")" && pwd)
port=18650
job=$(peer_spawn "timeout 120 /usr/bin/python3 $METAROCE_REPO/selftests/remote_access.py server mr0 $pgid $port") ||
	fail "cannot start the server on host B"
out=$(timeout 120 /usr/bin/python3 "$here/remote_access.py" client mr0 "$gid" "$METAROCE_PEER_ADDR" "$port" 2>&1)
rc=$?
echo "$out"
server=$(peer_wait "$job" 60)
srv_rc=$?
echo "$server" | sed 's/^/B: /'
[ $rc -eq 0 ] || fail "client (host A) failed"
[ $srv_rc -eq 0 ] || fail "server (host B) failed"
log "ok: remote access violations refused, requester QPs in error, B's memory unchanged"
