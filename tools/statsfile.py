#!/usr/bin/env python3
"""Read the counters files of vufsd (--stats) and vhost-blk-bridge (--stats).

Both daemons write lines of three shapes, which this module reads by field
name so that no reader depends on column positions:

    seq 12                       -> seq = 12
    op WRITE 316521              -> op.WRITE = 316521
    vq 1 requests 9 bytes_in 0   -> vq.1.requests = 9, vq.1.bytes_in = 0

As a command:

    statsfile.py FILE KEY...     print each KEY's value, one per line;
                                 a KEY may use * for one dotted part
                                 (vq.*.requests), and then prints the sum
    statsfile.py FILE            print every key=value

A KEY that is missing is an error (exit 1), never an empty string.
"""
import fnmatch
import sys


def parse(text):
    """Return {dotted key: int} for the counters in TEXT; ValueError if a
    line is not one of the three shapes or a value is not an integer."""
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        f = line.split()
        if not f:
            continue
        if len(f) == 2:
            out[f[0]] = _num(f[1])
        elif len(f) == 3:
            out["%s.%s" % (f[0], f[1])] = _num(f[2])
        elif len(f) % 2 == 0:
            prefix = "%s.%s." % (f[0], f[1])
            for i in range(2, len(f), 2):
                out[prefix + f[i]] = _num(f[i + 1])
        else:
            raise ValueError("line %d: cannot read %r" % (n, line))
    return out


def nested(text):
    """The counters of TEXT grouped the way the lines group them:
    {"seq": 12, "op": {"WRITE": 3}, "vq": {1: {"requests": 9, ...}}}."""
    out = {}
    for key, value in parse(text).items():
        parts = key.split(".")
        if len(parts) == 1:
            out[key] = value
        elif len(parts) == 2:
            out.setdefault(parts[0], {})[parts[1]] = value
        else:
            rec = out.setdefault(parts[0], {})
            idx = int(parts[1]) if parts[1].isdigit() else parts[1]
            rec.setdefault(idx, {})[parts[2]] = value
    return out


def load(path):
    """parse() the file at PATH."""
    with open(path) as f:
        return parse(f.read())


def get(stats, key):
    """The value of KEY; with a * in it, the sum over the matching keys."""
    if "*" not in key:
        if key not in stats:
            raise KeyError(key)
        return stats[key]
    hits = [k for k in stats if fnmatch.fnmatchcase(k, key)
            and k.count(".") == key.count(".")]
    if not hits:
        raise KeyError(key)
    return sum(stats[k] for k in hits)


def _num(s):
    """Every counter is a decimal integer; anything else means the file was
    read while it was being rewritten, or is not a counters file."""
    return int(s)


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    try:
        stats = load(argv[1])
    except (OSError, ValueError) as e:
        print("statsfile: %s: %s" % (argv[1], e), file=sys.stderr)
        return 1
    if len(argv) == 2:
        for k, v in stats.items():
            print("%s=%s" % (k, v))
        return 0
    for key in argv[2:]:
        try:
            print(get(stats, key))
        except KeyError:
            print("statsfile: %s has no %s" % (argv[1], key), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
