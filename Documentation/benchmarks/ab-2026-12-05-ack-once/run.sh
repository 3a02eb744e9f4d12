#!/bin/bash
# run inside the rig (host A): the ACK that moves cum_msn sent once and said
# again at destroy (B, ack-once.patch here applied to ff10c5b) against ff10c5b (A).
# Builds: worktrees at ff10c5b with and without that diff, `make modules
# KDIR=$(METAROCE_KERNEL=bench selftests/rig/kernel.sh)`, copied to ab/.
# Run: METAROCE_KERNEL=bench selftests/rig/run.sh 'bash Documentation/benchmarks/ab-2026-12-05-ack-once/run.sh'
cd "$METAROCE_REPO" || exit 1
A=$METAROCE_REPO/ab/ko-ff10c5b-bench.ko B=$METAROCE_REPO/ab/ko-lastword-bench.ko
AB_REPS=3 AB_POINTS="ib_write_lat -s 2 -n 1000;ib_write_lat -s 4096 -n 500;ib_send_lat -s 2 -n 1000;ib_send_lat -s 65536 -n 200;ib_write_bw -s 65536 -D 4 -f 1 -Q 1;ib_send_bw -s 65536 -D 4 -f 1 -Q 1" AB_A=$A AB_B=$B bash selftests/bench/ko_ab.sh
