#!/usr/bin/env bash
# Benchmark: virtio-blk with and without polled completion, same boot, same
# disks (a sparse file and QEMU null-co, two queues each, one a poll queue):
# fio io_uring 4k random reads with and without hipri, alternated.
#   bench/poll.sh [--cpus N] [--runtime S] [--reps N] [--qd "1 16"] [--flavor F]
# Defaults: 2 vCPUs, 8 s (+1 s ramp) per fio run, 2 repetitions, QD 1 and 16.
# Run alone it goes through bench/run.sh (a results directory in build/results).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cpus=2 runtime=8 reps=2 qd="1 16"
bench_opts "cpus runtime reps qd flavor insns" "$@"
bench_checked
read -ra qds <<<"$qd"
# 2 disks x QDs x reps x 2 modes fio runs, each runtime + 1 s ramp + ~5 s.
bench_vm --cpus "$cpus" --timeout $((600 + 2 * ${#qds[@]} * reps * 2 * (runtime + 6) * 2)) \
	--disk file:queues=2 --disk null:queues=2 \
	--append virtio_blk.num_poll_queues=1 -- \
	"$TOP/bench/guest/poll.sh" "$runtime" "$reps" "$qd" file=vstor0 null-co=vstor1
bench_raw poll.csv
bench_raw_insns poll-insns.csv
bench_done
