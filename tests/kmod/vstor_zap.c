// SPDX-License-Identifier: GPL-2.0
/*
 * vstor_zap: zone appends from a test, for tests/guest/inner-zoned.sh.
 *
 * No userspace interface sends REQ_OP_ZONE_APPEND to a block device (6.12's
 * zonefs writes with plain writes; btrfs would need a zoned btrfs), so this
 * module does, at load time:
 *
 *   modprobe vstor_zap path=/dev/vda zone=N nr=32 [polled=1]
 *
 * submits @nr 4 KiB zone appends at once to zone @zone of @path (which must
 * be empty: the caller resets it), each page filled with its own pattern,
 * polled on the disk's poll queues with polled=1 (completions then arrive
 * through bio_poll() with a completion batch, as io_uring's are). Once all
 * have completed it checks that every one succeeded, that the sectors the
 * device returned are the zone's first @nr blocks, each once, and that each
 * block reads back as the append that returned its sector. Loading fails
 * (EIO, with the reason in the kernel log) otherwise, so a driver that
 * returned the wrong sector, on its own or in a completion batch, fails the
 * load. On success the module stays loaded; the result is in the log and in
 * the parameter result (0). If the appends do not complete within 120 s the
 * load succeeds with result -ETIMEDOUT, since their completions would run
 * this module's code; unloading it then waits for them, polling them if
 * they were polled.
 */
#include <linux/module.h>
#include <linux/blkdev.h>
#include <linux/bio.h>
#include <linux/completion.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/sort.h>

#define ZAP_BLOCK_SECTORS	(PAGE_SIZE >> SECTOR_SHIFT)

static char *path;
module_param(path, charp, 0444);
MODULE_PARM_DESC(path, "zoned block device to append to");
static unsigned int zone = 1;
module_param(zone, uint, 0444);
MODULE_PARM_DESC(zone, "index of an empty sequential zone (1)");
static unsigned int nr = 32;
module_param(nr, uint, 0444);
MODULE_PARM_DESC(nr, "appends in flight at once, 1-256 (32)");
static bool polled;
module_param(polled, bool, 0444);
MODULE_PARM_DESC(polled, "submit with REQ_POLLED and poll for completions (no)");
static int result = 1;
module_param(result, int, 0444);
MODULE_PARM_DESC(result, "0 once the check passed, else -errno; 1 before it ran");

static struct zap *zap_pending;

struct zap_io {
	struct zap *z;
	struct bio *bio;
	unsigned int index;
};

struct zap {
	struct file *file;
	struct zap_io *ios;
	struct page **pages;
	sector_t *sectors;	/* as returned, in submission order */
	blk_status_t *status;
	atomic_t left;
	struct completion done;
};

static void zap_end_io(struct bio *bio)
{
	struct zap_io *io = bio->bi_private;
	struct zap *z = io->z;
	unsigned int i = io->index;

	z->sectors[i] = bio->bi_iter.bi_sector;
	z->status[i] = bio->bi_status;
	/* The submission's reference; zap_free() puts zap_run()'s. */
	bio_put(bio);
	if (atomic_dec_and_test(&z->left))
		complete(&z->done);
}

/* One pass over the appends still in flight; returns the completions found. */
static unsigned int zap_poll(struct zap *z)
{
	DEFINE_IO_COMP_BATCH(iob);
	unsigned int i, found = 0;

	for (i = 0; i < nr; i++)
		found += max(bio_poll(z->ios[i].bio, &iob, 0), 0);
	/* Ends them through the driver's batch (virtblk_complete_batch()). */
	if (iob.complete)
		iob.complete(&iob);
	return found;
}

static void zap_fill(struct page *page, u32 tag)
{
	u32 *p = kmap_local_page(page);
	unsigned int k;

	for (k = 0; k < PAGE_SIZE / sizeof(u32); k++)
		p[k] = tag ^ (k * 0x9e3779b9u);
	kunmap_local(p);
}

/* The first word of the pattern that differs, or -1. */
static int zap_check(struct page *page, u32 tag)
{
	u32 *p = kmap_local_page(page);
	int bad = -1;
	unsigned int k;

	for (k = 0; k < PAGE_SIZE / sizeof(u32) && bad < 0; k++)
		if (p[k] != (tag ^ (k * 0x9e3779b9u)))
			bad = k;
	kunmap_local(p);
	return bad;
}

static int cmp_sector(const void *a, const void *b)
{
	sector_t x = *(const sector_t *)a, y = *(const sector_t *)b;

	return x < y ? -1 : x > y;
}

static int zap_run(struct block_device *bdev, struct zap *z, u32 seed)
{
	sector_t zsize = bdev_zone_sectors(bdev), start = zone * zsize;
	unsigned long deadline = jiffies + 120 * HZ;
	unsigned int i, found = 0;
	sector_t *sorted;
	struct page *rd;
	int ret = 0;
	long left;

	atomic_set(&z->left, nr);
	init_completion(&z->done);
	for (i = 0; i < nr; i++) {
		struct bio *bio = bio_alloc(bdev, 1, REQ_OP_ZONE_APPEND |
					    (polled ? REQ_POLLED : 0), GFP_KERNEL);

		zap_fill(z->pages[i], seed + i);
		bio->bi_iter.bi_sector = start;
		__bio_add_page(bio, z->pages[i], PAGE_SIZE, 0);
		bio->bi_end_io = zap_end_io;
		z->ios[i].z = z;
		z->ios[i].index = i;
		bio->bi_private = &z->ios[i];
		/*
		 * A reference of our own: bio_poll() looks at the bio after
		 * it completed.
		 */
		bio_get(bio);
		z->ios[i].bio = bio;
		submit_bio(bio);
	}
	while (polled && atomic_read(&z->left) && time_before(jiffies, deadline) &&
	       !fatal_signal_pending(current)) {
		found += zap_poll(z);
		cond_resched();
	}
	/*
	 * Killable and bounded: a device that stops answering ends the check
	 * with -ETIMEDOUT, and zap_init() keeps the module loaded until the
	 * appends are done (zap_exit()).
	 */
	left = wait_for_completion_killable_timeout(&z->done,
						    max_t(long, deadline - jiffies, 1));
	if (left <= 0) {
		pr_err("vstor_zap: %d of %u appends did not complete%s\n",
		       atomic_read(&z->left), nr, left ? " (killed)" : " in 120 s");
		return -ETIMEDOUT;
	}
	for (i = 0; i < nr; i++) {
		if (z->status[i]) {
			pr_err("vstor_zap: append %u failed: %d\n", i,
			       blk_status_to_errno(z->status[i]));
			ret = -EIO;
		}
	}
	if (ret)
		return ret;
	/*
	 * bio_poll() counts whatever completed on the poll queue while it
	 * ran: fewer than @nr means some appends were not polled at all.
	 */
	if (polled && found < nr) {
		pr_err("vstor_zap: polling found %u of %u completions: the rest came by interrupt\n",
		       found, nr);
		return -EIO;
	}

	sorted = kmemdup(z->sectors, nr * sizeof(*sorted), GFP_KERNEL);
	if (!sorted)
		return -ENOMEM;
	sort(sorted, nr, sizeof(*sorted), cmp_sector, NULL);
	for (i = 0; i < nr && !ret; i++) {
		if (sorted[i] != start + i * ZAP_BLOCK_SECTORS) {
			pr_err("vstor_zap: returned sectors are not the zone's first %u blocks: the %u-th lowest is %llu, want %llu\n",
			       nr, i, (unsigned long long)sorted[i],
			       (unsigned long long)(start + i * ZAP_BLOCK_SECTORS));
			ret = -EIO;
		}
	}
	kfree(sorted);
	if (ret)
		return ret;

	rd = alloc_page(GFP_KERNEL);
	if (!rd)
		return -ENOMEM;
	for (i = 0; i < nr && !ret; i++) {
		struct bio bio;
		struct bio_vec bv;
		int bad;

		bio_init(&bio, bdev, &bv, 1, REQ_OP_READ);
		bio.bi_iter.bi_sector = z->sectors[i];
		__bio_add_page(&bio, rd, PAGE_SIZE, 0);
		ret = submit_bio_wait(&bio);
		bio_uninit(&bio);
		if (ret) {
			pr_err("vstor_zap: read of sector %llu: %d\n",
			       (unsigned long long)z->sectors[i], ret);
			break;
		}
		bad = zap_check(rd, seed + i);
		if (bad >= 0) {
			pr_err("vstor_zap: sector %llu, returned to append %u, does not hold its data (word %d)\n",
			       (unsigned long long)z->sectors[i], i, bad);
			ret = -EIO;
		}
	}
	__free_page(rd);
	if (!ret)
		pr_info("vstor_zap: %u appends to zone %u of %s%s: each got its own block of the zone's first %u and reads back\n",
			nr, zone, path, polled ? " (polled)" : "", nr);
	return ret;
}

static void zap_free(struct zap *z)
{
	unsigned int i;

	for (i = 0; z->ios && i < nr; i++)
		if (z->ios[i].bio)
			bio_put(z->ios[i].bio);
	for (i = 0; z->pages && i < nr; i++)
		if (z->pages[i])
			__free_page(z->pages[i]);
	kfree(z->ios);
	kfree(z->pages);
	kfree(z->sectors);
	kfree(z->status);
	fput(z->file);
	kfree(z);
}

static int __init zap_init(void)
{
	struct block_device *bdev;
	unsigned long depth;
	unsigned int i;
	struct zap *z;
	int ret;

	if (!path || nr < 1 || nr > 256)
		return -EINVAL;
	z = kzalloc(sizeof(*z), GFP_KERNEL);
	if (!z)
		return -ENOMEM;
	z->file = bdev_file_open_by_path(path, BLK_OPEN_READ | BLK_OPEN_WRITE, NULL, NULL);
	if (IS_ERR(z->file)) {
		ret = PTR_ERR(z->file);
		kfree(z);
		return ret;
	}
	bdev = file_bdev(z->file);
	ret = -EINVAL;
	if (!bdev_is_zoned(bdev) || !bdev_max_zone_append_sectors(bdev) ||
	    zone >= bdev_nr_zones(bdev)) {
		pr_err("vstor_zap: %s is not zoned with zone appends, or has no zone %u\n",
		       path, zone);
		goto out;
	}
	if (polled && !(bdev_get_queue(bdev)->limits.features & BLK_FEAT_POLL)) {
		pr_err("vstor_zap: %s has no poll queues\n", path);
		goto out;
	}
	/*
	 * Polled, a submission that waits for a tag would wait for ever: only
	 * polling frees one, and it starts after the last submission.
	 */
	depth = bdev_get_queue(bdev)->nr_requests;
	if (polled && nr > depth) {
		pr_err("vstor_zap: nr=%u polled is more than %s's %lu requests\n",
		       nr, path, depth);
		goto out;
	}
	ret = -ENOMEM;
	z->ios = kcalloc(nr, sizeof(*z->ios), GFP_KERNEL);
	z->pages = kcalloc(nr, sizeof(*z->pages), GFP_KERNEL);
	z->sectors = kcalloc(nr, sizeof(*z->sectors), GFP_KERNEL);
	z->status = kcalloc(nr, sizeof(*z->status), GFP_KERNEL);
	if (!z->ios || !z->pages || !z->sectors || !z->status)
		goto out;
	for (i = 0; i < nr; i++) {
		z->pages[i] = alloc_page(GFP_KERNEL);
		if (!z->pages[i])
			goto out;
	}
	ret = zap_run(bdev, z, get_random_u32());
	result = ret;
	if (ret == -ETIMEDOUT) {
		/*
		 * Appends are still in flight, and their completion runs this
		 * module's code: stay loaded with the result in the parameter,
		 * and let zap_exit() finish them.
		 */
		zap_pending = z;
		return 0;
	}
out:
	zap_free(z);
	return ret;
}

static void __exit zap_exit(void)
{
	if (!zap_pending)
		return;
	/* Polled appends complete only when polled. */
	while (polled && atomic_read(&zap_pending->left)) {
		zap_poll(zap_pending);
		cond_resched();
	}
	wait_for_completion(&zap_pending->done);
	zap_free(zap_pending);
}

module_init(zap_init);
module_exit(zap_exit);
MODULE_DESCRIPTION("vstor test: concurrent zone appends and the sectors they return");
MODULE_LICENSE("GPL");
