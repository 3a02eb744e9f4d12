#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The Debian packages, end to end on both hosts: install metaroce-dkms and
# libmetaroce-provider (built on the build machine by `make deb`, taken from
# $METAROCE_DEBS, default build/deb), let DKMS build metaroce.ko for the
# running kernel, create mr0 with `rdma link add` (the module autoloaded
# from DKMS's updates/dkms), run ibv_rc_pingpong --chk between the hosts
# through the packaged provider, then purge both packages and check that
# nothing is left: files, the DKMS tree, the module (loaded or findable).
# The rig's own module and provider (guest.sh put them in the guests'
# overlays) are set aside first, so only the packages can serve, and put
# back at the end for the tests that follow. Slow under TCG: DKMS compiles
# the module in each guest (both at once): 1,395-1,484 s, the test 1,718 s
# (2026-12-06, c6a72d2).
. "$(dirname "$0")/lib.sh"

kver=$(uname -r)
debs=${METAROCE_DEBS:-$METAROCE_REPO/build/deb}
# The toolchain DKMS's build must use: the one the rig kernel was built
# with (kernel.sh pins it the same way); a user would set rustup's default.
toolchain=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' "$METAROCE_REPO/rust-toolchain.toml")
pkgs=(metaroce-dkms libmetaroce-provider)

# The functions below run on both hosts (on B through `peer "$(declare -f
# f); f"`): they only use their arguments and the rig's paths.

# rig_aside KVER: no metaroce.ko and no provider but the packages'.
rig_aside() {
	rmmod metaroce 2> /dev/null
	rm -f "/lib/modules/$1/extra/metaroce.ko" && depmod -a "$1" &&
		"$METAROCE_REPO/provider/install.sh" --uninstall > /dev/null
}
# rig_restore KVER: the packages gone, the rig's module and provider back.
rig_restore() {
	rmmod metaroce 2> /dev/null
	dpkg --purge metaroce-dkms libmetaroce-provider > /dev/null 2>&1
	mkdir -p "/lib/modules/$1/extra" && cp "$METAROCE_REPO/metaroce.ko" "/lib/modules/$1/extra/" &&
		depmod -a "$1" && "$METAROCE_REPO/provider/install.sh" --no-build > /dev/null
}
# pkg_install TOOLCHAIN DKMS_DEB PROVIDER_DEB: dpkg -i; DKMS builds in the
# dkms package's postinst. Prints the log's tail (and DKMS's make.log) on
# failure.
pkg_install() {
	local log=/tmp/metaroce-package-install.log
	if ! RUSTUP_TOOLCHAIN=$1 DEBIAN_FRONTEND=noninteractive dpkg -i "$2" "$3" > $log 2>&1; then
		tail -n 30 $log
		cat /var/lib/dkms/metaroce/*/build/make.log 2> /dev/null | tail -n 30
		return 1
	fi
}
# pkg_installed KVER: what the packages must have put in place.
pkg_installed() {
	local bad=0 f
	dkms status -m metaroce -k "$1" | grep -q ": installed" || { echo "dkms: $(dkms status -m metaroce)"; bad=1; }
	case "$(modinfo -n metaroce 2>&1)" in
	*/updates/dkms/metaroce.ko*) ;;
	*) echo "modprobe would load $(modinfo -n metaroce 2>&1), not DKMS's"; bad=1 ;;
	esac
	for f in /etc/libibverbs.d/metaroce.driver /usr/lib/*/libibverbs/libmetaroce-rdmav34.so \
		/usr/share/man/man7/metaroce.7.gz; do
		dpkg -S "$f" > /dev/null 2>&1 || { echo "$f: not installed by a package"; bad=1; }
	done
	return $bad
}
# leftovers KVER: prints whatever the packages left behind; fails if any.
leftovers() {
	local out="" p f
	for p in metaroce-dkms libmetaroce-provider; do
		case "$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2> /dev/null)" in
		"" | un*) ;;
		*) out+="package $p: $(dpkg-query -W -f='${db:Status-Abbrev}' "$p"); " ;;
		esac
	done
	for f in /usr/src/metaroce-* /var/lib/dkms/metaroce /etc/libibverbs.d/metaroce.driver \
		/usr/lib/*/libibverbs/libmetaroce-rdmav*.so /usr/share/man/man7/metaroce.7* \
		/usr/share/doc/metaroce-dkms /usr/share/doc/libmetaroce-provider /sys/module/metaroce \
		$(find "/lib/modules/$1/" -name 'metaroce.ko*' 2> /dev/null); do
		[ -e "$f" ] && out+="$f; "
	done
	modinfo metaroce > /dev/null 2>&1 && out+="modinfo still finds metaroce; "
	[ -z "$out" ] || { echo "$out"; return 1; }
}
on_b() { peer "$(declare -f "$1"); METAROCE_REPO=$METAROCE_REPO; $*"; }

cleanup() {
	two_host_cleanup
	[ -n "${aside:-}" ] || return 0
	rig_restore "$kver" || echo "host A: the rig's module and provider not restored"
	on_b rig_restore "$kver" > /dev/null 2>&1 || echo "host B: the rig's module and provider not restored"
}
trap cleanup EXIT
reset_rdma
command -v dkms > /dev/null || skip "dkms not installed (make deb installs it: selftests/rig/deps.sh --deb)"
command -v ibv_rc_pingpong > /dev/null || skip "ibverbs-utils not installed"
newest() { # the last existing file of a glob
	local f last=""
	for f in "$@"; do [ -e "$f" ] && last=$f; done
	echo "$last"
}
dkms_deb=$(newest "$debs"/metaroce-dkms_*_all.deb)
prov_deb=$(newest "$debs"/libmetaroce-provider_*_"$(dpkg --print-architecture)".deb)
if [ -z "$dkms_deb" ] || [ -z "$prov_deb" ]; then
	skip "no packages in $debs: run make deb on the build machine"
fi
[ -f "/lib/modules/$kver/build/.config" ] || skip "no build tree for $kver (/lib/modules/$kver/build)"
log "packages: $dkms_deb $prov_deb"

aside=1
rig_aside "$kver" || fail "cannot set the rig's module and provider aside on host A"
on_b rig_aside "$kver" || fail "cannot set the rig's module and provider aside on host B"
modinfo metaroce > /dev/null 2>&1 && fail "host A: a metaroce module is still findable: $(modinfo -n metaroce)"
peer "modinfo -n metaroce" > /dev/null 2>&1 &&
	fail "host B: a metaroce module is still findable: $(peer 'modinfo -n metaroce' 2>&1)"

# Both hosts at once: each guest's DKMS compiles the module.
begin=$(date +%s)
job=$(peer_spawn "$(declare -f pkg_install); pkg_install $toolchain $dkms_deb $prov_deb") ||
	fail "cannot start the install on host B"
# B's install ends before any verdict, so that the cleanup never meets a
# dpkg still running there.
out=$(pkg_install "$toolchain" "$dkms_deb" "$prov_deb")
rc=$?
outb=$(peer_wait "$job" 2400) || fail "dpkg -i on host B: $outb"
[ $rc = 0 ] || fail "dpkg -i on host A: $out"
log "ok: both packages installed on both hosts, DKMS built metaroce.ko in $(($(date +%s) - begin)) s"
out=$(pkg_installed "$kver") || fail "host A: $out"
out=$(on_b pkg_installed "$kver") || fail "host B: $out"
log "ok: module in updates/dkms, provider, .driver and metaroce(7) from the packages"
log "$(dkms status -m metaroce)"

# The packaged module, autoloaded; the packaged provider.
expect_ok rdma link add mr0 type metaroce netdev "$PLANE0_DEV"
[ -d /sys/module/metaroce ] || fail "rdma link add did not autoload metaroce"
peer "rdma link add mr0 type metaroce netdev \$PLANE0_DEV" > /dev/null || fail "mr0 on host B"
ibv_devices | grep -q "mr0" || fail "libibverbs does not list mr0 (packaged provider not loaded)"
plane0_gids mr0
pingpong_run ibv_rc_pingpong 100 "packages" -d mr0 -n 100 -s 16384 -c
log "ok: ibv_rc_pingpong --chk between the hosts over the packaged module and provider"

expect_ok rdma link delete mr0
expect_ok rmmod metaroce
peer "rdma link delete mr0 && rmmod metaroce" > /dev/null || fail "cannot remove mr0 and metaroce on host B"

out=$(dpkg --purge "${pkgs[@]}" 2>&1) || fail "dpkg --purge on host A: $out"
out=$(peer "dpkg --purge ${pkgs[*]}" 2>&1) || fail "dpkg --purge on host B: $out"
out=$(leftovers "$kver") || fail "host A after purge: $out"
out=$(on_b leftovers "$kver") || fail "host B after purge: $out"
log "ok: purged on both hosts: no files, no DKMS tree, no module left"
