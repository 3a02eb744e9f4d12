# SPDX-License-Identifier: GPL-2.0
#
# MetaRoCE top-level Makefile.
#   make            build rust/metaroce.ko against $(KDIR)
#   make test       install deps, build the test kernel and module, run the
#                   host checks and the selftests on two QEMU hosts (the
#                   core suite, TEST_PROGS: ~25-40 min warm under TCG)
#   make test-full  the same with every selftest: TEST_PROGS_EXTENDED too
#                   and perftest.sh's and rdma_cm.sh's size sweeps
#                   (METAROCE_SUITE=full; ~60-95 min warm)
#   make demo       boot two hosts and show the device and rxe side by side
#   make bench      the benchmark suite on two QEMU hosts: report and plots
#                   (BENCH_QUICK=1: the ~5 minute subset); see selftests/bench
#   make bench-profile  perf on both hosts during ib_write_bw, MetaRoCE and
#                   rxe: where the CPU time goes (profile.md, ~3 minutes;
#                   PROFILE_TEST=ib_send_bw|ib_read_bw, PROFILE_ON_BOTH=
#                   "tc_loss_all 0": bench/lib.sh commands on both hosts first)
#   make test-kasan the selftests on a second test kernel with generic KASAN
#                   and without lockdep (its own ~30 min cold build; lockdep
#                   is `make test`'s; METAROCE_TESTS="a.sh b.sh" picks
#                   tests). Leaves metaroce.ko built for that kernel: `make`
#                   rebuilds.
#   make test-package  the Debian packages installed, used and purged on
#                   both rig hosts (selftests/package.sh; slow under TCG)
#   make check      host-side checks (rig self-check, Wireshark dissector,
#                   conformance suite's codec, clause table and fake-DUT run, cargo
#                   test, clippy, fmt-check, no import cycle among the files of
#                   rust/driver: scripts/check-imports.py and its self-test);
#                   cargo test includes the golden captures (tools/golden,
#                   rust/sim/tests/golden.rs)
#   make fmt        rustfmt all the Rust in place, the kernel crate and the
#                   host crates, with the kernel's settings (.rustfmt.toml)
#   make fmt-check  fail if any of it is not formatted (scripts/rustfmt.sh;
#                   --list there names the files)
#   make kernel     build (or find) the cached test kernel
#   make deps       install build and test dependencies (Debian 12)
#   make provider   build the libibverbs provider (target/release)
#   make install    install metaroce.ko, the provider and metaroce(7) on this
#                   machine, for the running kernel (or KDIR=)
#   make uninstall  remove what make install installed
#   make deb        the metaroce-dkms and libmetaroce-provider packages
#                   (into build/deb, or DEB_OUT=)
#
# KDIR defaults to the cached test kernel when it has been built, else to
# the running kernel's build tree. Any Rust-enabled kernel works:
#   make KDIR=/path/to/linux LLVM=1
# make install and uninstall are for the running kernel unless KDIR is
# given (on the command line or in the environment): never the rig's.

KDIR ?= $(or $(shell selftests/rig/kernel.sh --path 2>/dev/null),/lib/modules/$(shell uname -r)/build)
LLVM ?= 1
MAKEFLAGS += --no-print-directory
export PATH := $(HOME)/.cargo/bin:$(PATH)
# Kbuild runs rustc from the kernel tree, where rustup does not see
# rust-toolchain.toml: name the pinned toolchain (RUSTUP_TOOLCHAIN=...
# overrides it, e.g. for a kernel built with another rustc). The DKMS
# tree ships no rust-toolchain.toml: there root's rustup default is used.
RUST_TOOLCHAIN := $(shell sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml 2>/dev/null)
ifneq ($(RUST_TOOLCHAIN),)
export RUSTUP_TOOLCHAIN ?= $(RUST_TOOLCHAIN)
endif

ifneq ($(filter command line environment environment override,$(origin KDIR)),)
INSTALL_KDIR := $(KDIR)
else
INSTALL_KDIR := /lib/modules/$(shell uname -r)/build
endif
INSTALL_KREL = $(shell cat $(INSTALL_KDIR)/include/config/kernel.release 2>/dev/null || uname -r)
MANDIR ?= /usr/share/man
DEB_OUT ?= $(CURDIR)/build/deb

.PHONY: all modules modules-checked clean deps kernel check fmt fmt-check test test-full test-kasan test-package demo selftests provider \
	install uninstall deb bench bench-profile

all: modules

# kbuild does not see that the objects were built against another kernel
# tree (its command lines use paths relative to the tree), and the stale
# module is refused at load ("section size must match the kernel's built
# struct module size"): .kdir names the tree they were built against, and
# another one cleans them, bindings included, first.
modules:
	@if [ "$$(cat .kdir 2>/dev/null)" != "$(realpath $(KDIR))" ]; then \
		$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM) clean >/dev/null 2>&1 || true; \
		rm -f rust/sys/bindings_generated.rs .kdir; fi
	$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM) modules
	@echo "$(realpath $(KDIR))" > .kdir

# The module after scripts/check-kernel.sh: what DKMS runs (dkms.conf).
modules-checked:
	scripts/check-kernel.sh $(KDIR)
	$(MAKE) modules

provider:
	cargo build --release --quiet -p metaroce-provider

# Both checks come before any build: the kernel (Rust, no MODVERSIONS, its
# rustc) and the provider's private ABI against the system libibverbs.
install:
	scripts/check-kernel.sh $(INSTALL_KDIR)
	provider/pabi.sh check
	$(MAKE) modules KDIR=$(INSTALL_KDIR)
	$(MAKE) provider
	$(MAKE) -C $(INSTALL_KDIR) M=$(CURDIR) LLVM=$(LLVM) modules_install
	depmod -a $(INSTALL_KREL)
	provider/install.sh --no-build
	install -D -m 0644 Documentation/metaroce.7 $(MANDIR)/man7/metaroce.7

# modules_install puts an external module in updates/ (extra/ before 6.x).
uninstall:
	rm -f /lib/modules/$(INSTALL_KREL)/updates/metaroce.ko* /lib/modules/$(INSTALL_KREL)/extra/metaroce.ko*
	[ ! -d /lib/modules/$(INSTALL_KREL) ] || depmod -a $(INSTALL_KREL)
	provider/install.sh --uninstall
	rm -f $(MANDIR)/man7/metaroce.7

# dpkg-buildpackage on a copy of the sources; .debs and lintian's verdict
# in $(DEB_OUT).
deb:
	selftests/rig/deps.sh --deb
	scripts/build-deb.sh $(DEB_OUT)

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM) clean
	rm -f rust/sys/bindings_generated.rs .kdir

deps:
	selftests/rig/deps.sh

kernel: deps
	selftests/rig/kernel.sh >/dev/null

check:
	selftests/rig/selfcheck.sh
	tools/wireshark/test.sh
	selftests/conformance/host_check.py
	selftests/rig/install-check.sh
	cargo test --workspace --quiet
	cargo clippy --workspace --all-targets --quiet -- -D warnings
	$(MAKE) fmt-check
	scripts/check-imports.py --self-test
	scripts/check-imports.py

fmt:
	scripts/rustfmt.sh

fmt-check:
	scripts/rustfmt.sh --check

selftests: kernel provider
	$(MAKE) modules KDIR=$$(selftests/rig/kernel.sh)
	selftests/rig/run.sh selftests

# The Debian packages on both rig hosts (selftests/package.sh). Not in the
# suite (DKMS compiles the module inside each TCG guest: about 23 min), run
# by CI (.ci/run) after `make test`.
test-package: kernel provider deb
	$(MAKE) modules KDIR=$$(selftests/rig/kernel.sh)
	METAROCE_TESTS=package.sh selftests/rig/run.sh selftests

test: deps
	$(MAKE) check
	$(MAKE) selftests

test-full: deps
	$(MAKE) check
	METAROCE_SUITE=full $(MAKE) selftests

test-kasan: deps provider
	METAROCE_KERNEL=kasan selftests/rig/kernel.sh >/dev/null
	$(MAKE) modules KDIR=$$(METAROCE_KERNEL=kasan selftests/rig/kernel.sh)
	METAROCE_KERNEL=kasan selftests/rig/run.sh selftests

demo: kernel provider
	$(MAKE) modules KDIR=$$(selftests/rig/kernel.sh)
	selftests/rig/run.sh demo

# Benchmarks run on the benchmark kernel (selftests/rig/bench.config: the
# test kernel without lock and memory debugging), built once like the test
# kernel; BENCH_KERNEL=test runs them on the debug test kernel instead.
BENCH_KERNEL ?= bench

# The suite's knobs a run was given, for its report's command line.
bench_knobs = $(strip $(foreach v,BENCH_SCENARIOS BENCH_TRANSPORTS BENCH_REPS BENCH_PLANE_RATE \
	BENCH_SCALE_RATE BENCH_RCN_RATE BENCH_COLL_RANKS BENCH_COLL_LOSS BENCH_COLL_PATHS,$(if $($(v)),$(v)='$($(v))')))
bench: deps provider
	METAROCE_KERNEL=$(BENCH_KERNEL) selftests/rig/kernel.sh >/dev/null
	$(MAKE) modules KDIR=$$(METAROCE_KERNEL=$(BENCH_KERNEL) selftests/rig/kernel.sh)
	METAROCE_KERNEL=$(BENCH_KERNEL) BENCH_INVOCATION="make bench$(if $(BENCH_QUICK), BENCH_QUICK=$(BENCH_QUICK))$(if $(filter-out bench,$(BENCH_KERNEL)), BENCH_KERNEL=$(BENCH_KERNEL))$(if $(bench_knobs), $(bench_knobs))" selftests/bench/run.sh

bench-profile: deps provider
	METAROCE_KERNEL=$(BENCH_KERNEL) selftests/rig/kernel.sh >/dev/null
	$(MAKE) modules KDIR=$$(METAROCE_KERNEL=$(BENCH_KERNEL) selftests/rig/kernel.sh)
	out=$${BENCH_OUT:-$$(mktemp -d /tmp/metaroce-profile.XXXXXX)}; \
	METAROCE_KERNEL=$(BENCH_KERNEL) METAROCE_OUT=$$out selftests/rig/run.sh '$(if $(PROFILE_TEST),PROFILE_TEST=$(PROFILE_TEST) )$(if $(PROFILE_ON_BOTH),PROFILE_ON_BOTH="$(PROFILE_ON_BOTH)" )bash selftests/bench/profile.sh' && \
	echo "profile: $$out/bench/profile.md"
