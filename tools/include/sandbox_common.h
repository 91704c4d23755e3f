/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the sandboxes of vufsd (tools/vufsd/sandbox.c) and vhost-blk-bridge
 * (tools/vhost-blk-bridge/sandbox.c) share: making a directory the root of
 * the process's mount namespace, cutting its capabilities, and the
 * supervisor's loop outside.
 * Header-only; the includer provides logmsg().
 */
#ifndef SANDBOX_COMMON_H
#define SANDBOX_COMMON_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* This process's PID as the host's /proc shows it (from a new PID namespace). */
static inline pid_t sandbox_outer_pid(void)
{
	char buf[32];
	ssize_t n = readlink("/proc/self", buf, sizeof(buf) - 1);

	if (n <= 0)
		return getpid();
	buf[n] = '\0';
	return (pid_t)atoi(buf);
}

/*
 * In a new mount namespace: nothing mounted here from now on propagates to
 * the host. That takes / being a mount point, which a plain chroot's is
 * not; and pivot_root() needs it too.
 */
static inline int sandbox_private_mounts(void)
{
	if (!mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL))
		return 0;
	if (errno == EINVAL)
		logmsg("sandbox: / is not a mount point (a chroot?), so mounts made here could reach the host's namespace: bind-mount the root on itself before entering it, or use --sandbox none");
	else
		logmsg("sandbox: making / a slave mount: %m");
	return -1;
}

/* Make dir the root of this mount namespace and detach the old one. */
static inline int sandbox_pivot_into(const char *dir)
{
	int oldroot, newroot;

	if (mount(dir, dir, NULL, MS_BIND | MS_REC, NULL)) {
		logmsg("sandbox: bind-mounting %s: %m", dir);
		return -1;
	}
	oldroot = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	newroot = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (oldroot < 0 || newroot < 0) {
		logmsg("sandbox: %s: %m", dir);
		return -1;
	}
	/*
	 * pivot_root(".", ".") stacks the old root on top of the new one;
	 * detaching "." from the old root's side then leaves only dir.
	 */
	if (fchdir(newroot) || syscall(SYS_pivot_root, ".", ".")) {
		logmsg("sandbox: pivot_root into %s: %m", dir);
		return -1;
	}
	if (fchdir(oldroot) || umount2(".", MNT_DETACH) || fchdir(newroot) ||
	    chroot(".") || chdir("/")) {
		logmsg("sandbox: detaching the old root: %m");
		return -1;
	}
	close(oldroot);
	close(newroot);
	return 0;
}

/*
 * Keep only the capabilities in keep (a mask of CAP_* bits): effective,
 * permitted and bounding set, nothing inheritable or ambient, and set
 * no_new_privs.
 */
static inline int sandbox_keep_caps(uint64_t keep)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[2] = { { 0 } };
	int cap;

	for (cap = 0; cap <= 63; cap++) {
		if (keep & (1ULL << cap))
			continue;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) && errno != EINVAL) {
			logmsg("sandbox: dropping capability %d from the bounding set: %m",
			       cap);
			return -1;
		}
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) &&
	    errno != EINVAL)
		return -1;
	data[0].effective = data[0].permitted = (uint32_t)keep;
	data[1].effective = data[1].permitted = (uint32_t)(keep >> 32);
	if (syscall(SYS_capset, &hdr, data)) {
		logmsg("sandbox: capset: %m");
		return -1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		logmsg("sandbox: no_new_privs: %m");
		return -1;
	}
	return 0;
}

/*
 * The stats a sandboxed server sends its supervisor: each version of the
 * file as one message of at most SANDBOX_STATS_MAX bytes on a
 * SOCK_SEQPACKET pair; the supervisor writes the last one it has through
 * a function of the daemon's.
 */
#define SANDBOX_STATS_MAX	(1 << 17)
typedef void (*sandbox_stats_fn)(void *arg, const char *buf, size_t len);

/*
 * Take every message waiting on sock and hand the last to fn; false once
 * the server has closed its end (it never sends an empty message).
 */
static inline bool sandbox_take_stats(int sock, char *buf, sandbox_stats_fn fn,
				      void *arg)
{
	ssize_t n, last = -1;
	bool open_end = true;

	for (;;) {
		n = recv(sock, buf, SANDBOX_STATS_MAX, MSG_DONTWAIT | MSG_TRUNC);
		if (n == 0) {
			open_end = false;
			break;
		}
		if (n < 0)
			break;
		last = n <= SANDBOX_STATS_MAX ? n : -1;
	}
	if (last >= 0)
		fn(arg, buf, last);
	return open_end;
}

/*
 * The supervisor's loop: forward the signals of mask (blocked, SIGCHLD
 * among them) but SIGCHLD to child, hand the stats it sends on sock (or
 * -1) to fn, and return child's wait status once it has exited.
 */
static inline int sandbox_supervise(pid_t child, const sigset_t *mask,
				    int sock, sandbox_stats_fn fn, void *arg)
{
	char *buf = sock >= 0 ? malloc(SANDBOX_STATS_MAX) : NULL;
	int sfd = signalfd(-1, mask, SFD_CLOEXEC), status = 0;
	bool alive = buf != NULL;

	if (sfd < 0) {
		logmsg("supervisor: signalfd: %m: stopping the server");
		kill(child, SIGKILL);
	}
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = sfd, .events = POLLIN },
			{ .fd = alive ? sock : -1, .events = POLLIN },
		};
		struct signalfd_siginfo si;
		pid_t w = waitpid(child, &status, sfd < 0 ? 0 : WNOHANG);

		if (w == child)
			break;
		if (w < 0 && errno != EINTR) {
			logmsg("supervisor: waitpid: %m");
			status = 1 << 8;
			break;
		}
		if (poll(p, 2, -1) < 0)
			continue;
		if (p[0].revents & POLLIN &&
		    read(sfd, &si, sizeof(si)) == sizeof(si) &&
		    si.ssi_signo != SIGCHLD)
			kill(child, si.ssi_signo);
		if (p[1].revents)
			alive = sandbox_take_stats(sock, buf, fn, arg);
	}
	if (buf)
		sandbox_take_stats(sock, buf, fn, arg);	/* the last, at its exit */
	free(buf);
	return status;
}

/* Exit as the server did: its status, or 128 + the signal it died of. */
static inline void __attribute__((noreturn)) sandbox_exit_as(int status)
{
	if (WIFSIGNALED(status)) {
		logmsg("the sandboxed server died of signal %d", WTERMSIG(status));
		exit(128 + WTERMSIG(status));
	}
	exit(WEXITSTATUS(status));
}

#endif
