#!/usr/bin/env bash
# The guest side of the crash suite (tests/host/crash.sh): a workload on a
# disk whose every write QEMU logs (vm/vm.sh --disk file:...,logwrites),
# leaving in the disk itself the claims tests/tools/replay_log.py checks.
#
#   crash-workload.sh SERIAL FILES [STEP...]
#
# Makes an ext4 file system on the first FS_MB MiB of the disk with serial
# SERIAL, mounts it and writes FILES files of 4-200 KiB of random data.
# Each file is written, fsync'd, and every fourth one is then replaced by
# a new version written to a temporary name, fsync'd and renamed over it
# (the directory fsync'd after). Each time an fsync has returned, a claim
# goes to a 4 KiB block past the file system, with O_DIRECT and no flush
# of its own: "VSTORMARK1 " and {"file": NAME, "sha256": HEX}, and once
# at the start {"begin": true}.
#
# A STEP N:CMD runs shell command CMD (with $DEV set to the disk's name)
# after file N: tests use it to change the write cache mode or the poll
# queues mid-workload. Exits non-zero if anything fails.
set -euo pipefail
FS_MB=48
serial=$1 files=$2
shift 2
declare -A steps
for s in "$@"; do
	steps[${s%%:*}]=${s#*:}
done
DEV=""
for b in /sys/block/vd*; do
	[[ $(cat "$b/serial" 2>/dev/null) == "$serial" ]] && DEV=${b##*/}
done
[[ -n $DEV ]] || { echo "no disk with serial $serial"; exit 1; }
export DEV
mnt=/tmp/crash-mnt
claim=0

# mark JSON: the next claim block.
mark() {
	printf 'VSTORMARK1 %s\n' "$1" |
		dd of="/dev/$DEV" bs=4096 seek=$((FS_MB * 256 + claim)) count=1 \
			oflag=direct conv=sync,notrunc status=none
	claim=$((claim + 1))
}

# fsync_path PATH: fsync a file or directory (coreutils sync does fsync).
fsync_path() { sync "$1"; }

mkfs.ext4 -q -F -b 4096 "/dev/$DEV" "${FS_MB}M"
mkdir -p "$mnt"
mount -t ext4 "/dev/$DEV" "$mnt"
fsync_path "$mnt"
mark '{"begin": true}'
for ((i = 1; i <= files; i++)); do
	f=f$i
	head -c $(((RANDOM % 50 + 1) * 4096)) /dev/urandom >"$mnt/$f"
	fsync_path "$mnt/$f"
	fsync_path "$mnt"
	mark "{\"file\": \"$f\", \"sha256\": \"$(sha256sum <"$mnt/$f" | cut -d' ' -f1)\"}"
	if ((i % 4 == 0)); then
		head -c $(((RANDOM % 50 + 1) * 4096)) /dev/urandom >"$mnt/.$f.new"
		fsync_path "$mnt/.$f.new"
		mv "$mnt/.$f.new" "$mnt/$f"
		fsync_path "$mnt"
		mark "{\"file\": \"$f\", \"sha256\": \"$(sha256sum <"$mnt/$f" | cut -d' ' -f1)\"}"
	fi
	if [[ -n ${steps[$i]:-} ]]; then
		echo "crash-workload: after file $i: ${steps[$i]}"
		eval "${steps[$i]}"
	fi
done
umount "$mnt"
echo "crash-workload: $files files, $claim claims on /dev/$DEV"
