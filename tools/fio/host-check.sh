#!/usr/bin/env bash
# Host-side checks of build/fio/fio's cmd_type=vblk, without the kernel that
# has /dev/vblk/vdX. Prints KTAP and ends with "N passed, N failed, N skipped".
#
#   tools/fio/host-check.sh
#
# - the option is there, and jobs on a missing or wrong device fail with a
#   message saying so;
# - the NVMe side behaves as Debian's fio 3.33 does;
# - fio's copy of the uapi definitions equals the kernel header
#   (build/linux/include/uapi/linux/virtio_blk_cmd.h);
# - fio jobs run end to end against vblk-emu (tools/fio/vblk-emu.c), a
#   userspace stand-in for the character device built from the kernel
#   header, which checks every command against the uapi: each mapping
#   (READ/WRITE, READV/WRITEV, fixed buffers, DISCARD, FLUSH, IOPOLL,
#   SQPOLL), data verified, limits and errors.
# Needs root only for mknod.
set -uo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

FIO=${FIO:-$BUILD/fio/fio}
KHDR=$KSRC/include/uapi/linux/virtio_blk_cmd.h
FIO_TREE=${FIO_TREE:-$BUILD/fio-src/fio}
WORK=$BUILD/fio/check
EMU=$WORK/vblk-emu.so

passed=0 failed=0 skipped=0 n=0
result() { # result OK|FAIL|SKIP name [reason]
	n=$((n + 1))
	case $1 in
	OK) passed=$((passed + 1)); echo "ok $n $2" ;;
	SKIP) skipped=$((skipped + 1)); echo "ok $n $2 # SKIP ${3:-}" ;;
	*) failed=$((failed + 1)); echo "not ok $n $2"
		[[ -n ${3:-} ]] && printf '%s\n' "$3" | sed 's/^/# /' ;;
	esac
}
# check NAME COMMAND...: the command's status is the result; its output is
# shown on failure.
check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		result OK "$name"
	else
		result FAIL "$name" "$out"
	fi
}

echo "KTAP version 1"
[[ -x $FIO ]] || die "no $FIO: run scripts/build-fio.sh"
rm -rf "$WORK"
mkdir -p "$WORK"

check "fio is 3.33" bash -c "'$FIO' --version | grep -qx 'fio-3.33'"

t_enghelp() {
	"$FIO" --enghelp=io_uring_cmd | grep -q '^cmd_type' || return
	"$FIO" --enghelp=io_uring_cmd,cmd_type | grep -Eq '^ *: vblk +' ||
		{ "$FIO" --enghelp=io_uring_cmd,cmd_type; return 1; }
}
check "--enghelp=io_uring_cmd lists cmd_type with the vblk value" t_enghelp

# fails_with MESSAGE FIO-ARGS...: the job fails, saying MESSAGE.
fails_with() {
	local want=$1 out rc
	shift
	out=$("$FIO" "$@" 2>&1)
	rc=$?
	((rc != 0)) || { echo "fio succeeded: $out"; return 1; }
	grep -qF -- "$want" <<<"$out" || { echo "no '$want' in: $out"; return 1; }
}

vblk=(--ioengine=io_uring_cmd --cmd_type=vblk --thread --size=1M)
if [[ -e /dev/vblk/vdz ]]; then
	result SKIP "a job on a missing /dev/vblk/vdz fails clearly" "/dev/vblk/vdz exists"
else
	t_missing() {
		fails_with "cmd_type=vblk: cannot open /dev/vblk/vdz: No such file or directory" \
			--name=missing --filename=/dev/vblk/vdz "${vblk[@]}" --rw=randwrite &&
			[[ ! -e /dev/vblk/vdz ]]
	}
	check "a job on a missing /dev/vblk/vdz fails clearly and creates nothing" t_missing
fi
check "a job on another character device (/dev/null) fails clearly" \
	fails_with "VIRTBLK_IOC_GET_INFO on /dev/null failed: Inappropriate ioctl for device" \
	--name=null --filename=/dev/null "${vblk[@]}" --rw=randread
echo data >"$WORK/regular"
check "a job on a regular file fails clearly" \
	fails_with "$WORK/regular is not a character device" \
	--name=reg --filename="$WORK/regular" "${vblk[@]}" --rw=randread

# The NVMe side: the same messages as Debian's fio 3.33 on a non-NVMe file.
t_nvme_same() {
	local a b args=(--name=nvme --ioengine=io_uring_cmd --thread --size=1M --rw=randread)
	a=$(/usr/bin/fio "${args[@]}" --filename=/dev/null 2>&1 | grep -v '^fio-')
	b=$("$FIO" "${args[@]}" --filename=/dev/null 2>&1 | grep -v '^fio-')
	[[ $a == "$b" ]] || { diff <(echo "$a") <(echo "$b"); return 1; }
	a=$(/usr/bin/fio "${args[@]}" --filename="$WORK/regular" 2>&1 | grep -v '^fio-')
	b=$("$FIO" "${args[@]}" --filename="$WORK/regular" 2>&1 | grep -v '^fio-')
	[[ $a == "$b" ]] || { diff <(echo "$a") <(echo "$b"); return 1; }
}
if [[ $(/usr/bin/fio --version 2>/dev/null) == fio-3.33 ]]; then
	check "cmd_type=nvme fails exactly as Debian's fio 3.33 does" t_nvme_same
else
	result SKIP "cmd_type=nvme fails exactly as Debian's fio 3.33 does" "no Debian fio 3.33"
fi

if [[ ! -r $KHDR || ! -r $FIO_TREE/engines/vblk.h ]]; then
	result SKIP "fio's uapi copy equals the kernel header" "no $KHDR or fio tree"
	result SKIP "vblk-emu jobs" "no $KHDR or fio tree"
	echo "$passed passed, $failed failed, $skipped skipped"
	((failed == 0))
	exit
fi

# Print every definition and layout from one header or the other.
mkdir -p "$WORK/inc/linux"
cp "$KHDR" "$WORK/inc/linux/"
cat >"$WORK/vals.c" <<'EOF'
#include <stdio.h>
#include <stddef.h>
#ifdef KERNEL_HDR
#include <linux/virtio_blk_cmd.h>
#else
#include "engines/vblk.h"
#endif
#define P(x) printf("%s %#llx\n", #x, (unsigned long long)(x))
#define O(s, m) printf("%s.%s %zu\n", #s, #m, offsetof(struct s, m))
int main(void)
{
	P(VIRTBLK_IOC_MAGIC); P(VIRTBLK_CMD_GET_INFO); P(VIRTBLK_CMD_READ);
	P(VIRTBLK_CMD_WRITE); P(VIRTBLK_CMD_READV); P(VIRTBLK_CMD_WRITEV);
	P(VIRTBLK_CMD_FLUSH); P(VIRTBLK_CMD_DISCARD);
	P(VIRTBLK_CMD_WRITE_ZEROES); P(VIRTBLK_CMD_GET_ID);
	P(VIRTBLK_CMD_F_UNMAP); P(VIRTBLK_ID_BYTES);
	P(VIRTBLK_INFO_F_READ_ONLY); P(VIRTBLK_INFO_F_WRITE_CACHE);
	P(VIRTBLK_INFO_F_POLL); P(VIRTBLK_U_CMD_GET_INFO);
	P(VIRTBLK_U_CMD_READ); P(VIRTBLK_U_CMD_WRITE); P(VIRTBLK_U_CMD_READV);
	P(VIRTBLK_U_CMD_WRITEV); P(VIRTBLK_U_CMD_FLUSH);
	P(VIRTBLK_U_CMD_DISCARD); P(VIRTBLK_U_CMD_WRITE_ZEROES);
	P(VIRTBLK_U_CMD_GET_ID); P(VIRTBLK_IOC_GET_INFO);
	P(sizeof(struct virtblk_uring_cmd)); P(sizeof(struct virtblk_info));
	O(virtblk_uring_cmd, sector); O(virtblk_uring_cmd, addr);
	O(virtblk_uring_cmd, len); O(virtblk_uring_cmd, flags);
	O(virtblk_uring_cmd, nr_sectors); O(virtblk_uring_cmd, reserved0);
	O(virtblk_uring_cmd, reserved);
	O(virtblk_info, ops); O(virtblk_info, capacity); O(virtblk_info, flags);
	O(virtblk_info, logical_block_size); O(virtblk_info, max_sectors);
	O(virtblk_info, max_segments); O(virtblk_info, max_segment_size);
	O(virtblk_info, max_discard_sectors);
	O(virtblk_info, max_write_zeroes_sectors);
	O(virtblk_info, nr_poll_queues); O(virtblk_info, reserved);
	return 0;
}
EOF
t_header() {
	gcc -DKERNEL_HDR -I"$WORK/inc" -o "$WORK/vals-kernel" "$WORK/vals.c" &&
		gcc -D_GNU_SOURCE -I"$FIO_TREE" -include "$FIO_TREE/config-host.h" \
			-o "$WORK/vals-fio" "$WORK/vals.c" &&
		diff <("$WORK/vals-kernel") <("$WORK/vals-fio")
}
check "fio's uapi copy equals the kernel header (values, sizes, offsets)" t_header

if ! gcc -O2 -Wall -Wextra -Wno-unused-parameter -shared -fPIC \
	-I"$WORK/inc" -o "$EMU" "$(dirname "$0")/vblk-emu.c" -lpthread >"$WORK/emu.log" 2>&1; then
	result FAIL "vblk-emu builds" "$(cat "$WORK/emu.log")"
	echo "$passed passed, $failed failed, $skipped skipped"
	exit 1
fi
if ! mknod "$WORK/vda" c 1 3 2>/dev/null; then
	result SKIP "vblk-emu jobs" "mknod needs root"
	echo "$passed passed, $failed failed, $skipped skipped"
	((failed == 0))
	exit
fi
truncate -s 64M "$WORK/img"

# emu VAR=VALUE... -- FIO-ARGS...: run fio on the emulated device; the
# output is in $WORK/out, the emulator's counters in $WORK/stats.
emu() {
	local envs=()
	while [[ $1 != -- ]]; do
		envs+=("$1")
		shift
	done
	shift
	rm -f "$WORK/stats"
	# in $WORK: verify jobs leave their state files in the current directory
	(cd "$WORK" && env VBLK_EMU_DEV="$WORK/vda" VBLK_EMU_IMG="$WORK/img" \
		VBLK_EMU_STATS="$WORK/stats" "${envs[@]}" LD_PRELOAD="$EMU" \
		timeout 120 "$FIO" --thread --ioengine=io_uring_cmd --cmd_type=vblk \
		--filename="$WORK/vda" "$@" >"$WORK/out" 2>&1)
}
stat_of() { sed -n "s/^$1=//p" "$WORK/stats"; }
# expect_stats EXPR...: each "name OP value" holds in the counters.
expect_stats() {
	local e name op want got
	for e in "$@"; do
		read -r name op want <<<"$e"
		got=$(stat_of "$name")
		[[ -n $got ]] || { echo "no counter $name"; cat "$WORK/out"; return 1; }
		case $op in
		==) ((got == want)) ;;
		'>') ((got > want)) ;;
		*) false ;;
		esac || { echo "$name=$got, want $op $want"; cat "$WORK/out" "$WORK/stats"; return 1; }
	done
}
# failed_saying MESSAGE... (after emu): the job failed and its output has
# every MESSAGE.
failed_saying() {
	local rc=$? m
	((rc != 0)) || { echo "fio succeeded"; cat "$WORK/out"; return 1; }
	for m in "$@"; do
		grep -qF -- "$m" "$WORK/out" || { echo "no '$m' in:"; cat "$WORK/out"; return 1; }
	done
}
# ok_job: the job passed, no command was rejected or failed.
ok_job() {
	local rc=$1
	((rc == 0)) || { echo "fio exit status $rc"; cat "$WORK/out"; return 1; }
	! grep -Eq 'err= *[1-9]' "$WORK/out" || { cat "$WORK/out"; return 1; }
	expect_stats "rejected == 0" "failed == 0" "overflow == 0" "rings_sqe128 > 0" "rings_cqe32 == 0"
}

t_rw() {
	emu -- --name=rw --rw=randrw --bs=4k --iodepth=16 --size=32M --verify=crc32c
	ok_job $? && expect_stats "read > 4096" "write > 2048" "readv == 0" "writev == 0" \
		"fixed == 0" "ioctl_get_info > 0"
}
check "randrw QD16 + verify: READ and WRITE, res = bytes, data verified" t_rw

t_vec() {
	emu -- --name=vec --rw=write --bs=64k --iodepth=4 --size=16M --nonvectored=0 --verify=md5
	ok_job $? && expect_stats "readv > 0" "writev == 256" "read == 0" "write == 0"
}
check "nonvectored=0: READV and WRITEV (one iovec), data verified" t_vec

t_fixed() {
	emu -- --name=fixed --rw=randwrite --bs=8k --iodepth=8 --size=16M --fixedbufs \
		--registerfiles --verify=crc32c
	ok_job $? && expect_stats "write == 2048" "read == 2048" "fixed == 4096" \
		"registered_file == 4096"
}
check "fixedbufs + registerfiles: IORING_URING_CMD_FIXED inside the registered buffers" t_fixed

t_trim() {
	emu -- --name=trim --rw=randtrim --bs=64k --iodepth=8 --size=32M
	ok_job $? && expect_stats "discard == 512" "discard_bytes == 33554432" "write == 0"
}
check "randtrim: DISCARD commands through the ring, nr_sectors = bs/512" t_trim

t_trimwrite() {
	emu -- --name=trimwrite --rw=trimwrite --bs=16k --iodepth=4 --size=8M
	ok_job $? && expect_stats "discard == 512" "write == 512"
}
check "trimwrite: DISCARD then WRITE" t_trimwrite

t_flush() {
	emu -- --name=flush --rw=write --bs=4k --iodepth=4 --size=4M --fsync=64 --end_fsync=1
	ok_job $? && expect_stats "write == 1024" "flush > 15"
}
check "fsync=64 + end_fsync: FLUSH commands with zero fields" t_flush

t_fdatasync() {
	emu -- --name=fdatasync --rw=randwrite --bs=4k --iodepth=2 --size=1M --fdatasync=16 \
		--sync_file_range=write:32
	ok_job $? && expect_stats "flush > 15"
}
check "fdatasync and sync_file_range: FLUSH" t_fdatasync

t_hipri() {
	emu -- --name=hipri --rw=randread --bs=4k --iodepth=8 --size=8M --hipri
	ok_job $? && expect_stats "rings_iopoll == 1" "polled == 2048" "read == 2048"
}
check "hipri: IORING_SETUP_IOPOLL ring, polled completions" t_hipri

t_hipri_nopoll() {
	emu VBLK_EMU_FLAGS=2 -- --name=hipri --rw=randread --bs=4k --size=1M --hipri
	failed_saying "has no poll queues" "error=Operation not supported"
}
check "hipri on a disk without poll queues: warned, then EOPNOTSUPP reported" t_hipri_nopoll

t_sqpoll() {
	emu -- --name=sqpoll --rw=randrw --bs=4k --iodepth=16 --size=8M --sqthread_poll \
		--verify=crc32c
	ok_job $? && expect_stats "rings_sqpoll == 1" "registered_file > 0" "write > 0" \
		"read > 1024"
}
check "sqthread_poll (registered files): commands without io_uring_enter" t_sqpoll

t_lbs4k() {
	emu VBLK_EMU_LBS=4096 -- --name=lbs --rw=randwrite --bs=4k --iodepth=4 --size=8M \
		--verify=crc32c
	ok_job $? && expect_stats "write == 2048"
}
check "4096-byte logical blocks: sector = offset/512, aligned" t_lbs4k

t_lbs_bad_bs() {
	emu VBLK_EMU_LBS=4096 -- --name=lbs --rw=randread --bs=512 --size=1M
	failed_saying "must be multiples of the logical block size, 4096" || return
	expect_stats "read == 0"
}
check "bs=512 on a 4096-byte-block disk fails up front" t_lbs_bad_bs

t_bad_offset() {
	emu VBLK_EMU_LBS=4096 -- --name=off --rw=read --bs=4k --offset=512 --size=1M
	failed_saying "offset 512 or length 4096 is not a multiple" || return
	expect_stats "read == 0"
}
check "a misaligned offset fails the job before any command is sent" t_bad_offset

t_no_discard() {
	emu VBLK_EMU_OPS=0x1bf -- --name=nodiscard --rw=randtrim --bs=4k --size=1M
	failed_saying "does not support DISCARD commands"
}
check "trim on a disk without DISCARD fails up front" t_no_discard

t_readonly() {
	emu VBLK_EMU_FLAGS=3 VBLK_EMU_OPS=0x10b -- --name=ro --rw=randwrite --bs=4k --size=1M
	failed_saying "is read-only" || return
	emu VBLK_EMU_FLAGS=3 VBLK_EMU_OPS=0x10b -- --name=ro --rw=randread --bs=4k --size=1M \
		--readonly
	ok_job $? && expect_stats "read == 256"
}
check "read-only disk: writes refused up front, reads work" t_readonly

t_max_sectors() {
	emu VBLK_EMU_MAX_SECTORS=256 -- --name=big --rw=read --bs=256k --size=1M
	failed_saying "larger than the largest transfer, 131072 bytes"
}
check "bs above max_sectors fails up front" t_max_sectors

t_segments() {
	emu VBLK_EMU_MAX_SEGMENTS=8 -- --name=segs --rw=read --bs=64k --size=1M
	failed_saying "spans more than max_segments (8) pages" "error=Argument list too long"
}
check "bs above max_segments pages: warned, then E2BIG reported" t_segments

t_mixed() {
	emu -- --name=mixed --rw=randrw --bsrange=4k-128k --iodepth=32 --size=32M \
		--fixedbufs --verify=crc32c --iodepth_batch_submit=8 --iodepth_batch_complete_min=4
	ok_job $? && expect_stats "fixed > 0" "max_batch > 1"
}
check "mixed sizes 4k-128k, QD32, batched submit/complete, fixed buffers, verify" t_mixed

t_example() {
	local job=$FIO_TREE/examples/uring-cmd-vblk.fio
	[[ -r $job ]] || { echo "no $job"; return 1; }
	sed -e "s|^filename=.*|filename=$WORK/vda|" -e "s|^size=.*|size=8M|" "$job" >"$WORK/example.fio"
	rm -f "$WORK/stats"
	(cd "$WORK" && env VBLK_EMU_DEV="$WORK/vda" VBLK_EMU_IMG="$WORK/img" \
		VBLK_EMU_STATS="$WORK/stats" LD_PRELOAD="$EMU" \
		timeout 300 "$FIO" "$WORK/example.fio" >"$WORK/out" 2>&1)
	ok_job $? && expect_stats "discard > 0" "flush > 0" "fixed > 0" "writev > 0" \
		"rings_iopoll == 1" "rings_sqpoll == 1"
}
check "examples/uring-cmd-vblk.fio runs (size 8M)" t_example

echo "$passed passed, $failed failed, $skipped skipped"
((failed == 0))
