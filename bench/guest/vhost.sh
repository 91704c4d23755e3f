#!/usr/bin/env bash
# Runs inside the guest (see bench/vhost.sh): for each backend, QD and
# queue/worker layout, 4k random reads through io_uring (fio) and through
# vhost-blk (vhost_blk_test --mode bench): as it is (vhost-blk), with the
# workers busy-polling for WINDOW (vhost-blk-bp) and with the driver
# polling too (vhost-blk-bp-poll), one after the other, the order rotated
# between repetitions. One row per run in vhost.csv; each run's own output
# (fio JSON, vhost_blk_test's lines) is kept beside it. In a boot with the
# insncount plugin, one row per counted window in vhost-insns.csv instead
# (bench/guest/lib.sh ic_window): the I/Os are the bios submitted (both
# paths submit one per 4 KiB read), the stack is the block layer, io_uring,
# vhost, vhost_blk and the block drivers (null_blk, brd).
#   vhost.sh RUNTIME REPS "QD..." WINDOW
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/bench/guest/lib.sh"
runtime=$1 reps=$2 window=$4
read -ra qds <<<"$3"
VBT=$TOOLS/vhost_blk_test

# run BACKEND DEV QD QUEUES WORKERS REP PATH
run() {
	local backend=$1 dev=$2 qd=$3 queues=$4 workers=$5 rep=$6 path=$7 out id extra=()
	id=$backend-qd$qd-q$queues-w$workers-$path-$rep
	case $path in
	vhost-blk-bp) extra=(--busy-poll "$window") ;;
	vhost-blk-bp-poll) extra=(--busy-poll "$window" --poll) ;;
	esac
	if ic_on; then
		if [[ $path == io_uring ]]; then
			ic_window bios fio --name=b --filename="$dev" --ioengine=io_uring --direct=1 \
				--rw=randread --bs=4k --iodepth="$qd" --numjobs="$queues" --time_based \
				--runtime=600 --size=256M
		else
			ic_window bios "$VBT" --backend "$dev" --mode bench --rw randread --bs 4096 \
				--qd "$qd" --queues "$queues" --workers "$workers" "${extra[@]}" --time 600
		fi
		csv_row vhost-insns.csv "$backend,$dev,$qd,$queues,$workers,$rep,$path,$IC_ROW"
		return
	fi
	if [[ $path == io_uring ]]; then
		fio_json /tmp/b.json --name=b --filename="$dev" --ioengine=io_uring \
			--direct=1 --rw=randread --bs=4k --iodepth="$qd" \
			--numjobs="$queues" --group_reporting --time_based \
			--runtime="$runtime" --ramp_time=1 --size=256M \
			--lat_percentiles=1
		out=$(fio_field /tmp/b.json read \
			'"%d,%.1f,%.1f" % (j["iops"], j["lat_ns"]["mean"] / 1000, j["lat_ns"].get("percentile", {}).get("99.000000", float("nan")) / 1000)')
		# CPU, kicks, poll hits and fairness are vhost-blk's figures.
		out+=,nan,nan,nan,nan,nan,$(keep_file /tmp/b.json "fio/$id.json")
	else
		"$VBT" --backend "$dev" --mode bench --rw randread --bs 4096 \
			--qd "$qd" --queues "$queues" --workers "$workers" "${extra[@]}" \
			--time "$runtime" >/tmp/vbt.txt 2>&1 || { cat /tmp/vbt.txt; return 1; }
		# Its result line, "vhost-blk bench: iops=N lat_avg_us=N ...", and
		# one "vring N requests R errors E kicks K worker W poll-hits H
		# poll-completions C" line per vring. fairness: the least served
		# vring's requests over the most served one's.
		out=$(awk '/^vhost-blk bench:/ {
			for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
			/^vring [0-9]+ requests/ { n++; req += $4; kicks += $8; hits += $12
				if (n == 1 || $4 < lo) lo = $4
				if (n == 1 || $4 > hi) hi = $4 }
			END { if (!("iops" in v) || !n || !req) exit
				printf "%d,%.1f,%.1f,%.2f,%.2f,%.3f,%.3f,%.3f\n", v["iops"], v["lat_avg_us"],
					v["lat_p99_us"], v["worker_cpu_us_per_io"], v["driver_cpu_us_per_io"],
					kicks / req, hits / req, hi ? lo / hi : 1 }' /tmp/vbt.txt)
		[[ -n $out ]] || { echo "vhost_blk_test bench printed no result line"; cat /tmp/vbt.txt; return 1; }
		out+=,$(keep_file /tmp/vbt.txt "vbt/$id.txt")
	fi
	csv_row vhost.csv "$backend,$dev,$qd,$queues,$workers,$rep,$path,$out"
}

info "== $(nproc) vCPUs; backends: null_blk /dev/nullb0 ($(cat /sys/block/nullb0/queue/nr_requests) tags), brd /dev/ram0 ($(($(cat /sys/block/ram0/size) / 2048)) MiB)"
info "== fio $(fio --version) (io_uring, O_DIRECT); vhost_blk_test bench; runtime ${runtime}s, $reps repetitions"
all=(io_uring vhost-blk)
if ((window)); then
	all+=(vhost-blk-bp vhost-blk-bp-poll)
	info "== busy polling: window $window (units of 1024 ns); vhost-blk-bp-poll: vhost_blk_test --poll (the driver spins on the used ring)"
fi
echo

if ic_on; then
	IC_STACK=(block io_uring vhost vhost_blk drivers_block)
	IC_EXTRA=(bios=entry:submit_bio)
	ic_setup
	csv_open vhost-insns.csv "backend,device,qd,queues,workers,rep,path,$IC_HDR"
else
	csv_open vhost.csv backend,device,qd,queues,workers,rep,path,iops,lat_mean_us,lat_p99_us,worker_cpu_us,driver_cpu_us,kicks_per_io,poll_hits_per_io,fairness,output
fi
for pair in "null_blk /dev/nullb0" "brd /dev/ram0"; do
	read -r backend dev <<<"$pair"
	for qd in "${qds[@]}"; do
		for layout in "1 1" "2 1" "2 2"; do
			read -r queues workers <<<"$layout"
			for ((r = 1; r <= reps; r++)); do
				# Rotated: each path runs first in some repetition.
				k=$(((r - 1) % ${#all[@]}))
				paths=("${all[@]:k}" "${all[@]:0:k}")
				for p in "${paths[@]}"; do
					run "$backend" "$dev" "$qd" "$queues" "$workers" $r "$p"
				done
			done
		done
	done
done
