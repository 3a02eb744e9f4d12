#!/bin/bash
# dmesg-check.sh FILE...: fail (exit 1) and print the lines if any kernel log
# shows a WARN, BUG, oops, lockdep, KASAN/KFENCE/UBSAN report, a hung task
# or an RCU stall. Any such line fails the whole rig run.
pattern='WARNING: |BUG: |kernel BUG at|Oops|general protection fault|KASAN:|KFENCE:|UBSAN:|Call Trace:|blocked for more than|rcu_.* detected stalls|possible (circular|recursive) locking|inconsistent lock state|Kernel panic'
# A user-space process's fault, as the kernel logs it ("traps: perf[12]
# general protection fault ip:... in lib.so"), is that program's crash, not
# a kernel report: it is left to the test that ran the program.
user_fault='\] traps: [^ ]+\[[0-9]+\] general protection fault ip:'
bad=0
for f in "$@"; do
	[ -f "$f" ] || { echo "dmesg-check: $f missing"; bad=1; continue; }
	if grep -Ev "$user_fault" "$f" | grep -E "$pattern" > /dev/null; then
		echo "dmesg-check: kernel reported a problem in $f:"
		grep -En -A3 "$pattern" "$f" | grep -Ev "$user_fault" | head -60
		bad=1
	fi
done
exit $bad
