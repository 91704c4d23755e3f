#!/usr/bin/env python3
"""Format bench/pt.sh results (raw/pt.csv: one row per fio run) into a table
of means with passthrough/block-device ratios per device.
    pt_table.py RAWDIR"""
import sys

from table_lib import (INSN_NOTE, group_runs, insn_cell, insn_ratio, insn_reps, insn_runs,
                       mean, ratio, raw_csv)

NAMES = {
    "vblk-bdev": "virtio-blk /dev/vdX",
    "vblk-pt": "virtio-blk /dev/vblk/vdX",
    "nvme-bdev": "NVMe /dev/nvmeXnY",
    "nvme-ng": "NVMe /dev/ngXnY",
}
# Each device's passthrough path and its block device.
PAIRS = (("vblk-pt", "vblk-bdev"), ("nvme-ng", "nvme-bdev"))
VALUES = ("iops", "lat_mean_us", "lat_p99_us")


def table(raw):
    """The table's lines."""
    order, runs = group_runs(raw_csv(raw, "pt.csv"), ("backend", "qd", "mode"), "path", VALUES)
    reps = len(next(iter(runs.values())))
    out = ["fio randread 4k, io_uring (block devices) vs io_uring_cmd "
           "(passthrough), same boot and backends, mean of %d" % reps]
    ins = insn_runs(raw, "pt-insns.csv", ("backend", "qd", "mode"), "path")
    hdr = "%-7s %2s %-5s %-26s %8s %8s %8s %20s %20s  %s" % (
        "backend", "QD", "mode", "path", "IOPS", "mean us", "p99 us", "stack/IO", "kernel/IO",
        "passthrough / block device")
    out += [hdr, "-" * len(hdr)]
    for backend, qd, mode in order:
        key = (backend, qd, mode)
        for ptp, bdp in PAIRS:
            bdev, pt = runs[key + (bdp,)], runs[key + (ptp,)]
            for path, rows in ((bdp, bdev), (ptp, pt)):
                note = ""
                if rows is pt:
                    iops, per = ratio(pt, bdev, 0)
                    note = "IOPS x%.2f (%.2f-%.2f), mean lat x%.2f, p99 x%.2f" % (
                        iops, per[0], per[-1], ratio(pt, bdev, 1)[0], ratio(pt, bdev, 2)[0])
                    r = insn_ratio(ins, key + (ptp,), key + (bdp,))
                    if r:
                        note += ", stack/IO " + r
                out.append("%-7s %2d %-5s %-26s %8.0f %8.1f %8.1f %20s %20s  %s" % (
                    backend, qd, mode, NAMES[path],
                    mean(rows, 0), mean(rows, 1), mean(rows, 2),
                    insn_cell(ins, key + (path,), 0), insn_cell(ins, key + (path,), 1), note))
        vpt, ng = runs[key + ("vblk-pt",)], runs[key + ("nvme-ng",)]
        note = "virtio-blk pt / NVMe ng: IOPS x%.2f" % (mean(vpt, 0) / mean(ng, 0))
        r = insn_ratio(ins, key + ("vblk-pt",), key + ("nvme-ng",))
        if r:
            note += ", stack/IO " + r
        out.append("%-7s %2d %-5s %-26s %8s %8s %8s %20s %20s  %s" % (
            backend, qd, mode, "", "", "", "", "", "", note))
    out.append("(in brackets the lowest and highest ratio of single repetitions)")
    if ins:
        out.append(INSN_NOTE % insn_reps(ins))
    return out


if __name__ == "__main__":
    print("\n".join(table(sys.argv[1])))
