#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make deb: the Debian packages metaroce-dkms and libmetaroce-provider.
#   scripts/build-deb.sh OUTDIR
# Copies the sources as git sees them (tracked and new files, nothing
# ignored: no target/, no build products) to OUTDIR/metaroce-<version>,
# runs dpkg-buildpackage -b -us -uc there (the .debs land in OUTDIR) and
# lintian on the result, which must report no error and no warning (the
# accepted tags are overridden with their reasons in debian/*.lintian-overrides).
set -euo pipefail
out=${1:?usage: build-deb.sh OUTDIR}
repo=$(cd "$(dirname "$0")/.." && pwd)
ver=$(dpkg-parsechangelog -l "$repo/debian/changelog" -S Version)
src=$out/metaroce-$ver

rm -rf "$src"
mkdir -p "$src"
out=$(cd "$out" && pwd)
if git -C "$repo" rev-parse --git-dir > /dev/null 2>&1; then
	(cd "$repo" && git ls-files -z --cached --others --exclude-standard) |
		while IFS= read -r -d '' f; do
			# Deleted but not yet committed: not part of this tree.
			[ -e "$repo/$f" ] && printf '%s\0' "$f"
		done | (cd "$repo" && xargs -0 cp -a --parents -t "$src")
else
	tar -C "$repo" --exclude-vcs --exclude=./target --exclude=./build -cf - . | tar -C "$src" -xf -
fi

(cd "$src" && dpkg-buildpackage -b -us -uc)
changes=$out/metaroce_${ver}_$(dpkg-architecture -qDEB_HOST_ARCH).changes
echo "deb: lintian $changes"
lintian --info --fail-on error,warning "$changes"
echo "deb: packages in $out:"
printf '  %s\n' "$out"/*_"$ver"_*.deb
