/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The vhost-user wire format (QEMU's docs/interop/vhost-user.rst), the
 * socket chores every back end here needs (listen, receive a message with
 * its file descriptors, send a reply), and the checks of the messages whose
 * rules do not depend on the device: payload sizes, vring numbers and
 * addresses, and the memory table, which is also mapped here.
 * Header-only; the includer provides logmsg().
 */
#ifndef VHOST_USER_WIRE_H
#define VHOST_USER_WIRE_H

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define VU_VERSION		0x1
#define VU_FLAG_REPLY		0x4
#define VU_FLAG_NEED_REPLY	0x8
#define VU_FLAGS_KNOWN		(0x3 | VU_FLAG_REPLY | VU_FLAG_NEED_REPLY)
#define VU_MAX_PAYLOAD		4096
#define VU_MAX_FDS		8
#define VU_MAX_REGIONS		8
#define VU_CONFIG_MAX		256
#define VU_RING_INDEX_MASK	0xffULL
#define VU_RING_NOFD		(1ULL << 8)

#define VU_F_PROTOCOL_FEATURES	30

#define VU_PF_MQ		0
#define VU_PF_REPLY_ACK		3
#define VU_PF_CONFIG		9
#define VU_PF_RESET_DEVICE	13

enum vu_request {
	VU_GET_FEATURES = 1,
	VU_SET_FEATURES = 2,
	VU_SET_OWNER = 3,
	VU_RESET_OWNER = 4,
	VU_SET_MEM_TABLE = 5,
	VU_SET_LOG_BASE = 6,
	VU_SET_LOG_FD = 7,
	VU_SET_VRING_NUM = 8,
	VU_SET_VRING_ADDR = 9,
	VU_SET_VRING_BASE = 10,
	VU_GET_VRING_BASE = 11,
	VU_SET_VRING_KICK = 12,
	VU_SET_VRING_CALL = 13,
	VU_SET_VRING_ERR = 14,
	VU_GET_PROTOCOL_FEATURES = 15,
	VU_SET_PROTOCOL_FEATURES = 16,
	VU_GET_QUEUE_NUM = 17,
	VU_SET_VRING_ENABLE = 18,
	VU_GET_CONFIG = 24,
	VU_SET_CONFIG = 25,
	VU_GET_INFLIGHT_FD = 31,
	VU_RESET_DEVICE = 34,
	VU_GET_MAX_MEM_SLOTS = 36,
	VU_GET_STATUS = 40,
	VU_REQUEST_MAX = 41,
};

struct vu_header {
	uint32_t request;
	uint32_t flags;
	uint32_t size;
} __attribute__((packed));

struct vu_region {
	uint64_t gpa;
	uint64_t size;
	uint64_t uaddr;
	uint64_t offset;
};

struct vu_memory {
	uint32_t nregions;
	uint32_t padding;
	struct vu_region regions[VU_MAX_REGIONS];
};

struct vu_vring_state {
	uint32_t index;
	uint32_t num;
};

struct vu_vring_addr {
	uint32_t index;
	uint32_t flags;
	uint64_t desc;
	uint64_t used;
	uint64_t avail;
	uint64_t log;
};

struct vu_config {
	uint32_t offset;
	uint32_t size;
	uint32_t flags;
	uint8_t data[VU_CONFIG_MAX];
};

/* The payload is kept aligned; header and payload go out as two iovecs. */
struct vu_msg {
	struct vu_header hdr;
	union {
		uint64_t u64;
		struct vu_vring_state state;
		struct vu_vring_addr addr;
		struct vu_memory memory;
		struct vu_config config;
		uint8_t raw[VU_MAX_PAYLOAD];
	};
};

static const char *const vu_names[VU_REQUEST_MAX] = {
	[VU_GET_FEATURES] = "GET_FEATURES",
	[VU_SET_FEATURES] = "SET_FEATURES",
	[VU_SET_OWNER] = "SET_OWNER",
	[VU_RESET_OWNER] = "RESET_OWNER",
	[VU_SET_MEM_TABLE] = "SET_MEM_TABLE",
	[VU_SET_LOG_BASE] = "SET_LOG_BASE",
	[VU_SET_LOG_FD] = "SET_LOG_FD",
	[VU_SET_VRING_NUM] = "SET_VRING_NUM",
	[VU_SET_VRING_ADDR] = "SET_VRING_ADDR",
	[VU_SET_VRING_BASE] = "SET_VRING_BASE",
	[VU_GET_VRING_BASE] = "GET_VRING_BASE",
	[VU_SET_VRING_KICK] = "SET_VRING_KICK",
	[VU_SET_VRING_CALL] = "SET_VRING_CALL",
	[VU_SET_VRING_ERR] = "SET_VRING_ERR",
	[VU_GET_PROTOCOL_FEATURES] = "GET_PROTOCOL_FEATURES",
	[VU_SET_PROTOCOL_FEATURES] = "SET_PROTOCOL_FEATURES",
	[VU_GET_QUEUE_NUM] = "GET_QUEUE_NUM",
	[VU_SET_VRING_ENABLE] = "SET_VRING_ENABLE",
	[VU_GET_CONFIG] = "GET_CONFIG",
	[VU_SET_CONFIG] = "SET_CONFIG",
	[VU_GET_INFLIGHT_FD] = "GET_INFLIGHT_FD",
	[VU_RESET_DEVICE] = "RESET_DEVICE",
	[VU_GET_MAX_MEM_SLOTS] = "GET_MAX_MEM_SLOTS",
	[VU_GET_STATUS] = "GET_STATUS",
};

static inline const char *vu_req_name(uint32_t req)
{
	return req < VU_REQUEST_MAX && vu_names[req] ? vu_names[req] : "unknown request";
}

/* Requests the front end waits a reply for, REPLY_ACK or not. */
static inline bool vu_has_reply(uint32_t req)
{
	switch (req) {
	case VU_GET_FEATURES:
	case VU_GET_PROTOCOL_FEATURES:
	case VU_GET_VRING_BASE:
	case VU_GET_QUEUE_NUM:
	case VU_GET_CONFIG:
	case VU_GET_INFLIGHT_FD:
	case VU_GET_MAX_MEM_SLOTS:
	case VU_GET_STATUS:
		return true;
	default:
		return false;
	}
}

/*
 * Reads one message and its file descriptors. Returns 0, or 1 when the
 * connection must be closed (peer gone, or a message we cannot parse past).
 * *truncated says more than VU_MAX_FDS came with it.
 */
static inline int vu_receive(int fd, struct vu_msg *msg, int *fds,
			     unsigned int *nfds, bool *truncated)
{
	char cbuf[CMSG_SPACE(VU_MAX_FDS * sizeof(int))];
	struct iovec iov = { .iov_base = &msg->hdr, .iov_len = sizeof(msg->hdr) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c;
	ssize_t n;

	*nfds = 0;
	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_WAITALL);
	while (n < 0 && errno == EINTR);
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		unsigned int i, k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < k; i++) {
			int f;

			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(f));
			if (*nfds < VU_MAX_FDS)
				fds[(*nfds)++] = f;
			else
				close(f);
		}
	}
	if (n == 0)
		return 1;
	if (n != sizeof(msg->hdr)) {
		logmsg("connection: %s in a message header",
		       n < 0 ? strerror(errno) : "peer closed");
		return 1;
	}
	if ((msg->hdr.flags & 0x3) != VU_VERSION ||
	    msg->hdr.flags & ~VU_FLAGS_KNOWN) {
		logmsg("connection: message flags %#x (protocol version 1 expected); closing",
		       msg->hdr.flags);
		return 1;
	}
	if (msg->hdr.size > VU_MAX_PAYLOAD) {
		logmsg("connection: %s with a %u-byte payload (at most %u); closing",
		       vu_req_name(msg->hdr.request), msg->hdr.size, VU_MAX_PAYLOAD);
		return 1;
	}
	/* The fds past VU_MAX_FDS were closed by the kernel. */
	*truncated = mh.msg_flags & MSG_CTRUNC;
	memset(msg->raw, 0, sizeof(msg->raw));
	if (!msg->hdr.size)
		return 0;
	do
		n = recv(fd, msg->raw, msg->hdr.size, MSG_WAITALL);
	while (n < 0 && errno == EINTR);
	if (n != msg->hdr.size) {
		logmsg("connection: %s: %s after %zd of %u payload bytes; closing",
		       vu_req_name(msg->hdr.request),
		       n < 0 ? strerror(errno) : "peer closed", n < 0 ? 0 : n,
		       msg->hdr.size);
		return 1;
	}
	return 0;
}

/* Sends msg back as the reply, with size payload bytes. */
static inline int vu_reply(int fd, struct vu_msg *msg, size_t size)
{
	struct iovec iov[2] = {
		{ .iov_base = &msg->hdr, .iov_len = sizeof(msg->hdr) },
		{ .iov_base = msg->raw, .iov_len = size },
	};
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	ssize_t n;

	msg->hdr.flags = VU_VERSION | VU_FLAG_REPLY;
	msg->hdr.size = size;
	n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	if (n != (ssize_t)(sizeof(msg->hdr) + size)) {
		logmsg("sending the reply to %s: %s", vu_req_name(msg->hdr.request),
		       n < 0 ? strerror(errno) : "short write");
		return -EPIPE;
	}
	return 0;
}

/*
 * The payload size and file descriptors of a message: 0, -EINVAL (refuse
 * it), or 1 (close the connection: a GET_* cannot be answered).
 */
static inline int vu_check_msg(const struct vu_msg *msg, unsigned int nfds)
{
	static const uint32_t fixed[VU_REQUEST_MAX] = {
		[VU_SET_FEATURES] = 8, [VU_SET_PROTOCOL_FEATURES] = 8,
		[VU_SET_VRING_NUM] = 8, [VU_SET_VRING_BASE] = 8,
		[VU_GET_VRING_BASE] = 8, [VU_SET_VRING_ENABLE] = 8,
		[VU_SET_VRING_KICK] = 8, [VU_SET_VRING_CALL] = 8,
		[VU_SET_VRING_ERR] = 8,
		[VU_SET_VRING_ADDR] = sizeof(struct vu_vring_addr),
	};
	uint32_t req = msg->hdr.request, size = msg->hdr.size;
	const char *name = vu_req_name(req);

	switch (req) {
	case VU_SET_MEM_TABLE:
	case VU_GET_CONFIG:
	case VU_SET_CONFIG:
		break;
	default:
		if (req < VU_REQUEST_MAX && vu_names[req] && size != fixed[req]) {
			logmsg("%s: payload of %u bytes, expected %u", name, size,
			       fixed[req]);
			return vu_has_reply(req) ? 1 : -EINVAL;
		}
	}
	switch (req) {
	case VU_SET_MEM_TABLE:
	case VU_SET_VRING_KICK:
	case VU_SET_VRING_CALL:
	case VU_SET_VRING_ERR:
		break;
	default:
		if (nfds) {
			logmsg("%s: %u unexpected file descriptors", name, nfds);
			return vu_has_reply(req) ? 1 : -EINVAL;
		}
	}
	return 0;
}

/*
 * What a back end answers to a request it does not handle: the GET_*s whose
 * protocol features it never offered close the connection (1), the rest
 * are refused.
 */
static inline int vu_unsupported(uint32_t req)
{
	const char *name = vu_req_name(req);

	switch (req) {
	case VU_GET_CONFIG:
	case VU_GET_INFLIGHT_FD:
	case VU_GET_MAX_MEM_SLOTS:
	case VU_GET_STATUS:
		logmsg("%s: not offered; closing the connection", name);
		return 1;
	case VU_SET_LOG_BASE:
	case VU_SET_LOG_FD:
		logmsg("%s: dirty logging is not supported", name);
		return -EOPNOTSUPP;
	default:
		logmsg("request %u (%s) is not supported", req, name);
		return -EOPNOTSUPP;
	}
}

/* SET_VRING_NUM: a split ring of a power-of-2 size up to 32768. */
static inline int vu_check_vring_num(const struct vu_vring_state *s)
{
	if (!s->num || s->num > 32768 || (s->num & (s->num - 1))) {
		logmsg("SET_VRING_NUM: vring %u: size %u is not a power of 2 up to 32768",
		       s->index, s->num);
		return -EINVAL;
	}
	return 0;
}

/* SET_VRING_BASE: a 16-bit split-ring index. */
static inline int vu_check_vring_base(const struct vu_vring_state *s)
{
	if (s->num > 0xffff) {
		logmsg("SET_VRING_BASE: vring %u: base %u is not a split-ring index",
		       s->index, s->num);
		return -EINVAL;
	}
	return 0;
}

/* SET_VRING_ENABLE: 0 or 1. */
static inline int vu_check_vring_enable(const struct vu_vring_state *s)
{
	if (s->num > 1) {
		logmsg("SET_VRING_ENABLE: vring %u: %u is not 0 or 1", s->index,
		       s->num);
		return -EINVAL;
	}
	return 0;
}

/* SET_VRING_ADDR: no dirty logging, and the alignment split rings need. */
static inline int vu_check_vring_addr(const struct vu_vring_addr *a)
{
	if (a->flags) {
		logmsg("SET_VRING_ADDR: vring %u: flags %#x (dirty logging is not supported)",
		       a->index, a->flags);
		return -EINVAL;
	}
	if (a->desc % 16 || a->avail % 2 || a->used % 4) {
		logmsg("SET_VRING_ADDR: vring %u: misaligned ring addresses",
		       a->index);
		return -EINVAL;
	}
	return 0;
}

/* A guest memory region as a back end maps it. */
struct vu_region_map {
	uint64_t gpa;		/* guest-physical start */
	uint64_t size;
	uint64_t uaddr;		/* start in the VMM's address space */
	uint64_t offset;	/* of the region in its fd */
	uint8_t *map;		/* our mapping of the fd, from offset 0 */
	size_t map_len;
};

static inline void vu_unmap_regions(struct vu_region_map *r, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		munmap(r[i].map, r[i].map_len);
}

/*
 * SET_MEM_TABLE: checks every region (one fd each, no wrap-around, within
 * its fd when the table arrives; a VMM can still shrink the fd later, which
 * the daemon must survive) and maps it. Returns the number of
 * regions, or -EINVAL with nothing left mapped.
 */
static inline int vu_map_mem_table(const struct vu_msg *msg, const int *fds,
				   unsigned int nfds, struct vu_region_map *out)
{
	const struct vu_memory *mem = &msg->memory;
	unsigned int i, n = mem->nregions;
	struct stat st;

	if (msg->hdr.size < 8 || n == 0 || n > VU_MAX_REGIONS ||
	    msg->hdr.size != 8 + n * sizeof(struct vu_region)) {
		logmsg("SET_MEM_TABLE: %u regions in %u bytes", n, msg->hdr.size);
		return -EINVAL;
	}
	if (nfds != n) {
		logmsg("SET_MEM_TABLE: %u regions but %u file descriptors", n, nfds);
		return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		const struct vu_region *vr = &mem->regions[i];
		struct vu_region_map *r = &out[i];

		if (!vr->size || vr->gpa + vr->size < vr->gpa ||
		    vr->uaddr + vr->size < vr->uaddr ||
		    vr->offset + vr->size < vr->offset) {
			logmsg("SET_MEM_TABLE: region %u (gpa %#" PRIx64 " size %#"
			       PRIx64 " offset %#" PRIx64 ") is invalid", i,
			       vr->gpa, vr->size, vr->offset);
			goto fail;
		}
		if (fstat(fds[i], &st) ||
		    (uint64_t)st.st_size < vr->offset + vr->size) {
			logmsg("SET_MEM_TABLE: region %u: offset %#" PRIx64 " + size %#"
			       PRIx64 " is beyond its fd's %#" PRIx64 " bytes", i,
			       vr->offset, vr->size, (uint64_t)st.st_size);
			goto fail;
		}
		r->gpa = vr->gpa;
		r->size = vr->size;
		r->uaddr = vr->uaddr;
		r->offset = vr->offset;
		r->map_len = vr->offset + vr->size;
		r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE,
			      MAP_SHARED, fds[i], 0);
		if (r->map == MAP_FAILED) {
			logmsg("SET_MEM_TABLE: region %u: cannot map %#zx bytes of its fd: %s",
			       i, r->map_len, strerror(errno));
			goto fail;
		}
	}
	return n;
fail:
	vu_unmap_regions(out, i);
	return -EINVAL;
}

/* vu_pid_path: PATH.pid into buf; -1 if it does not fit. */
static inline int vu_pid_path(char *buf, size_t len, const char *path)
{
	int n = snprintf(buf, len, "%s.pid", path);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/*
 * vu_lock_socket: take PATH.pid's lock (flock) and write our pid into it,
 * or say which daemon holds it. A daemon that exits unlinks the file while
 * it still holds the lock, so a lock won on a file that is no longer at
 * PATH.pid is worth nothing: try again.
 */
static inline int vu_lock_socket(const char *path)
{
	char pidpath[PATH_MAX], owner[32] = "";
	struct stat fst, pst;
	int fd, tries;
	ssize_t n;

	if (vu_pid_path(pidpath, sizeof(pidpath), path)) {
		logmsg("socket path %s is too long", path);
		return -1;
	}
	for (tries = 0; tries < 10; tries++) {
		fd = open(pidpath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
			  0600);
		if (fd < 0) {
			logmsg("cannot open the pid file %s: %s", pidpath,
			       strerror(errno));
			return -1;
		}
		if (flock(fd, LOCK_EX | LOCK_NB)) {
			int err = errno;

			n = pread(fd, owner, sizeof(owner) - 1, 0);
			owner[n > 0 ? n : 0] = '\0';
			owner[strcspn(owner, "\n")] = '\0';
			close(fd);
			if (err == EWOULDBLOCK)
				logmsg("%s is served by another daemon (pid %s, which holds the lock on %s)",
				       path, *owner ? owner : "unknown", pidpath);
			else
				logmsg("cannot lock %s: %s", pidpath,
				       strerror(err));
			return -1;
		}
		if (fstat(fd, &fst) || !S_ISREG(fst.st_mode) ||
		    fst.st_uid != geteuid()) {
			logmsg("%s is not a regular file of this user: remove it",
			       pidpath);
			close(fd);
			return -1;
		}
		if (!stat(pidpath, &pst) &&
		    fst.st_dev == pst.st_dev && fst.st_ino == pst.st_ino)
			break;
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		logmsg("%s keeps being replaced: giving up", pidpath);
		return -1;
	}
	n = snprintf(owner, sizeof(owner), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) || pwrite(fd, owner, n, 0) != n) {
		logmsg("cannot write %s: %s", pidpath, strerror(errno));
		unlink(pidpath);
		close(fd);
		return -1;
	}
	return fd;
}

/* --socket-group's argument: a group name or number; 0 or -1. */
static inline int vu_parse_group(const char *s, gid_t *out)
{
	struct group *g = getgrnam(s);
	unsigned long n;
	char *end;

	if (g) {
		*out = g->gr_gid;
		return 0;
	}
	errno = 0;
	n = strtoul(s, &end, 10);
	if (!*s || *end || errno || n > INT_MAX)
		return -1;
	*out = (gid_t)n;
	return 0;
}

/*
 * vu_listen: listen on the unix socket PATH for one vhost-user front end.
 * Only the caller's user may connect (mode 0600), and the members of
 * group as well if it is not (gid_t)-1 (mode 0660); the socket never has
 * a wider mode, not even between bind() and chmod(). One daemon per
 * socket: *lock_fd gets PATH.pid, locked, which the caller keeps open
 * until vu_unlisten(). A socket already at PATH is replaced only if
 * nothing listens on it; a live one, or any other file, is left alone.
 */
static inline int vu_listen(const char *path, gid_t group, int *lock_fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char pidpath[PATH_MAX];
	struct stat st;
	mode_t old_umask;
	int fd, lfd, err;

	if (strlen(path) >= sizeof(sa.sun_path) ||
	    vu_pid_path(pidpath, sizeof(pidpath), path)) {
		logmsg("socket path %s is too long", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	lfd = vu_lock_socket(path);
	if (lfd < 0)
		return -1;
	if (!lstat(path, &st)) {
		if (!S_ISSOCK(st.st_mode)) {
			logmsg("%s exists and is not a socket", path);
			goto fail_lock;
		}
		/* Something may listen there without our lock: ask it. */
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			logmsg("socket: %s", strerror(errno));
			goto fail_lock;
		}
		err = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ? errno : 0;
		close(fd);
		if (err != ECONNREFUSED) {
			logmsg("%s: %s", path, err ?
			       strerror(err) : "a live socket, something listens on it");
			goto fail_lock;
		}
		if (unlink(path)) {
			logmsg("cannot remove the stale socket %s: %s", path,
			       strerror(errno));
			goto fail_lock;
		}
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		logmsg("socket: %s", strerror(errno));
		goto fail_lock;
	}
	/* The mode comes from bind() itself: no chmod() of a path after. */
	old_umask = umask(group == (gid_t)-1 ? 0177 : 0117);
	err = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ? errno : 0;
	umask(old_umask);
	if (err) {
		logmsg("cannot listen on %s: %s", path, strerror(err));
		goto fail_fd;
	}
	if (group != (gid_t)-1 &&
	    fchownat(AT_FDCWD, path, (uid_t)-1, group, AT_SYMLINK_NOFOLLOW)) {
		logmsg("cannot give group %u access to %s: %s", (unsigned int)group,
		       path, strerror(errno));
		goto fail_unlink;
	}
	if (listen(fd, 1)) {
		logmsg("cannot listen on %s: %s", path, strerror(errno));
		goto fail_unlink;
	}
	*lock_fd = lfd;
	return fd;
fail_unlink:
	unlink(path);
fail_fd:
	close(fd);
fail_lock:
	unlink(pidpath);
	close(lfd);
	return -1;
}

/* vu_unlisten: remove the socket and its pid file, then drop the lock. */
static inline void vu_unlisten(const char *path, int listen_fd, int lock_fd)
{
	char pidpath[PATH_MAX];

	if (listen_fd >= 0)
		close(listen_fd);
	unlink(path);
	if (!vu_pid_path(pidpath, sizeof(pidpath), path))
		unlink(pidpath);
	if (lock_fd >= 0)
		close(lock_fd);
}

#endif
