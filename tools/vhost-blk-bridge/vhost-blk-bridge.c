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
#include <endian.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/un.h>
#include <linux/fs.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "vhost_blk_uapi.h"
#include "../include/vhost_user_wire.h"

#define PROG			"vhost-blk-bridge"
#define VHOST_BLK_DEV		"/dev/vhost-blk"
#define MAX_QUEUES_PARAM	"/sys/module/vhost_blk/parameters/max_queues"

/* struct virtio_blk_config as the spec lays it out, little endian. */
struct blk_config {
	uint64_t capacity;
	uint32_t size_max;
	uint32_t seg_max;
	uint16_t cylinders;
	uint8_t heads;
	uint8_t sectors;
	uint32_t blk_size;
	uint8_t physical_block_exp;
	uint8_t alignment_offset;
	uint16_t min_io_size;
	uint32_t opt_io_size;
	uint8_t writeback;
	uint8_t unused0;
	uint16_t num_queues;
	uint32_t max_discard_sectors;
	uint32_t max_discard_seg;
	uint32_t discard_sector_alignment;
	uint32_t max_write_zeroes_sectors;
	uint32_t max_write_zeroes_seg;
	uint8_t write_zeroes_may_unmap;
	uint8_t unused1[3];
} __attribute__((packed));

#define MAX_QUEUES		128	/* vhost-blk's own limit */

/* The uapi's layout, whether it came from the kernel or vhost_blk_uapi.h. */
_Static_assert(sizeof(struct vhost_blk_backend) == 48, "vhost_blk_backend");
_Static_assert(sizeof(struct blk_config) == 60, "virtio_blk_config");

/* One vring's counters, as the kernel device's fdinfo shows them. */
struct vring_stats {
	uint64_t requests;
	uint64_t errors;
	uint64_t read_bytes;
	uint64_t write_bytes;
	uint64_t flushes;
	uint64_t discards;
	uint64_t kicks;
	uint64_t inflight;
	unsigned int worker_id;
};

struct ring {
	unsigned int num;		/* 0: not set */
	uint32_t base;			/* next avail index to serve */
	bool addr_set;
	struct vu_vring_addr addr;	/* in the VMM's address space */
	int kick, call, err;		/* the VMM's eventfds, or -1 */
	bool started;			/* kicked since the last GET_VRING_BASE */
	bool disabled;			/* SET_VRING_ENABLE 0 */
	bool programmed;		/* part of the current kernel device */
	unsigned int worker;		/* kernel worker id when programmed */
	struct vring_stats total;	/* of earlier kernel devices */
};

struct bridge {
	/* Options. */
	const char *socket_path;
	const char *backend_path;
	const char *stats_path;
	unsigned int queues;
	bool worker_per_queue;
	bool readonly;
	bool verbose;
	unsigned int seg_max;
	char serial[VHOST_BLK_SERIAL_BYTES];

	/* The backing device or file. */
	int backend_fd;
	uint64_t size;
	unsigned int lbs, pbs;
	bool discard;
	uint32_t max_discard_sectors, discard_alignment, max_wz_sectors;
	uint64_t kernel_features;

	int listen_fd, lock_fd, conn_fd, sig_fd;

	/* Per connection. */
	uint64_t features;
	bool features_set;
	uint64_t protocol_features;
	struct vu_region_map regions[VU_MAX_REGIONS];
	unsigned int nregions;
	bool mem_set;
	bool dirty;			/* kernel device must be rebuilt */
	struct ring rings[MAX_QUEUES];
	int vfd;			/* /dev/vhost-blk, or -1 */

	/* Counters for the stats file. */
	uint64_t seq, connections, messages, errors, rebuilds;
};

void logmsg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs(PROG ": ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static uint64_t offered_features(const struct bridge *b)
{
	uint64_t f = b->kernel_features;

	f |= 1ULL << VIRTIO_BLK_F_SEG_MAX | 1ULL << VIRTIO_BLK_F_BLK_SIZE |
	     1ULL << VIRTIO_BLK_F_TOPOLOGY | 1ULL << VU_F_PROTOCOL_FEATURES;
	if (b->readonly) {
		f |= 1ULL << VIRTIO_BLK_F_RO;
		f &= ~(1ULL << VIRTIO_BLK_F_DISCARD |
		       1ULL << VIRTIO_BLK_F_WRITE_ZEROES);
	}
	if (!b->discard)
		f &= ~(1ULL << VIRTIO_BLK_F_DISCARD);
	return f;
}

static uint64_t offered_protocol_features(void)
{
	return 1ULL << VU_PF_MQ | 1ULL << VU_PF_REPLY_ACK |
	       1ULL << VU_PF_CONFIG | 1ULL << VU_PF_RESET_DEVICE;
}

/*
 * Translates [addr, addr + len) in the VMM's address space into ours, or
 * returns NULL when it is not inside one memory region.
 */
static void *vmm_to_local(struct bridge *b, uint64_t addr, uint64_t len)
{
	unsigned int i;

	for (i = 0; i < b->nregions; i++) {
		struct vu_region_map *r = &b->regions[i];

		if (addr >= r->uaddr && addr - r->uaddr < r->size &&
		    len <= r->size - (addr - r->uaddr))
			return r->map + r->offset + (addr - r->uaddr);
	}
	return NULL;
}

/* Checks a vring's three parts against the memory table. */
static int ring_translate(struct bridge *b, unsigned int idx, void **desc,
			  void **avail, void **used)
{
	struct ring *r = &b->rings[idx];
	uint64_t n = r->num;

	*desc = vmm_to_local(b, r->addr.desc, 16 * n);
	*avail = vmm_to_local(b, r->addr.avail, 6 + 2 * n);
	*used = vmm_to_local(b, r->addr.used, 6 + 8 * n);
	if (!*desc || !*avail || !*used) {
		logmsg("vring %u: ring addresses desc %#" PRIx64 " avail %#" PRIx64
		       " used %#" PRIx64 " (size %u) are not inside the memory table",
		       idx, r->addr.desc, r->addr.avail, r->addr.used, r->num);
		return -EFAULT;
	}
	return 0;
}

/* Whether the vring's size and addresses fit the current memory table. */
static bool ring_fits(struct bridge *b, unsigned int idx)
{
	void *desc, *avail, *used;

	return !ring_translate(b, idx, &desc, &avail, &used);
}

static bool ring_wanted(const struct bridge *b, unsigned int idx)
{
	const struct ring *r = &b->rings[idx];

	return b->features_set && b->mem_set && r->started && !r->disabled &&
	       r->num && r->addr_set && r->kick >= 0;
}

/* Adds a kernel device's counters to the connection's totals. */
static void stats_add(struct vring_stats *t,
		      const struct vring_stats *s)
{
	t->requests += s->requests;
	t->errors += s->errors;
	t->read_bytes += s->read_bytes;
	t->write_bytes += s->write_bytes;
	t->flushes += s->flushes;
	t->discards += s->discards;
	t->kicks += s->kicks;
}

/*
 * Reads the kernel device's counters from its fdinfo, one
 * "vring<N>-<key>:<tab><value>" line each, into st[0..n-1]. Keys it does not
 * know are skipped: the kernel may add some. Returns 0, or -1 with errno set.
 */
static int kernel_stats(const struct bridge *b, struct vring_stats *st,
			unsigned int n)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
		{ "requests", offsetof(struct vring_stats, requests) },
		{ "errors", offsetof(struct vring_stats, errors) },
		{ "read-bytes", offsetof(struct vring_stats, read_bytes) },
		{ "write-bytes", offsetof(struct vring_stats, write_bytes) },
		{ "flushes", offsetof(struct vring_stats, flushes) },
		{ "discards", offsetof(struct vring_stats, discards) },
		{ "kicks", offsetof(struct vring_stats, kicks) },
		{ "inflight", offsetof(struct vring_stats, inflight) },
	};
	char path[64], line[256], key[32];
	unsigned long long v;
	unsigned int i, k;
	FILE *f;

	memset(st, 0, n * sizeof(*st));
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", b->vfd);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "vring%u-%31[a-z-]: %llu", &i, key, &v) != 3 ||
		    i >= n)
			continue;
		if (!strcmp(key, "worker")) {
			st[i].worker_id = (unsigned int)v;
			continue;
		}
		for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			if (!strcmp(key, keys[k].key))
				*(uint64_t *)((char *)&st[i] + keys[k].off) = v;
	}
	fclose(f);
	return 0;
}

/*
 * Drains and closes the kernel device: every request in flight completes,
 * then each vring's position is read back so the next device (or the VMM,
 * through GET_VRING_BASE) continues from there.
 */
static void kernel_stop(struct bridge *b)
{
	struct vhost_blk_backend be = { .fd = -1 };
	struct vring_stats s[MAX_QUEUES];
	bool have_stats;
	unsigned int i;

	if (b->vfd < 0)
		return;
	if (ioctl(b->vfd, VHOST_BLK_SET_BACKEND, &be))
		logmsg("detaching the backend: %m");
	have_stats = !kernel_stats(b, s, b->queues);
	if (!have_stats)
		logmsg("reading the device's counters: %m");
	for (i = 0; i < b->queues; i++) {
		struct ring *r = &b->rings[i];
		struct vhost_vring_state st = { .index = i };

		if (!r->programmed)
			continue;
		if (ioctl(b->vfd, VHOST_GET_VRING_BASE, &st))
			logmsg("vring %u: reading its base: %m", i);
		else
			r->base = st.num;
		if (have_stats)
			stats_add(&r->total, &s[i]);
		r->programmed = false;
	}
	close_fd(&b->vfd);
}

static int kernel_mem_table(struct bridge *b)
{
	struct vhost_memory *m;
	unsigned int i;
	int ret = 0;

	m = calloc(1, sizeof(*m) + b->nregions * sizeof(m->regions[0]));
	if (!m)
		return -ENOMEM;
	m->nregions = b->nregions;
	for (i = 0; i < b->nregions; i++) {
		m->regions[i].guest_phys_addr = b->regions[i].gpa;
		m->regions[i].memory_size = b->regions[i].size;
		m->regions[i].userspace_addr =
			(uintptr_t)(b->regions[i].map + b->regions[i].offset);
	}
	if (ioctl(b->vfd, VHOST_SET_MEM_TABLE, m)) {
		ret = -errno;
		logmsg("VHOST_SET_MEM_TABLE: %m");
	}
	free(m);
	return ret;
}

static int kernel_ring(struct bridge *b, unsigned int i, bool new_worker,
		       unsigned int worker)
{
	struct ring *r = &b->rings[i];
	struct vhost_vring_state st = { .index = i };
	struct vhost_vring_addr va = { .index = i };
	struct vhost_vring_file f = { .index = i };
	struct vhost_vring_worker w = { .index = i, .worker_id = worker };
	void *desc, *avail, *used;
	int ret;

	ret = ring_translate(b, i, &desc, &avail, &used);
	if (ret)
		return ret;
	va.desc_user_addr = (uintptr_t)desc;
	va.avail_user_addr = (uintptr_t)avail;
	va.used_user_addr = (uintptr_t)used;

	if (new_worker && ioctl(b->vfd, VHOST_ATTACH_VRING_WORKER, &w))
		goto fail;
	st.num = r->num;
	if (ioctl(b->vfd, VHOST_SET_VRING_NUM, &st))
		goto fail;
	st.num = r->base;
	if (ioctl(b->vfd, VHOST_SET_VRING_BASE, &st))
		goto fail;
	if (ioctl(b->vfd, VHOST_SET_VRING_ADDR, &va))
		goto fail;
	f.fd = r->kick;
	if (ioctl(b->vfd, VHOST_SET_VRING_KICK, &f))
		goto fail;
	f.fd = r->call;
	if (ioctl(b->vfd, VHOST_SET_VRING_CALL, &f))
		goto fail;
	f.fd = r->err;
	if (ioctl(b->vfd, VHOST_SET_VRING_ERR, &f))
		goto fail;
	r->programmed = true;
	r->worker = worker;
	return 0;
fail:
	ret = -errno;
	logmsg("vring %u: programming vhost-blk: %m", i);
	return ret;
}

/*
 * Makes the kernel device match the bridge's state: stops the old device
 * and, when at least one vring is ready, programs a new one.
 */
static int kernel_apply(struct bridge *b)
{
	struct vhost_blk_backend be = { .fd = b->backend_fd };
	struct vhost_worker_state ws;
	uint64_t kf = b->features & b->kernel_features;
	unsigned int i, nwanted = 0;
	bool same = b->vfd >= 0 && !b->dirty, first = true, new_worker;
	int ret = 0;

	for (i = 0; i < b->queues; i++) {
		if (ring_wanted(b, i))
			nwanted++;
		if (ring_wanted(b, i) != b->rings[i].programmed)
			same = false;
	}
	if (same || (b->vfd < 0 && !nwanted)) {
		b->dirty = false;
		return 0;
	}
	kernel_stop(b);
	b->dirty = false;
	if (!nwanted)
		return 0;

	b->rebuilds++;
	b->vfd = open(VHOST_BLK_DEV, O_RDWR | O_CLOEXEC);
	if (b->vfd < 0) {
		ret = -errno;
		logmsg("cannot open " VHOST_BLK_DEV ": %m");
		return ret;
	}
	if (ioctl(b->vfd, VHOST_SET_OWNER)) {
		ret = -errno;
		logmsg("VHOST_SET_OWNER: %m");
		goto fail;
	}
	if (ioctl(b->vfd, VHOST_SET_FEATURES, &kf)) {
		ret = -errno;
		logmsg("VHOST_SET_FEATURES %#" PRIx64 ": %m", kf);
		goto fail;
	}
	ret = kernel_mem_table(b);
	if (ret)
		goto fail;
	for (i = 0; i < b->queues; i++) {
		if (!ring_wanted(b, i))
			continue;
		/* The default worker (made by SET_OWNER) serves the first. */
		ws.worker_id = 0;
		new_worker = b->worker_per_queue && !first;
		first = false;
		if (new_worker && ioctl(b->vfd, VHOST_NEW_WORKER, &ws)) {
			ret = -errno;
			logmsg("VHOST_NEW_WORKER: %m");
			goto fail;
		}
		ret = kernel_ring(b, i, new_worker, ws.worker_id);
		if (ret)
			goto fail;
	}
	be.flags = b->readonly ? VHOST_BLK_BACKEND_F_RDONLY : 0;
	memcpy(be.serial, b->serial, sizeof(be.serial));
	if (ioctl(b->vfd, VHOST_BLK_SET_BACKEND, &be)) {
		ret = -errno;
		logmsg("VHOST_BLK_SET_BACKEND: %m");
		goto fail;
	}
	if (b->verbose)
		logmsg("vhost-blk device %" PRIu64 " serves %u vring(s)",
		       b->rebuilds, nwanted);
	return 0;
fail:
	/* Nothing ran on the half-built device: drop it and its positions. */
	for (i = 0; i < b->queues; i++)
		b->rings[i].programmed = false;
	close_fd(&b->vfd);
	return ret;
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
	char tmp[PATH_MAX];
	struct rusage ru;
	unsigned int i;
	FILE *f;

	if (!b->stats_path)
		return;
	if (b->vfd >= 0)
		have_stats = !kernel_stats(b, s, b->queues);
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", b->stats_path) >= (int)sizeof(tmp))
		return;
	f = fopen(tmp, "w");
	if (!f) {
		logmsg("cannot write %s: %m", tmp);
		return;
	}
	getrusage(RUSAGE_THREAD, &ru);
	fprintf(f, "seq %" PRIu64 "\npid %d\nconnections %" PRIu64
		"\nmessages %" PRIu64 "\nerrors %" PRIu64 "\nrebuilds %" PRIu64
		"\nrunning %d\ncpu_us %lld\n", ++b->seq, (int)getpid(),
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
			" inflight %llu worker %u running %d\n", i,
			(unsigned long long)t.requests,
			(unsigned long long)t.errors,
			(unsigned long long)t.read_bytes,
			(unsigned long long)t.write_bytes,
			(unsigned long long)t.flushes,
			(unsigned long long)t.discards,
			(unsigned long long)t.kicks,
			(unsigned long long)t.inflight, t.worker_id,
			r->programmed);
	}
	if (fclose(f) || rename(tmp, b->stats_path))
		logmsg("cannot write %s: %m", b->stats_path);
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
	struct blk_config c;
	uint32_t size = msg->config.size;

	if (msg->hdr.size != 12 + size || size > VU_CONFIG_MAX ||
	    msg->config.offset != 0) {
		logmsg("GET_CONFIG: offset %u size %u in a %u-byte message",
		       msg->config.offset, size, msg->hdr.size);
		return -EINVAL;
	}
	memset(&c, 0, sizeof(c));
	c.capacity = htole64(b->size >> 9);
	c.seg_max = htole32(b->seg_max);
	c.blk_size = htole32(b->lbs);
	c.physical_block_exp = __builtin_ctz(b->pbs / b->lbs);
	c.min_io_size = htole16(1);
	c.opt_io_size = htole32(0);
	c.num_queues = htole16(b->queues);
	if (b->discard) {
		c.max_discard_sectors = htole32(b->max_discard_sectors);
		c.max_discard_seg = htole32(1);
		c.discard_sector_alignment = htole32(b->discard_alignment);
	}
	c.max_write_zeroes_sectors = htole32(b->max_wz_sectors);
	c.max_write_zeroes_seg = htole32(1);
	c.write_zeroes_may_unmap = b->discard;
	memset(msg->config.data, 0, size);
	memcpy(msg->config.data, &c, size < sizeof(c) ? size : sizeof(c));
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

static unsigned long read_sysfs_ulong(const char *fmt, unsigned int maj,
				      unsigned int min, const char *attr)
{
	char path[256];
	unsigned long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), fmt, maj, min, attr);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%lu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

static int open_backend(struct bridge *b)
{
	struct statx stx;
	struct stat st;
	int fd;

	int flags = (b->readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC, dfd;

	/* vhost-blk does direct I/O itself; the fd needs no O_DIRECT. */
	fd = open(b->backend_path, flags);
	if (fd < 0) {
		logmsg("cannot open backend %s: %m", b->backend_path);
		return -1;
	}
	if (fstat(fd, &st)) {
		logmsg("%s: %m", b->backend_path);
		goto fail;
	}
	b->lbs = b->pbs = 512;
	if (S_ISBLK(st.st_mode)) {
		const char *q = "/sys/dev/block/%u:%u/queue/%s";
		unsigned int maj = major(st.st_rdev), min = minor(st.st_rdev);
		int lbs = 512, pbs = 512;

		if (ioctl(fd, BLKGETSIZE64, &b->size) ||
		    ioctl(fd, BLKSSZGET, &lbs) || ioctl(fd, BLKPBSZGET, &pbs)) {
			logmsg("%s: cannot read its geometry: %m", b->backend_path);
			goto fail;
		}
		b->lbs = lbs;
		b->pbs = pbs >= lbs ? pbs : lbs;
		b->max_discard_sectors = read_sysfs_ulong(q, maj, min,
							  "discard_max_bytes") >> 9 > UINT32_MAX ?
			UINT32_MAX : read_sysfs_ulong(q, maj, min,
						      "discard_max_bytes") >> 9;
		b->discard = b->max_discard_sectors != 0;
		b->discard_alignment = read_sysfs_ulong(q, maj, min,
							"discard_granularity") >> 9;
		/* Without hardware support the kernel writes zero pages. */
		b->max_wz_sectors = 1U << 21;
	} else if (S_ISREG(st.st_mode)) {
		dfd = open(b->backend_path, flags | O_DIRECT);
		if (dfd < 0) {
			logmsg("backend %s cannot be opened with O_DIRECT, and vhost-blk does direct I/O only: %m",
			       b->backend_path);
			goto fail;
		}
		close(dfd);
		b->size = st.st_size;
		/* Direct I/O needs the file's alignment (Linux 6.1+). */
		if (!statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) &&
		    stx.stx_mask & STATX_DIOALIGN && stx.stx_dio_offset_align > 512)
			b->lbs = b->pbs = stx.stx_dio_offset_align;
		b->discard = true;	/* a hole punch; UNSUPP where it fails */
		b->max_discard_sectors = 1U << 21;
		b->discard_alignment = b->lbs >> 9;
		b->max_wz_sectors = 1U << 21;
	} else {
		logmsg("backend %s is neither a block device nor a regular file",
		       b->backend_path);
		goto fail;
	}
	if (b->lbs & (b->lbs - 1) || b->lbs < 512 || b->lbs > 65536) {
		logmsg("%s: block size %u is not supported", b->backend_path, b->lbs);
		goto fail;
	}
	if (b->size < b->lbs) {
		logmsg("backend %s is empty (%" PRIu64 " bytes)", b->backend_path,
		       b->size);
		goto fail;
	}
	if (b->size % b->lbs)
		logmsg("backend %s: the last %" PRIu64 " bytes are not a whole block and are not served",
		       b->backend_path, b->size % b->lbs);
	b->size -= b->size % b->lbs;
	b->backend_fd = fd;
	return 0;
fail:
	close(fd);
	return -1;
}

static int probe_kernel(struct bridge *b)
{
	unsigned long maxq = 0;
	FILE *f;
	int fd;

	fd = open(VHOST_BLK_DEV, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		logmsg("cannot open " VHOST_BLK_DEV ": %m%s", errno == ENOENT ?
		       " (is the vhost_blk module loaded? modprobe vhost_blk)" : "");
		return -1;
	}
	if (ioctl(fd, VHOST_GET_FEATURES, &b->kernel_features)) {
		logmsg(VHOST_BLK_DEV ": VHOST_GET_FEATURES: %m");
		close(fd);
		return -1;
	}
	close(fd);
	f = fopen(MAX_QUEUES_PARAM, "r");
	if (f) {
		if (fscanf(f, "%lu", &maxq) != 1)
			maxq = 0;
		fclose(f);
	}
	if (maxq && b->queues > maxq) {
		logmsg("--queues %u: vhost-blk serves at most %lu (its max_queues parameter)",
		       b->queues, maxq);
		return -1;
	}
	return 0;
}

static int listen_on(struct bridge *b)
{
	b->listen_fd = vu_listen(b->socket_path, (gid_t)-1, &b->lock_fd);
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
"  -b, --backend PATH    block device or raw image file (vhost-blk does direct\n"
"                        I/O on it, so a file must support O_DIRECT)\n"
"  -q, --queues N        request queues offered (default 1, at most vhost-blk's\n"
"                        max_queues module parameter)\n"
"  -w, --workers MODE    per-queue (default): a vhost worker thread per queue;\n"
"                        one: all queues on one worker\n"
"  -r, --readonly        serve the backend read-only (VIRTIO_BLK_F_RO)\n"
"      --serial STR      what the guest reads as the disk's serial (20 bytes)\n"
"      --seg-max N       segments per request the guest may use (default 126:\n"
"                        must be at most the vring size minus 2)\n"
"      --stats FILE      write counters to FILE on SIGUSR1 and at each\n"
"                        disconnect (messages, CPU time, vhost-blk's per-vring\n"
"                        counters)\n"
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
		{ "backend", required_argument, NULL, 'b' },
		{ "queues", required_argument, NULL, 'q' },
		{ "workers", required_argument, NULL, 'w' },
		{ "readonly", no_argument, NULL, 'r' },
		{ "serial", required_argument, NULL, 'S' },
		{ "seg-max", required_argument, NULL, 'g' },
		{ "stats", required_argument, NULL, 't' },
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

	b->queues = 1;
	b->worker_per_queue = true;
	b->seg_max = 126;
	b->backend_fd = b->listen_fd = b->lock_fd = b->conn_fd = b->sig_fd =
		b->vfd = -1;
	for (i = 0; i < MAX_QUEUES; i++)
		b->rings[i].kick = b->rings[i].call = b->rings[i].err = -1;

	while ((c = getopt_long(argc, argv, "s:b:q:w:rvh", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			b->socket_path = optarg;
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
		case 'S':
			if (strlen(optarg) > sizeof(b->serial)) {
				logmsg("--serial: at most %zu bytes", sizeof(b->serial));
				return 2;
			}
			strncpy(b->serial, optarg, sizeof(b->serial));
			break;
		case 'g':
			if (parse_uint(optarg, 1, 32766, "--seg-max", &b->seg_max))
				return 2;
			break;
		case 't':
			b->stats_path = optarg;
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

	if (probe_kernel(b) || open_backend(b) || listen_on(b))
		return 1;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGUSR1);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	b->sig_fd = signalfd(-1, &sigs, SFD_CLOEXEC);
	if (b->sig_fd < 0) {
		logmsg("signalfd: %m");
		return 1;
	}
	logmsg("serving %s (%" PRIu64 " bytes, %u-byte blocks%s) on %s, %u queue(s), %s",
	       b->backend_path, b->size, b->lbs, b->readonly ? ", read-only" : "",
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
	vu_unlisten(b->socket_path, b->listen_fd, b->lock_fd);
	close(b->backend_fd);
	return 0;
}
