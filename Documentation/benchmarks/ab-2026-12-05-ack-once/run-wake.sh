#!/bin/bash
# run inside the rig (host A): 5acfc2f (one ACK per cum_msn move, said again
# at destroy; a sender at its transmit cap woken as the stack drains) as B
# against ff10c5b as A. Builds: a worktree at each, `make modules
# KDIR=$(METAROCE_KERNEL=bench selftests/rig/kernel.sh)`, copied to ab/.
# Run: METAROCE_KERNEL=bench selftests/rig/run.sh 'bash Documentation/benchmarks/ab-2026-12-05-ack-once/run-wake.sh'
cd "$METAROCE_REPO" || exit 1
A=$METAROCE_REPO/ab/ko-ff10c5b-bench.ko B=$METAROCE_REPO/ab/ko-wake-bench.ko
AB_REPS=3 AB_POINTS="ib_write_bw -s 65536 -D 4 -f 1 -Q 1;ib_send_bw -s 65536 -D 4 -f 1 -Q 1;ib_write_bw -s 65536 -q 8 -D 6 -f 1 -Q 1;ib_write_lat -s 2 -n 1000;ib_write_lat -s 4096 -n 500;ib_send_lat -s 2 -n 1000" AB_A=$A AB_B=$B bash selftests/bench/ko_ab.sh
