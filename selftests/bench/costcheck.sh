#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Host-side check of what a benchmark point cost (issue #11: CPU per MiB,
# ACK frames per data frame, timer retransmissions), no VM needed:
# lib.sh's host_cost reads fake planes and fake mr0 counters,
# cost_window.py the planes and a fake /proc/stat; cost_end turns the
# readings of both hosts into samples (host B's through a fake peer); report.py's cost section renders fixture rows. The
# report part is skipped without matplotlib (selftests/rig/deps.sh).
set -u
bench=$(cd "$(dirname "$0")" && pwd)
rig=$bench/../rig
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=SCRIPTDIR/../rig/expect.sh
. "$rig/expect.sh"

export METAROCE_OUT=$tmp METAROCE_PLANES=2 PLANE_SYSFS=$tmp/net
export PLANE0_DEV=fake0 PLANE1_DEV=fake1
export COST_PROC_STAT=$tmp/stat COST_HW_COUNTERS=$tmp/hw
# shellcheck source=/dev/null
. "$bench/lib.sh"
csv_init
put() { echo "$2" > "$1.tmp" && mv "$1.tmp" "$1"; } # FILE VALUE, as one write for a reader
set_plane() { # PLANE TX_PACKETS TX_BYTES
	mkdir -p "$PLANE_SYSFS/fake$1/statistics"
	put "$PLANE_SYSFS/fake$1/statistics/tx_packets" "$2"
	put "$PLANE_SYSFS/fake$1/statistics/tx_bytes" "$3"
	put "$PLANE_SYSFS/fake$1/statistics/rx_bytes" 0
}
set_plane 0 100 150000
set_plane 1 200 300000
# For cost_window.py: user nice system idle iowait irq softirq steal,
# busy = 10+1+20+5+4.
echo "cpu  10 1 20 1000 7 5 4 3 0 0" > "$COST_PROC_STAT"
echo "cpu0 10 1 20 1000 7 5 4 3 0 0" >> "$COST_PROC_STAT"
expect "host_cost without mr0: the planes' packets, no counters" "$(host_cost)" "300 0 0 0"
mkdir -p "$COST_HW_COUNTERS"
echo 12 > "$COST_HW_COUNTERS/retransmissions"
echo 3 > "$COST_HW_COUNTERS/rto_timeouts"
expect "host_cost with mr0's counters, a module without rto_losses" "$(host_cost)" "300 12 3 0"
echo 9 > "$COST_HW_COUNTERS/rto_losses"
expect "host_cost with mr0's counters" "$(host_cost)" "300 12 3 9"

# cost_window.py: nothing until the planes move data, then a window
# START seconds later. The transfer starts 2 s after the sampler (its
# start-up is slow on a loaded machine); busy ticks and sent bytes change
# in the middle of the window (1.5 s after the transfer began, the window
# being 0.5 to 2.5 s).
python3 "$bench/cost_window.py" 0.5 2 20 fake0 fake1 > "$tmp/win" &
sleep 2
set_plane 0 100 $((150000 + 1048576))
sleep 1.5
put "$COST_PROC_STAT" "cpu  110 1 20 1000 7 5 4 3 0 0"
set_plane 0 1100 $((150000 + 3 * 1048576))
wait
win=$(cat "$tmp/win")
expect "cost_window.py: the window's seconds, busy ticks, packets and bytes before and after" \
	"$(awk '{ printf "%s %s %s %s %s %s %s", ($1 >= 1.9 && $1 < 2.5) ? "2s" : $1, $2, $3, $4, $5, $6, $7 }' <<< "$win")" \
	"2s 40 140 300 1300 1498576 3595728"
expect "cost_window.py: none without a transfer" "$(python3 "$bench/cost_window.py" 0.1 0.1 0.3 fake0 fake1)" none

# cost_end: over the whole point host A sent 10,000 frames, host B 2,000,
# A had 5 retransmissions and 1 timeout that declared 3 packets lost; in a 2 s window host A was busy
# 1 s and sent 10 MiB, host B was busy 0.5 s and sent 0.5 MiB.
hz=$(getconf CLK_TCK)
samples() { # T TEST: cost_end's samples, "metric=value ..."
	: > "$CSV.new"
	(
		CSV=$CSV.new
		host_cost() { echo "$A_NOW"; }
		peer() { echo "$B_NOW"; }
		cost_window() { echo "2.000 0 $hz 0 1 0 $((10 * 1048576))"; }
		peer_spawn() { echo 9; }
		peer_poll() { echo "2.000 0 $((hz / 2)) 0 1 0 524288"; }
		A_NOW="500 7 2 4" B_NOW="300 0 0 0"
		cost_begin 0.5 2 30
		A_NOW="10500 12 3 7" B_NOW="2300 0 0 0"
		sleep 0.2
		cost_end "$1" throughput "$2" 65536 1 2 loss=0 1
	)
	awk -F, '{ printf "%s=%s ", $9, $10 }' "$CSV.new"
}
# Both hosts busy 50% + 25% of their windows; the sender sent 5 MiB/s (host
# A) or 0.25 MiB/s (host B, a read).
ms=$(awk 'BEGIN { printf "%.2f", 0.75 * 1000 / 5 }')
expect "MetaRoCE write: busy shares, CPU per MiB in the window; A's frames per B's, retransmissions, timeouts, timer-declared losses over the point" \
	"$(samples metaroce ib_write_bw)" \
	"busy_pct_A=50.0 busy_pct_B=25.0 cpu_ms_per_MiB=$ms back_per_data=0.2000 retx_per_data=0.000500 rto_per_data=0.000100 rto_loss_per_data=0.000300 "
expect "rxe: no MetaRoCE counters" "$(samples rxe ib_write_bw)" "busy_pct_A=50.0 busy_pct_B=25.0 cpu_ms_per_MiB=$ms back_per_data=0.2000 "
expect "TCP: no frame ratio (segmentation offload)" "$(samples tcp iperf3)" "busy_pct_A=50.0 busy_pct_B=25.0 cpu_ms_per_MiB=$ms "
ms_read=$(awk 'BEGIN { printf "%.2f", 0.75 * 1000 / 0.25 }')
expect "a read's data sender is host B" "$(samples metaroce ib_read_bw)" \
	"busy_pct_A=50.0 busy_pct_B=25.0 cpu_ms_per_MiB=$ms_read back_per_data=5.0000 retx_per_data=0.000000 rto_per_data=0.000000 rto_loss_per_data=0.000000 "
expect "a sampler still running saw no transfer: no window, the counters still" "$(
	CSV=$tmp/slow.csv
	host_cost() { echo "1 1 1 1"; }
	peer() { echo "1 1 1 1"; }
	cost_window() { sleep 30; }
	peer_spawn() { echo 9; }
	peer_poll() { echo "peer: job 9 still running"; }
	peer_wait() { :; }
	cost_begin 0.5 2 30
	host_cost() { echo "11 1 1 1"; }
	peer() { [ "$1" = "pkill -f -- '[c]ost_window.py'" ] && echo pkilled > "$tmp/pkilled"; echo "3 1 1 1"; }
	cost_end rxe throughput ib_write_bw 65536 1 1 loss=0 1
	cat "$tmp/pkilled" 2> /dev/null
	awk -F, '{ printf "%s=%s ", $9, $10 }' "$CSV" 2> /dev/null
)" "pkilled
back_per_data=0.2000 "

# The report's cost section from fixture rows: 2 reps of MetaRoCE and rxe,
# one of TCP.
for t in metaroce rxe tcp; do csv "$t" availability - - - 1 - - available 1; done
for rep in 1 2; do
	csv metaroce throughput ib_write_bw 65536 1 2 loss=0 "$rep" MiBps 20
	csv rxe throughput ib_write_bw 65536 1 1 loss=0 "$rep" MiBps 10
	csv metaroce throughput ib_write_bw 65536 1 2 loss=0 "$rep" cpu_ms_per_MiB $((40 + rep * 10))
	csv rxe throughput ib_write_bw 65536 1 1 loss=0 "$rep" cpu_ms_per_MiB 100
	csv metaroce throughput ib_write_bw 65536 1 2 loss=0 "$rep" back_per_data 0.2
	csv rxe throughput ib_write_bw 65536 1 1 loss=0 "$rep" back_per_data 0.5
	csv metaroce throughput ib_write_bw 65536 1 2 loss=0 "$rep" retx_per_data "0.00$rep"
	csv metaroce throughput ib_write_bw 65536 1 2 loss=0 "$rep" rto_per_data 0
	csv metaroce throughput ib_write_bw 65536 1 2 loss=0 "$rep" rto_loss_per_data "0.000$rep"
	csv metaroce throughput ib_write_bw 65536 1 2 loss=0 "$rep" busy_pct_A 60
	csv metaroce throughput ib_write_bw 65536 1 2 loss=0 "$rep" busy_pct_B 80
done
csv tcp throughput iperf3 - 1 1 loss=0 1 MiBps 22
csv metaroce throughput ib_write_bw 65536 8 2 loss=0 1 MiBps 15 "after a failed perftest duration clock: perftest printed 0.00 MB/s for 800 iterations; "
csv tcp throughput iperf3 - 1 1 loss=0 1 cpu_ms_per_MiB 30
if report_check; then
	sec=$(sed -n '/^## Cost per byte/,/^## Latency/p' "$BOUT/report.md" 2> /dev/null)
	expect "the cost section follows the throughput table" \
		"$(grep -E '^## (Throughput|Cost|Latency)' "$BOUT/report.md" 2> /dev/null | sed 's/^## //; s/[ ,:].*//' | paste -sd' ')" \
		"Throughput Cost Latency"
	expect "its row: CPU cells, MetaRoCE/rxe, frames back, retransmissions, timeouts, timer-declared losses, busy" \
		"$(grep -F '| ib_write_bw 64 KiB, 1 QP |' <<< "$sec")" \
		"| ib_write_bw 64 KiB, 1 QP | 55.0 [50.0–60.0] (n=2) | 100 [100–100] (n=2) | 30.0 (n=1) | 0.55× | 0.200 | 0.500 | 0.150% (max 0.200%) | 0.000% (max 0.000%) | 0.015% (max 0.020%) | MetaRoCE 60/80 |"
	expect "a sample taken again after perftest's duration clock failed is listed" \
		"$(grep -c "run again in 1 sample(s): MetaRoCE throughput ib_write_bw 65536 B 8 QP loss=0 rep 1 (after a failed perftest duration clock: perftest printed 0.00 MB/s for 800 iterations; )" "$BOUT/report.md")" 1
fi
expect_summary "cost check"
