# Runner self-test: the guest kernel panics in the first test. The host must
# pin the failure on that test, report the test after it as not run, and
# fail the boot.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_VM=(--cpus 1 --no-disk --modules "")
SUITE_NEEDS=(kernel)
TESTS=(panics never_runs)

desc_panics="crashes the guest (sysrq c)"
panics() {
	echo c >/proc/sysrq-trigger
	sleep 30
}
desc_never_runs="would pass, but the guest is gone"
never_runs() { true; }
