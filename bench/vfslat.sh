#!/usr/bin/env bash
# Benchmark: virtio-fs request queues where the back end waits. The shared
# directories are on the host's own disk (the results directory), not tmpfs,
# and every workload is bound by the latency of that disk or of the daemon:
#   syncwrite   4k random writes, O_DIRECT|O_SYNC: each one a disk write
#               and a flush on the host
#   fsyncwrite  4k random writes through the guest's page cache, fsync
#               after each (FUSE WRITE then FSYNC)
#   coldread    4k random reads, O_DIRECT, with the host's page cache of
#               the files dropped before each run (posix_fadvise DONTNEED,
#               by a helper on the host the guest asks through its run
#               directory)
#   meta        small files: create, write 4 KiB, close, stat, unlink
#               (tests/tools/fsmeta), one directory per thread
# Devices, each on a directory of its own: vufsd with 1, 2 and 4 request
# queues (one worker each), vufsd with 2 queues of 4 workers each, and
# QEMU's virtiofsd (one queue, its own thread pool). JOBS fio jobs (or
# fsmeta threads) per run, psync. vufsd's counters give the time its
# workers waited for the inode/file table mutex during each run.
# One guest boot per vCPU count.
#   bench/vfslat.sh [--vcpus "2 4"] [--runtime S] [--reps N] [--jobs N] [--flavor F]
# Defaults: 2 and 4 vCPUs, 4 s per run (+1 s ramp), 3 repetitions, 8 jobs.
# Run alone it goes through bench/run.sh (a results directory in build/results).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
vcpus="2 4" runtime=4 reps=3 jobs=8
bench_opts "vcpus runtime reps jobs flavor" "$@"
read -ra cpuset <<<"$vcpus"
((${#cpuset[@]})) || die "vfslat: --vcpus is empty"
for c in "${cpuset[@]}"; do
	[[ $c =~ ^[1-9][0-9]*$ ]] || die "vfslat: --vcpus takes vCPU counts, not '$c'"
done
[[ $jobs =~ ^[1-9][0-9]*$ ]] || die "vfslat: --jobs must be a positive number"
bench_need "$BUILD/tools/fsmeta" "run make tools"
bench_checked

tags=(vufsd-1 vufsd-2 vufsd-4 vufsd-2t4 virtiofsd)
devs=(--virtiofs "tag=vufsd-1,queues=1" --virtiofs "tag=vufsd-2,queues=2"
	--virtiofs "tag=vufsd-4,queues=4" --virtiofs "tag=vufsd-2t4,queues=2,threads=4"
	--virtiofs "tag=virtiofsd,daemon=virtiofsd")

# The cache dropper: the guest writes a token to RUNDIR/drop.req; this
# flushes and drops the host's page cache of every file in RUNDIR/fs-*/
# and answers with the token in RUNDIR/drop.done.
# Run in the background, it is python itself (exec), so that $! can stop
# it, and it holds no descriptor of the benchmark's output.
dropper() {
	exec /usr/bin/python3 - "$1" >/dev/null 2>&1 <<'PY'
import os, sys, time
run = sys.argv[1]
req, done = os.path.join(run, "drop.req"), os.path.join(run, "drop.done")
while True:
    try:
        token = open(req).read().strip()
    except FileNotFoundError:
        time.sleep(0.05)
        continue
    if not token:
        time.sleep(0.05)
        continue
    files = 0
    for d in os.listdir(run):
        if not d.startswith("fs-") or not os.path.isdir(os.path.join(run, d)):
            continue
        for top, _, names in os.walk(os.path.join(run, d)):
            for n in names:
                try:
                    fd = os.open(os.path.join(top, n), os.O_RDONLY)
                except OSError:
                    continue
                try:
                    os.fdatasync(fd)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    files += 1
                finally:
                    os.close(fd)
    os.unlink(req)
    with open(done + ".tmp", "w") as f:
        f.write("%s %d\n" % (token, files))
    os.rename(done + ".tmp", done)
PY
}

for c in "${cpuset[@]}"; do
	log=$BENCH_LOG/cpus$c
	mkdir -p "$log"
	rm -f "$log/drop.req" "$log/drop.done"
	dropper "$log" &
	dpid=$!
	rc=0
	# reps x 4 workloads x 5 devices runs, plus the layout.
	"$TOP/vm/vm.sh" --flavor "$flavor" --keep "$log" --cpus "$c" --no-disk \
		--timeout $((1200 + reps * 4 * ${#tags[@]} * (runtime + 15) * 2)) "${devs[@]}" -- \
		"$TOP/bench/guest/vfslat.sh" "$runtime" "$reps" "$jobs" "${tags[@]}" || rc=$?
	kill "$dpid" 2>/dev/null
	wait "$dpid" 2>/dev/null || true
	((rc == 0)) || bench_fail "the guest with $c vCPUs failed (vm.sh exit $rc)" "$rc"
	# The test files are not results.
	rm -rf "$log"/fs-*/ "$log"/*.sock "$log"/qmp "$log"/modroot "$log"/modules
done
first=1
for c in "${cpuset[@]}"; do
	f=$BENCH_LOG/cpus$c/vfslat.csv
	[[ -e $f ]] || { bench_fail "the guest with $c vCPUs wrote no vfslat.csv"; continue; }
	if ((first)); then cat "$f"; else tail -n +2 "$f"; fi
	first=0
done >"$BENCH_DIR/raw/vfslat.csv"
bench_done
