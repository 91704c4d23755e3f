#!/usr/bin/env python3
"""Format bench/vhost.sh results (raw/vhost.csv: one row per run) into a
table of means with vhost-blk / io_uring ratios.
    vhost_table.py RAWDIR"""
import sys

from table_lib import group_runs, mean, ratio, raw_csv

KEYS = ("backend", "qd", "queues", "workers")
VALUES = ("iops", "lat_mean_us", "lat_p99_us")


def table(raw):
    """The table's lines."""
    order, runs = group_runs(raw_csv(raw, "vhost.csv"), KEYS, "path", VALUES)
    reps = len(next(iter(runs.values())))
    out = ["4k random reads, same boot and backing device, mean of %d runs" % reps]
    hdr = "%-8s %3s %6s %7s | %9s %8s | %9s %8s | %s" % (
        "backend", "QD", "queues", "workers", "io_uring", "mean us",
        "vhost-blk", "mean us", "vhost-blk / io_uring")
    out += [hdr, "-" * len(hdr)]
    for key in order:
        u, v = runs[key + ("io_uring",)], runs[key + ("vhost-blk",)]
        iops, per = ratio(v, u, 0)
        out.append("%-8s %3d %6d %7d | %9.0f %8.1f | %9.0f %8.1f | IOPS x%.2f (%.2f-%.2f), mean lat x%.2f" % (
            key + (mean(u, 0), mean(u, 1), mean(v, 0), mean(v, 1),
                   iops, per[0], per[-1], ratio(v, u, 1)[0])))
    out.append("(workers apply to vhost-blk only; io_uring runs one fio job per queue;"
               " in brackets the lowest and highest ratio of single repetitions)")
    return out


if __name__ == "__main__":
    print("\n".join(table(sys.argv[1])))
