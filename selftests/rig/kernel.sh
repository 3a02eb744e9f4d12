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
#
# METAROCE_KERNEL=kasan selects a second tree with the fragment kasan.config
# on top (generic KASAN: `make test-kasan`), METAROCE_KERNEL=bench one with
# bench.config (no lock or memory debugging: `make bench`); their keys
# differ, the default tree's does not change.
#
# A cold build (~17 min on 2 cores) prints a line per phase and, while
# compiling, one a minute with the steps done ("[kernel 6:00] build: 2900
# of ~6100 steps (47%)"; the total is the previous build's count).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${METAROCE_CACHE:-/var/lib/metaroce}
tarball=/usr/src/linux-source-6.12.tar.xz
venv=${METAROCE_VENV:-/opt/metaroce-venv}
export PATH="$venv/bin:$HOME/.cargo/bin:$PATH"

log() { printf 'kernel: %s\n' "$*" >&2; }
begin=$SECONDS
step() { printf '[kernel %d:%02d] %s\n' $(((SECONDS - begin) / 60)) $(((SECONDS - begin) % 60)) "$*" >&2; }

# The toolchain pinned in rust-toolchain.toml, also when run from the
# kernel tree (rustup finds that file only below the repo).
RUSTUP_TOOLCHAIN=${RUSTUP_TOOLCHAIN:-$(sed -n 's/^channel *= *"\(.*\)"/\1/p' "$repo/rust-toolchain.toml")}
export RUSTUP_TOOLCHAIN

[ -r "$tarball" ] || { log "$tarball missing: run selftests/rig/deps.sh"; exit 1; }

fragments=("$repo/selftests/config")
case "${METAROCE_KERNEL:-test}" in
test) ;;
kasan) fragments+=("$here/kasan.config") ;;
bench) fragments+=("$here/bench.config") ;;
*) log "METAROCE_KERNEL=${METAROCE_KERNEL}: want test, kasan or bench"; exit 2 ;;
esac

RECIPE=1
key=$( {
	dpkg-query -W -f='${Version}\n' linux-source-6.12
	cat "$here/trim.config" "${fragments[@]}"
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
step "extracting $tarball"
rm -rf "$cache/kernel-$key"
mkdir -p "$cache/kernel-$key"
tar -C "$cache/kernel-$key" -xf "$tarball"
cd "$tree"

step "configuring (virtme-configkernel, olddefconfig)"

make -s LLVM=1 rustavailable >&2
custom=()
for f in "${fragments[@]}"; do custom+=(--custom "$f"); done
virtme-configkernel --defconfig --custom "$here/trim.config" "${custom[@]}" LLVM=1 >&2
# virtme appends its own must-haves last (one of them forces DEBUG_INFO on):
# apply our fragments once more so that they have the final word.
cat "${fragments[@]}" >> .config
make -s LLVM=1 olddefconfig >&2

# merge_config-style check: every option the fragments ask for (a later
# fragment's setting of an option replaces an earlier one's) must have
# survived olddefconfig, or the kernel is not the one the tests expect.
bad=0
declare -A want=()
while IFS= read -r line; do
	case "$line" in CONFIG_*=*) want[${line%%=*}]=$line ;; esac
done < <(cat "${fragments[@]}")
for opt in "${!want[@]}"; do
	line=${want[$opt]}
	case "$line" in
	CONFIG_*=n) grep -q "^$opt=" .config && { log "wanted $line, got $(grep "^$opt=" .config)"; bad=1; } ;;
	*) grep -qx "$line" .config || { log "wanted $line, got $(grep "^$opt=" .config || echo unset)"; bad=1; } ;;
	esac
done
[ $bad = 0 ] || { log "config fragment not satisfied"; exit 1; }

# progress: reads Kbuild's step lines ("  CC      kernel/fork.o") and
# prints a count once a minute; a successful build's count is the next cold
# build's estimate. The build itself is the same as with make -s.
steps_file="$cache/kernel-build-steps"
progress() {
	local n=0 last=$SECONDS line total
	total=$(cat "$steps_file" 2>/dev/null || echo 0)
	while IFS= read -r line; do
		n=$((n + 1))
		((SECONDS - last >= 60)) || continue
		last=$SECONDS
		if ((total > 0)); then
			step "build: $n of ~$total steps ($((n < total ? n * 100 / total : 99))%), at ${line##* }"
		else
			step "build: $n steps, at ${line##* }"
		fi
	done
	echo "$n" > "$steps_file.new"
}
step "building bzImage and modules (-j$(nproc))"
start=$(date +%s)
make LLVM=1 -j"$(nproc)" bzImage modules | progress
mv -f "$steps_file.new" "$steps_file"
log "built in $(( $(date +%s) - start )) s"
step "done"
touch .metaroce-built
echo "$tree"
