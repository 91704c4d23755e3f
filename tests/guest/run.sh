#!/usr/bin/env bash
# Guest-side test runner: runs the named suites (tests/guest/<suite>.sh) and
# prints KTAP. Exit status 0 when every test passed.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/scripts/lib.sh"
. "$TOP/tests/guest/lib.sh"

declare -a all=()
for suite in "$@"; do
	TESTS=()
	# shellcheck disable=SC1090
	. "$TOP/tests/guest/$suite.sh" || { echo "Bail out! cannot load suite $suite"; exit 2; }
	for t in "${TESTS[@]}"; do
		all+=("$suite:$t")
	done
done

echo "KTAP version 1"
echo "1..${#all[@]}"
n=0 failed=0 skipped=0
for st in "${all[@]}"; do
	n=$((n + 1))
	suite=${st%%:*} t=${st#*:}
	dvar="desc_$t"
	name="$suite: ${!dvar:-$t}"
	before=$(dmesg | wc -l)
	out=$(cd /tmp && "$t" 2>&1)
	rc=$?
	bad=$(dmesg | tail -n +"$((before + 1))" | grep -E "$KLOG_BAD" || true)
	if [[ -n $bad ]]; then
		rc=1
		out+=$'\n'"kernel log during the test:"$'\n'"$(dmesg | tail -n +"$((before + 1))" | head -n 60)"
	fi
	[[ -n $out ]] && printf '%s\n' "$out" | sed 's/^/# /'
	if ((rc == 0)); then
		echo "ok $n $name"
	elif ((rc == 4)); then
		# kselftest's skip code; the test printed why.
		echo "ok $n $name # SKIP $(printf '%s\n' "$out" | tail -n 1)"
		skipped=$((skipped + 1))
	else
		echo "not ok $n $name"
		failed=$((failed + 1))
	fi
done
echo "# guest: $((n - failed - skipped)) passed, $failed failed, $skipped skipped"
((failed == 0))
