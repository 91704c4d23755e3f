# Zoned virtio-blk: a host-managed null_blk of this guest (16 zones of
# 8 MiB, memory-backed), refused by vhost-blk, and passed by QEMU (8.0 or
# later: VIRTIO_BLK_F_ZONED on a zoned host_device) to a second-level guest
# as a zoned virtio-blk disk, where tests/guest/inner-zoned.sh runs the
# zone operations, writes on the interrupt and poll queues, zone appends
# (tests/kmod/vstor_zap.c) and passthrough's refusals.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

# The guest this suite boots (vm/vm.sh options) and what it needs built.
SUITE_VM=(--cpus 2 --no-disk --append "brd.rd_nr=1 brd.rd_size=65536")
SUITE_NEEDS=(kernel tools fio initramfs)
SUITE_ORDER=91
# Boot of the second-level guest (75-130 s on the bridge's runs) and its
# checks, with margin; the second-level guest is killed at ZN_T_NESTED.
ZN_T_NESTED=$((900 * ${VSTOR_TIMEOUT_SCALE:-1}))
timeout_zn_nested=1000

ZN_NULLB=/sys/kernel/config/nullb/vzoned
ZN_ZONES=16
ZN_ZONE_MB=8
ZN_INITRAMFS=${BUILD:-$TOP/build}/initramfs/nested-${KBASE:-6.12}-guest.cpio
# What the second-level guest must report as passed, each once.
ZN_CHECKS=(model report open close finish reset wp_refused fio_irq fio_poll
	append_irq append_nobatch append_poll pt_info pt_refused pt_read)

# zn_disk: the zoned null_blk /dev/vzoned, made once per boot.
zn_disk() {
	mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config || return
	if [[ ! -d $ZN_NULLB ]]; then
		mkdir $ZN_NULLB || fail "cannot create a null_blk through configfs" || return
		echo $((ZN_ZONES * ZN_ZONE_MB)) >$ZN_NULLB/size && echo 1 >$ZN_NULLB/memory_backed &&
			echo 1 >$ZN_NULLB/zoned && echo $ZN_ZONE_MB >$ZN_NULLB/zone_size &&
			echo 0 >$ZN_NULLB/zone_nr_conv && echo 1 >$ZN_NULLB/power ||
			fail "cannot configure a zoned null_blk (CONFIG_BLK_DEV_ZONED?)" || return
		udevadm settle 2>/dev/null || true
	fi
	[[ -b /dev/vzoned ]] || fail "no /dev/vzoned" || return
	expect_eq "vzoned zoned model" "$(cat /sys/block/vzoned/queue/zoned)" host-managed || return
	expect_eq "vzoned zones" "$(cat /sys/block/vzoned/queue/nr_zones)" $ZN_ZONES
}

desc_zn_vhost="vhost-blk refuses a zoned block device as its backend (EOPNOTSUPP: it offers no VIRTIO_BLK_F_ZONED) and serves the next backend; vhost-blk-bridge refuses one at start, saying why"
zn_vhost() {
	vhost_blk_load || return
	zn_disk || return
	local out rc=0
	out=$("$TOOLS/vhost_blk_test" --backend /dev/ram0 --zoned /dev/vzoned --mode functional \
		--only "SET_BACKEND errors" 2>&1) || rc=$?
	printf '%s\n' "$out" | grep -E '^(not )?ok|^# ' | sed 's/^/  /'
	((rc == 0)) || fail "vhost_blk_test exited $rc" || return
	printf '%s\n' "$out" | grep -q "^ok .* - SET_BACKEND with a zoned block device (/dev/vzoned): EOPNOTSUPP" ||
		fail "no passed check of the zoned backend in vhost_blk_test's output" || return
	rc=0
	out=$(timeout 30 "$BRIDGE" --socket /tmp/zn.sock --backend /dev/vzoned 2>&1) || rc=$?
	rm -f /tmp/zn.sock /tmp/zn.sock.pid
	note "vhost-blk-bridge: exit $rc: $out"
	((rc != 0 && rc != 124)) || fail "vhost-blk-bridge started on a zoned backend (exit $rc)" || return
	[[ $out == *"zoned block device ($ZN_ZONES zones), which vhost-blk does not serve"* ]] ||
		fail "vhost-blk-bridge did not say the backend is zoned"
}

# zn_watch PID DIR: wait for vm.sh (PID), whose run directory is DIR, and
# return its status; if the second-level guest's kernel reports a problem
# (KLOG_BAD) first, give it 5 s to print the rest, then stop vm.sh, which
# would otherwise wait for its timeout, and return 1.
zn_watch() {
	local pid=$1 dir=$2 rc=0
	while kill -0 "$pid" 2>/dev/null; do
		if grep -Eq "$KLOG_BAD" "$dir/console.log" 2>/dev/null; then
			sleep 5
			kill -TERM "$pid" 2>/dev/null
			wait "$pid"
			echo "the second-level guest's kernel reported a problem:"
			grep -E -B2 -A25 "$KLOG_BAD" "$dir/console.log" | head -n 40 | sed 's/^/  /'
			return 1
		fi
		sleep 2
	done
	wait "$pid" || rc=$?
	return "$rc"
}

desc_zn_nested="QEMU (8.0 or later) passes the zoned null_blk to a second-level guest as a zoned virtio-blk disk with a poll queue: zone model and report, open, close, finish and reset, a write off the write pointer refused, fio zbd write and verify on the interrupt queue and with hipri (the writes plugged, the reads polled), a polled read with no request interrupt, 32 concurrent zone appends each returned its own sector (the interrupt path with the batch knob on and off, and polled: ended through the driver's completion batch), passthrough lists no writing command, refuses them with EOPNOTSUPP and reads"
zn_nested() {
	local qv dir rc=0 c missing=()
	qv=$(qemu_version) || return
	((qv >= 800)) || skip "QEMU $((qv / 100)).$((qv % 100)): zoned virtio-blk came with QEMU 8.0 (a Debian 13 root has QEMU 10)" || return
	zn_disk || return
	# Every zone empty, whatever an earlier run left.
	blkzone reset /dev/vzoned || fail "cannot reset the zones of /dev/vzoned" || return
	dir=/run/vstor/nested/zoned
	rm -rf "$dir"
	mkdir -p "$dir"
	"$TOP/vm/vm.sh" --keep "$dir" --initramfs "$ZN_INITRAMFS" --minimal \
		--cpus 2 --mem 512M --no-disk --timeout "$ZN_T_NESTED" \
		--append "virtio_blk.num_poll_queues=1" \
		--qemu -blockdev --qemu "node-name=zd,driver=host_device,filename=/dev/vzoned,cache.direct=on" \
		--qemu -device --qemu "virtio-blk-pci,drive=zd,num-queues=2,serial=zoned0" \
		-- "$TOP/tests/guest/inner-zoned.sh" $ZN_ZONES $((ZN_ZONE_MB << 11)) >"$dir/vm.out" 2>&1 &
	zn_watch $! "$dir" || rc=$?
	grep '^inner: ' "$dir/output" 2>/dev/null | sed 's/^/  /'
	for c in "${ZN_CHECKS[@]}"; do
		[[ $(grep -c "^inner: ok $c\( \|$\)" "$dir/output" 2>/dev/null) == 1 ]] || missing+=("$c")
	done
	if ((rc != 0 || ${#missing[@]})); then
		echo "vm.sh's output, last lines:"
		tail -n 15 "$dir/vm.out" | sed 's/^/  /'
		echo "logs of the second-level guest: $(cat /run/vstor/hostpath 2>/dev/null ||
			echo "this boot's run directory")/${dir#/run/vstor/}"
	fi
	((rc == 0)) || fail "the second-level guest's run failed (vm.sh exit $rc)" || return
	((${#missing[@]} == 0)) || fail "checks not passed in the second-level guest: ${missing[*]}"
}

TESTS=(zn_vhost zn_nested)
