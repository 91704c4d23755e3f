#!/usr/bin/env bash
# Runs inside the guest (see bench/pt.sh): for each backend, QD and mode
# (interrupt-driven, polled), fio 4k random reads through the four paths
# one after the other, alternating their order between repetitions:
# virtio-blk block device, virtio-blk passthrough, NVMe block device, NVMe
# generic device. One row per fio run in pt.csv; in a boot with the
# insncount plugin, one row per counted window in pt-insns.csv instead
# (bench/guest/lib.sh ic_window).
#   pt.sh RUNTIME REPS "QD..."
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/bench/guest/lib.sh"
runtime=$1 reps=$2
read -ra qds <<<"$3"
FIO_BIN=$TOP/build/fio/fio
export FIO_BIN

# run BACKEND QD MODE REP PATH FILE ARGS...
run() {
	local backend=$1 qd=$2 mode=$3 rep=$4 path=$5 file=$6 poll=0
	shift 6
	[[ $mode == poll ]] && poll=1
	if ic_on; then
		ic_window reqs "$FIO_BIN" --name=b --filename="$file" "$@" --rw=randread \
			--bs=4k --iodepth="$qd" --hipri="$poll" --time_based --runtime=600 --size=1G
		csv_row pt-insns.csv "$backend,$qd,$mode,$rep,$path,$file,$IC_ROW"
		return
	fi
	# Engine options (hipri) come after the engine.
	fio_json /tmp/b.json --name=b --filename="$file" "$@" --rw=randread \
		--bs=4k --iodepth="$qd" --hipri="$poll" --time_based \
		--runtime="$runtime" --ramp_time=1 --size=1G --lat_percentiles=1
	# Assigned first: a failing substitution inside csv_row's argument
	# would not stop the script.
	vals=$(fio_field /tmp/b.json read \
		'"%d,%.1f,%.1f" % (j["iops"], j["lat_ns"]["mean"] / 1000, j["lat_ns"].get("percentile", {}).get("99.000000", float("nan")) / 1000)')
	kept=$(keep_file /tmp/b.json "fio/$backend-qd$qd-$mode-$path-$rep.json")
	csv_row pt.csv "$backend,$qd,$mode,$rep,$path,$file,$vals,$kept"
}

info "== devices"
for pair in "file vstor0 vstor1" "null-co vstor2 vstor3"; do
	read -r backend vs ns <<<"$pair"
	d=$(disk_by_serial "$vs") n=$(nvme_by_serial "$ns")
	info "$backend: virtio-blk /dev/$d + /dev/vblk/$d (poll queues $(cat "/sys/block/$d/num_poll_queues")), NVMe /dev/$n + /dev/ng${n#nvme} (io_poll $(cat "/sys/block/$n/queue/io_poll"))"
done
info "$(nproc) vCPUs, fio $("$FIO_BIN" --version), runtime ${runtime}s + 1s ramp, $reps repetitions"
echo

if ic_on; then
	ic_setup
	csv_open pt-insns.csv "backend,qd,mode,rep,path,device,$IC_HDR"
else
	csv_open pt.csv backend,qd,mode,rep,path,device,iops,lat_mean_us,lat_p99_us,fio_json
fi
for pair in "file vstor0 vstor1" "null-co vstor2 vstor3"; do
	read -r backend vs ns <<<"$pair"
	d=$(disk_by_serial "$vs") n=$(nvme_by_serial "$ns")
	for qd in "${qds[@]}"; do
		for mode in irq poll; do
			for ((r = 1; r <= reps; r++)); do
				paths=(vblk-bdev vblk-pt nvme-bdev nvme-ng)
				((r % 2)) || paths=(nvme-ng nvme-bdev vblk-pt vblk-bdev)
				for p in "${paths[@]}"; do
					case $p in
					vblk-bdev) run "$backend" "$qd" "$mode" "$r" "$p" "/dev/$d" --ioengine=io_uring --direct=1 ;;
					vblk-pt) run "$backend" "$qd" "$mode" "$r" "$p" "/dev/vblk/$d" --ioengine=io_uring_cmd --cmd_type=vblk ;;
					nvme-bdev) run "$backend" "$qd" "$mode" "$r" "$p" "/dev/$n" --ioengine=io_uring --direct=1 ;;
					nvme-ng) run "$backend" "$qd" "$mode" "$r" "$p" "/dev/ng${n#nvme}" --ioengine=io_uring_cmd --cmd_type=nvme ;;
					esac
				done
			done
		done
	done
done
