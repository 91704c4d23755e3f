# Poll-queue changes under memory pressure, on the disk that reclaim writes
# to. Booted with little memory (384 MiB) and a two-queue disk (vstor0)
# that is the guest's only swap, with mq-deadline so that a change also
# re-allocates the scheduler's tags. While a change has the disk frozen,
# every allocation it makes (virtqueues, MSI-X vectors, blk-mq maps and
# scheduler tags) may enter direct reclaim; if reclaim may swap out, it
# submits I/O to the frozen disk and waits for the change it is part of.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_VM=(--cpus 2 --mem 384M --disk "file:queues=2,size=1G")
SUITE_NEEDS=(kernel tools)

TESTS=(reclaim_swap_flip)
timeout_reclaim_swap_flip=400

# rc_hog MIB: keep MIB of anonymous memory busy, rewriting one byte per page
# over and over, so that the working set stays larger than RAM and pages go
# back and forth to swap. Runs until killed.
rc_hog() {
	exec /usr/bin/python3 - "$1" <<'PY'
import sys
n = int(sys.argv[1]) << 20
a = bytearray(n)
v = 0
while True:
    v = (v + 1) & 255
    for i in range(0, n, 4096):
        a[i] = v
PY
}

# rc_swapped: KiB of swap in use (the guest kernel has no VM event counters).
rc_swapped() { awk '$1 == "SwapTotal:" { t = $2 } $1 == "SwapFree:" { f = $2 } END { print t - f }' /proc/meminfo; }

desc_reclaim_swap_flip="40 poll-queue changes of the swap disk while a hog keeps 480 MiB busy in 384 MiB of RAM: each change returns within 60 s, swap traffic flows, data verifies"
reclaim_swap_flip() {
	local d a i hpid r s1 t0 slow=0
	d=$(disk_by_serial vstor0) || fail "no vstor0" || return
	a=/sys/block/$d/num_poll_queues
	echo mq-deadline >"/sys/block/$d/queue/scheduler" || fail "cannot select mq-deadline" || return
	mkswap -q "/dev/$d" >/dev/null && swapon "/dev/$d" || fail "cannot swap on $d" || return
	rc_hog 480 &
	hpid=$!
	# Start once the hog has filled memory and pages go out to swap.
	t0=$SECONDS
	until (($(rc_swapped) > 65536)); do
		((SECONDS - t0 < 240)) || { kill -9 $hpid; fail "nothing swapped out in 240 s"; return; }
		kill -0 $hpid 2>/dev/null || fail "the memory hog died (OOM?)" || return
		sleep 1
	done
	note "$(rc_swapped) KiB in swap after $((SECONDS - t0)) s ($(awk '$1 == "MemTotal:" { print $2 " KiB of RAM" }' /proc/meminfo))"
	for ((i = 1; i <= 40; i++)); do
		t0=$SECONDS
		# Its own process, polled for: a change stuck in the kernel stays
		# behind for the report instead of hanging the test.
		/usr/bin/python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
os.write(fd, sys.argv[2].encode())' "$a" $((i % 2)) 2>/tmp/rc.err &
		r=$!
		while [[ -e /proc/$r ]] && ((SECONDS - t0 < 60)); do sleep 0.2; done
		if [[ -e /proc/$r ]]; then
			note "change $i: still running after 60 s, stack: $(tr '\n' ' ' </proc/$r/stack 2>/dev/null)"
			note "tasks in D state: $(grep -l '^State:.*D' /proc/[0-9]*/status 2>/dev/null | wc -l)"
			echo w >/proc/sysrq-trigger 2>/dev/null
			kill -9 $hpid
			fail "poll-queue change $i did not finish within 60 s"
			return
		fi
		wait $r || fail "change $i failed: $(cat /tmp/rc.err)" || { kill -9 $hpid; return; }
		((SECONDS - t0 > 20)) && slow=$((slow + 1))
		kill -0 $hpid 2>/dev/null || fail "the memory hog died (OOM?)" || return
	done
	s1=$(rc_swapped)
	kill -9 $hpid
	wait $hpid 2>/dev/null
	note "40 changes, $slow over 20 s; $s1 KiB in swap at the end"
	swapoff "/dev/$d" || fail "swapoff failed" || return
	((s1 > 65536)) || fail "only $s1 KiB in swap at the end: no memory pressure" || return
	quick_verify "$d" 0 >/dev/null || fail "data does not verify after the changes"
}
