#!/usr/bin/env bash
# Runs in the guest (see bench/vfslat.sh): mounts the virtio-fs devices and
# runs each latency-bound workload on each, the order of the devices
# rotated every repetition. One row per run in vfslat.csv, with vufsd's
# table-lock counters over the run (nan for QEMU's virtiofsd). In the
# counting boot (bench/guest/lib.sh ic_on), one row per run in
# vfslat-insns.csv instead: guest instructions per FUSE request.
#   vfslat.sh RUNTIME REPS JOBS TAG...
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/bench/guest/lib.sh"
runtime=$1 reps=$2 jobs=$3
shift 3
tags=("$@")
n=$(nproc)
FSMETA=$TOOLS/fsmeta

for tag in "${tags[@]}"; do
	vfs_mount "$tag" "/tmp/vl/$tag"
	# The read jobs' files, laid out once (on the host's disk).
	fio_json /tmp/lay.json --name=vl --directory="/tmp/vl/$tag" --numjobs="$jobs" \
		--rw=write --bs=1M --size=16M --direct=1 --ioengine=psync
done
info "== $n vCPUs, $jobs jobs per run, fio $(fio --version) psync, ${runtime}s + 1s ramp, $reps repetitions; the shares are directories on the host's disk"

# lock_counters TAG: "acquired contended wait_us" of vufsd's table mutex,
# from a stats file written after this call began ("seq N" and "lock KEY N"
# lines, see Documentation/vufsd.md); "nan nan nan" for a daemon without
# them.
lock_counters() {
	local f=/run/vstor/fs-$1.stats seq="" now i out
	[[ -e $f ]] || { echo nan nan nan; return; }
	# The daemon rewrites the file in place: a read may catch it half
	# written, so every value is checked and read again if need be.
	for ((i = 0; i < 100; i++)); do
		now=$(awk '$1 == "seq" { print $2 }' "$f")
		if [[ $now =~ ^[0-9]+$ ]]; then
			[[ -z $seq ]] && seq=$now
			((now >= seq + 2)) && break
		fi
		sleep 0.1
	done
	for ((i = 0; i < 20; i++)); do
		out=$(awk '$1 == "lock" { v[$2] = $3 }
			END { if (("acquired" in v) && ("contended" in v) && ("wait_us" in v))
				print v["acquired"], v["contended"], v["wait_us"] }' "$f")
		[[ $out =~ ^[0-9]+\ [0-9]+\ [0-9]+$ ]] && { echo "$out"; return; }
		sleep 0.1
	done
	echo "vfslat: no lock counters in $f" >&2
	return 1
}

# drop_host_cache: ask the host's helper to drop its page cache of the
# shares' files, and wait for the answer.
drop_host_cache() {
	local token=$RANDOM$RANDOM i
	rm -f /run/vstor/drop.done
	echo "$token" >/run/vstor/drop.req
	for ((i = 0; i < 600; i++)); do
		[[ $(cut -d' ' -f1 /run/vstor/drop.done 2>/dev/null) == "$token" ]] && return 0
		sleep 0.1
	done
	echo "the host did not drop its page cache within 60 s" >&2
	return 1
}

# mark_host LABEL: have the host's helper record its CPU counters (and its
# QEMU's and daemons' threads') under LABEL, and wait until it has.
mark_host() {
	local token=$RANDOM$RANDOM i
	rm -f /run/vstor/mark.done
	echo "$token $1" >/run/vstor/mark.req
	for ((i = 0; i < 300; i++)); do
		[[ $(cat /run/vstor/mark.done 2>/dev/null) == "$token" ]] && return 0
		sleep 0.02
	done
	echo "the host did not record mark $1 within 6 s" >&2
	return 1
}

common=(--numjobs="$jobs" --size=16M --ioengine=psync --time_based --runtime="$runtime"
	--ramp_time=1 --group_reporting --bs=4k)

# window W TAG REP ARGS...: in the counting boot, the run as a window of
# guest instructions per FUSE request (fuse_request_end's calls), the job
# running until stopped: a row of vfslat-insns.csv.
window() {
	local w=$1 tag=$2 rep=$3
	shift 3
	if [[ $w == meta ]]; then
		ic_window freqs "$FSMETA" "/tmp/vl/$tag" "$jobs" 3600
	else
		ic_window freqs fio --name=vl --directory="/tmp/vl/$tag" --numjobs="$jobs" --size=16M \
			--ioengine=psync --time_based --runtime=3600 --group_reporting --bs=4k "$@"
	fi
	csv_row vfslat-insns.csv "$n,$w,$tag,$rep,$IC_ROW"
}

if ic_on; then
	ic_setup_fuse
	csv_open vfslat-insns.csv "cpus,workload,device,rep,$IC_HDR"
else
	csv_open vfslat.csv cpus,workload,device,rep,iops,lat_mean_us,lock_acquired,lock_contended,lock_wait_us,output
fi
for ((r = 0; r < reps; r++)); do
	order=("${tags[@]:r % ${#tags[@]}}" "${tags[@]:0:r % ${#tags[@]}}")
	for w in syncwrite fsyncwrite coldread meta; do
		for tag in "${order[@]}"; do
			dir=/tmp/vl/$tag
			id=$w-$tag-$((r + 1))
			[[ $w == coldread ]] && drop_host_cache
			args=()
			case $w in
			syncwrite) args=(--rw=randwrite --direct=1 --sync=1) ;;
			fsyncwrite) args=(--rw=randwrite --fsync=1) ;;
			coldread) args=(--rw=randread --direct=1) ;;
			esac
			if ic_on; then
				window $w "$tag" $((r + 1)) "${args[@]}"
				continue
			fi
			read -r a0 c0 w0 <<<"$(lock_counters "$tag")"
			mark_host "start:$id"
			case $w in
			syncwrite | fsyncwrite | coldread)
				fio_json /tmp/l.json --name=vl --directory="$dir" "${common[@]}" "${args[@]}"
				dirn="write"
				[[ $w == coldread ]] && dirn="read"
				vals=$(fio_field /tmp/l.json $dirn '"%d,%.1f" % (j["iops"], j["lat_ns"]["mean"] / 1000)')
				kept=$(keep_file /tmp/l.json "fio/$id.json")
				;;
			meta)
				"$FSMETA" "$dir" "$jobs" "$runtime" >/tmp/l.txt
				vals=$(awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
					printf "%d,%.1f\n", v["ops_per_s"], v["lat_mean_us"] }' /tmp/l.txt)
				kept=$(keep_file /tmp/l.txt "fsmeta/$id.txt")
				;;
			esac
			mark_host "end:$id"
			read -r a1 c1 w1 <<<"$(lock_counters "$tag")"
			if [[ $a0 == nan ]]; then
				lk=nan,nan,nan
			else
				lk=$((a1 - a0)),$((c1 - c0)),$((w1 - w0))
			fi
			csv_row vfslat.csv "$n,$w,$tag,$((r + 1)),$vals,$lk,$kept"
		done
	done
done
for tag in "${tags[@]}"; do
	rm -rf "/tmp/vl/$tag"/*
	umount "/tmp/vl/$tag"
done
