#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rdma-core's own test suite (the pyverbs tests Debian ships with
# python3-pyverbs) against MetaRoCE and against rxe, on host A, both
# devices on plane 0's netdev; both pass counts are reported. Passes when
#  - no MetaRoCE test fails, errors or hangs unless Documentation/pyverbs.md
#    lists it with its reason;
#  - every test rxe passes and MetaRoCE does not (a feature MetaRoCE lacks,
#    so the test skips) is listed there with its reason;
#  - MetaRoCE passes at least the count Documentation/pyverbs.md records
#    ("MetaRoCE passes: N"), so a regression fails the run.
# Vendor-specific classes (mlx5, EFA, CUDA) are left out: they skip on any
# other device.
. "$(dirname "$0")/lib.sh"
trap 'reset_rdma' EXIT
reset_rdma
suite=/usr/share/doc/rdma-core/tests
[ -f "$suite/run_tests.py" ] || skip "python3-pyverbs (rdma-core's test suite) not installed"
known="$METAROCE_REPO/Documentation/pyverbs.md"

work=$(mktemp -d)
cp -r "$suite" "$work/"
gunzip -f "$work"/tests/*.gz
cd "$work" || fail "no work dir"

modprobe rdma_rxe || skip "no rxe module"
expect_ok rdma link add mr0 type metaroce netdev "$PLANE0_DEV"
expect_ok rdma link add rxe0 type rxe netdev "$PLANE0_DEV"
for _ in $(seq 50); do
	gm=$(gid_index mr0 "$PLANE0_IP") && gr=$(gid_index rxe0 "$PLANE0_IP") && break
	sleep 0.2
done
[ -n "${gm:-}" ] && [ -n "${gr:-}" ] || fail "no RoCE v2 GID for $PLANE0_IP on mr0/rxe0"

classes=$(/usr/bin/python3 tests/run_tests.py --list-tests 2>&1 | grep '^tests\.' |
	grep -vi 'mlx5\|efa\|cuda' | sed 's/^tests\.//; s/\.[^.]*$//' | sort -u)
[ -n "$classes" ] || fail "the suite lists no tests"

# run_suite DEV GID: every class in its own process with a time limit (a
# hang fails that class's tests instead of the whole run); results as
# "test_name|ok|FAIL|ERROR|skipped" lines in $work/DEV.res.
run_suite() {
	local dev=$1 gi=$2 c rc
	: > "$work/$dev.log"
	for c in $classes; do
		timeout -k 5 "${PYVERBS_CLASS_TIMEOUT:-120}" /usr/bin/python3 tests/run_tests.py \
			--dev "$dev" --gid "$gi" -v "$c" >> "$work/$dev.log" 2>&1
		rc=$?
		[ $rc = 124 ] || [ $rc = 137 ] && echo "$c ... TIMEOUT" >> "$work/$dev.log"
	done
	# unittest -v prints "test_x (tests.mod.Class.test_x)", maybe a line of
	# docstring, then " ... RESULT".
	awk 'match($0, /^test_[A-Za-z0-9_]+ \(tests\.[A-Za-z0-9_.]+\)/) {
		name = substr($0, RSTART, RLENGTH); sub(/^[^(]*\(tests\./, "", name); sub(/\)$/, "", name) }
	name != "" && match($0, / \.\.\. (ok|FAIL|ERROR|skipped|expected failure|unexpected success)/) {
		r = substr($0, RSTART + 5, RLENGTH - 5); print name "|" r; name = "" }' \
		"$work/$dev.log" | sort -u > "$work/$dev.res"
	grep ' \.\.\. TIMEOUT' "$work/$dev.log" | sed 's/ \.\.\. TIMEOUT/.*|TIMEOUT/' >> "$work/$dev.res"
}
count() { grep -c "|$2\$" "$work/$1.res"; }

run_suite mr0 "$gm"
run_suite rxe0 "$gr"
for d in mr0 rxe0; do
	log "$d: $(count $d ok) passed, $(count $d FAIL) failed, $(count $d ERROR) errors, $(count $d skipped) skipped, $(count $d TIMEOUT) classes timed out, of $(wc -l < "$work/$d.res")"
done
cp "$work"/*.log "$METAROCE_OUT/" 2>/dev/null

ours=$(count mr0 ok)
theirs=$(count rxe0 ok)
floor=$(sed -n 's/^MetaRoCE passes: \([0-9]*\).*/\1/p' "$known" | head -1)
[ -n "$floor" ] || fail "Documentation/pyverbs.md records no 'MetaRoCE passes: N'"
unlisted=0
while IFS='|' read -r name result; do
	rxe=$(awk -F'|' -v n="$name" '$1 == n { print $2 }' "$work/rxe0.res")
	case $result in
	ok) continue ;;
	skipped) [ "$rxe" = ok ] || continue ;;
	esac
	if ! grep -qF "\`$name\`" "$known"; then
		log "not in Documentation/pyverbs.md: $name (MetaRoCE: $result, rxe: ${rxe:-not run})"
		unlisted=$((unlisted + 1))
	fi
done < "$work/mr0.res"
[ "$unlisted" = 0 ] || fail "$unlisted MetaRoCE results are neither fixed nor explained in Documentation/pyverbs.md"
[ "$ours" -ge "$floor" ] || fail "MetaRoCE passes $ours tests, fewer than the $floor Documentation/pyverbs.md records"
log "ok: MetaRoCE passes $ours (recorded: $floor), rxe $theirs; every MetaRoCE failure and every test only rxe passes is explained"
rm -rf "$work"
