#!/usr/bin/env python3
"""Format bench/bridge.sh results (raw/bridge.csv: one row per fio run in
the second-level guest; raw/bridge-daemons.json: the bridge's counters) into
a table of means with bridge (vhost-blk) / QEMU virtio-blk and bridge /
qemu-storage-daemon IOPS ratios, each with the range of the per-repetition
ratios (the three disks of one repetition ran back to back).
    bridge_table.py RAWDIR"""
import json
import os
import sys

from table_lib import group_runs, mean, ratio, raw_csv

VALUES = ("iops", "lat_mean_us", "lat_p99_us")


def cell(a, b):
    """Mean IOPS ratio of A over B with the range of per-repetition ones,
    and the mean latency ratio."""
    iops, per = ratio(a, b, 0)
    return "x%.2f (%.2f-%.2f) lat x%.2f" % (iops, per[0], per[-1], ratio(a, b, 1)[0])


def table(raw):
    """The table's lines."""
    order, runs = group_runs(raw_csv(raw, "bridge.csv"), ("rw", "qd"), "disk", VALUES)
    reps = len(next(iter(runs.values())))
    out = ["second-level guest, 4k, fio io_uring O_DIRECT, mean of %d runs" % reps]
    hdr = "%-9s %3s | %14s | %14s | %14s | %-29s | %-29s" % (
        "rw", "QD", "bridge IOPS/us", "qemu IOPS/us", "qsd IOPS/us",
        "bridge/qemu IOPS (range), lat", "bridge/qsd IOPS (range), lat")
    hdr = hdr.rstrip()
    out += [hdr, "-" * len(hdr)]
    for key in order:
        b, q, s = (runs[key + (k,)] for k in ("bridge", "qemu", "qsd"))
        out.append(("%-9s %3d | %7.0f %6.0f | %7.0f %6.0f | %7.0f %6.0f | %-29s | %s" % (
            key + (mean(b, 0), mean(b, 1), mean(q, 0), mean(q, 1), mean(s, 0),
                   mean(s, 1), cell(b, q), cell(b, s)))).rstrip())
    out.append("(us = mean completion latency in the second-level guest; in brackets the"
               " lowest and highest ratio of single repetitions)")
    path = os.path.join(raw, "bridge-daemons.json")
    if os.path.exists(path):
        with open(path) as f:
            st = json.load(f)["bridge"]
        reqs = sum(v for k, v in st.items() if k.startswith("vring.") and k.endswith(".requests"))
        out.append("== bridge: messages %s rebuilds %s cpu_us %s requests through vhost-blk %d" % (
            st["messages"], st["rebuilds"], st["cpu_us"], reqs))
    return out


if __name__ == "__main__":
    print("\n".join(table(sys.argv[1])))
