#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# rdma-core's private provider ABI ("PABI") of the system libibverbs and of
# our provider. libibverbs links its providers against the symbol version
# IBVERBS_PRIVATE_<PABI> and opens, for `driver metaroce`, only
# libmetaroce-rdmav<PABI>.so: a provider built for another PABI is never
# loaded, and nothing says so (MetaRoCE devices are just missing from
# ibv_devices). install.sh, make install and debian/rules refuse a
# mismatch through `check`.
#
#   provider/pabi.sh system          the system libibverbs' PABI
#                                    (LIBIBVERBS=FILE asks another library)
#   provider/pabi.sh provider [LIB]  ours: of the built provider LIB (its
#                                    SONAME and the verbs_register_driver_N
#                                    it needs must agree), else of the
#                                    sources (build.rs's SONAME)
#   provider/pabi.sh check [LIB]     exit 1 with a message unless they agree
#   provider/pabi.sh rdma-core       the rdma-core release whose private
#                                    headers src/abi.rs mirrors (44)
#
# Needs binutils' nm for libraries; without it, reads the symbol names
# from the file itself.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# The rdma-core release src/abi.rs mirrors (driver.h, kern-abi.h v44.0).
RDMA_CORE=44

die() { echo "provider/pabi.sh: $*" >&2; exit 1; }

libibverbs() {
	if [ -n "${LIBIBVERBS:-}" ]; then
		echo "$LIBIBVERBS"
		return
	fi
	lib=$(/sbin/ldconfig -p 2>/dev/null | sed -n 's/^[[:space:]]*libibverbs\.so\.1 (.*) => //p' | head -n 1)
	if [ -z "$lib" ]; then
		multiarch=$(gcc -print-multiarch 2>/dev/null || dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
		lib=/usr/lib/$multiarch/libibverbs.so.1
	fi
	echo "$lib"
}

# The dynamic symbols of $1 (--defined-only or --undefined-only in $2), one
# "name@version" per line; without nm, the names of the dynamic string table.
dynsyms() {
	if command -v nm > /dev/null; then
		nm -D "$2" "$1" | awk '{ print $NF }'
	else
		grep -ao 'verbs_register_driver_[0-9]*\|IBVERBS_PRIVATE_[0-9]*' "$1"
	fi
}

system_pabi() {
	lib=$(libibverbs)
	[ -r "$lib" ] || die "no libibverbs.so.1 found ($lib): install libibverbs1 (rdma-core)"
	n=$(dynsyms "$lib" --defined-only | sed -n 's/^verbs_register_driver_\([0-9][0-9]*\)\(@@IBVERBS_PRIVATE_\1\)\{0,1\}$/\1/p' | sort -n | tail -n 1)
	[ -n "$n" ] || die "$lib exports no verbs_register_driver_<N>: not an rdma-core libibverbs?"
	echo "$n"
}

provider_pabi() {
	if [ -z "${1:-}" ]; then
		n=$(sed -n 's/.*-soname,libmetaroce-rdmav\([0-9][0-9]*\)\.so.*/\1/p' "$here/build.rs")
		[ -n "$n" ] || die "$here/build.rs names no libmetaroce-rdmav<N>.so SONAME"
		echo "$n"
		return
	fi
	[ -r "$1" ] || die "$1 missing: build the provider first"
	soname=$(objdump -p "$1" 2>/dev/null | sed -n 's/^ *SONAME *libmetaroce-rdmav\([0-9][0-9]*\)\.so$/\1/p')
	if [ -z "$soname" ] && ! command -v objdump > /dev/null; then
		soname=$(grep -ao 'libmetaroce-rdmav[0-9]*\.so' "$1" | head -n 1 | tr -cd 0-9)
	fi
	needs=$(dynsyms "$1" --undefined-only | sed -n 's/^verbs_register_driver_\([0-9][0-9]*\).*/\1/p' | sort -u)
	[ -n "$soname" ] || die "$1 has no libmetaroce-rdmav<N>.so SONAME"
	[ "$needs" = "$soname" ] || die "$1 is inconsistent: SONAME for PABI $soname, but it registers through verbs_register_driver_${needs:-?}"
	echo "$soname"
}

case "${1:-}" in
system) system_pabi ;;
provider) provider_pabi "${2:-}" ;;
rdma-core) echo "$RDMA_CORE" ;;
check)
	mine=$(provider_pabi "${2:-}")
	sys=$(system_pabi)
	lib=$(libibverbs)
	ver=""
	[ -n "${LIBIBVERBS:-}" ] || ver=$(dpkg-query -W -f='${Version}' libibverbs1 2>/dev/null || true)
	if [ "$mine" != "$sys" ]; then
		cat >&2 << EOF
provider/pabi.sh: ABI mismatch: the system libibverbs ($lib${ver:+, rdma-core $ver}) has
private ABI $sys, the MetaRoCE provider is built for $mine. libibverbs would only look
for libmetaroce-rdmav$sys.so, never load ours, and MetaRoCE devices would be missing from
ibv_devices without a word. Not installing. The provider mirrors rdma-core $RDMA_CORE's
private headers (provider/src/abi.rs): port it to this rdma-core, or install rdma-core $RDMA_CORE.
EOF
		exit 1
	fi
	case "$ver" in
	"" | "$RDMA_CORE".* | "$RDMA_CORE"-*) ;;
	*) echo "provider/pabi.sh: warning: libibverbs1 is $ver; the provider mirrors rdma-core $RDMA_CORE's private structures (same PABI $sys, but their layout is only checked for $RDMA_CORE)" >&2 ;;
	esac
	;;
*)
	echo "usage: $0 system | provider [LIB] | check [LIB] | rdma-core" >&2
	exit 2
	;;
esac
