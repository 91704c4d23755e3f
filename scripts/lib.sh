# Common settings for the project's scripts; sourced, not run.
# shellcheck shell=bash disable=SC2034 # variables for the scripts that source this

# Debian's tools first (a pyenv python3 would lack python3-ply for checkpatch).
export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
KSRC=$BUILD/linux                 # the prepared kernel git tree
BASE_TARBALL=${BASE_TARBALL:-/usr/src/linux-source-6.12.tar.xz}
BASE_PKG=linux-source-6.12
PATCHES=$TOP/kernel/patches
CONFIGS=$TOP/kernel/configs

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# The Debian version of the base, e.g. "6.12.117-1~deb12u1".
base_version() {
	dpkg-query -W -f='${Version}' "$BASE_PKG" 2>/dev/null || echo unknown
}

# Object directory of a kernel flavour ("guest" or "debug").
kobj() { echo "$BUILD/obj-$1"; }

# Lines in a kernel log that fail a run or a test: WARN, BUG (KASAN reports
# start with "BUG: KASAN"), Oops, lockdep and UBSAN reports, panics, hung tasks,
# RCU stalls.
KLOG_BAD='WARNING:|BUG:|Oops|UBSAN:|general protection fault|Kernel panic|INFO: task .* blocked for more than|rcu: INFO: .* detected stall|possible circular locking|inconsistent lock state|possible recursive locking|suspicious RCU usage|sleeping function called from invalid context'

# kbuild_lock: hold a lock on the build directory for the rest of the
# calling script, so that two kernel builds (say, make kernel in one
# terminal and the per-patch check in another) never run at once on this
# machine's cores; the second waits, saying so.
# The lock lives in the kernel tree's .git, so work trees whose build/linux
# is a symlink to one tree share it.
kbuild_lock() {
	local lock=$KSRC/.git/vstor-kbuild.lock
	[[ -d $KSRC/.git ]] || return 0
	exec 9>"$lock"
	if ! flock -n 9; then
		log "waiting for another kernel build to finish ($lock)"
		flock 9
	fi
}
