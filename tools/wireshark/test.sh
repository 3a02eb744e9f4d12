#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Tests of the Wireshark dissector (tools/wireshark/test.py); part of
# `make check`. Skips, and passes, where tshark is not installed.
# Arguments go to test.py (-v: every check; --mutants: also show that
# deliberately broken copies of the dissector fail the checks).
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v tshark > /dev/null 2>&1; then
	echo "wireshark: SKIP: tshark not installed (Debian: apt-get install tshark)"
	exit 0
fi
exec python3 "$here/test.py" "$@"
