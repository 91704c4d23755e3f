/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vufsd: one request's buffers, as the transport (virtq.c) hands them to
 * the device that serves them (fuse.c), and the copy helpers (iov.c). No
 * part of this knows rings or FUSE.
 */
#ifndef VUFSD_CHAIN_H
#define VUFSD_CHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>

/* A chain longer than this (after indirect tables) is refused. */
#define MAX_CHAIN_IOV		1024

/*
 * One request: the device-readable buffers (out) and the device-writable
 * buffers (in), in order.
 */
struct chain {
	struct iovec *out;
	unsigned int nout;
	size_t out_len;
	struct iovec *in;
	unsigned int nin;
	size_t in_len;
};

/* What serving one chain did, for the transport's counters. */
struct chain_result {
	size_t written;		/* bytes written into the in buffers */
	bool error;		/* the reply carries an error */
	bool malformed;		/* the request was refused as malformed */
};

/* Copies between a flat buffer and an iovec array, starting at skip. */
size_t iov_to_buf(const struct iovec *iov, unsigned int n, size_t skip,
		  void *buf, size_t len);
size_t buf_to_iov(const struct iovec *iov, unsigned int n, size_t skip,
		  const void *buf, size_t len);
/* The part of an iovec array past skip bytes, at most len bytes long. */
unsigned int iov_slice(const struct iovec *iov, unsigned int n, size_t skip,
		       size_t len, struct iovec *dst, unsigned int max);

#endif
