#!/usr/bin/env bash
# Runs inside the guest (see bench/vhost.sh): for each backend, QD and
# queue/worker layout, 4k random reads through io_uring (fio) and through
# vhost-blk (vhost_blk_test --mode bench), one after the other, alternating
# their order between repetitions. One row per run in vhost.csv; each run's
# own output (fio JSON, vhost_blk_test's line) is kept beside it.
#   vhost.sh RUNTIME REPS "QD..."
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/bench/guest/lib.sh"
runtime=$1 reps=$2
read -ra qds <<<"$3"
VBT=$TOOLS/vhost_blk_test

# run BACKEND DEV QD QUEUES WORKERS REP PATH
run() {
	local backend=$1 dev=$2 qd=$3 queues=$4 workers=$5 rep=$6 path=$7 out id
	id=$backend-qd$qd-q$queues-w$workers-$path-$rep
	if [[ $path == io_uring ]]; then
		fio_json /tmp/b.json --name=b --filename="$dev" --ioengine=io_uring \
			--direct=1 --rw=randread --bs=4k --iodepth="$qd" \
			--numjobs="$queues" --group_reporting --time_based \
			--runtime="$runtime" --ramp_time=1 --size=256M \
			--lat_percentiles=1
		out=$(fio_field /tmp/b.json read \
			'"%d,%.1f,%.1f" % (j["iops"], j["lat_ns"]["mean"] / 1000, j["lat_ns"].get("percentile", {}).get("99.000000", float("nan")) / 1000)')
		out+=,$(keep_file /tmp/b.json "fio/$id.json")
	else
		"$VBT" --backend "$dev" --mode bench --rw randread --bs 4096 \
			--qd "$qd" --queues "$queues" --workers "$workers" \
			--time "$runtime" >/tmp/vbt.txt 2>&1 || { cat /tmp/vbt.txt; return 1; }
		# Its result line: "vhost-blk bench: iops=N lat_avg_us=N lat_p99_us=N ...".
		out=$(awk '/^vhost-blk bench:/ {
			for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
			printf "%d,%.1f,%.1f\n", v["iops"], v["lat_avg_us"], v["lat_p99_us"] }' /tmp/vbt.txt)
		[[ -n $out ]] || { echo "vhost_blk_test bench printed no result line"; cat /tmp/vbt.txt; return 1; }
		out+=,$(keep_file /tmp/vbt.txt "vbt/$id.txt")
	fi
	csv_row vhost.csv "$backend,$dev,$qd,$queues,$workers,$rep,$path,$out"
}

info "== $(nproc) vCPUs; backends: null_blk /dev/nullb0 ($(cat /sys/block/nullb0/queue/nr_requests) tags), brd /dev/ram0 ($(($(cat /sys/block/ram0/size) / 2048)) MiB)"
info "== fio $(fio --version) (io_uring, O_DIRECT); vhost_blk_test bench; runtime ${runtime}s, $reps repetitions"
echo

csv_open vhost.csv backend,device,qd,queues,workers,rep,path,iops,lat_mean_us,lat_p99_us,output
for pair in "null_blk /dev/nullb0" "brd /dev/ram0"; do
	read -r backend dev <<<"$pair"
	for qd in "${qds[@]}"; do
		for layout in "1 1" "2 1" "2 2"; do
			read -r queues workers <<<"$layout"
			for ((r = 1; r <= reps; r++)); do
				paths=(io_uring vhost-blk)
				((r % 2)) || paths=(vhost-blk io_uring)
				for p in "${paths[@]}"; do
					run "$backend" "$dev" "$qd" "$queues" "$workers" $r "$p"
				done
			done
		done
	done
done
