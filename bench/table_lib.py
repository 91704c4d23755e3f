"""Shared by the bench/*_table.py formatters: read one result line per run
and average the runs of each configuration."""
from collections import defaultdict


def read_runs(path, nfields, nkey):
    """Read the lines of PATH that have NFIELDS fields: the first NKEY
    fields name a configuration, the next one the variant run in it (mode,
    path), the rest are numbers. Returns (order, runs): the configurations
    in the order they first appear, and {config + (variant,): [values...]}.
    Fields made of digits become ints, so keys sort and format as numbers."""
    runs = defaultdict(list)
    order = []
    for line in open(path):
        f = line.split()
        if len(f) != nfields:
            continue
        key = tuple(int(x) if x.isdigit() else x for x in f[:nkey + 1])
        if key[:nkey] not in order:
            order.append(key[:nkey])
        runs[key].append([float(x) for x in f[nkey + 1:]])
    return order, runs


def mean(rows, i):
    """Mean of column I over ROWS."""
    return sum(r[i] for r in rows) / len(rows)
