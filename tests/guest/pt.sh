# io_uring passthrough on the virtio-blk character device /dev/vblk/vdX.
# Booted with 2 vCPUs, a two-queue file disk with one poll queue (vstor0), a
# second two-queue file disk for unplugging (vstor1) and a read-only file disk
# (vstor2). The commands are sent by build/tools/vblk_pt (tests/tools).
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

# The guest this suite boots (vm/vm.sh options) and what it needs built.
SUITE_VM=(--cpus 2 --disk file:queues=2 --disk file --disk file:ro --disk file:bus=nvme
	--append virtio_blk.num_poll_queues=1)
SUITE_NEEDS=(kernel tools fio)

TESTS=(pt_node pt_info pt_get_id pt_cross_check pt_polled_no_irq pt_poll_other_task
	pt_segments pt_ranges pt_hostile pt_perms pt_readonly pt_concurrent
	pt_queue_full pt_late_sqe pt_cancel pt_exit_defer pt_exec_inflight pt_poll_runtime pt_fio_verify pt_fio_cross
	pt_fio_trim_flush pt_compat32 pt_unplug)

PT=$TOOLS/vblk_pt

# pt ARGS...: run vblk_pt, show its output, pass its exit status on.
pt() {
	local out rc
	out=$("$PT" "$@" 2>&1)
	rc=$?
	((rc == 0)) || echo "vblk_pt $*: $out"
	return $rc
}

# pt_expect RESULT ARGS...: the command's result is RESULT (ok or an errno).
pt_expect() {
	local want=$1
	shift
	pt -e "$want" "$@" || fail "vblk_pt $* did not give $want"
}

pt_disk() { disk_by_serial vstor0; }

# info_field DEV NAME: one field of GET_INFO (from the ioctl).
info_field() {
	"$PT" "$1" ioctl-info | tr ' ' '\n' | sed -n "s/^$2=//p"
}

desc_pt_node="each disk has /dev/vblk/vdX: char device, mode 0600, class virtblk-generic, child of its virtio device; gone on unbind, back on bind"
pt_node() {
	local s d v major
	major=$(awk '$2 == "virtblk-generic" { print $1 }' /proc/devices)
	[[ -n $major ]] || fail "no virtblk-generic in /proc/devices" || return
	for s in vstor0 vstor1 vstor2; do
		d=$(disk_by_serial $s) || fail "no $s" || return
		v=$(virtio_dev "$d")
		[[ -c /dev/vblk/$d ]] || fail "/dev/vblk/$d is not a character device" || return
		expect_eq "$d mode" "$(stat -c %a "/dev/vblk/$d")" 600 || return
		expect_eq "$d major" "$((16#$(stat -c %t "/dev/vblk/$d")))" "$major" || return
		expect_eq "$d sysfs" "$(readlink -f "/sys/class/virtblk-generic/$d")" \
			"$(readlink -f "/sys/bus/virtio/devices/$v")/virtblk-generic/$d" || return
		grep -qx "DEVNAME=vblk/$d" "/sys/class/virtblk-generic/$d/uevent" ||
			fail "$d uevent has no DEVNAME=vblk/$d" || return
	done
	d=$(disk_by_serial vstor1)
	v=$(virtio_dev "$d")
	echo "$v" >/sys/bus/virtio/drivers/virtio_blk/unbind || fail "unbind" || return
	[[ ! -e /dev/vblk/$d && ! -e /sys/class/virtblk-generic/$d ]] ||
		fail "/dev/vblk/$d still there after unbind" || return
	echo "$v" >/sys/bus/virtio/drivers/virtio_blk/bind || fail "bind" || return
	d=$(disk_by_serial vstor1) || fail "vstor1 did not come back" || return
	[[ -c /dev/vblk/$d ]] || fail "/dev/vblk/$d not back after bind"
}

desc_pt_info="GET_INFO (uring_cmd and ioctl) matches sysfs: capacity, block size, segments, poll queues, supported commands; a larger caller struct (up to 4096 bytes) is filled, its tail zeroed, the result is the kernel size (72); below 72 is EINVAL, above 4096 E2BIG"
pt_info() {
	local d u i
	d=$(pt_disk) || return
	u=$("$PT" -v "/dev/vblk/$d" info | head -n1)
	i=$("$PT" "/dev/vblk/$d" ioctl-info)
	note "$i"
	expect_eq "uring_cmd vs ioctl" "$u" "$i" || return
	expect_eq capacity "$(info_field "/dev/vblk/$d" capacity)" "$(cat "/sys/block/$d/size")" || return
	expect_eq lbs "$(info_field "/dev/vblk/$d" lbs)" \
		"$(cat "/sys/block/$d/queue/logical_block_size")" || return
	expect_eq max_segments "$(info_field "/dev/vblk/$d" max_segments)" \
		"$(cat "/sys/block/$d/queue/max_segments")" || return
	expect_eq nr_poll_queues "$(info_field "/dev/vblk/$d" nr_poll_queues)" \
		"$(cat "/sys/block/$d/num_poll_queues")" || return
	# All nine commands; POLL and WRITE_CACHE flags, not READ_ONLY.
	expect_eq ops "$(info_field "/dev/vblk/$d" ops)" 0x1ff || return
	expect_eq flags "$(info_field "/dev/vblk/$d" flags)" 0x6 || return
	# The structure can grow: a caller's larger one, up to 4096 bytes
	# (VIRTBLK_INFO_SIZE_MAX), is filled and its tail zeroed, the result
	# is the kernel's size; below the first version's size is EINVAL,
	# above 4096 E2BIG.
	"$PT" -l 4096 "/dev/vblk/$d" info >/tmp/gi.out || fail "GET_INFO with len 4096: $(cat /tmp/gi.out)" || return
	expect_eq "GET_INFO result with len 4096" "$(sed -n 's/^result=//p' /tmp/gi.out)" 72 || return
	pt -l 72 "/dev/vblk/$d" info >/dev/null || fail "GET_INFO with len 72 failed" || return
	pt -l 71 -e EINVAL "/dev/vblk/$d" info >/dev/null || fail "GET_INFO with len 71 was not EINVAL" || return
	pt -l 4097 -e E2BIG "/dev/vblk/$d" info >/dev/null || fail "GET_INFO with len 4097 was not E2BIG" || return
	pt -l 1048576 -e E2BIG "/dev/vblk/$d" info >/dev/null || fail "GET_INFO with len 1 MiB was not E2BIG"
}

desc_pt_get_id="GET_ID returns the serial sysfs shows"
pt_get_id() {
	local s d id
	for s in vstor0 vstor2; do
		d=$(disk_by_serial $s) || return
		id=$("$PT" -v "/dev/vblk/$d" get-id | sed -n 's/^id=//p' | tr -d '\0')
		expect_eq "$d id" "$id" "$(cat "/sys/block/$d/serial")" || return
	done
}

desc_pt_cross_check="data written through passthrough reads back through the block device and vice versa: read/write/readv/writev, 512 B to 256 KiB, plain/fixed buffers, interrupt/polled"
pt_cross_check() {
	local d dev len fixed poll sector=0 seed=1 op rop opts
	d=$(pt_disk) || return
	dev=/dev/vblk/$d
	for len in 512 4096 65536 262144; do
		for poll in "" -P; do
			for fixed in "" -F; do
				for op in write writev; do
					[[ $op == writev && -n $fixed ]] && continue
					opts=(-p "$seed" -s "$sector" -l "$len" -c 4 -q 2)
					[[ -z $poll ]] || opts+=("$poll")
					[[ $op == writev ]] && opts+=(-S 3)
					pt "${opts[@]}" $fixed "$dev" $op ||
						fail "passthrough $op ${opts[*]} $fixed" || return
					pt -p $seed -s $sector -l $len -c 4 "/dev/$d" bdev-read ||
						fail "block device read-back of $op ${opts[*]} $fixed" || return
					seed=$((seed + 1))
					pt -p $seed -s $sector -l $len -c 4 "/dev/$d" bdev-write ||
						fail "block device write" || return
					rop=${op/write/read}
					opts[1]=$seed
					pt "${opts[@]}" $fixed "$dev" "$rop" ||
						fail "passthrough $rop ${opts[*]} $fixed of block-device data" || return
					seed=$((seed + 1))
					sector=$((sector + 4 * len / 512))
				done
			done
		done
	done
	note "$((seed - 1)) patterns checked"
}

desc_pt_polled_no_irq="passthrough on an IOPOLL ring completes by polling (no request-queue interrupts); without IOPOLL about one per command"
pt_polled_no_irq() {
	local d v before polled plain
	d=$(pt_disk) || return
	v=$(virtio_dev "$d")
	before=$(irq_sum "^$v-req")
	pt -P -c 2000 -s 0 -l 4096 "/dev/vblk/$d" read || return
	polled=$(($(irq_sum "^$v-req") - before))
	before=$(irq_sum "^$v-req")
	pt -c 2000 -s 0 -l 4096 "/dev/vblk/$d" read || return
	plain=$(($(irq_sum "^$v-req") - before))
	note "2000 reads: $polled interrupts polled, $plain not polled"
	((polled == 0)) || fail "$polled interrupts during polled passthrough" || return
	((plain >= 1000)) || fail "only $plain interrupts for 2000 interrupt-driven reads"
}

desc_pt_poll_other_task="reads into buffers the block layer bounces (one byte into a page), plain and registered, found done by another task polling the same ring (a forked child that alone polls it, consuming the CQEs as they come, for 60 s at most): the submitter's buffer gets the data; the same on an interrupt-driven ring, and with polled completions that come apart (QEMU at 20 IOPS)"
pt_poll_other_task() {
	local d seed=4242 sector=300000 poll fixed
	d=$(pt_disk) || return
	# An odd address is off any DMA alignment the disk can have.
	(($(cat "/sys/block/$d/queue/dma_alignment") >= 1)) ||
		fail "dma_alignment 0: nothing would be bounced" || return
	pt -p $seed -s $sector -l 65536 -c 4 "/dev/$d" bdev-write || fail "block device write" || return
	for poll in -P ""; do
		for fixed in "" -F; do
			# The child polls; a plain buffer's bounced data must be copied
			# in the submitter's memory, not in the child's copy of it.
			pt $poll $fixed -C -O 1 -p $seed -s $sector -l 4096 -c 64 -q 4 "/dev/vblk/$d" read ||
				fail "reads${poll:+ (polled)}${fixed:+ (registered buffers)} reaped by a child" || return
			pt $poll $fixed -C -O 1 -p $seed -s $sector -l 65536 -c 4 -q 2 "/dev/vblk/$d" read ||
				fail "64 KiB reads${poll:+ (polled)}${fixed:+ (registered buffers)} reaped by a child" || return
		done
	done
	# Completions that come apart: QEMU at 20 IOPS, four reads of one block
	# a round (adjacent ones would be merged into one request), so a poll
	# pass finds some done and a later one the rest. io_uring does not poll
	# a ring whose CQ holds unconsumed entries: a child that left the first
	# ones for the parent never saw the rest (the bimodal failures of this
	# test on loaded machines, which took the child's whole loop).
	pt -p $seed -s $sector -l 4096 -c 1 "/dev/$d" bdev-write || fail "block device write" || return
	qemu_throttle vdisk0 20 || return
	pt -P -C -O 1 -p $seed -s $sector -w 8 -l 4096 -c 8 -q 4 "/dev/vblk/$d" read ||
		{ qemu_throttle vdisk0 0; fail "polled reads that complete apart, reaped by a child"; return; }
	qemu_throttle vdisk0 0
}

desc_pt_segments="vectored commands with 1 to max_segments discontiguous segments verify both ways; one more is E2BIG; the same for the pages of a plain and a registered buffer, page-aligned or not"
pt_segments() {
	local d dev max n seed=100 sector=200000
	d=$(pt_disk) || return
	dev=/dev/vblk/$d
	max=$(info_field "$dev" max_segments)
	for n in 1 2 3 17 128 "$max"; do
		pt -p $seed -s $sector -S "$n" -l $((n * 512)) "$dev" writev ||
			fail "writev with $n segments" || return
		pt -p $seed -s $sector -l $((n * 512)) "/dev/$d" bdev-read ||
			fail "read-back of writev with $n segments" || return
		pt -p $seed -s $sector -S "$n" -l $((n * 512)) "$dev" readv ||
			fail "readv with $n segments" || return
		pt -P -p $seed -s $sector -S "$n" -l $((n * 512)) "$dev" readv ||
			fail "polled readv with $n segments" || return
		seed=$((seed + 1))
	done
	pt_expect E2BIG -S $((max + 1)) -l $(((max + 1) * 512)) "$dev" readv || return
	pt -p $seed -s $sector -l $((max * 4096)) "$dev" write ||
		fail "write of $max pages" || return
	pt -p $seed -s $sector -l $((max * 4096)) "$dev" read ||
		fail "read of $max pages" || return
	pt -F -p $seed -s $sector -l $((max * 4096)) "$dev" read ||
		fail "fixed-buffer read of $max pages" || return
	pt_expect E2BIG -l $(((max + 1) * 4096)) "$dev" read || return
	pt_expect E2BIG -F -l $(((max + 1) * 4096)) "$dev" read || return
	# max pages of data 512 bytes into a page span max + 1 pages.
	pt_expect E2BIG -O 512 -l $((max * 4096)) "$dev" read || return
	pt_expect E2BIG -F -O 512 -l $((max * 4096)) "$dev" read || return
	pt -F -O 512 -p $seed -s $sector -l $(((max - 1) * 4096)) "$dev" read ||
		fail "fixed-buffer read of $((max - 1)) pages 512 bytes into a page"
}

# zeroes DISK SECTOR COUNT: the sectors read back as zeroes.
zeroes() {
	cmp -s <(dd if="/dev/$1" bs=512 skip="$2" count="$3" iflag=direct 2>/dev/null) \
		<(head -c $(($3 * 512)) /dev/zero)
}

desc_pt_ranges="WRITE_ZEROES (with and without UNMAP) zeroes exactly its range; DISCARD and FLUSH succeed"
pt_ranges() {
	local d dev s=300000 f
	d=$(pt_disk) || return
	dev=/dev/vblk/$d
	for f in 0 1; do
		pt -p 5 -s $s -l 65536 "$dev" write || return
		pt -f $f -s $((s + 8)) -n 16 "$dev" write-zeroes || fail "write-zeroes flags $f" || return
		zeroes "$d" $((s + 8)) 16 || fail "range not zeroed (flags $f)" || return
		pt -p 5 -s $s -l 4096 "/dev/$d" bdev-read || fail "data before the range changed" || return
		pt -p 5 -s $((s + 24)) -l $((65536 - 12288)) "/dev/$d" bdev-read ||
			fail "data after the range changed" || return
	done
	pt -s $s -n 128 "$dev" discard || fail "discard" || return
	pt -P -s $s -n 128 "$dev" discard || fail "polled discard" || return
	pt "$dev" flush || fail "flush" || return
	pt -P "$dev" flush || fail "polled flush"
}

desc_pt_hostile="malformed commands each get their errno and leave the disk usable: opcode, reserved fields, flags, SQE size, lengths, ranges, limits, unmapped buffers and iovecs"
pt_hostile() {
	local d dev cap c=0 bad=0
	d=$(pt_disk) || return
	dev=/dev/vblk/$d
	cap=$(cat "/sys/block/$d/size")
	while read -r want args; do
		[[ -n $want ]] || continue
		# shellcheck disable=SC2086
		pt -e "$want" $args || { fail "$args: want $want"; bad=$((bad + 1)); }
		c=$((c + 1))
	done <<EOF
ENOTTY -X 1234 $dev read
ENOTTY -X c040b909 $dev read
ENOTTY -X 8040b901 $dev read
ENOTTY -X c040b801 $dev read
EINVAL -R 0=1 $dev read
EINVAL -R 3=0x8000000000000000 $dev read
EINVAL -R 4=1 $dev write
EINVAL -f 2 $dev read
EINVAL -f 1 $dev write
EINVAL -n 8 $dev read
EINVAL -s 8 $dev flush
EINVAL -A 4096 -s 0 -n 8 $dev discard
EINVAL -A 4096 -s 0 -n 8 $dev write-zeroes
EINVAL -s 0 -n 0 $dev discard
EINVAL -s 8 $dev get-id
EINVAL -l 10 $dev get-id
EINVAL -F -S 2 $dev readv
EINVAL -F $dev flush
EOPNOTSUPP -N $dev read
EOPNOTSUPP -N $dev info
EINVAL -l 0 $dev read
EINVAL -l 100 $dev read
EINVAL -l 1000 $dev write
ERANGE -s $((cap - 4)) -l 4096 $dev read
ERANGE -s $cap -l 512 $dev write
ERANGE -s $cap -n 8 $dev discard
ERANGE -s $((cap - 1)) -n 2 $dev write-zeroes
EOVERFLOW -s 0xfffffffffffffff8 -l 4096 $dev read
EOVERFLOW -s 0xfffffffffffffff8 -n 16 $dev write-zeroes
E2BIG -s 0 -n 0xffffffff $dev write-zeroes
E2BIG -S 1025 -l 524800 $dev readv
EFAULT -U $dev read
EFAULT -U $dev write
EFAULT -U $dev info
EFAULT -U $dev get-id
EFAULT -I -S 4 $dev readv
EFAULT -B -S 4 $dev writev
EFAULT -F -A 4096 $dev read
EOF
	note "$c malformed commands checked"
	((bad == 0)) || return 1
	pt -p 77 -s 4096 -l 65536 -q 4 -c 16 "$dev" write || fail "disk not usable afterwards" || return
	pt -p 77 -s 4096 -l 65536 -q 4 -c 16 "$dev" read || fail "disk not usable afterwards" || return
	quick_verify "$d" 1
}

# op_args OP: valid arguments for a command that the permission and
# read-only checks can then judge.
op_args() {
	case $1 in
	discard | write-zeroes) echo "-s 400000 -n 8" ;;
	read | write | readv | writev) echo "-s 400000" ;;
	esac
}

# as_nobody ARGS...: vblk_pt as an unprivileged user.
as_nobody() {
	setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
		--bounding-set=-all "$PT" "$@" >/dev/null 2>&1
}

desc_pt_perms="an unprivileged user reads with a read-only open, writes with a write-only one, nothing more; root needs CAP_SYS_ADMIN beyond its open mode"
pt_perms() {
	local d dev op want mode bad=0
	d=$(pt_disk) || return
	dev=/dev/vblk/$d
	as_nobody -e EACCES "$dev" info || fail "nobody opened a 0600 node" || return
	chmod 0666 "$dev"
	while read -r mode op want; do
		# shellcheck disable=SC2046
		as_nobody -m "$mode" -e "$want" $(op_args "$op") "$dev" "$op" ||
			{ fail "nobody, $mode open, $op: want $want"; bad=$((bad + 1)); }
	done <<'EOF'
rdonly info ok
rdonly read ok
rdonly readv ok
rdonly get-id ok
rdonly write EACCES
rdonly writev EACCES
rdonly flush EACCES
rdonly discard EACCES
rdonly write-zeroes EACCES
wronly info ok
wronly read EACCES
wronly readv EACCES
wronly get-id EACCES
wronly write ok
wronly writev ok
wronly flush ok
wronly discard ok
wronly write-zeroes ok
rdwr read ok
rdwr write ok
EOF
	chmod 0600 "$dev"
	((bad == 0)) || return 1
	pt -m rdonly -e ok "$dev" write || fail "root with CAP_SYS_ADMIN, rdonly open, write" || return
	setpriv --inh-caps=-sys_admin --bounding-set=-sys_admin \
		"$PT" -m rdonly -e EACCES "$dev" write >/dev/null ||
		fail "root without CAP_SYS_ADMIN wrote through a read-only open" || return
	setpriv --inh-caps=-sys_admin --bounding-set=-sys_admin \
		"$PT" -m rdonly -e ok "$dev" read >/dev/null ||
		fail "root without CAP_SYS_ADMIN could not read"
}

desc_pt_readonly="a read-only disk: GET_INFO says so and lists no writing command; writes, FLUSH, DISCARD, WRITE_ZEROES get EROFS; reads work"
pt_readonly() {
	local d dev op
	d=$(disk_by_serial vstor2) || return
	dev=/dev/vblk/$d
	# READ_ONLY; WRITE_CACHE and POLL as any disk here.
	expect_eq flags "$(info_field "$dev" flags)" 0x7 || return
	expect_eq ops "$(info_field "$dev" ops)" 0x10b || return
	for op in write writev flush discard write-zeroes; do
		# shellcheck disable=SC2046
		pt_expect EROFS $(op_args $op) "$dev" $op || return
	done
	pt_expect ok -c 16 "$dev" read
}

desc_pt_concurrent="passthrough (interrupt and polled) and block-device fio verify jobs on the same disk at once"
pt_concurrent() {
	local d dev fpid rc=0
	d=$(pt_disk) || return
	dev=/dev/vblk/$d
	fio_json /tmp/cc.json --name=cc --filename="/dev/$d" --ioengine=io_uring \
		--direct=1 --rw=randwrite --bs=4k --iodepth=16 --size=64M \
		--verify=crc32c --numjobs=1 &
	fpid=$!
	pt -p 11 -s 262144 -l 16384 -q 16 -c 2000 "$dev" write || rc=1
	pt -P -p 11 -s 262144 -l 16384 -q 16 -c 2000 "$dev" read || rc=1
	pt -p 11 -s 262144 -l 16384 -q 16 -c 2000 "/dev/$d" bdev-read || rc=1
	wait $fpid || fail "block-device fio verify failed" || return
	((rc == 0)) || fail "passthrough job failed next to block-device I/O"
}

desc_pt_queue_full="more commands in flight than the disk has tags (nr_requests lowered to 8): the NOWAIT allocations that fail go to io_uring's workers and every command completes, interrupt-driven and polled"
pt_queue_full() {
	local d nr rc
	d=$(pt_disk) || return
	nr=$(cat "/sys/block/$d/queue/nr_requests")
	echo 8 >"/sys/block/$d/queue/nr_requests" || fail "cannot lower nr_requests" || return
	pt_queue_full_body "$d" 8
	rc=$?
	echo "$nr" >"/sys/block/$d/queue/nr_requests"
	return $rc
}

# pt_queue_full_body DISK TAGS
pt_queue_full_body() {
	local d=$1 depth=$2 dev qd poll pid n workers mode seed=41
	dev=/dev/vblk/$d
	qd=$((depth * 8))
	for poll in "" -P; do
		workers=0
		"$PT" $poll -p $seed -s 1000000 -w 32768 -l 4096 -q $qd -c 8192 \
			"$dev" write >/tmp/qf.out 2>&1 &
		pid=$!
		while kill -0 $pid 2>/dev/null; do
			n=$(cat /proc/$pid/task/*/comm 2>/dev/null | grep -c '^iou-wrk')
			((n > workers)) && workers=$n
			sleep 0.02
		done
		wait $pid || fail "job with $qd in flight: $(cat /tmp/qf.out)" || return
		mode=interrupt-driven
		[[ -n $poll ]] && mode=polled
		note "$mode: $qd in flight on $depth tags, up to $workers io_uring workers"
		((workers > 0)) || fail "no command went to an io_uring worker" || return
		pt $poll -p $seed -s 1000000 -w 32768 -l 4096 -q $qd -c 4096 "$dev" read ||
			fail "read-back" || return
		seed=$((seed + 1))
	done
}

# busy_requests DISK: requests the disk's hardware queues hold.
busy_requests() { cat /sys/kernel/debug/block/"$1"/hctx*/busy | wc -l; }

desc_pt_late_sqe="linked and drained commands (issued after the submission returned: chains, all drained, a chain whose last command is drained) run from their own copy of the SQE: the SQ ring is overwritten right after each submission, every write lands and reads back, interrupt-driven and polled, on virtio-blk and on NVMe passthrough"
pt_late_sqe() {
	local d dev poll flags nvme seed=73 rc=0
	d=$(pt_disk) || return
	for nvme in "" -V; do
		dev=$(pt_dev "$d" "$nvme") || return
		for poll in "" -P; do
			for flags in -L -D "-L -D" "-L -d"; do
				# shellcheck disable=SC2086 # option lists
				pt $nvme $poll $flags -Z -p $seed -s 2000000 -l 8192 -q 16 -c 512 "$dev" write ||
					{ rc=1; note "$dev: writes with $poll $flags -Z failed"; }
				# shellcheck disable=SC2086
				pt $nvme $poll -p $seed -s 2000000 -l 8192 -q 16 -c 512 "$dev" read ||
					{ rc=1; note "$dev: data of $poll $flags -Z did not read back"; }
				seed=$((seed + 1))
			done
		done
	done
	((rc == 0)) || fail "a command read its SQE slot after the submission returned"
}

desc_pt_cancel="rings that exit or are killed with commands in flight (interrupt and IOPOLL) leak nothing and leave the disk usable"
pt_cancel() {
	local d dev i poll pid
	d=$(pt_disk) || return
	dev=/dev/vblk/$d
	for poll in "" -P; do
		for ((i = 0; i < 20; i++)); do
			pt $poll -K -q 64 -c 64 -l 65536 "$dev" read || fail "exit with I/O in flight" || return
			pt $poll -K -q 32 -c 32 -l 65536 -p 3 -s 500000 "$dev" write || return
		done
		"$PT" $poll -q 32 -c 100000000 -w 65536 -l 4096 "$dev" read >/dev/null 2>&1 &
		pid=$!
		sleep 1
		kill -9 $pid
		wait $pid 2>/dev/null
	done
	sleep 1
	expect_eq "requests left in the queues" "$(busy_requests "$d")" 0 || return
	pt -p 12 -s 8192 -l 4096 -q 8 -c 256 "$dev" write || return
	pt -P -p 12 -s 8192 -l 4096 -q 8 -c 256 "$dev" read || return
	quick_verify "$d" 1
}

# pt_dev DISK NVME: the passthrough node to test, /dev/vblk/DISK, or with
# NVME (-V) the NVMe generic device.
pt_dev() {
	local dev
	if [[ -z $2 ]]; then
		echo "/dev/vblk/$1"
		return
	fi
	for dev in /dev/ng*n1; do [[ -c $dev ]] && break; done
	# on stderr: the caller captures stdout
	[[ -c $dev ]] || { fail "no NVMe generic device" >&2; return 1; }
	echo "$dev"
}

# exit_workers_spinning: the io_uring exit workers (kworker "iou_exit")
# that used more than half of a CPU over the last second.
exit_workers_spinning() {
	local pid t0 t1 busy=()
	declare -A t
	for pid in $(ps -eo pid,comm | awk '$2 ~ /iou_exit/ { print $1 }'); do
		t[$pid]=$(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null)
	done
	sleep 1
	for pid in "${!t[@]}"; do
		t0=${t[$pid]} t1=$(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null)
		[[ -n $t0 && -n $t1 ]] && ((t1 - t0 > $(getconf CLK_TCK) / 2)) && busy+=("$pid")
	done
	echo "${busy[*]}"
}

desc_pt_exit_defer="IOPOLL rings set up with DEFER_TASKRUN that exit with passthrough commands in flight are torn down: no io_uring exit worker is left polling for ever (virtio-blk and NVMe)"
pt_exit_defer() {
	local d dev nvme i spin
	d=$(pt_disk) || return
	for nvme in "" -V; do
		dev=$(pt_dev "$d" "$nvme") || return
		for ((i = 0; i < 10; i++)); do
			# shellcheck disable=SC2086 # option list
			pt $nvme -P -T -K -q 32 -c 32 -l 4096 "$dev" read || fail "$dev: exit with I/O in flight" || return
		done
		sleep 1
		spin=$(exit_workers_spinning)
		[[ -z $spin ]] || fail "$dev: io_uring exit workers still polling: $spin" || return
		# shellcheck disable=SC2086
		pt $nvme -P -T -q 8 -c 256 -l 4096 "$dev" read || fail "$dev: polled reads after the exits" || return
	done
}

desc_pt_exec_inflight="a task that execs with polled passthrough commands in flight on an IOPOLL ring (no DEFER_TASKRUN) gets through exec: the cancel loop runs the task_work that completes them (virtio-blk and NVMe)"
timeout_pt_exec_inflight=120
pt_exec_inflight() {
	local d dev nvme i pid
	d=$(pt_disk) || return
	for nvme in "" -V; do
		dev=$(pt_dev "$d" "$nvme") || return
		for ((i = 0; i < 5; i++)); do
			# shellcheck disable=SC2086 # option list
			"$PT" $nvme -P -E -q 32 -c 32 -l 4096 "$dev" read >/tmp/pe.out 2>&1 &
			pid=$!
			# Without the fix exec never returns: the task spins in the
			# kernel, where no signal reaches it.
			pt_exited "$pid" 20 || fail "$dev: exec with polled commands in flight still running after 20 s (round $i)" || return
			wait "$pid" || fail "$dev: exec with I/O in flight: exit $? ($(tail -n1 /tmp/pe.out))" || return
		done
		# shellcheck disable=SC2086
		pt $nvme -P -q 8 -c 256 -l 4096 "$dev" read || fail "$dev: polled reads after the execs" || return
	done
}

# pt_exited PID SECS: child PID has exited (gone or a zombie) within SECS
# seconds.
pt_exited() {
	local i st
	for ((i = 0; i < $2 * 10; i++)); do
		st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)
		[[ -z $st || $st == Z ]] && return 0
		sleep 0.1
	done
	return 1
}

desc_pt_poll_runtime="IOPOLL passthrough follows the disk's poll queues: EOPNOTSUPP at 0, polled again at 1; going to 0 under a polled job completes what is in flight"
pt_poll_runtime() {
	local rc
	pt_poll_runtime_body
	rc=$?
	# Later tests need the poll queue back, whatever happened.
	sysfs_write "/sys/block/$(pt_disk)/num_poll_queues" 1 >/dev/null
	return $rc
}

pt_poll_runtime_body() {
	local d dev a pid rc i
	d=$(pt_disk) || return
	dev=/dev/vblk/$d
	a=/sys/block/$d/num_poll_queues
	expect_eq "set 0" "$(sysfs_write "$a" 0)" OK || return
	pt_expect EOPNOTSUPP -P "$dev" read || return
	expect_eq "flags at 0" "$(info_field "$dev" flags)" 0x2 || return
	pt -c 64 "$dev" read || fail "interrupt-driven passthrough at 0 poll queues" || return
	expect_eq "set 1" "$(sysfs_write "$a" 1)" OK || return
	pt -P -c 64 "$dev" read || fail "polled passthrough back at 1" || return
	"$PT" -P -q 16 -c 100000000 -w 65536 -l 8192 "$dev" read >/tmp/pr.out 2>&1 &
	pid=$!
	sleep 1
	expect_eq "set 0 under a polled job" "$(sysfs_write "$a" 0)" OK || { kill $pid; return 1; }
	for ((i = 0; i < 100; i++)); do
		kill -0 $pid 2>/dev/null || break
		sleep 0.1
	done
	kill -0 $pid 2>/dev/null && { kill -9 $pid; fail "polled job hangs after the change"; return; }
	wait $pid
	rc=$?
	note "polled job: $(tail -n1 /tmp/pr.out)"
	((rc != 0)) && grep -q "first=EOPNOTSUPP" /tmp/pr.out ||
		fail "polled job did not stop with EOPNOTSUPP" || return
	expect_eq "set 1" "$(sysfs_write "$a" 1)" OK || return
	pt -P -p 21 -s 600000 -l 8192 -q 16 -c 256 "$dev" write || return
	pt -P -p 21 -s 600000 -l 8192 -q 16 -c 256 "$dev" read
}

desc_pt_unplug="QMP device_del under passthrough I/O: the job ends with ENODEV, an open file gets ENODEV and can be closed, the node goes; device_add brings it back"
pt_unplug() {
	local d dev pid hold_info hold_read i r
	d=$(disk_by_serial vstor1) || return
	dev=/dev/vblk/$d
	rm -f /tmp/go
	"$PT" -q 8 -c 100000000 -w 65536 -l 4096 "$dev" read >/tmp/pu.out 2>&1 &
	pid=$!
	"$PT" -W /tmp/go -e ENODEV "$dev" ioctl-info >/tmp/pu_info.out 2>&1 &
	hold_info=$!
	"$PT" -W /tmp/go -e ENODEV "$dev" read >/tmp/pu_read.out 2>&1 &
	hold_read=$!
	sleep 1
	host_qmp '{"execute": "device_del", "arguments": {"id": "vdisk1"}}' >/dev/null ||
		{ kill $pid $hold_info $hold_read; fail "device_del refused"; return; }
	for ((i = 0; i < 200; i++)); do
		[[ -e /sys/block/$d ]] || break
		sleep 0.1
	done
	[[ ! -e /sys/block/$d ]] || { kill $pid; fail "$d still present 20 s after device_del"; return; }
	[[ ! -e $dev ]] || fail "$dev still present after unplug" || return
	for ((i = 0; i < 200; i++)); do
		kill -0 $pid 2>/dev/null || break
		sleep 0.1
	done
	kill -0 $pid 2>/dev/null && { kill -9 $pid; fail "job still running 20 s after unplug"; return; }
	wait $pid
	note "job on the unplugged disk: $(tail -n1 /tmp/pu.out)"
	grep -q "first=ENODEV" /tmp/pu.out || fail "job did not end with ENODEV" || return
	touch /tmp/go
	wait $hold_info || fail "GET_INFO on a file opened before unplug: $(cat /tmp/pu_info.out)" || return
	wait $hold_read || fail "read on a file opened before unplug: $(cat /tmp/pu_read.out)" || return
	for ((i = 0; i < 50; i++)); do
		r=$(host_qmp '{"execute": "device_add", "arguments": {"driver": "virtio-blk-pci", "id": "vdisk1", "drive": "d1", "num-queues": 2, "serial": "vstor1", "share-rw": true}}') && break
		sleep 0.2
	done
	((i < 50)) || fail "device_add refused: $r" || return
	for ((i = 0; i < 200; i++)); do
		d=$(disk_by_serial vstor1) && [[ -c /dev/vblk/$d ]] && break
		sleep 0.1
	done
	[[ -c /dev/vblk/$d ]] || fail "/dev/vblk for vstor1 did not come back" || return
	pt -p 31 -l 65536 -c 8 "/dev/vblk/$d" write || return
	pt -p 31 -l 65536 -c 8 "/dev/$d" bdev-read
}

PTFIO=$TOP/build/fio/fio

# ptfio OUT ARGS...: fio's io_uring_cmd engine with cmd_type=vblk.
ptfio() {
	local out=$1
	shift
	FIO_BIN=$PTFIO fio_json "$out" --ioengine=io_uring_cmd --cmd_type=vblk "$@"
}

desc_pt_fio_verify="fio cmd_type=vblk random-write verify: plain, hipri, fixedbufs, both, vectored; block sizes 4k-128k"
pt_fio_verify() {
	local d off=0 v
	d=$(pt_disk) || return
	while read -r v; do
		# shellcheck disable=SC2086
		ptfio /tmp/fv.json --name=fv --filename="/dev/vblk/$d" --rw=randwrite \
			--bsrange=4k-128k --iodepth=16 --offset=$((off * 32))M --size=32M \
			--verify=crc32c $v || fail "fio verify ${v:-plain}" || return
		note "${v:-plain}: $(fio_field /tmp/fv.json write 'j["io_kbytes"]') KiB written and verified"
		off=$((off + 1))
	done <<'EOF'

--hipri=1
--fixedbufs=1
--hipri=1 --fixedbufs=1
--nonvectored=0
EOF
}

desc_pt_fio_cross="fio: what passthrough wrote verifies through the block device (verify_only) and the other way round"
pt_fio_cross() {
	local d job
	d=$(pt_disk) || return
	job=(--name=x --rw=randwrite --bs=16k --iodepth=8 --offset=512M --size=64M
		--verify=crc32c --verify_state_save=0 --randseed=4242)
	ptfio /tmp/x1.json --filename="/dev/vblk/$d" "${job[@]}" --do_verify=0 ||
		fail "passthrough write" || return
	fio_json /tmp/x2.json --filename="/dev/$d" --ioengine=io_uring --direct=1 \
		"${job[@]}" --verify_only=1 || fail "block device verify of passthrough data" || return
	job[4]=--offset=640M
	fio_json /tmp/x3.json --filename="/dev/$d" --ioengine=io_uring --direct=1 \
		"${job[@]}" --do_verify=0 || fail "block device write" || return
	ptfio /tmp/x4.json --filename="/dev/vblk/$d" "${job[@]}" --hipri=1 --verify_only=1 ||
		fail "passthrough verify of block-device data"
}

desc_pt_fio_trim_flush="fio trims (DISCARD) and fsyncs (FLUSH) through passthrough"
pt_fio_trim_flush() {
	local d n
	d=$(pt_disk) || return
	ptfio /tmp/tf.json --name=t --filename="/dev/vblk/$d" --rw=randtrim --bs=64k \
		--iodepth=8 --offset=768M --size=32M || fail "randtrim" || return
	expect_eq "trims" "$(fio_field /tmp/tf.json trim 'j["total_ios"]')" 512 || return
	ptfio /tmp/ts.json --name=s --filename="/dev/vblk/$d" --rw=write --bs=4k \
		--iodepth=4 --offset=800M --size=4M --fsync=16 || fail "writes with fsync" || return
	n=$(fio_field /tmp/ts.json sync 'j["total_ios"]')
	note "1024 writes with fsync=16: $n FLUSH commands"
	((n >= 64)) || fail "fewer FLUSH commands than fsync=16 asks for"
}

desc_pt_compat32="a 32-bit program gets nothing from the node: the GET_INFO ioctl fails with ENOTTY (no compat_ioctl), passthrough commands from its ring with EOPNOTSUPP"
pt_compat32() {
	local d out rc
	d=$(pt_disk) || return
	out=$("$TOOLS/compat32" "/dev/vblk/$d")
	rc=$?
	echo "$out"
	((rc == 0)) || fail "compat32 exit $rc"
}
