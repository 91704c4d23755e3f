# Per-disk runtime change of the number of poll queues
# (/sys/block/vdX/num_poll_queues). Booted with 4 vCPUs, a four-queue file
# disk (vstor0) and a two-queue file disk (vstor1), no poll queues at probe.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

# The guest this suite boots (vm/vm.sh options) and what it needs built.
SUITE_VM=(--cpus 4 --disk file:queues=4 --disk file:queues=2 --disk "file:size=256M,queues=2,pcibridge")
SUITE_NEEDS=(kernel tools)

TESTS=(repoll_initial repoll_set repoll_bad_input repoll_hipri_0_to_m
	repoll_idle_poller repoll_flip_under_load repoll_flip_polled_load
	repoll_to_zero_hipri_ring repoll_concurrent_writers repoll_stuck_kill
	repoll_resize_race repoll_remove_race
	repoll_hot_unplug repoll_wce_kept repoll_info_during_change
	repoll_pci_reset repoll_pci_reset_polled repoll_pci_reset_race
	repoll_stopped_poller_reset repoll_stopped_poller_unbind repoll_store_module_ref)

rp_disk() { disk_by_serial vstor0; }
rp_attr() { echo "/sys/block/$1/num_poll_queues"; }

# rp_set DISK N [QUEUES]: set and check the split of a disk with QUEUES
# queues (4, vstor0's).
rp_set() {
	local r
	r=$(sysfs_write "$(rp_attr "$1")" "$2")
	expect_eq "write $2" "$r" OK || return
	expect_eq "read back" "$(cat "$(rp_attr "$1")")" "$2" || return
	expect_types "$1" $((${3:-4} - $2)) "$2"
}

desc_repoll_initial="each disk has num_poll_queues, 0 when probed without poll queues"
repoll_initial() {
	local d0 d1
	d0=$(rp_disk) || fail "no vstor0" || return
	d1=$(disk_by_serial vstor1) || fail "no vstor1" || return
	expect_eq "vstor0" "$(cat "$(rp_attr "$d0")")" 0 || return
	expect_eq "vstor1" "$(cat "$(rp_attr "$d1")")" 0 || return
	expect_types "$d0" 4 0 || return
	expect_eq "io_poll" "$(cat "/sys/block/$d0/queue/io_poll")" 0
}

# rp_map_follows_irqs DISK NDEFAULT: each default hctx of DISK serves the
# CPUs of its virtqueue's MSI-X vector (blk-mq maps them from the vectors'
# affinity, which virtio-pci looks up when it sets the virtqueues up).
rp_map_follows_irqs() {
	local v i lists=""
	v=$(virtio_dev "$1")
	for ((i = 0; i < $2; i++)); do
		expect_irq_cpus "$1 hctx $i" "/sys/block/$1/mq/$i/cpu_list" "$v-req.$i" || return 1
		lists+=" [$(cpu_list_expand "$(cat "/sys/block/$1/mq/$i/cpu_list")")]"
	done
	note "$2 default hctxs, CPUs$lists"
}

desc_repoll_set="set 1, 2, 3, 0, 2: hctx types, io_poll and the kernel log follow, and each default hctx serves the CPUs of its virtqueue's interrupt; the other disk does not change"
repoll_set() {
	local d d1 v n
	d=$(rp_disk) || return
	d1=$(disk_by_serial vstor1) || return
	v=$(virtio_dev "$d")
	for n in 1 2 3 0 2; do
		rp_set "$d" "$n" || return
		expect_eq "io_poll at $n" "$(cat "/sys/block/$d/queue/io_poll")" $((n > 0)) || return
		dmesg | tail -n 5 | grep -q "virtio_blk $v: $((4 - n))/0/$n default/read/poll queues" ||
			fail "no log line for $n poll queues" || return
		rp_map_follows_irqs "$d" $((4 - n)) || return
		expect_types "$d1" 2 0 || return
	done
}

desc_repoll_bad_input="bad values get EINVAL/ERANGE, change nothing, disk keeps working"
repoll_bad_input() {
	local d a v want r
	d=$(rp_disk) || return
	a=$(rp_attr "$d")
	rp_set "$d" 1 || return
	for v in 4 5 -1 abc $'\n' 1.5 "2 3" 0x1; do
		r=$(sysfs_write "$a" "$v")
		expect_eq "write '$v'" "$r" EINVAL || return
	done
	r=$(sysfs_write "$a" 99999999999999999999)
	expect_eq "write 99999999999999999999" "$r" ERANGE || return
	expect_eq "value after bad writes" "$(cat "$a")" 1 || return
	expect_types "$d" 3 1 || return
	quick_verify "$d" 1
}

desc_repoll_hipri_0_to_m="at 0 hipri gets EOPNOTSUPP; after 0 -> 2 it verifies, without interrupts"
repoll_hipri_0_to_m() {
	local d v before after
	d=$(rp_disk) || return
	v=$(virtio_dev "$d")
	rp_set "$d" 0 || return
	expect_hipri_unsupported "$d" || return
	rp_set "$d" 2 || return
	before=$(irq_sum "^$v-req")
	fio_json /tmp/h.json --name=h --filename="/dev/$d" --ioengine=io_uring \
		--direct=1 --rw=randwrite --bs=4k --iodepth=8 --hipri=1 --size=8M \
		--numjobs=2 --offset_increment=16M --verify=crc32c || return
	after=$(irq_sum "^$v-req")
	expect_eq "request-queue interrupts during polled I/O" $((after - before)) 0
}

desc_repoll_idle_poller="a change completes while an IOPOLL ring holds unreaped polled reads; they complete"
repoll_idle_poller() {
	local d n out wpid t
	d=$(rp_disk) || return
	rp_set "$d" 2 || return
	for n in 3 1 0; do
		coproc IDLE { "$TOOLS/iopoll_idle" "/dev/$d" 32 2>&1; }
		read -r -t 20 out <&"${IDLE[0]}" || fail "iopoll_idle did not start" || return
		[[ $out == "submitted 32" ]] || fail "iopoll_idle: $out" || return
		echo "$n" >"$(rp_attr "$d")" &
		wpid=$!
		for ((t = 0; t < 300; t++)); do
			kill -0 $wpid 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 $wpid 2>/dev/null; then
			# Let the poller poll, which unblocks the change.
			echo go >&"${IDLE[1]}"
			wait $wpid
			fail "change to $n waited for the idle poller"
			return
		fi
		wait $wpid || fail "change to $n failed" || return
		echo go >&"${IDLE[1]}"
		read -r -t 20 out <&"${IDLE[0]}" || fail "no result from iopoll_idle" || return
		wait "$IDLE_PID" || fail "iopoll_idle: $out" || return
		note "-> $n: $out"
		expect_types "$d" $((4 - n)) "$n" || return
	done
	rp_set "$d" 1
}

# flip_while DISK PID VALUES...: cycle the count through VALUES while PID
# runs; print the number of changes made.
flip_while() {
	local d=$1 pid=$2 flips=0 n r
	shift 2
	while kill -0 "$pid" 2>/dev/null; do
		for n in "$@"; do
			r=$(sysfs_write "$(rp_attr "$d")" "$n")
			[[ $r == OK ]] || { echo "write $n: $r" >&2; echo -1; return; }
			[[ $(hctx_types "$d" | grep -o poll | wc -l) == "$n" ]] ||
				{ echo "types after $n: $(hctx_types "$d")" >&2; echo -1; return; }
			flips=$((flips + 1))
			sleep 0.2
		done
	done
	echo $flips
}

desc_repoll_flip_under_load="cycling 0-3 poll queues under a plain fio verify workload loses nothing"
repoll_flip_under_load() {
	local d pid flips
	d=$(rp_disk) || return
	fio_json /tmp/fl.json --name=fl --filename="/dev/$d" --ioengine=io_uring \
		--direct=1 --rw=randwrite --bs=4k --iodepth=16 --size=32M \
		--numjobs=2 --offset_increment=64M --verify=crc32c --verify_backlog=512 \
		--verify_fatal=1 --loops=3 &
	pid=$!
	flips=$(flip_while "$d" $pid 0 3 1 2)
	wait $pid || fail "fio verify failed across the changes" || return
	note "$flips changes during the workload"
	((flips >= 4)) || fail "only $flips changes happened during the workload"
}

desc_repoll_flip_polled_load="cycling 1-3 poll queues under a hipri fio verify workload loses nothing"
repoll_flip_polled_load() {
	local d pid flips
	d=$(rp_disk) || return
	rp_set "$d" 1 || return
	fio_json /tmp/fp.json --name=fp --filename="/dev/$d" --ioengine=io_uring \
		--direct=1 --rw=randwrite --bs=4k --iodepth=16 --hipri=1 --size=32M \
		--numjobs=2 --offset_increment=64M --verify=crc32c --verify_backlog=512 \
		--verify_fatal=1 --loops=3 &
	pid=$!
	flips=$(flip_while "$d" $pid 3 1 2)
	wait $pid || fail "polled fio verify failed across the changes" || return
	note "$flips changes during the polled workload"
	((flips >= 3)) || fail "only $flips changes happened during the workload"
}

desc_repoll_to_zero_hipri_ring="going to 0 under a running hipri job: the job stops with EOPNOTSUPP, no hang"
repoll_to_zero_hipri_ring() {
	local d pid rc out
	d=$(rp_disk) || return
	rp_set "$d" 2 || return
	fio --name=z --filename="/dev/$d" --ioengine=io_uring --direct=1 \
		--rw=randread --bs=4k --iodepth=8 --hipri=1 --time_based \
		--runtime=20 --size=64M >/tmp/z.out 2>&1 &
	pid=$!
	sleep 2
	rp_set "$d" 0 || return
	for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
	if kill -0 $pid 2>/dev/null; then
		kill -9 $pid
		fail "hipri job still running 10 s after the change"
		return
	fi
	wait $pid
	rc=$?
	out=$(cat /tmp/z.out)
	((rc != 0)) || fail "hipri job succeeded without poll queues" || return
	grep -q "Operation not supported" <<<"$out" || fail "job failed otherwise: $out" || return
	note "fio: $(grep -m1 'Operation not supported' <<<"$out")"
	# Plain I/O is fine and polling comes back.
	rp_set "$d" 1 || return
	quick_verify "$d" 1
}

desc_repoll_concurrent_writers="two writers racing 40 changes each end in a consistent state"
repoll_concurrent_writers() {
	local d a p1 p2 n
	d=$(rp_disk) || return
	a=$(rp_attr "$d")
	( for _ in $(seq 20); do echo 1 >"$a" && echo 3 >"$a" || exit 1; done ) &
	p1=$!
	( for _ in $(seq 20); do echo 2 >"$a" && echo 0 >"$a" || exit 1; done ) &
	p2=$!
	wait $p1 || fail "writer 1 got an error" || return
	wait $p2 || fail "writer 2 got an error" || return
	n=$(cat "$a")
	note "final value $n"
	expect_types "$d" $((4 - n)) "$n" || return
	quick_verify "$d" 0
}

# rp_throttle IOPS: limit vstor1 (QEMU device vdisk1) to IOPS requests per
# second; 0 lifts the limit.
rp_throttle() { qemu_throttle vdisk1 "$1"; }

# rp_gone PID SECS: PID has exited within SECS seconds.
rp_gone() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		[[ -e /proc/$1 ]] || return 0
		sleep 0.1
	done
	return 1
}

desc_repoll_stuck_kill="a change waiting for a disk that stopped completing (QEMU throttled to 1 IOPS, 32 reads queued) dies on SIGKILL within 5 s; the split is unchanged and the disk works once the host lets I/O through"
repoll_stuck_kill() {
	local d a fpid wpid st
	d=$(disk_by_serial vstor1) || fail "no vstor1" || return
	a=$(rp_attr "$d")
	rp_set "$d" 0 2 || return
	rp_throttle 1 || return
	fio --name=st --filename="/dev/$d" --ioengine=libaio --direct=1 --rw=randread \
		--bs=4k --iodepth=32 --number_ios=32 --size=64M >/tmp/st.out 2>&1 &
	fpid=$!
	sleep 2
	# The write is this bash's own write(2), so SIGKILL reaches the writer.
	bash -c "echo 1 >$a" 2>/tmp/st.err &
	wpid=$!
	sleep 3
	st=$(awk '{ print $3 }' /proc/$wpid/stat 2>/dev/null)
	note "writer after 3 s: state ${st:-gone}"
	if [[ -z $st ]]; then
		rp_throttle 0
		wait $fpid
		fail "the change finished while the disk was not completing"
		return
	fi
	kill -9 $wpid
	if ! rp_gone $wpid 5; then
		note "writer's stack: $(tr '\n' ' ' </proc/$wpid/stack 2>/dev/null)"
		rp_throttle 0
		rp_gone $wpid 60
		wait $fpid
		fail "the writer did not die within 5 s of SIGKILL"
		return
	fi
	wait $wpid 2>/dev/null
	expect_eq "after the kill" "$(cat "$a")" 0 || { rp_throttle 0; return; }
	expect_types "$d" 2 0 || { rp_throttle 0; return; }
	rp_throttle 0 || return
	rp_gone $fpid 60 || fail "fio still running 60 s after the limit went" || return
	wait $fpid || fail "fio failed: $(tail -n 3 /tmp/st.out)" || return
	rp_set "$d" 1 2 && quick_verify "$d" 1 >/dev/null && rp_set "$d" 0 2
}

desc_repoll_resize_race="QMP block_resize racing back-to-back poll-queue changes: the guest sees every new capacity within 3 s"
repoll_resize_race() {
	local d a wpid i k size lost=0 got
	d=$(disk_by_serial vstor1) || fail "no vstor1" || return
	a=$(rp_attr "$d")
	sysfs_write_loop "$a" 1 0 >/tmp/rr.out 2>&1 &
	wpid=$!
	for ((i = 1; i <= 20; i++)); do
		size=$(((1024 + i) << 20))
		host_qmp '{"execute": "block_resize", "arguments": {"node-name": "d1", "size": '$size'}}' >/dev/null ||
			{ kill $wpid; fail "block_resize to $size refused"; return; }
		for ((k = 0; k < 30; k++)); do
			got=$(($(cat "/sys/block/$d/size") * 512))
			((got == size)) && break
			sleep 0.1
		done
		((got == size)) || { lost=$((lost + 1)); note "resize $i to $size: the guest still sees $got"; }
	done
	kill $wpid
	wait $wpid 2>/dev/null
	note "poll-queue changes meanwhile: $(sort /tmp/rr.out | uniq -c | tr '\n' ' ')"
	grep -qv '^OK$' /tmp/rr.out && fail "a change failed: $(sort -u /tmp/rr.out | tr '\n' ' ')" && return
	((lost == 0)) || fail "$lost of 20 resizes were not seen" || return
	rp_set "$d" 0 2
}

desc_repoll_remove_race="changes racing with unbinding the device: no crash, disk comes back"
repoll_remove_race() {
	local d v a pid r codes
	d=$(rp_disk) || return
	v=$(virtio_dev "$d")
	a=$(rp_attr "$d")
	sysfs_write_loop "$a" 1 2 0 3 >/tmp/rr.out 2>&1 &
	pid=$!
	sleep 1
	echo "$v" >/sys/bus/virtio/drivers/virtio_blk/unbind || fail "unbind" || return
	sleep 0.5
	kill $pid
	wait $pid 2>/dev/null
	codes=$(sort /tmp/rr.out | uniq -c | tr '\n' ' ')
	note "write results: $codes"
	if grep -qv -E '^(OK|ENODEV|ENOENT)$' /tmp/rr.out; then
		fail "unexpected write results: $codes"
		return
	fi
	echo "$v" >/sys/bus/virtio/drivers/virtio_blk/bind || fail "bind" || return
	d=$(rp_disk) || fail "disk did not come back" || return
	expect_eq "num_poll_queues after rebind" "$(cat "$(rp_attr "$d")")" 0 || return
	r=$(sysfs_write "$(rp_attr "$d")" 2)
	expect_eq "change after rebind" "$r" OK
}

desc_repoll_hot_unplug="QMP device_del under I/O and racing changes, then device_add: disk comes back"
repoll_hot_unplug() {
	local d a fpid wpid i codes r
	d=$(disk_by_serial vstor1) || fail "no vstor1" || return
	a=$(rp_attr "$d")
	expect_eq "set 1" "$(sysfs_write "$a" 1)" OK || return
	fio --name=hu --filename="/dev/$d" --ioengine=io_uring --direct=1 \
		--rw=randrw --bs=4k --iodepth=8 --time_based --runtime=60 \
		--size=64M >/tmp/hu.out 2>&1 &
	fpid=$!
	sysfs_write_loop "$a" 0 1 >/tmp/hw.out 2>&1 &
	wpid=$!
	sleep 1
	host_qmp '{"execute": "device_del", "arguments": {"id": "vdisk1"}}' >/dev/null ||
		{ kill $fpid $wpid; fail "device_del refused"; return; }
	for ((i = 0; i < 200; i++)); do
		[[ -e /sys/block/$d ]] || break
		sleep 0.1
	done
	kill $wpid
	wait $wpid 2>/dev/null
	[[ ! -e /sys/block/$d ]] || { kill $fpid; fail "$d still present 20 s after device_del"; return; }
	for ((i = 0; i < 200; i++)); do
		kill -0 $fpid 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 $fpid 2>/dev/null; then
		kill -9 $fpid
		fail "fio still running 20 s after its disk went away"
		return
	fi
	wait $fpid
	note "fio on the unplugged disk: $(grep -m1 -oE 'error=.*' /tmp/hu.out || echo 'no error')"
	codes=$(sort /tmp/hw.out | uniq -c | tr '\n' ' ')
	note "changes racing the unplug: $codes"
	if grep -qv -E '^(OK|ENODEV|ENOENT)$' /tmp/hw.out; then
		fail "unexpected write results: $codes"
		return
	fi
	# QEMU finishes the unplug (and frees the id and the block node) a
	# little after the guest ejected the device: retry for a while.
	for ((i = 0; i < 50; i++)); do
		r=$(host_qmp '{"execute": "device_add", "arguments": {"driver": "virtio-blk-pci", "id": "vdisk1", "drive": "d1", "num-queues": 2, "serial": "vstor1"}}') && break
		sleep 0.2
	done
	((i < 50)) || fail "device_add refused: $r" || return
	note "device_add after $i retries"
	for ((i = 0; i < 200; i++)); do
		d=$(disk_by_serial vstor1) && break
		sleep 0.1
	done
	[[ -n $d ]] || fail "vstor1 did not come back" || return
	expect_eq "num_poll_queues after replug" "$(cat "$(rp_attr "$d")")" 0 || return
	expect_eq "set 1 after replug" "$(sysfs_write "$(rp_attr "$d")" 1)" OK || return
	quick_verify "$d" 1
}

# rp_qemu_cache QDEV: "writeback flushes" for QEMU's device QDEV (vdisk1):
# whether its block backend caches writes (QMP query-block
# cache.writeback, which the device's config-space wce sets) and how many
# flushes have reached it (query-blockstats flush_operations).
rp_qemu_cache() {
	local blk stats
	blk=$(host_qmp '{"execute": "query-block"}') || return
	stats=$(host_qmp '{"execute": "query-blockstats"}') || return
	/usr/bin/python3 - "$1" "$blk" "$stats" <<'PY'
import json, sys
qdev = "/machine/peripheral/%s/virtio-backend" % sys.argv[1]
blk = [b for b in json.loads(sys.argv[2])["return"] if b.get("qdev") == qdev]
st = [b for b in json.loads(sys.argv[3])["return"] if b.get("qdev") == qdev]
if len(blk) != 1 or len(st) != 1:
    sys.exit("no single block backend for " + qdev)
wb = blk[0]["inserted"]["cache"]["writeback"]
print("%d %d" % (wb, st[0]["stats"]["flush_operations"]))
PY
}

# rp_fsync_writes DISK: 64 4 KiB writes, each followed by fsync (fio
# --fsync=1 on the raw disk sends a flush per write while it has a cache).
rp_fsync_writes() {
	fio --name=fs --filename="/dev/$1" --ioengine=sync --direct=1 --rw=write \
		--bs=4k --size=256k --fsync=1 >/tmp/fs.out 2>&1 ||
		fail "fio fsync writes: $(tail -n 3 /tmp/fs.out)"
}

# rp_check_cache DISK QDEV MODE WHEN: after WHEN, the guest's cache_type
# and write_cache of DISK say MODE ("write through" or "write back"), QEMU's
# device QDEV caches writes only in write back, and 64 fsync'd writes reach
# QEMU as flushes only in write back (at least half of them; none in write
# through).
rp_check_cache() {
	local want=0 c f0 f1
	[[ $3 == "write back" ]] && want=1
	expect_eq "guest cache_type after $4" "$(cat "/sys/block/$1/cache_type")" "$3" || return
	expect_eq "guest write_cache after $4" "$(cat "/sys/block/$1/queue/write_cache")" "$3" || return
	read -r c f0 < <(rp_qemu_cache "$2") || fail "QMP query-block" || return
	expect_eq "QEMU's cache after $4" "$c" "$want" || return
	rp_fsync_writes "$1" || return
	read -r c f1 < <(rp_qemu_cache "$2") || fail "QMP query-block" || return
	note "$3, after $4: flushes reaching QEMU during 64 fsync'd writes: $((f1 - f0))"
	if ((want)); then
		((f1 - f0 >= 32)) || fail "$((f1 - f0)) flushes for 64 fsync'd writes in write back (want at least 32)"
	else
		((f1 == f0)) || fail "$((f1 - f0)) flushes in write through"
	fi
}

# rp_wce_ready DISK QDEV: DISK's cache_type is writable (the device offered
# VIRTIO_BLK_F_CONFIG_WCE) and QEMU's device QDEV caches writes, as booted.
rp_wce_ready() {
	local c
	[[ $(stat -c %a "/sys/block/$1/cache_type") == 644 ]] || fail "no writable cache_type: the device did not offer VIRTIO_BLK_F_CONFIG_WCE" || return
	read -r c _ < <(rp_qemu_cache "$2") || fail "QMP query-block" || return
	expect_eq "QEMU's cache at boot" "$c" 1
}

# rp_set_cache DISK QDEV MODE: write MODE to DISK's cache_type; QEMU's
# device QDEV must then cache writes only in write back.
rp_set_cache() {
	local c want=0
	[[ $3 == "write back" ]] && want=1
	expect_eq "set $3" "$(sysfs_write "/sys/block/$1/cache_type" "$3")" OK || return
	read -r c _ < <(rp_qemu_cache "$2") || fail "QMP query-block" || return
	expect_eq "QEMU's cache after '$3'" "$c" "$want"
}

desc_repoll_wce_kept="the cache mode set through cache_type survives a poll-queue change, which resets the device (QEMU's reset restores the mode it started with): after write through and a change, QEMU caches no writes; after write back and a change, fsync'd writes reach QEMU as flushes (fio --fsync=1: at least half of 64)"
repoll_wce_kept() {
	local d mode want
	d=$(disk_by_serial vstor1) || fail "no vstor1" || return
	rp_wce_ready "$d" vdisk1 || return
	rp_set "$d" 0 2 || return
	for mode in "write through" "write back"; do
		want=0
		[[ $mode == "write back" ]] && want=1
		rp_set_cache "$d" vdisk1 "$mode" || return
		rp_set "$d" 1 2 || return
		rp_check_cache "$d" vdisk1 "$mode" "a change" || return
		rp_set "$d" 0 2 || return
		expect_eq "QEMU's cache after '$mode' and a second change" "$(rp_qemu_cache vdisk1 | cut -d' ' -f1)" "$want" || return
	done
}

desc_repoll_info_during_change="GET_INFO passthrough SQEs sent while a poll-queue change waits for a disk that stopped completing (QEMU at 1 IOPS, 32 reads queued): io_uring_submit() returns at once (the command goes to io-wq instead of sleeping on the change's lock in the submitter), the command completes with the disk's info once the change is done, and one still waiting dies on SIGKILL within 5 s"
repoll_info_during_change() {
	local d a fpid wpid gpid kpid i go=/tmp/gi.go
	d=$(disk_by_serial vstor1) || fail "no vstor1" || return
	a=$(rp_attr "$d")
	rp_set "$d" 0 2 || return
	rm -f "$go"
	# Both open the character device now and send GET_INFO when $go exists.
	"$TOOLS/vblk_pt" -M -W "$go" "/dev/vblk/$d" info >/tmp/gi.out 2>&1 &
	gpid=$!
	"$TOOLS/vblk_pt" -M -W "$go" "/dev/vblk/$d" info >/tmp/gk.out 2>&1 &
	kpid=$!
	rp_throttle 1 || return
	fio --name=st --filename="/dev/$d" --ioengine=libaio --direct=1 --rw=randread \
		--bs=4k --iodepth=32 --number_ios=32 --size=64M >/tmp/st.out 2>&1 &
	fpid=$!
	sleep 2
	bash -c "echo 1 >$a" 2>/tmp/st.err &
	wpid=$!
	sleep 2
	[[ -e /proc/$wpid ]] || { rp_throttle 0; wait $fpid; fail "the change finished while the disk was not completing"; return; }
	touch "$go"
	sleep 3
	kill -9 $kpid
	rp_gone $kpid 5 || note "waiting GET_INFO's stack: $(cat /proc/$kpid/stack 2>/dev/null | tr '\n' ' ')"
	! [[ -e /proc/$kpid ]] || { rp_throttle 0; wait $fpid; fail "a GET_INFO waiting for the change did not die within 5 s of SIGKILL"; return; }
	[[ -e /proc/$wpid ]] || { rp_throttle 0; wait $fpid; fail "the change ended before the GET_INFO test was done: inconclusive"; return; }
	rp_throttle 0 || return
	rp_gone $wpid 60 || fail "the change still running 60 s after the limit went" || return
	wait $wpid || fail "the change failed: $(cat /tmp/st.err)" || return
	rp_gone $gpid 30 || fail "GET_INFO did not complete 30 s after the change" || return
	wait $gpid || fail "GET_INFO: $(cat /tmp/gi.out)" || return
	wait $fpid || fail "fio failed: $(tail -n 3 /tmp/st.out)" || return
	note "$(tr '\n' ' ' </tmp/gi.out)"
	expect_eq "GET_INFO result" "$(sed -n 's/^result=//p' /tmp/gi.out)" 72 || return
	i=$(sed -n 's/^submit_max_ms=//p' /tmp/gi.out)
	[[ -n $i ]] && ((i < 1000)) || fail "io_uring_submit() took ${i:-?} ms while the change was pending" || return
	expect_eq "split after the change" "$(cat "$a")" 1 || return
	rp_set "$d" 0 2
}

# rp_reset_target: set RP_DISK to vstor2's disk and RP_PCI to the PCI
# function under it, if this kernel can reset a bound virtio device
# (virtio-pci's reset_prepare/reset_done, which 6.12 lacks: there a reset
# under the driver leaves it without virtqueues) and the function can be
# reset by a secondary bus reset; skips (status 4) otherwise.
rp_reset_target() {
	RP_DISK=$(disk_by_serial vstor2) || fail "no vstor2" || return
	grep -qw virtio_pci_reset_done /proc/kallsyms ||
		{ skip "this kernel's virtio-pci has no reset recovery (no virtio_pci_reset_done)"; return; }
	RP_PCI=$(basename "$(dirname "$(readlink -f "/sys/block/$RP_DISK/device")")")
	[[ -e /sys/bus/pci/devices/$RP_PCI/reset ]] || fail "$RP_DISK ($RP_PCI) has no PCI reset" || return
	grep -qw bus "/sys/bus/pci/devices/$RP_PCI/reset_method" ||
		fail "$RP_PCI resets by '$(cat "/sys/bus/pci/devices/$RP_PCI/reset_method")', not by a bus reset (not alone behind its bridge?)"
}

# rp_pci_reset PCI: reset the function; fail unless the write succeeds.
rp_pci_reset() {
	expect_eq "reset of $1" "$(sysfs_write "/sys/bus/pci/devices/$1/reset" 1)" OK
}

desc_repoll_pci_reset="a PCI reset of the disk (virtio's reset_prepare and reset_done around a bus reset; QEMU's reset restores the cache mode it started with) keeps what the guest set: write through and write back, each checked by QEMU's mode and the flushes of 64 fsync'd writes, and the poll queues; polled I/O verifies after each reset"
repoll_pci_reset() {
	local d pci mode
	rp_reset_target || return
	d=$RP_DISK pci=$RP_PCI
	rp_wce_ready "$d" vdisk2 || return
	rp_set "$d" 1 2 || return
	for mode in "write through" "write back"; do
		rp_set_cache "$d" vdisk2 "$mode" || return
		rp_pci_reset "$pci" || return
		expect_types "$d" 1 1 || return
		expect_eq "num_poll_queues after the reset" "$(cat "$(rp_attr "$d")")" 1 || return
		rp_check_cache "$d" vdisk2 "$mode" "a PCI reset" || return
		quick_verify "$d" 1 || return
	done
	rp_set "$d" 0 2
}

# rp_poll_loop NAME CMD...: run CMD (a polled write-and-verify job) over
# and over until /tmp/NAME.stop exists; then /tmp/NAME.jobs holds the
# number of runs, and /tmp/NAME.fail the output of one that failed.
rp_poll_loop() {
	local name=$1 n=0
	shift
	rm -f "/tmp/$name.stop" "/tmp/$name.fail" "/tmp/$name.jobs"
	until [[ -e /tmp/$name.stop ]]; do
		"$@" >"/tmp/$name.out" 2>&1 || { cp "/tmp/$name.out" "/tmp/$name.fail"; break; }
		n=$((n + 1))
	done
	echo $n >"/tmp/$name.jobs"
}

# rp_pt_verify DISK SEED: 64 polled passthrough WRITEs of a pattern (8 in
# flight, IOPOLL ring), then 64 polled READs that check it.
rp_pt_verify() {
	"$TOOLS/vblk_pt" -P -p "$2" -s 65536 -l 4096 -c 64 -q 8 "/dev/vblk/$1" write &&
		"$TOOLS/vblk_pt" -P -p "$2" -s 65536 -l 4096 -c 64 -q 8 "/dev/vblk/$1" read
}

desc_repoll_pci_reset_polled="polled I/O across PCI resets (five resets a second apart) from two loops of jobs: hipri fio verify and polled passthrough writes read back (IOPOLL rings, whose submitters poll requests sent between reset_prepare and reset_done, which wait unsent while the disk has no virtqueues): every job verifies, no kernel report"
repoll_pci_reset_polled() {
	local d pci p1 p2 i n1 n2
	rp_reset_target || return
	d=$RP_DISK pci=$RP_PCI
	rp_set "$d" 1 2 || return
	rp_poll_loop rpf quick_verify "$d" 1 &
	p1=$!
	rp_poll_loop rpt rp_pt_verify "$d" 4711 &
	p2=$!
	sleep 1
	for ((i = 0; i < 5; i++)); do
		rp_pci_reset "$pci" || break
		sleep 1
	done
	touch /tmp/rpf.stop /tmp/rpt.stop
	if ! { rp_gone $p1 120 && rp_gone $p2 120; }; then
		kill -9 $p1 $p2 2>/dev/null
		fail "the polled jobs did not stop 120 s after the resets"
		return
	fi
	wait $p1 $p2
	((i == 5)) || return 1
	[[ ! -e /tmp/rpf.fail ]] || fail "a hipri fio verify job failed across the resets: $(tail -n 5 /tmp/rpf.fail)" || return
	[[ ! -e /tmp/rpt.fail ]] || fail "a polled passthrough job failed across the resets: $(tail -n 5 /tmp/rpt.fail)" || return
	n1=$(cat /tmp/rpf.jobs) n2=$(cat /tmp/rpt.jobs)
	note "across 5 resets: $n1 hipri fio verify jobs, $n2 polled passthrough write-and-read jobs"
	((n1 >= 2 && n2 >= 2)) || fail "too few polled jobs ran across the resets" || return
	expect_types "$d" 1 1 || return
	rp_set "$d" 0 2
}

desc_repoll_pci_reset_race="poll-queue changes racing PCI resets: each change succeeds or, between reset_prepare and reset_done, gets EBUSY; the layout read back matches the last accepted value and the disk works"
repoll_pci_reset_race() {
	local d pci pid i a codes n
	rp_reset_target || return
	d=$RP_DISK pci=$RP_PCI
	a=$(rp_attr "$d")
	sysfs_write_loop "$a" 1 0 >/tmp/rr2.out 2>&1 &
	pid=$!
	for ((i = 0; i < 5; i++)); do
		rp_pci_reset "$pci" || break
	done
	kill $pid
	wait $pid 2>/dev/null
	((i == 5)) || return 1
	codes=$(sort /tmp/rr2.out | uniq -c | tr '\n' ' ')
	note "change results: $codes"
	! grep -qv -E '^(OK|EBUSY)$' /tmp/rr2.out || fail "unexpected change results: $codes" || return
	grep -q '^OK$' /tmp/rr2.out || fail "no change succeeded: $codes" || return
	n=$(cat "$a")
	expect_types "$d" $((2 - n)) "$n" || return
	quick_verify "$d" 0 || return
	rp_set "$d" 0 2
}

# rp_stopped_reader DISK QDEV KIND: 32 polled reads of a pattern (one IOPOLL
# ring, all 32 in flight, all of the same 4 KiB, since QEMU merges adjacent
# requests into one before it counts them) on DISK, whose QEMU device QDEV
# is limited to 4 IOPS meanwhile, from a process stopped (SIGSTOP) while
# they are in flight; then the limit goes and the device completes them,
# but nobody polls. KIND: pt, passthrough READs on /dev/vblk/DISK; hipri,
# io_uring reads of /dev/DISK (O_DIRECT, hipri). Sets RP_READER to the
# reader's pid (its output: /tmp/sr.out).
rp_stopped_reader() {
	local d=$1 i busy how=("/dev/vblk/$1")
	[[ $3 == hipri ]] && how=(-H "/dev/$1")
	RP_READER=""
	"$TOOLS/vblk_pt" -P -p 5150 -s 262144 -w 8 -l 4096 -c 32 -q 32 "${how[@]}" write >/tmp/sr.out 2>&1 ||
		fail "the pattern write: $(tail -n 3 /tmp/sr.out)" || return
	qemu_throttle "$2" 4 || return
	"$TOOLS/vblk_pt" -P -p 5150 -s 262144 -w 8 -l 4096 -c 32 -q 32 "${how[@]}" read >/tmp/sr.out 2>&1 &
	RP_READER=$!
	for ((i = 0; i < 50; i++)); do
		busy=$(cat /sys/kernel/debug/block/"$d"/hctx*/busy 2>/dev/null | wc -l)
		((busy > 0)) && break
		sleep 0.05
	done
	if ! kill -STOP "$RP_READER"; then
		qemu_throttle "$2" 0
		fail "the reader ended before it could be stopped: $(tail -n 3 /tmp/sr.out)"
		return
	fi
	qemu_throttle "$2" 0 || return
	# The device completes the rest now; only polling ends them.
	sleep 2
	busy=$(cat /sys/kernel/debug/block/"$d"/hctx*/busy 2>/dev/null | wc -l)
	note "polled reads left unreaped by the stopped reader: $busy of 32"
	((busy > 0)) || fail "the reader reaped every read before it stopped: nothing to test"
}

# rp_release_reader: let the stopped reader go on (SIGCONT); fail unless it
# then gets all its reads, each verified, within 60 s.
rp_release_reader() {
	[[ -n $RP_READER ]] || return 0
	kill -CONT "$RP_READER" 2>/dev/null
	if ! rp_gone "$RP_READER" 60; then
		kill -9 "$RP_READER"
		fail "the reader did not finish within 60 s of SIGCONT"
		return
	fi
	wait "$RP_READER" || fail "the reader's reads after SIGCONT: $(tail -n 3 /tmp/sr.out)"
}

# rp_bounded NAME SECS OUT CMD...: run CMD in the background, its output to
# OUT; fail (naming NAME) unless it has ended within SECS. A command still
# running then is left to rp_unstick.
rp_bounded() {
	local name=$1 secs=$2 out=$3 pid
	shift 3
	"$@" >"$out" 2>&1 &
	pid=$!
	if ! rp_gone $pid "$secs"; then
		local p
		for p in $pid $(pgrep -P $pid); do
			note "$name, pid $p: $(tr '\n' ' ' </proc/"$p"/stack 2>/dev/null)"
		done
		RP_STUCK=$pid
		fail "$name did not finish within $secs s while the poller was stopped"
		return
	fi
	wait $pid
}

# rp_unstick: after a failure, let the stopped reader poll so that whatever
# waits for its reads (a reset, an unbind) ends before the next test.
rp_unstick() {
	[[ -n $RP_READER ]] && kill -CONT "$RP_READER" 2>/dev/null
	[[ -n ${RP_STUCK:-} ]] && rp_gone "$RP_STUCK" 120
	[[ -n $RP_READER ]] && { rp_gone "$RP_READER" 60 || kill -9 "$RP_READER"; }
	return 1
}

desc_repoll_stopped_poller_reset="a PCI reset while 32 hipri io_uring reads (an IOPOLL ring on the block device) are done in the device but unreaped (their process stopped by SIGSTOP, as user tasks are frozen during suspend): reset_prepare's freeze reaps the poll queue itself and the reset finishes within 30 s; after SIGCONT the process gets every read, verified"
repoll_stopped_poller_reset() {
	local d pci
	rp_reset_target || return
	d=$RP_DISK pci=$RP_PCI
	rp_set "$d" 1 2 || return
	rp_stopped_reader "$d" vdisk2 hipri || { rp_unstick; return 1; }
	rp_bounded "the PCI reset" 30 /tmp/sr.reset sysfs_write "/sys/bus/pci/devices/$pci/reset" 1 ||
		{ rp_unstick; return 1; }
	expect_eq "the reset" "$(cat /tmp/sr.reset)" OK || { rp_unstick; return 1; }
	rp_release_reader || return
	expect_types "$d" 1 1 || return
	quick_verify "$d" 1 >/dev/null || fail "polled I/O after the reset" || return
	rp_set "$d" 0 2
}

desc_repoll_stopped_poller_unbind="unbinding a disk while 32 hipri io_uring reads (an IOPOLL ring on the block device) are done in the device but unreaped (their process stopped by SIGSTOP): removal reaps the poll queue while del_gendisk() drains it and finishes within 30 s; after SIGCONT the process gets every read, verified; the disk comes back on bind"
repoll_stopped_poller_unbind() {
	local d v
	d=$(disk_by_serial vstor2) || fail "no vstor2" || return
	v=$(virtio_dev "$d")
	rp_set "$d" 1 2 || return
	rp_stopped_reader "$d" vdisk2 hipri || { rp_unstick; return 1; }
	rp_bounded "the unbind" 30 /tmp/sr.unbind sh -c "echo $v >/sys/bus/virtio/drivers/virtio_blk/unbind" ||
		{ rp_unstick; echo "$v" >/sys/bus/virtio/drivers/virtio_blk/bind; return 1; }
	rp_release_reader || { echo "$v" >/sys/bus/virtio/drivers/virtio_blk/bind; return 1; }
	echo "$v" >/sys/bus/virtio/drivers/virtio_blk/bind || fail "bind" || return
	d=$(disk_by_serial vstor2) || fail "vstor2 did not come back" || return
	quick_verify "$d" 0 >/dev/null || fail "I/O after the rebind"
}

desc_repoll_store_module_ref="poll-queue changes waiting inside the num_poll_queues store (one draining a disk that nearly stopped completing, QEMU at 4 IOPS with 32 reads in flight, one waiting for it) cannot have virtio_blk unloaded under them: on mainline, whose store breaks its sysfs active protection, each holds a reference to the module (refcount 2 higher); on 6.12, whose store keeps it, removal waits for them (refcount unchanged); an unbind makes both give up with ENODEV, after which virtio_blk unloads and loads again and the disks work"
repoll_store_module_ref() {
	local d v a fpid w1 w2 r0 r1 e1 e2 want
	d=$(disk_by_serial vstor1) || fail "no vstor1" || return
	v=$(virtio_dev "$d")
	a=$(rp_attr "$d")
	rp_set "$d" 0 2 || return
	# 4 IOPS, not 1: the 32 reads in flight when the first change freezes
	# the queue keep it draining for about 8 s, past the refcount's reading
	# 2 s later, and the unbind waits for the rest, not for half a minute.
	rp_throttle 4 || return
	fio --name=st --filename="/dev/$d" --ioengine=libaio --direct=1 --rw=randread \
		--bs=4k --iodepth=32 --number_ios=64 --size=64M >/tmp/sm.out 2>&1 &
	fpid=$!
	sleep 2
	r0=$(cat /sys/module/virtio_blk/refcnt)
	sysfs_write "$a" 1 >/tmp/sm.w1 &
	w1=$!
	sleep 1
	sysfs_write "$a" 1 >/tmp/sm.w2 &
	w2=$!
	sleep 1
	r1=$(cat /sys/module/virtio_blk/refcnt)
	if ! [[ -e /proc/$w1 && -e /proc/$w2 ]]; then
		rp_throttle 0
		wait $fpid
		fail "a change finished while the disk was not completing: inconclusive"
		return
	fi
	note "virtio_blk refcnt: $r0 before the changes, $r1 while they wait"
	# Unbinding makes both give up, whatever the refcount said.
	echo "$v" >/sys/bus/virtio/drivers/virtio_blk/unbind || { rp_throttle 0; fail "unbind"; return; }
	rp_throttle 0
	rp_gone $w1 30 && rp_gone $w2 30 || fail "the changes did not end after the unbind" || return
	wait $w1 $w2 $fpid
	e1=$(cat /tmp/sm.w1) e2=$(cat /tmp/sm.w2)
	note "the changes ended with $e1 and $e2"
	# Mainline's store breaks its sysfs active protection (del_gendisk()
	# holds update_nr_hwq_lock while it removes the attribute), so removal
	# no longer waits for the writer: each writer holds the module. 6.12's
	# keeps the protection, and removal waits for the writer itself.
	want=$((r0 + 2))
	[[ ${KBASE:-6.12} == mainline ]] || want=$r0
	expect_eq "refcnt while two changes wait in the store" "$r1" "$want" ||
		{ echo "$v" >/sys/bus/virtio/drivers/virtio_blk/bind; return 1; }
	[[ $e1 == ENODEV && $e2 == ENODEV ]] || fail "the changes did not fail with ENODEV after the unbind" ||
		{ echo "$v" >/sys/bus/virtio/drivers/virtio_blk/bind; return 1; }
	rmmod virtio_blk || fail "rmmod virtio_blk" || return
	vmodprobe virtio_blk || fail "cannot load virtio_blk again" || return
	udevadm settle 2>/dev/null
	d=$(disk_by_serial vstor1) || fail "vstor1 did not come back with the module" || return
	disk_by_serial vstor0 >/dev/null || fail "vstor0 did not come back with the module" || return
	quick_verify "$d" 0 >/dev/null || fail "I/O after the reload"
}
