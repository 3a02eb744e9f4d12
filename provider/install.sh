#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# Builds and installs the MetaRoCE libibverbs provider where the system's
# rdma-core 44 finds it:
#   $LIBDIR/libmetaroce-rdmav34.so     (LIBDIR: libibverbs' provider dir,
#                                       /usr/lib/<multiarch>/libibverbs)
#   $CONFDIR/metaroce.driver           (CONFDIR: /etc/libibverbs.d)
# Idempotent: reinstalling replaces both files atomically.
#
#   provider/install.sh                 build (release) and install
#   provider/install.sh --no-build      install what target/release holds
#   provider/install.sh --uninstall     remove both files
#   DESTDIR=/tmp/stage provider/install.sh   stage into a root
#
# It refuses (exit 1, nothing installed) a provider whose private ABI (the
# 34 in rdmav34) is not the system libibverbs' (provider/pabi.sh): that
# libibverbs would never open it. LIBIBVERBS=FILE names the libibverbs to
# compare with (default: the system's).
#
# Without installing, libibverbs also loads the provider from a path:
#   RDMAV_DRIVERS=/dir/libmetaroce ibv_devices   (opens /dir/libmetaroce-rdmav34.so)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
multiarch=$(gcc -print-multiarch 2>/dev/null || dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
LIBDIR=${LIBDIR:-/usr/lib/$multiarch/libibverbs}
CONFDIR=${CONFDIR:-/etc/libibverbs.d}
DESTDIR=${DESTDIR:-}
conf="$DESTDIR$CONFDIR/metaroce.driver"
target=${CARGO_TARGET_DIR:-$root/target}
built="$target/release/libmetaroce_provider.so"

case "${1:-}" in
--uninstall)
	rm -f "$DESTDIR$LIBDIR"/libmetaroce-rdmav*.so "$conf"
	echo "removed $DESTDIR$LIBDIR/libmetaroce-rdmav*.so $conf"
	exit 0
	;;
--no-build) ;;
"")
	# The sources' ABI first: a mismatch fails before a build.
	"$here/pabi.sh" check
	PATH="$HOME/.cargo/bin:$PATH"
	(cd "$root" && cargo build --release --quiet -p metaroce-provider)
	;;
*)
	echo "usage: $0 [--no-build|--uninstall]" >&2
	exit 2
	;;
esac

[ -f "$built" ] || { echo "$built missing: build first" >&2; exit 1; }
"$here/pabi.sh" check "$built"
lib="$DESTDIR$LIBDIR/libmetaroce-rdmav$("$here/pabi.sh" provider "$built").so"

install -d "$DESTDIR$LIBDIR" "$DESTDIR$CONFDIR"
install -m 0644 "$built" "$lib.tmp.$$" && mv -f "$lib.tmp.$$" "$lib"
install -m 0644 "$here/metaroce.driver" "$conf.tmp.$$" && mv -f "$conf.tmp.$$" "$conf"
echo "installed $lib $conf"
