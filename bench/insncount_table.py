#!/usr/bin/env python3
"""Format bench/insncount.sh results (raw/insncount.csv: one row per boot,
with and without the insncount plugin) into a table: what the plugin costs
(the user loop's time and the QD1 job's IOPS, on over off) and what it
counted (guest instructions per read, min-max over the boots).
    insncount_table.py RAWDIR"""
import statistics
import sys

from table_lib import raw_csv


def span(values, fmt="%.0f"):
    """'lo-hi' of VALUES, or the one value."""
    lo, hi = min(values), max(values)
    return fmt % lo if lo == hi else (fmt + "-" + fmt) % (lo, hi)


def table(raw):
    """The table's lines."""
    rows = raw_csv(raw, "insncount.csv")
    by = {m: [r for r in rows if r["plugin"] == m] for m in ("off", "on")}
    if not by["off"] or not by["on"]:
        return ["(no boots %s the plugin)" % ("without" if not by["off"] else "with")]
    out = ["%-34s %14s %14s %10s" % ("", "without plugin", "with plugin", "on/off")]
    for key, name, fmt in (("loop_s", "user loop of 1e9 instructions, s", "%.2f"),
                           ("iops", "QD1 4k random reads, IOPS", "%.0f")):
        off = statistics.mean(r[key] for r in by["off"])
        on = statistics.mean(r[key] for r in by["on"])
        out.append("%-34s %14s %14s %10.2f" % (name, fmt % off, fmt % on, on / off))
    out += ["", "Counted with the plugin (min-max over %d boots):" % len(by["on"])]
    out.append("  user loop: %s instructions (want 1000000002)" % span([r["loop_insns"] for r in by["on"]]))
    for key, name in (("stack_per_io", "storage stack (block, io_uring, virtio, virtio_blk)"),
                      ("kernel_per_io", "whole kernel, both vCPUs"),
                      ("user_per_io", "user space (fio), both vCPUs")):
        out.append("  %-52s %s per read" % (name, span([r[key] for r in by["on"]])))
    out += ["", "Ratios of means over the boots of each kind; boots alternated. The plugin's",
            "cost is TCG time, not guest instructions: it adds none to the guest."]
    return out


if __name__ == "__main__":
    print("\n".join(table(sys.argv[1])))
