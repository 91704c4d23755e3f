#!/usr/bin/env bash
# The main job: set up, build the patched guest kernel, boot it and show
# virtio-blk poll queues at work with numbers.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
"$TOP/scripts/setup.sh"
"$TOP/scripts/prepare.sh"
"$TOP/scripts/build-kernel.sh" guest
make -s -C "$TOP/tests/tools" OUT="$BUILD/tools"
log "poll queues: 2 vCPUs, virtio_blk.num_poll_queues=1, a file disk and a null-co disk with 2 queues each"
"$TOP/bench/poll.sh"
log "changing a disk's poll queues at runtime: 2 vCPUs, a two-queue file disk"
"$TOP/bench/repoll.sh"
