#!/bin/bash
# Host-side check of rcn.sh's readings (selftests/rcn_readings.sh), no VM
# needed: `rdma -dd resource show qp` text as iproute2 prints it (one line
# per QP, the driver's attributes as "drv_NAME VALUE") from a fake rdma on
# PATH, host B's through a peer.py server on the loopback, reduced and
# compared with what rcn.sh relies on.
set -u
rig=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
server=""
cleanup() {
	[ -n "$server" ] && kill "$server" 2> /dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
# shellcheck source=SCRIPTDIR/expect.sh
. "$rig/expect.sh"
# shellcheck source=/dev/null
. "$rig/../rcn_readings.sh"

# qp LQPN STATE HINT RX_HINT PATH...: a QP's line (hints in kbit/s), each PATH
# SPORT:SENT:RETX (slots 0, 1...), or x:SENT:RETX for one closed since (it
# counts in the QP's sent and retx, unlisted); with CUT set, only path 0
# listed (a dump out of room).
qp() {
	local lqpn=$1 state=$2 hint=$3 rx_hint=$4 k=0 p sport sent retx all=0 allretx=0 listed="" n=0
	shift 4
	for p; do
		IFS=: read -r sport sent retx <<< "$p"
		all=$((all + sent)) allretx=$((allretx + retx))
		[[ $sport == x* ]] && continue
		n=$((n + 1))
		[ -n "${CUT:-}" ] && [ $k -gt 0 ] && continue
		listed+=$(printf 'drv_p%d_plane 0 drv_p%d_sport %s drv_p%d_state active drv_p%d_cwnd 2 drv_p%d_srtt_us 5927 drv_p%d_min_rtt_us 1550 drv_p%d_inflight 2 drv_p%d_sent %s drv_p%d_retx %s drv_p%d_lost 0 drv_p%d_rtos 1 ' \
			$k $k "$sport" $k $k $k $k $k $k "$sent" $k "$retx" $k $k)
		k=$((k + 1))
	done
	printf 'link mr0/1 lqpn %s rqpn %s type RC state %s rq-psn 2076252 sq-psn 4435639 path-mig-state MIGRATED pdn 1 pid 935 comm ib_write_bw ' \
		"$lqpn" $((lqpn + 1000)) "$state"
	printf 'drv_paths %s drv_active_paths %s drv_qwnd 11 drv_inflight 11 drv_outstanding 16 drv_rate_hint_kbps %s drv_rx_rate_hint_kbps %s drv_sent %s drv_retx %s ' \
		$n $n "$hint" "$rx_hint" $all $allretx
	echo "$listed"
}
gsi='link mr0/1 lqpn 1 type GSI state RTS sq-psn 0 comm [ib_core]'

# Host A: four senders, the GSI QP, another program's QP and one in error.
a1="$gsi
$(qp 17 RTS 2500 0 50001:100:0 50002:110:10)
$(qp 18 RTS 2500 0 50003:200:0)
$(qp 19 RTS 3333 0 50004:300:5 50005:0:0)
$(qp 20 RTS 2500 0 50006:400:0)
$(qp 21 RTS 9000 0 50007:999:0 | sed 's/comm ib_write_bw/comm ib_write_bw_x/')
$(qp 22 ERR 9000 0 50008:999:0)
link mr0/1 lqpn 23 type RC state RTS comm ibv_rc_pingpong drv_rate_hint_kbps 9000"
echo "$a1" > "$tmp/a1.txt"
qp_table rate_hint_kbps < "$tmp/a1.txt" > "$tmp/a1"
expect "qp_table: ib_write_bw's RC QPs in RTS, one line each" "$(cut -d' ' -f1-3 "$tmp/a1")" "17 2500 200
18 2500 200
19 3333 295
20 2500 400"
expect "qp_table: each path by slot and source port" "$(awk '$1 == 17 { $1 = $2 = $3 = ""; print }' "$tmp/a1" | tr ' ' '\n' | sort | tr '\n' ' ')" \
	"   p0/50001=100 p1/50002=100 "
expect "qp_hints" "$(qp_hints "$tmp/a1")" "2500 2500 3333 2500"
expect "qp_data" "$(qp_data "$tmp/a1")" "200 200 295 400"
expect "qp_table: rx_rate_hint_kbps is another field" "$(qp_table rx_rate_hint_kbps < "$tmp/a1.txt" | cut -d' ' -f2 | tr '\n' ' ')" "0 0 0 0 "
expect "qp_table: a missing field is ?" "$(qp_table no_such < "$tmp/a1.txt" | cut -d' ' -f2 | tr '\n' ' ')" "? ? ? ? "
# rcn.sh's Jain 0.855 of 2026-12-03: a dump of 4 QPs had room for one
# path of the third, whose share then read as a quarter.
expect "qp_table: a QP whose paths a dump cut counts all its packets" \
	"$(CUT=1 qp 24 RTS 2500 0 50011:100:0 50012:100:0 50013:100:0 50014:100:0 | qp_table rate_hint_kbps)" "24 2500 400 p0/50011=100"
expect "qp_table: no QPs, no lines" "$(echo "$gsi" | qp_table rate_hint_kbps | wc -l)" "0"
# Host B: the server's QPs stay in RTR.
qp_table rx_rate_hint_kbps <<< "$gsi
$(qp 33 RTR 0 2500 50011:0:0)
$(qp 34 RTR 0 2500)
$(qp 35 RTR 0 3333)
$(qp 36 RTR 0 2500)" > "$tmp/b1"
expect "qp_table: the receivers in RTR" "$(qp_hints "$tmp/b1")" "2500 2500 3333 2500"

# Later readings: all grew; then QP 18 stalled; QP 17's path 1 replaced.
qp_table rate_hint_kbps > "$tmp/a2" <<< "$(qp 17 RTS 2500 0 50001:150:0 x:110:10 50009:60:0)
$(qp 18 RTS 2500 0 50003:260:0)
$(qp 19 RTS 2500 0 50004:360:5 50005:20:0)
$(qp 20 RTS 2500 0 50006:470:0)"
qp_table rate_hint_kbps > "$tmp/a3" <<< "$(qp 17 RTS 2500 0 50001:200:0 x:110:10 50009:70:0)
$(qp 18 RTS 2500 0 50003:260:0)
$(qp 19 RTS 2500 0 50004:400:5 50005:20:0)
$(qp 20 RTS 2500 0 50006:500:0)"
head -3 "$tmp/a2" > "$tmp/a2-three"
qp_progressed "$tmp/a1" "$tmp/a2" 4
expect "qp_progressed: every QP sent" "$?" "0"
qp_progressed "$tmp/a2" "$tmp/a3" 4
expect "qp_progressed: one QP sent nothing" "$?" "1"
qp_progressed "$tmp/a1" "$tmp/a2-three" 4
expect "qp_progressed: a QP gone" "$?" "1"
qp_progressed "$tmp/a2-three" "$tmp/a2" 4
expect "qp_progressed: a QP new" "$?" "1"
: > "$tmp/empty"
qp_progressed "$tmp/empty" "$tmp/a2" 4
expect "qp_progressed: nothing before" "$?" "1"
qp_progressed "$tmp/a1" "$tmp/a2" 3
expect "qp_progressed: N QPs, not more" "$?" "1"
expect "qp_sent_between: the QPs' totals, a replaced path's packets kept" "$(qp_sent_between "$tmp/a1" "$tmp/a3")" "170 60 120 100"
expect "qp_sent_between: a QP not there before, whole" "$(qp_sent_between "$tmp/a2-three" "$tmp/a3")" "60 0 40 500"
expect "jain: equal shares" "$(jain 5 5 5 5)" "1.000 20"
expect "jain: one has it all" "$(jain 0 0 0 8)" "0.250 8"
expect "jain: nothing sent" "$(jain 0 0 0 0)" "1.000 0"
expect "jain: run 6's RCN off" "$(jain 27 37 26 54)" "0.911 144"

# peer_text against peer.py on the loopback, and qp_reading through it with
# a fake rdma that prints host A's or host B's text (FAKE_RDMA).
mkdir "$tmp/bin"
# shellcheck disable=SC2016
printf '#!/bin/sh\ncat "$FAKE_RDMA"\n' > "$tmp/bin/rdma"
chmod +x "$tmp/bin/rdma"
export PATH="$tmp/bin:$PATH" METAROCE_PEER_ADDR=127.0.0.1 METAROCE_PEER_PORT=$((20000 + RANDOM % 20000))
{ echo "$gsi"; qp 33 RTR 0 2500; qp 34 RTR 0 2500; qp 35 RTR 0 2500; qp 36 RTR 0 2500; } > "$tmp/b.txt"
FAKE_RDMA=$tmp/b.txt python3 "$rig/peer.py" --addr 127.0.0.1 --port "$METAROCE_PEER_PORT" serve &
server=$!
python3 "$rig/peer.py" --addr 127.0.0.1 --port "$METAROCE_PEER_PORT" --timeout 10 ping
expect "peer.py serves on the loopback" "$?" "0"
expect "peer_text: the output, its lines" "$(peer_text "echo one; echo 'two  words'")" "one
two  words"
expect "peer_text: a failed command" "$(peer_text "echo out; exit 3"; echo "status $?")" "status 1"
# Refused before connecting: port 1 would say "Connection refused".
expect "peer_text: a quote in the command is refused" "$(METAROCE_PEER_PORT=1 peer_text 'echo "x"' 2>&1; echo "status $?")" "status 1"
expect "peer_text: a backslash in the command is refused" "$(METAROCE_PEER_PORT=1 peer_text "echo x\\y" 2>&1; echo "status $?")" "status 1"
expect "peer_text: a tab in the command is refused" "$(METAROCE_PEER_PORT=1 peer_text "echo x$(printf '\t')y" 2>&1; echo "status $?")" "status 1"
expect "peer_text: no server" "$(METAROCE_PEER_PORT=1 peer_text true 2> /dev/null; echo "status $?")" "status 1"
expect "peer_text: no output" "$(peer_text true; echo "status $?")" "status 0"
mkdir "$tmp/r"
for k in 1 2 3; do
	cp "$tmp/a1.txt" "$tmp/a.txt"
	[ $k -gt 1 ] && sed -i "s/drv_sent \([0-9]*\)/drv_sent \1$k/g" "$tmp/a.txt"
	FAKE_RDMA=$tmp/a.txt qp_reading "$tmp/r" $k
done
expect "qp_reading: host A's senders" "$(cut -d' ' -f1-3 "$tmp/r/a.2")" "17 2500 2092
18 2500 2002
19 3333 2997
20 2500 4002"
expect "qp_reading: host B's receivers" "$(qp_hints "$tmp/r/b.2")" "2500 2500 2500 2500"
[[ "$(< "$tmp/r/t.2")" =~ ^[0-9]{16}$ ]]
expect "qp_reading: the time in microseconds" "$?" "0"
qp_steady "$tmp/r" 2 4
expect "qp_steady: all sent before and after, 4 QPs on B" "$?" "0"
qp_steady "$tmp/r" 2 3
expect "qp_steady: not with another N" "$?" "1"
head -3 "$tmp/r/b.2" > "$tmp/r/b3" && mv "$tmp/r/b3" "$tmp/r/b.2"
qp_steady "$tmp/r" 2 4
expect "qp_steady: not with a QP missing on B" "$?" "1"

# qdisc_window: a sampler file as rcn.sh's (tc -s -j: tbf with its
# backlog and drops, RED with its marks), a line tc cut short, samples at
# t = 1..6 s; the window 2.5..4.5 s has samples 3 and 4 inside and is
# enclosed by 2 and 5.
tcs() { # T BACKLOG DROPS MARKED
	printf '%s [{"kind":"tbf","handle":"1:","drops":%s,"backlog":%s,"qlen":3},{"kind":"red","handle":"10:","drops":%s,"backlog":%s,"marked":%s}]\n' \
		"$1" "$3" "$2" "$3" "$2" "$4"
}
{
	tcs 1000000 40000 50 10
	tcs 2000000 9000 54 394
	echo '2500000 [{"kind":"tbf","back'
	tcs 3000000 6000 54 394
	tcs 4000000 7000 55 394
	tcs 5000000 500 55 396
	tcs 6000000 0 60 400
} > "$tmp/backlog"
expect "qdisc_window: backlog max, mean, samples inside; drops and marks enclosing" \
	"$(qdisc_window "$tmp/backlog" 2500000 4500000)" "7000 6500 2 1 2"
expect "qdisc_window: a window past the samples takes the last" \
	"$(qdisc_window "$tmp/backlog" 5500000 9000000)" "0 0 1 5 4"
expect "qdisc_window: no sample" "$(qdisc_window /dev/null 0 1)" "0 0 0 0 0"

# rcn_judge RED_MIN ON_DROPS ON_BMAX ON_BCOUNT ON_RATE ON_JAIN OFF_BMEAN
# OFF_RATE: each check passes and fails.
judge() { rcn_judge "$@" > "$tmp/judge"; echo "$? $(grep -c '^FAIL' "$tmp/judge") $(grep '^FAIL' "$tmp/judge" | cut -c1-30)"; }
expect "rcn_judge: all met (the rig's RCN on run's rate and Jain, a small queue)" "$(judge 15000 0 6756 4 961 0.939 45040 956)" "0 0 "
expect "rcn_judge: a drop" "$(judge 15000 1 6756 4 961 0.939 45040 956)" "1 1 FAIL: RCN on: 1 drops in the s"
expect "rcn_judge: a backlog at RED's minimum" "$(judge 15000 0 15000 4 961 0.939 45040 956)" "1 1 FAIL: RCN on: backlog up to 15"
expect "rcn_judge: one backlog sample" "$(judge 15000 0 6756 1 961 0.939 45040 956)" "1 1 FAIL: RCN on: 1 backlog sample"
expect "rcn_judge: the link idle" "$(judge 15000 0 6756 4 860 0.939 45040 956)" "1 1 FAIL: RCN on: 860 data packets"
expect "rcn_judge: unfair" "$(judge 15000 0 6756 4 961 0.899 45040 956)" "1 1 FAIL: RCN on: Jain's index 0.8"
expect "rcn_judge: no bottleneck" "$(judge 15000 0 6756 4 961 0.939 9000 956)" "1 1 FAIL: RCN off: mean backlog 90"
expect "rcn_judge: nothing sent" "$(judge 15000 0 0 4 0 1.000 45040 0)" "1 1 FAIL: RCN on: 0 data packets/s"

expect_summary "rcn readings check"
