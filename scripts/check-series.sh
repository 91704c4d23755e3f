#!/usr/bin/env bash
# Check the series the way a maintainer would: every patch passes
# checkpatch.pl --strict, and the guest kernel builds (without new warnings)
# at every patch, not just at the top, and sparse (make C=2) finds nothing
# in the lines the patch adds to the C files it touches.
#   scripts/check-series.sh checkpatch [PATCH...]   default: every patch
#   scripts/check-series.sh build [--quick] [N...]  default: every commit
#   scripts/check-series.sh build --group A B       patches A..B as one group
#   scripts/check-series.sh [all]                   both
# PATCH is a file name from kernel/patches/series; N counts the commits of
# build/linux from base (1 is the first patch). One line per check,
# "checkpatch: PATCH: clean|FAILED" or "builds: N SUBJECT: ok|FAILED"; the
# exit status is 0 only if every check passed.
#
# The build check checks each commit out in place (only changed files
# recompile), so the tree must be clean; it returns to where it was, also
# when interrupted. It builds in build/obj-bisect from the guest kernel's
# .config: a patch that adds a Kconfig symbol is built with it enabled, and
# the guest kernel the tests boot is never touched. An empty
# build/obj-bisect starts as a copy of the guest kernel's objects, and by
# default the commits are built from the last to the first: the last one is
# what the guest kernel was built from, so its check compiles only its own
# files (ccache has them), and each one after compiles what it and the
# commit above it change. (From the first, the
# first check would compile the whole kernel: the Kconfig symbols of later
# patches change autoconf.h, so no compile matches ccache's.)
#
# --quick (what make test's series:builds_NNNN run): at a commit that
# changes no Kconfig, Makefile, Kbuild, arch/ or scripts/ file, compile
# only the objects whose sources or headers differ from the commit
# build/obj-bisect was last built at (Kbuild's own dependency lists say
# which), and skip the link and modpost; the last patch of every cover
# letter group (kernel/cover/KBASE) and any commit the rule above excludes
# get the whole build, so every group as posted links and passes modpost.
# A full build per commit spends most of its time walking the tree and
# linking, whatever the commit changes. What a quick build does not check
# at each commit: the link, modpost, and objtool's checks of built-in code
# (on vmlinux.o) and of multi-object modules (on the module's object); the
# next group end does them. A failed or interrupted build makes the next
# one whole. make check (no --quick) builds every commit whole.
#
# --group A B (what make test's series:builds_NNNN run, NNNN being the last
# patch of a cover letter group): the group's last commit that changes the
# kernel, built and linked whole as --quick builds a group's end, with
# sparse on every line the group's patches A..B add together. The commits
# inside a group are not compiled one by one: make check does that.
#
# sparse is the one scripts/build-sparse.sh names: mainline's Makefile
# skips the check, with a message this script fails on, when the tree
# rejects Debian's sparse.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

what=${1:-all}
(($#)) && shift
rc=0

# checkpatch_exceptions PATCH: the checkpatch types kernel/checkpatch-exceptions
# waives for the patch with PATCH's subject, comma-separated. Each line of
# that file is "TYPE<TAB>SUBJECT<TAB>WHY"; a waiver without a reason is
# refused.
checkpatch_exceptions() {
	local subj
	subj=$(awk '/^Subject: / { s = $0; sub(/^Subject: (\[[^]]*\] )?/, "", s); on = 1; next }
		on && /^[ \t]/ { sub(/^[ \t]+/, " "); s = s $0; next }
		on { print s; exit }' "$PATCHES/$1")
	awk -F'\t' -v s="$subj" '!/^#/ && NF && $2 == s {
		if ($3 == "") { print "no reason given for waiving " $1 > "/dev/stderr"; exit 1 }
		t = t (t ? "," : "") $1 } END { print t }' "$TOP/kernel/checkpatch-exceptions"
}

checkpatch() { # checkpatch PATCH
	local out waived
	[[ -f $PATCHES/$1 ]] || { echo "checkpatch: $1: FAILED (no such patch)"; return 1; }
	waived=$(checkpatch_exceptions "$1") || { echo "checkpatch: $1: FAILED (kernel/checkpatch-exceptions)"; return 1; }
	# UNKNOWN_COMMIT_ID: the base is Debian's source package, not a clone
	# with upstream history, so the upstream commits that Fixes: tags and
	# messages name cannot be looked up here. Other types only where
	# kernel/checkpatch-exceptions says why.
	if out=$(cd "$KSRC" && ./scripts/checkpatch.pl --strict -q --no-summary \
		--ignore "UNKNOWN_COMMIT_ID${waived:+,$waived}" "$PATCHES/$1" 2>&1) &&
		[[ -z $out ]]; then
		echo "checkpatch: $1: clean${waived:+ (waived: $waived, see kernel/checkpatch-exceptions)}"
	else
		printf '%s\n' "$out" | sed 's/^/  /'
		echo "checkpatch: $1: FAILED"
		return 1
	fi
}

# sparse_at COMMIT OBJ [FROM]: run sparse (make C=2) on every C file
# FROM..COMMIT changes (FROM: COMMIT's parent) that this configuration
# builds; fails on a sparse warning or error in a line FROM..COMMIT adds to
# any file it changes. Lines it leaves alone keep whatever sparse says about
# them upstream. One make for all the files: each make walks the tree's
# prerequisites first, which costs more than sparse on a file.
sparse_at() {
	local c=$1 obj=$2 from=${3:-$1~1} f bad
	local -a objs=()
	: >"$obj/sparse.log"
	while read -r f; do
		[[ $f == *.c && -f $obj/${f%.c}.o ]] && objs+=("${f%.c}.o")
	done < <(git -C "$KSRC" diff --name-only "$from" "$c")
	if ((${#objs[@]})); then
		make -C "$KSRC" O="$obj" CC="ccache gcc" C=2 CHECK="$sparse" "${objs[@]}" >>"$obj/sparse.log" 2>&1 || return 1
	fi
	# Mainline's Makefile turns C=2 into nothing, with this message, when
	# scripts/checker-valid.sh rejects the sparse (build-sparse.sh).
	if grep -q 'sparse is not available or not up to date' "$obj/sparse.log"; then
		echo "  sparse: $sparse is rejected by the tree's scripts/checker-valid.sh: nothing was checked"
		return 1
	fi
	# FILE:LINE of every line the commit adds, then the sparse messages on them.
	git -C "$KSRC" diff -U0 "$from" "$c" | awk '
		/^\+\+\+ b\// { file = substr($0, 7) }
		/^@@ / { split($3, a, ","); n = (a[2] == "" ? 1 : a[2]); s = substr(a[1], 2)
			for (i = 0; i < n; i++) print file ":" s + i }' >"$obj/sparse.added"
	bad=$(awk -v ksrc="$KSRC/" '
		NR == FNR { want[$0] = 1; next }
		/: (warning|error): / {
			split($1, p, ":"); f = p[1]
			if (index(f, ksrc) == 1) f = substr(f, length(ksrc) + 1)
			sub(/^(\.\.\/)+(linux\/)?/, "", f)
			if ((f ":" p[2]) in want) print }' "$obj/sparse.added" "$obj/sparse.log")
	[[ -z $bad ]] && return 0
	printf '%s\n' "$bad" | sed 's/^/  sparse: /'
	return 1
}

# kernel_files COMMIT: whether COMMIT changes anything the kernel build
# reads (everything but Documentation/, tools/ and MAINTAINERS).
kernel_files() {
	git -C "$KSRC" diff-tree --no-commit-id --name-only -r "$1" |
		grep -qvE '^(Documentation/|tools/|MAINTAINERS$)'
}

# quick_objects PREV C: with C checked out, the objects of build/obj-bisect
# to compile when it was last built at PREV, one per line (none: nothing
# to compile), or "full" when C needs the whole build (see the header).
quick_objects() {
	local prev=$1 c=$2 rel
	local -a files
	mapfile -t files < <({
		git -C "$KSRC" diff --name-only "$prev" "$c"
		git -C "$KSRC" diff-tree --no-commit-id --name-only -r "$c"
	} | grep -vE '^(Documentation/|tools/|MAINTAINERS$)' | sort -u)
	((${#files[@]})) || return 0
	if grep -qE '(^|/)(Kconfig[^/]*|Makefile[^/]*|Kbuild)$|^(arch|scripts)/' < <(printf '%s\n' "${files[@]}"); then
		echo full
		return 0
	fi
	# Kbuild's DIR/.NAME.o.cmd names the object's source ("source_OBJ :=
	# PATH") and every header it read ("  PATH \"), relative to the object
	# directory when the tree is its sibling, else absolute, and not
	# normalized (block/partitions/../blk.h). Objects made from generated
	# sources (under the object directory) are not compile units of ours.
	rel=$(realpath --relative-to="$obj" "$KSRC")
	printf '%s\n' "${files[@]}" >"$obj/quick.files"
	# shellcheck disable=SC2016 # awk's program
	(cd "$obj" && find . -name '.*.o.cmd' -print0 | xargs -0 -r awk -v rel="$rel/" -v abs="$KSRC/" "$AWK_PATH_NORM"'
		function tree(p) {
			if (index(p, rel) == 1) p = substr(p, length(rel) + 1)
			else if (index(p, abs) == 1) p = substr(p, length(abs) + 1)
			else return ""
			return norm(p)
		}
		function flush() { if (hit && tree(src) != "") print prev "\t" src }
		BEGIN { while ((getline f < "quick.files") > 0) want[f] = 1 }
		FNR == 1 { flush(); src = ""; hit = 0; prev = FILENAME }
		/^source_/ { src = $3; if (tree(src) in want) hit = 1 }
		/^  [^ ]+ \\$/ { if (tree($1) in want) hit = 1 }
		END { flush() }') |
		while IFS=$'\t' read -r cmd src; do
			[[ $src == /* ]] || src=$obj/$src
			# Objects of sources that C does not have yet (or no more).
			[[ -f $src ]] || continue
			cmd=${cmd#./}
			cmd=$(dirname "$cmd")/$(basename "$cmd" .cmd)
			echo "${cmd/\/./\/}"
		done
}

# build_at N [FROM GROUP]: build the guest configuration at commit N; with
# FROM, sparse checks the lines FROM..N add, and the report names GROUP.
build_at() {
	local c subj start obj f from=${2:-} group=${3:+" (group $3)"}
	obj=$(kobj bisect)
	# Counted from the tip the run started at: HEAD moves as commits are built.
	c=$(git -C "$KSRC" rev-list --reverse "base..$tip" | sed -n "${1}p")
	[[ -n $c ]] || { echo "builds: $1: FAILED (no commit $1 in base..HEAD)"; return 1; }
	subj=$(git -C "$KSRC" log -1 --format=%s "$c")$group
	git -C "$KSRC" checkout -q "$c"
	start=$SECONDS
	if ! kernel_files "$c"; then
		# The kernel is the parent's, built by the check of the patch
		# before; what the patch changes in tools/virtio is compiled here
		# against its own uapi headers.
		mkdir -p "$obj"
		for f in $(git -C "$KSRC" diff-tree --no-commit-id --name-only -r "$c" -- 'tools/virtio/*.c'); do
			f=$(basename "$f" .c)
			rm -rf "$obj/tools"
			if ! make -s -C "$TOP/tests/tools" KSRC="$KSRC" OUT="$obj/tools" "$obj/tools/$f" \
				>"$obj/tools.log" 2>&1; then
				sed 's/^/  /' "$obj/tools.log" | head -20
				echo "builds: $1 $subj: FAILED (tools/virtio/$f.c)"
				return 1
			fi
		done
		echo "builds: $1 $subj: ok (changes no kernel source: its kernel is patch $(($1 - 1))'s, checked on its own${f:+; tools/virtio compiled})"
		return 0
	fi
	# make rebuilds what the checkout made newer: walking down, that is
	# what the next commit changes. Touch this commit's own files as well,
	# so that they compile at this version and their warnings land in this
	# check's log (ccache hands most of them back).
	git -C "$KSRC" diff-tree --no-commit-id --name-only --diff-filter=d -r "$c" |
		grep -vE '^(Documentation/|tools/|MAINTAINERS$)' | (cd "$KSRC" && xargs -r touch --)
	mkdir -p "$obj"
	local how=full prev objs=() targets=(bzImage modules) ok=0
	# The record says which commit every object is built at. It is written
	# only after a build succeeded: after a failed or killed one, the next
	# build is a whole one, which make's times make right.
	prev=$(cat "$obj/.vstor-bisect-at" 2>/dev/null || true)
	# A commit no longer in the tree (the series was refreshed since), or a
	# guest configuration changed since: nothing is known about the objects.
	git -C "$KSRC" cat-file -e "${prev:-none}^{commit}" 2>/dev/null || prev=""
	cmp -s "$cfg" "$obj/.vstor-bisect-config" || prev=""
	if ((quick)) && [[ $prev == "$c" && -f $obj/.vstor-bisect-linked ]]; then
		# A copy of the guest kernel built and linked at this commit;
		# its own files compile again for their warnings (from ccache).
		how=linked
		quick_objects "$c" "$c" >"$obj/quick.list" || prev=""
		mapfile -t objs <"$obj/quick.list"
	elif ((quick)) && [[ -n $prev ]]; then
		quick_objects "$prev" "$c" >"$obj/quick.list" || prev=""
		mapfile -t objs <"$obj/quick.list"
		[[ -z $prev || ${objs[*]} == full ]] || how=quick
		# A Kconfig or Makefile change away from a group's end: the
		# whole tree and modpost, without the final link.
		[[ $how == full ]] && targets=(vmlinux_o modules)
	fi
	[[ " ${group_ends[*]} " == *" $1 "* && $how == quick ]] && how=full
	[[ $how == full && (" ${group_ends[*]} " == *" $1 "* || $quick == 0 || -z $prev) ]] &&
		targets=(bzImage modules)
	[[ $how == linked && ${objs[*]} == full ]] && objs=()
	rm -f "$obj/.vstor-bisect-at" "$obj/.vstor-bisect-linked"
	if [[ $how == full ]]; then
		cp "$cfg" "$obj/.config"
		make -C "$KSRC" O="$obj" CC="ccache gcc" olddefconfig >"$obj/config.log" 2>&1 &&
			make -C "$KSRC" O="$obj" CC="ccache gcc" -j"$(nproc)" "${targets[@]}" >"$obj/bisect.log" 2>&1
	elif ((${#objs[@]})); then
		make -C "$KSRC" O="$obj" CC="ccache gcc" -j"$(nproc)" "${objs[@]}" >"$obj/bisect.log" 2>&1
	else
		: >"$obj/bisect.log"
	fi && ok=1
	if ((ok)); then
		echo "$c" >"$obj/.vstor-bisect-at"
		cp "$cfg" "$obj/.vstor-bisect-config"
		[[ $how == linked || ($how == full && ${targets[0]} == bzImage) ]] && touch "$obj/.vstor-bisect-linked"
		# Compiler and modpost warnings (modpost writes WARNING:).
		grep -qiE 'warning:' "$obj/bisect.log" && ok=0
	fi
	((ok)) && ! sparse_at "$c" "$obj" "$from" && ok=0
	if ((ok)); then
		if [[ $how == linked ]]; then
			echo "builds: $1 $subj: ok (the guest kernel, built and linked at this commit; its ${#objs[@]} objects compiled again)"
		elif [[ $how == full ]]; then
			if [[ ${targets[0]} == bzImage ]]; then
				echo "builds: $1 $subj: ok"
			else
				echo "builds: $1 $subj: ok (vmlinux.o, and the modules with modpost; no final link)"
			fi
		else
			echo "builds: $1 $subj: ok (compiled the ${#objs[@]} objects it and the commit built before change; no link)"
		fi
		log "built and checked in $((SECONDS - start)) s"
	else
		grep -E 'error|warning' "$obj/bisect.log" | head -20 | sed 's/^/  /'
		echo "builds: $1 $subj: FAILED"
		return 1
	fi
}

case $what in
checkpatch | build | all) ;;
*) die "unknown check '$what' (checkpatch, build or all)" ;;
esac
[[ -d $KSRC/.git ]] || die "no kernel tree at $KSRC: run scripts/prepare.sh"

if [[ $what == checkpatch || $what == all ]]; then
	if [[ $what == checkpatch && $# -gt 0 ]]; then list=("$@"); else mapfile -t list < <(series_patches "$PATCHES"); fi
	for p in "${list[@]}"; do checkpatch "$p" || rc=1; done
fi

quick=0 group=()
if [[ $what == build && ${1:-} == --quick ]]; then
	quick=1
	shift
elif [[ $what == build && ${1:-} == --group ]]; then
	if ! [[ ${2:-} =~ ^[0-9]+$ && ${3:-} =~ ^[0-9]+$ ]] || ((10#$2 < 1 || 10#$2 > 10#$3)); then
		die "usage: check-series.sh build --group FIRST LAST (patch numbers, FIRST <= LAST)"
	fi
	quick=1 group=($((10#$2)) $((10#$3)))
	shift 3
fi
if [[ $what == build || $what == all ]]; then
	# The last patch of each cover letter group that changes the kernel:
	# built whole also when quick.
	mapfile -t all < <(git -C "$KSRC" rev-list --reverse base..HEAD)
	group_ends=()
	for f in "$TOP"/kernel/cover/"$KBASE"/*.txt; do
		f=$(sed -n 's/^Patches: *\([0-9]*-\)\{0,1\}\([0-9]*\).*/\2/p' "$f" | head -n 1)
		[[ -n $f ]] || continue
		f=$((10#$f))
		while ((f > 1)) && [[ -n ${all[f - 1]:-} ]] && ! kernel_files "${all[f - 1]}"; do
			f=$((f - 1))
		done
		group_ends+=("$f")
	done
	[[ -z $(git -C "$KSRC" status --porcelain --untracked-files=no) ]] ||
		die "build/linux has uncommitted changes: commit or stash them first"
	sparse=$("$TOP/scripts/build-sparse.sh") || die "no sparse that ${KSRC#"$TOP"/} accepts"
	cfg=$(kobj guest)/.config
	[[ -f $cfg ]] || die "build the guest kernel first (scripts/build-kernel.sh)"
	kbuild_lock
	if ((${#group[@]})); then
		((group[1] <= ${#all[@]})) || die "no patch ${group[1]}: the series has ${#all[@]}"
		# The group's last commit that changes the kernel.
		f=${group[1]}
		while ((f > group[0])) && ! kernel_files "${all[f - 1]}"; do
			f=$((f - 1))
		done
		list=("$f")
		gfrom=base
		((group[0] == 1)) || gfrom=${all[group[0] - 2]}
		gname=$(printf '%04d-%04d' "${group[0]}" "${group[1]}")
	elif [[ $what == build && $# -gt 0 ]]; then
		list=("$@")
	else
		mapfile -t list < <(seq "$(git -C "$KSRC" rev-list --count base..HEAD)" -1 1)
	fi
	obj=$(kobj bisect)
	if [[ ! -f $obj/.config && -f $(kobj guest)/vmlinux ]]; then
		# cp -a keeps the objects' times: make rebuilds exactly what
		# the checkouts below make newer.
		log "starting $obj from a copy of $(kobj guest)"
		rm -rf "$obj" "$obj.tmp"
		cp -a "$(kobj guest)" "$obj.tmp"
		rm -rf "$obj.tmp/modroot" "$obj.tmp/.vstor-built"
		# Built and linked whole at that commit (a clean tree's build).
		if [[ -f $obj.tmp/.vstor-built-at ]]; then
			mv "$obj.tmp/.vstor-built-at" "$obj.tmp/.vstor-bisect-at"
			cp "$cfg" "$obj.tmp/.vstor-bisect-config"
			touch "$obj.tmp/.vstor-bisect-linked"
		fi
		mv "$obj.tmp" "$obj"
	fi
	orig=$(git -C "$KSRC" symbolic-ref -q --short HEAD || git -C "$KSRC" rev-parse HEAD)
	tip=$(git -C "$KSRC" rev-parse HEAD)
	trap 'git -C "$KSRC" checkout -q "$orig"' EXIT
	trap 'exit 130' INT TERM
	export KBUILD_BUILD_TIMESTAMP="2000-01-01" KBUILD_BUILD_USER=vstor KBUILD_BUILD_HOST=vstor
	# The checkouts leave sources newer than ccache's direct mode trusts:
	# without the sloppiness, every hit costs a preprocessor run.
	export CCACHE_BASEDIR=$BUILD CCACHE_NOHASHDIR=1 CCACHE_SLOPPINESS=include_file_mtime,include_file_ctime
	if ((${#group[@]})); then
		gfrom=$(git -C "$KSRC" rev-parse "$gfrom")
		build_at "${list[0]}" "$gfrom" "$gname" || rc=1
	else
		for nth in "${list[@]}"; do build_at "$nth" || rc=1; done
	fi
fi
exit $rc
