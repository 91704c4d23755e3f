# Helpers for guest-side test suites; sourced by tests/guest/run.sh.
# shellcheck shell=bash
# A suite file defines test functions and lists them in order:
#   TESTS=(fn1 fn2 ...)   and   desc_fn1="what it checks" ...
# Each function returns 0 for pass; anything else is a failure. Diagnostics go
# to stdout prefixed with "# " by the runner. A kernel log line matching
# KLOG_BAD that appears while a test runs fails that test.

# shellcheck source=../common.sh
. "$TOP/tests/common.sh"

TOOLS=${TOOLS:-$TOP/build/tools}

# vhost_blk_load: load vhost_blk (from the booted kernel's modules) unless
# /dev/vhost-blk is already there.
vhost_blk_load() {
	[[ -e /dev/vhost-blk ]] && return 0
	vmodprobe vhost_blk || return 1
	udevadm settle 2>/dev/null || true
	[[ -e /dev/vhost-blk ]] || fail "no /dev/vhost-blk after loading vhost_blk"
}

# ext4_on DEV DIR: a fresh ext4 on DEV mounted at DIR, unless DIR is already
# a mount point.
ext4_on() {
	mkdir -p "$2"
	mountpoint -q "$2" && return 0
	if ! mkfs.ext4 -q -F "$1" || ! mount "$1" "$2"; then
		fail "cannot make ext4 on $1"
	fi
}

# Disk name (vda, ...) of the virtio-blk disk with this serial.
disk_by_serial() {
	local d
	for d in /sys/block/vd*; do
		[[ $(cat "$d/serial" 2>/dev/null) == "$1" ]] && { basename "$d"; return 0; }
	done
	return 1
}

# cpu_list_expand LIST: "0, 2, 3" or "0-1,3" -> "0 2 3".
cpu_list_expand() {
	local part out=()
	for part in ${1//,/ }; do
		if [[ $part == *-* ]]; then
			mapfile -t -O "${#out[@]}" out < <(seq "${part%-*}" "${part#*-}")
		else
			out+=("$part")
		fi
	done
	echo "${out[*]}"
}

# expect_irq_cpus WHAT CPU_LIST_FILE IRQ_NAME: the queue whose sysfs
# cpu_list is CPU_LIST_FILE (a blk-mq hctx, a virtio-fs queue) serves
# exactly the CPUs of the interrupt named IRQ_NAME in /proc/interrupts.
expect_irq_cpus() {
	local irq
	irq=$(awk -v name="$3" '$NF == name { sub(":", "", $1); print $1 }' /proc/interrupts)
	if [[ -z $irq ]]; then
		grep virtio /proc/interrupts | awk '{ print $1, $NF }'
		fail "$1: no interrupt named $3"
		return 1
	fi
	expect_eq "$1: cpu_list vs IRQ $irq affinity" \
		"$(cpu_list_expand "$(cat "$2")")" \
		"$(cpu_list_expand "$(cat "/proc/irq/$irq/smp_affinity_list")")"
}

# virtioN device behind a disk.
virtio_dev() { basename "$(readlink -f "/sys/block/$1/device")"; }

# Space-separated hctx types of a disk, in hctx order.
hctx_types() {
	local n=0 out=()
	while [[ -e /sys/kernel/debug/block/$1/hctx$n/type ]]; do
		out+=("$(cat "/sys/kernel/debug/block/$1/hctx$n/type")")
		n=$((n + 1))
	done
	echo "${out[*]}"
}

# Total interrupts taken by IRQ lines whose name matches a regex.
irq_sum() {
	awk -v re="$1" '$NF ~ re { for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i; else break } END { print s + 0 }' /proc/interrupts
}

# Number of IRQ lines whose name matches a regex.
irq_lines() { awk -v re="$1" '$NF ~ re' /proc/interrupts | wc -l; }

# fio_json OUT ARGS...: run fio with JSON output into OUT; fail on fio error.
fio_json() {
	local json=$1
	shift
	if ! "${FIO_BIN:-fio}" --output-format=json --output="$json" "$@" >"$json.log" 2>&1; then
		cat "$json.log"
		[[ -s $json ]] && grep -E '"error"' "$json" | head -5
		return 1
	fi
}

# fio_field OUT DIR EXPR: print a number from fio JSON of job 0. EXPR is a
# python expression over j (the job's DIR section), e.g. 'j["iops"]'.
fio_field() {
	/usr/bin/python3 -c '
import json, sys
job = json.load(open(sys.argv[1]))["jobs"][0]
j = job[sys.argv[2]]
print(eval(sys.argv[3]))' "$1" "$2" "$3"
}

# rebind_virtio DEV: unbind and bind a virtio device so virtio_blk probes it
# again (picking up changed module parameters).
rebind_virtio() {
	echo "$1" >/sys/bus/virtio/drivers/virtio_blk/unbind &&
		echo "$1" >/sys/bus/virtio/drivers/virtio_blk/bind
}

# modprobe/rmmod for the booted kernel's modules (installed in the build tree,
# not in the host's /lib/modules).
MODROOT=$(cat /run/vstor/modroot 2>/dev/null)
vmodprobe() { modprobe -d "$MODROOT" "$@"; }

# sysfs_write PATH VALUE: write VALUE in one write(2); print OK or the errno
# name (EINVAL, ...).
sysfs_write() {
	/usr/bin/python3 - "$1" "$2" <<'PY'
import errno, os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY)
    try:
        os.write(fd, sys.argv[2].encode())
    finally:
        os.close(fd)
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
PY
}

# expect_types DISK NDEFAULT NPOLL: the disk's hctx types are NDEFAULT
# "default" followed by NPOLL "poll".
expect_types() {
	local want=() i
	for ((i = 0; i < $2; i++)); do want+=(default); done
	for ((i = 0; i < $3; i++)); do want+=(poll); done
	expect_eq "$1 hctx types" "$(hctx_types "$1")" "${want[*]}"
}

# quick_verify DISK HIPRI: a small random-write-and-verify job (4 MiB, QD4)
# that proves the disk works, polled (HIPRI=1) or not.
quick_verify() {
	fio_json /tmp/qv.json --name=qv --filename="/dev/$1" --ioengine=io_uring \
		--direct=1 --rw=randwrite --bs=4k --iodepth=4 --hipri="$2" \
		--size=4M --verify=crc32c
}

# host_qmp JSON: have the host send a QMP command to this guest's QEMU (see
# vm/vm.sh); print the reply, fail if it is an error or never comes.
host_qmp() {
	local name dir=/run/vstor/qmp i
	name=$$-$RANDOM$RANDOM
	printf '%s\n' "$1" >"$dir/$name.new"
	mv "$dir/$name.new" "$dir/$name.req"
	for ((i = 0; i < 300; i++)); do
		if [[ -e $dir/$name.resp ]]; then
			cat "$dir/$name.resp"
			! grep -q '"error"' "$dir/$name.resp"
			return
		fi
		sleep 0.1
	done
	fail "no reply from the host to QMP $1"
}

# qemu_throttle QDEV IOPS [BPS]: limit QEMU's virtio-blk device QDEV (vdiskK)
# to IOPS requests and BPS bytes per second; 0 lifts a limit. QEMU merges
# adjacent requests into one before it counts them: a limit on sequential
# I/O takes BPS.
qemu_throttle() {
	host_qmp '{"execute": "block_set_io_throttle", "arguments": {"id": "/machine/peripheral/'"$1"'/virtio-backend",
		"bps": '"${3:-0}"', "bps_rd": 0, "bps_wr": 0, "iops": '"$2"', "iops_rd": 0, "iops_wr": 0}}' >/dev/null ||
		fail "QMP block_set_io_throttle $2 ${3:-0} on $1 refused"
}

# sysfs_write_loop PATH VALUE...: write the values in turn, forever, one
# write(2) each, printing OK or the errno name per write; stops when killed
# or when PATH is gone for good. One process, so killing it leaves no writer
# behind.
sysfs_write_loop() {
	exec /usr/bin/python3 - "$@" <<'PY'
import errno, os, sys
path, values = sys.argv[1], sys.argv[2:]
while True:
    for v in values:
        try:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, v.encode())
            finally:
                os.close(fd)
            print("OK", flush=True)
        except OSError as e:
            print(errno.errorcode.get(e.errno, str(e.errno)), flush=True)
PY
}

# expect_hipri_unsupported DISK: polled I/O on the disk fails, and with
# EOPNOTSUPP (the disk has no poll queues).
expect_hipri_unsupported() {
	local out
	if out=$(fio --name=h --filename="/dev/$1" --ioengine=io_uring --direct=1 \
		--rw=randread --bs=4k --hipri=1 --size=1M --number_ios=10 2>&1); then
		fail "hipri I/O succeeded without poll queues"
		return
	fi
	grep -q "Operation not supported" <<<"$out" ||
		fail "hipri without poll queues did not report EOPNOTSUPP: $out"
}

# vhost-blk-bridge (tools/vhost-blk-bridge) and its scripted front end
# (tests/tools/vub_test.py), for the bridge suite and errinj.
BRIDGE=$TOOLS/vhost-blk-bridge
VUB=$TOP/tests/tools/vub_test.py

# qemu_version: the version of the QEMU this guest would run (the host's,
# through the shared root) as MAJOR * 100 + MINOR (702, 1000, 1101).
qemu_version() {
	local major minor
	read -r major minor < <(qemu-system-x86_64 --version 2>/dev/null |
		sed -n 's/^QEMU emulator version \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
	[[ -n $minor ]] || { fail "cannot tell the version of qemu-system-x86_64"; return; }
	echo $((major * 100 + minor))
}

# br_start NAME ARGS...: start the bridge on /tmp/NAME.sock with its stats in
# /tmp/NAME.stats and its log in /tmp/NAME.log; sets BR_PID, BR_SOCK,
# BR_STATS and BR_LOG.
br_start() {
	local name=$1 i
	shift
	BR_SOCK=/tmp/$name.sock BR_STATS=/tmp/$name.stats BR_LOG=/tmp/$name.log
	rm -f "$BR_SOCK" "$BR_STATS"
	"$BRIDGE" --socket "$BR_SOCK" --stats "$BR_STATS" "$@" 2>"$BR_LOG" &
	BR_PID=$!
	for ((i = 0; i < 100; i++)); do
		[[ -S $BR_SOCK && -s $BR_STATS ]] && return 0
		kill -0 $BR_PID 2>/dev/null || break
		sleep 0.1
	done
	cat "$BR_LOG"
	fail "the bridge did not start: $BRIDGE $*"
}

# br_stop: SIGTERM; the bridge must exit 0 and remove its socket.
br_stop() {
	local rc=0
	kill -TERM "$BR_PID" 2>/dev/null
	wait "$BR_PID" || rc=$?
	if ((rc != 0)); then
		sed 's/^/  bridge: /' "$BR_LOG" | tail -n 20
		fail "the bridge exited $rc on SIGTERM"
		return
	fi
	[[ ! -e $BR_SOCK ]] || fail "the bridge left $BR_SOCK behind"
}

# vub SCENARIO... [-- OPTIONS]: the scripted front end against the running
# bridge; its ok/not ok lines go to the log.
vub() {
	local rc=0
	timeout -k 5 600 /usr/bin/python3 "$VUB" --socket "$BR_SOCK" --stats "$BR_STATS" --pid "$BR_PID" "$@" || rc=$?
	((rc == 0)) || fail "vub_test.py $* exited $rc"
}
