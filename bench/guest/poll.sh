#!/usr/bin/env bash
# Runs inside the guest (see bench/poll.sh): queue layout of each virtio-blk
# disk, then fio io_uring 4k random reads with and without hipri on the same
# disk, alternating, with the interrupts each run took.
#   poll.sh RUNTIME REPS QD...
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/tests/guest/lib.sh"
runtime=${1:-8} reps=${2:-2}
shift 2 || true
qds=("${@:-1 16}")
read -ra qds <<<"${qds[*]}"
res=/tmp/poll-results.txt
: >"$res"

echo "== queue layout"
for s in /sys/block/vd*; do
	d=${s##*/} v=$(virtio_dev "${s##*/}")
	printf '%s (%s, serial %s): hctx types [%s], io_poll=%s, IRQ lines: %s\n' \
		"$d" "$v" "$(cat "$s/serial")" "$(hctx_types "$d")" \
		"$(cat "$s/queue/io_poll")" \
		"$(awk -v re="^$v-" '$NF ~ re { printf "%s ", $NF }' /proc/interrupts)"
done
echo "num_poll_queues=$(cat /sys/module/virtio_blk/parameters/num_poll_queues), $(nproc) vCPUs"
echo

for s in /sys/block/vd*; do
	d=${s##*/} v=$(virtio_dev "$d")
	backend=$(cat "$s/serial")
	for qd in "${qds[@]}"; do
		for ((r = 0; r < reps; r++)); do
			for hipri in 0 1; do
				before=$(irq_sum "^$v-req")
				fio_json /tmp/b.json --name=b --filename="/dev/$d" \
					--ioengine=io_uring --direct=1 --rw=randread --bs=4k \
					--iodepth="$qd" --hipri=$hipri --time_based \
					--runtime="$runtime" --ramp_time=1 --size=1G \
					--lat_percentiles=1
				after=$(irq_sum "^$v-req")
				echo "$backend $qd $hipri $(fio_field /tmp/b.json read \
					'"%d %.1f %.1f %d" % (j["iops"], j["lat_ns"]["mean"] / 1000, j["lat_ns"]["percentile"]["99.000000"] / 1000, j["total_ios"])') $((after - before))" >>"$res"
			done
		done
	done
done

/usr/bin/python3 "$TOP/bench/poll_table.py" "$res"
