#!/bin/bash
# The two-host rig: boots host A and host B from the cached test kernel,
# joined by $METAROCE_PLANES (default 2) point-to-point Ethernet links (the
# planes) plus a management link for the peer command channel, runs MODE on
# A, and fails if either kernel logged a WARN/BUG/oops/lockdep/KASAN report.
#
#   run.sh selftests      the kselftests (TAP), summary line at the end
#   run.sh demo           the demo
#   run.sh 'CMD'          any command on A (with peer.py for B)
#
# Environment: METAROCE_PLANES, METAROCE_ACCEL=auto|kvm|tcg (auto probes
# KVM once per machine and kernel), METAROCE_RIG_TIMEOUT (s, default 4800; 10800 with METAROCE_KERNEL=kasan
# or METAROCE_SUITE=full), METAROCE_SUITE (full: the extended tests too, run_tests.sh),
# METAROCE_RIG_MEMORY (each VM's, default 1G; 3G did not speed package.sh's DKMS builds),
# METAROCE_PLANE_JOIN_SWAP (1: plane_join.sh with the NICs' roles swapped),
# METAROCE_OUT (where logs go; default a new dir under /tmp/metaroce-rig).
# Logs: A.console and B.console (each VM's output, with its kernel's
# warnings and worse), A.dmesg and B.dmesg (written when a VM's run ends),
# tap.txt (selftests).
set -euo pipefail
rig=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$rig/../.." && pwd)
mode=${1:?usage: run.sh selftests|demo|CMD}
planes=${METAROCE_PLANES:-2}
timeout_s=${METAROCE_RIG_TIMEOUT:-$([ "${METAROCE_KERNEL:-test}" = kasan ] || [ "${METAROCE_SUITE:-}" = full ] && echo 10800 || echo 4800)}
venv=${METAROCE_VENV:-/opt/metaroce-venv}
export PATH="$venv/bin:$HOME/.cargo/bin:$PATH"

# One rig at a time per machine: two would starve each other of the CPUs
# and skew every timing. Later runs wait here (METAROCE_RIG_NOLOCK=1 skips).
if [ -z "${METAROCE_RIG_NOLOCK:-}" ]; then
	exec 9> /var/lock/metaroce-rig.lock
	flock -n 9 || { echo "rig: waiting for another rig run to finish"; flock 9; }
fi

kdir=$("$rig/kernel.sh" --path) || { echo "rig: test kernel not built (make kernel)"; exit 1; }
[ -f "$repo/metaroce.ko" ] || { echo "rig: metaroce.ko not built (make)"; exit 1; }
out=${METAROCE_OUT:-$(mktemp -d /tmp/metaroce-rig.XXXXXX)}
mkdir -p "$out"
rm -f "$out"/*.dmesg "$out"/A.rc "$out"/tap.txt
# The guests do not inherit this environment: pass what the tests read.
# A KASAN kernel runs every test ~2-3x slower: their timeouts scale.
[ "${METAROCE_KERNEL:-test}" = kasan ] && export METAROCE_TIMEOUT_SCALE=${METAROCE_TIMEOUT_SCALE:-3}
declare -p METAROCE_TESTS METAROCE_SUITE METAROCE_TIMEOUT_SCALE METAROCE_REPEAT METAROCE_MANY_QPS METAROCE_PLANE_JOIN_SWAP 2>/dev/null | sed 's/^declare -x/export/; s/^declare --/export/' > "$out/env" || true

# A killed vng can leave its qemu behind: on exit, stop this run's VMs
# (their command lines name $out).
# The VMs' QMP sockets live in a short path of their own (a unix socket path
# is limited to 108 bytes, and QEMU's option syntax to no commas).
qmpdir=$(mktemp -d /tmp/metaroce-qmp.XXXXXX)
# The host's default socket receive buffer, while this run holds it raised
# (the links' buffers, below): set back on exit.
rmem=/proc/sys/net/core/rmem_default
rmem_saved=""
restore_rmem() {
	[ -z "${rmem_waiter:-}" ] || kill "$rmem_waiter" 2>/dev/null || true
	[ -z "$rmem_saved" ] || echo "$rmem_saved" > "$rmem" 2>/dev/null || true
}
trap 'pkill -f -- "path=$out," 2>/dev/null || true; [ -z "${agent:-}" ] || kill "$agent" 2>/dev/null || true; rm -rf "$qmpdir"; restore_rmem' EXIT

# KVM only if it really boots here (on some machines it hangs at
# "Decompressing Linux"): probe once, remember per kernel tree.
accel=${METAROCE_ACCEL:-auto}
if [ "$accel" = auto ]; then
	probe="$kdir/.metaroce-kvm-probe"
	if [ ! -f "$probe" ]; then
		if [ -w /dev/kvm ] && timeout 60 vng -r "$kdir" --cpus 1 --memory 512M \
			--rwdir "$out" --exec true > /dev/null 2>&1 < /dev/null; then
			echo kvm > "$probe"
		else
			echo tcg > "$probe"
		fi
	fi
	accel=$(cat "$probe")
fi
accel_opt=()
[ "$accel" = kvm ] || accel_opt=(--disable-kvm)
echo "rig: kernel $kdir, $planes planes, $accel, logs in $out"

# Links are QEMU UDP sockets on loopback: A's end of link i listens on
# base+2i, B's on base+2i+1. Link "ff" is management.
base=$((20000 + (RANDOM % 2000) * 10))
qemu_opts() {
	local role=$1 hb=$2 mine=$3 theirs=$4 i opts=""
	# QMP for the host-side agent (hostctl.py: link events on the host's clock).
	opts+=" -qmp unix:$qmpdir/qmp-$role.sock,server=on,wait=off"
	for ((i = 0; i <= planes; i++)); do
		local id=$i tag
		tag=$(printf '%02x' $i)
		[ $i = "$planes" ] && { id=m; tag=ff; }
		opts+=" -netdev socket,id=n$id,udp=127.0.0.1:$((base + 2 * i + theirs)),localaddr=127.0.0.1:$((base + 2 * i + mine))"
		opts+=" -device virtio-net-pci,netdev=n$id,mac=52:54:00:00:$hb:$tag"
	done
	echo "$opts"
}

# The KASAN kernel boots with 4-level paging: TCG's CPU has LA57, and
# identify_cpu clears the boot CPU's feature bits while it re-reads them,
# so an interrupt in that window made KASAN take a 5-level direct-map
# address for a wild access (a report at 0.002 s, before any module).
append_opt=()
[ "${METAROCE_KERNEL:-test}" = kasan ] && append_opt=(--append no5lvl)
# The guest's kernel warnings and worse on its console (A.console,
# B.console): a guest that panics or dies leaves no dmesg file, and the
# console then holds the only report (--verbose: vng's console shows the
# kernel's lines; loglevel=5: KERN_WARNING and above, oopses included,
# about 20 lines of boot messages besides).
append_opt+=(--verbose --append loglevel=5)
boot() {
	local role=$1 hb=$2 mine=$3 theirs=$4 what=$5
	timeout "$timeout_s" vng -r "$kdir" "${accel_opt[@]}" "${append_opt[@]}" --cpus 1 --memory "${METAROCE_RIG_MEMORY:-1G}" \
		--rwdir "$out" "--qemu-opts=$(qemu_opts "$role" "$hb" "$mine" "$theirs")" \
		--exec "$rig/guest.sh $role $out $planes '$what'" < /dev/null
}

# vng links the tree's modules into .virtme_mods at boot; do it once here
# so the two hosts don't race to create the same links.
(cd "$kdir" && virtme-prep-kdir-mods > /dev/null)

# The host-side agent: plane link events and wire counters from outside the
# VMs, on request from a guest (selftests/rig/hostctl.py; the benchmark's
# plane failure uses it). Runs as long as the VMs do.
rm -rf "$out/hostctl" && mkdir -p "$out/hostctl"
# It must not hold the rig lock (fd 9), and it exits with this script.
python3 "$rig/hostctl.py" --out "$out" --qmp-dir "$qmpdir" --base "$base" --planes "$planes" \
	--parent $$ > "$out/hostctl.log" 2>&1 9>&- &
agent=$!

# The links' receive buffers. Each end of a link is a QEMU UDP socket that
# takes the host's default receive buffer (net.core.rmem_default, 208 KiB
# on Debian: ~90 frames), and QEMU reads it only when its I/O thread runs.
# With two TCG guests on two cores that thread waits for a core for
# milliseconds at a time, and a plain `ib_write_bw` overflowed the socket:
# the host's UDP RcvbufErrors matched the sender's loss counters one to
# one (Documentation/benchmarks/ab-2026-12-07-link-buffer/), so "lossless"
# points lost up to 2% of their frames, for every transport alike. The
# wire the rig models loses nothing it is not told to: a lower default is
# raised to METAROCE_RIG_LINK_BUFFER bytes (default 4 MiB; 0 keeps the
# host's) while the VMs create their sockets (the value is read when a
# socket is made), and set back once they have, or when the run ends.
link_buffer=${METAROCE_RIG_LINK_BUFFER:-4194304}
rmem_host=$(cat "$rmem" 2> /dev/null || echo 0)
if [ "$link_buffer" = 0 ] || [ "$rmem_host" -ge "$link_buffer" ]; then
	echo "rig: link sockets' receive buffer $rmem_host bytes (the host's default)"
elif echo "$link_buffer" 2> /dev/null > "$rmem"; then
	rmem_saved=$rmem_host
	echo "rig: link sockets' receive buffer $link_buffer bytes (host default $rmem_saved, restored once the VMs have made them)"
else
	echo "rig: cannot raise net.core.rmem_default (not root?): the links keep the host's $rmem_host-byte buffers and may drop frames under load"
fi
# links_bound: both VMs' ends of every link (ports base..base+2*planes+1)
# are bound.
links_bound() {
	local n
	n=$(ss -Huan 2> /dev/null | awk -v lo="$base" -v hi=$((base + 2 * planes + 1)) '
		{ n = split($4, a, ":"); p = a[n] + 0; if (p >= lo && p <= hi) seen[p] = 1 }
		END { c = 0; for (p in seen) c++; print c }')
	[ "$n" = $((2 * planes + 2)) ]
}

start=$(date +%s)
if [ -n "$rmem_saved" ]; then
	(for _ in $(seq 600); do links_bound && break; sleep 0.5; done
	 restore_rmem) 9>&- &
	rmem_waiter=$!
fi
boot B 0b 1 0 serve > "$out/B.console" 2>&1 &
bpid=$!
set +e
boot A 0a 0 1 "$mode" 2>&1 | tee "$out/A.console"
set -e
# A stops B through the channel; give it a moment, then make sure.
for _ in $(seq 60); do kill -0 $bpid 2>/dev/null || break; sleep 1; done
kill $bpid 2>/dev/null || true
wait $bpid 2>/dev/null || true

rc=0
if [ -f "$out/A.rc" ]; then
	arc=$(cat "$out/A.rc")
	[ "$arc" = 0 ] || { echo "rig: host A's run exited with $arc"; rc=1; }
else
	# guest.sh writes A.rc last: its VM ended first (a kernel panic, a
	# triple fault, a timeout), and only the consoles can say why.
	echo "rig: host A's VM ended before its run did (no A.rc); its console's last kernel lines:"
	grep -E '^\[ *[0-9]+\.[0-9]+\]' "$out/A.console" 2>/dev/null | tail -25 | sed 's/^/rig:   /'
	rc=1
fi
"$rig/dmesg-check.sh" "$out/A.dmesg" "$out/B.dmesg" || rc=1
echo "rig: finished in $(( $(date +%s) - start )) s, logs in $out"
# The TAP summary is the last line, where CI looks for it.
[ -f "$out/tap.txt" ] && tail -n 1 "$out/tap.txt"
exit $rc
