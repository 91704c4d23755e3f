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
#                         and then on nest-wt (none: write through),
#                         tests/tools/raw_claims.py: ROUNDS rounds of 4
#                         concurrent direct writes, a flush where there is
#                         a write cache, and a claim of each range from
#                         4 KiB block BLOCK on
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

# crash_disk SERIAL CACHE ROUNDS BLOCK: the crash mode's workload
# (tests/tools/raw_claims.py, flushing where there is a write cache) on the
# disk with SERIAL, whose write cache must be CACHE.
crash_disk() {
	local serial=$1 cache=$2 d dev="" got out flush=()
	for d in /sys/block/vd*; do
		[[ $(cat "$d/serial") == "$serial" ]] && dev=${d##*/}
	done
	[[ -n $dev ]] || { echo "inner: no disk with serial $serial"; return 1; }
	got=$(cat "/sys/block/$dev/queue/write_cache")
	[[ $got == "$cache" ]] ||
		{ echo "inner: $dev ($serial): write cache '$got', want '$cache'"; return 1; }
	[[ $cache == "write back" ]] && flush=(--flush)
	out=$(/usr/bin/python3 "$(dirname "$0")/../tools/raw_claims.py" "/dev/$dev" "$3" "$4" "${flush[@]}") ||
		{ echo "inner: $dev ($serial): $out"; return 1; }
	echo "inner: crash: $dev ($serial, $cache): $out"
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
