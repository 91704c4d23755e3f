#!/usr/bin/env bash
# In the guest: a change of vstor0's poll queues in progress while the disk
# is unbound, then bound again; ROUNDS times (3). The kernel log says whether
# anything went wrong (kernel/experiments/README.md).
set -u
ROUNDS=${ROUNDS:-3}
for ((r = 1; r <= ROUNDS; r++)); do
	d=""
	for x in /sys/block/vd*; do
		[[ $(cat "$x/serial") == vstor0 ]] && d=$(basename "$x")
	done
	v=$(basename "$(readlink -f "/sys/block/$d/device")")
	a=/sys/block/$d/num_poll_queues
	echo "round $r: $d on $v"
	(
		while :; do
			for n in 1 2 0 3; do
				echo "$n" >"$a" 2>/dev/null || exit 0
				echo "set $n"
			done
		done
	) >/tmp/loop.out 2>&1 &
	pid=$!
	# Wait for the first change to finish, then let the next one start.
	for ((i = 0; i < 300; i++)); do
		grep -q set /tmp/loop.out && break
		sleep 0.1
	done
	sleep 0.5
	echo "unbind during a change ($(wc -l </tmp/loop.out) done)"
	echo "$v" >/sys/bus/virtio/drivers/virtio_blk/unbind
	wait $pid
	echo "changes: $(sort /tmp/loop.out | uniq -c | tr '\n' ' ')"
	echo "$v" >/sys/bus/virtio/drivers/virtio_blk/bind
	sleep 2
done
dmesg | grep -E "KASAN|BUG:|WARNING|Oops" | head -n 5
echo "finished"
