#!/usr/bin/env bash
# Unpack Debian's linux-source-6.12 into build/linux, commit it as the base
# (tag "base") and apply kernel/patches/series as one commit per patch.
#
# An existing tree is left alone (it may hold work in progress): the script
# then only reports whether it matches kernel/patches. --force recreates it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

force=0
[[ ${1:-} == --force ]] && force=1

if [[ -d $KSRC/.git ]]; then
	if ((force)); then
		log "removing $KSRC (--force)"
		rm -rf "$KSRC"
	else
		log "kernel tree exists: $KSRC ($(git -C "$KSRC" rev-list --count base..HEAD) patches on base)"
		if ! "$TOP/scripts/refresh.sh" --check >/dev/null 2>&1; then
			log "note: tree differs from kernel/patches (refresh it or prepare --force)"
		fi
		exit 0
	fi
fi

[[ -r $BASE_TARBALL ]] || die "$BASE_TARBALL not found: run scripts/setup.sh"
mkdir -p "$BUILD"
tmp=$KSRC.tmp
rm -rf "$tmp"
mkdir -p "$tmp"
ver=$(base_version)
log "unpacking $BASE_PKG $ver"
tar -xJf "$BASE_TARBALL" -C "$tmp" --strip-components=1

cd "$tmp"
git init -q -b master
git config user.name "vstor developer"
git config user.email "vstor@localhost"
git config core.abbrev 12
git config gc.auto 0
echo "$ver" >.git/base-version
# Debian's top-level .gitignore ignores every top-level entry ("/*"), which
# would hide new files of ours from git; drop that block (it only matters to
# Debian's packaging repository) before committing.
sed -i '/^# Debian packaging: ignore everything/,$d' .gitignore
sed -i '${/^#$/d}' .gitignore
log "committing the base tree"
git add -A .
GIT_AUTHOR_DATE="2000-01-01T00:00:00Z" GIT_COMMITTER_DATE="2000-01-01T00:00:00Z" \
	git commit -q -m "Debian $BASE_PKG $ver" \
	-m "Unpacked from $BASE_TARBALL; the Debian-packaging block at the end of .gitignore removed."
git tag base

n=0
while read -r p; do
	[[ -z $p || $p == \#* ]] && continue
	git am -q --keep-cr "$PATCHES/$p" || die "patch $p does not apply to $BASE_PKG $ver"
	n=$((n + 1))
done <"$PATCHES/series"
cd - >/dev/null
mv "$tmp" "$KSRC"
log "prepared $KSRC: $BASE_PKG $ver + $n patches"
