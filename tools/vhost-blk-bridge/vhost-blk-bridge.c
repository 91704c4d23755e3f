// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk-bridge: a vhost-user-blk device backend whose data path is the
 * kernel's vhost-blk.
 *
 * A VMM (QEMU, Cloud Hypervisor, ...) connects to the unix socket and
 * configures a vhost-user-blk device: features, guest memory (as file
 * descriptors), vrings and their kick and call eventfds. The bridge maps the
 * guest memory into its own address space, opens /dev/vhost-blk and programs
 * it with the same memory table (pointing at its own mapping), the vrings
 * (addresses translated from the VMM's mapping into ours) and the VMM's own
 * eventfds. From then on the guest's kicks wake vhost-blk's workers, which
 * do the I/O on the backing device or file and signal the VMM's call
 * eventfds. The bridge only handles vhost-user control messages.
 *
 * The kernel device is rebuilt from the bridge's state whenever the set of
 * running vrings, the memory table or the features change: the old device
 * is drained (every request in flight completes and is returned to the
 * guest), the vrings' positions are read back, and a new device is
 * programmed. Control-plane events are rare, so this keeps the state
 * machine small and every transition the same.
 *
 * This file is the vhost-user side: options, the socket, the messages and
 * the statistics file. kernel.c programs vhost-blk; config.c describes the
 * device from the backend (bridge.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "bridge.h"

void logmsg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs(PROG ": ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void unmap_memory(struct bridge *b)
{
	vu_unmap_regions(b->regions, b->nregions);
	b->nregions = 0;
	b->mem_set = false;
}

/* Forgets everything the VMM set up; the connection stays. */
static void reset_device(struct bridge *b)
{
	unsigned int i;

	kernel_stop(b);
	unmap_memory(b);
	for (i = 0; i < MAX_QUEUES; i++) {
		struct ring *r = &b->rings[i];
		struct vring_stats total = r->total;

		close_fd(&r->kick);
		close_fd(&r->call);
		close_fd(&r->err);
		memset(r, 0, sizeof(*r));
		r->kick = r->call = r->err = -1;
		r->total = total;
	}
	b->features = 0;
	b->features_set = false;
	b->dirty = false;
}

static void write_stats(struct bridge *b)
{
	struct vring_stats s[MAX_QUEUES];
	bool have_stats = false;
	struct rusage ru;
	unsigned int i;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (!b->stats_path)
		return;
	if (b->vfd >= 0)
		have_stats = !kernel_stats(b, s, b->queues);
	f = open_memstream(&buf, &len);
	if (!f) {
		logmsg("cannot write %s: %m", b->stats_path);
		return;
	}
	getrusage(RUSAGE_THREAD, &ru);
	fprintf(f, "seq %" PRIu64 "\npid %d\nconnections %" PRIu64
		"\nmessages %" PRIu64 "\nerrors %" PRIu64 "\nrebuilds %" PRIu64
		"\nrunning %d\ncpu_us %lld\n", ++b->seq, (int)b->host_pid,
		b->connections, b->messages, b->errors, b->rebuilds,
		b->vfd >= 0,
		(long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
		ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
	for (i = 0; i < b->queues; i++) {
		struct ring *r = &b->rings[i];
		struct vring_stats t = r->total;

		if (r->programmed && have_stats) {
			stats_add(&t, &s[i]);
			t.inflight = s[i].inflight;
			t.worker_id = s[i].worker_id;
		}
		fprintf(f, "vring %u requests %llu errors %llu read_bytes %llu"
			" write_bytes %llu flushes %llu discards %llu kicks %llu"
			" inflight %llu worker %u running %d poll_hits %llu"
			" poll_completions %llu\n", i,
			(unsigned long long)t.requests,
			(unsigned long long)t.errors,
			(unsigned long long)t.read_bytes,
			(unsigned long long)t.write_bytes,
			(unsigned long long)t.flushes,
			(unsigned long long)t.discards,
			(unsigned long long)t.kicks,
			(unsigned long long)t.inflight, t.worker_id,
			r->programmed, (unsigned long long)t.poll_hits,
			(unsigned long long)t.poll_completions);
	}
	if (fclose(f)) {
		logmsg("cannot write %s: %m", b->stats_path);
	} else if (b->stats_sock >= 0) {
		/* One message: the supervisor writes it (sandbox.c). */
		if (send(b->stats_sock, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT) !=
		    (ssize_t)len)
			logmsg("cannot send the stats to the supervisor: %m (this update is dropped)");
	} else {
		stats_replace(b, buf, len);
	}
	free(buf);
}

void stats_replace(struct bridge *b, const char *buf, size_t len)
{
	if (own_file_replace(&b->stats, buf, len, b->seq))
		logmsg("cannot write %s: %m%s", b->stats_path,
		       errno == EPERM ? " (it is not a regular file of ours with one name: not replaced)" : "");
}

/* ---- message handlers: 0, or a negative errno to refuse the message ---- */

static int reply(struct bridge *b, struct vu_msg *msg, size_t size)
{
	return vu_reply(b->conn_fd, msg, size);
}

static int reply_u64(struct bridge *b, struct vu_msg *msg, uint64_t val)
{
	msg->u64 = val;
	return reply(b, msg, sizeof(msg->u64));
}

static int set_mem_table(struct bridge *b, struct vu_msg *msg, int *fds,
			 unsigned int nfds)
{
	struct vu_region_map new[VU_MAX_REGIONS];
	unsigned int i;
	int n;

	n = vu_map_mem_table(msg, fds, nfds, new);
	if (n < 0)
		return n;
	/* The old mapping goes only after the kernel stopped using it. */
	kernel_stop(b);
	unmap_memory(b);
	memcpy(b->regions, new, n * sizeof(new[0]));
	b->nregions = n;
	b->mem_set = true;
	b->dirty = true;
	for (i = 0; i < b->queues; i++)
		if (b->rings[i].addr_set && b->rings[i].num && !ring_fits(b, i))
			b->rings[i].addr_set = false;
	return 0;
}

static struct ring *msg_ring(struct bridge *b, uint32_t index, const char *what)
{
	if (index >= b->queues) {
		logmsg("%s: vring %u does not exist (%u queues)", what, index,
		       b->queues);
		return NULL;
	}
	return &b->rings[index];
}

/* Stops the kernel device before a running vring's layout changes. */
static void ring_quiesce(struct bridge *b, struct ring *r)
{
	if (r->programmed) {
		kernel_stop(b);
		b->dirty = true;
	}
}

static int set_vring_fd(struct bridge *b, struct vu_msg *msg, int *fds,
			unsigned int nfds)
{
	uint64_t v = msg->u64;
	uint32_t idx = v & VU_RING_INDEX_MASK;
	const char *name = vu_req_name(msg->hdr.request);
	struct vhost_vring_file f = { .index = idx, .fd = -1 };
	unsigned long cmd;
	struct ring *r;
	int *slot;

	if (v & ~(VU_RING_INDEX_MASK | VU_RING_NOFD)) {
		logmsg("%s: unknown flags in %#" PRIx64, name, v);
		return -EINVAL;
	}
	r = msg_ring(b, idx, name);
	if (!r)
		return -EINVAL;
	if ((v & VU_RING_NOFD) ? nfds != 0 : nfds != 1) {
		logmsg("%s: vring %u: %u file descriptors with%s the no-fd flag",
		       name, idx, nfds, (v & VU_RING_NOFD) ? "" : "out");
		return -EINVAL;
	}
	switch (msg->hdr.request) {
	case VU_SET_VRING_KICK:
		if (v & VU_RING_NOFD) {
			logmsg("SET_VRING_KICK: vring %u: polling without a kick eventfd is not supported",
			       idx);
			return -EOPNOTSUPP;
		}
		ring_quiesce(b, r);
		close_fd(&r->kick);
		r->kick = fds[0];
		fds[0] = -1;
		r->started = true;
		return 0;
	case VU_SET_VRING_CALL:
		slot = &r->call;
		cmd = VHOST_SET_VRING_CALL;
		break;
	default:
		slot = &r->err;
		cmd = VHOST_SET_VRING_ERR;
		break;
	}
	close_fd(slot);
	if (nfds) {
		*slot = fds[0];
		fds[0] = -1;
	}
	/* Interrupt masking swaps call fds at run time: no rebuild. */
	if (r->programmed && b->vfd >= 0) {
		f.fd = *slot;
		if (ioctl(b->vfd, cmd, &f)) {
			logmsg("%s: vring %u: %m", name, idx);
			return -errno;
		}
	}
	return 0;
}

static int get_config(struct bridge *b, struct vu_msg *msg)
{
	uint32_t size = msg->config.size;

	if (msg->hdr.size != 12 + size || size > VU_CONFIG_MAX ||
	    msg->config.offset != 0) {
		logmsg("GET_CONFIG: offset %u size %u in a %u-byte message",
		       msg->config.offset, size, msg->hdr.size);
		return -EINVAL;
	}
	config_fill(b, msg->config.data, size);
	return reply(b, msg, 12 + size);
}

/*
 * Handles one message. Returns 0, a negative errno when the message is
 * refused, or 1 when the connection must be closed.
 */
static int handle(struct bridge *b, struct vu_msg *msg, int *fds,
		  unsigned int nfds)
{
	uint32_t req = msg->hdr.request;
	const char *name = vu_req_name(req);
	struct ring *r;
	int ret;

	ret = vu_check_msg(msg, nfds);
	if (ret)
		return ret;
	switch (req) {
	case VU_GET_FEATURES:
		return reply_u64(b, msg, offered_features(b)) ? 1 : 0;
	case VU_SET_FEATURES:
		if (msg->u64 & ~offered_features(b)) {
			logmsg("SET_FEATURES: %#" PRIx64 " has bits never offered (%#"
			       PRIx64 ")", msg->u64,
			       msg->u64 & ~offered_features(b));
			return -EINVAL;
		}
		if (!b->features_set || b->features != msg->u64)
			b->dirty = true;
		b->features = msg->u64;
		b->features_set = true;
		return kernel_apply(b);
	case VU_GET_PROTOCOL_FEATURES:
		return reply_u64(b, msg, offered_protocol_features()) ? 1 : 0;
	case VU_SET_PROTOCOL_FEATURES:
		if (msg->u64 & ~offered_protocol_features()) {
			logmsg("SET_PROTOCOL_FEATURES: %#" PRIx64 " has bits never offered",
			       msg->u64);
			return -EINVAL;
		}
		b->protocol_features = msg->u64;
		return 0;
	case VU_GET_QUEUE_NUM:
		return reply_u64(b, msg, b->queues) ? 1 : 0;
	case VU_SET_OWNER:
		/* The bridge itself owns the kernel device it opens. */
		return 0;
	case VU_RESET_OWNER:
	case VU_RESET_DEVICE:
		reset_device(b);
		return 0;
	case VU_SET_MEM_TABLE:
		ret = set_mem_table(b, msg, fds, nfds);
		return ret ? ret : kernel_apply(b);
	case VU_SET_VRING_NUM:
		r = msg_ring(b, msg->state.index, name);
		if (!r)
			return -EINVAL;
		if (vu_check_vring_num(&msg->state))
			return -EINVAL;
		if (msg->state.num < b->seg_max + 2)
			logmsg("vring %u: size %u is below seg_max %u + 2; a guest using seg_max breaks it",
			       msg->state.index, msg->state.num, b->seg_max);
		ring_quiesce(b, r);
		r->num = msg->state.num;
		if (r->addr_set && b->mem_set && !ring_fits(b, msg->state.index))
			r->addr_set = false;
		return kernel_apply(b);
	case VU_SET_VRING_BASE:
		r = msg_ring(b, msg->state.index, name);
		if (!r)
			return -EINVAL;
		if (vu_check_vring_base(&msg->state))
			return -EINVAL;
		ring_quiesce(b, r);
		r->base = msg->state.num;
		return kernel_apply(b);
	case VU_SET_VRING_ADDR: {
		struct vu_vring_addr *a = &msg->addr;
		struct vu_vring_addr old;

		r = msg_ring(b, a->index, name);
		if (!r)
			return -EINVAL;
		if (vu_check_vring_addr(a))
			return -EINVAL;
		old = r->addr;
		if (b->mem_set && r->num) {
			r->addr = *a;
			if (!ring_fits(b, a->index)) {
				r->addr = old;
				return -EFAULT;
			}
		}
		ring_quiesce(b, r);
		r->addr = *a;
		r->addr_set = true;
		return kernel_apply(b);
	}
	case VU_GET_VRING_BASE:
		r = msg_ring(b, msg->state.index, name);
		if (!r)
			return 1;
		/* Stops the vring: drain, then report where it stands. */
		r->started = false;
		close_fd(&r->kick);
		ret = kernel_apply(b);
		if (ret)
			logmsg("GET_VRING_BASE: restarting the other vrings failed: %s",
			       strerror(-ret));
		msg->state.num = r->base;
		return reply(b, msg, sizeof(msg->state)) ? 1 : 0;
	case VU_SET_VRING_KICK:
	case VU_SET_VRING_CALL:
	case VU_SET_VRING_ERR:
		ret = set_vring_fd(b, msg, fds, nfds);
		return ret ? ret : kernel_apply(b);
	case VU_SET_VRING_ENABLE:
		r = msg_ring(b, msg->state.index, name);
		if (!r)
			return -EINVAL;
		if (vu_check_vring_enable(&msg->state))
			return -EINVAL;
		r->disabled = !msg->state.num;
		return kernel_apply(b);
	case VU_GET_CONFIG:
		ret = get_config(b, msg);
		return ret ? 1 : 0;
	case VU_SET_CONFIG:
		/* Only the writeback byte is writable, and we offer no WCE. */
		logmsg("SET_CONFIG: the device configuration is read-only");
		return -EPERM;
	default:
		return vu_unsupported(req);
	}
}

/* ---- the connection ---- */

static void disconnect(struct bridge *b)
{
	reset_device(b);
	b->protocol_features = 0;
	close_fd(&b->conn_fd);
	logmsg("connection closed; every request in flight was completed");
	write_stats(b);
}

/* Returns 1 when the connection is to be closed. */
static int serve_one(struct bridge *b)
{
	static struct vu_msg msg;
	int fds[VU_MAX_FDS];
	unsigned int nfds, i;
	bool need_reply, truncated;
	int ret;

	ret = vu_receive(b->conn_fd, &msg, fds, &nfds, &truncated);
	if (ret) {
		for (i = 0; i < nfds; i++)
			close(fds[i]);
		return 1;
	}
	b->messages++;
	need_reply = msg.hdr.flags & VU_FLAG_NEED_REPLY;
	if (b->verbose)
		logmsg("<- %s (%u bytes, %u fds)", vu_req_name(msg.hdr.request),
		       msg.hdr.size, nfds);
	if (truncated) {
		logmsg("%s: more than %u file descriptors", vu_req_name(msg.hdr.request),
		       VU_MAX_FDS);
		ret = vu_has_reply(msg.hdr.request) ? 1 : -EINVAL;
	} else {
		ret = handle(b, &msg, fds, nfds);
	}
	for (i = 0; i < nfds; i++)
		close_fd(&fds[i]);
	if (ret == 1) {
		b->errors++;
		return 1;
	}
	if (ret) {
		b->errors++;
		logmsg("%s refused: %s", vu_req_name(msg.hdr.request), strerror(-ret));
	}
	if (need_reply && !vu_has_reply(msg.hdr.request) &&
	    b->protocol_features & (1ULL << VU_PF_REPLY_ACK))
		return reply_u64(b, &msg, ret ? 1 : 0) ? 1 : 0;
	return 0;
}

/* ---- set-up ---- */

static int listen_on(struct bridge *b)
{
	b->listen_fd = vu_listen(b->socket_path, b->socket_group, &b->lock_fd);
	return b->listen_fd < 0 ? -1 : 0;
}

static void accept_one(struct bridge *b)
{
	struct timeval tv = { .tv_sec = 5 };
	unsigned int i;
	int fd;

	fd = accept4(b->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno != EINTR && errno != EAGAIN)
			logmsg("accept: %m");
		return;
	}
	/* A peer that stops halfway through a message is dropped. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	b->conn_fd = fd;
	b->connections++;
	/* The per-vring counters are the current connection's. */
	for (i = 0; i < MAX_QUEUES; i++)
		memset(&b->rings[i].total, 0, sizeof(b->rings[i].total));
	logmsg("connection %" PRIu64 " accepted", b->connections);
	write_stats(b);
}

static void usage(FILE *f)
{
	fprintf(f,
"Usage: " PROG " --socket PATH --backend PATH [options]\n"
"\n"
"Serve a vhost-user-blk device on a unix socket with the kernel's vhost-blk\n"
"(/dev/vhost-blk) as its data path. The VMM connects as the vhost-user front\n"
"end, e.g. QEMU with\n"
"  -object memory-backend-memfd,id=mem,size=4G,share=on -machine memory-backend=mem\n"
"  -chardev socket,id=vb0,path=PATH -device vhost-user-blk-pci,chardev=vb0,num-queues=4\n"
"\n"
"  -s, --socket PATH     unix socket to listen on, mode 0600; PATH.pid holds the\n"
"                        pid and lock (one bridge per socket); a socket that\n"
"                        nothing listens on is replaced, a live one is not\n"
"  -g, --socket-group GRP  let group GRP (name or number) connect too (0660)\n"
"  -b, --backend PATH    block device or raw image file (vhost-blk does direct\n"
"                        I/O on it, so a file must support O_DIRECT)\n"
"  -q, --queues N        request queues offered (default 1, at most vhost-blk's\n"
"                        max_queues module parameter)\n"
"  -w, --workers MODE    per-queue (default): a vhost worker thread per queue;\n"
"                        one: all queues on one worker\n"
"  -r, --readonly        serve the backend read-only (VIRTIO_BLK_F_RO)\n"
"      --write-through   offer no VIRTIO_BLK_F_FLUSH: the guest sees a disk\n"
"                        without a write cache, and vhost-blk makes each write\n"
"                        durable before it completes (FUA, or a flush after it)\n"
"      --serial STR      what the guest reads as the disk's serial (20 bytes)\n"
"      --seg-max N       segments per request the guest may use (default 126:\n"
"                        must be at most the vring size minus 2)\n"
"      --busy-poll US    vhost-blk's workers busy-poll each vring for up to US\n"
"                        units of 1024 ns after it runs dry, instead of waiting\n"
"                        for the guest's next kick (default 0: off)\n"
"      --stats FILE      write counters to FILE on SIGUSR1 and at each\n"
"                        disconnect (messages, CPU time, vhost-blk's per-vring\n"
"                        counters)\n"
"      --sandbox MODE    namespace (default): serve from an unprivileged process\n"
"                        with no capabilities, in new PID, mount, network, IPC and UTS\n"
"                        namespaces whose root holds only /dev/vhost-blk and\n"
"                        a proc of its own; a supervisor outside keeps the\n"
"                        socket and writes --stats. none: one process, as\n"
"                        started (root, every capability)\n"
"      --sandbox-user USER  the user the sandboxed server runs as (default\n"
"                        nobody): one that owns no files\n"
"      --seccomp MODE    in the sandbox, a system call or ioctl outside the\n"
"                        list kills the server (kill, the default), is logged\n"
"                        to the audit log (log), or no filter (none)\n"
"  -v, --verbose         log every vhost-user message\n"
"  -h, --help            this text\n"
"\n"
"One VMM connection at a time; after it closes the next one is accepted.\n"
"SIGTERM or SIGINT: drain the I/O in flight and exit.\n");
}

static int parse_uint(const char *s, unsigned int min, unsigned int max,
		      const char *opt, unsigned int *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || !*s || v < min || v > max) {
		logmsg("%s: '%s' is not a number from %u to %u", opt, s, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "socket-group", required_argument, NULL, 'g' },
		{ "backend", required_argument, NULL, 'b' },
		{ "queues", required_argument, NULL, 'q' },
		{ "workers", required_argument, NULL, 'w' },
		{ "readonly", no_argument, NULL, 'r' },
		{ "write-through", no_argument, NULL, 'W' },
		{ "serial", required_argument, NULL, 'S' },
		{ "seg-max", required_argument, NULL, 'm' },
		{ "busy-poll", required_argument, NULL, 'P' },
		{ "stats", required_argument, NULL, 't' },
		{ "sandbox", required_argument, NULL, 'X' },
		{ "seccomp", required_argument, NULL, 'C' },
		{ "sandbox-user", required_argument, NULL, 'U' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct bridge bridge;
	struct bridge *b = &bridge;
	const char *base;
	sigset_t sigs;
	unsigned int i;
	int c;

	/*
	 * Nothing inherited reaches the server: a directory descriptor from
	 * whoever started us would lead out of its sandbox.
	 */
	close_range(3, ~0U, 0);
	b->queues = 1;
	b->worker_per_queue = true;
	b->seg_max = 126;
	b->socket_group = (gid_t)-1;
	b->sandbox = true;
	b->seccomp = 2;
	b->host_pid = getpid();
	b->backend_fd = b->listen_fd = b->lock_fd = b->conn_fd = b->sig_fd =
		b->vfd = b->stats_sock = -1;
	for (i = 0; i < MAX_QUEUES; i++)
		b->rings[i].kick = b->rings[i].call = b->rings[i].err = -1;

	while ((c = getopt_long(argc, argv, "s:g:b:q:w:rvh", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			b->socket_path = optarg;
			break;
		case 'g':
			if (vu_parse_group(optarg, &b->socket_group)) {
				logmsg("--socket-group %s: no such group", optarg);
				return 2;
			}
			break;
		case 'b':
			b->backend_path = optarg;
			break;
		case 'q':
			if (parse_uint(optarg, 1, MAX_QUEUES, "--queues", &b->queues))
				return 2;
			break;
		case 'w':
			if (!strcmp(optarg, "per-queue")) {
				b->worker_per_queue = true;
			} else if (!strcmp(optarg, "one")) {
				b->worker_per_queue = false;
			} else {
				logmsg("--workers: '%s' is neither per-queue nor one", optarg);
				return 2;
			}
			break;
		case 'r':
			b->readonly = true;
			break;
		case 'W':
			b->write_through = true;
			break;
		case 'S':
			if (strlen(optarg) > sizeof(b->serial)) {
				logmsg("--serial: at most %zu bytes", sizeof(b->serial));
				return 2;
			}
			strncpy(b->serial, optarg, sizeof(b->serial));
			break;
		case 'm':
			if (parse_uint(optarg, 1, 32766, "--seg-max", &b->seg_max))
				return 2;
			break;
		case 'P':
			if (parse_uint(optarg, 0, UINT32_MAX, "--busy-poll", &b->busy_poll))
				return 2;
			break;
		case 't':
			b->stats_path = optarg;
			break;
		case 'X':
			if (!strcmp(optarg, "namespace") || !strcmp(optarg, "none")) {
				b->sandbox = !strcmp(optarg, "namespace");
			} else {
				logmsg("--sandbox: '%s' is neither namespace nor none", optarg);
				return 2;
			}
			break;
		case 'U':
			b->server_user = optarg;
			break;
		case 'C':
			for (i = 0; i < 3; i++)
				if (!strcmp(optarg, (const char *[]){ "none", "log", "kill" }[i]))
					break;
			if (i == 3) {
				logmsg("--seccomp: '%s' is not kill, log or none", optarg);
				return 2;
			}
			b->seccomp = i;
			break;
		case 'v':
			b->verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc || !b->socket_path || !b->backend_path) {
		if (optind < argc)
			logmsg("unexpected argument '%s'", argv[optind]);
		else
			logmsg("--socket and --backend are required (see --help)");
		return 2;
	}
	if (!b->serial[0]) {
		base = strrchr(b->backend_path, '/');
		strncpy(b->serial, base ? base + 1 : b->backend_path,
			sizeof(b->serial));
	}

	/* Blocked before the socket exists: they wait for the signalfd. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGUSR1);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (b->stats_path && own_path_init(&b->stats, b->stats_path)) {
		logmsg("--stats %s: %m%s", b->stats_path,
		       errno == ELOOP || errno == EPERM || errno == ENOTDIR ?
		       " (a link on the way, or a directory others may write to)" : "");
		return 1;
	}
	if (b->sandbox && sandbox_user(b))
		return 1;
	if (probe_kernel(b) || open_backend(b) || listen_on(b))
		return 1;
	/* Returns in the sandboxed server only. */
	if (b->sandbox && sandbox_enter(b)) {
		if (!b->sandboxed)
			vu_unlisten(b->socket_path, b->listen_fd, b->lock_fd);
		return 1;
	}

	b->sig_fd = signalfd(-1, &sigs, SFD_CLOEXEC);
	if (b->sig_fd < 0) {
		logmsg("signalfd: %m");
		if (!b->sandboxed)
			vu_unlisten(b->socket_path, b->listen_fd, b->lock_fd);
		return 1;
	}
	/* Last: the set-up above made calls the filter does not allow. */
	if (b->sandboxed && b->seccomp && sandbox_seccomp(b->seccomp == 1))
		return 1;
	logmsg("serving %s (%" PRIu64 " bytes, %u-byte blocks%s%s) on %s, %u queue(s), %s",
	       b->backend_path, b->size, b->lbs, b->readonly ? ", read-only" : "",
	       b->write_through ? ", write-through" : "",
	       b->socket_path, b->queues,
	       b->worker_per_queue ? "a worker per queue" : "one worker");
	write_stats(b);

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = b->conn_fd >= 0 ? b->conn_fd : b->listen_fd,
			  .events = POLLIN },
			{ .fd = b->sig_fd, .events = POLLIN },
		};
		struct signalfd_siginfo si;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			logmsg("poll: %m");
			break;
		}
		if (p[1].revents & POLLIN &&
		    read(b->sig_fd, &si, sizeof(si)) == sizeof(si)) {
			if (si.ssi_signo == SIGUSR1) {
				write_stats(b);
			} else {
				logmsg("%s: stopping", strsignal(si.ssi_signo));
				break;
			}
		}
		if (!p[0].revents)
			continue;
		if (b->conn_fd < 0)
			accept_one(b);
		else if (serve_one(b))
			disconnect(b);
	}
	if (b->conn_fd >= 0)
		disconnect(b);
	write_stats(b);
	if (b->sandboxed)
		close(b->listen_fd);	/* the supervisor removes the socket */
	else
		vu_unlisten(b->socket_path, b->listen_fd, b->lock_fd);
	close(b->backend_fd);
	return 0;
}
