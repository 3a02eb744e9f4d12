# A diagnostic (ab-2026-12-07-hole-ack): ko_ab.sh under the loss sweep's and the
# reordering point's conditions, one condition after another in one rig run:
# A = AB_A (main before the change), B = AB_B (ACKs at once only for a hole as it
# opens), both built for the benchmark kernel.
#   METAROCE_KERNEL=bench selftests/rig/run.sh 'AB_A=... AB_B=... bash Documentation/benchmarks/ab-2026-12-07-hole-ack/run.sh'
. /run/metaroce/env
export AB_REPS=${AB_REPS:-3} AB_POINTS="ib_write_bw -s 65536 -D 4 -f 1 -Q 1"
for cond in "tc_loss_all 1" "tc_loss_all 10" "tc_jitter 0 2ms 2ms" ""; do
	echo "ab: condition ${cond:-none}"
	AB_ON_BOTH=$cond bash "$METAROCE_REPO/selftests/bench/ko_ab.sh"
done
