# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# Readings of a running ib_write_bw's RC QPs for rcn.sh (sourced): what
# `rdma -dd resource show qp` prints of them (rust/driver/qp_details.rs),
# reduced by awk to one line per QP, with host B's taken through the rig's
# peer channel from bash. Nothing here starts Python, which takes about a
# second in a TCG guest: rcn.sh takes readings back to back, a few seconds
# each, while perftest busy-polls the only vCPU. selftests/rig/rcncheck.sh checks these
# on the host with captured outputs. (qdisc_window starts Python once, after
# a run; rcn_judge is rcn.sh's assertions, checked there too.)

# qp_table FIELD: of the `rdma -dd resource show qp` text on stdin, one line
# per ib_write_bw RC QP in RTR or RTS (the WRITE server's stay in RTR):
# "LQPN HINT DATA PATH...", HINT the driver attribute FIELD
# (rate_hint_kbps, the hint in kbit/s a sender obeys; rx_rate_hint_kbps,
# the one a receiver's ACKs carry), "?" if missing; DATA the data packets the
# QP's sender sent since it connected, each counted once (sent - retx: the
# QP's totals, which a dump that had no room for some of its paths still
# gives whole); and each path listed as pK/SPORT=DATA (pK_sent - pK_retx),
# for the log. Without -p, iproute2 prints a QP on one line, its driver
# attributes as "drv_NAME VALUE".
qp_table() {
	awk -v field="drv_$1" '
	/ type RC / && / state RT[RS] / && / comm ib_write_bw( |$)/ {
		lqpn = "?"; hint = "?"; sent = 0; retx = 0; paths = ""
		split("", p); split("", slots)
		for (i = 1; i < NF; i++) {
			if ($i == "lqpn") lqpn = $(i + 1)
			else if ($i == field) hint = $(i + 1)
			else if ($i == "drv_sent") sent = $(i + 1)
			else if ($i == "drv_retx") retx = $(i + 1)
			else if ($i ~ /^drv_p[0-9]+_(sport|sent|retx)$/) {
				split($i, f, "_")
				p[f[2], f[3]] = $(i + 1)
				slots[f[2]] = 1
			}
		}
		for (k in slots)
			paths = paths " " k "/" p[k, "sport"] "=" p[k, "sent"] - p[k, "retx"]
		print lqpn, hint, sent - retx paths
	}'
}

# qp_hints TABLE: the hints in a qp_table file, space separated.
qp_hints() { awk '{ h = h (NR > 1 ? " " : "") $2 } END { print h }' "$1"; }

# qp_data TABLE: the data packets in a qp_table file, space separated.
qp_data() { awk '{ d = d (NR > 1 ? " " : "") $3 } END { print d }' "$1"; }

# qp_progressed OLD NEW N: whether qp_table files OLD and NEW both list the
# same N QPs and every one of them sent new data from OLD to NEW.
qp_progressed() {
	awk -v n="$3" '
	FILENAME == ARGV[1] { old[$1] = $3; olds++; next }
	{ news++; if (($1 in old) && $3 > old[$1]) up++ }
	END { exit !(olds == n && news == n && up == n) }' "$1" "$2"
}

# qp_sent_between OLD NEW: for each QP of qp_table file NEW, in its order,
# the data packets it sent since qp_table file OLD (a QP OLD lacks counted
# whole); space separated.
qp_sent_between() {
	awk '
	FILENAME == ARGV[1] { before[$1] = $3; next }
	{ out = out (FNR > 1 ? " " : "") $3 - before[$1] }
	END { print out }' "$1" "$2"
}

# jain X...: "INDEX SUM" of the values X: Jain's fairness index (1 when
# all are equal, 1/n when one has it all; 1 for all 0) and their sum.
jain() {
	awk 'BEGIN {
		for (i = 1; i < ARGC; i++) { s += ARGV[i]; q += ARGV[i] * ARGV[i] }
		printf "%.3f %d\n", (q > 0 ? s * s / ((ARGC - 1) * q) : 1), s
	}' "$@"
}

# now_us: this host's clock in microseconds (bash's, without a fork).
now_us() { echo "${EPOCHREALTIME/[.,]/}"; }

# qp_reading DIR K: reading K into DIR: a.K and b.K, host A's and host B's
# qp_table (rate_hint_kbps on A, the senders; rx_rate_hint_kbps on B, the
# receivers), t.K the time it began. B's is taken at the same time as A's.
qp_reading() {
	now_us > "$1/t.$2"
	peer_text "rdma -dd resource show qp link mr0/1" | qp_table rx_rate_hint_kbps > "$1/b.$2" &
	rdma -dd resource show qp link mr0/1 2> /dev/null | qp_table rate_hint_kbps > "$1/a.$2"
	wait $!
}

# qp_steady DIR K N: whether reading K in DIR is steady: N QPs on both
# hosts, and each sender's data grown from reading K-1 to K and from K to
# K+1 (so it was sending around reading K, neither starting nor done).
qp_steady() {
	[ "$(wc -l < "$1/b.$2")" = "$3" ] &&
		qp_progressed "$1/a.$(($2 - 1))" "$1/a.$2" "$3" &&
		qp_progressed "$1/a.$2" "$1/a.$(($2 + 1))" "$3"
}

# peer_text CMD: CMD's output on host B, as lib.sh's `peer CMD`, but
# spoken to the rig's peer channel (selftests/rig/peer.py: one JSON line
# each way over TCP) from bash, without peer.py's Python start on host A.
# CMD may hold no quote, backslash or control character (it goes into the
# request as is). Its output comes back with JSON's escapes left in but
# for newlines, which is enough for text of printable ASCII such as
# rdma's. Status 1, and no output, when CMD failed, was refused or no
# answer came in 60 s.
peer_text() {
	local fd reply head='{"rc": 0, "out": "'
	[[ $1 == *[\"\\[:cntrl:]]* ]] && return 1
	exec {fd}<> "/dev/tcp/$METAROCE_PEER_ADDR/${METAROCE_PEER_PORT:-7000}" || return 1
	echo "{\"op\": \"run\", \"cmd\": \"$1\", \"timeout\": 50}" >&"$fd"
	read -r -t 60 reply <&"$fd"
	exec {fd}>&-
	[[ $reply == "$head"*'"}' ]] || return 1
	reply=${reply#"$head"}
	reply=${reply%'"}'}
	printf '%s' "${reply//\\n/$'\n'}"
}

# qdisc_window FILE FROM TO: "MAX MEAN COUNT DROPS MARKED" of the bottleneck
# from rcn.sh's sampler FILE (lines "NOW_US TC_JSON", `tc -s -j qdisc
# show`): the tbf backlog's maximum and mean (bytes) over the COUNT samples
# from FROM to TO (now_us), and the drops (tbf's, which include its RED
# child's) and RED's CE marks from the last sample at or before FROM to
# the first at or after TO: the counters of a window that encloses the
# steady one (the samples at its ends, or the run's first and last), so
# that a drop in the steady window is never missed (qdisc_samples.py, the
# benchmark's reader too).
qdisc_window() {
	/usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/qdisc_samples.py" "$@"
}

# rcn_judge RED_MIN ON_DROPS ON_BMAX ON_BCOUNT ON_RATE ON_JAIN OFF_BMEAN
# OFF_RATE: rcn.sh's verdict on its RCN on and off runs, each number over
# the steady window (drops and backlogs from qdisc_window, rates in data
# packets/s, Jain's index of the QPs' goodputs). One line per check, "ok:"
# or "FAIL:"; status 1 if any failed. The queue is small from the first
# RTT on: no drop and a backlog below RED's minimum (no CE mark) with
# RCN on, where RCN off kept it above (else the qdisc was no bottleneck
# and the run shows nothing); the link as busy as without RCN (90%); the
# QPs fair (Jain 0.9).
rcn_judge() {
	local red_min=$1 drops=$2 bmax=$3 bcount=$4 rate=$5 jain=$6 off_bmean=$7 off_rate=$8 bad=0
	rcn_say() { echo "$1: $2"; [ "$1" = ok ] || bad=1; }
	if [ "$off_bmean" -ge "$red_min" ]; then
		rcn_say ok "RCN off: mean backlog $off_bmean B, at RED's minimum $red_min B or above (the qdisc is the bottleneck)"
	else
		rcn_say FAIL "RCN off: mean backlog $off_bmean B below RED's minimum $red_min B: the qdisc was no bottleneck"
	fi
	if [ "$drops" -eq 0 ]; then
		rcn_say ok "RCN on: no drop in the steady window"
	else
		rcn_say FAIL "RCN on: $drops drops in the steady window"
	fi
	if [ "$bcount" -lt 2 ]; then
		rcn_say FAIL "RCN on: $bcount backlog samples in the steady window, fewer than 2"
	elif [ "$bmax" -lt "$red_min" ]; then
		rcn_say ok "RCN on: backlog at most $bmax B, below RED's minimum $red_min B ($bcount samples)"
	else
		rcn_say FAIL "RCN on: backlog up to $bmax B, not below RED's minimum $red_min B"
	fi
	if [ $((rate * 10)) -ge $((off_rate * 9)) ] && [ "$rate" -gt 0 ]; then
		rcn_say ok "RCN on: $rate data packets/s, at least 90% of RCN off's $off_rate"
	else
		rcn_say FAIL "RCN on: $rate data packets/s, below 90% of RCN off's $off_rate"
	fi
	if awk -v j="$jain" 'BEGIN { exit !(j >= 0.9) }'; then
		rcn_say ok "RCN on: Jain's index $jain, at least 0.9"
	else
		rcn_say FAIL "RCN on: Jain's index $jain below 0.9"
	fi
	return $bad
}
