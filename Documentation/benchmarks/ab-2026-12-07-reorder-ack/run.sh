# A diagnostic (ab-2026-12-07-reorder-ack): ko_ab.sh on the reordering point
# (netem 2 ms +- 2 ms on plane 0 of both hosts), A = AB_A (main before the
# change), B = AB_B (on a path that reorders, ACKs at once only as its lowest
# hole fills), both built for the benchmark kernel.
#   METAROCE_KERNEL=bench selftests/rig/run.sh 'AB_A=... AB_B=... bash Documentation/benchmarks/ab-2026-12-07-reorder-ack/run.sh'
. /run/metaroce/env
export AB_REPS=${AB_REPS:-5} AB_POINTS="ib_write_bw -s 65536 -D 4 -f 1 -Q 1"
echo "ab: condition tc_jitter 0 2ms 2ms"
AB_ON_BOTH="tc_jitter 0 2ms 2ms" bash "$METAROCE_REPO/selftests/bench/ko_ab.sh"
