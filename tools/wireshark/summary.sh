#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Totals of a MetaRoCE capture, to set beside the device counters of a run
# (`rdma statistic show link DEV/1`, rust/driver/stats.rs):
#
#   tools/wireshark/summary.sh [--icrc | --icrc-sample N] [--by-host] [--device ADDR,...]... CAPTURE
#
# packets and UDP payload bytes, frames that are not MetaRoCE and frames the
# dissector failed on, packets per opcode, data packets flagged
# RETRANSMIT, IP ECN-CE marks, ACKs echoing CE, packets a v1 receiver drops
# (by reason), path replacements (a path id's generation moving on), QP and
# path streams. --by-host: the same per source address (what its device
# sent: tx_*) and per destination address (what it received: rx_*).
# --device ADDR0,ADDR1,...: the device whose plane k has address ADDRk, as
# its counters would count this capture: one line `device ADDRS: NAME N`
# per counter NAME (a sum `A+B` where the capture shows only the sum), for
# tools/wireshark/counters.py to compare with the device's counters.
# --icrc verifies every ICRC (a CRC-32 in Lua: a few MB/s); --icrc-sample N
# only those of the first N packets of each opcode in the capture (the
# dissector's preference icrc_sample), in the same single pass; otherwise
# ICRCs are not checked. IcrcMismatch is counted (malformed) among the
# packets verified, shown in the row "ICRCs verified".
# A capture: any pcap/pcapng that tshark reads, e.g. from
# `selftests/metaroce_pkt.py capture --pcap` (a host's own sent packets).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
icrc=FALSE sample=0 by_host=0 devices=""
usage() { echo "usage: $0 [--icrc | --icrc-sample N] [--by-host] [--device ADDR[,ADDR...]]... CAPTURE" >&2; exit 2; }
while [ $# -gt 1 ]; do
	case $1 in
	--icrc) icrc=TRUE sample=0 ;;
	--icrc-sample)
		[[ $2 =~ ^[1-9][0-9]*$ ]] || usage
		icrc=TRUE sample=$2
		shift ;;
	--by-host) by_host=1 ;;
	--device)
		[[ $2 =~ ^[0-9A-Fa-f.:]+(,[0-9A-Fa-f.:]+)*$ ]] || usage
		devices+=" $2"
		shift ;;
	*) break ;;
	esac
	shift
done
if [ $# -ne 1 ] || [ "${1#-}" != "$1" ]; then
	usage
fi
cap=$1
command -v tshark > /dev/null || { echo "summary: tshark not installed (apt-get install tshark)" >&2; exit 2; }
[ -r "$cap" ] || { echo "summary: cannot read $cap" >&2; exit 2; }

fields=(ip.src ipv6.src ip.dst ipv6.dst udp.length ip.dsfield.ecn ipv6.tclass.ecn
	metaroce.opcode metaroce.flags.retransmit metaroce.flags.ce metaroce.drop_reason
	metaroce.dst_qpn metaroce.path_id.generation metaroce.path_id.slot
	metaroce.qp_stream metaroce.path_stream frame.protocols metaroce.valid _ws.malformed
	metaroce.icrc.status)
args=()
for f in "${fields[@]}"; do args+=(-e "$f"); done

tshark -n -r "$cap" -X "lua_script:$here/metaroce.lua" -o "metaroce.check_icrc:$icrc" -o "metaroce.icrc_sample:$sample" \
	-T fields -E separator=/t -E occurrence=f "${args[@]}" 2> >(grep -v '^Running as user' >&2) |
awk -F'\t' -v cap="$cap" -v by_host="$by_host" -v icrc="$icrc" -v sample="$sample" -v devices="$devices" '
BEGIN {
	split("01 SEND 02 SEND_IMM 03 WRITE 04 WRITE_IMM 05 READ_REQ 06 READ_RESP 07 UD_SEND " \
	      "08 CMP_SWAP 09 FETCH_ADD 0a ATOMIC_WRITE 0b ATOMIC_RESP 0f SEND_INV 10 ACK 11 NAK " \
	      "20 PROBE 21 PROBE_REPLY 22 PLANES", t, " ")
	for (i = 1; i in t; i += 2) { name["0x" t[i]] = t[i + 1]; order[++nop] = "0x" t[i] }
	# Drop reasons the device counts as rx_malformed (parse_packet failed);
	# the others are receiver rules (rx_data_dropped).
	split("Truncated TrailingBytes BadVersion BadOpcode BadFlags ReservedNonZero BadRsn " \
	      "BadLength PayloadTooLarge BadSyndrome IcrcMismatch", w, " ")
	for (i in w) parse_reason[w[i]] = 1
	# --device: address -> device and plane
	ndev = split(devices, dv, " ")
	for (d = 1; d <= ndev; d++) {
		np[d] = split(dv[d], a, ",")
		for (k = 1; k <= np[d]; k++) { dev_of[a[k]] = d; plane_of[a[k]] = k - 1 }
	}
}
# A MetaRoCE packet on UDP (not one quoted in an ICMP error), else another frame.
$17 !~ /(^|:)udp:metaroce$/ || $17 ~ /icmp/ { other++; next }
{
	# The dissector always ends with metaroce.valid: without it, it failed
	# (a Lua error, an exception); a valid packet marked malformed (the
	# expert group of a violation, or an exception) is an error too.
	if ($18 == "" || $18 == "1" && $19 != "") broken++
	src = $1 != "" ? $1 : $2; dst = $3 != "" ? $3 : $4
	bytes = $5 - 8; ecn = $6 != "" ? $6 : $7
	op = $8; retx = $9 == "1"; ce = $10 == "1"; reason = $11
	n++; b += bytes
	if ($20 == "0" || $20 == "1") verified++
	ops[op]++
	tx[src]++; txb[src] += bytes; rx[dst]++; rxb[dst] += bytes
	if (retx) { nretx++; txretx[src]++ }
	if (ecn == "3") { nce++; rxce[dst]++ }
	if (op == "0x10" && ce) nackce++
	if (op == "0x07") txud[src]++
	if (op == "0x21") txreply[src]++
	malformed = reason in parse_reason
	if (reason != "") {
		why[reason]++
		if (malformed) { nmal++; rxmal[dst]++ } else { nrdrop++; rxdrop[dst]++ }
	}
	replaced = 0
	if ($15 != "") qps[$15] = 1
	if ($16 != "") paths[$16] = 1
	# A data packet or PROBE: its sender replaces a path when the slot of
	# one QP shows a new generation (4.3); a replaced path probes first.
	if (reason == "" && (op != "" && op < "0x10" && op != "0x07" || op == "0x20") && $13 != "") {
		key = src SUBSEP dst SUBSEP $12 SUBSEP $14
		if (!((key, $13) in gens)) {
			gens[key, $13] = 1
			if (key in seen) { repl++; txrepl[src]++; replaced = 1 }
			seen[key] = 1
		}
	}
	if (src in dev_of) {
		d = dev_of[src]; pl = "plane" plane_of[src] "_"
		cnt[d, "tx_packets"]++; cnt[d, "tx_bytes"] += bytes
		cnt[d, pl "tx_packets"]++; cnt[d, pl "tx_bytes"] += bytes
		if (retx) { cnt[d, "retransmissions"]++; cnt[d, pl "retransmissions"]++ }
		if (replaced) cnt[d, "path_failures"]++
		if (op == "0x07") cnt[d, "ud_tx_packets"]++
		if (op == "0x21") cnt[d, "probes_answered"]++
	}
	if (dst in dev_of) {
		d = dev_of[dst]; pl = "plane" plane_of[dst] "_"
		cnt[d, "rx_packets"]++; cnt[d, "rx_bytes"] += bytes
		cnt[d, pl "rx_packets"]++; cnt[d, pl "rx_bytes"] += bytes
		if (ecn == "3") cnt[d, "ecn_marks"]++
		if (malformed) cnt[d, "rx_malformed"]++
		if (reason == "" && op == "0x07") cnt[d, "ud_rx_packets+ud_rx_dropped"]++
		if (reason == "" && op == "0x20") cnt[d, "probes_answered+rx_probes_limited"]++
	}
}
function row(label, v, counter) {
	printf "%-28s %10d%s\n", label, v, counter != "" ? "   (" counter ")" : ""
}
END {
	printf "capture %s: %d MetaRoCE packets, %d bytes of UDP payload\n", cap, n, b
	row("not MetaRoCE", other, "")
	row("dissector errors", broken, "")
	print "per opcode:"
	for (i = 1; i <= nop; i++) if (ops[order[i]]) printf "  %-26s %10d\n", name[order[i]], ops[order[i]]
	for (o in ops) if (!(o in name))
		printf "  %-26s %10d\n", o == "" ? "(no opcode: BadVersion)" : "opcode " o, ops[o]
	row("data flagged RETRANSMIT", nretx, "retransmissions, at the senders")
	row("IP ECN-CE marked", nce, "ecn_marks, at the receivers")
	row("ACKs echoing CE", nackce, "")
	which = icrc == "FALSE" ? "see --icrc" : sample > 0 ? "the first " sample " of each opcode" : ""
	row("ICRCs verified", verified, which)
	row("malformed", nmal, "rx_malformed" (icrc == "TRUE" ? "" : "; ICRCs not checked, see --icrc"))
	row("dropped by receiver rules", nrdrop, "part of rx_data_dropped")
	for (r in why) printf "  %-26s %10d\n", r, why[r] | "sort"
	close("sort")
	row("path replacements", repl, "path_failures, at the senders")
	row("QP streams", length(qps), "")
	row("path streams", length(paths), "")
	split("tx_packets tx_bytes rx_packets rx_bytes retransmissions path_failures ecn_marks " \
	      "rx_malformed ud_tx_packets ud_rx_packets+ud_rx_dropped probes_answered " \
	      "probes_answered+rx_probes_limited", names, " ")
	split("tx_packets tx_bytes rx_packets rx_bytes retransmissions", pnames, " ")
	for (d = 1; d <= ndev; d++) {
		for (i = 1; i in names; i++) printf "device %s: %s %d\n", dv[d], names[i], cnt[d, names[i]]
		for (k = 0; k < np[d]; k++) for (i = 1; i in pnames; i++)
			printf "device %s: plane%d_%s %d\n", dv[d], k, pnames[i], cnt[d, "plane" k "_" pnames[i]]
	}
	if (!by_host) exit
	print ""
	printf "%-40s %10s %12s %8s %8s %8s %8s\n", "sent by (tx_*)", "packets", "bytes",
		"retrans", "ud_tx", "replies", "path_rep"
	for (h in tx) printf "%-40s %10d %12d %8d %8d %8d %8d\n", h, tx[h], txb[h], txretx[h],
		txud[h], txreply[h], txrepl[h] | "sort"
	close("sort")
	printf "%-40s %10s %12s %8s %8s %8s\n", "received by (rx_*)", "packets", "bytes",
		"ecn_ce", "malform", "dropped"
	for (h in rx) printf "%-40s %10d %12d %8d %8d %8d\n", h, rx[h], rxb[h], rxce[h],
		rxmal[h], rxdrop[h] | "sort"
	close("sort")
}'
