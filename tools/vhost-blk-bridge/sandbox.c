// SPDX-License-Identifier: GPL-2.0
/*
 * The bridge's sandbox (--sandbox namespace, the default).
 *
 * The bridge parses a VMM's messages in C as root. Once the backend and the
 * socket are open, all it still needs is /dev/vhost-blk (opened again at
 * every rebuild), its own fdinfo (the kernel's counters) and the
 * descriptors it holds, so that is all the server keeps:
 *
 * - A supervisor stays outside, in the host's namespaces. It holds the
 *   socket's pid-file lock, forwards SIGTERM, SIGINT, SIGHUP and SIGUSR1
 *   to the server, writes the stats file (the server sends each version
 *   over a socket pair: so the server holds no descriptor of a host
 *   directory), removes the socket and the pid file when the server exits,
 *   and exits with its status.
 * - The server is the first process of new PID, mount, network, IPC and
 *   UTS namespaces. Its root is a small read-only tmpfs holding only
 *   /dev/vhost-blk (a node of the same device number, root's, mode 0600)
 *   and a read-only proc of its own PID namespace (subset=pid).
 * - It runs as an unprivileged user (nobody, or --sandbox-user), with no
 *   capability and no_new_privs: the node is that user's, and neither a
 *   directory descriptor a VMM passes nor a /proc/self/fd link reopened
 *   reaches anything that user could not reach anyway.
 * - A seccomp filter lets through only the system calls serving makes,
 *   and ioctl only with the vhost and vhost-blk commands the bridge sends.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/vhost.h>
#include <seccomp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include "bridge.h"
#include "vhost_blk_uapi.h"
#include "../include/sandbox_common.h"

/* The supervisor writes what the server sent as the server would. */
static void write_stats_file(void *arg, const char *buf, size_t len)
{
	stats_replace(arg, buf, len);
}

/* The supervisor's life: see above. Never returns. */
static void supervise(struct bridge *b, pid_t child, int sock,
		      const sigset_t *mask)
{
	int status = sandbox_supervise(child, mask, sock, write_stats_file, b);

	vu_unlisten(b->socket_path, b->listen_fd, b->lock_fd);
	sandbox_exit_as(status);
}

/*
 * The server's root: a tmpfs with the device node (the server's user's)
 * and a proc, read-only.
 */
static int build_root(dev_t vhost, uid_t uid, gid_t gid)
{
	const char *top = "/tmp";

	if (mount("vhost-blk-bridge", top, "tmpfs", MS_NOSUID | MS_NOEXEC,
		  "size=64k,nr_inodes=16,mode=0755")) {
		logmsg("sandbox: a tmpfs for the new root: %m");
		return -1;
	}
	if (mkdir("/tmp/dev", 0755) || mkdir("/tmp/proc", 0555) ||
	    mknod("/tmp/dev/vhost-blk", S_IFCHR | 0600, vhost) ||
	    chown("/tmp/dev/vhost-blk", uid, gid)) {
		logmsg("sandbox: filling the new root: %m");
		return -1;
	}
	/*
	 * Processes only, read-only: the fdinfo of /dev/vhost-blk has the
	 * kernel's counters; no sysctls, no sysrq-trigger, no kcore.
	 */
	if (mount("proc", "/tmp/proc", "proc",
		  MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "subset=pid")) {
		logmsg("sandbox: mounting a proc of its own (subset=pid needs Linux 5.8): %m");
		return -1;
	}
	if (sandbox_pivot_into(top))
		return -1;
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY |
		  MS_NOSUID | MS_NOEXEC, NULL)) {
		logmsg("sandbox: making the new root read-only: %m");
		return -1;
	}
	return 0;
}

int sandbox_user(struct bridge *b)
{
	const char *name = b->server_user ? b->server_user : "nobody";
	struct passwd *pw = getpwnam(name);

	if (!pw) {
		logmsg("--sandbox-user %s: no such user", name);
		return -1;
	}
	if (!pw->pw_uid) {
		logmsg("--sandbox-user %s: that is root", name);
		return -1;
	}
	b->server_uid = pw->pw_uid;
	b->server_gid = pw->pw_gid;
	return 0;
}

int sandbox_enter(struct bridge *b)
{
	int sv[2];
	sigset_t mask, old;
	struct stat st;
	pid_t child;
	int cap;

	if (stat(VHOST_BLK_DEV, &st) || !S_ISCHR(st.st_mode)) {
		logmsg("sandbox: " VHOST_BLK_DEV " is not a character device");
		return -1;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
		logmsg("sandbox: socketpair: %m");
		return -1;
	}
	/* Large enough for a whole stats file in one message. */
	setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &(int){ 4 * SANDBOX_STATS_MAX },
		   sizeof(int));
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGUSR1);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, &old);
	if (unshare(CLONE_NEWPID)) {
		logmsg("sandbox: a new PID namespace: %m (%s, or use --sandbox none)",
		       errno == EINVAL ? "this kernel has none: CONFIG_PID_NS" :
		       "run as root");
		return -1;
	}
	child = fork();
	if (child < 0) {
		logmsg("sandbox: fork: %m");
		return -1;
	}
	if (child > 0) {
		close(sv[1]);
		close(b->backend_fd);
		supervise(b, child, sv[0], &mask);
	}

	/* The server: PID 1 of its namespace; the stop signals stay blocked. */
	b->sandboxed = true;
	close(sv[0]);
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL))
		return -1;
	/* The supervisor may have died before the line above: then go too. */
	if (poll(&(struct pollfd){ .fd = sv[1], .events = POLLIN }, 1, 0)) {
		logmsg("sandbox: the supervisor is gone");
		return -1;
	}
	b->host_pid = sandbox_outer_pid();
	b->stats_sock = sv[1];
	close(b->lock_fd);	/* the supervisor's */
	b->lock_fd = -1;
	/* A directory descriptor would lead anywhere through "..". */
	if (b->stats_path) {
		close(b->stats.dirfd);
		b->stats.dirfd = -1;
	}
	if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)) {
		logmsg("sandbox: new mount, network, IPC and UTS namespaces: %m%s",
		       errno == EINVAL ? " (CONFIG_NET_NS, CONFIG_IPC_NS, CONFIG_UTS_NS)" : "");
		return -1;
	}
	if (sandbox_private_mounts())
		return -1;
	if (build_root(st.st_rdev, b->server_uid, b->server_gid))
		return -1;
	/*
	 * Root without capabilities would still own most host files: any
	 * directory descriptor a VMM passes, or a /proc/self/fd link
	 * reopened, would reach them. So the server becomes an unprivileged
	 * user; becoming it empties the capability sets.
	 */
	/* The bounding set goes whole first: afterwards nothing could drop it. */
	for (cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) && errno != EINVAL) {
			logmsg("sandbox: dropping capability %d from the bounding set: %m",
			       cap);
			return -1;
		}
	if (sandbox_keep_caps(1ULL << CAP_SETUID | 1ULL << CAP_SETGID) ||
	    setgroups(0, NULL) ||
	    setresgid(b->server_gid, b->server_gid, b->server_gid) ||
	    setresuid(b->server_uid, b->server_uid, b->server_uid)) {
		logmsg("sandbox: becoming uid %u gid %u: %m",
		       (unsigned int)b->server_uid, (unsigned int)b->server_gid);
		return -1;
	}
	return 0;
}

/* The ioctls the server sends, all on /dev/vhost-blk. */
static const unsigned long allowed_ioctls[] = {
	VHOST_SET_OWNER, VHOST_SET_FEATURES, VHOST_SET_MEM_TABLE,
	VHOST_NEW_WORKER, VHOST_ATTACH_VRING_WORKER, VHOST_SET_VRING_NUM,
	VHOST_SET_VRING_BASE, VHOST_GET_VRING_BASE, VHOST_SET_VRING_ADDR,
	VHOST_SET_VRING_KICK, VHOST_SET_VRING_CALL, VHOST_SET_VRING_ERR,
	VHOST_SET_VRING_BUSYLOOP_TIMEOUT, VHOST_BLK_SET_BACKEND,
};

/*
 * What serving calls: the socket, the messages and their descriptors, the
 * guest memory's mappings, /dev/vhost-blk and its fdinfo, the stats sent
 * to the supervisor, signals and time. One thread, so no clone at all; no
 * exec, no new sockets, no mounts or namespaces.
 */
static const int allowed_syscalls[] = {
	SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev),
	SCMP_SYS(close), SCMP_SYS(lseek), SCMP_SYS(fcntl),
	SCMP_SYS(poll), SCMP_SYS(ppoll),
	SCMP_SYS(accept4), SCMP_SYS(recvmsg), SCMP_SYS(sendmsg),
	SCMP_SYS(sendto), SCMP_SYS(recvfrom), SCMP_SYS(shutdown),
	SCMP_SYS(setsockopt),
	SCMP_SYS(openat), SCMP_SYS(fstat), SCMP_SYS(newfstatat),
	SCMP_SYS(statx),
	SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mprotect),
	SCMP_SYS(mremap), SCMP_SYS(madvise), SCMP_SYS(brk),
	SCMP_SYS(futex), SCMP_SYS(getrusage), SCMP_SYS(getpid),
	SCMP_SYS(gettid), SCMP_SYS(clock_gettime), SCMP_SYS(gettimeofday),
	SCMP_SYS(clock_nanosleep), SCMP_SYS(nanosleep),
	SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn),
	SCMP_SYS(restart_syscall), SCMP_SYS(exit), SCMP_SYS(exit_group),
};

int sandbox_seccomp(bool log_only)
{
	scmp_filter_ctx ctx;
	unsigned int i;
	int ret = 0;

	if (prctl(PR_GET_SECCOMP) < 0 && errno == EINVAL) {
		logmsg("sandbox: this kernel has no seccomp (CONFIG_SECCOMP_FILTER); use --seccomp none");
		return -1;
	}
	ctx = seccomp_init(log_only ? SCMP_ACT_LOG : SCMP_ACT_KILL_PROCESS);
	if (!ctx) {
		logmsg("sandbox: seccomp_init failed");
		return -1;
	}
	for (i = 0; !ret && i < ARRAY_SIZE(allowed_syscalls); i++)
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed_syscalls[i], 0);
	for (i = 0; !ret && i < ARRAY_SIZE(allowed_ioctls); i++)
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				       SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL,
					       allowed_ioctls[i]));
	if (!ret)
		ret = seccomp_load(ctx);
	if (ret)
		logmsg("sandbox: the seccomp filter: %s", strerror(-ret));
	seccomp_release(ctx);
	return ret ? -1 : 0;
}
