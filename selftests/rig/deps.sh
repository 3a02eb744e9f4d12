#!/usr/bin/env bash
# Install everything the build and the two-host rig need, on Debian 12.
# Idempotent: each step checks first, so a warm machine spends seconds here.
set -euo pipefail

APT_PKGS=(
	qemu-system-x86 linux-source-6.12 libclang-dev clang lld llvm flex bison bc
	libelf-dev libssl-dev cpio busybox-static kmod dwarves rsync
	rdma-core perftest ibverbs-utils libibverbs-dev librdmacm-dev rdmacm-utils
	ibverbs-providers iproute2 iperf3 iputils-ping python3-pyverbs python3-venv
	ethtool nftables
)
BINDGEN_VERSION=0.70.1
VNG_VERSION=1.42
MATPLOTLIB_VERSION=3.9.2 # the benchmark report's plots (selftests/bench)
VENV=${METAROCE_VENV:-/opt/metaroce-venv}

log() { printf 'deps: %s\n' "$*" >&2; }

missing=()
for p in "${APT_PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
	log "apt: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
	log "rustup: adding rust-src"
	rustup component add rust-src
fi

if ! bindgen --version 2>/dev/null | grep -q " $BINDGEN_VERSION\$"; then
	log "cargo: installing bindgen-cli $BINDGEN_VERSION"
	cargo install -q bindgen-cli --version "$BINDGEN_VERSION" --locked
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
