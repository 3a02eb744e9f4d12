#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The benchmark suite, end to end (make bench): boots the rig with 4 planes,
# runs selftests/bench/suite.sh on host A, then turns the samples into
# report.md, samples.csv and PNG plots on this host.
#
#   selftests/bench/run.sh               full suite (< 60 min on 2 TCG cores, and the collectives)
#   BENCH_QUICK=1 selftests/bench/run.sh the ~5 minute subset (CI smoke)
#
# Environment: BENCH_OUT (default a new /tmp/metaroce-bench.*),
# BENCH_TRANSPORTS, BENCH_SCENARIOS, BENCH_REPS, BENCH_PLANE_RATE,
# BENCH_SCALE_RATE, BENCH_RCN_RATE, BENCH_COLL_* (passed to the suite),
# BENCH_PUBLISH=0 (do not copy a full run's report into
# Documentation/benchmarks/), METAROCE_PLANES (default 4).
set -euo pipefail
bench=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$bench/../.." && pwd)
venv=${METAROCE_VENV:-/opt/metaroce-venv}
quick=${BENCH_QUICK:-0}
out=${BENCH_OUT:-$(mktemp -d /tmp/metaroce-bench.XXXXXX)}
mkdir -p "$out"
export METAROCE_OUT=$out METAROCE_PLANES=${METAROCE_PLANES:-4}
# The collectives (up to 2 x 24 min when every job runs out its time) come
# on top of the other scenarios' 55 min.
export METAROCE_RIG_TIMEOUT=${METAROCE_RIG_TIMEOUT:-6300}

# The guests do not inherit our environment: the suite's knobs go on its
# command line, in double quotes (the rig wraps the whole command in single
# quotes; single-quoted values split it at their spaces).
knobs="BENCH_QUICK=$quick"
for v in BENCH_TRANSPORTS BENCH_SCENARIOS BENCH_REPS BENCH_PLANE_RATE BENCH_SCALE_RATE BENCH_RCN_RATE BENCH_COLL_RANKS BENCH_COLL_LOSS BENCH_COLL_PATHS; do
	[ -n "${!v:-}" ] && knobs+=" $v=\"${!v}\""
done
invocation="${BENCH_INVOCATION:-$knobs selftests/bench/run.sh}"

start=$(date +%s)
set +e
"$repo/selftests/rig/run.sh" "$knobs $bench/suite.sh" 2>&1 | tee "$out/rig.log"
rig_rc=${PIPESTATUS[0]}
set -e
took=$(($(date +%s) - start))
echo "bench: rig run took $took s (exit $rig_rc)"

[ -f "$out/bench/samples.csv" ] || { echo "bench: no samples (see $out/rig.log)"; exit 1; }
"$venv/bin/python" "$bench/report.py" --dir "$out/bench" --rig-log "$out/rig.log" \
	--command "$invocation" --seconds "$took" --rig-rc "$rig_rc" --quick "$quick"
echo "bench: report $out/bench/report.md"

# Only a whole suite replaces the published report.
if [ "$quick" != 1 ] && [ -z "${BENCH_SCENARIOS:-}" ] && [ "$rig_rc" = 0 ] && [ "${BENCH_PUBLISH:-1}" = 1 ]; then
	dst=$repo/Documentation/benchmarks
	mkdir -p "$dst"
	cp "$out/bench/report.md" "$out/bench/samples.csv" "$out/bench"/*.png "$dst/"
	echo "bench: published to $dst"
fi
exit "$rig_rc"
