#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# stallwatch.sh FILE: runs in each rig VM for its whole boot (guest.sh) and
# appends "END_EPOCH_S GAP_MS" to FILE for every wakeup of a half-second
# sleep that came 2 s or more after the one before: the VM did not run
# meanwhile (its QEMU process not scheduled on a loaded host, or stopped by
# hostctl.py's freeze: its clock jumped when it ran again), or its kernel
# kept the one vCPU (a softirq that does not end). lib.sh longest_stall
# reads the records; a failed perftest run shows the longest one beside
# its counters, and host_stall.sh checks that a freeze is seen.
set -u
file=$1
# The half-second waits are read timeouts on a FIFO nobody writes, a bash
# builtin: an external `sleep` is exec'd from the guest's root, a 9p mount
# served by the busy QEMU, and its loading counted as stalls of 9-18 s
# (both hosts, under perftest, while perftest itself went on).
fifo=$(mktemp -u "$(dirname "$file")/stallwatch.XXXXXX")
mkfifo "$fifo" && exec 3<> "$fifo" && rm -f "$fifo" || exit 1
prev=${EPOCHREALTIME/./}
while :; do
	read -rt 0.5 -u 3 _
	now=${EPOCHREALTIME/./}
	gap=$(((now - prev) / 1000))
	[ "$gap" -lt 2000 ] || echo "$((now / 1000000)) $gap" >> "$file"
	prev=$now
done
