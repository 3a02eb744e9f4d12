#!/bin/bash
# run inside the rig (host A): when do the timeouts come? 1% loss with path snapshots; 8 QPs lossless, 4 s against 12 s
cd "$METAROCE_REPO"
K=$METAROCE_REPO/ab/ko-2d8d163-bench.ko
echo "=== 1% loss, snapshots"
AB_REPS=2 AB_SNAP=1 AB_SNAPS=4 AB_ON_BOTH="tc_loss_all 1" AB_POINTS="ib_write_bw -s 65536 -D 6 -f 1 -Q 1" AB_A=$K AB_B=$K bash selftests/bench/ko_ab.sh
echo "=== 8 QPs lossless, 4 s and 12 s"
AB_REPS=1 AB_SNAP=1 AB_SNAPS=3 AB_POINTS="ib_write_bw -s 65536 -q 8 -D 4 -f 1 -Q 1;ib_write_bw -s 65536 -q 8 -D 12 -f 1 -Q 1" AB_A=$K AB_B=$K bash selftests/bench/ko_ab.sh
