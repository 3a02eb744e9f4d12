# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# The TAP lines of the host-side checks (libcheck.sh, rcncheck.sh,
# bench/collcheck.sh; sourced): each case passes or fails on its own, the
# counts and the status come at the end.
pass=0 fail=0

# expect NAME GOT WANT: case NAME passes if GOT is WANT.
expect() {
	if [ "$2" = "$3" ]; then
		pass=$((pass + 1)); echo "ok - $1"
	else
		fail=$((fail + 1)); echo "not ok - $1"; printf '#   got:  %q\n#   want: %q\n' "$2" "$3"
	fi
}

# expect_summary WHAT: "WHAT: N passed, M failed"; status 1 if any failed.
expect_summary() {
	echo "$1: $pass passed, $fail failed"
	[ "$fail" = 0 ]
}
