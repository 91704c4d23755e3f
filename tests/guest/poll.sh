# virtio-blk poll queues, booted with virtio_blk.num_poll_queues=1 and a
# two-queue file disk (serial vstor0): layout, polled completion without
# interrupts, interrupt-driven I/O beside it, data integrity, runtime change.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

# The guest this suite boots (vm/vm.sh options) and what it needs built.
SUITE_VM=(--cpus 2 --disk file:queues=2 --append virtio_blk.num_poll_queues=1)
SUITE_NEEDS=(kernel tools)

TESTS=(poll_layout poll_hipri_no_irq poll_plain_irq poll_mixed poll_verify
	poll_cross_verify poll_runtime_off poll_runtime_alias poll_module_load)

poll_disk() { disk_by_serial vstor0; }

desc_poll_layout="num_poll_queues=1 on 2 queues gives 1 default + 1 poll hctx"
poll_layout() {
	local d v
	d=$(poll_disk) || fail "no disk with serial vstor0" || return
	v=$(virtio_dev "$d")
	expect_eq "hctx types" "$(hctx_types "$d")" "default poll" || return
	expect_eq "io_poll" "$(cat "/sys/block/$d/queue/io_poll")" 1 || return
	expect_eq "num_poll_queues" "$(cat /sys/module/virtio_blk/parameters/num_poll_queues)" 1 || return
	expect_eq "poll_queues alias" "$(cat /sys/module/virtio_blk/parameters/poll_queues)" 1 || return
	dmesg | grep -q "virtio_blk $v: 1/0/1 default/read/poll queues" ||
		fail "no '1/0/1 default/read/poll queues' line for $v" || return
	expect_eq "IRQ lines $v-req.0" "$(irq_lines "^$v-req\\.0$")" 1 || return
	expect_eq "IRQ lines for poll queue" "$(irq_lines "^$v-req_poll")" 0
}

# Run 4k random reads on the poll disk; echo "<ios> <irqs>" (completed I/Os,
# interrupts taken by the disk's request queues meanwhile).
reads_and_irqs() {
	local d=$1 hipri=$2 qd=$3 v before after ios
	v=$(virtio_dev "$d")
	before=$(irq_sum "^$v-req")
	fio_json /tmp/f.json --name=r --filename="/dev/$d" --ioengine=io_uring \
		--direct=1 --rw=randread --bs=4k --iodepth="$qd" --hipri="$hipri" \
		--size=64M --number_ios=3000 || return
	after=$(irq_sum "^$v-req")
	ios=$(fio_field /tmp/f.json read 'j["total_ios"]')
	echo "$ios $((after - before))"
}

desc_poll_hipri_no_irq="fio hipri=1 completes by polling: no interrupts at QD1 and QD16"
poll_hipri_no_irq() {
	local d qd res ios irqs
	d=$(poll_disk) || return
	for qd in 1 16; do
		res=$(reads_and_irqs "$d" 1 "$qd") || return
		read -r ios irqs <<<"$res"
		note "QD$qd hipri: $ios I/Os, $irqs request-queue interrupts"
		((ios >= 3000)) || fail "only $ios I/Os completed" || return
		((irqs == 0)) || fail "$irqs interrupts during polled I/O" || return
	done
}

desc_poll_plain_irq="non-hipri I/O on the same disk is interrupt driven"
poll_plain_irq() {
	local d res ios irqs
	d=$(poll_disk) || return
	res=$(reads_and_irqs "$d" 0 1) || return
	read -r ios irqs <<<"$res"
	note "QD1 plain: $ios I/Os, $irqs request-queue interrupts"
	((ios >= 3000)) || fail "only $ios I/Os completed" || return
	# One interrupt per completion at QD1, give or take suppression.
	((irqs >= ios / 2)) || fail "$irqs interrupts for $ios I/Os"
}

desc_poll_mixed="hipri and plain verify jobs run side by side"
poll_mixed() {
	local d p1 p2 rc=0
	d=$(poll_disk) || return
	fio_json /tmp/m1.json --name=polled --filename="/dev/$d" --ioengine=io_uring \
		--direct=1 --rw=randwrite --bs=4k --iodepth=8 --hipri=1 \
		--offset=0 --size=16M --verify=crc32c &
	p1=$!
	fio_json /tmp/m2.json --name=plain --filename="/dev/$d" --ioengine=io_uring \
		--direct=1 --rw=randwrite --bs=16k --iodepth=8 --hipri=0 \
		--offset=32M --size=16M --verify=crc32c &
	p2=$!
	wait $p1 || { rc=1; note "polled job failed"; }
	wait $p2 || { rc=1; note "plain job failed"; }
	return $rc
}

desc_poll_verify="polled writes and reads verify at QD 1, 4 and 32, 4k to 128k"
poll_verify() {
	local d qd bs
	d=$(poll_disk) || return
	for qd in 1 4 32; do
		for bs in 4k 128k; do
			fio_json /tmp/v.json --name=v --filename="/dev/$d" --ioengine=io_uring \
				--direct=1 --rw=randwrite --bs="$bs" --iodepth="$qd" --hipri=1 \
				--size=16M --verify=crc32c --verify_fatal=1 \
				--randseed="$qd" || { note "qd=$qd bs=$bs failed"; return 1; }
			note "qd=$qd bs=$bs: $(fio_field /tmp/v.json write 'j["total_ios"]') writes verified"
		done
	done
}

desc_poll_cross_verify="data written polled reads back plain, and the reverse"
poll_cross_verify() {
	local d w r
	d=$(poll_disk) || return
	for w in 1 0; do
		r=$((1 - w))
		fio_json /tmp/w.json --name=x --filename="/dev/$d" --ioengine=io_uring \
			--direct=1 --rw=write --bs=64k --iodepth=4 --hipri=$w --size=8M \
			--offset=64M --verify=crc32c --do_verify=0 --randseed=$((100 + w)) \
			|| return
		fio_json /tmp/r.json --name=x --filename="/dev/$d" --ioengine=io_uring \
			--direct=1 --rw=write --bs=64k --iodepth=4 --hipri=$r --size=8M \
			--offset=64M --verify=crc32c --verify_only --randseed=$((100 + w)) \
			|| { note "written with hipri=$w, read with hipri=$r: mismatch"; return 1; }
	done
}

desc_poll_runtime_off="num_poll_queues=0 at runtime + rebind: no poll hctx, hipri gets EOPNOTSUPP"
# set_and_reprobe PARAM VALUE: set a virtio_blk parameter at runtime, probe
# the poll disk again, print its (new) name.
set_and_reprobe() {
	local d v
	d=$(poll_disk) || return
	v=$(virtio_dev "$d")
	echo "$2" >"/sys/module/virtio_blk/parameters/$1" || return
	rebind_virtio "$v" || fail "rebind $v" || return
	poll_disk || fail "disk did not come back"
}

poll_runtime_off() {
	local d
	d=$(set_and_reprobe num_poll_queues 0) || { echo "$d"; return 1; }
	expect_eq "hctx types" "$(hctx_types "$d")" "default default" || return
	expect_eq "io_poll" "$(cat "/sys/block/$d/queue/io_poll")" 0 || return
	expect_hipri_unsupported "$d" || return
	# Plain I/O is unaffected.
	quick_verify "$d" 0
}

desc_poll_runtime_alias="poll_queues=1 (alias) at runtime + rebind restores the poll hctx"
poll_runtime_alias() {
	local d
	d=$(set_and_reprobe poll_queues 1) || { echo "$d"; return 1; }
	expect_eq "num_poll_queues" "$(cat /sys/module/virtio_blk/parameters/num_poll_queues)" 1 || return
	expect_eq "hctx types" "$(hctx_types "$d")" "default poll" || return
	quick_verify "$d" 1
}

# reload_virtio_blk ARGS...: unload virtio_blk and load it with ARGS.
reload_virtio_blk() {
	rmmod virtio_blk || fail "rmmod virtio_blk" || return
	vmodprobe virtio_blk "$@" || fail "modprobe virtio_blk $*" || return
	udev_settle_disk
}

# Wait (briefly) for the vstor0 disk to appear after a probe.
udev_settle_disk() {
	local i
	for i in $(seq 50); do
		disk_by_serial vstor0 >/dev/null && return 0
		sleep 0.1
	done
	fail "vstor0 did not appear"
}

desc_poll_module_load="module load: num_poll_queues=0, poll_queues=1 and num_poll_queues=1 take effect"
poll_module_load() {
	local d
	reload_virtio_blk num_poll_queues=0 || return
	d=$(poll_disk) || return
	expect_eq "num_poll_queues=0: hctx types" "$(hctx_types "$d")" "default default" || return
	reload_virtio_blk poll_queues=1 || return
	d=$(poll_disk) || return
	expect_eq "poll_queues=1: hctx types" "$(hctx_types "$d")" "default poll" || return
	reload_virtio_blk num_poll_queues=1 || return
	d=$(poll_disk) || return
	expect_eq "num_poll_queues=1: hctx types" "$(hctx_types "$d")" "default poll" || return
	quick_verify "$d" 1
}
