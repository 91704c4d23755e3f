#!/usr/bin/env bash
# Runs inside the guest (see bench/pt.sh): for each backend, QD and mode
# (interrupt-driven, polled), fio 4k random reads through the four paths
# one after the other, alternating their order between repetitions:
# virtio-blk block device, virtio-blk passthrough, NVMe block device, NVMe
# generic device. Prints one line per run, then the table.
#   pt.sh RUNTIME REPS QD...
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/tests/guest/lib.sh"
runtime=${1:-5} reps=${2:-2}
shift 2 || true
read -ra qds <<<"${*:-1 8}"
FIO_BIN=$TOP/build/fio/fio
export FIO_BIN
res=/tmp/pt-results.txt
: >"$res"

# nvme_by_serial SERIAL: the NVMe namespace (nvme0n1) with this serial.
nvme_by_serial() {
	local n
	for n in /sys/block/nvme*n*; do
		[[ $(tr -d ' ' <"$n/device/serial") == "$1" ]] && { basename "$n"; return 0; }
	done
	return 1
}

# run BACKEND QD POLL PATH FILE ARGS...
run() {
	local backend=$1 qd=$2 poll=$3 path=$4 file=$5
	shift 5
	# Engine options (hipri) come after the engine.
	fio_json /tmp/b.json --name=b --filename="$file" "$@" --rw=randread \
		--bs=4k --iodepth="$qd" --hipri="$poll" --time_based \
		--runtime="$runtime" --ramp_time=1 --size=1G --lat_percentiles=1
	echo "$backend $qd $poll $path $(fio_field /tmp/b.json read \
		'"%d %.1f %.1f" % (j["iops"], j["lat_ns"]["mean"] / 1000, j["lat_ns"]["percentile"]["99.000000"] / 1000)')" |
		tee -a "$res"
}

echo "== devices"
for pair in "file vstor0 vstor1" "null-co vstor2 vstor3"; do
	read -r backend vs ns <<<"$pair"
	d=$(disk_by_serial "$vs") n=$(nvme_by_serial "$ns")
	echo "$backend: virtio-blk /dev/$d + /dev/vblk/$d (poll queues $(cat "/sys/block/$d/num_poll_queues")), NVMe /dev/$n + /dev/ng${n#nvme} (io_poll $(cat "/sys/block/$n/queue/io_poll"))"
done
echo "$(nproc) vCPUs, fio $("$FIO_BIN" --version), runtime ${runtime}s + 1s ramp, $reps repetitions"
echo

for pair in "file vstor0 vstor1" "null-co vstor2 vstor3"; do
	read -r backend vs ns <<<"$pair"
	d=$(disk_by_serial "$vs") n=$(nvme_by_serial "$ns")
	for qd in "${qds[@]}"; do
		for poll in 0 1; do
			for ((r = 0; r < reps; r++)); do
				paths=(vblk-bdev vblk-pt nvme-bdev nvme-ng)
				((r % 2)) && paths=(nvme-ng nvme-bdev vblk-pt vblk-bdev)
				for p in "${paths[@]}"; do
					case $p in
					vblk-bdev) run "$backend" "$qd" $poll $p "/dev/$d" --ioengine=io_uring --direct=1 ;;
					vblk-pt) run "$backend" "$qd" $poll $p "/dev/vblk/$d" --ioengine=io_uring_cmd --cmd_type=vblk ;;
					nvme-bdev) run "$backend" "$qd" $poll $p "/dev/$n" --ioengine=io_uring --direct=1 ;;
					nvme-ng) run "$backend" "$qd" $poll $p "/dev/ng${n#nvme}" --ioengine=io_uring_cmd --cmd_type=nvme ;;
					esac
				done
			done
		done
	done
done
echo
/usr/bin/python3 "$TOP/bench/pt_table.py" "$res"
