# Power loss at every flush point (issue 32). cr_boot boots one guest with
# three disks whose writes QEMU's blklogwrites records (vm/vm.sh --disk
# file:...,logwrites) and runs tests/guest/crash-workload.sh on each (ext4,
# files written, fsync'd and replaced, a claim on the disk after each
# fsync), one workload per test below. Each of those tests then replays its
# disk's log on the host with tests/tools/replay_log.py: the disk as it
# would be after a power loss at each flush, at random points between
# flushes (any subset of the writes since the last flush kept) and at the
# end must pass e2fsck and hold every file claimed durable; the same log
# replayed with the second file's writes lost must fail, so the check can
# fail. The VM's files are in build/logs/crash-vm-BASE.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_ORDER=95
SUITE_NEEDS=(kernel)
TESTS=(cr_tool cr_boot cr_irq cr_wt_repoll cr_wb_repoll)
timeout_cr_boot=900

CR_MB=64
CR_FILES=12
CR_VM=$BUILD/logs/crash-vm-${KBASE:-6.12}

desc_cr_tool="the replay tool on a log made on the host (mkfs.ext4 and debugfs, block by block): it passes at every flush, fails when the second file's writes are lost, and refuses a log that is not one"
cr_tool() {
	local out rc=0
	out=$(/usr/bin/python3 "$TOP/tests/tools/replay_log_selftest.py" "$BUILD/logs/crash-tool") || rc=$?
	printf '%s\n' "$out"
	((rc == 0)) || fail "replay_log_selftest.py exited $rc" || return
	echo "==> cr_tool: $(head -n 1 <<<"$out")"
}

desc_cr_boot="one guest, three logged disks (2 queues each, writeback cache), a workload of $CR_FILES files on each: vstor0 as is, vstor1 set to write through after file 1 and given a poll queue (a device reset) after file 8, vstor2 given a poll queue after file 8"
cr_boot() {
	local rc=0 d
	rm -rf "$CR_VM"
	mkdir -p "$CR_VM"
	# $DEV is the guest's, set by the workload for each job.
	cat >"$CR_VM/jobs" <<JOBS
job vstor0 $CR_FILES
job vstor1 $CR_FILES '1:echo "write through" > /sys/block/\$DEV/cache_type' '8:echo 1 > /sys/block/\$DEV/num_poll_queues'
job vstor2 $CR_FILES '8:echo 1 > /sys/block/\$DEV/num_poll_queues'
JOBS
	local disks=()
	for d in 0 1 2; do
		disks+=(--disk "file:size=${CR_MB}M,queues=2,logwrites")
	done
	"$TOP/vm/vm.sh" --flavor "${VSTOR_FLAVOR:-guest}" --keep "$CR_VM/vm" --timeout 800 \
		--cpus 2 "${disks[@]}" -- "$TOP/tests/guest/crash-workload.sh" "$CR_VM/jobs" || rc=$?
	sed 's/^/guest: /' "$CR_VM/vm/output" 2>/dev/null | tail -n 20
	((rc == 0)) || fail "the guest workloads exited $rc (see $CR_VM/vm/console.log)" || return
	for d in 0 1 2; do
		[[ -s $CR_VM/vm/disk$d.log ]] || fail "no write log of disk $d" || return
	done
	echo "==> cr_boot: $(grep -c 'crash-workload: vstor.* files, ' "$CR_VM/vm/output") workloads"
}

# crash_replay K: replay disk K's log, and again with writes lost.
crash_replay() {
	local log=$CR_VM/vm/disk$1.log out rc=0
	[[ -s $log && -s $CR_VM/vm/status ]] || fail "not run: cr_boot made no log of disk $1" || return
	out=$(/usr/bin/python3 "$TOP/tests/tools/replay_log.py" "$log" --size $((CR_MB << 20)) \
		--random 10 --work "$CR_VM/replay$1") || rc=$?
	printf '%s\n' "$out"
	((rc == 0)) || fail "replay: $(tail -n 1 <<<"$out")" || return
	echo "==> disk $1: $(tail -n 1 <<<"$out")"
	out=$(/usr/bin/python3 "$TOP/tests/tools/replay_log.py" "$log" --size $((CR_MB << 20)) \
		--random 5 --mutate --work "$CR_VM/replay$1") || rc=$?
	((rc == 1)) || fail "the replay with the second file's writes lost exited $rc, want 1: $(tail -n 1 <<<"$out")" || return
	echo "==> disk $1, the second file's writes lost: $(tail -n 1 <<<"$out")"
}

desc_cr_irq="vstor0, the interrupt path with completion batching, writeback cache: ext4 and every fsync'd file intact after a power loss at each flush and between flushes"
cr_irq() { crash_replay 0; }

desc_cr_wt_repoll="vstor1, write through, then a runtime poll-queue change (a device reset) after 8 files: the disk stays write-through, so every file fsync'd after the change survives (it catches a reset that restores the device's writeback cache while the guest sends no flushes)"
cr_wt_repoll() { crash_replay 1; }

desc_cr_wb_repoll="vstor2, writeback, with a runtime poll-queue change after 8 files: flushes still reach the disk after the reset"
cr_wb_repoll() { crash_replay 2; }
