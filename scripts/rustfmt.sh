#!/usr/bin/env bash
# rustfmt over all of the project's Rust, with the kernel's settings
# (.rustfmt.toml, the same as the top of the Linux tree's):
#
#   scripts/rustfmt.sh          format in place (make fmt)
#   scripts/rustfmt.sh --check  fail, showing the diff, if a file is not
#                               formatted (make fmt-check, in make check)
#   scripts/rustfmt.sh --list   the files covered, one a line (changes none)
#
# rustfmt is given the crate roots and follows their `mod` items (also
# `#[path]` ones, which is how the kernel crate compiles rust/engine):
#   - the kernel crate: each `.o` of Kbuild's `metaroce-y` built from a `.rs`
#     (rust/metaroce.rs). It is no Cargo package, so rustfmt runs directly,
#     with --edition 2021 as Kbuild compiles it;
#   - the Cargo workspace: every target's source (lib, bins, tests, build.rs)
#     from `cargo metadata`, each with its package's edition.
# rustfmt does not follow `include!`. Every .rs file git knows of (tracked,
# or new and not ignored) under rust/ and provider/ must be reached from a
# root, else this fails naming it: a file added outside the `mod` tree is
# never silently unchecked. Generated files (rust/sys/bindings_generated.rs,
# the provider's bindings in OUT_DIR) are ignored by git, so never formatted.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd -P)
cd "$repo"
export PATH="$HOME/.cargo/bin:$PATH"
# The pinned toolchain's rustfmt, as for the build (see the Makefile).
RUSTUP_TOOLCHAIN=${RUSTUP_TOOLCHAIN:-$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)}
export RUSTUP_TOOLCHAIN

check=() list=
case ${1:-} in
'') ;;
--check) check=(--check) ;;
--list) check=(--check) list=1 ;;
*) echo "usage: $0 [--check | --list]" >&2; exit 2 ;;
esac

if ! rustfmt --version > /dev/null 2>&1; then
	echo "rustfmt: not installed for toolchain $RUSTUP_TOOLCHAIN: run make deps (or rustup component add rustfmt)" >&2
	exit 1
fi

# "edition path" lines, one per crate root.
roots() {
	sed -n 's/^metaroce-y *[:+]\?= *//p' Kbuild | tr ' ' '\n' | sed -n 's/\.o$//p' |
		while read -r obj; do
			if [ -f "$obj.rs" ]; then echo "2021 $obj.rs"; fi
		done
	cargo metadata --no-deps --offline --format-version 1 | python3 -c '
import json, os, sys
root = os.getcwd() + "/"
for pkg in json.load(sys.stdin)["packages"]:
    for t in pkg["targets"]:
        print(t.get("edition", pkg["edition"]), t["src_path"].removeprefix(root))
'
}

color=never
if [ -t 1 ]; then color=always; fi
out=$(mktemp)
trap 'rm -f "$out" "$out.seen"' EXIT
rc=0
while read -r edition files; do
	# -v names each file rustfmt reaches ("Formatting <path>").
	# shellcheck disable=SC2086 # $files: paths without spaces, split on purpose
	rustfmt --edition "$edition" --config-path .rustfmt.toml --color $color "${check[@]}" -v $files > "$out" 2>&1 || rc=$?
	# A `#[path]` module is named through its declaring file's directory
	# (rust/ib/../sys/mod.rs): each "dir/../" is dropped.
	sed -n "s|^Formatting $repo/||p" "$out" | sed -e ':a' -e 's|[^/]*/\.\./||' -e 'ta' >> "$out.seen"
	[ -n "$list" ] || grep -v '^Formatting /\|^Spent [0-9.]* secs\|^Using rustfmt config file ' "$out" || true
done < <(roots | sort -u | awk '{ f[$1] = f[$1] " " $2 } END { for (e in f) print e f[e] }')

if [ -n "$list" ]; then
	sort -u "$out.seen"
	rc=0
elif [ $rc != 0 ]; then
	if [ ${#check[@]} != 0 ]; then
		echo "rustfmt: the Rust above is not formatted (or does not parse): run make fmt" >&2
	else
		echo "rustfmt: failed (the errors above)" >&2
	fi
fi
missed=$(git ls-files --cached --others --exclude-standard -- 'rust/*.rs' 'provider/*.rs' |
	sort -u | comm -23 - <(sort -u "$out.seen"))
if [ -n "$missed" ]; then
	echo "rustfmt: not reached from any crate root, so not checked (roots: the top of scripts/rustfmt.sh):" >&2
	printf '  %s\n' $missed >&2
	rc=1
fi
exit $rc
