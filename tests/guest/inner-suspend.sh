#!/usr/bin/env bash
# Runs as the command of a guest booted from vm/initramfs.sh's archive
# (tests/host/sleep.sh) with one file disk, vstor0 (QEMU device vdisk0, 2
# queues), and S3 offered: a suspend to RAM while 32 polled passthrough
# reads are done in the device but unreaped, their process stopped by
# SIGSTOP (as user tasks are frozen during a suspend, the reads' only
# poller gone). virtio_blk's freeze must reap the poll queue itself, or
# the suspend waits for ever; after the resume the process, let go, must
# get every read, verified, and the disk must still work.
#
#   inner-suspend.sh [KO]
#
#   KO  a virtio_blk.ko in the run directory (/run/vstor) to load instead
#       of the kernel's (a variant without the fix, to see the test fail)
#
# The root, and the run directory, are 9p, whose driver has no freeze or
# restore: neither works after the resume (QEMU resets every device on
# wakeup). So the script first copies what it runs into memory (a tmpfs
# root it enters with chroot), uses the run directory only until the
# suspend (the host's QMP mailbox: the throttle and the wakeup), writes
# its results into the kernel log (/dev/kmsg: whole lines on the serial
# console, which the host judges), and ends the guest with sysrq.
# Prints "inner: ok CHECK" or "inner: FAIL CHECK: why" per check.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
self=$top/tests/guest/inner-suspend.sh
run=/run/vstor
mem=/tmp/memroot
# The wakeup request: the host waits this long for the guest to suspend.
WAKE_TIMEOUT=60
# 32 polled passthrough commands, all reading one 4 KiB block (QEMU merges
# adjacent requests before it throttles them), as tests/guest/repoll.sh's
# rp_stopped_reader.
PT_ARGS=(-P -p 5150 -s 262144 -w 8 -l 4096 -c 32 -q 32)

up() { cut -d' ' -f1 /proc/uptime; }
say() { echo "inner: $*" >/dev/kmsg; }

# ---- in the 9p root: the driver, then into memory ----------------------

if [[ ${1:-} != --in-memory ]]; then
	ko=${1:-}
	if [[ -n $ko ]]; then
		[[ ! -d /sys/module/virtio_blk ]] || rmmod virtio_blk
		insmod "$run/$ko" num_poll_queues=1 || say "FAIL module: cannot load $ko"
		say "virtio_blk is $run/$ko"
	elif [[ ! -d /sys/module/virtio_blk ]]; then
		modprobe -d "$(cat $run/modroot)" virtio_blk num_poll_queues=1 ||
			say "FAIL module: cannot load virtio_blk"
	fi
	say "copying the root into memory at $(up) s"
	if ! { mkdir -p $mem/proc $mem/sys $mem/dev $mem/tmp $mem$run "$mem$top/tests/guest" "$mem$top/build/tools" &&
		cp -a /usr /etc /bin /sbin /lib /lib64 $mem/ &&
		cp "$self" "$top/tests/guest/lib.sh" "$mem$top/tests/guest/" &&
		cp "$top/tests/common.sh" "$mem$top/tests/" &&
		cp "$top/build/tools/vblk_pt" "$mem$top/build/tools/" &&
		mount -t proc proc $mem/proc && mount -t sysfs sysfs $mem/sys &&
		mount -t debugfs debugfs $mem/sys/kernel/debug && mount -t devtmpfs devtmpfs $mem/dev &&
		mount -o bind $run $mem$run; }; then
		say "FAIL memroot: cannot set up $mem"
		exit 1
	fi
	# Nothing may stay open on 9p after the suspend: stdout and stderr are
	# the run directory's output until here.
	exec chroot $mem /bin/bash "$self" --in-memory </dev/null >/dev/console 2>&1
fi

# ---- in memory -----------------------------------------------------------

TOP=$top
# shellcheck source=lib.sh
. "$TOP/tests/guest/lib.sh"
PT=$TOOLS/vblk_pt
failed=0

ok() { say "ok $*"; }
bad() {
	say "FAIL $1: ${*:2}"
	failed=1
	return 1
}

# finish: the results are in the kernel log; give the console time to
# print them, then reset (QEMU's -no-reboot ends the VM). guest-init.sh
# cannot write the status into the run directory after a suspend.
finish() {
	say "done at $(up) s, failed=$failed"
	sleep 2
	echo b >/proc/sysrq-trigger
	sleep 60
	exit 1
}

say "in memory at $(up) s"
d=$(disk_by_serial vstor0) || { bad model "no disk with serial vstor0"; finish; }
got="$(hctx_types "$d") $(cat "/sys/block/$d/queue/io_poll")"
if [[ $got == "default poll 1" ]]; then
	ok model "$d: hctx types default poll, polling on"
else
	bad model "$d: hctx types and io_poll: $got; want default poll 1"
	finish
fi

# S3: QEMU's PIIX4 offers it in the ACPI tables; the kernel then lists
# "mem", and "deep" is S3, which QEMU reports as "suspended" and ends on
# system_wakeup (s2idle never leaves the guest's idle loop).
echo deep >/sys/power/mem_sleep 2>/dev/null
if grep -qw mem /sys/power/state && grep -q '\[deep\]' /sys/power/mem_sleep; then
	ok mem_sleep "/sys/power/state: $(cat /sys/power/state); mem_sleep: $(cat /sys/power/mem_sleep)"
else
	bad mem_sleep "/sys/power/state: $(cat /sys/power/state); mem_sleep: $(cat /sys/power/mem_sleep 2>&1); want mem and [deep]"
	finish
fi

# The reads: in flight while QEMU lets 4 requests a second through, the
# reader stopped, then the limit lifted so that the device completes them
# into a poll queue that nobody polls.
if ! "$PT" "${PT_ARGS[@]}" "/dev/vblk/$d" write >/tmp/sr.out 2>&1; then
	bad unreaped "the pattern write: $(tail -n 3 /tmp/sr.out)"
	finish
fi
qemu_throttle vdisk0 4 || { bad unreaped "cannot throttle vdisk0"; finish; }
"$PT" "${PT_ARGS[@]}" "/dev/vblk/$d" read >/tmp/sr.out 2>&1 &
reader=$!
for ((i = 0; i < 50; i++)); do
	busy=$(cat /sys/kernel/debug/block/"$d"/hctx*/busy 2>/dev/null | wc -l)
	((busy > 0)) && break
	sleep 0.05
done
if ! kill -STOP $reader; then
	qemu_throttle vdisk0 0
	bad unreaped "the reader ended before it could be stopped: $(tail -n 3 /tmp/sr.out)"
	finish
fi
qemu_throttle vdisk0 0 || { bad unreaped "cannot lift the throttle"; finish; }
sleep 2
busy=$(cat /sys/kernel/debug/block/"$d"/hctx*/busy 2>/dev/null | wc -l)
if ((busy > 0)); then
	ok unreaped "$busy of 32 polled reads left unreaped by the stopped reader"
else
	bad unreaped "the reader reaped every read before it stopped: nothing to test"
fi

# The suspend. The host wakes the guest once QEMU reports it suspended; the
# reply cannot come back (the run directory's 9p is gone after it), so
# nobody waits for it.
n0=$(cat /sys/power/suspend_stats/success)
if ! { printf '{"execute": "vstor-wake-on-suspend", "arguments": {"timeout": %d, "after": 2}}\n' \
	$WAKE_TIMEOUT >$run/qmp/sleep-wake.new && mv $run/qmp/sleep-wake.new $run/qmp/sleep-wake.req; }; then
	bad suspend "cannot ask the host for a wakeup"
	finish
fi
sync
say "suspending at $(up) s"
t0=$(up)
if echo mem >/sys/power/state; then
	n1=$(cat /sys/power/suspend_stats/success)
	if ((n1 == n0 + 1)) && dmesg | grep -q 'PM: suspend entry (deep)'; then
		ok suspend "suspended to RAM and resumed: echo mem returned after $(echo "$(up) $t0" | awk '{ print $1 - $2 }') s"
	else
		bad suspend "echo mem returned, but suspend_stats/success went from $n0 to $n1 (deep: $(dmesg | grep -c 'PM: suspend entry (deep)'))"
	fi
else
	bad suspend "echo mem >/sys/power/state failed"
fi

# The reader gets its reads once it polls again.
kill -CONT $reader
for ((i = 0; i < 600; i++)); do
	[[ -e /proc/$reader ]] || break
	sleep 0.1
done
if [[ -e /proc/$reader ]]; then
	bad reader "the reader did not finish within 60 s of SIGCONT (stack: $(tr '\n' ' ' </proc/$reader/stack 2>/dev/null))"
	kill -9 $reader
elif wait $reader; then
	ok reader "after SIGCONT the reader got all 32 polled reads, each verified"
else
	bad reader "the reader's reads after SIGCONT: $(tail -n 3 /tmp/sr.out | tr '\n' ' ')"
fi

# The disk after the restore: its poll queue back, polled passthrough
# writes and reads of another place.
got=$(hctx_types "$d")
if [[ $got != "default poll" ]]; then
	bad disk_after "hctx types after the resume: $got; want default poll"
elif timeout 60 "$PT" -P -p 77 -s 393216 -l 4096 -c 8 -q 4 "/dev/vblk/$d" write >/tmp/after.out 2>&1 &&
	timeout 60 "$PT" -P -p 77 -s 393216 -l 4096 -c 8 -q 4 "/dev/vblk/$d" read >>/tmp/after.out 2>&1; then
	ok disk_after "polled passthrough writes and reads of 8 blocks verified after the resume"
else
	bad disk_after "polled passthrough I/O after the resume: $(tail -n 3 /tmp/after.out | tr '\n' ' ')"
fi
finish
