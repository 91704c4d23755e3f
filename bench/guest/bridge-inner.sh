#!/usr/bin/env bash
# Runs in the second-level guest (see bench/bridge.sh): fio on each of the
# disks in turn, the order rotating between repetitions, so drift in the
# shared machine falls on all of them alike. One row per fio run in
# bridge.csv, the fio output in fio/.
#   bridge-inner.sh RUNTIME REPS "QD..."
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/bench/guest/lib.sh"
runtime=$1 reps=$2
read -ra qds <<<"$3"
# The disks by serial: bridge, qemu and qsd always (qemu-storage-daemon's
# is the one with another serial: none under QEMU 7.2, one of its own under
# 10.0); bridge-w1, iot1 and iotN when bench/guest/bridge.sh added them.
declare -A disk
for b in /sys/block/vd*; do
	k=$(cat "$b/serial")
	case $k in bridge | bridge-w1 | qemu | iot[0-9]*) ;; *) k=qsd ;; esac
	disk[$k]=/dev/${b##*/}
done
order=()
for k in bridge bridge-w1 qemu "iot1" "iot$(nproc)" qsd; do
	[[ -n ${disk[$k]:-} ]] || continue
	[[ " ${order[*]} " == *" $k "* ]] && continue
	order+=("$k")
	info "$k: ${disk[$k]} ($(find "/sys/block/${disk[$k]#/dev/}/mq" -mindepth 1 -maxdepth 1 | wc -l) queues)"
done
for k in bridge qemu qsd; do
	[[ -n ${disk[$k]:-} ]] || { echo "no $k disk"; exit 1; }
done
((${#order[@]} == ${#disk[@]})) || { echo "unexpected disks: ${!disk[*]}"; exit 1; }
ncpu=$(nproc)

# run RW QD DISK REP: 4k, one job per vCPU sharing the QD, pinned one per CPU.
run() {
	local rw=$1 qd=$2 k=$3 rep=$4 jobs=$ncpu dir="read"
	((qd < ncpu)) && jobs=$qd
	[[ $rw == randwrite ]] && dir="write"
	fio_json /tmp/f.json --name=b --filename="${disk[$k]}" --ioengine=io_uring \
		--direct=1 --rw="$rw" --bs=4k --iodepth=$((qd / jobs)) --numjobs="$jobs" \
		--cpus_allowed=0-$((ncpu - 1)) --cpus_allowed_policy=split \
		--group_reporting --time_based --runtime="$runtime" --ramp_time=1 \
		--size=256M --lat_percentiles=1
	# Assigned first: a failing substitution inside csv_row's argument
	# would not stop the script.
	vals=$(fio_field /tmp/f.json $dir \
		'"%d,%.1f,%.1f" % (j["iops"], j["lat_ns"]["mean"] / 1000, j["lat_ns"].get("percentile", {}).get("99.000000", float("nan")) / 1000)')
	kept=$(keep_file /tmp/f.json "fio/$rw-qd$qd-$k-$rep.json")
	csv_row bridge.csv "$rw,$qd,$k,$rep,$vals,$kept"
}

csv_open bridge.csv rw,qd,disk,rep,iops,lat_mean_us,lat_p99_us,fio_json
for ((r = 0; r < reps; r++)); do
	for rw in randread randwrite; do
		for qd in "${qds[@]}"; do
			for k in "${order[@]}"; do
				run "$rw" "$qd" "$k" $((r + 1))
			done
		done
	done
	order=("${order[@]:1}" "${order[0]}")
done
