# vufsd (tools/vufsd) on the host, against a scripted vhost-user-fs front
# end (tests/tools/vufs_test.py): every FUSE opcode, queues, the error
# contract for malformed chains, escapes from the shared directory, front
# ends that vanish mid-request, resets, who may connect, the xattr policy
# and the command line. Then again with rings that busy-poll instead of
# sleeping (_poll) and with three workers per request queue (_threads). The
# checks of a scenario are in its log.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_ORDER=20
SUITE_NEEDS=(tools)
SUITE_TIMEOUT=600
TESTS=(ops queues malformed escape disconnect reset access xattr fds shrink
	sandbox creds cache quiesce handles acl userns devices compromised
	frontfds statsfile ops_wide ops_handles
	escape_handles ops_poll disconnect_poll ops_threads queues_threads
	disconnect_threads reset_threads peer_virtiofsd)

desc_ops="every FUSE opcode on a 2-queue device"
desc_queues="requests on each request queue land on its own vring and counters"
desc_malformed="malformed chains and requests: each answered or returned, the next request served"
desc_escape="nothing leads outside the shared directory (.., /, symlinks, swapped directories, FIFOs, devices)"
desc_disconnect="a front end that vanishes with requests in flight: all released, the next connection served"
desc_reset="vring stop and restart, RESET_DEVICE and RESET_OWNER"
desc_access="socket mode 0600 (nobody cannot connect), --socket-group, one daemon per socket (pid-file lock), a live socket never replaced, SIGHUP drains like SIGTERM"
desc_xattr="xattrs: none without --xattr (ENOSYS), user.* only with it (security.capability, trusted.*, system.* refused with EPERM, hidden from GET and LIST), more with --xattr-allow"
desc_fds="descriptor limits: the hard limit raised to fs.nr_open where allowed; under 256 it cannot raise, names already looked up keep working after new ones fail with EMFILE"
desc_shrink="the VMM cuts the memfd behind a GETATTR's reply page after SET_MEM_TABLE: the daemon drops that connection, logs why, lives and serves the next"
desc_sandbox="the sandboxed server: own mnt/pid/net/ipc/uts namespaces, the share as /, capabilities cut to chown, dac_override, fowner, fsetid, setuid, setgid, no_new_privs, a seccomp filter; supervisor and server do not outlive each other; --seccomp none, --sandbox none"
desc_creds="requests of guest user 1000: new names get its owner or a setgid directory's group and keep the set-id bits asked for; EACCES in root's directory, EPERM on another's file in a sticky directory; a caller in a directory's group only as a supplementary one may create there when FUSE sends that group (CREATE_SUPP_GROUP), not otherwise; malformed group extensions EINVAL"
desc_cache="--cache auto, always, never: the entry and attribute timeouts and open flags the guest is given (1 s, a day with KEEP_CACHE and CACHE_DIR, 0 with DIRECT_IO); --writeback: WRITEBACK_CACHE agreed, write-only opens readable, O_APPEND dropped, a caller without read permission still opens write-only"
desc_quiesce="INIT and DESTROY on queue 2 while queue 1 serves an FSYNC of 256 MiB: each is answered only after the FSYNC, and the old session's inodes are gone after it"
desc_handles="--inode-file-handles prefer under a 256 descriptor limit: 1000 files looked up and held at once, the server holding about 20 descriptors; GETATTR, OPEN and READ through handles; a file renamed on the host keeps its inode, a removed one gives ESTALE, a new file with the reused inode number is a new inode; all forgotten, one inode left"
desc_ops_handles="ops with --inode-file-handles prefer"
desc_escape_handles="escape with --inode-file-handles prefer"
desc_acl="--posix-acl: INIT agrees to POSIX_ACL and DONT_MASK only with it; access ACLs set, read and listed (mode follows the mask), other system.* names refused; under a default ACL the umask is ignored and subdirectories inherit it; ACL_KILL_SGID honoured"
desc_userns="--sandbox userns: run by root with --uid-map/--gid-map 0:100000:65536 (guest root and user 1000 own 100000 and 101000 on the host, an unmapped guest id gets EPERM, a host root's file shows as 65534 and guest root cannot write it, chown translated) and by user 1000 with its own ids (the server is uid 1000 on the host)"
desc_devices="--allow-devices: guest root makes a character device node, guest user 1000 cannot; the server keeps CAP_MKNOD only then"
desc_compromised="a server taken over (system calls injected with ptrace): open_by_handle_at of a directory outside the share is killed by the seccomp filter, EPERM without it (no dac_read_search), and opens only with --inode-file-handles prefer, the documented price"
desc_frontfds="a pipe as call or error fd and a regular file as kick fd: refused, the vring keeps its eventfd and serves 2000 requests past a full pipe, no worker spins, SIGTERM still ends the daemon"
desc_statsfile="--stats as root: a symlink or hard link to root's 0600 file, another user's file or a FIFO planted at the path is neither followed nor written; the daemon exits 1 and says why"
desc_ops_wide="ops with 6 request queues of 3 workers each: more threads than glibc's malloc serves before it sizes its arenas (a system call the seccomp list must allow)"
desc_ops_poll="ops with busy-polling rings (--busy-poll 200)"
desc_disconnect_poll="disconnect with busy-polling rings"
desc_ops_threads="ops with three workers per request queue (--threads 3)"
desc_queues_threads="queues with three workers per request queue"
desc_disconnect_threads="disconnect with three workers per request queue"
desc_reset_threads="reset with three workers per request queue"
desc_peer_virtiofsd="every scenario against the release's virtiofsd, vufsd's peer (Debian 13: the Rust one; Debian 12: QEMU 7.2's C one): each check where it differs from vufsd's contract names how, and a difference the harness does not explain fails"

# suite_run SCENARIO[_poll|_threads] | peer_virtiofsd
suite_run() {
	local opts=(--queues 2)
	if [[ $1 == peer_virtiofsd ]]; then
		suite_peer
		return
	fi
	case $1 in
	*_poll) opts+=(--busy-poll 200) ;;
	*_threads) opts+=(--threads 3) ;;
	*_wide) opts=(--queues 6 --threads 3) ;;
	*_handles) opts+=(--daemon-opt=--inode-file-handles=prefer) ;;
	esac
	vufs_run "${opts[*]} ${1%_*}" --daemon vufsd --bin "$BUILD/tools/vufsd" "${opts[@]}" "${1%_*}"
}

# vufs_run WHAT ARGS...: vufs_test.py ARGS, its output as it comes (a test
# that times out still leaves what it printed in its log), then a summary
# line naming WHAT; returns its status.
vufs_run() {
	local what=$1 out rc
	shift
	out=$(mktemp)
	/usr/bin/python3 -u "$TOP/tests/tools/vufs_test.py" "$@" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	echo "==> vufs_test.py $what: $(tail -n 1 "$out")"
	rm -f "$out"
	return "$rc"
}

# suite_peer: vufs_test.py --daemon virtiofsd, all scenarios, on the Rust
# virtiofsd where it is installed, else the C one.
suite_peer() {
	local bin=$RUST_VIRTIOFSD
	[[ -x $bin ]] || bin=$C_VIRTIOFSD
	[[ -x $bin ]] || { echo "no virtiofsd: neither $RUST_VIRTIOFSD nor $C_VIRTIOFSD"; return 4; }
	vufs_run "--daemon virtiofsd ($bin)" --daemon virtiofsd --bin "$bin"
}
