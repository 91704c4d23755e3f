#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""insnstat: what insncount counted between two markers.

  insnstat.py FILE ID1 ID2

FILE is the plugin's output (/run/vstor/insncount.json in the guest). The
last snapshot of marker ID1 and the last one of ID2 after it are compared;
the differences are printed one per line as KEY=VALUE:

  vcpu1=V vcpu2=V        the vCPUs that executed the two markers
  user.K=N kernel.K=N    vCPU K's instructions in the low and high half
  user=N kernel=N        the sums over the vCPUs
  range.NAME.K=N range.NAME=N   the same per named range
  entry.NAME.K=N entry.NAME=N   the times blocks at NAME's entry addresses ran

A reload record that failed after ID1 is an error: the ranges in force
would not be the ones asked for.
"""
import json
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: insnstat.py FILE ID1 ID2")
    path, id1, id2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    recs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                recs.append(json.loads(line))
            except ValueError:
                sys.exit(f"insnstat: {path}:{n}: not a JSON record: {line.strip()[:80]}")
    i2 = max((i for i, r in enumerate(recs) if r.get("id") == id2), default=None)
    if i2 is None:
        sys.exit(f"insnstat: no marker {id2} in {path}")
    i1 = max((i for i, r in enumerate(recs[:i2]) if r.get("id") == id1), default=None)
    if i1 is None:
        sys.exit(f"insnstat: no marker {id1} before the last marker {id2} in {path}")
    for r in recs[i1:i2]:
        if "error" in r:
            sys.exit(f"insnstat: a ranges reload failed between the markers: {r['error']}")
    a, b = recs[i1], recs[i2]
    if len(a["user"]) != len(b["user"]):
        sys.exit(f"insnstat: markers {id1} and {id2} saw {len(a['user'])} and {len(b['user'])} vCPUs")
    print(f"vcpu1={a['vcpu']}")
    print(f"vcpu2={b['vcpu']}")
    rows = [(half, a[half], b[half]) for half in ("user", "kernel")]
    for kind, key in (("range", "ranges"), ("entry", "entries")):
        rows += [(f"{kind}.{name}", a.get(key, {}).get(name, [0] * len(after)), after)
                 for name, after in b.get(key, {}).items()]
    for key, before, after in rows:
        d = [y - x for x, y in zip(before, after)]
        for k, v in enumerate(d):
            print(f"{key}.{k}={v}")
        print(f"{key}={sum(d)}")

if __name__ == "__main__":
    main()
