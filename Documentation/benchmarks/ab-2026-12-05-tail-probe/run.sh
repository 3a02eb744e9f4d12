#!/bin/bash
# run inside the rig (host A): 430de9a (A) against d3f0be2 (B: the reorder
# window of 090adbf and the tail probe of d3f0be2), on the debug test
# kernel: the benchmark's reordering point (netem 2 ms +- 2 ms on plane 0,
# both hosts), then 8 QPs lossless.
# Builds: a worktree at each revision, `make modules KDIR=$(selftests/rig/kernel.sh)`,
# its metaroce.ko copied to ab/ under the names below.
# Run: selftests/rig/run.sh 'bash Documentation/benchmarks/ab-2026-12-05-tail-probe/run.sh'
cd "$METAROCE_REPO" || exit 1
A=$METAROCE_REPO/ab/ko-430de9a.ko B=$METAROCE_REPO/ab/ko-d3f0be2.ko
echo "=== reordering: netem delay 2ms 2ms on plane 0"
AB_REPS=3 AB_ON_BOTH="tc_jitter 0 2ms 2ms" AB_POINTS="ib_write_bw -s 65536 -D 4 -f 1 -Q 1" AB_A=$A AB_B=$B bash selftests/bench/ko_ab.sh
echo "=== 8 QPs lossless"
AB_REPS=2 AB_POINTS="ib_write_bw -s 65536 -q 8 -D 8 -f 1 -Q 1" AB_A=$A AB_B=$B bash selftests/bench/ko_ab.sh
