#!/usr/bin/env bash
# Runs in the second-level guest (see bench/bridge.sh): fio on each of the
# disks in turn, the order rotating between repetitions, so drift in the
# shared machine falls on all of them alike. One row per fio run in
# bridge.csv, the fio output in fio/.
# With COUNT 1 (the counting boot), each run is instead a window of the
# first-level guest's instruction count (bench/guest/bridge.sh ic_server):
# one row per window in bridge-insns.csv.
#   bridge-inner.sh RUNTIME REPS "QD..." [COUNT]
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/bench/guest/lib.sh"
runtime=$1 reps=$2 count=${4:-0}
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

# disk_ios DISK: the reads and writes DISK has completed.
disk_ios() {
	awk '{ print $1 + $5 }' "/sys/block/${disk[$1]#/dev/}/stat"
}

# window RW QD DISK REP: the same job as run, running while the first-level
# guest counts a window of its instructions. The request and the answer
# are files of the run directory, which is 9p through the first-level
# guest's QEMU: nothing touches them while the window lasts, whose
# instructions they would add to. A job starts slowly here (seconds under
# nested TCG): the window is asked for once the disk has completed I/O in
# each of IC_WARM successive seconds.
window() {
	local rw=$1 qd=$2 k=$3 rep=$4 jobs=$ncpu tok=$RANDOM$RANDOM t ans="" i n0 n1 busy=0
	((qd < ncpu)) && jobs=$qd
	ic_start fio --name=b --filename="${disk[$k]}" --ioengine=io_uring \
		--direct=1 --rw="$rw" --bs=4k --iodepth=$((qd / jobs)) --numjobs="$jobs" \
		--cpus_allowed=0-$((ncpu - 1)) --cpus_allowed_policy=split \
		--group_reporting --time_based --runtime=3600 --size=256M
	n0=$(disk_ios "$k")
	for ((i = 0; i < 120 && busy < IC_WARM; i++)); do
		sleep 1
		n1=$(disk_ios "$k")
		if ((n1 > n0)); then busy=$((busy + 1)); else busy=0; fi
		n0=$n1
	done
	((busy >= IC_WARM)) || { ic_stop; echo "window $rw qd$qd $k: no steady I/O within 120 s"; return 1; }
	rm -f /run/vstor/ic.done
	echo "$tok" >/run/vstor/ic.req.tmp
	mv /run/vstor/ic.req.tmp /run/vstor/ic.req
	# The window starts up to a second after the request (the first-level
	# guest polls for it), and lasts IC_SECS + 1 s from its first marker.
	sleep $((IC_SECS + 3))
	for ((i = 0; i < 300; i++)); do
		if [[ -s /run/vstor/ic.done ]] && read -r t ans </run/vstor/ic.done; then
			[[ $t == "$tok" ]] && break
		fi
		ans=""
		sleep 0.5
	done
	ic_stop || return
	[[ -n $ans && $ans != fail* ]] ||
		{ echo "window $rw qd$qd $k: ${ans:-no answer from the first-level guest}"; return 1; }
	csv_row bridge-insns.csv "$rw,$qd,$k,$rep,$ans"
}

if ((count)); then
	csv_open bridge-insns.csv "rw,qd,disk,rep,$IC_HDR"
else
	csv_open bridge.csv rw,qd,disk,rep,iops,lat_mean_us,lat_p99_us,fio_json
fi
for ((r = 0; r < reps; r++)); do
	for rw in randread randwrite; do
		for qd in "${qds[@]}"; do
			for k in "${order[@]}"; do
				if ((count)); then
					window "$rw" "$qd" "$k" $((r + 1))
				else
					run "$rw" "$qd" "$k" $((r + 1))
				fi
			done
		done
	done
	order=("${order[@]:1}" "${order[0]}")
done
