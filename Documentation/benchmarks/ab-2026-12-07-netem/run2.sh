# A diagnostic (ab-2026-12-07-netem, run 2): netem with 0% loss against no qdisc,
# alternated A B B A per pair of reps so that order does not favour either, for
# MetaRoCE (ib_write_bw 64 KiB) and TCP (iperf3, one stream on plane 0).
# Needs /tmp/ab/kcrc.ko: metaroce.ko built for the benchmark kernel.
. /run/metaroce/env
. "$METAROCE_REPO/selftests/bench/lib.sh"
csv_init
ko_load /tmp/ab/kcrc.ko || { echo "adhoc: load failed"; exit 1; }
mr_up 2 || { echo "adhoc: $TP_REASON"; exit 1; }
point() { # TRANSPORT COND
	on_both tc_clear > /dev/null
	[ "$2" = netem0 ] && on_both "tc_loss_all 0" > /dev/null
	if [ "$1" = tcp ]; then
		echo "adhoc tcp $2: $(ip_run 0 2 1) MiB/s"
	else
		pt_run ib_write_bw 40 -s 65536 -D 4 -f 1 -Q 1
		echo "adhoc metaroce $2: $(awk '$1 == 65536 && NF >= 5 { print $2 " it " $4 " MB/s"; exit }' "$PT_OUT")"
	fi
}
for pair in 1 2 3; do
	for t in metaroce tcp; do
		point $t none; point $t netem0; point $t netem0; point $t none
	done
done
on_both tc_clear > /dev/null
