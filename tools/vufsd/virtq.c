// SPDX-License-Identifier: GPL-2.0
/*
 * Guest memory and split virtqueues: translation of guest addresses, the
 * walk of a descriptor chain (direct and indirect), the used ring and
 * event-idx notification, and the per-vring workers.
 *
 * Everything the guest wrote is untrusted: descriptor indexes, lengths,
 * addresses, flags and the avail index are checked before use, and a chain
 * that fails a check is returned to the guest with used length 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <linux/virtio_ring.h>

#include "log.h"
#include "virtq.h"

/* ---- guest memory ---- */

/* [addr, addr + len) inside one region, by guest-physical or VMM address. */
static void *translate(const struct memory *m, uint64_t addr, uint64_t len,
		       bool by_uaddr)
{
	unsigned int i;

	for (i = 0; i < m->nregions; i++) {
		const struct vu_region_map *r = &m->regions[i];
		uint64_t start = by_uaddr ? r->uaddr : r->gpa;

		if (addr >= start && addr - start <= r->size &&
		    len <= r->size - (addr - start))
			return (uint8_t *)r->map + r->offset + (addr - start);
	}
	return NULL;
}

void *gpa_to_va(const struct memory *m, uint64_t gpa, uint64_t len)
{
	return translate(m, gpa, len, false);
}

void *uaddr_to_va(const struct memory *m, uint64_t uaddr, uint64_t len)
{
	return translate(m, uaddr, len, true);
}

/*
 * The VMM owns the files behind guest memory and may shrink one after
 * SET_MEM_TABLE: touching a page past the new end then raises SIGBUS, in a
 * worker's copy or ring access. The handler puts a private zero page in
 * place of that page of our mapping, so the access completes on memory
 * the guest never sees, and tells the main thread (memory_fault_fd()),
 * which drops the connection: the VMM loses its device, the daemon lives.
 * A SIGBUS anywhere else is a bug here and kills the daemon as before.
 *
 * The mapped ranges are published for the handler while the rings are
 * stopped (set_mem_table() and reset_device() stop them first).
 */
static struct {
	uintptr_t start, end;
} guarded[MAX_REGIONS];
static unsigned int nguarded;
static int fault_fd = -1;
static long page_size;

static void memory_sigbus(int sig, siginfo_t *si, void *uc)
{
	/* The page sizes a guest-memory mapping may have: base, 2M, 1G. */
	const uintptr_t sizes[] = { page_size, 2UL << 20, 1UL << 30 };
	uintptr_t a = (uintptr_t)si->si_addr;
	unsigned int i, k, n = __atomic_load_n(&nguarded, __ATOMIC_ACQUIRE);
	uint64_t one = 1;
	int saved = errno;

	/* Sent by someone, not a fault: nothing to repair. */
	if (si->si_code <= 0)
		return;
	for (i = 0; i < n; i++) {
		if (a < guarded[i].start || a >= guarded[i].end)
			continue;
		/*
		 * A hugetlbfs mapping can only be replaced a whole huge page
		 * at a time: the first size the kernel takes is the page's.
		 */
		for (k = 0; k < 3; k++) {
			uintptr_t page = a & ~(sizes[k] - 1);

			if (page >= guarded[i].start &&
			    page + sizes[k] <= guarded[i].end &&
			    mmap((void *)page, sizes[k], PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
				 0) != MAP_FAILED)
				break;
		}
		if (k == 3)
			break;
		if (write(fault_fd, &one, sizeof(one)) < 0) {
			/* The counter is full: a wake-up is pending anyway. */
		}
		errno = saved;
		return;
	}
	/* Not guest memory: let the fault kill us when it happens again. */
	signal(SIGBUS, SIG_DFL);
	errno = saved;
}

int memory_guard_init(void)
{
	struct sigaction sa = { .sa_sigaction = memory_sigbus,
				.sa_flags = SA_SIGINFO };

	page_size = sysconf(_SC_PAGESIZE);
	fault_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fault_fd < 0 || sigaction(SIGBUS, &sa, NULL))
		return -1;
	return 0;
}

int memory_fault_fd(void)
{
	return fault_fd;
}

void memory_publish(const struct memory *m)
{
	unsigned int i;

	__atomic_store_n(&nguarded, 0, __ATOMIC_RELEASE);
	for (i = 0; i < m->nregions; i++) {
		guarded[i].start = (uintptr_t)m->regions[i].map;
		guarded[i].end = guarded[i].start + m->regions[i].map_len;
	}
	__atomic_store_n(&nguarded, m->nregions, __ATOMIC_RELEASE);
}

void memory_unmap(struct memory *m)
{
	__atomic_store_n(&nguarded, 0, __ATOMIC_RELEASE);
	vu_unmap_regions(m->regions, m->nregions);
	m->nregions = 0;
}

/*
 * Appends the guest buffer [gpa, gpa + len) to an iovec array. A buffer
 * may span adjacent regions; each piece becomes an iovec of its own.
 */
static int map_buffer(const struct memory *m, uint64_t gpa, uint64_t len,
		      struct iovec *iov, unsigned int *n)
{
	while (len) {
		const struct vu_region_map *r = NULL;
		uint64_t piece;
		unsigned int i;

		for (i = 0; i < m->nregions; i++)
			if (gpa >= m->regions[i].gpa &&
			    gpa - m->regions[i].gpa < m->regions[i].size) {
				r = &m->regions[i];
				break;
			}
		if (!r || *n >= MAX_CHAIN_IOV)
			return -EFAULT;
		piece = r->size - (gpa - r->gpa);
		if (piece > len)
			piece = len;
		iov[*n].iov_base = (uint8_t *)r->map + r->offset + (gpa - r->gpa);
		iov[*n].iov_len = piece;
		(*n)++;
		gpa += piece;
		len -= piece;
	}
	return 0;
}

/* ---- the split ring ---- */

static uint16_t ring_load16(const uint16_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

bool vring_ready(const struct vq *r, bool have_mem)
{
	return have_mem && r->addr_set && r->num && r->kick_fd >= 0 &&
	       (!r->enable_seen || r->enabled);
}

int vring_translate(struct vq *r, const struct memory *m)
{
	size_t n = r->num;

	r->desc = uaddr_to_va(m, r->desc_uaddr, 16 * n);
	r->avail = uaddr_to_va(m, r->avail_uaddr, 6 + 2 * n);
	r->used = uaddr_to_va(m, r->used_uaddr, 6 + 8 * n);
	if (!r->desc || !r->avail || !r->used)
		return -EFAULT;
	r->mem = m;
	return 0;
}

/*
 * Walks the chain starting at head into ch. Returns 0, or -EINVAL for a
 * chain that breaks the rules (index out of range, a loop, a nested or
 * empty indirect table, a readable buffer after a writable one, memory
 * outside the guest's).
 */
static int walk_chain(struct vq *r, uint16_t head, struct chain *ch)
{
	const struct vring_desc *table = r->desc;
	unsigned int size = r->num, i = head, seen = 0;
	bool indirect = false;

	ch->nout = ch->nin = 0;
	ch->out_len = ch->in_len = 0;
	if (head >= r->num)
		return -EINVAL;
	for (;;) {
		const struct vring_desc *d;
		uint16_t flags;
		uint64_t addr;
		uint32_t len;
		int ret;

		if (i >= size || ++seen > size)
			return -EINVAL;
		d = &table[i];
		flags = __atomic_load_n(&d->flags, __ATOMIC_RELAXED);
		addr = d->addr;
		len = d->len;
		if (flags & VRING_DESC_F_INDIRECT) {
			/* A chain is at most the ring's size, tables included. */
			if (indirect || (flags & VRING_DESC_F_NEXT) || !len ||
			    len % sizeof(struct vring_desc) ||
			    len / sizeof(struct vring_desc) > r->num)
				return -EINVAL;
			table = gpa_to_va(r->mem, addr, len);
			if (!table)
				return -EINVAL;
			indirect = true;
			size = len / sizeof(struct vring_desc);
			i = 0;
			seen = 0;
			continue;
		}
		if (flags & VRING_DESC_F_WRITE) {
			ret = map_buffer(r->mem, addr, len, ch->in, &ch->nin);
			ch->in_len += len;
		} else {
			if (ch->nin)
				return -EINVAL;
			ret = map_buffer(r->mem, addr, len, ch->out, &ch->nout);
			ch->out_len += len;
		}
		if (ret)
			return ret;
		if (!(flags & VRING_DESC_F_NEXT))
			return 0;
		i = d->next;
	}
}

static void push_used(struct vq *r, uint16_t head, uint32_t len)
{
	struct vring_used_elem *e = &r->used->ring[r->used_idx % r->num];

	e->id = head;
	e->len = len;
	r->used_idx++;
	__atomic_store_n(&r->used->idx, r->used_idx, __ATOMIC_RELEASE);
}

static void notify(struct vq *r, uint16_t old)
{
	bool need;

	/* The used index must be visible before we read the guest's event. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (r->event_idx) {
		uint16_t ev = ring_load16(&r->avail->ring[r->num]);

		need = (uint16_t)(r->used_idx - ev - 1) < (uint16_t)(r->used_idx - old);
	} else {
		need = !(ring_load16(&r->avail->flags) & VRING_AVAIL_F_NO_INTERRUPT);
	}
	if (!need)
		return;
	pthread_mutex_lock(&r->call_lock);
	if (r->call_fd >= 0) {
		uint64_t one = 1;

		if (write(r->call_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			logmsg("vring %u: signalling the guest: %m", r->index);
	}
	pthread_mutex_unlock(&r->call_lock);
	stat_add(&r->stats.notifies, 1);
}

/* Asks for a kick when the guest adds past what we have taken. */
static void arm_kick(struct vq *r)
{
	if (r->event_idx)
		__atomic_store_n((uint16_t *)&r->used->ring[r->num], r->last_avail,
				 __ATOMIC_RELAXED);
	else
		__atomic_store_n(&r->used->flags, 0, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static bool stopping(struct vq *r)
{
	return __atomic_load_n(&r->stop, __ATOMIC_ACQUIRE);
}

/* With r->lock held: takes the next available chain's head, if any. */
static bool take(struct vq *r, uint16_t *head)
{
	uint16_t avail = ring_load16(&r->avail->idx);

	if (avail == r->last_avail)
		return false;
	if ((uint16_t)(avail - r->last_avail) > r->num) {
		logmsg("vring %u: avail index %u is %u entries past %u (ring of %u): ring corrupt, stopped until reset",
		       r->index, avail, (uint16_t)(avail - r->last_avail),
		       r->last_avail, r->num);
		stat_add(&r->stats.malformed, 1);
		r->broken = true;
		return false;
	}
	*head = ring_load16(&r->avail->ring[r->last_avail % r->num]);
	r->last_avail++;
	return true;
}

/* Serves one chain (without the ring lock); returns the bytes written. */
static size_t serve(struct vq *r, uint16_t head, void *state,
		    struct chain *ch)
{
	struct chain_result res = { 0 };

	stat_add(&r->stats.requests, 1);
	if (walk_chain(r, head, ch)) {
		if (verbose)
			logmsg("vring %u: descriptor chain at head %u is malformed; returned unused",
			       r->index, head);
		stat_add(&r->stats.malformed, 1);
		return 0;
	}
	stat_add(&r->stats.bytes_in, ch->out_len);
	r->handler->serve(state, ch, &res);
	stat_add(&r->stats.bytes_out, res.written);
	if (res.error)
		stat_add(&r->stats.errors, 1);
	if (res.malformed)
		stat_add(&r->stats.malformed, 1);
	return res.written;
}

/*
 * With r->lock held, after a completion: signal the guest once the ring
 * has run dry (or always, with force), or when 64 completions wait, so a
 * burst of requests costs one interrupt rather than one each.
 */
static void completed(struct vq *r, bool force)
{
	if (r->used_idx == r->signalled)
		return;
	if (!force && ring_load16(&r->avail->idx) != r->last_avail &&
	    (uint16_t)(r->used_idx - r->signalled) < 64)
		return;
	notify(r, r->signalled);
	r->signalled = r->used_idx;
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000ULL + ts.tv_nsec / 1000;
}

/* Without r->lock: polls the avail index for a while; true if it moved. */
static bool spin(struct vq *r, uint16_t seen)
{
	uint64_t until = now_us() + r->busy_poll_us;

	while (!stopping(r) && now_us() < until) {
		if (ring_load16(&r->avail->idx) != seen)
			return true;
		__builtin_ia32_pause();
	}
	return false;
}

/*
 * A vring's worker. Workers take chains one at a time under the ring's
 * lock and serve them without it, so with several workers on one ring the
 * requests of a burst are served in parallel; completions may then reach
 * the used ring out of order, as virtio allows.
 */
static void *vring_worker(void *arg)
{
	struct vq *r = arg;
	void *state;
	struct chain ch;
	struct pollfd pfd[2] = {
		{ .fd = r->kick_fd, .events = POLLIN },
		{ .fd = r->stop_fd, .events = POLLIN },
	};

	ch.out = calloc(MAX_CHAIN_IOV, sizeof(*ch.out));
	ch.in = calloc(MAX_CHAIN_IOV, sizeof(*ch.in));
	state = ch.out && ch.in ? r->handler->worker_start() : NULL;
	if (!state) {
		logmsg("vring %u: out of memory", r->index);
		free(ch.out);
		free(ch.in);
		return NULL;
	}
	pthread_mutex_lock(&r->lock);
	while (!stopping(r) && !r->broken) {
		uint16_t head, seen;
		uint64_t v;

		if (take(r, &head)) {
			pthread_mutex_unlock(&r->lock);
			v = serve(r, head, state, &ch);
			pthread_mutex_lock(&r->lock);
			push_used(r, head, v);
			completed(r, false);
			continue;
		}
		if (r->broken)
			break;
		completed(r, true);
		seen = r->last_avail;
		if (r->busy_poll_us) {
			pthread_mutex_unlock(&r->lock);
			v = spin(r, seen);
			pthread_mutex_lock(&r->lock);
			if (v)
				continue;
		}
		arm_kick(r);
		if (ring_load16(&r->avail->idx) != r->last_avail)
			continue;
		pthread_mutex_unlock(&r->lock);
		if (poll(pfd, 2, -1) < 0 && errno != EINTR) {
			logmsg("vring %u: poll: %m", r->index);
			pthread_mutex_lock(&r->lock);
			break;
		}
		/* Several workers may wake for one kick: the fd is non-blocking. */
		if (pfd[0].revents & POLLIN) {
			if (read(r->kick_fd, &v, sizeof(v)) == sizeof(v))
				stat_add(&r->stats.kicks, 1);
		} else if (pfd[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
			logmsg("vring %u: kick eventfd failed; ring parked", r->index);
			pthread_mutex_lock(&r->lock);
			r->broken = true;
			break;
		}
		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);
	/* A broken ring waits for the VMM to reset or re-base it. */
	while (!stopping(r))
		poll(&pfd[1], 1, -1);
	r->handler->worker_end(state);
	free(ch.out);
	free(ch.in);
	return NULL;
}

int vring_start(struct vq *r)
{
	unsigned int i;
	int ret, fl;

	if (r->running)
		return 0;
	if (r->broken)
		return -EIO;
	/* What the guest has been given back so far is in the used ring. */
	r->used_idx = r->signalled = ring_load16(&r->used->idx);
	if (r->used_idx != r->last_avail)
		logmsg("vring %u: starts at avail %u but the used index is %u",
		       r->index, r->last_avail, r->used_idx);
	fl = fcntl(r->kick_fd, F_GETFL);
	if (fl < 0 || fcntl(r->kick_fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	r->stop = 0;
	r->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (r->stop_fd < 0)
		return -errno;
	r->running = true;
	for (i = 0; i < r->nthreads; i++) {
		ret = pthread_create(&r->threads[i], NULL, vring_worker, r);
		if (ret) {
			r->started = i;
			vring_stop(r);
			return -ret;
		}
	}
	r->started = r->nthreads;
	if (verbose)
		logmsg("vring %u: started at %u (%u entries%s, %u worker%s)",
		       r->index, r->last_avail, r->num,
		       r->event_idx ? ", event idx" : "", r->nthreads,
		       r->nthreads == 1 ? "" : "s");
	return 0;
}

/* Stops the workers after the requests they are serving. */
void vring_stop(struct vq *r)
{
	uint64_t one = 1;
	unsigned int i;

	if (!r->running)
		return;
	__atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
	if (write(r->stop_fd, &one, sizeof(one)) < 0)
		logmsg("vring %u: waking the workers: %m", r->index);
	for (i = 0; i < r->started; i++)
		pthread_join(r->threads[i], NULL);
	close(r->stop_fd);
	r->stop_fd = -1;
	r->running = false;
	if (verbose)
		logmsg("vring %u: stopped at %u", r->index, r->last_avail);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Back to the state before any message about the ring. */
void vring_reset(struct vq *r)
{
	vring_stop(r);
	close_fd(&r->kick_fd);
	pthread_mutex_lock(&r->call_lock);
	close_fd(&r->call_fd);
	pthread_mutex_unlock(&r->call_lock);
	close_fd(&r->err_fd);
	r->num = 0;
	r->addr_set = false;
	r->desc = NULL;
	r->avail = NULL;
	r->used = NULL;
	r->last_avail = r->used_idx = 0;
	r->enable_seen = r->enabled = false;
	r->broken = false;
}
