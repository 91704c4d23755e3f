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

# The base commit depends on the tarball and its version alone (the edit
# below, a fixed identity, fixed dates, a message without paths), so one
# made before from the same tarball, by any clone of the project, is the
# same commit: VSTOR_CACHE keeps a pack of it under the version, the
# tarball's hash and the rules' revision (r2; bump it when the edit or the
# commit's metadata change). Taking it from there skips unpacking and
# hashing some 90,000 files. Its files are then newer than any object a
# build made before, so that build compiles them all again (ccache has
# them) instead of trusting a tarball's old times.
cache=$VSTOR_CACHE/bases/$BASE_PKG-$ver-$(sha256sum <"$BASE_TARBALL" | cut -c1-24)-r2

# base_from_cache: the base commit from $cache into the new tree $tmp,
# checked out; fails, leaving $tmp to be emptied, when the cache has none
# or git cannot read it.
base_from_cache() {
	local commit f
	vstor_cache_usable || return 1
	[[ -r $cache/commit && -r $cache/ignored.tar && -r $cache/files ]] || return 1
	read -r commit <"$cache/commit" || return 1
	git -C "$tmp" init -q -b master || return 1
	for f in "$cache"/pack-*.pack "$cache"/pack-*.idx; do
		[[ -f $f ]] || return 1
		# A link where the file system allows (git never writes a pack
		# in place), else a copy.
		ln "$f" "$tmp/.git/objects/pack/" 2>/dev/null ||
			cp "$f" "$tmp/.git/objects/pack/" || return 1
	done
	git -C "$tmp" update-ref refs/heads/master "$commit" &&
		git -C "$tmp" reset -q --hard &&
		tar -xf "$cache/ignored.tar" -C "$tmp" &&
		[[ -z $(git -C "$tmp" status --porcelain) ]] &&
		[[ $(count_files "$tmp") == "$(<"$cache/files")" ]]
}

# count_files DIR: how many files and links DIR holds, .git aside.
count_files() {
	find "$1" -path "$1/.git" -prune -o ! -type d -print | wc -l
}

# base_to_cache: keep this base commit's objects for the next clone, and
# the tarball's files the commit leaves out (none since r2, which tracks
# the dot files too; kept so that a rule that leaves some out again works);
# replaces what the cache held for older tarballs of $BASE_PKG. A failure here costs
# only time, so it is reported and ignored.
base_to_cache() {
	local new
	vstor_cache_usable || return 0
	mkdir -p "$VSTOR_CACHE/bases" &&
		new=$(mktemp -d "$VSTOR_CACHE/bases/.new.XXXXXX") || return 0
	if git rev-parse base | git -c pack.compression=1 pack-objects --revs --window=0 -q "$new/pack" >/dev/null &&
		git ls-files -z --others --ignored --exclude-standard |
		tar --null --no-recursion -T - -cf "$new/ignored.tar" &&
		count_files . >"$new/files" &&
		git rev-parse base >"$new/commit"; then
		rm -rf "$VSTOR_CACHE/bases/$BASE_PKG"-*
		mv "$new" "$cache" 2>/dev/null || rm -rf "$new"
	else
		log "could not keep the base commit in $VSTOR_CACHE (only costs time)"
		rm -rf "$new"
	fi
}

if base_from_cache; then
	log "$BASE_PKG $ver: the base commit from $cache"
	cd "$tmp"
	from_cache=1
else
	rm -rf "$tmp"
	mkdir -p "$tmp"
	log "unpacking $BASE_PKG $ver"
	tar -xJf "$BASE_TARBALL" -C "$tmp" --strip-components=1
	cd "$tmp"
	git init -q -b master
	# Debian's top-level .gitignore ignores every top-level entry ("/*"),
	# which would hide new files of ours from git; drop that block (it
	# only matters to Debian's packaging repository) before committing.
	sed -i '/^# Debian packaging: ignore everything/,$d' .gitignore
	sed -i '${/^#$/d}' .gitignore
	log "committing the base tree"
	# Every file of the tarball, the dot files too: Debian's .gitignore
	# ignores them all (".*", without the exceptions upstream makes for
	# the ones it tracks), and a patch that changes one, such as
	# tools/virtio/.gitignore, must find it in the base as upstream has it.
	git add -A -f .
	GIT_AUTHOR_DATE="2000-01-01T00:00:00Z" GIT_COMMITTER_DATE="2000-01-01T00:00:00Z" \
		GIT_AUTHOR_NAME="Debian $BASE_PKG" GIT_AUTHOR_EMAIL="" \
		GIT_COMMITTER_NAME="Debian $BASE_PKG" GIT_COMMITTER_EMAIL="" \
		git commit -q -m "Debian $BASE_PKG $ver" \
		-m "Unpacked from ${BASE_TARBALL##*/}; the Debian-packaging block at the end of .gitignore removed."
	from_cache=0
fi
# Commits made in the tree (and so the patches refresh exports) carry the
# identity of whoever runs the tools, from their own git configuration: a
# Signed-off-by is their statement. Only the base commit needs one when
# they have none yet; git am keeps each patch's own author.
git config core.abbrev 12
git config gc.auto 0
echo "$ver" >.git/base-version
git tag base
((from_cache)) || base_to_cache

# One git am for the whole series (a process per patch costs a refresh
# of the whole index each: 15 s against 3 s). When one does not apply,
# git's own message is above and rebase-apply/next numbers it.
mapfile -t plist < <(series_patches "$PATCHES")
n=${#plist[@]}
if ((n)) && ! git_as_runner am -q --keep-cr "${plist[@]/#/$PATCHES/}"; then
	i=$(cat .git/rebase-apply/next 2>/dev/null) || i=0
	if [[ ! $i =~ ^[1-9][0-9]*$ ]] || ((i > n)); then
		die "the series does not apply to $BASE_PKG $ver"
	fi
	die "patch ${plist[i - 1]} does not apply to $BASE_PKG $ver"
fi
cd - >/dev/null
mv "$tmp" "$KSRC"
series_record HEAD
log "prepared $KSRC: $BASE_PKG $ver + $n patches"
