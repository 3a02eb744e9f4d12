#!/usr/bin/env bash
# Install everything the build and the two-host rig need, on Debian 12.
# Idempotent: each step checks first, so a warm machine spends seconds here.
#
#   deps.sh         build, host checks and the rig (make deps, make test)
#   deps.sh --deb   only what `make deb` needs: the Rust toolchain, bindgen and the
#                   Debian packaging tools
#
# The one prerequisite it does not install is rustup (the Rust toolchain
# manager: Debian 12's rustc is older than the kernel's minimum). It is
# checked first, so a machine without it fails in a second, not after the
# apt step. Each step that has work to do prints one line with the time
# since the start, e.g. "[deps 0:42] apt: installing ...".
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
mode=${1:-all}
case $mode in all | --deb) ;; *) echo "usage: $0 [--deb]" >&2; exit 2 ;; esac

APT_PKGS=(
	qemu-system-x86 linux-source-6.12 libclang-dev clang lld llvm flex bison bc
	libelf-dev libssl-dev cpio busybox-static kmod dwarves rsync
	rdma-core perftest ibverbs-utils libibverbs-dev librdmacm-dev rdmacm-utils
	ibverbs-providers iproute2 iperf3 iputils-ping python3-pyverbs python3-venv
	ethtool nftables
	openmpi-bin python3-mpi4py # the benchmark's collectives (selftests/bench; the guests run the host's /usr)
	tshark # tools/wireshark's tests in `make check` (skipped without it)
	linux-headers-amd64 # a stock kernel without Rust, for install-check.sh
)
# Only for --deb: make deb (debian/control's Build-Depends, lintian) and,
# in the rig, selftests/package.sh (dkms, which the guests run from the
# host's /usr). The provider's build runs bindgen (libclang) over
# libibverbs' headers.
DEB_PKGS=(dpkg-dev debhelper dh-dkms dkms lintian binutils libibverbs-dev libclang-dev man-db)
BINDGEN_VERSION=0.70.1
VNG_VERSION=1.42
MATPLOTLIB_VERSION=3.9.2 # the benchmark report's plots (selftests/bench)
VENV=${METAROCE_VENV:-/opt/metaroce-venv}
TOOLCHAIN=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' "$repo/rust-toolchain.toml")
export PATH="$HOME/.cargo/bin:$PATH"
export RUSTUP_TOOLCHAIN=${RUSTUP_TOOLCHAIN:-$TOOLCHAIN}

start=$SECONDS
log() { printf '[deps %d:%02d] %s\n' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)) "$*" >&2; }

if ! command -v rustup > /dev/null; then
	cat >&2 << EOF
deps: rustup not found (looked in PATH and $HOME/.cargo/bin).
MetaRoCE is built with Rust $TOOLCHAIN (rust-toolchain.toml) and its rust-src,
which rustup installs; Debian 12's rustc is too old for the kernel. Install
rustup with this one command, then run make again:

  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --default-toolchain $TOOLCHAIN

EOF
	exit 1
fi
if ! rustup toolchain list | grep -q "^$RUSTUP_TOOLCHAIN-"; then
	log "rustup: installing toolchain $RUSTUP_TOOLCHAIN"
	rustup toolchain install "$RUSTUP_TOOLCHAIN" --profile minimal -c rust-src,rustfmt,clippy
fi
if ! cargo --version > /dev/null 2>&1 || ! rustc --version > /dev/null 2>&1; then
	echo "deps: rustup has toolchain $RUSTUP_TOOLCHAIN but its cargo or rustc does not run:" >&2
	cargo --version >&2 || true
	echo "deps: reinstall it: rustup toolchain uninstall $RUSTUP_TOOLCHAIN && make deps" >&2
	exit 1
fi

pkgs=("${APT_PKGS[@]}")
[ "$mode" = --deb ] && pkgs=("${DEB_PKGS[@]}")
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
	log "apt: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi

# A toolchain installed before (by hand, or by an older deps.sh) may lack a
# component: rust-src builds the kernel crate, rustfmt and clippy are for
# make check (scripts/rustfmt.sh, cargo clippy). RUSTUP_TOOLCHAIN is set,
# so rustup does not read rust-toolchain.toml's component list.
installed=$(rustup component list --installed 2>/dev/null)
for c in rust-src rustfmt clippy; do
	if ! grep -q "^$c\(-\|\$\)" <<< "$installed"; then
		log "rustup: adding $c"
		rustup component add "$c"
	fi
done
# metaroce.ko's Kbuild and the provider's build.rs both run it.
if ! bindgen --version 2>/dev/null | grep -q " $BINDGEN_VERSION\$"; then
	log "cargo: installing bindgen-cli $BINDGEN_VERSION"
	cargo install -q bindgen-cli --version "$BINDGEN_VERSION" --locked
fi
if [ "$mode" = --deb ]; then
	log "ok"
	exit 0
fi

if ! "$VENV/bin/vng" --version 2>/dev/null | grep -q "$VNG_VERSION"; then
	log "pip: installing virtme-ng $VNG_VERSION into $VENV"
	python3 -m venv "$VENV"
	"$VENV/bin/pip" install -q "virtme-ng==$VNG_VERSION"
fi
if ! "$VENV/bin/python" -c "import matplotlib, sys; sys.exit(matplotlib.__version__ != '$MATPLOTLIB_VERSION')" 2>/dev/null; then
	log "pip: installing matplotlib $MATPLOTLIB_VERSION into $VENV"
	"$VENV/bin/pip" install -q "matplotlib==$MATPLOTLIB_VERSION"
fi
log "ok"
