# Runner self-test: a suite that needs the build step tools (steps.sh here).
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_NEEDS=(tools)
TESTS=(passes)
desc_passes="passes, if it runs"
passes() { true; }
