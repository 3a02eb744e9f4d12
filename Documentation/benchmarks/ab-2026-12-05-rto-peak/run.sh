#!/bin/bash
# run inside the rig (host A): the QP's peak RTT as the RTO floor (B,
# ff10c5b's code) against 89bfeda (A): 8 QPs lossless, then 1% loss.
# Builds: a worktree at each revision, `make modules KDIR=$(METAROCE_KERNEL=bench
# selftests/rig/kernel.sh)`, its metaroce.ko copied to ab/ under the names below.
# Run: METAROCE_KERNEL=bench selftests/rig/run.sh 'bash Documentation/benchmarks/ab-2026-12-05-rto-peak/run.sh'
cd "$METAROCE_REPO" || exit 1
A=$METAROCE_REPO/ab/ko-89bfeda-bench.ko B=$METAROCE_REPO/ab/ko-peak1-bench.ko
echo "=== 8 QPs lossless"
AB_REPS=2 AB_POINTS="ib_write_bw -s 65536 -q 8 -D 8 -f 1 -Q 1" AB_A=$A AB_B=$B bash selftests/bench/ko_ab.sh
echo "=== 1% loss"
AB_REPS=3 AB_ON_BOTH="tc_loss_all 1" AB_POINTS="ib_write_bw -s 65536 -D 6 -f 1 -Q 1" AB_A=$A AB_B=$B bash selftests/bench/ko_ab.sh
