#!/bin/bash
# Host-side check of the install-time refusals (make check), no VM and no
# root changes: scripts/check-kernel.sh against fake kernel trees (no
# CONFIG_RUST, CONFIG_MODVERSIONS, another rustc, ...), make install's
# kernel choice, and provider/pabi.sh + provider/install.sh against fake
# libibverbs builds of another private ABI (built with cc, into DESTDIR).
set -u
rig=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$rig/../.." && pwd)
export PATH="$HOME/.cargo/bin:$PATH"
export RUSTUP_TOOLCHAIN=${RUSTUP_TOOLCHAIN:-$(sed -n 's/^channel *= *"\(.*\)"/\1/p' "$repo/rust-toolchain.toml")}
pass=0 fail=0 skip=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log=$tmp/out

# expect NAME RC TEXT CMD...: CMD exits with RC and its output contains TEXT
# ("" : says nothing at all).
expect() {
	local name=$1 want=$2 text=$3 rc
	shift 3
	"$@" > "$log" 2>&1
	rc=$?
	if [ "$rc" != "$want" ]; then
		fail=$((fail + 1)); echo "not ok - $name (exit $rc, want $want)"; sed 's/^/#   /' "$log"
	elif [ -z "$text" ] && [ -s "$log" ]; then
		fail=$((fail + 1)); echo "not ok - $name (want no output)"; sed 's/^/#   /' "$log"
	elif [ -n "$text" ] && ! grep -qF -- "$text" "$log"; then
		fail=$((fail + 1)); echo "not ok - $name (no '$text' in the output)"; sed 's/^/#   /' "$log"
	else
		pass=$((pass + 1)); echo "ok - $name"
	fi
}

# ---- scripts/check-kernel.sh ----
check=$repo/scripts/check-kernel.sh
rustc_now=$(rustc --version 2>/dev/null) || rustc_now="rustc (none)"
# fake_tree NAME CONFIG-LINES...: a tree with that .config, a release and
# built Rust crates.
fake_tree() {
	local d=$tmp/$1
	shift
	mkdir -p "$d/include/config" "$d/rust"
	printf '%s\n' "$@" > "$d/.config"
	echo 6.12.0-fake > "$d/include/config/kernel.release"
	: > "$d/rust/libkernel.rmeta"
	echo "$d"
}
good=(CONFIG_RUST=y "# CONFIG_MODVERSIONS is not set" "CONFIG_RUSTC_VERSION_TEXT=\"$rustc_now\"")
expect "check-kernel passes a Rust kernel built with this rustc" 0 "" \
	"$check" "$(fake_tree good "${good[@]}")"
expect "check-kernel refuses a kernel without CONFIG_RUST" 1 "CONFIG_RUST is not set" \
	"$check" "$(fake_tree norust "# CONFIG_RUST is not set" "CONFIG_RUSTC_VERSION_TEXT=\"$rustc_now\"")"
expect "check-kernel refuses CONFIG_MODVERSIONS" 1 "CONFIG_MODVERSIONS is set" \
	"$check" "$(fake_tree modversions CONFIG_RUST=y CONFIG_MODVERSIONS=y "CONFIG_RUSTC_VERSION_TEXT=\"$rustc_now\"")"
other="rustc 1.78.0 (9b00956e5 2024-04-29)"
expect "check-kernel refuses another rustc, naming both" 1 "the kernel was built with '$other', this build would use '$rustc_now'" \
	"$check" "$(fake_tree otherrustc CONFIG_RUST=y "CONFIG_RUSTC_VERSION_TEXT=\"$other\"")"
expect "check-kernel names the toolchain to install" 1 "rustup toolchain install 1.78.0" \
	"$check" "$tmp/otherrustc"
expect "check-kernel reports a missing rustc" 1 "no rustc found" \
	env RUSTC=/nonexistent/rustc "$check" "$tmp/good"
rm "$(fake_tree nocrates "${good[@]}")/rust/libkernel.rmeta"
expect "check-kernel refuses a tree whose Rust crates are not built" 1 "rust/libkernel.rmeta missing" \
	"$check" "$tmp/nocrates"
expect "check-kernel refuses a tree without .config" 1 "not a configured kernel tree" \
	"$check" "$tmp/none"
expect "check-kernel reports every problem at once" 1 "rustc differs" \
	"$check" "$(fake_tree both CONFIG_RUST=y CONFIG_MODVERSIONS=y "CONFIG_RUSTC_VERSION_TEXT=\"$other\"")"
grep -qF "CONFIG_MODVERSIONS is set" "$log" || { fail=$((fail + 1)); echo "not ok - ... and MODVERSIONS with it"; }

# ---- make install: checks first, running kernel by default ----
expect "make install KDIR=<no Rust> stops at the check, before any build" 2 "CONFIG_RUST is not set" \
	make -C "$repo" install KDIR="$tmp/norust"
if grep -qE '^ *(CC|RUSTC|BINDGEN|LD) |Compiling' "$log"; then
	fail=$((fail + 1)); echo "not ok - ... but it built something"; sed 's/^/#   /' "$log"
fi
first=$(make -s -n -C "$repo" install 2>/dev/null | head -n 1)
if [ "$first" = "scripts/check-kernel.sh /lib/modules/$(uname -r)/build" ]; then
	pass=$((pass + 1)); echo "ok - make install targets the running kernel by default"
else
	fail=$((fail + 1)); echo "not ok - make install's first step is '$first'"
fi

# ---- provider/pabi.sh, provider/install.sh ----
pabi=$repo/provider/pabi.sh
if ! command -v cc > /dev/null; then
	skip=$((skip + 1)); echo "ok - provider ABI checks # SKIP no cc to build fake libraries"
else
	# A fake libibverbs.so.1 of private ABI N, and providers linked to it.
	fake_verbs() {
		mkdir -p "$tmp/verbs$1"
		echo "IBVERBS_PRIVATE_$1 { global: verbs_register_driver_$1; local: *; };" > "$tmp/verbs$1/map"
		echo "void verbs_register_driver_$1(const void *ops) { (void)ops; }" > "$tmp/verbs$1/v.c"
		cc -shared -fPIC -Wl,--version-script="$tmp/verbs$1/map" -Wl,-soname,libibverbs.so.1 \
			-o "$tmp/verbs$1/libibverbs.so.1" "$tmp/verbs$1/v.c"
	}
	# fake_provider DIR SONAME-ABI REGISTER-ABI: target/release in DIR.
	fake_provider() {
		mkdir -p "$1/release"
		printf 'void verbs_register_driver_%s(const void *);\n__attribute__((constructor)) static void r(void) { verbs_register_driver_%s(0); }\n' "$3" "$3" > "$1/p.c"
		cc -shared -fPIC -Wl,-soname,"libmetaroce-rdmav$2.so" -o "$1/release/libmetaroce_provider.so" \
			"$1/p.c" -L"$tmp/verbs$3" -l:libibverbs.so.1
	}
	if fake_verbs 34 && fake_verbs 35 && fake_provider "$tmp/p34" 34 34 && fake_provider "$tmp/bad" 35 34; then
		v34=$tmp/verbs34/libibverbs.so.1 v35=$tmp/verbs35/libibverbs.so.1
		expect "pabi.sh reads a libibverbs' private ABI" 0 35 env LIBIBVERBS="$v35" "$pabi" system
		expect "pabi.sh reads a built provider's private ABI" 0 34 "$pabi" provider "$tmp/p34/release/libmetaroce_provider.so"
		expect "pabi.sh reads the sources' private ABI (build.rs)" 0 34 "$pabi" provider
		expect "install.sh refuses a provider for another libibverbs ABI" 1 "ABI mismatch: the system libibverbs ($v35) has
private ABI 35, the MetaRoCE provider is built for 34" \
			env LIBIBVERBS="$v35" DESTDIR="$tmp/root35" CARGO_TARGET_DIR="$tmp/p34" "$repo/provider/install.sh" --no-build
		if [ -e "$tmp/root35" ]; then
			fail=$((fail + 1)); echo "not ok - ... but installed: $(find "$tmp/root35" -type f)"
		fi
		expect "install.sh refuses before building when the sources' ABI differs" 1 "Not installing" \
			env LIBIBVERBS="$v35" DESTDIR="$tmp/root35" CARGO_TARGET_DIR="$tmp/none" "$repo/provider/install.sh"
		expect "install.sh refuses a provider whose SONAME and symbols disagree" 1 "inconsistent" \
			env LIBIBVERBS="$v34" DESTDIR="$tmp/rootbad" CARGO_TARGET_DIR="$tmp/bad" "$repo/provider/install.sh" --no-build
		expect "install.sh installs a provider of the same ABI" 0 "libmetaroce-rdmav34.so" \
			env LIBIBVERBS="$v34" DESTDIR="$tmp/root34" LIBDIR=/lib/ib CONFDIR=/etc/ib \
			CARGO_TARGET_DIR="$tmp/p34" "$repo/provider/install.sh" --no-build
		if [ -f "$tmp/root34/lib/ib/libmetaroce-rdmav34.so" ] && [ -f "$tmp/root34/etc/ib/metaroce.driver" ]; then
			pass=$((pass + 1)); echo "ok - ... both files in place"
		else
			fail=$((fail + 1)); echo "not ok - ... files missing: $(find "$tmp/root34" -type f)"
		fi
	else
		fail=$((fail + 1)); echo "not ok - cannot build the fake libraries with cc"
	fi
fi
if sys=$("$pabi" system 2> /dev/null); then
	expect "the system libibverbs has the provider's private ABI ($sys)" 0 "" "$pabi" check
fi

# ---- metaroce(7) renders without a warning ----
if command -v man > /dev/null; then
	expect "man -l Documentation/metaroce.7 renders without warnings" 0 "" \
		env MANWIDTH=80 sh -c 'man --warnings -l "$1" > /dev/null' sh "$repo/Documentation/metaroce.7"
else
	skip=$((skip + 1)); echo "ok - metaroce(7) # SKIP no man"
fi

# ---- a stock distribution kernel: Debian's linux-headers (no Rust) ----
# The real thing next to the fake trees: what a user of a stock kernel
# sees from make install and from DKMS (deps.sh installs the headers).
stock=$(find /usr/src -maxdepth 1 -name 'linux-headers-*-amd64' 2> /dev/null | sort | tail -n 1)
if [ -z "$stock" ] || [ ! -f "$stock/.config" ]; then
	skip=$((skip + 1)); echo "ok - a stock kernel's headers # SKIP no /usr/src/linux-headers-*-amd64 (apt install linux-headers-amd64)"
else
	kver=${stock#/usr/src/linux-headers-}
	expect "check-kernel refuses Debian's stock kernel $kver" 1 "CONFIG_RUST is not set" "$check" "$stock"
	expect "make install KDIR=<Debian's $kver> stops at the check" 2 "needs a Rust-enabled kernel" \
		make -C "$repo" install KDIR="$stock"
	if ! command -v dkms > /dev/null; then
		skip=$((skip + 1)); echo "ok - DKMS on a stock kernel # SKIP no dkms (deps.sh --deb installs it)"
	else
		# The package's DKMS tree, in private directories: dkms.conf as
		# debian/rules makes it, the sources as the package ships them.
		src=$tmp/dkms-src/metaroce-0.0.0
		mkdir -p "$src" "$tmp/dkms-tree" "$tmp/dkms-inst"
		git -C "$repo" archive HEAD Kbuild Makefile rust include scripts | tar -x -C "$src"
		sed 's/#MODULE_VERSION#/0.0.0/' "$repo/debian/metaroce-dkms.dkms" > "$src/dkms.conf"
		dk=(dkms --dkmstree "$tmp/dkms-tree" --sourcetree "$tmp/dkms-src" --installtree "$tmp/dkms-inst")
		"${dk[@]}" add -m metaroce -v 0.0.0 > "$log" 2>&1
		expect "DKMS skips Debian's $kver with its BUILD_EXCLUSIVE message" 77 "BUILD_EXCLUSIVE" \
			"${dk[@]}" build -m metaroce -v 0.0.0 -k "$kver" --kernelsourcedir "$stock"
	fi
fi

echo "install selfcheck: $pass passed, $fail failed, $skip skipped"
[ $fail = 0 ]
