// SPDX-License-Identifier: GPL-2.0
/*
 * iopoll-exit-spin: a thread reads from a passthrough device through an
 * IOPOLL ring set up with IORING_SETUP_DEFER_TASKRUN (as fio's t/io_uring
 * sets up its rings), then exits with commands in flight; the main thread
 * closes the ring. On Debian's 6.12 the ring's teardown then polls for
 * ever (a kworker "iou_exit" at 100% of a CPU until reboot). See README.md
 * in this directory.
 *
 *   iopoll-exit-spin DEVICE [ROUNDS] [FLAGS]
 *
 * DEVICE is an NVMe generic device (/dev/ngXnY) or a virtio-blk
 * passthrough device (/dev/vblk/vdX) with a poll queue. FLAGS "plain"
 * leaves out DEFER_TASKRUN and SINGLE_ISSUER (the control: no spin).
 * Each round: the thread sets up the ring, reads 4 KiB blocks 8 at a time
 * for 300 ms, submits 8 more and exits without reaping them.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <liburing.h>
#include <linux/nvme_ioctl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define DEPTH	8
#define BS	4096
#define RUN_MS	300

/* From the series' <linux/virtio_blk_cmd.h>, for systems without it. */
struct vblk_cmd {
	uint64_t sector, addr;
	uint32_t len, flags, nr_sectors, reserved0;
	uint64_t reserved[4];
};
#define VBLK_INFO_SIZE		72	/* sizeof(struct virtblk_info) */
#define VBLK_IOC_GET_INFO	_IOR(0xB9, 0x00, char[VBLK_INFO_SIZE])
#define VBLK_U_CMD_READ		_IOWR(0xB9, 0x01, struct vblk_cmd)

static int fd, is_vblk, nsid, setup_ok;
static unsigned int ring_flags;
static struct io_uring ring;
static void *bufs[DEPTH];

static void prep(unsigned int i)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

	io_uring_prep_rw(IORING_OP_URING_CMD, sqe, fd, NULL, 0, 0);
	memset(sqe->cmd, 0, 80);
	if (is_vblk) {
		struct vblk_cmd *c = (struct vblk_cmd *)sqe->cmd;

		sqe->cmd_op = VBLK_U_CMD_READ;
		c->sector = i * (BS / 512);
		c->addr = (uintptr_t)bufs[i];
		c->len = BS;
	} else {
		struct nvme_uring_cmd *c = (struct nvme_uring_cmd *)sqe->cmd;

		sqe->cmd_op = NVME_URING_CMD_IO;
		c->opcode = 2;			/* read */
		c->nsid = nsid;
		c->cdw10 = i * (BS / 512);	/* 512-byte blocks assumed */
		c->cdw12 = BS / 512 - 1;
		c->addr = (uintptr_t)bufs[i];
		c->data_len = BS;
	}
}

static long ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

static void *submitter(void *arg)
{
	struct io_uring_cqe *cqe;
	struct timespec t0;
	unsigned int i;
	int ret;

	(void)arg;
	/* SINGLE_ISSUER: the ring belongs to the thread that sets it up. */
	ret = io_uring_queue_init(DEPTH, &ring, ring_flags);
	if (ret) {
		fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-ret));
		return NULL;
	}
	setup_ok = 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		for (i = 0; i < DEPTH; i++)
			prep(i);
		ret = io_uring_submit(&ring);
		if (ret != DEPTH) {
			fprintf(stderr, "submitted %d of %d\n", ret, DEPTH);
			return NULL;
		}
		if (ms_since(&t0) > RUN_MS)
			return NULL;	/* exit with this batch in flight */
		for (i = 0; i < DEPTH; i++) {
			ret = io_uring_wait_cqe(&ring, &cqe);
			if (ret || cqe->res < 0) {
				fprintf(stderr, "completion: %d\n", ret ? ret : cqe->res);
				return NULL;
			}
			io_uring_cqe_seen(&ring, cqe);
		}
	}
}

int main(int argc, char **argv)
{
	int rounds = argc > 2 ? atoi(argv[2]) : 1;
	char info[VBLK_INFO_SIZE];
	unsigned int i;
	pthread_t t;
	int r;

	if (argc < 2) {
		fprintf(stderr, "usage: %s DEVICE [ROUNDS] [plain]\n", argv[0]);
		return 2;
	}
	ring_flags = IORING_SETUP_IOPOLL | IORING_SETUP_SQE128 | IORING_SETUP_CQE32;
	if (argc < 4 || strcmp(argv[3], "plain"))
		ring_flags |= IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	is_vblk = ioctl(fd, VBLK_IOC_GET_INFO, info) == 0;
	if (!is_vblk)
		nsid = ioctl(fd, NVME_IOCTL_ID);
	for (i = 0; i < DEPTH; i++)
		if (posix_memalign(&bufs[i], BS, BS))
			return 1;
	for (r = 0; r < rounds; r++) {
		setup_ok = 0;
		pthread_create(&t, NULL, submitter, NULL);
		pthread_join(t, NULL);
		if (!setup_ok)
			return 1;
		io_uring_queue_exit(&ring);
	}
	return 0;
}
