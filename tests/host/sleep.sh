# System sleep with polled requests that nobody polls. A guest suspends to
# RAM (ACPI S3, which QEMU's PIIX4 offers; the host wakes it with QMP's
# system_wakeup) while 32 polled passthrough reads are done in the device
# but unreaped, their process stopped by SIGSTOP, as every user task is
# frozen during a suspend: virtio_blk's freeze must reap the poll queue
# itself. The guest boots from vm/initramfs.sh's archive and runs
# tests/guest/inner-suspend.sh, which copies its root into memory first:
# 9p has no freeze or restore, and neither the root nor the run directory
# works after the resume. Results come on the serial console. The guest's
# files are in build/logs/sleep-vm-BASE.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_ORDER=90
SUITE_NEEDS=(kernel tools initramfs)
TESTS=(sleep_stopped_poller)
timeout_sleep_stopped_poller=900

SL_DIR=$BUILD/logs/sleep-vm-${KBASE:-6.12}
# The guest's run ends itself well within this; a suspend that never
# happens is seen sooner (sl_watch).
SL_VM_TIMEOUT=600
# What the guest must report as passed, each once.
SL_CHECKS=(model mem_sleep unreaped suspend reader disk_after)

# sl_watch PID DIR: wait for vm.sh (PID), whose run directory is DIR. If the
# host's wakeup request fails (the guest never suspended: a freeze waiting
# for ever) or the guest's kernel reports a problem (KLOG_BAD), give the
# console 5 s, then stop vm.sh, which would otherwise wait for its timeout,
# and return 1 with the reason in SL_WHY.
sl_watch() {
	local pid=$1 dir=$2
	SL_WHY=""
	while kill -0 "$pid" 2>/dev/null; do
		if grep -qs '"error"' "$dir/qmp/sleep-wake.resp"; then
			SL_WHY="the guest never suspended: the host's wakeup request failed: $(cat "$dir/qmp/sleep-wake.resp")"
		elif grep -Eqs "$KLOG_BAD" "$dir/console.log"; then
			SL_WHY="the guest's kernel reported a problem"
		fi
		if [[ -n $SL_WHY ]]; then
			sleep 5
			kill -TERM "$pid" 2>/dev/null
			wait "$pid"
			return 1
		fi
		sleep 1
	done
	wait "$pid"
}

# sl_run KO: boot the guest and judge its console. KO, when not empty: a
# virtio_blk.ko built against the guest kernel, loaded instead of the
# kernel's own (a variant without the fix fails the test).
sl_run() {
	local ko=${1:-} flavor=${VSTOR_FLAVOR:-guest} archive dir=$SL_DIR c n missing=() why
	local args=()
	archive=$BUILD/initramfs/nested-${KBASE:-6.12}-$flavor.cpio
	if [[ ! -s $archive && $flavor != guest ]]; then
		skip "no $archive: build:initramfs makes the guest kernel's (vm/initramfs.sh --flavor $flavor)"
		return
	fi
	rm -rf "$dir"
	mkdir -p "$dir"
	if [[ -n $ko ]]; then
		cp "$ko" "$dir/" || fail "cannot copy $ko" || return
		args=("$(basename "$ko")")
	fi
	# no_console_suspend: what the kernel says while a suspend hangs shows.
	"$TOP/vm/vm.sh" --flavor "$flavor" --keep "$dir" --initramfs "$archive" --timeout $SL_VM_TIMEOUT \
		--cpus 2 --disk "file:size=256M,queues=2" --append "virtio_blk.num_poll_queues=1 no_console_suspend" \
		--qemu -global --qemu PIIX4_PM.disable_s3=0 \
		-- "$TOP/tests/guest/inner-suspend.sh" "${args[@]}" >"$dir/vm.out" 2>&1 &
	# The guest resets itself when it is done (sysrq), so vm.sh finds no
	# status and says so; QEMU exits 0 for the reset (-no-reboot), 124 when
	# vm.sh's timeout ends it.
	if ! sl_watch $! "$dir"; then
		why=$SL_WHY
	elif grep -q '^vm: guest did not finish (qemu exit 0)' "$dir/vm.out"; then
		why=""
	else
		why="the guest did not end by itself within $SL_VM_TIMEOUT s"
	fi
	grep -a 'inner: ' "$dir/console.log" 2>/dev/null | tr -d '\r' | sed 's/^\[[^]]*\] //; s/^/  /'
	for c in "${SL_CHECKS[@]}"; do
		n=$(grep -ac "inner: ok $c " "$dir/console.log" 2>/dev/null)
		[[ $n == 1 ]] || missing+=("$c")
	done
	if [[ -n $why ]] || ((${#missing[@]})) || grep -aq 'inner: FAIL' "$dir/console.log" ||
		grep -Eaq "$KLOG_BAD" "$dir/console.log"; then
		echo "vm.sh's output, last lines:"
		tail -n 15 "$dir/vm.out" | sed 's/^/  /'
		echo "the guest's console, last lines:"
		tail -n 25 "$dir/console.log" | sed 's/^/  /'
		echo "logs: $dir (console.log, qemu.cmd, qmp/)"
	fi
	[[ -z $why ]] || fail "$why" || return
	! grep -Eaq "$KLOG_BAD" "$dir/console.log" ||
		fail "the guest's kernel reported a problem: $(grep -Ea -m 1 "$KLOG_BAD" "$dir/console.log")" || return
	! grep -aq 'inner: FAIL' "$dir/console.log" || fail "checks failed in the guest (above)" || return
	((${#missing[@]} == 0)) || fail "checks not passed once in the guest: ${missing[*]}" || return
	echo "==> sleep_stopped_poller: $(grep -ao 'inner: ok unreaped [0-9]* of 32' "$dir/console.log" |
		sed 's/.* unreaped //') reads unreaped at the suspend; suspended $(sed -n 's/.*"waited": \([0-9.]*\).*/\1/p' \
		"$dir/qmp/sleep-wake.resp") s after the wakeup request; $(grep -ao 'echo mem returned after [0-9.]* s' "$dir/console.log")"
}

desc_sleep_stopped_poller="a suspend to RAM (S3; the host wakes the guest) while 32 polled passthrough reads are done in the device but unreaped, their process stopped by SIGSTOP (as user tasks are frozen during a suspend): virtio_blk's freeze reaps the poll queue itself and the guest suspends and resumes; after SIGCONT the process gets every read, verified, and the disk's poll queue works"
sleep_stopped_poller() { sl_run ""; }
