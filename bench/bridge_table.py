#!/usr/bin/env python3
"""Format bench/guest/bridge-inner.sh results, one line per run:
"<rw> <qd> <disk> <iops> <lat_mean_us> <lat_p99_us>", into a table of
means with bridge (vhost-blk) / QEMU virtio-blk and bridge / qemu-storage-
daemon ratios."""
import sys

from table_lib import mean, read_runs

order, runs = read_runs(sys.argv[1], 6, 2)
reps = len(next(iter(runs.values())))
print("second-level guest, 4k, fio io_uring O_DIRECT, mean of %d runs" % reps)
hdr = "%-9s %3s | %14s | %14s | %14s | %-22s | %s" % (
    "rw", "QD", "bridge IOPS/us", "qemu IOPS/us", "qsd IOPS/us",
    "bridge/qemu IOPS, lat", "bridge/qsd IOPS, lat")
print(hdr)
print("-" * len(hdr))
for key in order:
    b, q, s = (runs[key + (k,)] for k in ("bridge", "qemu", "qsd"))
    print("%-9s %3d | %7.0f %6.0f | %7.0f %6.0f | %7.0f %6.0f | x%.2f, x%.2f%10s | x%.2f, x%.2f" % (
        key + (mean(b, 0), mean(b, 1), mean(q, 0), mean(q, 1), mean(s, 0), mean(s, 1),
               mean(b, 0) / mean(q, 0), mean(b, 1) / mean(q, 1), "",
               mean(b, 0) / mean(s, 0), mean(b, 1) / mean(s, 1))))
print("(lat = mean completion latency in the second-level guest; ratios < 1 for lat are better)")
