#!/usr/bin/env python3
"""Format bench/vfslat.sh results (raw/vfslat.csv: one row per run) into a
table per vCPU count: each latency-bound workload on each device, IOPS (or
metadata rounds per second) with its range, the ratio to vufsd with one
request queue, vufsd's table-lock waits and, where the run recorded them,
the host's CPU time during the run (raw/vfslat-hostcpu.csv); then the host's
disk alone with 1, 2 and 4 jobs (raw/vfslat-host.csv), the bound on what
more request queues can gain.
    vfslat_table.py RAWDIR
    vfslat_table.py --host-cpu RAWDIR LOGDIR...   write raw/vfslat-hostcpu.csv
                                                  from LOGDIR/host-cpu.jsonl"""
import csv
import json
import os
import sys

from table_lib import group_runs, insn_cell, insn_ratio, insn_reps, insn_runs, mean, ratio, raw_csv

HOSTCPU_FIELDS = ("cpus", "workload", "device", "rep", "wall_s", "host_busy_cores",
                  "vcpu_cores", "qemu_other_cores", "daemon_cores", "host_iowait_cores")

DEVICES = ("vufsd-1", "vufsd-2", "vufsd-4", "vufsd-2t4", "virtiofsd")
NOTES = {"vufsd-1": "vufsd, 1 request queue, 1 worker",
         "vufsd-2": "2 queues, a worker each",
         "vufsd-4": "4 queues, a worker each",
         "vufsd-2t4": "2 queues, 4 workers each",
         "virtiofsd": "the release's virtiofsd (1 queue)"}
WORKLOADS = {"syncwrite": "4k randwrite O_DIRECT|O_SYNC",
             "fsyncwrite": "4k randwrite + fsync",
             "coldread": "4k randread, host cache dropped",
             "meta": "create+write+stat+unlink rounds"}


def host_cpu(raw, logdirs):
    """Turn the host helper's marks (start:ID and end:ID snapshots in
    LOGDIR/host-cpu.jsonl, one LOGDIR per vCPU count) into one row per run:
    CPU time over wall time, in cores, of the whole host (busy: not idle and
    not waiting for I/O), of QEMU's vCPU threads, of QEMU's other threads,
    and of the daemon serving the run's device."""
    out = []
    for log in logdirs:
        cpus = os.path.basename(log).replace("cpus", "")
        marks = {}
        with open(os.path.join(log, "host-cpu.jsonl")) as f:
            for line in f:
                snap = json.loads(line)
                marks[snap["label"]] = snap
        for label, end in marks.items():
            if not label.startswith("end:"):
                continue
            start = marks.get("start:" + label[4:])
            if not start:
                continue
            work, rest = label[4:].split("-", 1)
            dev, rep = rest.rsplit("-", 1)
            wall = (end["mono_ns"] - start["mono_ns"]) / 1e9

            def delta(a, b, pick):
                return sum(v - a.get(k, 0) for k, v in b.items() if pick(k)) / 1e9 / wall

            st = [b - a for a, b in zip(start["stat_ns"], end["stat_ns"])]
            busy = (sum(st[:8]) - st[3] - st[4]) / 1e9 / wall
            vcpu = delta(start["qemu"], end["qemu"], lambda k: "/TCG" in k or "/KVM" in k)
            other = delta(start["qemu"], end["qemu"], lambda k: "/TCG" not in k and "/KVM" not in k)
            dmn = delta(start["daemons"].get(dev, {}), end["daemons"].get(dev, {}),
                        lambda k: True)
            out.append((cpus, work, dev, rep, "%.2f" % wall, "%.3f" % busy, "%.3f" % vcpu,
                        "%.3f" % other, "%.3f" % dmn, "%.3f" % (st[4] / 1e9 / wall)))
    with open(os.path.join(raw, "vfslat-hostcpu.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HOSTCPU_FIELDS)
        w.writerows(out)
    return len(out)


def ceiling(raw):
    """The lines of the host-disk table, if the run measured it."""
    if not os.path.exists(os.path.join(raw, "vfslat-host.csv")):
        return []
    order, runs = group_runs(raw_csv(raw, "vfslat-host.csv"), ("workload",), "jobs",
                             ("iops", "lat_mean_us"))
    out = ["", "the host's disk alone, fio psync on a directory of the same file system "
           "(one vufsd worker keeps one request in flight there, N workers N)"]
    hdr = "%-10s | %9s %9s %9s | %-20s %-20s" % ("workload", "1 job", "2 jobs", "4 jobs",
                                               "2 / 1 (range)", "4 / 1 (range)")
    out += [hdr, "-" * len(hdr)]
    for (w,) in order:
        one = runs.get((w, 1))
        cells, rats = [], []
        for j in (1, 2, 4):
            v = runs.get((w, j))
            cells.append("%9.0f" % mean(v, 0) if v else "%9s" % "-")
            if j > 1 and v and one:
                m, per = ratio(v, one, 0)
                rats.append("x%.2f (%.2f-%.2f)" % (m, per[0], per[-1]))
        out.append("%-10s | %s | %-20s %-20s" % (w, " ".join(cells), *(rats + ["", ""])[:2]))
    return out


def insns(raw, order):
    """Guest instructions per FUSE request by vCPUs, workload and device,
    with each device's ratio to vufsd-1, when the run counted them."""
    ins = insn_runs(raw, "vfslat-insns.csv", ("cpus", "workload"), "device")
    if not ins:
        return []
    out = ["", "guest instructions per FUSE request (fuse_request_end): FUSE and virtio-fs with "
           "the virtio core (stack) / the whole kernel, every vCPU; mean (range) of %d windows, "
           "counted in a boot of their own with the insncount plugin; the ratio is the stack's "
           "to vufsd-1's" % insn_reps(ins)]
    hdr = "%4s %-10s %-9s | %-22s | %-22s | %s" % ("vCPU", "workload", "device", "stack",
                                                 "kernel", "stack / vufsd-1")
    out += [hdr, "-" * len(hdr)]
    for key in order:
        first = True
        for dev in DEVICES:
            if not ins.get(key + (dev,)):
                continue
            rat = insn_ratio(ins, key + (dev,), key + ("vufsd-1",)) if dev != "vufsd-1" else ""
            out.append(("%4s %-10s %-9s | %-22s | %-22s | %s" % (
                key[0] if first else "", key[1] if first else "", dev,
                insn_cell(ins, key + (dev,), 0), insn_cell(ins, key + (dev,), 1), rat)).rstrip())
            first = False
    return out


def table(raw):
    """The table's lines."""
    cpu = {}
    if os.path.exists(os.path.join(raw, "vfslat-hostcpu.csv")):
        corder, cruns = group_runs(raw_csv(raw, "vfslat-hostcpu.csv"),
                                   ("cpus", "workload"), "device",
                                   ("host_busy_cores", "vcpu_cores", "qemu_other_cores",
                                    "daemon_cores"))
        cpu = cruns
    rows = raw_csv(raw, "vfslat.csv")
    order, runs = group_runs(rows, ("cpus", "workload"), "device",
                             ("iops", "lat_mean_us", "lock_acquired", "lock_contended",
                              "lock_wait_us"))
    reps = len(next(iter(runs.values())))
    out = ["latency-bound virtio-fs workloads, shares on the host's disk, mean of %d runs" % reps]
    hdr = "%4s %-10s %-9s | %8s %-13s %9s | %-22s | %9s %8s | %s" % (
        "vCPU", "workload", "device", "IOPS", "(range)", "mean us", "IOPS / vufsd-1 (range)",
        "contended", "wait ms", "host cores: busy vCPUs qemu daemon")
    out += [hdr, "-" * len(hdr)]
    for key in order:
        base = runs.get(key + ("vufsd-1",))
        first = True
        for dev in DEVICES:
            v = runs.get(key + (dev,))
            if not v:
                continue
            vals = [x[0] for x in v]
            rat = ""
            if base and dev != "vufsd-1":
                m, per = ratio(v, base, 0)
                rat = "x%.2f (%.2f-%.2f)" % (m, per[0], per[-1])
            acq, cont, wait = mean(v, 2), mean(v, 3), mean(v, 4)
            lock = ("%8.1f%% %8.1f" % (100.0 * cont / acq if acq else 0.0, wait / 1000.0)
                    if acq == acq else "%9s %8s" % ("-", "-"))
            c = cpu.get(key + (dev,))
            host = ("%4.2f %5.2f %4.2f %6.2f" % tuple(mean(c, i) for i in range(4))
                    if c else "-")
            out.append("%4s %-10s %-9s | %8.0f %-13s %9.1f | %-22s | %s | %s" % (
                key[0] if first else "", key[1] if first else "", dev, mean(v, 0),
                "(%.0f-%.0f)" % (min(vals), max(vals)), mean(v, 1), rat, lock, host))
            first = False
    out.append("(IOPS: fio's, or fsmeta's rounds per second for meta; contended: share of "
               "vufsd's table-mutex acquisitions that found it held; wait ms: the time its "
               "workers spent waiting for it during the run, summed.")
    out.append(" Workloads: " + "; ".join("%s: %s" % kv for kv in WORKLOADS.items()) + ".")
    out.append(" Devices: " + "; ".join("%s: %s" % (d, NOTES[d]) for d in DEVICES) + ".")
    out.append(" Host cores: CPU time over the run's wall time on the host, in cores: busy "
               "(neither idle nor waiting for I/O), QEMU's vCPU threads, QEMU's other "
               "threads, the device's daemon)")
    return out + insns(raw, order) + ceiling(raw)


if __name__ == "__main__":
    if sys.argv[1] == "--host-cpu":
        host_cpu(sys.argv[2], sys.argv[3:])
    else:
        print("\n".join(table(sys.argv[1])))
