# Runner self-test (tests/host/harness.sh runs it and expects failures): a
# test during which the kernel logs a warning is "not ok" although it
# returns 0, and a test that outlives its timeout is killed and "not ok"
# while the tests after it still run.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_VM=(--cpus 1 --no-disk --modules "")
SUITE_NEEDS=(kernel)
TESTS=(kernel_warning sleeps_past_timeout passes)

desc_kernel_warning="a kernel log warning during a passing test fails it"
kernel_warning() {
	echo "WARNING: CPU: 0 PID: $$ at vstor harness self-test" >/dev/kmsg
	return 0
}

desc_sleeps_past_timeout="a test that outlives its timeout is killed and fails"
timeout_sleeps_past_timeout=3
sleeps_past_timeout() { sleep 60; }

desc_passes="the next test still runs"
passes() { true; }
