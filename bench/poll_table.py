#!/usr/bin/env python3
"""Format bench/guest/poll.sh results: one line per fio run,
"<backend> <qd> <hipri> <iops> <lat_mean_us> <lat_p99_us> <ios> <irqs>",
into a table of means per (backend, qd, mode) with hipri/plain ratios."""
import sys

from table_lib import mean, read_runs

order, runs = read_runs(sys.argv[1], 8, 2)


names = {"vstor0": "file", "vstor1": "null-co"}
print("fio io_uring randread 4k, same disk and boot, runs alternated "
      "(mean of %d)" % len(next(iter(runs.values()))))
hdr = "%-8s %3s  %-6s %9s %9s %9s %10s  %s" % (
    "backend", "QD", "mode", "IOPS", "mean us", "p99 us", "irq/IO", "hipri/plain")
print(hdr)
print("-" * len(hdr))
for backend, qd in order:
    plain, hipri = runs[(backend, qd, 0)], runs[(backend, qd, 1)]
    for mode, rows in (("plain", plain), ("hipri", hipri)):
        ios, irqs = sum(r[3] for r in rows), sum(r[4] for r in rows)
        ratio = ""
        if mode == "hipri":
            ratio = "IOPS x%.2f, mean lat x%.2f" % (
                mean(hipri, 0) / mean(plain, 0), mean(hipri, 1) / mean(plain, 1))
        print("%-8s %3d  %-6s %9.0f %9.1f %9.1f %10.3f  %s" % (
            names.get(backend, backend), qd, mode, mean(rows, 0),
            mean(rows, 1), mean(rows, 2), irqs / ios if ios else 0, ratio))
