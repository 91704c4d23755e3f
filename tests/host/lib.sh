# Helpers for host-side suites (tests/host/*.sh), sourced by the runner
# before the suite. Suites run as root on the host, from the top of the
# repository.
# shellcheck shell=bash
# shellcheck source=../common.sh
. "$TOP/tests/common.sh"
