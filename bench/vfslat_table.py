#!/usr/bin/env python3
"""Format bench/vfslat.sh results (raw/vfslat.csv: one row per run) into a
table per vCPU count: each latency-bound workload on each device, IOPS (or
metadata rounds per second) with its range, the ratio to vufsd with one
request queue, and vufsd's table-lock waits.
    vfslat_table.py RAWDIR"""
import sys

from table_lib import group_runs, mean, ratio, raw_csv

DEVICES = ("vufsd-1", "vufsd-2", "vufsd-4", "vufsd-2t4", "virtiofsd")
NOTES = {"vufsd-1": "vufsd, 1 request queue, 1 worker",
         "vufsd-2": "2 queues, a worker each",
         "vufsd-4": "4 queues, a worker each",
         "vufsd-2t4": "2 queues, 4 workers each",
         "virtiofsd": "QEMU 7.2's virtiofsd (1 queue, thread pool)"}
WORKLOADS = {"syncwrite": "4k randwrite O_DIRECT|O_SYNC",
             "fsyncwrite": "4k randwrite + fsync",
             "coldread": "4k randread, host cache dropped",
             "meta": "create+write+stat+unlink rounds"}


def table(raw):
    """The table's lines."""
    rows = raw_csv(raw, "vfslat.csv")
    order, runs = group_runs(rows, ("cpus", "workload"), "device",
                             ("iops", "lat_mean_us", "lock_acquired", "lock_contended",
                              "lock_wait_us"))
    reps = len(next(iter(runs.values())))
    out = ["latency-bound virtio-fs workloads, shares on the host's disk, mean of %d runs" % reps]
    hdr = "%4s %-10s %-9s | %8s %-13s %9s | %-22s | %9s %8s" % (
        "vCPU", "workload", "device", "IOPS", "(range)", "mean us", "IOPS / vufsd-1 (range)",
        "contended", "wait ms")
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
            out.append("%4s %-10s %-9s | %8.0f %-13s %9.1f | %-22s | %s" % (
                key[0] if first else "", key[1] if first else "", dev, mean(v, 0),
                "(%.0f-%.0f)" % (min(vals), max(vals)), mean(v, 1), rat, lock))
            first = False
    out.append("(IOPS: fio's, or fsmeta's rounds per second for meta; contended: share of "
               "vufsd's table-mutex acquisitions that found it held; wait ms: the time its "
               "workers spent waiting for it during the run, summed.")
    out.append(" Workloads: " + "; ".join("%s: %s" % kv for kv in WORKLOADS.items()) + ".")
    out.append(" Devices: " + "; ".join("%s: %s" % (d, NOTES[d]) for d in DEVICES) + ")")
    return out


if __name__ == "__main__":
    print("\n".join(table(sys.argv[1])))
