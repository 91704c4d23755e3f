#!/usr/bin/env bash
# Runs inside the guest (see bench/repoll.sh): how long a change of
# /sys/block/vdX/num_poll_queues takes, idle and under I/O, and how long I/O
# pauses during one.
#   repoll.sh CHANGES
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/tests/guest/lib.sh"
changes=${1:-10}
d=$(disk_by_serial vstor0)
attr=/sys/block/$d/num_poll_queues
nq=$(hctx_types "$d" | wc -w)

# time_changes N OUT: alternate 1 and 0 N times, 0.5 s apart; one duration
# (us) per line. Timed around the write(2) alone, in one process.
time_changes() {
	/usr/bin/python3 - "$attr" "$1" "$2" <<'PY'
import os, sys, time
attr, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(out, "w") as f:
    for i in range(n):
        fd = os.open(attr, os.O_WRONLY)
        t0 = time.perf_counter()
        os.write(fd, str((i + 1) % 2).encode())
        t1 = time.perf_counter()
        os.close(fd)
        print(int((t1 - t0) * 1e6), file=f)
        time.sleep(0.5)
PY
}

# A plain QD1 random-read job for the whole measurement.
load() {
	fio_json "$1" --name=l --filename="/dev/$d" --ioengine=io_uring --direct=1 \
		--rw=randread --bs=4k --iodepth=1 --time_based --runtime="$2" \
		--size=1G --lat_percentiles=1
}

echo "disk $d: $nq queues, $(nproc) vCPUs; $changes changes between 0 and 1 poll queues"
time_changes "$changes" /tmp/idle.us
load /tmp/base.json $((changes / 2 + 4))
load /tmp/flip.json $((changes / 2 + 4)) &
pid=$!
sleep 2
time_changes "$changes" /tmp/load.us
wait $pid

/usr/bin/python3 - /tmp/idle.us /tmp/load.us /tmp/base.json /tmp/flip.json <<'PY'
import json, statistics, sys
def us(path):
    return sorted(int(x) for x in open(path))
def lat(path):
    j = json.load(open(path))["jobs"][0]["read"]
    p = j["lat_ns"]["percentile"]
    return j["iops"], j["lat_ns"]["mean"] / 1e3, p["99.900000"] / 1e3, j["lat_ns"]["max"] / 1e3
print("%-28s %10s %10s %10s" % ("change of num_poll_queues", "min ms", "median ms", "max ms"))
for name, path in (("idle disk", sys.argv[1]), ("under QD1 random reads", sys.argv[2])):
    v = us(path)
    print("%-28s %10.1f %10.1f %10.1f" % (name, v[0] / 1e3, statistics.median(v) / 1e3, v[-1] / 1e3))
print()
print("%-28s %10s %10s %10s %10s" % ("QD1 random reads", "IOPS", "mean us", "p99.9 us", "max ms"))
for name, path in (("no changes", sys.argv[3]), ("changes every 0.5 s", sys.argv[4])):
    iops, mean, p999, mx = lat(path)
    print("%-28s %10.0f %10.1f %10.1f %10.1f" % (name, iops, mean, p999, mx / 1e3))
print("\nThe longest read during the changes waited for one change: its latency is"
      "\nthe I/O pause a change causes.")
PY
