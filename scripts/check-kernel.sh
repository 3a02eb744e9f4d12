#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Can metaroce.ko be built against the kernel tree KDIR? Run before any
# build by `make install` and by DKMS (dkms.conf's PRE_BUILD, and the
# Makefile target its MAKE line calls), so that a kernel we cannot build
# for gets one clear message instead of a page of rustc errors:
#
#   scripts/check-kernel.sh KDIR
#
# KDIR must be a configured tree (a .config) with CONFIG_RUST=y and without
# CONFIG_MODVERSIONS, its Rust part built (rust/libkernel.rmeta), and the
# rustc this build would run (${RUSTC:-rustc}, PATH then ~/.cargo/bin, as
# the Makefile looks) must be the one the kernel was built with (.config's
# CONFIG_RUSTC_VERSION_TEXT): a Rust module links against the kernel's
# compiled crates, which only that exact rustc can read.
# Prints every problem found on stderr and exits 1; 0 and silent if none.
# Lives here rather than in selftests/ (not shipped) or rust/ (the crate's
# sources): scripts/ is shipped to /usr/src with Kbuild by the dkms package.
set -u
[ $# = 1 ] || { echo "usage: $0 KDIR" >&2; exit 2; }
kdir=$1
config=$kdir/.config
export PATH="${HOME:-/root}/.cargo/bin:$PATH"
rustc=${RUSTC:-rustc}

say() { echo "metaroce: $*" >&2; }

if [ ! -f "$config" ]; then
	say "$kdir is not a configured kernel tree ($config missing): install the kernel's headers or build tree, or name it with KDIR="
	exit 1
fi
release=$(cat "$kdir/include/config/kernel.release" 2>/dev/null || echo "version unknown")
bad=0
problem() { say "kernel $release ($kdir): $*"; bad=1; }

if ! grep -q '^CONFIG_RUST=y' "$config"; then
	problem "CONFIG_RUST is not set: metaroce.ko is a Rust module and needs a Rust-enabled kernel (CONFIG_RUST=y; see selftests/config)"
fi
if grep -q '^CONFIG_MODVERSIONS=y' "$config"; then
	problem "CONFIG_MODVERSIONS is set: Rust modules are not supported with symbol versions on this kernel; build one with CONFIG_MODVERSIONS unset"
fi
if grep -q '^CONFIG_RUST=y' "$config" && [ ! -f "$kdir/rust/libkernel.rmeta" ]; then
	problem "the kernel's Rust crates are not built ($kdir/rust/libkernel.rmeta missing): run make in that tree, or use headers that ship its rust/ directory"
fi

want=$(sed -n 's/^CONFIG_RUSTC_VERSION_TEXT="\(.*\)"$/\1/p' "$config")
if [ -n "$want" ]; then
	wantver=$(echo "$want" | cut -d' ' -f2)
	fix="install it and build with it, e.g. rustup toolchain install $wantver, then: make install RUSTUP_TOOLCHAIN=$wantver (for DKMS: rustup default $wantver as root)"
	if ! have=$("$rustc" --version 2>/dev/null); then
		problem "no rustc found ($rustc, PATH and ~/.cargo/bin); the kernel was built with $want: $fix"
	elif [ "$have" != "$want" ]; then
		problem "rustc differs from the kernel's: the kernel was built with '$want', this build would use '$have'${RUSTUP_TOOLCHAIN:+ (RUSTUP_TOOLCHAIN=$RUSTUP_TOOLCHAIN)}: $fix"
	fi
elif grep -q '^CONFIG_RUST=y' "$config"; then
	problem "its .config names no rustc (CONFIG_RUSTC_VERSION_TEXT): a tree older than 6.12? Use a 6.12 or newer kernel"
fi
exit $bad
