#!/usr/bin/env bash
# The guest side of the crash suite (tests/host/crash.sh): workloads on
# disks whose every write QEMU logs (vm/vm.sh --disk file:...,logwrites),
# leaving in each disk the claims tests/tools/replay_log.py checks.
#
#   crash-workload.sh JOBS
#
# JOBS is a bash file of lines "job SERIAL FILES [STEP...]", run in order.
# A job makes an ext4 file system on the first FS_MB MiB of the disk with
# serial SERIAL, mounts it and writes FILES files of 4-200 KiB of random
# data. Each file is written and fsync'd (and its directory), and every
# fourth one is then replaced by a new version written to a temporary
# name, fsync'd and renamed over it (the directory fsync'd after). Each
# time those fsyncs have returned, a claim goes to the next 4 KiB block
# past the file system, with O_DIRECT and no flush of its own: "VSTORMARK1 "
# and {"file": NAME, "sha256": HEX}; and once at the start, after the file
# system is made and mounted, {"begin": true}.
#
# A STEP N:CMD runs shell command CMD (with $DEV set to the disk's name)
# after file N: tests use it to change the write cache mode or the poll
# queues mid-workload. Exits non-zero if anything fails.
set -euo pipefail
FS_MB=48

# job SERIAL FILES [STEP...]
job() {
	local serial=$1 files=$2 b s i f mnt=/tmp/crash-mnt claim=0
	local -A steps=()
	shift 2
	for s in "$@"; do
		steps[${s%%:*}]=${s#*:}
	done
	DEV=""
	for b in /sys/block/vd*; do
		[[ $(cat "$b/serial" 2>/dev/null) == "$serial" ]] && DEV=${b##*/}
	done
	[[ -n $DEV ]] || { echo "no disk with serial $serial"; return 1; }
	export DEV

	# mark JSON: the next claim block.
	mark() {
		printf 'VSTORMARK1 %s\n' "$1" |
			dd of="/dev/$DEV" bs=4096 seek=$((FS_MB * 256 + claim)) count=1 \
				oflag=direct conv=sync,notrunc status=none
		claim=$((claim + 1))
	}
	# claim_file NAME: its content is durable now.
	claim_file() {
		mark "{\"file\": \"$1\", \"sha256\": \"$(sha256sum <"$mnt/$1" | cut -d' ' -f1)\"}"
	}

	mkfs.ext4 -q -F -b 4096 "/dev/$DEV" "${FS_MB}M"
	mkdir -p "$mnt"
	mount -t ext4 "/dev/$DEV" "$mnt"
	sync "$mnt"	# coreutils sync with a path: fsync
	mark '{"begin": true}'
	for ((i = 1; i <= files; i++)); do
		f=f$i
		head -c $(((RANDOM % 50 + 1) * 4096)) /dev/urandom >"$mnt/$f"
		sync "$mnt/$f"
		sync "$mnt"
		claim_file "$f"
		if ((i % 4 == 0)); then
			head -c $(((RANDOM % 50 + 1) * 4096)) /dev/urandom >"$mnt/.$f.new"
			sync "$mnt/.$f.new"
			mv "$mnt/.$f.new" "$mnt/$f"
			sync "$mnt"
			claim_file "$f"
		fi
		if [[ -n ${steps[$i]:-} ]]; then
			echo "crash-workload: $serial: after file $i: ${steps[$i]}"
			eval "${steps[$i]}"
		fi
	done
	umount "$mnt"
	echo "crash-workload: $serial (/dev/$DEV): $files files, $claim claims"
}

# shellcheck source=/dev/null
. "$1"
