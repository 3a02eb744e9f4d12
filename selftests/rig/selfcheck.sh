#!/bin/bash
# Host-side check of the rig's own judges, no VM needed: the TAP runner
# reports failing tests as failures, expect_err rejects a success and a wrong
# error, dmesg-check catches each kind of kernel report, and lib.sh's
# teardown and counter helpers do what the tests rely on (libcheck.sh), as
# do rcn.sh's readings (rcncheck.sh) and the benchmark's collectives and
# plane share points and the points' cost (bench/collcheck.sh,
# bench/sharecheck.sh, bench/costcheck.sh), and README's two commands stop
# at once, saying what to do, where rustup is missing.
set -u
rig=$(cd "$(dirname "$0")" && pwd)
pass=0 fail=0
check() { # name, expected exit (0 / nonzero), command...
	local name=$1 want=$2 rc
	shift 2
	"$@" > /tmp/metaroce-selfcheck.log 2>&1
	rc=$?
	if { [ "$want" = 0 ] && [ $rc = 0 ]; } || { [ "$want" != 0 ] && [ $rc != 0 ]; }; then
		pass=$((pass + 1)); echo "ok - $name"
	else
		fail=$((fail + 1)); echo "not ok - $name (exit $rc)"; sed 's/^/#   /' /tmp/metaroce-selfcheck.log
	fi
}
tmp=$(mktemp -d)
printf '[    1.0] virtio_net virtio0: ok\n[    2.0] metaroce: loaded\n' > "$tmp/clean"
check "dmesg-check passes a clean log" 0 "$rig/dmesg-check.sh" "$tmp/clean"
for report in "WARNING: CPU: 0 PID: 1 at drivers/x.c:1 f+0x1/0x2" "BUG: KASAN: use-after-free in f" \
	"BUG: sleeping function called from invalid context" "WARNING: possible circular locking dependency detected" \
	"Oops: 0000 [#1] PREEMPT SMP" "BUG: KFENCE: out-of-bounds read in f" "INFO: task x:1 blocked for more than 120 seconds."; do
	{ cat "$tmp/clean"; echo "[    3.0] $report"; } > "$tmp/bad"
	check "dmesg-check catches '$report'" 1 "$rig/dmesg-check.sh" "$tmp/bad"
done
check "dmesg-check fails on a missing log" 1 "$rig/dmesg-check.sh" "$tmp/none"
# The lines a refused verb logs (Documentation/user-guide.md) are the
# driver's answer to bad input, not kernel reports.
{ cat "$tmp/clean"
  echo "[    3.0] metaroce: mr0: modify_qp QP 0x11: path MTU 4096 above the active MTU 1024"
  echo "[    3.1] metaroce: mr0: modify_qp QP 0x11: source GID index 0 is an IPv6 address and the destination GID 198.18.0.2 an IPv4 one: a QP is one family end to end"
  echo "[    3.2] metaroce: mr0: modify_qp QP 0x11: RESET to RTR with attribute mask 0x1 is not a valid transition for QP type RC"
  echo "[    3.3] metaroce refusals: 12 callbacks suppressed"; } > "$tmp/refusals"
check "dmesg-check passes the lines of refused verbs" 0 "$rig/dmesg-check.sh" "$tmp/refusals"
{ cat "$tmp/clean"; echo "[    3.0] traps: ib_write_bw[3487] general protection fault ip:7f455bc64472 sp:7ffe0ef419e0 error:0 in librdmacm.so.1.3.44.0[a472,7f455bc5e000+15000]"; } > "$tmp/user"
check "dmesg-check leaves a user-space program's fault to its test" 0 "$rig/dmesg-check.sh" "$tmp/user"
{ cat "$tmp/user"; echo "[    4.0] general protection fault, probably for non-canonical address 0xdead000000000122: 0000 [#1] PREEMPT SMP"; } > "$tmp/bad"
check "dmesg-check catches a kernel general protection fault beside it" 1 "$rig/dmesg-check.sh" "$tmp/bad"

check "hostctl drives QMP set_link, freezes QEMU and counts plane bytes (nftables)" 0 python3 "$rig/hostctl.py" --selftest
check "lib.sh's teardown and counter helpers (fake commands)" 0 "$rig/libcheck.sh"
# The stall watch, stopped 3 s (as a frozen VM's user space is): one record
# of 3 s or a little more.
check "stallwatch.sh records a 3 s stop of its process" 0 bash -c "
	\"$rig/stallwatch.sh\" '$tmp/stalls' & w=\$!; sleep 1; kill -STOP \$w; sleep 3; kill -CONT \$w; sleep 1; kill \$w
	awk 'NR == 1 && \$2 >= 3000 && \$2 < 4500 { ok = 1 } END { exit !(ok && NR == 1) }' '$tmp/stalls'"
# A new user without rustup: README's two commands (make demo, make test;
# deps.sh is the first step of both) stop within seconds, before
# installing anything, with the one command that installs rustup. PATH
# without rustup or cargo, HOME an empty directory (deps.sh also looks in
# ~/.cargo/bin).
mkdir -p "$tmp/nobin" "$tmp/home"
for t in make bash sed cat grep dirname env printf uname id; do ln -sf "$(command -v $t)" "$tmp/nobin/"; done
for cmd in demo test; do
	check "make $cmd without rustup stops within 10 s, printing the command that installs it" 0 bash -c "
		t0=\$(date +%s%N)
		out=\$(cd '$rig/../..' && timeout 20 env HOME='$tmp/home' PATH='$tmp/nobin' make -s $cmd 2>&1); rc=\$?
		ms=\$(( (\$(date +%s%N) - t0) / 1000000 ))
		echo \"exit \$rc after \$ms ms: \$out\"
		[ \$rc -ne 0 ] && [ \$rc -ne 124 ] && [ \$ms -lt 10000 ] &&
			grep -q 'rustup not found' <<< \"\$out\" && grep -q 'https://sh.rustup.rs' <<< \"\$out\""
done
check "rcn.sh's readings of rdma's QP details (captured output, peer.py on the loopback)" 0 "$rig/rcncheck.sh"
check "bench collectives: Open MPI through peer.py on the loopback, samples, report (bench/collcheck.sh)" 0 "$rig/../bench/collcheck.sh"
check "bench plane share: tx_bytes readings, samples, report section (bench/sharecheck.sh)" 0 "$rig/../bench/sharecheck.sh"
check "bench point cost: CPU, frames and timer readings, samples, report section (bench/costcheck.sh)" 0 "$rig/../bench/costcheck.sh"

sel=$(cd "$rig/.." && pwd)
check "expect_err accepts the expected error" 0 env METAROCE_TESTS=rig/fixtures/passes.sh "$sel/run_tests.sh"
check "expect_err rejects a success" 1 env METAROCE_TESTS=rig/fixtures/fails.sh "$sel/run_tests.sh"
check "expect_err rejects a wrong error" 1 env METAROCE_TESTS=rig/fixtures/wrong_error.sh "$sel/run_tests.sh"
check "runner summary counts a failure" 0 sh -c "METAROCE_TESTS='rig/fixtures/passes.sh rig/fixtures/fails.sh' '$sel/run_tests.sh' | grep -qx 'selftests: 1 passed, 1 failed, 0 skipped'"
# The suites: make test's core list leaves the slow tests to make
# test-full, which runs both lists; every test script is in one of them,
# or is package.sh, run by its own target (make test-package).
env -u METAROCE_TESTS -u METAROCE_SUITE "$sel/run_tests.sh" --list > "$tmp/core"
env -u METAROCE_TESTS METAROCE_SUITE=full "$sel/run_tests.sh" --list > "$tmp/full"
check "make test's core suite leaves dissect.sh to the full suite" 1 grep -qx dissect.sh "$tmp/core"
check "the full suite runs the core suite first, then the extended tests" 0 sh -c "head -n $(wc -l < "$tmp/core") '$tmp/full' | cmp -s - '$tmp/core' && grep -qx dissect.sh '$tmp/full'"
(cd "$sel" && ls ./*.sh | sed 's|^\./||' | grep -vx -e lib.sh -e run_tests.sh -e rcn_readings.sh -e package.sh) | sort > "$tmp/scripts"
check "every test script is in a suite" 0 sh -c "sort '$tmp/full' | cmp -s - '$tmp/scripts' || { sort '$tmp/full' | diff - '$tmp/scripts'; exit 1; }"
rm -rf "$tmp"
echo "rig selfcheck: $pass passed, $fail failed"
[ $fail = 0 ]
