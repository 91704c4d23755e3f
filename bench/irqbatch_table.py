#!/usr/bin/env python3
"""Format bench/irqbatch.sh results: raw/irqbatch.csv (one row per fio run)
as a table per queue depth of interrupt-driven I/O with irq_batch off and
on, with the on/off ratios; raw/irqbatch-soak.csv (one row per soak round)
as the rounds and hangs by engine, rq_affinity and scheduler.
    irqbatch_table.py RAWDIR"""
import os
import sys
from collections import Counter

from table_lib import (INSN_NOTE, group_runs, insn_cell, insn_ratio, insn_reps, insn_runs,
                       mean, ratio, raw_csv)

VALUES = ("iops", "lat_mean_us", "lat_p99_us", "ios", "irqs", "cpu_us_per_io")


def table(raw):
    """The table's lines."""
    order, runs = group_runs(raw_csv(raw, "irqbatch.csv"), ("qd",), "batch", VALUES)
    reps = len(next(iter(runs.values())))
    out = ["interrupt-driven fio io_uring randread 4k on every disk at once, irq_batch "
           "off (0) and on (1) alternated in one boot, mean of %d" % reps]
    ins = insn_runs(raw, "irqbatch-insns.csv", ("qd",), "batch")
    hdr = "%4s %5s | %9s %9s %9s %8s %9s %20s %20s | %-20s %-9s %-9s %s" % (
        "QD", "batch", "IOPS", "mean us", "p99 us", "irq/IO", "CPU us/IO", "stack/IO",
        "kernel/IO", "IOPS on/off (range)", "lat", "CPU/IO", "stack/IO")
    out += [hdr, "-" * len(hdr)]
    for (qd,) in order:
        off, on = runs.get((qd, 0)), runs.get((qd, 1))
        for b, rows in ((0, off), (1, on)):
            if not rows:
                continue
            ios, irqs = sum(r[3] for r in rows), sum(r[4] for r in rows)
            note = ""
            if b == 1 and off:
                m, per = ratio(on, off, 0)
                note = "x%.2f (%.2f-%.2f)   x%.2f     x%.2f     %s" % (
                    m, per[0], per[-1], ratio(on, off, 1)[0], ratio(on, off, 5)[0],
                    insn_ratio(ins, (qd, 1), (qd, 0)))
            out.append("%4d %5d | %9.0f %9.1f %9.1f %8.3f %9.2f %20s %20s | %s" % (
                qd, b, mean(rows, 0), mean(rows, 1), mean(rows, 2),
                irqs / ios if ios else 0, mean(rows, 5), insn_cell(ins, (qd, b), 0),
                insn_cell(ins, (qd, b), 1), note))
    out.append("(irq/IO: interrupts of the disks' request queues per completed I/O; CPU us/IO: "
               "fio's usr+sys CPU time per I/O, which includes the completions its CPU took; "
               "in brackets the lowest and highest ratio of single repetitions)")
    if ins:
        out.append(INSN_NOTE % insn_reps(ins))
    if os.path.exists(os.path.join(raw, "irqbatch-soak.csv")):
        soak = raw_csv(raw, "irqbatch-soak.csv")
        res = Counter(r["result"] for r in soak)
        by = Counter((r["engine"], r["affinity"], r["sched"], r["result"]) for r in soak)
        out += ["", "soak: %d rounds of fio at QD128 on two small-ring disks (16 entries, no "
                "indirect descriptors), irq_batch=1: %d ok, %d hung, %d failed"
                % (len(soak), res["ok"], res["hung"], res["failed"])]
        for key in sorted({k[:3] for k in by}):
            out.append("  %-8s rq_affinity=%s %-11s %s" % (
                key[0], key[1], key[2], ", ".join(
                    "%d %s" % (by[key + (r,)], r) for r in ("ok", "hung", "failed")
                    if by[key + (r,)])))
    return out


if __name__ == "__main__":
    print("\n".join(table(sys.argv[1])))
