/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vufsd: a multi-queue vhost-user-fs (virtio-fs) device backend.
 *
 * Threads: the main thread owns the vhost-user connection and every piece
 * of device state; each vring that runs has workers of its own (one by
 * default) that take descriptor chains under the ring's lock, serve the
 * FUSE request in each without it, and push the chain back. The main
 * thread only changes a vring's state after stopping (and joining) its
 * workers. The FUSE state (inodes and open files) is shared by all
 * workers and has its own locks (fuse.c).
 */
#ifndef VUFSD_H
#define VUFSD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "../include/vhost_user_wire.h"

#define PROG			"vufsd"

#define MAX_REQUEST_QUEUES	64
#define MAX_VRINGS		(1 + MAX_REQUEST_QUEUES)
#define MAX_REGIONS		VU_MAX_REGIONS
/* Workers per vring at most (--threads). */
#define MAX_WORKERS		16
/* Name prefixes that --xattr-allow may add. */
#define MAX_XATTR_ALLOW		16
/* A chain longer than this (after indirect tables) is refused. */
#define MAX_CHAIN_IOV		1024

void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern bool verbose;

/* ---- guest memory (virtq.c) ---- */

struct memory {
	unsigned int nregions;
	struct vu_region_map regions[MAX_REGIONS];
};

void *gpa_to_va(const struct memory *m, uint64_t gpa, uint64_t len);
void *uaddr_to_va(const struct memory *m, uint64_t uaddr, uint64_t len);
void memory_unmap(struct memory *m);
/*
 * Survive a VMM that shrinks guest memory: SIGBUS on a mapped region is
 * absorbed and counted on memory_fault_fd() (an eventfd) for the main
 * thread, which drops the connection. memory_publish() makes a new table
 * the guarded one; memory_unmap() unguards it.
 */
int memory_guard_init(void);
int memory_fault_fd(void);
void memory_publish(const struct memory *m);

/* ---- statistics ---- */

/* Written by the vring's workers, read (relaxed) by the stats writer. */
struct vq_stats {
	uint64_t requests;	/* chains taken from the ring */
	uint64_t bytes_in;	/* device-readable bytes in them */
	uint64_t bytes_out;	/* bytes written to the guest */
	uint64_t errors;	/* replies carrying an error */
	uint64_t malformed;	/* chains or requests refused as malformed */
	uint64_t kicks;		/* wake-ups by the guest's kick */
	uint64_t notifies;	/* call eventfd signals */
};

static inline void stat_add(uint64_t *c, uint64_t v)
{
	__atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

/* ---- vrings (virtq.c) ---- */

struct vring_desc;
struct vring_avail;
struct vring_used;

struct vq {
	unsigned int index;
	unsigned int num;
	/* The VMM's addresses, kept to re-translate after SET_MEM_TABLE. */
	uint64_t desc_uaddr, avail_uaddr, used_uaddr;
	bool addr_set;
	struct vring_desc *desc;
	struct vring_avail *avail;
	struct vring_used *used;
	uint16_t last_avail;	/* next avail entry to take */
	uint16_t used_idx;	/* our copy of used->idx */
	bool event_idx;
	bool enable_seen;	/* a SET_VRING_ENABLE came */
	bool enabled;
	int kick_fd;
	int call_fd;		/* under call_lock: QEMU swaps it while running */
	int err_fd;
	pthread_mutex_t call_lock;

	/* The workers, when running; they take chains under lock. */
	pthread_mutex_t lock;
	uint16_t signalled;	/* used index the guest was last told of */
	bool running;
	bool broken;		/* the ring itself is corrupt: stop serving */
	int stop_fd;		/* eventfd: the main thread wants it to stop */
	int stop;		/* atomic */
	unsigned int nthreads;	/* workers to start */
	unsigned int started;
	pthread_t threads[MAX_WORKERS];
	unsigned int busy_poll_us;
	const struct memory *mem;
	struct vq_stats stats;
};

/*
 * One request as the ring thread sees it: the device-readable buffers
 * (out) and the device-writable buffers (in), in chain order.
 */
struct chain {
	struct iovec *out;
	unsigned int nout;
	size_t out_len;
	struct iovec *in;
	unsigned int nin;
	size_t in_len;
};

int vring_start(struct vq *r);
void vring_stop(struct vq *r);
bool vring_ready(const struct vq *r, bool have_mem);
void vring_reset(struct vq *r);
int vring_translate(struct vq *r, const struct memory *m);

/* Copies between a flat buffer and an iovec array, starting at skip. */
size_t iov_to_buf(const struct iovec *iov, unsigned int n, size_t skip,
		  void *buf, size_t len);
size_t buf_to_iov(const struct iovec *iov, unsigned int n, size_t skip,
		  const void *buf, size_t len);
/* The part of an iovec array past skip bytes, at most len bytes long. */
unsigned int iov_slice(const struct iovec *iov, unsigned int n, size_t skip,
		       size_t len, struct iovec *dst, unsigned int max);

/* ---- the sandbox (sandbox.c) ---- */

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
 * signals, calls cleanup when the server exits, exits with its status;
 * never returns), the child enters new namespaces with dir as its root
 * and returns 0 with /proc/self/fd open in *proc_fd and its host PID in
 * *host_pid. -1 on failure, in whichever process it happened.
 */
int sandbox_enter(const char *dir, int *proc_fd, pid_t *host_pid,
		  void (*cleanup)(void), const struct userns *u);
/* Keep only the capabilities in keep (CAP_* bits); set no_new_privs. */
int sandbox_drop_caps(uint64_t keep);
/*
 * Allow only the system calls serving needs: any other kills the process,
 * or with log_only is allowed and logged (the kernel's audit log).
 */
int sandbox_seccomp(bool log_only);

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

/* ---- FUSE (fuse.c) ---- */

/* Per-thread scratch space of a request. */
struct fuse_ctx {
	uint8_t *inbuf;		/* copy of the request (without write data) */
	size_t inbuf_size;
	uint8_t *outbuf;	/* the reply being built */
	size_t outbuf_size;
	struct iovec *scratch;	/* for iov_slice */
	struct vq_stats *stats;
};

/* Serve dir; proc_fd is /proc/self/fd, or -1 to open it here. */
int fuse_setup(const char *dir, int proc_fd);
/*
 * xattrs off (every xattr request ENOSYS) or on for user.* and the given
 * name prefixes; the array must outlive the daemon.
 */
void fuse_set_xattr(bool on, const char *const *allow, unsigned int nallow);
/*
 * POSIX ACLs (needs xattrs on): the guest gets system.posix_acl_access and
 * system.posix_acl_default, checks them itself (FUSE_POSIX_ACL) and leaves
 * the umask to the daemon (FUSE_DONT_MASK), which lets a parent's default
 * ACL decide instead, as a local file system does.
 */
void fuse_set_acl(bool on);
/* Let MKNOD make block and character device nodes (off by default). */
void fuse_set_devices(bool on);
/*
 * What the guest may cache: names and attributes for 1 s, file data until
 * a change shows (auto, the default); for a day, with data and directory
 * listings kept across opens (always); nothing, every read and write
 * reaching the daemon (never). writeback: the guest caches writes too.
 */
enum fuse_cache { CACHE_AUTO, CACHE_ALWAYS, CACHE_NEVER };
void fuse_set_cache(enum fuse_cache mode, bool writeback);
/*
 * Keep the inodes the guest holds as file handles, opened only while in
 * use, instead of one descriptor each (falls back, with a message, where
 * handles cannot be opened).
 */
void fuse_set_handles(bool on);
int fuse_ctx_init(struct fuse_ctx *c);
void fuse_ctx_free(struct fuse_ctx *c);
/* Serves one chain; returns the number of bytes written to the guest. */
size_t fuse_serve(struct fuse_ctx *c, const struct chain *ch);
/* Forgets every inode and closes every file: the guest has gone. */
void fuse_reset(void);
void fuse_counts(uint64_t *inodes, uint64_t *handles);
/* Calls fn for every opcode served so far, with its count. */
void fuse_op_counts(void (*fn)(const char *name, uint64_t n, void *arg),
		    void *arg);

#endif
