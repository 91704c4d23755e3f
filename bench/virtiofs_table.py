#!/usr/bin/env python3
"""Format bench/guest/virtiofs.sh results, one line per run:
"<rw> <bs> <tag> <MiB/s> <IOPS> <lat_mean_us>", into a table of means with
the N-queue / 1-queue ratio of vufsd and the vufsd / virtiofsd ratio at one
queue, each with the range of the per-repetition ratios (the devices of one
repetition ran back to back).
    virtiofs_table.py RESULTS ONE_QUEUE N_QUEUES VIRTIOFSD"""
import sys

from table_lib import mean, read_runs

path, one, many, ref = sys.argv[1:5]
order, runs = read_runs(path, 6, 2)
reps = len(runs[order[0] + (one,)])


def ratio(a, b):
    """Mean MiB/s ratio of A over B, with the range of per-repetition ones."""
    per = sorted(x[0] / y[0] for x, y in zip(a, b))
    return "x%.2f (%.2f-%.2f)" % (mean(a, 0) / mean(b, 0), per[0], per[-1])


print("MiB/s and mean latency (us), mean of %d runs" % reps)
hdr = "%-9s %4s | %15s | %15s | %15s | %-19s | %-19s" % (
    "rw", "bs", one + " MiB/s/us", many + " MiB/s/us", ref + " MiB/s/us",
    many + " / " + one, one + " / " + ref)
print(hdr.rstrip())
print("-" * len(hdr.rstrip()))
for key in order:
    a, b, c = (runs[key + (k,)] for k in (one, many, ref))
    print(("%-9s %4s | %7.1f %7.0f | %7.1f %7.0f | %7.1f %7.0f | %-19s | %s" % (
        key + (mean(a, 0), mean(a, 2), mean(b, 0), mean(b, 2), mean(c, 0),
               mean(c, 2), ratio(b, a), ratio(a, c)))).rstrip())
print("(in brackets the lowest and highest ratio of single repetitions)")
