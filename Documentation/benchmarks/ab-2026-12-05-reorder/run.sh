#!/bin/bash
# run inside the rig (host A): reorder A/B, then 64 KiB latency snapshots
cd "$METAROCE_REPO"
A=$METAROCE_REPO/ab/ko-21ca825-bench.ko B=$METAROCE_REPO/ab/ko-2d8d163-bench.ko
AB_REPS=3 AB_ON_BOTH="tc_jitter 0 2ms 2ms" AB_POINTS="ib_write_bw -s 65536 -D 4 -f 1 -Q 1" AB_A=$A AB_B=$B bash selftests/bench/ko_ab.sh
echo "=== latency snapshots (no jitter)"
AB_REPS=1 AB_SNAP=2 AB_SNAPS=3 AB_POINTS="ib_write_lat -s 65536 -n 1000;ib_write_bw -s 65536 -D 4 -f 1 -Q 1" AB_A=$A AB_B=$B bash selftests/bench/ko_ab.sh
