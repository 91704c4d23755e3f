#!/usr/bin/env bash
# Runs inside a second-level guest (tests/guest/zoned.sh) whose only disk,
# /dev/vda, is QEMU's zoned virtio-blk on the first-level guest's zoned
# null_blk: ZONES empty sequential zones of ZONE_SECTORS sectors, 2 queues
# of which 1 polled.
#
#   inner-zoned.sh ZONES ZONE_SECTORS
#
# Prints "inner: ok CHECK" or "inner: FAIL CHECK: why" per check and exits 1
# if any failed. Zones: 2 open/close/finish/reset, 3 a write off the write
# pointer, 4-5 fio on the interrupt queue, 6-7 on the poll queue, 8-10 zone
# appends, 11 passthrough.
# Its root is vm/initramfs.sh's archive: what this script runs must be in it.
set -uo pipefail
zones=${1:?usage: inner-zoned.sh ZONES ZONE_SECTORS}
zs=${2:?usage: inner-zoned.sh ZONES ZONE_SECTORS}
top=$(cd "$(dirname "$0")/../.." && pwd)
PT=$top/build/tools/vblk_pt
MODROOT=$(cat /run/vstor/modroot)
dev=/dev/vda
cdev=/dev/vblk/vda
failed=0

up() { cut -d' ' -f1 /proc/uptime; }
ok() { echo "inner: ok $*"; }
bad() {
	echo "inner: FAIL $1: ${*:2}"
	failed=1
	return 1
}

# zcond ZONE, zwp ZONE: the zone's condition (1 empty, 2 implicitly open,
# 3 explicitly open, 4 closed, 14 full) and write pointer (sectors from the zone's start), from
# blkzone report.
zreport() { blkzone report -o $(($1 * zs)) -c 1 $dev; }
zcond() { zreport "$1" | sed -n 's/.*zcond: *\([0-9]*\)(.*/\1/p'; }
zwp() { zreport "$1" | sed -n 's/.*wptr \(0x[0-9a-f]*\).*/\1/p' | { read -r w && echo $((w)); }; }

# zexpect CHECK ZONE COND WP: the zone is in condition COND with its write
# pointer at WP.
zexpect() {
	local c w
	c=$(zcond "$2") w=$(zwp "$2")
	[[ $c == "$3" && $w == "$4" ]] || bad "$1" "zone $2: condition $c, write pointer $w; want $3, $4"
}

echo "inner: running at $(up) s"
[[ -b $dev ]] || { echo "inner: no $dev"; exit 1; }
grep -q ' /sys/kernel/debug ' /proc/mounts || mount -t debugfs debugfs /sys/kernel/debug

# The disk as the driver set it up.
q=/sys/block/vda/queue
hwq=(/sys/block/vda/mq/*)
got="$(cat $q/zoned) $(cat $q/nr_zones) $(cat $q/chunk_sectors) ${#hwq[@]} $(cat $q/io_poll)"
if [[ $got == "host-managed $zones $zs 2 1" ]] && (($(cat $q/zone_append_max_bytes) >= 4096)); then
	ok model "host-managed, $zones zones of $zs sectors, 2 hardware queues, polling on, zone appends up to $(cat $q/zone_append_max_bytes) bytes"
else
	bad model "zoned, zones, zone sectors, queues, io_poll: $got; want host-managed $zones $zs 2 1 (zone appends up to $(cat $q/zone_append_max_bytes) bytes)"
fi

# Every zone sequential and empty, as the first-level guest left them.
n=$(blkzone report $dev | grep -c 'zcond: *1(em).*SEQ_WRITE_REQUIRED')
if [[ $n == "$zones" ]]; then ok report "$n empty sequential zones"; else bad report "$n of $zones zones empty and sequential"; fi

# Zone management on zone 2, each step seen in the next report.
z=2
if blkzone open -o $((z * zs)) -c 1 $dev && zexpect open $z 3 0 &&
	dd if=/dev/urandom of=$dev bs=4096 count=1 seek=$((z * zs / 8)) oflag=direct status=none &&
	zexpect open $z 3 8; then
	ok open "zone $z explicitly open, then written at its write pointer (8 sectors)"
fi
if blkzone close -o $((z * zs)) -c 1 $dev && zexpect close $z 4 8; then ok close "zone $z closed, write pointer kept"; fi
if blkzone finish -o $((z * zs)) -c 1 $dev && zexpect finish $z 14 "$zs"; then ok finish "zone $z full"; fi
if blkzone reset -o $((z * zs)) -c 1 $dev && zexpect reset $z 1 0; then ok reset "zone $z empty again"; fi

# A write that is not at the zone's write pointer fails with EIO, and moves
# nothing. (Zone write plugging refuses it before the driver sees it.)
z=3
if err=$(dd if=/dev/zero of=$dev bs=4096 count=1 seek=$((z * zs / 8 + 1)) oflag=direct status=none 2>&1); then
	bad wp_refused "a write 8 sectors past zone $z's write pointer succeeded"
elif [[ $err != *"Input/output error"* ]]; then
	bad wp_refused "a write off zone $z's write pointer failed otherwise than with EIO: $err"
elif zexpect wp_refused $z 1 0; then
	ok wp_refused "a write off zone $z's write pointer failed with EIO, the zone is still empty"
fi

# zfio ZONE HIPRI: sequential writes of 64 KiB, 4 in flight, over zones ZONE
# and ZONE + 1, read back and checked (crc32c); fio's zbd mode keeps them at
# the write pointers.
zfio() {
	timeout 300 fio --name=zbd --filename=$dev --zonemode=zbd --direct=1 --ioengine=io_uring --hipri="$2" \
		--rw=write --bs=64k --iodepth=4 --offset=$(($1 * zs * 512)) --size=$((2 * zs * 512)) \
		--verify=crc32c --do_verify=1 --verify_fatal=1 >"/tmp/fio-$1.out" 2>&1
}
if zfio 4 0 && zexpect fio_irq 4 14 "$zs" && zexpect fio_irq 5 14 "$zs"; then
	ok fio_irq "fio zbd write + verify over zones 4-5, interrupt queue"
else
	tail -n 5 /tmp/fio-4.out
	bad fio_irq "fio zbd on the interrupt queue (above)"
fi
# With hipri the writes are not polled: io_uring's first issue of each is
# REQ_NOWAIT, which zone write plugging always takes, clearing REQ_POLLED,
# and issues from its work. An IOPOLL ring polling those bios is what
# 0028 (blk-mq: ignore a poll cookie that names no poll queue) is about.
# The verify reads are polled, and so is a second read of both zones,
# counted: it must raise no request-queue interrupt.
reqirqs() {
	awk '$NF ~ /-req\.[0-9]+$/ { for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i; else break }
		END { print s + 0 }' /proc/interrupts
}
if zfio 6 1 && zexpect fio_poll 6 14 "$zs" && zexpect fio_poll 7 14 "$zs"; then
	i0=$(reqirqs)
	if timeout 300 fio --name=pread --filename=$dev --direct=1 --ioengine=io_uring --hipri=1 \
		--rw=read --bs=64k --iodepth=4 --offset=$((6 * zs * 512)) --size=$((2 * zs * 512)) \
		>/tmp/fio-pread.out 2>&1; then
		i1=$(reqirqs)
		if ((i1 == i0)); then
			ok fio_poll "fio zbd write (plugged, not polled) + verify over zones 6-7 with hipri; a polled read of both zones: 0 request interrupts"
		else
			bad fio_poll "the polled read of zones 6-7 raised $((i1 - i0)) request-queue interrupts"
		fi
	else
		tail -n 5 /tmp/fio-pread.out
		bad fio_poll "the polled read of zones 6-7 failed (above)"
	fi
else
	tail -n 5 /tmp/fio-6.out
	bad fio_poll "fio zbd with hipri (above)"
fi

# zap CHECK ZONE ARGS...: 32 concurrent zone appends to ZONE by vstor_zap,
# which checks the sectors they returned and the data at them.
zap() {
	local check=$1 z=$2 res
	shift 2
	if ! timeout 150 /usr/sbin/modprobe -d "$MODROOT" vstor_zap path=$dev zone="$z" nr=32 "$@"; then
		dmesg | grep vstor_zap | tail -n 5
		bad "$check" "vstor_zap failed on zone $z (above)"
		return
	fi
	# (busybox's timeout would run its own modprobe applet by that name.)
	res=$(cat /sys/module/vstor_zap/parameters/result)
	# Unloading with appends in flight (a result of -ETIMEDOUT) waits for
	# them: left to the end of the run.
	[[ $res == 0 ]] || { bad "$check" "vstor_zap result $res"; return; }
	modprobe -d "$MODROOT" -r vstor_zap || { bad "$check" "vstor_zap does not unload"; return; }
	zexpect "$check" "$z" 2 256 && ok "$check" "$(dmesg | grep 'vstor_zap: 32 appends' | tail -n 1 | sed 's/^\[[^]]*\] //')"
}
batch=/sys/kernel/debug/virtio_blk/irq_batch
if [[ $(cat $batch) == Y ]]; then zap append_irq 8; else bad append_irq "$batch is $(cat $batch), want Y"; fi
if echo N >$batch && [[ $(cat $batch) == N ]]; then zap append_nobatch 9; else bad append_nobatch "cannot turn $batch off"; fi
if ! { echo Y >$batch && [[ $(cat $batch) == Y ]]; }; then bad append_poll "cannot turn $batch back on"; fi
zap append_poll 10 polled=1

# Passthrough: GET_INFO offers reads, FLUSH and GET_ID only; the writing
# commands fail with EOPNOTSUPP; reads through it return what a block-device
# write put there.
z=11
info=$("$PT" $cdev ioctl-info)
ops=$(echo "$info" | tr ' ' '\n' | sed -n 's/^ops=//p')
if [[ $ops == 0x12b ]]; then ok pt_info "GET_INFO ops $ops: GET_INFO, READ, READV, FLUSH, GET_ID"; else bad pt_info "GET_INFO: $info; want ops=0x12b"; fi
refused=0
for op in write writev discard write-zeroes; do
	args=(-s $((z * zs)))
	[[ $op == discard || $op == write-zeroes ]] && args+=(-n 8)
	"$PT" -e EOPNOTSUPP "${args[@]}" $cdev $op >/dev/null || { bad pt_refused "$op through $cdev was not refused with EOPNOTSUPP"; refused=1; }
done
if ((!refused)) && zexpect pt_refused $z 1 0; then
	ok pt_refused "write, writev, discard, write-zeroes: EOPNOTSUPP, zone $z untouched"
fi
if "$PT" -p 7 -s $((z * zs)) -l 4096 -c 16 $dev bdev-write >/dev/null &&
	"$PT" -p 7 -s $((z * zs)) -l 4096 -c 16 $cdev read >/dev/null &&
	"$PT" -P -p 7 -s $((z * zs)) -l 4096 -c 16 $cdev read >/dev/null &&
	"$PT" -e ok $cdev flush >/dev/null && "$PT" -e ok $cdev get-id >/dev/null; then
	ok pt_read "16 blocks written through $dev read back through $cdev, interrupt and polled; FLUSH and GET_ID work"
else
	bad pt_read "passthrough reads, FLUSH or GET_ID failed"
fi

echo "inner: done at $(up) s, failed=$failed"
exit $failed
