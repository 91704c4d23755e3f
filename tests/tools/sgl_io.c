// SPDX-License-Identifier: GPL-2.0
/*
 * sgl_io: vectored direct I/O over many discontiguous buffers, to drive a
 * block device with requests of a chosen number of scatter-gather segments,
 * and check that the data comes back intact.
 *
 * Each segment is seg_size bytes placed at offset 1024 of its own page, so
 * no two segments are physically contiguous and the block layer cannot merge
 * them: a request built from N iovecs has exactly N segments (unless the
 * block layer must split it at max_segments).
 *
 * The tool writes a pattern derived from --seed and the byte offset with
 * N-segment vectored writes, then reads it back twice, once vectored with N
 * segments and once with a single contiguous buffer, and compares.
 *
 * Paths: sync (pwritev2/preadv2), hipri (the same with RWF_HIPRI, completed
 * by polling), uring (io_uring WRITEV/READV), uring-poll (the same on an
 * IORING_SETUP_IOPOLL ring).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <liburing.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#define SEG_OFFSET 1024

static const char *const paths[] = { "sync", "hipri", "uring", "uring-poll" };
enum { P_SYNC, P_HIPRI, P_URING, P_URING_POLL };

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sgl_io [options] DEVICE\n"
		"  -n, --segs N        segments per request (default 64)\n"
		"  -s, --seg-size B    bytes per segment, multiple of 512, <= 3072 (default 512)\n"
		"  -o, --offset B      device byte offset, multiple of 512 (default 0)\n"
		"  -p, --path P        sync | hipri | uring | uring-poll (default sync)\n"
		"  -S, --seed N        pattern seed (default 1)\n"
		"  -r, --requests N    consecutive requests to write and check (default 1)\n"
		"  -h, --help\n");
}

static uint8_t pattern(uint64_t seed, uint64_t off)
{
	uint64_t x = (off / 8) * 0x9e3779b97f4a7c15ULL ^ seed;

	x ^= x >> 29;
	return (uint8_t)(x >> (8 * (off % 8)));
}

/* Return 0 if an I/O moved all @want bytes, else report it and return 1. */
static int io_ok(ssize_t ret, size_t want, const char *path, const char *what,
		 uint64_t off)
{
	if (ret == (ssize_t)want)
		return 0;
	fprintf(stderr, "sgl_io: %s %s of %zu bytes at %llu: %s\n", path, what,
		want, (unsigned long long)off,
		ret < 0 ? strerror(-ret) : "short transfer");
	return 1;
}

static int check_pattern(const uint8_t *buf, size_t len, uint64_t seed,
			 uint64_t off, const char *what)
{
	size_t b;

	for (b = 0; b < len; b++) {
		if (buf[b] != pattern(seed, off + b)) {
			fprintf(stderr, "sgl_io: %s mismatch at byte %llu: %#x != %#x\n",
				what, (unsigned long long)(off + b), buf[b],
				pattern(seed, off + b));
			return 1;
		}
	}
	return 0;
}

static int uring_rw(struct io_uring *ring, int fd, int write,
		    const struct iovec *iov, int n, off_t off)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct io_uring_cqe *cqe;
	int ret;

	if (write)
		io_uring_prep_writev(sqe, fd, iov, n, off);
	else
		io_uring_prep_readv(sqe, fd, iov, n, off);
	ret = io_uring_submit(ring);
	if (ret != 1)
		return ret < 0 ? ret : -EIO;
	ret = io_uring_wait_cqe(ring, &cqe);
	if (ret)
		return ret;
	ret = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return ret;
}

static ssize_t do_rw(int path, struct io_uring *ring, int fd, int write,
		     const struct iovec *iov, int n, off_t off)
{
	int flags = path == P_HIPRI ? RWF_HIPRI : 0;
	ssize_t ret;

	if (path == P_URING || path == P_URING_POLL)
		return uring_rw(ring, fd, write, iov, n, off);
	ret = write ? pwritev2(fd, iov, n, off, flags) :
		      preadv2(fd, iov, n, off, flags);
	return ret < 0 ? -errno : ret;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "segs", required_argument, NULL, 'n' },
		{ "seg-size", required_argument, NULL, 's' },
		{ "offset", required_argument, NULL, 'o' },
		{ "path", required_argument, NULL, 'p' },
		{ "seed", required_argument, NULL, 'S' },
		{ "requests", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	long segs = 64, seg_size = 512, nreq = 1;
	unsigned long long off0 = 0, seed = 1;
	long page = sysconf(_SC_PAGESIZE);
	struct io_uring ring;
	int path = P_SYNC, fd, c, i;
	size_t reqbytes, r;
	struct iovec *iov;
	uint8_t *seg_mem, *flat;

	while ((c = getopt_long(argc, argv, "n:s:o:p:S:r:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': segs = strtol(optarg, NULL, 0); break;
		case 's': seg_size = strtol(optarg, NULL, 0); break;
		case 'o': off0 = strtoull(optarg, NULL, 0); break;
		case 'S': seed = strtoull(optarg, NULL, 0); break;
		case 'r': nreq = strtol(optarg, NULL, 0); break;
		case 'p':
			for (path = 0; path < 4; path++)
				if (!strcmp(optarg, paths[path]))
					break;
			if (path == 4) {
				fprintf(stderr, "sgl_io: unknown path '%s'\n", optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1 || segs < 1 || segs > IOV_MAX || nreq < 1 ||
	    seg_size < 512 || seg_size % 512 || seg_size > page - SEG_OFFSET ||
	    off0 % 512) {
		usage(stderr);
		return 2;
	}

	fd = open(argv[optind], O_RDWR | O_DIRECT);
	if (fd < 0) {
		perror(argv[optind]);
		return 1;
	}
	if (path == P_URING || path == P_URING_POLL) {
		int ret = io_uring_queue_init(4, &ring,
				path == P_URING_POLL ? IORING_SETUP_IOPOLL : 0);

		if (ret) {
			fprintf(stderr, "sgl_io: io_uring_queue_init: %s\n", strerror(-ret));
			return 1;
		}
	}

	reqbytes = (size_t)segs * seg_size;
	seg_mem = mmap(NULL, segs * page, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	iov = calloc(segs, sizeof(*iov));
	if (seg_mem == MAP_FAILED || !iov ||
	    posix_memalign((void **)&flat, page, reqbytes)) {
		fprintf(stderr, "sgl_io: out of memory\n");
		return 1;
	}
	for (i = 0; i < segs; i++) {
		iov[i].iov_base = seg_mem + i * page + SEG_OFFSET;
		iov[i].iov_len = seg_size;
	}

	for (r = 0; r < (size_t)nreq; r++) {
		uint64_t base = off0 + r * reqbytes;
		size_t b;

		for (b = 0; b < reqbytes; b++)
			((uint8_t *)iov[b / seg_size].iov_base)[b % seg_size] =
				pattern(seed, base + b);
		if (io_ok(do_rw(path, &ring, fd, 1, iov, segs, base), reqbytes,
			  paths[path], "vectored write", base))
			return 1;
		for (i = 0; i < segs; i++)
			memset(iov[i].iov_base, 0, seg_size);
		if (io_ok(do_rw(path, &ring, fd, 0, iov, segs, base), reqbytes,
			  paths[path], "vectored read", base))
			return 1;
		/* Gather what the vectored read returned, then check it. */
		for (i = 0; i < segs; i++)
			memcpy(flat + i * seg_size, iov[i].iov_base, seg_size);
		if (check_pattern(flat, reqbytes, seed, base, "vectored read"))
			return 1;

		memset(flat, 0, reqbytes);
		if (io_ok(pread(fd, flat, reqbytes, base) < 0 ? -errno :
			  (ssize_t)reqbytes, reqbytes, "sync", "contiguous read", base) ||
		    check_pattern(flat, reqbytes, seed, base, "contiguous read"))
			return 1;
	}
	printf("sgl_io: %s: %ld requests of %ld x %ld-byte segments verified\n",
	       paths[path], nreq, segs, seg_size);
	return 0;
}
