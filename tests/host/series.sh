# Series hygiene, one test per patch: checkpatch.pl --strict, and a build of
# the guest kernel at that patch with sparse on the lines it adds
# (scripts/check-series.sh). The tests are
# made from kernel/patches/series: checkpatch_NNNN and builds_NNNN for the
# patch numbered NNNN.
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
# Built from the last patch to the first (scripts/check-series.sh says why),
# on the bases VSTOR_SERIES_BUILDS names (default: mainline, the series that
# is posted; make check builds every patch of either base by hand): two
# bases' worth of per-patch builds do not fit make test's time. They are
# check-series.sh's --quick builds (each commit compiles what it changes;
# the last patch of each cover letter group links), unless
# VSTOR_SERIES_BUILD=full.
_builds=0
for _b in ${VSTOR_SERIES_BUILDS:-mainline}; do
	[[ $_b == "$KBASE" ]] && _builds=1
done
for ((_i = ${#SERIES_PATCHES[@]} - 1; _builds && _i >= 0; _i--)); do
	_p=${SERIES_PATCHES[_i]}
	TESTS+=("builds_${_p%%-*}")
	declare "desc_builds_${_p%%-*}=the guest kernel compiles without warnings at $_p (links at a group's last patch), sparse-clean in its lines"
	# A build that must fill build/obj-bisect itself compiles the kernel.
	declare "timeout_builds_${_p%%-*}=1800"
done
unset _p _i _b _builds

# suite_run TEST: checkpatch_NNNN or builds_NNNN.
suite_run() {
	local num=${1#*_} i
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
