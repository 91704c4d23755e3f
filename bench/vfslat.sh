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
# the release's virtiofsd (one queue; the C one a pool of 64 threads, the
# Rust one no pool by default). JOBS fio jobs (or fsmeta threads) per run,
# psync. vufsd's counters give the time its workers waited for the
# inode/file table mutex during each run.
# One guest boot per vCPU count.
# With --insns 1 (the default), each vCPU count's guest boots a second time
# with the insncount plugin: guest instructions per FUSE request of every
# run (raw/vfslat-insns.csv).
#   bench/vfslat.sh [--vcpus "2 4"] [--runtime S] [--reps N] [--jobs N] [--insns 0|1] [--flavor F]
# Defaults: 2 and 4 vCPUs, 4 s per run (+1 s ramp), 3 repetitions, 8 jobs.
# Run alone it goes through bench/run.sh (a results directory in build/results).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
vcpus="2 4" runtime=4 reps=3 jobs=8
bench_opts "vcpus runtime reps jobs flavor insns" "$@"
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

# The host helper, for requests the guest writes into its run directory:
# - RUNDIR/drop.req, a token: flush and drop the host's page cache of every
#   file in RUNDIR/fs-*/, answer with the token in RUNDIR/drop.done;
# - RUNDIR/mark.req, "TOKEN LABEL": append to RUNDIR/host-cpu.jsonl the
#   host's CPU time so far (/proc/stat) and that of every thread of QEMU
#   and of each virtio-fs daemon (schedstat, ns; a daemon is known by the
#   socket on its command line), answer with the token in RUNDIR/mark.done.
#   The guest marks the start and the end of every run.
# Run in the background, it is python itself (exec), so that $! can stop
# it, and it holds no descriptor of the benchmark's output.
dropper() {
	exec /usr/bin/python3 - "$1" >/dev/null 2>&1 <<'PY'
import json, os, re, sys, time
run = sys.argv[1]
req, done = os.path.join(run, "drop.req"), os.path.join(run, "drop.done")
mreq, mdone = os.path.join(run, "mark.req"), os.path.join(run, "mark.done")
HZ = os.sysconf("SC_CLK_TCK")


def threads(pid):
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            comm = open("/proc/%d/task/%s/comm" % (pid, tid)).read().strip()
            ns = int(open("/proc/%d/task/%s/schedstat" % (pid, tid)).read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        out["%s/%s" % (comm, tid)] = ns
    return out


def snapshot(label):
    cpu = open("/proc/stat").readline().split()[1:]
    snap = {"label": label, "mono_ns": time.monotonic_ns(),
            "stat_ns": [int(v) * 10**9 // HZ for v in cpu], "qemu": {}, "daemons": {}}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
        except OSError:
            continue
        line = b" ".join(argv).decode(errors="replace")
        if run not in line:
            continue
        name = os.path.basename(argv[0].decode(errors="replace"))
        try:
            if name.startswith("qemu-system"):
                snap["qemu"].update(threads(int(pid)))
            else:
                m = re.search(r"fs-([^/ ]+)\.sock", line)
                if m:
                    snap["daemons"].setdefault(m.group(1), {}).update(threads(int(pid)))
        except OSError:
            continue
    with open(os.path.join(run, "host-cpu.jsonl"), "a") as f:
        f.write(json.dumps(snap) + "\n")


def answer(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


while True:
    try:
        m = open(mreq).read().split(None, 1)
    except FileNotFoundError:
        m = None
    if m and len(m) == 2:
        snapshot(m[1].strip())
        os.unlink(mreq)
        answer(mdone, m[0] + "\n")
        continue
    try:
        token = open(req).read().strip()
    except FileNotFoundError:
        time.sleep(0.02)
        continue
    if not token:
        time.sleep(0.02)
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
    answer(done, "%s %d\n" % (token, files))
PY
}

# The host's disk alone: the same data workloads straight on a directory of
# the same file system with 1, 2 and 4 fio jobs. One vufsd worker keeps one
# request at a time in flight on the host, N workers keep N, so the ratio of
# 2 jobs to 1 here bounds what 2 request queues can gain over 1.
host_ceiling() {
	local dir=$BENCH_LOG/host-dir w j r args out
	mkdir -p "$dir"
	echo "workload,jobs,rep,iops,lat_mean_us" >"$BENCH_DIR/raw/vfslat-host.csv"
	log "the host's disk alone: syncwrite, fsyncwrite, coldread with 1, 2 and 4 jobs, $reps repetitions"
	fio --name=lay --directory="$dir" --numjobs=4 --rw=write --bs=1M --size=16M \
		--direct=1 --ioengine=psync >/dev/null
	for ((r = 1; r <= reps; r++)); do
		for w in syncwrite fsyncwrite coldread; do
			case $w in
			syncwrite) args=(--rw=randwrite --direct=1 --sync=1) ;;
			fsyncwrite) args=(--rw=randwrite --fsync=1) ;;
			coldread) args=(--rw=randread --direct=1) ;;
			esac
			for j in 1 2 4; do
				out=$BENCH_LOG/host-$w-$j-$r.json
				fio --name=lay --directory="$dir" --numjobs="$j" --size=16M --ioengine=psync \
					--time_based --runtime="$runtime" --ramp_time=1 --group_reporting \
					--bs=4k "${args[@]}" --output-format=json --output="$out" >/dev/null
				/usr/bin/python3 - "$out" "$w" "$j" "$r" >>"$BENCH_DIR/raw/vfslat-host.csv" <<'PY'
import json, sys
out, w, j, r = sys.argv[1:]
job = json.load(open(out))["jobs"][0]
d = job["read" if w == "coldread" else "write"]
print("%s,%s,%s,%d,%.1f" % (w, j, r, d["iops"], d["lat_ns"]["mean"] / 1000))
PY
			done
		done
	done
	rm -rf "$dir"
}
host_ceiling

# boot C LOG [VM.SH OPTION...]: the guest with C vCPUs, its run directory
# LOG, the host helper serving it; 0 or vm.sh's exit status.
boot() {
	local c=$1 log=$2 dpid rc=0
	shift 2
	mkdir -p "$log"
	rm -f "$log/drop.req" "$log/drop.done" "$log/mark.req" "$log/mark.done" "$log/host-cpu.jsonl"
	dropper "$log" &
	dpid=$!
	# reps x 4 workloads x 5 devices runs, plus the layout.
	"$TOP/vm/vm.sh" --flavor "$flavor" --keep "$log" --cpus "$c" --no-disk "$@" \
		--timeout $((1200 + reps * 4 * ${#tags[@]} * (runtime + 15) * 2)) "${devs[@]}" -- \
		"$TOP/bench/guest/vfslat.sh" "$runtime" "$reps" "$jobs" "${tags[@]}" || rc=$?
	kill "$dpid" 2>/dev/null
	wait "$dpid" 2>/dev/null || true
	# The test files are not results.
	rm -rf "$log"/fs-*/ "$log"/*.sock "$log"/qmp "$log"/modroot "$log"/modules
	return "$rc"
}

for c in "${cpuset[@]}"; do
	log=$BENCH_LOG/cpus$c
	rc=0
	boot "$c" "$log" || rc=$?
	((rc == 0)) || bench_fail "the guest with $c vCPUs failed (vm.sh exit $rc)" "$rc"
	[[ -e $log/host-cpu.jsonl ]] || bench_fail "the guest with $c vCPUs left no host CPU marks"
	bench_counting || continue
	log "vfslat: the guest with $c vCPUs again with the insncount plugin, for instructions per FUSE request"
	rc=0
	boot "$c" "$log/insns" --insncount || rc=$?
	((rc == 0)) || bench_fail "the counting guest with $c vCPUs failed (vm.sh exit $rc)" "$rc"
done
/usr/bin/python3 "$TOP/bench/vfslat_table.py" --host-cpu "$BENCH_DIR/raw" \
	"${cpuset[@]/#/$BENCH_LOG/cpus}" || bench_fail "no host CPU table"
first=1
for c in "${cpuset[@]}"; do
	f=$BENCH_LOG/cpus$c/vfslat.csv
	[[ -e $f ]] || { bench_fail "the guest with $c vCPUs wrote no vfslat.csv"; continue; }
	if ((first)); then cat "$f"; else tail -n +2 "$f"; fi
	first=0
done >"$BENCH_DIR/raw/vfslat.csv"
if bench_counting; then
	first=1
	for c in "${cpuset[@]}"; do
		f=$BENCH_LOG/cpus$c/insns/vfslat-insns.csv
		[[ -e $f ]] || { bench_fail "the counting guest with $c vCPUs wrote no vfslat-insns.csv"; continue; }
		if ((first)); then cat "$f"; else tail -n +2 "$f"; fi
		first=0
	done >"$BENCH_DIR/raw/vfslat-insns.csv"
fi
bench_done
