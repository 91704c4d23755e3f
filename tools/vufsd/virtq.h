/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vufsd's transport (virtq.c): guest memory and split virtqueues. Each
 * vring that runs has workers of its own (one by default) that take
 * descriptor chains under the ring's lock, hand each to the ring's handler
 * without it, and push the chain back. The main thread only changes a
 * vring's state after stopping (and joining) its workers. What the
 * requests mean is the handler's business alone.
 */
#ifndef VUFSD_VIRTQ_H
#define VUFSD_VIRTQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "../include/vhost_user_wire.h"
#include "chain.h"

#define MAX_REGIONS		VU_MAX_REGIONS
/* Workers per vring at most (--threads). */
#define MAX_WORKERS		16

/* ---- guest memory ---- */

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

/* ---- vrings ---- */

/*
 * What a ring's workers serve, given by the device: per-worker state, and
 * one chain at a time with it.
 */
struct vq_handler {
	void *(*worker_start)(void);	/* the worker's state, or NULL */
	void (*worker_end)(void *state);
	void (*serve)(void *state, const struct chain *ch,
		      struct chain_result *res);
};

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
	const struct vq_handler *handler;
	struct vq_stats stats;
};

int vring_start(struct vq *r);
void vring_stop(struct vq *r);
bool vring_ready(const struct vq *r, bool have_mem);
void vring_reset(struct vq *r);
int vring_translate(struct vq *r, const struct memory *m);

#endif
