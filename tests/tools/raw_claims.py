#!/usr/bin/python3
"""The raw crash workload of a second-level guest (tests/guest/inner-blk.sh
crash, for tests/host/crash.sh): one process, since every program started
under TCG inside TCG costs a good part of a second.

    raw_claims.py DEV ROUNDS BLOCK [--flush]

Writes a raw begin claim at 4 KiB block BLOCK of DEV, then ROUNDS rounds
(at most 16): 4 concurrent O_DIRECT writes of 4-64 KiB of random data, one
request each from a thread of its own, at 64 KiB * (round - 1) in each
1 MiB region, so that no byte is written twice; with --flush an fsync of
the disk (a FLUSH) after the four; then a claim of each range, under a
name of its own (rK.I), in the next claim blocks, written with O_DIRECT
and no flush (the format tests/tools/replay_log.py reads, as
tests/guest/crash-workload.sh writes it). Exits non-zero, saying why, if any I/O fails.
"""
import hashlib
import json
import mmap
import os
import random
import sys
import threading

BLOCK = 4096


def pwrite_direct(fd, data, off):
    """One O_DIRECT write of DATA at OFF, from page-aligned memory."""
    buf = mmap.mmap(-1, len(data))
    buf.write(data)
    try:
        if os.pwrite(fd, buf, off) != len(data):
            raise OSError(f"short write at {off}")
    finally:
        buf.close()


def main():
    args = [a for a in sys.argv[1:] if a != "--flush"]
    flush = "--flush" in sys.argv[1:]
    if len(args) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    dev, rounds, claim = args[0], int(args[1]), int(args[2])
    if not 1 <= rounds <= 16:
        sys.exit(f"raw_claims: 1 to 16 rounds, not {rounds}")
    fd = os.open(dev, os.O_RDWR | os.O_DIRECT)

    def mark(obj):
        nonlocal claim
        blk = ("VSTORMARK1 " + json.dumps(obj) + "\n").encode()
        pwrite_direct(fd, blk.ljust(BLOCK, b"\0"), claim * BLOCK)
        claim += 1

    mark({"begin": True, "raw": True})
    errors = []

    def write(data, off):
        try:
            pwrite_direct(fd, data, off)
        except OSError as e:
            errors.append(f"write of {len(data)} bytes at {off}: {e}")

    for i in range(1, rounds + 1):
        ranges, threads = [], []
        for k in range(4):
            off = (k << 20) + (i - 1) * 65536
            data = os.urandom(random.randint(1, 16) * BLOCK)
            ranges.append((f"r{k}.{i}", off, len(data), hashlib.sha256(data).hexdigest()))
            threads.append(threading.Thread(target=write, args=(data, off)))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            sys.exit(f"raw_claims: {dev}: round {i}: {errors[0]}")
        if flush:
            os.fsync(fd)
        for name, off, length, sha in ranges:
            mark({"region": name, "offset": off, "len": length, "sha256": sha})
    os.close(fd)
    print(f"{rounds} rounds of 4 writes, {4 * rounds + 1} claims")


if __name__ == "__main__":
    main()
