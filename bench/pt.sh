#!/usr/bin/env bash
# Benchmark: virtio-blk io_uring passthrough (/dev/vblk/vdX, fio cmd_type=vblk)
# against the virtio-blk block device, with QEMU's emulated NVMe and its
# generic device (/dev/ngXnY, cmd_type=nvme) against its block device beside
# them: same boot, same backends (one sparse file and one null-co node, each
# shared by a virtio-blk and an NVMe device), fio 4k random reads at each QD,
# interrupt-driven and polled (one poll queue per device).
#   bench/pt.sh [--cpus N] [--runtime S] [--reps N] [--qd "1 8"] [--flavor F]
# Defaults: 2 vCPUs, 5 s (+1 s ramp) per fio run, 2 repetitions, QD 1 and 8.
# Run alone it goes through bench/run.sh (a results directory in build/results).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cpus=2 runtime=5 reps=2 qd="1 8"
bench_opts "cpus runtime reps qd flavor insns" "$@"
bench_need "$BUILD/fio/fio" "run make fio"
bench_checked
read -ra qds <<<"$qd"
# 2 backends x QDs x 2 modes x reps x 4 paths fio runs.
bench_vm --cpus "$cpus" --timeout $((600 + 2 * ${#qds[@]} * 2 * reps * 4 * (runtime + 6) * 2)) \
	--disk file:queues=2 --disk same:of=0,bus=nvme \
	--disk null:queues=2 --disk same:of=2,bus=nvme \
	--append "virtio_blk.num_poll_queues=1 nvme.poll_queues=1" -- \
	"$TOP/bench/guest/pt.sh" "$runtime" "$reps" "$qd"
bench_raw pt.csv
bench_raw_insns pt-insns.csv
bench_done
