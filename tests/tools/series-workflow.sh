#!/usr/bin/env bash
# The series workflow (scripts/prepare.sh, refresh.sh, the tree check of
# build-kernel.sh) against a tiny fake base and series in a scratch BUILD and
# PATCHES, so that it runs in seconds and never touches build/ or
# kernel/patches. Prints KTAP; exits 0 only when every case passed.
#   tests/tools/series-workflow.sh [-v]     -v: show the scripts' output
# The cases run in order and each starts from the state the one before left.
# shellcheck disable=SC2034 # desc_*: read as ${!d}
set -uo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
verbose=0
[[ ${1:-} == -v ]] && verbose=1

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export BUILD=$scratch/build PATCHES=$scratch/patches BASE_TARBALL=$scratch/base.tar.xz
# A cache of its own: prepare.sh keeps one base commit per package, and
# the scratch base would take the real one's place in the user's.
export VSTOR_CACHE=$scratch/cache
KSRC=$BUILD/linux
S=$TOP/scripts
OUT=$scratch/out # output of the last run
export GIT_AUTHOR_DATE="2001-01-01T00:00:00Z" GIT_COMMITTER_DATE="2001-01-01T00:00:00Z"
# The fixture's commits are the test's, whoever runs it: a fresh machine
# has no git identity, and git refuses to guess one from a host name
# without a domain.
export GIT_AUTHOR_NAME="Series Test" GIT_AUTHOR_EMAIL=test@localhost
export GIT_COMMITTER_NAME="Series Test" GIT_COMMITTER_EMAIL=test@localhost

# run SCRIPT ARG...: run one of the scripts, output in $OUT; sets RC.
run() {
	"$S/$1" "${@:2}" >"$OUT" 2>&1
	RC=$?
	((verbose)) && sed "s|^|# $1 ${*:2}: |" "$OUT"
	return 0
}
say() { printf '# %s\n' "$@"; }
# expect WHAT CONDITION...: a check inside a case; says what failed.
expect() {
	local what=$1
	shift
	"$@" && return 0
	say "FAILED: $what"
	sed 's/^/#   | /' "$OUT" | tail -n 20
	return 1
}
rc_is() { [[ $RC == "$1" ]]; }
out_has() { grep -qE -- "$1" "$OUT"; }
tree() { git -C "$KSRC" "$@"; }
ncommits() { tree rev-list --count base..HEAD; }
series_is() { # series_is FILE: the series file is exactly FILE
	diff -u "$1" "$PATCHES/series" | sed 's/^/#   /' | head -n 30
	cmp -s "$1" "$PATCHES/series"
}
commit_file() { # commit_file FILE LINE SUBJECT: append LINE to FILE and commit
	echo "$2" >>"$KSRC/$1"
	tree add "$1" && tree commit -q -m "$3" -m "Signed-off-by: T <t@localhost>"
}

# The fake base: a few files under linux-source-6.12/, with Debian's
# .gitignore block that prepare.sh removes.
mkbase() {
	local d=$scratch/src/linux-source-6.12
	mkdir -p "$d/drivers"
	printf '%s\n' '*.o' '# Debian packaging: ignore everything' '/*' >"$d/.gitignore"
	echo "fake kernel" >"$d/README"
	printf 'int a;\n' >"$d/drivers/a.c"
	# a2.c is long enough that a patch appending to it does not start at
	# its first line, so a new base release can move that hunk.
	printf 'int a2;\nint a2_1;\nint a2_2;\nint a2_3;\n' >"$d/drivers/a2.c"
	printf 'int b;\n' >"$d/drivers/b.c"
	tar -C "$scratch/src" -cJf "$BASE_TARBALL" linux-source-6.12
	mkdir -p "$PATCHES"
	: >"$PATCHES/series"
}

# The series v1: two groups, a preamble and a last comment.
V1=$scratch/v1 V2=$scratch/v2
mkseries() {
	"$S/prepare.sh" >/dev/null 2>&1 || return 1
	commit_file drivers/a.c 'int a_knob;' "poll: add the queue knob"
	commit_file drivers/a2.c 'int a2_warn;' "poll: warn when clamped"
	commit_file drivers/b.c 'int b_dev;' "pt: add the char device"
	"$S/refresh.sh" >/dev/null 2>&1 || return 1
	cat >"$scratch/v1.series" <<-EOF
		# The test series.
		# A preamble: it stays at the top.

		# poll queues
		0001-poll-add-the-queue-knob.patch
		0002-poll-warn-when-clamped.patch

		# passthrough
		0003-pt-add-the-char-device.patch
		# (end)
	EOF
	cp "$scratch/v1.series" "$PATCHES/series"
	rm -rf "$V1" && cp -a "$PATCHES" "$V1"
	# v2, a colleague's: v1 plus a patch (and the tree made v1 again).
	commit_file doc.txt 'the device' "pt: document the device"
	"$S/refresh.sh" >/dev/null 2>&1 || return 1
	rm -rf "$V2" && cp -a "$PATCHES" "$V2"
	rm -rf "$BUILD"
	rm -rf "$PATCHES" && cp -a "$V1" "$PATCHES"
}
pull() { rm -rf "$PATCHES" && cp -a "$1" "$PATCHES"; } # a git pull bringing $1

CASES=(fresh roundtrip wip pull_clean pull_work refresh_stale follow_advice
	holds_new legacy force rename_subject add_renumber add_end remove_head
	replace remove_group base_moved)

desc_fresh="prepare: a fresh tree holds the series and records it"
t_fresh() {
	run prepare.sh
	expect "prepare succeeds" rc_is 0 &&
		expect "3 commits on base" [ "$(ncommits)" = 3 ] &&
		expect "record written" test -s "$KSRC/.git/vstor-series" &&
		expect ".gitignore's Debian block removed" \
			bash -c "! grep -q 'Debian packaging' '$KSRC/.gitignore'" &&
		{ run prepare.sh --check; expect "--check says based (0)" rc_is 0; }
}

desc_roundtrip="round trip: prepare + refresh --check and refresh change nothing, comments included"
t_roundtrip() {
	run refresh.sh --check
	expect "refresh --check passes" rc_is 0 || return 1
	run refresh.sh
	expect "refresh succeeds" rc_is 0 &&
		expect "kernel/patches unchanged" diff -r "$V1" "$PATCHES"
}

desc_wip="edit loop: commits and changes in the tree are work in progress (kept, built, exported)"
t_wip() {
	commit_file drivers/b.c 'int b_wip;' "pt: work in progress"
	echo "uncommitted" >>"$KSRC/README"
	run prepare.sh
	expect "prepare keeps the tree" rc_is 0 &&
		expect "it says so" out_has "based on .*patches \(1 local commit, uncommitted changes\)" &&
		expect "the commit is still there" [ "$(tree log -1 --format=%s)" = "pt: work in progress" ] &&
		{ run prepare.sh --check; expect "--check: based (0)" rc_is 0; } &&
		{ run refresh.sh; expect "refresh exports it" rc_is 0; } &&
		expect "4 patches" [ "$(grep -c '^0' "$PATCHES/series")" = 4 ] &&
		{ run prepare.sh --check; expect "--check after refresh: based (0)" rc_is 0; } &&
		# Back to v1: drop the commit and the change, as if never made.
		tree checkout -q README && tree reset -q --hard HEAD~1 && pull "$V1" &&
		run prepare.sh --force && expect "back to v1" rc_is 0
}

desc_pull_clean="pull, tree without local work: prepare recreates the tree, saying so"
t_pull_clean() {
	pull "$V2"
	run prepare.sh --check
	expect "--check: stale, no local work (2)" rc_is 2 &&
		expect "it says make prepare recreates it" out_has "make prepare recreates it" || return 1
	run build-kernel.sh guest
	expect "build-kernel refuses" bash -c "[ $RC != 0 ]" &&
		expect "saying why" out_has "refusing to build" || return 1
	run prepare.sh
	expect "prepare succeeds" rc_is 0 &&
		expect "says it recreates" out_has "no local work: recreating it" &&
		expect "4 commits now" [ "$(ncommits)" = 4 ] &&
		expect "a backup was saved" bash -c "ls -d '$BUILD'/linux-backup/*/0001-*.patch >/dev/null" &&
		{ run refresh.sh --check; expect "tree matches v2" rc_is 0; }
}

desc_pull_work="pull, tree with local work: prepare and build-kernel refuse, nothing is lost"
t_pull_work() {
	commit_file README 'my work' "readme: my work"
	echo "int b_more;" >>"$KSRC/drivers/b.c"
	local head
	head=$(tree rev-parse HEAD)
	pull "$V1"
	run prepare.sh
	expect "prepare refuses" bash -c "[ $RC != 0 ]" &&
		expect "says there is local work" out_has "has local work \(1 local commit, uncommitted changes\)" &&
		expect "says how to export" out_has "format-patch -o .*/wip [0-9a-f]+\.\.HEAD" &&
		expect "says how to discard" out_has "make prepare FORCE=1" &&
		expect "HEAD unchanged" [ "$(tree rev-parse HEAD)" = "$head" ] &&
		expect "uncommitted change kept" grep -q b_more "$KSRC/drivers/b.c" || return 1
	run prepare.sh --check
	expect "--check: stale with local work (3)" rc_is 3 || return 1
	run build-kernel.sh debug
	expect "build-kernel refuses" bash -c "[ $RC != 0 ]" && expect "saying why" out_has "refusing to build"
}

desc_refresh_stale="refresh refuses to export a tree not made from kernel/patches"
t_refresh_stale() {
	run refresh.sh
	expect "refresh refuses" bash -c "[ $RC != 0 ]" &&
		expect "says why" out_has "refusing to export" &&
		expect "kernel/patches untouched" diff -r "$V1" "$PATCHES"
}

desc_follow_advice="the refusal's advice works: export, prepare FORCE=1, git am keeps the work"
t_follow_advice() {
	local range
	range=$(sed -nE 's/.*format-patch -o [^ ]+ ([0-9a-f]+\.\.HEAD).*/\1/p' "$OUT")
	[[ -n $range ]] || range=$(cd "$scratch" && "$S/prepare.sh" --check 2>&1 | sed -nE 's/.*format-patch -o [^ ]+ ([0-9a-f]+\.\.HEAD).*/\1/p')
	tree commit -qam "pt: more" && tree format-patch -q -o "$BUILD/wip" "$range" || return 1
	run prepare.sh --force
	expect "prepare --force succeeds" rc_is 0 &&
		expect "the backup has the uncommitted-change-free commits" \
			bash -c "ls '$BUILD'/linux-backup/*/0006-pt-more.patch >/dev/null" &&
		tree am -q -3 "$BUILD"/wip/*.patch &&
		expect "v1 + 2 commits of work" [ "$(ncommits)" = 5 ] &&
		{ run prepare.sh --check; expect "--check: based (0)" rc_is 0; } &&
		expect "the work is there" grep -q b_more "$KSRC/drivers/b.c"
}

desc_holds_new="pull of the series the tree already holds (+ local commits): the record is updated, the tree kept"
t_holds_new() {
	# The tree is v1 + 2 commits; the "pull" brings v1 + the first of them.
	local keep=$scratch/rec head
	cp "$KSRC/.git/vstor-series" "$keep"
	rm -rf "$scratch/v1w" && cp -a "$V1" "$scratch/v1w"
	tree branch -q -f tmp HEAD && tree reset -q --hard HEAD~1 &&
		PATCHES=$scratch/v1w "$S/refresh.sh" >/dev/null 2>&1 &&
		tree reset -q --hard tmp && tree branch -q -D tmp &&
		cp "$keep" "$KSRC/.git/vstor-series" || return 1
	head=$(tree rev-parse HEAD)
	pull "$scratch/v1w"
	run prepare.sh
	expect "prepare succeeds" rc_is 0 &&
		expect "says the tree holds it" out_has "holds the new series: recorded" &&
		expect "no recreation" bash -c "! grep -q recreating '$OUT'" &&
		expect "HEAD unchanged" [ "$(tree rev-parse HEAD)" = "$head" ] &&
		expect "1 local commit left" out_has "1 local commit"
}

desc_legacy="a tree without a record: adopted when it holds the series, else refused"
t_legacy() {
	rm -f "$KSRC/.git/vstor-series"
	run prepare.sh
	expect "adopted" rc_is 0 && expect "saying so" out_has "no record of its series" || return 1
	rm -f "$KSRC/.git/vstor-series"
	pull "$V2"
	run prepare.sh
	expect "refused" bash -c "[ $RC != 0 ]" &&
		expect "saying why" out_has "older prepare.sh" &&
		expect "tree kept" [ "$(ncommits)" = 5 ] || return 1
	run refresh.sh
	expect "refresh refuses too" bash -c "[ $RC != 0 ]" &&
		expect "kernel/patches untouched" diff -r "$V2" "$PATCHES"
}

desc_force="prepare --force (make prepare FORCE=1) recreates whatever the tree holds"
t_force() {
	pull "$V1"
	run prepare.sh --force
	expect "succeeds" rc_is 0 && expect "3 commits" [ "$(ncommits)" = 3 ] &&
		{ run refresh.sh --check; expect "tree matches v1" rc_is 0; }
}

# rename_subject .. replace: a refresh keeps the comments with their patches.
desc_rename_subject="comments survive a refresh that renames a patch (new subject)"
t_rename_subject() {
	tree commit -q --amend -m "pt: add a character device" -m "Signed-off-by: T <t@localhost>"
	run refresh.sh
	expect "refresh succeeds" rc_is 0 || return 1
	sed 's/0003-pt-add-the-char-device/0003-pt-add-a-character-device/' "$scratch/v1.series" >"$scratch/want"
	expect "series as expected" series_is "$scratch/want" &&
		expect "old file gone" test ! -e "$PATCHES/0003-pt-add-the-char-device.patch" &&
		round_trip
}
# round_trip [full]: refresh --check passes (the export is stable); full:
# also after recreating the tree from kernel/patches.
round_trip() {
	if [[ ${1:-} == full ]]; then
		run prepare.sh --force && expect "prepare --force" rc_is 0 || return 1
	fi
	run refresh.sh --check && expect "round trip: refresh --check passes" rc_is 0
}

desc_add_renumber="comments survive a refresh that adds a patch in a group and renumbers the rest"
t_add_renumber() {
	# Insert a commit after the first one.
	local first rest
	first=$(tree rev-list --reverse base..HEAD | head -n 1)
	rest=$(tree rev-parse HEAD)
	tree reset -q --hard "$first" &&
		commit_file drivers/a3.c 'int a3;' "poll: add a second knob" &&
		tree cherry-pick "$first..$rest" >/dev/null || return 1
	run refresh.sh
	expect "refresh succeeds" rc_is 0 || return 1
	cat >"$scratch/want" <<-EOF
		# The test series.
		# A preamble: it stays at the top.

		# poll queues
		0001-poll-add-the-queue-knob.patch
		0002-poll-add-a-second-knob.patch
		0003-poll-warn-when-clamped.patch

		# passthrough
		0004-pt-add-a-character-device.patch
		# (end)
	EOF
	expect "series as expected" series_is "$scratch/want" && round_trip
}

desc_add_end="comments survive a refresh that adds a patch at the end"
t_add_end() {
	commit_file doc.txt 'the device' "pt: document the device"
	run refresh.sh
	expect "refresh succeeds" rc_is 0 || return 1
	sed 's/^# (end)$/0005-pt-document-the-device.patch\n&/' "$scratch/want" >"$scratch/want2"
	mv "$scratch/want2" "$scratch/want"
	expect "series as expected" series_is "$scratch/want" && round_trip
}

desc_remove_head="a refresh that removes a group's first patch moves the group's comment to the next"
t_remove_head() {
	local first
	first=$(tree rev-list --reverse base..HEAD | head -n 1)
	tree rebase -q --onto base "$first" >/dev/null || return 1
	run refresh.sh
	expect "refresh succeeds" rc_is 0 || return 1
	cat >"$scratch/want" <<-EOF
		# The test series.
		# A preamble: it stays at the top.

		# poll queues
		0001-poll-add-a-second-knob.patch
		0002-poll-warn-when-clamped.patch

		# passthrough
		0003-pt-add-a-character-device.patch
		0004-pt-document-the-device.patch
		# (end)
	EOF
	expect "series as expected" series_is "$scratch/want" && round_trip
}

desc_replace="a patch with a new subject and new content keeps its place and comment"
t_replace() {
	# Rewrite the third commit (first of "passthrough") and replay the last.
	local c3 last
	c3=$(tree rev-list --reverse base..HEAD | sed -n 3p)
	last=$(tree rev-parse HEAD)
	tree reset -q --hard "$c3" &&
		echo "int b_other;" >>"$KSRC/drivers/b.c" &&
		tree commit -q -a --amend -m "pt: add the passthrough device" -m "Signed-off-by: T <t@localhost>" &&
		tree cherry-pick "$last" >/dev/null || return 1
	run refresh.sh
	expect "refresh succeeds" rc_is 0 || return 1
	sed 's/0003-pt-add-a-character-device/0003-pt-add-the-passthrough-device/' "$scratch/want" >"$scratch/want2"
	mv "$scratch/want2" "$scratch/want"
	expect "series as expected" series_is "$scratch/want" && round_trip
}

desc_remove_group="a refresh that removes a whole group drops its comment, saying so"
t_remove_group() {
	tree reset -q --hard HEAD~2 || return 1
	run refresh.sh
	expect "refresh succeeds" rc_is 0 && expect "says so" out_has "dropped the comment.*# passthrough" || return 1
	cat >"$scratch/want" <<-EOF
		# The test series.
		# A preamble: it stays at the top.

		# poll queues
		0001-poll-add-a-second-knob.patch
		0002-poll-warn-when-clamped.patch
		# (end)
	EOF
	expect "series as expected" series_is "$scratch/want" && round_trip full
}

desc_base_moved="a new base release that moves a patch's hunk: refresh --check passes, naming the patch; refresh updates it; a changed patch still fails the check"
t_base_moved() {
	local d=$scratch/src/linux-source-6.12 before=$scratch/before-move
	sed -i '1i /* new in this release */' "$d/drivers/a2.c" || return 1
	tar -C "$scratch/src" -cJf "$BASE_TARBALL" linux-source-6.12 || return 1
	run prepare.sh --force
	expect "the series applies to the new base" rc_is 0 || return 1
	run refresh.sh --check
	expect "refresh --check passes" rc_is 0 &&
		expect "it names the moved patch" out_has "apply unchanged at other places.*0002-poll-warn" || return 1
	rm -rf "$before" && cp -a "$PATCHES" "$before"
	run refresh.sh
	expect "refresh succeeds" rc_is 0 &&
		expect "it rewrote the moved patch" bash -c "! cmp -s '$before/'0002-*.patch '$PATCHES/'0002-*.patch" &&
		expect "with the new line numbers" grep -q '^@@ -3,3 +3,4 @@' "$PATCHES/"0002-*.patch || return 1
	run refresh.sh --check
	expect "refresh --check passes after it" rc_is 0 &&
		expect "and names nothing" bash -c "! grep -q 'other places' '$OUT'" || return 1
	# A change to what a patch does is still a difference.
	echo 'int b_more;' >>"$KSRC/drivers/b.c"
	tree commit -q -a --amend --no-edit || return 1
	run refresh.sh --check
	expect "refresh --check fails on a changed patch" rc_is 1 &&
		expect "and shows the change" out_has '^\+\+int b_more;'
}

echo "KTAP version 1"
echo "1..${#CASES[@]}"
start=$SECONDS
mkbase
if ! mkseries >"$scratch/setup.log" 2>&1; then
	sed 's/^/# setup: /' "$scratch/setup.log"
	say "setting up the scratch series failed"
fi
n=0 failed=0
for c in "${CASES[@]}"; do
	n=$((n + 1))
	d=desc_$c
	if "t_$c"; then
		echo "ok $n ${!d}"
	else
		echo "not ok $n ${!d}"
		failed=$((failed + 1))
	fi
done
say "$((n - failed)) passed, $failed failed in $((SECONDS - start)) s"
((failed == 0))
