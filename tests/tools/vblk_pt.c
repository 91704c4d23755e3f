// SPDX-License-Identifier: GPL-2.0
/*
 * vblk_pt: send virtio-blk passthrough commands (io_uring uring_cmd on
 * /dev/vblk/vdX) and check the result, for the guest tests.
 *
 *   vblk_pt [options] DEV OP
 *
 * OP is one of info, ioctl-info, read, write, readv, writev, flush, discard,
 * write-zeroes, get-id (passthrough on the character device DEV), or
 * bdev-read, bdev-write (O_DIRECT pread/pwrite on the block device DEV, to
 * cross-check data written the other way).
 *
 * Data is a pattern that depends only on the seed and the byte's position
 * on the disk, so it can be checked whatever the transfer sizes were.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <liburing.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/nvme_ioctl.h>
#include <linux/virtio_blk_cmd.h>

#define PAGE 4096

static const char *errnames[] = {
	[EPERM] = "EPERM", [ENOENT] = "ENOENT", [EIO] = "EIO",
	[ENXIO] = "ENXIO", [E2BIG] = "E2BIG", [EBADF] = "EBADF",
	[EAGAIN] = "EAGAIN", [ENOMEM] = "ENOMEM", [EACCES] = "EACCES",
	[EFAULT] = "EFAULT", [ENODEV] = "ENODEV", [EINVAL] = "EINVAL",
	[ENOTTY] = "ENOTTY", [ENOSPC] = "ENOSPC", [EROFS] = "EROFS",
	[ERANGE] = "ERANGE", [EOVERFLOW] = "EOVERFLOW",
	[EOPNOTSUPP] = "EOPNOTSUPP", [EINTR] = "EINTR", [ECANCELED] = "ECANCELED",
};

static const char *res_name(int res)
{
	static char buf[32];

	if (res >= 0) {
		snprintf(buf, sizeof(buf), "%d", res);
		return buf;
	}
	if (-res < (int)(sizeof(errnames) / sizeof(errnames[0])) &&
	    errnames[-res])
		return errnames[-res];
	snprintf(buf, sizeof(buf), "errno%d", -res);
	return buf;
}

static struct {
	const char *dev;
	const char *op;
	uint64_t sector;
	uint32_t len;
	uint32_t nr_sectors;
	uint32_t flags;
	unsigned int segs;
	uint64_t seed;
	bool pattern;
	bool fixed;
	bool poll;
	bool sqe64;
	unsigned int qd;
	unsigned int count;
	int mode;
	const char *expect;
	int rsv_index;
	uint64_t rsv_value;
	bool raw_op_set;
	bool submit_time;
	uint32_t raw_op;
	bool unmapped_buf;
	bool unmapped_iov;
	bool unmapped_iov_base;
	bool addr_set;
	uint64_t addr;
	bool quit_early;
	bool exec_early;
	bool defer_tw;
	bool show;
	const char *wait_file;
	uint64_t window;
	bool link;
	bool drain;
	bool drain_last;
	bool scribble;
	bool nvme;
	uint32_t nsid;
	bool len_set;
	unsigned int buf_off;
	bool child_reaps;
	bool bdev_uring;
} o = { .qd = 1, .count = 1, .mode = O_RDWR, .rsv_index = -1, .len = 4096 };

/*
 * What io_uring_submit() does, but without IORING_ENTER_GETEVENTS, which
 * liburing adds on an IOPOLL ring and which makes the kernel poll the ring
 * once: with -C the child must be the one to poll.
 */
static int submit_without_polling(struct io_uring *ring)
{
	unsigned int n = ring->sq.sqe_tail - ring->sq.sqe_head;

	ring->sq.sqe_head = ring->sq.sqe_tail;
	io_uring_smp_store_release(ring->sq.ktail, ring->sq.sqe_tail);
	return io_uring_enter(ring->ring_fd, n, 0, 0, NULL);
}

/*
 * What a -C child hands its parent, in a mapping they share: entry 0 holds
 * the number of CQEs it consumed (user_data) and the milliseconds it took
 * (res), entries 1..N the CQEs.
 */
struct child_cqe {
	uint64_t user_data;
	int32_t res;
};
static struct child_cqe *child_cqes;

/* How long a -C child polls for one submission's completions. */
#define CHILD_REAP_MS 60000

static unsigned int child_nr_cqes(void)
{
	return child_cqes[0].user_data;
}

static double child_seconds(void)
{
	return child_cqes[0].res / 1000.0;
}

/*
 * The -C child: consume the ring's CQEs into child_cqes until @want have
 * come or CHILD_REAP_MS have passed, polling the ring once per
 * io_uring_enter(). Returns its exit status: 0 when all came, 3 when time
 * ran out, 1 when io_uring_enter() failed, 4 when a polled ring had a
 * completion before the child polled.
 */
static int child_reap(struct io_uring *ring, unsigned int want)
{
	struct io_uring_cqe *cqe;
	struct timespec t0, t;
	unsigned int got = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* Polled, nothing can have completed yet. */
	if (o.poll && io_uring_cq_ready(ring))
		return 4;
	for (;;) {
		long ms;

		while (got < want && io_uring_cq_ready(ring) &&
		       !io_uring_peek_cqe(ring, &cqe)) {
			child_cqes[1 + got].user_data = cqe->user_data;
			child_cqes[1 + got].res = cqe->res;
			got++;
			io_uring_cqe_seen(ring, cqe);
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		ms = (t.tv_sec - t0.tv_sec) * 1000 +
		     (t.tv_nsec - t0.tv_nsec) / 1000000;
		child_cqes[0].user_data = got;
		child_cqes[0].res = ms;
		if (got >= want)
			return 0;
		if (ms > CHILD_REAP_MS)
			return 3;
		if (io_uring_get_events(ring) < 0)
			return 1;
		usleep(100);
	}
}

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* Fill or check len bytes that live at byte offset pos of the disk. */
static void fill(unsigned char *p, uint64_t pos, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		uint64_t at = pos + i;

		p[i] = (unsigned char)(mix(o.seed ^ (at >> 3)) >> ((at & 7) * 8));
	}
}

static long check(const unsigned char *p, uint64_t pos, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		uint64_t at = pos + i;
		unsigned char want =
			(unsigned char)(mix(o.seed ^ (at >> 3)) >> ((at & 7) * 8));

		if (p[i] != want)
			return (long)i;
	}
	return -1;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "vblk_pt: %s: %s\n", what, strerror(err));
	exit(2);
}

static int op_number(const char *op)
{
	static const struct { const char *name; int nr; } ops[] = {
		{ "info", VIRTBLK_CMD_GET_INFO }, { "read", VIRTBLK_CMD_READ },
		{ "write", VIRTBLK_CMD_WRITE }, { "readv", VIRTBLK_CMD_READV },
		{ "writev", VIRTBLK_CMD_WRITEV }, { "flush", VIRTBLK_CMD_FLUSH },
		{ "discard", VIRTBLK_CMD_DISCARD },
		{ "write-zeroes", VIRTBLK_CMD_WRITE_ZEROES },
		{ "get-id", VIRTBLK_CMD_GET_ID },
	};

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strcmp(op, ops[i].name))
			return ops[i].nr;
	return -1;
}

static bool is_write(int nr)
{
	return nr == VIRTBLK_CMD_WRITE || nr == VIRTBLK_CMD_WRITEV;
}

static bool has_buffer(int nr)
{
	return nr == VIRTBLK_CMD_READ || nr == VIRTBLK_CMD_WRITE ||
	       nr == VIRTBLK_CMD_READV || nr == VIRTBLK_CMD_WRITEV ||
	       nr == VIRTBLK_CMD_GET_ID || nr == VIRTBLK_CMD_GET_INFO;
}

/* One command slot: its buffer (a page-aligned region) and iovecs. */
struct slot {
	unsigned char *buf;
	struct iovec *iov;
	uint64_t sector;
	bool busy;
};

/*
 * Vectored buffers put each segment in its own page with a gap page
 * between them, so no two segments are contiguous in memory.
 */
static size_t seg_stride(unsigned int segs)
{
	size_t longest = o.len / segs + 1;

	return (longest + PAGE - 1) / PAGE * PAGE + PAGE;
}

static void setup_slot(struct slot *s)
{
	size_t pages = ((size_t)o.len + PAGE - 1) / PAGE;
	unsigned int segs = o.segs ? o.segs : 1;

	if (segs > 1)
		pages = segs * seg_stride(segs) / PAGE;
	s->buf = mmap(NULL, pages * PAGE + PAGE, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (s->buf == MAP_FAILED)
		die("mmap", errno);
	/* -O: a buffer off the block layer's alignment is bounce-buffered. */
	s->buf += o.buf_off;
	s->iov = calloc(segs, sizeof(*s->iov));
	if (!s->iov)
		die("calloc", ENOMEM);
	if (segs == 1) {
		s->iov[0].iov_base = s->buf;
		s->iov[0].iov_len = o.len;
		return;
	}
	for (unsigned int i = 0; i < segs; i++) {
		size_t seg = o.len / segs + (i < o.len % segs ? 1 : 0);

		s->iov[i].iov_base = s->buf + i * seg_stride(segs);
		s->iov[i].iov_len = seg;
	}
}

static void fill_slot(struct slot *s)
{
	uint64_t pos = s->sector * 512;
	unsigned int segs = o.segs ? o.segs : 1;

	for (unsigned int i = 0; i < segs; i++) {
		fill(s->iov[i].iov_base, pos, s->iov[i].iov_len);
		pos += s->iov[i].iov_len;
	}
}

static int check_slot(struct slot *s)
{
	uint64_t pos = s->sector * 512;
	unsigned int segs = o.segs ? o.segs : 1;

	for (unsigned int i = 0; i < segs; i++) {
		long bad = check(s->iov[i].iov_base, pos, s->iov[i].iov_len);

		if (bad >= 0) {
			fprintf(stderr, "mismatch at disk byte %" PRIu64 "\n",
				pos + bad);
			return -1;
		}
		pos += s->iov[i].iov_len;
	}
	return 0;
}

static void prep(struct io_uring_sqe *sqe, int fd, int nr, struct slot *s,
		 unsigned int index)
{
	struct virtblk_uring_cmd *cmd;

	memset(sqe, 0, o.sqe64 ? 64 : 128);
	if (o.bdev_uring) {
		/* Plain io_uring I/O on the block device: hipri on -P. */
		if (is_write(nr))
			io_uring_prep_write(sqe, fd, s->buf, o.len, s->sector << 9);
		else
			io_uring_prep_read(sqe, fd, s->buf, o.len, s->sector << 9);
		sqe->user_data = index;
		return;
	}
	if (o.nvme) {
		/* NVMe Read (0x02) or Write (0x01) of 512-byte blocks. */
		struct nvme_uring_cmd *nc = (struct nvme_uring_cmd *)sqe->cmd;

		sqe->opcode = IORING_OP_URING_CMD;
		sqe->fd = fd;
		sqe->cmd_op = NVME_URING_CMD_IO;
		sqe->user_data = index;
		nc->opcode = is_write(nr) ? 0x01 : 0x02;
		nc->nsid = o.nsid;
		nc->addr = (uintptr_t)s->buf;
		nc->data_len = o.len;
		nc->cdw10 = (uint32_t)s->sector;
		nc->cdw11 = (uint32_t)(s->sector >> 32);
		nc->cdw12 = o.len / 512 - 1;
		return;
	}
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = o.raw_op_set ? o.raw_op : VIRTBLK_U_CMD(nr);
	sqe->user_data = index;
	cmd = (struct virtblk_uring_cmd *)sqe->cmd;
	/* A 64-byte SQE has room for 16 bytes of command only. */
	if (o.sqe64)
		return;
	cmd->sector = s->sector;
	cmd->flags = o.flags;
	cmd->nr_sectors = o.nr_sectors;
	if (nr == VIRTBLK_CMD_READV || nr == VIRTBLK_CMD_WRITEV) {
		cmd->addr = (uintptr_t)s->iov;
		cmd->len = o.segs ? o.segs : 1;
	} else if (has_buffer(nr)) {
		cmd->addr = (uintptr_t)s->buf;
		cmd->len = nr == VIRTBLK_CMD_GET_INFO && !o.len_set ?
			   sizeof(struct virtblk_info) : o.len;
		/* GET_INFO must zero what it does not fill: make that visible. */
		if (nr == VIRTBLK_CMD_GET_INFO)
			memset(s->buf, 0xaa, cmd->len);
	}
	if (o.unmapped_buf || o.unmapped_iov_base) {
		void *hole = mmap(NULL, PAGE, PROT_NONE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		munmap(hole, PAGE);
		if (o.unmapped_iov_base)
			s->iov[0].iov_base = hole;
		else
			cmd->addr = (uintptr_t)hole;
	}
	if (o.unmapped_iov) {
		void *hole = mmap(NULL, PAGE, PROT_NONE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		munmap(hole, PAGE);
		cmd->addr = (uintptr_t)hole;
	}
	if (o.addr_set)
		cmd->addr = o.addr;
	if (o.rsv_index == 4)
		cmd->reserved0 = (uint32_t)o.rsv_value;
	else if (o.rsv_index >= 0)
		cmd->reserved[o.rsv_index] = o.rsv_value;
	if (o.fixed) {
		sqe->uring_cmd_flags = IORING_URING_CMD_FIXED;
		sqe->buf_index = (uint16_t)index;
	}
}

static void print_info(const struct virtblk_info *i)
{
	printf("ops=0x%" PRIx64 " capacity=%" PRIu64 " flags=0x%x lbs=%u "
	       "max_sectors=%u max_segments=%u max_segment_size=%u "
	       "max_discard_sectors=%u max_write_zeroes_sectors=%u "
	       "nr_poll_queues=%u\n", (uint64_t)i->ops, (uint64_t)i->capacity,
	       i->flags, i->logical_block_size, i->max_sectors,
	       i->max_segments, i->max_segment_size, i->max_discard_sectors,
	       i->max_write_zeroes_sectors, i->nr_poll_queues);
}

/* O_DIRECT pread/pwrite of the pattern on the block device. */
static int bdev_io(bool write)
{
	unsigned char *buf;
	ssize_t n;
	int fd;

	fd = open(o.dev, (write ? O_WRONLY : O_RDONLY) | O_DIRECT);
	if (fd < 0)
		die(o.dev, errno);
	if (posix_memalign((void **)&buf, PAGE, o.len))
		die("posix_memalign", ENOMEM);
	for (unsigned int i = 0; i < o.count; i++) {
		uint64_t sector = o.sector + (uint64_t)i * (o.len / 512);

		if (write) {
			fill(buf, sector * 512, o.len);
			n = pwrite(fd, buf, o.len, sector * 512);
		} else {
			n = pread(fd, buf, o.len, sector * 512);
		}
		if (n != (ssize_t)o.len) {
			fprintf(stderr, "%s at sector %" PRIu64 ": %zd %s\n",
				write ? "pwrite" : "pread", sector, n,
				n < 0 ? strerror(errno) : "");
			return 1;
		}
		if (!write && check(buf, sector * 512, o.len) >= 0) {
			fprintf(stderr, "mismatch in sector range at %" PRIu64 "\n",
				sector);
			return 1;
		}
	}
	close(fd);
	return 0;
}

static bool result_matches(int res)
{
	if (!o.expect)
		return res >= 0;
	if (!strcmp(o.expect, "ok"))
		return res >= 0;
	return res < 0 && !strcmp(res_name(res), o.expect);
}

static void usage(void)
{
	fprintf(stderr,
"usage: vblk_pt [options] DEV OP\n"
"  OP: info ioctl-info read write readv writev flush discard write-zeroes\n"
"      get-id bdev-read bdev-write\n"
"  -s SECTOR  first sector (512 B)       -l LEN     bytes per command (4096;\n"
"                                          info: the struct's size)\n"
"  -n SECTORS discard/write-zeroes range -f FLAGS   command flags\n"
"  -S SEGS    vectored: SEGS iovecs, each in its own page\n"
"  -p SEED    write the pattern / verify what was read\n"
"  -F         registered (fixed) buffers -P         IOPOLL ring\n"
"  -q QD      commands in flight         -c COUNT   commands, sectors advancing\n"
"  -w SECTORS wrap around after this many sectors from -s\n"
"  -m MODE    open rdonly|wronly|rdwr    -e RESULT  expected: ok or an errno name\n"
"  -v         print results (info, get-id)\n"
" hostile input:\n"
"  -R I=V     reserved field I (0-3, 4 = reserved0) set to V\n"
"  -X OP      raw cmd_op (hex)           -A ADDR    raw addr\n"
"  -U         buffer not mapped          -I         iovec array not mapped\n"
"  -B         first iovec's base not mapped\n"
"  -N         64-byte SQEs (no IORING_SETUP_SQE128)\n"
"  -O OFF     buffers start OFF bytes into their page (below 4096; not\n"
"             512-byte aligned: the kernel copies through a bounce buffer)\n"
"  -C         a forked child waits for each submission's completions (it\n"
"             shares the ring, and alone polls it with -P), then the parent\n"
"             checks them: completions found by another task (not with -T)\n"
"  -K         submit, then exit without waiting for completions\n"
"  -E         submit, then exec /bin/true without waiting for completions\n"
"  -T         ring with IORING_SETUP_DEFER_TASKRUN (and SINGLE_ISSUER)\n"
"  -W FILE    open DEV, then wait until FILE exists before the command\n"
"  -M         print submit_max_ms=N: the longest io_uring_submit() took\n"
"             (an issue path that sleeps shows up here, not in the CQE)\n"
" SQEs that io_uring reads after the submission returned:\n"
"  -L         link the commands of each submission into one chain\n"
"  -D         IOSQE_IO_DRAIN on every command\n"
"  -d         IOSQE_IO_DRAIN on the last command of each submission only\n"
"             (with -L: the chain's head gets drained after its prep)\n"
"  -Z         after each submission, overwrite the whole SQ ring with 0xff\n"
"  -H         DEV is the block device: read and write are plain io_uring\n"
"             reads and writes on it (O_DIRECT; hipri with -P)\n"
"  -V         DEV is an NVMe generic device (/dev/ngXnY): NVMe reads and\n"
"             writes of 512-byte blocks instead (OP read or write)\n"
"             (the kernel must have copied what it still needs)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct io_uring ring;
	struct slot *slots;
	unsigned int submitted = 0, done = 0, inflight = 0;
	int nr, fd, c, ret, failures = 0, first_bad = 0;
	unsigned int setup;
	struct timespec t0, t1;
	long ms, submit_max_ms = 0;

	while ((c = getopt(argc, argv, "s:l:n:f:S:p:FPq:c:m:e:R:X:A:UIBNKETvW:w:LDdZVMO:CH")) != -1) {
		switch (c) {
		case 's': o.sector = strtoull(optarg, NULL, 0); break;
		case 'l': o.len = strtoul(optarg, NULL, 0); o.len_set = true; break;
		case 'n': o.nr_sectors = strtoul(optarg, NULL, 0); break;
		case 'f': o.flags = strtoul(optarg, NULL, 0); break;
		case 'S': o.segs = strtoul(optarg, NULL, 0); break;
		case 'p': o.seed = strtoull(optarg, NULL, 0); o.pattern = true; break;
		case 'F': o.fixed = true; break;
		case 'P': o.poll = true; break;
		case 'O':
			o.buf_off = strtoul(optarg, NULL, 0);
			if (o.buf_off >= PAGE)
				usage();
			break;
		case 'C': o.child_reaps = true; break;
		case 'q': o.qd = strtoul(optarg, NULL, 0); break;
		case 'c': o.count = strtoul(optarg, NULL, 0); break;
		case 'm':
			o.mode = !strcmp(optarg, "rdonly") ? O_RDONLY :
				 !strcmp(optarg, "wronly") ? O_WRONLY : O_RDWR;
			break;
		case 'e': o.expect = optarg; break;
		case 'R':
			if (sscanf(optarg, "%d=%" SCNi64, &o.rsv_index,
				   (int64_t *)&o.rsv_value) != 2 ||
			    o.rsv_index < 0 || o.rsv_index > 4)
				usage();
			break;
		case 'X': o.raw_op = strtoul(optarg, NULL, 16); o.raw_op_set = true; break;
		case 'A': o.addr = strtoull(optarg, NULL, 0); o.addr_set = true; break;
		case 'U': o.unmapped_buf = true; break;
		case 'I': o.unmapped_iov = true; break;
		case 'B': o.unmapped_iov_base = true; break;
		case 'N': o.sqe64 = true; break;
		case 'K': o.quit_early = true; break;
		case 'E': o.exec_early = true; break;
		case 'T': o.defer_tw = true; break;
		case 'v': o.show = true; break;
		case 'W': o.wait_file = optarg; break;
		case 'w': o.window = strtoull(optarg, NULL, 0); break;
		case 'L': o.link = true; break;
		case 'D': o.drain = true; break;
		case 'd': o.drain_last = true; break;
		case 'Z': o.scribble = true; break;
		case 'V': o.nvme = true; break;
		case 'H': o.bdev_uring = true; break;
		case 'M': o.submit_time = true; break;
		default: usage();
		}
	}
	if (argc - optind != 2 || !o.qd || !o.count)
		usage();
	o.dev = argv[optind];
	o.op = argv[optind + 1];

	if (!strcmp(o.op, "bdev-read") || !strcmp(o.op, "bdev-write"))
		return bdev_io(!strcmp(o.op, "bdev-write"));

	fd = open(o.dev, o.mode | (o.bdev_uring ? O_DIRECT : 0));
	if (fd < 0) {
		ret = -errno;
		printf("open: %s\n", res_name(ret));
		return result_matches(ret) ? 0 : 1;
	}

	while (o.wait_file && access(o.wait_file, F_OK))
		usleep(10000);

	if (!strcmp(o.op, "ioctl-info")) {
		struct virtblk_info info;

		ret = ioctl(fd, VIRTBLK_IOC_GET_INFO, &info) ? -errno : 0;
		if (!ret)
			print_info(&info);
		else
			printf("result=%s\n", res_name(ret));
		return result_matches(ret) ? 0 : 1;
	}

	nr = op_number(o.op);
	if (nr < 0)
		usage();
	if (o.nvme) {
		int id = ioctl(fd, NVME_IOCTL_ID);

		if (o.sqe64 || (nr != VIRTBLK_CMD_READ && nr != VIRTBLK_CMD_WRITE))
			usage();
		if (id < 0)
			die("NVME_IOCTL_ID", errno);
		o.nsid = id;
	}
	if (o.bdev_uring && ((nr != VIRTBLK_CMD_READ && nr != VIRTBLK_CMD_WRITE) ||
			     o.fixed || o.nvme))
		usage();

	setup = o.sqe64 ? 0 : IORING_SETUP_SQE128;
	if (o.nvme)
		setup |= IORING_SETUP_CQE32;
	if (o.poll)
		setup |= IORING_SETUP_IOPOLL;
	if (o.defer_tw)
		setup |= IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	/* A DEFER_TASKRUN ring takes io_uring_enter() from its issuer only. */
	if (o.defer_tw && o.child_reaps)
		usage();
	ret = io_uring_queue_init(o.qd * 2, &ring, setup);
	if (ret)
		die("io_uring_queue_init", -ret);

	slots = calloc(o.qd, sizeof(*slots));
	if (o.child_reaps) {
		child_cqes = mmap(NULL, (o.qd + 1) * sizeof(*child_cqes),
				  PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (child_cqes == MAP_FAILED)
			die("mmap", errno);
	}
	if (!slots)
		die("calloc", ENOMEM);
	for (unsigned int i = 0; i < o.qd; i++)
		setup_slot(&slots[i]);
	if (o.fixed) {
		struct iovec *bufs = calloc(o.qd, sizeof(*bufs));

		for (unsigned int i = 0; i < o.qd; i++) {
			bufs[i].iov_base = slots[i].buf;
			bufs[i].iov_len = (o.len + PAGE - 1) / PAGE * PAGE;
		}
		ret = io_uring_register_buffers(&ring, bufs, o.qd);
		if (ret)
			die("io_uring_register_buffers", -ret);
	}

	while (done < submitted || (submitted < o.count && !failures)) {
		struct io_uring_sqe *prev = NULL;

		/* After a failure, only collect what is in flight. */
		while (submitted < o.count && inflight < o.qd && !failures) {
			unsigned int idx = 0;
			struct io_uring_sqe *sqe;
			struct slot *s;

			while (slots[idx].busy)
				idx++;
			s = &slots[idx];
			s->busy = true;
			s->sector = (uint64_t)submitted *
				    (is_write(nr) || nr == VIRTBLK_CMD_READ ||
				     nr == VIRTBLK_CMD_READV ? o.len / 512 : 0);
			if (o.window)
				s->sector %= o.window;
			s->sector += o.sector;
			if (o.pattern && is_write(nr))
				fill_slot(s);
			sqe = io_uring_get_sqe(&ring);
			prep(sqe, fd, nr, s, idx);
			if (o.drain)
				sqe->flags |= IOSQE_IO_DRAIN;
			if (o.link && prev)
				prev->flags |= IOSQE_IO_LINK;
			prev = sqe;
			submitted++;
			inflight++;
		}
		if (o.drain_last && prev)
			prev->flags |= IOSQE_IO_DRAIN;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		ret = o.child_reaps ? submit_without_polling(&ring) : io_uring_submit(&ring);
		if (ret < 0)
			die("io_uring_submit", -ret);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ms = (t1.tv_sec - t0.tv_sec) * 1000 +
		     (t1.tv_nsec - t0.tv_nsec) / 1000000;
		if (ms > submit_max_ms)
			submit_max_ms = ms;
		/*
		 * The SQ head has moved past every entry: userspace may reuse
		 * them, and a command issued later from a link, the drain list
		 * or io-wq that still reads its slot gets all ones (EINVAL).
		 */
		if (o.scribble)
			memset(ring.sq.sqes, 0xff,
			       (size_t)ring.sq.ring_entries * (o.sqe64 ? 64 : 128));
		if (o.quit_early) {
			/* Leave with everything in flight: the ring's exit cleans up. */
			printf("submitted=%u\n", submitted);
			_exit(0);
		}
		if (o.exec_early) {
			/*
			 * exec with everything in flight: exec cancels this
			 * task's requests, polling an IOPOLL ring until each
			 * has completed, and /bin/true then exits 0.
			 */
			printf("submitted=%u\n", submitted);
			fflush(stdout);
			execl("/bin/true", "true", (char *)NULL);
			die("execl /bin/true", errno);
		}

		struct io_uring_cqe *cqe;
		unsigned int reaped = 0, next = 0;
		bool from_child = o.child_reaps;

		if (from_child) {
			/*
			 * The child reaps on the shared ring: on an IOPOLL ring
			 * it polls the device and may be the one to find these
			 * commands done. The parent, asleep in waitpid(), is
			 * where their completion must run (task_work wakes it
			 * for that, and takes the ring's lock). A blocking wait
			 * would poll holding that lock until the completions it
			 * waits for are posted, which the parent's task_work
			 * cannot do meanwhile: the child polls once per
			 * io_uring_enter() instead.
			 *
			 * The child consumes each CQE as it appears and hands
			 * it over in child_cqes: io_uring does not poll a ring
			 * whose CQ holds unconsumed entries (io_iopoll_check()),
			 * so a child that left the first completions in the CQ
			 * for the parent would never poll for the rest, which
			 * then complete only when the parent polls once the
			 * child has given up. That is what a split batch (some
			 * commands found done by one poll pass, the others by a
			 * later one, as a loaded host makes likely) did to this
			 * loop before it consumed them.
			 */
			pid_t pid;
			int st;

			child_cqes[0].user_data = 0;
			child_cqes[0].res = 0;
			pid = fork();
			if (pid < 0)
				die("fork", errno);
			if (!pid)
				_exit(child_reap(&ring, inflight));
			if (waitpid(pid, &st, 0) < 0)
				die("waitpid", errno);
			reaped = child_nr_cqes();
			if (!WIFEXITED(st) || WEXITSTATUS(st)) {
				printf("the child reaper failed (status %#x): %u of %u completions in %.1f s\n",
				       st, reaped, inflight, child_seconds());
				failures++;
				/* Collect what is left here, as without -C. */
				o.child_reaps = false;
			}
			if (!reaped)
				continue;
		} else {
			/* A stop and continue (SIGSTOP, SIGCONT) ends the wait early. */
			do
				ret = io_uring_wait_cqe(&ring, &cqe);
			while (ret == -EINTR);
			if (ret)
				die("io_uring_wait_cqe", -ret);
		}
		do {
			struct slot *s;
			int res;

			if (from_child) {
				struct child_cqe *c = &child_cqes[1 + next++];

				s = &slots[c->user_data];
				res = c->res;
			} else {
				s = &slots[cqe->user_data];
				res = cqe->res;
				io_uring_cqe_seen(&ring, cqe);
			}
			if (!result_matches(res)) {
				if (!failures++)
					first_bad = res;
			} else if (res >= 0 && o.pattern &&
				   (nr == VIRTBLK_CMD_READ ||
				    nr == VIRTBLK_CMD_READV)) {
				if (check_slot(s)) {
					failures++;
					first_bad = 0;
				}
			}
			if (res >= 0 && o.show && nr == VIRTBLK_CMD_GET_ID)
				printf("id=%.*s\n", VIRTBLK_ID_BYTES,
				       (char *)s->buf);
			if (res > 0 && nr == VIRTBLK_CMD_GET_INFO && o.len > (unsigned int)res &&
			    o.len_set) {
				for (unsigned int i = res; i < o.len; i++) {
					if (s->buf[i]) {
						printf("GET_INFO left byte %u of %u as %#x\n",
						       i, o.len, s->buf[i]);
						failures++;
						break;
					}
				}
			}
			if (res >= 0 && o.show && nr == VIRTBLK_CMD_GET_INFO)
				print_info((struct virtblk_info *)s->buf);
			if (done == 0)
				printf("result=%s\n", res_name(res));
			s->busy = false;
			inflight--;
			done++;
		} while (from_child ? next < reaped : !io_uring_peek_cqe(&ring, &cqe));
	}
	io_uring_queue_exit(&ring);
	if (o.submit_time)
		printf("submit_max_ms=%ld\n", submit_max_ms);
	if (failures) {
		printf("failures=%d first=%s\n", failures, res_name(first_bad));
		return 1;
	}
	return 0;
}
