#!/usr/bin/env bash
# Runs in the guest (see bench/irqbatch.sh): fio io_uring 4k random reads on
# the first NDISKS disks at once, irq_batch off and on alternated, one row
# per fio run in irqbatch.csv; then the soak on the two small-ring disks,
# one row per round in irqbatch-soak.csv. In a boot with the insncount
# plugin: one row per counted window in irqbatch-insns.csv instead
# (bench/guest/lib.sh ic_window), and no soak.
#   irqbatch.sh RUNTIME REPS "QD..." NDISKS SOAK_ROUNDS
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/bench/guest/lib.sh"
runtime=$1 reps=$2 ndisks=$4 soak=$5
read -ra qds <<<"$3"
param=/sys/kernel/debug/virtio_blk/irq_batch
[[ -e $param ]] || { echo "this kernel has no $param"; exit 1; }
n=$(nproc)

disks=() vdevs=()
for ((i = 0; i < ndisks; i++)); do
	d=$(disk_by_serial "vstor$i") || { echo "no disk vstor$i"; exit 1; }
	disks+=("$d") vdevs+=("$(virtio_dev "$d")")
done
re="^($(IFS='|'; echo "${vdevs[*]}"))-req"
info "== $n vCPUs, $ndisks null-co disks with 2 queues each (${disks[*]}), fio $(fio --version) io_uring 4k randread, a job per disk on CPUs 0-$((n - 1)) in turn, ${runtime}s + 1s ramp, $reps repetitions"

if ic_on; then
	ic_setup
	csv_open irqbatch-insns.csv "qd,batch,rep,$IC_HDR"
else
	csv_open irqbatch.csv qd,batch,rep,iops,lat_mean_us,lat_p99_us,ios,irqs,cpu_us_per_io,fio_json
fi
for qd in "${qds[@]}"; do
	for ((r = 1; r <= reps; r++)); do
		modes=(0 1)
		((r % 2)) || modes=(1 0)
		for b in "${modes[@]}"; do
			echo "$b" >"$param"
			args=()
			for ((i = 0; i < ndisks; i++)); do
				args+=(--name="${disks[i]}" --filename="/dev/${disks[i]}" --cpus_allowed=$((i % n)))
			done
			if ic_on; then
				ic_window reqs fio --ioengine=io_uring --direct=1 --rw=randread --bs=4k \
					--iodepth="$qd" --time_based --runtime=600 --size=1G "${args[@]}"
				csv_row irqbatch-insns.csv "$qd,$b,$r,$IC_ROW"
				continue
			fi
			before=$(irq_sum "$re")
			fio_json /tmp/ib.json --ioengine=io_uring --direct=1 --rw=randread --bs=4k \
				--iodepth="$qd" --time_based --runtime="$runtime" --ramp_time=1 \
				--size=1G --lat_percentiles=1 "${args[@]}"
			after=$(irq_sum "$re")
			vals=$(/usr/bin/python3 - /tmp/ib.json "$runtime" <<'PY'
import json, sys
jobs = json.load(open(sys.argv[1]))["jobs"]
rt = float(sys.argv[2])
iops = sum(j["read"]["iops"] for j in jobs)
ios = sum(j["read"]["total_ios"] for j in jobs)
lat = sum(j["read"]["lat_ns"]["mean"] * j["read"]["total_ios"] for j in jobs) / ios / 1000
p99 = max(j["read"]["lat_ns"].get("percentile", {}).get("99.000000", float("nan")) for j in jobs) / 1000
# usr_cpu/sys_cpu: percent of one CPU over the job's run time.
cpu = sum((j["usr_cpu"] + j["sys_cpu"]) / 100 * j["job_runtime"] / 1000 for j in jobs)
print("%d,%.1f,%.1f,%d" % (iops, lat, p99, ios), end="")
print(",IRQS,%.2f" % (cpu * 1e6 / ios))
PY
)
			kept=$(keep_file /tmp/ib.json "fio/qd$qd-batch$b-$r.json")
			csv_row irqbatch.csv "$qd,$b,$r,${vals/IRQS/$((after - before))},$kept"
		done
	done
done
echo 1 >"$param"
ic_on && exit 0

rd=()
for s in "vstor$ndisks" "vstor$((ndisks + 1))"; do
	d=$(disk_by_serial "$s") || { echo "no disk $s"; exit 1; }
	rd+=("$d")
done
info "== soak: $soak rounds of 3 s at QD128 on ${rd[*]} (16-entry rings, no indirect descriptors), irq_batch=1"
csv_open irqbatch-soak.csv round,engine,affinity,sched,result,line
rc=0
"$TOP/tests/tools/batch_rounds.sh" --rounds "$soak" --runtime 3 --slack 30 --qd 128 \
	--jobs 2 --out "$OUT/soak" "${rd[@]}" >/tmp/soak.out 2>&1 || rc=$?
cat /tmp/soak.out
while read -r line; do
	[[ $line =~ ^round\ ([0-9]+):\ ([a-z_]+)(\ hipri)?\ affinity=([0-9])\ sched=([a-z-]+)\ (.*)$ ]] || continue
	res=ok
	[[ $line == *HUNG* ]] && res=hung
	[[ $line == *exited* ]] && res=failed
	csv_row irqbatch-soak.csv "${BASH_REMATCH[1]},${BASH_REMATCH[2]},${BASH_REMATCH[4]},${BASH_REMATCH[5]},$res,\"${BASH_REMATCH[6]}\""
done </tmp/soak.out
info "== soak: $(tail -1 /tmp/soak.out) (exit $rc)"
