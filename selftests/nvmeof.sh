#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A kernel ULP over MetaRoCE: NVMe over Fabrics, the target (nvmet-rdma) on
# host B and the host (nvme-rdma) on host A, over one MetaRoCE device mr0
# on every plane of the rig (no rxe, no nvme-cli). Host B exports a
# memory-backed null_blk device through nvmet's configfs; host A connects
# through /dev/nvme-fabrics and, on the namespace's block device, writes a
# random pattern with O_DIRECT, reads it back with O_DIRECT and compares
# checksums (also of what landed in B's null_blk), once lossless and once
# with 1% netem loss on every plane of both hosts. This drives what no
# user-space test does: fast registration (IB_WR_REG_MR, LOCAL_INV), SEND
# with invalidate, and RDMA READ and WRITE posted by kernel consumers,
# from softirq completion handlers. Then the controller is deleted, which
# must return within 20 s (a QP that never drains hangs it), and the
# target and the modules are taken down. Every wait is bounded: a hang
# fails the test. Skips only if the kernel has no nvme-rdma or nvmet-rdma.
# shellcheck disable=SC2016 # single-quoted scripts expand in sh -c or on host B
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"

nqn=nqn.2024-01.io.metaroce:nvmeof-selftest
serial=metaroce-nvmeof
port_id=1
nsid=1
svc=4420
mib=${NVMEOF_MIB:-16}     # MiB per pass (~1.3 MiB/s on the TCG rig)
io_secs=$((60 + 3 * mib)) # bound of each dd: >= 0.25 MiB/s (TCG does ~3)
cfs=/sys/kernel/config/nvmet

tmp=$(mktemp -d /tmp/nvmeof.XXXXXX) || fail "mktemp"
inst="" blk="" nb=0 out=""

now_ms() { echo $(($(date +%s%N) / 1000000)); }
rate() { awk -v m="$mib" -v t="$1" 'BEGIN { printf "%.2f MiB/s", m * 1000 / (t > 0 ? t : 1) }'; } # MS
step() { log "--- $*"; }

# bounded SECS CMD...: CMD under timeout(1), and a hard bound besides: a
# task blocked uninterruptibly in the kernel (a controller that never
# drains) ignores timeout's signals, and timeout(1) would wait for it
# forever. Returns CMD's status, or 124 if it had not returned after SECS
# (+5) s (it is then left behind); its output is in $out.
bounded() {
	local secs=$1 pid start end n=0 rc f
	shift
	nb=$((nb + 1))
	f=$tmp/bounded.$nb
	timeout -k 3 "$secs" "$@" > "$f" 2>&1 &
	pid=$!
	start=$SECONDS
	end=$((start + secs + 5))
	while kill -0 "$pid" 2> /dev/null; do
		if [ "$SECONDS" -ge "$end" ]; then
			out=$(cat "$f" 2> /dev/null)
			return 124
		fi
		n=$((n + 1))
		if [ $n -le 20 ]; then sleep 0.1; else sleep 1; fi
	done
	wait "$pid" 2> /dev/null
	rc=$?
	out=$(cat "$f" 2> /dev/null)
	# 137: CMD ignored timeout's TERM and took its KILL.
	[ $rc = 137 ] && [ $((SECONDS - start)) -ge "$secs" ] && rc=124
	return $rc
}

# peer_t SECS CMD: `peer` with its own bound (peer.py's default is 300 s;
# its client gives up SECS + 30 s after sending).
peer_t() {
	local t=$1
	shift
	/usr/bin/python3 "$METAROCE_RIG/peer.py" --timeout "$t" run -- "$@"
}

# The planes of the rig: plane 0, and plane 1 if there is one.
planes=(PLANE0_DEV)
[ -n "${PLANE1_DEV:-}" ] && planes+=(PLANE1_DEV)

# Host B's dmesg since line $1.
peer_dmesg_since() { peer "dmesg | tail -n +$(($1 + 1))"; }
dmesg_since() { dmesg | tail -n +$(($1 + 1)); }

# PDs of mr0 held by kernel module $1 (ib_alloc_pd records its caller's
# KBUILD_MODNAME; rdma lists kernel objects with comm [NAME]); with "peer"
# as $2, on host B.
ulp_pds() {
	local res
	if [ -n "${2:-}" ]; then res=$(peer rdma resource show pd); else res=$(rdma resource show pd); fi
	grep -E "^(link|dev) mr0[/ ]" <<< "$res" | grep -cF "[$1]" || true
}

# diag: what both hosts saw, into the log, before a failure.
diag() {
	log "A: nvme controllers: $(for c in /sys/class/nvme/nvme*; do [ -e "$c/state" ] && echo "${c##*/}=$(cat "$c/state")"; done)"
	log "A: nvme kernel log since the test started:"
	dmesg_since "$dmesg_mark" | grep -E 'nvme|metaroce|mr0' | tail -30
	log "B: nvmet kernel log since the test started:"
	peer_dmesg_since "$bmark0" 2>&1 | grep -E 'nvme|metaroce|mr0' | tail -30
	mr0_counters
	log "A: PDs: $(rdma resource show pd 2>&1 | grep -v '^$')"
	log "A: blocked tasks: $(grep -lE '^State:[[:space:]]+D' /proc/[0-9]*/status 2>/dev/null | head -5 | while read -r s; do d=${s%/status}; echo "${d##*/}:$(cat "$d/comm" 2>/dev/null)"; done)"
}

# --- Teardown pieces: each idempotent, each bounded, each works after any
# partial setup; the main flow runs them checked, the EXIT trap again. ---

# Host A: delete every controller of our subsystem; nonzero if one failed
# or did not return within 20 s.
host_disconnect_all() {
	local c rc=0
	for c in /sys/class/nvme/nvme*; do
		[ -e "$c/subsysnqn" ] || continue
		[ "$(cat "$c/subsysnqn" 2> /dev/null)" = "$nqn" ] || continue
		log "A: deleting controller ${c##*/} (state $(cat "$c/state" 2> /dev/null))"
		bounded 20 sh -c 'echo 1 > "$1"' _ "$c/delete_controller" ||
			{ log "A: deleting ${c##*/}: status $?: $out"; rc=1; }
	done
	return $rc
}

# Host A: nvme-rdma out (modprobe -r also takes nvme-fabrics and nvme-core
# if nothing else uses them).
host_unload() {
	[ -d /sys/module/nvme_rdma ] || return 0
	log "A: modprobe -r nvme_rdma"
	bounded 30 modprobe -r nvme_rdma || { log "A: modprobe -r nvme_rdma: status $?: $out"; return 1; }
	[ ! -d /sys/module/nvme_rdma ]
}

# Host B: the target's configfs in reverse order of creation (the port's
# link to the subsystem, which disables the port and drops its
# controllers; the namespace; the subsystem; the port), then the modules.
# Each removal bounded on B; nonzero if anything is left.
b_teardown='
rc=0
try() { echo "B: $*"; timeout 30 "$@" || { echo "B: FAILED (status $?): $*"; rc=1; }; }
if [ -d $cfs ]; then
	[ -L $cfs/ports/$port_id/subsystems/$nqn ] && try rm $cfs/ports/$port_id/subsystems/$nqn
	if [ -d $cfs/subsystems/$nqn/namespaces/$nsid ]; then
		echo "B: 0 > namespaces/$nsid/enable"
		echo 0 | timeout 30 tee $cfs/subsystems/$nqn/namespaces/$nsid/enable > /dev/null || rc=1
		try rmdir $cfs/subsystems/$nqn/namespaces/$nsid
	fi
	[ -d $cfs/subsystems/$nqn ] && try rmdir $cfs/subsystems/$nqn
	[ -d $cfs/ports/$port_id ] && try rmdir $cfs/ports/$port_id
fi
for m in nvmet_rdma nvmet null_blk; do
	[ -d /sys/module/$m ] && try modprobe -r $m
done
for m in nvmet_rdma nvmet null_blk; do
	[ -d /sys/module/$m ] && { echo "B: module $m still loaded"; rc=1; }
done
exit $rc'
target_teardown() {
	local o rc
	o=$(peer_t 200 "cfs=$cfs nqn=$nqn port_id=$port_id nsid=$nsid; $b_teardown" 2>&1)
	rc=$?
	[ -n "$o" ] && log "$o"
	return $rc
}

cleanup() {
	log "cleanup (EXIT trap)"
	host_disconnect_all
	host_unload
	target_teardown
	# lib.sh's two-plane cleanup (qdiscs, mr0 on both hosts, metaroce),
	# bounded: rdma link delete waits for the device's clients.
	bounded 120 bash -c ". '$here/lib.sh'; planes_cleanup" ||
		log "cleanup: planes_cleanup status $?: $out"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM

reset_rdma
bmark0=$(peer 'dmesg | wc -l') || fail "no peer channel to host B"

# --- Modules: skip only if the kernel has none ---
step "A: modprobe nvme-rdma"
if ! bounded 60 modprobe nvme-rdma; then
	modinfo nvme-rdma > /dev/null 2>&1 || skip "the kernel has no nvme-rdma module (CONFIG_NVME_RDMA)"
	fail "modprobe nvme-rdma failed: $out"
fi
[ -c /dev/nvme-fabrics ] || fail "nvme-rdma loaded but /dev/nvme-fabrics is missing"
step "B: modprobe nvmet-rdma"
o=$(peer_t 60 'if timeout 50 modprobe nvmet-rdma 2>&1; then echo nvmet-rdma:loaded
elif modinfo nvmet-rdma > /dev/null 2>&1; then echo nvmet-rdma:failed
else echo nvmet-rdma:missing; fi' 2>&1)
case $(tail -1 <<< "$o") in
nvmet-rdma:loaded) ;;
nvmet-rdma:missing) skip "host B's kernel has no nvmet-rdma module (CONFIG_NVME_TARGET_RDMA)" ;;
*) fail "modprobe nvmet-rdma failed on host B: $o" ;;
esac
# null_blk is no reason to skip: the config that has nvmet has it too.
# A null_blk left loaded would keep its old parameters: reload it.
step "B: modprobe null_blk nr_devices=1 gb=1 memory_backed=1"
o=$(peer_t 60 '[ -d /sys/module/null_blk ] && { timeout 30 modprobe -r null_blk || exit 1; }
timeout 30 modprobe null_blk nr_devices=1 gb=1 memory_backed=1 || exit 1
for i in $(seq 50); do [ -b /dev/nullb0 ] && break; sleep 0.1; done
[ -b /dev/nullb0 ] || { echo "no /dev/nullb0"; exit 1; }
echo "memory_backed=$(cat /sys/module/null_blk/parameters/memory_backed) size=$(cat /sys/block/nullb0/size)"' 2>&1) ||
	fail "null_blk on host B: $o"
log "B: nullb0: $o"
[ "$o" = "memory_backed=Y size=2097152" ] || fail "host B's nullb0 is not a 1 GiB memory-backed device: $o"

# --- MetaRoCE on every plane of both hosts ---
step "mr0 on ${planes[*]} of both hosts"
for d in "${planes[@]}"; do
	expect_ok rdma link add mr0 type metaroce netdev "${!d}"
	peer "rdma link add mr0 type metaroce netdev \$$d" > /dev/null || fail "mr0 on \$$d of host B"
done
plane0_gids mr0
log "ok: mr0 on both hosts, plane 0 GIDs $gid (A) and $pgid (B)"

# --- The target on host B (configfs) ---
step "B: nvmet subsystem $nqn, namespace $nsid on /dev/nullb0, port $port_id rdma $PEER_PLANE0_IP:$svc"
# The port takes no in-capsule data (param_inline_data_size 0): the host
# then sends every write, and each queue's Connect data, by reference, and
# the target fetches it with RDMA READ. With in-capsule data, an I/O
# queue's Connect that arrives before the CM's RTU is parked, then run by
# nvmet-rdma inside its rdma_cm event handler (nvmet_rdma_queue_established
# with the id's handler_mutex held), where it takes nvmet_config_sem; the
# teardown's rm of the port's link takes them in the other order (config_sem
# held, rdma_destroy_id of the listener takes a handler_mutex). Lockdep
# reported a circular dependency from that rm once on host B in CI (the
# report was cut short): this pair is the one 6.12's nvmet-rdma has, and no
# lock of this driver is in either path.
b_setup='
set -u
run() { echo "B: $*"; timeout 20 "$@" || { echo "B: FAILED (status $?): $*"; exit 1; }; }
put() { echo "B: $2 > ${1#$cfs/}"; echo "$2" | timeout 20 tee "$1" > /dev/null || { echo "B: FAILED: $2 > $1"; exit 1; }; }
mountpoint -q /sys/kernel/config || run mount -t configfs configfs /sys/kernel/config
[ -d $cfs ] || { echo "B: no $cfs (nvmet loaded?)"; exit 1; }
run mkdir $cfs/subsystems/$nqn
put $cfs/subsystems/$nqn/attr_allow_any_host 1
put $cfs/subsystems/$nqn/attr_serial $serial
run mkdir $cfs/subsystems/$nqn/namespaces/$nsid
put $cfs/subsystems/$nqn/namespaces/$nsid/device_path /dev/nullb0
put $cfs/subsystems/$nqn/namespaces/$nsid/enable 1
run mkdir $cfs/ports/$port_id
put $cfs/ports/$port_id/addr_trtype rdma
put $cfs/ports/$port_id/addr_adrfam ipv4
put $cfs/ports/$port_id/addr_traddr $traddr
put $cfs/ports/$port_id/addr_trsvcid $svc
put $cfs/ports/$port_id/param_inline_data_size 0
# The link enables the port: nvmet-rdma binds and listens on traddr (mr0).
run ln -s $cfs/subsystems/$nqn $cfs/ports/$port_id/subsystems/$nqn
echo "B: namespace enable=$(cat $cfs/subsystems/$nqn/namespaces/$nsid/enable)"'
o=$(peer_t 120 "cfs=$cfs nqn=$nqn serial=$serial port_id=$port_id nsid=$nsid traddr=$PEER_PLANE0_IP svc=$svc; $b_setup" 2>&1)
rc=$?
log "$o"
[ $rc = 0 ] || fail "target setup on host B failed (status $rc): $(tail -3 <<< "$o")$(peer_dmesg_since "$bmark0" | grep -E 'nvmet' | tail -5)"
peer_dmesg_since "$bmark0" | grep -qF "nvmet_rdma: enabling port $port_id ($PEER_PLANE0_IP:$svc)" ||
	fail "host B's kernel log lacks 'nvmet_rdma: enabling port $port_id ($PEER_PLANE0_IP:$svc)'"
log "ok: host B listens for NVMe/RDMA on $PEER_PLANE0_IP:$svc"

# --- Connect from host A ---
opts="transport=rdma,traddr=$PEER_PLANE0_IP,trsvcid=$svc,nqn=$nqn,host_traddr=$PLANE0_IP"
step "A: connect: '$opts' > /dev/nvme-fabrics (bound 60 s)"
t0=$(now_ms)
# One open file: the write creates the controller (and returns when it is
# live), the read on the same file answers "instance=N,cntlid=M".
bounded 60 bash -c 'exec 3<> /dev/nvme-fabrics && printf "%s" "$1" >&3 && head -n 1 <&3' _ "$opts"
rc=$?
[ $rc = 124 ] && { diag; fail "connect did not return within 60 s"; }
[ $rc = 0 ] || { diag; fail "connect failed (status $rc): $out"; }
inst=$(sed -n 's/^instance=\([0-9]*\),cntlid=\([0-9]*\)$/\1/p' <<< "$out")
[ -n "$inst" ] || fail "unexpected reply from /dev/nvme-fabrics: '$out'"
ctrl=/sys/class/nvme/nvme$inst
log "ok: connected in $(($(now_ms) - t0)) ms: $out"
[ -d "$ctrl" ] || fail "no $ctrl after the connect"
log "A: nvme$inst: transport $(cat "$ctrl/transport"), address $(cat "$ctrl/address"), state $(cat "$ctrl/state"), queues $(cat "$ctrl/queue_count" 2>/dev/null), sqsize $(cat "$ctrl/sqsize" 2>/dev/null)"
[ "$(cat "$ctrl/transport")" = rdma ] || fail "nvme$inst transport is $(cat "$ctrl/transport"), not rdma"
[ "$(cat "$ctrl/subsysnqn")" = "$nqn" ] || fail "nvme$inst is subsystem $(cat "$ctrl/subsysnqn"), not $nqn"
[ "$(cat "$ctrl/state")" = live ] || fail "nvme$inst is $(cat "$ctrl/state") after the connect, not live"
s=$(cat "$ctrl/serial")
[ "${s%% *}" = "$serial" ] || fail "nvme$inst serial '$s', not the target's '$serial'"
# The queues' PDs: nvme-rdma's on A's mr0, nvmet-rdma's on B's (the only
# RDMA devices: reset_rdma removed every other link).
n=$(ulp_pds nvme_rdma)
[ "$n" -ge 1 ] || fail "no nvme_rdma PD on host A's mr0: $(rdma resource show pd)"
n=$(ulp_pds nvmet_rdma peer)
[ "$n" -ge 1 ] || fail "no nvmet_rdma PD on host B's mr0: $(peer rdma resource show pd)"
log "ok: the queues are on mr0 (A: nvme_rdma PD, B: nvmet_rdma PD); $(rdma resource show qp link mr0/1 | grep -c 'type RC') RC QPs on A"

# --- The namespace's block device (the scan is asynchronous) ---
step "A: waiting for the namespace under $ctrl (bound 30 s)"
for _ in $(seq 60); do
	for d in "$ctrl"/nvme*; do
		n=${d##*/}
		# nvmeXnY; with native multipath the path is nvmeXcYnZ, hidden
		# behind the head nvmeXnZ.
		if [[ $n =~ ^nvme[0-9]+n[0-9]+$ ]]; then
			blk=$n
		elif [[ $n =~ ^nvme([0-9]+)c[0-9]+n([0-9]+)$ ]]; then
			blk=nvme${BASH_REMATCH[1]}n${BASH_REMATCH[2]}
		fi
	done
	[ -n "$blk" ] && [ -b "/dev/$blk" ] && break
	sleep 0.5
done
[ -n "$blk" ] || { diag; fail "no namespace appeared under $ctrl in 30 s"; }
[ -b "/dev/$blk" ] || fail "no block device /dev/$blk"
size=$(cat "/sys/class/block/$blk/size")
[ "$size" = 2097152 ] || fail "/dev/$blk has $size sectors, not host B's 1 GiB null_blk (2097152)"
log "ok: /dev/$blk, 1 GiB: host B's nullb0"

# pass LABEL OFFSET_MIB: a new $mib MiB random pattern written at OFFSET
# with O_DIRECT (and fsync), its checksum then checked in B's null_blk
# and in what an O_DIRECT read on A returns; the controller stays live,
# neither kernel logs an NVMe error, and mr0 carried the data both ways.
pass() {
	local label=$1 off=$2 sum bsum rsum t ms amark bmark a_tx b_tx a_rx
	step "pass: $label: $mib MiB at $off MiB"
	amark=$(dmesg | wc -l)
	bmark=$(peer 'dmesg | wc -l')
	a_tx=$(mr0_stat tx_bytes) b_tx=$(mr0_stat tx_bytes peer)
	log "A: $mib MiB from /dev/urandom into $tmp/pattern"
	bounded 120 sh -c 'head -c "$1" /dev/urandom > "$2"' _ $((mib * 1048576)) "$tmp/pattern" ||
		fail "no random pattern: $out"
	sum=$(sha256sum < "$tmp/pattern" | cut -d' ' -f1)

	log "A: dd of=/dev/$blk bs=1M count=$mib seek=$off oflag=direct conv=fsync (bound $io_secs s)"
	t=$(now_ms)
	bounded $io_secs dd if="$tmp/pattern" of="/dev/$blk" bs=1M count=$mib seek="$off" oflag=direct conv=fsync status=none
	rc=$?
	ms=$(($(now_ms) - t))
	[ $rc = 124 ] && { diag; fail "$label: writing $mib MiB did not finish in $io_secs s (I/O hung)"; }
	[ $rc = 0 ] || { diag; fail "$label: writing to /dev/$blk failed (status $rc): $out"; }
	log "ok: wrote $mib MiB in $ms ms ($(rate "$ms"))"

	log "B: sha256 of nullb0 at $off MiB"
	o=$(peer_t 120 "set -o pipefail; timeout 110 dd if=/dev/nullb0 bs=1M skip=$off count=$mib iflag=direct status=none | sha256sum" 2>&1) ||
		fail "$label: reading nullb0 on host B failed: $o"
	bsum=$(awk 'length($1) == 64 { s = $1 } END { print s }' <<< "$o")
	[ "$bsum" = "$sum" ] || fail "$label: host B's null_blk holds other data than host A wrote ($bsum, want $sum)"
	log "ok: host B's null_blk holds the pattern ($sum)"

	log "A: dd if=/dev/$blk bs=1M count=$mib skip=$off iflag=direct (bound $io_secs s)"
	t=$(now_ms)
	bounded $io_secs dd if="/dev/$blk" of="$tmp/readback" bs=1M count=$mib skip="$off" iflag=direct status=none
	rc=$?
	ms=$(($(now_ms) - t))
	[ $rc = 124 ] && { diag; fail "$label: reading $mib MiB did not finish in $io_secs s (I/O hung)"; }
	[ $rc = 0 ] || { diag; fail "$label: reading /dev/$blk failed (status $rc): $out"; }
	log "ok: read $mib MiB in $ms ms ($(rate "$ms"))"
	rsum=$(sha256sum < "$tmp/readback" | cut -d' ' -f1)
	if [ "$rsum" != "$sum" ]; then
		log "first difference: $(cmp "$tmp/pattern" "$tmp/readback" 2>&1 | head -1)"
		log "differing 4 KiB blocks: $(cmp -l "$tmp/pattern" "$tmp/readback" 2>/dev/null |
			awk '{ b = int(($1 - 1) / 4096); if (!(b in s)) { s[b]; n++; if (n <= 16) printf "%d ", b } } END { printf "(%d in all)", n }')"
		fail "$label: read back other data than written ($rsum, want $sum)"
	fi
	log "ok: read back what was written, $label"
	rm -f "$tmp/pattern" "$tmp/readback"

	# No error recovery, timeout or failed work request on either side.
	[ "$(cat "$ctrl/state")" = live ] || { diag; fail "$label: nvme$inst is $(cat "$ctrl/state"), not live"; }
	o=$(dmesg_since "$amark" | grep -Ei 'nvme nvme[0-9]+: .*(error recovery|timeout|reconnect|failed|bogus|bad command_id|unexpected|rejected)')
	[ -z "$o" ] || { diag; fail "$label: host A's nvme reported errors: $o"; }
	o=$(peer_dmesg_since "$bmark" | grep -Ei 'nvmet(_rdma)?: .*(expired|failed|IB QP event|fatal|invalid)')
	[ -z "$o" ] || { diag; fail "$label: host B's nvmet reported errors: $o"; }
	# The data crossed mr0: A sent the written data (B's RDMA READs), B
	# the read data (its RDMA WRITEs).
	a_tx=$(($(mr0_stat tx_bytes) - a_tx)) b_tx=$(($(mr0_stat tx_bytes peer) - b_tx))
	log "mr0 sent $a_tx bytes on A, $b_tx on B during the pass"
	[ "$a_tx" -ge $((mib * 1048576)) ] || fail "$label: host A's mr0 sent only $a_tx bytes for $mib MiB written"
	[ "$b_tx" -ge $((mib * 1048576)) ] || fail "$label: host B's mr0 sent only $b_tx bytes for $mib MiB read"
	for a_rx in "$(mr0_stat rx_malformed)" "$(mr0_stat rx_malformed peer)"; do
		[ "$a_rx" = 0 ] || fail "$label: $a_rx malformed packets on mr0"
	done
}

pass "lossless" 0

# --- 1% loss on every plane, both directions ---
step "netem loss 1% on ${planes[*]} of both hosts"
for d in "${planes[@]}"; do
	expect_ok tc qdisc add dev "${!d}" root netem loss 1%
	peer "tc qdisc add dev \$$d root netem loss 1%" || fail "netem on \$$d of host B"
done
retx0=$(($(mr0_stat retransmissions) + $(mr0_stat retransmissions peer)))
pass "1% loss on every plane" "$mib"
for d in "${planes[@]}"; do
	a=$(tc -s qdisc show dev "${!d}" | sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -1)
	b=$(peer "tc -s qdisc show dev \$$d" | sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -1)
	log "netem dropped ${a:-0} packets leaving host A and ${b:-0} leaving host B on $d"
	if [ "${a:-0}" = 0 ] || [ "${b:-0}" = 0 ]; then
		fail "netem dropped nothing on $d of a host: the loss run proves nothing"
	fi
	expect_ok tc qdisc del dev "${!d}" root
	peer "tc qdisc del dev \$$d root" || fail "removing netem on \$$d of host B"
done
retx=$(($(mr0_stat retransmissions) + $(mr0_stat retransmissions peer) - retx0))
[ "$retx" -gt 0 ] || fail "no retransmissions counted under loss"
log "ok: mr0 retransmitted $retx packets (hosts A+B) under loss"

# --- Disconnect: must return within 20 s ---
step "A: disconnect: 1 > $ctrl/delete_controller (bound 20 s)"
t0=$(now_ms)
bounded 20 sh -c 'echo 1 > "$1"' _ "$ctrl/delete_controller"
rc=$?
ms=$(($(now_ms) - t0))
if [ $rc = 124 ] || [ $ms -gt 20000 ]; then
	diag
	fail "disconnect hangs: writing delete_controller of nvme$inst did not return within 20 s (its queues never drained?)"
fi
[ $rc = 0 ] || fail "delete_controller of nvme$inst failed (status $rc): $out"
log "ok: nvme$inst deleted in $ms ms"
[ ! -e "$ctrl" ] || fail "$ctrl still exists after delete_controller returned"
[ ! -e "/dev/$blk" ] || fail "/dev/$blk still exists after the controller was deleted"
for _ in $(seq 10); do
	n=$(ulp_pds nvme_rdma)
	[ "$n" = 0 ] && break
	sleep 0.5
done
[ "$n" = 0 ] || fail "host A's mr0 still has $n nvme_rdma PDs 5 s after the controller was deleted"
log "ok: nvme-rdma released its resources on mr0"

# --- Target and modules down ---
step "B: target teardown (port link, namespace, subsystem, port; nvmet-rdma, nvmet, null_blk)"
target_teardown || fail "target teardown on host B failed"
step "A: unloading nvme-rdma"
host_unload || fail "cannot unload nvme_rdma on host A: $out"
log "ok: NVMe/RDMA over MetaRoCE: $mib MiB written and read back intact, lossless and at 1% loss; disconnect in $ms ms"
