# The series workflow cannot lose or stale work: prepare, refresh and the
# tree check of build-kernel.sh against a tiny fake base and series
# (tests/tools/series-workflow.sh, whose cases build on each other and so
# run as one test here, held to their own plan); and, on the debug kernel,
# that its debug info decodes addresses to lines.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_ORDER=25
SUITE_NEEDS=(deps kernel)
TESTS=(series_cases debug_info)

desc_series_cases="fresh prepare, round trip, a pull with and without local work, stale refresh refused, series comments kept across renames, additions and removals"
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

desc_debug_info="the debug kernel's debug info decodes a vmlinux and a virtio_blk address to file:line (faddr2line); skipped on the guest kernel, which has none"
debug_info() {
	[[ ${VSTOR_FLAVOR:-guest} == debug ]] || skip "the guest kernel carries no debug info (make test FLAVOR=debug checks it)" || return
	"$TOP/scripts/build-kernel.sh" --check-debuginfo debug
}
