#!/usr/bin/env python3
"""Format bench/poll.sh results (raw/poll.csv: one row per fio run) into a
table of means per (backend, qd, mode) with hipri/plain ratios.
    poll_table.py RAWDIR"""
import sys

from table_lib import (INSN_NOTE, group_runs, insn_cell, insn_ratio, insn_reps, insn_runs,
                       mean, ratio, raw_csv)

VALUES = ("iops", "lat_mean_us", "lat_p99_us", "ios", "irqs")


def table(raw):
    """The table's lines."""
    order, runs = group_runs(raw_csv(raw, "poll.csv"), ("backend", "qd"), "mode", VALUES)
    out = ["fio io_uring randread 4k, same disk and boot, runs alternated "
           "(mean of %d)" % len(next(iter(runs.values())))]
    ins = insn_runs(raw, "poll-insns.csv", ("backend", "qd"), "mode")
    hdr = "%-8s %3s  %-6s %9s %9s %9s %10s %20s %20s  %s" % (
        "backend", "QD", "mode", "IOPS", "mean us", "p99 us", "irq/IO", "stack/IO",
        "kernel/IO", "hipri/plain")
    out += [hdr, "-" * len(hdr)]
    for backend, qd in order:
        plain, hipri = runs[(backend, qd, "plain")], runs[(backend, qd, "hipri")]
        for mode, rows in (("plain", plain), ("hipri", hipri)):
            ios, irqs = sum(r[3] for r in rows), sum(r[4] for r in rows)
            note = ""
            if mode == "hipri":
                iops, per = ratio(hipri, plain, 0)
                note = "IOPS x%.2f (%.2f-%.2f), mean lat x%.2f" % (
                    iops, per[0], per[-1], ratio(hipri, plain, 1)[0])
                r = insn_ratio(ins, (backend, qd, "hipri"), (backend, qd, "plain"))
                if r:
                    note += ", stack/IO " + r
            out.append("%-8s %3d  %-6s %9.0f %9.1f %9.1f %10.3f %20s %20s  %s" % (
                backend, qd, mode, mean(rows, 0), mean(rows, 1), mean(rows, 2),
                irqs / ios if ios else 0, insn_cell(ins, (backend, qd, mode), 0),
                insn_cell(ins, (backend, qd, mode), 1), note))
    out.append("(in brackets the lowest and highest ratio of single repetitions)")
    if ins:
        out.append(INSN_NOTE % insn_reps(ins))
    return out


if __name__ == "__main__":
    print("\n".join(table(sys.argv[1])))
