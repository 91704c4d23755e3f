#!/usr/bin/env bash
# Benchmark: virtio-blk completion batching on the interrupt path
# (debugfs virtio_blk/irq_batch), on and off in one boot. fio io_uring 4k random
# reads on several two-queue null-co disks at once, a job per disk, the
# jobs spread over the vCPUs; batching switched at runtime between runs,
# the two alternated; IOPS, latency, interrupts per I/O and fio's CPU per
# I/O. Then a soak: tests/tools/batch_rounds.sh (fio rounds at QD128 that
# watch for a job that never finishes) on disks whose 16-entry rings
# without indirect descriptors fill before their tags run out, the
# conditions of the hang that got interrupt-path batching reverted upstream.
#   bench/irqbatch.sh [--cpus N] [--runtime S] [--reps N] [--qd "1 16 128"]
#                     [--disks N] [--soak ROUNDS] [--flavor F]
# Defaults: 4 vCPUs, 5 s per run (+1 s ramp), 3 repetitions, QD 1, 16 and
# 128, 4 disks, 40 soak rounds of 3 s.
# Run alone it goes through bench/run.sh (a results directory in build/results).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cpus=4 runtime=5 reps=3 qd="1 16 128" disks=4 soak=40
BENCH_NUMERIC+="disks soak "
bench_opts "cpus runtime reps qd disks soak flavor insns" "$@"
((disks >= 1 && disks <= 8)) || die "irqbatch: --disks takes 1 to 8"
bench_need "$TOP/tests/tools/batch_rounds.sh" "the soak's driver"
bench_checked
read -ra qds <<<"$qd"
dargs=()
for ((i = 0; i < disks; i++)); do dargs+=(--disk null:queues=2); done
# The soak's small-ring disks come after the measured ones.
dargs+=(--disk "null:queues=2,qsize=16,noindirect" --disk "null:queues=2,qsize=16,noindirect")
# QDs x reps x 2 modes runs, each runtime + ramp + ~8 s; the soak's rounds.
bench_vm --cpus "$cpus" --timeout $((900 + ${#qds[@]} * reps * 2 * (runtime + 9) * 2 + soak * 60)) \
	"${dargs[@]}" -- "$TOP/bench/guest/irqbatch.sh" "$runtime" "$reps" "$qd" "$disks" "$soak"
bench_raw irqbatch.csv irqbatch-soak.csv
bench_raw_insns irqbatch-insns.csv
bench_done
