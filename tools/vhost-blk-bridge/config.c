// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk-bridge: the virtio-blk device it presents to the guest: the
 * features offered and the configuration space, from what the backing
 * block device or file can do.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <linux/blkzoned.h>
#include <linux/fs.h>
#include <linux/virtio_blk.h>

#include "bridge.h"

/* struct virtio_blk_config as the spec lays it out, little endian. */
struct blk_config {
	uint64_t capacity;
	uint32_t size_max;
	uint32_t seg_max;
	uint16_t cylinders;
	uint8_t heads;
	uint8_t sectors;
	uint32_t blk_size;
	uint8_t physical_block_exp;
	uint8_t alignment_offset;
	uint16_t min_io_size;
	uint32_t opt_io_size;
	uint8_t writeback;
	uint8_t unused0;
	uint16_t num_queues;
	uint32_t max_discard_sectors;
	uint32_t max_discard_seg;
	uint32_t discard_sector_alignment;
	uint32_t max_write_zeroes_sectors;
	uint32_t max_write_zeroes_seg;
	uint8_t write_zeroes_may_unmap;
	uint8_t unused1[3];
} __attribute__((packed));

_Static_assert(sizeof(struct blk_config) == 60, "virtio_blk_config");

uint64_t offered_features(const struct bridge *b)
{
	uint64_t f = b->kernel_features;

	f |= 1ULL << VIRTIO_BLK_F_SEG_MAX | 1ULL << VIRTIO_BLK_F_BLK_SIZE |
	     1ULL << VIRTIO_BLK_F_TOPOLOGY | 1ULL << VU_F_PROTOCOL_FEATURES;
	if (b->readonly) {
		f |= 1ULL << VIRTIO_BLK_F_RO;
		f &= ~(1ULL << VIRTIO_BLK_F_DISCARD |
		       1ULL << VIRTIO_BLK_F_WRITE_ZEROES);
	}
	if (!b->discard)
		f &= ~(1ULL << VIRTIO_BLK_F_DISCARD);
	/* Without it the guest never flushes and vhost-blk writes through. */
	if (b->write_through)
		f &= ~(1ULL << VIRTIO_BLK_F_FLUSH);
	return f;
}

uint64_t offered_protocol_features(void)
{
	return 1ULL << VU_PF_MQ | 1ULL << VU_PF_REPLY_ACK |
	       1ULL << VU_PF_CONFIG | 1ULL << VU_PF_RESET_DEVICE;
}

static unsigned long read_sysfs_ulong(const char *fmt, unsigned int maj,
				      unsigned int min, const char *attr)
{
	char path[256];
	unsigned long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), fmt, maj, min, attr);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%lu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

int open_backend(struct bridge *b)
{
	struct statx stx;
	struct stat st;
	int fd;

	int flags = (b->readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC, dfd;

	/* vhost-blk does direct I/O itself; the fd needs no O_DIRECT. */
	fd = open(b->backend_path, flags);
	if (fd < 0) {
		logmsg("cannot open backend %s: %m", b->backend_path);
		return -1;
	}
	if (fstat(fd, &st)) {
		logmsg("%s: %m", b->backend_path);
		goto fail;
	}
	b->lbs = b->pbs = 512;
	if (S_ISBLK(st.st_mode)) {
		const char *q = "/sys/dev/block/%u:%u/queue/%s";
		unsigned int maj = major(st.st_rdev), min = minor(st.st_rdev);
		int lbs = 512, pbs = 512;
		__u32 zones = 0;

		/*
		 * vhost-blk refuses zoned devices (it offers no
		 * VIRTIO_BLK_F_ZONED); say so now, not when QEMU connects.
		 */
		if (!ioctl(fd, BLKGETNRZONES, &zones) && zones) {
			logmsg("backend %s is a zoned block device (%u zones), which vhost-blk does not serve",
			       b->backend_path, zones);
			goto fail;
		}
		if (ioctl(fd, BLKGETSIZE64, &b->size) ||
		    ioctl(fd, BLKSSZGET, &lbs) || ioctl(fd, BLKPBSZGET, &pbs)) {
			logmsg("%s: cannot read its geometry: %m", b->backend_path);
			goto fail;
		}
		b->lbs = lbs;
		b->pbs = pbs >= lbs ? pbs : lbs;
		b->max_discard_sectors = read_sysfs_ulong(q, maj, min,
							  "discard_max_bytes") >> 9 > UINT32_MAX ?
			UINT32_MAX : read_sysfs_ulong(q, maj, min,
						      "discard_max_bytes") >> 9;
		b->discard = b->max_discard_sectors != 0;
		b->discard_alignment = read_sysfs_ulong(q, maj, min,
							"discard_granularity") >> 9;
		/* Without hardware support the kernel writes zero pages. */
		b->max_wz_sectors = 1U << 21;
	} else if (S_ISREG(st.st_mode)) {
		dfd = open(b->backend_path, flags | O_DIRECT);
		if (dfd < 0) {
			logmsg("backend %s cannot be opened with O_DIRECT, and vhost-blk does direct I/O only: %m",
			       b->backend_path);
			goto fail;
		}
		close(dfd);
		b->size = st.st_size;
		/* Direct I/O needs the file's alignment (Linux 6.1+). */
		if (!statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) &&
		    stx.stx_mask & STATX_DIOALIGN && stx.stx_dio_offset_align > 512)
			b->lbs = b->pbs = stx.stx_dio_offset_align;
		b->discard = true;	/* a hole punch; UNSUPP where it fails */
		b->max_discard_sectors = 1U << 21;
		b->discard_alignment = b->lbs >> 9;
		b->max_wz_sectors = 1U << 21;
	} else {
		logmsg("backend %s is neither a block device nor a regular file",
		       b->backend_path);
		goto fail;
	}
	if (b->lbs & (b->lbs - 1) || b->lbs < 512 || b->lbs > 65536) {
		logmsg("%s: block size %u is not supported", b->backend_path, b->lbs);
		goto fail;
	}
	if (b->size < b->lbs) {
		logmsg("backend %s is empty (%" PRIu64 " bytes)", b->backend_path,
		       b->size);
		goto fail;
	}
	if (b->size % b->lbs)
		logmsg("backend %s: the last %" PRIu64 " bytes are not a whole block and are not served",
		       b->backend_path, b->size % b->lbs);
	b->size -= b->size % b->lbs;
	b->backend_fd = fd;
	return 0;
fail:
	close(fd);
	return -1;
}

/* The device's configuration space (struct virtio_blk_config), first size bytes. */
void config_fill(const struct bridge *b, uint8_t *data, uint32_t size)
{
	struct blk_config c;

	memset(&c, 0, sizeof(c));
	c.capacity = htole64(b->size >> 9);
	c.seg_max = htole32(b->seg_max);
	c.blk_size = htole32(b->lbs);
	c.physical_block_exp = __builtin_ctz(b->pbs / b->lbs);
	c.min_io_size = htole16(1);
	c.opt_io_size = htole32(0);
	c.num_queues = htole16(b->queues);
	if (b->discard) {
		c.max_discard_sectors = htole32(b->max_discard_sectors);
		c.max_discard_seg = htole32(1);
		c.discard_sector_alignment = htole32(b->discard_alignment);
	}
	c.max_write_zeroes_sectors = htole32(b->max_wz_sectors);
	c.max_write_zeroes_seg = htole32(1);
	c.write_zeroes_may_unmap = b->discard;
	memset(data, 0, size);
	memcpy(data, &c, size < sizeof(c) ? size : sizeof(c));
}
