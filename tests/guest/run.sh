#!/usr/bin/env bash
# Guest-side runner: runs one suite's tests, all of them or the named ones,
# in this guest and prints KTAP with its own plan. Each test runs with its
# timeout in a shell of its own, between two markers in the kernel log
# ("vstor-test: start|end N SUITE:TEST"), so that a kernel problem is
# pinned on the test that was running; one logged while a test ran fails
# it. Each test's output is kept in /run/vstor/tests/TEST.log (the host
# keeps the run directory).
#   tests/guest/run.sh [--timeout-scale N] [--suite-dirs DIRS] SUITE [TEST...]
# (--suite-dirs: where suites are, colon-separated, for the runner's
# self-tests; --timeout-scale: multiply every test's timeout, for the debug
# kernel; tests that keep limits of their own read it as
# VSTOR_TIMEOUT_SCALE.)
set -uo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
scale=1
while (($#)); do
	case $1 in
	--timeout-scale) scale=$2; export VSTOR_TIMEOUT_SCALE=$2; shift 2 ;;
	--suite-dirs) export VSTOR_SUITE_DIRS=$2; shift 2 ;;
	*) break ;;
	esac
done
. "$TOP/scripts/lib.sh"
. "$TOP/tests/suite.sh"

echo "KTAP version 1"
suite=${1:-}
[[ -n $suite ]] || { echo "Bail out! usage: run.sh SUITE [TEST...]"; exit 2; }
shift
file=$(suite_file "$suite") || { echo "Bail out! no suite $suite"; exit 2; }

names=() timeouts=() descs=()
info=$(suite_info "$file") || { echo "Bail out! cannot load $file here"; exit 2; }
while read -r key rest; do
	case $key in
	test)
		read -r t to d <<<"$rest"
		names+=("$t") timeouts+=($((to * scale))) descs+=("$d")
		;;
	error) echo "Bail out! $rest"; exit 2 ;;
	esac
done <<<"$info"

# The tests to run, in the suite's order.
run=()
for want in "$@"; do
	found=0
	for i in "${!names[@]}"; do
		[[ ${names[$i]} == "$want" ]] && found=1
	done
	((found)) || { echo "Bail out! suite $suite has no test $want"; exit 2; }
done
for i in "${!names[@]}"; do
	if (($# == 0)) || [[ " $* " == *" ${names[$i]} "* ]]; then
		run+=("$i")
	fi
done

# The tests this boot runs, for a test that prepares for a later one.
VSTOR_GUEST_RUN=""
for i in "${run[@]}"; do VSTOR_GUEST_RUN+=" ${names[$i]}"; done
export VSTOR_GUEST_RUN

logdir=/run/vstor/tests
mkdir -p "$logdir" 2>/dev/null || logdir=/tmp/vstor-tests
mkdir -p "$logdir"
kmsg() { echo "vstor-test: $*" >/dev/kmsg 2>/dev/null || true; }

echo "1..${#run[@]}"
n=0 failed=0 skipped=0
for i in "${run[@]}"; do
	n=$((n + 1))
	t=${names[$i]} id=$suite:${names[$i]}
	log=$logdir/$t.log
	start=$SECONDS
	kmsg "start $n $id"
	run_test "$file" "$t" "${timeouts[$i]}" "$log"
	rc=$?
	kmsg "end $n $id rc=$rc"
	# The kernel log from this test's start marker on.
	bad=$(dmesg | sed -n "/vstor-test: start $n $id\$/,\$p" | grep -E "$KLOG_BAD" || true)
	sed 's/^/# /' "$log"
	if [[ -n $bad ]]; then
		echo "# kernel log during the test:"
		dmesg | sed -n "/vstor-test: start $n $id\$/,\$p" | head -n 60 | sed 's/^/# /'
		rc=1
	fi
	echo "# $id: $((SECONDS - start)) s"
	case $rc in
	0) echo "ok $n $id" ;;
	4)
		echo "ok $n $id # SKIP $(tail -n 1 "$log")"
		skipped=$((skipped + 1))
		;;
	124 | 137)
		echo "not ok $n $id # timed out after ${timeouts[$i]} s"
		failed=$((failed + 1))
		;;
	*)
		echo "not ok $n $id"
		failed=$((failed + 1))
		;;
	esac
done
echo "# guest: $((n - failed - skipped)) passed, $failed failed, $skipped skipped"
((failed == 0))
