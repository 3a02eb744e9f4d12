#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Host-side check of the collectives scenario, no VM needed: mpi_coll.sh
# starts a real Open MPI job whose second "host" is a peer.py server on
# the loopback (127.0.0.2), as host B's is in the rig, with its "check"
# path (UCX over TCP: no verbs device here); lib.sh's coll_record turns the
# output into samples, also for a job cut short; report.py writes the
# section and collectives.png. Skipped (exit 0) without Open MPI and
# mpi4py (selftests/rig/deps.sh installs them).
set -u
bench=$(cd "$(dirname "$0")" && pwd)
rig=$bench/../rig
if ! command -v mpirun > /dev/null || ! /usr/bin/python3 -c 'import mpi4py' 2> /dev/null; then
	echo "# skip: no mpirun or mpi4py (selftests/rig/deps.sh)"
	exit 0
fi
tmp=$(mktemp -d)
server=""
cleanup() {
	[ -n "$server" ] && kill "$server" 2> /dev/null
	[ -n "${COLLCHECK_KEEP:-}" ] && cp -r "$tmp" "$COLLCHECK_KEEP"
	rm -rf "$tmp"
}
trap cleanup EXIT
# shellcheck source=SCRIPTDIR/../rig/expect.sh
. "$rig/expect.sh"

export METAROCE_OUT=$tmp METAROCE_PEER_ADDR=127.0.0.2 METAROCE_PEER_PORT=$((27000 + RANDOM % 2000))
export COLL_ADDR=127.0.0.1 BENCH_COLL_RANKS=2
# shellcheck source=/dev/null
. "$bench/lib.sh"
csv_init
/usr/bin/python3 "$rig/peer.py" --addr "$METAROCE_PEER_ADDR" --port "$METAROCE_PEER_PORT" serve &
server=$!
/usr/bin/python3 "$rig/peer.py" --timeout 10 ping > /dev/null || { echo "not ok - peer.py server on the loopback"; exit 1; }

out=$tmp/job
coll_job check lo 0 120 "$out" --sizes 8,4096,65536
rc=$?
expect "the job through the peer channel ends well" "$rc $(grep -c '^coll-end' "$out")" "0 1"
[ "$rc" = 0 ] || sed 's/^/#   /' "$out" | tail -20
expect "it ran 4 ranks" "$(sed -n 's/^coll-start ranks=\([0-9]*\).*/\1/p' "$out")" 4
expect "rank 0 printed every point, all-reduce first" \
	"$(awk '$1 == "coll" { printf "%s:%s:%s ", $2, $3, $4 }' "$out")" \
	"allreduce:8:8 alltoall:8:8 allreduce:4096:4096 alltoall:4096:4096 allreduce:65536:65536 alltoall:65536:65536 "

coll_record rxe 4 1 loss=0 8,4096,65536 "$rc" 120 "$out"
expect "samples: avg, min, max per point" "$(grep -c '^rxe,collectives,' "$CSV")" 18
expect "an average is a number of µs" \
	"$(awk -F, '$1 == "rxe" && $3 == "alltoall" && $4 == 4096 && $9 == "avg_us" { print ($10 > 0) }' "$CSV")" 1

# A job cut short: the points it printed, an error for each other one.
head -3 "$out" > "$tmp/short"
coll_record metaroce 4 2 loss=1 8,4096,65536 124 120 "$tmp/short"
expect "a timed-out job's missing points are errors" \
	"$(awk -F, '$1 == "metaroce" && $9 == "error" { printf "%s:%s ", $3, $4 }' "$CSV")" \
	"allreduce:4096 alltoall:4096 allreduce:65536 alltoall:65536 "
expect "with the reason" "$(awk -F, '$1 == "metaroce" && $9 == "error" { print $11; exit }' "$CSV")" \
	"the job did not finish in 120 s"

# The report: both transports, both conditions.
coll_record metaroce 4 2 loss=0 8,4096,65536 0 120 "$out"
coll_record rxe 4 1 loss=1 8,4096,65536 0 120 "$out"
csv rxe collectives - - 4 1 - - path ucx
csv metaroce collectives - - 4 2 - - path ucx
if report_check; then
	expect "the report's collectives section" "$(grep -c '^## Collectives' "$BOUT/report.md")" 1
	expect "a row per operation and size, MetaRoCE and rxe side by side" \
		"$(grep -cE "^\| all-(reduce|to-all) \|" "$BOUT/report.md")" 6
	expect "the lossy run's missing points say why" "$(grep -c 'did not finish in 120 s' "$BOUT/report.md")" 1
	expect "collectives.png" "$([ -s "$BOUT/collectives.png" ] && echo yes)" yes
fi
expect_summary "collectives check"
