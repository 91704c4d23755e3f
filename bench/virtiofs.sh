#!/usr/bin/env bash
# Benchmark: virtio-fs with 1 and with N request queues, same boot, same
# guest, same host file system, beside the release's virtiofsd (which serves
# one request queue):
#   vufsd-1   tools/vufsd, 1 request queue
#   vufsd-N   tools/vufsd, N request queues (N = vCPUs by default)
#   base-1, base-N  with --baseline BIN: another vufsd binary (an older
#             build, say), 1 and N queues, for a before/after ratio
#   virtiofsd the Rust virtiofsd where installed (Debian 13's package,
#             /usr/libexec/virtiofsd), without a thread pool, its default;
#             else QEMU 7.2's C virtiofsd (Debian 12, /usr/lib/qemu/virtiofsd,
#             its default pool of 64 threads); xattr; --killpriv adds
#             killpriv_v2, which neither agrees to by default
#   virtiofsd-tpK  the Rust virtiofsd with a pool of K threads (--pool K,
#             default N: as many threads as vufsd-N has queue workers);
#             --pool 0 leaves it out. The C virtiofsd has no such row.
# Every device uses the cache mode of --cache (auto, always or never; auto
# by default, both daemons' default).
# fio in the guest, numjobs = vCPUs, one job pinned per vCPU, O_DIRECT:
# sequential 256k and random 4k, reads and writes.
#   bench/virtiofs.sh [--cpus N] [--queues N] [--runtime S] [--reps N]
#                     [--engine psync|libaio] [--iodepth N] [--poll US]
#                     [--threads K] [--killpriv] [--baseline BIN]
#                     [--cache MODE] [--pool K] [--flavor F]
# Defaults: 2 vCPUs, N = 2, 8 s (+1 s ramp) per fio run, 2 repetitions,
# psync, vufsd one worker per queue and no busy-polling.
# Run alone it goes through bench/run.sh (a results directory in build/results).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cpus=2 queues="" runtime=8 reps=2 engine=psync iodepth=1 poll=0 threads=1 killpriv=0 baseline=""
cache=auto pool=""
bench_opts "cpus queues runtime reps engine iodepth poll threads killpriv! baseline cache pool flavor insns" "$@"
queues=${queues:-$cpus}
if [[ -n $pool && ! -x $RUST_VIRTIOFSD ]]; then
	die "virtiofs: --pool is for the Rust virtiofsd ($RUST_VIRTIOFSD; Debian 13: apt-get install virtiofsd)"
fi
pool=${pool:-$((10#$queues * 10#$threads))}
if [[ ! $queues =~ ^[0-9]+$ ]] || ((queues < 2)); then
	die "virtiofs: --queues must be 2 or more (vufsd-1 is the one-queue device)"
fi
case $engine in psync | libaio | io_uring) ;; *) die "virtiofs: --engine psync, libaio or io_uring" ;; esac
case $cache in auto | always | never) ;; *) die "virtiofs: --cache auto, always or never" ;; esac
if [[ -n $baseline ]]; then
	bench_need "$baseline" "the --baseline vufsd binary"
	baseline=$(realpath "$baseline")
fi
bench_checked
vdk=",cache=$cache"
((killpriv)) && vdk+=,killpriv
many=vufsd-$queues
devs=(--virtiofs "tag=vufsd-1,queues=1,poll=$poll,threads=$threads,cache=$cache"
	--virtiofs "tag=$many,queues=$queues,poll=$poll,threads=$threads,cache=$cache")
tags=(vufsd-1 "$many")
if [[ -n $baseline ]]; then
	devs+=(--virtiofs "tag=base-1,queues=1,poll=$poll,threads=$threads,bin=$baseline,cache=$cache"
		--virtiofs "tag=base-$queues,queues=$queues,poll=$poll,threads=$threads,bin=$baseline,cache=$cache")
	tags+=(base-1 "base-$queues")
fi
devs+=(--virtiofs "tag=virtiofsd,daemon=virtiofsd$vdk")
tags+=(virtiofsd)
# Which virtiofsd this run compared against, for the table.
if [[ -x $RUST_VIRTIOFSD ]]; then
	v=$("$RUST_VIRTIOFSD" --version 2>&1 | awk '{ print $NF; exit }') ||
		die "virtiofs: $RUST_VIRTIOFSD --version fails"
	peer="Rust virtiofsd $v, no thread pool"
	if ((10#$pool)); then
		devs+=(--virtiofs "tag=virtiofsd-tp$pool,daemon=virtiofsd,threads=$pool$vdk")
		tags+=("virtiofsd-tp$pool")
		peer+="; virtiofsd-tp$pool: a pool of $pool threads"
	fi
else
	peer="QEMU's C virtiofsd ($C_VIRTIOFSD), its pool of 64 threads"
fi
echo "$peer; cache=$cache" >"$BENCH_DIR/raw/virtiofs-peer.txt"
# reps x 4 workloads x the devices' fio runs.
bench_vm --cpus "$cpus" --no-disk --timeout $((1200 + reps * 4 * ${#tags[@]} * (runtime + 10) * 2)) \
	"${devs[@]}" -- \
	"$TOP/bench/guest/virtiofs.sh" "$runtime" "$reps" "$engine" "$iodepth" \
	"${tags[@]}"
bench_raw virtiofs.csv
bench_raw_insns virtiofs-insns.csv
stats=(vufsd-1="$BENCH_LOG/fs-vufsd-1.stats" "$many=$BENCH_LOG/fs-$many.stats")
[[ -z $baseline ]] || stats+=(base-1="$BENCH_LOG/fs-base-1.stats" "base-$queues=$BENCH_LOG/fs-base-$queues.stats")
bench_daemon_stats virtiofs "${stats[@]}"
bench_done
