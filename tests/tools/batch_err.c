// SPDX-License-Identifier: GPL-2.0
/*
 * batch_err: submit N 4 KiB reads at once, one of them of a block the
 * device fails, and check that exactly that one fails with EIO and every
 * other one returns its 4096 bytes; ROUNDS times. The reads complete
 * together, so with completion batching on the interrupt path the good
 * ones go through a batch while the failed one must keep its error.
 *
 *   batch_err libaio|io_uring|pt DEV BAD_BLOCK N ROUNDS
 *
 * libaio: O_DIRECT reads of the block device with io_submit(2) (raw
 * syscalls, no libaio); io_uring: O_DIRECT reads with one io_uring_enter;
 * pt: VIRTBLK_CMD_READ passthrough commands on /dev/vblk/vdX. The good
 * blocks are every other block around BAD_BLOCK (BAD_BLOCK - 2, - 4, ...,
 * + 2, + 4, ...).
 * Prints "bad B good G" (reads that failed with EIO, reads that returned
 * 4096 bytes) and exits 0 only if B == ROUNDS and G == ROUNDS * (N - 1).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/aio_abi.h>
#include <linux/virtio_blk_cmd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BS 4096
#define MAXN 64

static char *bufs;

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

/* Count one result; -1 if it is not what the block should give. */
static int tally(unsigned int slot, long res, unsigned int *bad_cnt,
		 unsigned int *good_cnt)
{
	if (slot == 0) {
		if (res != -EIO) {
			fprintf(stderr, "the bad block returned %ld, not -EIO\n", res);
			return -1;
		}
		(*bad_cnt)++;
		return 0;
	}
	if (res != BS) {
		fprintf(stderr, "good read %u returned %ld\n", slot, res);
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
			memset(&cbs[i], 0, sizeof(cbs[i]));
			cbs[i].aio_fildes = fd;
			cbs[i].aio_lio_opcode = IOCB_CMD_PREAD;
			cbs[i].aio_buf = (uintptr_t)(bufs + (size_t)i * BS);
			cbs[i].aio_nbytes = BS;
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
	}
	return 0;
}

static int run_uring(int fd, bool pt, uint64_t bad, unsigned int n,
		     unsigned int rounds, unsigned int *b, unsigned int *g)
{
	struct io_uring ring;
	unsigned int r, i;
	int ret;

	ret = io_uring_queue_init(n, &ring, pt ? IORING_SETUP_SQE128 : 0);
	if (ret) {
		fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-ret));
		return -1;
	}
	for (r = 0; r < rounds; r++) {
		for (i = 0; i < n; i++) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			char *buf = bufs + (size_t)i * BS;

			if (pt) {
				struct virtblk_uring_cmd *cmd;

				memset(sqe, 0, 2 * sizeof(*sqe));
				sqe->opcode = IORING_OP_URING_CMD;
				sqe->fd = fd;
				sqe->cmd_op = VIRTBLK_U_CMD_READ;
				cmd = (struct virtblk_uring_cmd *)sqe->cmd;
				cmd->sector = block_of(i, bad, n) * (BS / 512);
				cmd->addr = (uintptr_t)buf;
				cmd->len = BS;
			} else {
				io_uring_prep_read(sqe, fd, buf, BS, block_of(i, bad, n) * BS);
			}
			sqe->user_data = i;
		}
		ret = io_uring_submit_and_wait(&ring, n);
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
			if (tally(cqe->user_data, cqe->res, b, g))
				return -1;
			io_uring_cqe_seen(&ring, cqe);
		}
	}
	io_uring_queue_exit(&ring);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned int n, rounds, b = 0, g = 0;
	uint64_t bad;
	int fd, ret;

	if (argc != 6) {
		fprintf(stderr, "usage: batch_err libaio|io_uring|pt DEV BAD_BLOCK N ROUNDS\n");
		return 2;
	}
	bad = strtoull(argv[3], NULL, 0);
	n = strtoul(argv[4], NULL, 0);
	rounds = strtoul(argv[5], NULL, 0);
	if (n < 2 || n > MAXN || bad < n) {
		fprintf(stderr, "N must be 2..%d and BAD_BLOCK at least N\n", MAXN);
		return 2;
	}
	if (posix_memalign((void **)&bufs, BS, (size_t)n * BS))
		return 1;
	fd = open(argv[2], strcmp(argv[1], "pt") ? O_RDONLY | O_DIRECT : O_RDONLY);
	if (fd < 0) {
		perror(argv[2]);
		return 1;
	}
	if (!strcmp(argv[1], "libaio"))
		ret = run_libaio(fd, bad, n, rounds, &b, &g);
	else if (!strcmp(argv[1], "io_uring") || !strcmp(argv[1], "pt"))
		ret = run_uring(fd, !strcmp(argv[1], "pt"), bad, n, rounds, &b, &g);
	else {
		fprintf(stderr, "unknown mode %s\n", argv[1]);
		return 2;
	}
	printf("bad %u good %u\n", b, g);
	return ret || b != rounds || g != rounds * (n - 1);
}
