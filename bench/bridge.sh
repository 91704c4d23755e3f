#!/usr/bin/env bash
# Benchmark: a second-level guest's disk served several ways, side by side
# in one boot of that guest, all on the same backing device (a brd ramdisk
# in the first-level guest):
#   bridge     vhost-user-blk-pci -> tools/vhost-blk-bridge -> vhost-blk,
#              a vhost worker per queue
#   bridge-w1  the same with one worker for all queues (--workers one)
#   qemu       QEMU's own virtio-blk-pci in its main loop (aio=io_uring,
#              cache=none)
#   iot1, iotN (QEMU 9 and later) QEMU's virtio-blk-pci with
#              iothread-vq-mapping over 1 and over N IOThreads, N the
#              queue count: the peers of bridge-w1 and bridge
#   qsd        vhost-user-blk-pci -> qemu-storage-daemon (QEMU's userspace
#              vhost-user-blk export, aio=io_uring, cache.direct=on)
# The first-level guest runs our kernel (with vhost-blk) under TCG and boots
# the second with the host's QEMU, also under TCG.
# With --insns 1 (the default) the first-level guest boots a second time with
# the insncount plugin and counts its own instructions per second-level I/O
# (bench/guest/bridge.sh).
#   bench/bridge.sh [--cpus N] [--runtime S] [--reps N] [--qd "1 16"] [--insns 0|1] [--flavor F]
# Defaults: 2 vCPUs in both guests, 6 s (+1 s ramp) per fio run, 2
# repetitions, QD 1 and 16, random reads and writes.
# Run alone it goes through bench/run.sh (a results directory in build/results).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cpus=2 runtime=6 reps=2 qd="1 16"
bench_opts "cpus runtime reps qd flavor insns" "$@"
bench_need "$BUILD/tools/vhost-blk-bridge" "run make tools"
bench_checked
# The second-level guest's root (vm/initramfs.sh; a no-op when up to date).
"$TOP/vm/initramfs.sh" --flavor guest
# The first-level guest: 3 GiB, of which the second-level guest takes 1 GiB.
# It outlives the second-level guest's own timeout (3000 s).
bench_vm --cpus "$cpus" --mem 3G --no-disk --timeout 3600 \
	--modules vhost_blk --append "brd.rd_nr=1 brd.rd_size=524288" -- \
	"$TOP/bench/guest/bridge.sh" "$cpus" "$runtime" "$reps" "$qd"
bench_raw inner/bridge.csv
bench_raw_insns inner/bridge-insns.csv
bench_daemon_stats bridge bridge="$BENCH_LOG/bridge.stats"
bench_done
