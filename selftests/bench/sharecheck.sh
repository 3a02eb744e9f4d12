#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Host-side check of the plane share point (issue #14 item 3), no VM
# needed: lib.sh's plane_tx_bytes reads fake planes' tx_bytes, plane_shares
# turns two readings into plane{k}_share samples, and report.py's "Plane
# share" section renders them from a few fixture rows (MetaRoCE even and
# uneven, TCP beside it, rxe as one plane). The report part is skipped
# without matplotlib (selftests/rig/deps.sh installs it).
set -u
bench=$(cd "$(dirname "$0")" && pwd)
rig=$bench/../rig
tmp=$(mktemp -d)
trap '[ -n "${SHARECHECK_KEEP:-}" ] && cp -r "$tmp" "$SHARECHECK_KEEP"; rm -rf "$tmp"' EXIT
# shellcheck source=SCRIPTDIR/../rig/expect.sh
. "$rig/expect.sh"

export METAROCE_OUT=$tmp METAROCE_PLANES=4 PLANE_SYSFS=$tmp/net
export PLANE0_DEV=fake0 PLANE1_DEV=fake1 PLANE2_DEV=fake2 PLANE3_DEV=fake3
# shellcheck source=/dev/null
. "$bench/lib.sh"
csv_init
set_tx() { # PLANE BYTES
	mkdir -p "$PLANE_SYSFS/fake$1/statistics"
	echo "$2" > "$PLANE_SYSFS/fake$1/statistics/tx_bytes"
}
for k in 0 1 2 3; do set_tx $k $((1000 * (k + 1))); done
expect "plane_tx_bytes reads planes 0 to P-1" "$(plane_tx_bytes 2)" "1000 2000"
before=$(plane_tx_bytes 4)

# MetaRoCE, 2 planes: 50/50 in rep 1, 52/48 in rep 2 (medians 51/49: 2%).
set_tx 0 $((1000 + 500000)) && set_tx 1 $((2000 + 500000))
plane_shares metaroce scaling ib_write_bw 65536 1 2 "rate=800kbit;uses=2;tx-depth=4" 1 "$(echo "$before" | cut -d' ' -f1-2)" "$(plane_tx_bytes 2)"
expect "an even spread: 50% each" \
	"$(awk -F, '$9 ~ /^plane[0-9]_share$/ { printf "%s=%s ", $9, $10 }' "$CSV")" "plane0_share=50.000 plane1_share=50.000 "
expect "the row says the bytes" "$(awk -F, '$9 == "plane0_share" { print $11 }' "$CSV")" \
	"500000 of 1000000 bytes host A sent on the planes"
plane_shares metaroce scaling ib_write_bw 65536 1 2 "rate=800kbit;uses=2;tx-depth=4" 2 "0 0" "520000 480000"
# Nothing sent: no samples.
n=$(wc -l < "$CSV")
plane_shares metaroce scaling ib_write_bw 65536 1 2 - 3 "5 5" "5 5"
expect "no bytes, no samples" "$(wc -l < "$CSV")" "$n"

# MetaRoCE, 4 planes: 30/25/25/20 (deviation 5 pp = 20% of 25%: not within).
plane_shares metaroce scaling ib_write_bw 65536 1 4 "rate=800kbit;uses=4;tx-depth=4" 1 "0 0 0 0" "300 250 250 200"
# TCP, 2 planes: 49/51.
plane_shares tcp scaling iperf3 - 1 2 rate=800kbit 1 "0 0" "4900 5100"
for t in metaroce rxe tcp; do csv "$t" availability - - - 1 - - available 1; done
csv all scaling - - - - ceiling - plane_rate_kbit 800
for p in 1 2 4; do
	csv metaroce scaling ib_write_bw 65536 1 "$p" "rate=800kbit;uses=$p;tx-depth=4" 1 MiBps 0.09
	csv rxe scaling ib_write_bw 65536 1 "$p" "rate=800kbit;uses=1;tx-depth=4" 1 MiBps 0.09
done
csv tcp scaling iperf3 - 1 1 rate=800kbit 1 MiBps 0.09
csv tcp scaling iperf3 - 1 2 rate=800kbit 1 MiBps 0.18
csv tcp scaling iperf3 - 1 4 rate=800kbit 1 error "" "iperf3 failed"

if report_check; then
	sec=$(sed -n '/^## Plane share/,/^## /p' "$BOUT/report.md" 2> /dev/null)
	expect "the Plane share section follows Plane scaling" \
		"$(grep -E '^## Plane (scaling|share)' "$BOUT/report.md" 2> /dev/null | sed 's/:.*//' | paste -sd' ')" \
		"## Plane scaling ## Plane share"
	expect "MetaRoCE on 2 planes: median shares, 1 pp = 2%, within" \
		"$(grep -F '| MetaRoCE | 2 |' <<< "$sec")" "| MetaRoCE | 2 | 51.0% / 49.0% (n=2) | 1.0 pp | 2.0% | yes |"
	expect "MetaRoCE on 4 planes: 5 pp = 20%, not within" \
		"$(grep -F '| MetaRoCE | 4 |' <<< "$sec")" \
		"| MetaRoCE | 4 | 30.0% / 25.0% / 25.0% / 20.0% (n=1) | 5.0 pp | 20.0% | **no** |"
	expect "TCP beside it, no verdict" \
		"$(grep -F '| TCP (iperf3) | 2 |' <<< "$sec")" "| TCP (iperf3) | 2 | 49.0% / 51.0% (n=1) | 1.0 pp | 2.0% | — (reference) |"
	expect "TCP's failed point says why" "$(grep -cF '| TCP (iperf3) | 4 | — (failed (1×): iperf3 failed)' <<< "$sec")" 1
	expect "rxe: one plane" "$(grep -cF '| rxe | 1 plane (no spread) |' <<< "$sec")" 1
fi
expect_summary "plane share check"
