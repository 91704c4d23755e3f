#!/usr/bin/env bash
# Export the commits base..HEAD of build/linux into kernel/patches, with
# output that does not depend on when or where it ran, and rewrite the series
# file, keeping its comments with their patches (series_merge below).
#
#   scripts/refresh.sh [--check|--force]
#
# It refuses a tree that is not based on kernel/patches as it is now
# (series_state in lib.sh: kernel/patches changed since the tree was
# prepared, say by a git pull), which would overwrite those changes.
#   --check  only compare, and fail when the export would change anything
#   --force  export even a tree that is not based on kernel/patches
set -euo pipefail
. "$(dirname "$0")/lib.sh"

mode='export'
case ${1:-} in
"") ;;
--check) mode=check ;;
--force) mode=force ;;
*) die "usage: $0 [--check|--force]" ;;
esac
[[ -d $KSRC/.git ]] || die "no kernel tree at $KSRC: run scripts/prepare.sh"

# series_merge OLD NEW: print a series file for the patches listed in
# NEW/series, with the comments of OLD/series. The rule:
# - a block of blank and "#" lines belongs to the patch that follows it (its
#   header); lines after the last patch stay at the end; a first block of
#   comment lines that ends in a blank line is the file's preamble and stays
#   at the top;
# - a new patch is the old patch with the same name but for its number, or
#   else with the same change (git patch-id), or else the one it replaces:
#   the old patch right after the previous patch's old one, when that old
#   patch has no other match. It keeps the old patch's header.
# - a patch with no old match is new and has no header: it joins the group
#   of the patch before it;
# - the header of a removed patch goes to the next old patch that is kept,
#   unless that one has a header of its own (the removed patch's group is
#   then empty, and its header is dropped, saying so).
series_merge() {
	local old=$1 new=$2 t i j pending='' preamble='' hdr='' footer=''
	local -a oname=() ohdr=() nname=() match=() carried=() opid=()
	local -A used=()

	mapfile -t nname < <(series_patches "$new")
	# Parse the old series into preamble, (header, patch) pairs and footer.
	local lines=() start=0
	[[ -f $old/series ]] && mapfile -t lines <"$old/series"
	t=${lines[0]:-}
	if [[ ${t#"${t%%[![:space:]]*}"} == \#* ]]; then
		for ((i = 0; i < ${#lines[@]}; i++)); do
			t=${lines[i]#"${lines[i]%%[![:space:]]*}"}
			[[ $t == \#* ]] && continue
			if [[ -z $t ]]; then
				for ((j = 0; j <= i; j++)); do preamble+=${lines[j]}$'\n'; done
				start=$((i + 1))
			fi
			break
		done
	fi
	for ((i = start; i < ${#lines[@]}; i++)); do
		t=${lines[i]#"${lines[i]%%[![:space:]]*}"}
		t=${t%"${t##*[![:space:]]}"}
		if [[ -z $t || $t == \#* ]]; then
			hdr+=${lines[i]}$'\n'
		else
			oname+=("$t")
			ohdr+=("$hdr")
			hdr=''
		fi
	done
	footer=$hdr

	# Match: same name but for the number, then same change, then position.
	local -a nkey=() okey=()
	for t in "${nname[@]}"; do [[ $t =~ ^[0-9]+-(.*)$ ]] && nkey+=("${BASH_REMATCH[1]}") || nkey+=("$t"); done
	for t in "${oname[@]}"; do [[ $t =~ ^[0-9]+-(.*)$ ]] && okey+=("${BASH_REMATCH[1]}") || okey+=("$t"); done
	for ((i = 0; i < ${#nname[@]}; i++)); do
		match[i]=-1
		for ((j = 0; j < ${#oname[@]}; j++)); do
			if [[ -z ${used[$j]:-} && ${okey[j]} == "${nkey[i]}" ]]; then
				match[i]=$j used[$j]=1
				break
			fi
		done
	done
	pid() { [[ -f $1 ]] && git patch-id --stable <"$1" | cut -d' ' -f1; }
	for ((i = 0; i < ${#nname[@]}; i++)); do
		((match[i] < 0)) || continue
		t=$(pid "$new/${nname[i]}" || true)
		[[ -n $t ]] || continue
		for ((j = 0; j < ${#oname[@]}; j++)); do
			[[ -z ${used[$j]:-} ]] || continue
			[[ -n ${opid[j]+set} ]] || opid[j]=$(pid "$old/${oname[j]}" || true)
			if [[ ${opid[j]} == "$t" ]]; then
				match[i]=$j used[$j]=1
				break
			fi
		done
	done
	for ((i = 0; i < ${#nname[@]}; i++)); do
		((match[i] < 0)) || continue
		if ((i == 0)); then j=0; else
			((match[i - 1] >= 0)) || continue
			j=$((match[i - 1] + 1))
		fi
		if ((j < ${#oname[@]})) && [[ -z ${used[$j]:-} ]]; then
			match[i]=$j used[$j]=1
		fi
	done

	# Headers of removed patches (blank lines alone are dropped silently).
	dropped() {
		[[ -z ${1//[[:space:]]/} ]] ||
			log "series: dropped the comment of a group that is gone: $(printf '%s' "$1" | tr -s '\n' ' ')"
	}
	for ((j = 0; j < ${#oname[@]}; j++)); do
		if [[ -z ${used[$j]:-} ]]; then
			log "series: ${oname[j]} removed"
			if [[ -n ${ohdr[j]} ]]; then
				dropped "$pending"
				pending=${ohdr[j]}
			fi
		elif [[ -n $pending ]]; then
			if [[ -z ${ohdr[j]} ]]; then
				carried[j]=$pending
				[[ -z ${pending//[[:space:]]/} ]] ||
					log "series: the comment of a removed patch now heads ${oname[j]}"
			else
				dropped "$pending"
			fi
			pending=''
		fi
	done
	dropped "$pending"

	printf '%s' "$preamble"
	for ((i = 0; i < ${#nname[@]}; i++)); do
		j=${match[i]}
		if ((j >= 0)); then
			printf '%s%s' "${carried[j]:-}" "${ohdr[j]}"
			[[ ${oname[j]} == "${nname[i]}" ]] || log "series: ${oname[j]} is now ${nname[i]}"
		else
			log "series: ${nname[i]} added"
		fi
		printf '%s\n' "${nname[i]}"
	done
	printf '%s' "$footer"
}

if [[ $mode == export ]]; then
	series_state
	if [[ $SERIES_STATE != based ]]; then
		series_explain
		die "refusing to export $KSRC over $PATCHES_REL: it was not made from $PATCHES_REL as they are now (make refresh FORCE=1 exports it anyway)"
	fi
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
series_export "$out"
series_merge "$PATCHES" "$out" >"$out/series.merged"
mv "$out/series.merged" "$out/series"

# check_export: kernel/patches holds what the export in $out holds, file for
# file; a patch may land elsewhere in the base (series_same). Prints the
# differences, and the patches that only moved.
check_export() {
	local f name bad=0
	local -a moved=()
	if ! diff -u "$PATCHES/series" "$out/series" >&2; then bad=1; fi
	for f in "$PATCHES"/*.patch "$out"/*.patch; do
		[[ -e $f ]] || continue
		name=${f##*/}
		[[ $f == "$out/"* && -e $PATCHES/$name ]] && continue
		if [[ ! -e $PATCHES/$name || ! -e $out/$name ]]; then
			echo "only in ${f%/*}: $name" >&2
			bad=1
		elif cmp -s "$PATCHES/$name" "$out/$name"; then
			:
		elif series_same "$PATCHES/$name" "$out/$name"; then
			moved+=("$name")
		else
			diff -u --label "$PATCHES_REL/$name" --label "export/$name" \
				<(series_placeless "$PATCHES/$name") <(series_placeless "$out/$name") >&2
			bad=1
		fi
	done
	((bad == 0)) || return 1
	if ((${#moved[@]})); then
		log "${#moved[@]} patch(es) apply unchanged at other places in this base ($(base_version)): only their index lines or hunk line numbers differ; refresh.sh updates them: ${moved[*]}"
	fi
}

if [[ $mode == check ]]; then
	if check_export; then
		log "$PATCHES_REL matches $KSRC"
		exit 0
	fi
	die "$PATCHES_REL differs from $KSRC (run scripts/refresh.sh)"
fi

find "$PATCHES" -maxdepth 1 -name '*.patch' -delete
cp "$out"/*.patch "$PATCHES"/ 2>/dev/null || true
cp "$out/series" "$PATCHES/series"
series_record HEAD
log "exported $(series_patches "$PATCHES" | grep -c . || true) patches to $PATCHES_REL"
