#!/usr/bin/env bash
# Benchmark: vhost-blk (/dev/vhost-blk driven by tools/virtio/vhost_blk_test,
# a userspace virtio-blk driver) against io_uring issued directly by
# userspace (fio, O_DIRECT) on the same backing device in the same boot:
# 4k random reads at each QD, with 1 and 2 queues (fio jobs) and 1 and 2
# vhost workers, on null_blk (no data: the software path alone) and brd.
#   bench/vhost.sh [--cpus N] [--runtime S] [--reps N] [--qd "1 32"]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cpus=2 runtime=5 reps=2 qd="1 32" flavor=guest
bench_opts "$@"
[[ -x $BUILD/tools/vhost_blk_test ]] || die "no $BUILD/tools/vhost_blk_test: run make tools"
# shellcheck disable=SC2086
exec "$TOP/vm/vm.sh" --flavor "$flavor" --cpus "$cpus" --no-disk \
	--modules vhost_blk --append "brd.rd_nr=1 brd.rd_size=262144 null_blk.nr_devices=1" -- \
	"$TOP/bench/guest/vhost.sh" "$runtime" "$reps" $qd
