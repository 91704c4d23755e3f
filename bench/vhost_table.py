#!/usr/bin/env python3
"""Format bench/guest/vhost.sh results, one line per run:
"<backend> <qd> <queues> <workers> <path> <iops> <lat_mean_us> <lat_p99_us>",
into a table of means with vhost-blk / io_uring ratios."""
import sys

from table_lib import mean, read_runs

order, runs = read_runs(sys.argv[1], 8, 4)


reps = len(next(iter(runs.values())))
print("4k random reads, same boot and backing device, mean of %d runs" % reps)
hdr = "%-7s %3s %6s %7s | %9s %8s | %9s %8s | %s" % (
    "backend", "QD", "queues", "workers", "io_uring", "mean us",
    "vhost-blk", "mean us", "vhost-blk / io_uring")
print(hdr)
print("-" * len(hdr))
for key in order:
    u, v = runs[key + ("io_uring",)], runs[key + ("vhost-blk",)]
    print("%-7s %3d %6d %7d | %9.0f %8.1f | %9.0f %8.1f | IOPS x%.2f, mean lat x%.2f" % (
        key + (mean(u, 0), mean(u, 1), mean(v, 0), mean(v, 1),
               mean(v, 0) / mean(u, 0), mean(v, 1) / mean(u, 1))))
print("(workers apply to vhost-blk only; io_uring runs one fio job per queue)")
