// SPDX-License-Identifier: GPL-2.0
/*
 * vblk-emu: a userspace stand-in for the virtio-blk passthrough character
 * device, to run fio's cmd_type=vblk engine on a host without the kernel
 * that has /dev/vblk/vdX. Test tooling only.
 *
 * LD_PRELOAD it into fio (run jobs with thread=1) or fio's t/io_uring; it
 * stays idle in any program not called fio or io_uring. A seccomp user
 * notification filter traps io_uring_setup, io_uring_enter,
 * io_uring_register and ioctl(VIRTBLK_IOC_GET_INFO); a supervisor thread in
 * the same process answers them. Rings are memfds laid out like io_uring's
 * mmap regions; submitted commands are checked against the uapi
 * (<linux/virtio_blk_cmd.h>, the kernel's own header) as strictly as the
 * header describes, run with pread/pwrite/fallocate on a backing file and
 * completed at once. Rejected commands complete with the errno the guest
 * tests (tests/guest/pt.sh) expect of the driver, and are counted and
 * logged.
 *
 * Environment:
 *   VBLK_EMU_DEV    the device node (any character device node; matched by
 *                   inode, e.g. one made with mknod c 1 3)
 *   VBLK_EMU_IMG    backing file; capacity = its size
 *   VBLK_EMU_LBS    logical block size (512)
 *   VBLK_EMU_OPS    info.ops (all commands)
 *   VBLK_EMU_FLAGS  info.flags (WRITE_CACHE | POLL)
 *   VBLK_EMU_MAX_SECTORS, VBLK_EMU_MAX_SEGMENTS, VBLK_EMU_MAX_DISCARD
 *   VBLK_EMU_STATS  file that receives counters (key=value) at exit
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/seccomp.h>
#include <linux/virtio_blk_cmd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_RINGS	64
#define MAX_BUFS	4096
#define MAX_FILES	1024

struct ring {
	int fd;			/* the memfd handed out as the ring fd */
	unsigned int flags;	/* IORING_SETUP_* */
	unsigned int sq_entries, cq_entries;
	unsigned char *sq, *cq, *sqes;
	size_t sq_len, cq_len, sqes_len;
	struct iovec bufs[MAX_BUFS];
	unsigned int nr_bufs;
	int files[MAX_FILES];
	unsigned int nr_files;
	pthread_mutex_t lock;
};

/* ring layout offsets, chosen here like the kernel chooses its own */
enum { SQ_HEAD = 0, SQ_TAIL = 4, SQ_MASK = 8, SQ_ENTRIES = 12, SQ_FLAGS = 16,
	SQ_DROPPED = 20, SQ_ARRAY = 64 };
enum { CQ_HEAD = 0, CQ_TAIL = 4, CQ_MASK = 8, CQ_ENTRIES = 12,
	CQ_OVERFLOW = 16, CQ_FLAGS = 20, CQ_CQES = 64 };

static struct ring *rings[MAX_RINGS];
static pthread_mutex_t rings_lock = PTHREAD_MUTEX_INITIALIZER;

static struct virtblk_info info;
static dev_t dev_dev;
static ino_t dev_ino;
static int img_fd = -1;
static const char *stats_path;

enum { C_READ, C_WRITE, C_READV, C_WRITEV, C_FLUSH, C_DISCARD, C_WZ,
	C_GET_ID, C_GET_INFO, C_NR };
static const char *const cmd_names[C_NR] = { "read", "write", "readv",
	"writev", "flush", "discard", "write_zeroes", "get_id", "get_info" };
static struct {
	unsigned long cmds[C_NR];	/* completed successfully */
	unsigned long bytes[C_NR];
	unsigned long fixed, registered_file, polled, rejected, failed;
	unsigned long rings, rings_sqe128, rings_cqe32, rings_iopoll;
	unsigned long rings_sqpoll, ioctl_get_info, overflow;
	unsigned long max_inflight_batch;
} st;
static pthread_mutex_t st_lock = PTHREAD_MUTEX_INITIALIZER;

static void emu_log(const char *fmt, ...)
{
	static int logged;
	va_list ap;

	if (logged++ >= 20)
		return;
	va_start(ap, fmt);
	fputs("vblk-emu: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static unsigned long env_ul(const char *name, unsigned long def)
{
	const char *v = getenv(name);

	return v && *v ? strtoul(v, NULL, 0) : def;
}

static bool is_dev_fd(int fd)
{
	struct stat sb;

	return fd >= 0 && !fstat(fd, &sb) && S_ISCHR(sb.st_mode) &&
		sb.st_dev == dev_dev && sb.st_ino == dev_ino;
}

static struct ring *find_ring(int fd)
{
	struct ring *r = NULL;
	int i;

	pthread_mutex_lock(&rings_lock);
	for (i = 0; i < MAX_RINGS; i++)
		if (rings[i] && rings[i]->fd == fd)
			r = rings[i];
	pthread_mutex_unlock(&rings_lock);
	return r;
}

static unsigned int roundup_pow2(unsigned int v)
{
	unsigned int r = 1;

	while (r < v)
		r <<= 1;
	return r;
}

/* ---- io_uring_setup ---- */

static long emu_setup(unsigned int entries, struct io_uring_params *p)
{
	const unsigned int known = IORING_SETUP_IOPOLL | IORING_SETUP_SQPOLL |
		IORING_SETUP_SQ_AFF | IORING_SETUP_CQSIZE |
		IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER |
		IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SQE128 |
		IORING_SETUP_CQE32 | IORING_SETUP_CLAMP;
	size_t sqe_size, cqe_size;
	struct ring *r;
	int i, fd;

	if (!entries || entries > 4096 || (p->flags & ~known))
		return -EINVAL;
	/* as the kernel: an explicit CQ size at least the SQ size */
	if ((p->flags & IORING_SETUP_CQSIZE) &&
	    (!p->cq_entries || p->cq_entries > 8192 ||
	     roundup_pow2(p->cq_entries) < roundup_pow2(entries)))
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	pthread_mutex_init(&r->lock, NULL);
	r->flags = p->flags;
	r->sq_entries = roundup_pow2(entries);
	if (p->flags & IORING_SETUP_CQSIZE)
		r->cq_entries = roundup_pow2(p->cq_entries);
	else
		r->cq_entries = 2 * r->sq_entries;
	sqe_size = (p->flags & IORING_SETUP_SQE128) ? 128 : 64;
	cqe_size = (p->flags & IORING_SETUP_CQE32) ? 32 : 16;
	r->sq_len = SQ_ARRAY + r->sq_entries * 4;
	r->cq_len = CQ_CQES + r->cq_entries * cqe_size;
	r->sqes_len = r->sq_entries * sqe_size;

	fd = memfd_create("vblk-emu-ring", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, IORING_OFF_SQES + r->sqes_len) < 0)
		goto fail;
	r->sq = mmap(NULL, r->sq_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		     IORING_OFF_SQ_RING);
	r->cq = mmap(NULL, r->cq_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		     IORING_OFF_CQ_RING);
	r->sqes = mmap(NULL, r->sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		       fd, IORING_OFF_SQES);
	if (r->sq == MAP_FAILED || r->cq == MAP_FAILED || r->sqes == MAP_FAILED)
		goto fail;
	r->fd = fd;
	*(unsigned int *)(r->sq + SQ_MASK) = r->sq_entries - 1;
	*(unsigned int *)(r->sq + SQ_ENTRIES) = r->sq_entries;
	*(unsigned int *)(r->cq + CQ_MASK) = r->cq_entries - 1;
	*(unsigned int *)(r->cq + CQ_ENTRIES) = r->cq_entries;

	memset(&p->sq_off, 0, sizeof(p->sq_off));
	memset(&p->cq_off, 0, sizeof(p->cq_off));
	p->sq_entries = r->sq_entries;
	p->cq_entries = r->cq_entries;
	p->features = IORING_FEAT_SINGLE_MMAP | IORING_FEAT_NODROP |
		IORING_FEAT_SUBMIT_STABLE;
	p->sq_off.head = SQ_HEAD;
	p->sq_off.tail = SQ_TAIL;
	p->sq_off.ring_mask = SQ_MASK;
	p->sq_off.ring_entries = SQ_ENTRIES;
	p->sq_off.flags = SQ_FLAGS;
	p->sq_off.dropped = SQ_DROPPED;
	p->sq_off.array = SQ_ARRAY;
	p->cq_off.head = CQ_HEAD;
	p->cq_off.tail = CQ_TAIL;
	p->cq_off.ring_mask = CQ_MASK;
	p->cq_off.ring_entries = CQ_ENTRIES;
	p->cq_off.overflow = CQ_OVERFLOW;
	p->cq_off.flags = CQ_FLAGS;
	p->cq_off.cqes = CQ_CQES;

	pthread_mutex_lock(&rings_lock);
	for (i = 0; i < MAX_RINGS; i++) {
		/* a closed ring's fd number may have been reused */
		if (rings[i] && rings[i]->fd == fd)
			rings[i]->fd = -1;
	}
	for (i = 0; i < MAX_RINGS && rings[i] && rings[i]->fd >= 0; i++)
		;
	if (i == MAX_RINGS) {
		pthread_mutex_unlock(&rings_lock);
		goto fail;
	}
	rings[i] = r;	/* a stale entry is leaked, test tooling */
	pthread_mutex_unlock(&rings_lock);

	pthread_mutex_lock(&st_lock);
	st.rings++;
	st.rings_sqe128 += !!(r->flags & IORING_SETUP_SQE128);
	st.rings_cqe32 += !!(r->flags & IORING_SETUP_CQE32);
	st.rings_iopoll += !!(r->flags & IORING_SETUP_IOPOLL);
	st.rings_sqpoll += !!(r->flags & IORING_SETUP_SQPOLL);
	pthread_mutex_unlock(&st_lock);
	return fd;
fail:
	close(fd);
	return -ENOMEM;
}

/* ---- commands ---- */

static int reject(const char *why, unsigned int op, int err)
{
	pthread_mutex_lock(&st_lock);
	st.rejected++;
	pthread_mutex_unlock(&st_lock);
	emu_log("rejected command %#x: %s (%d)", op, why, err);
	return err;
}

static bool cmd_supported(unsigned int nr)
{
	return info.ops & (1ULL << nr);
}

static int check_range(__u64 sector, __u64 bytes, unsigned int op)
{
	__u64 lbs = info.logical_block_size;

	if ((sector << 9) % lbs || bytes % lbs || !bytes)
		return reject("unaligned or empty range", op, -EINVAL);
	if (sector + (bytes >> 9) < sector)
		return reject("range wraps", op, -EOVERFLOW);
	if (sector + (bytes >> 9) > info.capacity)
		return reject("range beyond capacity", op, -ERANGE);
	return 0;
}

/* pages a plain buffer spans: each is a segment */
static __u64 pages(__u64 addr, __u64 len)
{
	return ((addr + len + 4095) >> 12) - (addr >> 12);
}

static bool buf_in_fixed(struct ring *r, unsigned int idx, __u64 addr,
			 __u64 len)
{
	struct iovec *b;

	if (idx >= r->nr_bufs)
		return false;
	b = &r->bufs[idx];
	return addr >= (uintptr_t) b->iov_base &&
		addr + len <= (uintptr_t) b->iov_base + b->iov_len;
}

static void count(int c, __u64 bytes)
{
	pthread_mutex_lock(&st_lock);
	st.cmds[c]++;
	st.bytes[c] += bytes;
	pthread_mutex_unlock(&st_lock);
}

static int do_cmd(struct ring *r, const struct io_uring_sqe *sqe)
{
	const struct virtblk_uring_cmd *c = (const void *) sqe->cmd;
	unsigned int op = sqe->cmd_op;
	bool fixed = sqe->uring_cmd_flags & IORING_URING_CMD_FIXED;
	int fd = sqe->fd, i;
	struct iovec iov[1024];
	ssize_t ret;
	__u64 bytes, n;

	if (sqe->opcode != IORING_OP_URING_CMD)
		return reject("opcode is not IORING_OP_URING_CMD", op, -EINVAL);
	if (sqe->flags & IOSQE_FIXED_FILE) {
		if ((unsigned int) fd >= r->nr_files)
			return reject("bad fixed file index", op, -EBADF);
		fd = r->files[fd];
		pthread_mutex_lock(&st_lock);
		st.registered_file++;
		pthread_mutex_unlock(&st_lock);
	}
	if (!is_dev_fd(fd))
		return reject("file is not the device", op, -EOPNOTSUPP);
	/* what io_uring itself checks for IORING_OP_URING_CMD */
	if (sqe->__pad1 || (sqe->uring_cmd_flags & ~IORING_URING_CMD_FIXED))
		return reject("__pad1 or unknown uring_cmd_flags", op, -EINVAL);
	if (!(r->flags & IORING_SETUP_SQE128))
		return reject("ring without IORING_SETUP_SQE128", op,
			      -EOPNOTSUPP);
	if (!fixed && sqe->buf_index)
		return reject("buf_index without IORING_URING_CMD_FIXED", op,
			      -EINVAL);
	if (_IOC_TYPE(op) != VIRTBLK_IOC_MAGIC ||
	    op != VIRTBLK_U_CMD(_IOC_NR(op)) ||
	    _IOC_NR(op) > VIRTBLK_CMD_GET_ID)
		return reject("unknown cmd_op", op, -ENOTTY);
	if ((info.flags & VIRTBLK_INFO_F_READ_ONLY) &&
	    (op == VIRTBLK_U_CMD_WRITE || op == VIRTBLK_U_CMD_WRITEV ||
	     op == VIRTBLK_U_CMD_FLUSH || op == VIRTBLK_U_CMD_DISCARD ||
	     op == VIRTBLK_U_CMD_WRITE_ZEROES))
		return reject("write to a read-only disk", op, -EROFS);
	if (!cmd_supported(_IOC_NR(op)))
		return reject("command not in info.ops", op, -EOPNOTSUPP);
	if ((r->flags & IORING_SETUP_IOPOLL) && !(info.flags & VIRTBLK_INFO_F_POLL))
		return reject("IOPOLL ring on a disk without poll queues", op,
			      -EOPNOTSUPP);
	if (c->reserved0 || c->reserved[0] || c->reserved[1] ||
	    c->reserved[2] || c->reserved[3])
		return reject("reserved fields not zero", op, -EINVAL);
	if (c->flags && op != VIRTBLK_U_CMD_WRITE_ZEROES)
		return reject("flags set", op, -EINVAL);
	if (fixed && op != VIRTBLK_U_CMD_READ && op != VIRTBLK_U_CMD_WRITE)
		return reject("fixed buffer with a command other than READ/WRITE",
			      op, -EINVAL);

	switch (op) {
	case VIRTBLK_U_CMD_READ:
	case VIRTBLK_U_CMD_WRITE:
		if (c->nr_sectors)
			return reject("nr_sectors set", op, -EINVAL);
		ret = check_range(c->sector, c->len, op);
		if (ret)
			return ret;
		if (c->len > (__u64) info.max_sectors << 9)
			return reject("len above max_sectors", op, -E2BIG);
		if (!fixed && pages(c->addr, c->len) > info.max_segments)
			return reject("buffer spans more than max_segments pages",
				      op, -E2BIG);
		if (fixed) {
			if (!buf_in_fixed(r, sqe->buf_index, c->addr, c->len))
				return reject("not inside the registered buffer",
					      op, -EFAULT);
			pthread_mutex_lock(&st_lock);
			st.fixed++;
			pthread_mutex_unlock(&st_lock);
		}
		if (op == VIRTBLK_U_CMD_READ)
			ret = pread(img_fd, (void *)(uintptr_t) c->addr, c->len,
				    c->sector << 9);
		else
			ret = pwrite(img_fd, (void *)(uintptr_t) c->addr,
				     c->len, c->sector << 9);
		if (ret < 0)
			return -errno;
		count(op == VIRTBLK_U_CMD_READ ? C_READ : C_WRITE, ret);
		return ret;
	case VIRTBLK_U_CMD_READV:
	case VIRTBLK_U_CMD_WRITEV:
		if (c->nr_sectors)
			return reject("nr_sectors set", op, -EINVAL);
		if (!c->len)
			return reject("no iovecs", op, -EINVAL);
		if (c->len > info.max_segments || c->len > 1024)
			return reject("more iovecs than max_segments", op, -E2BIG);
		memcpy(iov, (void *)(uintptr_t) c->addr, c->len * sizeof(*iov));
		for (bytes = 0, n = 0, i = 0; i < (int) c->len; i++) {
			bytes += iov[i].iov_len;
			n += pages((uintptr_t) iov[i].iov_base, iov[i].iov_len);
		}
		ret = check_range(c->sector, bytes, op);
		if (ret)
			return ret;
		if (bytes > (__u64) info.max_sectors << 9)
			return reject("length above max_sectors", op, -E2BIG);
		if (n > info.max_segments)
			return reject("iovecs span more than max_segments pages",
				      op, -E2BIG);
		if (op == VIRTBLK_U_CMD_READV)
			ret = preadv(img_fd, iov, c->len, c->sector << 9);
		else
			ret = pwritev(img_fd, iov, c->len, c->sector << 9);
		if (ret < 0)
			return -errno;
		count(op == VIRTBLK_U_CMD_READV ? C_READV : C_WRITEV, ret);
		return ret;
	case VIRTBLK_U_CMD_FLUSH:
		if (c->sector || c->addr || c->len || c->nr_sectors)
			return reject("FLUSH with fields set", op, -EINVAL);
		if ((info.flags & VIRTBLK_INFO_F_WRITE_CACHE) && fdatasync(img_fd))
			return -errno;
		count(C_FLUSH, 0);
		return 0;
	case VIRTBLK_U_CMD_DISCARD:
	case VIRTBLK_U_CMD_WRITE_ZEROES:
		if (c->addr || c->len)
			return reject("addr or len set", op, -EINVAL);
		if (c->flags & ~VIRTBLK_CMD_F_UNMAP)
			return reject("unknown flags", op, -EINVAL);
		if (c->nr_sectors > (op == VIRTBLK_U_CMD_DISCARD ?
				     info.max_discard_sectors :
				     info.max_write_zeroes_sectors))
			return reject("range above the maximum", op, -E2BIG);
		ret = check_range(c->sector, (__u64) c->nr_sectors << 9, op);
		if (ret)
			return ret;
		if (fallocate(img_fd, op == VIRTBLK_U_CMD_DISCARD ?
			      FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE :
			      FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
			      c->sector << 9, (__u64) c->nr_sectors << 9))
			return -errno;
		count(op == VIRTBLK_U_CMD_DISCARD ? C_DISCARD : C_WZ,
		      (__u64) c->nr_sectors << 9);
		return 0;
	case VIRTBLK_U_CMD_GET_ID:
		if (c->sector || c->nr_sectors || c->len < VIRTBLK_ID_BYTES)
			return reject("bad GET_ID", op, -EINVAL);
		memset((void *)(uintptr_t) c->addr, 0, VIRTBLK_ID_BYTES);
		memcpy((void *)(uintptr_t) c->addr, "vblk-emu", 8);
		count(C_GET_ID, 0);
		return 0;
	case VIRTBLK_U_CMD_GET_INFO:
		if (c->sector || c->nr_sectors || c->len != sizeof(info))
			return reject("bad GET_INFO", op, -EINVAL);
		memcpy((void *)(uintptr_t) c->addr, &info, sizeof(info));
		count(C_GET_INFO, 0);
		return 0;
	}
	return reject("unknown command", op, -EOPNOTSUPP);
}

static void post_cqe(struct ring *r, __u64 user_data, int res)
{
	unsigned int tail = *(unsigned int *)(r->cq + CQ_TAIL);
	unsigned int head = __atomic_load_n((unsigned int *)(r->cq + CQ_HEAD),
					    __ATOMIC_ACQUIRE);
	size_t cqe_size = (r->flags & IORING_SETUP_CQE32) ? 32 : 16;
	struct io_uring_cqe *cqe;

	if (tail - head >= r->cq_entries) {
		pthread_mutex_lock(&st_lock);
		st.overflow++;
		pthread_mutex_unlock(&st_lock);
		emu_log("CQ ring overflow: completion lost");
		return;
	}
	cqe = (void *)(r->cq + CQ_CQES +
		       (tail & (r->cq_entries - 1)) * cqe_size);
	memset(cqe, 0, cqe_size);
	cqe->user_data = user_data;
	cqe->res = res;
	__atomic_store_n((unsigned int *)(r->cq + CQ_TAIL), tail + 1,
			 __ATOMIC_RELEASE);
}

/* Consume up to @max SQEs; returns the number consumed. */
static unsigned int submit(struct ring *r, unsigned int max)
{
	size_t sqe_size = (r->flags & IORING_SETUP_SQE128) ? 128 : 64;
	unsigned int *headp = (unsigned int *)(r->sq + SQ_HEAD);
	unsigned int head, tail, n = 0;

	pthread_mutex_lock(&r->lock);
	head = *headp;
	tail = __atomic_load_n((unsigned int *)(r->sq + SQ_TAIL),
			       __ATOMIC_ACQUIRE);
	while (head != tail && n < max) {
		unsigned int idx = ((unsigned int *)(r->sq + SQ_ARRAY))
					[head & (r->sq_entries - 1)];
		const struct io_uring_sqe *sqe;
		int res;

		if (idx >= r->sq_entries) {
			emu_log("bad SQ array index %u", idx);
			res = -EINVAL;
			post_cqe(r, 0, res);
		} else {
			sqe = (void *)(r->sqes + idx * sqe_size);
			res = do_cmd(r, sqe);
			if (res < 0) {
				pthread_mutex_lock(&st_lock);
				st.failed++;
				pthread_mutex_unlock(&st_lock);
			} else if (r->flags & IORING_SETUP_IOPOLL) {
				pthread_mutex_lock(&st_lock);
				st.polled++;
				pthread_mutex_unlock(&st_lock);
			}
			post_cqe(r, sqe->user_data, res);
		}
		head++;
		n++;
	}
	__atomic_store_n(headp, head, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&r->lock);

	pthread_mutex_lock(&st_lock);
	if (n > st.max_inflight_batch)
		st.max_inflight_batch = n;
	pthread_mutex_unlock(&st_lock);
	return n;
}

/* The SQPOLL "kernel thread": consumes SQEs of SQPOLL rings on its own. */
static void *sqpoll_thread(void *arg)
{
	(void) arg;
	for (;;) {
		unsigned int n = 0;
		int i;

		for (i = 0; i < MAX_RINGS; i++) {
			struct ring *r = rings[i];

			if (r && r->fd >= 0 && (r->flags & IORING_SETUP_SQPOLL))
				n += submit(r, ~0U);
		}
		if (!n)
			usleep(20);
	}
	return NULL;
}

static long emu_register(struct ring *r, unsigned int opcode, void *arg,
			 unsigned int nr)
{
	struct io_uring_probe *p = arg;
	unsigned int i;

	switch (opcode) {
	case IORING_REGISTER_BUFFERS:
		if (!nr || nr > MAX_BUFS)
			return -EINVAL;
		memcpy(r->bufs, arg, nr * sizeof(struct iovec));
		r->nr_bufs = nr;
		return 0;
	case IORING_REGISTER_FILES:
		if (!nr || nr > MAX_FILES)
			return -EINVAL;
		memcpy(r->files, arg, nr * sizeof(int));
		r->nr_files = nr;
		return 0;
	case IORING_REGISTER_PROBE:
		p->last_op = IORING_OP_URING_CMD;
		p->ops_len = nr < IORING_OP_URING_CMD + 1 ? nr :
			IORING_OP_URING_CMD + 1;
		for (i = 0; i < p->ops_len; i++) {
			p->ops[i].op = i;
			p->ops[i].flags = IO_URING_OP_SUPPORTED;
		}
		return 0;
	}
	return -EINVAL;
}

/* ---- the supervisor ---- */

static int listener = -1;
static pthread_mutex_t listener_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t listener_cond = PTHREAD_COND_INITIALIZER;

static bool same_process(pid_t tid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d", (int) tid);
	return !access(path, F_OK);
}

static void handle(struct seccomp_notif *req, struct seccomp_notif_resp *resp)
{
	const __u64 *a = req->data.args;
	struct ring *r;
	long ret = 0;

	resp->id = req->id;
	resp->flags = 0;
	resp->val = 0;
	resp->error = 0;

	if (!same_process(req->pid)) {
		emu_log("a forked process used io_uring; run fio with thread=1");
		resp->error = -ENOSYS;
		return;
	}

	switch (req->data.nr) {
	case __NR_io_uring_setup:
		ret = emu_setup(a[0], (struct io_uring_params *)(uintptr_t) a[1]);
		break;
	case __NR_io_uring_enter:
		r = find_ring((int) a[0]);
		if (!r) {
			resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
			return;
		}
		ret = 0;
		if (!(r->flags & IORING_SETUP_SQPOLL))
			ret = submit(r, (unsigned int) a[1]);
		break;
	case __NR_io_uring_register:
		r = find_ring((int) a[0]);
		if (!r) {
			resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
			return;
		}
		ret = emu_register(r, (unsigned int) a[1],
				   (void *)(uintptr_t) a[2], (unsigned int) a[3]);
		break;
	case __NR_ioctl:
		if (!is_dev_fd((int) a[0])) {
			resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
			return;
		}
		memcpy((void *)(uintptr_t) a[2], &info, sizeof(info));
		pthread_mutex_lock(&st_lock);
		st.ioctl_get_info++;
		pthread_mutex_unlock(&st_lock);
		ret = 0;
		break;
	default:
		resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		return;
	}
	if (ret < 0)
		resp->error = ret;
	else
		resp->val = ret;
}

static void *supervisor(void *arg)
{
	struct seccomp_notif_sizes sizes;
	struct seccomp_notif *req;
	struct seccomp_notif_resp *resp;
	int fd;

	(void) arg;
	pthread_mutex_lock(&listener_lock);
	while (listener < 0)
		pthread_cond_wait(&listener_cond, &listener_lock);
	fd = listener;
	pthread_mutex_unlock(&listener_lock);

	if (syscall(__NR_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0)
		return NULL;
	req = calloc(1, sizes.seccomp_notif > sizeof(*req) ?
		     sizes.seccomp_notif : sizeof(*req));
	resp = calloc(1, sizes.seccomp_notif_resp > sizeof(*resp) ?
		      sizes.seccomp_notif_resp : sizeof(*resp));
	for (;;) {
		memset(req, 0, sizes.seccomp_notif);
		if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, req) < 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		handle(req, resp);
		/* ENOENT: the thread went away meanwhile */
		ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, resp);
	}
	return NULL;
}

static void write_stats(void)
{
	FILE *f;
	int i;

	if (!stats_path)
		return;
	f = fopen(stats_path, "w");
	if (!f)
		return;
	for (i = 0; i < C_NR; i++)
		fprintf(f, "%s=%lu\n%s_bytes=%lu\n", cmd_names[i], st.cmds[i],
			cmd_names[i], st.bytes[i]);
	fprintf(f, "fixed=%lu\nregistered_file=%lu\npolled=%lu\n"
		"rejected=%lu\nfailed=%lu\nrings=%lu\nrings_sqe128=%lu\n"
		"rings_cqe32=%lu\nrings_iopoll=%lu\nrings_sqpoll=%lu\n"
		"ioctl_get_info=%lu\noverflow=%lu\nmax_batch=%lu\n",
		st.fixed, st.registered_file, st.polled, st.rejected,
		st.failed, st.rings, st.rings_sqe128, st.rings_cqe32,
		st.rings_iopoll, st.rings_sqpoll, st.ioctl_get_info,
		st.overflow, st.max_inflight_batch);
	fclose(f);
}

__attribute__((constructor)) static void vblk_emu_init(void)
{
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 6, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_enter, 5, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_register, 4, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 0, 4),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, args[1])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, VIRTBLK_IOC_GET_INFO, 0, 2),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {
		.len = sizeof(filter) / sizeof(filter[0]),
		.filter = filter,
	};
	const char *dev = getenv("VBLK_EMU_DEV");
	const char *img = getenv("VBLK_EMU_IMG");
	pthread_t t;
	struct stat sb;
	int fd;

	/*
	 * only fio itself or its t/io_uring, not a wrapper that starts them
	 * (timeout, env)
	 */
	if (!dev || !img || (strcmp(program_invocation_short_name, "fio") &&
			     strcmp(program_invocation_short_name, "io_uring")))
		return;
	if (stat(dev, &sb) || !S_ISCHR(sb.st_mode)) {
		fprintf(stderr, "vblk-emu: %s is not a character device\n", dev);
		return;
	}
	dev_dev = sb.st_dev;
	dev_ino = sb.st_ino;
	img_fd = open(img, O_RDWR | O_CLOEXEC);
	if (img_fd < 0 || fstat(img_fd, &sb)) {
		perror("vblk-emu: backing file");
		return;
	}
	stats_path = getenv("VBLK_EMU_STATS");

	info.ops = env_ul("VBLK_EMU_OPS", (1UL << (VIRTBLK_CMD_GET_ID + 1)) - 1);
	info.capacity = sb.st_size >> 9;
	info.flags = env_ul("VBLK_EMU_FLAGS", VIRTBLK_INFO_F_WRITE_CACHE |
			    VIRTBLK_INFO_F_POLL);
	info.logical_block_size = env_ul("VBLK_EMU_LBS", 512);
	info.max_sectors = env_ul("VBLK_EMU_MAX_SECTORS", 2048);
	info.max_segments = env_ul("VBLK_EMU_MAX_SEGMENTS", 128);
	info.max_segment_size = 65536;
	info.max_discard_sectors = env_ul("VBLK_EMU_MAX_DISCARD", 8192);
	info.max_write_zeroes_sectors = 8192;
	info.nr_poll_queues = (info.flags & VIRTBLK_INFO_F_POLL) ? 1 : 0;

	/* Both threads start before the filter, so they are not under it. */
	if (pthread_create(&t, NULL, supervisor, NULL) ||
	    pthread_create(&t, NULL, sqpoll_thread, NULL)) {
		fprintf(stderr, "vblk-emu: cannot start threads\n");
		return;
	}
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	fd = syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER,
		     SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	if (fd < 0) {
		perror("vblk-emu: seccomp");
		return;
	}
	pthread_mutex_lock(&listener_lock);
	listener = fd;
	pthread_cond_signal(&listener_cond);
	pthread_mutex_unlock(&listener_lock);
	atexit(write_stats);
}
