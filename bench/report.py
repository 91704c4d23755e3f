#!/usr/bin/python3
"""The results directory of a benchmark run (bench/run.sh): machine facts,
the record of each benchmark, the daemons' counters as raw results, the
tables, the plots and report.md.

    report.py names                    the benchmarks, in run order
    report.py list                     what each measures, how long it takes
    report.py machine DIR ARG...       raw/machine.json (ARG: run.sh's arguments)
    report.py record DIR NAME [--settings FILE] [KEY=VALUE...]
                                       merge into NAME's entry of raw/runs.json
    report.py daemon-stats DIR NAME TAG=STATSFILE...
                                       raw/NAME-daemons.json, raw/NAME-queues.csv
    report.py table DIR NAME           print NAME's tables (as report.md has them)
    report.py render DIR               plots/*.png and report.md from raw/
"""
import csv
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TOP, "tools"))
import statsfile  # noqa: E402

import bridge_table  # noqa: E402
import poll_table  # noqa: E402
import pt_table  # noqa: E402
import ptcpu_table  # noqa: E402
import repoll_table  # noqa: E402
import vhost_table  # noqa: E402
import vfslat_table  # noqa: E402
import irqbatch_table  # noqa: E402
import insncount_table  # noqa: E402
import virtiofs_table  # noqa: E402

# name: (title, what it measures, run time at the defaults on the 2-core
# build machine under TCG, estimated as bench/README.md says)
BENCHES = {
    "poll": ("virtio-blk poll queues",
             "fio io_uring 4k random reads with and without hipri on the same two "
             "disks (a sparse file and QEMU null-co, two queues each, one of them "
             "a poll queue), runs alternated, with the interrupts each run took.",
             "about 4 min"),
    "repoll": ("changing a disk's poll queues at runtime",
               "Writes to /sys/block/vdX/num_poll_queues alternating 1 and 0, "
               "each timed around the write(2), on an idle disk and under a QD1 "
               "random-read job compared with the same job without changes.",
               "about 2 min"),
    "pt": ("virtio-blk io_uring passthrough",
           "fio 4k random reads through the virtio-blk block device and its "
           "passthrough character device (/dev/vblk/vdX, cmd_type=vblk), beside "
           "QEMU's NVMe block device and generic device (/dev/ngXnY), same boot "
           "and backends, interrupt-driven and polled, paths alternated.",
           "about 10 min"),
    "ptcpu": ("virtio-blk passthrough, guest CPU bound",
              "fio's t/io_uring (batched, fixed buffers, registered files) on a "
              "vCPU with a host core of its own, the virtio-blk device in a QEMU "
              "I/O thread on the other: block device vs passthrough for virtio-blk "
              "and NVMe, interrupt-driven and polled; IOPS and guest CPU per I/O.",
              "about 8 min"),
    "vhost": ("vhost-blk",
              "4k random reads through /dev/vhost-blk (driven by vhost_blk_test, a "
              "userspace virtio-blk driver) and through io_uring (fio, O_DIRECT) on "
              "the same device (null_blk, brd), by queue depth, queues and vhost "
              "workers; vhost-blk as it is, with its workers busy-polling the vrings, "
              "and busy-polling with the driver polling too, with the CPU time of "
              "workers and driver per request.",
              "about 18 min"),
    "bridge": ("vhost-user-blk bridge (nested guest)",
               "A second-level guest's disk served several ways on one brd device in "
               "the first-level guest: the vhost-user-blk bridge handing the data "
               "path to vhost-blk (a worker per queue, and one worker), QEMU's own "
               "virtio-blk (in its main loop and, QEMU >= 9, on one IOThread and on "
               "one per queue with iothread-vq-mapping), and qemu-storage-daemon; "
               "fio io_uring 4k in the second-level guest, disks rotated.",
               "about 15 min"),
    "virtiofs": ("multi-queue virtio-fs",
                 "vufsd with 1 and with N request queues beside the release's virtiofsd "
                 "(Debian 13: the Rust one, without and with a thread pool), "
                 "mounted in one guest; fio O_DIRECT with a job pinned per vCPU, "
                 "sequential 256k and random 4k reads and writes, devices rotated; "
                 "the daemon's per-queue counters.",
                 "about 6 min"),
    "vfslat": ("virtio-fs where the back end waits",
               "Shares on the host's disk: O_SYNC and fsync'd 4k writes, 4k reads "
               "with the host's page cache dropped, small-file create/stat/unlink; "
               "vufsd with 1, 2 and 4 request queues and with 4 workers per queue, "
               "beside the release's virtiofsd; 2 and 4 vCPUs; vufsd's table-mutex waits.",
               "about 16 min"),
    "irqbatch": ("virtio-blk completion batching on the interrupt path",
                 "virtio_blk/irq_batch (debugfs) off and on in one boot: fio io_uring 4k random "
                 "reads on several two-queue disks at once by queue depth, with "
                 "interrupts and CPU per I/O; then a soak of fio rounds at QD128 on "
                 "disks whose rings fill before their tags run out, watching for a "
                 "job that never finishes.",
                 "about 10 min"),
    "insncount": ("what the instruction-counting plugin costs",
                  "The same guest booted without and with the insncount QEMU plugin, "
                  "boots alternated: a timed user loop of a billion instructions and "
                  "fio io_uring 4k random reads at QD1; with the plugin, the guest "
                  "instructions per read it counted.",
                  "about 3 min"),
}
TABLES = {
    "poll": poll_table,
    "repoll": repoll_table,
    "pt": pt_table,
    "ptcpu": ptcpu_table,
    "vhost": vhost_table,
    "bridge": bridge_table,
    "virtiofs": virtiofs_table,
    "vfslat": vfslat_table,
    "irqbatch": irqbatch_table,
    "insncount": insncount_table,
}
# Raw files of each benchmark besides raw/NAME.csv.
RAW = {
    "repoll": ["repoll-changes.csv", "repoll-io.csv"],
    "bridge": ["bridge.csv", "bridge-daemons.json", "bridge-queues.csv"],
    "virtiofs": ["virtiofs.csv", "virtiofs-daemons.json", "virtiofs-queues.csv"],
    "vfslat": ["vfslat.csv", "vfslat-host.csv", "vfslat-hostcpu.csv"],
    "irqbatch": ["irqbatch.csv", "irqbatch-soak.csv"],
}


def run(cmd):
    """First line of a command's output, or 'unknown'."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
        return out.strip().splitlines()[0] if out.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def load_json(path, default):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


# --- machine ------------------------------------------------------------

def machine(d, args):
    build = os.environ.get("BUILD", os.path.join(TOP, "build"))
    model = "unknown"
    for line in read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem_kib = 0
    for line in read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    git = ["git", "-C", TOP]
    dirty = subprocess.run(git + ["status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.splitlines()
    # bench/run.sh passes the kernel base it runs on (scripts/lib.sh, KBASE).
    series = [ln for ln in read(os.environ.get("BENCH_SERIES", "")).splitlines()
              if ln.strip() and not ln.startswith("#")]
    fio_built = os.path.join(build, "fio", "fio")
    info = {
        "started_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "command": ["bench/run.sh"] + args,
        "host": {
            "cpus": os.cpu_count(),
            "cpu_model": model,
            "memory_gib": round(mem_kib / 1048576, 1),
            "kernel": platform.release(),
            "os": read("/etc/debian_version", "unknown"),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        },
        "kernel": {
            "base_package": os.environ.get("BENCH_BASE_PKG", "unknown"),
            "base_version": os.environ.get("BENCH_BASE_VERSION", "unknown"),
            "guest_release": read(os.path.join(os.environ.get("BENCH_GUEST_OBJ", ""),
                                               "include", "config", "kernel.release"), "unknown"),
            "patches": len(series),
        },
        "qemu": run(["qemu-system-x86_64", "--version"]),
        "vm_accel_env": os.environ.get("VM_ACCEL", ""),
        "fio": {
            "host": run(["fio", "--version"]),
            "built": run([fio_built, "--version"]) if os.access(fio_built, os.X_OK) else "not built",
        },
        "git": {
            "commit": run(git + ["rev-parse", "HEAD"]),
            "branch": run(git + ["rev-parse", "--abbrev-ref", "HEAD"]),
            "describe": run(git + ["log", "-1", "--format=%h %s"]),
            "dirty": bool(dirty),
            "changed_files": [ln[3:] for ln in dirty],
        },
        "python": platform.python_version(),
        "matplotlib": __import__("matplotlib").__version__,
    }
    write_json(os.path.join(d, "raw", "machine.json"), info)


# --- runs.json ----------------------------------------------------------

def record(d, name, items):
    path = os.path.join(d, "raw", "runs.json")
    runs = load_json(path, {})
    entry = runs.setdefault(name, {})
    i = 0
    while i < len(items):
        if items[i] == "--settings":
            settings = {}
            for line in read(items[i + 1]).splitlines():
                k, _, v = line.partition("=")
                settings[k] = v
            entry["settings"] = settings
            i += 2
            continue
        k, _, v = items[i].partition("=")
        if k == "args":
            v = json.loads(v)
        elif v.lstrip("-").isdigit():
            v = int(v)
        entry[k] = v
        i += 1
    write_json(path, runs)


# --- daemon counters ----------------------------------------------------

def daemon_stats(d, name, specs):
    """Read each daemon's stats file by field name (tools/statsfile.py);
    keep all counters as JSON and the per-queue ones as CSV."""
    daemons, rows, fields = {}, [], []
    for spec in specs:
        tag, _, path = spec.partition("=")
        st = statsfile.load(path)
        daemons[tag] = st
        # Per-queue counters: "vq.N.FIELD" (vufsd) or "vring.N.FIELD" (bridge).
        queues = {}
        for key, val in st.items():
            parts = key.split(".")
            if len(parts) == 3 and parts[0] in ("vq", "vring") and parts[1].isdigit():
                queues.setdefault(int(parts[1]), {})[parts[2]] = val
                if parts[2] not in fields:
                    fields.append(parts[2])
        for q in sorted(queues):
            rows.append(dict(daemon=tag, queue=q, **queues[q]))
    write_json(os.path.join(d, "raw", "%s-daemons.json" % name), daemons)
    with open(os.path.join(d, "raw", "%s-queues.csv" % name), "w", newline="") as f:
        w = csv.DictWriter(f, ["daemon", "queue"] + fields)
        w.writeheader()
        w.writerows(rows)


# --- tables and report --------------------------------------------------

def table(d, name):
    """NAME's table lines, or a note saying why there are none."""
    raw = os.path.join(d, "raw")
    main = RAW.get(name, ["%s.csv" % name])[0]
    if not os.path.exists(os.path.join(raw, main)):
        return ["(no results: raw/%s is missing)" % main]
    try:
        return TABLES[name].table(raw)
    except (KeyError, IndexError, ValueError, TypeError, StopIteration, ZeroDivisionError) as e:
        return ["(the results in raw/ are incomplete, no table: %s: %s)" % (type(e).__name__, e)]


def fmt_secs(s):
    if s is None:
        return "-"
    s = int(s)
    return "%dm%02ds" % (s // 60, s % 60) if s >= 60 else "%ds" % s


def settings_str(entry):
    st = entry.get("settings", {})
    return " ".join("--%s %s" % (k, v) if " " not in v else '--%s "%s"' % (k, v)
                    for k, v in st.items()) or "-"


def accel(d, names):
    """The accelerator the guests ran on, from their QEMU command lines."""
    seen = []
    for n in names:
        cmd = read(os.path.join(d, "logs", n, "qemu.cmd"))
        for a in ("tcg", "kvm"):
            if "-accel " + a in cmd and a not in seen:
                seen.append(a)
    return ", ".join(seen) or "unknown"


def render(d):
    import plots as plots_mod  # matplotlib: only here, it takes a while to load
    raw, plots = os.path.join(d, "raw"), os.path.join(d, "plots")
    m = load_json(os.path.join(raw, "machine.json"), {})
    runs = load_json(os.path.join(raw, "runs.json"), {})
    names = [n for n in runs if n in BENCHES]  # in the order they ran
    host, kern, git = m.get("host", {}), m.get("kernel", {}), m.get("git", {})
    fio = m.get("fio", {})
    out = ["# Benchmark results %s" % os.path.basename(os.path.realpath(d)), ""]
    out += ["`%s`, started %s. Every number below was measured in this run; "
            "the raw results are in [raw/](raw/), every guest's console log and "
            "output in [logs/](logs/)." % (shlex.join(m.get("command", ["bench/run.sh"])),
                                             m.get("started_utc", "?")), ""]
    out += ["## Machine", "", "| | |", "|---|---|"]
    out.append("| host | %s CPUs (%s), %s GiB RAM, Debian %s, Linux %s; load average at start %s |" % (
        host.get("cpus", "?"), host.get("cpu_model", "?"), host.get("memory_gib", "?"),
        host.get("os", "?"), host.get("kernel", "?"),
        " ".join(str(x) for x in host.get("load_average_at_start", []))))
    out.append("| guest kernel | %s %s (kernel base), %s patches; built release %s |" % (
        kern.get("base_package", "?"), kern.get("base_version", "?"),
        kern.get("patches", "?"), kern.get("guest_release", "?")))
    out.append("| QEMU | %s; accelerator %s |" % (m.get("qemu", "?"), accel(d, names)))
    out.append("| fio | host %s; build/fio/fio %s (pt) |" % (fio.get("host", "?"), fio.get("built", "?")))
    out.append("| repository | commit %s (%s), %s |" % (
        git.get("commit", "?")[:12], git.get("branch", "?"),
        ("dirty: %d changed file%s (%s)" % (
            len(git.get("changed_files", [])), "" if len(git.get("changed_files", [])) == 1 else "s",
            ", ".join(git.get("changed_files", [])[:8])))
        if git.get("dirty") else "clean (no uncommitted changes to tracked files)"))
    out.append("| plots | matplotlib %s, Python %s |" % (m.get("matplotlib", "?"), m.get("python", "?")))
    out += ["", "## Benchmarks", "",
            "| benchmark | settings | started | load average at start | run time | status |",
            "|---|---|---|---|---|---|"]
    for n in names:
        e = runs[n]
        status = e.get("status", "not finished")
        if "exit" in e:
            status = "ok" if e["exit"] == 0 else "FAILED (exit %s)" % e["exit"]
        out.append("| [%s](#%s) | `%s` | %s | %s | %s | %s |" % (
            n, n, settings_str(e), e.get("start", "-"), e.get("load", "-"),
            fmt_secs(e.get("seconds")), status))
    for n in names:
        e = runs[n]
        title, about, _ = BENCHES[n]
        out += ["", '<a id="%s"></a>' % n, "## %s: %s" % (n, title), "", about, ""]
        out.append("Settings: `%s` (command: `%s`)." % (
            settings_str(e), shlex.join(["bench/run.sh", n] + e.get("args", []))))
        if e.get("exit", 0) != 0:
            out += ["", "**This benchmark failed (exit %s)**; its log: [logs/%s/run.log](logs/%s/run.log)." % (
                e["exit"], n, n)]
        info = read(os.path.join(d, "logs", n, "info.txt"))
        inner = read(os.path.join(d, "logs", n, "inner", "info.txt"))
        if info or inner:
            out += ["", "Set-up, as the guest%s reported it:" % ("s" if inner else ""), "", "```"]
            out += [x for x in (info, inner) if x]
            out += ["```"]
        out += ["", "```"] + table(d, n) + ["```"]
        try:
            pics = plots_mod.plot(n, raw, plots) if os.path.exists(
                os.path.join(raw, RAW.get(n, ["%s.csv" % n])[0])) else []
        except Exception as ex:  # a plot must never cost the report
            pics = []
            out += ["", "(no plots: %s: %s)" % (type(ex).__name__, ex)]
            print("report: %s: no plots: %s: %s" % (n, type(ex).__name__, ex), file=sys.stderr)
        for f, caption in pics:
            out += ["", "![%s](plots/%s)" % (caption, f)]
        files = [f for f in RAW.get(n, ["%s.csv" % n]) if os.path.exists(os.path.join(raw, f))]
        out += ["", "Raw results: %s; logs: [logs/%s/](logs/%s/)%s." % (
            ", ".join("[raw/%s](raw/%s)" % (f, f) for f in files) or "none",
            n, n, " (the second-level guest's in [logs/bridge/inner/](logs/bridge/inner/))"
            if n == "bridge" else "")]
    with open(os.path.join(d, "report.md.tmp"), "w") as f:
        f.write("\n".join(out) + "\n")
    os.replace(os.path.join(d, "report.md.tmp"), os.path.join(d, "report.md"))


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    cmd, args = argv[1], argv[2:]
    if cmd == "names":
        print("\n".join(BENCHES))
    elif cmd == "list":
        for n, (title, about, minutes) in BENCHES.items():
            print("%-9s %s; %s at the defaults under TCG on 2 cores" % (n, title, minutes))
    elif cmd == "machine":
        machine(args[0], args[1:])
    elif cmd == "record":
        record(args[0], args[1], args[2:])
    elif cmd == "daemon-stats":
        daemon_stats(args[0], args[1], args[2:])
    elif cmd == "table":
        print("\n".join(table(args[0], args[1])))
    elif cmd == "render":
        render(args[0])
    else:
        print("report.py: unknown command %s" % cmd, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
