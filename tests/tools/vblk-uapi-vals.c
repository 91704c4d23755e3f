/*
 * Prints every definition and layout of the virtio-blk passthrough uapi,
 * from the kernel's header (-DKERNEL_HDR) or from fio's copy
 * (engines/vblk.h): tests/host/fio.sh compares the two outputs.
 */
#include <stdio.h>
#include <stddef.h>
#ifdef KERNEL_HDR
#include <linux/virtio_blk_cmd.h>
#else
#include "engines/vblk.h"
#endif
#define P(x) printf("%s %#llx\n", #x, (unsigned long long)(x))
#define O(s, m) printf("%s.%s %zu\n", #s, #m, offsetof(struct s, m))
int main(void)
{
	P(VIRTBLK_IOC_MAGIC); P(VIRTBLK_CMD_GET_INFO); P(VIRTBLK_CMD_READ);
	P(VIRTBLK_CMD_WRITE); P(VIRTBLK_CMD_READV); P(VIRTBLK_CMD_WRITEV);
	P(VIRTBLK_CMD_FLUSH); P(VIRTBLK_CMD_DISCARD);
	P(VIRTBLK_CMD_WRITE_ZEROES); P(VIRTBLK_CMD_GET_ID);
	P(VIRTBLK_CMD_F_UNMAP); P(VIRTBLK_ID_BYTES);
	P(VIRTBLK_INFO_F_READ_ONLY); P(VIRTBLK_INFO_F_WRITE_CACHE);
	P(VIRTBLK_INFO_F_POLL); P(VIRTBLK_U_CMD_GET_INFO);
	P(VIRTBLK_U_CMD_READ); P(VIRTBLK_U_CMD_WRITE); P(VIRTBLK_U_CMD_READV);
	P(VIRTBLK_U_CMD_WRITEV); P(VIRTBLK_U_CMD_FLUSH);
	P(VIRTBLK_U_CMD_DISCARD); P(VIRTBLK_U_CMD_WRITE_ZEROES);
	P(VIRTBLK_U_CMD_GET_ID); P(VIRTBLK_IOC_GET_INFO);
	P(sizeof(struct virtblk_uring_cmd)); P(sizeof(struct virtblk_info));
	O(virtblk_uring_cmd, sector); O(virtblk_uring_cmd, addr);
	O(virtblk_uring_cmd, len); O(virtblk_uring_cmd, flags);
	O(virtblk_uring_cmd, nr_sectors); O(virtblk_uring_cmd, reserved0);
	O(virtblk_uring_cmd, reserved);
	O(virtblk_info, ops); O(virtblk_info, capacity); O(virtblk_info, flags);
	O(virtblk_info, logical_block_size); O(virtblk_info, max_sectors);
	O(virtblk_info, max_segments); O(virtblk_info, max_segment_size);
	O(virtblk_info, max_discard_sectors);
	O(virtblk_info, max_write_zeroes_sectors);
	O(virtblk_info, nr_poll_queues); O(virtblk_info, reserved);
	return 0;
}
