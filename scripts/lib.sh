# Common settings for the project's scripts; sourced, not run.
# shellcheck shell=bash disable=SC2034 # variables for the scripts that source this

# Debian's tools first (a pyenv python3 would lack python3-ply for checkpatch).
export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
# The series has two bases (Documentation/workflow.md, "Two bases"):
#   mainline  Debian's linux-source-7.3 (trixie-backports): where the series
#             is written and posted from; kernel/mainline, build/linux-mainline
#   6.12      Debian's linux-source-6.12 (bookworm-security, trixie): its
#             backport, the kernel Debian 13 runs; kernel/6.12, build/linux
# KBASE picks one for every script; the default is 6.12.
KBASE=${KBASE:-6.12}
case $KBASE in
mainline)
	BASE_PKG=linux-source-7.3
	BASE_SUITE=trixie-backports # where setup.sh fetches it from
	KSRC=$BUILD/linux-mainline  # the prepared kernel git tree
	OBJ_PREFIX=$BUILD/obj-mainline-
	;;
6.12)
	BASE_PKG=linux-source-6.12
	BASE_SUITE=''               # installed with apt-get from the host's sources
	KSRC=$BUILD/linux
	OBJ_PREFIX=$BUILD/obj-
	;;
*)
	printf 'error: KBASE=%s: the bases are mainline and 6.12\n' "$KBASE" >&2
	exit 1
	;;
esac
# The base's tarball: the installed package's, else the one setup.sh fetched
# into build/bases (a host whose apt sources do not carry the package).
BASE_FETCHED=$BUILD/bases/$BASE_PKG
if [[ -z ${BASE_TARBALL:-} ]]; then
	BASE_TARBALL=/usr/src/$BASE_PKG.tar.xz
	[[ -r $BASE_TARBALL || ! -r $BASE_FETCHED/$BASE_PKG.tar.xz ]] ||
		BASE_TARBALL=$BASE_FETCHED/$BASE_PKG.tar.xz
fi
PATCHES=${PATCHES:-$TOP/kernel/$KBASE} # the series (tests point it at a scratch copy)
PATCHES_REL=${PATCHES#"$TOP"/}
CONFIGS=$TOP/kernel/configs
# Modules of the tests, built with each guest kernel (scripts/build-kernel.sh).
KMOD_SRC=$TOP/tests/kmod

# What the project keeps between clones of itself, as ccache keeps compiles:
# the base commits' objects (scripts/prepare.sh). Removing it costs time,
# never correctness.
VSTOR_CACHE=${VSTOR_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/vstor}

# vstor_cache_usable: VSTOR_CACHE may be used. What comes from it runs as
# whoever runs this (a restored kernel tree's .cmd files are make input,
# fio is run), so the cache and every directory above it must belong to
# root or to this user, and no other user may write to them (above the
# cache, a sticky directory such as /tmp is allowed). VSTOR_CACHE=off (or
# any relative path) turns every cache off.
vstor_cache_usable() {
	local d top uid owner perm
	[[ $VSTOR_CACHE == /* ]] || return 1
	if [[ ! -d $VSTOR_CACHE ]]; then
		mkdir -p "$(dirname "$VSTOR_CACHE")" 2>/dev/null
		mkdir -m 0700 "$VSTOR_CACHE" 2>/dev/null || [[ -d $VSTOR_CACHE ]] || {
			log "VSTOR_CACHE $VSTOR_CACHE: cannot create it; no cache used"
			return 1
		}
	fi
	top=$(realpath -e "$VSTOR_CACHE") || return 1
	uid=$(id -u)
	d=$top
	while :; do
		read -r owner perm < <(stat -c '%u %a' "$d") || return 1
		if [[ $owner != 0 && $owner != "$uid" ]] ||
			{ ((8#$perm & 8#022)) && { [[ $d == "$top" ]] || ((!(8#$perm & 8#1000))); }; }; then
			log "VSTOR_CACHE $VSTOR_CACHE: $d belongs to uid $owner, mode $perm: no cache used (it must be this user's or root's, writable by no one else)"
			return 1
		fi
		[[ $d == / ]] && return 0
		d=$(dirname "$d")
	done
}

# virtio-fs's reference daemon, vufsd's peer: the Rust virtiofsd (Debian
# 13's package virtiofsd) where installed, else QEMU 7.2's C virtiofsd
# (Debian 12's qemu-system-x86; QEMU 8 dropped it).
RUST_VIRTIOFSD=/usr/libexec/virtiofsd
C_VIRTIOFSD=/usr/lib/qemu/virtiofsd

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# git_as_runner ARGS...: git, committing as whoever runs it. Without an
# identity in their git configuration (a fresh machine), the committer of
# the local tree is their login at this host, as git itself would guess:
# the committer is never exported; authors and Signed-off-by lines are.
git_as_runner() {
	if git config user.email >/dev/null; then
		git "$@"
	else
		GIT_COMMITTER_NAME=${GIT_COMMITTER_NAME:-$(id -un)} \
			GIT_COMMITTER_EMAIL=${GIT_COMMITTER_EMAIL:-$(id -un)@$(hostname)} git "$@"
	fi
}

# The Debian version of the base, e.g. "6.12.117-1~deb12u1": the installed
# package's, or the fetched one's when that is the tarball in use.
base_version() {
	if [[ $BASE_TARBALL == "$BASE_FETCHED/"* && -r $BASE_FETCHED/version ]]; then
		cat "$BASE_FETCHED/version"
	else
		dpkg-query -W -f='${Version}' "$BASE_PKG" 2>/dev/null || echo unknown
	fi
}

# Object directory of a kernel flavour ("guest" or "debug") on this base.
kobj() { echo "$OBJ_PREFIX$1"; }

# Lines in a kernel log that fail a run or a test: WARN, BUG (KASAN reports
# start with "BUG: KASAN"), Oops, lockdep and UBSAN reports, panics, hung tasks,
# RCU stalls.
KLOG_BAD='WARNING:|BUG:|Oops|UBSAN:|general protection fault|Kernel panic|INFO: task .* blocked for more than|rcu: INFO: .* detected stall|possible circular locking|inconsistent lock state|possible recursive locking|suspicious RCU usage|sleeping function called from invalid context'

# stale_int3 LOG: the guest in LOG died in boot, before its first test, and
# the first kernel problem its console shows is an "Oops: int3" where the
# kernel's own dump of the code ("Code: ... XX <YY>") no longer has INT3
# (cc) in the byte before the trapping address. The CPU trapped on an INT3
# that memory does not hold: an instruction the kernel had already patched
# back, after every CPU had serialized. QEMU 7.2's TCG does this to 7.3
# guests in about 1 boot in 40 (Documentation/workflow.md, "A stale INT3
# under TCG"); real CPUs cannot.
stale_int3() {
	local log=$1 line first="" code=""
	[[ -f $log ]] || return 1
	while IFS= read -r line; do
		[[ $line == *"vstor-test: start "* ]] && return 1
		if [[ -z $first ]]; then
			[[ $line =~ $KLOG_BAD ]] && first=$line
		elif [[ $line == *" Code: "* ]]; then
			code=$line
			break
		fi
	done <"$log"
	[[ $first == *"Oops: int3: "* && $code =~ \ ([0-9a-f]{2})\ \<[0-9a-f]{2}\> ]] &&
		[[ ${BASH_REMATCH[1]} != cc ]]
}

# AWK_PATH_NORM: an awk function, norm(P), that normalizes a path the way
# the compiler's diagnostics and Kbuild's .cmd files need comparing: "."
# and empty components dropped, "D/.." folded (block/partitions/../blk.h
# is block/blk.h). Put it in front of a program: awk "$AWK_PATH_NORM"'...'.
# (mawk has no -e or @include, so it is text, not a file.)
# shellcheck disable=SC2034 # used by robot.sh and check-series.sh
AWK_PATH_NORM='
	function norm(p,   n, i, k, parts, st, out) {
		n = split(p, parts, "/"); k = 0
		for (i = 1; i <= n; i++) {
			if (parts[i] == "." || (parts[i] == "" && i > 1)) continue
			if (parts[i] == ".." && k > 0 && st[k] != "..") { k--; continue }
			st[++k] = parts[i]
		}
		out = st[1]
		for (i = 2; i <= k; i++) out = out "/" st[i]
		return out
	}
'

# kbuild_lock: hold a machine-wide lock for the rest of the calling script,
# so that two kernel builds (make kernel in one terminal and the per-patch
# check in another, or two checkouts) never share this machine's cores;
# the second waits, saying so. The lock is a file in /run/lock
# (VSTOR_KBUILD_LOCK overrides), not in a build directory, so it covers
# every checkout on the machine.
kbuild_lock() {
	local lock=${VSTOR_KBUILD_LOCK:-/run/lock/vstor-kbuild.lock}
	mkdir -p "$(dirname "$lock")"
	exec 9>>"$lock"
	if ! flock -n 9; then
		log "waiting for another kernel build to finish ($lock)"
		flock 9
	fi
}

# ---- The series and the kernel tree ----------------------------------------
# kernel/patches/series lists the patches in the order they apply; blank lines
# and lines starting with "#" are comments (refresh.sh keeps them). prepare.sh
# and refresh.sh record in build/linux/.git/vstor-series which series the tree
# holds (series_hash) and the commit of the tree that is that series;
# series_state compares the record with kernel/patches as it is now, so that
# nothing builds or exports a tree made from an older series (say, before a
# git pull).

SERIES_RECORD=vstor-series

# series_patches [DIR]: the patch names of DIR/series (default: the series),
# in order, without comments and blank lines.
series_patches() {
	local dir=${1:-$PATCHES} p
	[[ -f $dir/series ]] || return 0
	while read -r p || [[ -n $p ]]; do
		[[ -z $p || $p == \#* ]] && continue
		printf '%s\n' "$p"
	done <"$dir/series"
}

# series_hash DIR: a hash of the patch names, their order and their
# contents. Comments in the series file do not count.
series_hash() {
	local -a list
	mapfile -t list < <(series_patches "$1")
	if ((${#list[@]})); then
		(cd "$1" && { sha256sum -- "${list[@]}" 2>&1 || true; })
	fi | sha256sum | cut -d' ' -f1
}

# series_record [COMMIT]: record that COMMIT (default HEAD) of the tree is the
# series as it is now.
series_record() {
	local commit
	commit=$(git -C "$KSRC" rev-parse --verify "${1:-HEAD}^{commit}")
	printf 'series %s\nhead %s\n' "$(series_hash "$PATCHES")" "$commit" >"$KSRC/.git/$SERIES_RECORD.tmp"
	mv "$KSRC/.git/$SERIES_RECORD.tmp" "$KSRC/.git/$SERIES_RECORD"
}

# series_export DIR: the tree's commits base..HEAD as numbered patches in DIR,
# and a series file listing them. The output depends only on the commits.
series_export() {
	git -C "$KSRC" -c diff.algorithm=myers -c core.abbrev=12 format-patch -q \
		--zero-commit --no-signature --no-numbered --abbrev=12 --no-renames \
		-o "$1" base..HEAD
	(
		shopt -s nullglob
		cd "$1" || exit
		for p in *.patch; do printf '%s\n' "$p"; done
	) >"$1/series"
}

# series_placeless FILE: a patch without what depends on the base it was
# exported from rather than on the change: the blob names of "index" lines
# and the line numbers of hunk headers. A new Debian point release of the base
# changes both in patches that still apply as they are.
series_placeless() {
	awk '/^diff --git / { body = 1 }
		body && /^index [0-9a-f]+\.\.[0-9a-f]+/ { next }
		body && /^@@ -[0-9]+(,[0-9]+)? \+[0-9]+(,[0-9]+)? @@/ {
			sub(/^@@ -[0-9]+(,[0-9]+)? \+[0-9]+(,[0-9]+)? @@/, "@@ @@") }
		{ print }' "$1"
}

# series_same A B: the patches A and B make the same change with the same
# message, wherever in the base their hunks land.
series_same() {
	cmp -s <(series_placeless "$1") <(series_placeless "$2")
}

# series_prefix_commit: when the tree's first commits export to exactly the
# series (names and changes, series_same; any later commits are local work), print the
# commit that ends the series; fail otherwise.
series_prefix_commit() {
	local tmp n m i ok=1
	local -a want have
	mapfile -t want < <(series_patches)
	tmp=$(mktemp -d)
	series_export "$tmp"
	mapfile -t have < <(series_patches "$tmp")
	n=${#want[@]} m=${#have[@]}
	((n <= m && (n > 0 || m == 0))) || ok=0
	for ((i = 0; ok && i < n; i++)); do
		[[ ${want[i]} == "${have[i]}" ]] && series_same "$PATCHES/${want[i]}" "$tmp/${have[i]}" || ok=0
	done
	rm -rf "$tmp"
	((ok)) || return 1
	if ((n == 0)); then
		git -C "$KSRC" rev-parse base
	else
		git -C "$KSRC" rev-list --reverse base..HEAD | sed -n "${n}p"
	fi
}

# series_state: how the tree stands to the series. Sets SERIES_STATE to
#   absent      no tree;
#   based       the tree was made from the series as it is now: commits on
#               top of SERIES_HEAD and uncommitted changes are work in progress;
#   stale       the series changed since the tree was made and the tree has no
#               local work (HEAD as recorded, nothing uncommitted): recreate it;
#   stale-work  the series changed and the tree has local work, or the tree
#               has no record (an older prepare.sh made it) and does not hold
#               the series (SERIES_LEGACY=1): only the developer can decide.
# A tree that holds the changed series (+ local commits), or that has no record
# but holds the series, gets a new record and is "based".
series_state() {
	SERIES_STATE=absent SERIES_HEAD='' SERIES_LEGACY=0
	[[ -d $KSRC/.git ]] || return 0
	local rec=$KSRC/.git/$SERIES_RECORD recorded='' head='' c
	if [[ -f $rec ]]; then
		recorded=$(sed -n 's/^series //p' "$rec")
		head=$(sed -n 's/^head //p' "$rec")
	fi
	if [[ -n $recorded && $recorded == "$(series_hash "$PATCHES")" ]]; then
		SERIES_STATE=based SERIES_HEAD=$head
		return 0
	fi
	# The series changed (or there is no record): a tree that holds the new
	# series exactly, or followed by commits made after the recorded HEAD
	# (local work), only needs a new record. Commits of the old series that
	# the new one lacks are not local work: a pull may have removed them.
	if c=$(series_prefix_commit) &&
		{ [[ -z $head || $c == $(git -C "$KSRC" rev-parse HEAD) ]] ||
			git -C "$KSRC" merge-base --is-ancestor "$head" "$c" 2>/dev/null; }; then
		if [[ -z $recorded ]]; then
			log "$KSRC has no record of its series (an older prepare.sh made it); it holds $PATCHES_REL: recorded"
		else
			log "$PATCHES_REL changed since $KSRC was prepared, and the tree holds the new series: recorded"
		fi
		series_record "$c"
		SERIES_STATE=based SERIES_HEAD=$c
		return 0
	fi
	SERIES_HEAD=$head
	if [[ -z $recorded ]]; then
		SERIES_STATE=stale-work SERIES_LEGACY=1
	elif [[ $(git -C "$KSRC" rev-parse HEAD) == "$head" &&
		-z $(git -C "$KSRC" status --porcelain) ]]; then
		SERIES_STATE=stale
	else
		SERIES_STATE=stale-work
	fi
}

# series_work: the local work in the tree, relative to SERIES_HEAD (set by
# series_state), in words.
series_work() {
	local head n w=()
	head=$(git -C "$KSRC" rev-parse HEAD)
	if [[ -z $SERIES_HEAD ]]; then
		w+=("$(git -C "$KSRC" rev-list --count base..HEAD) commits on base")
	elif [[ $head != "$SERIES_HEAD" ]]; then
		if git -C "$KSRC" merge-base --is-ancestor "$SERIES_HEAD" "$head" 2>/dev/null; then
			n=$(git -C "$KSRC" rev-list --count "$SERIES_HEAD..$head")
			w+=("$n local commit$( ((n == 1)) || echo s)")
		else
			w+=("rewritten history: $(git -C "$KSRC" rev-list --count base..HEAD) commits on base")
		fi
	fi
	[[ -z $(git -C "$KSRC" status --porcelain) ]] || w+=("uncommitted changes")
	((${#w[@]})) || w=("no local work")
	local out=${w[0]} x
	for x in "${w[@]:1}"; do out+=", $x"; done
	printf '%s\n' "$out"
}

# series_explain: say, on stderr, why a tree that is not "based" cannot be
# used and exactly what to do about it.
series_explain() {
	local k=${KSRC#"$TOP"/} b=${BUILD#"$TOP"/}
	case $SERIES_STATE in
	based) return 0 ;;
	absent)
		printf 'error: no kernel tree at %s: run make prepare\n' "$k" >&2
		return 0
		;;
	stale)
		printf 'error: %s changed since %s was prepared (a git pull?);\n' "$PATCHES_REL" "$k"
		printf 'the tree has no local work: make prepare recreates it from %s\n' "$PATCHES_REL"
		;;
	stale-work)
		if ((SERIES_LEGACY)); then
			printf 'error: %s was made by an older prepare.sh (no record of its series) and\n' "$k"
			printf 'does not hold %s: it is either out of date or holds your work.\n' "$PATCHES_REL"
			printf 'Nothing was changed. If it is your work on the current %s:\n' "$PATCHES_REL"
			printf '    make refresh FORCE=1    (git diff %s then shows what changed)\n' "$PATCHES_REL"
		else
			printf 'error: %s changed since %s was prepared (a git pull?),\n' "$PATCHES_REL" "$k"
			printf 'and the tree has local work (%s). Nothing was changed.\n' "$(series_work)"
			if [[ -n $(git -C "$KSRC" status --porcelain) ]]; then
				printf 'To keep the work: commit what is uncommitted (git -C %s add, commit), then\n' "$k"
			else
				printf 'To keep the work:\n'
			fi
			if git -C "$KSRC" merge-base --is-ancestor "$SERIES_HEAD" HEAD 2>/dev/null; then
				printf '    git -C %s format-patch -o %s/wip %s..HEAD\n' "$k" "$b" "$(git -C "$KSRC" rev-parse --short "$SERIES_HEAD")"
				printf '    make prepare FORCE=1\n'
				printf '    git -C %s am -3 %s/wip/*.patch\n' "$k" "$b"
			else
				printf '    git -C %s format-patch -o %s/wip base..HEAD\n' "$k" "$b"
				printf '(the whole series as the tree has it: its history was rewritten), then\n'
				printf '    make prepare FORCE=1\n'
				printf 'and carry your changes over to the new series.\n'
			fi
		fi
		printf 'To discard the tree: make prepare FORCE=1 (it saves the commits and\n'
		printf 'uncommitted changes in %s/linux-backup/ first)\n' "$b"
		;;
	esac >&2
}

# series_require WHAT: stop, explaining, unless the tree is based on the
# series (WHAT says what was refused, e.g. "building it").
series_require() {
	series_state
	[[ $SERIES_STATE == based ]] && return 0
	series_explain
	die "refusing $1"
}

# series_backup: save the tree's commits (base..HEAD, as patches), its
# uncommitted changes and untracked files in a new directory under
# build/linux-backup; print the directory.
series_backup() {
	local dir
	mkdir -p "$BUILD/linux-backup"
	dir=$(mktemp -d "$BUILD/linux-backup/$(date +%Y%m%d-%H%M%S).XXXX")
	git -C "$KSRC" format-patch -q --no-signature -o "$dir" base..HEAD >/dev/null 2>&1 || true
	git -C "$KSRC" diff HEAD >"$dir/uncommitted.diff" 2>/dev/null || true
	[[ -s $dir/uncommitted.diff ]] || rm -f "$dir/uncommitted.diff"
	if [[ -n $(git -C "$KSRC" ls-files --others --exclude-standard 2>/dev/null) ]]; then
		git -C "$KSRC" ls-files -z --others --exclude-standard |
			tar -C "$KSRC" --null -T - -czf "$dir/untracked.tar.gz" || true
	fi
	echo "$dir"
}

# private_apt DIR LINE: an apt configuration of its own in DIR, with LINE
# as its only sources entry, and its index fetched; nothing in /etc/apt
# changes and nothing is installed. Sets PRIVATE_APT to the apt-get options
# that use it. The index's freshness check is dropped only when the mirror
# serves it past its Valid-Until date (a snapshot mirror or a caching proxy
# does): signatures are still verified, so a replayed index can offer only
# packages Debian signed, and the callers check what they build from them.
PRIVATE_APT=()
private_apt() {
	local dir=$1 line=$2
	mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/sources.list.d"
	printf '%s\n' "$line" >"$dir/sources.list"
	PRIVATE_APT=(-o "Dir::Etc::SourceList=$dir/sources.list"
		-o "Dir::Etc::SourceParts=$dir/sources.list.d"
		-o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache"
		-o "Dir::State::status=/dev/null" -o "APT::Sandbox::User=root" -q)
	# LC_ALL=C: the message looked for below is apt's English one.
	LC_ALL=C apt-get "${PRIVATE_APT[@]}" update >"$dir/update.log" 2>&1 && return 0
	if grep -q 'is expired' "$dir/update.log"; then
		log "the mirror's index for '$line' is past its Valid-Until date; fetching it again without the freshness check (signatures are still verified)"
		PRIVATE_APT+=(-o Acquire::Check-Valid-Until=false)
		LC_ALL=C apt-get "${PRIVATE_APT[@]}" update >>"$dir/update.log" 2>&1 && return 0
	fi
	tail -n 5 "$dir/update.log" >&2
	die "apt-get update for '$line' failed: see $dir/update.log"
}
