/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vufsd's sandbox and the guest callers' credentials (sandbox.c), which
 * both the daemon (vufsd.c) and the file operations (fuse.c) rely on.
 */
#ifndef VUFSD_SANDBOX_H
#define VUFSD_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * --sandbox userns: the server also gets a user namespace, in which it is
 * root; the maps say which host ids the namespace's ids are (lines of
 * /proc/PID/uid_map: inside, outside, count). Guest ids are the
 * namespace's, so the maps translate them; an id outside them cannot own
 * anything the server makes.
 */
#define USERNS_MAX_MAPS 8
struct idmap {
	unsigned int inside, outside, count;
};
struct userns {
	struct idmap uid[USERNS_MAX_MAPS], gid[USERNS_MAX_MAPS];
	unsigned int nuid, ngid;
};

/*
 * Fork: the caller stays outside as the supervisor (forwards the stop
 * signals, writes the stats file, calls cleanup when the server exits,
 * exits with its status; never returns), the child enters new namespaces
 * with dir as its root and returns 0 with /proc/self/fd open in *proc_fd
 * and its host PID in *host_pid. *stats is the stats file (or -1): the
 * supervisor keeps it, and in the server it becomes a socket to send each
 * version of the file to, as one message of at most SANDBOX_STATS_MAX
 * bytes (sandbox_common.h). -1 on failure, in whichever process it
 * happened.
 */
int sandbox_enter(const char *dir, int *proc_fd, pid_t *host_pid,
		  void (*cleanup)(void), const struct userns *u, int *stats);
/* Keep only the capabilities in keep (CAP_* bits); set no_new_privs. */
int sandbox_drop_caps(uint64_t keep);
/*
 * Allow only the system calls serving needs: any other kills the process,
 * or with log_only is allowed and logged (the kernel's audit log). The
 * file handle calls only with handles (--inode-file-handles prefer).
 */
int sandbox_seccomp(bool log_only, bool handles);

/* A guest caller's credentials: its ids and the supplementary groups known. */
#define CREDS_MAX_GROUPS 8
struct creds {
	uid_t uid;
	gid_t gid;
	unsigned int ngroups;
	gid_t groups[CREDS_MAX_GROUPS];
};

/*
 * Requests that create or remove names run with the guest caller's uid,
 * gid and known supplementary groups when the daemon is root: creds_init()
 * once (drops the daemon's own supplementary groups), then creds_enter()
 * and creds_leave() around the call, in the worker thread. Both do nothing
 * for uid 0 with gid 0, or when the daemon cannot switch
 * (creds_switching() false).
 */
int creds_init(void);
bool creds_switching(void);
/* Whether callers' supplementary groups can be taken (setgroups allowed). */
bool creds_groups(void);
int creds_enter(const struct creds *c);
void creds_leave(const struct creds *c);

#endif
