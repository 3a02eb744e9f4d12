#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Where the CPU time goes (make bench-profile): ib_write_bw 64 KiB, 1 QP,
# 10 s, once over MetaRoCE (the rig's usual 2 planes) and once over rxe,
# with `perf record -a` (software cpu-clock: TCG has no PMU) on host A,
# perftest's client, and host B. Writes profile.md with the top symbols
# per host and transport and the bandwidth of each run, under
# $METAROCE_OUT/bench/ (run on host A through selftests/rig/run.sh).
# PROFILE_TEST: ib_write_bw (default), ib_send_bw or ib_read_bw; with
# ib_read_bw host B sends the data, and host A's busy-polling client
# does not hide the sender's own cost. PROFILE_ON_BOTH: bench/lib.sh
# commands run on both hosts before the runs (as ko_ab's AB_ON_BOTH), e.g.
# "tc_loss_all 0": netem on every plane, losing nothing; every plane's
# qdisc is cleared at the end.
# shellcheck source=/dev/null
. "$(dirname "$0")/lib.sh"
csv_init
command -v perf > /dev/null || { echo "profile: perf not installed"; exit 1; }
md=$BOUT/profile.md
top=${PROFILE_TOP:-25}
dur=${PROFILE_SECONDS:-10}
point=${PROFILE_TEST:-ib_write_bw}
case $point in
ib_write_bw | ib_send_bw) role_a=sender role_b=receiver ;;
ib_read_bw) role_a="requester, the data's receiver" role_b="responder, the data's sender" ;;
*) echo "profile: PROFILE_TEST=$point: one of ib_write_bw, ib_send_bw, ib_read_bw"; exit 1 ;;
esac
reset_rdma
peer "modprobe rdma_rxe" > /dev/null 2>&1
if [ -n "${PROFILE_ON_BOTH:-}" ]; then
	trap 'on_both tc_clear' EXIT
	on_both "$PROFILE_ON_BOTH" || { echo "profile: $PROFILE_ON_BOTH failed"; exit 1; }
fi
modprobe rdma_rxe

# report FILE: the top symbols (children excluded), as a markdown block.
report() {
	perf report -i "$1" --no-children -g none --percent-limit 0.5 --sort dso,sym --stdio 2> /dev/null |
		grep -vE '^#|^$' | head -"$top"
}

{
	echo "# Where the time goes: perf on both hosts during $point"
	echo
	echo "- **Date:** $(date -u '+%Y-%m-%d %H:%M UTC'), guest kernel $(uname -r), $(nproc) vCPU per host (TCG)"
	echo "- **Command:** \`make bench-profile${PROFILE_TEST:+ PROFILE_TEST=$point}\`; each run: \`$point -s 65536 -D $dur -f 1 -Q 1\`,"
	echo "  \`perf record -a -g -e cpu-clock -F 499\` for the middle $((dur - 4)) s on both hosts."
	echo "- Columns: share of all samples on that host (idle included), shared object, symbol."
	[ -z "${PROFILE_ON_BOTH:-}" ] || echo "- On both hosts before the runs: \`$PROFILE_ON_BOTH\`."
	echo
} > "$md"

for t in metaroce rxe; do
	planes=1
	[ "$t" = metaroce ] && planes=$((METAROCE_PLANES < 2 ? METAROCE_PLANES : 2))
	tp_up "$t" "$planes" || { echo "## $t: not available ($TP_REASON)" >> "$md"; tp_down "$t"; continue; }
	pa=/tmp/perf-$t-A.data pb=/tmp/perf-$t-B.data
	(sleep 3 && perf record -a -g -e cpu-clock -F 499 -o "$pa" -- sleep $((dur - 4)) > /dev/null 2>&1) &
	rec=$!
	peer "(sleep 3 && perf record -a -g -e cpu-clock -F 499 -o $pb -- sleep $((dur - 4))) > /dev/null 2>&1 &" > /dev/null
	pt_run "$point" $((dur + 30)) -s 65536 -D "$dur" -f 1 -Q 1
	bw=$(pt_bw 65536 || echo "no result")
	wait "$rec"
	sleep 2
	{
		echo "## $t ($TP_PLANES plane(s)): $bw MiB/s"
		echo
		echo "Host A ($role_a):"
		echo
		echo '```'
		report "$pa"
		echo '```'
		echo
		echo "Host B ($role_b):"
		echo
		echo '```'
		peer "perf report -i $pb --no-children -g none --percent-limit 0.5 --sort dso,sym --stdio 2> /dev/null | grep -vE '^#|^\$' | head -$top"
		echo '```'
		echo
	} >> "$md"
	csv "$t" profile "$point" 65536 1 "$TP_PLANES" lossless 1 bw_MiBps "$bw"
	tp_down "$t"
done
echo "profile: $md"
