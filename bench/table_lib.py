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
