# The series workflow cannot lose or stale work: prepare, refresh and the
# tree check of build-kernel.sh against a tiny fake base and series
# (tests/tools/series-workflow.sh, whose cases build on each other and so
# run as one test here, held to their own plan); and, on the debug kernel,
# that its debug info decodes addresses to lines.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_ORDER=25
SUITE_NEEDS=(deps kernel)
TESTS=(series_cases cover_letters cover_apply backports apt_expired debug_info)

desc_series_cases="fresh prepare, round trip, a pull with and without local work, stale refresh refused, series comments kept across renames, additions and removals, a new base release that moves hunks"
series_cases() {
	local out rc=0 plan oks
	out=$("$TOP/tests/tools/series-workflow.sh" 2>&1) || rc=$?
	printf '%s\n' "$out"
	plan=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' <<<"$out")
	oks=$(grep -c '^ok ' <<<"$out")
	[[ -n $plan ]] || fail "series-workflow.sh printed no plan" || return
	((rc == 0)) || fail "series-workflow.sh exited $rc" || return
	expect_eq "cases passed against the plan" "$oks" "$plan"
}

desc_cover_letters="make cover: a group per template in kernel/cover (io_uring, block, virtio-blk, vhost, the later io_uring fix, interrupt-path batching, the poll cookie fix) that together hold every patch once, each with a filled-in cover letter, base-commit and the results tables (on mainline, tables measured on mainline: Documentation/results-mainline.md); the io_uring fixes, the blk-mq fixes and virtio-blk's first and third fixes carry Fixes:, the io_uring fixes, virtio-blk's three fixes and the poll cookie fix Cc: stable, and the blk-mq batch fix says why it is not for stable; every patch is from and signed off by whoever runs it (git config), and a placeholder identity is warned about"
cover_letters() {
	local dir=$BUILD/logs/workflow/cover n total=0 g t cfg out
	# A machine with no git identity (a fresh one): make cover must refuse,
	# since a sign-off is the poster's statement; the rest of the test then
	# runs as a test poster of its own.
	if ! git -C "$KSRC" config user.email >/dev/null; then
		if out=$("$TOP/scripts/cover-letters.sh" "$dir" 2>&1); then
			fail "cover-letters.sh made patches with no git identity"
			return
		fi
		grep -q "no git identity" <<<"$out" || fail "no git identity, and a wrong error: $out" || return
		cfg=$BUILD/logs/workflow/test-poster.gitconfig
		printf '[user]\n\tname = Vstor Test\n\temail = test@vstor.invalid\n' >"$cfg"
		export GIT_CONFIG_GLOBAL=$cfg
		note "no git identity here: cover-letters.sh refused, as it must; the test goes on as Vstor Test <test@vstor.invalid>"
	fi
	"$TOP/scripts/cover-letters.sh" "$dir" || fail "cover-letters.sh failed" || return
	for t in "$TOP"/kernel/cover/"$KBASE"/*.txt; do
		g=$(basename "$t" .txt)
		[[ -f $dir/$g/0000-cover-letter.patch ]] || fail "no cover letter for $g" || return
		grep -q '^base-commit: [0-9a-f]\{40\}$' "$dir/$g/0000-cover-letter.patch" ||
			fail "$g: no base-commit" || return
		! grep -q -e 'HERE \*\*\*' -e '@@results' "$dir/$g/0000-cover-letter.patch" ||
			fail "$g: a placeholder is left" || return
		n=$(find "$dir/$g" -name '[0-9]*.patch' ! -name '0000-*' | wc -l)
		total=$((total + n))
	done
	expect_eq "patches in the groups" "$total" "$(series_count)" || return
	if [[ $KBASE == mainline ]]; then
		cover_mainline "$dir" && cover_identity "$dir"
		return
	fi
	grep -q '^| ' "$dir/4-virtio-blk/0000-cover-letter.patch" ||
		fail "the virtio-blk cover letter quotes no results table" || return
	grep -q '^Fixes: 5eff57fa9f3a ' "$dir"/1-io_uring/0001-*.patch ||
		fail "the io_uring fix has no Fixes: line" || return
	grep -q '^Cc: stable@vger.kernel.org' "$dir"/1-io_uring/0001-*.patch ||
		fail "the io_uring fix has no Cc: stable" || return
	grep -q '^Fixes: 9ce6c9875f3e ' "$dir"/2-io_uring-iopoll/0001-*.patch ||
		fail "the later io_uring fix has no Fixes: line" || return
	grep -q '^Fixes: f794f3351f26 ' "$dir"/6-irq-batching/0001-*.patch ||
		fail "the blk-mq batch fix has no Fixes: line" || return
	! grep -q '^Cc: stable@vger.kernel.org' "$dir"/6-irq-batching/0001-*.patch &&
		grep -q '^Not marked for stable' "$dir"/6-irq-batching/0001-*.patch ||
		fail "the blk-mq batch fix is for stable, or does not say why it is not" || return
	grep -q '^Fixes: 4e0400525691 ' "$dir"/4-virtio-blk/0001-*.patch &&
		grep -q '^Fixes: 4e0400525691 ' "$dir"/4-virtio-blk/0003-*.patch &&
		! grep -q '^Fixes:' "$dir"/4-virtio-blk/0002-*.patch ||
		fail "virtio-blk's fixes: wrong Fixes: tags" || return
	grep -q '^| ' "$dir/6-irq-batching/0000-cover-letter.patch" ||
		fail "the batching cover letter quotes no results table" || return
	cover_poll_fix "$dir/7-block-poll" || return
	cover_identity "$dir"
}
# cover_poll_fix DIR: the poll cookie fix names what it fixes, for stable.
cover_poll_fix() {
	if ! grep -q '^Fixes: dd291d77cc90 ' "$1"/0001-*.patch ||
		! grep -q '^Cc: stable@vger.kernel.org' "$1"/0001-*.patch; then
		fail "the poll cookie fix has no Fixes: or Cc: stable"
	fi
}
# cover_mainline DIR: what the mainline groups must carry: the fixes their
# Fixes:, Cc: stable and Link: to the posting they answer, every cover a
# Link to the earlier postings it answers.
cover_mainline() {
	local dir=$1 g
	grep -q '^Fixes: 9ce6c9875f3e ' "$dir"/1-io_uring/0001-*.patch &&
		grep -q '^Cc: stable@vger.kernel.org' "$dir"/1-io_uring/0001-*.patch ||
		fail "the io_uring fix has no Fixes: or Cc: stable" || return
	# The blk-mq batch fix goes with the interrupt-path batching; stable
	# kernels batch only when polling, where no hang was seen: no Cc:
	# stable, and the message says why.
	grep -q '^Fixes: f794f3351f26 ' "$dir"/4-irq-batching/0001-*.patch &&
		grep -q '^Link: https://lore.kernel.org/r/' "$dir"/4-irq-batching/0001-*.patch ||
		fail "the blk-mq batch fix has no Fixes: or Link:" || return
	! grep -q '^Cc: stable@vger.kernel.org' "$dir"/4-irq-batching/0001-*.patch &&
		grep -q '^Not marked for stable' "$dir"/4-irq-batching/0001-*.patch ||
		fail "the blk-mq batch fix is for stable, or does not say why it is not" || return
	# virtio-blk's three fixes come first, for stable; the cache mode's
	# has no Fixes: (its origin could not be checked here, as it says).
	grep -q '^Fixes: 4e0400525691 ' "$dir"/2-virtio-blk/0001-*.patch &&
		grep -q '^Fixes: 4e0400525691 ' "$dir"/2-virtio-blk/0003-*.patch &&
		! grep -q '^Fixes:' "$dir"/2-virtio-blk/0002-*.patch ||
		fail "virtio-blk's fixes: wrong Fixes: tags" || return
	for g in 0001 0002 0003; do
		grep -q '^Cc: stable@vger.kernel.org' "$dir"/2-virtio-blk/$g-*.patch ||
			fail "virtio-blk's fix $g has no Cc: stable" || return
	done
	grep -q '^Cc: stable@vger.kernel.org' "$dir"/4-irq-batching/0002-*.patch &&
		grep -q '^Link: https://lore.kernel.org/r/20230620083857' "$dir"/4-irq-batching/0002-*.patch ||
		fail "the zone append fix has no Cc: stable or Link: to Damien Le Moal's fix" || return
	cover_poll_fix "$dir/5-block-poll" || return
	for g in 1-io_uring 2-virtio-blk 3-vhost 4-irq-batching; do
		grep -q 'https://lore.kernel.org/r/' "$dir/$g/0000-cover-letter.patch" ||
			fail "$g: the cover letter links no earlier posting" || return
	done
	grep -q '^| ' "$dir/2-virtio-blk/0000-cover-letter.patch" ||
		fail "the virtio-blk cover letter quotes no results table" || return
	# Their numbers are 7.3's own (Documentation/results-mainline.md).
	for g in 2-virtio-blk 3-vhost 4-irq-batching; do
		grep -q '^Command: `KBASE=mainline ' "$dir/$g/0000-cover-letter.patch" ||
			fail "$g: the cover letter quotes no table measured on mainline" || return
		! grep -qi 'measured on the 6.12 backport' "$dir/$g/0000-cover-letter.patch" ||
			fail "$g: the cover letter still says its numbers are 6.12's" || return
	done
}

desc_cover_apply="make cover as a poster who is not the series' author (a real-looking identity, for this test alone): every group's patches, in template order, apply with git am (no 3-way fallback) to the pristine base, in a worktree of the kernel tree at base that is not checked out (git am writes only the files the patches touch); the result holds the series' commits, subjects and tree, but for the poster where MAINTAINERS names the author; every commit is the poster's, and nothing make cover wrote names the series' author"
cover_apply() {
	local dir=$BUILD/logs/workflow/cover-apply name="Marta Kowalska-Wisniewska"
	local email=marta.kowalska-wisniewska@block-storage-review.org
	local poster n branch tip a out tmp wt t0=$SECONDS
	poster="$name <$email>"
	# The poster's identity for every git below, over any configuration
	# file (the kernel tree's own included) and without touching one.
	n=${GIT_CONFIG_COUNT:-0}
	export GIT_CONFIG_COUNT=$((n + 2)) "GIT_CONFIG_KEY_$n=user.name" "GIT_CONFIG_VALUE_$n=$name"
	export "GIT_CONFIG_KEY_$((n + 1))=user.email" "GIT_CONFIG_VALUE_$((n + 1))=$email"
	branch=$(git -C "$KSRC" symbolic-ref --short HEAD) || fail "$KSRC has no branch checked out" || return
	tip=$(git -C "$KSRC" rev-parse "$branch")
	out=$("$TOP/scripts/cover-letters.sh" "$dir" 2>&1) || { printf '%s\n' "$out"; fail "cover-letters.sh failed"; return; }
	printf '%s\n' "$out"
	! grep -q WARNING <<<"$out" || fail "cover-letters.sh called $poster a placeholder" || return
	note "make cover as $poster: $((SECONDS - t0)) s"
	! git -C "$KSRC" log --format='%an <%ae>' "base..$tip" | grep -qxF "$poster" ||
		fail "the test poster is an author of the series: pick another" || return

	tmp=$(mktemp -d "${TMPDIR:-/tmp}/vstor-cover-apply.XXXXXX")
	wt=$tmp/tree
	# shellcheck disable=SC2064 # the paths, now
	trap "$(printf 'cover_apply_remove %q %q' "$wt" "$tmp")" EXIT
	# What git am writes goes to a scratch object directory, the tree's
	# own an alternate: the kernel tree gets no objects from this test.
	mkdir "$tmp/objects"
	GIT_ALTERNATE_OBJECT_DIRECTORIES=$(git -C "$KSRC" rev-parse --path-format=absolute --git-path objects)
	export GIT_OBJECT_DIRECTORY=$tmp/objects GIT_ALTERNATE_OBJECT_DIRECTORIES
	t0=$SECONDS
	git -C "$KSRC" worktree add -q --detach --no-checkout "$wt" base &&
		git -C "$wt" read-tree base || fail "no worktree of $KSRC at base" || return
	note "worktree at base, not checked out: $((SECONDS - t0)) s"
	cover_apply_groups "$dir" "$wt" "$tip" "$poster" || return
	# Nor does a cover letter or a patch name the author any more.
	while IFS= read -r a; do
		if out=$(grep -rnF -e "${a% <*}" -e "${a##* }" "$dir"); then
			printf '%s\n' "$out"
			fail "make cover's output still names the series' author $a"
			return
		fi
	done < <(git -C "$KSRC" log --format='%an <%ae>' "base..$tip" | sort -u)
}
# cover_apply_remove WORKTREE DIR: the worktree, git's record of it and
# DIR gone.
cover_apply_remove() {
	git -C "$KSRC" worktree remove --force "$1" 2>/dev/null || { rm -rf "$1" && git -C "$KSRC" worktree prune; }
	rm -rf "$2"
}
# cover_apply_groups DIR WORKTREE TIP POSTER: git am each group of DIR in
# template order onto WORKTREE, then compare with the series, whose last
# commit is TIP.
cover_apply_groups() {
	local dir=$1 wt=$2 tip=$3 poster=$4 t g ps out t0=$SECONDS want got
	for t in "$TOP"/kernel/cover/"$KBASE"/*.txt; do
		g=$(basename "$t" .txt)
		mapfile -t ps < <(find "$dir/$g" -name '[0-9]*.patch' ! -name '0000-*' | sort)
		((${#ps[@]})) || fail "$g: no patches" || return
		if ! out=$(git -C "$wt" -c core.hooksPath=/dev/null am -q --no-3way "${ps[@]}" 2>&1); then
			printf '%s\n' "$out"
			[[ $out =~ Patch\ failed\ at\ ([0-9]+) ]] || fail "$g: git am failed" || return
			fail "$g: $(basename "${ps[10#${BASH_REMATCH[1]} - 1]}") does not apply after $(git -C "$wt" rev-list --count base..HEAD) patches of the series"
			return
		fi
	done
	note "git am of every group: $(git -C "$wt" rev-list --count base..HEAD) patches in $((SECONDS - t0)) s"
	expect_eq "commits applied" "$(git -C "$wt" rev-list --count base..HEAD)" "$(git -C "$KSRC" rev-list --count "base..$tip")" || return
	expect_eq "their subjects" "$(git -C "$wt" log --format=%s base..HEAD)" "$(git -C "$KSRC" log --format=%s "base..$tip")" || return
	expect_eq "their authors" "$(git -C "$wt" log --format='%an <%ae>' base..HEAD | sort -u)" "$poster" || return
	# The tree is the series' own but for MAINTAINERS, whose lines naming
	# an author of the series name the poster.
	got=$(git -C "$wt" diff --name-only "$tip" HEAD)
	[[ -z $got || $got == MAINTAINERS ]] || fail "the tree differs from the series' in: $got" || return
	want=$(git -C "$KSRC" show "$tip:MAINTAINERS" |
		AUTHORS=$(git -C "$KSRC" log --format='M:%x09%an <%ae>' "base..$tip") POSTER="M:	$poster" awk '
			BEGIN { n = split(ENVIRON["AUTHORS"], l, "\n"); for (i = 1; i <= n; i++) author[l[i]] = 1 }
			$0 in author { $0 = ENVIRON["POSTER"] }
			{ print }' | git -C "$wt" hash-object --stdin)
	expect_eq "MAINTAINERS (the series', the poster for its author)" "$(git -C "$wt" rev-parse HEAD:MAINTAINERS)" "$want" || return
	note "the tree is the series' with $(git -C "$wt" show HEAD:MAINTAINERS | grep -cxF "M:	$poster") MAINTAINERS line(s) naming the poster"
}

desc_backports="each patch of kernel/6.12 names what it carries (an upstream commit, a kernel/mainline patch, or why it is 6.12 only) and each mainline patch has exactly one backport (scripts/check-backports.sh)"
backports() { "$TOP/scripts/check-backports.sh"; }

desc_apt_expired="a private apt configuration (private_apt in scripts/lib.sh, used for 7.3's source and sid's sparse): an index the mirror serves past its Valid-Until date is fetched again with only the freshness check dropped, and only then; any other failure of apt-get update stops with its log named"
apt_expired() {
	local dir=$BUILD/logs/workflow/apt-expired mode calls out rc
	rm -rf "$dir" && mkdir -p "$dir/bin"
	# A stand-in apt-get: logs its options, then answers as a mirror would
	# whose index is fresh (ok), expired (expired), or unreachable (down).
	cat >"$dir/bin/apt-get" <<'EOS'
#!/bin/bash
echo "$*" >>"$FAKE_APT_DIR/calls"
case $FAKE_APT in
ok) exit 0 ;;
expired)
	[[ " $* " == *" Acquire::Check-Valid-Until=false "* ]] && exit 0
	echo "E: Release file for http://deb.debian.org/debian/dists/sid/InRelease is expired (invalid since 28d 9h 2min 9s). Updates for this repository will not be applied."
	exit 100 ;;
*) echo "E: Failed to fetch http://deb.debian.org/debian/dists/sid/InRelease  Could not resolve 'deb.debian.org'"; exit 100 ;;
esac
EOS
	chmod +x "$dir/bin/apt-get"
	for mode in ok expired down; do
		rm -f "$dir/calls"
		rc=0
		# lib.sh puts the system's directories first in PATH: the stand-in
		# goes in front after it is sourced.
		out=$(FAKE_APT=$mode FAKE_APT_DIR=$dir bash -c \
			'. "$1/scripts/lib.sh" && PATH=$2/bin:$PATH && private_apt "$2/apt" "deb-src http://deb.debian.org/debian sid main" && echo "opts: ${PRIVATE_APT[*]}"' \
			_ "$TOP" "$dir" 2>&1) || rc=$?
		printf '%s: exit %s\n%s\n' "$mode" "$rc" "$out"
		calls=$(wc -l <"$dir/calls")
		case $mode in
		ok)
			expect_eq "ok: exit" "$rc" 0 || return
			expect_eq "ok: apt-get calls" "$calls" 1 || return
			! grep -q Check-Valid-Until <<<"$out" || fail "ok: the freshness check was dropped for a fresh index" || return ;;
		expired)
			expect_eq "expired: exit" "$rc" 0 || return
			expect_eq "expired: apt-get calls" "$calls" 2 || return
			! head -n 1 "$dir/calls" | grep -q Check-Valid-Until || fail "expired: the first try already dropped the check" || return
			grep -q 'opts: .*Acquire::Check-Valid-Until=false' <<<"$out" || fail "expired: later apt-get calls would not skip the check" || return
			grep -q 'past its Valid-Until date' <<<"$out" || fail "expired: the retry was not announced" || return ;;
		down)
			[[ $rc -ne 0 ]] || fail "down: private_apt succeeded" || return
			expect_eq "down: apt-get calls" "$calls" 1 || return
			grep -q "error: apt-get update for .* failed: see $dir/apt/update.log" <<<"$out" || fail "down: no error naming the log" || return
			grep -q "Could not resolve" <<<"$out" || fail "down: apt's own message not shown" || return ;;
		esac
	done
}

series_count() { grep -c '^[0-9]\{4\}-.*\.patch$' "$PATCHES/series"; }

# mail_from PATCH: its From: header, unfolded (git format-patch folds one
# longer than a line onto the next).
mail_from() {
	awk 'NR > 1 && $0 == "" { exit }
		/^From: / { from = substr($0, 7); on = 1; next }
		on && /^[ \t]/ { from = from $0; next }
		{ on = 0 }
		END { print from }' "$1"
}

# cover_identity DIR: every patch of make cover's output is from the poster
# (the git identity of whoever runs it) and signed off by the poster, and
# cover-letters.sh takes the poster from git, not from a name of its own:
# run again as someone else (GIT_CONFIG_GLOBAL), the patches are theirs,
# with a warning for an identity that looks like a placeholder.
cover_identity() {
	local dir=$1 me p alt=$BUILD/logs/workflow/cover-alt cfg out
	me="$(git -C "$KSRC" config user.name) <$(git -C "$KSRC" config user.email)>"
	for p in "$dir"/*/[0-9]*.patch; do
		[[ $p == */0000-* ]] && continue
		[[ $(mail_from "$p") == "$me" ]] || fail "$(basename "$p"): not from $me" || return
		grep -qxF "Signed-off-by: $me" "$p" || fail "$(basename "$p"): not signed off by $me" || return
	done
	cfg=$(mktemp)
	printf '[user]\n\tname = Test Poster\n\temail = poster@localhost\n' >"$cfg"
	out=$(GIT_CONFIG_GLOBAL=$cfg "$TOP/scripts/cover-letters.sh" "$alt" 2>&1) || { rm -f "$cfg"; fail "cover-letters.sh as another poster: $out"; return; }
	rm -f "$cfg"
	grep -q "WARNING: the identity 'Test Poster <poster@localhost>' looks like a placeholder" <<<"$out" ||
		fail "no warning for poster@localhost" || return
	for p in "$alt"/*/[0-9]*.patch; do
		[[ $p == */0000-* ]] && continue
		[[ $(mail_from "$p") == "Test Poster <poster@localhost>" ]] && grep -qxF "Signed-off-by: Test Poster <poster@localhost>" "$p" ||
			fail "$(basename "$p"): not made the other poster's" || return
		! grep -q "^+M:.*$(git -C "$KSRC" config user.email)" "$p" ||
			fail "$(basename "$p"): a MAINTAINERS entry still names the patch author, not the poster" || return
	done
	rm -rf "$alt"
}

desc_debug_info="the debug kernel's debug info decodes a vmlinux and a virtio_blk address to file:line (faddr2line); skipped on the guest kernel, which has none"
debug_info() {
	[[ ${VSTOR_FLAVOR:-guest} == debug ]] || skip "the guest kernel carries no debug info (make test FLAVOR=debug checks it)" || return
	"$TOP/scripts/build-kernel.sh" --check-debuginfo debug
}
