# Series hygiene: checkpatch.pl --strict on each patch (checkpatch_NNNN),
# and builds of the guest kernel with sparse on the lines the patches add
# (builds_NNNN, one per cover letter group or per patch: below), all with
# scripts/check-series.sh. The tests are made from kernel/patches/series
# and kernel/cover/KBASE.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_ORDER=30
SUITE_NEEDS=(tree kernel)

SERIES_PATCHES=()
while read -r _p; do
	[[ -z $_p || $_p == \#* ]] || SERIES_PATCHES+=("$_p")
done <"$PATCHES/series"
TESTS=()
for _p in "${SERIES_PATCHES[@]}"; do
	TESTS+=("checkpatch_${_p%%-*}")
	declare "desc_checkpatch_${_p%%-*}=checkpatch --strict: $_p"
done
# Builds, from the last patch to the first (scripts/check-series.sh says
# why), on the bases VSTOR_SERIES_BUILDS names (default: mainline, the
# series that is posted). By default one per cover letter group
# (kernel/cover/KBASE), builds_NNNN for the group's last patch NNNN: the
# guest kernel built and linked there, sparse on the lines the whole group
# adds (check-series.sh build --group). VSTOR_SERIES_BUILD=each builds
# every commit (--quick: each compiles what it changes, a group's last
# links) and VSTOR_SERIES_BUILD=full every commit whole, as make check
# does: a build per commit does not fit make test's time (Documentation/
# workflow.md, "Two bases").
_builds=0
for _b in ${VSTOR_SERIES_BUILDS:-mainline}; do
	[[ $_b == "$KBASE" ]] && _builds=1
done
SERIES_GROUPS=()
if ((_builds)) && [[ ${VSTOR_SERIES_BUILD:-group} == group ]]; then
	# "FIRST LAST" of each template, the last patch first.
	mapfile -t SERIES_GROUPS < <(for _b in "$TOP"/kernel/cover/"$KBASE"/*.txt; do
		sed -n 's/^Patches: *\([0-9]*\)\(-\([0-9]*\)\)\{0,1\}.*/\1 \3/p' "$_b" | head -n 1
	done | awk '{ print $1, ($2 == "" ? $1 : $2) }' | sort -k2,2nr)
	for _b in "${SERIES_GROUPS[@]}"; do
		read -r _i _p <<<"$_b"
		TESTS+=("builds_$_p")
		_b="patches $_i-$_p"
		[[ $_i != "$_p" ]] || _b="patch $_p"
		declare "desc_builds_$_p=$_b, a cover letter group: the guest kernel builds and links at its last patch that changes the kernel, without warnings, and sparse finds nothing in the lines the group adds"
		declare "timeout_builds_$_p=1800"
	done
fi
for ((_i = ${#SERIES_PATCHES[@]} - 1; _builds && ${#SERIES_GROUPS[@]} == 0 && _i >= 0; _i--)); do
	_p=${SERIES_PATCHES[_i]}
	TESTS+=("builds_${_p%%-*}")
	declare "desc_builds_${_p%%-*}=the guest kernel compiles without warnings at $_p (links at a group's last patch), sparse-clean in its lines"
	# A build that must fill build/obj-bisect itself compiles the kernel.
	declare "timeout_builds_${_p%%-*}=1800"
done
unset _p _i _b _builds

# suite_run TEST: checkpatch_NNNN or builds_NNNN.
suite_run() {
	local num=${1#*_} i g
	if [[ $1 == builds_* ]]; then
		for g in "${SERIES_GROUPS[@]}"; do
			read -r g i <<<"$g"
			[[ $i == "$num" ]] || continue
			"$TOP/scripts/check-series.sh" build --group "$g" "$num"
			return
		done
	fi
	for i in "${!SERIES_PATCHES[@]}"; do
		[[ ${SERIES_PATCHES[$i]} == "$num"-* ]] || continue
		case $1 in
		checkpatch_*) "$TOP/scripts/check-series.sh" checkpatch "${SERIES_PATCHES[$i]}" ;;
		builds_*)
			if [[ ${VSTOR_SERIES_BUILD:-quick} == full ]]; then
				"$TOP/scripts/check-series.sh" build $((i + 1))
			else
				"$TOP/scripts/check-series.sh" build --quick $((i + 1))
			fi
			;;
		esac
		return
	done
	fail "no patch numbered $num in $PATCHES_REL/series"
}
