// SPDX-License-Identifier: GPL-2.0
/*
 * iopoll_idle: leave polled reads in flight on an IOPOLL io_uring without
 * polling for them, then reap them later.
 *
 * Submits N direct 4 KiB reads on an IORING_SETUP_IOPOLL ring, prints
 * "submitted" and waits until a line arrives on stdin (or stdin closes)
 * without entering the kernel for completions. Then it reaps all N and
 * checks every one read 4096 bytes. Used to check that a disk can drain and
 * reconfigure while polled requests wait for a poller that is not polling.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BS 4096

int main(int argc, char **argv)
{
	struct io_uring ring;
	struct io_uring_cqe *cqe;
	int n, fd, i, ret, bad = 0;
	char line[64];
	void *buf;

	if (argc != 3 || (n = atoi(argv[2])) < 1 || n > 256) {
		fprintf(stderr, "usage: iopoll_idle DEVICE N (1..256)\n");
		return 2;
	}
	fd = open(argv[1], O_RDONLY | O_DIRECT);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	ret = io_uring_queue_init(n, &ring, IORING_SETUP_IOPOLL);
	if (ret) {
		fprintf(stderr, "iopoll_idle: io_uring_queue_init: %s\n", strerror(-ret));
		return 1;
	}
	if (posix_memalign(&buf, BS, (size_t)n * BS))
		return 1;
	for (i = 0; i < n; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

		io_uring_prep_read(sqe, fd, (char *)buf + (size_t)i * BS, BS,
				   (unsigned long long)i * BS);
		sqe->user_data = i;
	}
	ret = io_uring_submit(&ring);
	if (ret != n) {
		fprintf(stderr, "iopoll_idle: submitted %d of %d: %s\n", ret, n,
			ret < 0 ? strerror(-ret) : "short");
		return 1;
	}
	printf("submitted %d\n", n);
	fflush(stdout);

	if (!fgets(line, sizeof(line), stdin))
		line[0] = 0;

	for (i = 0; i < n; i++) {
		ret = io_uring_wait_cqe(&ring, &cqe);
		if (ret) {
			fprintf(stderr, "iopoll_idle: wait_cqe: %s\n", strerror(-ret));
			return 1;
		}
		if (cqe->res != BS) {
			fprintf(stderr, "iopoll_idle: read %llu: %s\n",
				(unsigned long long)cqe->user_data,
				cqe->res < 0 ? strerror(-cqe->res) : "short");
			bad++;
		}
		io_uring_cqe_seen(&ring, cqe);
	}
	printf("reaped %d, %d failed\n", n, bad);
	return bad ? 1 : 0;
}
