#!/usr/bin/env bash
# Runs in the guest (see bench/virtiofs.sh): mounts the virtio-fs devices and
# runs each workload on each, rotating the order of the devices every
# repetition. One row per fio run in virtiofs.csv; in a boot with the
# insncount plugin, one row per counted window in virtiofs-insns.csv
# instead (bench/guest/lib.sh ic_window): instructions per FUSE request
# (fuse_request_end), the stack being FUSE with virtio-fs, and virtio.
#   virtiofs.sh RUNTIME REPS ENGINE IODEPTH TAG...
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/bench/guest/lib.sh"
runtime=$1 reps=$2 engine=$3 iodepth=$4
shift 4
tags=("$@")
n=$(nproc)
for tag in "${tags[@]}"; do
	vfs_mount "$tag" "/tmp/vb/$tag"
	# Lay the files out once: the read jobs find them in place.
	fio_json /tmp/lay.json --name=vb --directory="/tmp/vb/$tag" --numjobs="$n" \
		--rw=write --bs=1M --size=64M --direct=1 --ioengine=psync
done
info "== $n vCPUs, fio $(fio --version) $engine iodepth $iodepth, numjobs $n, O_DIRECT, ${runtime}s + 1s ramp, $reps repetitions"

common=(--directory=DIR --numjobs="$n" --cpus_allowed="0-$((n - 1))"
	--cpus_allowed_policy=split --size=64M --direct=1 --ioengine="$engine"
	--iodepth="$iodepth" --time_based --runtime="$runtime" --ramp_time=1
	--group_reporting)
if ic_on; then
	ic_setup_fuse
	csv_open virtiofs-insns.csv "rw,bs,device,rep,$IC_HDR"
else
	csv_open virtiofs.csv rw,bs,device,rep,bw_mib_s,iops,lat_mean_us,fio_json
fi
for ((r = 0; r < reps; r++)); do
	order=("${tags[@]:r % ${#tags[@]}}" "${tags[@]:0:r % ${#tags[@]}}")
	for w in "read 256k" "write 256k" "randread 4k" "randwrite 4k"; do
		read -r rw bs <<<"$w"
		dir="read"
		[[ $rw == *write ]] && dir="write"
		for tag in "${order[@]}"; do
			if ic_on; then
				ic_window freqs fio --name=vb "${common[@]/DIR//tmp/vb/$tag}" \
					--rw="$rw" --bs="$bs" --runtime=600
				csv_row virtiofs-insns.csv "$rw,$bs,$tag,$((r + 1)),$IC_ROW"
				continue
			fi
			fio_json /tmp/b.json --name=vb "${common[@]/DIR//tmp/vb/$tag}" \
				--rw="$rw" --bs="$bs"
			# Assigned first: a failing substitution inside csv_row's argument
			# would not stop the script.
			vals=$(fio_field /tmp/b.json $dir \
				'"%.1f,%d,%.1f" % (j["bw_bytes"] / 1048576, j["iops"], j["lat_ns"]["mean"] / 1000)')
			kept=$(keep_file /tmp/b.json "fio/$rw-$bs-$tag-$((r + 1)).json")
			csv_row virtiofs.csv "$rw,$bs,$tag,$((r + 1)),$vals,$kept"
		done
	done
done
for tag in "${tags[@]}"; do
	umount "/tmp/vb/$tag"
done
