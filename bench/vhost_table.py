#!/usr/bin/env python3
"""Format bench/vhost.sh results (raw/vhost.csv: one row per run) into a
table of means with vhost-blk / io_uring ratios, one line per way of
running vhost-blk (as it is, busy-polling, busy-polling with the driver
polling too), with the CPU time each costs per request.
    vhost_table.py RAWDIR"""
import math
import sys

from table_lib import (INSN_NOTE, group_runs, insn_cell, insn_ratio, insn_reps, insn_runs,
                       mean, ratio, raw_csv)

KEYS = ("backend", "qd", "queues", "workers")
VALUES = ("iops", "lat_mean_us", "lat_p99_us")
# Columns of runs made since busy polling was added (nan for io_uring).
EXTRA = ("worker_cpu_us", "driver_cpu_us", "kicks_per_io", "poll_hits_per_io", "fairness")
PATHS = ("vhost-blk", "vhost-blk-bp", "vhost-blk-bp-poll")
PATH_NOTES = {"vhost-blk": "as it is",
              "vhost-blk-bp": "workers busy-poll",
              "vhost-blk-bp-poll": "workers busy-poll, driver polls the used ring"}


def fmt(v, f):
    return "-" if v != v else f % v


def table(raw):
    """The table's lines."""
    rows = raw_csv(raw, "vhost.csv")
    extra = tuple(c for c in EXTRA if rows and c in rows[0])
    order, runs = group_runs(rows, KEYS, "path", VALUES + extra)
    reps = len(next(iter(runs.values())))
    col = {name: i for i, name in enumerate(VALUES + extra)}
    out = ["4k random reads, same boot and backing device, mean of %d runs" % reps]
    ins = insn_runs(raw, "vhost-insns.csv", KEYS, "path")
    hdr = "%-8s %3s %2s %2s %-18s | %8s %8s | %-26s | %7s %7s %6s %5s | %18s %18s %18s | %s" % (
        "backend", "QD", "q", "w", "path", "IOPS", "mean us", "IOPS / io_uring (range)",
        "wrk us", "drv us", "kick/IO", "fair", "stack/IO", "kernel/IO", "user/IO",
        "kernel+user / io_uring")
    out += [hdr, "-" * len(hdr)]
    for key in order:
        u = runs[key + ("io_uring",)]
        ik = key + ("io_uring",)
        out.append("%-8s %3d %2d %2d %-18s | %8.0f %8.1f | %-26s | %7s %7s %6s %5s | %18s %18s %18s |" % (
            key + ("io_uring", mean(u, 0), mean(u, 1), "", "", "", "", "",
                   insn_cell(ins, ik, 0), insn_cell(ins, ik, 1), insn_cell(ins, ik, 2))))
        for p in PATHS:
            v = runs.get(key + (p,))
            if not v:
                continue
            iops, per = ratio(v, u, 0)
            cpu = [mean(v, col[c]) if c in col else math.nan
                   for c in ("worker_cpu_us", "driver_cpu_us", "kicks_per_io", "fairness")]
            pk = key + (p,)
            out.append("%-8s %3s %2s %2s %-18s | %8.0f %8.1f | %-26s | %7s %7s %6s %5s | %18s %18s %18s | %s" % (
                "", "", "", "", p, mean(v, 0), mean(v, 1),
                "x%.2f (%.2f-%.2f)" % (iops, per[0], per[-1]),
                fmt(cpu[0], "%.1f"), fmt(cpu[1], "%.1f"), fmt(cpu[2], "%.3f"),
                fmt(cpu[3], "%.2f") if key[2] > 1 else "-",
                insn_cell(ins, pk, 0), insn_cell(ins, pk, 1), insn_cell(ins, pk, 2),
                insn_ratio(ins, pk, ik, 4)))
    out.append("(q: queues, w: vhost workers, which apply to vhost-blk only; io_uring runs one "
               "fio job per queue. Ranges: lowest and highest ratio of single repetitions.")
    out.append(" wrk us / drv us: CPU time of the vhost workers / of vhost_blk_test's driver "
               "threads per request; kick/IO: runs of the vring handler (the device's kicks counter) per request;")
    out.append(" fair: requests of the least served vring over the most served one's. Paths: " +
               "; ".join("%s: %s" % (p, PATH_NOTES[p]) for p in PATHS) + ")")
    if ins:
        out.append(INSN_NOTE.replace("(block, io_uring, virtio, virtio_blk, nvme)",
                                     "(block, io_uring, vhost, vhost_blk, drivers/block)")
                   % insn_reps(ins) + "; user/IO: user space (fio; vhost_blk_test, the driver); "
                   "the I/Os are the bios submitted")
    return out


if __name__ == "__main__":
    print("\n".join(table(sys.argv[1])))
