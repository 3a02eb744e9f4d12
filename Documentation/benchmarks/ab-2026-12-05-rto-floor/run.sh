#!/bin/bash
# run inside the rig (host A): 8 QPs lossless, RTO floor 10 ms (A) against 30 ms (B)
cd "$METAROCE_REPO"
K=$METAROCE_REPO/ab/ko-2d8d163-bench.ko
AB_REPS=2 AB_POINTS="ib_write_bw -s 65536 -q 8 -D 8 -f 1 -Q 1" AB_A=$K AB_B=$K AB_B_OPTS="min_rto_us=30000" bash selftests/bench/ko_ab.sh
