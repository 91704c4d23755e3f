#!/usr/bin/env bash
# In the guest: run fio's t/io_uring without its drain at exit (built as
# kernel/experiments/README.md says, into build/scratch/io_uring-nodrain)
# for 1 s at a time, polled passthrough at QD 1, on DEVICE, for up to
# ROUNDS rounds (default 20), and report whether a kworker running
# io_ring_exit_work keeps a CPU busy afterwards, with its backtrace.
#   iopoll-exit-spin-guest.sh DEVICE
set -u
bin=$(dirname "$0")/../../build/scratch/io_uring-nodrain
rounds=${ROUNDS:-20}
for r in $(seq 1 "$rounds"); do
	taskset -c 0 "$bin" -u1 -O0 -p1 -d1 -s1 -c1 -r1 "$1" >/tmp/tiou.out 2>&1 ||
		{ cat /tmp/tiou.out; exit 1; }
	sleep 0.5
	pid=$(ps -eo pid,stat,comm | awk '$3 ~ /iou_exit/ && $2 ~ /R/ { print $1; exit }')
	if [[ -n $pid ]]; then
		t0=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
		sleep 2
		t1=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
		echo "$1: after round $r, kworker $pid (iou_exit) used $((t1 - t0)) of 200 ticks in 2 s"
		dmesg -C
		echo l >/proc/sysrq-trigger
		sleep 0.5
		dmesg | grep -B2 -A12 'Workqueue: iou_exit' | grep -E 'Workqueue|RIP|io_|process_one' | head -8
		exit 0
	fi
done
echo "$1: no iou_exit kworker left running after $rounds rounds"
