"""Shared by the bench/*_table.py formatters and bench/plots.py: read the
raw results (CSV files with a header line, one row per run) and average the
runs of each configuration."""
import csv
import math
import os
import sys
from collections import defaultdict


def number(s):
    """An int or a float for a numeric string ("nan" for a value fio did
    not report), else the string."""
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s


def read_csv(path):
    """The rows of a CSV file with a header line, as dicts; numeric fields
    become numbers."""
    rows = []
    with open(path, newline="") as f:
        for n, row in enumerate(csv.DictReader(f), 2):
            if None in row or None in row.values():
                # A run the guest could not read (no fio JSON): skipped, said.
                print("warning: %s line %d: not as many fields as the header; skipped"
                      % (path, n), file=sys.stderr)
                continue
            rows.append({k: number(v) for k, v in row.items()})
    return rows


def raw_csv(raw, name):
    """read_csv() of NAME in the raw results directory RAW."""
    return read_csv(os.path.join(raw, name))


def group_runs(rows, keys, variant, values):
    """Group ROWS (from read_csv) by configuration. KEYS name the columns
    that make a configuration, VARIANT the column of what is compared in it
    (mode, path, disk), VALUES the numbers kept, in that order. Returns
    (order, runs): the configurations (tuples of the KEYS values) in the
    order they first appear, and {config + (variant,): [[values...], ...]},
    one list per repetition, in the order of the rep column."""
    order = []
    for row in rows:
        key = tuple(row[k] for k in keys)
        if key not in order:
            order.append(key)
    runs = defaultdict(list)
    for row in sorted(rows, key=lambda r: r.get("rep", 0)):
        key = tuple(row[k] for k in keys)
        runs[key + (row[variant],)].append([row[v] for v in values])
    return order, runs


def mean(rows, i):
    """Mean of column I over ROWS (nan for no rows)."""
    return sum(r[i] for r in rows) / len(rows) if rows else math.nan


def ratio(a, b, i=0):
    """The ratio of the means of column I of A over B, and the sorted
    ratios of single repetitions (A and B of one repetition ran back to
    back): (mean ratio, [per-repetition ratios])."""
    per = sorted(x[i] / y[i] for x, y in zip(a, b) if y[i])
    m = mean(b, i)
    return (mean(a, i) / m if m else math.nan), (per or [math.nan])


# Guest instructions per I/O (bench/guest/lib.sh ic_window): NAME-insns.csv,
# one row per counted window, from a boot with the insncount plugin.
# The last, total, is kernel + user.
INSN_VALUES = ("insn_stack_per_io", "insn_kernel_per_io", "insn_user_per_io", "ic_irqs_per_io",
               "insn_total_per_io")
INSN_NOTE = ("stack/IO, kernel/IO: guest instructions per I/O in the storage stack (block, "
             "io_uring, virtio, virtio_blk, nvme) and in the whole kernel, every vCPU; "
             "mean of %d windows (range), counted in a boot of their own with the insncount "
             "plugin (Documentation/insncount.md)")


def insn_runs(raw, name, keys, variant):
    """group_runs() of the counts in raw/NAME (INSN_VALUES), or None when
    the run counted nothing (--insns 0)."""
    path = os.path.join(raw, name)
    if not os.path.exists(path):
        return None
    rows = read_csv(path)
    for r in rows:
        r["insn_total_per_io"] = r["insn_kernel_per_io"] + r["insn_user_per_io"]
    return group_runs(rows, keys, variant, INSN_VALUES)[1]


def insn_cell(runs, key, i=0):
    """Column I of the counts of configuration KEY: 'mean' or 'mean (lo-hi)'
    over the repetitions; '-' when not counted."""
    vals = [r[i] for r in (runs or {}).get(key, [])]
    if not vals:
        return "-"
    m, lo, hi = sum(vals) / len(vals), min(vals), max(vals)
    return "%.0f" % m if lo == hi else "%.0f (%.0f-%.0f)" % (m, lo, hi)


def insn_ratio(runs, a, b, i=0):
    """'x1.23 (1.20-1.25)': column I of configuration A over B, the ratio of
    the means and the range of single repetitions' ratios; '' when either
    was not counted."""
    if not runs or not runs.get(a) or not runs.get(b):
        return ""
    m, per = ratio(runs[a], runs[b], i)
    return "x%.2f (%.2f-%.2f)" % (m, per[0], per[-1])


def insn_reps(runs):
    """The repetitions counted per configuration (0 for none)."""
    return max((len(v) for v in (runs or {}).values()), default=0)
