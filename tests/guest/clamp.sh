# num_poll_queues larger than the device allows: booted with
# virtio_blk.num_poll_queues=4, a two-queue disk (vstor0) and a single-queue
# disk (vstor1). The request is cut down and the kernel log says so.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

# The guest this suite boots (vm/vm.sh options) and what it needs built.
SUITE_VM=(--cpus 2 --disk file:queues=2 --disk null:queues=1 --append virtio_blk.num_poll_queues=4)
SUITE_NEEDS=(kernel tools)

TESTS=(clamp_two_queues clamp_one_queue)

desc_clamp_two_queues="4 poll queues requested on 2 queues: 1 poll queue and a message at info level (the parameter is global: not a warning)"
clamp_two_queues() {
	local d v
	d=$(disk_by_serial vstor0) || fail "no vstor0" || return
	v=$(virtio_dev "$d")
	expect_eq "hctx types" "$(hctx_types "$d")" "default poll" || return
	dmesg --level=info | grep -q "virtio_blk $v: 4 poll queues requested, using 1: 2 queue(s) available" ||
		fail "no clamp message at info level for $v" || return
	quick_verify "$d" 1
}

desc_clamp_one_queue="poll queues requested on a single-queue disk: none, a message at info level, plain I/O works"
clamp_one_queue() {
	local d v
	d=$(disk_by_serial vstor1) || fail "no vstor1" || return
	v=$(virtio_dev "$d")
	expect_eq "hctx types" "$(hctx_types "$d")" "default" || return
	expect_eq "io_poll" "$(cat "/sys/block/$d/queue/io_poll")" 0 || return
	dmesg --level=info | grep -q "virtio_blk $v: 4 poll queues requested, using 0: 1 queue(s) available" ||
		fail "no clamp message at info level for $v" || return
	fio_json /tmp/c.json --name=c --filename="/dev/$d" --ioengine=io_uring \
		--direct=1 --rw=randread --bs=4k --iodepth=4 --size=4M
}
