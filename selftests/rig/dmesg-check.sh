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
	# The log without user-space faults, filtered once; line numbers below
	# are of it.
	kernel=$(grep -Ev "$user_fault" "$f")
	first=$(grep -nE "$pattern" <<< "$kernel" | head -1 | cut -d: -f1)
	if [ -n "$first" ]; then
		report=$(sed -n "${first},$((first + 150))p" <<< "$kernel")
		echo "dmesg-check: kernel reported a problem in $f:"
		echo "$report"
		# Last, where a log shown only in part keeps it: the test that
		# ran (run_tests.sh's marks) and the report's key lines (for
		# lockdep the two locks and each link of the chain).
		head -n "$first" <<< "$kernel" | grep -E 'metaroce selftest: ' | tail -1 |
			sed 's/^/dmesg-check: during /'
		grep -E "$pattern|trying to acquire|already holding|^\[[^]]*\] [0-9a-f]+ \(|^\[[^]]*\] (-> #|  +[(&a-z])|RIP: |^\[[^]]*\]  [a-z_][a-z_0-9.]*\+0x" <<< "$report" |
			head -40 | sed 's/^/dmesg-check: | /'
		bad=1
	fi
done
exit $bad
