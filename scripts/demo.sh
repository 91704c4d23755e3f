#!/usr/bin/env bash
# The main job: set up, build the patched guest kernel, boot it and show
# virtio-blk poll queues, io_uring passthrough, vhost-blk, the
# vhost-user-blk bridge and multi-queue virtio-fs at work with numbers.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
"$TOP/scripts/setup.sh"
"$TOP/scripts/prepare.sh"
"$TOP/scripts/build-kernel.sh" guest
make -s -C "$TOP/tests/tools" OUT="$BUILD/tools"
"$TOP/scripts/build-fio.sh"
log "poll queues: 2 vCPUs, virtio_blk.num_poll_queues=1, a file disk and a null-co disk with 2 queues each"
"$TOP/bench/poll.sh"
log "changing a disk's poll queues at runtime: 2 vCPUs, a two-queue file disk"
"$TOP/bench/repoll.sh"
log "io_uring passthrough: /dev/vblk/vdX (fio cmd_type=vblk) vs /dev/vdX, beside QEMU NVMe /dev/ngXnY vs /dev/nvmeXnY, on one file and one null-co backend"
"$TOP/bench/pt.sh"
log "vhost-blk: /dev/vhost-blk driven by tools/virtio/vhost_blk_test vs io_uring O_DIRECT, same device (null_blk, brd), by QD, queues and workers"
"$TOP/bench/vhost.sh"
log "vhost-user-blk bridge: a second-level guest's disk through tools/vhost-blk-bridge + vhost-blk, beside QEMU's virtio-blk and qemu-storage-daemon on the same brd device"
"$TOP/bench/bridge.sh" --reps 1
log "virtio-fs: tools/vufsd with 1 and 2 request queues beside QEMU's virtiofsd, mounted in one guest; per-queue CPU lists and request spread"
"$TOP/bench/virtiofs.sh" --reps 1
