#!/usr/bin/env bash
# Make the series postable group by group: for each cover letter template
# in kernel/cover/ (one per tree: io_uring, virtio-blk, vhost), run git
# format-patch on the patches it names and write its text, with the tables
# it quotes from the base's results page, into the cover letter: the
# mainline groups quote Documentation/results-mainline.md (measured on
# 7.3), the 6.12 groups Documentation/results.md.
#
#   scripts/cover-letters.sh [OUTDIR]      default: build/cover
#
# OUTDIR/NAME/ gets 0000-cover-letter.patch and the group's patches,
# numbered within the group. Each cover letter ends with base-commit: (the
# Debian linux-source tree of KBASE the series applies to) and, for a group
# that needs earlier patches of the series, their prerequisite-patch-id:
# lines. A template is:
#
#   Patches: NNNN[-MMMM]          numbers from kernel/patches/series
#   Subject: the cover letter's subject
#   (blank line)
#   the text; a line @@results:HEADING@@ is replaced by that section's
#   command paragraph and table from the base's results page
#
# Fails if a template names a patch the series does not have, a heading
# the results page does not have, or if a placeholder is left in the output.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

out=${1:-$BUILD/cover}
case $KBASE in
mainline) results=$TOP/Documentation/results-mainline.md ;;
*) results=$TOP/Documentation/results.md ;;
esac
[[ -d $KSRC/.git ]] || die "no kernel tree at $KSRC: run scripts/prepare.sh"
branch=$(git -C "$KSRC" symbolic-ref -q --short HEAD || echo master)

# results_section HEADING: the section's text up to the end of its first
# table (the command that produced it, the setup, the numbers).
results_section() {
	awk -v h="$1" '
		$0 == h { on = 1; print; next }
		on && /^## / { exit }
		on && /^\|/ { t = 1; print; next }
		on && t { exit }
		on { print }' "$results"
}

# The poster's identity: format-patch's From: and each patch's sign-off of
# its author become theirs. A Signed-off-by is the poster's statement
# (Documentation/process/submitting-patches.rst), so it comes from their
# git configuration, and an identity that looks like a placeholder is
# said plainly.
poster_name=$(git -C "$KSRC" config user.name || true)
poster_email=$(git -C "$KSRC" config user.email || true)
[[ -n $poster_name && -n $poster_email ]] ||
	die "no git identity: set git config user.name and user.email to the person who posts the series"
if [[ $poster_email =~ (@localhost|\.localdomain|\.local|\.invalid|\.example|@example\.(com|org|net)|\.test)$ ||
	! $poster_email =~ ^[^@]+@[^@]+\.[^@]+$ ]]; then
	log "WARNING: the identity '$poster_name <$poster_email>' looks like a placeholder."
	log "WARNING: Signed-off-by certifies the Developer's Certificate of Origin: post only under your real name and address."
fi

mapfile -t commits < <(git -C "$KSRC" rev-list --reverse "base..$branch")
mapfile -t patches < <(series_patches "$PATCHES")
((${#commits[@]} == ${#patches[@]})) ||
	die "build/linux has ${#commits[@]} commits, $PATCHES_REL/series ${#patches[@]}: run make refresh"

rm -rf "$out"
mkdir -p "$out"
for tpl in "$TOP"/kernel/cover/"$KBASE"/*.txt; do
	name=$(basename "$tpl" .txt)
	range=$(sed -n 's/^Patches: *//p' "$tpl" | head -n 1)
	subject=$(sed -n 's/^Subject: *//p' "$tpl" | head -n 1)
	[[ $range =~ ^([0-9]{4})(-([0-9]{4}))?$ ]] || die "$tpl: no 'Patches: NNNN[-MMMM]' line"
	first=$((10#${BASH_REMATCH[1]}))
	last=$((10#${BASH_REMATCH[3]:-${BASH_REMATCH[1]}}))
	((first >= 1 && last >= first && last <= ${#commits[@]})) ||
		die "$tpl: patches $range are not in the series (1-${#commits[@]})"
	[[ -n $subject ]] || die "$tpl: no 'Subject:' line"

	dir=$out/$name
	# The group's first patch's parent: --base then lists the patches of
	# the series before it as prerequisites.
	git -C "$KSRC" format-patch -q --cover-letter --base=base --no-signature --abbrev=12 \
		-o "$dir" "${commits[first - 1]}~1..${commits[last - 1]}"
	# Each patch's author, the author's own sign-off and a MAINTAINERS entry
# naming the author become the poster's.
	POSTER="$poster_name <$poster_email>" python3 - "$dir"/*.patch <<'PY'
import os, re, sys
poster = os.environ["POSTER"]
for p in sys.argv[1:]:
    s = open(p).read()
    head, sep, body = s.partition("\n\n")
    # A long From: header is folded onto continuation lines.
    m = re.search(r"^From: (.*(?:\n[ \t].*)*)$", head, re.M)
    if not m:
        sys.exit(p + ": no From: line")
    author = re.sub(r"\s*\n[ \t]+", " ", m.group(1))
    head = head[:m.start()] + "From: " + poster + head[m.end():]
    body = body.replace("Signed-off-by: " + author + "\n", "Signed-off-by: " + poster + "\n")
    # A MAINTAINERS entry the series adds names its author: the poster.
    body = body.replace("+M:\t" + author + "\n", "+M:\t" + poster + "\n")
    open(p, "w").write(head + sep + body)
PY
	cover=$dir/0000-cover-letter.patch

	# The text: the template after its header, tables filled in.
	body=$(mktemp)
	sed '1,/^$/d' "$tpl" | while IFS= read -r line; do
		if [[ $line =~ ^@@results:(.*)@@$ ]]; then
			sec=$(results_section "${BASH_REMATCH[1]}")
			[[ -n $sec ]] || die "$tpl: no section '${BASH_REMATCH[1]}' in ${results#"$TOP"/}"
			printf '%s\n' "$sec"
		else
			printf '%s\n' "$line"
		fi
	done >"$body"
	SUBJECT=$subject BODY=$body python3 - "$cover" <<'PY'
import os, sys
p = sys.argv[1]
s = open(p).read()
s = s.replace("*** SUBJECT HERE ***", os.environ["SUBJECT"], 1)
s = s.replace("*** BLURB HERE ***", open(os.environ["BODY"]).read().rstrip("\n"), 1)
open(p, "w").write(s)
PY
	rm -f "$body"
	if grep -q -e '\*\*\* .* HERE \*\*\*' -e '@@results:' "$cover"; then
		die "$cover: a placeholder is left"
	fi
	log "$name: $range, $((last - first + 1)) patch(es) and a cover letter in $dir"
done
