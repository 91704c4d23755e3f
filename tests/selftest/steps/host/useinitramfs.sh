# Runner self-test: a suite that needs the build step initramfs (steps.sh here).
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_NEEDS=(initramfs)
TESTS=(passes)
desc_passes="passes, if it runs"
passes() { true; }
