# vhost-blk (drivers/vhost/blk.c): the in-kernel virtio-blk backend, driven
# by the userspace virtio-blk driver tools/virtio/vhost_blk_test on every
# kind of backend the guest has: brd, null_blk (memory-backed), the guest's
# own virtio-blk disk, a file on ext4, a file on tmpfs and files on XFS.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

# The guest this suite boots (vm/vm.sh options) and what it needs built.
SUITE_VM=(--cpus 2 --disk file:queues=2 --append "brd.rd_nr=2 brd.rd_size=65536"
	--append "null_blk.nr_devices=1 null_blk.memory_backed=1 null_blk.gb=1 null_blk.discard=1")
SUITE_NEEDS=(kernel tools)

VBT=$TOOLS/vhost_blk_test
VB_MNT=/tmp/vb-ext4

# vbt ARGS...: run the driver; its TAP lines go to the log. Fails when the
# driver reports a failure (a skip, exit 4, is a failure here: every backend
# in this boot supports every mode).
vbt() {
	local rc=0
	"$VBT" "$@" || rc=$?
	((rc == 0)) || fail "vhost_blk_test $* exited $rc"
}

# The guest's virtio-blk disk (serial vstor0), a backend like any other.
vb_vdisk() { echo "/dev/$(disk_by_serial vstor0)"; }

desc_vb_node="module loads, /dev/vhost-blk is a root-only misc device, max_queues is 16 and checked"
vb_node() {
	vhost_blk_load || fail "no /dev/vhost-blk after loading vhost_blk" || return
	expect_eq mode "$(stat -c %a /dev/vhost-blk)" 600 || return
	[[ $(stat -c %F /dev/vhost-blk) == "character special file" ]] || fail "not a character device" || return
	local p=/sys/module/vhost_blk/parameters/max_queues
	expect_eq max_queues "$(cat $p)" 16 || return
	if echo 0 >$p 2>/dev/null || echo 129 >$p 2>/dev/null; then
		fail "max_queues accepted a value outside 1-128"
		return
	fi
	expect_eq max_queues "$(cat $p)" 16
}

desc_vb_perms="an unprivileged user cannot open /dev/vhost-blk"
vb_perms() {
	vhost_blk_load || return
	if setpriv --reuid=nobody --regid=nogroup --clear-groups \
		bash -c 'exec 3<>/dev/vhost-blk' 2>/dev/null; then
		fail "nobody opened /dev/vhost-blk"
	fi
}

desc_vb_brd="functional, brd backend: 2 queues on 2 workers, then 1 queue without indirect descriptors or event index"
vb_brd() {
	vhost_blk_load || return
	vbt --backend /dev/ram0 --alt-backend /dev/ram0 --mode functional --queues 2 --workers 2 &&
		vbt --backend /dev/ram0 --mode functional --queues 1 --workers 1 --no-indirect --no-event-idx
}

desc_vb_null="functional, memory-backed null_blk backend with discard: 4 queues on 2 workers"
vb_null() {
	vhost_blk_load || return
	vbt --backend /dev/nullb0 --mode functional --queues 4 --workers 2
}

desc_vb_vd="functional, the guest's virtio-blk disk as backend: 2 queues on 2 workers"
vb_vd() {
	vhost_blk_load || return
	vbt --backend "$(vb_vdisk)" --mode functional --queues 2 --workers 2
}

desc_vb_ext4="functional, a raw image file on ext4 (asynchronous direct I/O), swapped with a second file under load"
vb_ext4() {
	vhost_blk_load || return
	ext4_on /dev/ram1 $VB_MNT || return
	truncate -s 24M $VB_MNT/a.img $VB_MNT/b.img || return
	vbt --backend $VB_MNT/a.img --alt-backend $VB_MNT/b.img --mode functional --queues 2 --workers 2
}

desc_vb_tmpfs="functional, a file on tmpfs (direct I/O that completes synchronously)"
vb_tmpfs() {
	vhost_blk_load || return
	truncate -s 24M /tmp/vb-tmpfs.img || return
	vbt --backend /tmp/vb-tmpfs.img --mode functional --queues 2 --workers 1
	local rc=$?
	rm -f /tmp/vb-tmpfs.img
	return $rc
}

desc_vb_ro="read-only backends: opened O_RDONLY and with VHOST_BLK_BACKEND_F_RDONLY, writes get IOERR"
vb_ro() {
	vhost_blk_load || return
	vbt --backend /dev/ram0 --mode functional --queues 2 --ro
}

desc_vb_hostile="hostile rings and requests on brd, a file and the virtio-blk disk: error status or broken vring, never a crash"
vb_hostile() {
	vhost_blk_load || return
	truncate -s 16M /tmp/vb-hostile.img || return
	vbt --backend /dev/ram0 --mode hostile &&
		vbt --backend /tmp/vb-hostile.img --mode hostile &&
		vbt --backend "$(vb_vdisk)" --mode hostile
	local rc=$?
	rm -f /tmp/vb-hostile.img
	return $rc
}

# fair_run ARGS...: two busy vrings on one worker (vhost_blk_test bench with
# ARGS); fails unless the device served them within 2x of each other.
#
# The property is the worker's: given equal demand, it serves both vrings.
# So the demand is made equal by placement rather than left to chance: the
# bench runs on CPU 0 alone, its two submitting threads and the worker
# (which inherits the owner's CPUs) with it, so that the guest's scheduler
# shares that one CPU among them and host load slows all three alike. Left
# to the scheduler, the worker shared a CPU with one submitter only, which
# then submitted less, and on a loaded host one vCPU got less time than
# the other: ratios of 0.75-0.86 on an idle host and 0.46 on a loaded one
# came from the submitters, not the worker. (Moving the worker to CPU 1
# alone was tried: with the test shell SCHED_FIFO, taskset on the worker
# printed its old affinity and had not returned when the 3 s bench ended;
# not looked into further.)
fair_run() {
	local out=/tmp/vb-fair.out rc reqs
	taskset -c 0 "$VBT" --backend /dev/nullb0 --mode bench --queues 2 --workers 1 --time 3 "$@" \
		>"$out" 2>&1
	rc=$?
	cat "$out"
	((rc == 0)) || fail "bench $* exited $rc" || return
	# One "vring N requests R ..." line per vring, from the device's counters.
	reqs=$(awk '/^vring [0-9]+ requests/ { print $4 }' "$out")
	[[ $(wc -l <<<"$reqs") == 2 ]] || fail "no per-vring counters" || return
	python3 - "$reqs" <<'PY' || fail "one vring starved the other"
import sys
a, b = (int(x) for x in sys.argv[1].split())
print("vring requests: %d and %d, ratio %.2f" % (a, b, min(a, b) / max(a, b)))
sys.exit(0 if min(a, b) >= 0.5 * max(a, b) else 1)
PY
}

desc_vb_fair="two busy vrings sharing one worker are served within 2x of each other (the device's own counters)"
vb_fair() {
	vhost_blk_load || return
	fair_run --qd 32
}

desc_vb_bp="busy polling: the functional mode with every vring polling (50 units), on null_blk, 2 queues on 1 worker (the busy-poll cases run in every functional run too)"
vb_bp() {
	vhost_blk_load || return
	vbt --backend /dev/nullb0 --mode functional --queues 2 --workers 1 --busy-poll 50
}

desc_vb_bp_fair="busy polling: two busy vrings sharing one worker, both polling (window 1000), are served within 2x of each other at QD1, QD1 with the driver polling too, and QD32"
vb_bp_fair() {
	vhost_blk_load || return
	fair_run --qd 1 --busy-poll 1000 && fair_run --qd 1 --busy-poll 1000 --poll &&
		fair_run --qd 32 --busy-poll 1000
}

desc_vb_bp_fair_load="busy polling on a loaded machine: two CPU-bound processes per CPU run beside the two polling vrings (window 1000) on one worker, which are still served within 2x of each other at QD1 with the driver polling, and at QD32"
vb_bp_fair_load() {
	vhost_blk_load || return
	local hogs=() i rc
	for ((i = 0; i < 2 * $(nproc); i++)); do
		sh -c 'while :; do :; done' &
		hogs+=($!)
	done
	fair_run --qd 1 --busy-poll 1000 --poll && fair_run --qd 32 --busy-poll 1000
	rc=$?
	kill "${hogs[@]}"
	wait "${hogs[@]}" 2>/dev/null
	return $rc
}

desc_vb_kill="owner killed with I/O in flight (SIGKILL), on 1 and 2 workers, without and with busy polling (a 30 s window, QD 1 and 32): the process exits, nothing hangs, the module still unloads"
vb_kill() {
	vhost_blk_load || return
	local pid i run workers bp qd
	for run in "1 0 32" "2 0 32" "1 30000000 1" "2 30000000 32"; do
		read -r workers bp qd <<<"$run"
		"$VBT" --backend "$(vb_vdisk)" --mode bench --queues 2 --workers "$workers" --qd "$qd" \
			--busy-poll "$bp" --time 30 >/dev/null 2>&1 &
		pid=$!
		sleep 2
		kill -9 $pid
		for ((i = 0; i < 50; i++)); do
			kill -0 $pid 2>/dev/null || break
			sleep 0.2
		done
		kill -0 $pid 2>/dev/null && { fail "owner (workers $workers, busy poll $bp, QD $qd) still alive 10 s after SIGKILL"; return; }
		wait $pid 2>/dev/null
	done
	# A leaked file reference (backend, module) would keep the module busy.
	vmodprobe -r vhost_blk || fail "vhost_blk does not unload after the killed owners" || return
	vhost_blk_load
}

# A memory-backed null_blk with a 16 MiB volatile write cache and no FUA
# (configfs: cache_size, fua=0): the block layer turns a FUA write into a
# write and a flush, and every flush the disk executes counts in field 16 of
# /sys/block/vbcache/stat (Documentation/block/stat.rst). Made once per boot.
VB_CACHE=/sys/kernel/config/nullb/vbcache
vb_cache_disk() {
	mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config || return
	if [[ ! -d $VB_CACHE ]]; then
		mkdir $VB_CACHE || fail "cannot create a null_blk through configfs" || return
		echo 256 >$VB_CACHE/size && echo 1 >$VB_CACHE/memory_backed &&
			echo 16 >$VB_CACHE/cache_size && echo 0 >$VB_CACHE/fua &&
			echo 1 >$VB_CACHE/power || fail "cannot configure the null_blk" || return
		udevadm settle 2>/dev/null || true
	fi
	[[ -b /dev/vbcache ]] || fail "no /dev/vbcache" || return
	expect_eq "vbcache write cache" "$(cat /sys/block/vbcache/queue/write_cache)" "write back"
}
vb_flushes() { awk '{ print $16 }' /sys/block/vbcache/stat; }

# vb_writes_flush WHAT MIN MAX ARGS...: 64 writes, one at a time (the block
# layer lets one flush serve concurrent FUA writes), through vhost_blk_test
# bench with ARGS; the flushes vbcache executed meanwhile must be in MIN-MAX.
vb_writes_flush() {
	local what=$1 min=$2 max=$3 f0 f1
	shift 3
	f0=$(vb_flushes)
	vbt --mode bench --rw randwrite --ios 64 --qd 1 "$@" || return
	f1=$(vb_flushes)
	note "$what: $((f1 - f0)) flushes for 64 writes"
	((f1 - f0 >= min && f1 - f0 <= max)) ||
		fail "$what: $((f1 - f0)) flushes for 64 writes, want $min-$max"
}

desc_vb_wcache="write-cache contract, backend with a volatile cache: without VIRTIO_BLK_F_FLUSH each write is durable when completed (block device and file on ext4), with it writes send no flush"
vb_wcache() {
	vhost_blk_load || return
	vb_cache_disk || return
	vb_writes_flush "block device, FLUSH negotiated" 0 0 --backend /dev/vbcache || return
	vb_writes_flush "block device, no FLUSH" 64 128 --backend /dev/vbcache --no-flush || return
	local mnt=/tmp/vb-cache
	ext4_on /dev/vbcache $mnt || return
	fallocate -l 16M $mnt/disk.img && sync || return
	vb_writes_flush "file on ext4, no FLUSH" 64 1000 --backend $mnt/disk.img --no-flush || return
	umount $mnt
}

# XFS made with 4 KiB sectors on a loop device of 512-byte blocks, with a
# realtime device of 4 KiB logical blocks (a second loop device, losetup -b
# 4096). A file's direct I/O follows the device its data is on, as its
# STATX_DIOALIGN says: 512 bytes on the data device (6.12's XFS checks the
# device's logical block, not the sector size it was made with), 4 KiB for a
# realtime file, whose superblock device is still the 512-byte one. Both
# loop devices sit on files in the guest's tmpfs. (Not a 4 KiB null_blk:
# 6.12's null_blk copies a whole block from wherever a bio segment starts,
# so a segment that begins inside a block writes past its page; an 8 KiB
# O_DIRECT write from a buffer at page offset 512 corrupts the guest.)
# Made once per boot.
VB_XFS=/tmp/vb-xfs
vb_xfs_mount() {
	local data rt
	mountpoint -q $VB_XFS && return 0
	truncate -s 320M /tmp/vb-xfs.img && truncate -s 64M /tmp/vb-xfs-rt.img || return
	data=$(losetup --find --show /tmp/vb-xfs.img) || fail "losetup" || return
	rt=$(losetup -b 4096 --find --show /tmp/vb-xfs-rt.img) || fail "losetup -b 4096" || return
	expect_eq "$data logical block" "$(blockdev --getss "$data")" 512 || return
	expect_eq "$rt logical block" "$(blockdev --getss "$rt")" 4096 || return
	mkfs.xfs -q -f -s size=4096 -r rtdev="$rt" "$data" || fail "mkfs.xfs" || return
	mkdir -p $VB_XFS
	mount -o rtdev="$rt" "$data" $VB_XFS || fail "cannot mount XFS from $data" || return
}

# vb_dio FILE BS: one O_DIRECT read of BS bytes at offset BS; OK or the error.
vb_dio() {
	local out
	if out=$(dd if="$1" of=/dev/null bs="$2" skip=1 count=1 iflag=direct 2>&1); then
		echo OK
	else
		sed -n 's/.*: //p' <<<"$out" | head -n 1
	fi
}

desc_vb_xfs="files on XFS: with 4 KiB sectors on a 512-byte device a file takes 512-byte direct I/O and vhost-blk serves it at 512; a realtime file on a 4 KiB device needs 4 KiB, and served at the block its STATX_DIOALIGN gives, everything works and smaller requests get IOERR"
vb_xfs() {
	vb_stall_prepare
	vhost_blk_load || return
	vb_xfs_mount || return
	# Written, not just allocated: a direct read of unwritten extents
	# never reaches the device, so nothing checks its alignment.
	xfs_io -f -c "pwrite -q -S 0x5a 0 24m" -c fsync $VB_XFS/data.img || return
	xfs_io -f -c "chattr +r" -c "pwrite -q -S 0x5a 0 24m" -c fsync $VB_XFS/rt.img ||
		fail "cannot make a realtime file" || return
	xfs_io -c "lsattr" $VB_XFS/rt.img | grep -q '^-*r' || fail "rt.img is not on the realtime device" || return
	expect_eq "512-byte direct read of data.img" "$(vb_dio $VB_XFS/data.img 512)" OK || return
	expect_eq "512-byte direct read of rt.img" "$(vb_dio $VB_XFS/rt.img 512)" "Invalid argument" || return
	expect_eq "4 KiB direct read of rt.img" "$(vb_dio $VB_XFS/rt.img 4096)" OK || return
	vb_xfs_vbt data.img 512 || return
	vb_xfs_vbt rt.img 4096
}

# vb_xfs_vbt FILE LBS: vhost_blk_test's functional run on the file, which
# must take LBS as the logical block (from STATX_DIOALIGN, as a VMM would).
vb_xfs_vbt() {
	local out=/tmp/vb-xfs-$1.out
	vbt --backend "$VB_XFS/$1" --mode functional --queues 2 --workers 1 >"$out"
	local rc=$?
	cat "$out"
	((rc == 0)) || return
	grep -q "^# functional: .*logical block $2)" "$out" ||
		fail "vhost_blk_test did not use $2-byte blocks for $1"
}

desc_vb_unload="after all of the above, vhost_blk unloads and loads again"
vb_unload() {
	mountpoint -q $VB_MNT && umount $VB_MNT
	if mountpoint -q $VB_XFS; then
		umount $VB_XFS || fail "cannot unmount $VB_XFS" || return
		losetup -j /tmp/vb-xfs.img | cut -d: -f1 | xargs -r losetup -d
		losetup -j /tmp/vb-xfs-rt.img | cut -d: -f1 | xargs -r losetup -d
	fi
	vmodprobe -r vhost_blk || fail "cannot unload vhost_blk" || return
	[[ ! -e /dev/vhost-blk ]] || fail "/dev/vhost-blk still there" || return
	vhost_blk_load
}

desc_vb_slow_discard="16 whole-device discard ranges on vring 1 (null_blk with discard_max_bytes cut to 64 KiB: 16384 bios a range) do not delay a 4 KiB read on vring 0 of the same worker: the read takes less than half as long"
vb_slow_discard() {
	local q=/sys/block/nullb0/queue/discard_max_bytes old rc=0
	vhost_blk_load || return
	old=$(cat $q)
	echo 65536 >$q || fail "cannot set nullb0's discard_max_bytes" || return
	vbt --backend /dev/nullb0 --mode functional --queues 2 --workers 1 --only "slow discards" || rc=1
	echo "$old" >$q
	return $rc
}

# vb_cgroup_new NAME: an empty cgroup NAME under a cgroup2 mount with the io
# and memory controllers enabled for its children; prints its path.
vb_cgroup_new() {
	local cg=/sys/fs/cgroup
	if ! awk -v m=$cg '$2 == m && $3 == "cgroup2" { f = 1 } END { exit !f }' /proc/mounts; then
		mount -t cgroup2 none $cg || { fail "cannot mount cgroup2 on $cg"; return 1; }
	fi
	echo "+io +memory" >$cg/cgroup.subtree_control || { fail "cannot enable io and memory"; return 1; }
	rmdir "$cg/$1" 2>/dev/null
	mkdir "$cg/$1" || { fail "cannot create cgroup $1"; return 1; }
	echo "$cg/$1"
}

# vb_in_cgroup PATH ARGS...: vhost_blk_test ARGS in the cgroup at PATH.
vb_in_cgroup() {
	local cg=$1
	shift
	bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$VBT" "$@"
}

# vb_wz_ms: the whole-device write zeroes' time in ms from "slow operations".
vb_wz_ms() { sed -n 's/.*write zeroes of 1 x [0-9]* MiB \([0-9]*\)\.[0-9] ms.*/\1/p'; }

desc_vb_cgroup="slow operations run on kworkers, charged to the VMM's cgroups: a whole-device write zeroes of the 1 GiB null_blk (zero pages: no native write zeroes) from a VMM whose io.max is wbps=64 MiB/s takes at least 12 s, and the request arrays of 16 vrings of 32768 entries count in the VMM's memory.peak (at least 60 MiB above 16 vrings of 256)"
timeout_vb_cgroup=600
vb_cgroup() {
	local free io m0 m1 dev t0 t1 p0 p1 rc=0
	vhost_blk_load || return
	free=$(vb_cgroup_new vmm-free) || return
	io=$(vb_cgroup_new vmm-io) || return
	dev=$(cat /sys/block/nullb0/dev)
	echo "$dev wbps=67108864" >"$io/io.max" || fail "cannot set io.max" || return
	vb_in_cgroup "$free" --backend /dev/nullb0 --mode functional --queues 2 --workers 1 \
		--only "slow operations" >/tmp/cg-free.out 2>&1 || fail "unlimited run: $(tail -n 3 /tmp/cg-free.out)" || return
	vb_in_cgroup "$io" --backend /dev/nullb0 --mode functional --queues 2 --workers 1 \
		--only "slow operations" >/tmp/cg-io.out 2>&1 || fail "limited run: $(tail -n 3 /tmp/cg-io.out)" || return
	t0=$(vb_wz_ms </tmp/cg-free.out)
	t1=$(vb_wz_ms </tmp/cg-io.out)
	note "write zeroes of 1 GiB: ${t0:-?} ms unlimited, ${t1:-?} ms at wbps=64 MiB/s; $dev io.stat: $(grep "^$dev " "$io/io.stat")"
	[[ -n $t0 && -n $t1 ]] || fail "no write zeroes time in the output" || return
	# Both halves run, so that each failure shows.
	((t1 >= 12000)) || { fail "the limited write zeroes took ${t1} ms: the VMM's io.max did not hold"; rc=1; }
	m0=$(vb_cgroup_new vmm-ring256) || return
	m1=$(vb_cgroup_new vmm-ring32768) || return
	vb_in_cgroup "$m0" --backend /dev/nullb0 --mode bench --queues 16 --ring 256 --mem 64 \
		--time 1 >/tmp/cg-m0.out 2>&1 || fail "ring 256: $(tail -n 3 /tmp/cg-m0.out)" || return
	vb_in_cgroup "$m1" --backend /dev/nullb0 --mode bench --queues 16 --ring 32768 --mem 64 \
		--time 1 >/tmp/cg-m1.out 2>&1 || fail "ring 32768: $(tail -n 3 /tmp/cg-m1.out)" || return
	p0=$(cat "$m0/memory.peak")
	p1=$(cat "$m1/memory.peak")
	note "memory.peak: $((p0 >> 20)) MiB with 16 vrings of 256, $((p1 >> 20)) MiB with 16 of 32768"
	((p1 - p0 >= 60 << 20)) || { fail "16 vrings of 32768 entries cost the VMM's cgroup only $(((p1 - p0) >> 20)) MiB more"; rc=1; }
	rmdir "$free" "$io" "$m0" "$m1"
	return $rc
}

# fanotify_watch.py (tests/tools): a fanotify listener that answers the
# permission events of one file and counts them per process.
FANWATCH=$TOP/tests/tools/fanotify_watch.py
VB_FAN_IMG=$VB_MNT/fan.img VB_FAN_WATCH=/tmp/vb-fan.watch VB_FAN_OUT=/tmp/vb-fan.out

# vb_fan RW WATCH_ARGS...: on a fresh sparse image on ext4 with the listener
# (fanotify_watch.py WATCH_ARGS) on it, 64 requests of vhost_blk_test bench
# (--rw RW, QD 4). Sets VBT_RC (vhost_blk_test's exit) and FAN_EVENTS (the
# events answered for vhost_blk_test's pid: its vhost worker is a thread
# of it); the outputs are in VB_FAN_WATCH and VB_FAN_OUT. Returns 4, the
# listener's reason in VB_FAN_WATCH, when the kernel does not offer its
# events.
vb_fan() {
	local rw=$1 fan pid i rc=0
	shift
	rm -f $VB_FAN_IMG
	truncate -s 24M $VB_FAN_IMG || fail "cannot make $VB_FAN_IMG" || return
	/usr/bin/python3 "$FANWATCH" "$@" $VB_FAN_IMG >$VB_FAN_WATCH 2>&1 &
	fan=$!
	for ((i = 0; i < 100; i++)); do
		grep -qx ready $VB_FAN_WATCH && break
		kill -0 $fan 2>/dev/null || break
		sleep 0.1
	done
	if ! grep -qx ready $VB_FAN_WATCH; then
		kill -9 $fan 2>/dev/null
		wait $fan || rc=$?
		((rc == 4)) && return 4
		fail "fanotify_watch.py $* did not start (exit $rc): $(cat $VB_FAN_WATCH)"
		return
	fi
	# Opened after the mark: the kernel sets up a file's events at open.
	"$VBT" --backend $VB_FAN_IMG --mode bench --rw "$rw" --ios 64 --qd 4 >$VB_FAN_OUT 2>&1 &
	pid=$!
	for ((i = 0; i < 600; i++)); do
		kill -0 $pid 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 $pid 2>/dev/null; then
		kill -9 $pid $fan
		wait $pid $fan
		fail "vhost_blk_test bench --rw $rw with fanotify_watch.py $* still running after 60 s"
		return
	fi
	VBT_RC=0
	wait $pid || VBT_RC=$?
	kill -TERM $fan
	wait $fan || fail "fanotify_watch.py $* exited $?: $(cat $VB_FAN_WATCH)" || return
	FAN_EVENTS=$(awk -v p=$pid '$1 == "pid" && $2 == p { print $3 }' $VB_FAN_WATCH)
	FAN_EVENTS=${FAN_EVENTS:-0}
	note "$rw, fanotify_watch.py $*: vhost_blk_test exit $VBT_RC, $FAN_EVENTS events from its pid; listener: $(tr '\n' ' ' <$VB_FAN_WATCH)"
}

# vb_fan_allowed WHAT: after vb_fan with FAN_ALLOW, the 64 requests passed,
# each announced by at least one event from vhost_blk_test's pid.
vb_fan_allowed() {
	((VBT_RC == 0)) || fail "$1, allowed: vhost_blk_test exited $VBT_RC: $(tail -n 3 $VB_FAN_OUT)" || return
	((FAN_EVENTS >= 64)) || fail "$1, allowed: $FAN_EVENTS events from vhost_blk_test for 64 requests"
}

# vb_fan_denied WHAT TYPE: after vb_fan with FAN_DENY, every one of the 64
# requests (TYPE: read or write) failed with IOERR, and was asked.
vb_fan_denied() {
	if ((VBT_RC != 1)) ||
		! grep -q "^vhost-blk bench: 64 errors, first: vring 0: $2 of sector [0-9]*: status IOERR" $VB_FAN_OUT; then
		fail "$1, denied: vhost_blk_test exited $VBT_RC, not with 64 IOERR: $(tail -n 3 $VB_FAN_OUT)"
		return
	fi
	((FAN_EVENTS >= 64)) || fail "$1, denied: $FAN_EVENTS events from vhost_blk_test for 64 requests"
}

desc_vb_fanotify="a file backend's reads and writes ask fanotify first, as vhost_blk_test's process (its worker thread): 64 reads of an image on ext4 give at least 64 FAN_ACCESS_PERM events from its pid, and all 64 fail with IOERR when the listener answers FAN_DENY; with FAN_PRE_ACCESS (pre-content events, where the kernel has them) 64 writes likewise, covering at least their 256 KiB, and denied writes leave the image all zeroes"
vb_fanotify() {
	local rc=0 ret=0 bytes
	vhost_blk_load || return
	ext4_on /dev/ram1 $VB_MNT || return
	vb_fan randread || return
	vb_fan_allowed reads || rc=1
	vb_fan randread --deny || return
	vb_fan_denied reads read || rc=1
	vb_fan randwrite --pre-content || ret=$?
	if ((ret == 4)); then
		note "NOTE: no pre-content events here ($(cat $VB_FAN_WATCH)): writes not checked"
		rm -f $VB_FAN_IMG
		return $rc
	fi
	((ret == 0)) || return
	vb_fan_allowed "writes (pre-content)" || rc=1
	bytes=$(awk '$1 == "bytes" { print $2 }' $VB_FAN_WATCH)
	((${bytes:-0} >= 64 * 4096)) ||
		fail "writes (pre-content): the events' ranges cover ${bytes:-0} bytes, less than the 64 writes' 262144" || rc=1
	vb_fan randwrite --pre-content --deny || return
	vb_fan_denied "writes (pre-content)" write || rc=1
	cmp -s -n $((24 << 20)) $VB_FAN_IMG /dev/zero || fail "writes (pre-content), denied: the image was written" || rc=1
	rm -f $VB_FAN_IMG
	return $rc
}

# vb_owner_charge CGROUP N: a process in CGROUP (on CPU 0 alone, so that
# one CPU's stock of precharged pages is all memory.current can be off by)
# opens /dev/vhost-blk N times, does VHOST_SET_OWNER on each and closes
# them. Prints memory.current before the opens, after them, after the
# SET_OWNERs and after the closes (once it is within 1 MiB of the start,
# or 5 s: the workers' stacks are freed after an RCU grace period).
vb_owner_charge() {
	/usr/bin/python3 - "$1" "$2" <<'PY'
import fcntl, os, sys, time
cg, n = sys.argv[1], int(sys.argv[2])
VHOST_SET_OWNER = 0xAF01  # _IO(VHOST_VIRTIO, 0x01)
with open(os.path.join(cg, "cgroup.procs"), "w") as f:
    f.write(str(os.getpid()))
os.sched_setaffinity(0, {0})
cur = os.open(os.path.join(cg, "memory.current"), os.O_RDONLY)
def current():
    return int(os.pread(cur, 64, 0))
fds = []
current()  # once before: what the first read allocates is not counted
m = [current()]
for _ in range(n):
    fds.append(os.open("/dev/vhost-blk", os.O_RDWR))
m.append(current())
for fd in fds:
    fcntl.ioctl(fd, VHOST_SET_OWNER)
m.append(current())
for fd in fds:
    os.close(fd)
deadline = time.monotonic() + 5
while current() > m[0] + (1 << 20) and time.monotonic() < deadline:
    time.sleep(0.1)
m.append(current())
print(*m)
PY
}

desc_vb_open_cost="what vhost-blk devices cost the kernel is charged to the memory cgroup of the process that sets them up: VHOST_SET_OWNER of 8 devices of max_queues vrings raises memory.current by at least 40 KiB a vring (the indirect iovec, log and head arrays vhost allocates then), and 64 devices opened, owned and closed leave memory.current within 1 MiB of where it started"
vb_open_cost() {
	local cg nq out m0 m1 m2 m3 rc=0
	vhost_blk_load || return
	nq=$(cat /sys/module/vhost_blk/parameters/max_queues)
	cg=$(vb_cgroup_new vb-owner8) || return
	out=$(vb_owner_charge "$cg" 8) || fail "the 8 devices: $out" || return
	read -r m0 m1 m2 m3 <<<"$out"
	note "8 devices of $nq vrings: open +$(((m1 - m0) >> 10)) KiB, VHOST_SET_OWNER +$(((m2 - m1) >> 10)) KiB ($(((m2 - m1) / (8 * nq) >> 10)) KiB a vring; $(((m2 - m0) >> 10)) KiB = $(awk -v b=$((m2 - m0)) 'BEGIN { printf "%.2f", b / 1048576 }') MiB in all), after closing $(((m3 - m0) >> 10)) KiB"
	(((m2 - m1) >= 8 * nq * 40 << 10)) ||
		{ fail "VHOST_SET_OWNER of 8 devices of $nq vrings charged $(((m2 - m1) >> 10)) KiB, want $((8 * nq * 40)) KiB or more"; rc=1; }
	rmdir "$cg"
	cg=$(vb_cgroup_new vb-owner64) || return
	out=$(vb_owner_charge "$cg" 64) || fail "the 64 devices: $out" || return
	read -r m0 m1 m2 m3 <<<"$out"
	note "64 devices: $(((m2 - m0) >> 20)) MiB while open and owned, $(((m3 - m0) >> 10)) KiB after closing them"
	((m3 - m0 <= 1 << 20)) ||
		{ fail "64 devices opened, owned and closed left memory.current $(((m3 - m0) >> 10)) KiB above the start"; rc=1; }
	rmdir "$cg"
	return $rc
}

# A null_blk whose every request takes VB_STALL_S seconds (configfs:
# irqmode 2 is a timer per request, completion_nsec its time): a backend
# that stops answering for a while. Its own 5 s request timeout only logs
# ("rq ... timed out"); the timer still ends the request, with an error.
# Powering it on waits for the partition scan's reads of it (two, 40 s),
# holding null_blk's configfs mutex: vb_stall_prepare starts that early,
# in the background, when vb_stall is to run (at vb_xfs, after vb_wcache's
# configfs null_blk is made). Made once per boot; vb_stall removes it when
# all went well.
VB_STALL=/sys/kernel/config/nullb/vbstall
VB_STALL_S=20
vb_stall_make() {
	mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config || return
	mkdir $VB_STALL && echo 64 >$VB_STALL/size && echo 2 >$VB_STALL/irqmode &&
		echo $((VB_STALL_S * 1000000000)) >$VB_STALL/completion_nsec
}
vb_stall_prepare() {
	[[ " ${VSTOR_GUEST_RUN:-} " == *" vb_stall "* && ! -d $VB_STALL ]] || return 0
	vb_stall_make || return 0
	# In a session of its own: the end of this test kills nothing of it.
	setsid sh -c "echo 1 >$VB_STALL/power" </dev/null >/dev/null 2>&1 &
}
vb_stall_disk() {
	if [[ ! -d $VB_STALL ]]; then
		vb_stall_make || fail "cannot create a null_blk through configfs" || return
	fi
	# Reading power waits for a power-on in progress (the mutex).
	if [[ $(cat $VB_STALL/power) != 1 ]]; then
		echo 1 >$VB_STALL/power || fail "cannot power the null_blk on" || return
	fi
	[[ -b /dev/vbstall ]] || fail "no /dev/vbstall"
}

vb_refcnt() { awk '$1 == "vhost_blk" { print $3 }' /proc/modules; }
vb_now_ms() { echo $((${EPOCHREALTIME/./} / 1000)); }

# vb_gone_by PID MS: whether PID ends (and the shell reaps it) by the time
# vb_now_ms reaches MS; vb_gone PID SECS: within SECS from now. By the
# clock: the guest may run slowly enough that counting sleeps is not.
vb_gone_by() {
	while kill -0 "$1" 2>/dev/null; do
		(($(vb_now_ms) < $2)) || return 1
		sleep 0.1
	done
}
vb_gone() { vb_gone_by "$1" $(($(vb_now_ms) + $2 * 1000)); }

# vb_stall_start OP: vhost_blk_test --mode stall --stall-op OP on
# /dev/vbstall in the background, its output in /tmp/vb-stall-OP.out; sets
# STALL_PID.
vb_stall_start() {
	"$VBT" --backend /dev/vbstall --mode stall --stall-op "$1" >"/tmp/vb-stall-$1.out" 2>&1 &
	STALL_PID=$!
}

# vb_stall_wait OP PID: "stalled: OP" within 10 s, while PID runs.
vb_stall_wait() {
	local i
	for ((i = 0; i < 100; i++)); do
		grep -qx "stalled: $1" "/tmp/vb-stall-$1.out" && return 0
		kill -0 "$2" 2>/dev/null || break
		sleep 0.1
	done
	fail "$1: no 'stalled: $1' within 10 s: $(cat "/tmp/vb-stall-$1.out")"
}

desc_vb_stall="a backend that stops answering (a null_blk taking 20 s a request, one read in flight): a detach, a VHOST_RESET_OWNER and a close waiting for it still wait after 2 s and end within 5 s of SIGKILL, and an exit does not wait (gone within 2 s); until the backend answers, vhost_blk stays loaded for them (refcount 4, rmmod fails); a detach and a reset-owner not killed return 'done' once it answers; then the refcount is 0 and the module unloads and loads again"
vb_stall() {
	local op i t0 t1 rc=0 st refs out
	local -A pid
	vhost_blk_load || return
	t0=$SECONDS
	vb_stall_disk || return
	note "/dev/vbstall ready in $((SECONDS - t0)) s"
	# Killed, or exiting, while the read is in flight: all at once (no
	# jobs of this shell: it would report the kills).
	for op in detach reset-owner close exit; do
		vb_stall_start $op
		pid[$op]=$STALL_PID
		disown "$STALL_PID"
	done
	for op in detach reset-owner close exit; do
		vb_stall_wait $op "${pid[$op]}" || rc=1
	done
	sleep 2
	for op in detach reset-owner close; do
		kill -0 "${pid[$op]}" 2>/dev/null ||
			{ fail "$op: ended before the backend answered: $(cat "/tmp/vb-stall-$op.out")"; rc=1; }
	done
	# An exiting task leaves the wait to a kworker at once.
	if kill -0 "${pid[exit]}" 2>/dev/null; then
		fail "exit: still there 2 s after exit() with the read in flight"
		rc=1
	else
		note "exit: gone within 2 s of exit(), not killed"
	fi
	t0=$(vb_now_ms)
	kill -9 "${pid[@]}" 2>/dev/null
	for op in detach reset-owner close; do
		if vb_gone_by "${pid[$op]}" $((t0 + 5000)); then
			note "$op: gone $(($(vb_now_ms) - t0)) ms after SIGKILL"
		else
			fail "$op: still there 5 s after SIGKILL"
			rc=1
		fi
	done
	if ((rc)); then
		# Leave nothing behind for the next tests.
		for op in "${!pid[@]}"; do
			vb_gone "${pid[$op]}" $((VB_STALL_S + 10)) || fail "$op: still there $((VB_STALL_S + 15)) s after SIGKILL"
		done
		return 1
	fi
	refs=$(vb_refcnt)
	out=$(rmmod vhost_blk 2>&1) && { fail "rmmod vhost_blk succeeded while releases wait for the backend"; rc=1; }
	note "releases waiting: vhost_blk refcount $refs; rmmod: ${out:-succeeded}"
	expect_eq "vhost_blk refcount while 4 releases wait" "$refs" 4 || rc=1
	((rc == 0)) || return
	# Not killed: each waits for its read, and returns.
	t0=$(vb_now_ms)
	for op in detach reset-owner; do
		vb_stall_start $op
		pid[$op]=$STALL_PID
	done
	for op in detach reset-owner; do
		vb_gone "${pid[$op]}" $((VB_STALL_S + 15)) ||
			{ fail "$op: not back $((VB_STALL_S + 15)) s after its read"; rc=1; continue; }
		st=0
		wait "${pid[$op]}" || st=$?
		t1=$(vb_now_ms)
		note "$op, not killed: exit $st after $((t1 - t0)) ms: $(tr '\n' ' ' <"/tmp/vb-stall-$op.out")"
		if ((st != 0)) || ! grep -qx "$op: done" "/tmp/vb-stall-$op.out"; then
			fail "$op did not return 'done'"
			rc=1
		fi
		((t1 - t0 >= (VB_STALL_S - 2) * 1000)) || { fail "$op returned before its read was answered"; rc=1; }
	done
	((rc == 0)) || return
	# The killed devices' reads were answered before these.
	for ((i = 0; i < 50; i++)); do
		[[ $(vb_refcnt) == 0 ]] && break
		sleep 0.1
	done
	expect_eq "vhost_blk refcount once the backend answered" "$(vb_refcnt)" 0 || return
	rmmod vhost_blk || fail "cannot unload vhost_blk once the backend answered" || return
	vhost_blk_load || return
	echo 0 >$VB_STALL/power || fail "cannot power the null_blk off" || return
	rmdir $VB_STALL || fail "cannot remove the null_blk"
}

TESTS=(vb_node vb_perms vb_brd vb_null vb_vd vb_ext4 vb_tmpfs vb_ro vb_hostile vb_fair vb_bp vb_bp_fair vb_bp_fair_load vb_kill vb_wcache vb_xfs
	vb_slow_discard vb_cgroup vb_fanotify vb_open_cost vb_stall vb_unload)
