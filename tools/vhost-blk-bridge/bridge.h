/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vhost-blk-bridge: the state shared by its three parts: the vhost-user
 * protocol with the VMM (vhost-blk-bridge.c), the kernel's vhost-blk
 * device it programs (kernel.c), and the virtio-blk device it presents,
 * built from the backing device or file (config.c).
 */
#ifndef BRIDGE_H
#define BRIDGE_H

#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>
#include <sys/types.h>

#include "../include/ownfile.h"

#include "vhost_blk_uapi.h"
#include "../include/vhost_user_wire.h"

#define PROG			"vhost-blk-bridge"
#define ARRAY_SIZE(a)		(sizeof(a) / sizeof((a)[0]))
#define VHOST_BLK_DEV		"/dev/vhost-blk"
#define MAX_QUEUES_PARAM	"/sys/module/vhost_blk/parameters/max_queues"
#define MAX_QUEUES		128	/* vhost-blk's own limit */

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
	uint64_t poll_hits;
	uint64_t poll_completions;
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
	gid_t socket_group;		/* (gid_t)-1: the owner alone */
	const char *backend_path;
	const char *stats_path;
	unsigned int queues;
	bool worker_per_queue;
	bool readonly;
	bool write_through;		/* offer no VIRTIO_BLK_F_FLUSH */
	bool verbose;
	unsigned int seg_max;
	unsigned int busy_poll;		/* vhost-blk's busy-polling window, 0: off */
	char serial[VHOST_BLK_SERIAL_BYTES];

	/* The backing device or file. */
	int backend_fd;
	uint64_t size;
	unsigned int lbs, pbs;
	bool discard;
	uint32_t max_discard_sectors, discard_alignment, max_wz_sectors;
	uint64_t kernel_features;

	int listen_fd, lock_fd, conn_fd, sig_fd;
	struct own_path stats;		/* --stats, opened at start */
	bool sandbox;			/* --sandbox namespace */
	int seccomp;			/* --seccomp: 0 none, 1 log, 2 kill */
	bool sandboxed;			/* this process is the sandboxed server */
	int stats_sock;			/* sandboxed: stats go to the supervisor */
	pid_t host_pid;			/* as the host sees it */
	const char *server_user;	/* --sandbox-user */
	uid_t server_uid;		/* the sandboxed server's ids */
	gid_t server_gid;

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

void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static inline void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* ---- the kernel device (kernel.c) ---- */

/* Whether the vring's size and addresses fit the current memory table. */
bool ring_fits(struct bridge *b, unsigned int idx);
/* Adds a kernel device's counters to the connection's totals. */
void stats_add(struct vring_stats *t, const struct vring_stats *s);
/* The kernel device's counters (fdinfo) into st[0..n-1]; 0 or -1, errno. */
int kernel_stats(const struct bridge *b, struct vring_stats *st,
		 unsigned int n);
/* Drains and closes the kernel device, keeping the vrings' positions. */
void kernel_stop(struct bridge *b);
/* Makes the kernel device match the bridge's state; 0 or -errno. */
int kernel_apply(struct bridge *b);
/* /dev/vhost-blk is there: its features and queue limit; 0 or -1. */
int probe_kernel(struct bridge *b);

/* Replaces the --stats file with buf (vhost-blk-bridge.c). */
void stats_replace(struct bridge *b, const char *buf, size_t len);

/* ---- the sandbox (sandbox.c) ---- */

/*
 * Split into a supervisor (never returns) and the sandboxed server, which
 * returns 0 and serves; -1 with a message if the sandbox cannot be made
 * (b->sandboxed says which process failed).
 */
int sandbox_enter(struct bridge *b);
/* The sandboxed server's user and group, from --sandbox-user; 0 or -1. */
int sandbox_user(struct bridge *b);
/* The server's seccomp filter; log_only: allow and log what it misses. */
int sandbox_seccomp(bool log_only);

/* ---- the device presented (config.c) ---- */

uint64_t offered_features(const struct bridge *b);
uint64_t offered_protocol_features(void);
/* Opens --backend and takes its size, block sizes and discard limits. */
int open_backend(struct bridge *b);
void config_fill(const struct bridge *b, uint8_t *data, uint32_t size);

#endif
