# Poll-queue changes under memory pressure, on the disk that reclaim writes
# to. Booted with little memory (384 MiB) and two two-queue disks. While a
# change has a disk frozen, every allocation it makes (virtqueues, MSI-X
# vectors, blk-mq maps, scheduler data) may enter direct reclaim; if reclaim
# may write to that disk, it waits for the change it is part of. The change
# allocates in a no-I/O scope, which these tests hold to:
# - vstor0 is the guest's only swap (scheduler none);
# - vstor1 holds an ext4 that takes every dirty page, with mq-deadline, so
#   that a change also tears down and rebuilds the scheduler while page
#   cache is being written back to that disk.
# The two are split because 6.12 cannot switch a swap disk's scheduler
# through sysfs without a lockdep report of its own (see
# Documentation/review-fixes.md, "The debug-kernel run").
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_VM=(--cpus 2 --mem 384M --disk "file:queues=2,size=1G" --disk "file:queues=2,size=1G")
SUITE_NEEDS=(kernel tools)

TESTS=(reclaim_swap_flip reclaim_writeback_flip reclaim_sysfs_flip)
timeout_reclaim_swap_flip=400
timeout_reclaim_writeback_flip=500
timeout_reclaim_sysfs_flip=500

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

# rc_change ATTR VALUE N: write VALUE to ATTR (a disk's num_poll_queues) in a
# process of its own and wait up to 60 s for it: a change stuck in the kernel
# stays behind for the report instead of hanging the test. Sets RC_SECS.
rc_change() {
	local r t0=$SECONDS
	/usr/bin/python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
os.write(fd, sys.argv[2].encode())' "$1" "$2" 2>/tmp/rc.err &
	r=$!
	while [[ -e /proc/$r ]] && ((SECONDS - t0 < 60)); do sleep 0.2; done
	if [[ -e /proc/$r ]]; then
		note "change $3: still running after 60 s, stack: $(tr '\n' ' ' </proc/$r/stack 2>/dev/null)"
		note "tasks in D state: $(grep -l '^State:.*D' /proc/[0-9]*/status 2>/dev/null | wc -l)"
		echo w >/proc/sysrq-trigger 2>/dev/null
		fail "poll-queue change $3 did not finish within 60 s"
		return
	fi
	wait $r || fail "change $3 failed: $(cat /tmp/rc.err)" || return
	RC_SECS=$((SECONDS - t0))
}

desc_reclaim_swap_flip="24 poll-queue changes of the swap disk (no scheduler) while a hog keeps 480 MiB busy in 384 MiB of RAM: each change returns within 60 s, swap traffic flows, data verifies"
reclaim_swap_flip() {
	local d a i hpid s1 t0 slow=0
	d=$(disk_by_serial vstor0) || fail "no vstor0" || return
	a=/sys/block/$d/num_poll_queues
	echo none >"/sys/block/$d/queue/scheduler" || fail "cannot select none" || return
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
	for ((i = 1; i <= 24; i++)); do
		rc_change "$a" $((i % 2)) "$i" || { kill -9 $hpid; return 1; }
		((RC_SECS > 20)) && slow=$((slow + 1))
		kill -0 $hpid 2>/dev/null || fail "the memory hog died (OOM?)" || return
	done
	s1=$(rc_swapped)
	kill -9 $hpid
	wait $hpid 2>/dev/null
	note "24 changes, $slow over 20 s; $s1 KiB in swap at the end"
	swapoff "/dev/$d" || fail "swapoff failed" || return
	((s1 > 65536)) || fail "only $s1 KiB in swap at the end: no memory pressure" || return
	quick_verify "$d" 0 >/dev/null || fail "data does not verify after the changes"
}

# rc_writer DIR STOP: write 64 MiB files of random data into DIR, ten names
# in turn, until the file STOP exists; after each file, append "NAME SHA256"
# to DIR.sums (on tmpfs, so that it does not need the disk).
rc_writer() {
	exec /usr/bin/python3 - "$1" "$2" <<'PY'
import hashlib, os, sys
d, stop = sys.argv[1], sys.argv[2]
k = 0
while not os.path.exists(stop):
    name = "f%d" % (k % 10)
    h = hashlib.sha256()
    fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for _ in range(64):
        b = os.urandom(1 << 20)
        h.update(b)
        os.write(fd, b)
    os.close(fd)
    with open("/tmp/rc.sums", "a") as f:
        f.write("%s %s\n" % (name, h.hexdigest()))
    k += 1
PY
}

# rc_written DISK: sectors written to DISK so far.
rc_written() { awk '{ print $7 }' "/sys/block/$1/stat"; }

desc_reclaim_writeback_flip="poll-queue changes of a disk with mq-deadline that takes every dirty page, while a writer dirties 64 MiB files and a hog pins 128 MiB of 384 MiB: at least 24 changes and more than RAM written back meanwhile, each change within 60 s, every file verifies after a cold read"
reclaim_writeback_flip() {
	local d a i hpid wpid w0 w1 dirty=0 x mnt=/tmp/rc-wb
	d=$(disk_by_serial vstor1) || fail "no vstor1" || return
	a=/sys/block/$d/num_poll_queues
	echo mq-deadline >"/sys/block/$d/queue/scheduler" || fail "cannot select mq-deadline" || return
	grep -q '\[mq-deadline\]' "/sys/block/$d/queue/scheduler" || fail "mq-deadline is not in use" || return
	ext4_on "/dev/$d" $mnt || return
	# Let dirty pages take most of memory, so that reclaim meets them.
	echo 60 >/proc/sys/vm/dirty_ratio
	echo 30 >/proc/sys/vm/dirty_background_ratio
	rm -f /tmp/rc.sums /tmp/rc.stop
	rc_hog 128 &
	hpid=$!
	rc_writer $mnt /tmp/rc.stop &
	wpid=$!
	w0=$(rc_written "$d")
	# Changes until at least 24 are done and more than RAM (384 MiB) went
	# to the disk since the first: page cache was reclaimed meanwhile (40
	# changes wrote about 850 MiB under TCG; 24, for time, still over RAM).
	for ((i = 1; i <= 200; i++)); do
		rc_change "$a" $((i % 2)) "$i" || { kill -9 $hpid $wpid; return 1; }
		x=$(awk '$1 == "Dirty:" { print $2 }' /proc/meminfo)
		((x > dirty)) && dirty=$x
		kill -0 $wpid 2>/dev/null || { kill -9 $hpid; fail "the writer died"; return; }
		w1=$(rc_written "$d")
		((i >= 24 && (w1 - w0) / 2048 > 448)) && break
	done
	touch /tmp/rc.stop
	wait $wpid || { kill -9 $hpid; fail "the writer failed"; return; }
	kill -9 $hpid
	wait $hpid 2>/dev/null
	echo 20 >/proc/sys/vm/dirty_ratio
	echo 10 >/proc/sys/vm/dirty_background_ratio
	note "$i changes; $(((w1 - w0) / 2048)) MiB written to $d meanwhile, at most $((dirty / 1024)) MiB dirty; $(wc -l </tmp/rc.sums) files written"
	(((w1 - w0) / 2048 > 448)) || fail "only $(((w1 - w0) / 2048)) MiB written back during the changes" || return
	sync
	echo 3 >/proc/sys/vm/drop_caches
	# The last sum written for each name is its content.
	awk '{ s[$1] = $2 } END { for (n in s) print n, s[n] }' /tmp/rc.sums | while read -r x sum; do
		[[ $(sha256sum <"$mnt/$x") == "$sum  -" ]] || echo "$x"
	done >/tmp/rc.bad
	umount $mnt
	[[ ! -s /tmp/rc.bad ]] || fail "files do not verify: $(tr '\n' ' ' </tmp/rc.bad)"
}

# rc_sysfs_churn DISK STOP: until STOP exists, in turn: switch DISK's I/O
# scheduler (on 7.3 elv_iosched_store() holds the tag set's update_nr_hwq_lock
# for reading while it allocates the new scheduler's data), read every
# hardware context's sysfs attributes (the entries a poll-queue change
# removes and adds again), and create and remove a null_blk disk through
# configfs (a gendisk's sysfs tree, queue and scheduler of its own).
# Prints how many rounds it did.
rc_sysfs_churn() {
	local d=$1 stop=$2 n=0 nb=/sys/kernel/config/nullb/rcchurn f
	mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config
	until [[ -e $stop ]]; do
		echo none >"/sys/block/$d/queue/scheduler" 2>/dev/null
		echo mq-deadline >"/sys/block/$d/queue/scheduler" 2>/dev/null
		for f in /sys/block/"$d"/mq/*/*; do
			[[ -f $f ]] && cat "$f" >/dev/null 2>&1
		done
		if mkdir "$nb" 2>/dev/null; then
			echo 64 >"$nb/size" && echo 1 >"$nb/power"
			echo 0 >"$nb/power"
			rmdir "$nb"
		fi
		n=$((n + 1))
	done
	echo "$n"
}

desc_reclaim_sysfs_flip="poll-queue changes of the disk that takes every dirty page (mq-deadline), under memory pressure (a hog pins 128 MiB of 384 MiB, a writer dirties 64 MiB files), while another task switches that disk's scheduler (which on 7.3 holds update_nr_hwq_lock while it allocates), reads its hardware contexts' sysfs files (which a change removes and adds again) and creates and removes null_blk disks: 24 changes, each within 60 s; at least 8 rounds of that churn meanwhile; every file verifies after a cold read"
reclaim_sysfs_flip() {
	local d a i hpid wpid cpid rounds mnt=/tmp/rc-sf
	d=$(disk_by_serial vstor1) || fail "no vstor1" || return
	a=/sys/block/$d/num_poll_queues
	echo mq-deadline >"/sys/block/$d/queue/scheduler" || fail "cannot select mq-deadline" || return
	ext4_on "/dev/$d" $mnt || return
	echo 60 >/proc/sys/vm/dirty_ratio
	echo 30 >/proc/sys/vm/dirty_background_ratio
	rm -f /tmp/rc.sums /tmp/rc.stop /tmp/rc.churnstop
	rc_hog 128 &
	hpid=$!
	rc_writer $mnt /tmp/rc.stop &
	wpid=$!
	rc_sysfs_churn "$d" /tmp/rc.churnstop >/tmp/rc.churn &
	cpid=$!
	sleep 5
	for ((i = 1; i <= 24; i++)); do
		rc_change "$a" $((i % 2)) "$i" || { touch /tmp/rc.churnstop; kill -9 $hpid $wpid; return 1; }
		kill -0 $wpid 2>/dev/null || { touch /tmp/rc.churnstop; kill -9 $hpid; fail "the writer died"; return; }
		kill -0 $cpid 2>/dev/null || { kill -9 $hpid $wpid; fail "the sysfs churn died"; return; }
	done
	touch /tmp/rc.stop /tmp/rc.churnstop
	wait $wpid || { kill -9 $hpid; fail "the writer failed"; return; }
	if ! wait $cpid; then
		kill -9 $hpid
		fail "the sysfs churn failed"
		return
	fi
	kill -9 $hpid
	wait $hpid 2>/dev/null
	echo 20 >/proc/sys/vm/dirty_ratio
	echo 10 >/proc/sys/vm/dirty_background_ratio
	rounds=$(cat /tmp/rc.churn)
	note "24 changes; $rounds rounds of scheduler switches, hctx sysfs reads and null_blk disks meanwhile; $(wc -l </tmp/rc.sums) files written"
	((rounds >= 8)) || fail "only $rounds rounds of sysfs churn during 24 changes" || return
	sync
	echo 3 >/proc/sys/vm/drop_caches
	awk '{ s[$1] = $2 } END { for (n in s) print n, s[n] }' /tmp/rc.sums | while read -r x sum; do
		[[ $(sha256sum <"$mnt/$x") == "$sum  -" ]] || echo "$x"
	done >/tmp/rc.bad
	umount $mnt
	[[ ! -s /tmp/rc.bad ]] || fail "files do not verify: $(tr '\n' ' ' </tmp/rc.bad)"
}
