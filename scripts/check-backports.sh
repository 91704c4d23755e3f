#!/usr/bin/env bash
# Check that the 6.12 series is the mainline series' backport, patch by
# patch (Documentation/workflow.md, "Two bases"), and print the pairs.
#
#   scripts/check-backports.sh [MAINLINE_DIR [BACKPORT_DIR]]
#                                  default: kernel/mainline kernel/6.12
#
# Each backport's message starts with the lines that name what it carries,
# in the style of the stable trees:
#
#   [ Upstream commit 0123456789ab ]     a commit already in Linus' tree,
#                                        taken as it is
#   [ Backport of upstream commit(s) 0123456789ab[ and ...]: WHAT CHANGED ]
#                                        one or more such commits, rewritten
#                                        or combined for 6.12 (stable's
#                                        "backport": it says what changed)
#   [ Mainline: same subject ]           the kernel/mainline patch with the
#                                        backport's own subject
#   [ Mainline: SUBJECT ]                one with another subject
#   [ 6.12 only: REASON ]                a fix mainline does not need
#
# A bracket may go on over lines that start with two spaces (commit
# messages keep to 75 columns). A mainline patch that 6.12 does not need
# is named in BACKPORT_DIR/series by a comment line
#
#   # Not needed in 6.12: "SUBJECT" (why)
# Fails when a backport names nothing, names a mainline subject the
# mainline series does not have, or when a mainline patch has no backport
# or more than one.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

ml=${1:-$TOP/kernel/mainline}
bp=${2:-$TOP/kernel/6.12}
[[ -f $ml/series && -f $bp/series ]] || die "no series in $ml or $bp"

# subject PATCH: the patch's subject, unfolded, without "[PATCH]".
subject() {
	awk '/^Subject: / { s = $0; sub(/^Subject: (\[[^]]*\] )?/, "", s); on = 1; next }
		on && /^[ \t]/ { sub(/^[ \t]+/, " "); s = s $0; next }
		on { print s; exit }' "$1"
}

declare -A ml_num ml_refs
mapfile -t ml_list < <(PATCHES=$ml series_patches "$ml")
for p in "${ml_list[@]}"; do
	s=$(subject "$ml/$p")
	[[ -z ${ml_num[$s]:-} ]] || die "two mainline patches have the subject '$s'"
	ml_num[$s]=${p%%-*}
	ml_refs[$s]=""
done

bad=0
mapfile -t bp_list < <(PATCHES=$bp series_patches "$bp")
for p in "${bp_list[@]}"; do
	n=${p%%-*} named=0 own=$(subject "$bp/$p")
	# Only the message counts (from the first blank line to the "---"),
	# with each bracket's continuation lines joined to it.
	while IFS= read -r line; do
		if [[ $line =~ ^\[\ Upstream\ commit\ ([0-9a-f]{12,40})\ \]$ ]]; then
			printf '6.12 %s  upstream %s\n' "$n" "${BASH_REMATCH[1]}"
			named=1
		elif [[ $line =~ ^\[\ Backport\ of\ upstream\ commits?\ (([0-9a-f]{12,40})((,\ |,?\ and\ )[0-9a-f]{12,40})*):\ .+\ \]$ ]]; then
			printf '6.12 %s  backport of upstream %s\n' "$n" "${BASH_REMATCH[1]}"
			named=1
		elif [[ $line =~ ^\[\ 6\.12\ only:\ (.*)\ \]$ ]]; then
			printf '6.12 %s  6.12 only: %s\n' "$n" "${BASH_REMATCH[1]}"
			named=1
		elif [[ $line =~ ^\[\ Mainline:\ (.*)\ \]$ ]]; then
			s=${BASH_REMATCH[1]}
			[[ $s != "same subject" ]] || s=$own
			if [[ -z ${ml_num[$s]:-} ]]; then
				printf 'error: 6.12 %s names mainline "%s", which kernel/mainline does not have\n' "$n" "$s" >&2
				bad=1
			else
				printf '6.12 %s  mainline %s  %s\n' "$n" "${ml_num[$s]}" "$s"
				ml_refs[$s]+=" $n"
			fi
			named=1
		fi
	done < <(sed -n '/^$/,/^---$/p' "$bp/$p" | awk '
		/^\[ / { if (b != "") print b; b = $0; if (/ \]$/) { print b; b = "" }; next }
		b != "" && /^  / { sub(/^ +/, " "); b = b $0; if (/ \]$/) { print b; b = "" }; next }
		{ if (b != "") print b; b = ""; print }')
	if ((!named)); then
		printf 'error: 6.12 %s (%s) names neither a mainline patch, an upstream commit nor a reason to be 6.12 only\n' "$n" "$p" >&2
		bad=1
	fi
done

# Mainline patches the backport says it does not need.
while IFS= read -r s; do
	if [[ -z ${ml_num[$s]:-} ]]; then
		printf 'error: %s/series says mainline "%s" is not needed, but kernel/mainline does not have it\n' "${bp#"$TOP"/}" "$s" >&2
		bad=1
	else
		printf 'mainline %s  not needed in 6.12  %s\n' "${ml_num[$s]}" "$s"
		ml_refs[$s]+=" none"
	fi
done < <(sed -n 's/^# Not needed in 6\.12: "\(.*\)".*$/\1/p' "$bp/series")

for s in "${!ml_num[@]}"; do
	read -ra refs <<<"${ml_refs[$s]}"
	if ((${#refs[@]} != 1)); then
		printf 'error: mainline %s ("%s") has %d backports%s\n' "${ml_num[$s]}" "$s" \
			"${#refs[@]}" "${refs[*]:+: ${refs[*]}}" >&2
		bad=1
	fi
done
((bad == 0)) || die "the 6.12 series is not the mainline series' backport (see above)"
log "each of the ${#ml_list[@]} mainline patches has one backport among the ${#bp_list[@]} 6.12 patches, or is named not needed there"
