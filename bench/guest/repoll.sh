#!/usr/bin/env bash
# Runs inside the guest (see bench/repoll.sh): how long a change of
# /sys/block/vdX/num_poll_queues takes, idle and under I/O, and how long I/O
# pauses during one. Writes repoll-changes.csv (one row per change) and
# repoll-io.csv (the QD1 read job without and with changes).
#   repoll.sh CHANGES
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/bench/guest/lib.sh"
changes=${1:-10}
d=$(disk_by_serial vstor0)
attr=/sys/block/$d/num_poll_queues
nq=$(hctx_types "$d" | wc -w)

# time_changes N PHASE: alternate 1 and 0 N times, 0.5 s apart, one row per
# change. Timed around the write(2) alone, in one process.
time_changes() {
	/usr/bin/python3 - "$attr" "$1" "$2" "$OUT/repoll-changes.csv" <<'PY'
import os, sys, time
attr, n, phase, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
with open(out, "a") as f:
    for i in range(n):
        to = (i + 1) % 2
        fd = os.open(attr, os.O_WRONLY)
        t0 = time.perf_counter()
        os.write(fd, str(to).encode())
        t1 = time.perf_counter()
        os.close(fd)
        row = "%s,%d,%d,%d" % (phase, i + 1, to, int((t1 - t0) * 1e6))
        print(row, file=f, flush=True)
        print(row, flush=True)
        time.sleep(0.5)
PY
}

# A plain QD1 random-read job for the whole measurement.
load() {
	fio_json "$1" --name=l --filename="/dev/$d" --ioengine=io_uring --direct=1 \
		--rw=randread --bs=4k --iodepth=1 --time_based --runtime="$2" \
		--size=1G --lat_percentiles=1
}

info "disk $d: $nq queues, $(nproc) vCPUs; $changes changes between 0 and 1 poll queues"
csv_open repoll-changes.csv phase,change,to_poll_queues,duration_us
time_changes "$changes" idle
load /tmp/base.json $((changes / 2 + 4))
load /tmp/flip.json $((changes / 2 + 4)) &
pid=$!
sleep 2
time_changes "$changes" under-io
wait $pid

csv_open repoll-io.csv load,iops,lat_mean_us,lat_p999_us,lat_max_us,fio_json
for p in "no-changes base" "changes flip"; do
	read -r name f <<<"$p"
	# Assigned first: a failing substitution inside csv_row's argument
	# would not stop the script.
	vals=$(fio_field "/tmp/$f.json" read \
		'"%.0f,%.1f,%.1f,%.1f" % (j["iops"], j["lat_ns"]["mean"] / 1e3, j["lat_ns"].get("percentile", {}).get("99.900000", float("nan")) / 1e3, j["lat_ns"]["max"] / 1e3)')
	kept=$(keep_file "/tmp/$f.json" "fio/$name.json")
	csv_row repoll-io.csv "$name,$vals,$kept"
done
