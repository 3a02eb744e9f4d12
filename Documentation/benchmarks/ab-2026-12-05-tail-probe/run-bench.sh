#!/bin/bash
# run inside the rig (host A): 430de9a (A) against d3f0be2 (B: the reorder
# window of 090adbf and the tail probe of d3f0be2), on the benchmark
# kernel: the benchmark's reordering point (netem 2 ms +- 2 ms on plane 0,
# both hosts), 8 QPs lossless, and 64 KiB SEND with snapshots of host A's
# paths; then d3f0be2 alone with the delay target (knob delay_target_us) at
# its default against 15 ms on SEND and 8 QPs.
# Builds: a worktree at each revision, `make modules KDIR=$(METAROCE_KERNEL=bench
# selftests/rig/kernel.sh)`, its metaroce.ko copied to ab/ under the names below.
# Run: METAROCE_KERNEL=bench selftests/rig/run.sh 'bash Documentation/benchmarks/ab-2026-12-05-tail-probe/run-bench.sh'
cd "$METAROCE_REPO" || exit 1
A=$METAROCE_REPO/ab/ko-430de9a-bench.ko B=$METAROCE_REPO/ab/ko-d3f0be2-bench.ko
echo "=== reordering: netem delay 2ms 2ms on plane 0"
AB_REPS=3 AB_ON_BOTH="tc_jitter 0 2ms 2ms" AB_POINTS="ib_write_bw -s 65536 -D 4 -f 1 -Q 1" AB_A=$A AB_B=$B bash selftests/bench/ko_ab.sh
echo "=== 8 QPs lossless"
AB_REPS=2 AB_POINTS="ib_write_bw -s 65536 -q 8 -D 8 -f 1 -Q 1" AB_A=$A AB_B=$B bash selftests/bench/ko_ab.sh
echo "=== 64 KiB SEND lossless"
AB_REPS=2 AB_SNAP=2 AB_SNAPS=2 AB_POINTS="ib_send_bw -s 65536 -D 4 -f 1 -Q 1" AB_A=$A AB_B=$B bash selftests/bench/ko_ab.sh
echo "=== 64 KiB SEND and 8 QPs: d3f0be2 with the delay target at its default (A) and at 15 ms (B)"
AB_REPS=2 AB_SNAP=2 AB_SNAPS=2 AB_B_OPTS="delay_target_us=15000" AB_POINTS="ib_send_bw -s 65536 -D 4 -f 1 -Q 1;ib_write_bw -s 65536 -q 8 -D 8 -f 1 -Q 1" AB_A=$B AB_B=$B bash selftests/bench/ko_ab.sh
