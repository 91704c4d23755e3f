// SPDX-License-Identifier: GPL-2.0
/*
 * The sandbox vufsd serves from, modelled on virtiofsd's.
 *
 * The daemon parses guest memory in C with the rights to serve the whole
 * shared directory, so it keeps as little else as it can:
 *
 * - With --sandbox userns, a user namespace comes first (the server is
 *   its root; the maps say which host ids its ids are), so that an
 *   unprivileged user can build the rest too.
 * - A supervisor stays outside. It holds the socket's pid-file lock,
 *   forwards SIGTERM, SIGINT, SIGHUP and SIGUSR1 to the server, removes the
 *   socket and the pid file when the server exits, and exits with its
 *   status.
 * - The server is the first process of new PID, mount, network, IPC and
 *   UTS namespaces: it cannot see or signal host processes, has no network
 *   and no System V objects to share.
 * - In its mount namespace the shared directory, bind-mounted on itself,
 *   becomes the root (pivot_root) and the old root is detached: no path it
 *   can name leads outside the share. A proc for its own PID namespace is
 *   mounted before the switch and kept only as a descriptor of
 *   /proc/self/fd, which the file operations need.
 * - Its capabilities are cut to the few the file operations use (see
 *   sandbox_drop_caps()), the bounding set likewise, and no_new_privs is
 *   set: nothing it could execute would gain more.
 * - A seccomp filter (sandbox_seccomp()) lets through only the system
 *   calls that serving uses; anything else kills the server.
 *
 * The listening socket and the stats file are opened before, and kept as
 * descriptors.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/capability.h>
#include <seccomp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "../include/sandbox_common.h"
#include "log.h"
#include "sandbox.h"

/* Writes the stats file the server sent into the supervisor's file. */
static void write_stats_file(void *arg, const char *buf, size_t len)
{
	int fd = *(int *)arg;

	if (pwrite(fd, buf, len, 0) != (ssize_t)len || ftruncate(fd, len))
		logmsg("supervisor: writing the stats file: %m");
}

/*
 * The supervisor: forward the stop signals to the server, write the stats
 * it sends (the server holds no descriptor of that host file), wait for
 * it, clean up and exit with its status. Never returns.
 */
static void supervise(pid_t child, const sigset_t *mask,
		      void (*cleanup)(void), int sock, int stats_fd)
{
	int status = sandbox_supervise(child, mask, stats_fd >= 0 ? sock : -1,
				       write_stats_file, &stats_fd);

	cleanup();
	sandbox_exit_as(status);
}

/* Writes text to /proc/PID/file; 0 or -1 with errno. */
static int proc_write(pid_t pid, const char *file, const char *text)
{
	size_t len = strlen(text);
	char path[64];
	ssize_t n;
	int fd, err;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = write(fd, text, len);
	err = errno;
	close(fd);
	if (n == (ssize_t)len)
		return 0;
	errno = n < 0 ? err : EIO;
	return -1;
}

static void map_text(char *buf, size_t size, const struct idmap *m,
		     unsigned int n)
{
	size_t off = 0;
	unsigned int i;

	buf[0] = '\0';
	for (i = 0; i < n && off < size; i++)
		off += snprintf(buf + off, size - off, "%u %u %u\n",
				m[i].inside, m[i].outside, m[i].count);
}

/*
 * newuidmap or newgidmap (shadow's setuid helpers, package uidmap) writes
 * maps an unprivileged user may not write itself: the ranges /etc/subuid
 * and /etc/subgid give that user.
 */
static int map_helper(const char *prog, pid_t pid, const struct idmap *m,
		      unsigned int n)
{
	char args[1 + 3 * USERNS_MAX_MAPS][16];
	char *argv[3 + 3 * USERNS_MAX_MAPS];
	unsigned int i, k = 0;
	int status;
	pid_t h;

	argv[k++] = (char *)prog;
	snprintf(args[0], sizeof(args[0]), "%d", (int)pid);
	argv[k++] = args[0];
	for (i = 0; i < n; i++) {
		snprintf(args[1 + 3 * i], 16, "%u", m[i].inside);
		snprintf(args[2 + 3 * i], 16, "%u", m[i].outside);
		snprintf(args[3 + 3 * i], 16, "%u", m[i].count);
		argv[k++] = args[1 + 3 * i];
		argv[k++] = args[2 + 3 * i];
		argv[k++] = args[3 + 3 * i];
	}
	argv[k] = NULL;
	h = fork();
	if (h == 0) {
		execvp(prog, argv);
		logmsg("sandbox: %s: %m (install the uidmap package)", prog);
		_exit(127);
	}
	if (h < 0 || waitpid(h, &status, 0) != h || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		logmsg("sandbox: %s did not write the map (are the ranges in /etc/subuid and /etc/subgid?)",
		       prog);
		return -1;
	}
	return 0;
}

/*
 * The maps of the server's user namespace. Root writes them itself, and so
 * may an unprivileged user whose maps name only its own uid and gid (then
 * setgroups is denied in the namespace, as the kernel requires); any other
 * map goes through newuidmap and newgidmap.
 */
static int write_maps(pid_t child, const struct userns *u)
{
	char text[USERNS_MAX_MAPS * 40];
	bool own = u->nuid == 1 && u->uid[0].count == 1 &&
		   u->uid[0].outside == geteuid() && u->ngid == 1 &&
		   u->gid[0].count == 1 && u->gid[0].outside == getegid();

	if (geteuid() != 0 && !own)
		return map_helper("newuidmap", child, u->uid, u->nuid) ||
		       map_helper("newgidmap", child, u->gid, u->ngid) ? -1 : 0;
	if (geteuid() != 0 && proc_write(child, "setgroups", "deny")) {
		logmsg("sandbox: denying setgroups in the user namespace: %m");
		return -1;
	}
	map_text(text, sizeof(text), u->uid, u->nuid);
	if (proc_write(child, "uid_map", text)) {
		logmsg("sandbox: writing the uid map: %m");
		return -1;
	}
	map_text(text, sizeof(text), u->gid, u->ngid);
	if (proc_write(child, "gid_map", text)) {
		logmsg("sandbox: writing the gid map: %m");
		return -1;
	}
	return 0;
}

int sandbox_enter(const char *dir, int *proc_fd, pid_t *host_pid,
		  void (*cleanup)(void), const struct userns *u, int *stats)
{
	sigset_t mask, old;
	int alive[2], go[2] = { -1, -1 }, sv[2] = { -1, -1 };
	pid_t child;

	/* The forwarded signals wait for sigwait() in the supervisor. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGUSR1);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, &old);
	if (pipe2(alive, O_CLOEXEC)) {
		logmsg("sandbox: pipe: %m");
		return -1;
	}
	if (*stats >= 0 &&
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
		logmsg("sandbox: socketpair: %m");
		return -1;
	}
	if (sv[1] >= 0)
		setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF,
			   &(int){ 4 * SANDBOX_STATS_MAX }, sizeof(int));
	if (u) {
		/* The user namespace owns the PID namespace made with it. */
		if (pipe2(go, O_CLOEXEC)) {
			logmsg("sandbox: pipe: %m");
			return -1;
		}
		child = syscall(SYS_clone, SIGCHLD | CLONE_NEWUSER | CLONE_NEWPID,
				NULL, NULL, NULL, NULL);
		if (child < 0) {
			logmsg("sandbox: new user and PID namespaces: %m (are unprivileged user namespaces allowed here?)");
			return -1;
		}
	} else {
		if (unshare(CLONE_NEWPID)) {
			logmsg("sandbox: a new PID namespace: %m (run as root, or use --sandbox userns or none)");
			return -1;
		}
		child = fork();
		if (child < 0) {
			logmsg("sandbox: fork: %m");
			return -1;
		}
	}
	if (child > 0) {
		close(alive[0]);	/* the write end closes when we die */
		if (u) {
			/* Closing go without a byte tells the child to give up. */
			close(go[0]);
			if (!write_maps(child, u) && write(go[1], "m", 1) == 1) {
				close(go[1]);
			} else {
				close(go[1]);
				waitpid(child, NULL, 0);
				return -1;
			}
		}
		if (sv[1] >= 0)
			close(sv[1]);
		supervise(child, &mask, cleanup, sv[0], *stats);
	}
	/* The server sends its stats; the file stays the supervisor's. */
	if (sv[0] >= 0) {
		close(sv[0]);
		close(*stats);
		*stats = sv[1];
	}
	if (u) {
		char c;

		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(1);	/* the supervisor said why */
		close(go[0]);
		/* Root of the new namespace: the maps must have an inside 0. */
		if (setresgid(0, 0, 0) || setresuid(0, 0, 0)) {
			logmsg("sandbox: becoming root of the user namespace: %m (map inside id 0)");
			return -1;
		}
	}

	/* The server: PID 1 of its namespace. */
	sigdelset(&mask, SIGCHLD);
	sigprocmask(SIG_SETMASK, &old, NULL);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	close(alive[1]);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL))
		return -1;
	/* The supervisor may have died before the line above: then go too. */
	{
		struct pollfd pfd = { .fd = alive[0], .events = POLLIN };

		if (poll(&pfd, 1, 0) != 0) {
			logmsg("sandbox: the supervisor is gone");
			return -1;
		}
		close(alive[0]);
	}
	*host_pid = sandbox_outer_pid();
	if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)) {
		logmsg("sandbox: new namespaces: %m");
		return -1;
	}
	if (sandbox_private_mounts())
		return -1;
	/*
	 * Only the processes (subset=pid: no sysctls, no sysrq-trigger, no
	 * kcore), read-only: the descriptor of /proc/self/fd kept below leads
	 * up to this mount's root, and a root server could write a sysctl
	 * such as core_pattern there. Reopening a file through one of its
	 * magic links still opens the file on its own mount.
	 */
	if (mount("proc", "/proc", "proc",
		  MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "subset=pid")) {
		logmsg("sandbox: mounting a proc of its own (subset=pid needs Linux 5.8): %m");
		return -1;
	}
	*proc_fd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*proc_fd < 0) {
		logmsg("sandbox: /proc/self/fd: %m");
		return -1;
	}
	return sandbox_pivot_into(dir);
}

int sandbox_drop_caps(uint64_t keep)
{
	return sandbox_keep_caps(keep);
}

/*
 * The system calls the server makes once it serves, found by tracing every
 * scenario of tests/tools/vufs_test.py (interrupt-driven, busy-polling and
 * several workers per queue, and the guest suite) and checked against the
 * libc calls in fuse.c, virtq.c, iov.c and vufsd.c, plus the few glibc may take
 * instead of a traced one (the sleep and clock calls behind the vDSO,
 * rt_sigreturn for the SIGBUS guard). clone is allowed for threads only
 * (sandbox_seccomp()). No exec, no new processes, sockets or mounts, no
 * namespaces, no ioctl.
 */
static const int allowed_syscalls[] = {
	/* requests and the device; the stats to the supervisor */
	SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(sendto), SCMP_SYS(pread64), SCMP_SYS(pwrite64),
	SCMP_SYS(readv), SCMP_SYS(writev), SCMP_SYS(preadv), SCMP_SYS(pwritev),
	SCMP_SYS(preadv2), SCMP_SYS(pwritev2), SCMP_SYS(lseek),
	SCMP_SYS(recvmsg), SCMP_SYS(sendmsg), SCMP_SYS(recvfrom),
	SCMP_SYS(accept4), SCMP_SYS(setsockopt), SCMP_SYS(poll), SCMP_SYS(ppoll),
	SCMP_SYS(eventfd2), SCMP_SYS(close), SCMP_SYS(fcntl),
	/* files in the share */
	SCMP_SYS(openat), SCMP_SYS(newfstatat), SCMP_SYS(fstat), SCMP_SYS(statx),
	SCMP_SYS(getdents64), SCMP_SYS(readlinkat), SCMP_SYS(mkdirat),
	SCMP_SYS(mknodat), SCMP_SYS(symlinkat), SCMP_SYS(linkat),
	SCMP_SYS(unlinkat), SCMP_SYS(renameat), SCMP_SYS(renameat2),
	SCMP_SYS(fchmod), SCMP_SYS(fchmodat), SCMP_SYS(fchownat),
	SCMP_SYS(utimensat),
	SCMP_SYS(ftruncate), SCMP_SYS(fallocate), SCMP_SYS(fsync),
	SCMP_SYS(fdatasync), SCMP_SYS(syncfs), SCMP_SYS(fstatfs),
	SCMP_SYS(faccessat), SCMP_SYS(faccessat2), SCMP_SYS(fgetxattr),
	SCMP_SYS(fsetxattr), SCMP_SYS(flistxattr), SCMP_SYS(fremovexattr),
	/* memory, threads, time, signals */
	SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mprotect), SCMP_SYS(mremap),
	SCMP_SYS(madvise), SCMP_SYS(brk), SCMP_SYS(futex),
	SCMP_SYS(set_robust_list), SCMP_SYS(rseq),
	SCMP_SYS(exit), SCMP_SYS(exit_group),
	SCMP_SYS(sched_yield), SCMP_SYS(nanosleep), SCMP_SYS(clock_nanosleep),
	SCMP_SYS(clock_gettime), SCMP_SYS(gettimeofday), SCMP_SYS(getpid),
	SCMP_SYS(gettid), SCMP_SYS(geteuid), SCMP_SYS(getrusage),
	SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigaction), SCMP_SYS(rt_sigreturn),
	SCMP_SYS(tgkill), SCMP_SYS(restart_syscall),
	/* glibc's malloc sizing its arenas once many threads allocate */
	SCMP_SYS(sched_getaffinity),
	/* a worker takes the guest caller's ids and gives them back */
	SCMP_SYS(setresuid), SCMP_SYS(setresgid), SCMP_SYS(setgroups),
};

/* Added with --inode-file-handles prefer only. */
static const int handle_syscalls[] = {
	SCMP_SYS(name_to_handle_at), SCMP_SYS(open_by_handle_at),
};

static int allow_list(scmp_filter_ctx ctx, const int *nr, unsigned int n)
{
	unsigned int i;
	int ret;

	for (i = 0; i < n; i++) {
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr[i], 0);
		if (ret) {
			logmsg("sandbox: seccomp rule for syscall %d: %s",
			       nr[i], strerror(-ret));
			return ret;
		}
	}
	return 0;
}

int sandbox_seccomp(bool log_only, bool handles)
{
	scmp_filter_ctx ctx;
	int ret;

	ctx = seccomp_init(log_only ? SCMP_ACT_LOG : SCMP_ACT_KILL_PROCESS);
	if (!ctx) {
		logmsg("sandbox: seccomp_init failed");
		return -1;
	}
	ret = allow_list(ctx, allowed_syscalls,
			 sizeof(allowed_syscalls) / sizeof(allowed_syscalls[0]));
	if (!ret && handles)
		ret = allow_list(ctx, handle_syscalls,
				 sizeof(handle_syscalls) / sizeof(handle_syscalls[0]));
	if (ret)
		goto out;
	/*
	 * New threads, never new processes (a child that crashes could run
	 * a core_pattern helper, or escape the filter's purpose otherwise).
	 * clone3 passes its flags in memory, out of the filter's reach: it
	 * says ENOSYS and glibc falls back to clone.
	 */
	ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
			       SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD,
				       CLONE_THREAD));
	if (!ret)
		ret = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS),
				       SCMP_SYS(clone3), 0);
	if (ret) {
		logmsg("sandbox: seccomp rules for clone: %s", strerror(-ret));
		goto out;
	}
	ret = seccomp_load(ctx);
	if (ret)
		logmsg("sandbox: loading the seccomp filter: %s", strerror(-ret));
out:
	seccomp_release(ctx);
	return ret ? -1 : 0;
}

/*
 * The guest caller's credentials, per request. A root daemon makes the
 * calls that create or remove names with the caller's uid and gid as its
 * effective ids (in that worker thread only: raw setresuid/setresgid, not
 * glibc's, which would change every thread), so the host kernel itself
 * decides as it would for that user: the owner and group of a new file
 * (a setgid directory's group included), the set-id bits it may keep,
 * write and search permission on the directory, the sticky bit. A
 * non-zero effective uid also empties the effective capability set, which
 * comes back from the permitted set when the thread returns to root.
 * FUSE sends one uid and one gid; for the requests that make a name it
 * also sends the parent directory's group when the caller is in it only
 * as a supplementary group (FUSE_CREATE_SUPP_GROUP), and the worker takes
 * that group too (raw setgroups, again this thread only). Other
 * supplementary groups are not known, so the daemon drops its own
 * (creds_init()): a caller is never in root's groups by accident.
 */
static bool creds_on, groups_on;

/* Whether cap is in this thread's effective set. */
static bool have_cap(int cap)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[2] = { { 0 } };

	if (syscall(SYS_capget, &hdr, data))
		return false;
	return data[cap / 32].effective & (1U << (cap % 32));
}

int creds_init(void)
{
	/* Switching needs both; a daemon without them serves as itself. */
	creds_on = have_cap(CAP_SETUID) && have_cap(CAP_SETGID) &&
		   geteuid() == 0;
	groups_on = creds_on && !setgroups(0, NULL);
	if (creds_on && !groups_on)
		logmsg("warning: cannot drop the supplementary groups (%m; a user namespace whose maps an unprivileged user wrote denies it): guest callers keep the daemon's groups and get no supplementary ones");
	return 0;
}

bool creds_groups(void)
{
	return groups_on;
}

/* A worker that cannot be root again must not serve anyone: end it all. */
static void creds_stuck(void)
{
	logmsg("cannot return to root's credentials: %m");
	_exit(EXIT_FAILURE);
}

bool creds_switching(void)
{
	return creds_on;
}

int creds_enter(const struct creds *c)
{
	unsigned int ngroups = groups_on ? c->ngroups : 0;
	int err;

	if (!creds_on || (!c->uid && !c->gid))
		return 0;
	/* EINVAL here and below: an id the user namespace does not map. */
	if (ngroups && syscall(SYS_setgroups, ngroups, c->groups))
		return errno == EINVAL ? -EPERM : -errno;
	if (syscall(SYS_setresgid, -1, c->gid, -1))
		goto undo_groups;
	if (syscall(SYS_setresuid, -1, c->uid, -1))
		goto undo_gid;
	return 0;

undo_gid:
	err = errno;
	if (syscall(SYS_setresgid, -1, 0, -1))
		creds_stuck();
	errno = err;
undo_groups:
	err = errno;
	if (ngroups && syscall(SYS_setgroups, 0, NULL))
		creds_stuck();
	return err == EINVAL ? -EPERM : -err;
}

void creds_leave(const struct creds *c)
{
	if (!creds_on || (!c->uid && !c->gid))
		return;
	/* Root again first: setting the gid and groups back needs CAP_SETGID. */
	if (syscall(SYS_setresuid, -1, 0, -1) ||
	    syscall(SYS_setresgid, -1, 0, -1) ||
	    (groups_on && c->ngroups && syscall(SYS_setgroups, 0, NULL)))
		creds_stuck();
}
