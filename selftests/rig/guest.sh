#!/bin/bash
# Runs inside each rig VM (as vng's --exec command).
#   guest.sh ROLE OUTDIR PLANES MODE
# ROLE is A or B. Both name their links (found by MAC), address them, and
# write /run/metaroce/env for the tests. B serves the peer channel until A
# says shutdown; A runs MODE (selftests | demo | a command) and then stops B.
# Each host leaves its dmesg in OUTDIR/<ROLE>.dmesg.
set -u
role=$1 out=$2 planes=$3 mode=$4
rig=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$rig/../.." && pwd)

case $role in A) hb=0a n=1 peer_n=2 ;; B) hb=0b n=2 peer_n=1 ;; *) echo "bad role $role"; exit 2 ;; esac

ifname_by_mac() {
	local f
	for f in /sys/class/net/*/address; do
		[ "$(cat "$f")" = "$1" ] && { basename "$(dirname "$f")"; return 0; }
	done
	return 1
}

mkdir -p /run/metaroce
env=/run/metaroce/env
{
	echo "export METAROCE_ROLE=$role METAROCE_REPO=$repo METAROCE_RIG=$rig"
	echo "export METAROCE_OUT=$out METAROCE_PLANES=$planes"
	echo "export PATH=/usr/sbin:/usr/bin:/sbin:/bin"
	cat "$out/env" 2>/dev/null
} > $env

ip link set lo up
for ((p = 0; p < planes; p++)); do
	mac=$(printf '52:54:00:00:%s:%02x' $hb $p)
	dev=$(ifname_by_mac "$mac") || { echo "rig: no link with MAC $mac"; exit 1; }
	ip link set "$dev" up
	ip addr add "198.18.$p.$n/24" dev "$dev"
	echo "export PLANE${p}_DEV=$dev PLANE${p}_IP=198.18.$p.$n PEER_PLANE${p}_IP=198.18.$p.$peer_n" >> $env
done
mdev=$(ifname_by_mac "52:54:00:00:$hb:ff") || { echo "rig: no management link"; exit 1; }
ip link set "$mdev" up
ip addr add "198.19.0.$n/24" dev "$mdev"
echo "export METAROCE_PEER_ADDR=198.19.0.$peer_n" >> $env

# Modules built for this kernel, plus ours, where modprobe (and the rdma
# link autoload) can find them: an overlay so the host tree stays untouched.
# Its upper layer is on /run (tmpfs): overlayfs cannot be an upper layer.
kver=$(uname -r)
if [ -d "/lib/modules/$kver" ] && [ -f "$repo/metaroce.ko" ]; then
	mkdir -p /run/metaroce/mods-up /run/metaroce/mods-work
	mount -t overlay overlay -o "lowerdir=/lib/modules/$kver,upperdir=/run/metaroce/mods-up,workdir=/run/metaroce/mods-work" "/lib/modules/$kver" ||
		{ echo "rig: cannot overlay /lib/modules/$kver"; exit 1; }
	mkdir -p "/lib/modules/$kver/extra"
	cp "$repo/metaroce.ko" "/lib/modules/$kver/extra/"
	depmod -a
fi

# The provider, where the guest's libibverbs finds it (/usr and /etc are
# guest-local overlays: the host keeps its own).
if [ -f "$repo/target/release/libmetaroce_provider.so" ]; then
	"$repo/provider/install.sh" --no-build > /dev/null || { echo "rig: provider install failed"; exit 1; }
fi

# Stalls of this VM, which tests show beside a failure (lib.sh longest_stall).
"$rig/stallwatch.sh" /run/metaroce/stalls &

# shellcheck source=/dev/null
. $env
if [ "$role" = B ]; then
	/usr/bin/python3 "$rig/peer.py" --addr "198.19.0.$n" serve
	dmesg > "$out/B.dmesg"
	exit 0
fi

/usr/bin/python3 "$rig/peer.py" --timeout 120 ping || { echo "rig: peer B never came up"; dmesg > "$out/A.dmesg"; exit 1; }
case $mode in
selftests) "$repo/selftests/run_tests.sh" | tee "$out/tap.txt"; rc=${PIPESTATUS[0]} ;;
demo) "$rig/demo.sh"; rc=$? ;;
*) sh -c "$mode"; rc=$? ;;
esac
/usr/bin/python3 "$rig/peer.py" shutdown
dmesg > "$out/A.dmesg"
echo "$rc" > "$out/A.rc"
exit "$rc"
