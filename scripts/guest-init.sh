#!/bin/sh
# PID 1 of a vstor guest. The root is the host's / over 9p, read-only; this
# makes the writable places, mounts the run directory the host shared as tag
# "vstor", runs its cmd script and reboots (QEMU runs with -no-reboot, so
# this ends the VM). The script's exit status goes to status in that dir.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH HOME=/tmp TERM=dumb LANG=C.UTF-8

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /var/tmp
mount -t debugfs debugfs /sys/kernel/debug
mkdir -p /run/vstor
mount -t 9p -o trans=virtio,version=9p2000.L,cache=none vstor /run/vstor
hostname vstor-guest 2>/dev/null

# Modules of the booted kernel (virtio_blk, ...): modprobe applies their
# options from the kernel command line (virtio_blk.num_poll_queues=N).
if [ -s /run/vstor/modroot ] && [ -s /run/vstor/modules ]; then
	modprobe -d "$(cat /run/vstor/modroot)" -a $(cat /run/vstor/modules) ||
		echo "guest-init: modprobe failed" >&2
fi

cd /run/vstor || exit 1
/bin/bash /run/vstor/cmd >/run/vstor/output 2>&1
echo $? >/run/vstor/status
dmesg >/run/vstor/dmesg 2>/dev/null
sync
echo b >/proc/sysrq-trigger
