# SPDX-License-Identifier: GPL-2.0
#
# MetaRoCE top-level Makefile.
#   make            build rust/metaroce.ko against $(KDIR)
#   make test       install deps, build the test kernel and module, run the
#                   host checks and the selftests on two QEMU hosts
#   make demo       boot two hosts and show the device and rxe side by side
#   make bench      the benchmark suite on two QEMU hosts: report and plots
#                   (BENCH_QUICK=1: the ~5 minute subset); see selftests/bench
#   make bench-profile  perf on both hosts during ib_write_bw, MetaRoCE and
#                   rxe: where the CPU time goes (profile.md, ~3 minutes)
#   make check      host-side checks (rig self-check, cargo test, clippy, rustfmt)
#   make kernel     build (or find) the cached test kernel
#   make deps       install build and test dependencies (Debian 12)
#   make provider   build the libibverbs provider (target/release)
#   make install    install metaroce.ko and the provider on this machine
#
# KDIR defaults to the cached test kernel when it has been built, else to
# the running kernel's build tree. Any Rust-enabled kernel works:
#   make KDIR=/path/to/linux LLVM=1

KDIR ?= $(or $(shell selftests/rig/kernel.sh --path 2>/dev/null),/lib/modules/$(shell uname -r)/build)
LLVM ?= 1
MAKEFLAGS += --no-print-directory
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: all modules clean deps kernel check test demo selftests provider install bench bench-profile

all: modules

modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM) modules

provider:
	cargo build --release --quiet -p metaroce-provider

install: modules provider
	$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM) modules_install
	provider/install.sh --no-build

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM) clean
	rm -f rust/sys/bindings_generated.rs

deps:
	selftests/rig/deps.sh

kernel: deps
	selftests/rig/kernel.sh >/dev/null

check:
	selftests/rig/selfcheck.sh
	cargo test --workspace --quiet
	cargo clippy --workspace --all-targets --quiet -- -D warnings
	cargo fmt --all --check

selftests: kernel provider
	$(MAKE) modules KDIR=$$(selftests/rig/kernel.sh)
	selftests/rig/run.sh selftests

test: deps
	$(MAKE) check
	$(MAKE) selftests

demo: kernel provider
	$(MAKE) modules KDIR=$$(selftests/rig/kernel.sh)
	selftests/rig/run.sh demo

bench: kernel provider
	$(MAKE) modules KDIR=$$(selftests/rig/kernel.sh)
	BENCH_INVOCATION="make bench$(if $(BENCH_QUICK), BENCH_QUICK=$(BENCH_QUICK))" selftests/bench/run.sh

bench-profile: kernel provider
	$(MAKE) modules KDIR=$$(selftests/rig/kernel.sh)
	out=$${BENCH_OUT:-$$(mktemp -d /tmp/metaroce-profile.XXXXXX)}; \
	METAROCE_OUT=$$out selftests/rig/run.sh 'bash selftests/bench/profile.sh' && \
	echo "profile: $$out/bench/profile.md"
