# Runner self-test on the host: one test of each outcome.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

TESTS=(passes fails skips sleeps_past_timeout exits_early)
desc_passes="passes"
passes() { true; }
desc_fails="fails on purpose"
fails() { fail "on purpose"; }
desc_skips="skips on purpose"
skips() { skip "no such hardware here"; }
desc_sleeps_past_timeout="outlives its 2 s timeout"
timeout_sleeps_past_timeout=2
sleeps_past_timeout() { sleep 60; }
desc_exits_early="a check script that dies halfway (exit 1 without a word)"
exits_early() { exit 1; }
