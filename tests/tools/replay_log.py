#!/usr/bin/env python3
"""Power loss at every flush point: replay a write log and check the disk.

    replay_log.py LOG --size BYTES [--random N] [--seed S] [--work DIR]

LOG is what QEMU's blklogwrites driver recorded under a guest (vm/vm.sh
--disk file:...,logwrites), in dm-log-writes' format
(Documentation/admin-guide/device-mapper/log-writes.rst in Linux):

  - log sector 0: the super block, little-endian
        u64 magic (0x6a736677736872), u64 version (1), u64 nr_entries,
        u32 sectorsize;
  - from log sector 1, nr_entries entries: one log sector holding
        u64 sector, u64 nr_sectors, u64 flags, u64 data_len
    (sector and nr_sectors in log sectors; flags FLUSH 1, FUA 2,
    DISCARD 4, MARK 8), then, unless it is a discard, nr_sectors log
    sectors of the data written.

An entry is logged when its request completes, so the log is in
completion order, and a flush's entry follows every write the guest saw
complete before it sent the flush.

The crash model. Power lost right after entry p leaves on the disk
everything up to the last flush at or before p, and any subset of the
writes after that flush (a write cache keeps no order). The tool checks
the state at every flush entry (nothing after it kept), at N random points
between flushes (a random subset of the writes since the last flush
kept), and at the end of the log.

What must hold. The guest workload (tests/guest/crash-workload.sh) writes
an ext4 file system at the start of the disk and, each time an fsync of a
file has returned, a claim in a 4 KiB block past the file system: the
bytes "VSTORMARK1 " and a JSON object, {"file": NAME, "sha256": HEX} or
{"begin": true} once the file system is made and mounted. A claim's entry
is after the flush that made its file durable. So at a point p after the
begin claim:

  - the journal replays and e2fsck -fn finds nothing (exit 0);
  - each file claimed before p has the content of its last claim before
    p, or of a later one (a replacement made durable after that claim
    may already be there).

A raw workload (no file system: {"begin": true, "raw": true}) claims
byte ranges of the disk instead, once a flush after their writes has
returned: {"region": NAME, "offset": BYTES, "len": BYTES, "sha256": HEX}.
At p, each region claimed before p holds the bytes of its last claim
before p, or of a later claim of that region (each claim with its own
range); e2fsck is not run.

Prints a line per failing point and a summary, and exits 1 if any point
failed (2 for a log it cannot read).

--first-failure stops at the first point that fails (the summary then
counts the points checked so far).

--mutate checks the checker: it replays as if the disk had lost every
write between the first and the second file claims (the second file's
data and the metadata written with it), or, in a raw log, between the
begin claim and the first region claim (the first round's writes), so
some point must fail.
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

MAGIC = 0x6a736677736872
FLUSH, FUA, DISCARD, MARK = 1, 2, 4, 8
SUPER = struct.Struct("<QQQI")
ENTRY = struct.Struct("<QQQQ")
CLAIM = b"VSTORMARK1 "
CLAIM_BLOCK = 4096


class Entry:
    __slots__ = ("index", "sector", "nr", "flags", "data_at")

    def __init__(self, index, sector, nr, flags, data_at):
        self.index, self.sector, self.nr = index, sector, nr
        self.flags, self.data_at = flags, data_at


def read_log(path):
    """(sector size, [Entry]) of the log at path."""
    with open(path, "rb") as f:
        head = f.read(SUPER.size)
        if len(head) < SUPER.size:
            raise ValueError(f"{path}: too short for a super block")
        magic, version, n, ssize = SUPER.unpack(head)
        if magic != MAGIC or version != 1:
            raise ValueError(f"{path}: not a write log (magic {magic:#x}, "
                             f"version {version})")
        if ssize < ENTRY.size or ssize & (ssize - 1):
            raise ValueError(f"{path}: sector size {ssize}")
        size = os.fstat(f.fileno()).st_size
        entries, at = [], ssize
        for i in range(n):
            f.seek(at)
            raw = f.read(ENTRY.size)
            if len(raw) < ENTRY.size:
                raise ValueError(f"{path}: entry {i} of {n} past the end")
            sector, nr, flags, _ = ENTRY.unpack(raw)
            if flags & ~(FLUSH | FUA | DISCARD | MARK):
                raise ValueError(f"{path}: entry {i}: flags {flags:#x}")
            data = at + ssize
            at = data + (0 if flags & DISCARD else nr * ssize)
            if at > size:
                raise ValueError(f"{path}: entry {i} data past the end")
            entries.append(Entry(i, sector, nr, flags, data))
    return ssize, entries


def claims(log, ssize, entries):
    """[(entry index, claim dict)] in log order."""
    out = []
    with open(log, "rb") as f:
        for e in entries:
            if e.flags & DISCARD or not e.nr:
                continue
            start = e.sector * ssize
            first = -start % CLAIM_BLOCK
            for off in range(first, e.nr * ssize - len(CLAIM), CLAIM_BLOCK):
                f.seek(e.data_at + off)
                blk = f.read(CLAIM_BLOCK)
                if blk.startswith(CLAIM):
                    text = blk[len(CLAIM):].split(b"\n", 1)[0]
                    out.append((e.index, json.loads(text)))
    return out


def apply(log, img, ssize, entries):
    """Write these entries' data into the image file img (open r+b)."""
    for e in entries:
        if e.flags & DISCARD or not e.nr:
            continue
        log.seek(e.data_at)
        img.seek(e.sector * ssize)
        img.write(log.read(e.nr * ssize))


def fsck(scratch):
    """Problems e2fsck finds in the image file scratch: [] if none."""
    p = subprocess.run(["e2fsck", "-fy", "-E", "journal_only", scratch],
                       capture_output=True, text=True)
    if p.returncode > 1:
        return [f"journal replay: e2fsck exit {p.returncode}: "
                f"{p.stdout.strip()[-200:]}"]
    p = subprocess.run(["e2fsck", "-fn", scratch], capture_output=True,
                       text=True)
    if p.returncode != 0:
        return [f"e2fsck -fn exit {p.returncode}: "
                f"{' | '.join(p.stdout.strip().splitlines()[-4:])}"]
    return []


def check(state, work, claimed, raw):
    """Problems of the disk image at state: [] if none. claimed maps a
    file name to the set of sha256s it may have, or ("region", NAME) to
    the set of (offset, len, sha256) it may hold."""
    if raw:
        bad = []
        with open(state, "rb") as img:
            for (_, name), ok in claimed.items():
                got = []
                for off, length, sha in sorted(ok):
                    img.seek(off)
                    got.append(hashlib.sha256(img.read(length)).hexdigest())
                    if got[-1] == sha:
                        break
                else:
                    bad.append(f"region {name}: sha256 {got[0][:12]}, "
                               f"claimed durable")
        return bad
    scratch = os.path.join(work, "check.img")
    shutil.copyfile(state, scratch)
    bad = fsck(scratch)
    if not claimed or bad and bad[0].startswith("journal replay"):
        return bad
    out = os.path.join(work, "files")
    shutil.rmtree(out, ignore_errors=True)
    os.mkdir(out)
    cmds = os.path.join(work, "debugfs.cmd")
    with open(cmds, "w") as f:
        for name in claimed:
            f.write(f'dump "/{name}" "{out}/{name}"\n')
    subprocess.run(["debugfs", "-f", cmds, scratch], capture_output=True)
    for name, ok in claimed.items():
        try:
            with open(os.path.join(out, name), "rb") as f:
                got = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            got = None
        if got not in ok:
            bad.append(f"{name}: {'missing' if got is None else 'sha256 ' + got[:12]}, "
                       f"claimed durable")
    return bad


def claim_key(c):
    """What a content claim is about, and what it says is there: (key,
    value) for the claimed dict of check(), or None for other claims."""
    if "file" in c:
        return c["file"], c["sha256"]
    if "region" in c:
        return ("region", c["region"]), (c["offset"], c["len"], c["sha256"])
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("--size", type=int, required=True, help="disk bytes")
    ap.add_argument("--random", type=int, default=20,
                    help="random points between flushes (default 20)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work", help="scratch directory (default: a new one)")
    ap.add_argument("--mutate", action="store_true",
                    help="lose the writes between the first two file claims")
    ap.add_argument("--first-failure", action="store_true",
                    help="stop at the first point that fails")
    a = ap.parse_args()
    try:
        ssize, entries = read_log(a.log)
        marks = claims(a.log, ssize, entries)
    except (ValueError, OSError, json.JSONDecodeError) as e:
        print(f"replay_log: {e}", file=sys.stderr)
        return 2
    begin = next((i for i, c in marks if c.get("begin")), None)
    raw = any(c.get("raw") for _, c in marks if c.get("begin"))
    flushes = [e.index for e in entries if e.flags & FLUSH]
    if begin is None:
        print("replay_log: no begin claim in the log", file=sys.stderr)
        return 2
    if a.mutate:
        # Raw logs: the first round's writes, between the begin claim and
        # the first region claim (a round may claim several regions at
        # once, with no write between its claims).
        files = [i for i, c in marks
                 if claim_key(c) or raw and c.get("begin")]
        if len(files) < 2:
            print("replay_log: --mutate needs two file or region claims",
                  file=sys.stderr)
            return 2
        lost = set(range(files[0] + 1, files[1]))
        entries = [e if e.index not in lost or e.flags & FLUSH else
                   Entry(e.index, e.sector, 0, e.flags, e.data_at)
                   for e in entries]
    rng = random.Random(a.seed)
    # Points: (entry index p, last flush at or before p or -1).
    points = [(f, f) for f in flushes if f > begin]
    between = [i for i in range(begin + 1, len(entries))
               if not entries[i].flags & FLUSH]
    for p in sorted(rng.sample(between, min(a.random, len(between)))):
        points.append((p, max([f for f in flushes if f <= p], default=-1)))
    points.append((len(entries) - 1,
                   max([f for f in flushes], default=-1)))
    points = sorted(set(points))
    work = a.work or tempfile.mkdtemp(prefix="replay-")
    os.makedirs(work, exist_ok=True)
    base = os.path.join(work, "base.img")
    state = os.path.join(work, "state.img")
    with open(base, "wb") as f:
        f.truncate(a.size)
    done, failed, at_flushes = 0, 0, 0
    applied = -1        # base holds entries[0..applied]
    with open(a.log, "rb") as log, open(base, "r+b") as img:
        for p, last_flush in points:
            if last_flush > applied:
                apply(log, img, ssize, entries[applied + 1:last_flush + 1])
                applied = last_flush
            img.flush()
            shutil.copyfile(base, state)
            kept = []
            if p > applied:
                kept = [e for e in entries[applied + 1:p + 1]
                        if rng.random() < 0.5]
                with open(state, "r+b") as s:
                    apply(log, s, ssize, kept)
            claimed = {}
            for i, c in marks:
                kv = claim_key(c)
                if i > p or not kv:
                    continue
                claimed[kv[0]] = {kv[1]}
            for i, c in marks:     # later replacements may be there too
                kv = claim_key(c)
                if i > p and kv and kv[0] in claimed:
                    claimed[kv[0]].add(kv[1])
            bad = check(state, work, claimed, raw)
            done += 1
            at_flushes += p == last_flush
            if bad:
                failed += 1
                print(f"point {p} (last flush {last_flush}, {len(kept)} "
                      f"later writes kept): " + "; ".join(bad[:3]))
                if a.first_failure:
                    break
    nfiles = len({claim_key(c)[0] for _, c in marks if claim_key(c)})
    print(f"replay_log: {len(entries)} entries, {len(flushes)} flushes, "
          f"{nfiles} {'regions' if raw else 'files'} claimed durable; "
          f"{done} points checked "
          f"({at_flushes} at flushes), "
          f"{failed} failed")
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
