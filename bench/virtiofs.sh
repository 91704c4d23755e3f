#!/usr/bin/env bash
# Benchmark: virtio-fs with 1 and with N request queues, same boot, same
# guest, same host file system, beside QEMU's own virtiofsd (which serves one
# request queue):
#   vufsd-1   tools/vufsd, 1 request queue
#   vufsd-N   tools/vufsd, N request queues (N = vCPUs by default)
#   virtiofsd QEMU 7.2's C virtiofsd (/usr/lib/qemu/virtiofsd, cache=auto,
#             xattr; --killpriv adds -o killpriv_v2, which it does not
#             agree to by default)
# fio in the guest, numjobs = vCPUs, one job pinned per vCPU, O_DIRECT:
# sequential 256k and random 4k, reads and writes.
#   bench/virtiofs.sh [--cpus N] [--queues N] [--runtime S] [--reps N]
#                     [--engine psync|libaio] [--iodepth N] [--poll US]
#                     [--threads K] [--killpriv]
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cpus=2 queues="" runtime=8 reps=2 engine=psync iodepth=1 poll=0 threads=1 flavor=guest vdk=""
while (($#)); do
	case $1 in
	--cpus) cpus=$2; shift 2 ;;
	--queues) queues=$2; shift 2 ;;
	--runtime) runtime=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--engine) engine=$2; shift 2 ;;
	--iodepth) iodepth=$2; shift 2 ;;
	--poll) poll=$2; shift 2 ;;
	--killpriv) vdk=,killpriv; shift ;;
	--threads) threads=$2; shift 2 ;;
	--flavor) flavor=$2; shift 2 ;;
	*) die "unknown option $1 (see the header of $0)" ;;
	esac
done
queues=${queues:-$cpus}
make -s -C "$TOP/tools/vufsd" OUT="$BUILD/tools"
run=$BUILD/logs/bench-virtiofs
rm -rf "$run"
"$TOP/vm/vm.sh" --flavor "$flavor" --cpus "$cpus" --no-disk --keep "$run" --timeout 7200 \
	--virtiofs "tag=vufsd-1,queues=1,poll=$poll,threads=$threads" \
	--virtiofs "tag=vufsd-$queues,queues=$queues,poll=$poll,threads=$threads" \
	--virtiofs "tag=virtiofsd,daemon=virtiofsd$vdk" -- \
	"$TOP/bench/guest/virtiofs.sh" "$runtime" "$reps" "$engine" "$iodepth" \
	vufsd-1 "vufsd-$queues" virtiofsd
echo
echo "host: $(nproc) CPUs; guest: $cpus vCPUs (TCG); fio $engine iodepth $iodepth, numjobs $cpus, O_DIRECT, ${runtime}s per cell; vufsd --threads $threads$( ((poll)) && echo " --busy-poll $poll")${vdk:+; virtiofsd -o killpriv_v2}"
/usr/bin/python3 "$TOP/bench/virtiofs_table.py" "$run/results.txt" vufsd-1 "vufsd-$queues" virtiofsd
echo
echo "per-queue share of the requests (vufsd, whole run; vq 0 is hiprio):"
for tag in vufsd-1 "vufsd-$queues"; do
	printf '  %-9s' "$tag"
	awk '$1 == "vq" { printf " vq%s %s", $2, $4 } $1 == "cpu_us" { cpu = $2 }
		$1 == "op" { ops = ops " " $2 " " $3 }
		END { printf "  (daemon CPU %.1f s)\n            by opcode:%s\n", cpu / 1e6, ops }' "$run/fs-$tag.stats"
done
