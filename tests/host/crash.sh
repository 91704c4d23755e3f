# Power loss at every flush point (issue 32). cr_boot boots one guest with
# eight disks whose writes QEMU's blklogwrites records (vm/vm.sh --disk
# file:...,logwrites) and runs tests/guest/crash-workload.sh on each (ext4,
# files written, fsync'd and replaced, a claim on the disk after each
# fsync; or, on the passthrough disk, ranges written and flushed through
# /dev/vblk and claimed), one workload per test below. Each of those tests
# then replays its disk's log on the host with tests/tools/replay_log.py:
# the disk as it would be after a power loss at each flush, at random
# points between flushes (any subset of the writes since the last flush
# kept) and at the end must pass e2fsck and hold every file (or range)
# claimed durable; the same log replayed with claimed writes lost (the
# second file's, or a raw log's first round) must fail, so the check can
# fail. The VM's files are in build/logs/crash-vm-BASE.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_ORDER=95
SUITE_NEEDS=(kernel tools initramfs)
TESTS=(cr_tool cr_boot cr_irq cr_wt_repoll cr_wb_repoll cr_hipri cr_pt cr_vhost
	cr_nest_flush cr_nest_wt cr_vfs_kill_daemon cr_vfs_kill_vmm)
timeout_cr_boot=1200
timeout_cr_vfs_kill_daemon=600
timeout_cr_vfs_kill_vmm=600

CR_MB=64
CR_FILES=12
CR_ROUNDS=24
CR_VHOST_ROUNDS=6
CR_NEST_ROUNDS=4
CR_DISKS=8
CR_VM=$BUILD/logs/crash-vm-${KBASE:-6.12}

desc_cr_tool="the replay tool on a log made on the host (mkfs.ext4 and debugfs, block by block): it passes at every flush, fails when the second file's writes are lost, and refuses a log that is not one"
cr_tool() {
	local out rc=0
	out=$(/usr/bin/python3 "$TOP/tests/tools/replay_log_selftest.py" "$BUILD/logs/crash-tool") || rc=$?
	printf '%s\n' "$out"
	((rc == 0)) || fail "replay_log_selftest.py exited $rc" || return
	echo "==> cr_tool: $(head -n 1 <<<"$out")"
}

desc_cr_boot="one guest, $CR_DISKS logged disks (2 queues each, writeback cache), a workload of $CR_FILES files on the first four: vstor0 as is, vstor1 set to write through after file 1 and given a poll queue (a device reset) after file 8, vstor2 given a poll queue after file 8, vstor3 given a poll queue first and written with polled direct I/O; $CR_ROUNDS rounds of passthrough writes and flushes on vstor4, with a poll queue; vstor5 served by vhost-blk to a scripted driver; vstor6 and vstor7 served by vhost-blk (with FLUSH, and write-through) to a second-level guest"
cr_boot() {
	local rc=0 d
	rm -rf "$CR_VM"
	mkdir -p "$CR_VM"
	# $DEV is the guest's, set by the workload for each job.
	cat >"$CR_VM/jobs" <<JOBS
job vstor0 $CR_FILES
job vstor1 $CR_FILES '1:echo "write through" > /sys/block/\$DEV/cache_type' '8:echo 1 > /sys/block/\$DEV/num_poll_queues'
job vstor2 $CR_FILES '8:echo 1 > /sys/block/\$DEV/num_poll_queues'
job vstor3 $CR_FILES '0:echo 1 > /sys/block/\$DEV/num_poll_queues; WRITER=hipri'
rawjob vstor4 $CR_ROUNDS '0:echo 1 > /sys/block/\$DEV/num_poll_queues'
vhostjob vstor5 $CR_VHOST_ROUNDS
nestjob vstor6 vstor7 $CR_NEST_ROUNDS $BUILD/initramfs/nested-${KBASE:-6.12}-guest.cpio
JOBS
	local disks=()
	for ((d = 0; d < CR_DISKS; d++)); do
		disks+=(--disk "file:size=${CR_MB}M,queues=2,logwrites")
	done
	"$TOP/vm/vm.sh" --flavor "${VSTOR_FLAVOR:-guest}" --keep "$CR_VM/vm" --timeout 1100 \
		--cpus 2 --modules "virtio_blk vhost_blk" "${disks[@]}" -- \
		"$TOP/tests/guest/crash-workload.sh" "$CR_VM/jobs" || rc=$?
	sed 's/^/guest: /' "$CR_VM/vm/output" 2>/dev/null | tail -n 20
	((rc == 0)) || fail "the guest workloads exited $rc (see $CR_VM/vm/console.log)" || return
	for ((d = 0; d < CR_DISKS; d++)); do
		[[ -s $CR_VM/vm/disk$d.log ]] || fail "no write log of disk $d" || return
	done
	d=$(grep -c 'crash-workload: vstor.*, [0-9]* claims, ' "$CR_VM/vm/output")
	echo "==> cr_boot: $d workloads"
	((d == CR_DISKS)) || fail "$d workloads ended, want $CR_DISKS"
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
		--random 5 --mutate --first-failure --work "$CR_VM/replay$1") || rc=$?
	((rc == 1)) || fail "the replay with claimed writes lost exited $rc, want 1: $(tail -n 1 <<<"$out")" || return
	echo "==> disk $1, claimed writes lost (--mutate): $(tail -n 1 <<<"$out")"
}

desc_cr_irq="vstor0, the interrupt path with completion batching, writeback cache: ext4 and every fsync'd file intact after a power loss at each flush and between flushes"
cr_irq() { crash_replay 0; }

desc_cr_wt_repoll="vstor1, write through, then a runtime poll-queue change (a device reset) after 8 files: the disk stays write-through, so every file fsync'd after the change survives (it catches a reset that restores the device's writeback cache while the guest sends no flushes)"
cr_wt_repoll() { crash_replay 1; }

desc_cr_wb_repoll="vstor2, writeback, with a runtime poll-queue change after 8 files: flushes still reach the disk after the reset"
cr_wb_repoll() { crash_replay 2; }

# cr_polled SERIAL: the workload on SERIAL ended with poll queues on its
# disk (its polled I/O, hipri fio and IOPOLL rings, fails with EOPNOTSUPP
# on a disk without them, and fails the workload).
cr_polled() {
	local n
	n=$(sed -n "s/^crash-workload: $1 .* \([0-9][0-9]*\) poll queues$/\1/p" "$CR_VM/vm/output" 2>/dev/null)
	[[ -n $n ]] || fail "no workload line for $1 in $CR_VM/vm/output" || return
	echo "$1: $n poll queues"
	((n > 0)) || fail "$1's disk had no poll queue"
}

desc_cr_hipri="vstor3, poll queues: files written with polled direct I/O (fio io_uring hipri) and fsync'd, writeback cache: ext4 and every fsync'd file intact at each flush and between"
cr_hipri() { cr_polled vstor3 && crash_replay 3; }

desc_cr_pt="vstor4, passthrough: ranges written by uring_cmd WRITEs (8 in flight; polled on odd rounds, registered buffers every third) and made durable by a passthrough FLUSH, writeback cache: every claimed range intact at each flush and between"
cr_pt() { cr_polled vstor4 && crash_replay 4; }

# cr_vfs_check CLAIMS SHARE: every file the guest claimed in CLAIMS (the
# fsjob's lines) is in SHARE as its last claim says; a last line cut short
# by the kill is not a claim.
cr_vfs_check() {
	/usr/bin/python3 - "$1" "$2" <<'PY'
import hashlib, json, os, sys
lines = open(sys.argv[1]).read().split("\n")
last, n = {}, 0
for i, line in enumerate(lines):
    if not line:
        continue
    try:
        c = json.loads(line)
    except ValueError:
        if i >= len(lines) - 2:
            break
        sys.exit(f"claim line {i + 1} unreadable: {line!r}")
    last[c["file"]] = c
    n += 1
bad = []
for name, c in sorted(last.items()):
    try:
        with open(os.path.join(sys.argv[2], name), "rb") as f:
            data = f.read()
    except OSError as e:
        bad.append(f"{name}: {e.strerror}")
        continue
    if "len" in c:
        data = data[:c["len"]] if len(data) >= c["len"] else None
    if data is None or hashlib.sha256(data).hexdigest() != c["sha256"]:
        bad.append(f"{name}: not as claimed" + (f" (first {c['len']} bytes)" if "len" in c else ""))
print(f"{n} claims, {len(last)} files checked, {len(bad)} not as claimed")
for b in bad[:5]:
    print(b)
sys.exit(1 if bad else 0)
PY
}

# cr_vfs_kill WHAT: a guest writes and fsyncs files on a virtio-fs share
# (vufsd, two request queues) and claims each; after 20 rounds, SIGKILL
# to WHAT (daemon: vufsd's server, the newest of its processes, then
# QEMU; vmm: QEMU alone); then every claimed
# file must be in the shared directory as claimed. The check is then run
# once more with the first file cut short, and must fail.
cr_vfs_kill() {
	local dir=$CR_VM-vfs-$1 vm vpid pid i n=0 out rc=0
	vm=$dir/vm
	rm -rf "$dir"
	mkdir -p "$dir"
	echo "fsjob k 100000" >"$dir/jobs"
	"$TOP/vm/vm.sh" --flavor "${VSTOR_FLAVOR:-guest}" --keep "$vm" --timeout 500 \
		--cpus 2 --no-disk --virtiofs tag=k,queues=2 -- \
		"$TOP/tests/guest/crash-workload.sh" "$dir/jobs" >"$dir/vm.out" 2>&1 &
	vpid=$!
	for ((i = 0; i < 600; i++)); do
		n=$(grep -c '"journal"' "$vm/fs-claims" 2>/dev/null) || n=0
		((n >= 20)) && break
		kill -0 $vpid 2>/dev/null || break
		sleep 0.5
	done
	if ((n < 20)); then
		pkill -KILL -f -- "qemu-system-x86_64 .*$vm/" 2>/dev/null
		wait $vpid
		fail "only $n rounds claimed before the kill (see $dir/vm.out, $vm/console.log)"
		return
	fi
	case $1 in
	daemon)
		pid=$(pgrep -n -f -- "--socket $vm/fs-k.sock") || fail "no vufsd for $vm" || return
		kill -KILL "$pid"
		echo "vufsd ($pid) killed after $n rounds"
		sleep 2
		pkill -KILL -f -- "qemu-system-x86_64 .*$vm/" || fail "no QEMU to kill after vufsd" || return
		;;
	vmm)
		pid=$(pgrep -f -- "^[^ ]*qemu-system-x86_64 .*$vm/") || fail "no QEMU for $vm" || return
		kill -KILL "$pid"
		echo "QEMU ($pid) killed after $n rounds"
		;;
	esac
	wait $vpid || rc=$?
	echo "vm.sh exited $rc (the guest did not finish: 124)"
	out=$(cr_vfs_check "$vm/fs-claims" "$vm/fs-k") || { echo "$out"; fail "the share lost fsync'd data"; return; }
	echo "==> $out"
	[[ -s $vm/fs-k/f1 ]] || fail "no f1 in the share" || return
	truncate -s -1 "$vm/fs-k/f1"
	if out=$(cr_vfs_check "$vm/fs-claims" "$vm/fs-k"); then
		fail "the check passed a share whose f1 was cut short: $out"
		return
	fi
	echo "with f1 cut short: $(head -n 1 <<<"$out")"
}

desc_cr_vhost="vstor5, vhost-blk (the bridge and a scripted driver in the guest): $CR_VHOST_ROUNDS rounds of 8 writes on two vrings made durable by a FLUSH, then $CR_VHOST_ROUNDS without VIRTIO_BLK_F_FLUSH (vhost-blk writes through, FUA): every claimed range intact at each flush and between"
cr_vhost() { crash_replay 5; }

desc_cr_nest_flush="vstor6, vhost-blk to a second-level guest (the bridge, QEMU's vhost-user-blk-pci, our guest kernel): $CR_NEST_ROUNDS rounds of 4 concurrent direct writes, each round made durable by an fsync of the disk (VIRTIO_BLK_F_FLUSH, a write-back cache in the guest): every claimed range intact at each flush and between"
cr_nest_flush() { crash_replay 6; }

desc_cr_nest_wt="vstor7, as vstor6 with the bridge's --write-through (no VIRTIO_BLK_F_FLUSH, a write-through disk in the guest, which never flushes): every range claimed once its write completed is intact at each flush and between"
cr_nest_wt() { crash_replay 7; }

desc_cr_vfs_kill_daemon="virtio-fs: files and a journal fsync'd through vufsd (2 queues), then vufsd SIGKILLed mid-workload (and QEMU after it): every claimed file and journal prefix is in the shared directory"
cr_vfs_kill_daemon() { cr_vfs_kill daemon; }

desc_cr_vfs_kill_vmm="virtio-fs: files and a journal fsync'd through vufsd (2 queues), then QEMU SIGKILLed mid-workload: every claimed file and journal prefix is in the shared directory"
cr_vfs_kill_vmm() { cr_vfs_kill vmm; }
