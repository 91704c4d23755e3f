#!/usr/bin/env bash
# In the guest: a polled passthrough read on an IOPOLL ring whose iopoll
# callback sleeps (debug_iopoll_delay_ms, from iopoll-ref-hooks*.diff) right
# after reading the command's request, while somebody else completes that
# request and the memory it lives in is freed. Two ways, ROUNDS times each:
#
#   change: vstor0 runs mq-deadline, so its requests are scheduler requests;
#           its poll queues go from 1 to 0. The change reaps the request
#           while it drains the disk, then switches the elevator off and on
#           again, which frees the scheduler's requests.
#   remove: a second IOPOLL ring polls the same poll queue and completes the
#           request; then the disk is unbound, which frees the tag set.
#
# After each, the callback polls the request it read. The kernel log says
# whether that touched freed memory (kernel/experiments/README.md).
set -u
ROUNDS=${ROUNDS:-2}
DELAY=${DELAY:-6000}
TOP=$(cd "$(dirname "$0")/../.." && pwd)
PT=$TOP/build/tools/vblk_pt
param=/sys/module/virtio_blk/parameters/debug_iopoll_delay_ms
[[ -w $param ]] || { echo "no $param: hooks not applied"; exit 1; }

disk() {
	local x
	for x in /sys/block/vd*; do
		[[ $(cat "$x/serial") == vstor0 ]] && basename "$x"
	done
}

# start_held: a polled read whose iopoll now sleeps with the request read.
start_held() {
	local before i
	before=$(dmesg | grep -c "iopoll read request")
	echo "$DELAY" >"$param"
	taskset -c 0 "$PT" -P -c 1 "/dev/vblk/$d" read >/tmp/pt.out 2>&1 &
	held=$!
	for ((i = 0; i < 300; i++)); do
		(($(dmesg | grep -c "iopoll read request") > before)) && break
		sleep 0.1
	done
	dmesg | grep "iopoll read request" | tail -n 1
}

reports() {
	dmesg | grep -cE "KASAN|BUG:|WARNING|Oops|general protection"
}

for ((r = 1; r <= ROUNDS; r++)); do
	d=$(disk)
	a=/sys/block/$d/num_poll_queues
	echo 1 >"$a" || exit 1
	echo mq-deadline >"/sys/block/$d/queue/scheduler" || exit 1
	start_held
	if echo 0 >"$a"; then rc=0; else rc=1; fi
	echo "change round $r: 1 -> 0 $( ((rc)) && echo failed || echo worked)"
	wait $held
	echo "change round $r: polled read exit $? ($(tr '\n' ' ' </tmp/pt.out)); reports so far: $(reports)"
	echo none >"/sys/block/$d/queue/scheduler"
done

for ((r = 1; r <= ROUNDS; r++)); do
	d=$(disk)
	v=$(basename "$(readlink -f "/sys/block/$d/device")")
	echo 1 >"/sys/block/$d/num_poll_queues" || exit 1
	start_held
	# The second ring polls the same (only) poll queue.
	taskset -c 0 "$PT" -P -c 50 "/dev/vblk/$d" read >/tmp/pt2.out 2>&1
	echo "remove round $r: second ring exit $?"
	echo "$v" >/sys/bus/virtio/drivers/virtio_blk/unbind &
	unbind=$!
	wait $held
	echo "remove round $r: polled read exit $? ($(tr '\n' ' ' </tmp/pt.out))"
	wait $unbind
	echo "remove round $r: unbind exit $?; reports so far: $(reports)"
	echo "$v" >/sys/bus/virtio/drivers/virtio_blk/bind
	sleep 2
done
dmesg | grep -E "KASAN|BUG:|WARNING|Oops|general protection" | head -n 5
echo "finished"
