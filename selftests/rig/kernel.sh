#!/usr/bin/env bash
# Build (once per machine) the Rust-enabled test kernel from Debian's
# linux-source-6.12 and print the path of its tree on stdout.
#
# The tree lives outside the repo, under $METAROCE_CACHE (default
# /var/lib/metaroce; not /var/cache, which virtme-ng hides in its guests), keyed by everything that goes into it: the source
# package version, the two config files, this script and the toolchain
# versions, and RECIPE below (bump it when a change to this script changes
# the kernel it builds). A warm call costs a hash and a stat.
# With --path, only print the tree if it is already built (else exit 1).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${METAROCE_CACHE:-/var/lib/metaroce}
tarball=/usr/src/linux-source-6.12.tar.xz
venv=${METAROCE_VENV:-/opt/metaroce-venv}
export PATH="$venv/bin:$HOME/.cargo/bin:$PATH"

log() { printf 'kernel: %s\n' "$*" >&2; }

[ -r "$tarball" ] || { log "$tarball missing: run selftests/rig/deps.sh"; exit 1; }

RECIPE=1
key=$( {
	dpkg-query -W -f='${Version}\n' linux-source-6.12
	cat "$here/trim.config" "$repo/selftests/config"
	echo "recipe $RECIPE"
	rustc --version; clang --version | head -1; bindgen --version
} | sha256sum | cut -c1-16)
tree="$cache/kernel-$key/linux-source-6.12"

if [ -f "$tree/.metaroce-built" ]; then
	echo "$tree"
	exit 0
fi
if [ "${1:-}" = --path ]; then
	# Asked only where the tree is: say it is not built, build nothing.
	exit 1
fi

log "cold build into $tree (key $key)"
rm -rf "$cache/kernel-$key"
mkdir -p "$cache/kernel-$key"
tar -C "$cache/kernel-$key" -xf "$tarball"
cd "$tree"

make -s LLVM=1 rustavailable >&2
virtme-configkernel --defconfig --custom "$here/trim.config" \
	--custom "$repo/selftests/config" LLVM=1 >&2
# virtme appends its own must-haves last (one of them forces DEBUG_INFO on):
# apply our fragment once more so that it has the final word.
cat "$repo/selftests/config" >> .config
make -s LLVM=1 olddefconfig >&2

# merge_config-style check: every option the fragment asks for must have
# survived olddefconfig, or the kernel is not the one the tests expect.
bad=0
while IFS= read -r line; do
	case "$line" in
	CONFIG_*=n) opt=${line%%=*}
		grep -q "^$opt=" .config && { log "wanted $line, got $(grep "^$opt=" .config)"; bad=1; } ;;
	CONFIG_*=*) grep -qx "$line" .config || { log "wanted $line, got $(grep "^${line%%=*}=" .config || echo unset)"; bad=1; } ;;
	esac
done < "$repo/selftests/config"
[ $bad = 0 ] || { log "config fragment not satisfied"; exit 1; }

start=$(date +%s)
make -s LLVM=1 -j"$(nproc)" bzImage modules >&2
log "built in $(( $(date +%s) - start )) s"
touch .metaroce-built
echo "$tree"
