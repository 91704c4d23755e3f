# Self-test of the test harness, run by tests/run.sh with the expectation
# that it FAILS: a test during which the kernel logs a warning must be
# reported "not ok" even though the test itself returns 0.
# shellcheck shell=bash

TESTS=(harness_kernel_warning)

desc_harness_kernel_warning="a kernel log warning during a passing test fails it"
harness_kernel_warning() {
	echo "WARNING: CPU: 0 PID: $$ at vstor harness self-test" >/dev/kmsg
	return 0
}
