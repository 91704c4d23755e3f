#!/usr/bin/env bash
# Benchmark: virtio-blk io_uring passthrough (/dev/vblk/vdX, fio cmd_type=vblk)
# against the virtio-blk block device, with QEMU's emulated NVMe and its
# generic device (/dev/ngXnY, cmd_type=nvme) against its block device beside
# them: same boot, same backends (one sparse file and one null-co node, each
# shared by a virtio-blk and an NVMe device), fio 4k random reads at each QD,
# interrupt-driven and polled (one poll queue per device).
#   bench/pt.sh [--cpus N] [--runtime S] [--reps N] [--qd "1 8"]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cpus=2 runtime=5 reps=2 qd="1 8" flavor=guest
bench_opts "$@"
[[ -x $BUILD/fio/fio ]] || die "no $BUILD/fio/fio: run make fio"
# shellcheck disable=SC2086
exec "$TOP/vm/vm.sh" --flavor "$flavor" --cpus "$cpus" \
	--disk file:queues=2 --disk same:of=0,bus=nvme \
	--disk null:queues=2 --disk same:of=2,bus=nvme \
	--append "virtio_blk.num_poll_queues=1 nvme.poll_queues=1" -- \
	"$TOP/bench/guest/pt.sh" "$runtime" "$reps" $qd
