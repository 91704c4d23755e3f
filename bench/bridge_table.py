#!/usr/bin/env python3
"""Format bench/guest/bridge-inner.sh results, one line per run:
"<rw> <qd> <disk> <iops> <lat_mean_us> <lat_p99_us>", into a table of
means with bridge (vhost-blk) / QEMU virtio-blk and bridge / qemu-storage-
daemon IOPS ratios, each with the range of the per-repetition ratios (the
three disks of one repetition ran back to back)."""
import sys

from table_lib import mean, read_runs

order, runs = read_runs(sys.argv[1], 6, 2)
reps = len(next(iter(runs.values())))


def ratio(a, b):
    """Mean IOPS ratio of A over B with the range of per-repetition ones,
    and the mean latency ratio."""
    per = sorted(x[0] / y[0] for x, y in zip(a, b))
    return "x%.2f (%.2f-%.2f) lat x%.2f" % (
        mean(a, 0) / mean(b, 0), per[0], per[-1], mean(a, 1) / mean(b, 1))


print("second-level guest, 4k, fio io_uring O_DIRECT, mean of %d runs" % reps)
hdr = "%-9s %3s | %14s | %14s | %14s | %-29s | %-29s" % (
    "rw", "QD", "bridge IOPS/us", "qemu IOPS/us", "qsd IOPS/us",
    "bridge/qemu IOPS (range), lat", "bridge/qsd IOPS (range), lat")
hdr = hdr.rstrip()
print(hdr)
print("-" * len(hdr))
for key in order:
    b, q, s = (runs[key + (k,)] for k in ("bridge", "qemu", "qsd"))
    print(("%-9s %3d | %7.0f %6.0f | %7.0f %6.0f | %7.0f %6.0f | %-29s | %s" % (
        key + (mean(b, 0), mean(b, 1), mean(q, 0), mean(q, 1), mean(s, 0),
               mean(s, 1), ratio(b, q), ratio(b, s)))).rstrip())
print("(us = mean completion latency in the second-level guest; in brackets the"
      " lowest and highest ratio of single repetitions)")
