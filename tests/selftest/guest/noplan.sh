# Runner self-test: a suite that cannot even be loaded in the guest (it
# exits when sourced there), so the guest prints no usable plan. Its tests
# must still count, as failures.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_VM=(--cpus 1 --no-disk --modules "")
SUITE_NEEDS=(kernel)
[[ -d /run/vstor ]] && exit 3
TESTS=(first second)
desc_first="would pass"
first() { true; }
desc_second="would pass"
second() { true; }
