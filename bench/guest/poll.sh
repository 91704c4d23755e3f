#!/usr/bin/env bash
# Runs inside the guest (see bench/poll.sh): queue layout of each virtio-blk
# disk, then fio io_uring 4k random reads with and without hipri on the same
# disk, alternating, with the interrupts each run took. One row per fio run
# in poll.csv; in a boot with the insncount plugin, one row per counted
# window instead, in poll-insns.csv (bench/guest/lib.sh ic_window).
#   poll.sh RUNTIME REPS "QD..." NAME=SERIAL...
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/bench/guest/lib.sh"
runtime=$1 reps=$2
read -ra qds <<<"$3"
shift 3

info "== queue layout"
for s in /sys/block/vd*; do
	d=${s##*/} v=$(virtio_dev "${s##*/}")
	info "$(printf '%s (%s, serial %s): hctx types [%s], io_poll=%s, IRQ lines: %s' \
		"$d" "$v" "$(cat "$s/serial")" "$(hctx_types "$d")" \
		"$(cat "$s/queue/io_poll")" \
		"$(awk -v re="^$v-" '$NF ~ re { printf "%s ", $NF }' /proc/interrupts)")"
done
info "num_poll_queues=$(cat /sys/module/virtio_blk/parameters/num_poll_queues), $(nproc) vCPUs, fio $(fio --version)"
echo

if ic_on; then
	ic_setup
	csv_open poll-insns.csv "backend,disk,qd,mode,rep,$IC_HDR"
else
	csv_open poll.csv backend,disk,qd,mode,rep,iops,lat_mean_us,lat_p99_us,ios,irqs,fio_json
fi
for pair in "$@"; do
	backend=${pair%%=*}
	d=$(disk_by_serial "${pair#*=}") || { echo "no disk with serial ${pair#*=}"; exit 1; }
	v=$(virtio_dev "$d")
	for qd in "${qds[@]}"; do
		for ((r = 1; r <= reps; r++)); do
			for hipri in 0 1; do
				mode=plain
				((hipri)) && mode=hipri
				if ic_on; then
					ic_window reqs fio --name=b --filename="/dev/$d" \
						--ioengine=io_uring --direct=1 --rw=randread --bs=4k \
						--iodepth="$qd" --hipri=$hipri --time_based --runtime=600 \
						--size=1G
					csv_row poll-insns.csv "$backend,$d,$qd,$mode,$r,$IC_ROW"
					continue
				fi
				before=$(irq_sum "^$v-req")
				fio_json /tmp/b.json --name=b --filename="/dev/$d" \
					--ioengine=io_uring --direct=1 --rw=randread --bs=4k \
					--iodepth="$qd" --hipri=$hipri --time_based \
					--runtime="$runtime" --ramp_time=1 --size=1G \
					--lat_percentiles=1
				after=$(irq_sum "^$v-req")
				# Assigned first: a failing substitution inside csv_row's argument
				# would not stop the script.
				vals=$(fio_field /tmp/b.json read \
					'"%d,%.1f,%.1f,%d" % (j["iops"], j["lat_ns"]["mean"] / 1000, j["lat_ns"].get("percentile", {}).get("99.000000", float("nan")) / 1000, j["total_ios"])')
				kept=$(keep_file /tmp/b.json "fio/$backend-qd$qd-$mode-$r.json")
				csv_row poll.csv "$backend,$d,$qd,$mode,$r,$vals,$((after - before)),$kept"
			done
		done
	done
done
