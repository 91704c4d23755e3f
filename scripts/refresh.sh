#!/usr/bin/env bash
# Export the commits base..HEAD of build/linux into kernel/patches, with
# output that does not depend on when or where it ran, and rewrite the series
# file. --check only compares and fails when the export would change anything.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

check=0
[[ ${1:-} == --check ]] && check=1
[[ -d $KSRC/.git ]] || die "no kernel tree at $KSRC: run scripts/prepare.sh"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
git -C "$KSRC" -c diff.algorithm=myers -c core.abbrev=12 format-patch -q \
	--zero-commit --no-signature --no-numbered --abbrev=12 --no-renames \
	-o "$out" base..HEAD
(cd "$out" && ls -1 -- *.patch 2>/dev/null || true) >"$out/series"

if ((check)); then
	if diff -ru --exclude=README "$PATCHES" "$out" >&2; then
		log "kernel/patches matches $KSRC"
		exit 0
	fi
	die "kernel/patches differs from $KSRC (run scripts/refresh.sh)"
fi

find "$PATCHES" -maxdepth 1 -name '*.patch' -delete
cp "$out"/*.patch "$PATCHES"/ 2>/dev/null || true
cp "$out/series" "$PATCHES/series"
log "exported $(grep -c . "$PATCHES/series" || true) patches to kernel/patches"
