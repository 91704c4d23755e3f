// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk-bridge: the kernel's vhost-blk device, programmed from the
 * bridge's state: memory table, vrings (translated from the VMM's address
 * space into the bridge's mapping), workers and backend; drained and read
 * back whenever that state changes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "bridge.h"

/* The uapi's layout, whether it came from the kernel or vhost_blk_uapi.h. */
_Static_assert(sizeof(struct vhost_blk_backend) == 48, "vhost_blk_backend");

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
bool ring_fits(struct bridge *b, unsigned int idx)
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
void stats_add(struct vring_stats *t,
		      const struct vring_stats *s)
{
	t->requests += s->requests;
	t->errors += s->errors;
	t->read_bytes += s->read_bytes;
	t->write_bytes += s->write_bytes;
	t->flushes += s->flushes;
	t->discards += s->discards;
	t->kicks += s->kicks;
	t->poll_hits += s->poll_hits;
	t->poll_completions += s->poll_completions;
}

/*
 * Reads the kernel device's counters from its fdinfo, one
 * "vring<N>-<key>:<tab><value>" line each, into st[0..n-1]. Keys it does not
 * know are skipped: the kernel may add some. Returns 0, or -1 with errno set.
 */
int kernel_stats(const struct bridge *b, struct vring_stats *st,
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
		{ "poll-hits", offsetof(struct vring_stats, poll_hits) },
		{ "poll-completions", offsetof(struct vring_stats, poll_completions) },
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
void kernel_stop(struct bridge *b)
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
	st.num = b->busy_poll;
	if (st.num && ioctl(b->vfd, VHOST_SET_VRING_BUSYLOOP_TIMEOUT, &st))
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
int kernel_apply(struct bridge *b)
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

int probe_kernel(struct bridge *b)
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
