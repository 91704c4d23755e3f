#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""insnranges: write insncount's ranges file from the running kernel's
/proc/kallsyms (run in the guest, as root: others see zero addresses).

  insnranges.py [--obj DIR] OUT NAME=SPEC ...

SPEC is one of
  mod:MODULE            the module's text: every text symbol kallsyms lists
                        for [MODULE]
  dir:PATH[,PATH...]    the built-in code of those source directories of the
                        kernel built in DIR (--obj, the kernel's object
                        directory): the text symbols that nm finds in
                        DIR/PATH/built-in.a, e.g. dir:block,io_uring
  sym:GLOB[,GLOB...]    text symbols of the kernel or of modules whose names
                        match a shell glob, e.g. sym:blk_mq_*,__blk_mq_*
  entry:SYM[,SYM...]    not a range: an entry counter at the address of each
                        text symbol of those names (kernel or modules), the
                        times it was called or jumped to, e.g.
                        entry:blk_mq_start_request counts requests issued
A static function whose name another file uses too counts for every
address kallsyms gives that name. A symbol
runs to the next symbol's address. A symbol that two NAMEs match goes to
the first. Adjacent symbols of one NAME become one range. Then run
`insnmark --reload` to have the plugin load OUT.
"""
import fnmatch
import os
import re
import subprocess
import sys

NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,31}$")


def dir_symbols(obj, paths):
    names = set()
    for p in paths:
        archive = os.path.join(obj, p, "built-in.a")
        if not os.path.exists(archive):
            sys.exit(f"insnranges: no {archive} (is --obj the kernel's object directory?)")
        out = subprocess.run(["nm", "--defined-only", "-f", "posix", archive],
                             capture_output=True, text=True)
        if out.returncode:
            sys.exit(f"insnranges: nm {archive}: {out.stderr.strip()}")
        for line in out.stdout.splitlines():
            f = line.split()
            if len(f) >= 2 and f[1] in ("t", "T", "w", "W"):
                names.add(f[0])
    if not names:
        sys.exit(f"insnranges: no text symbols in {', '.join(paths)}")
    return names


def parse_specs(args, obj):
    """(specs, entries): [(NAME, match(sym, mod))] for the ranges and
    [(NAME, {SYM, ...})] for the entry counters."""
    specs, entries = [], []
    for a in args:
        name, sep, spec = a.partition("=")
        if not sep or not NAME_RE.match(name):
            sys.exit(f"insnranges: '{a}': want NAME=SPEC, NAME of at most 31 of [A-Za-z0-9_.-]")
        kind, sep, what = spec.partition(":")
        if kind == "mod" and what:
            specs.append((name, lambda sym, mod, m=what: mod == m))
        elif kind == "dir" and what:
            if not obj:
                sys.exit(f"insnranges: '{a}' needs --obj DIR")
            names = dir_symbols(obj, what.split(","))
            specs.append((name, lambda sym, mod, n=names: not mod and sym in n))
        elif kind == "entry" and what:
            entries.append((name, set(what.split(","))))
        elif kind == "sym" and what:
            globs = what.split(",")
            specs.append((name, lambda sym, mod, g=globs: any(fnmatch.fnmatchcase(sym, x) for x in g)))
        else:
            sys.exit(f"insnranges: '{a}': SPEC is mod:MODULE, dir:PATH[,PATH...], sym:GLOB[,GLOB...] or entry:SYM[,SYM...]")
    if not specs and not entries:
        sys.exit("usage: insnranges.py [--obj DIR] OUT NAME=SPEC ...")
    names = [n for n, _ in specs + entries]
    if len(set(names)) > 32:
        sys.exit("insnranges: insncount counts at most 32 names")
    both = {n for n, _ in specs} & {n for n, _ in entries}
    if both:
        sys.exit(f"insnranges: {', '.join(sorted(both))}: a NAME counts ranges or entries, not both")
    return specs, entries


def main():
    args, obj = sys.argv[1:], None
    if args[:1] == ["--obj"] and len(args) > 1:
        obj, args = args[1], args[2:]
    if len(args) < 2:
        sys.exit("usage: insnranges.py [--obj DIR] OUT NAME=SPEC ...")
    out, (specs, entries) = args[0], parse_specs(args[1:], obj)
    syms = []
    with open("/proc/kallsyms") as f:
        for line in f:
            parts = line.split()
            addr, typ, sym = int(parts[0], 16), parts[1], parts[2]
            mod = parts[3].strip("[]") if len(parts) > 3 else ""
            syms.append((addr, typ, sym, mod))
    if all(a == 0 for a, *_ in syms):
        sys.exit("insnranges: /proc/kallsyms shows no addresses (run as root; kptr_restrict)")
    syms.sort()
    # Where each symbol ends: the next higher address. The last one has no
    # end here, and a module's last symbol is followed by another module's
    # or by nothing: those end at their module's text end when known.
    nxt, following = [None] * len(syms), None
    for i in range(len(syms) - 1, -1, -1):
        nxt[i] = following
        if i and syms[i - 1][0] < syms[i][0]:
            following = syms[i][0]
    text_end = {}
    for addr, typ, sym, mod in syms:
        if mod and typ in "tTwW":
            text_end[mod] = max(text_end.get(mod, 0), addr)
    ranges, dropped = [], []
    for i, (addr, typ, sym, mod) in enumerate(syms):
        if typ not in "tTwW":
            continue
        name = next((n for n, match in specs if match(sym, mod)), None)
        if name is None:
            continue
        end = nxt[i]
        if end is None or (mod and addr == text_end[mod]):
            # A module's last function: it ends where the module's text
            # does, which kallsyms does not say; its size is unknown.
            dropped.append(sym)
            continue
        if ranges and ranges[-1][2] == name and ranges[-1][1] == addr:
            ranges[-1][1] = end
        elif ranges and ranges[-1][1] > addr:
            continue  # an alias of the symbol before, already covered
        else:
            ranges.append([addr, end, name])
    if dropped:
        print(f"insnranges: the last function of its text, size unknown, left out: {', '.join(dropped)}",
              file=sys.stderr)
    missing = {n for n, _ in specs} - {r[2] for r in ranges}
    if missing:
        sys.exit(f"insnranges: nothing in /proc/kallsyms for {', '.join(sorted(missing))}")
    # Entry counters: every address of each symbol (an alias at an address
    # already taken counts there once, for the first NAME).
    points, seen = [], set()
    for name, want in entries:
        found = set()
        for addr, typ, sym, mod in syms:
            if typ in "tTwW" and sym in want:
                found.add(sym)
                if addr not in seen:
                    seen.add(addr)
                    points.append((addr, name))
        if want - found:
            sys.exit(f"insnranges: no text symbol {', '.join(sorted(want - found))} in /proc/kallsyms")
    with open(out + ".tmp", "w") as f:
        for start, end, name in ranges:
            f.write(f"{start:x} {end:x} {name}\n")
        for addr, name in points:
            f.write(f"@{addr:x} {name}\n")
    os.replace(out + ".tmp", out)
    print(f"{len(ranges)} ranges for {len(specs)} names, {len(points)} entry counters for "
          f"{len(entries)} names in {out}")


if __name__ == "__main__":
    main()
