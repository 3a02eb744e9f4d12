#!/bin/bash
# run inside the rig (host A): 1% loss A/B, before (21ca825) and after (2d8d163) the reorder learning
cd "$METAROCE_REPO"
A=$METAROCE_REPO/ab/ko-21ca825-bench.ko B=$METAROCE_REPO/ab/ko-2d8d163-bench.ko
AB_REPS=3 AB_ON_BOTH="tc_loss_all 1" AB_POINTS="ib_write_bw -s 65536 -D 4 -f 1 -Q 1" AB_A=$A AB_B=$B bash selftests/bench/ko_ab.sh
