#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The Wireshark dissector (tools/wireshark/metaroce.lua) on real traffic,
# issue #15: one MetaRoCE device on two planes on hosts A and B. Each host
# records both directions of both its planes (metaroce_pkt.py capture)
# over four windows: perftest (ib_write_bw, ib_send_bw, ib_read_bw);
# rping, atomics (atomics.py) and UD (ibv_ud_pingpong); ibv_rc_pingpong
# under 5% netem loss on host B's planes (retransmissions); ibv_rc_pingpong
# while host B's plane 1 goes down and up (host A's paths on it fail and
# are replaced). Then tshark with the dissector, through summary.sh, in
# one pass over each host's capture:
#  - every packet: MetaRoCE, of a known opcode, valid (no drop reason: its
#    header, length and body rules, segmentation and per-message
#    consistency) and dissected without error;
#  - the ICRC of the first $icrc_sample packets of each opcode in each
#    capture (summary.sh --icrc-sample; the count verified must be exactly
#    that, and each good); the others' ICRCs are not computed: the CRC-32
#    in Lua runs at ~45 KB/s on the rig (31 s of the first run's 48 s on
#    the 1.4 MB perftest window), and a wrong ICRC would come from the
#    device's one ICRC routine for the packets of an opcode, which the
#    sample covers in each window, in both directions; the dissector's
#    host tests (tools/wireshark/test.sh) check every ICRC;
#  - the host's device counters grew over the window by exactly what its
#    capture shows (counters.py): packets and bytes per direction and per
#    plane, RETRANSMIT flags (retransmissions), path replacements
#    (path_failures), datagrams, probes answered, ECN-CE, malformed. Exact
#    unless a packet was lost where the capture cannot see it
#    (capture_end).
# Each host is compared with its own capture: the rig's links (QEMU UDP
# sockets on the host) can lose packets between the two. The captures and
# summaries are left in $METAROCE_OUT/dissect.
. "$(dirname "$0")/lib.sh"
wire=$METAROCE_REPO/tools/wireshark
wa=/tmp/dissect-a # host A's files
wb=/tmp/dissect-b # host B's files, on host B
rm -rf "$wa"
cap_pid="" cap_job="" cap_name="" client="" flap=""
icrc_sample=20 # ICRCs verified per opcode and capture

# save_captures: each host's pcaps and what was found in them, for the
# log's reader (tshark -X lua_script:tools/wireshark/metaroce.lua -r FILE).
save_captures() {
	local d=${METAROCE_OUT:-}/dissect
	[ -n "${METAROCE_OUT:-}" ] && [ -d "$wa" ] || return 0
	mkdir -p "$d"
	for f in "$wa"/*.pcap "$wa"/*.summary; do
		[ -f "$f" ] && cp "$f" "$d/A-${f##*/}"
	done
	peer "for f in $wb/*.pcap; do [ -f \$f ] && cp \$f $d/B-\${f##*/}; done; true" > /dev/null 2>&1
	return 0
}

# Each host's plane neighbours as permanent ARP entries: a packet the
# device counted as sent then always leaves the host (an unresolved
# neighbour drops packets between the device's count and the capture).
# pin_on_b prints host B's command for its entries, one peer call (a link
# going down flushes them: the plane_down window runs it again with the
# link's return).
pin_on_b() {
	local p dev
	for p in 0 1; do
		dev=PLANE${p}_DEV
		echo -n "ip neigh replace \$PEER_PLANE${p}_IP lladdr $(cat "/sys/class/net/${!dev}/address") dev \$$dev nud permanent && "
	done
	echo true
}
pin_neighbours() {
	local p dev ip out macs
	# shellcheck disable=SC2016
	out=$(peer 'cat /sys/class/net/$PLANE0_DEV/address /sys/class/net/$PLANE1_DEV/address') ||
		fail "host B's plane MACs: $out"
	read -r -d '' -a macs <<< "$out"
	for p in 0 1; do
		dev=PLANE${p}_DEV ip=PEER_PLANE${p}_IP
		ip neigh replace "${!ip}" lladdr "${macs[p]:-}" dev "${!dev}" nud permanent ||
			fail "cannot pin host B's plane $p neighbour on host A"
	done
	peer "$(pin_on_b)" > /dev/null || fail "cannot pin host A's plane neighbours on host B"
}
unpin_neighbours() {
	# shellcheck disable=SC2016
	local cmd='for p in 0 1; do d=PLANE${p}_DEV i=PEER_PLANE${p}_IP; ip neigh del ${!i} dev ${!d}; done 2> /dev/null; true'
	bash -c "$cmd"
	peer "$cmd" > /dev/null 2>&1
}

cleanup() {
	[ -n "$cap_pid" ] && kill "$cap_pid" 2> /dev/null
	[ -n "$cap_job" ] && peer "touch $wb/$cap_name.stop" > /dev/null 2>&1
	[ -n "$client" ] && kill "$client" 2> /dev/null
	save_captures
	# host B's plane flap ends by itself (bounded): not to race the link up
	[ -n "$flap" ] && peer_wait "$flap" 70 > /dev/null 2>&1
	[ -n "${PLANE1_DEV:-}" ] && peer "ip link set \$PLANE1_DEV up" > /dev/null 2>&1
	unpin_neighbours
	two_host_cleanup -k ibv_rc_pingpong -k ibv_ud_pingpong -k rping -k tshark -q
}
trap cleanup EXIT
reset_rdma
[ -n "${PLANE1_DEV:-}" ] || skip "the rig has a single plane"
command -v tshark > /dev/null || skip "tshark not installed (Debian: apt-get install tshark)"
command -v ib_write_bw > /dev/null || skip "perftest not installed"
command -v ibv_rc_pingpong > /dev/null || skip "ibverbs-utils not installed"
command -v rping > /dev/null || skip "rdmacm-utils not installed"
/usr/bin/python3 -c "import pyverbs" 2> /dev/null || skip "python3-pyverbs not installed"
mkdir -p "$wa"
peer "rm -rf $wb && mkdir -p $wb" || fail "no work directory on host B"

# The capture, the same command on either host (bash -c or peer).
capture="/usr/bin/python3 $METAROCE_REPO/selftests/metaroce_pkt.py capture --dev \$PLANE0_DEV --dev \$PLANE1_DEV --both --seconds 400 --pcap"
# Packets the planes' root qdiscs dropped so far (netem's among them), on
# either host: the device counted them as sent, the capture never sees them.
# shellcheck disable=SC2016
qdisc_drops='n=0; for d in $PLANE0_DEV $PLANE1_DEV; do k=$(tc -s qdisc show dev $d | sed -n "s/.*dropped \([0-9]*\).*/\1/p" | head -1); n=$((n + ${k:-0})); done; echo $n'

# settle NAME WHEN: waits (up to 15 tries) until neither device's counters
# have moved for a second: the last ACKs and probes of the QPs just
# destroyed are in, so the counters and the captures close on the same
# packets. Then both devices' counters are in $wa/NAME.aWHEN.json and
# NAME.bWHEN.json, their planes' qdisc drops in $qa_now and $qb_now. Each
# try is one peer call (a Python start on host A: seconds on the rig):
# host B samples its counters a second apart and, if they held, prints
# them and its qdisc drops; host A's, sampled before and after that call,
# must have held too.
settle() {
	local n=$1 w=$2 a0 a1 out
	for _ in $(seq 15); do
		a0=$(mr0_stats)
		out=$(peer "s=\$(rdma -j statistic show link mr0/1); sleep 1; [ \"\$s\" = \"\$(rdma -j statistic show link mr0/1)\" ] && echo \"\$s\" && { $qdisc_drops; }")
		a1=$(mr0_stats)
		[ -n "$out" ] && [ "$a0" = "$a1" ] && break
		out=""
	done
	if [ -z "$out" ]; then
		log "settle: traffic still moving after 15 tries"
		a1=$(mr0_stats)
		out="$(mr0_stats peer)
$(peer "$qdisc_drops")" || fail "qdisc counters on host B"
	fi
	echo "$a1" > "$wa/$n.a$w.json"
	head -n -1 <<< "$out" > "$wa/$n.b$w.json"
	qb_now=$(tail -1 <<< "$out")
	qa_now=$(bash -c "$qdisc_drops")
}

# capture_begin NAME: both hosts record into DIR/NAME.pcap; then both
# devices' counters and qdisc drops are taken.
capture_begin() {
	local n=$1
	cap_name=$n
	rm -f "$wa/$n.stop" "$wa/$n.ready"
	bash -c "exec $capture --until $wa/$n.stop --ready $wa/$n.ready --out $wa/$n.pcap" > "$wa/$n.capture" 2>&1 &
	cap_pid=$!
	cap_job=$(peer_spawn "rm -f $wb/$n.stop $wb/$n.ready; $capture --until $wb/$n.stop --ready $wb/$n.ready --out $wb/$n.pcap") ||
		fail "$n: cannot start the capture on host B"
	# Python starts slowly on a busy TCG vCPU: traffic only once both
	# record (host B waits for its own in one peer call).
	for _ in $(seq 60); do
		[ -f "$wa/$n.ready" ] && break
		sleep 0.5
	done
	if ! [ -f "$wa/$n.ready" ] ||
		! peer "for _ in \$(seq 60); do [ -f $wb/$n.ready ] && exit 0; sleep 0.5; done; exit 1" > /dev/null; then
		fail "$n: a capture never started: A: $(cat "$wa/$n.capture"); B: $(peer_poll "$cap_job" 1)"
	fi
	settle "$n" 0
	qa0=$qa_now qb0=$qb_now
}

# report_of TEXT: "CAPTURED DROPS" from a capture's last line.
report_of() {
	sed -n 's/^captured \([0-9]*\) packets.*socket drops \([0-9]*\)$/\1 \2/p' <<< "$1" | tail -1
}

# capture_end NAME: once the traffic has stopped, the counters again, then
# the captures stop. What a host's capture cannot see of what its device
# counted: packets its qdiscs dropped after the device counted them ($qa,
# $qb: netem's on host B), sends counted before they failed (tx_errors:
# counters.py --tx-slack-counter), and packets the kernel could not queue
# to the capture socket ($drops_a, $drops_b; 0 unless it fell 64 MiB
# behind).
capture_end() {
	local n=$1 out r
	settle "$n" 1
	qa=$((qa_now - qa0)) qb=$((qb_now - qb0))
	touch "$wa/$n.stop"
	peer "touch $wb/$n.stop" || fail "$n: cannot stop the capture on host B"
	wait "$cap_pid" || fail "$n: the capture failed on host A: $(cat "$wa/$n.capture")"
	cap_pid=""
	out=$(peer_wait "$cap_job" 60) || fail "$n: the capture failed on host B: $out"
	cap_job=""
	r=$(report_of "$(cat "$wa/$n.capture")")
	[ -n "$r" ] || fail "$n: no capture report on A: $(cat "$wa/$n.capture")"
	read -r captured_a drops_a <<< "$r"
	r=$(report_of "$out")
	[ -n "$r" ] || fail "$n: no capture report on B: $out"
	read -r captured_b drops_b <<< "$r"
	log "$n: A $(tail -1 "$wa/$n.capture"), $(stat -c %s "$wa/$n.pcap") bytes; B $(tail -1 <<< "$out")"
	log "$n: qdisc drops A $qa, B $qb"
	[ $((drops_a + drops_b)) = 0 ] ||
		log "$n: capture socket drops: counters may exceed the captures by that many"
}

# row SUMMARY LABEL: summary.sh's number for LABEL (a row or an opcode), 0
# if absent.
row() {
	awk -v l="$2" '{ x = substr($0, 1, 28); gsub(/^ +| +$/, "", x)
		if (x == l) { split(substr($0, 29), f, " "); print f[1]; found = 1; exit } }
		END { if (!found) print 0 }' "$1"
}

# verdict HOST SUMMARY CAPTURED: every one of the CAPTURED packets of the
# host's capture is MetaRoCE, of a known opcode, valid and dissected
# without error; the ICRCs of the first $icrc_sample of each opcode were
# verified (as many as the per-opcode counts give) and are good (an
# IcrcMismatch is malformed).
verdict() {
	local v k sample
	v=$(sed -n 's/^capture .*: \([0-9]*\) MetaRoCE packets.*/\1/p' "$2")
	[ "$v" = "$3" ] || fail "$n, host $1: tshark found ${v:-no} MetaRoCE packets of the $3 captured"
	for k in "not MetaRoCE" "dissector errors" "malformed" "dropped by receiver rules"; do
		[ "$(row "$2" "$k")" = 0 ] || fail "$n, host $1: $(row "$2" "$k") packets $k"
	done
	! grep -qE '^  (opcode 0x|\(no opcode)' "$2" ||
		fail "$n, host $1: packets of unknown opcodes: $(grep -E '^  (opcode|\()' "$2")"
	sample=$(awk -v n="$icrc_sample" '/^per opcode:/ { p = 1; next }
		p && /^  / { s += $NF < n ? $NF : n; next } { p = 0 } END { print s + 0 }' "$2")
	[ "$(row "$2" "ICRCs verified")" = "$sample" ] ||
		fail "$n, host $1: $(row "$2" "ICRCs verified") ICRCs verified, want $sample (the first $icrc_sample of each opcode)"
	log "ok: $n, host $1: all $3 packets MetaRoCE, known opcodes, valid; the $sample ICRCs verified (the first $icrc_sample of each opcode) good"
}

# dissect NAME [B_ONLY]: the dissector's verdict on both hosts' captures of
# NAME (each host dissects its own, at the same time), and each capture's
# totals against its host's counters (host B's only for the names that
# match the regular expression B_ONLY, if given).
dissect() {
	local n=$1 sa=$wa/$1.summary sb=$wa/$1.b.summary t0 job pa pb out k
	pa="$PLANE0_IP,$PLANE1_IP" pb="$PEER_PLANE0_IP,$PEER_PLANE1_IP"
	t0=$(date +%s)
	# Host B's summary comes back as the job's output (no further peer call).
	job=$(peer_spawn "HOME=$wb $wire/summary.sh --icrc-sample $icrc_sample --device $pb --device $pa $wb/$n.pcap > $wb/$n.summary 2> $wb/$n.err && cat $wb/$n.summary || { cat $wb/$n.err; exit 1; }") ||
		fail "$n: cannot start summary.sh on host B"
	HOME=$wa "$wire/summary.sh" --icrc-sample "$icrc_sample" --device "$pa" --device "$pb" "$wa/$n.pcap" > "$sa" 2> "$wa/$n.err" ||
		fail "$n: summary.sh failed on host A: $(cat "$wa/$n.err")"
	log "$n: host A's capture dissected in $(($(date +%s) - t0)) s:"
	grep -v '^device ' "$sa"
	peer_wait "$job" 600 > "$sb" || fail "$n: summary.sh failed on host B: $(cat "$sb")"
	log "$n: host B's capture dissected in $(($(date +%s) - t0)) s (both)"
	verdict A "$sa" "$captured_a"
	verdict B "$sb" "$captured_b"
	/usr/bin/python3 "$wire/counters.py" --summary "$sa" --device "$pa" \
		--before "$wa/$n.a0.json" --after "$wa/$n.a1.json" --label "$n, host A" \
		--tx-slack $((drops_a + qa)) --tx-slack-counter tx_errors --rx-slack "$drops_a" ||
		fail "$n: host A's counters disagree with its capture"
	/usr/bin/python3 "$wire/counters.py" --summary "$sb" --device "$pb" \
		--before "$wa/$n.b0.json" --after "$wa/$n.b1.json" --label "$n, host B" \
		--tx-slack $((drops_b + qb)) --tx-slack-counter tx_errors --rx-slack "$drops_b" ${2:+--only "$2"} ||
		fail "$n: host B's counters disagree with its capture"
	log "ok: $n: each device's counters grew by its capture's totals"
	# The wire between them (informational): what one host's capture saw
	# leave, the other's arrive.
	for k in 0 1; do
		log "$n: plane $k: A sent $(sed -n "s/^device $pa: plane${k}_tx_packets //p" "$sa"), B received $(sed -n "s/^device $pb: plane${k}_rx_packets //p" "$sb"); B sent $(sed -n "s/^device $pb: plane${k}_tx_packets //p" "$sb"), A received $(sed -n "s/^device $pa: plane${k}_rx_packets //p" "$sa")"
	done
}

# at_least NAME LABEL MIN: summary.sh's LABEL (a row or an opcode) in host
# A's capture of NAME is at least MIN.
at_least() {
	local v
	v=$(row "$wa/$1.summary" "$2")
	[ "$v" -ge "$3" ] || fail "$1: $v $2 in host A's capture, want at least $3"
}

mr0_on_both_planes
pin_neighbours

# --- perftest: WRITE, SEND, READ ---
port=18960
capture_begin perftest
for t in ib_write_bw ib_send_bw ib_read_bw; do
	port=$((port + 1))
	perftest_pair 60 "-d mr0 -x $pgid -p $port" "-d mr0 -x $gid -p $port" "$METAROCE_PEER_ADDR" "$t" -n 50 -s 8192
	log "ok: $t -n 50 -s 8192: $res"
done
capture_end perftest
dissect perftest
for op in WRITE SEND READ_REQ READ_RESP; do at_least perftest "$op" 50; done
at_least perftest ACK 1
at_least perftest PLANES 2

# --- rping (the CM's datagrams, SEND, READ, WRITE), atomics, UD ---
capture_begin rping_atomics_ud
port=$((port + 1))
job=$(peer_spawn "timeout 60 rping -s -v -V -C 10 -a $PEER_PLANE0_IP -p $port") || fail "cannot start the rping server"
sleep 3
timeout 60 stdbuf -oL rping -c -v -V -C 10 -a "$PEER_PLANE0_IP" -p "$port" > "$wa/rping.out" 2> "$wa/rping.err"
rc=$?
rping_exit_ok $rc "$(cat "$wa/rping.err")" || fail "rping client failed ($rc): $(tail -5 "$wa/rping.err")"
server=$(peer_wait "$job" 80) || grep -qx "wait for RDMA_READ_ADV state 10" <<< "$server" ||
	fail "rping server failed: $(tail -5 <<< "$server")"
[ "$(rping_pings "$wa/rping.out")" = "10 10" ] || fail "rping: $(rping_pings "$wa/rping.out") pings, want 10 validated"
log "ok: rping -V: 10 pings, data validated"
port=$((port + 1))
job=$(peer_spawn "timeout 120 /usr/bin/python3 $METAROCE_REPO/selftests/atomics.py server mr0 $pgid $port") ||
	fail "cannot start the atomics server"
out=$(timeout 120 /usr/bin/python3 "$METAROCE_REPO/selftests/atomics.py" client mr0 "$gid" "$METAROCE_PEER_ADDR" "$port" once 50 2>&1) ||
	fail "atomics.py client failed: $(tail -5 <<< "$out")"
peer_wait "$job" 60 > /dev/null || fail "atomics.py server failed"
log "ok: atomics.py once 50: 50 fetch-adds, each ran once"
pingpong_run ibv_ud_pingpong 60 "datagrams" -d mr0 -n 50 -s 64 -c
capture_end rping_atomics_ud
dissect rping_atomics_ud
for op in SEND READ_REQ READ_RESP WRITE; do at_least rping_atomics_ud "$op" 10; done
for op in FETCH_ADD ATOMIC_RESP; do at_least rping_atomics_ud "$op" 50; done
at_least rping_atomics_ud UD_SEND 100

# --- 5% loss on host B's planes: retransmissions ---
for d in PLANE0_DEV PLANE1_DEV; do
	peer "tc qdisc add dev \$$d root netem loss 5%" || fail "netem on host B"
done
capture_begin loss
pingpong_run ibv_rc_pingpong 120 "5% loss leaving host B" -d mr0 -n 100 -s 4096 -c
capture_end loss
peer "$planes_qdisc_del" || fail "removing netem on host B"
dissect loss
[ "$qb" -gt 0 ] || fail "loss: netem dropped nothing on host B: the run proves nothing"
at_least loss "data flagged RETRANSMIT" 1
log "ok: loss: netem dropped $qb packets leaving host B; $(row "$wa/loss.summary" "data flagged RETRANSMIT") retransmissions in host A's capture"

# --- Host B's plane 1 down and up during traffic: path failures ---
# Host A is not told (its plane 1 stays up): its paths on plane 1 time out,
# probe and are replaced (protocol.md 4.3). Host B's plane 1 counters are
# not compared: a send racing the link down can be counted and dropped
# where no capture sees it (a deactivated qdisc); its plane 0's are.
capture_begin plane_down
# The window is kept short: the pingpong sends ~700 packets a second,
# each ~4 ms of tshark on the rig, and a command to host B (peer.py, a
# Python start) takes ~10 s while the pingpong keeps both hosts' vCPUs
# busy (the first rig run's window was 59 s, 40k packets, for 8 s of
# sleeps). So host B takes its plane 1 down and up by itself, spawned
# before the traffic: once plane 1 has brought it 300 packets, down for
# 4 s, then up with its neighbours pinned again (a link going down flushes
# them). A path fails in well under a second (RTO and 3 probes: 0.3 s on
# the rig). Host A follows it on its own plane 1's received packets:
# they stop while host B's plane 1 is down and resume when it is up (it
# sees the traffic at 50 packets, well before host B's 300).
# shellcheck disable=SC2016
flap_b='d=$PLANE1_DEV rx=/sys/class/net/$PLANE1_DEV/statistics/rx_packets
r0=$(cat $rx)
for _ in $(seq 600); do [ $(($(cat $rx) - r0)) -ge 300 ] && break; sleep 0.1; done
[ $(($(cat $rx) - r0)) -ge 300 ] || { echo "no traffic on plane 1 in 60 s"; exit 1; }
ip link set $d down && echo "plane 1 down" && sleep 4 && ip link set $d up && echo "plane 1 up"'
flap=$(peer_spawn "$flap_b && $(pin_on_b)") || fail "cannot start the plane flap on host B"
# The pingpongs wait for completions with events (-e): busy-polling, they
# left host A's watcher below a sample every 0.3 s or more, too few to see
# a 2 s pause, and the client ran out its time.
job=$(peer_spawn "timeout 120 ibv_rc_pingpong -e -d mr0 -n 1000000 -s 64 -g $pgid") || fail "cannot start the server"
sleep 2
timeout 120 ibv_rc_pingpong -e -d mr0 -n 1000000 -s 64 -g "$gid" "$PEER_PLANE0_IP" > "$wa/flap.out" 2>&1 &
client=$!
# plane1_rx WANT: waits (up to 60 s, polling every 0.1 s) until host A's
# plane 1 has received 50 packets (WANT=traffic), nothing for a second by
# the clock (quiet), or anything (moving). No fork per sample.
plane1_rx() {
	local f=/sys/class/net/$PLANE1_DEV/statistics/rx_packets first last now since end
	read -r first < "$f"
	last=$first since=${EPOCHREALTIME/./} end=$((${EPOCHREALTIME/./} + 60000000))
	while [ "${EPOCHREALTIME/./}" -lt "$end" ]; do
		sleep 0.1
		read -r now < "$f"
		[ "$now" = "$last" ] || since=${EPOCHREALTIME/./}
		last=$now
		case $1 in
		traffic) [ $((now - first)) -ge 50 ] && return 0 ;;
		quiet) [ $((${EPOCHREALTIME/./} - since)) -ge 1000000 ] && return 0 ;;
		moving) [ "$now" != "$first" ] && return 0 ;;
		esac
	done
	return 1
}
plane1_rx traffic || fail "no traffic on host A's plane 1: $(cat "$wa/flap.out")"
plane1_rx quiet || fail "host A's plane 1 never went quiet (host B's flap: $(peer_poll "$flap" 1))"
kill -0 $client 2> /dev/null || fail "the client ended early: $(cat "$wa/flap.out")"
log "host B's plane 1 down (host A's plane 1 receives nothing)"
plane1_rx moving || fail "host A's plane 1 never received again (host B's flap: $(peer_poll "$flap" 1))"
log "host B's plane 1 up (host A's plane 1 receives again)"
sleep 1
kill -0 $client 2> /dev/null || fail "the client ended across the plane failure: $(cat "$wa/flap.out")"
kill $client
wait $client 2> /dev/null
client=""
out=$(peer_wait "$flap" 30) || fail "host B's plane flap failed: $out"
flap=""
grep -q "plane 1 up" <<< "$out" || fail "host B's plane flap: $out"
peer "pkill -x ibv_rc_pingpong" > /dev/null
peer_wait "$job" 30 > /dev/null
log "ok: ibv_rc_pingpong ran through host B's plane 1 down and up"
capture_end plane_down
dissect plane_down '^plane0_'
at_least plane_down "path replacements" 1
at_least plane_down "data flagged RETRANSMIT" 1
log "ok: plane_down: $(row "$wa/plane_down.summary" "path replacements") path replacements, $(row "$wa/plane_down.summary" "data flagged RETRANSMIT") retransmissions in host A's capture, as counted"
