# Suites: loading their declarations and running one test. Sourced by the
# host runner (tests/run.sh) and the guest runner (tests/guest/run.sh).
# shellcheck shell=bash
#
# A suite is a file tests/host/NAME.sh or tests/guest/NAME.sh that sets
# TESTS; Documentation/writing-tests.md describes the contract. What a file
# runs when it is sourced must be declarations only: the runners source it
# to read TESTS, desc_*, timeout_* and the SUITE_* settings.

# VSTOR_SUITE_DIRS (colon-separated) replaces them: the runner's self-tests
# use suites of their own (tests/selftest).
IFS=: read -ra SUITE_DIRS <<<"${VSTOR_SUITE_DIRS:-$TOP/tests/host:$TOP/tests/guest}"
DEFAULT_TIMEOUT=300

# suite_file NAME: the file of suite NAME, or nothing.
suite_file() {
	local d
	for d in "${SUITE_DIRS[@]}"; do
		[[ -f $d/$1.sh ]] && grep -q '^TESTS=' "$d/$1.sh" && { echo "$d/$1.sh"; return 0; }
	done
	return 1
}

# suite_names: every suite, in run order (SUITE_ORDER, then name).
suite_names() {
	local d f order
	for d in "${SUITE_DIRS[@]}"; do
		for f in "$d"/*.sh; do
			grep -q '^TESTS=' "$f" || continue
			order=$(sed -n 's/^SUITE_ORDER=\([0-9]*\).*/\1/p' "$f" | head -n 1)
			printf '%03d %s\n' "$((10#${order:-50}))" "$(basename "$f" .sh)"
		done
	done | sort | cut -d' ' -f2
}

# suite_info FILE: the suite's declarations, one per line:
#   kind host|guest
#   vm ARG...         (shell-quoted; guest suites)
#   needs STEP...     (build steps it needs: kernel tools fio ...)
#   requires REQ...   (host requirements; unmet ones skip the suite)
#   test NAME TIMEOUT DESCRIPTION
# Runs in a subshell: nothing of the suite leaks into the caller.
suite_info() (
	set +eu
	TESTS=() SUITE_VM=() SUITE_NEEDS=() SUITE_REQUIRES=() SUITE_TIMEOUT=$DEFAULT_TIMEOUT
	# shellcheck disable=SC1090
	. "$1" >/dev/null 2>&1 || { echo "error cannot load $1"; exit 1; }
	((${#TESTS[@]})) || { echo "error $1 declares no tests"; exit 1; }
	echo "kind $(basename "$(dirname "$1")")"
	echo "fatal ${SUITE_FATAL:-0}"
	local v=""
	((${#SUITE_VM[@]})) && printf -v v '%q ' "${SUITE_VM[@]}"
	echo "vm ${v% }"
	echo "needs ${SUITE_NEEDS[*]}"
	echo "requires ${SUITE_REQUIRES[*]}"
	local t d to
	for t in "${TESTS[@]}"; do
		[[ $t =~ ^[A-Za-z0-9_./-]+$ ]] || { echo "error $1: bad test name '$t'"; exit 1; }
		# Names that are not shell identifiers (paths) have no desc_/timeout_.
		d=$t to=$SUITE_TIMEOUT
		if [[ $t =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
			d=desc_$t to=timeout_$t
			d=${!d:-$t} to=${!to:-$SUITE_TIMEOUT}
		fi
		echo "test $t $to ${d//$'\n'/ }"
	done
)

# run_test FILE TEST TIMEOUT LOG: run one test function of a suite in a
# bash of its own, in its own process group, killed (with everything it
# started) when it outlives TIMEOUT seconds. Its output goes to LOG. Returns
# the test's status: 0 pass, 4 skip, 124 timed out, anything else a failure.
# A suite may define suite_run NAME to run its tests itself (tests made
# from data, such as one per patch); otherwise TEST is a function.
run_test() {
	local file=$1 t=$2 to=$3 log=$4 kind
	kind=$(basename "$(dirname "$file")")
	# shellcheck disable=SC2016 # the inner bash expands them
	timeout -k 10 "$to" /bin/bash -c '
		set -uo pipefail
		TOP=$1
		. "$TOP/scripts/lib.sh"
		. "$TOP/tests/$2/lib.sh"
		. "$3"
		if [[ $2 == guest ]]; then cd /tmp; else cd "$TOP"; fi || exit 1
		if declare -F suite_run >/dev/null; then suite_run "$4"; else "$4"; fi' vstor-test "$TOP" "$kind" "$file" "$t" >"$log" 2>&1 </dev/null
}
