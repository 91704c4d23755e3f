#!/bin/sh
# PID 1 of a vstor guest. The root is the host's / over 9p, read-only; this
# makes the writable places, mounts the run directory the host shared as tag
# "vstor", loads the kernel's modules, runs the run directory's cmd script
# and reboots (QEMU runs with -no-reboot, so this ends the VM). The script's
# exit status goes to status in that directory.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH HOME=/tmp TERM=dumb LANG=C.UTF-8
TOP=$(cd "$(dirname "$0")/.." && pwd)

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug
# Process substitution (<(...)) needs /dev/fd.
ln -sfn /proc/self/fd /dev/fd

# The project may live under a directory that gets a tmpfs below (a clone in
# /tmp, say). Park it on /dev (devtmpfs, writable) and put it back after.
mkdir -p /dev/.vstor-top
mount --bind "$TOP" /dev/.vstor-top
for d in /run /tmp /var/tmp; do
	mount -t tmpfs -o mode=1777 tmpfs "$d"
done
chmod 755 /run
if [ ! -e "$TOP/vm/guest-init.sh" ]; then
	mkdir -p "$TOP"
	mount --bind /dev/.vstor-top "$TOP"
fi

# The kernel base the host booted (scripts/lib.sh): what a nested guest boots.
read -r cmdline </proc/cmdline
for w in $cmdline; do
	case $w in vstor.kbase=*) KBASE=${w#vstor.kbase=} && export KBASE ;; esac
done
mkdir -p /run/vstor
mount -t 9p -o trans=virtio,version=9p2000.L,cache=none vstor /run/vstor
hostname vstor-guest 2>/dev/null
cd /run/vstor || exit 1

# Modules of the booted kernel (virtio_blk, ...): modprobe applies their
# options from the kernel command line (virtio_blk.num_poll_queues=N).
if [ -s modroot ] && [ -s modules ]; then
	# shellcheck disable=SC2046 # the file holds module names, one word each
	modprobe -d "$(cat modroot)" -a $(cat modules) >>output 2>&1 ||
		echo "guest-init: cannot load modules: $(cat modules)" >>output
fi

/bin/bash /run/vstor/cmd >>output 2>&1
echo $? >status
# shellcheck disable=SC2094 # the command dmesg into the file dmesg
dmesg >dmesg 2>/dev/null
sync
echo b >/proc/sysrq-trigger
