// SPDX-License-Identifier: GPL-2.0
/*
 * FUSE passthrough of one host directory.
 *
 * Every inode the guest knows is held by an O_PATH file descriptor opened
 * with O_NOFOLLOW, one path component at a time, relative to its parent's
 * descriptor: the daemon never resolves a path and never follows a symlink,
 * so nothing the guest names (.., absolute or relative symlinks, a symlink
 * swapped in by a race) can lead outside the shared directory. Names with
 * a '/' and the names "." and ".." are refused. Operations that need a real
 * open file (chmod, truncate without a handle, open, xattrs) reopen the
 * inode's own descriptor through /proc/self/fd, which names that inode and
 * nothing else; they are done only on regular files and directories.
 *
 * Inodes and open files live in two tables shared by all ring threads.
 * Each entry is reference counted: the table holds one reference while the
 * guest may still name it, and a request holds one while it uses it, so a
 * FORGET or RELEASE on one queue never closes a descriptor another queue is
 * using.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <linux/fuse.h>

/* FUSE 7.38's later additions, missing from older uapi headers. */
#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP	(1ULL << 36)
#endif
#ifndef FUSE_CREATE_SUPP_GROUP
#define FUSE_CREATE_SUPP_GROUP	(1ULL << 34)
#define FUSE_EXT_GROUPS		32
struct fuse_supp_groups {
	uint32_t nr_groups;
	uint32_t groups[];
};
#endif

#include "fuse.h"
#include "log.h"
#include "sandbox.h"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* What we tell the guest. */
#define MAX_PAGES	256			/* 1 MiB per READ or WRITE */
#define MAX_WRITE	(MAX_PAGES * 4096)
#define INBUF_SIZE	(72 * 1024)		/* largest request but WRITE */
#define OUTBUF_SIZE	(MAX_WRITE + 4096)	/* largest reply */

/* Per-worker scratch space of a request. */
struct fuse_ctx {
	uint8_t *inbuf;		/* copy of the request (without write data) */
	size_t inbuf_size;
	uint8_t *outbuf;	/* the reply being built */
	size_t outbuf_size;
	struct iovec *scratch;	/* for iov_slice */
};

/* ---- inodes ---- */

struct inode {
	uint64_t nodeid;
	int fd;			/* O_PATH | O_NOFOLLOW; with fh, -1 when idle */
	struct file_handle *fh;	/* --inode-file-handles: how to reopen it */
	dev_t dev;
	ino_t ino;
	mode_t type;		/* S_IFMT bits */
	uint64_t nlookup;	/* the guest's references */
	unsigned int refs;	/* the table's and the requests' */
	struct inode *next_id, *next_key;
};

struct handle {
	int fd;
	DIR *dir;		/* OPENDIR handles */
	long dpos;		/* where the next READDIR continues */
	pthread_mutex_t lock;	/* serialises READDIR on one handle */
	uint32_t gen;		/* never 0, so no fh is 0 */
	uint32_t slot;
	uint64_t nodeid;	/* the inode it was opened for */
	bool open;		/* RELEASE not yet seen */
	unsigned int refs;
};

#define HASH_BITS	16
#define NBUCKETS	(1u << HASH_BITS)

static struct {
	pthread_mutex_t lock;	/* the tables and every refcount */
	struct inode *by_id[NBUCKETS];
	struct inode *by_key[NBUCKETS];
	uint64_t next_id;
	uint64_t ninodes;
	struct inode *root;
	int proc_fd;		/* /proc/self/fd */
	int root_rdfd;		/* the shared directory, for syncfs */
	/* Open files: fh = gen << 32 | slot. */
	struct handle **handles;
	uint32_t nslots, cap;
	uint32_t *free_slots;
	uint32_t nfree;
	uint64_t nhandles;
	bool initialised;
} fs = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * How the workers share fs.lock, for the stats file: acquisitions, those
 * that found it held, and the time those waited. Updated under the lock.
 */
static struct {
	uint64_t acquired;
	uint64_t contended;
	uint64_t wait_ns;
} lockstat;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* fs.lock, timed only when another worker holds it (trylock first). */
static void table_lock(void)
{
	uint64_t t;

	if (pthread_mutex_trylock(&fs.lock)) {
		t = mono_ns();
		pthread_mutex_lock(&fs.lock);
		__atomic_store_n(&lockstat.wait_ns, lockstat.wait_ns + mono_ns() - t,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&lockstat.contended, lockstat.contended + 1,
				 __ATOMIC_RELAXED);
	}
	__atomic_store_n(&lockstat.acquired, lockstat.acquired + 1, __ATOMIC_RELAXED);
}

static void table_unlock(void)
{
	pthread_mutex_unlock(&fs.lock);
}

void fuse_lock_stats(uint64_t *acquired, uint64_t *contended, uint64_t *wait_ns)
{
	*acquired = __atomic_load_n(&lockstat.acquired, __ATOMIC_RELAXED);
	*contended = __atomic_load_n(&lockstat.contended, __ATOMIC_RELAXED);
	*wait_ns = __atomic_load_n(&lockstat.wait_ns, __ATOMIC_RELAXED);
}

/* MKNOD may make block and character devices (--allow-devices). */
static bool devices;

/*
 * --inode-file-handles prefer: an inode the guest holds is kept as a file
 * handle, not as a descriptor, and opened (open_by_handle_at, which needs
 * CAP_DAC_READ_SEARCH) only while requests use it. Files on another mount
 * than the shared directory's, or on a file system without handles, keep
 * their descriptor.
 */
static struct {
	bool on;
	int mount_id;		/* the shared directory's */
} fh_mode;

void fuse_set_handles(bool on)
{
	fh_mode.on = on;
}

/* fd's file handle if inodes are kept as handles and it has one, or NULL. */
static struct file_handle *handle_of(int fd)
{
	struct file_handle *fh, *small;
	int mount_id;

	if (!fh_mode.on)
		return NULL;
	fh = malloc(sizeof(*fh) + MAX_HANDLE_SZ);
	if (!fh)
		return NULL;
	fh->handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(fd, "", fh, &mount_id, AT_EMPTY_PATH) ||
	    mount_id != fh_mode.mount_id) {
		free(fh);
		return NULL;
	}
	/* Kept as long as the inode: only the bytes the handle has. */
	small = realloc(fh, sizeof(*fh) + fh->handle_bytes);
	return small ? small : fh;
}

static bool same_handle(const struct file_handle *a,
			const struct file_handle *b)
{
	return a->handle_type == b->handle_type &&
	       a->handle_bytes == b->handle_bytes &&
	       !memcmp(a->f_handle, b->f_handle, a->handle_bytes);
}

/*
 * Whether i is the file with this identity. An inode kept by descriptor
 * pins its inode number; one kept by handle does not, so a number the host
 * has reused for another file differs in the handle (its generation).
 */
static bool inode_is(const struct inode *i, const struct stat *st,
		     const struct file_handle *fh)
{
	if (i->dev != st->st_dev || i->ino != st->st_ino)
		return false;
	if (!i->fh || !fh)
		return !i->fh;
	return same_handle(i->fh, fh);
}

/*
 * The xattr policy. Off (the default), every xattr request is ENOSYS, which
 * the guest remembers. On, the guest may use user.* and the prefixes the
 * operator added; other names (security.*, trusted.*, system.*) do not
 * exist as far as the guest can tell: GETXATTR says ENODATA, LISTXATTR
 * leaves them out, SETXATTR and REMOVEXATTR fail with EPERM. A guest that
 * could set security.capability would plant file capabilities on the host.
 */
static struct {
	bool on;
	bool acl;		/* --posix-acl: the two ACL names too */
	bool ext;		/* the session agreed to FUSE_SETXATTR_EXT */
	const char *const *allow;
	unsigned int nallow;
} xa;

#define ACL_ACCESS	"system.posix_acl_access"
#define ACL_DEFAULT	"system.posix_acl_default"

void fuse_set_acl(bool on)
{
	xa.acl = on;
}

/* What the guest may cache (--cache, --writeback). */
static struct {
	enum fuse_cache mode;
	bool writeback;
} cache;

void fuse_set_cache(enum fuse_cache mode, bool writeback)
{
	cache.mode = mode;
	cache.writeback = writeback;
}

/* How long the guest may trust a name or attributes, in seconds. */
static uint64_t cache_timeout(void)
{
	return cache.mode == CACHE_ALWAYS ? 86400 :
	       cache.mode == CACHE_NEVER ? 0 : 1;
}

/*
 * fuse_open_out.open_flags: always keeps the guest's page cache across
 * opens (and caches directory listings); never sends all I/O to us;
 * auto drops the page cache at open and when the attributes show a change
 * (FUSE_AUTO_INVAL_DATA).
 */
static uint32_t cache_open_flags(bool dir)
{
	if (cache.mode == CACHE_ALWAYS)
		return FOPEN_KEEP_CACHE | (dir ? FOPEN_CACHE_DIR : 0);
	if (cache.mode == CACHE_NEVER && !dir)
		return FOPEN_DIRECT_IO;
	return 0;
}

static unsigned int hash64(uint64_t v)
{
	return (v * 0x9e3779b97f4a7c15ULL) >> (64 - HASH_BITS);
}

static unsigned int key_hash(dev_t dev, ino_t ino)
{
	return hash64(ino ^ ((uint64_t)dev << 40) ^ dev);
}

static void inode_free_locked(struct inode *i)
{
	if (i->fd >= 0)
		close(i->fd);
	free(i->fh);
	free(i);
	fs.ninodes--;
}

static void inode_put(struct inode *i)
{
	if (!i)
		return;
	table_lock();
	if (--i->refs == 0) {
		inode_free_locked(i);
	} else if (i->refs == 1 && i->nlookup && i->fh && i->fd >= 0) {
		/* Only the table holds it now: back to a handle alone. */
		close(i->fd);
		i->fd = -1;
	}
	table_unlock();
}

/* Opens a handle-kept inode for the requests now holding it; 0 or -errno. */
static int inode_open(struct inode *i)
{
	int fd = open_by_handle_at(fs.root_rdfd, i->fh, O_PATH | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	table_lock();
	if (i->fd < 0) {
		i->fd = fd;
		fd = -1;
	}
	table_unlock();
	if (fd >= 0)
		close(fd);	/* another request opened it meanwhile */
	return 0;
}

/*
 * The inode with this node id, held for the request, or NULL (ESTALE):
 * unknown, or kept by a handle that no longer opens (the file is gone).
 */
static struct inode *inode_get(uint64_t nodeid)
{
	struct inode *i;
	bool closed;

	table_lock();
	if (nodeid == FUSE_ROOT_ID)
		i = fs.root;
	else
		for (i = fs.by_id[hash64(nodeid)]; i; i = i->next_id)
			if (i->nodeid == nodeid)
				break;
	if (i)
		i->refs++;
	closed = i && i->fd < 0;
	table_unlock();
	if (closed && inode_open(i)) {
		inode_put(i);
		return NULL;
	}
	return i;
}

static void inode_unhash_locked(struct inode *i)
{
	struct inode **p;

	for (p = &fs.by_id[hash64(i->nodeid)]; *p; p = &(*p)->next_id)
		if (*p == i) {
			*p = i->next_id;
			break;
		}
	for (p = &fs.by_key[key_hash(i->dev, i->ino)]; *p; p = &(*p)->next_key)
		if (*p == i) {
			*p = i->next_key;
			break;
		}
	i->nlookup = 0;
	if (--i->refs == 0)
		inode_free_locked(i);
}

static void forget_one(uint64_t nodeid, uint64_t n)
{
	struct inode *i;

	if (nodeid == FUSE_ROOT_ID)
		return;
	table_lock();
	for (i = fs.by_id[hash64(nodeid)]; i; i = i->next_id)
		if (i->nodeid == nodeid)
			break;
	if (i) {
		if (n >= i->nlookup)
			inode_unhash_locked(i);
		else
			i->nlookup -= n;
	}
	table_unlock();
}

static void fill_attr(struct fuse_attr *a, const struct stat *st)
{
	memset(a, 0, sizeof(*a));
	a->ino = st->st_ino;
	a->size = st->st_size;
	a->blocks = st->st_blocks;
	a->atime = st->st_atim.tv_sec;
	a->mtime = st->st_mtim.tv_sec;
	a->ctime = st->st_ctim.tv_sec;
	a->atimensec = st->st_atim.tv_nsec;
	a->mtimensec = st->st_mtim.tv_nsec;
	a->ctimensec = st->st_ctim.tv_nsec;
	a->mode = st->st_mode;
	a->nlink = st->st_nlink;
	a->uid = st->st_uid;
	a->gid = st->st_gid;
	a->rdev = st->st_rdev;
	a->blksize = st->st_blksize;
}

static int stat_fd(int fd, struct stat *st)
{
	if (fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW))
		return -errno;
	return 0;
}

/*
 * Makes fd (O_PATH) an inode the guest knows, or finds the inode it
 * already knows for the same file, and fills its entry. Takes fd.
 */
static int entry_from_fd(int fd, struct fuse_entry_out *e)
{
	struct file_handle *fh;
	struct inode *i;
	struct stat st;
	unsigned int k;
	int ret;

	ret = stat_fd(fd, &st);
	if (ret) {
		close(fd);
		return ret;
	}
	fh = handle_of(fd);
	k = key_hash(st.st_dev, st.st_ino);
	table_lock();
	for (i = fs.by_key[k]; i; i = i->next_key)
		if (inode_is(i, &st, fh))
			break;
	if (i) {
		i->nlookup++;
		close(fd);
		free(fh);
	} else {
		i = calloc(1, sizeof(*i));
		if (!i) {
			table_unlock();
			close(fd);
			free(fh);
			return -ENOMEM;
		}
		i->nodeid = fs.next_id++;
		/* Kept by handle: the descriptor goes now. */
		i->fh = fh;
		i->fd = fh ? -1 : fd;
		if (fh)
			close(fd);
		i->dev = st.st_dev;
		i->ino = st.st_ino;
		i->type = st.st_mode & S_IFMT;
		i->nlookup = 1;
		i->refs = 1;
		i->next_id = fs.by_id[hash64(i->nodeid)];
		fs.by_id[hash64(i->nodeid)] = i;
		i->next_key = fs.by_key[k];
		fs.by_key[k] = i;
		fs.ninodes++;
	}
	memset(e, 0, sizeof(*e));
	e->nodeid = i->nodeid;
	table_unlock();
	e->entry_valid = e->attr_valid = cache_timeout();
	fill_attr(&e->attr, &st);
	return 0;
}

/*
 * If st is an inode the guest already knows by descriptor, count the
 * lookup and fill its entry. That descriptor pins it, so its number cannot
 * have been reused for another file; an inode kept by handle is matched
 * only with its handle, in entry_from_fd().
 */
static bool entry_known(const struct stat *st, struct fuse_entry_out *e)
{
	unsigned int k = key_hash(st->st_dev, st->st_ino);
	struct inode *i;

	table_lock();
	for (i = fs.by_key[k]; i; i = i->next_key)
		if (inode_is(i, st, NULL))
			break;
	if (!i) {
		table_unlock();
		return false;
	}
	i->nlookup++;
	memset(e, 0, sizeof(*e));
	e->nodeid = i->nodeid;
	table_unlock();
	e->entry_valid = e->attr_valid = cache_timeout();
	fill_attr(&e->attr, st);
	return true;
}

static int lookup_at(int dirfd, const char *name, struct fuse_entry_out *e)
{
	struct stat st;
	int fd;

	/* A name the guest knows already costs no descriptor, even at the limit. */
	if (!fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) && entry_known(&st, e))
		return 0;
	fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return entry_from_fd(fd, e);
}

/* ---- open files ---- */

static uint64_t handle_new(int fd, DIR *dir, uint64_t nodeid)
{
	struct handle *h;
	uint32_t slot;
	uint64_t fh = 0;

	table_lock();
	if (fs.nfree) {
		slot = fs.free_slots[--fs.nfree];
	} else {
		if (fs.nslots == fs.cap) {
			uint32_t cap = fs.cap ? fs.cap * 2 : 256;
			struct handle **hs = realloc(fs.handles, cap * sizeof(*hs));
			uint32_t *fr = realloc(fs.free_slots, cap * sizeof(*fr));

			if (hs)
				fs.handles = hs;
			if (fr)
				fs.free_slots = fr;
			if (!hs || !fr)
				goto out;
			fs.cap = cap;
		}
		h = calloc(1, sizeof(*h));
		if (!h)
			goto out;
		pthread_mutex_init(&h->lock, NULL);
		slot = fs.nslots++;
		h->slot = slot;
		fs.handles[slot] = h;
	}
	h = fs.handles[slot];
	h->fd = fd;
	h->dir = dir;
	h->dpos = 0;
	h->nodeid = nodeid;
	if (++h->gen == 0)
		h->gen = 1;
	h->open = true;
	h->refs = 1;
	fs.nhandles++;
	fh = (uint64_t)h->gen << 32 | slot;
out:
	table_unlock();
	return fh;
}

static void handle_put_locked(struct handle *h)
{
	if (--h->refs)
		return;
	if (h->dir)
		closedir(h->dir);
	else
		close(h->fd);
	h->dir = NULL;
	h->fd = -1;
	fs.nhandles--;
	fs.free_slots[fs.nfree++] = h->slot;
}

static struct handle *handle_lookup_locked(uint64_t fh)
{
	uint32_t slot = fh & 0xffffffff;
	struct handle *h;

	if (slot >= fs.nslots)
		return NULL;
	h = fs.handles[slot];
	if (!h->open || h->gen != fh >> 32)
		return NULL;
	return h;
}

static struct handle *handle_get(uint64_t fh)
{
	struct handle *h;

	table_lock();
	h = handle_lookup_locked(fh);
	if (h)
		h->refs++;
	table_unlock();
	return h;
}

static void handle_put(struct handle *h)
{
	if (!h)
		return;
	table_lock();
	handle_put_locked(h);
	table_unlock();
}

static int handle_release(uint64_t fh)
{
	struct handle *h;

	table_lock();
	h = handle_lookup_locked(fh);
	if (h) {
		h->open = false;
		handle_put_locked(h);
	}
	table_unlock();
	return h ? 0 : -EBADF;
}

void fuse_reset(void)
{
	unsigned int b;
	uint32_t s;

	table_lock();
	for (b = 0; b < NBUCKETS; b++)
		while (fs.by_id[b])
			inode_unhash_locked(fs.by_id[b]);
	/* The root stays: it is never forgotten. */
	fs.root->next_id = fs.root->next_key = NULL;
	fs.by_key[key_hash(fs.root->dev, fs.root->ino)] = fs.root;
	for (s = 0; s < fs.nslots; s++)
		if (fs.handles[s]->open) {
			fs.handles[s]->open = false;
			handle_put_locked(fs.handles[s]);
		}
	__atomic_store_n(&fs.initialised, false, __ATOMIC_RELEASE);
	table_unlock();
}

void fuse_counts(uint64_t *inodes, uint64_t *handles)
{
	table_lock();
	*inodes = fs.ninodes;
	*handles = fs.nhandles;
	table_unlock();
}

/*
 * INIT and DESTROY start a session afresh: they wait until the requests the
 * other workers are serving have finished and hold new ones back until the
 * tables are reset, so that no request of the old session lands in the new
 * one (a LOOKUP that added an inode the new guest never heard of, say).
 * Every other request holds it shared; writers go first, so a busy queue
 * cannot keep INIT waiting.
 */
static pthread_rwlock_t session_lock;

/* Whether handles of the shared directory's files can be made and opened. */
static void handles_check(int dirfd)
{
	struct file_handle *fh = malloc(sizeof(*fh) + MAX_HANDLE_SZ);
	int fd = -1;

	if (fh) {
		fh->handle_bytes = MAX_HANDLE_SZ;
		if (!name_to_handle_at(dirfd, "", fh, &fh_mode.mount_id,
				       AT_EMPTY_PATH))
			fd = open_by_handle_at(fs.root_rdfd, fh, O_PATH | O_CLOEXEC);
	}
	if (fd < 0) {
		logmsg("--inode-file-handles: %m (opening by handle needs CAP_DAC_READ_SEARCH and a file system with handles); keeping a descriptor per inode");
		fh_mode.on = false;
	} else {
		close(fd);
	}
	free(fh);
}

int fuse_setup(const char *dir, int proc_fd)
{
	pthread_rwlockattr_t attr;
	struct inode *root;
	struct stat st;
	int fd;

	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr,
				      PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&session_lock, &attr);
	pthread_rwlockattr_destroy(&attr);

	fs.proc_fd = proc_fd;
	fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		logmsg("shared directory %s: %m", dir);
		return -1;
	}
	fs.root_rdfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fs.root_rdfd < 0) {
		logmsg("shared directory %s: %m", dir);
		return -1;
	}
	if (fh_mode.on)
		handles_check(fd);
	root = calloc(1, sizeof(*root));
	if (!root)
		return -1;
	root->nodeid = FUSE_ROOT_ID;
	root->fd = fd;
	root->dev = st.st_dev;
	root->ino = st.st_ino;
	root->type = S_IFDIR;
	root->nlookup = 1;
	root->refs = 1;
	fs.root = root;
	fs.by_key[key_hash(root->dev, root->ino)] = root;
	fs.next_id = FUSE_ROOT_ID + 1;
	fs.ninodes = 1;
	return 0;
}

/* ---- requests ---- */

struct req {
	struct fuse_ctx *c;
	const struct chain *ch;
	struct fuse_in_header h;
	const uint8_t *arg;	/* the op's arguments, in c->inbuf */
	size_t arglen;
	const char *name[2];	/* NUL-terminated strings after the fixed args */
	struct creds cr;	/* the caller's, for the calls made as the caller */
	size_t outlen;		/* reply payload in c->outbuf after the header */
	size_t direct;		/* reply payload written straight to the guest */
	struct chain_result *res;	/* what serving did, for the counters */
};

#define OUT(r)	((void *)((r)->c->outbuf + sizeof(struct fuse_out_header)))

/* Room for a reply payload in the guest's writable buffers. */
static size_t reply_room(const struct req *r)
{
	size_t room = r->ch->in_len - sizeof(struct fuse_out_header);

	return room < OUTBUF_SIZE - sizeof(struct fuse_out_header) ?
	       room : OUTBUF_SIZE - sizeof(struct fuse_out_header);
}

static bool bad_name(const char *n)
{
	return !n[0] || strchr(n, '/') || !strcmp(n, ".") || !strcmp(n, "..");
}

static void proc_name(char *buf, int fd)
{
	snprintf(buf, 16, "%d", fd);
}

/* Reopens an inode through /proc/self/fd: regular files and dirs only. */
static int reopen(const struct inode *i, int flags)
{
	char p[16];
	int fd;

	if (i->type != S_IFREG && i->type != S_IFDIR)
		return i->type == S_IFLNK ? -ELOOP : -ENXIO;
	proc_name(p, i->fd);
	fd = openat(fs.proc_fd, p, flags | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/*
 * Evaluates call (a system call: 0 or -1 with errno) with the guest
 * caller's uid and gid (creds_enter()); 0 or -errno.
 */
#define AS_CALLER(r, call) ({						\
	int __ret = creds_enter(&(r)->cr);				\
									\
	if (!__ret) {							\
		__ret = (call) ? -errno : 0;				\
		creds_leave(&(r)->cr);					\
	}								\
	__ret;								\
})

/*
 * FUSE sends a supplementary group only with the requests that make names
 * by mode (CREATE, MKNOD, MKDIR, SYMLINK). For UNLINK, RMDIR, RENAME and
 * LINK the guest has checked the caller's write permission on the
 * directories, perhaps through a supplementary group the host cannot see:
 * if the host refuses with EACCES, the call is made once more with the
 * directories' groups among the caller's. The owner and other classes and
 * the sticky bit are checked as before; only the group class may change
 * the answer.
 */
static bool with_dir_groups(struct req *r, const struct inode *a,
			    const struct inode *b)
{
	const struct inode *dirs[2] = { a, b };
	unsigned int k, before = r->cr.ngroups;
	struct stat st;

	if (!creds_groups())
		return false;
	for (k = 0; k < 2; k++) {
		if (!dirs[k] || stat_fd(dirs[k]->fd, &st) ||
		    st.st_gid == r->cr.gid ||
		    r->cr.ngroups == CREDS_MAX_GROUPS ||
		    (r->cr.ngroups && r->cr.groups[r->cr.ngroups - 1] == st.st_gid))
			continue;
		r->cr.groups[r->cr.ngroups++] = st.st_gid;
	}
	return r->cr.ngroups > before;
}

/* AS_CALLER, then again with the directories' groups after EACCES. */
#define AS_CALLER_IN(r, a, b, call) ({					\
	int __r = AS_CALLER(r, call);					\
									\
	if (__r == -EACCES && with_dir_groups(r, a, b))			\
		__r = AS_CALLER(r, call);				\
	__r;								\
})

/*
 * With FUSE_HANDLE_KILLPRIV_V2 the guest leaves the suid/sgid clearing on
 * write, truncate and chown to us, and stops asking for security.capability
 * before every write. The host kernel kills capabilities on our writes by
 * itself, but keeps suid/sgid when we have CAP_FSETID: the guest tells us
 * when its writer did not, and we drop the bits as the VFS would (sgid only
 * with group execute).
 */
static int kill_suidgid(int fd, const struct inode *i)
{
	struct stat st;
	mode_t mode;
	char p[16];

	if (fstat(fd, &st))
		return -errno;
	mode = st.st_mode & ~S_ISUID;
	if (mode & S_IXGRP)
		mode &= ~S_ISGID;
	if (mode == st.st_mode || !S_ISREG(st.st_mode))
		return 0;
	if (!fchmod(fd, mode & 07777))
		return 0;
	if (errno != EBADF || !i)
		return -errno;
	/* An O_PATH descriptor: chmod through /proc. */
	proc_name(p, i->fd);
	return fchmodat(fs.proc_fd, p, mode & 07777, 0) ? -errno : 0;
}

/* A request whose arguments contradict themselves: counted as malformed. */
static int refuse(struct req *r, const char *why)
{
	r->res->malformed = true;
	if (verbose)
		logmsg("malformed FUSE request (opcode %u, unique %" PRIu64 "): %s",
		       r->h.opcode, (uint64_t)r->h.unique, why);
	return -EINVAL;
}

static int op_init(struct req *r)
{
	const struct fuse_init_in *in = (const void *)r->arg;
	struct fuse_init_out *out = OUT(r);
	uint32_t want = FUSE_ASYNC_READ | FUSE_ATOMIC_O_TRUNC | FUSE_BIG_WRITES |
			FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO |
			FUSE_ASYNC_DIO | FUSE_PARALLEL_DIROPS | FUSE_MAX_PAGES |
			FUSE_AUTO_INVAL_DATA | FUSE_CACHE_SYMLINKS |
			FUSE_HANDLE_KILLPRIV_V2 |
			(cache.writeback ? FUSE_WRITEBACK_CACHE : 0) |
			(xa.on ? FUSE_SETXATTR_EXT : 0) |
			(xa.acl ? FUSE_POSIX_ACL | FUSE_DONT_MASK : 0);
	uint32_t want2 = FUSE_DIRECT_IO_ALLOW_MMAP >> 32;

	if (in->major != FUSE_KERNEL_VERSION || in->minor < 27) {
		logmsg("FUSE_INIT: the guest speaks FUSE %u.%u; 7.27 or later is needed",
		       in->major, in->minor);
		return -EPROTO;
	}
	/* A guest that re-initialises (a reboot, a new mount) starts afresh. */
	if (__atomic_exchange_n(&fs.initialised, true, __ATOMIC_ACQ_REL)) {
		fuse_reset();
		__atomic_store_n(&fs.initialised, true, __ATOMIC_RELEASE);
	}
	memset(out, 0, sizeof(*out));
	out->major = FUSE_KERNEL_VERSION;
	out->minor = in->minor < FUSE_KERNEL_MINOR_VERSION ? in->minor :
		     FUSE_KERNEL_MINOR_VERSION;
	out->max_readahead = in->max_readahead;
	/*
	 * A day's cache means a day: with AUTO_INVAL_DATA the guest would
	 * still drop a file's pages whenever a stat after a read (which
	 * invalidates atime) brought a new mtime.
	 */
	if (cache.mode == CACHE_ALWAYS)
		want &= ~FUSE_AUTO_INVAL_DATA;
	out->flags = in->flags & want;
	xa.ext = out->flags & FUSE_SETXATTR_EXT;
	/*
	 * The parent's group with the requests that make names, when the
	 * caller is in it only as a supplementary group: the host then lets
	 * that caller write where the guest did.
	 */
	if (creds_switching() && creds_groups())
		want2 |= FUSE_CREATE_SUPP_GROUP >> 32;
	/*
	 * Shared mappings of files opened with FOPEN_DIRECT_IO (cache never):
	 * without this flag the guest refuses them with ENODEV.
	 */
	if (in->flags & FUSE_INIT_EXT && in->flags2 & want2) {
		out->flags |= FUSE_INIT_EXT;
		out->flags2 = in->flags2 & want2;
	}
	out->max_background = 256;
	out->congestion_threshold = 192;
	out->max_write = MAX_WRITE;
	out->time_gran = 1;
	out->max_pages = MAX_PAGES;
	r->outlen = sizeof(*out);
	if (verbose)
		logmsg("FUSE_INIT: guest FUSE %u.%u, flags %#x/%#x, agreed %#x/%#x",
		       in->major, in->minor, in->flags, in->flags2, out->flags,
		       out->flags2);
	return 0;
}

static int op_destroy(struct req *r)
{
	fuse_reset();
	return 0;
}

static int op_lookup(struct req *r)
{
	struct inode *p = inode_get(r->h.nodeid);
	int ret;

	if (!p)
		return -ESTALE;
	ret = bad_name(r->name[0]) ? -EINVAL : lookup_at(p->fd, r->name[0], OUT(r));
	inode_put(p);
	r->outlen = sizeof(struct fuse_entry_out);
	return ret;
}

static int op_forget(struct req *r)
{
	const struct fuse_forget_in *in = (const void *)r->arg;

	forget_one(r->h.nodeid, in->nlookup);
	return 0;
}

static int op_batch_forget(struct req *r)
{
	const struct fuse_batch_forget_in *in = (const void *)r->arg;
	const struct fuse_forget_one *one = (const void *)(in + 1);
	uint32_t k;

	if ((r->arglen - sizeof(*in)) / sizeof(*one) < in->count)
		return refuse(r, "BATCH_FORGET count beyond its entries");
	for (k = 0; k < in->count; k++)
		forget_one(one[k].nodeid, one[k].nlookup);
	return 0;
}

static int attr_reply(struct req *r, int fd)
{
	struct fuse_attr_out *out = OUT(r);
	struct stat st;
	int ret;

	ret = fd == -1 ? -EBADF : stat_fd(fd, &st);
	if (ret)
		return ret;
	memset(out, 0, sizeof(*out));
	out->attr_valid = cache_timeout();
	fill_attr(&out->attr, &st);
	r->outlen = sizeof(*out);
	return 0;
}

static int op_getattr(struct req *r)
{
	const struct fuse_getattr_in *in = (const void *)r->arg;
	struct inode *i = inode_get(r->h.nodeid);
	struct handle *h = NULL;
	int ret;

	if (!i)
		return -ESTALE;
	if (in->getattr_flags & FUSE_GETATTR_FH) {
		h = handle_get(in->fh);
		ret = attr_reply(r, h && h->nodeid == r->h.nodeid ?
				 (h->dir ? dirfd(h->dir) : h->fd) : -1);
	} else {
		ret = attr_reply(r, i->fd);
	}
	handle_put(h);
	inode_put(i);
	return ret;
}

static struct timespec set_time(uint32_t valid, uint32_t bit, uint32_t now,
				uint64_t sec, uint32_t nsec)
{
	struct timespec t = { .tv_sec = sec, .tv_nsec = nsec };

	if (!(valid & bit))
		t.tv_nsec = UTIME_OMIT;
	else if (valid & now)
		t.tv_nsec = UTIME_NOW;
	return t;
}

static int op_setattr(struct req *r)
{
	const struct fuse_setattr_in *in = (const void *)r->arg;
	struct inode *i = inode_get(r->h.nodeid);
	struct handle *h = NULL;
	char p[16];
	int ret = 0, fd;

	if (!i)
		return -ESTALE;
	if (in->valid & FATTR_FH) {
		h = handle_get(in->fh);
		if (!h || h->dir || h->nodeid != r->h.nodeid) {
			ret = -EBADF;
			goto out;
		}
	}
	proc_name(p, i->fd);
	if (in->valid & FATTR_MODE) {
		if (h)
			ret = fchmod(h->fd, in->mode);
		else if (i->type == S_IFLNK)
			ret = (errno = EOPNOTSUPP, -1);
		else
			ret = fchmodat(fs.proc_fd, p, in->mode, 0);
		if (ret) {
			ret = -errno;
			goto out;
		}
	}
	if (in->valid & (FATTR_UID | FATTR_GID)) {
		uid_t uid = in->valid & FATTR_UID ? in->uid : (uid_t)-1;
		gid_t gid = in->valid & FATTR_GID ? in->gid : (gid_t)-1;

		if (fchownat(i->fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)) {
			ret = -errno;
			goto out;
		}
	}
	if (in->valid & FATTR_SIZE) {
		if (h) {
			ret = ftruncate(h->fd, in->size) ? -errno : 0;
		} else if (i->type != S_IFREG) {
			ret = i->type == S_IFDIR ? -EISDIR : -EINVAL;
		} else {
			fd = reopen(i, O_WRONLY);
			ret = fd < 0 ? fd : ftruncate(fd, in->size) ? -errno : 0;
			if (fd >= 0)
				close(fd);
		}
		if (ret)
			goto out;
	}
	if (in->valid & (FATTR_ATIME | FATTR_MTIME)) {
		struct timespec ts[2] = {
			set_time(in->valid, FATTR_ATIME, FATTR_ATIME_NOW,
				 in->atime, in->atimensec),
			set_time(in->valid, FATTR_MTIME, FATTR_MTIME_NOW,
				 in->mtime, in->mtimensec),
		};

		if (h)
			ret = futimens(h->fd, ts);
		else
			ret = utimensat(i->fd, "", ts, AT_EMPTY_PATH);
		if (ret) {
			ret = -errno;
			goto out;
		}
	}
	if (in->valid & FATTR_KILL_SUIDGID && i->type == S_IFREG) {
		ret = kill_suidgid(h ? h->fd : i->fd, i);
		if (ret)
			goto out;
	}
	ret = attr_reply(r, i->fd);
out:
	handle_put(h);
	inode_put(i);
	return ret;
}

static int op_readlink(struct req *r)
{
	struct inode *i = inode_get(r->h.nodeid);
	size_t room = reply_room(r);
	ssize_t n;

	if (!i)
		return -ESTALE;
	n = readlinkat(i->fd, "", OUT(r), room < PATH_MAX ? room : PATH_MAX);
	inode_put(i);
	if (n < 0)
		return -errno;
	r->outlen = n;
	return 0;
}

/*
 * The common tail of MKNOD, MKDIR and SYMLINK, which made the name as the
 * caller (so it has the caller's owner, or its directory's group): the
 * entry.
 */
static int made(struct req *r, struct inode *p, const char *name, int ret)
{
	if (!ret) {
		ret = lookup_at(p->fd, name, OUT(r));
		r->outlen = sizeof(struct fuse_entry_out);
	}
	inode_put(p);
	return ret;
}

/*
 * With FUSE_DONT_MASK (agreed with --posix-acl) the guest leaves the umask
 * to us, as a local file system leaves it to its ACL code: the parent's
 * default ACL decides the new file's permissions if it has one (the host
 * applies it: our umask is 0), else the caller's umask does.
 */
static int xattr_fd(const struct inode *i);

static mode_t create_mode(const struct inode *p, mode_t mode, uint32_t umask)
{
	bool inherit;
	int fd;

	if (!xa.acl)
		return mode;	/* the guest masked it already */
	fd = xattr_fd(p);
	inherit = fd >= 0 && fgetxattr(fd, ACL_DEFAULT, NULL, 0) > 0;
	if (fd >= 0)
		close(fd);
	return inherit ? mode : mode & ~(umask & 0777);
}

static int op_mknod(struct req *r)
{
	const struct fuse_mknod_in *in = (const void *)r->arg;
	struct inode *p = inode_get(r->h.nodeid);

	if (!p)
		return -ESTALE;
	if (bad_name(r->name[0]))
		return made(r, p, NULL, -EINVAL);
	/*
	 * No device nodes unless the operator asked (fuse_set_devices()): the
	 * guest has its own devices, and on the host a node the guest made
	 * opens a host device to any local user the node's mode lets in.
	 */
	if ((S_ISCHR(in->mode) || S_ISBLK(in->mode)) && !devices)
		return made(r, p, NULL, -EPERM);
	return made(r, p, r->name[0], AS_CALLER(r,
		    mknodat(p->fd, r->name[0], create_mode(p, in->mode, in->umask),
			    in->rdev)));
}

static int op_mkdir(struct req *r)
{
	const struct fuse_mkdir_in *in = (const void *)r->arg;
	struct inode *p = inode_get(r->h.nodeid);

	if (!p)
		return -ESTALE;
	if (bad_name(r->name[0]))
		return made(r, p, NULL, -EINVAL);
	return made(r, p, r->name[0], AS_CALLER(r,
		    mkdirat(p->fd, r->name[0],
			    create_mode(p, in->mode, in->umask))));
}

static int op_symlink(struct req *r)
{
	struct inode *p = inode_get(r->h.nodeid);

	if (!p)
		return -ESTALE;
	/* name[0] is the new entry, name[1] the link's text. */
	if (bad_name(r->name[0]) || !r->name[1][0])
		return made(r, p, NULL, -EINVAL);
	return made(r, p, r->name[0], AS_CALLER(r,
		    symlinkat(r->name[1], p->fd, r->name[0])));
}

static int remove_entry(struct req *r, int flags)
{
	struct inode *p = inode_get(r->h.nodeid);
	int ret;

	if (!p)
		return -ESTALE;
	ret = bad_name(r->name[0]) ? -EINVAL :
	      AS_CALLER_IN(r, p, NULL, unlinkat(p->fd, r->name[0], flags));
	inode_put(p);
	return ret;
}

static int op_unlink(struct req *r)
{
	return remove_entry(r, 0);
}

static int op_rmdir(struct req *r)
{
	return remove_entry(r, AT_REMOVEDIR);
}

static int do_rename(struct req *r, uint64_t newdir, uint32_t flags)
{
	struct inode *p = inode_get(r->h.nodeid), *np = inode_get(newdir);
	int ret;

	if (!p || !np)
		ret = -ESTALE;
	else if (bad_name(r->name[0]) || bad_name(r->name[1]) ||
		 flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE))
		ret = -EINVAL;
	else
		ret = AS_CALLER_IN(r, p, np, renameat2(p->fd, r->name[0], np->fd,
							r->name[1], flags));
	inode_put(p);
	inode_put(np);
	return ret;
}

static int op_rename(struct req *r)
{
	const struct fuse_rename_in *in = (const void *)r->arg;

	return do_rename(r, in->newdir, 0);
}

static int op_rename2(struct req *r)
{
	const struct fuse_rename2_in *in = (const void *)r->arg;

	return do_rename(r, in->newdir, in->flags);
}

static int op_link(struct req *r)
{
	const struct fuse_link_in *in = (const void *)r->arg;
	struct inode *i = inode_get(in->oldnodeid);
	struct inode *p = inode_get(r->h.nodeid);
	char path[16];
	int ret;

	if (!i || !p) {
		ret = -ESTALE;
	} else if (bad_name(r->name[0])) {
		ret = -EINVAL;
	} else {
		/* As the caller: write permission, protected_hardlinks. */
		proc_name(path, i->fd);
		ret = AS_CALLER_IN(r, p, NULL, linkat(fs.proc_fd, path, p->fd,
						       r->name[0], AT_SYMLINK_FOLLOW));
		if (!ret) {
			ret = lookup_at(p->fd, r->name[0], OUT(r));
			r->outlen = sizeof(struct fuse_entry_out);
		}
	}
	inode_put(i);
	inode_put(p);
	return ret;
}

/*
 * Host open flags from the guest's: no creation, no O_DIRECT (the host
 * file system may not have it; the guest's O_DIRECT already bypasses the
 * guest's cache), no O_NOFOLLOW (the guest resolved the name itself; our
 * reopen goes through a /proc magic link, which O_NOFOLLOW refuses).
 */
static int host_flags(uint32_t flags)
{
	return (flags & ~(O_CREAT | O_EXCL | O_NOCTTY | O_DIRECT | O_PATH |
			  O_NOFOLLOW)) | O_CLOEXEC;
}

/*
 * With the writeback cache the guest reads around partial-page writes
 * through any of the file's handles, and appends at the size it knows
 * itself: a write-only open is made read-write, and O_APPEND goes (on
 * Linux, pwrite() with O_APPEND ignores the offset). Whether the widened
 * open worked: a caller who may write but not read keeps write-only.
 */
static bool widen_for_writeback(int *flags)
{
	if (!cache.writeback)
		return false;
	*flags &= ~O_APPEND;
	if ((*flags & O_ACCMODE) != O_WRONLY)
		return false;
	*flags = (*flags & ~O_ACCMODE) | O_RDWR;
	return true;
}

/* Opens an inode for OPEN: widened for the writeback cache if it may be. */
static int reopen_file(const struct inode *i, uint32_t guest_flags)
{
	int flags = host_flags(guest_flags), fd;

	if (widen_for_writeback(&flags)) {
		fd = reopen(i, flags);
		if (fd != -EACCES)
			return fd;
		flags = (flags & ~O_ACCMODE) | O_WRONLY;
	}
	return reopen(i, flags);
}

static int op_open(struct req *r)
{
	const struct fuse_open_in *in = (const void *)r->arg;
	struct fuse_open_out *out = OUT(r);
	struct inode *i = inode_get(r->h.nodeid);
	int fd;

	if (!i)
		return -ESTALE;
	fd = i->type == S_IFDIR ? -EISDIR : reopen_file(i, in->flags);
	inode_put(i);
	if (fd < 0)
		return fd;
	if (in->open_flags & FUSE_OPEN_KILL_SUIDGID)
		kill_suidgid(fd, NULL);
	memset(out, 0, sizeof(*out));
	out->open_flags = cache_open_flags(false);
	out->fh = handle_new(fd, NULL, r->h.nodeid);
	if (!out->fh) {
		close(fd);
		return -ENOMEM;
	}
	r->outlen = sizeof(*out);
	return 0;
}

/*
 * CREATE's open: a new file, or else (no O_EXCL) the existing entry, which
 * is opened the way OPEN would, as a regular file only. Opening whatever
 * is there would hand the guest a host device node, or block the ring
 * forever on a FIFO.
 */
static int create_open(int dirfd, const char *name,
		       const struct fuse_create_in *in, mode_t mode)
{
	int flags = host_flags(in->flags), fd, opath;
	bool widened = widen_for_writeback(&flags);
	struct stat st;
	char p[16];

	/* A new file: the caller may always read what it creates. */
	fd = openat(dirfd, name, flags | O_CREAT | O_EXCL | O_NOFOLLOW,
		    mode & 07777);
	if (fd >= 0)
		return fd;
	if (errno != EEXIST || in->flags & O_EXCL)
		return -errno;
	opath = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (opath < 0)
		return -errno;
	if (fstat(opath, &st)) {
		fd = -errno;
	} else if (!S_ISREG(st.st_mode)) {
		fd = S_ISDIR(st.st_mode) ? -EISDIR :
		     S_ISLNK(st.st_mode) ? -ELOOP : -ENXIO;
	} else {
		proc_name(p, opath);
		fd = openat(fs.proc_fd, p, flags);
		if (fd < 0 && errno == EACCES && widened)
			fd = openat(fs.proc_fd, p,
				    (flags & ~O_ACCMODE) | O_WRONLY);
		if (fd < 0)
			fd = -errno;
	}
	close(opath);
	return fd;
}

static int op_create(struct req *r)
{
	const struct fuse_create_in *in = (const void *)r->arg;
	struct fuse_entry_out *e = OUT(r);
	struct fuse_open_out *o = (void *)(e + 1);
	struct inode *p = inode_get(r->h.nodeid);
	char path[16];
	int fd, opath, ret;

	if (!p)
		return -ESTALE;
	if (bad_name(r->name[0])) {
		inode_put(p);
		return -EINVAL;
	}
	/* As the caller: its owner or the directory's group, its rights. */
	fd = creds_enter(&r->cr);
	if (!fd) {
		fd = create_open(p->fd, r->name[0], in,
				 create_mode(p, in->mode, in->umask));
		creds_leave(&r->cr);
	}
	inode_put(p);
	if (fd < 0)
		return fd;
	if (in->open_flags & FUSE_OPEN_KILL_SUIDGID)
		kill_suidgid(fd, NULL);
	/* The entry is for the file we opened, whatever the name is now. */
	proc_name(path, fd);
	opath = openat(fs.proc_fd, path, O_PATH | O_CLOEXEC);
	ret = opath < 0 ? -errno : entry_from_fd(opath, e);
	if (ret) {
		close(fd);
		return ret;
	}
	memset(o, 0, sizeof(*o));
	o->open_flags = cache_open_flags(false);
	o->fh = handle_new(fd, NULL, e->nodeid);
	if (!o->fh) {
		close(fd);
		forget_one(e->nodeid, 1);
		return -ENOMEM;
	}
	r->outlen = sizeof(*e) + sizeof(*o);
	return 0;
}

static int op_read(struct req *r)
{
	const struct fuse_read_in *in = (const void *)r->arg;
	struct handle *h = handle_get(in->fh);
	size_t size = in->size, room = reply_room(r);
	unsigned int k;
	ssize_t n;

	if (size > MAX_WRITE || size > room) {
		handle_put(h);
		return refuse(r, size > MAX_WRITE ?
			      "READ larger than max_pages (INIT)" :
			      "READ larger than its reply buffers");
	}
	if (!h || h->dir) {
		handle_put(h);
		return -EBADF;
	}
	k = iov_slice(r->ch->in, r->ch->nin, sizeof(struct fuse_out_header), size,
		      r->c->scratch, MAX_CHAIN_IOV);
	n = size ? preadv(h->fd, r->c->scratch, k, in->offset) : 0;
	handle_put(h);
	if (n < 0)
		return -errno;
	r->direct = n;
	return 0;
}

static int op_write(struct req *r)
{
	const struct fuse_write_in *in = (const void *)r->arg;
	struct fuse_write_out *out = OUT(r);
	size_t skip = sizeof(struct fuse_in_header) + sizeof(*in), done = 0;
	struct handle *h;
	int ret = 0;

	if (in->size > MAX_WRITE)
		return refuse(r, "WRITE larger than max_write (INIT)");
	if (r->arglen - sizeof(*in) != in->size)
		return refuse(r, "WRITE size differs from its data");
	h = handle_get(in->fh);
	if (!h || h->dir) {
		handle_put(h);
		return -EBADF;
	}
	if (in->write_flags & FUSE_WRITE_KILL_SUIDGID)
		kill_suidgid(h->fd, NULL);
	while (done < in->size) {
		unsigned int k = iov_slice(r->ch->out, r->ch->nout, skip + done,
					   in->size - done, r->c->scratch,
					   MAX_CHAIN_IOV);
		ssize_t n = pwritev(h->fd, r->c->scratch, k, in->offset + done);

		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			break;
		}
		done += n;
	}
	handle_put(h);
	/* A short write is reported as one, unless nothing was written. */
	if (ret && !done)
		return ret;
	memset(out, 0, sizeof(*out));
	out->size = done;
	r->outlen = sizeof(*out);
	return 0;
}

static int op_statfs(struct req *r)
{
	struct fuse_statfs_out *out = OUT(r);
	struct inode *i = inode_get(r->h.nodeid);
	struct statfs s;
	int ret;

	if (!i)
		return -ESTALE;
	ret = fstatfs(i->fd, &s) ? -errno : 0;
	inode_put(i);
	if (ret)
		return ret;
	memset(out, 0, sizeof(*out));
	out->st.blocks = s.f_blocks;
	out->st.bfree = s.f_bfree;
	out->st.bavail = s.f_bavail;
	out->st.files = s.f_files;
	out->st.ffree = s.f_ffree;
	out->st.bsize = s.f_bsize;
	out->st.namelen = s.f_namelen;
	out->st.frsize = s.f_frsize;
	r->outlen = sizeof(*out);
	return 0;
}

static int op_release(struct req *r)
{
	const struct fuse_release_in *in = (const void *)r->arg;

	return handle_release(in->fh);
}

static int op_fsync(struct req *r)
{
	const struct fuse_fsync_in *in = (const void *)r->arg;
	struct handle *h = handle_get(in->fh);
	int fd, ret;

	if (!h)
		return -EBADF;
	fd = h->dir ? dirfd(h->dir) : h->fd;
	ret = (in->fsync_flags & 1 ? fdatasync(fd) : fsync(fd)) ? -errno : 0;
	handle_put(h);
	return ret;
}

static int op_flush(struct req *r)
{
	const struct fuse_flush_in *in = (const void *)r->arg;
	struct handle *h = handle_get(in->fh);

	handle_put(h);
	return h ? 0 : -EBADF;
}

static int op_opendir(struct req *r)
{
	struct fuse_open_out *out = OUT(r);
	struct inode *i = inode_get(r->h.nodeid);
	DIR *d;
	int fd;

	if (!i)
		return -ESTALE;
	fd = i->type == S_IFDIR ? reopen(i, O_RDONLY | O_DIRECTORY) : -ENOTDIR;
	inode_put(i);
	if (fd < 0)
		return fd;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -ENOMEM;
	}
	memset(out, 0, sizeof(*out));
	out->open_flags = cache_open_flags(true);
	out->fh = handle_new(dirfd(d), d, r->h.nodeid);
	if (!out->fh) {
		closedir(d);
		return -ENOMEM;
	}
	r->outlen = sizeof(*out);
	return 0;
}

static int do_readdir(struct req *r, bool plus)
{
	const struct fuse_read_in *in = (const void *)r->arg;
	struct handle *h = handle_get(in->fh);
	size_t size = in->size, pos = 0;
	uint8_t *buf = OUT(r);
	int ret = 0;

	if (!h || !h->dir) {
		handle_put(h);
		return -EBADF;
	}
	if (size > reply_room(r))
		size = reply_room(r);
	pthread_mutex_lock(&h->lock);
	if ((long)in->offset != h->dpos) {
		if (in->offset)
			seekdir(h->dir, in->offset);
		else
			rewinddir(h->dir);
		h->dpos = in->offset;
	}
	for (;;) {
		long before = telldir(h->dir);
		struct fuse_dirent *d;
		struct dirent *de;
		size_t namelen, len;

		errno = 0;
		de = readdir(h->dir);
		if (!de) {
			if (errno && !pos)
				ret = -errno;
			break;
		}
		namelen = strlen(de->d_name);
		len = plus ? FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET_DIRENTPLUS + namelen) :
			     FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + namelen);
		if (pos + len > size) {
			seekdir(h->dir, before);
			if (!pos)
				ret = -EINVAL;	/* not even one entry fits */
			break;
		}
		memset(buf + pos, 0, len);
		if (plus) {
			struct fuse_direntplus *dp = (void *)(buf + pos);

			/* "." and ".." go with nodeid 0: the guest knows them. */
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
			    lookup_at(dirfd(h->dir), de->d_name, &dp->entry_out)) {
				h->dpos = de->d_off;
				continue;	/* gone since readdir saw it */
			}
			d = &dp->dirent;
		} else {
			d = (void *)(buf + pos);
		}
		d->ino = de->d_ino;
		d->off = de->d_off;
		d->namelen = namelen;
		d->type = de->d_type;
		memcpy(d->name, de->d_name, namelen);
		pos += len;
		h->dpos = de->d_off;
	}
	pthread_mutex_unlock(&h->lock);
	handle_put(h);
	r->outlen = pos;
	return ret;
}

static int op_readdir(struct req *r)
{
	return do_readdir(r, false);
}

static int op_readdirplus(struct req *r)
{
	return do_readdir(r, true);
}

static int op_releasedir(struct req *r)
{
	return op_release(r);
}

static int op_access(struct req *r)
{
	const struct fuse_access_in *in = (const void *)r->arg;
	struct inode *i = inode_get(r->h.nodeid);
	char p[16];
	int ret = 0;

	if (!i)
		return -ESTALE;
	proc_name(p, i->fd);
	if (i->type != S_IFLNK && faccessat(fs.proc_fd, p, in->mask, 0))
		ret = -errno;
	inode_put(i);
	return ret;
}

static int op_fallocate(struct req *r)
{
	const struct fuse_fallocate_in *in = (const void *)r->arg;
	struct handle *h = handle_get(in->fh);
	int ret;

	if (!h || h->dir) {
		handle_put(h);
		return -EBADF;
	}
	ret = fallocate(h->fd, in->mode, in->offset, in->length) ? -errno : 0;
	handle_put(h);
	return ret;
}

static int op_lseek(struct req *r)
{
	const struct fuse_lseek_in *in = (const void *)r->arg;
	struct fuse_lseek_out *out = OUT(r);
	struct handle *h = handle_get(in->fh);
	off_t off;

	if (!h || h->dir) {
		handle_put(h);
		return -EBADF;
	}
	off = lseek(h->fd, in->offset, in->whence);
	handle_put(h);
	if (off < 0)
		return -errno;
	out->offset = off;
	r->outlen = sizeof(*out);
	return 0;
}

void fuse_set_devices(bool on)
{
	devices = on;
}

void fuse_set_xattr(bool on, const char *const *allow, unsigned int nallow)
{
	xa.on = on;
	xa.allow = allow;
	xa.nallow = nallow;
}

static bool xattr_allowed(const char *name)
{
	unsigned int i;

	if (!strncmp(name, "user.", 5))
		return true;
	if (xa.acl && (!strcmp(name, ACL_ACCESS) || !strcmp(name, ACL_DEFAULT)))
		return true;
	for (i = 0; i < xa.nallow; i++)
		if (!strncmp(name, xa.allow[i], strlen(xa.allow[i])))
			return true;
	return false;
}

/*
 * flistxattr() of fd with the names the policy hides taken out: into
 * out (size bytes, ERANGE if the rest does not fit), or only the length
 * when size is 0.
 */
static ssize_t list_allowed(int fd, char *out, size_t size)
{
	ssize_t n, total = 0, off;
	char *all = NULL;
	size_t len;

	for (;;) {
		n = flistxattr(fd, NULL, 0);
		if (n <= 0)
			return n;
		free(all);
		all = malloc(n);
		if (!all) {
			errno = ENOMEM;
			return -1;
		}
		n = flistxattr(fd, all, n);
		if (n >= 0)
			break;
		if (errno != ERANGE) {	/* ERANGE: the list grew meanwhile */
			free(all);
			return -1;
		}
	}
	for (off = 0; off < n; off += len) {
		len = strnlen(all + off, n - off) + 1;
		if (off + (ssize_t)len > n)
			break;	/* not NUL-terminated: the kernel never does that */
		if (!xattr_allowed(all + off))
			continue;
		if (size && total + len > size) {
			free(all);
			errno = ERANGE;
			return -1;
		}
		if (size)
			memcpy(out + total, all + off, len);
		total += len;
	}
	free(all);
	return total;
}

/*
 * xattrs: on regular files and directories only, through a descriptor
 * opened from the inode's own (via /proc/self/fd), which works inside the
 * sandbox, where no absolute path leads to /proc. Returns it, or -errno.
 */
static int xattr_fd(const struct inode *i)
{
	char p[16];
	int fd;

	if (i->type != S_IFREG && i->type != S_IFDIR)
		return -ENOTSUP;
	snprintf(p, sizeof(p), "%d", i->fd);
	fd = openat(fs.proc_fd, p, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/*
 * Size 0 asks for the length (a fuse_getxattr_out); otherwise the value,
 * capped at the room the guest gave: the host says ERANGE if it is bigger.
 */
static int xattr_size(struct req *r, uint32_t want, size_t *size)
{
	*size = want < reply_room(r) ? want : reply_room(r);
	if (!want && reply_room(r) < sizeof(struct fuse_getxattr_out))
		return refuse(r, "no room for the xattr size");
	return 0;
}

static int xattr_reply(struct req *r, ssize_t n, uint32_t size)
{
	if (n < 0)
		return -errno;
	if (!size) {
		struct fuse_getxattr_out *out = OUT(r);

		memset(out, 0, sizeof(*out));
		out->size = n;
		r->outlen = sizeof(*out);
	} else {
		r->outlen = n;
	}
	return 0;
}

/* GETXATTR and LISTXATTR: the same arguments, the same two reply forms. */
static int get_or_list_xattr(struct req *r, bool list)
{
	const struct fuse_getxattr_in *in = (const void *)r->arg;
	void *buf = in->size ? OUT(r) : NULL;
	struct inode *i;
	size_t size;
	ssize_t n;
	int ret, fd;

	if (!xa.on)
		return -ENOSYS;
	i = inode_get(r->h.nodeid);
	if (!i)
		return -ESTALE;
	ret = xattr_size(r, in->size, &size);
	if (!ret && !list && !xattr_allowed(r->name[0]))
		ret = -ENODATA;
	fd = ret ? ret : xattr_fd(i);
	if (fd >= 0) {
		if (!in->size)
			size = 0;
		n = list ? list_allowed(fd, buf, size) :
			   fgetxattr(fd, r->name[0], buf, size);
		ret = xattr_reply(r, n, in->size);
		close(fd);
	} else {
		ret = fd;
	}
	inode_put(i);
	return ret;
}

static int op_getxattr(struct req *r)
{
	return get_or_list_xattr(r, false);
}

static int op_listxattr(struct req *r)
{
	return get_or_list_xattr(r, true);
}

static int op_setxattr(struct req *r)
{
	/* Without FUSE_SETXATTR_EXT the guest sends the 8-byte compat form. */
	const struct fuse_setxattr_in *in = (const void *)r->arg;
	size_t namelen = strlen(r->name[0]) + 1;
	uint32_t flags = xa.ext ? in->setxattr_flags : 0;
	struct inode *i;
	struct stat st;
	int fd, ret = 0;

	if (!xa.on)
		return -ENOSYS;
	if ((xa.ext ? sizeof(*in) : FUSE_COMPAT_SETXATTR_IN_SIZE) + namelen +
	    in->size != r->arglen)
		return -EINVAL;
	if (!xattr_allowed(r->name[0]))
		return -EPERM;
	i = inode_get(r->h.nodeid);
	if (!i)
		return -ESTALE;
	fd = xattr_fd(i);
	if (fd < 0)
		ret = fd;
	else if (fsetxattr(fd, r->name[0], r->name[0] + namelen, in->size,
			   in->flags))
		ret = -errno;
	/*
	 * An access ACL set by a caller outside the file's group drops the
	 * setgid bit, as the VFS does; we set it as root, so the guest asks.
	 */
	else if (flags & FUSE_SETXATTR_ACL_KILL_SGID &&
		 !strcmp(r->name[0], ACL_ACCESS) && !fstat(fd, &st) &&
		 st.st_mode & S_ISGID &&
		 fchmod(fd, st.st_mode & 07777 & ~S_ISGID))
		ret = -errno;
	if (fd >= 0)
		close(fd);
	inode_put(i);
	return ret;
}

static int op_removexattr(struct req *r)
{
	struct inode *i;
	int fd, ret = 0;

	if (!xa.on)
		return -ENOSYS;
	if (!xattr_allowed(r->name[0]))
		return -EPERM;
	i = inode_get(r->h.nodeid);
	if (!i)
		return -ESTALE;
	fd = xattr_fd(i);
	if (fd < 0)
		ret = fd;
	else if (fremovexattr(fd, r->name[0]))
		ret = -errno;
	if (fd >= 0)
		close(fd);
	inode_put(i);
	return ret;
}

static int op_syncfs(struct req *r)
{
	return syncfs(fs.root_rdfd) ? -errno : 0;
}

static int op_interrupt(struct req *r)
{
	/* Every request is served to completion; nothing to interrupt. */
	return 0;
}

struct op {
	const char *name;
	int (*fn)(struct req *r);
	size_t in;		/* fixed argument size */
	size_t out;		/* least reply payload the guest must have room for */
	unsigned int names;	/* NUL-terminated strings after the fixed args */
	bool noreply;
};

#define OP(code, f, i, o, n) [FUSE_##code] = { #code, f, i, o, n, false }
#define OP_NOREPLY(code, f, i) [FUSE_##code] = { #code, f, i, 0, 0, true }

static const struct op ops[] = {
	OP(INIT, op_init, 16, sizeof(struct fuse_init_out), 0),
	OP(DESTROY, op_destroy, 0, 0, 0),
	OP(LOOKUP, op_lookup, 0, sizeof(struct fuse_entry_out), 1),
	OP_NOREPLY(FORGET, op_forget, sizeof(struct fuse_forget_in)),
	OP_NOREPLY(BATCH_FORGET, op_batch_forget, sizeof(struct fuse_batch_forget_in)),
	OP_NOREPLY(INTERRUPT, op_interrupt, sizeof(struct fuse_interrupt_in)),
	OP(GETATTR, op_getattr, sizeof(struct fuse_getattr_in), sizeof(struct fuse_attr_out), 0),
	OP(SETATTR, op_setattr, sizeof(struct fuse_setattr_in), sizeof(struct fuse_attr_out), 0),
	OP(READLINK, op_readlink, 0, 0, 0),
	OP(SYMLINK, op_symlink, 0, sizeof(struct fuse_entry_out), 2),
	OP(MKNOD, op_mknod, sizeof(struct fuse_mknod_in), sizeof(struct fuse_entry_out), 1),
	OP(MKDIR, op_mkdir, sizeof(struct fuse_mkdir_in), sizeof(struct fuse_entry_out), 1),
	OP(UNLINK, op_unlink, 0, 0, 1),
	OP(RMDIR, op_rmdir, 0, 0, 1),
	OP(RENAME, op_rename, sizeof(struct fuse_rename_in), 0, 2),
	OP(RENAME2, op_rename2, sizeof(struct fuse_rename2_in), 0, 2),
	OP(LINK, op_link, sizeof(struct fuse_link_in), sizeof(struct fuse_entry_out), 1),
	OP(OPEN, op_open, sizeof(struct fuse_open_in), sizeof(struct fuse_open_out), 0),
	OP(READ, op_read, sizeof(struct fuse_read_in), 0, 0),
	OP(WRITE, op_write, sizeof(struct fuse_write_in), sizeof(struct fuse_write_out), 0),
	OP(STATFS, op_statfs, 0, sizeof(struct fuse_statfs_out), 0),
	OP(RELEASE, op_release, sizeof(struct fuse_release_in), 0, 0),
	OP(FSYNC, op_fsync, sizeof(struct fuse_fsync_in), 0, 0),
	OP(SETXATTR, op_setxattr, FUSE_COMPAT_SETXATTR_IN_SIZE, 0, 1),
	OP(GETXATTR, op_getxattr, sizeof(struct fuse_getxattr_in), 0, 1),
	OP(LISTXATTR, op_listxattr, sizeof(struct fuse_getxattr_in), 0, 0),
	OP(REMOVEXATTR, op_removexattr, 0, 0, 1),
	OP(FLUSH, op_flush, sizeof(struct fuse_flush_in), 0, 0),
	OP(OPENDIR, op_opendir, sizeof(struct fuse_open_in), sizeof(struct fuse_open_out), 0),
	OP(READDIR, op_readdir, sizeof(struct fuse_read_in), 0, 0),
	OP(READDIRPLUS, op_readdirplus, sizeof(struct fuse_read_in), 0, 0),
	OP(RELEASEDIR, op_releasedir, sizeof(struct fuse_release_in), 0, 0),
	OP(FSYNCDIR, op_fsync, sizeof(struct fuse_fsync_in), 0, 0),
	OP(ACCESS, op_access, sizeof(struct fuse_access_in), 0, 0),
	OP(CREATE, op_create, sizeof(struct fuse_create_in),
	   sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out), 1),
	OP(FALLOCATE, op_fallocate, sizeof(struct fuse_fallocate_in), 0, 0),
	OP(LSEEK, op_lseek, sizeof(struct fuse_lseek_in), sizeof(struct fuse_lseek_out), 0),
	OP(SYNCFS, op_syncfs, sizeof(struct fuse_syncfs_in), 0, 0),
};

static size_t reply(struct req *r, int err)
{
	struct fuse_out_header *oh = (void *)r->c->outbuf;
	size_t len = sizeof(*oh);

	if (r->ch->in_len < sizeof(*oh))
		return 0;	/* nowhere to answer */
	if (err) {
		r->res->error = true;
	} else if (r->direct) {
		len += r->direct;
	} else {
		len += r->outlen;
	}
	oh->len = len;
	oh->error = err;
	oh->unique = r->h.unique;
	if (err || r->direct)
		buf_to_iov(r->ch->in, r->ch->nin, 0, oh, sizeof(*oh));
	else
		buf_to_iov(r->ch->in, r->ch->nin, 0, oh, len);
	return len;
}

static size_t malformed(struct req *r, const char *why)
{
	r->res->malformed = true;
	if (verbose)
		logmsg("malformed FUSE request (opcode %u, unique %" PRIu64 "): %s",
		       r->h.opcode, (uint64_t)r->h.unique, why);
	return reply(r, -EINVAL);
}

/* Finds the op's strings after its fixed arguments; false if unterminated. */
static bool find_names(struct req *r, const struct op *op, size_t off,
		       size_t avail)
{
	unsigned int k;

	for (k = 0; k < op->names; k++) {
		const char *s = (const char *)r->arg + off;
		const char *nul = off < avail ? memchr(s, 0, avail - off) : NULL;

		if (!nul)
			return false;
		r->name[k] = s;
		off += nul - s + 1;
	}
	return true;
}

/*
 * Reads the extensions after the arguments (total_extlen 8-byte units at
 * the end of the request, each a fuse_ext_header and its payload). Only
 * FUSE_EXT_GROUPS is used; other types are skipped. False if malformed.
 */
static bool read_extensions(struct req *r, const uint8_t *ext, size_t len)
{
	while (len) {
		const struct fuse_ext_header *xh = (const void *)ext;
		const struct fuse_supp_groups *sg = (const void *)(xh + 1);
		unsigned int k;

		if (len < sizeof(*xh) || xh->size < sizeof(*xh) ||
		    xh->size % 8 || xh->size > len)
			return false;
		if (xh->type == FUSE_EXT_GROUPS) {
			if (xh->size < sizeof(*xh) + sizeof(*sg) ||
			    sg->nr_groups > (xh->size - sizeof(*xh) - sizeof(*sg)) /
					    sizeof(sg->groups[0]))
				return false;
			for (k = 0; k < sg->nr_groups &&
				    r->cr.ngroups < CREDS_MAX_GROUPS; k++)
				r->cr.groups[r->cr.ngroups++] = sg->groups[k];
		}
		ext += xh->size;
		len -= xh->size;
	}
	return true;
}

/* The size of the op's fixed arguments, before its names. */
static size_t fixed_args(const struct req *r, const struct op *op)
{
	/* FUSE_SETXATTR_EXT widens SETXATTR's from the 8-byte compat form. */
	if (r->h.opcode == FUSE_SETXATTR && xa.ext)
		return sizeof(struct fuse_setxattr_in);
	return op->in;
}

/* Requests per opcode, all queues together (the stats file's op lines). */
static uint64_t op_count[ARRAY_SIZE(ops)];

void fuse_op_counts(void (*fn)(const char *name, uint64_t n, void *arg),
		    void *arg)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(ops); i++) {
		uint64_t n = __atomic_load_n(&op_count[i], __ATOMIC_RELAXED);

		if (n && ops[i].name)
			fn(ops[i].name, n, arg);
	}
}

static size_t serve(struct fuse_ctx *c, const struct chain *ch,
		    struct chain_result *res)
{
	struct req r = { .c = c, .ch = ch, .res = res };
	const struct op *op = NULL;
	size_t copy, extlen;
	int ret;

	if (ch->out_len < sizeof(r.h))
		return malformed(&r, "shorter than a FUSE header");
	iov_to_buf(ch->out, ch->nout, 0, &r.h, sizeof(r.h));
	if (r.h.len != ch->out_len)
		return malformed(&r, "header length differs from the request's");
	if (r.h.opcode < ARRAY_SIZE(ops) && ops[r.h.opcode].fn)
		op = &ops[r.h.opcode];
	if (!op) {
		if (verbose)
			logmsg("FUSE opcode %u is not supported", r.h.opcode);
		return reply(&r, -ENOSYS);
	}
	__atomic_fetch_add(&op_count[r.h.opcode], 1, __ATOMIC_RELAXED);
	copy = ch->out_len;
	if (r.h.opcode == FUSE_WRITE && copy > sizeof(r.h) + op->in)
		copy = sizeof(r.h) + op->in;	/* the data stays in the guest */
	if (copy > c->inbuf_size)
		return malformed(&r, "request too large");
	iov_to_buf(ch->out, ch->nout, 0, c->inbuf, copy);
	r.arg = c->inbuf + sizeof(r.h);
	r.arglen = ch->out_len - sizeof(r.h);
	extlen = (size_t)r.h.total_extlen * 8;
	if (r.arglen < fixed_args(&r, op) + extlen)
		return malformed(&r, "arguments too short");
	r.arglen -= extlen;
	r.cr.uid = r.h.uid;
	r.cr.gid = r.h.gid;
	/* A WRITE's copy stops before its data: no extensions there. */
	if (extlen && copy == ch->out_len &&
	    !read_extensions(&r, r.arg + r.arglen, extlen))
		return malformed(&r, "bad extension");
	if (!find_names(&r, op, fixed_args(&r, op),
			copy - sizeof(r.h) < r.arglen ? copy - sizeof(r.h) :
							r.arglen))
		return malformed(&r, "name not NUL-terminated");
	if (!op->noreply &&
	    ch->in_len < sizeof(struct fuse_out_header) + op->out)
		return malformed(&r, "no room for the reply");
	if (r.h.opcode == FUSE_INIT || r.h.opcode == FUSE_DESTROY)
		pthread_rwlock_wrlock(&session_lock);
	else
		pthread_rwlock_rdlock(&session_lock);
	ret = op->fn(&r);
	pthread_rwlock_unlock(&session_lock);
	if (op->noreply)
		return 0;
	return reply(&r, ret);
}

void fuse_serve(void *ctx, const struct chain *ch, struct chain_result *res)
{
	res->written = serve(ctx, ch, res);
}

void *fuse_worker_start(void)
{
	struct fuse_ctx *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->inbuf_size = INBUF_SIZE;
	c->outbuf_size = OUTBUF_SIZE;
	c->inbuf = malloc(c->inbuf_size);
	c->outbuf = malloc(c->outbuf_size);
	c->scratch = calloc(MAX_CHAIN_IOV, sizeof(*c->scratch));
	if (!c->inbuf || !c->outbuf || !c->scratch) {
		fuse_worker_end(c);
		return NULL;
	}
	return c;
}

void fuse_worker_end(void *ctx)
{
	struct fuse_ctx *c = ctx;

	if (!c)
		return;
	free(c->inbuf);
	free(c->outbuf);
	free(c->scratch);
	free(c);
}
