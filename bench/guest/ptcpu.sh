#!/usr/bin/env bash
# Runs inside the guest (see bench/ptcpu.sh): fio's t/io_uring, pinned to
# vCPU 0, reading 4k at random through four paths one after the other, in
# alternating order between repetitions: the virtio-blk block device, its
# passthrough character device, the NVMe block device and its generic
# device. For each: IOPS, and per completed I/O the submitter's CPU time
# and the device's interrupts. One row per run in ptcpu.csv; in a boot with
# the insncount plugin, one row per counted window in ptcpu-insns.csv
# instead (bench/guest/lib.sh ic_window), and no profiles.
#
# The CPU time is perf's task-clock of t/io_uring: the time it was on a
# CPU, by the scheduler's clock, interrupts that arrived meanwhile
# included. It leaves out interrupt work that lands while vCPU 0 is idle
# (the submitter asleep in io_uring_enter), which is why irqs/IO is beside
# it. /proc/stat's user and system ticks are not used: under TCG they
# miss much of the time (a check: 1.0 s of ticks against 1.77 s of
# task-clock for the same 4 s interrupt-driven run).
#   ptcpu.sh RUNTIME REPS "QD..." BATCH [PERF]
# QD 1 runs with batches of 1, other depths submit and reap BATCH at a time.
# PERF=1: after the runs, a perf profile (cpu-clock samples, no PMU needed)
# of each path at the highest QD, polled, into perf/.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/bench/guest/lib.sh"
runtime=$1 reps=$2 batch=$4 perf=${5:-0}
read -ra qds <<<"$3"
TIOU=$TOP/build/fio/io_uring

# irqs PATTERN: interrupts so far on the lines of /proc/interrupts whose
# name matches PATTERN (the device's queues).
irqs() {
	awk -v pat="$1" '$NF ~ pat { for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) n += $i; else break }
		END { print n + 0 }' /proc/interrupts
}

# tiou_args PATH QD MODE: t/io_uring's arguments for a run.
tiou_args() {
	local path=$1 qd=$2 b=1 pt=0 direct=1 poll=0
	((qd == 1)) || b=$batch
	[[ $path == *-pt || $path == *-ng ]] && pt=1 direct=0
	[[ $3 == poll ]] && poll=1
	# Fixed buffers, registered files and ring, random 4k, one thread.
	echo "-d$qd -s$b -c$b -b4096 -p$poll -B1 -F1 -X1 -R1 -n1 -u$pt -O$direct"
}

# run QD MODE REP PATH FILE IRQ-PATTERN
run() {
	local qd=$1 mode=$2 rep=$3 path=$4 file=$5 pat=$6 b=1 out i0 i1 ios us ms vals kept
	((qd == 1)) || b=$batch
	if ic_on; then
		# shellcheck disable=SC2046 # the arguments are words
		ic_window reqs taskset -c 0 "$TIOU" $(tiou_args "$path" "$qd" "$mode") -r600 "$file"
		csv_row ptcpu-insns.csv "$qd,$b,$mode,$rep,$path,$file,$IC_ROW"
		return
	fi
	out=/tmp/tiou.out
	i0=$(irqs "$pat")
	# shellcheck disable=SC2046 # the arguments are words
	taskset -c 0 timeout $((runtime + 30)) perf stat -x, -e task-clock -o /tmp/tiou.stat -- \
		"$TIOU" $(tiou_args "$path" "$qd" "$mode") -r"$runtime" "$file" >"$out" 2>&1 ||
		{ cat "$out"; die "t/io_uring failed on $file"; }
	i1=$(irqs "$pat")
	read -r ios us < <(sed -n 's/^Total: ios=\([0-9]*\) .*elapsed_us=\([0-9]*\)$/\1 \2/p' "$out")
	[[ -n $ios && $ios -gt 0 ]] || { cat "$out"; die "no I/O done on $file"; }
	ms=$(awk -F, '$3 == "task-clock" { print $1 }' /tmp/tiou.stat)
	[[ -n $ms ]] || { cat /tmp/tiou.stat; die "perf stat gave no task-clock"; }
	cat /tmp/tiou.stat >>"$out"
	kept=$(keep_file "$out" "tiou/qd$qd-$mode-$path-$rep.txt")
	vals=$(awk -v n="$ios" -v us="$us" -v ms="$ms" -v irq=$((i1 - i0)) \
		'BEGIN { printf "%.0f,%d,%.2f,%.3f", n * 1e6 / us, n, ms * 1000 / n, irq / n }')
	csv_row ptcpu.csv "$qd,$b,$mode,$rep,$path,$file,$vals,$kept"
}

vs=vstor0 ns=vstor1
d=$(disk_by_serial "$vs") n=$(nvme_by_serial "$ns")
vdev=$(basename "$(readlink -f "/sys/block/$d/device")")
declare -A PATHS_FILES=([vblk-bdev]=/dev/$d [vblk-pt]=/dev/vblk/$d [nvme-bdev]=/dev/$n [nvme-ng]=/dev/ng${n#nvme})
# The device's vectors in /proc/interrupts (virtio2-req.0, nvme0q1).
declare -A IRQ_PAT=([vblk-bdev]="^$vdev-" [vblk-pt]="^$vdev-" [nvme-bdev]="^${n%n*}q" [nvme-ng]="^${n%n*}q")
info "== set-up"
info "$(nproc) vCPUs; t/io_uring pinned to vCPU 0; host pinning: $(tr '\n' ';' </run/vstor/pin.txt 2>/dev/null)"
info "virtio-blk /dev/$d ($vdev, QEMU null-co in an iothread of its own, $(cat "/sys/block/$d/num_poll_queues") poll queue) + /dev/vblk/$d"
info "NVMe /dev/$n (null-co, QEMU main loop, io_poll $(cat "/sys/block/$n/queue/io_poll")) + /dev/ng${n#nvme}"
info "runtime ${runtime}s, $reps repetitions, QD ${qds[*]} (batch 1 at QD 1, else $batch), fixed buffers, registered files"
echo

if ic_on; then
	ic_setup
	csv_open ptcpu-insns.csv "qd,batch,mode,rep,path,device,$IC_HDR"
else
	csv_open ptcpu.csv qd,batch,mode,rep,path,device,iops,ios,cpu_us_per_io,irqs_per_io,output
fi
for qd in "${qds[@]}"; do
	for mode in irq poll; do
		for ((r = 1; r <= reps; r++)); do
			paths=(vblk-bdev vblk-pt nvme-bdev nvme-ng)
			((r % 2)) || paths=(nvme-ng nvme-bdev vblk-pt vblk-bdev)
			for p in "${paths[@]}"; do
				run "$qd" "$mode" "$r" "$p" "${PATHS_FILES[$p]}" "${IRQ_PAT[$p]}"
			done
		done
	done
done

((perf)) && ! ic_on || exit 0
# Profiles: where vCPU 0's time goes on each path, polled, at the highest
# depth: perf's cpu-clock (an hrtimer, no PMU) sampling vCPU 0 only.
qd=${qds[-1]}
mkdir -p "$OUT/perf"
for p in vblk-bdev vblk-pt nvme-bdev nvme-ng; do
	# shellcheck disable=SC2046
	perf record -q -e cpu-clock -F 4999 -C 0 -g -o /tmp/perf.data -- \
		taskset -c 0 "$TIOU" $(tiou_args "$p" "$qd" poll) -r"$runtime" "${PATHS_FILES[$p]}" >/tmp/tiou.out 2>&1 ||
		{ cat /tmp/tiou.out; die "perf record failed on $p"; }
	perf report -q -i /tmp/perf.data --no-children --sort symbol --percent-limit 0.5 -g none \
		>"$OUT/perf/$p-qd$qd-poll.txt" 2>/dev/null
	info "perf: $p QD $qd polled: $(grep -c . "$OUT/perf/$p-qd$qd-poll.txt") symbols above 0.5% (perf/$p-qd$qd-poll.txt)"
done
