// SPDX-License-Identifier: GPL-2.0
/*
 * vufsd: a vhost-user-fs device backend with any number of request queues.
 *
 * A VMM (QEMU's vhost-user-fs-pci, num-request-queues=N) connects to the
 * unix socket and sets up the device: features, guest memory (file
 * descriptors to map), and 1 + N vrings: the hiprio queue (FORGETs) and
 * N request queues, the way Linux numbers them. Each running vring gets a
 * thread that serves its FUSE requests against the shared directory
 * (fuse.c), so N queues are served in parallel. This file is the control
 * plane: options, the socket, the vhost-user messages, signals and the
 * statistics file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <linux/capability.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "../include/ownfile.h"
#include "fuse.h"
#include "log.h"
#include "sandbox.h"
#include "virtq.h"

#define MAX_REQUEST_QUEUES	64
#define MAX_VRINGS		(1 + MAX_REQUEST_QUEUES)
/* Name prefixes that --xattr-allow may add. */
#define MAX_XATTR_ALLOW		16

/* The rings' handler: FUSE, from fuse.c. */
static const struct vq_handler fuse_handler = {
	.worker_start = fuse_worker_start,
	.worker_end = fuse_worker_end,
	.serve = fuse_serve,
};

bool verbose;

static struct daemon {
	const char *socket_path;
	const char *shared_dir;
	const char *stats_path;
	unsigned int queues;		/* request queues */
	unsigned int nvrings;		/* 1 + queues */
	unsigned int busy_poll_us;
	unsigned int threads;		/* workers per request queue */
	unsigned int stats_ms;
	int listen_fd, conn_fd, sig_fd, stats_fd, lock_fd;
	int proc_fd;			/* /proc/self/fd */
	bool stats_sock;		/* stats_fd is the supervisor's socket */
	bool sandbox;			/* --sandbox namespace or userns */
	bool userns;			/* --sandbox userns */
	int seccomp;			/* --seccomp: 0 none, 1 log, 2 kill */
	pid_t pid;			/* as the host sees it */
	uint64_t features;
	uint64_t protocol_features;
	struct memory mem;
	bool mem_set;
	struct vq rings[MAX_VRINGS];
	uint64_t connections, messages, refused, seq;
	/* Counters of the connections that ended, added to the live ones. */
	struct vq_stats past[MAX_VRINGS];
} d = { .listen_fd = -1, .conn_fd = -1, .sig_fd = -1, .stats_fd = -1,
	.lock_fd = -1, .proc_fd = -1, .sandbox = true, .seccomp = 2, .queues = 1, .threads = 1,
	.stats_ms = 200 };

void logmsg(const char *fmt, ...)
{
	char buf[512];
	struct timespec ts;
	va_list ap;

	clock_gettime(CLOCK_REALTIME, &ts);
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s[%ld.%03ld]: %s\n", PROG, (long)ts.tv_sec % 100000,
		ts.tv_nsec / 1000000, buf);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static uint64_t offered_features(void)
{
	return 1ULL << VIRTIO_F_VERSION_1 |
	       1ULL << VIRTIO_RING_F_INDIRECT_DESC |
	       1ULL << VIRTIO_RING_F_EVENT_IDX |
	       1ULL << VU_F_PROTOCOL_FEATURES;
}

static uint64_t offered_protocol_features(void)
{
	return 1ULL << VU_PF_MQ | 1ULL << VU_PF_REPLY_ACK |
	       1ULL << VU_PF_RESET_DEVICE;
}

/* ---- statistics ---- */

static uint64_t load(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

struct stats_buf {
	char *buf;
	size_t len, size;
};

static void stats_op(const char *name, uint64_t n, void *arg)
{
	struct stats_buf *sb = arg;

	if (sb->len < sb->size - 64)
		sb->len += snprintf(sb->buf + sb->len, sb->size - sb->len,
				    "op %s %" PRIu64 "\n", name, n);
}

/*
 * Rewrites the stats file in place (readers see one inode, however they
 * cache names). A reader that needs counters covering its own requests
 * waits until seq has moved on by two.
 */
static void write_stats(void)
{
	char buf[8192];
	uint64_t inodes, handles, lk_acq, lk_cont, lk_ns;
	struct rusage ru;
	size_t len;
	unsigned int i;

	if (d.stats_fd < 0)
		return;
	fuse_counts(&inodes, &handles);
	fuse_lock_stats(&lk_acq, &lk_cont, &lk_ns);
	getrusage(RUSAGE_SELF, &ru);
	len = snprintf(buf, sizeof(buf),
		       "seq %" PRIu64 "\npid %d\nconnections %" PRIu64
		       "\nconnected %d\nmessages %" PRIu64 "\nrefused %" PRIu64
		       "\nqueues %u\ninodes %" PRIu64 "\nhandles %" PRIu64
		       "\ncpu_us %" PRIu64 "\nlock acquired %" PRIu64
		       "\nlock contended %" PRIu64 "\nlock wait_us %" PRIu64 "\n",
		       ++d.seq, (int)d.pid, d.connections, d.conn_fd >= 0,
		       d.messages, d.refused, d.nvrings, inodes, handles,
		       (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
		       ru.ru_utime.tv_usec + ru.ru_stime.tv_usec,
		       lk_acq, lk_cont, lk_ns / 1000);
	for (i = 0; i < d.nvrings && len < sizeof(buf) - 256; i++) {
		const struct vq_stats *s = &d.rings[i].stats, *p = &d.past[i];

		len += snprintf(buf + len, sizeof(buf) - len,
				"vq %u requests %" PRIu64 " bytes_in %" PRIu64
				" bytes_out %" PRIu64 " errors %" PRIu64
				" malformed %" PRIu64 " kicks %" PRIu64
				" notifies %" PRIu64 "\n", i,
				p->requests + load(&s->requests),
				p->bytes_in + load(&s->bytes_in),
				p->bytes_out + load(&s->bytes_out),
				p->errors + load(&s->errors),
				p->malformed + load(&s->malformed),
				p->kicks + load(&s->kicks),
				p->notifies + load(&s->notifies));
	}
	{
		struct stats_buf sb = { buf, len, sizeof(buf) };

		fuse_op_counts(stats_op, &sb);
		len = sb.len;
	}
	if (d.stats_sock) {
		/* Sandboxed: the supervisor writes it (sandbox.c). */
		if (send(d.stats_fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL) !=
		    (ssize_t)len)
			logmsg("sending the stats to the supervisor: %m (this update is dropped)");
	} else if (pwrite(d.stats_fd, buf, len, 0) != (ssize_t)len ||
		   ftruncate(d.stats_fd, len)) {
		logmsg("writing %s: %m", d.stats_path);
	}
}

/* ---- device state ---- */

static void stop_all(void)
{
	unsigned int i;

	for (i = 0; i < d.nvrings; i++)
		vring_stop(&d.rings[i]);
}

/* Starts every vring that has all it needs and is not running. */
static void start_ready(void)
{
	unsigned int i;
	int ret;

	for (i = 0; i < d.nvrings; i++) {
		struct vq *r = &d.rings[i];

		if (r->running || r->broken || !vring_ready(r, d.mem_set))
			continue;
		r->event_idx = d.features & (1ULL << VIRTIO_RING_F_EVENT_IDX);
		r->busy_poll_us = d.busy_poll_us;
		/* FORGETs need no parallelism: one worker for hiprio. */
		r->nthreads = i ? d.threads : 1;
		if (vring_translate(r, &d.mem)) {
			logmsg("vring %u: ring addresses are outside guest memory",
			       i);
			continue;
		}
		ret = vring_start(r);
		if (ret)
			logmsg("vring %u: cannot start: %s", i, strerror(-ret));
	}
}

/* Everything back to a fresh device; the connection stays. */
static void reset_device(void)
{
	unsigned int i;

	for (i = 0; i < d.nvrings; i++) {
		struct vq_stats *s = &d.rings[i].stats, *p = &d.past[i];

		vring_reset(&d.rings[i]);
		p->requests += s->requests;
		p->bytes_in += s->bytes_in;
		p->bytes_out += s->bytes_out;
		p->errors += s->errors;
		p->malformed += s->malformed;
		p->kicks += s->kicks;
		p->notifies += s->notifies;
		memset(s, 0, sizeof(*s));
	}
	if (d.mem_set)
		memory_unmap(&d.mem);
	d.mem_set = false;
	d.features = 0;
	/* The guest's inodes and open files went with its device. */
	fuse_reset();
}

static int set_mem_table(struct vu_msg *msg, int *fds, unsigned int nfds)
{
	struct memory m = { 0 };
	int n = vu_map_mem_table(msg, fds, nfds, m.regions);

	if (n < 0)
		return n;
	m.nregions = n;
	/* The rings stop using the old mapping before it goes. */
	stop_all();
	if (d.mem_set)
		memory_unmap(&d.mem);
	d.mem = m;
	d.mem_set = true;
	memory_publish(&d.mem);
	start_ready();
	return 0;
}

static struct vq *msg_ring(uint32_t index, const char *what)
{
	if (index >= d.nvrings) {
		logmsg("%s: vring %u does not exist (%u vrings)", what, index,
		       d.nvrings);
		return NULL;
	}
	return &d.rings[index];
}

/*
 * A kick, call or error descriptor must be an eventfd: the front end's
 * word is not enough. A pipe as call fd would block notify() once it
 * fills (a pipe's read end kept here as error fd never empties it), and a
 * regular file as kick fd is always readable, so its worker would spin.
 * Call and error fds are written non-blocking: a full eventfd counter
 * means the front end has a notification waiting already.
 */
static int check_eventfd(int fd, uint32_t req, unsigned int index)
{
	char name[32], link[64];
	ssize_t n;
	int fl, info;

	snprintf(name, sizeof(name), "%d", fd);
	n = readlinkat(d.proc_fd, name, link, sizeof(link) - 1);
	if (n < 0) {
		logmsg("%s: vring %u: %m", vu_req_name(req), index);
		return -errno;
	}
	link[n] = '\0';
	if (strcmp(link, "anon_inode:[eventfd]")) {
		logmsg("%s: vring %u: the descriptor is %s, not an eventfd",
		       vu_req_name(req), index, link);
		return -EINVAL;
	}
	/*
	 * A semaphore eventfd gives up its count one read at a time: with a
	 * huge count, a kick fd that never runs dry. Its fdinfo says so
	 * (Linux 6.5 and later; older kernels cannot tell, and pass).
	 */
	snprintf(name, sizeof(name), "../fdinfo/%d", fd);
	info = openat(d.proc_fd, name, O_RDONLY | O_CLOEXEC);
	if (info >= 0) {
		char text[256];
		ssize_t len = read(info, text, sizeof(text) - 1);

		close(info);
		text[len > 0 ? len : 0] = '\0';
		if (strstr(text, "eventfd-semaphore:\t1") ||
		    strstr(text, "eventfd-semaphore: 1")) {
			logmsg("%s: vring %u: a semaphore eventfd", vu_req_name(req),
			       index);
			return -EINVAL;
		}
	}
	if (req == VU_SET_VRING_KICK)
		return 0;	/* made non-blocking when the ring starts */
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		logmsg("%s: vring %u: %m", vu_req_name(req), index);
		return -errno;
	}
	return 0;
}

static int set_vring_fd(struct vu_msg *msg, int *fds, unsigned int nfds)
{
	uint32_t req = msg->hdr.request;
	unsigned int index = msg->u64 & VU_RING_INDEX_MASK;
	bool nofd = msg->u64 & VU_RING_NOFD;
	struct vq *r;
	int fd;

	if (msg->u64 & ~(VU_RING_INDEX_MASK | VU_RING_NOFD)) {
		logmsg("%s: unknown bits in %#" PRIx64, vu_req_name(req), msg->u64);
		return -EINVAL;
	}
	r = msg_ring(index, vu_req_name(req));
	if (!r)
		return -EINVAL;
	if (nfds != (nofd ? 0u : 1u)) {
		logmsg("%s: vring %u: %u file descriptors with%s the no-fd flag",
		       vu_req_name(req), index, nfds, nofd ? "" : "out");
		return -EINVAL;
	}
	if (!nofd) {
		int ret = check_eventfd(fds[0], req, index);

		if (ret)
			return ret;
	}
	fd = nofd ? -1 : fds[0];
	fds[0] = -1;	/* ours now */
	switch (req) {
	case VU_SET_VRING_KICK:
		vring_stop(r);
		close_fd(&r->kick_fd);
		r->kick_fd = fd;
		if (fd < 0)
			logmsg("vring %u: no kick eventfd: the ring stays stopped (polling front ends are not supported)",
			       index);
		start_ready();
		break;
	case VU_SET_VRING_CALL:
		/* QEMU swaps call fds on running rings to mask interrupts. */
		pthread_mutex_lock(&r->call_lock);
		close_fd(&r->call_fd);
		r->call_fd = fd;
		pthread_mutex_unlock(&r->call_lock);
		break;
	default:
		close_fd(&r->err_fd);
		r->err_fd = fd;
		break;
	}
	return 0;
}

static int reply_u64(struct vu_msg *msg, uint64_t val)
{
	msg->u64 = val;
	return vu_reply(d.conn_fd, msg, sizeof(msg->u64));
}

/* Returns 0, a negative errno (refused), or 1: close the connection. */
static int handle(struct vu_msg *msg, int *fds, unsigned int nfds)
{
	uint32_t req = msg->hdr.request;
	const char *name = vu_req_name(req);
	struct vq *r;
	int ret;

	ret = vu_check_msg(msg, nfds);
	if (ret)
		return ret;
	switch (req) {
	case VU_GET_FEATURES:
		return reply_u64(msg, offered_features()) ? 1 : 0;
	case VU_SET_FEATURES:
		if (msg->u64 & ~offered_features()) {
			logmsg("SET_FEATURES: %#" PRIx64 " has bits never offered",
			       msg->u64);
			return -EINVAL;
		}
		if (d.features != msg->u64) {
			/* Event idx changes how the rings notify: restart them. */
			stop_all();
			d.features = msg->u64;
			start_ready();
		}
		return 0;
	case VU_GET_PROTOCOL_FEATURES:
		return reply_u64(msg, offered_protocol_features()) ? 1 : 0;
	case VU_SET_PROTOCOL_FEATURES:
		if (msg->u64 & ~offered_protocol_features()) {
			logmsg("SET_PROTOCOL_FEATURES: %#" PRIx64 " has bits never offered",
			       msg->u64);
			return -EINVAL;
		}
		d.protocol_features = msg->u64;
		return 0;
	case VU_GET_QUEUE_NUM:
		return reply_u64(msg, d.nvrings) ? 1 : 0;
	case VU_SET_OWNER:
		return 0;
	case VU_RESET_OWNER:
	case VU_RESET_DEVICE:
		reset_device();
		return 0;
	case VU_SET_MEM_TABLE:
		return set_mem_table(msg, fds, nfds);
	case VU_SET_VRING_NUM:
		r = msg_ring(msg->state.index, name);
		if (!r)
			return -EINVAL;
		if (vu_check_vring_num(&msg->state))
			return -EINVAL;
		vring_stop(r);
		r->num = msg->state.num;
		start_ready();
		return 0;
	case VU_SET_VRING_BASE:
		r = msg_ring(msg->state.index, name);
		if (!r)
			return -EINVAL;
		if (vu_check_vring_base(&msg->state))
			return -EINVAL;
		vring_stop(r);
		r->last_avail = msg->state.num;
		r->broken = false;
		start_ready();
		return 0;
	case VU_SET_VRING_ADDR: {
		struct vu_vring_addr *a = &msg->addr;

		r = msg_ring(a->index, name);
		if (!r)
			return -EINVAL;
		if (vu_check_vring_addr(a))
			return -EINVAL;
		vring_stop(r);
		r->desc_uaddr = a->desc;
		r->avail_uaddr = a->avail;
		r->used_uaddr = a->used;
		r->addr_set = true;
		if (d.mem_set && r->num && vring_translate(r, &d.mem)) {
			logmsg("SET_VRING_ADDR: vring %u: rings outside guest memory",
			       a->index);
			r->addr_set = false;
			return -EFAULT;
		}
		start_ready();
		return 0;
	}
	case VU_GET_VRING_BASE:
		r = msg_ring(msg->state.index, name);
		if (!r)
			return 1;
		/* Stops the ring after the request in progress; it needs a new kick fd. */
		vring_stop(r);
		close_fd(&r->kick_fd);
		msg->state.num = r->last_avail;
		return vu_reply(d.conn_fd, msg, sizeof(msg->state)) ? 1 : 0;
	case VU_SET_VRING_KICK:
	case VU_SET_VRING_CALL:
	case VU_SET_VRING_ERR:
		return set_vring_fd(msg, fds, nfds);
	case VU_SET_VRING_ENABLE:
		r = msg_ring(msg->state.index, name);
		if (!r)
			return -EINVAL;
		if (vu_check_vring_enable(&msg->state))
			return -EINVAL;
		r->enable_seen = true;
		r->enabled = msg->state.num;
		if (!r->enabled)
			vring_stop(r);
		start_ready();
		return 0;
	default:
		return vu_unsupported(req);
	}
}

/* ---- the connection ---- */

static void disconnect(void)
{
	/* Ring threads finish the request they serve, then memory goes. */
	reset_device();
	d.protocol_features = 0;
	close_fd(&d.conn_fd);
	logmsg("connection closed; the guest's inodes and open files were released");
	write_stats();
}

/* Returns 1 when the connection is to be closed. */
static int serve_one(void)
{
	static struct vu_msg msg;
	int fds[VU_MAX_FDS];
	unsigned int nfds, i;
	bool need_reply, truncated = false;
	int ret;

	ret = vu_receive(d.conn_fd, &msg, fds, &nfds, &truncated);
	if (ret) {
		for (i = 0; i < nfds; i++)
			close(fds[i]);
		return 1;
	}
	d.messages++;
	need_reply = msg.hdr.flags & VU_FLAG_NEED_REPLY;
	if (verbose)
		logmsg("<- %s (%u bytes, %u fds)", vu_req_name(msg.hdr.request),
		       msg.hdr.size, nfds);
	if (truncated) {
		logmsg("%s: more than %u file descriptors",
		       vu_req_name(msg.hdr.request), VU_MAX_FDS);
		ret = vu_has_reply(msg.hdr.request) ? 1 : -EINVAL;
	} else {
		ret = handle(&msg, fds, nfds);
	}
	for (i = 0; i < nfds; i++)
		close_fd(&fds[i]);
	if (ret)
		d.refused++;
	if (ret == 1)
		return 1;
	if (ret)
		logmsg("%s refused: %s", vu_req_name(msg.hdr.request), strerror(-ret));
	if (need_reply && !vu_has_reply(msg.hdr.request) &&
	    d.protocol_features & (1ULL << VU_PF_REPLY_ACK))
		return reply_u64(&msg, ret ? 1 : 0) ? 1 : 0;
	return 0;
}

static void accept_one(void)
{
	struct timeval tv = { .tv_sec = 5 };
	int fd;

	fd = accept4(d.listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno != EINTR && errno != EAGAIN)
			logmsg("accept: %m");
		return;
	}
	/* A peer that stops halfway through a message is dropped. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	d.conn_fd = fd;
	d.connections++;
	logmsg("connection %" PRIu64 " accepted", d.connections);
}

/* ---- main ---- */

static void usage(FILE *f)
{
	fprintf(f,
"Usage: " PROG " --socket PATH --shared-dir DIR [options]\n"
"\n"
"Serve DIR to a guest as a virtio-fs device with several request queues,\n"
"over vhost-user on the unix socket PATH. With QEMU:\n"
"  -object memory-backend-memfd,id=mem,size=4G,share=on -machine memory-backend=mem\n"
"  -chardev socket,id=fs0,path=PATH\n"
"  -device vhost-user-fs-pci,chardev=fs0,tag=TAG,num-request-queues=N\n"
"and in the guest: mount -t virtiofs TAG /mnt\n"
"\n"
"Options:\n"
"  -s, --socket PATH       unix socket to listen on, mode 0600: only this user\n"
"                          may connect. PATH.pid holds the daemon's pid and\n"
"                          lock: a second daemon on PATH is refused. A socket\n"
"                          nothing listens on is replaced; a live one, or any\n"
"                          other file, is not\n"
"  -g, --socket-group GRP  let group GRP (name or number) connect too (0660)\n"
"      --sandbox MODE      namespace (default): serve from new namespaces with\n"
"                          the shared directory as root and few capabilities\n"
"                          (needs root); userns: the same in a user namespace\n"
"                          of its own, in which it is root (any user may);\n"
"                          none: as started, for debugging\n"
"      --uid-map IN:OUT:N  with userns: namespace ids IN..IN+N-1 are host ids\n"
"      --gid-map IN:OUT:N  OUT..; repeatable (default 0:own id:1). Guest ids\n"
"                          are the namespace's: these maps translate them.\n"
"                          Maps other than one's own ids go through\n"
"                          newuidmap/newgidmap and /etc/subuid, /etc/subgid\n"
"      --seccomp MODE      in the sandbox, a system call outside the list\n"
"                          kills the server (kill, the default), is logged\n"
"                          to the audit log (log), or no filter (none)\n"
"      --allow-devices     let the guest make device nodes in the share (off:\n"
"                          MKNOD of one fails with EPERM). A node the guest\n"
"                          makes opens a host device to any host user its\n"
"                          mode lets in: mount the share nodev\n"
"  -x, --xattr             serve extended attributes: user.* only, unless\n"
"                          --xattr-allow adds prefixes (default: none at all)\n"
"  -X, --xattr-allow PFX   also let the guest use names starting with PFX, e.g.\n"
"                          trusted. (up to %u; security. lets the guest set\n"
"                          file capabilities and LSM labels on the host)\n"
"  -c, --cache MODE        what the guest may cache: auto (default: names and\n"
"                          attributes for 1 s, file data until they change),\n"
"                          always (a day, data kept across opens: only if\n"
"                          nothing else changes the directory), never (every\n"
"                          read and write comes here)\n"
"      --writeback         the guest caches writes too and sends them later\n"
"                          (faster small writes; not with --cache never)\n"
"      --inode-file-handles MODE\n"
"                          never (default): a descriptor per inode the guest\n"
"                          holds; prefer: a file handle instead, opened only\n"
"                          while in use (needs CAP_DAC_READ_SEARCH), so a tree\n"
"                          larger than the descriptor limit can be held. The\n"
"                          server then keeps that capability: taken over, it\n"
"                          could open any file of the share's file system\n"
"      --posix-acl         with --xattr: POSIX ACLs (system.posix_acl_access and\n"
"                          _default), checked by the guest; a parent's default\n"
"                          ACL replaces the umask of what is made in it\n"
"  -d, --shared-dir DIR    directory to share; the guest cannot reach outside it\n"
"  -q, --queues N          request queues, 1-%u (default 1); give QEMU the same\n"
"                          num-request-queues\n"
"  -t, --threads N         workers per request queue, 1-%u (default 1): with more,\n"
"                          one queue serves several requests at a time\n"
"  -p, --busy-poll US      after a ring runs empty, poll it for US microseconds\n"
"                          before sleeping on the guest's kick (default 0)\n"
"  -S, --stats FILE        write counters to FILE every --stats-interval ms and\n"
"                          at exit (per vring: requests, bytes, errors, ...)\n"
"  -i, --stats-interval MS default 200\n"
"  -v, --verbose           log every vhost-user message and refused request\n"
"  -h, --help              this text\n"
"\n"
"One connection is served at a time; when the VMM goes away, the guest's\n"
"inodes and open files are released and the next connection is accepted.\n"
"SIGTERM, SIGINT or SIGHUP: the rings finish the requests they serve, and\n"
PROG " exits 0.\n",
		MAX_XATTR_ALLOW, MAX_REQUEST_QUEUES, MAX_WORKERS);
}

static int parse_uint(const char *s, unsigned int min, unsigned int max,
		      unsigned int *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/*
 * Every inode the guest holds and every file it opens is a descriptor
 * here: take the most the system allows (fs.nr_open, when privileged
 * enough to raise the hard limit), else the hard limit.
 */
static void raise_fd_limit(void)
{
	unsigned long long nr_open = 0;
	struct rlimit rl;
	FILE *f;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	f = fopen("/proc/sys/fs/nr_open", "re");
	if (f) {
		if (fscanf(f, "%llu", &nr_open) != 1)
			nr_open = 0;
		fclose(f);
	}
	if (nr_open > rl.rlim_max) {
		struct rlimit want = { .rlim_cur = nr_open, .rlim_max = nr_open };

		if (!setrlimit(RLIMIT_NOFILE, &want))
			rl = want;
	}
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (!getrlimit(RLIMIT_NOFILE, &rl) && verbose)
		logmsg("descriptor limit %llu", (unsigned long long)rl.rlim_cur);
}

/* --seccomp, by d.seccomp. */
static const char *const seccomp_modes[] = { "none", "log", "kill" };
static const char *const sandbox_modes[] = { "none", "namespace", "userns" };
static const char *const handle_modes[] = { "never", "prefer" };

/* The index of s among the n names, or -1: an option's choice of words. */
static int choice(const char *s, const char *const *names, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

/* Remove the socket and the pid file, drop the lock. */
static void unlisten(void)
{
	vu_unlisten(d.socket_path, d.listen_fd, d.lock_fd);
	d.listen_fd = d.lock_fd = -1;
}

/* Does an --xattr-allow prefix let the guest at names under ns? */
static bool allows_ns(const char *const *allow, unsigned int n, const char *ns)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (!strncmp(allow[i], ns, strlen(allow[i]) < strlen(ns) ?
			     strlen(allow[i]) : strlen(ns)))
			return true;
	return false;
}

/*
 * What the sandboxed server keeps: the file operations act on files of
 * any owner and mode (DAC_OVERRIDE, FOWNER), change owners (CHOWN) and
 * keep set-id bits where the kernel would (FSETID), and a worker takes a
 * guest caller's ids for a request and gives them back (SETUID, SETGID).
 * DAC_READ_SEARCH only with --inode-file-handles prefer: it is what
 * open_by_handle_at() asks for, and with it a handle made up by a
 * compromised server opens any file of the share's file system, outside
 * the share too. MKNOD only with --allow-devices; trusted.* xattrs need
 * SYS_ADMIN and security.capability SETFCAP, kept only when --xattr-allow
 * lets the guest at them.
 */
static uint64_t server_caps(const char *const *allow, unsigned int n,
			    bool devices, bool handles)
{
	uint64_t keep = 1ULL << CAP_CHOWN | 1ULL << CAP_DAC_OVERRIDE |
			1ULL << CAP_FOWNER | 1ULL << CAP_FSETID |
			1ULL << CAP_SETUID | 1ULL << CAP_SETGID;

	if (handles)
		keep |= 1ULL << CAP_DAC_READ_SEARCH;
	if (devices)
		keep |= 1ULL << CAP_MKNOD;
	if (allows_ns(allow, n, "trusted."))
		keep |= 1ULL << CAP_SYS_ADMIN;
	if (allows_ns(allow, n, "security."))
		keep |= 1ULL << CAP_SETFCAP;
	return keep;
}

/* INSIDE:OUTSIDE:COUNT appended to maps (at most USERNS_MAX_MAPS). */
static int parse_idmap(const char *s, struct idmap *maps, unsigned int *n)
{
	unsigned int in, out, count;
	char end;

	if (*n == USERNS_MAX_MAPS ||
	    sscanf(s, "%u:%u:%u%c", &in, &out, &count, &end) != 3 || !count ||
	    in + count < in || out + count < out)
		return -1;
	maps[(*n)++] = (struct idmap){ in, out, count };
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "socket-group", required_argument, NULL, 'g' },
		{ "sandbox", required_argument, NULL, 'B' },
		{ "allow-devices", no_argument, NULL, 'D' },
		{ "seccomp", required_argument, NULL, 'C' },
		{ "xattr", no_argument, NULL, 'x' },
		{ "cache", required_argument, NULL, 'c' },
		{ "writeback", no_argument, NULL, 'W' },
		{ "inode-file-handles", required_argument, NULL, 'H' },
		{ "posix-acl", no_argument, NULL, 'A' },
		{ "uid-map", required_argument, NULL, 'U' },
		{ "gid-map", required_argument, NULL, 'G' },
		{ "xattr-allow", required_argument, NULL, 'X' },
		{ "shared-dir", required_argument, NULL, 'd' },
		{ "queues", required_argument, NULL, 'q' },
		{ "threads", required_argument, NULL, 't' },
		{ "busy-poll", required_argument, NULL, 'p' },
		{ "stats", required_argument, NULL, 'S' },
		{ "stats-interval", required_argument, NULL, 'i' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	static const char *allow[MAX_XATTR_ALLOW];
	unsigned int nallow = 0;
	static const char *const cache_modes[] = {
		[CACHE_AUTO] = "auto", [CACHE_ALWAYS] = "always",
		[CACHE_NEVER] = "never",
	};
	enum fuse_cache cache = CACHE_AUTO;
	bool xattr = false, devices = false, writeback = false, handles = false;
	bool acl = false;
	struct userns un = { .nuid = 0 };
	gid_t group = (gid_t)-1;
	struct stat st;
	sigset_t mask;
	unsigned int i;
	bool quit = false;
	int c, k, proc_fd = -1;

	/*
	 * Nothing inherited stays open: a directory descriptor from whoever
	 * started us would lead the sandboxed server out of its root.
	 */
	close_range(3, ~0U, 0);
	while ((c = getopt_long(argc, argv, "s:g:xX:c:d:q:t:p:S:i:vh", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			d.socket_path = optarg;
			break;
		case 'g':
			if (vu_parse_group(optarg, &group)) {
				logmsg("--socket-group %s: no such group", optarg);
				return 2;
			}
			break;
		case 'B':
			k = choice(optarg, sandbox_modes, 3);
			if (k < 0) {
				logmsg("--sandbox %s: give namespace, userns or none", optarg);
				return 2;
			}
			d.sandbox = k != 0;
			d.userns = k == 2;
			break;
		case 'U':
		case 'G':
			if (parse_idmap(optarg, c == 'U' ? un.uid : un.gid,
					c == 'U' ? &un.nuid : &un.ngid)) {
				logmsg("--%s %s: give INSIDE:OUTSIDE:COUNT, up to %u of them",
				       c == 'U' ? "uid-map" : "gid-map", optarg,
				       USERNS_MAX_MAPS);
				return 2;
			}
			break;
		case 'C':
			d.seccomp = choice(optarg, seccomp_modes, 3);
			if (d.seccomp < 0) {
				logmsg("--seccomp %s: give kill, log or none", optarg);
				return 2;
			}
			break;
		case 'D':
			devices = true;
			break;
		case 'x':
			xattr = true;
			break;
		case 'c':
			k = choice(optarg, cache_modes, 3);
			if (k < 0) {
				logmsg("--cache %s: give auto, always or never", optarg);
				return 2;
			}
			cache = k;
			break;
		case 'W':
			writeback = true;
			break;
		case 'A':
			acl = true;
			break;
		case 'H':
			k = choice(optarg, handle_modes, 2);
			if (k < 0) {
				logmsg("--inode-file-handles %s: give never or prefer",
				       optarg);
				return 2;
			}
			handles = k;
			break;
		case 'X':
			if (!*optarg || nallow == MAX_XATTR_ALLOW) {
				logmsg("--xattr-allow '%s': give a non-empty prefix, at most %u of them",
				       optarg, MAX_XATTR_ALLOW);
				return 2;
			}
			allow[nallow++] = optarg;
			break;
		case 'd':
			d.shared_dir = optarg;
			break;
		case 'q':
			if (parse_uint(optarg, 1, MAX_REQUEST_QUEUES, &d.queues)) {
				logmsg("--queues %s: give 1 to %u", optarg,
				       MAX_REQUEST_QUEUES);
				return 2;
			}
			break;
		case 't':
			if (parse_uint(optarg, 1, MAX_WORKERS, &d.threads)) {
				logmsg("--threads %s: give 1 to %u", optarg,
				       MAX_WORKERS);
				return 2;
			}
			break;
		case 'p':
			if (parse_uint(optarg, 0, 1000000, &d.busy_poll_us)) {
				logmsg("--busy-poll %s: give 0 to 1000000 microseconds",
				       optarg);
				return 2;
			}
			break;
		case 'S':
			d.stats_path = optarg;
			break;
		case 'i':
			if (parse_uint(optarg, 10, 3600000, &d.stats_ms)) {
				logmsg("--stats-interval %s: give 10 to 3600000 ms",
				       optarg);
				return 2;
			}
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		logmsg("unexpected argument '%s' (see --help)", argv[optind]);
		return 2;
	}
	if (writeback && cache == CACHE_NEVER) {
		logmsg("--writeback caches writes: not with --cache never");
		return 2;
	}
	if ((un.nuid || un.ngid) && !d.userns) {
		logmsg("--uid-map and --gid-map need --sandbox userns");
		return 2;
	}
	if (d.userns && !un.nuid) {
		/* By default only the daemon's own ids, as the namespace's root. */
		un.uid[0] = (struct idmap){ 0, geteuid(), 1 };
		un.nuid = 1;
	}
	if (d.userns && !un.ngid) {
		un.gid[0] = (struct idmap){ 0, getegid(), 1 };
		un.ngid = 1;
	}
	if (acl && !xattr) {
		logmsg("--posix-acl needs --xattr");
		return 2;
	}
	if (nallow && !xattr) {
		logmsg("--xattr-allow needs --xattr");
		return 2;
	}
	if (!d.socket_path || !d.shared_dir) {
		logmsg("--socket and --shared-dir are required (see --help)");
		return 2;
	}
	if (stat(d.shared_dir, &st) || !S_ISDIR(st.st_mode)) {
		logmsg("--shared-dir %s: %s", d.shared_dir,
		       errno && !S_ISDIR(st.st_mode) ? strerror(errno) :
		       "not a directory");
		return 1;
	}
	d.nvrings = 1 + d.queues;
	for (i = 0; i < MAX_VRINGS; i++) {
		struct vq *r = &d.rings[i];

		r->index = i;
		r->kick_fd = r->call_fd = r->err_fd = r->stop_fd = -1;
		pthread_mutex_init(&r->call_lock, NULL);
		pthread_mutex_init(&r->lock, NULL);
		r->handler = &fuse_handler;
	}
	raise_fd_limit();
	umask(0);	/* the guest's kernel applied its umask already */
	fuse_set_xattr(xattr, allow, nallow);
	fuse_set_acl(acl);
	fuse_set_devices(devices);
	fuse_set_cache(cache, writeback);
	fuse_set_handles(handles);
	if (d.stats_path) {
		d.stats_fd = own_file_open(d.stats_path);
		if (d.stats_fd < 0) {
			logmsg("--stats %s: %m%s", d.stats_path,
			       errno == ELOOP || errno == EPERM || errno == ENOTDIR ?
			       " (a link on the way or at the end, a directory others may write to, or not a regular file of ours with one name: not written)" :
			       "");
			return 1;
		}
	}
	d.listen_fd = vu_listen(d.socket_path, group, &d.lock_fd);
	if (d.listen_fd < 0)
		return 1;
	d.pid = getpid();
	if (d.sandbox) {
		pid_t supervisor = d.pid;

		/* Returns in the sandboxed server only. */
		if (sandbox_enter(d.shared_dir, &proc_fd, &d.pid, unlisten,
				  d.userns ? &un : NULL, &d.stats_fd)) {
			if (getpid() == supervisor)
				unlisten();
			return 1;
		}
		close(d.lock_fd);	/* the supervisor's */
		d.lock_fd = -1;
		d.stats_sock = d.stats_fd >= 0;
	}
	if (proc_fd < 0)
		proc_fd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (proc_fd < 0) {
		logmsg("cannot open /proc/self/fd (is /proc mounted?): %m");
		if (!d.sandbox)
			unlisten();
		return 1;
	}
	d.proc_fd = proc_fd;
	if (creds_init() ||
	    fuse_setup(d.sandbox ? "/" : d.shared_dir, proc_fd) ||
	    (d.sandbox && sandbox_drop_caps(server_caps(allow, nallow, devices,
							 handles)))) {
		if (!d.sandbox)
			unlisten();
		return 1;
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGUSR1);
	sigaddset(&mask, SIGPIPE);
	/* Blocked before the ring threads exist, so they inherit the mask. */
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	d.sig_fd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (d.sig_fd < 0 || memory_guard_init()) {
		logmsg("cannot set up signal handling: %m");
		if (!d.sandbox)
			unlisten();
		return 1;
	}
	/* Last: everything above needed calls the filter does not allow. */
	if (d.sandbox && d.seccomp && sandbox_seccomp(d.seccomp == 1, handles))
		return 1;
	logmsg("serving %s on %s with %u request queue%s, %u worker%s each%s",
	       d.shared_dir, d.socket_path, d.queues, d.queues == 1 ? "" : "s",
	       d.threads, d.threads == 1 ? "" : "s",
	       d.busy_poll_us ? " (busy-polling)" : "");
	write_stats();

	while (!quit) {
		struct pollfd pfd[3] = {
			{ .fd = d.sig_fd, .events = POLLIN },
			{ .fd = d.conn_fd >= 0 ? d.conn_fd : d.listen_fd,
			  .events = POLLIN },
			{ .fd = memory_fault_fd(), .events = POLLIN },
		};
		int n = poll(pfd, 3, d.stats_fd >= 0 ? (int)d.stats_ms : -1);
		uint64_t faults;

		if (n < 0 && errno != EINTR) {
			logmsg("poll: %m");
			break;
		}
		if (pfd[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(d.sig_fd, &si, sizeof(si)) == sizeof(si) &&
			    (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT ||
			     si.ssi_signo == SIGHUP)) {
				logmsg("signal %u: finishing the requests in flight and exiting",
				       si.ssi_signo);
				quit = true;
			}
		} else if (pfd[2].revents & POLLIN) {
			if (read(memory_fault_fd(), &faults, sizeof(faults)) ==
			    sizeof(faults) && d.conn_fd >= 0) {
				logmsg("guest memory shrank under a request (the VMM cut the file behind it): %" PRIu64 " page fault%s, dropping the connection",
				       faults, faults == 1 ? "" : "s");
				disconnect();
			}
		} else if (pfd[1].revents) {
			if (d.conn_fd < 0)
				accept_one();
			else if (serve_one())
				disconnect();
		}
		write_stats();
	}
	if (d.conn_fd >= 0)
		disconnect();
	write_stats();
	/* Sandboxed, the supervisor removes the socket: it is not here. */
	if (!d.sandbox)
		unlisten();
	return 0;
}
