#!/usr/bin/env bash
# The test command: installs what is missing, prepares the kernel tree,
# builds the guest kernel and the test tools, checks the series, boots guests
# and runs the guest suites. Prints KTAP and ends with "N passed, N failed".
#
#   tests/run.sh [--debug] [--quick] [boot...]
#     --debug   run the guest suites on the debug kernel (KASAN, lockdep, ...)
#     --quick   skip the per-patch build check
#     boot      only these guest boots (default: all; see BOOTS below)
set -uo pipefail
. "$(dirname "$0")/../scripts/lib.sh"

flavor=guest quick=0
want=()
for a in "$@"; do
	case $a in
	--debug) flavor=debug ;;
	--quick) quick=1 ;;
	-*) die "unknown option $a" ;;
	*) want+=("$a") ;;
	esac
done

# Guest boots: name | vm/vm.sh options | suites run in that boot.
BOOTS=(
	"poll|--cpus 2 --disk file:queues=2 --append virtio_blk.num_poll_queues=1|poll sgl"
	"clamp|--cpus 2 --disk file:queues=2 --disk null:queues=1 --append virtio_blk.num_poll_queues=4|clamp"
	"multi|--cpus 4 --disk file:queues=4 --append virtio_blk.poll_queues=3|multi"
	"repoll|--cpus 4 --disk file:queues=4 --disk file:queues=2|repoll"
	"pt|--cpus 2 --disk file:queues=2 --disk file --disk file:ro --append virtio_blk.num_poll_queues=1|pt"
	"vhost|--cpus 2 --disk file:queues=2 --append brd.rd_nr=2 --append brd.rd_size=65536 --append null_blk.nr_devices=1 --append null_blk.memory_backed=1 --append null_blk.gb=1 --append null_blk.discard=1|vhost"
	"bridge|--cpus 2 --no-disk --append brd.rd_nr=2 --append brd.rd_size=262144|bridge"
	"virtiofs|--cpus 4 --no-disk --virtiofs tag=fs1,queues=1 --virtiofs tag=fs2,queues=2 --virtiofs tag=fs4,queues=4,threads=2|virtiofs"
)

passed=0 failed=0 skipped=0 n=0
result() { # result OK|FAIL|SKIP name
	n=$((n + 1))
	if [[ $1 == SKIP ]]; then
		skipped=$((skipped + 1))
		echo "ok $n $2"
	elif [[ $1 == OK ]]; then
		passed=$((passed + 1))
		echo "ok $n $2"
	else
		failed=$((failed + 1))
		echo "not ok $n $2"
	fi
}
finish() {
	echo "$passed passed, $failed failed, $skipped skipped"
	((failed == 0))
	exit
}
start=$SECONDS
echo "KTAP version 1"

# Set-up steps: a failure here stops the run (nothing after can work).
step() { # step name command...
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		printf '%s\n' "$out" | grep '^==>' | sed 's/^/# /'
		result OK "$name"
	else
		printf '%s\n' "$out" | tail -n 40 | sed 's/^/# /'
		result FAIL "$name"
		finish
	fi
}
step "setup: dependencies installed" "$TOP/scripts/setup.sh"
step "series: applies to $BASE_PKG $(base_version)" "$TOP/scripts/prepare.sh"
step "series: prepare + refresh round trip changes nothing" "$TOP/scripts/refresh.sh" --check
step "build: $flavor kernel, config fragments applied" "$TOP/scripts/build-kernel.sh" "$flavor"
step "build: test tools" make -s -C "$TOP/tests/tools" OUT="$BUILD/tools"
step "build: fio with cmd_type=vblk (Debian's fio 3.33 + tools/fio)" "$TOP/scripts/build-fio.sh"
step "fio: cmd_type=vblk host-side checks (tools/fio/host-check.sh)" "$TOP/tools/fio/host-check.sh"

# vufsd (tools/vufsd) against a scripted vhost-user-fs front end on the host:
# one result per scenario; the failing checks are printed.
mkdir -p "$BUILD/logs"
# Then again with rings busy-polling (:poll, --busy-poll) instead of
# sleeping, and with three workers per request queue (:threads, --threads).
for scen in ops queues malformed escape disconnect reset ops:poll disconnect:poll \
	ops:threads queues:threads disconnect:threads reset:threads; do
	log=$BUILD/logs/vufs-${scen/:/-}.log
	opts=(--queues 2)
	case $scen in
	*:poll) opts+=(--busy-poll 200) ;;
	*:threads) opts+=(--threads 3) ;;
	esac
	if timeout 600 /usr/bin/python3 "$TOP/tests/tools/vufs_test.py" --daemon vufsd \
		--bin "$BUILD/tools/vufsd" "${opts[@]}" "${scen%:*}" >"$log" 2>&1; then
		result OK "vufsd: $scen ($(tail -n 1 "$log"))"
	else
		grep -E "^not ok|Traceback|Error" "$log" | head -n 20 | sed 's/^/# /'
		result FAIL "vufsd: $scen ($(tail -n 1 "$log"), see $log)"
	fi
done

# Series hygiene, one result per patch.
while read -r line; do
	case $line in
	*": clean" | *": ok"*) result OK "series: $line" ;;
	*": FAILED") result FAIL "series: $line" ;;
	*) echo "# $line" ;;
	esac
done < <(
	"$TOP/scripts/check-series.sh" checkpatch 2>&1
	if ((quick == 0)); then "$TOP/scripts/check-series.sh" bisect 2>&1; fi
)

# The harness must be able to fail: a kernel warning during a test, and a
# guest that crashes, each make a run fail.
harness() { # harness NAME EXPECTED-EXIT command...
	local name=$1 expect=$2 rc
	shift 2
	"$TOP/vm/vm.sh" --flavor "$flavor" --no-disk --timeout 300 -- "$@" \
		>"$BUILD/logs/harness.out" 2>&1
	rc=$?
	if ((rc == expect)); then
		result OK "harness: $name"
	else
		sed 's/^/  /' "$BUILD/logs/harness.out" | tail -n 20
		result FAIL "harness: $name (vm.sh exit $rc, want $expect)"
	fi
}
mkdir -p "$BUILD/logs"
if ((${#want[@]} == 0)); then
	harness "a warning logged during a passing guest test fails the test and the run" 125 \
		bash -c "! $TOP/tests/guest/run.sh harness | grep -q '^ok '"
	harness "a guest kernel panic fails the run" 124 \
		bash -c 'echo c >/proc/sysrq-trigger; sleep 30'
fi

for b in "${BOOTS[@]}"; do
	IFS='|' read -r name opts suites <<<"$b"
	if ((${#want[@]})) && [[ " ${want[*]} " != *" $name "* ]]; then
		continue
	fi
	echo "# boot $name ($flavor): vm.sh $opts -- tests/guest/run.sh $suites"
	keep=$BUILD/logs/$name
	rm -rf "$keep"
	# shellcheck disable=SC2086
	"$TOP/vm/vm.sh" --flavor "$flavor" --keep "$keep" --timeout 900 $opts -- \
		"$TOP/tests/guest/run.sh" $suites >"$keep.out" 2>&1
	vmrc=$?
	while IFS= read -r line; do
		case $line in
		"ok "*"# SKIP"*) result SKIP "$name: ${line#ok * }" ;;
		"ok "*) result OK "$name: ${line#ok * }" ;;
		"not ok "*) result FAIL "$name: ${line#not ok * }" ;;
		"KTAP version"* | 1..*) ;;
		*) echo "  $line" ;;
		esac
	done <"$keep.out"
	if [[ ! -s $keep/status ]]; then
		result FAIL "$name: guest did not complete (vm.sh exit $vmrc, see $keep/console.log)"
	elif grep -Eq "$KLOG_BAD" "$keep/console.log"; then
		result FAIL "$name: kernel log reports a problem (see $keep/console.log)"
	else
		result OK "$name: guest booted, ran its suites and powered off; kernel log clean"
	fi
done
echo "# $flavor run took $((SECONDS - start))s"
finish
