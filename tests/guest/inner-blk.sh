#!/usr/bin/env bash
# Runs inside a second-level guest (a guest the test guest boots with the
# host's QEMU), whose only disk is a vhost-user-blk device. The run
# directory (/run/vstor, shared with the test guest) carries a handshake so
# the test guest can read the bridge's counters right before and right after
# the I/O:
#   inner-blk.sh verify   write "ready", wait for "go"; fio random writes with
#                         crc32c verification, one job pinned to each vCPU;
#                         write "done", wait for "go2" (the bridge restarts
#                         in between), then read everything back and verify,
#                         write fio's status to "verified", then write at
#                         random on both queues until the VMM is killed
#   inner-blk.sh crash ROUNDS BLOCK
#                         for tests/host/crash.sh: on the disk with serial
#                         nest-flush (VIRTIO_BLK_F_FLUSH: a write cache)
#                         and then on nest-wt (none: write through), ROUNDS
#                         rounds of 4 concurrent O_DIRECT writes of random
#                         data (one request each), one per 1 MiB region
#                         and never twice to the same bytes, a flush of
#                         the disk (fsync) where it has a write cache,
#                         then a claim of each range from 4 KiB block
#                         BLOCK on (tests/guest/claims.sh); ROUNDS <= 16
# Its root is vm/initramfs.sh's archive: what this script runs must be in it.
# The output says when (seconds since boot) each step started.
set -uo pipefail
mode=${1:?usage: inner-blk.sh verify|crash ROUNDS BLOCK}
run=/run/vstor
dev=/dev/vda

wait_for() { # wait_for FILE: up to 300 s
	local i
	for ((i = 0; i < 3000; i++)); do
		[[ -e $run/$1 ]] && return 0
		sleep 0.1
	done
	echo "inner: no $1 from the test guest"
	return 1
}

up() { cut -d' ' -f1 /proc/uptime; }

echo "inner: running $mode at $(up) s"
[[ -b $dev ]] || { echo "inner: no $dev"; exit 1; }
ncpu=$(nproc)
hwq=(/sys/block/vda/mq/*)
echo "inner: $dev $(cat /sys/block/vda/size) sectors, ${#hwq[@]} hw queues, $ncpu vCPUs, serial $(cat /sys/block/vda/serial)"
for q in "${hwq[@]}"; do
	echo "inner: queue ${q##*/} cpu_list $(cat "$q/cpu_list")"
done

# load: random writes on both queues until the VMM is killed.
load() {
	echo "inner: load at $(up) s"
	fio --name=load --filename=$dev --direct=1 --ioengine=io_uring \
		--rw=randwrite --bs=4k --iodepth=16 --numjobs="$ncpu" --size=32M \
		--time_based --runtime=600 --cpus_allowed_policy=split \
		--cpus_allowed=0-$((ncpu - 1)) >/dev/null 2>&1
	echo "inner: load ended"
}

# crash_disk SERIAL CACHE ROUNDS BLOCK: the crash mode's workload on the
# disk with SERIAL, whose write cache must be CACHE.
crash_disk() {
	local serial=$1 cache=$2 rounds=$3 claim=$4 d dev="" got i k p
	local off=() len=() sha=() pids=()
	for d in /sys/block/vd*; do
		[[ $(cat "$d/serial") == "$serial" ]] && dev=${d##*/}
	done
	[[ -n $dev ]] || { echo "inner: no disk with serial $serial"; return 1; }
	got=$(cat "/sys/block/$dev/queue/write_cache")
	[[ $got == "$cache" ]] ||
		{ echo "inner: $dev ($serial): write cache '$got', want '$cache'"; return 1; }
	((rounds <= 16)) || { echo "inner: at most 16 rounds, not $rounds"; return 1; }
	claim_mark "$dev" $((claim++)) '{"begin": true, "raw": true}' || return
	for ((i = 1; i <= rounds; i++)); do
		pids=()
		# Round i writes 4-64 KiB at 64 KiB * (i - 1) into each region
		# and claims it as region rK.I: no range is written twice, so
		# replay_log.py checks every claim at every later point (a
		# claimed range half overwritten by a later write would match
		# no claim).
		for k in 0 1 2 3; do
			off[k]=$(((k << 20) + (i - 1) * 65536))
			len[k]=$(((RANDOM % 16 + 1) * 4096))
			head -c "${len[k]}" /dev/urandom >"/tmp/w$k"
			sha[k]=$(sha256sum <"/tmp/w$k" | cut -d' ' -f1)
			dd if="/tmp/w$k" of="/dev/$dev" bs="${len[k]}" seek="${off[k]}" \
				oflag=direct,seek_bytes conv=notrunc status=none &
			pids+=($!)
		done
		for p in "${pids[@]}"; do
			wait "$p" || { echo "inner: $dev: a write of round $i failed"; return 1; }
		done
		# An fsync of the block device: a FLUSH (none without a cache).
		if [[ $cache == "write back" ]]; then
			dd if=/dev/null of="/dev/$dev" conv=fsync,notrunc status=none ||
				{ echo "inner: $dev: the flush of round $i failed"; return 1; }
		fi
		for k in 0 1 2 3; do
			claim_mark "$dev" $((claim++)) "{\"region\": \"r$k.$i\", \"offset\": ${off[k]}, \"len\": ${len[k]}, \"sha256\": \"${sha[k]}\"}" || return
		done
	done
	echo "inner: crash: $dev ($serial, $cache): $rounds rounds of 4 writes, $((rounds * 4 + 1)) claims"
}

case $mode in
verify)
	echo ready >$run/ready
	wait_for go || exit 1
	echo "inner: fio verify at $(up) s"
	rc=0
	# One job per vCPU, each on 2 MiB of its own 8 MiB, so both queues
	# carry I/O; fio reads every block back and checks its crc32c.
	fio --name=verify --filename=$dev --direct=1 --ioengine=io_uring \
		--rw=randwrite --bs=4k --iodepth=8 --size=2M --offset_increment=8M \
		--numjobs="$ncpu" --cpus_allowed=0-$((ncpu - 1)) --cpus_allowed_policy=split \
		--verify=crc32c --verify_fatal=1 --do_verify=1 --group_reporting \
		>$run/fio.out 2>$run/fio.err || rc=$?
	echo "inner: fio exit $rc at $(up) s"
	cat $run/fio.err
	# Written whole, then renamed: the test guest reads it as soon as it
	# exists (over 9p, a create and a write are two round trips).
	echo $rc >$run/done.tmp && mv $run/done.tmp $run/done
	# Meanwhile the test guest restarts the bridge; QEMU reconnects.
	wait_for go2 || exit 1
	((rc == 0)) || exit "$rc"
	echo "inner: fio --verify_only at $(up) s"
	fio --name=verify --filename=$dev --direct=1 --ioengine=io_uring \
		--rw=randwrite --bs=4k --iodepth=8 --size=2M --offset_increment=8M \
		--numjobs="$ncpu" --verify=crc32c --verify_fatal=1 --verify_only \
		--group_reporting >$run/fio2.out 2>$run/fio2.err || rc=$?
	echo "inner: after the reconnect, fio --verify_only exit $rc at $(up) s"
	cat $run/fio2.err
	echo $rc >$run/verified.tmp && mv $run/verified.tmp $run/verified
	((rc == 0)) || exit "$rc"
	load
	;;
crash)
	# shellcheck source=claims.sh
	. "$(dirname "$0")/claims.sh"
	rc=0
	crash_disk nest-flush "write back" "$2" "$3" || rc=1
	crash_disk nest-wt "write through" "$2" "$3" || rc=1
	echo "inner: crash workloads exit $rc at $(up) s"
	exit $rc
	;;
*)
	echo "inner: unknown mode $mode"
	exit 2
	;;
esac
