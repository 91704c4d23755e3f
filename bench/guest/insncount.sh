#!/usr/bin/env bash
# Runs inside the guest (see bench/insncount.sh), booted with or without the
# insncount plugin: a timed user loop, then a QD1 random-read job with a
# counted window in its middle. Writes one CSV row to insncount-row.csv.
#   insncount.sh on|off REP RUNTIME
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/bench/guest/lib.sh"
mode=$1 rep=$2 runtime=$3
MARK=$TOOLS/insnmark
JSON=$OUT/insncount.json
LOOP=250000000 # rounds of 4 instructions
d=$(disk_by_serial vstor0)

# The same steps with and without the plugin: the markers are no-ops then.
t0=$EPOCHREALTIME
taskset -c 1 "$MARK" --loop "$LOOP" 1 2
t1=$EPOCHREALTIME
loop_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')

if [[ $mode == on ]]; then
	/usr/bin/python3 "$TOP/tools/insncount/insnranges.py" --obj "$(dirname "$MODROOT")" \
		"$OUT/insncount.ranges" block=dir:block io_uring=dir:io_uring \
		virtio=dir:drivers/virtio virtio_blk=mod:virtio_blk reqs=entry:blk_mq_start_request
	"$MARK" --reload
fi
taskset -c 1 fio --output-format=json --output=/tmp/f.json --name=r --filename="/dev/$d" \
	--ioengine=io_uring --direct=1 --rw=randread --bs=4k --iodepth=1 --size=256M \
	--time_based --runtime="$runtime" --disk_util=0 &
pid=$!
sleep 3
# One process for both markers: no program starts inside the window.
taskset -c 0 "$MARK" --seq 3 $(((runtime - 6) * 1000)) 4
wait "$pid"
iops=$(fio_field /tmp/f.json read 'round(j["iops"])')
ios=
stack="" kernel="" user="" loop_insns=""
if [[ $mode == on ]]; then
	declare -A c
	while IFS='=' read -r k v; do
		c[$k]=$v
	done < <(/usr/bin/python3 "$TOP/tools/insncount/insnstat.py" "$JSON" 3 4)
	# The requests started between the markers (the disk's stat, read by
	# processes around them, would take in more).
	ios=${c[entry.reqs]}
	stack=$(((${c[range.block]} + ${c[range.io_uring]} + ${c[range.virtio]} + ${c[range.virtio_blk]}) / ios))
	kernel=$((c[kernel] / ios)) user=$((c[user] / ios))
	loop_insns=$(/usr/bin/python3 "$TOP/tools/insncount/insnstat.py" "$JSON" 1 2 | sed -n 's/^user.1=//p')
fi
csv_row insncount-row.csv "$rep,$mode,$loop_insns,$loop_s,$iops,$ios,$stack,$kernel,$user"
