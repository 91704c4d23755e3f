# Power loss at every flush point (issue 32). Each test boots a guest whose
# disk QEMU's blklogwrites records (vm/vm.sh --disk file:...,logwrites),
# runs tests/guest/crash-workload.sh in it (ext4, files written, fsync'd
# and replaced, a claim on the disk after each fsync), then replays the log
# on the host with tests/tools/replay_log.py: the disk as it would be after
# a power loss at each flush, at random points between flushes (any subset
# of the writes since the last flush kept) and at the end must pass e2fsck
# and hold every file claimed durable. The same log replayed with the
# second file's writes lost must fail, so the check can fail. The guest's
# and the replay's output are in the test's log; the VM's files in
# build/logs/crash-vm-BASE-TEST.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_ORDER=95
SUITE_NEEDS=(kernel)
SUITE_TIMEOUT=900
TESTS=(cr_tool cr_irq cr_wt_repoll cr_wb_repoll)

CR_MB=64
CR_FILES=24

# crash_run NAME VM-ARGS... -- STEP...: the workload under vm.sh, then the
# replay, then the replay with writes lost.
crash_run() {
	local name=$1 keep vmargs=() rc=0 out
	shift
	while (($#)) && [[ $1 != -- ]]; do
		vmargs+=("$1")
		shift
	done
	shift
	keep=$BUILD/logs/crash-vm-${KBASE:-6.12}-$name
	rm -rf "$keep"
	"$TOP/vm/vm.sh" --flavor "${VSTOR_FLAVOR:-guest}" --keep "$keep" --timeout 600 \
		--cpus 2 --disk "file:size=${CR_MB}M,queues=2,logwrites" "${vmargs[@]}" -- \
		"$TOP/tests/guest/crash-workload.sh" vstor0 "$CR_FILES" "$@" || rc=$?
	sed 's/^/guest: /' "$keep/output" 2>/dev/null | tail -n 20
	((rc == 0)) || fail "the guest workload exited $rc (see $keep/console.log)" || return
	out=$(python3 "$TOP/tests/tools/replay_log.py" "$keep/disk0.log" \
		--size $((CR_MB << 20)) --random 20) || rc=$?
	printf '%s\n' "$out"
	((rc == 0)) || fail "replay: $(tail -n 1 <<<"$out")" || return
	echo "==> $name: $(tail -n 1 <<<"$out")"
	rc=0
	out=$(python3 "$TOP/tests/tools/replay_log.py" "$keep/disk0.log" \
		--size $((CR_MB << 20)) --random 5 --mutate) || rc=$?
	((rc == 1)) || fail "the replay with the second file's writes lost exited $rc, want 1: $(tail -n 1 <<<"$out")" || return
	echo "==> $name, second file's writes lost: $(tail -n 1 <<<"$out")"
}

desc_cr_tool="the replay tool on a log made on the host (mkfs.ext4 and debugfs, block by block): it passes at every flush, fails when the second file's writes are lost, and refuses a log that is not one"
cr_tool() {
	local out rc=0
	out=$(python3 "$TOP/tests/tools/replay_log_selftest.py" "$BUILD/logs/crash-tool") || rc=$?
	printf '%s\n' "$out"
	((rc == 0)) || fail "replay_log_selftest.py exited $rc" || return
	echo "==> cr_tool: $(head -n 1 <<<"$out")"
}

desc_cr_irq="the interrupt path with completion batching (2 queues, writeback cache): ext4 and every fsync'd file intact after a power loss at each flush and between flushes"
cr_irq() { crash_run cr_irq --; }

desc_cr_wt_repoll="write through, then a runtime poll-queue change (a device reset) after 8 files: the disk stays write-through, so every file fsync'd after the change survives (it catches a reset that restores the device's writeback cache while the guest sends no flushes)"
# shellcheck disable=SC2016 # $DEV is the guest's, set by the workload
cr_wt_repoll() {
	crash_run cr_wt_repoll -- '1:echo "write through" > /sys/block/$DEV/cache_type' \
		'8:echo 1 > /sys/block/$DEV/num_poll_queues'
}

desc_cr_wb_repoll="writeback, with a runtime poll-queue change after 8 files: flushes still reach the disk after the reset"
# shellcheck disable=SC2016 # $DEV is the guest's, set by the workload
cr_wb_repoll() {
	crash_run cr_wb_repoll -- '8:echo 1 > /sys/block/$DEV/num_poll_queues'
}
