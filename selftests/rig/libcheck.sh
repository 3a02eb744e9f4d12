#!/bin/bash
# Host-side check of lib.sh's teardown and counter helpers, no VM needed:
# rdma, tc, ip, pkill and rmmod are fakes on PATH that log their arguments
# (rdma prints the JSON iproute2's rdma/stat.c prints), peer is a fake
# function, and the plane netdevs are names no host has. Each case compares
# the commands run, or the value read, with what the tests rely on.
set -u
rig=$(cd "$(dirname "$0")" && pwd)
lib=$rig/../lib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=SCRIPTDIR/expect.sh
. "$rig/expect.sh"

mkdir "$tmp/bin"
for c in rdma tc ip pkill rmmod; do
	# shellcheck disable=SC2016
	printf '#!/bin/sh\necho "%s $*" >> "$CALLS"\n' "$c" > "$tmp/bin/$c"
done
cat >> "$tmp/bin/rdma" << 'EOF'
case "$*" in
"link show") printf 'link mr0/1 state ACTIVE netdev mrfake0\nlink mr0/2 state ACTIVE netdev mrfake1\nlink rxe0/1 state ACTIVE netdev mrfake0\n' ;;
"-j statistic show link mr0/1") echo "$RDMA_JSON" ;;
esac
EOF
chmod +x "$tmp/bin"/*
export PATH="$tmp/bin:$PATH" CALLS=$tmp/calls PLANE0_DEV=mrfake0 PLANE1_DEV=mrfake1 RDMA_JSON="" PEER_OUT=""

# calls CMD...: CMD in a shell that sourced lib.sh; prints the commands it
# ran (peer's as "peer CMD"), then its status.
calls() {
	: > "$CALLS"
	(
		# shellcheck source=/dev/null
		. "$lib"
		# shellcheck disable=SC2317
		peer() { echo "peer $*" >> "$CALLS"; [ -z "$PEER_OUT" ] || echo "$PEER_OUT"; }
		"$@" > /dev/null 2>&1
		echo "status $?" >> "$CALLS"
	)
	cat "$CALLS"
}
# shellcheck disable=SC2016
q='for d in $PLANE0_DEV ${PLANE1_DEV:-}; do tc qdisc del dev $d root 2> /dev/null; done; true'
a_qdiscs='tc qdisc del dev mrfake0 root
tc qdisc del dev mrfake1 root'
a_reset='rdma link show
rdma link delete mr0
rdma link delete rxe0
rmmod metaroce
rmmod rdma_rxe'

expect "two_host_cleanup: A reset, mr0 and metaroce on B" "$(calls two_host_cleanup)" "$a_reset
peer rdma link delete mr0; rmmod metaroce
status 0"
expect "two_host_cleanup -q: the planes' qdiscs on both hosts first" "$(calls two_host_cleanup -q)" "$a_qdiscs
$a_reset
peer $q; rdma link delete mr0; rmmod metaroce
status 0"
expect "two_host_cleanup -k: the program killed on both hosts first" "$(calls two_host_cleanup -k ib_write_bw)" "pkill -9 ib_write_bw
$a_reset
peer pkill -9 ib_write_bw; rdma link delete mr0; rmmod metaroce
status 0"
expect "two_host_cleanup -k -k -q LINK MODULE" "$(calls two_host_cleanup -k a -k b -q rxe0 rdma_rxe)" "pkill -9 a
pkill -9 b
$a_qdiscs
$a_reset
peer pkill -9 a; pkill -9 b; $q; rdma link delete rxe0; rmmod rdma_rxe
status 0"
expect "planes_cleanup: planes up, then two_host_cleanup -q" "$(calls planes_cleanup)" "ip link set mrfake0 up
ip link set mrfake1 up
$a_qdiscs
$a_reset
peer $q; rdma link delete mr0; rmmod metaroce
status 0"
expect "planes_cleanup on one plane" "$(PLANE1_DEV='' calls planes_cleanup)" "ip link set mrfake0 up
tc qdisc del dev mrfake0 root
$a_reset
peer $q; rdma link delete mr0; rmmod metaroce
status 0"
expect "tc_drop_clear: host A" "$(calls tc_drop_clear)" "$a_qdiscs
status 0"
expect "tc_drop_clear peer: host B" "$(calls tc_drop_clear peer)" "peer $q
status 0"
for st in 0 1 4; do
	got=$(bash -c '. "$1"; peer() { :; }; trap two_host_cleanup EXIT; exit "$2"' _ "$lib" "$st" > /dev/null 2>&1; echo $?)
	expect "an EXIT trap of two_host_cleanup keeps exit status $st" "$got" "$st"
done

# What `rdma -j statistic show link mr0/1` prints (some iproute2 versions
# also print "ifindex"), and a counter object of `rdma -j statistic qp show`.
link='[{"ifindex":3,"ifname":"mr0","port":1,"rx_packets":120,"tx_packets":118,"retransmissions":7,"rx_malformed":0,"ud_tx_packets":18446744073709551615}]'
qp='[{"ifname":"mr0","port":1,"cntn":4,"qp-type":"RC","pid":321,"comm":"ibv_rc_pingpong","rx_packets":50,"tx_packets":51,"tx_bytes":4100,"lqpn":[17]}]'
# shellcheck source=/dev/null
read_stat() { (. "$lib"; stat_of "$@"; echo "status $?"); }
expect "stat_of: a counter" "$(read_stat retransmissions "$link")" "7
status 0"
expect "stat_of: a counter at 0" "$(read_stat rx_malformed "$link")" "0
status 0"
expect "stat_of: a u64 counter at its maximum" "$(read_stat ud_tx_packets "$link")" "18446744073709551615
status 0"
expect "stat_of: a name is matched whole" "$(read_stat packets "$link")" "status 1"
expect "stat_of: a missing counter" "$(read_stat rx_no_qp "$link")" "status 1"
expect "stat_of: a string member is no counter" "$(read_stat ifname "$link")" "status 1"
expect "stat_of: a boolean is no counter" "$(read_stat up '[{"up":true}]')" "status 1"
expect "stat_of: no output" "$(read_stat tx_packets "")" "status 1"
expect "stat_of: an empty array" "$(read_stat tx_packets "[]")" "status 1"
expect "stat_of: only an error message" "$(read_stat tx_packets "Failed to open NETLINK_RDMA socket")" "status 1"
expect "stat_of: an error message before the JSON" "$(read_stat tx_packets "Error: [x] {y}
$link")" "118
status 0"
expect "stat_of: pretty-printed JSON (rdma -p -j)" \
	"$(read_stat tx_packets "$(/usr/bin/python3 -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1]), indent=4))' "$link")")" "118
status 0"
expect "stat_of: one document per link, counter in the second" \
	"$(read_stat tx_packets '[{"ifname":"mr0","port":1}]
[{"ifname":"mr0","port":2,"tx_packets":9}]')" "9
status 0"
expect "stat_of: a bare object" "$(read_stat tx_packets '{"tx_packets":5}')" "5
status 0"
expect "stat_of: a per-QP counter" "$(read_stat tx_bytes "$qp")" "4100
status 0"
expect "stat_of: a counter object's id" "$(read_stat cntn "$qp")" "4
status 0"
expect "mr0_stat: host A through rdma -j" "$(RDMA_JSON=$link calls mr0_stat tx_packets)" "rdma -j statistic show link mr0/1
status 0"
expect "mr0_stat: the value" "$(RDMA_JSON=$link bash -c '. "$1"; mr0_stat tx_packets' _ "$lib")" "118"
expect "mr0_stat peer: host B through peer" "$(PEER_OUT=$link calls mr0_stat tx_packets peer)" "peer rdma -j statistic show link mr0/1
status 0"
expect "mr0_stat peer: the value" \
	"$(PEER_OUT=$link bash -c '. "$1"; peer() { echo "$PEER_OUT"; }; mr0_stat retransmissions peer' _ "$lib")" "7"
expect "mr0_stat: a missing counter is empty" "$(RDMA_JSON=$link bash -c '. "$1"; mr0_stat rx_no_qp; echo "status $?"' _ "$lib")" "status 1"

# rping_exit_ok: rping 44's exit race after a finished run, and nothing else.
exit_ok() { bash -c '. "$1"; rping_exit_ok "$2" "$3" && echo yes || echo no' _ "$lib" "$@"; }
race=$'client DISCONNECT EVENT...\nrdma_get_cm_event: Bad file descriptor'
expect "rping_exit_ok: status 0" "$(exit_ok 0 "")" yes
expect "rping_exit_ok: the CM thread's exit race" "$(exit_ok 255 "$race")" yes
expect "rping_exit_ok: the race among ping data" "$(exit_ok 255 $'ping data: rdma-ping-0: ABC\n'"$race")" yes
expect "rping_exit_ok: a failed wait before the race" "$(exit_ok 255 $'wait for RDMA_WRITE_ADV state 10\n'"$race")" no
expect "rping_exit_ok: a completion error before it" "$(exit_ok 255 $'cq completion failed status 12\n'"$race")" no
expect "rping_exit_ok: status 255, another last line" "$(exit_ok 255 $'client DISCONNECT EVENT...')" no
expect "rping_exit_ok: another status" "$(exit_ok 1 "$race")" no

# rping_pings over the output of a stand-in for rping 44's client with -v
# -V (-S 64): C stdio, as rping: one printf per validated ping to stdout,
# "client DISCONNECT EVENT..." to stderr by the time the run ends, exit
# through main's return; args COUNT [LOST [SLEEP]]: no line for ping LOST
# (a failed ping), SLEEP seconds before the return.
cc=$(command -v cc || command -v gcc || command -v clang)
if [ -z "$cc" ]; then
	echo "ok - rping_pings over a stand-in # SKIP no C compiler"
else
	cat > "$tmp/rping.c" << 'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int count = atoi(argv[1]), lost = argc > 2 ? atoi(argv[2]) : -1;
	char buf[64];

	for (int i = 0; i < count; i++) {
		int n = snprintf(buf, sizeof(buf), "rdma-ping-%d: ", i);

		for (int j = n; j < (int)sizeof(buf) - 1; j++)
			buf[j] = 'A' + (i + j) % 58;
		buf[sizeof(buf) - 1] = 0;
		if (i != lost)
			printf("ping data: %s\n", buf);
	}
	fprintf(stderr, "client DISCONNECT EVENT...\n");
	if (argc > 3)
		sleep(atoi(argv[3]));
	return 0;
}
EOF
	"$cc" -o "$tmp/rping" "$tmp/rping.c" || { fail=$((fail + 1)); echo "not ok - the rping stand-in does not build"; }
	pings() { bash -c '. "$1"; rping_pings "$2"' _ "$lib" "$1"; }
	# The mis-count of issue 11: a plane-flap run of 1034 pings "showed"
	# 1033 when stdout and stderr shared a file; the disconnect line cut
	# ping 983's line, at 4096 * 18 bytes of stdout.
	"$tmp/rping" 1034 > "$tmp/out" 2>&1
	expect "rping_pings: 1034 pings, stdout and stderr in one file (2>&1): the cut line" \
		"$(grep -n DISCONNECT "$tmp/out")" "984:pinclient DISCONNECT EVENT..."
	expect "rping_pings: 1034 pings, stdout and stderr in one file (2>&1): one short" "$(pings "$tmp/out")" "1033 983"
	"$tmp/rping" 1034 > "$tmp/out" 2> "$tmp/err"
	expect "rping_pings: 1034 pings, stdout apart" "$(pings "$tmp/out")" "1034 1034"
	if command -v stdbuf > /dev/null; then
		stdbuf -oL "$tmp/rping" 1034 > "$tmp/out" 2>&1
		expect "rping_pings: 1034 pings, stdbuf -oL, 2>&1: whole lines" "$(pings "$tmp/out")" "1034 1034"
		stdbuf -oL "$tmp/rping" 1034 > "$tmp/out" 2> "$tmp/err"
		expect "rping_pings: 1034 pings, stdbuf -oL, stdout apart (the tests)" "$(pings "$tmp/out")" "1034 1034"
		# A client a timeout kills (SIGTERM) after 100 pings: block-buffered,
		# the file holds only whole blocks (with 4 KiB, 54 lines and a cut
		# one: "55 54").
		timeout 1 "$tmp/rping" 100 -1 5 > "$tmp/out" 2> "$tmp/err"
		got=$(pings "$tmp/out")
		expect "rping_pings: killed after 100 pings, block-buffered: pings missing" \
			"$([ "${got#* }" -lt 100 ] && echo short || echo "$got")" short
		timeout 1 stdbuf -oL "$tmp/rping" 100 -1 5 > "$tmp/out" 2> "$tmp/err"
		expect "rping_pings: killed after 100 pings, stdbuf -oL" "$(pings "$tmp/out")" "100 100"
	else
		echo "ok - rping_pings with stdbuf -oL # SKIP no stdbuf"
	fi
	# A real loss still fails: a ping without its line, a run cut short.
	"$tmp/rping" 1034 500 > "$tmp/out" 2> "$tmp/err"
	expect "rping_pings: ping 500 of 1034 failed" "$(pings "$tmp/out")" "1033 500"
	"$tmp/rping" 700 > "$tmp/out" 2> "$tmp/err"
	expect "rping_pings: 700 of 1034 pings (the run stopped)" "$(pings "$tmp/out")" "700 700"
	# A line of the right number cut short or of another size.
	printf 'ping data: rdma-ping-0: ABC\n' > "$tmp/out"
	expect "rping_pings: a short line" "$(pings "$tmp/out")" "1 0"
	expect "rping_pings: its size (-S 17)" "$(bash -c '. "$1"; rping_pings "$2" 17' _ "$lib" "$tmp/out")" "1 1"
fi

# perftest_pair runs perftest again when perftest itself failed under TCG
# (its CPU clock fit, here on host B, or the -R REJ race), at most twice;
# any other failure, or a third, fails the test. ib_fake_bw is the client:
# its Nth run prints line N of $FAKE_RUNS ("ok", "clock": host B's fit
# failed, "aclock": its own, or "refused").
cat > "$tmp/bin/ib_fake_bw" << 'EOF2'
#!/bin/sh
n=$(($(cat "$FAKE_COUNT" 2> /dev/null || echo 0) + 1))
echo $n > "$FAKE_COUNT"
case $(sed -n "${n}p" "$FAKE_RUNS") in
ok) echo " 65536      200     4.95     1.33     0.000021"; exit 0 ;;
clock) echo " 65536      200     4.95     1.33     0.000021"; exit 124 ;;
aclock) printf 'Correlation coefficient r^2: 0.736851 < 0.9\nCan'"'"'t produce a report\n'; exit 1 ;;
broken) echo "Failed to modify QP 17 to RTR"; exit 1 ;;
*) echo "Couldn't connect to 198.18.0.2"; exit 1 ;;
esac
EOF2
chmod +x "$tmp/bin/ib_fake_bw"
# pair RUNS...: perftest_pair with the client runs RUNS, host B's server
# reporting the clock failure while the client's run is "clock"; prints
# the status, the client's runs, the reruns logged and the result.
pair() {
	printf '%s\n' "$@" > "$tmp/runs"
	rm -f "$tmp/count" "$tmp/res"
	(
		# shellcheck source=/dev/null
		. "$lib"
		# shellcheck disable=SC2317
		peer() { :; }
		# shellcheck disable=SC2317
		peer_spawn() { echo job; }
		# shellcheck disable=SC2317
		peer_listening() { :; }
		# shellcheck disable=SC2317
		peer_wait() { :; }
		# shellcheck disable=SC2317
		peer_poll() {
			[ "$(sed -n "$(cat "$tmp/count")p" "$tmp/runs")" = clock ] &&
				printf 'Correlation coefficient r^2: 0.736851 < 0.9\nCan'"'"'t produce a report\n'
			return 0
		}
		export FAKE_RUNS=$tmp/runs FAKE_COUNT=$tmp/count
		(perftest_pair 5 "-p 1" "-p 1" 198.18.0.2 ib_fake_bw -s 65536 > "$tmp/log" && echo "res $res" > "$tmp/res")
		echo "status $? $(cat "$tmp/res" 2> /dev/null || echo "res none") runs $(cat "$tmp/count")" \
			"reruns $(grep -c "clock estimate failed (Correlation coefficient r^2: 0.736851 < 0.9): once more" "$tmp/log")"
	) 2> /dev/null
}
expect "perftest_pair: a clock failure on host B, then a pass" "$(pair clock ok)" \
	"status 0 res  65536      200     4.95     1.33     0.000021 runs 2 reruns 1"
expect "perftest_pair: a clock failure on host A, then a pass" "$(pair aclock ok)" \
	"status 0 res  65536      200     4.95     1.33     0.000021 runs 2 reruns 1"
expect "perftest_pair: two clock failures, then a pass" "$(pair clock clock ok)" \
	"status 0 res  65536      200     4.95     1.33     0.000021 runs 3 reruns 2"
expect "perftest_pair: three clock failures fail" "$(pair clock clock clock)" "status 1 res none runs 3 reruns 2"
expect "perftest_pair: another failure is not run again" "$(pair refused ok)" "status 1 res none runs 1 reruns 0"


# The benchmarks' pt_run (bench/lib.sh) runs a point again on the same
# clock failure, at most twice; a client that gave up on its clock has
# its server ended (pkill of this port's server) rather than waited for.
pt() {
	printf '%s\n' "$@" > "$tmp/runs"
	rm -f "$tmp/count"
	mkdir -p "$tmp/bout/bench/raw"
	: > "$tmp/bout/bench/log.txt"
	(
		export METAROCE_OUT=$tmp/bout FAKE_RUNS=$tmp/runs FAKE_COUNT=$tmp/count
		# shellcheck source=/dev/null
		. "$rig/../bench/lib.sh"
		TP_CLI="-d mr0" TP_SRV="-d mr0" TP_TARGET=198.18.0.2
		run() { sed -n "$(cat "$tmp/count")p" "$tmp/runs"; }
		# shellcheck disable=SC2317
		peer() { echo "peer $*" >> "$tmp/peer"; }
		# shellcheck disable=SC2317
		peer_spawn() { echo 7; }
		# shellcheck disable=SC2317
		peer_poll() { echo "peer: job 7 still running"; }
		# shellcheck disable=SC2317
		peer_wait() {
			[ "$(run)" = clock ] &&
				printf 'Correlation coefficient r^2: 0.736851 < 0.9\nCan'"'"'t produce a report\n'
			return 0
		}
		: > "$tmp/peer"
		pt_run ib_fake_bw 5 -s 65536 > /dev/null
		echo "status $? bw $(pt_bw 65536 || echo none) runs $(cat "$tmp/count")" \
			"reruns $(grep -c "clock estimate failed (Correlation coefficient r^2: 0.736851 < 0.9): once more" "$tmp/bout/bench/log.txt")" \
			"kills $(grep -c "pkill -f -- '\[i\]b_fake_bw .\*-p 18515 -F'" "$tmp/peer")"
	) 2> /dev/null
}
expect "pt_run: a clock failure on host B, then a pass" "$(pt clock ok)" "status 0 bw 1.33 runs 2 reruns 1 kills 0"
expect "pt_run: a clock failure on host A (its server ended), then a pass" "$(pt aclock ok)" \
	"status 0 bw 1.33 runs 2 reruns 1 kills 1"
expect "pt_run: three clock failures fail (the client's status)" "$(pt clock aclock clock)" "status 124 bw 1.33 runs 3 reruns 2 kills 1"
expect "pt_run: another failure is not run again" "$(pt broken ok)" "status 1 bw none runs 1 reruns 0 kills 0"

# longest_stall: the longest stall either VM recorded (stallwatch.sh's
# "END_EPOCH_S GAP_MS" lines; host B's answer is the fake peer's) that
# ended at or after a time.
stalls() { # SINCE PEER_OUT [FILE] [each]
	printf '100 3000\n200 9000\n300 2500\n' > "$tmp/stalls"
	(
		# shellcheck source=/dev/null
		. "$lib"
		# shellcheck disable=SC2317
		peer() { echo "$PEER_OUT"; }
		METAROCE_STALLS=${3:-$tmp/stalls} PEER_OUT=$2 longest_stall "$1" "${4:-}"
	)
}
expect "longest_stall: host A's longest since a time" "$(stalls 150 0)" 9000
expect "longest_stall: only the stalls that ended since" "$(stalls 250 0)" 2500
expect "longest_stall: host B's, if longer" "$(stalls 250 4000)" 4000
expect "longest_stall: none since" "$(stalls 400 0)" 0
expect "longest_stall: no records, no answer from host B" "$(stalls 0 '' "$tmp/none")" 0
expect "longest_stall each: both hosts'" "$(stalls 150 4000 "" each)" "9000 4000"

expect_summary "lib.sh check"
