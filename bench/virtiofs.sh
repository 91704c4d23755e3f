#!/usr/bin/env bash
# Benchmark: virtio-fs with 1 and with N request queues, same boot, same
# guest, same host file system, beside QEMU's own virtiofsd (which serves one
# request queue):
#   vufsd-1   tools/vufsd, 1 request queue
#   vufsd-N   tools/vufsd, N request queues (N = vCPUs by default)
#   base-1, base-N  with --baseline BIN: another vufsd binary (an older
#             build, say), 1 and N queues, for a before/after ratio
#   virtiofsd QEMU 7.2's C virtiofsd (/usr/lib/qemu/virtiofsd, cache=auto,
#             xattr; --killpriv adds -o killpriv_v2, which it does not
#             agree to by default)
# fio in the guest, numjobs = vCPUs, one job pinned per vCPU, O_DIRECT:
# sequential 256k and random 4k, reads and writes.
#   bench/virtiofs.sh [--cpus N] [--queues N] [--runtime S] [--reps N]
#                     [--engine psync|libaio] [--iodepth N] [--poll US]
#                     [--threads K] [--killpriv] [--baseline BIN]
#                     [--flavor F]
# Defaults: 2 vCPUs, N = 2, 8 s (+1 s ramp) per fio run, 2 repetitions,
# psync, vufsd one worker per queue and no busy-polling.
# Run alone it goes through bench/run.sh (a results directory in build/results).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cpus=2 queues="" runtime=8 reps=2 engine=psync iodepth=1 poll=0 threads=1 killpriv=0 baseline=""
bench_opts "cpus queues runtime reps engine iodepth poll threads killpriv! baseline flavor" "$@"
queues=${queues:-$cpus}
if [[ ! $queues =~ ^[0-9]+$ ]] || ((queues < 2)); then
	die "virtiofs: --queues must be 2 or more (vufsd-1 is the one-queue device)"
fi
case $engine in psync | libaio | io_uring) ;; *) die "virtiofs: --engine psync, libaio or io_uring" ;; esac
if [[ -n $baseline ]]; then
	bench_need "$baseline" "the --baseline vufsd binary"
	baseline=$(realpath "$baseline")
fi
bench_checked
vdk=""
((killpriv)) && vdk=,killpriv
many=vufsd-$queues
devs=(--virtiofs "tag=vufsd-1,queues=1,poll=$poll,threads=$threads"
	--virtiofs "tag=$many,queues=$queues,poll=$poll,threads=$threads")
tags=(vufsd-1 "$many")
if [[ -n $baseline ]]; then
	devs+=(--virtiofs "tag=base-1,queues=1,poll=$poll,threads=$threads,bin=$baseline"
		--virtiofs "tag=base-$queues,queues=$queues,poll=$poll,threads=$threads,bin=$baseline")
	tags+=(base-1 "base-$queues")
fi
devs+=(--virtiofs "tag=virtiofsd,daemon=virtiofsd$vdk")
tags+=(virtiofsd)
# reps x 4 workloads x the devices' fio runs.
bench_vm --cpus "$cpus" --no-disk --timeout $((1200 + reps * 4 * ${#tags[@]} * (runtime + 10) * 2)) \
	"${devs[@]}" -- \
	"$TOP/bench/guest/virtiofs.sh" "$runtime" "$reps" "$engine" "$iodepth" \
	"${tags[@]}"
bench_raw virtiofs.csv
stats=(vufsd-1="$BENCH_LOG/fs-vufsd-1.stats" "$many=$BENCH_LOG/fs-$many.stats")
[[ -z $baseline ]] || stats+=(base-1="$BENCH_LOG/fs-base-1.stats" "base-$queues=$BENCH_LOG/fs-base-$queues.stats")
bench_daemon_stats virtiofs "${stats[@]}"
bench_done
