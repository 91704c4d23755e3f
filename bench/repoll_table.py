#!/usr/bin/env python3
"""Format bench/repoll.sh results (raw/repoll-changes.csv: one row per
change of num_poll_queues; raw/repoll-io.csv: the QD1 read job without and
with changes) into two tables.
    repoll_table.py RAWDIR"""
import statistics
import sys

from table_lib import raw_csv

PHASES = (("idle", "idle disk"), ("under-io", "under QD1 random reads"))
LOADS = (("no-changes", "no changes"), ("changes", "changes every 0.5 s"))


def table(raw):
    """The tables' lines."""
    changes = raw_csv(raw, "repoll-changes.csv")
    out = ["%-28s %10s %10s %10s" % ("change of num_poll_queues", "min ms", "median ms", "max ms")]
    for phase, name in PHASES:
        v = sorted(r["duration_us"] for r in changes if r["phase"] == phase)
        out.append("%-28s %10.1f %10.1f %10.1f" % (
            name, v[0] / 1e3, statistics.median(v) / 1e3, v[-1] / 1e3))
    io = {r["load"]: r for r in raw_csv(raw, "repoll-io.csv")}
    out += ["", "%-28s %10s %10s %10s %10s" % ("QD1 random reads", "IOPS", "mean us", "p99.9 us", "max ms")]
    for load, name in LOADS:
        r = io[load]
        out.append("%-28s %10.0f %10.1f %10.1f %10.1f" % (
            name, r["iops"], r["lat_mean_us"], r["lat_p999_us"], r["lat_max_us"] / 1e3))
    out += ["", "The longest read during the changes waited for one change: its latency is",
            "the I/O pause a change causes."]
    return out


if __name__ == "__main__":
    print("\n".join(table(sys.argv[1])))
