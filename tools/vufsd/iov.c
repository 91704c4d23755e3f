// SPDX-License-Identifier: GPL-2.0
/*
 * vufsd: copies between flat buffers and iovec arrays, for any layer.
 */
#include <stdint.h>
#include <string.h>

#include "chain.h"

/* Copies between buf and the iovecs' bytes from skip on. */
static size_t iov_copy(const struct iovec *iov, unsigned int n, size_t skip,
		       void *buf, size_t len, bool to_buf)
{
	size_t done = 0;
	unsigned int i;

	for (i = 0; i < n && done < len; i++) {
		size_t l = iov[i].iov_len;
		uint8_t *p;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		p = (uint8_t *)iov[i].iov_base + skip;
		l -= skip;
		if (l > len - done)
			l = len - done;
		if (to_buf)
			memcpy((uint8_t *)buf + done, p, l);
		else
			memcpy(p, (uint8_t *)buf + done, l);
		done += l;
		skip = 0;
	}
	return done;
}

size_t iov_to_buf(const struct iovec *iov, unsigned int n, size_t skip,
		  void *buf, size_t len)
{
	return iov_copy(iov, n, skip, buf, len, true);
}

size_t buf_to_iov(const struct iovec *iov, unsigned int n, size_t skip,
		  const void *buf, size_t len)
{
	return iov_copy(iov, n, skip, (void *)buf, len, false);
}

unsigned int iov_slice(const struct iovec *iov, unsigned int n, size_t skip,
		       size_t len, struct iovec *dst, unsigned int max)
{
	unsigned int i, k = 0;

	for (i = 0; i < n && len && k < max; i++) {
		size_t l = iov[i].iov_len;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		l -= skip;
		if (l > len)
			l = len;
		dst[k].iov_base = (uint8_t *)iov[i].iov_base + skip;
		dst[k].iov_len = l;
		k++;
		len -= l;
		skip = 0;
	}
	return k;
}
