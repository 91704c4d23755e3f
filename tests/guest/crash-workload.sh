#!/usr/bin/env bash
# The guest side of the crash suite (tests/host/crash.sh): workloads on
# disks whose every write QEMU logs (vm/vm.sh --disk file:...,logwrites),
# leaving in each disk the claims tests/tools/replay_log.py checks.
#
#   crash-workload.sh JOBS
#
# JOBS is a bash file of lines "job SERIAL FILES [STEP...]" and
# "rawjob SERIAL ROUNDS [STEP...]", "vhostjob SERIAL ROUNDS", "nestjob
# SERIAL SERIAL2 ROUNDS INITRAMFS" and "fsjob TAG FILES", run in order.
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
# Files are written through the page cache; with WRITER=hipri (set by a
# step 0) they are written by fio with O_DIRECT and polled io_uring
# (hipri), 4 KiB of fresh random data at a time, before the same fsyncs.
# Such a job fails on a disk without poll queues (EOPNOTSUPP), so one that
# ends well went through them.
#
# A rawjob writes no file system: round I sends passthrough WRITEs
# (io_uring uring_cmd on /dev/vblk/DEV, build/tools/vblk_pt, 8 in flight)
# of a pattern over 4-64 KiB at 64 KiB * (I / 4) in 1 MiB region I % 4
# (no byte is written twice), then a passthrough FLUSH, reads the range
# back and claims it:
# {"region": "rK.I", "offset": BYTES, "len": BYTES, "sha256": HEX}, after
# {"begin": true, "raw": true} at the start. Odd rounds use an IOPOLL ring
# (the disk needs a poll queue: a step 0), every third registered buffers.
#
# A vhostjob serves the disk through vhost-blk (build/tools/vhost-blk-bridge,
# /dev/vhost-blk: the vm.sh run loads vhost_blk) to the scripted front end
# tests/tools/vub_test.py, whose scenario crash writes ROUNDS rounds of 8
# ranges with VIRTIO_BLK_F_FLUSH and a FLUSH after each, then ROUNDS
# without it (vhost-blk then writes through), and claims each range once
# the device has made it durable, after a raw begin claim.
#
# A nestjob "nestjob SERIAL SERIAL2 ROUNDS INITRAMFS" serves the disk with
# serial SERIAL through vhost-blk (the bridge) and SERIAL2 the same way
# with --write-through (no VIRTIO_BLK_F_FLUSH) to a second-level guest:
# the host's QEMU, vhost-user-blk-pci with 2 queues each, booting our
# guest kernel from INITRAMFS (vm/initramfs.sh) in this guest. There
# tests/guest/inner-blk.sh crash writes ROUNDS rounds of 4 ranges on each
# disk, flushes the first after each round, and claims each range (raw
# claims, as a rawjob's).
#
# An fsjob mounts the virtio-fs share TAG and, until FILES files or until
# it is killed, writes a new file of 4-200 KiB of random data and appends
# a 4 KiB record to the file "journal", fsyncs both (and the directory),
# then appends claims to /run/vstor/fs-claims (the run directory, which
# the host reads): {"file": NAME, "sha256": HEX} and {"file": "journal",
# "len": BYTES, "sha256": HEX of its first BYTES}. tests/host/crash.sh
# kills the daemon or the VMM mid-way and checks the share on the host.
#
# A STEP N:CMD runs shell command CMD (with $DEV set to the disk's name)
# after file or round N (0: before the first): tests use it to change the
# write cache mode or the poll queues mid-workload. Exits non-zero if
# anything fails.
set -euo pipefail
FS_MB=48
TOP=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=lib.sh
. "$TOP/tests/guest/lib.sh"
# shellcheck source=claims.sh
. "$TOP/tests/guest/claims.sh"

# find_disk SERIAL: set and export DEV, the disk with that serial.
find_disk() {
	DEV=$(disk_by_serial "$1") || { echo "no disk with serial $1"; return 1; }
	export DEV
}

# mark JSON: write the next claim block (claim, counting, is the caller's).
mark() {
	claim_mark "$DEV" $((FS_MB * 256 + claim)) "$1"
	claim=$((claim + 1))
}

# step N: run the step for file or round N, if there is one.
step() {
	if [[ -n ${steps[$1]:-} ]]; then
		echo "crash-workload: $DEV: after $1: ${steps[$1]}"
		eval "${steps[$1]}"
	fi
}

# write_file PATH BYTES: random data, as WRITER says.
write_file() {
	if [[ ${WRITER:-cache} == hipri ]]; then
		fio --name=w --filename="$1" --ioengine=io_uring --hipri=1 --direct=1 \
			--rw=write --bs=4k --size="$2" --iodepth=4 --refill_buffers=1 \
			>/tmp/crash-fio.out 2>&1 ||
			{ cat /tmp/crash-fio.out; return 1; }
	else
		head -c "$2" /dev/urandom >"$1"
	fi
}

# parse_steps STEP...: fill the caller's associative array steps.
parse_steps() {
	local s
	for s in "$@"; do
		steps[${s%%:*}]=${s#*:}
	done
}

# job SERIAL FILES [STEP...]
job() {
	local serial=$1 files=$2 i f mnt=/tmp/crash-mnt claim=0
	local -A steps=()
	parse_steps "${@:3}"
	find_disk "$serial" || return

	# claim_file NAME: its content is durable now.
	claim_file() {
		mark "{\"file\": \"$1\", \"sha256\": \"$(sha256sum <"$mnt/$1" | cut -d' ' -f1)\"}"
	}

	mkfs.ext4 -q -F -b 4096 "/dev/$DEV" "${FS_MB}M"
	mkdir -p "$mnt"
	mount -t ext4 "/dev/$DEV" "$mnt"
	sync "$mnt"	# coreutils sync with a path: fsync
	mark '{"begin": true}'
	WRITER=cache
	step 0
	for ((i = 1; i <= files; i++)); do
		f=f$i
		write_file "$mnt/$f" $(((RANDOM % 50 + 1) * 4096))
		sync "$mnt/$f"
		sync "$mnt"
		claim_file "$f"
		if ((i % 4 == 0)); then
			write_file "$mnt/.$f.new" $(((RANDOM % 50 + 1) * 4096))
			sync "$mnt/.$f.new"
			mv "$mnt/.$f.new" "$mnt/$f"
			sync "$mnt"
			claim_file "$f"
		fi
		step $i
	done
	umount "$mnt"
	echo "crash-workload: $serial (/dev/$DEV): $files files ($WRITER), $claim claims, $(cat "/sys/block/$DEV/num_poll_queues") poll queues"
}

# rawjob SERIAL ROUNDS [STEP...]
rawjob() {
	local serial=$1 rounds=$2 i r off len flags fflags claim=0 sha
	local -A steps=()
	parse_steps "${@:3}"
	((rounds < 64)) || { echo "rawjob: at most 63 rounds, not $rounds"; return 1; }
	find_disk "$serial" || return
	mark '{"begin": true, "raw": true}'
	step 0
	for ((i = 1; i <= rounds; i++)); do
		# Round i writes region i % 4 at 64 KiB * (i / 4), never the
		# same bytes twice, and claims it as rR.I: every claim is then
		# checked at every later point, and a later round's writes,
		# 4 KiB each, cannot leave a claimed range half overwritten.
		r=$((i % 4))
		off=$(((r << 20) + (i / 4) * 65536))
		len=$(((RANDOM % 16 + 1) * 4096))
		flags=()
		((i % 2)) && flags+=(-P)
		# A FLUSH has no buffer to register: it goes without -F.
		fflags=("${flags[@]}")
		((i % 3)) || flags+=(-F)
		"$TOOLS/vblk_pt" "${flags[@]}" -p $((i * 7919)) -s $((off / 512)) -l 4096 \
			-c $((len / 4096)) -q 8 "/dev/vblk/$DEV" write >/tmp/crash-pt.out ||
			{ cat /tmp/crash-pt.out; return 1; }
		"$TOOLS/vblk_pt" "${fflags[@]}" "/dev/vblk/$DEV" flush >/tmp/crash-pt.out ||
			{ cat /tmp/crash-pt.out; return 1; }
		sha=$(dd if="/dev/$DEV" bs=4096 skip=$((off / 4096)) count=$((len / 4096)) \
			iflag=direct status=none | sha256sum | cut -d' ' -f1)
		mark "{\"region\": \"r$r.$i\", \"offset\": $off, \"len\": $len, \"sha256\": \"$sha\"}"
		step $i
	done
	echo "crash-workload: $serial (/dev/$DEV): $rounds passthrough rounds, $claim claims, $(cat "/sys/block/$DEV/num_poll_queues") poll queues"
}

# vhostjob SERIAL ROUNDS
vhostjob() {
	local serial=$1 rounds=$2 rc=0
	find_disk "$serial" || return
	[[ -e /dev/vhost-blk ]] || { echo "no /dev/vhost-blk (vhost_blk not loaded)"; return 1; }
	br_start crash-br --backend "/dev/$DEV" --queues 2 || return
	vub --scenario crash --crash-rounds "$rounds" --claim-block $((FS_MB * 256)) || rc=1
	br_stop || rc=1
	((rc == 0)) || return 1
	echo "crash-workload: $serial (/dev/$DEV): vhost-blk, $rounds rounds with FLUSH and $rounds write-through, $((16 * rounds + 1)) claims, 0 poll queues"
}

# nestjob SERIAL SERIAL2 ROUNDS INITRAMFS
nestjob() {
	local rounds=$3 vm=/run/vstor/crash-nest dev1 dev2 pid1 sock1 log1 rc=0
	find_disk "$1" || return
	dev1=$DEV
	find_disk "$2" || return
	dev2=$DEV
	[[ -e /dev/vhost-blk ]] || { echo "no /dev/vhost-blk (vhost_blk not loaded)"; return 1; }
	br_start crash-nest1 --backend "/dev/$dev1" --queues 2 --serial nest-flush || return
	pid1=$BR_PID sock1=$BR_SOCK log1=$BR_LOG
	if br_start crash-nest2 --backend "/dev/$dev2" --queues 2 --serial nest-wt --write-through; then
		rm -rf "$vm"
		mkdir -p "$vm"
		"$TOP/vm/vm.sh" --keep "$vm" --initramfs "$4" --minimal --cpus 2 --mem 512M \
			--shared-mem --no-disk --timeout 600 \
			--qemu -chardev --qemu "socket,id=vb0,path=$sock1" \
			--qemu -device --qemu "vhost-user-blk-pci,chardev=vb0,num-queues=2" \
			--qemu -chardev --qemu "socket,id=vb1,path=$BR_SOCK" \
			--qemu -device --qemu "vhost-user-blk-pci,chardev=vb1,num-queues=2" \
			-- "$TOP/tests/guest/inner-blk.sh" crash "$rounds" $((FS_MB * 256)) \
			>"$vm/vm.out" 2>&1 || rc=$?
		grep '^inner: crash' "$vm/output" 2>/dev/null
		br_stop || rc=1
	else
		rc=1
	fi
	BR_PID=$pid1 BR_SOCK=$sock1 BR_LOG=$log1 br_stop || rc=1
	if ((rc != 0)); then
		echo "the second-level guest exited $rc; its logs are crash-nest in this run's directory"
		tail -n 15 "$vm/vm.out" "$vm/output" 2>/dev/null
		return 1
	fi
	echo "crash-workload: $1 (/dev/$dev1): vhost-blk with FLUSH to a second-level guest, $rounds rounds, $((4 * rounds + 1)) claims, 0 poll queues"
	echo "crash-workload: $2 (/dev/$dev2): vhost-blk write-through to a second-level guest, $rounds rounds, $((4 * rounds + 1)) claims, 0 poll queues"
}

# fsjob TAG FILES
fsjob() {
	local tag=$1 files=$2 mnt=/tmp/crash-fs i len=0
	mkdir -p "$mnt"
	mount -t virtiofs "$tag" "$mnt"
	: >"$mnt/journal"
	sync "$mnt/journal"
	sync "$mnt"
	for ((i = 1; i <= files; i++)); do
		head -c $(((RANDOM % 50 + 1) * 4096)) /dev/urandom >"$mnt/f$i"
		head -c 4096 /dev/urandom >>"$mnt/journal"
		len=$((len + 4096))
		sync "$mnt/f$i"
		sync "$mnt/journal"
		sync "$mnt"
		printf '{"file": "f%d", "sha256": "%s"}\n{"file": "journal", "len": %d, "sha256": "%s"}\n' \
			"$i" "$(sha256sum <"$mnt/f$i" | cut -d' ' -f1)" "$len" \
			"$(head -c "$len" "$mnt/journal" | sha256sum | cut -d' ' -f1)" >>/run/vstor/fs-claims
	done
	umount "$mnt"
	echo "crash-workload: virtio-fs $tag: $files files"
}

# shellcheck source=/dev/null
. "$1"
