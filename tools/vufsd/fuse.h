/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vufsd's FUSE file server (fuse.c): serves the FUSE requests in the
 * chains a worker hands it, on the shared directory. It sees requests and
 * reply buffers only; the inode and file tables are shared by all workers
 * and have their own locks.
 */
#ifndef VUFSD_FUSE_H
#define VUFSD_FUSE_H

#include <stdbool.h>
#include <stdint.h>

#include "chain.h"

/* Serve dir; proc_fd is a descriptor of /proc/self/fd. */
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
/* A worker's scratch space (a struct fuse_ctx), or NULL. */
void *fuse_worker_start(void);
void fuse_worker_end(void *ctx);
/* Serves the FUSE request in ch with a worker's ctx; says what it did. */
void fuse_serve(void *ctx, const struct chain *ch, struct chain_result *res);
/* Forgets every inode and closes every file: the guest has gone. */
void fuse_reset(void);
void fuse_counts(uint64_t *inodes, uint64_t *handles);
/* The inode and file table mutex: acquisitions, contended ones, their wait. */
void fuse_lock_stats(uint64_t *acquired, uint64_t *contended, uint64_t *wait_ns);
/* Calls fn for every opcode served so far, with its count. */
void fuse_op_counts(void (*fn)(const char *name, uint64_t n, void *arg),
		    void *arg);

#endif
