#!/usr/bin/env python3
"""Check tests/tools/replay_log.py against a write log made on the host.

    replay_log_selftest.py WORKDIR

Builds a 64 MiB disk image the way the crash workload would leave it, but
with e2fsprogs instead of a guest: mkfs.ext4 (no journal: debugfs writes
in place), then five files written with debugfs -w. Each step's changed
4 KiB blocks become write entries of a log in blklogwrites' format,
followed by a flush and the claim block the workload would write. Then:
the replay must pass at every flush; with --mutate (the second file's
writes lost) it must fail; and a log whose magic is wrong must be refused
(exit 2). The same for a raw log (region claims, no file system, as the
passthrough workload leaves): six ranges of random data in three regions,
each written, flushed and claimed. Prints what it checked; exits non-zero
on the first surprise.
"""
import hashlib
import json
import os
import struct
import subprocess
import sys

SIZE, FS_MB, SSIZE = 64 << 20, 48, 512
TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                    "replay_log.py")


def write_log(path, entries):
    """A blklogwrites log of entries (sector, nr_sectors, flags, data)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<QQQI", 0x6a736677736872, 1, len(entries),
                            SSIZE).ljust(SSIZE, b"\0"))
        for sector, nr, flags, data in entries:
            f.write(struct.pack("<QQQQ", sector, nr, flags, 0)
                    .ljust(SSIZE, b"\0") + data)


def claim_entry(n, obj):
    """The entry of claim block n saying obj."""
    blk = b"VSTORMARK1 " + json.dumps(obj).encode() + b"\n"
    return ((FS_MB * 256 + n) * 8, 8, 0, blk.ljust(4096, b"\0"))


def run(what, cmd, want):
    """Run the tool; True if it exited want."""
    p = subprocess.run(cmd, capture_output=True, text=True)
    last = (p.stdout.strip().splitlines() or [p.stderr.strip()])[-1]
    print(f"{what}: exit {p.returncode} (want {want}): {last}")
    if p.returncode != want:
        print(p.stdout + p.stderr)
    return p.returncode == want


def raw(work):
    """The raw log: True if the tool passed it as made and failed it with
    the first range's writes lost."""
    log = os.path.join(work, "raw.log")
    entries = [claim_entry(0, {"begin": True, "raw": True})]
    for i in range(6):
        off, data = (i % 3 << 20) + i * 4096, os.urandom(8192)
        entries.append((off // SSIZE, len(data) // SSIZE, 0, data))
        entries.append((0, 0, 1, b""))
        entries.append(claim_entry(i + 1, {
            "region": f"r{i % 3}", "offset": off, "len": len(data),
            "sha256": hashlib.sha256(data).hexdigest()}))
    write_log(log, entries)
    base = [sys.executable, TOOL, log, "--size", str(SIZE), "--random", "4"]
    return (run("raw: the log as made", base, 0) and
            run("raw: the first range's writes lost", base + ["--mutate"], 1))


def main(work):
    os.makedirs(work, exist_ok=True)
    img, src = os.path.join(work, "img"), os.path.join(work, "src")
    log = os.path.join(work, "disk.log")
    entries = []        # (sector, nr_sectors, flags, data)
    claims = 0

    def changed(before):
        with open(img, "rb") as f:
            now = f.read()
        for off in range(0, len(now), 4096):
            if now[off:off + 4096] != before[off:off + 4096]:
                entries.append((off // SSIZE, 4096 // SSIZE, 0,
                                now[off:off + 4096]))
        entries.append((0, 0, 1, b""))          # a flush
        return now

    def claim(obj):
        nonlocal claims
        entries.append(claim_entry(claims, obj))
        claims += 1

    with open(img, "wb") as f:
        f.truncate(SIZE)
    before = bytes(SIZE)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-b",
                    "4096", img, f"{FS_MB}M"], check=True)
    before = changed(before)
    claim({"begin": True})
    for i in range(1, 6):
        data = os.urandom(4096 * 3 * i)
        with open(src, "wb") as f:
            f.write(data)
        subprocess.run(["debugfs", "-w", "-R", f"write {src} f{i}", img],
                       check=True, capture_output=True)
        before = changed(before)
        claim({"file": f"f{i}", "sha256": hashlib.sha256(data).hexdigest()})
    write_log(log, entries)
    base = [sys.executable, TOOL, log, "--size", str(SIZE), "--random", "0"]
    if not (run("the log as made", base, 0) and
            run("the second file's writes lost", base + ["--mutate"], 1)):
        return 1
    with open(log, "r+b") as f:
        f.write(b"\0" * 8)
    if not run("a log without the magic", base, 2):
        return 1
    return 0 if raw(work) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
