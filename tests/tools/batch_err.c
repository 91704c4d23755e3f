// SPDX-License-Identifier: GPL-2.0
/*
 * batch_err: submit N 4 KiB reads (or writes) at once, one of them of a
 * block the device fails, and check that exactly that one fails with EIO
 * and every other one moves its 4096 bytes; ROUNDS times. The I/Os
 * complete together, so with completion batching on the interrupt path the
 * good ones go through a batch while the failed one must keep its error.
 *
 *   batch_err [-w] [-p] [-s SEGS] [-e FAILS] libaio|io_uring|pt DEV BAD_BLOCK N ROUNDS
 *   batch_err flush fsync|io_uring|pt DEV ROUNDS FAILS
 *
 * libaio: O_DIRECT I/O on the block device with io_submit(2) (raw
 * syscalls, no libaio); io_uring: O_DIRECT I/O with one io_uring_enter;
 * pt: VIRTBLK_CMD_READ/WRITE passthrough commands on /dev/vblk/vdX. The
 * good blocks are every other block around BAD_BLOCK (BAD_BLOCK - 2, - 4,
 * ..., + 2, + 4, ...).
 *   -w  writes instead of reads (of a pattern; the good blocks are read
 *       back and compared at the end);
 *   -p  io_uring and pt only: an IORING_SETUP_IOPOLL ring, so the I/O goes
 *       to a poll queue and completes by polling;
 *   -s  each I/O as SEGS iovecs of 4096/SEGS bytes, each in a page of its
 *       own (readv/writev; pt: READV/WRITEV), so the request is a chained
 *       scatter-gather list of SEGS segments; SEGS is 1, 2, 4 or 8;
 *   -e  the bad block fails in FAILS rounds (the first ones) and succeeds in
 *       the rest, as an error injected once does; default ROUNDS.
 * flush: ROUNDS flushes, by fsync(2), IORING_OP_FSYNC or VIRTBLK_CMD_FLUSH,
 * each after a 4 KiB write of block 1, of which the first FAILS must fail
 * with EIO and the rest succeed.
 * Prints "bad B good G" and exits 0 only if B and G are what they must be.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <liburing.h>
#include <linux/aio_abi.h>
#include <linux/virtio_blk_cmd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define BS 4096
#define MAXN 64
#define MAXSEGS 8

/* Per slot: a page per segment, MAXSEGS pages. */
static char *bufs;
static struct iovec iovs[MAXN][MAXSEGS];
static unsigned int segs = 1;
static bool writes;
static unsigned int fails_left;

/* The data of block @blk: a pattern that names it. */
static void fill(char *p, size_t len, uint64_t blk, size_t off)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (char)((blk * 131 + off + i) % 251);
}

/* Slot @i's segments, for block @blk: filled with its pattern for writes. */
static void prep_slot(unsigned int i, uint64_t blk)
{
	size_t seg = BS / segs;

	for (unsigned int k = 0; k < segs; k++) {
		iovs[i][k].iov_base = bufs + ((size_t)i * MAXSEGS + k) * BS;
		iovs[i][k].iov_len = seg;
		if (writes)
			fill(iovs[i][k].iov_base, seg, blk, k * seg);
		else
			memset(iovs[i][k].iov_base, 0, seg);
	}
}

static uint64_t block_of(unsigned int i, uint64_t bad, unsigned int n)
{
	/*
	 * Slot 0 is the bad block; the others surround it, every other
	 * block, so that no two reads are contiguous: QEMU merges contiguous
	 * requests, and a merged one that touches the bad block fails whole.
	 */
	if (i == 0)
		return bad;
	return i <= n / 2 ? bad - 2 * i : bad + 2 * (i - n / 2);
}

/*
 * Count one result; -1 if it is not what the block should give: the bad
 * block fails with -EIO while injected errors are left (fails_left, for
 * this round), and otherwise moves its 4096 bytes like every other.
 */
static int tally(unsigned int slot, long res, unsigned int *bad_cnt,
		 unsigned int *good_cnt)
{
	if (slot == 0 && fails_left) {
		if (res != -EIO) {
			fprintf(stderr, "the bad block returned %ld, not -EIO\n", res);
			return -1;
		}
		(*bad_cnt)++;
		return 0;
	}
	if (res != BS) {
		fprintf(stderr, "%s %u returned %ld\n", slot ? "good block" : "the bad block, its error used up,",
			slot, res);
		return -1;
	}
	(*good_cnt)++;
	return 0;
}

static int run_libaio(int fd, uint64_t bad, unsigned int n, unsigned int rounds,
		      unsigned int *b, unsigned int *g)
{
	aio_context_t ctx = 0;
	struct iocb cbs[MAXN], *ptrs[MAXN];
	struct io_event ev[MAXN];
	unsigned int r, i;
	long got, k;

	if (syscall(SYS_io_setup, n, &ctx)) {
		perror("io_setup");
		return -1;
	}
	for (r = 0; r < rounds; r++) {
		for (i = 0; i < n; i++) {
			prep_slot(i, block_of(i, bad, n));
			memset(&cbs[i], 0, sizeof(cbs[i]));
			cbs[i].aio_fildes = fd;
			if (segs == 1) {
				cbs[i].aio_lio_opcode = writes ? IOCB_CMD_PWRITE : IOCB_CMD_PREAD;
				cbs[i].aio_buf = (uintptr_t)iovs[i][0].iov_base;
				cbs[i].aio_nbytes = BS;
			} else {
				cbs[i].aio_lio_opcode = writes ? IOCB_CMD_PWRITEV : IOCB_CMD_PREADV;
				cbs[i].aio_buf = (uintptr_t)iovs[i];
				cbs[i].aio_nbytes = segs;
			}
			cbs[i].aio_offset = block_of(i, bad, n) * BS;
			cbs[i].aio_data = i;
			ptrs[i] = &cbs[i];
		}
		if (syscall(SYS_io_submit, ctx, n, ptrs) != n) {
			perror("io_submit");
			return -1;
		}
		for (got = 0; got < n; got += k) {
			k = syscall(SYS_io_getevents, ctx, 1, n - got, ev, NULL);
			if (k < 0) {
				perror("io_getevents");
				return -1;
			}
			for (long e = 0; e < k; e++)
				if (tally(ev[e].data, ev[e].res, b, g))
					return -1;
		}
		if (fails_left)
			fails_left--;
	}
	return 0;
}

/* The SQE of slot @i (a 128-byte one for pt). */
static void prep_sqe(struct io_uring_sqe *sqe, int fd, bool pt, unsigned int i, uint64_t blk)
{
	prep_slot(i, blk);
	if (pt) {
		struct virtblk_uring_cmd *cmd;

		memset(sqe, 0, 2 * sizeof(*sqe));
		sqe->opcode = IORING_OP_URING_CMD;
		sqe->fd = fd;
		cmd = (struct virtblk_uring_cmd *)sqe->cmd;
		cmd->sector = blk * (BS / 512);
		if (segs == 1) {
			sqe->cmd_op = writes ? VIRTBLK_U_CMD_WRITE : VIRTBLK_U_CMD_READ;
			cmd->addr = (uintptr_t)iovs[i][0].iov_base;
			cmd->len = BS;
		} else {
			sqe->cmd_op = writes ? VIRTBLK_U_CMD_WRITEV : VIRTBLK_U_CMD_READV;
			cmd->addr = (uintptr_t)iovs[i];
			cmd->len = segs;
		}
	} else if (segs == 1) {
		if (writes)
			io_uring_prep_write(sqe, fd, iovs[i][0].iov_base, BS, blk * BS);
		else
			io_uring_prep_read(sqe, fd, iovs[i][0].iov_base, BS, blk * BS);
	} else {
		if (writes)
			io_uring_prep_writev(sqe, fd, iovs[i], segs, blk * BS);
		else
			io_uring_prep_readv(sqe, fd, iovs[i], segs, blk * BS);
	}
	sqe->user_data = i;
}

static int run_uring(int fd, bool pt, bool poll, uint64_t bad, unsigned int n,
		     unsigned int rounds, unsigned int *b, unsigned int *g)
{
	struct io_uring ring;
	unsigned int r, i;
	int ret;

	ret = io_uring_queue_init(n, &ring, (pt ? IORING_SETUP_SQE128 : 0) |
				  (poll ? IORING_SETUP_IOPOLL : 0));
	if (ret) {
		fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-ret));
		return -1;
	}
	for (r = 0; r < rounds; r++) {
		for (i = 0; i < n; i++)
			prep_sqe(io_uring_get_sqe(&ring), fd, pt, i, block_of(i, bad, n));
		ret = io_uring_submit_and_wait(&ring, poll ? 0 : n);
		if (ret != (int)n) {
			fprintf(stderr, "io_uring_submit: %d\n", ret);
			return -1;
		}
		for (i = 0; i < n; i++) {
			struct io_uring_cqe *cqe;

			ret = io_uring_wait_cqe(&ring, &cqe);
			if (ret) {
				fprintf(stderr, "io_uring_wait_cqe: %s\n", strerror(-ret));
				return -1;
			}
			/* A passthrough READV/WRITEV returns the bytes moved. */
			if (tally(cqe->user_data, cqe->res, b, g))
				return -1;
			io_uring_cqe_seen(&ring, cqe);
		}
		if (fails_left)
			fails_left--;
	}
	io_uring_queue_exit(&ring);
	return 0;
}

/*
 * After writes: every block the last round wrote, and the bad block only
 * if its error was used up by then, reads back as written.
 */
static int verify_writes(const char *dev, uint64_t bad, unsigned int n, bool bad_written)
{
	char *want, *got;
	unsigned int i;
	int fd, ret = 0;

	fd = open(dev, O_RDONLY | O_DIRECT);
	if (fd < 0) {
		perror(dev);
		return -1;
	}
	if (posix_memalign((void **)&got, BS, BS) || posix_memalign((void **)&want, BS, BS)) {
		close(fd);
		return -1;
	}
	for (i = bad_written ? 0 : 1; i < n && !ret; i++) {
		uint64_t blk = block_of(i, bad, n);
		size_t seg = BS / segs;

		for (unsigned int k = 0; k < segs; k++)
			fill(want + k * seg, seg, blk, k * seg);
		if (pread(fd, got, BS, blk * BS) != BS || memcmp(got, want, BS)) {
			fprintf(stderr, "block %llu does not read back as written\n",
				(unsigned long long)blk);
			ret = -1;
		}
	}
	free(got);
	free(want);
	close(fd);
	return ret;
}

/* ROUNDS flushes; the first FAILS must fail with -EIO. */
static int run_flush(const char *mode, const char *dev, unsigned int rounds,
		     unsigned int fails)
{
	bool pt = !strcmp(mode, "pt");
	unsigned int r, b = 0, g = 0;
	struct io_uring ring;
	int fd, ret = 0;
	char *buf;

	if (strcmp(mode, "fsync") && strcmp(mode, "io_uring") && !pt) {
		fprintf(stderr, "unknown flush mode %s\n", mode);
		return 2;
	}
	fd = open(dev, pt ? O_RDWR : O_WRONLY);
	if (fd < 0) {
		perror(dev);
		return 1;
	}
	if (strcmp(mode, "fsync")) {
		ret = io_uring_queue_init(4, &ring, pt ? IORING_SETUP_SQE128 : 0);
		if (ret) {
			fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-ret));
			return 1;
		}
	}
	if (posix_memalign((void **)&buf, BS, BS))
		return 1;
	for (r = 0; r < rounds; r++) {
		long res;

		/*
		 * QEMU passes a flush on only if something was written since
		 * the last one: write block 1 first (a buffered write, which
		 * fsync writes back; for pt a WRITE command).
		 */
		fill(buf, BS, 1, r);
		if (pt) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			struct virtblk_uring_cmd *cmd;
			struct io_uring_cqe *cqe;

			if (!sqe)
				return 1;
			memset(sqe, 0, 2 * sizeof(*sqe));
			sqe->opcode = IORING_OP_URING_CMD;
			sqe->fd = fd;
			sqe->cmd_op = VIRTBLK_U_CMD_WRITE;
			cmd = (struct virtblk_uring_cmd *)sqe->cmd;
			cmd->sector = BS / 512;
			cmd->addr = (uintptr_t)buf;
			cmd->len = BS;
			if (io_uring_submit_and_wait(&ring, 1) != 1 || io_uring_wait_cqe(&ring, &cqe) ||
			    cqe->res != BS) {
				fprintf(stderr, "the write before flush %u failed\n", r);
				return 1;
			}
			io_uring_cqe_seen(&ring, cqe);
		} else if (pwrite(fd, buf, BS, BS) != BS) {
			perror("the write before a flush");
			return 1;
		}
		if (!strcmp(mode, "fsync")) {
			res = fsync(fd) ? -errno : 0;
		} else {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			struct io_uring_cqe *cqe;

			if (pt) {
				memset(sqe, 0, 2 * sizeof(*sqe));
				sqe->opcode = IORING_OP_URING_CMD;
				sqe->fd = fd;
				sqe->cmd_op = VIRTBLK_U_CMD_FLUSH;
			} else {
				io_uring_prep_fsync(sqe, fd, 0);
			}
			int sub = io_uring_submit_and_wait(&ring, 1);

			if (sub != 1 || io_uring_wait_cqe(&ring, &cqe)) {
				fprintf(stderr, "io_uring flush: %d\n", sub);
				return 1;
			}
			res = cqe->res;
			io_uring_cqe_seen(&ring, cqe);
		}
		if (r < fails ? res != -EIO : res != 0) {
			fprintf(stderr, "flush %u returned %ld, not %s\n", r, res,
				r < fails ? "-EIO" : "0");
			ret = 1;
			break;
		}
		if (res)
			b++;
		else
			g++;
	}
	printf("bad %u good %u\n", b, g);
	return ret || b != fails || g != rounds - fails;
}

int main(int argc, char **argv)
{
	unsigned int n, rounds, fails, b = 0, g = 0;
	bool poll = false, pt, fails_set = false;
	const char *mode, *dev;
	uint64_t bad;
	int fd, ret, opt;

	if (argc == 6 && !strcmp(argv[1], "flush"))
		return run_flush(argv[2], argv[3], strtoul(argv[4], NULL, 0),
				 strtoul(argv[5], NULL, 0));
	while ((opt = getopt(argc, argv, "wps:e:")) != -1) {
		switch (opt) {
		case 'w':
			writes = true;
			break;
		case 'p':
			poll = true;
			break;
		case 's':
			segs = strtoul(optarg, NULL, 0);
			break;
		case 'e':
			fails = strtoul(optarg, NULL, 0);
			fails_set = true;
			break;
		default:
			goto usage;
		}
	}
	if (argc - optind != 5)
		goto usage;
	mode = argv[optind];
	dev = argv[optind + 1];
	bad = strtoull(argv[optind + 2], NULL, 0);
	n = strtoul(argv[optind + 3], NULL, 0);
	rounds = strtoul(argv[optind + 4], NULL, 0);
	if (!fails_set)
		fails = rounds;
	pt = !strcmp(mode, "pt");
	if (n < 2 || n > MAXN || bad < n || fails > rounds ||
	    (segs != 1 && segs != 2 && segs != 4 && segs != 8)) {
		fprintf(stderr, "N must be 2..%d, BAD_BLOCK at least N, FAILS at most ROUNDS, SEGS 1, 2, 4 or 8\n",
			MAXN);
		return 2;
	}
	if (poll && !strcmp(mode, "libaio")) {
		fprintf(stderr, "-p needs io_uring or pt\n");
		return 2;
	}
	fails_left = fails;
	if (posix_memalign((void **)&bufs, BS, (size_t)n * MAXSEGS * BS))
		return 1;
	fd = open(dev, (pt ? 0 : O_DIRECT) | (writes ? O_RDWR : O_RDONLY));
	if (fd < 0) {
		perror(dev);
		return 1;
	}
	if (!strcmp(mode, "libaio"))
		ret = run_libaio(fd, bad, n, rounds, &b, &g);
	else if (!strcmp(mode, "io_uring") || pt)
		ret = run_uring(fd, pt, poll, bad, n, rounds, &b, &g);
	else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	close(fd);
	printf("bad %u good %u\n", b, g);
	if (!ret && writes) {
		/* The block device of a /dev/vblk/vdX node is /dev/vdX. */
		char blk[64];

		if (pt && !strncmp(dev, "/dev/vblk/", 10))
			snprintf(blk, sizeof(blk), "/dev/%s", dev + 10);
		else
			snprintf(blk, sizeof(blk), "%s", dev);
		ret = verify_writes(blk, bad, n, fails < rounds);
	}
	return ret || b != fails || g != rounds * n - fails;
usage:
	fprintf(stderr,
		"usage: batch_err [-w] [-p] [-s SEGS] [-e FAILS] libaio|io_uring|pt DEV BAD_BLOCK N ROUNDS\n"
		"       batch_err flush fsync|io_uring|pt DEV ROUNDS FAILS\n");
	return 2;
}
