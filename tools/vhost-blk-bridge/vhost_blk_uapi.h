/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * The parts of the vhost uapi the bridge needs that a distribution's kernel
 * headers may lack: vhost-blk (kernel/patches, 0013) and the worker ioctls
 * (Linux 6.5). Values are the kernel's; each block is skipped when the
 * installed <linux/vhost.h> already has it.
 */
#ifndef VHOST_BLK_UAPI_H
#define VHOST_BLK_UAPI_H

#include <linux/types.h>
#include <linux/vhost.h>

#ifndef VHOST_NEW_WORKER
struct vhost_worker_state {
	unsigned int worker_id;
};

struct vhost_vring_worker {
	unsigned int index;
	unsigned int worker_id;
};

#define VHOST_NEW_WORKER _IOR(VHOST_VIRTIO, 0x8, struct vhost_worker_state)
#define VHOST_FREE_WORKER _IOW(VHOST_VIRTIO, 0x9, struct vhost_worker_state)
#define VHOST_ATTACH_VRING_WORKER _IOW(VHOST_VIRTIO, 0x15,		\
				       struct vhost_vring_worker)
#define VHOST_GET_VRING_WORKER _IOWR(VHOST_VIRTIO, 0x16,		\
				     struct vhost_vring_worker)
#endif

#ifndef VHOST_BLK_SET_BACKEND
#define VHOST_BLK_BACKEND_F_RDONLY	(1U << 0)
#define VHOST_BLK_SERIAL_BYTES		20

struct vhost_blk_backend {
	__s32 fd;
	__u32 flags;
	__u8 serial[VHOST_BLK_SERIAL_BYTES];
	__u32 reserved[5];
};

#define VHOST_BLK_SET_BACKEND _IOW(VHOST_VIRTIO, 0x50, struct vhost_blk_backend)
#endif

#endif /* VHOST_BLK_UAPI_H */
