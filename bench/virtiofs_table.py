#!/usr/bin/env python3
"""Format bench/virtiofs.sh results (raw/virtiofs.csv: one row per fio run;
raw/virtiofs-daemons.json: vufsd's counters) into a table of means with the
N-queue / 1-queue ratio of vufsd, the vufsd / virtiofsd ratio at one queue
and, where the run had a pooled virtiofsd (virtiofsd-tpK, the Rust one),
vufsd's ratios over that at one and at N queues, each with the range of the
per-repetition ratios (the devices of one repetition ran back to back), then
each vufsd's per-queue share of the requests.
    virtiofs_table.py RAWDIR"""
import json
import os
import sys

from table_lib import group_runs, insn_cell, insn_ratio, insn_reps, insn_runs, mean, ratio, raw_csv

ONE, REF = "vufsd-1", "virtiofsd"


def devices(rows):
    """(one queue, N queues, the virtiofsd devices) by name: virtiofsd
    first, then any with a thread pool (virtiofsd-tpK)."""
    names = list(dict.fromkeys(r["device"] for r in rows))
    many = [d for d in names if d.startswith("vufsd-") and d != ONE]
    refs = [REF] + [d for d in names if d.startswith(REF + "-")]
    return ONE, many[0], refs


def baseline(rows, order, runs):
    """With --baseline: this vufsd over the baseline binary at 1 and N
    queues, per workload."""
    names = set(r["device"] for r in rows)
    pairs = [(d, "base-" + d.split("-", 1)[1]) for d in sorted(names)
             if d.startswith("vufsd-") and "base-" + d.split("-", 1)[1] in names]
    if not pairs:
        return []
    out = ["", "this vufsd / the --baseline binary (MiB/s), same boot:"]
    hdr = "%-9s %4s | " % ("rw", "bs") + " | ".join(
        "%-19s" % ("%s / %s" % p) for p in pairs)
    out += [hdr.rstrip(), "-" * len(hdr.rstrip())]
    for key in order:
        out.append(("%-9s %4s | " % key + " | ".join(
            "%-19s" % cell(runs[key + (a,)], runs[key + (b,)])
            for a, b in pairs)).rstrip())
    return out


def cell(a, b):
    """Mean MiB/s ratio of A over B, with the range of per-repetition ones."""
    m, per = ratio(a, b, 0)
    return "x%.2f (%.2f-%.2f)" % (m, per[0], per[-1])


def insns(raw, order, devs, one, many):
    """Guest instructions per FUSE request by device and workload."""
    ins = insn_runs(raw, "virtiofs-insns.csv", ("rw", "bs"), "device")
    if not ins:
        return []
    out = ["", "guest instructions per FUSE request (fuse_request_end): FUSE and virtio-fs with the "
           "virtio core (stack) / the whole kernel, every vCPU; mean (range) of %d windows, "
           "counted in a boot of their own with the insncount plugin" % insn_reps(ins)]
    heads = ["%s stack / kernel" % d for d in devs] + ["%s / %s stack" % (many, one)]
    widths = [max(len(h), 27) for h in heads]
    hdr = "%-9s %4s | " % ("rw", "bs") + " | ".join(h.ljust(w) for h, w in zip(heads, widths))
    out += [hdr.rstrip(), "-" * len(hdr.rstrip())]
    for key in order:
        cells = ["%s / %s" % (insn_cell(ins, key + (d,), 0), insn_cell(ins, key + (d,), 1))
                 for d in devs] + [insn_ratio(ins, key + (many,), key + (one,))]
        out.append(("%-9s %4s | " % key + " | ".join(
            c.ljust(w) for c, w in zip(cells, widths))).rstrip())
    return out


def table(raw):
    """The table's lines."""
    rows = raw_csv(raw, "virtiofs.csv")
    one, many, refs = devices(rows)
    devs = [one, many] + refs
    # N queues over 1, then vufsd at 1 and at N queues over each virtiofsd.
    pairs = [(many, one)] + [(one, r) for r in refs] + [(many, r) for r in refs[1:]]
    order, runs = group_runs(rows, ("rw", "bs"), "device", ("bw_mib_s", "iops", "lat_mean_us"))
    reps = len(runs[order[0] + (one,)])
    out = ["MiB/s and mean latency (us), mean of %d runs" % reps]
    path = os.path.join(raw, "virtiofs-peer.txt")
    if os.path.exists(path):
        with open(path) as f:
            out.append("virtiofsd: " + f.read().strip())
    # Each column as wide as its heading.
    heads = [d + " MiB/s/us" for d in devs] + ["%s / %s" % p for p in pairs]
    hdr = "%-9s %4s | " % ("rw", "bs") + " | ".join(heads)
    out += [hdr, "-" * len(hdr)]
    for key in order:
        cells = ["%7.1f %7.0f" % (mean(runs[key + (d,)], 0), mean(runs[key + (d,)], 2))
                 for d in devs] + [cell(runs[key + (a,)], runs[key + (b,)]) for a, b in pairs]
        out.append(("%-9s %4s | " % key + " | ".join(
            c.rjust(len(h)) if i < len(devs) else c.ljust(len(h))
            for i, (c, h) in enumerate(zip(cells, heads)))).rstrip())
    out.append("(in brackets the lowest and highest ratio of single repetitions)")
    out += baseline(rows, order, runs)
    out += insns(raw, order, devs, one, many)
    path = os.path.join(raw, "virtiofs-daemons.json")
    if os.path.exists(path):
        with open(path) as f:
            daemons = json.load(f)
        out += ["", "per-queue share of the requests (vufsd, whole run; vq 0 is hiprio):"]
        for tag in [one, many] + sorted(t for t in daemons if t.startswith("base-")):
            st = daemons[tag]
            vqs = sorted({int(k.split(".")[1]) for k in st if k.startswith("vq.")})
            nreq = sum(st["vq.%d.requests" % q] for q in vqs) or 1
            out.append("  %-9s %s  (daemon CPU %.1f s, %.1f us per request)" % (
                tag, " ".join("vq%d %d" % (q, st["vq.%d.requests" % q]) for q in vqs),
                st["cpu_us"] / 1e6, st["cpu_us"] / nreq))
            out.append("            by opcode: " + " ".join(
                "%s %d" % (k[3:], v) for k, v in st.items() if k.startswith("op.")))
    return out


if __name__ == "__main__":
    print("\n".join(table(sys.argv[1])))
