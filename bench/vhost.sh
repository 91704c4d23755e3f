#!/usr/bin/env bash
# Benchmark: vhost-blk (/dev/vhost-blk driven by tools/virtio/vhost_blk_test,
# a userspace virtio-blk driver) against io_uring issued directly by
# userspace (fio, O_DIRECT) on the same backing device in the same boot:
# 4k random reads at each QD, with 1 and 2 queues (fio jobs) and 1 and 2
# vhost workers, on null_blk (no data: the software path alone) and brd.
# vhost-blk runs three ways: as it is, with its workers busy-polling the
# vrings (VHOST_SET_VRING_BUSYLOOP_TIMEOUT, --window units of 1024 ns), and
# busy-polling with the driver polling the used ring too (--poll); the
# CPU time of the vhost workers and of the driver per request is kept.
#   bench/vhost.sh [--cpus N] [--runtime S] [--reps N] [--qd "1 8 32"] [--window US] [--flavor F]
# Defaults: 2 vCPUs, 4 s per run (fio: +1 s ramp), 3 repetitions, QD 1, 8
# and 32, window 50 (0: no busy-polling runs).
# Run alone it goes through bench/run.sh (a results directory in build/results).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cpus=2 runtime=4 reps=3 qd="1 8 32" window=50
bench_opts "cpus runtime reps qd window flavor insns" "$@"
bench_need "$BUILD/tools/vhost_blk_test" "run make tools"
bench_checked
read -ra qds <<<"$qd"
paths=$((window ? 4 : 2))
# 2 backends x QDs x 3 layouts x reps x paths runs.
bench_vm --cpus "$cpus" --no-disk --timeout $((600 + 2 * ${#qds[@]} * 3 * reps * paths * (runtime + 6) * 2)) \
	--modules vhost_blk --append "brd.rd_nr=1 brd.rd_size=262144 null_blk.nr_devices=1" -- \
	"$TOP/bench/guest/vhost.sh" "$runtime" "$reps" "$qd" "$window"
bench_raw vhost.csv
bench_raw_insns vhost-insns.csv
bench_done
