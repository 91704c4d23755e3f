#!/usr/bin/env bash
# Runs inside the guest (see bench/vhost.sh): for each backend, QD and
# queue/worker layout, 4k random reads through io_uring (fio) and through
# vhost-blk (vhost_blk_test --mode bench), one after the other, alternating
# their order between repetitions. Prints one line per run, then the table.
#   vhost.sh RUNTIME REPS QD...
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/tests/guest/lib.sh"
runtime=${1:-5} reps=${2:-2}
shift 2 || true
read -ra qds <<<"${*:-1 32}"
VBT=$TOOLS/vhost_blk_test
res=/tmp/vhost-results.txt
: >"$res"

# run BACKEND QD QUEUES WORKERS PATH
run() {
	local backend=$1 qd=$2 queues=$3 workers=$4 path=$5 dev=/dev/$1 out
	if [[ $path == io_uring ]]; then
		fio_json /tmp/b.json --name=b --filename="$dev" --ioengine=io_uring \
			--direct=1 --rw=randread --bs=4k --iodepth="$qd" \
			--numjobs="$queues" --group_reporting --time_based \
			--runtime="$runtime" --ramp_time=1 --size=256M \
			--lat_percentiles=1
		out=$(fio_field /tmp/b.json read \
			'"%d %.1f %.1f" % (j["iops"], j["lat_ns"]["mean"] / 1000, j["lat_ns"]["percentile"]["99.000000"] / 1000)')
	else
		out=$("$VBT" --backend "$dev" --mode bench --rw randread --bs 4096 \
			--qd "$qd" --queues "$queues" --workers "$workers" \
			--time "$runtime" | awk '/^vhost-blk bench:/ {
				for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
				printf "%d %.1f %.1f\n", v["iops"], v["lat_avg_us"], v["lat_p99_us"] }')
		[[ -n $out ]] || { echo "vhost_blk_test bench failed"; return 1; }
	fi
	echo "$backend $qd $queues $workers $path $out" | tee -a "$res"
}

echo "== $(nproc) vCPUs; backends: null_blk /dev/nullb0 ($(cat /sys/block/nullb0/queue/nr_requests) tags), brd /dev/ram0 ($(($(cat /sys/block/ram0/size) / 2048)) MiB)"
echo "== fio $(fio --version) (io_uring, O_DIRECT); vhost_blk_test bench; runtime ${runtime}s, $reps repetitions"
echo

for backend in nullb0 ram0; do
	for qd in "${qds[@]}"; do
		for layout in "1 1" "2 1" "2 2"; do
			read -r queues workers <<<"$layout"
			for ((r = 0; r < reps; r++)); do
				paths=(io_uring vhost-blk)
				((r % 2)) && paths=(vhost-blk io_uring)
				for p in "${paths[@]}"; do
					run $backend "$qd" "$queues" "$workers" "$p"
				done
			done
		done
	done
done
echo
/usr/bin/python3 "$TOP/bench/vhost_table.py" "$res"
