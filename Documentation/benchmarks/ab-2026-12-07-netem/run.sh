# A diagnostic (ab-2026-12-07-netem): ib_write_bw 64 KiB under no qdisc change,
# netem loss 0%, 0.1% and 1%, 3 reps, with host A's counters after each point.
# Needs /tmp/ab/kcrc.ko: metaroce.ko built for the benchmark kernel.
. /run/metaroce/env
. "$METAROCE_REPO/selftests/bench/lib.sh"
csv_init
ko_load /tmp/ab/kcrc.ko || { echo "adhoc: load failed"; exit 1; }
mr_up 2 || { echo "adhoc: $TP_REASON"; exit 1; }
st() { echo "tail_probes $(mr0_stat tail_probes) rto $(mr0_stat rto_timeouts) spurious $(mr0_stat rto_spurious) sack_losses $(mr0_stat sack_losses) retx $(mr0_stat retransmissions)"; }
for rep in 1 2 3; do
	for cond in none netem0 loss0.1 loss1; do
		on_both tc_clear > /dev/null
		case $cond in
		netem0) on_both "tc_loss_all 0" > /dev/null ;;
		loss0.1) on_both "tc_loss_all 0.1" > /dev/null ;;
		loss1) on_both "tc_loss_all 1" > /dev/null ;;
		esac
		pt_run ib_write_bw 40 -s 65536 -D 4 -f 1 -Q 1
		echo "adhoc rep$rep $cond: $(awk '$1 == 65536 && NF >= 5 { print $2 " it " $4 " MB/s"; exit }' "$PT_OUT") | $(st)"
	done
done
on_both tc_clear > /dev/null
tc qdisc show | sed 's/^/adhoc qdisc /' | head -3
