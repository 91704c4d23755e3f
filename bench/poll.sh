#!/usr/bin/env bash
# Benchmark: virtio-blk with and without polled completion, same boot, same
# disks (a sparse file and QEMU null-co, two queues each, one a poll queue).
#   bench/poll.sh [--cpus N] [--runtime S] [--reps N] [--qd "1 16"]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cpus=2 runtime=8 reps=2 qd="1 16" flavor=guest
bench_opts "$@"
# shellcheck disable=SC2086
exec "$TOP/vm/vm.sh" --flavor "$flavor" --cpus "$cpus" \
	--disk file:queues=2 --disk null:queues=2 \
	--append virtio_blk.num_poll_queues=1 -- \
	"$TOP/bench/guest/poll.sh" "$runtime" "$reps" $qd
