#!/usr/bin/env bash
# Unpack Debian's linux-source-6.12 into build/linux, commit it as the base
# (tag "base"), apply kernel/patches/series as one commit per patch, and
# record in build/linux/.git which series the tree holds (series_state in
# lib.sh).
#
#   scripts/prepare.sh [--force|--check]
#
# An existing tree made from kernel/patches as it is now is kept: commits and
# changes made in it since are work in progress. When kernel/patches changed
# since (a git pull), a tree without local work is recreated, saying so; a
# tree with local work is left alone, with an error that says what to do.
#   --force  recreate the tree whatever it holds (its commits and uncommitted
#            changes are saved under build/linux-backup/ first)
#   --check  change nothing (except the record, when the tree turns out to
#            hold the series); exit 0 when the tree is based on
#            kernel/patches, 1 when there is no tree, 2 when kernel/patches
#            changed and the tree has no local work (prepare recreates it),
#            3 when kernel/patches changed and the tree has local work
set -euo pipefail
. "$(dirname "$0")/lib.sh"

mode=prepare
case ${1:-} in
"") ;;
--force) mode=force ;;
--check) mode=check ;;
*) die "usage: $0 [--force|--check]" ;;
esac

if [[ $mode == check ]]; then
	series_state
	case $SERIES_STATE in
	based)
		log "$KSRC is based on $PATCHES_REL ($(series_work))"
		exit 0
		;;
	absent) rc=1 ;;
	stale) rc=2 ;;
	*) rc=3 ;;
	esac
	series_explain
	exit "$rc"
fi

# A build/linux that is a symlink (work trees sharing one tree) is recreated
# where it points.
[[ ! -L $KSRC ]] || KSRC=$(readlink -f "$KSRC")
if [[ -e $KSRC && ! -d $KSRC/.git ]]; then
	die "$KSRC exists but is not a git tree: remove it"
fi
if [[ -d $KSRC/.git ]]; then
	if [[ $mode == prepare ]]; then
		series_state
		case $SERIES_STATE in
		based)
			log "kernel tree exists: $KSRC, based on $PATCHES_REL ($(series_work))"
			exit 0
			;;
		stale)
			log "$PATCHES_REL changed since $KSRC was prepared and the tree has no local work: recreating it"
			;;
		*)
			series_explain
			die "left $KSRC as it is"
			;;
		esac
	fi
	# Never pull the tree away from under a kernel build.
	kbuild_lock
	backup=$(series_backup)
	log "saved the tree's commits and changes in $backup"
	if [[ $mode == force ]]; then
		log "removing $KSRC (--force)"
	else
		log "removing $KSRC"
	fi
	rm -rf "$KSRC"
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
# Commits made in the tree (and so the patches refresh exports) carry the
# identity of whoever runs the tools, from their own git configuration: a
# Signed-off-by is their statement. Only the base commit needs one when
# they have none yet; git am keeps each patch's own author.
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
	GIT_AUTHOR_NAME="Debian $BASE_PKG" GIT_AUTHOR_EMAIL="" \
	GIT_COMMITTER_NAME="Debian $BASE_PKG" GIT_COMMITTER_EMAIL="" \
	git commit -q -m "Debian $BASE_PKG $ver" \
	-m "Unpacked from $BASE_TARBALL; the Debian-packaging block at the end of .gitignore removed."
git tag base

n=0
while read -r p; do
	git_as_runner am -q --keep-cr "$PATCHES/$p" || die "patch $p does not apply to $BASE_PKG $ver"
	n=$((n + 1))
done < <(series_patches "$PATCHES")
cd - >/dev/null
mv "$tmp" "$KSRC"
series_record HEAD
log "prepared $KSRC: $BASE_PKG $ver + $n patches"
