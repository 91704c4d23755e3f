# fio's cmd_type=vblk (tools/fio, built into build/fio/fio) on the host,
# without the kernel that has /dev/vblk/vdX:
# - the option is there, and jobs on a missing or wrong device fail with a
#   message saying so;
# - the NVMe side behaves as Debian's fio 3.33 does;
# - fio's copy of the uapi definitions equals the kernel header
#   (build/linux/include/uapi/linux/virtio_blk_cmd.h);
# - fio jobs run end to end against vblk-emu (tests/tools/vblk-emu.c), a
#   userspace stand-in for the character device built from the kernel
#   header, which checks every command against the uapi: each mapping
#   (READ/WRITE, READV/WRITEV, fixed buffers, DISCARD, FLUSH, IOPOLL,
#   SQPOLL), data verified, limits and errors.
# - fio's t/io_uring (build/fio/io_uring) runs its passthrough mode (-u1)
#   on the same stand-in.
# The guest suite pt runs the same fio against the real device.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_ORDER=10
SUITE_NEEDS=(tree fio)
TESTS=(version enghelp missing_device other_chardev regular_file nvme_unchanged
	uapi_copy emu_builds rw vec fixed trim trimwrite flush fdatasync hipri
	hipri_nopoll sqpoll lbs4k lbs_bad_bs bad_offset no_discard read_only
	max_sectors segments mixed example tiou tiou_nopoll)

FIO=${FIO:-$BUILD/fio/fio}
TIOU=${TIOU:-$BUILD/fio/io_uring}
KHDR=$KSRC/include/uapi/linux/virtio_blk_cmd.h
FIO_TREE=${FIO_TREE:-$BUILD/fio-src/fio}
WORK=$BUILD/fio/check
EMU=$WORK/vblk-emu.so
vblk=(--ioengine=io_uring_cmd --cmd_type=vblk --thread --size=1M)

# fails_with MESSAGE FIO-ARGS...: the job fails, saying MESSAGE.
fails_with() {
	local want=$1 out rc
	shift
	out=$("$FIO" "$@" 2>&1)
	rc=$?
	((rc != 0)) || fail "fio succeeded: $out" || return
	grep -qF -- "$want" <<<"$out" || fail "no '$want' in: $out"
}

desc_version="build/fio/fio is fio 3.33"
version() { expect_eq "fio --version" "$("$FIO" --version)" fio-3.33; }

desc_enghelp="--enghelp=io_uring_cmd lists cmd_type with the vblk value"
enghelp() {
	"$FIO" --enghelp=io_uring_cmd | grep -q '^cmd_type' || fail "no cmd_type option" || return
	"$FIO" --enghelp=io_uring_cmd,cmd_type | grep -Eq '^ *: vblk +' ||
		fail "no vblk value: $("$FIO" --enghelp=io_uring_cmd,cmd_type)"
}

desc_missing_device="a job on a missing /dev/vblk/vdz fails clearly and creates nothing"
missing_device() {
	[[ ! -e /dev/vblk/vdz ]] || skip "/dev/vblk/vdz exists on this host" || return
	fails_with "cmd_type=vblk: cannot open /dev/vblk/vdz: No such file or directory" \
		--name=missing --filename=/dev/vblk/vdz "${vblk[@]}" --rw=randwrite || return
	[[ ! -e /dev/vblk/vdz ]] || fail "the job created /dev/vblk/vdz"
}

desc_other_chardev="a job on another character device (/dev/null) fails clearly"
other_chardev() {
	fails_with "VIRTBLK_IOC_GET_INFO on /dev/null failed: Inappropriate ioctl for device" \
		--name=null --filename=/dev/null "${vblk[@]}" --rw=randread
}

desc_regular_file="a job on a regular file fails clearly"
regular_file() {
	local f
	f=$(mktemp)
	echo data >"$f"
	fails_with "$f is not a character device" --name=reg --filename="$f" "${vblk[@]}" --rw=randread
	local rc=$?
	rm -f "$f"
	return $rc
}

desc_nvme_unchanged="cmd_type=nvme fails exactly as Debian's fio 3.33 does (/usr/bin/fio; skipped where Debian's fio is another version, as Debian 13's 3.39)"
nvme_unchanged() {
	local a b f v args=(--name=nvme --ioengine=io_uring_cmd --thread --size=1M --rw=randread)
	v=$(/usr/bin/fio --version 2>&1)
	# Only the same upstream version is a fair reference for unchanged.
	[[ $v == "$("$FIO" --version)" ]] ||
		skip "Debian's fio is $v, ours $("$FIO" --version): the comparison needs the same version (Debian 12's)" || return
	f=$(mktemp)
	echo data >"$f"
	for target in /dev/null "$f"; do
		a=$(/usr/bin/fio "${args[@]}" --filename="$target" 2>&1 | grep -v '^fio-')
		b=$("$FIO" "${args[@]}" --filename="$target" 2>&1 | grep -v '^fio-')
		[[ $a == "$b" ]] || { diff <(echo "$a") <(echo "$b"); rm -f "$f"; fail "$target: outputs differ"; return; }
	done
	rm -f "$f"
}

desc_uapi_copy="fio's uapi copy equals the kernel header (values, sizes, offsets)"
uapi_copy() {
	local d
	[[ -r $KHDR ]] || fail "no $KHDR" || return
	[[ -r $FIO_TREE/engines/vblk.h ]] || fail "no $FIO_TREE/engines/vblk.h" || return
	d=$(mktemp -d)
	mkdir -p "$d/inc/linux"
	cp "$KHDR" "$d/inc/linux/"
	gcc -DKERNEL_HDR -I"$d/inc" -o "$d/vals-kernel" "$TOP/tests/tools/vblk-uapi-vals.c" &&
		gcc -D_GNU_SOURCE -I"$FIO_TREE" -include "$FIO_TREE/config-host.h" \
			-o "$d/vals-fio" "$TOP/tests/tools/vblk-uapi-vals.c" &&
		diff <("$d/vals-kernel") <("$d/vals-fio")
	local rc=$?
	rm -rf "$d"
	((rc == 0)) || fail "the two differ (or do not build)"
}

# emu_ready: build vblk-emu (LD_PRELOAD stand-in for /dev/vblk/vda) from
# the kernel header unless it is up to date, and make its device node and
# 64 MiB image.
emu_ready() {
	local src=$TOP/tests/tools/vblk-emu.c
	mkdir -p "$WORK/inc/linux"
	if [[ ! -f $EMU || $EMU -ot $src || $EMU -ot $KHDR ]]; then
		cp "$KHDR" "$WORK/inc/linux/" &&
			gcc -O2 -Wall -Wextra -Werror -Wno-unused-parameter -shared -fPIC \
				-I"$WORK/inc" -o "$EMU.tmp" "$src" -lpthread &&
			mv "$EMU.tmp" "$EMU" || fail "vblk-emu does not build" || return
	fi
	[[ -c $WORK/vda ]] || mknod "$WORK/vda" c 1 3 || fail "mknod $WORK/vda failed (needs root)" || return
	[[ -f $WORK/img ]] || truncate -s 64M "$WORK/img"
}

desc_emu_builds="vblk-emu builds from the kernel header"
emu_builds() {
	rm -f "$EMU"
	emu_ready
}

# emu VAR=VALUE... -- FIO-ARGS...: run fio on the emulated device; the
# output is in $WORK/out, the emulator's counters in $WORK/stats.
emu() {
	local envs=()
	emu_ready || return
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
		[[ -n $got ]] || { cat "$WORK/out"; fail "no counter $name"; return; }
		case $op in
		==) ((got == want)) ;;
		'>') ((got > want)) ;;
		*) false ;;
		esac || { cat "$WORK/out" "$WORK/stats"; fail "$name=$got, want $op $want"; return; }
	done
}
# failed_saying MESSAGE... (right after emu): the job failed and its output
# has every MESSAGE.
failed_saying() {
	local rc=$? m
	((rc != 0)) || { cat "$WORK/out"; fail "fio succeeded"; return; }
	for m in "$@"; do
		grep -qF -- "$m" "$WORK/out" || { cat "$WORK/out"; fail "no '$m' in the output"; return; }
	done
}
# ok_job RC: the job passed, no command was rejected or failed.
ok_job() {
	(($1 == 0)) || { cat "$WORK/out"; fail "fio exit status $1"; return; }
	! grep -Eq 'err= *[1-9]' "$WORK/out" || { cat "$WORK/out"; fail "fio reports errors"; return; }
	expect_stats "rejected == 0" "failed == 0" "overflow == 0" "rings_sqe128 > 0" "rings_cqe32 == 0"
}

desc_rw="randrw QD16 + verify: READ and WRITE, res = bytes, data verified"
rw() {
	emu -- --name=rw --rw=randrw --bs=4k --iodepth=16 --size=32M --verify=crc32c
	ok_job $? && expect_stats "read > 4096" "write > 2048" "readv == 0" "writev == 0" \
		"fixed == 0" "ioctl_get_info > 0"
}

desc_vec="nonvectored=0: READV and WRITEV (one iovec), data verified"
vec() {
	emu -- --name=vec --rw=write --bs=64k --iodepth=4 --size=16M --nonvectored=0 --verify=md5
	ok_job $? && expect_stats "readv > 0" "writev == 256" "read == 0" "write == 0"
}

desc_fixed="fixedbufs + registerfiles: IORING_URING_CMD_FIXED inside the registered buffers"
fixed() {
	emu -- --name=fixed --rw=randwrite --bs=8k --iodepth=8 --size=16M --fixedbufs \
		--registerfiles --verify=crc32c
	ok_job $? && expect_stats "write == 2048" "read == 2048" "fixed == 4096" \
		"registered_file == 4096"
}

desc_trim="randtrim: DISCARD commands through the ring, nr_sectors = bs/512"
trim() {
	emu -- --name=trim --rw=randtrim --bs=64k --iodepth=8 --size=32M
	ok_job $? && expect_stats "discard == 512" "discard_bytes == 33554432" "write == 0"
}

desc_trimwrite="trimwrite: DISCARD then WRITE"
trimwrite() {
	emu -- --name=trimwrite --rw=trimwrite --bs=16k --iodepth=4 --size=8M
	ok_job $? && expect_stats "discard == 512" "write == 512"
}

desc_flush="fsync=64 + end_fsync: FLUSH commands with zero fields"
flush() {
	emu -- --name=flush --rw=write --bs=4k --iodepth=4 --size=4M --fsync=64 --end_fsync=1
	ok_job $? && expect_stats "write == 1024" "flush > 15"
}

desc_fdatasync="fdatasync and sync_file_range: FLUSH"
fdatasync() {
	emu -- --name=fdatasync --rw=randwrite --bs=4k --iodepth=2 --size=1M --fdatasync=16 \
		--sync_file_range=write:32
	ok_job $? && expect_stats "flush > 15"
}

desc_hipri="hipri: IORING_SETUP_IOPOLL ring, polled completions"
hipri() {
	emu -- --name=hipri --rw=randread --bs=4k --iodepth=8 --size=8M --hipri
	ok_job $? && expect_stats "rings_iopoll == 1" "polled == 2048" "read == 2048"
}

desc_hipri_nopoll="hipri on a disk without poll queues: warned, then EOPNOTSUPP reported"
hipri_nopoll() {
	emu VBLK_EMU_FLAGS=2 -- --name=hipri --rw=randread --bs=4k --size=1M --hipri
	failed_saying "has no poll queues" "error=Operation not supported"
}

desc_sqpoll="sqthread_poll (registered files): commands without io_uring_enter"
sqpoll() {
	emu -- --name=sqpoll --rw=randrw --bs=4k --iodepth=16 --size=8M --sqthread_poll \
		--verify=crc32c
	ok_job $? && expect_stats "rings_sqpoll == 1" "registered_file > 0" "write > 0" \
		"read > 1024"
}

desc_lbs4k="4096-byte logical blocks: sector = offset/512, aligned"
lbs4k() {
	emu VBLK_EMU_LBS=4096 -- --name=lbs --rw=randwrite --bs=4k --iodepth=4 --size=8M \
		--verify=crc32c
	ok_job $? && expect_stats "write == 2048"
}

desc_lbs_bad_bs="bs=512 on a 4096-byte-block disk fails up front"
lbs_bad_bs() {
	emu VBLK_EMU_LBS=4096 -- --name=lbs --rw=randread --bs=512 --size=1M
	failed_saying "must be multiples of the logical block size, 4096" || return
	expect_stats "read == 0"
}

desc_bad_offset="a misaligned offset fails the job before any command is sent"
bad_offset() {
	emu VBLK_EMU_LBS=4096 -- --name=off --rw=read --bs=4k --offset=512 --size=1M
	failed_saying "offset 512 or length 4096 is not a multiple" || return
	expect_stats "read == 0"
}

desc_no_discard="trim on a disk without DISCARD fails up front"
no_discard() {
	emu VBLK_EMU_OPS=0x1bf -- --name=nodiscard --rw=randtrim --bs=4k --size=1M
	failed_saying "does not support DISCARD commands"
}

desc_read_only="read-only disk: writes refused up front, reads work"
read_only() {
	emu VBLK_EMU_FLAGS=3 VBLK_EMU_OPS=0x10b -- --name=ro --rw=randwrite --bs=4k --size=1M
	failed_saying "is read-only" || return
	emu VBLK_EMU_FLAGS=3 VBLK_EMU_OPS=0x10b -- --name=ro --rw=randread --bs=4k --size=1M \
		--readonly
	ok_job $? && expect_stats "read == 256"
}

desc_max_sectors="bs above max_sectors fails up front"
max_sectors() {
	emu VBLK_EMU_MAX_SECTORS=256 -- --name=big --rw=read --bs=256k --size=1M
	failed_saying "larger than the largest transfer, 131072 bytes"
}

desc_segments="bs above max_segments pages: warned, then E2BIG reported"
segments() {
	emu VBLK_EMU_MAX_SEGMENTS=8 -- --name=segs --rw=read --bs=64k --size=1M
	failed_saying "spans more than max_segments (8) pages" "error=Argument list too long"
}

desc_mixed="mixed sizes 4k-128k, QD32, batched submit/complete, fixed buffers, verify"
mixed() {
	emu -- --name=mixed --rw=randrw --bsrange=4k-128k --iodepth=32 --size=32M \
		--fixedbufs --verify=crc32c --iodepth_batch_submit=8 --iodepth_batch_complete_min=4
	ok_job $? && expect_stats "fixed > 0" "max_batch > 1"
}

desc_example="examples/uring-cmd-vblk.fio runs (size 8M)"
example() {
	local job=$FIO_TREE/examples/uring-cmd-vblk.fio
	[[ -r $job ]] || fail "no $job" || return
	emu_ready || return
	sed -e "s|^filename=.*|filename=$WORK/vda|" -e "s|^size=.*|size=8M|" "$job" >"$WORK/example.fio"
	rm -f "$WORK/stats"
	(cd "$WORK" && env VBLK_EMU_DEV="$WORK/vda" VBLK_EMU_IMG="$WORK/img" \
		VBLK_EMU_STATS="$WORK/stats" LD_PRELOAD="$EMU" \
		timeout 300 "$FIO" "$WORK/example.fio" >"$WORK/out" 2>&1)
	ok_job $? && expect_stats "discard > 0" "flush > 0" "fixed > 0" "writev > 0" \
		"rings_iopoll == 1" "rings_sqpoll == 1"
}

# tiou VAR=VALUE... -- T/IO_URING-ARGS...: run t/io_uring in passthrough
# mode on the emulated device, like emu does fio.
tiou_run() {
	local envs=()
	emu_ready || return
	[[ -x $TIOU ]] || fail "no $TIOU (make fio)" || return
	while [[ $1 != -- ]]; do
		envs+=("$1")
		shift
	done
	shift
	rm -f "$WORK/stats"
	env VBLK_EMU_DEV="$WORK/vda" VBLK_EMU_IMG="$WORK/img" VBLK_EMU_STATS="$WORK/stats" \
		"${envs[@]}" LD_PRELOAD="$EMU" timeout 60 "$TIOU" -u1 -O0 "$@" "$WORK/vda" \
		>"$WORK/out" 2>&1
}

desc_tiou="t/io_uring -u1: virtio-blk READs, fixed buffers, registered files; irq and IOPOLL; totals match"
tiou() {
	local p ios
	for p in 0 1; do
		tiou_run -- -p"$p" -d8 -s4 -c4 -r1 || { cat "$WORK/out"; fail "t/io_uring -p$p failed"; return; }
		ios=$(sed -n 's/^Total: ios=\([0-9]*\) .*/\1/p' "$WORK/out")
		[[ -n $ios ]] || { cat "$WORK/out"; fail "no Total line"; return; }
		expect_stats "read == $ios" "fixed == $ios" "registered_file == $ios" "rings_iopoll == $p" \
			"rejected == 0" "failed == 0" "overflow == 0" "rings_cqe32 == 1" "read > 100" || return
	done
}

desc_tiou_nopoll="t/io_uring -u1 -p1 on a disk without poll queues: refused before any I/O"
tiou_nopoll() {
	tiou_run VBLK_EMU_FLAGS=2 -- -p1 -d8 -s4 -c4 -r1
	failed_saying "polled I/O needs a poll queue" && expect_stats "read == 0"
}
