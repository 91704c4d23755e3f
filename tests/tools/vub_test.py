#!/usr/bin/env python3
"""Test a vhost-user-blk backend from the VMM's side, without QEMU.

Usage: vub_test.py --socket PATH [--stats FILE --pid PID]
                   [--backend-size BYTES] [--backend-file PATH]
                   [--expect-serial STR] [--expect-seg-max N]
                   [--expect-queues N] [--expect-workers one|per-queue]
                   [--scenario NAME ...] [--timeout S]

The caller starts the backend (vhost-blk-bridge, or qemu-storage-daemon's
vhost-user-blk export) on PATH with a writable backend of at least 24 MiB;
each scenario writes its own 2 MiB areas, with patterns that name this run,
the sector and a generation, so stale data never verifies.

Scenarios (default: all but readonly):
  io          two queues, many requests in flight, every request type,
              indirect descriptors, 1 MiB requests, with and without
              EVENT_IDX; with --stats, the kernel counters moved and the
              daemon's message count did not
  restart     stop (ENABLE 0 + GET_VRING_BASE) and restart from the bases,
              also across the 16-bit index wrap
  disconnect  close the socket with I/O in flight, and SIGKILL a frontend
              with I/O in flight; acknowledged data survives
  malformed   vhost-blk-bridge's error contract, case by case
  readonly    for a backend exported read-only: RO offered, writes fail
  reset       RESET_DEVICE and RESET_OWNER between requests, then set up
              again on the same connection and do I/O
  reset-busy  the same with 64 writes in flight per queue at the reset
              (qemu-storage-daemon 7.2 fails this one: it completes an old
              request into the new ring, then aborts)
  failing     for a backend whose sectors --bad-sector S .. S+7 fail (a
              null_blk with badblocks): I/O there gets IOERR, the rest of
              the disk keeps working, the kernel counts the errors
  crash       for a backend whose writes QEMU logs (tests/host/crash.sh):
              --crash-rounds rounds of 8 writes in flight over two queues,
              each of 4-64 KiB in a 1 MiB region of its own, made durable
              as the device promises (with VIRTIO_BLK_F_FLUSH a FLUSH, then
              without it, write-through, the write's completion), each
              then claimed for tests/tools/replay_log.py in the 4 KiB
              blocks from --claim-block on, after a {"begin": true, "raw":
              true} claim

--stats FILE and --pid PID are vhost-blk-bridge's: the stats file it
rewrites on SIGUSR1, and its pid (liveness and descriptor leak checks).
Prints KTAP; exits 1 if any check failed.
"""
import argparse
import hashlib
import json
import mmap
import os
import random
import select
import signal
import struct
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vhost_user as vu  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "tools"))
import statsfile  # noqa: E402
from vhost_user import (  # noqa: E402
    KiB, MiB, Req, SECTOR, S_IOERR, S_OK, S_UNSUPP, T_DISCARD, T_IN, T_OUT,
    T_WRITE_ZEROES, bit, pattern, first_mismatch, status_name)

AREA_SECTORS = 2 * MiB // SECTOR
AREAS = (  # each scenario part gets one 2 MiB area
    "io", "io-indirect", "io-1mib", "io-discard", "io-noevidx", "restart",
    "disconnect", "disconnect-kill", "disconnect-scratch", "reset",
    "reset-scratch", "malformed")
MIN_BACKEND = len(AREAS) * AREA_SECTORS * SECTOR
SCENARIOS = ("io", "restart", "disconnect", "malformed", "readonly", "reset",
             "reset-busy", "failing", "crash")
DEFAULT_SCENARIOS = ("io", "restart", "disconnect", "malformed", "reset",
                     "reset-busy")


class Stats:
    """vhost-blk-bridge's stats file, refreshed on demand with SIGUSR1."""

    def __init__(self, path, pid, timeout):
        self.path, self.pid, self.timeout = path, pid, timeout

    def parse(self):
        try:
            with open(self.path) as f:
                text = f.read()
        except FileNotFoundError:
            return None
        out = statsfile.nested(text)
        out["vrings"] = out.pop("vring", {})
        return out

    def snapshot(self):
        old = self.parse()
        old_seq = None if old is None else old.get("seq")
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            now = self.parse()
            if now is not None and now.get("seq") != old_seq:
                return now
            time.sleep(0.01)
        raise TimeoutError(f"{self.path}: seq still {old_seq} "
                           f"{self.timeout} s after SIGUSR1")


class DaemonDied(Exception):
    pass


def alive(pid):
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def open_fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


class Ctx:
    def __init__(self, args, tap):
        self.args, self.tap = args, tap
        self.seed = int.from_bytes(os.urandom(4), "little")
        self.stats = (Stats(args.stats, args.pid, args.timeout)
                      if args.stats and args.pid else None)

    def device(self, queues=2, queue_size=128, **kw):
        return vu.BlkDevice(self.args.socket, queues=queues,
                            queue_size=queue_size, timeout=self.args.timeout,
                            **kw)

    def area(self, name):
        return AREAS.index(name) * AREA_SECTORS

    def pat(self, sector, nbytes, gen):
        return pattern(self.seed, sector, nbytes, gen)

    def snapshot(self):
        return self.stats.snapshot() if self.stats else None

    def check_alive(self, what):
        """Checked only with --pid; a dead daemon ends the run."""
        if self.args.pid and not self.tap.ok(alive(self.args.pid),
                                             f"{what}: daemon still running"):
            raise DaemonDied(f"pid {self.args.pid} is gone")

    def check_serves(self, what):
        """A new connection answers GET_FEATURES."""
        try:
            with vu.Connection(self.args.socket, self.args.timeout) as c:
                features = c.get_features()
            self.tap.ok(features != 0,
                        f"{what}: a new connection is served "
                        f"(features {features:#x})")
        except Exception as e:
            self.tap.ok(False, f"{what}: a new connection is served ({e!r})")


# --- shared I/O steps --------------------------------------------------------

def write_reqs(ctx, dev, sectors_by_queue, nbytes, gen, nseg=1):
    reqs = []
    for q, sectors in sectors_by_queue.items():
        for s in sectors:
            r = dev.request(T_OUT, s, nbytes, nseg, ctx.pat(s, nbytes, gen))
            r.queue = q
            reqs.append(r)
    return reqs


def read_reqs(dev, sectors_by_queue, nbytes, nseg=1):
    reqs = []
    for q, sectors in sectors_by_queue.items():
        for s in sectors:
            r = dev.request(T_IN, s, nbytes, nseg)
            r.queue = q
            reqs.append(r)
    return reqs


def all_ok(reqs):
    """(every status OK, a description of the first that is not)."""
    for r in reqs:
        if r.status != S_OK:
            return False, (f"sector {r.sector} on queue {r.queue}: "
                           f"{status_name(r.status)}")
        if r.used_len > r.writable():
            return False, (f"sector {r.sector} on queue {r.queue}: used "
                           f"length {r.used_len} > {r.writable()} writable")
    return True, f"{len(reqs)} requests OK"


def verify_reads(ctx, reqs, gen_of):
    """Reads carry what generation gen_of(sector) wrote."""
    good, msg = all_ok(reqs)
    if not good:
        return False, f"read of {msg}"
    for r in reqs:
        bad = first_mismatch(r.data(), ctx.pat(r.sector, r.nbytes,
                                               gen_of(r.sector)))
        if bad:
            return False, f"sector {r.sector} queue {r.queue}: {bad}"
    return True, f"{len(reqs)} reads verified"


def release(reqs):
    for r in reqs:
        r.release()


def write_verify(ctx, dev, what, sectors_by_queue, nbytes, gen, nseg=1,
                 indirect=False, depth=None):
    """Write on each queue with everything in flight, read back on the
    other queue, check. Returns success."""
    t = ctx.tap
    ws = write_reqs(ctx, dev, sectors_by_queue, nbytes, gen, nseg)
    dev.run(ws, indirect, depth)
    good, msg = all_ok(ws)
    release(ws)
    ok = t.ok(good, f"{what}: writes ({msg})")
    nq = dev.nqueues
    back = {(q + 1) % nq: s for q, s in sectors_by_queue.items()}
    rs = read_reqs(dev, back, nbytes, max(1, nseg // 2))
    dev.run(rs, indirect, depth)
    good, msg = verify_reads(ctx, rs, lambda s: gen)
    release(rs)
    return t.ok(good, f"{what}: read back and verified ({msg})") and ok


def spread(base, queues, per_queue, stride):
    """Distinct sectors: queue q gets per_queue of them, stride apart."""
    return {q: [base + (q * per_queue + i) * stride for i in range(per_queue)]
            for q in range(queues)}


def pick_segments(dev, nbytes):
    """The most segments (power of two, >= 4 KiB each) a request of nbytes
    may have under seg_max, size_max and the ring size."""
    cfg = dev.config
    limit = min(256, dev.queue_size - 2)
    if cfg and dev.has(vu.F_BLK_SEG_MAX) and cfg.seg_max:
        limit = min(limit, cfg.seg_max)
    nseg = 1
    while nseg * 2 <= limit and nbytes // (nseg * 2) >= 4096:
        nseg *= 2
    if cfg and dev.has(vu.F_BLK_SIZE_MAX) and cfg.size_max:
        if nbytes // nseg > cfg.size_max:
            return None
    return nseg


# --- io ----------------------------------------------------------------------

def check_config(ctx, dev):
    t, a, cfg = ctx.tap, ctx.args, dev.config
    t.diag(f"offered features {dev.offered:#x}, negotiated {dev.features:#x}; "
           f"protocol offered {dev.offered_protocol:#x}, negotiated "
           f"{dev.protocol:#x}; GET_QUEUE_NUM {dev.queue_num}")
    for name, b in (("MQ", vu.PROTO_MQ), ("REPLY_ACK", vu.PROTO_REPLY_ACK),
                    ("CONFIG", vu.PROTO_CONFIG)):
        t.ok(bit(dev.protocol, b), f"io: protocol feature {name} negotiated")
    if not t.ok(cfg is not None, "io: GET_CONFIG returned the config space"):
        return False
    t.diag(repr(cfg))
    if a.backend_size is not None:
        t.ok(cfg.capacity * SECTOR == a.backend_size,
             f"io: capacity {cfg.capacity} sectors x 512 == backend size "
             f"{a.backend_size}")
    big = t.ok(cfg.capacity * SECTOR >= MIN_BACKEND,
               f"io: capacity {cfg.capacity * SECTOR} bytes holds the test "
               f"areas ({MIN_BACKEND})")
    if dev.has(vu.F_BLK_MQ):
        t.ok(cfg.num_queues == dev.queue_num,
             f"io: config num_queues {cfg.num_queues} == GET_QUEUE_NUM "
             f"{dev.queue_num}")
    if a.expect_queues is not None:
        t.ok(dev.queue_num == a.expect_queues,
             f"io: GET_QUEUE_NUM {dev.queue_num} == --expect-queues "
             f"{a.expect_queues}")
    t.ok(dev.has(vu.F_BLK_SEG_MAX) and cfg.seg_max > 0,
         f"io: SEG_MAX offered and seg_max {cfg.seg_max} > 0")
    if a.expect_seg_max is not None:
        t.ok(cfg.seg_max == a.expect_seg_max,
             f"io: seg_max {cfg.seg_max} == --expect-seg-max "
             f"{a.expect_seg_max}")
    if dev.has(vu.F_BLK_BLK_SIZE):
        bs = cfg.blk_size
        t.ok(512 <= bs <= 65536 and bs & (bs - 1) == 0,
             f"io: blk_size {bs} is a power of two in 512..65536")
    t.ok(not dev.has(vu.F_BLK_RO), "io: device is writable (RO not offered)")
    return big


def stats_window_checks(ctx, before, after, sent, elapsed):
    """Counters over the bulk I/O phase, no vhost-user messages sent."""
    t = ctx.tap
    t.ok(after["messages"] == before["messages"],
         f"io stats: messages unchanged during I/O ({before['messages']} -> "
         f"{after['messages']})")
    t.ok(after.get("running") == 1, "io stats: running 1")
    cpu = after["cpu_us"] - before["cpu_us"]
    budget = max(50000, int(elapsed * 1e6 * 0.05))
    t.ok(0 <= cpu <= budget,
         f"io stats: main thread CPU {cpu} us during {elapsed:.2f} s of I/O "
         f"(<= {budget} us: the data path is not in the daemon)")
    for q, want in sorted(sent.items()):
        b, a = before["vrings"].get(q), after["vrings"].get(q)
        if not t.ok(b is not None and a is not None,
                    f"io stats: vring {q} line present"):
            continue
        d = {k: a[k] - b.get(k, 0) for k in a}
        t.diag(f"vring {q} deltas: {d}")
        t.ok(d.get("requests", -1) >= want["requests"],
             f"io stats: vring {q} requests +{d.get('requests')} >= "
             f"{want['requests']} sent")
        t.ok(d.get("read_bytes", -1) >= want["read_bytes"],
             f"io stats: vring {q} read_bytes +{d.get('read_bytes')} >= "
             f"{want['read_bytes']}")
        t.ok(d.get("write_bytes", -1) >= want["write_bytes"],
             f"io stats: vring {q} write_bytes +{d.get('write_bytes')} >= "
             f"{want['write_bytes']}")
        t.ok(d.get("errors", -1) == 0, f"io stats: vring {q} errors +0")
        t.ok(d.get("kicks", -1) >= 1,
             f"io stats: vring {q} kicks +{d.get('kicks')} >= 1")
        t.ok(a.get("inflight", -1) == 0, f"io stats: vring {q} inflight 0")
    workers = [after["vrings"].get(q, {}).get("worker") for q in sorted(sent)]
    if ctx.args.expect_workers == "one":
        t.ok(len(set(workers)) == 1,
             f"io stats: all vrings on one worker ({workers})")
    elif ctx.args.expect_workers == "per-queue":
        t.ok(len(set(workers)) == len(workers),
             f"io stats: one worker per vring ({workers})")


def count(sent, reqs, q=None):
    for r in reqs:
        s = sent.setdefault(r.queue if q is None else q,
                            {"requests": 0, "read_bytes": 0, "write_bytes": 0})
        s["requests"] += 1
        if r.type == T_IN:
            s["read_bytes"] += r.nbytes
        elif r.type == T_OUT:
            s["write_bytes"] += r.nbytes


def io_bulk(ctx, dev, base, sent):
    """Many requests in flight on both queues: plain, indirect, 1 MiB."""
    t, nq = ctx.tap, dev.nqueues
    # 64 x 4 KiB writes per queue, all in flight (3 descriptors each).
    plan = spread(base, nq, 64, 8)
    ws = write_reqs(ctx, dev, plan, 4096, gen=1)
    dev.run(ws)
    count(sent, ws)
    good, msg = all_ok(ws)
    release(ws)
    t.ok(good, f"io: {len(ws)} 4 KiB writes, 64 in flight per queue ({msg})")
    # Read everything back through the other queue, also all in flight.
    rs = read_reqs(dev, {(q + 1) % nq: s for q, s in plan.items()}, 4096)
    dev.run(rs)
    count(sent, rs)
    good, msg = verify_reads(ctx, rs, lambda s: 1)
    release(rs)
    t.ok(good, f"io: read back on the other queue, 64 in flight ({msg})")
    t.diag(f"used length of a 4 KiB read: {rs[0].used_len}")

    # Mixed sizes and segment counts, interleaved on both queues.
    mixed_base = base + 1024
    mixed = []
    s = mixed_base
    for i, (nbytes, nseg) in enumerate([(4096, 1), (8192, 2), (65536, 4),
                                        (16384, 4), (131072, 8),
                                        (4096, 1)] * 4):
        mixed.append((i % nq, s, nbytes, nseg))
        s += nbytes // SECTOR
    ws = []
    for q, s, nbytes, nseg in mixed:
        r = dev.request(T_OUT, s, nbytes, nseg, ctx.pat(s, nbytes, 2))
        r.queue = q
        ws.append(r)
    dev.run(ws)
    count(sent, ws)
    good, msg = all_ok(ws)
    release(ws)
    t.ok(good, f"io: {len(ws)} writes of 4-128 KiB in 1-8 segments ({msg})")
    rs = []
    for q, s, nbytes, nseg in mixed:
        r = dev.request(T_IN, s, nbytes, max(1, nseg // 2))
        r.queue = (q + 1) % nq
        rs.append(r)
    dev.run(rs)
    count(sent, rs)
    good, msg = verify_reads(ctx, rs, lambda s: 2)
    release(rs)
    t.ok(good, f"io: mixed sizes read back with other segmentation ({msg})")

    # Indirect descriptors: 64 per queue of 16 KiB in 4 segments, in flight.
    ind_base = ctx.area("io-indirect")
    if dev.has(vu.F_RING_INDIRECT_DESC):
        plan = spread(ind_base, nq, 64, 32)
        ws = write_reqs(ctx, dev, plan, 16384, gen=3, nseg=4)
        dev.run(ws, indirect=True)
        count(sent, ws)
        good, msg = all_ok(ws)
        release(ws)
        t.ok(good, f"io: {len(ws)} indirect 16 KiB writes in 4 segments, "
             f"64 in flight per queue ({msg})")
        rs = read_reqs(dev, {(q + 1) % nq: s for q, s in plan.items()},
                       16384, nseg=2)
        dev.run(rs, indirect=True)
        count(sent, rs)
        good, msg = verify_reads(ctx, rs, lambda s: 3)
        release(rs)
        t.ok(good, f"io: indirect reads verified ({msg})")
    else:
        t.skip("io: indirect descriptors", "INDIRECT_DESC not offered")

    # 1 MiB requests, as many segments as the limits allow, in both regions.
    big = ctx.area("io-1mib")
    nseg = pick_segments(dev, MiB)
    if not t.ok(nseg is not None, f"io: a 1 MiB request fits seg_max/size_max "
                f"({nseg} segments)"):
        return
    ws = write_reqs(ctx, dev, {0: [big], nq - 1: [big + 2048]}, MiB, 4, nseg)
    dev.run(ws)
    count(sent, ws)
    good, msg = all_ok(ws)
    release(ws)
    t.ok(good, f"io: 1 MiB writes in {nseg} segments of {MiB // nseg} bytes "
         f"({msg})")
    rs = read_reqs(dev, {nq - 1: [big], 0: [big + 2048]}, MiB,
                   max(1, nseg // 2))
    dev.run(rs, indirect=dev.has(vu.F_RING_INDIRECT_DESC))
    count(sent, rs)
    good, msg = verify_reads(ctx, rs, lambda s: 4)
    release(rs)
    t.ok(good, f"io: 1 MiB reads in {max(1, nseg // 2)} segments"
         f"{' (indirect)' if dev.has(vu.F_RING_INDIRECT_DESC) else ''} "
         f"verified ({msg})")


def io_requests(ctx, dev, base):
    """FLUSH, GET_ID, WRITE_ZEROES, DISCARD."""
    t, a, cfg = ctx.tap, ctx.args, dev.config
    if dev.has(vu.F_BLK_FLUSH):
        st = [dev.flush(q) for q in range(dev.nqueues)]
        t.ok(st == [S_OK] * dev.nqueues, f"io: FLUSH on every queue {st}")
    else:
        t.skip("io: FLUSH", "VIRTIO_BLK_F_FLUSH not offered")
    status, ident = dev.get_id()
    name = ident.split(b"\0")[0]
    if a.expect_serial is not None:
        want = a.expect_serial.encode()[:vu.ID_BYTES]
        t.ok(status == S_OK and name == want,
             f"io: GET_ID returns the serial ({status_name(status)}, "
             f"{name!r}, want {want!r})")
    else:
        t.ok(status in (S_OK, S_UNSUPP),
             f"io: GET_ID completes ({status_name(status)}, {name!r})")

    zbase = base + 3072  # after io_bulk's 2816 sectors
    if dev.has(vu.F_BLK_WRITE_ZEROES):
        n = min(128, cfg.max_write_zeroes_sectors or 128)
        flags_list = [0] + ([vu.WZ_F_UNMAP] if cfg.write_zeroes_may_unmap
                            else [])
        for flags in flags_list:
            dev.write(zbase, ctx.pat(zbase, n * SECTOR, 5), nseg=1)
            st = dev.discard_like(T_WRITE_ZEROES, [(zbase, n)], flags, queue=1)
            rst, data = dev.read(zbase, n * SECTOR, 0)
            t.ok(st == S_OK and rst == S_OK and data == bytes(n * SECTOR),
                 f"io: WRITE_ZEROES of {n} sectors (flags {flags}) then reads "
                 f"zeroes ({status_name(st)}, read {status_name(rst)})")
    else:
        t.skip("io: WRITE_ZEROES", "VIRTIO_BLK_F_WRITE_ZEROES not offered")

    if dev.has(vu.F_BLK_DISCARD):
        align = max(1, cfg.discard_sector_alignment)
        n = min(256, cfg.max_discard_sectors or 256)
        start = (ctx.area("io-discard") + align - 1) // align * align
        ranges = [(start, n)]
        if cfg.max_discard_seg > 1:
            ranges.append((start + 2 * ((n + align - 1) // align * align), n))
        st = dev.discard_like(T_DISCARD, ranges)
        t.ok(st == S_OK, f"io: DISCARD of {len(ranges)} range(s) of {n} "
             f"sectors ({status_name(st)})")
        rst, _ = dev.read(start, n * SECTOR)
        t.ok(rst == S_OK, f"io: discarded range reads ({status_name(rst)})")
    else:
        t.skip("io: DISCARD", "VIRTIO_BLK_F_DISCARD not offered")


def scenario_io(ctx):
    t = ctx.tap
    # 256 slots: 64 chains of 3 descriptors in flight per queue.
    with ctx.device(queues=2, queue_size=256) as dev:
        dev.setup()
        if not check_config(ctx, dev):
            return
        t.ok(dev.nqueues == 2, f"io: 2 queues set up ({dev.nqueues})")
        t.diag("EVENT_IDX " + ("negotiated" if dev.has(vu.F_RING_EVENT_IDX)
                               else "not offered"))
        base = ctx.area("io")
        before = ctx.snapshot()
        start = time.monotonic()
        sent = {}
        io_bulk(ctx, dev, base, sent)
        elapsed = time.monotonic() - start
        after = ctx.snapshot()
        if before is not None:
            stats_window_checks(ctx, before, after, sent, elapsed)
        io_requests(ctx, dev, base)

    # The same without EVENT_IDX and indirect descriptors, on a 16-slot
    # ring that wraps many times; SET_FEATURES also before the protocol
    # features, and the set-up messages sent back to back without acks.
    want = vu.BLK_FEATURES & ~(1 << vu.F_RING_EVENT_IDX |
                               1 << vu.F_RING_INDIRECT_DESC)
    with ctx.device(queues=2, queue_size=16, want=want) as dev:
        dev.negotiate(early_features=True)
        dev.conn.use_ack = False
        dev.start()
        t.ok(not dev.has(vu.F_RING_EVENT_IDX) and
             not dev.has(vu.F_RING_INDIRECT_DESC),
             "io-noevidx: EVENT_IDX and INDIRECT_DESC left out, set up "
             "without REPLY_ACK")
        plan = spread(ctx.area("io-noevidx"), dev.nqueues, 100, 8)
        write_verify(ctx, dev, "io-noevidx: 100 requests per queue, 5 in "
                     "flight, 16-slot ring", plan, 4096, gen=6, depth=5)
        t.ok(all(vq.published == 200 for vq in dev.vqs),
             f"io-noevidx: {[vq.published for vq in dev.vqs]} avail entries "
             "published per ring (12 wraps of 16)")


# --- restart -----------------------------------------------------------------

def stop_and_check(ctx, dev, what):
    """Stop; each base must be the ring's avail index (all completed)."""
    t = ctx.tap
    bases = dev.stop()
    want = [vq.avail_idx for vq in dev.vqs]
    t.ok(bases == want,
         f"{what}: GET_VRING_BASE {bases} == avail entries published {want}")
    st = ctx.snapshot()
    if st is not None:
        t.ok(st.get("running") == 0, f"{what}: stats running 0 when stopped")
        t.ok(all(v.get("inflight", -1) == 0 for v in st["vrings"].values()),
             f"{what}: stats inflight 0 on every vring")
    return bases


def scenario_restart(ctx):
    t = ctx.tap
    base = ctx.area("restart")
    with ctx.device(queues=2) as dev:
        dev.setup()
        t.ok(dev.nqueues == 2, f"restart: 2 queues set up ({dev.nqueues})")
        p1 = spread(base, dev.nqueues, 20, 8)
        write_verify(ctx, dev, "restart: before stop", p1, 4096, gen=1)
        bases = stop_and_check(ctx, dev, "restart: first stop")
        dev.restart(bases)
        st = ctx.snapshot()
        if st is not None:
            t.ok(st.get("running") == 1, "restart: stats running 1 again")
        p2 = spread(base + 512, dev.nqueues, 20, 8)
        write_verify(ctx, dev, "restart: after restart", p2, 4096, gen=2)
        rs = read_reqs(dev, p1, 4096)
        dev.run(rs)
        good, msg = verify_reads(ctx, rs, lambda s: 1)
        release(rs)
        t.ok(good, f"restart: data from before the stop ({msg})")
        bases = stop_and_check(ctx, dev, "restart: second stop")
        dev.restart(bases)
        p3 = spread(base + 1024, dev.nqueues, 10, 8)
        write_verify(ctx, dev, "restart: after second restart", p3, 4096,
                     gen=3)

        # Fresh rings that start at 65530: the indexes wrap during the I/O.
        dev.stop()
        old = dev.vqs
        for vq in old:
            vq.close()
        dev.start(base=65530)
        for vq in old:
            vq.free_ring_memory()
        p4 = spread(base + 2048, dev.nqueues, 20, 8)
        write_verify(ctx, dev, "restart: rings starting at index 65530", p4,
                     4096, gen=4)
        bases = stop_and_check(ctx, dev, "restart: stop after the index wrap")
        t.ok(all(b < 65530 for b in bases),
             f"restart: bases {bases} wrapped past 65535")
        dev.restart(bases)
        for p, gen in ((p1, 1), (p2, 2), (p3, 3), (p4, 4)):
            rs = read_reqs(dev, p, 4096)
            dev.run(rs)
            good, msg = verify_reads(ctx, rs, lambda s: gen)
            release(rs)
            t.ok(good, f"restart: generation {gen} data after the last "
                 f"restart ({msg})")


# --- disconnect --------------------------------------------------------------

def flood(ctx, dev, base, gen, per_queue=64):
    """Submit per_queue 4 KiB writes on every queue and kick; no waiting."""
    for q in range(dev.nqueues):
        for i in range(per_queue):
            s = base + (q * per_queue + i) * 8
            dev.submit(dev.request(T_OUT, s, 4096, 1, ctx.pat(s, 4096, gen)),
                       q, kick=False)
        dev.vqs[q].kick()


def acked_writes(ctx, dev, base, gen):
    plan = spread(base, dev.nqueues, 32, 8)
    ws = write_reqs(ctx, dev, plan, 4096, gen)
    dev.run(ws)
    good, msg = all_ok(ws)
    release(ws)
    return plan, good, msg


def verify_plan(ctx, dev, what, plan, gen):
    rs = read_reqs(dev, plan, 4096)
    dev.run(rs)
    good, msg = verify_reads(ctx, rs, lambda s: gen)
    release(rs)
    return ctx.tap.ok(good, f"{what} ({msg})")


def after_reconnect(ctx, what, plan, gen, conns_before, conns_made):
    """New connection: acknowledged data is there and the daemon serves."""
    t = ctx.tap
    with ctx.device(queues=2) as dev:
        dev.setup()
        verify_plan(ctx, dev, f"{what}: acknowledged writes intact after "
                    "reconnecting", plan, gen)
        scratch = spread(ctx.area("disconnect-scratch") + 2048,
                         dev.nqueues, 8, 8)
        write_verify(ctx, dev, f"{what}: new connection does I/O", scratch,
                     4096, gen=9)
        st = ctx.snapshot()
        if st is not None:
            t.ok(st.get("connections") == conns_before + conns_made,
                 f"{what}: stats connections {st.get('connections')} == "
                 f"{conns_before} + {conns_made}")
            t.ok(set(range(dev.nqueues)) <= set(st["vrings"]),
                 f"{what}: stats has the new device's vrings "
                 f"{sorted(st['vrings'])}")
            t.ok(all(v.get("inflight", -1) == 0
                     for v in st["vrings"].values()),
                 f"{what}: stats inflight 0 on every vring")
    ctx.check_alive(what)


def child_flood(ctx, wfd):
    """In a forked child: acked writes, then I/O until killed. Never
    returns: the parent's test run must not continue in the child."""
    try:
        with ctx.device(queues=2, queue_size=256) as dev:
            dev.setup()
            _, good, _ = acked_writes(ctx, dev, ctx.area("disconnect-kill"), 4)
            if not good:
                os.write(wfd, b"F")
                return
            flood(ctx, dev, ctx.area("disconnect-scratch") + 1024, 5)
            os.write(wfd, b"A")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                for vq, req, _ in vu.wait_any(dev.vqs, ctx.args.timeout):
                    dev.submit(req, vq.index)  # again, forever in flight
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(2)


def scenario_disconnect(ctx):
    t = ctx.tap
    st = ctx.snapshot()
    conns = st.get("connections") if st else None

    # Close the socket with 128 writes in flight.
    dev = ctx.device(queues=2, queue_size=256)
    try:
        dev.setup()
        plan, good, msg = acked_writes(ctx, dev, ctx.area("disconnect"), 3)
        t.ok(good, f"disconnect: acknowledged writes ({msg})")
        flood(ctx, dev, ctx.area("disconnect-scratch"), 6)
        dev.conn.close()  # without waiting; memory stays mapped for now
        after_reconnect(ctx, "disconnect: closed with I/O in flight", plan, 3,
                        conns, 2)
    finally:
        dev.close()

    # SIGKILL a frontend in the middle of its I/O.
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        child_flood(ctx, w)
    os.close(w)
    try:
        ready, _, _ = select.select([r], [], [], 4 * ctx.args.timeout)
        said = os.read(r, 1) if ready else b""
        t.ok(said == b"A", f"disconnect: child frontend wrote and has I/O in "
             f"flight ({said!r})")
        time.sleep(0.2)
    finally:
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        os.close(r)
    t.ok(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL,
         f"disconnect: child frontend SIGKILLed mid-I/O (wait status "
         f"{status:#x})")
    plan = spread(ctx.area("disconnect-kill"), 2, 32, 8)
    after_reconnect(ctx, "disconnect: frontend killed with I/O in flight",
                    plan, 4, conns, 4)


# --- malformed ---------------------------------------------------------------

class Malformed:
    """The error contract, one check group per case."""

    def __init__(self, ctx):
        self.ctx, self.t = ctx, ctx.tap
        self.dev = None
        # Shared by the connections, so that a reconnect keeps the fds valid.
        self.mem = vu.GuestMemory()

    def connect(self):
        dev = self.ctx.device(queues=2, mem=self.mem)
        dev.negotiate()
        return dev

    def errors_messages(self):
        st = self.ctx.snapshot()
        return (st["errors"], st["messages"]) if st else None

    def refused(self, desc, req, payload=b"", fds=(), need_reply=True):
        """Refused: non-zero ack, errors +1, GET_FEATURES still answers.

        Without need_reply the next message read must be GET_FEATURES'
        reply: a refusal sends nothing that was not asked for.
        """
        t, dev = self.t, self.dev
        desc = f"malformed: {desc}"
        if not need_reply:
            desc += " (no need_reply)"
        before = self.errors_messages()
        try:
            if dev.conn.reply_ack and need_reply:
                ack = dev.conn.ack(req, payload, fds)
                t.ok(ack != 0, f"{desc}: refused, ack {ack}")
            else:
                dev.conn.send(req, payload, fds)
            features = dev.conn.get_features()
            t.ok(features == dev.offered,
                 f"{desc}: connection still answers GET_FEATURES")
        except Exception as e:
            t.ok(False, f"{desc}: refused on a usable connection ({e!r})")
            self.dev.close()
            self.dev = self.connect()
            return
        after = self.errors_messages()
        if before is not None:
            t.ok(after[0] - before[0] == 1,
                 f"{desc}: stats errors +{after[0] - before[0]} == 1")
            t.ok(after[1] - before[1] == 2,
                 f"{desc}: stats messages +{after[1] - before[1]} == 2 (it "
                 "and GET_FEATURES)")
        self.ctx.check_alive(desc)

    def closes(self, desc, send):
        """The daemon closes this connection, keeps running, serves the
        next one."""
        desc = f"malformed: {desc}"
        dev = self.connect()
        try:
            try:
                send(dev.conn)
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.t.ok(dev.conn.wait_closed(),
                      f"{desc}: daemon closes the connection")
        finally:
            dev.close()
        self.ctx.check_alive(desc)
        self.ctx.check_serves(desc)

    def peer_closes(self, desc, send):
        """We close mid-message; the daemon keeps serving."""
        desc = f"malformed: {desc}"
        dev = self.connect()
        try:
            send(dev.conn)
        finally:
            dev.close()
        self.ctx.check_alive(desc)
        self.ctx.check_serves(desc)

    def get_config(self, desc, offset, size):
        """A bad GET_CONFIG closes the connection: like every GET_*, its
        sender waits for a reply that has no error form."""
        desc = f"malformed: {desc}"

        def send(c):
            c.send(Req.GET_CONFIG,
                   vu.CONFIG_HDR.pack(offset, size, 0) + bytes(size))
        self.closes(desc, send)

    def run(self):
        ctx, t = self.ctx, self.t
        self.dev = self.connect()
        nq = self.dev.queue_num
        fds_before = open_fds(ctx.args.pid) if ctx.args.pid else None
        t.ok(self.dev.conn.reply_ack, "malformed: REPLY_ACK negotiated")
        mem = self.mem
        state = vu.Connection.state
        u64 = struct.Struct("<Q").pack
        efd = os.eventfd(0, os.EFD_CLOEXEC)
        pipe_r, pipe_w = os.pipe()
        ro = os.open(f"/proc/self/fd/{mem.fd}", os.O_RDONLY | os.O_CLOEXEC)
        try:
            self.refused("SET_FEATURES with a 4-byte payload",
                         Req.SET_FEATURES, b"\0" * 4)
            self.refused("SET_VRING_NUM with a 12-byte payload",
                         Req.SET_VRING_NUM, state(0, 128) + b"\0" * 4)
            self.refused("SET_MEM_TABLE whose size does not match nregions",
                         Req.SET_MEM_TABLE, vu.Connection.mem_table_payload(
                             mem.table(), nregions=1), mem.fds()[:1])
            self.refused("SET_VRING_ENABLE with a 4-byte payload",
                         Req.SET_VRING_ENABLE, b"\1\0\0\0")
            for name, req in (("SET_VRING_NUM", Req.SET_VRING_NUM),
                              ("SET_VRING_BASE", Req.SET_VRING_BASE),
                              ("SET_VRING_ENABLE", Req.SET_VRING_ENABLE)):
                self.refused(f"{name} index {nq} >= queues", req,
                             state(nq, 1 if req == Req.SET_VRING_ENABLE
                                   else 128))
            self.refused(f"SET_VRING_KICK index {nq} >= queues",
                         Req.SET_VRING_KICK, u64(nq), [efd])
            self.refused(f"SET_VRING_CALL index {nq} >= queues",
                         Req.SET_VRING_CALL, u64(nq), [efd])
            for num in (0, 100, 65536):
                self.refused(f"SET_VRING_NUM size {num}",
                             Req.SET_VRING_NUM, state(0, num))

            # Ring addresses against a valid table and ring size.
            self.dev.conn.set_mem_table(mem.table(), mem.fds())
            self.dev.conn.set_vring_num(0, 128)
            vq = vu.Virtqueue(mem, 0, 128)
            desc, used, avail = vq.addresses()
            self.refused(f"SET_VRING_ADDR index {nq} >= queues",
                         Req.SET_VRING_ADDR,
                         vu.Connection.vring_addr(nq, desc, used, avail))
            r0_end = mem.regions[0].uaddr + mem.regions[0].size
            for what, addrs in (
                    ("descriptor table outside the memory table",
                     (0x1000, used, avail)),
                    ("avail ring outside the memory table",
                     (desc, used, 0x7E0000000000)),
                    ("used ring across the end of a region",
                     (desc, r0_end - 512, avail))):
                self.refused(f"SET_VRING_ADDR {what}", Req.SET_VRING_ADDR,
                             vu.Connection.vring_addr(0, *addrs))
            vq.close()

            # Memory tables.
            nine = [(i * 4 * MiB, 4 * MiB, 0x7F0000000000 + i * 4 * MiB,
                     i * 4 * MiB) for i in range(9)]
            self.refused("SET_MEM_TABLE with 9 regions and 8 fds",
                         Req.SET_MEM_TABLE,
                         vu.Connection.mem_table_payload(nine), [mem.fd] * 8)
            self.refused("SET_MEM_TABLE with 9 regions and 9 fds",
                         Req.SET_MEM_TABLE,
                         vu.Connection.mem_table_payload(nine), [mem.fd] * 9)
            table = vu.Connection.mem_table_payload(mem.table())
            self.refused("SET_MEM_TABLE with 2 regions and 1 fd",
                         Req.SET_MEM_TABLE, table, [mem.fd])
            self.refused("SET_MEM_TABLE with 2 regions and 3 fds",
                         Req.SET_MEM_TABLE, table, [mem.fd] * 3)
            self.refused("SET_MEM_TABLE with 2 regions and no fd",
                         Req.SET_MEM_TABLE, table)
            self.refused("SET_MEM_TABLE with a pipe fd", Req.SET_MEM_TABLE,
                         table, [mem.fd, pipe_r])
            self.refused("SET_MEM_TABLE with a read-only fd",
                         Req.SET_MEM_TABLE, table, [ro, ro])

            self.refused("unknown request 0", Req.NONE)
            self.refused("unknown request 99 with a 24-byte payload", 99,
                         bytes(range(24)))
            self.refused("unknown request 0x7fffffff", 0x7FFFFFFF, u64(0))
            unoffered = next(b for b in range(64)
                             if not bit(self.dev.offered, b))
            self.refused(f"SET_FEATURES with bit {unoffered}, never offered",
                         Req.SET_FEATURES,
                         u64(self.dev.features | 1 << unoffered))
            self.refused("SET_VRING_KICK without fd and without bit 8",
                         Req.SET_VRING_KICK, u64(0))
            self.refused("SET_VRING_NUM size 100", Req.SET_VRING_NUM,
                         state(0, 100), need_reply=False)
            self.refused("unknown request 99 with a 24-byte payload", 99,
                         bytes(range(24)), need_reply=False)

            # The connection that took all of that still sets up and works.
            self.dev.start()
            write_verify(ctx, self.dev, "malformed: same connection then "
                         "sets up and does I/O",
                         spread(ctx.area("malformed"), self.dev.nqueues, 16,
                                8), 4096, gen=1)
        finally:
            self.dev.close()
            for fd in (efd, pipe_r, pipe_w, ro):
                os.close(fd)
            self.mem.close()

        # Cases that end the connection.
        hdr = vu.HDR.pack
        self.closes("payload of 4097 bytes",
                    lambda c: c.send_raw(hdr(Req.SET_FEATURES, 1, 4097) +
                                         bytes(4097)))
        self.closes("header version 0",
                    lambda c: c.send(Req.GET_FEATURES, flags=0))
        self.closes("header version 2",
                    lambda c: c.send(Req.GET_FEATURES, flags=2))
        self.closes(f"GET_VRING_BASE index {nq} >= queues",
                    lambda c: c.send(Req.GET_VRING_BASE, state(nq, 0)))
        self.closes("GET_VRING_BASE with a 4-byte payload",
                    lambda c: c.send(Req.GET_VRING_BASE, b"\0" * 4))
        self.closes("GET_FEATURES with an 8-byte payload",
                    lambda c: c.send(Req.GET_FEATURES, u64(0)))
        self.closes("GET_QUEUE_NUM with an 8-byte payload",
                    lambda c: c.send(Req.GET_QUEUE_NUM, u64(0)))
        self.get_config("GET_CONFIG size 257", 0, 257)
        self.get_config("GET_CONFIG offset 4", 4, 56)
        self.peer_closes("peer closes mid-header",
                         lambda c: c.send_raw(hdr(Req.SET_FEATURES, 1, 8)[:6]))
        self.peer_closes("peer closes mid-payload",
                         lambda c: c.send_raw(hdr(Req.SET_FEATURES, 1, 40) +
                                              bytes(10)))
        memfd = vu.GuestMemory()
        try:
            self.peer_closes(
                "peer closes mid-payload of SET_MEM_TABLE with fds",
                lambda c: c.send_raw(
                    hdr(Req.SET_MEM_TABLE, 1, 72) +
                    vu.Connection.mem_table_payload(memfd.table())[:30],
                    memfd.fds()))
        finally:
            memfd.close()

        if fds_before is not None:
            dev = self.connect()
            try:
                deadline = time.monotonic() + 5
                while True:  # the last connection may still be closing
                    fds_after = open_fds(ctx.args.pid)
                    if fds_after <= fds_before or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
                t.ok(fds_after == fds_before,
                     f"malformed: daemon holds {fds_after} fds, as many as "
                     f"before the malformed messages ({fds_before})")
            finally:
                dev.close()


def scenario_malformed(ctx):
    Malformed(ctx).run()


# --- readonly ----------------------------------------------------------------

def backend_read(path, offset, nbytes):
    """Read the backend directly, bypassing the page cache."""
    buf = mmap.mmap(-1, nbytes)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        n = os.preadv(fd, [buf], offset)
        return bytes(buf[:n])
    finally:
        os.close(fd)
        buf.close()


def scenario_readonly(ctx):
    t = ctx.tap
    with ctx.device(queues=1) as dev:
        dev.setup()
        t.ok(bit(dev.offered, vu.F_BLK_RO),
             f"readonly: VIRTIO_BLK_F_RO offered ({dev.offered:#x})")
        sector, nbytes = ctx.area("io"), 64 * KiB
        status, data = dev.read(sector, nbytes, nseg=4)
        t.ok(status == S_OK and data != b"\xA5" * nbytes,
             f"readonly: 64 KiB read completes ({status_name(status)})")
        if ctx.args.backend_file:
            want = backend_read(ctx.args.backend_file, sector * SECTOR, nbytes)
            bad = first_mismatch(data, want)
            t.ok(not bad, "readonly: read matches the backend file"
                 + (f" ({bad})" if bad else ""))
        st = dev.write(sector, ctx.pat(sector, nbytes, 7), nseg=4)
        t.ok(st == S_IOERR, f"readonly: write gets IOERR ({status_name(st)})")
        if dev.has(vu.F_BLK_WRITE_ZEROES):
            st = dev.discard_like(T_WRITE_ZEROES, [(sector, 8)])
            t.ok(st in (S_IOERR, S_UNSUPP),
                 f"readonly: WRITE_ZEROES fails ({status_name(st)})")
        if dev.has(vu.F_BLK_DISCARD):
            st = dev.discard_like(T_DISCARD, [(sector, 8)])
            t.ok(st in (S_IOERR, S_UNSUPP),
                 f"readonly: DISCARD fails ({status_name(st)})")
        status, again = dev.read(sector, nbytes, nseg=1)
        t.ok(status == S_OK and again == data,
             "readonly: data unchanged after the refused writes")


# --- reset -------------------------------------------------------------------

def reset_rounds(ctx, rounds, scratch_gen):
    """rounds: (RESET_DEVICE if negotiated, else RESET_OWNER; writes in
    flight at the reset)."""
    t = ctx.tap
    base = ctx.area("reset")
    with ctx.device(queues=2, queue_size=256) as dev:
        dev.setup()
        plan = spread(base, dev.nqueues, 16, 8)
        write_verify(ctx, dev, "reset: before reset", plan, 4096, gen=1)
        has_rd = bit(dev.protocol, vu.PROTO_RESET_DEVICE)
        if not has_rd:
            t.diag("RESET_DEVICE not negotiated: RESET_OWNER instead")
        for i, (use_rd, busy) in enumerate(rounds):
            use_rd = use_rd and has_rd
            name = "RESET_DEVICE" if use_rd else "RESET_OWNER"
            what = f"round {i + 1}, {name} " + (
                "with 64 writes in flight per queue" if busy
                else "between requests")
            if busy:
                flood(ctx, dev, ctx.area("reset-scratch") + 1024 * i,
                      scratch_gen + i)
            # The old rings stay allocated: late completions land there.
            dev.reset(use_rd)
            dev.start()  # what QEMU sends after a reset
            verify_plan(ctx, dev, f"reset: {what}: data from before the "
                        "reset", plan, 1)
            p = spread(base + 512 + 256 * (i + scratch_gen), dev.nqueues, 16,
                       8)
            write_verify(ctx, dev, f"reset: {what}: I/O after setting up "
                         "again", p, 4096, gen=2 + i)
            st = ctx.snapshot()
            if st is not None:
                t.ok(st.get("running") == 1 and all(
                    v.get("inflight", -1) == 0
                    for v in st["vrings"].values()),
                     f"reset: {what}: stats running 1, inflight 0 "
                     f"({st.get('running')}, "
                     f"{[v.get('inflight') for v in st['vrings'].values()]})")


def scenario_failing(ctx):
    t = ctx.tap
    bad = ctx.args.bad_sector
    if bad is None:
        t.ok(False, "failing: needs --bad-sector")
        return
    good = ctx.area("io")
    with ctx.device(queues=2) as dev:
        dev.setup()
        before = ctx.snapshot()
        st = dev.write(good, ctx.pat(good, 4096, 21))
        t.ok(st == S_OK, f"failing: write to a good sector ({status_name(st)})")
        st = dev.write(bad, ctx.pat(bad, 4096, 21))
        t.ok(st == S_IOERR, f"failing: write to bad sector {bad} gets IOERR "
             f"({status_name(st)})")
        st, _ = dev.read(bad - 8, 8192, nseg=2)
        t.ok(st == S_IOERR, "failing: read that ends in the bad range gets "
             f"IOERR ({status_name(st)})")
        st, data = dev.read(good, 4096)
        t.ok(st == S_OK and data == ctx.pat(good, 4096, 21),
             f"failing: the good sector reads back ({status_name(st)})")
        for q in range(dev.nqueues):
            st = dev.write(good + 8 * (q + 1), ctx.pat(good, 4096, 22), queue=q)
            t.ok(st == S_OK, f"failing: queue {q} still serves after the "
                 f"errors ({status_name(st)})")
        after = ctx.snapshot()
        if before is not None:
            errs = sum(v["errors"] for v in after["vrings"].values()) - sum(
                v["errors"] for v in before["vrings"].values())
            t.ok(errs == 2, f"failing: vhost-blk counted {errs} errors, want 2")
    ctx.check_alive("failing")


def scenario_reset(ctx):
    reset_rounds(ctx, [(True, False), (False, False)], 0)


def scenario_reset_busy(ctx):
    reset_rounds(ctx, [(True, True), (False, True)], 2)


# --- main --------------------------------------------------------------------

# --- crash ---------------------------------------------------------------------

def scenario_crash(ctx):
    t, a = ctx.tap, ctx.args
    rng = random.Random(ctx.seed)
    claim = a.claim_block

    def mark(dev, obj):
        """Write the next claim block through the device."""
        nonlocal claim
        blk = (b"VSTORMARK1 " + json.dumps(obj).encode() + b"\n")
        st = dev.write(claim * 8, blk.ljust(4096, b"\0"))
        claim += 1
        return st == S_OK

    modes = (("flush", vu.BLK_FEATURES),
             ("write-through", vu.BLK_FEATURES & ~(1 << vu.F_BLK_FLUSH)))
    for m, (mode, want) in enumerate(modes):
        with ctx.device(queues=2, queue_size=128, want=want) as dev:
            dev.setup()
            flush = dev.has(vu.F_BLK_FLUSH)
            if not t.ok(flush == (mode == "flush"),
                        f"crash {mode}: VIRTIO_BLK_F_FLUSH "
                        f"{'negotiated' if flush else 'left out'}"):
                return
            if m == 0 and not t.ok(mark(dev, {"begin": True, "raw": True}),
                                   "crash: begin claim written"):
                return
            bad = 0
            for rnd in range(a.crash_rounds):
                reqs, ranges = [], []
                for k in range(8):
                    off = ((m * 8 + k) << 20) + rng.randrange(192) * 4096
                    nbytes = rng.randrange(1, 17) * 4096
                    data = ctx.pat(off // SECTOR, nbytes, rnd + 1)
                    r = dev.request(T_OUT, off // SECTOR, nbytes, 1, data)
                    r.queue = k % 2
                    reqs.append(r)
                    ranges.append((f"{mode[0]}{k}", off, nbytes,
                                   hashlib.sha256(data).hexdigest()))
                dev.run(reqs)
                good, msg = all_ok(reqs)
                release(reqs)
                if good and flush:
                    st = dev.flush(queue=rnd % 2)
                    good, msg = st == S_OK, f"FLUSH: {status_name(st)}"
                if not good:
                    bad += 1
                    t.diag(f"crash {mode}: round {rnd}: {msg}")
                    break
                for name, off, nbytes, sha in ranges:
                    if not mark(dev, {"region": name, "offset": off,
                                      "len": nbytes, "sha256": sha}):
                        bad += 1
                        break
            t.ok(bad == 0, f"crash {mode}: {a.crash_rounds} rounds of 8 "
                 f"writes{', a FLUSH' if flush else ''} and 8 claims")
    t.diag(f"crash: {claim - a.claim_block} claim blocks written")


RUN = {"io": scenario_io, "restart": scenario_restart,
       "disconnect": scenario_disconnect, "malformed": scenario_malformed,
       "readonly": scenario_readonly, "reset": scenario_reset,
       "reset-busy": scenario_reset_busy, "failing": scenario_failing,
       "crash": scenario_crash}


def main():
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 2)[2])
    p.add_argument("--socket", required=True, help="backend's unix socket")
    p.add_argument("--stats", help="vhost-blk-bridge's --stats file")
    p.add_argument("--pid", type=int, help="backend's pid")
    p.add_argument("--backend-size", type=int,
                   help="backend size in bytes (capacity check)")
    p.add_argument("--backend-file",
                   help="backend path, read with O_DIRECT to check reads")
    p.add_argument("--expect-serial", help="what GET_ID must return")
    p.add_argument("--bad-sector", type=int,
                   help="first of 8 failing sectors (scenario failing)")
    p.add_argument("--claim-block", type=int, default=12288,
                   help="first 4 KiB claim block (scenario crash; default "
                   "12288, 48 MiB in)")
    p.add_argument("--crash-rounds", type=int, default=12,
                   help="rounds per mode (scenario crash; default 12)")
    p.add_argument("--expect-seg-max", type=int, help="config seg_max")
    p.add_argument("--expect-queues", type=int, help="GET_QUEUE_NUM")
    p.add_argument("--expect-workers", choices=("one", "per-queue"),
                   help="vring to worker mapping in the stats")
    p.add_argument("--scenario", nargs="+", choices=SCENARIOS,
                   default=list(DEFAULT_SCENARIOS))
    p.add_argument("--timeout", type=float, default=vu.TIMEOUT,
                   help="seconds any single wait may take (default 10)")
    args = p.parse_args()
    if args.stats and not args.pid:
        p.error("--stats needs --pid (to send SIGUSR1)")

    tap = vu.Tap()
    ctx = Ctx(args, tap)
    print("KTAP version 1", flush=True)
    tap.diag(f"socket {args.socket}, seed {ctx.seed:#x}, scenarios "
             f"{' '.join(args.scenario)}"
             + ("" if ctx.stats else ", no stats checks (no --stats)"))
    for name in args.scenario:
        tap.diag(f"scenario {name}")
        try:
            try:
                RUN[name](ctx)
            except DaemonDied:
                raise
            except Exception as e:
                tap.diag(traceback.format_exc())
                tap.ok(False, f"{name}: ran to the end ({e!r})")
            ctx.check_alive(f"{name}: after the scenario")
        except DaemonDied as e:
            print(f"Bail out! the daemon died during {name}: {e}")
            break
    print(f"1..{tap.n}")
    print(f"# {tap.passed} passed, {tap.failed} failed, {tap.skipped} skipped")
    return 1 if tap.failed else 0


if __name__ == "__main__":
    sys.exit(main())
