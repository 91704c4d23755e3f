#!/usr/bin/env bash
# Benchmark: cost of changing a disk's number of poll queues at runtime,
# idle and under a QD1 random-read job, and the I/O pause it causes.
#   bench/repoll.sh [--cpus N] [--queues N] [--changes N] [--flavor F]
# Defaults: 2 vCPUs, a two-queue file disk, 10 changes each way.
# Run alone it goes through bench/run.sh (a results directory in build/results).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cpus=2 queues=2 changes=10
bench_opts "cpus queues changes flavor" "$@"
bench_checked
bench_vm --cpus "$cpus" --timeout $((600 + changes * 4)) \
	--disk "file:queues=$queues" -- "$TOP/bench/guest/repoll.sh" "$changes"
bench_raw repoll-changes.csv repoll-io.csv
bench_done
