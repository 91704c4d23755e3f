# Several poll queues: booted with 4 vCPUs, a four-queue disk (vstor0) and
# virtio_blk.poll_queues=3 (the old name). Polled jobs on every CPU verify.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

# The guest this suite boots (vm/vm.sh options) and what it needs built.
SUITE_VM=(--cpus 4 --disk file:queues=4 --append virtio_blk.poll_queues=3)
SUITE_NEEDS=(kernel tools)

TESTS=(multi_layout multi_percpu_verify)

desc_multi_layout="poll_queues=3 (alias) on 4 queues: 1 default + 3 poll hctxs"
multi_layout() {
	local d
	d=$(disk_by_serial vstor0) || fail "no vstor0" || return
	expect_eq "hctx types" "$(hctx_types "$d")" "default poll poll poll" || return
	expect_eq "num_poll_queues" "$(cat /sys/module/virtio_blk/parameters/num_poll_queues)" 3
}

desc_multi_percpu_verify="a polled verify job pinned to each CPU, no request-queue interrupts"
multi_percpu_verify() {
	local d v cpus before after
	d=$(disk_by_serial vstor0) || return
	v=$(virtio_dev "$d")
	cpus=$(nproc)
	before=$(irq_sum "^$v-req")
	fio_json /tmp/mc.json --name=pc --filename="/dev/$d" --ioengine=io_uring \
		--direct=1 --rw=randwrite --bs=4k --iodepth=4 --hipri=1 --size=8M \
		--numjobs="$cpus" --cpus_allowed="0-$((cpus - 1))" \
		--cpus_allowed_policy=split --offset_increment=16M \
		--verify=crc32c --verify_fatal=1 || return
	after=$(irq_sum "^$v-req")
	note "$cpus jobs, $((after - before)) request-queue interrupts"
	((after == before)) || fail "$((after - before)) interrupts during polled I/O"
}
