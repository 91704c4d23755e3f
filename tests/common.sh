# Helpers for every suite, host or guest; sourced by tests/host/lib.sh and
# tests/guest/lib.sh.
# shellcheck shell=bash

# fail MESSAGE: say why, and return 1 (a test ends with "|| return").
fail() { echo "FAIL: $*"; return 1; }
note() { echo "$*"; }
# skip REASON: the test cannot run here, and why (exit code 4, kselftest's).
skip() { echo "$*"; return 4; }

# expect_eq WHAT GOT WANT
expect_eq() {
	[[ $2 == "$3" ]] || fail "$1: got '$2', want '$3'"
}

# stat_get FILE KEY...: counters from a daemon's --stats file, by name
# (tools/statsfile.py: seq, vq.1.requests, vring.0.worker, op.WRITE, or a
# sum such as vq.*.requests). Fails if the file or a key is missing.
stat_get() {
	/usr/bin/python3 "$TOP/tools/statsfile.py" "$@"
}
