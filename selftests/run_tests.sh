#!/bin/bash
# Runs TEST_PROGS from the Makefile (then, with METAROCE_SUITE=full,
# TEST_PROGS_EXTENDED: make test-full) one by one, each under the timeout in
# `settings` (a `timeout_NAME=S` line there gives test NAME.sh its own;
# METAROCE_TIMEOUT_SCALE multiplies them, for slow kernels), and
# prints KTAP. Exit status: 0 only if none failed. The last
# line is the summary "selftests: N passed, N failed, N skipped".
cd "$(dirname "$0")" || exit 1
KSFT_SKIP=4
timeout_s=$(sed -n 's/^timeout=//p' settings)
# make_list NAME: the tests of assignment NAME in the Makefile.
make_list() {
	sed -n "/^$1 *:=/,/[^\\]\$/p" Makefile | sed "s/^$1 *:= *//; s/\\\\//g"
}
# shellcheck disable=SC2207
tests=($(make_list TEST_PROGS))
# shellcheck disable=SC2207
[ "${METAROCE_SUITE:-}" = full ] && tests+=($(make_list TEST_PROGS_EXTENDED))
[ -n "${METAROCE_TESTS:-}" ] && read -ra tests <<< "$METAROCE_TESTS"
# --list: the tests this environment selects, one per line, none run.
[ "${1:-}" = --list ] && { printf '%s\n' "${tests[@]}"; exit 0; }

echo "TAP version 13"
echo "1..${#tests[@]}"
pass=0 fail=0 skip=0 i=0
for t in "${tests[@]}"; do
	i=$((i + 1))
	[ -e "$t" ] || [ ! -e "$t.sh" ] || t=$t.sh
	limit=$(sed -n "s/^timeout_${t%.sh}=//p" settings)
	limit=$(( ${limit:-$timeout_s} * ${METAROCE_TIMEOUT_SCALE:-1} ))
	echo "# selftests: metaroce: $t"
	# The test's name into both hosts' kernel logs: a kernel report found
	# after the run (dmesg-check) then names the test it came from.
	mark="metaroce selftest: $t"
	echo "$mark" > /dev/kmsg 2> /dev/null || true
	[ -n "${METAROCE_RIG:-}" ] &&
		timeout 30 /usr/bin/python3 "$METAROCE_RIG/peer.py" run -- "echo '$mark' > /dev/kmsg" > /dev/null 2>&1
	begin=$(date +%s)
	timeout --kill-after=10 "$limit" "./$t" 2>&1 | sed 's/^/# /'
	rc=${PIPESTATUS[0]}
	took=$(( $(date +%s) - begin ))
	if [ "$rc" = 0 ]; then
		echo "ok $i selftests: metaroce: $t # ${took}s"; pass=$((pass + 1))
	elif [ "$rc" = $KSFT_SKIP ]; then
		echo "ok $i selftests: metaroce: $t # SKIP"; skip=$((skip + 1))
	else
		[ "$rc" = 124 ] && echo "# $t: timed out after ${limit}s"
		echo "not ok $i selftests: metaroce: $t # exit=$rc"; fail=$((fail + 1))
	fi
done
echo "selftests: $pass passed, $fail failed, $skip skipped"
[ $fail = 0 ]
