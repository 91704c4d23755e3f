#!/usr/bin/env python3
"""Format bench/ptcpu.sh results (raw/ptcpu.csv: one row per t/io_uring run)
into a table of means with passthrough/block-device ratios of IOPS and of
guest CPU time per I/O.
    ptcpu_table.py RAWDIR"""
import sys

from pt_table import NAMES, PAIRS
from table_lib import (INSN_NOTE, group_runs, insn_cell, insn_ratio, insn_reps, insn_runs,
                       mean, ratio, raw_csv)

VALUES = ("iops", "cpu_us_per_io", "irqs_per_io")


def table(raw):
    """The table's lines."""
    order, runs = group_runs(raw_csv(raw, "ptcpu.csv"), ("qd", "batch", "mode"), "path", VALUES)
    reps = len(next(iter(runs.values())))
    out = ["t/io_uring randread 4k on vCPU 0 (a host core of its own), block device "
           "(io_uring O_DIRECT) vs passthrough (uring_cmd), mean of %d" % reps]
    ins = insn_runs(raw, "ptcpu-insns.csv", ("qd", "batch", "mode"), "path")
    hdr = "%2s %5s %-5s %-25s %8s %9s %8s %20s %20s  %s" % (
        "QD", "batch", "mode", "path", "IOPS", "CPU us/IO", "irqs/IO", "stack/IO", "kernel/IO",
        "passthrough / block device")
    out += [hdr, "-" * len(hdr)]
    for qd, batch, mode in order:
        key = (qd, batch, mode)
        for ptp, bdp in PAIRS:
            bdev, pt = runs[key + (bdp,)], runs[key + (ptp,)]
            for path, rows in ((bdp, bdev), (ptp, pt)):
                note = ""
                if rows is pt:
                    iops, per = ratio(pt, bdev, 0)
                    cpu, cper = ratio(pt, bdev, 1)
                    note = "IOPS x%.2f (%.2f-%.2f), CPU/IO x%.2f (%.2f-%.2f)" % (
                        iops, per[0], per[-1], cpu, cper[0], cper[-1])
                    r = insn_ratio(ins, key + (ptp,), key + (bdp,))
                    if r:
                        note += ", stack/IO " + r
                out.append("%2d %5d %-5s %-25s %8.0f %9.2f %8.3f %20s %20s  %s" % (
                    qd, batch, mode, NAMES[path], mean(rows, 0), mean(rows, 1),
                    mean(rows, 2), insn_cell(ins, key + (path,), 0),
                    insn_cell(ins, key + (path,), 1), note))
        vpt, ng = runs[key + ("vblk-pt",)], runs[key + ("nvme-ng",)]
        note = "virtio-blk pt / NVMe ng: IOPS x%.2f, CPU/IO x%.2f" % (
            mean(vpt, 0) / mean(ng, 0), mean(vpt, 1) / mean(ng, 1))
        r = insn_ratio(ins, key + ("vblk-pt",), key + ("nvme-ng",))
        if r:
            note += ", stack/IO " + r
        out.append("%2d %5d %-5s %-25s %8s %9s %8s %20s %20s  %s" % (
            qd, batch, mode, "", "", "", "", "", "", note))
    out.append("(CPU us/IO: the submitter's on-CPU time (perf task-clock, interrupts while it ran included) per completed I/O; "
               "in brackets the lowest and highest ratio of single repetitions)")
    if ins:
        out.append(INSN_NOTE % insn_reps(ins))
    return out


if __name__ == "__main__":
    print("\n".join(table(sys.argv[1])))
