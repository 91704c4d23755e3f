#!/usr/bin/env bash
# Benchmark: virtio-blk io_uring passthrough where the guest's CPU is the
# bottleneck. The virtio-blk device runs in a QEMU I/O thread of its own;
# QEMU's threads are pinned (vm.sh --pin) so that vCPU 0 has a host core to
# itself; fio's t/io_uring, a CPU-bound submitter (batched submission and
# reaping, fixed buffers, registered files and ring), runs on vCPU 0. Block
# device vs passthrough, for virtio-blk and QEMU's NVMe (whose emulation,
# having no iothread in QEMU 7.2, runs in the main loop), interrupt-driven
# and polled; IOPS and guest CPU time per I/O.
#   bench/ptcpu.sh [--cpus N] [--runtime S] [--reps N] [--qd "1 8"]
#                  [--batch N] [--perf 0|1] [--flavor F]
# Defaults: 2 vCPUs, 5 s per run, 3 repetitions, QD 1 and 8, batch 4 (QD 1
# runs with batches of 1), perf 0 (1: profile each path polled at the
# highest QD afterwards, perf cpu-clock sampling of vCPU 0).
# Run alone it goes through bench/run.sh (a results directory in build/results).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cpus=2 runtime=5 reps=3 qd="1 8" batch=4 perf=0
BENCH_NUMERIC+="batch perf "
bench_opts "cpus runtime reps qd batch perf flavor insns" "$@"
bench_need "$BUILD/fio/io_uring" "run make fio"
((cpus >= 2)) || die "ptcpu: --cpus must be at least 2 (virtio-blk gives a disk no more queues than CPUs, and the poll queue is the second)"
((batch >= 1)) || die "ptcpu: --batch must be at least 1"
[[ $perf == [01] ]] || die "ptcpu: --perf is 0 or 1"
bench_checked
read -ra qds <<<"$qd"
# QDs x 2 modes x reps x 4 paths runs, then 4 profiled ones.
bench_vm --cpus "$cpus" --pin --timeout $((600 + (${#qds[@]} * 2 * reps * 4 + 4) * (runtime + 8) * 2)) \
	--disk null:queues=2,iothread --disk null:bus=nvme \
	--append "virtio_blk.num_poll_queues=1 nvme.poll_queues=1" -- \
	"$TOP/bench/guest/ptcpu.sh" "$runtime" "$reps" "$qd" "$batch" "$perf"
bench_raw ptcpu.csv
bench_raw_insns ptcpu-insns.csv
bench_done
