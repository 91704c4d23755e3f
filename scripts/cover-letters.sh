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
# The patches are the poster's (git config user.name, user.email): the
# series is exported from a copy of its commits authored by the poster,
# with the author's sign-off and every MAINTAINERS line that names an
# author made the poster's (the tree itself is not touched).
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
kgit() { git -C "$KSRC" "$@"; }
branch=$(kgit symbolic-ref -q --short HEAD || echo master)

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
poster_name=$(kgit config user.name || true)
poster_email=$(kgit config user.email || true)
[[ -n $poster_name && -n $poster_email ]] ||
	die "no git identity: set git config user.name and user.email to the person who posts the series"
if [[ $poster_email =~ (@localhost|\.localdomain|\.local|\.invalid|\.example|@example\.(com|org|net)|\.test)$ ||
	! $poster_email =~ ^[^@]+@[^@]+\.[^@]+$ ]]; then
	log "WARNING: the identity '$poster_name <$poster_email>' looks like a placeholder."
	log "WARNING: Signed-off-by certifies the Developer's Certificate of Origin: post only under your real name and address."
fi

mapfile -t commits < <(kgit rev-list --reverse "base..$branch")
mapfile -t patches < <(series_patches "$PATCHES")
((${#commits[@]} == ${#patches[@]})) ||
	die "build/linux has ${#commits[@]} commits, $PATCHES_REL/series ${#patches[@]}: run make refresh"

# The series as the poster posts it: each commit again, authored and
# committed by the poster at its own dates, with its author's
# Signed-off-by the poster's, and in MAINTAINERS each "M:" line that
# names one of the series' authors the poster's, unless the base has that
# line already (an upstream entry is not the series' to change).
# Exporting these commits, rather than editing the exported text, keeps
# every patch consistent with the ones before it (the context lines and
# hunk headers that quote the entry, the index lines), the cover letter's
# shortlog with the patches, and the prerequisite patch ids those of the
# poster's commits, not the author's. Their objects go to a scratch
# directory, with the tree's own as an alternate (git's quarantine
# variables): the tree gets no objects, refs or commits, and format-patch
# still reads its configuration and attributes.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/objects"
kgit cat-file blob base:MAINTAINERS >"$scratch/MAINTAINERS.base"
GIT_ALTERNATE_OBJECT_DIRECTORIES=$(kgit rev-parse --path-format=absolute --git-path objects)
export GIT_OBJECT_DIRECTORY=$scratch/objects GIT_ALTERNATE_OBJECT_DIRECTORIES
export GIT_AUTHOR_NAME=$poster_name GIT_AUTHOR_EMAIL=$poster_email
export GIT_COMMITTER_NAME=$poster_name GIT_COMMITTER_EMAIL=$poster_email
poster="$poster_name <$poster_email>"

# swap_lines LINES NEW: stdin to stdout, each line that is one of LINES
# (newline-separated) replaced by NEW.
swap_lines() {
	LINES=$1 NEW=$2 awk '
		BEGIN { n = split(ENVIRON["LINES"], l, "\n"); for (i = 1; i <= n; i++) if (l[i] != "") swap[l[i]] = 1 }
		$0 in swap { $0 = ENVIRON["NEW"] }
		{ print }'
}

entries=""
while IFS= read -r a; do
	grep -qxF "M:	$a" "$scratch/MAINTAINERS.base" || entries+="M:	$a"$'\n'
done < <(kgit log --format='%an <%ae>' "base..${commits[-1]}" | sort -u)
declare -A poster_blob # MAINTAINERS blob -> the poster's
parent=$(kgit rev-parse 'base^{commit}')
for i in "${!commits[@]}"; do
	c=${commits[i]}
	{ IFS= read -r author && IFS= read -r adate && IFS= read -r cdate && read -r tree; } < <(
		kgit show -s --format='%an <%ae>%n%ad%n%cd%n%T' --date=raw "$c")
	blob=$(kgit rev-parse -q --verify "$c:MAINTAINERS" || true)
	if [[ -n $blob && -z ${poster_blob[$blob]:-} ]]; then
		poster_blob[$blob]=$(kgit cat-file blob "$blob" | swap_lines "$entries" "M:	$poster" |
			kgit hash-object -w --stdin)
	fi
	if [[ -n $blob && ${poster_blob[$blob]} != "$blob" ]]; then
		tree=$(kgit ls-tree "$c" | NEW=${poster_blob[$blob]} awk -F'\t' '
			$2 == "MAINTAINERS" { sub(/ [0-9a-f]+$/, " " ENVIRON["NEW"], $1) }
			{ print $1 "\t" $2 }' | kgit mktree)
	fi
	parent=$(kgit cat-file commit "$c" | sed '1,/^$/d' |
		swap_lines "Signed-off-by: $author" "Signed-off-by: $poster" |
		GIT_AUTHOR_DATE=$adate GIT_COMMITTER_DATE=$cdate kgit commit-tree "$tree" -p "$parent")
	commits[i]=$parent
done

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
	kgit format-patch -q --cover-letter --base=base --no-signature --abbrev=12 \
		-o "$dir" "${commits[first - 1]}~1..${commits[last - 1]}"
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
