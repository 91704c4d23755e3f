// SPDX-License-Identifier: GPL-2.0
/*
 * fsmeta: small-file metadata work on a directory, for file system
 * benchmarks (virtio-fs). Each of THREADS threads, in a directory of its
 * own under DIR, repeats for SECONDS: create a file (O_CREAT | O_EXCL),
 * write 4 KiB into it, close it, stat it, unlink it. Prints one line:
 *
 *   fsmeta: threads=N secs=S ops=N ops_per_s=N lat_mean_us=N create_us=N
 *           stat_us=N unlink_us=N
 *
 * where an op is one whole create-write-close-stat-unlink round and the
 * per-step figures are means. Exit status 0, or 1 with the first error.
 *
 *   fsmeta DIR THREADS SECONDS
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct worker {
	pthread_t tid;
	char dir[1024];
	uint64_t ops;
	uint64_t ns_create, ns_stat, ns_unlink;	/* create covers write and close */
	char err[4400];
};

static uint64_t end_ns;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	static const char data[4096];
	char path[1100];
	struct stat st;
	uint64_t t0, t1, t2, t3;
	int fd;

	while (!w->err[0] && now_ns() < end_ns) {
		snprintf(path, sizeof(path), "%s/f%llu", w->dir, (unsigned long long)w->ops);
		t0 = now_ns();
		fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0) {
			snprintf(w->err, sizeof(w->err), "create %s: %s", path, strerror(errno));
			break;
		}
		if (write(fd, data, sizeof(data)) != (ssize_t)sizeof(data))
			snprintf(w->err, sizeof(w->err), "write %s: %s", path, strerror(errno));
		if (close(fd) && !w->err[0])
			snprintf(w->err, sizeof(w->err), "close %s: %s", path, strerror(errno));
		t1 = now_ns();
		if (!w->err[0] && (stat(path, &st) || st.st_size != sizeof(data)))
			snprintf(w->err, sizeof(w->err), "stat %s: %s", path,
				 errno ? strerror(errno) : "wrong size");
		t2 = now_ns();
		if (unlink(path) && !w->err[0])
			snprintf(w->err, sizeof(w->err), "unlink %s: %s", path, strerror(errno));
		t3 = now_ns();
		w->ns_create += t1 - t0;
		w->ns_stat += t2 - t1;
		w->ns_unlink += t3 - t2;
		w->ops++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t ops = 0, c = 0, s = 0, u = 0, start;
	unsigned int n, secs, i;
	struct worker *w;
	const char *err = NULL;
	double el;

	if (argc != 4 || !(n = (unsigned int)atoi(argv[2])) || !(secs = (unsigned int)atoi(argv[3]))) {
		fprintf(stderr, "usage: fsmeta DIR THREADS SECONDS\n");
		return 2;
	}
	w = calloc(n, sizeof(*w));
	if (!w)
		return 1;
	for (i = 0; i < n; i++) {
		snprintf(w[i].dir, sizeof(w[i].dir), "%s/fsmeta.%u", argv[1], i);
		if (mkdir(w[i].dir, 0755) && errno != EEXIST) {
			fprintf(stderr, "fsmeta: mkdir %s: %s\n", w[i].dir, strerror(errno));
			return 1;
		}
	}
	start = now_ns();
	end_ns = start + (uint64_t)secs * 1000000000u;
	for (i = 0; i < n; i++)
		if (pthread_create(&w[i].tid, NULL, work, &w[i])) {
			fprintf(stderr, "fsmeta: pthread_create failed\n");
			return 1;
		}
	for (i = 0; i < n; i++) {
		pthread_join(w[i].tid, NULL);
		ops += w[i].ops;
		c += w[i].ns_create;
		s += w[i].ns_stat;
		u += w[i].ns_unlink;
		if (w[i].err[0] && !err)
			err = w[i].err;
		rmdir(w[i].dir);
	}
	el = (double)(now_ns() - start) / 1e9;
	if (err) {
		fprintf(stderr, "fsmeta: %s\n", err);
		return 1;
	}
	if (!ops) {
		fprintf(stderr, "fsmeta: no operation finished in %u s\n", secs);
		return 1;
	}
	printf("fsmeta: threads=%u secs=%.2f ops=%llu ops_per_s=%.0f lat_mean_us=%.1f create_us=%.1f stat_us=%.1f unlink_us=%.1f\n",
	       n, el, (unsigned long long)ops, (double)ops / el,
	       (double)(c + s + u) / (double)ops / 1000.0, (double)c / (double)ops / 1000.0,
	       (double)s / (double)ops / 1000.0, (double)u / (double)ops / 1000.0);
	return 0;
}
