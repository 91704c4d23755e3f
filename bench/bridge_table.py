#!/usr/bin/env python3
"""Format bench/bridge.sh results (raw/bridge.csv: one row per fio run in
the second-level guest; raw/bridge-daemons.json: the bridge's counters) into
a table of means per disk and IOPS ratios: bridge (vhost-blk) / QEMU
virtio-blk, bridge / qemu-storage-daemon and, where QEMU had
iothread-vq-mapping, vhost-blk against as many IOThreads as it has workers;
each with the range of the per-repetition ratios (the disks of one
repetition ran back to back). With raw/bridge-insns.csv (the counting boot):
the first-level guest's instructions per second-level I/O.
    bridge_table.py RAWDIR"""
import json
import os
import sys

from table_lib import group_runs, insn_cell, insn_ratio, insn_reps, insn_runs, mean, ratio, raw_csv

VALUES = ("iops", "lat_mean_us", "lat_p99_us")


def cell(a, b):
    """Mean IOPS ratio of A over B with the range of per-repetition ones,
    and the mean latency ratio."""
    iops, per = ratio(a, b, 0)
    return "x%.2f (%.2f-%.2f) lat x%.2f" % (iops, per[0], per[-1], ratio(a, b, 1)[0])


# Ratios shown, where both disks ran: vhost-blk against QEMU's main loop and
# qemu-storage-daemon, and each vhost-blk worker count against as many
# IOThreads (iothread-vq-mapping, QEMU >= 9): one, and one per queue.
PAIRS = (("bridge", "qemu"), ("bridge", "qsd"), ("bridge-w1", "iot1"), ("bridge", "iotN"))
DISKS = ("bridge", "bridge-w1", "qemu", "iot1", "iotN", "qsd")


def iot_n(rows):
    """iot1 and iotN: QEMU's virtio-blk on 1 and on N (the queues) IOThreads."""
    for r in rows:
        if str(r["disk"]).startswith("iot") and r["disk"] != "iot1":
            r["disk"] = "iotN"
    return rows


def insns(raw, order, disks, pairs):
    """The first-level guest's instructions per second-level I/O."""
    ins = insn_runs(raw, "bridge-insns.csv", ("rw", "qd"), "disk")
    if not ins:
        return []
    for key in list(ins):
        if str(key[2]).startswith("iot") and key[2] != "iot1":
            ins[key[:2] + ("iotN",)] = ins.pop(key)
    out = ["", "first-level guest instructions per second-level I/O (brd_submit_bio): its "
           "storage stack (block, io_uring, vhost, vhost_blk) / its whole kernel; mean (range) "
           "of %d windows, counted in a boot of their own with the insncount plugin. The whole "
           "kernel also runs, per second rather than per I/O, what QEMU asks of it to run the "
           "second-level guest under TCG (timers, signals, its event loop), which weighs more "
           "on a slower path; the first-level user space, mostly that TCG, is left out."
           % insn_reps(ins)]
    heads = ["%s stack / kernel" % d for d in disks]
    widths = [max(len(h), 25) for h in heads]
    hdr = "%-9s %3s | " % ("rw", "QD") + " | ".join(h.ljust(w) for h, w in zip(heads, widths))
    out += [hdr.rstrip(), "-" * len(hdr.rstrip())]
    for key in order:
        cells = ["%s / %s" % (insn_cell(ins, key + (d,), 0), insn_cell(ins, key + (d,), 1))
                 for d in disks]
        out.append(("%-9s %3d | " % key + " | ".join(
            c.ljust(w) for c, w in zip(cells, widths))).rstrip())
    out += ["", "storage-stack instructions per I/O, ratio (lowest-highest of single "
            "repetitions)"]
    hdr = "%-9s %3s | " % ("rw", "QD") + " | ".join("%-24s" % ("%s/%s" % p) for p in pairs)
    out += [hdr.rstrip(), "-" * len(hdr.rstrip())]
    for key in order:
        out.append(("%-9s %3d | " % key + " | ".join(
            "%-24s" % insn_ratio(ins, key + (a,), key + (b,), 0) for a, b in pairs)).rstrip())
    return out


def table(raw):
    """The table's lines."""
    rows = iot_n(raw_csv(raw, "bridge.csv"))
    order, runs = group_runs(rows, ("rw", "qd"), "disk", VALUES)
    disks = [d for d in DISKS if any(k[2] == d for k in runs)]
    pairs = [p for p in PAIRS if p[0] in disks and p[1] in disks]
    reps = len(next(iter(runs.values())))
    out = ["second-level guest, 4k, fio io_uring O_DIRECT, mean of %d runs; IOPS and "
           "mean completion latency (us) per disk" % reps]
    hdr = "%-9s %3s | " % ("rw", "QD") + " | ".join("%14s" % d for d in disks)
    out += [hdr, "-" * len(hdr)]
    for key in order:
        cells = []
        for d in disks:
            r = runs.get(key + (d,), [])
            cells.append("%7.0f %6.0f" % (mean(r, 0), mean(r, 1)))
        out.append("%-9s %3d | " % key + " | ".join(cells))
    out.append("")
    out.append("IOPS ratio (lowest-highest of single repetitions), mean latency ratio")
    hdr = "%-9s %3s | " % ("rw", "QD") + " | ".join("%-29s" % ("%s/%s" % p) for p in pairs)
    out += [hdr.rstrip(), "-" * len(hdr.rstrip())]
    for key in order:
        out.append(("%-9s %3d | " % key + " | ".join(
            "%-29s" % cell(runs[key + (a,)], runs[key + (b,)]) for a, b in pairs)).rstrip())
    out.append("(bridge: vhost-blk with a worker per queue, bridge-w1 with one; qemu: QEMU's"
               " virtio-blk in its main loop; iot1/iotN: on 1 and on one IOThread per queue;"
               " qsd: qemu-storage-daemon)")
    out += insns(raw, order, disks, pairs)
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
