"""A vhost-user frontend (a fake VMM) in stdlib Python 3.11.

Speaks the vhost-user protocol (QEMU docs/interop/vhost-user.rst) over a
unix socket to a vhost-user backend, shares guest memory with it as a
memfd, and drives requests through split virtqueues in that memory. It
exists to test backends without QEMU: every message can also be sent
malformed (Connection.send_raw), every ring can be broken
(Virtqueue.add_descs), and nothing waits without a timeout.

Layers, each usable on its own:
  Connection   the messages (header, payload, SCM_RIGHTS fds, REPLY_ACK)
  GuestMemory  one memfd shown to the backend as two regions
  Virtqueue    a split ring in guest memory with kick and call eventfds
  Device       QEMU's set-up, stop and restart sequences, of no device type
  BlkDevice    a Device plus virtio-blk's config space and requests
               (BlkRequest); fuse_proto.FsDevice is the virtio-fs one
"""
import enum
import mmap
import os
import select
import socket
import struct
import sys
import threading
import time

if sys.byteorder != "little":
    raise ImportError("vhost_user.py accesses little-endian rings natively")


class Req(enum.IntEnum):
    """vhost-user front-end message types (the ones this frontend sends)."""
    NONE = 0
    GET_FEATURES = 1
    SET_FEATURES = 2
    SET_OWNER = 3
    RESET_OWNER = 4
    SET_MEM_TABLE = 5
    SET_VRING_NUM = 8
    SET_VRING_ADDR = 9
    SET_VRING_BASE = 10
    GET_VRING_BASE = 11
    SET_VRING_KICK = 12
    SET_VRING_CALL = 13
    SET_VRING_ERR = 14
    GET_PROTOCOL_FEATURES = 15
    SET_PROTOCOL_FEATURES = 16
    GET_QUEUE_NUM = 17
    SET_VRING_ENABLE = 18
    GET_CONFIG = 24
    RESET_DEVICE = 34


def req_name(req):
    try:
        return Req(req).name
    except ValueError:
        return f"request {req}"


HDR = struct.Struct("<III")  # request, flags, size
FLAG_VERSION = 0x1
FLAG_VERSION_MASK = 0x3
FLAG_REPLY = 0x4
FLAG_NEED_REPLY = 0x8
VRING_IDX_MASK = 0xFF
VRING_NOFD = 1 << 8
MAX_REGIONS = 8
CONFIG_HDR = struct.Struct("<III")  # offset, size, flags
MEM_REGION = struct.Struct("<QQQQ")  # gpa, size, userspace_addr, mmap_offset

# Protocol feature bits.
PROTO_MQ = 0
PROTO_REPLY_ACK = 3
PROTO_CONFIG = 9
PROTO_RESET_DEVICE = 13

# Virtio feature bits.
F_BLK_SIZE_MAX = 1
F_BLK_SEG_MAX = 2
F_BLK_GEOMETRY = 4
F_BLK_RO = 5
F_BLK_BLK_SIZE = 6
F_BLK_FLUSH = 9
F_BLK_TOPOLOGY = 10
F_BLK_CONFIG_WCE = 11
F_BLK_MQ = 12
F_BLK_DISCARD = 13
F_BLK_WRITE_ZEROES = 14
F_NOTIFY_ON_EMPTY = 24
F_ANY_LAYOUT = 27
F_RING_INDIRECT_DESC = 28
F_RING_EVENT_IDX = 29
F_PROTOCOL_FEATURES = 30  # VHOST_USER_F_PROTOCOL_FEATURES
F_VERSION_1 = 32

# What a Linux guest would accept from a virtio-blk device.
BLK_FEATURES = sum(1 << b for b in (
    F_BLK_SIZE_MAX, F_BLK_SEG_MAX, F_BLK_GEOMETRY, F_BLK_RO, F_BLK_BLK_SIZE,
    F_BLK_FLUSH, F_BLK_TOPOLOGY, F_BLK_CONFIG_WCE, F_BLK_MQ, F_BLK_DISCARD,
    F_BLK_WRITE_ZEROES, F_ANY_LAYOUT, F_RING_INDIRECT_DESC, F_RING_EVENT_IDX,
    F_VERSION_1))
BLK_PROTOCOL_FEATURES = sum(1 << b for b in (
    PROTO_MQ, PROTO_REPLY_ACK, PROTO_CONFIG, PROTO_RESET_DEVICE))

TIMEOUT = 10.0

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


def bit(features, b):
    return bool(features >> b & 1)


class Tap:
    """Test results printed as they come, numbered TAP lines:
    `ok N - desc`, `not ok N - desc`, `ok N - desc # SKIP why`, `# diag`."""

    def __init__(self):
        self.n = self.passed = self.failed = self.skipped = 0

    def ok(self, cond, desc):
        self.n += 1
        if cond:
            self.passed += 1
        else:
            self.failed += 1
        print(f"{'ok' if cond else 'not ok'} {self.n} - {desc}", flush=True)
        return bool(cond)

    def skip(self, desc, why):
        self.n += 1
        self.skipped += 1
        print(f"ok {self.n} - {desc} # SKIP {why}", flush=True)

    def diag(self, msg):
        for line in str(msg).splitlines():
            print(f"# {line}", flush=True)


class VhostUserError(Exception):
    """The backend answered wrongly, refused a message, or broke a ring."""


class Closed(VhostUserError):
    """The backend closed the connection."""


class Message:
    def __init__(self, req, flags, payload):
        self.req, self.flags, self.payload = req, flags, payload

    def __repr__(self):
        return (f"<{req_name(self.req)} flags {self.flags:#x} "
                f"size {len(self.payload)}>")


class Connection:
    """One vhost-user connection, front-end side.

    set_* methods use REPLY_ACK when it is negotiated and `use_ack` is true,
    so a refused message raises VhostUserError at once instead of breaking
    something later.
    """

    def __init__(self, path, timeout=TIMEOUT, connect_timeout=TIMEOUT):
        self.path = path
        self.timeout = timeout
        self.reply_ack = False
        self.use_ack = True
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        # A backend that is still tearing down the last connection may not
        # listen yet.
        deadline = time.monotonic() + connect_timeout
        while True:
            try:
                self.sock.connect(path)
                break
            except (ConnectionRefusedError, FileNotFoundError):
                if time.monotonic() > deadline:
                    self.sock.close()
                    raise
                time.sleep(0.05)

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- framing -----------------------------------------------------------

    def send_raw(self, data, fds=()):
        """Send bytes as they are (with fds on the first byte)."""
        if fds:
            n = socket.send_fds(self.sock, [data], list(fds))
        else:
            n = self.sock.send(data)
        if n < len(data):
            self.sock.sendall(data[n:])

    def send(self, req, payload=b"", fds=(), flags=FLAG_VERSION):
        self.send_raw(HDR.pack(req, flags, len(payload)) + payload, fds)

    def _recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise Closed(f"backend closed the connection "
                             f"({len(buf)} of {n} bytes read)")
            buf += chunk
        return bytes(buf)

    def recv(self, timeout=None):
        """Read one message from the backend; socket.timeout if none comes."""
        self.sock.settimeout(self.timeout if timeout is None else timeout)
        try:
            req, flags, size = HDR.unpack(self._recv_exact(HDR.size))
            if size > 4096:
                raise VhostUserError(f"reply with a payload of {size} bytes")
            return Message(req, flags, self._recv_exact(size))
        finally:
            self.sock.settimeout(self.timeout)

    def wait_closed(self, timeout=None):
        """True when the backend closes the connection within the timeout,
        False when it sends something instead (or nothing at all)."""
        self.sock.settimeout(self.timeout if timeout is None else timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        finally:
            self.sock.settimeout(self.timeout)

    def reply(self, req):
        msg = self.recv()
        if msg.req != req:
            raise VhostUserError(f"reply to {req_name(req)} is {msg!r}")
        if msg.flags & FLAG_VERSION_MASK != FLAG_VERSION:
            raise VhostUserError(f"reply {msg!r} has a bad version")
        if not msg.flags & FLAG_REPLY:
            raise VhostUserError(f"reply {msg!r} lacks the reply flag")
        return msg.payload

    def _reply_u64(self, req):
        payload = self.reply(req)
        if len(payload) != 8:
            raise VhostUserError(
                f"{req_name(req)} reply is {len(payload)} bytes, not 8")
        return struct.unpack("<Q", payload)[0]

    def get_u64(self, req, payload=b""):
        self.send(req, payload)
        return self._reply_u64(req)

    def ack(self, req, payload=b"", fds=()):
        """Send with need_reply and return the backend's u64 ack (0 = ok)."""
        self.send(req, payload, fds, FLAG_VERSION | FLAG_NEED_REPLY)
        return self._reply_u64(req)

    def set(self, req, payload=b"", fds=()):
        if self.reply_ack and self.use_ack:
            status = self.ack(req, payload, fds)
            if status:
                raise VhostUserError(f"{req_name(req)} refused (ack {status})")
        else:
            self.send(req, payload, fds)

    # --- messages ----------------------------------------------------------

    def get_features(self):
        return self.get_u64(Req.GET_FEATURES)

    def set_features(self, features):
        self.set(Req.SET_FEATURES, struct.pack("<Q", features))

    def get_protocol_features(self):
        return self.get_u64(Req.GET_PROTOCOL_FEATURES)

    def set_protocol_features(self, features):
        # REPLY_ACK is in force only once this message has been handled.
        self.send(Req.SET_PROTOCOL_FEATURES, struct.pack("<Q", features))
        self.reply_ack = bit(features, PROTO_REPLY_ACK)

    def get_queue_num(self):
        return self.get_u64(Req.GET_QUEUE_NUM)

    def set_owner(self):
        self.set(Req.SET_OWNER)

    def reset_owner(self):
        self.set(Req.RESET_OWNER)

    def reset_device(self):
        self.set(Req.RESET_DEVICE)

    @staticmethod
    def mem_table_payload(regions, nregions=None):
        """regions: (gpa, size, userspace_addr, mmap_offset) tuples."""
        n = len(regions) if nregions is None else nregions
        return struct.pack("<II", n, 0) + b"".join(
            MEM_REGION.pack(*r) for r in regions)

    def set_mem_table(self, regions, fds):
        self.set(Req.SET_MEM_TABLE, self.mem_table_payload(regions), fds)

    @staticmethod
    def state(index, num):
        return struct.pack("<II", index, num)

    def set_vring_num(self, index, num):
        self.set(Req.SET_VRING_NUM, self.state(index, num))

    def set_vring_base(self, index, base):
        self.set(Req.SET_VRING_BASE, self.state(index, base))

    def get_vring_base(self, index):
        self.send(Req.GET_VRING_BASE, self.state(index, 0))
        payload = self.reply(Req.GET_VRING_BASE)
        if len(payload) != 8:
            raise VhostUserError(
                f"GET_VRING_BASE reply is {len(payload)} bytes")
        got, base = struct.unpack("<II", payload)
        if got != index:
            raise VhostUserError(f"GET_VRING_BASE {index} answered for {got}")
        return base

    @staticmethod
    def vring_addr(index, desc, used, avail, flags=0, log=0):
        return struct.pack("<IIQQQQ", index, flags, desc, used, avail, log)

    def set_vring_addr(self, index, desc, used, avail, flags=0, log=0):
        self.set(Req.SET_VRING_ADDR,
                 self.vring_addr(index, desc, used, avail, flags, log))

    def _vring_fd(self, req, index, fd):
        if fd is None:
            self.set(req, struct.pack("<Q", index | VRING_NOFD))
        else:
            self.set(req, struct.pack("<Q", index), [fd])

    def set_vring_kick(self, index, fd):
        self._vring_fd(Req.SET_VRING_KICK, index, fd)

    def set_vring_call(self, index, fd):
        self._vring_fd(Req.SET_VRING_CALL, index, fd)

    def set_vring_enable(self, index, enable):
        self.set(Req.SET_VRING_ENABLE, self.state(index, int(enable)))

    def get_config(self, offset=0, size=60, flags=0):
        """The device config space; raises on an error reply (no bytes)."""
        self.send(Req.GET_CONFIG,
                  CONFIG_HDR.pack(offset, size, flags) + bytes(size))
        payload = self.reply(Req.GET_CONFIG)
        if len(payload) != CONFIG_HDR.size + size:
            raise VhostUserError(
                f"GET_CONFIG reply is {len(payload)} bytes, wanted "
                f"{CONFIG_HDR.size + size}")
        return payload[CONFIG_HDR.size:]


# --- guest memory ------------------------------------------------------------

class Region:
    def __init__(self, gpa, size, uaddr, offset):
        self.gpa, self.size, self.uaddr, self.offset = gpa, size, uaddr, offset
        self.free = [(gpa, gpa + size)]  # sorted, coalesced extents

    def contains(self, gpa, length):
        return self.gpa <= gpa and gpa + length <= self.gpa + self.size


# Two regions of one memfd, far apart in both address spaces, so that a
# backend that confuses guest-physical addresses, VMM addresses and file
# offsets reads the wrong bytes or nothing at all.
DEFAULT_REGIONS = (
    (0, 32 * MiB, 0x7F0000000000, 0),
    (4 * GiB, 32 * MiB, 0x7F1000000000, 32 * MiB),
)


class GuestMemory:
    """Guest RAM: a memfd mapped here, offered to the backend as regions.

    The frontend touches memory through its own mapping by guest-physical
    address; the userspace addresses exist only for the backend to
    translate SET_VRING_ADDR with. alloc() hands out aligned buffers,
    alternating between regions unless told which.
    """

    def __init__(self, regions=DEFAULT_REGIONS, name="vub-guest-ram"):
        self.regions = [Region(*r) for r in regions]
        self.size = max(r.offset + r.size for r in self.regions)
        self.fd = os.memfd_create(name, os.MFD_CLOEXEC)
        os.ftruncate(self.fd, self.size)
        self.map = mmap.mmap(self.fd, self.size, mmap.MAP_SHARED,
                             mmap.PROT_READ | mmap.PROT_WRITE)
        # Ring indexes are read and written while the backend works on them:
        # through this view each is one 16-bit load or store, never two
        # byte accesses that could tear (struct.pack_into writes bytes).
        self.u16 = memoryview(self.map).cast("H")
        self.sizes = {}
        self.next_region = 0

    def close(self):
        if self.fd is not None:
            self.u16.release()
            self.map.close()
            os.close(self.fd)
            self.fd = None

    def table(self):
        return [(r.gpa, r.size, r.uaddr, r.offset) for r in self.regions]

    def fds(self):
        return [self.fd] * len(self.regions)

    def region(self, gpa, length=1):
        for r in self.regions:
            if r.contains(gpa, length):
                return r
        raise ValueError(f"gpa {gpa:#x}+{length:#x} is not guest memory")

    def offset(self, gpa, length=1):
        r = self.region(gpa, length)
        return r.offset + gpa - r.gpa

    def uaddr(self, gpa, length=1):
        r = self.region(gpa, length)
        return r.uaddr + gpa - r.gpa

    def read(self, gpa, length):
        off = self.offset(gpa, length)
        return self.map[off:off + length]

    def write(self, gpa, data):
        off = self.offset(gpa, len(data))
        self.map[off:off + len(data)] = data

    def read16(self, gpa):
        return self.u16[self.offset(gpa, 2) // 2]

    def write16(self, gpa, value):
        self.u16[self.offset(gpa, 2) // 2] = value & 0xFFFF

    def fill(self, gpa, length, byte):
        self.write(gpa, bytes([byte]) * length)

    def alloc(self, size, align=4096, region=None):
        if region is None:
            region = self.next_region
            self.next_region = (self.next_region + 1) % len(self.regions)
        r = self.regions[region]
        for i, (start, end) in enumerate(r.free):
            gpa = (start + align - 1) // align * align
            if gpa + size <= end:
                pieces = [(s, e) for s, e in ((start, gpa), (gpa + size, end))
                          if e > s]
                r.free[i:i + 1] = pieces
                self.sizes[gpa] = size
                return gpa
        raise MemoryError(f"no {size} bytes free in region {region}")

    def free(self, gpa):
        size = self.sizes.pop(gpa)
        r = self.region(gpa, size)
        extents = sorted(r.free + [(gpa, gpa + size)])
        merged = [extents[0]]
        for start, end in extents[1:]:
            if start == merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
            else:
                merged.append((start, end))
        r.free = merged


# --- split virtqueue ---------------------------------------------------------

DESC = struct.Struct("<QIHH")  # addr, len, flags, next
DESC_F_NEXT = 1
DESC_F_WRITE = 2
DESC_F_INDIRECT = 4
USED_F_NO_NOTIFY = 1
USED_ELEM = struct.Struct("<II")

# A full memory barrier between our ring stores and the loads that decide
# whether to kick (or to sleep). Taking an uncontended lock is an atomic
# read-modify-write (lock cmpxchg on x86), which x86 orders like mfence.
_barrier_lock = threading.Lock()


def barrier():
    with _barrier_lock:
        pass


def need_event(event, new, old):
    """vring_need_event() from the virtio spec."""
    return (new - event - 1) & 0xFFFF < (new - old) & 0xFFFF


class Virtqueue:
    """A split virtqueue (virtio 1.x layout) in guest memory.

    Descriptor table, available and used ring each start on their own page
    of region 1 (or `region`). `base` starts the free-running indexes
    somewhere other than 0, as after a migration, to exercise wrap-around.
    """

    def __init__(self, mem, index, size=128, event_idx=False, base=0,
                 region=1):
        if size & (size - 1) or not 0 < size <= 32768:
            raise ValueError(f"bad ring size {size}")
        self.mem, self.index, self.size = mem, index, size
        self.event_idx = event_idx
        self.desc = mem.alloc(16 * size, 4096, region)
        self.avail = mem.alloc(6 + 2 * size, 4096, region)
        self.used = mem.alloc(6 + 8 * size, 4096, region)
        mem.fill(self.desc, 16 * size, 0)
        mem.fill(self.avail, 6 + 2 * size, 0)
        mem.fill(self.used, 6 + 8 * size, 0)
        self.avail_idx = self.last_used = self.kicked_idx = base & 0xFFFF
        self._w16(self.avail + 2, self.avail_idx)
        self._w16(self.used + 2, self.avail_idx)
        # As a device that has caught up with `base` would have left them.
        self._w16(self.avail + 4 + 2 * size, self.avail_idx)  # used_event
        self._w16(self.used + 4 + 8 * size, self.avail_idx)   # avail_event
        self.published = 0  # avail entries made available since creation
        self.free_desc = list(range(size))
        self.pending = {}  # head -> (token, descriptor ids, indirect table)
        self.kick_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.call_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)

    def close(self):
        for fd in (self.kick_fd, self.call_fd):
            os.close(fd)
        self.kick_fd = self.call_fd = None

    def free_ring_memory(self):
        """Only when no backend can touch the rings any more."""
        for gpa in (self.desc, self.avail, self.used):
            self.mem.free(gpa)

    def addresses(self):
        """(desc, used, avail) as the VMM's userspace addresses."""
        return (self.mem.uaddr(self.desc, 16 * self.size),
                self.mem.uaddr(self.used, 6 + 8 * self.size),
                self.mem.uaddr(self.avail, 6 + 2 * self.size))

    def _r16(self, gpa):
        return self.mem.read16(gpa)

    def _w16(self, gpa, value):
        self.mem.write16(gpa, value)

    def used_idx(self):
        return self._r16(self.used + 2)

    def avail_event(self):
        return self._r16(self.used + 4 + 8 * self.size)

    def _write_desc(self, gpa, segments):
        for i, (addr, length, writable) in enumerate(segments):
            flags = (DESC_F_WRITE if writable else 0)
            nxt = 0
            if i + 1 < len(segments):
                flags |= DESC_F_NEXT
                nxt = i + 1
            self.mem.write(gpa + 16 * i, DESC.pack(addr, length, flags, nxt))

    def add(self, segments, token, indirect=False):
        """Make a chain of (gpa, length, device_writable) available.

        Returns the head; the chain is not kicked (see kick()).
        """
        if indirect:
            table = self.mem.alloc(16 * len(segments), 16)
            self._write_desc(table, segments)
            chain = [(table, 16 * len(segments), DESC_F_INDIRECT)]
        else:
            table = None
            chain = [(a, n, DESC_F_WRITE if w else 0) for a, n, w in segments]
        if len(chain) > len(self.free_desc):
            if table is not None:
                self.mem.free(table)
            raise VhostUserError(
                f"vring {self.index}: {len(chain)} descriptors wanted, "
                f"{len(self.free_desc)} free")
        ids = [self.free_desc.pop() for _ in chain]
        for i, (addr, length, flags) in enumerate(chain):
            nxt = 0
            if i + 1 < len(chain):
                flags |= DESC_F_NEXT
                nxt = ids[i + 1]
            self.mem.write(self.desc + 16 * ids[i],
                           DESC.pack(addr, length, flags, nxt))
        return self._publish(ids, token, table)

    def add_descs(self, descs, token):
        """Make a hand-made chain available (for malformed rings): `descs`
        are (addr, length, flags, next) written as they are, except that a
        `next` that is a position in `descs` is translated to the
        descriptor id that entry got (any other value is written as it
        is). descs[0] is the head. Returns the head; not kicked."""
        if len(descs) > len(self.free_desc):
            raise VhostUserError(
                f"vring {self.index}: {len(descs)} descriptors wanted, "
                f"{len(self.free_desc)} free")
        ids = [self.free_desc.pop() for _ in descs]
        for i, (addr, length, flags, nxt) in enumerate(descs):
            self.mem.write(self.desc + 16 * ids[i],
                           DESC.pack(addr, length, flags,
                                     ids[nxt] if 0 <= nxt < len(ids)
                                     else nxt))
        return self._publish(ids, token, None)

    def _publish(self, ids, token, table):
        """Put the chain headed by ids[0] in the avail ring."""
        head = ids[0]
        self.pending[head] = (token, ids, table)
        self._w16(self.avail + 4 + 2 * (self.avail_idx % self.size), head)
        self.avail_idx = (self.avail_idx + 1) & 0xFFFF
        # x86 keeps stores in order: the ring entry and descriptors are
        # visible before the index that publishes them.
        self._w16(self.avail + 2, self.avail_idx)
        self.published += 1
        return head

    def kick(self, force=False):
        """Notify the backend of what add() published, unless it said it
        does not need to know (avail_event or VRING_USED_F_NO_NOTIFY)."""
        barrier()
        new, old = self.avail_idx, self.kicked_idx
        if new == old and not force:
            return False
        if self.event_idx:
            needed = need_event(self.avail_event(), new, old)
        else:
            needed = not self._r16(self.used) & USED_F_NO_NOTIFY
        self.kicked_idx = new
        if needed or force:
            os.eventfd_write(self.kick_fd, 1)
        return needed or force

    def poll(self):
        """Collect completions: [(token, used length)]."""
        done = []
        idx = self.used_idx()
        if (idx - self.last_used) & 0xFFFF > len(self.pending):
            raise VhostUserError(
                f"vring {self.index}: used idx {idx} is "
                f"{(idx - self.last_used) & 0xFFFF} ahead of {self.last_used} "
                f"with {len(self.pending)} requests pending")
        while self.last_used != idx:
            slot = self.used + 4 + 8 * (self.last_used % self.size)
            head, length = USED_ELEM.unpack(self.mem.read(slot, 8))
            if head not in self.pending:
                raise VhostUserError(
                    f"vring {self.index}: used ring returned head {head}, "
                    "which is not pending")
            token, ids, table = self.pending.pop(head)
            self.free_desc.extend(ids)
            if table is not None:
                self.mem.free(table)
            self.last_used = (self.last_used + 1) & 0xFFFF
            done.append((token, length))
        return done

    def arm(self):
        """Ask for a call on the next completion; True if one came already."""
        if self.event_idx:
            self._w16(self.avail + 4 + 2 * self.size, self.last_used)
        barrier()
        return self.used_idx() != self.last_used


def wait_any(vqs, timeout=TIMEOUT):
    """Wait until some of `vqs` complete requests: [(vq, token, length)]."""
    deadline = time.monotonic() + timeout
    while True:
        done = [(vq, t, n) for vq in vqs for t, n in vq.poll()]
        if done:
            return done
        if any([vq.arm() for vq in vqs]):
            continue
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(
                "no completion within %.1f s on vrings %s (pending %s)" % (
                    timeout, [vq.index for vq in vqs],
                    [len(vq.pending) for vq in vqs]))
        ready, _, _ = select.select([vq.call_fd for vq in vqs], [], [], left)
        for fd in ready:
            try:
                os.eventfd_read(fd)
            except BlockingIOError:
                pass


# --- a device of any type ----------------------------------------------------

class Device:
    """A virtio device behind a vhost-user connection, set up as QEMU does
    it, with nothing of a device type: `want` is the virtio features the
    driver accepts (the negotiated ones are in `features`), `want_protocol`
    likewise, `queues` the vrings wanted. Subclasses add the device's own
    messages (configure()) and requests.

    A request is any object with chain(), its (gpa, length,
    device_writable) segments, and complete(used_len); submit() sets its
    .queue, the vring index.
    """

    def __init__(self, path, queues=1, queue_size=128, want=0,
                 want_protocol=0, timeout=TIMEOUT, mem=None):
        self.path = path
        self.queues_wanted = queues
        self.queue_size = queue_size
        self.want = want
        self.want_protocol = want_protocol
        self.timeout = timeout
        self.own_mem = mem is None
        self.mem = GuestMemory() if mem is None else mem
        self.conn = Connection(path, timeout)
        self.vqs = []
        self.features = self.offered = 0
        self.protocol = self.offered_protocol = 0
        self.queue_num = 1
        self.nqueues = 0

    def close(self):
        """Close the socket; the rings and memory stay (the backend may still
        be writing into them) until the memory is closed."""
        self.conn.close()
        for vq in self.vqs:
            if vq.kick_fd is not None:
                vq.close()
        if self.own_mem:
            self.mem.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def has(self, feature):
        return bit(self.features, feature)

    # --- control path ------------------------------------------------------

    def negotiate(self, early_features=False):
        """QEMU 7.2's order (vhost_user_backend_init, vhost_dev_init, then
        the device's realize). SET_FEATURES waits for start(), unless
        `early_features` also sends it right after GET_FEATURES."""
        c = self.conn
        self.offered = c.get_features()
        self.features = (self.offered & self.want) | (
            self.offered & 1 << F_PROTOCOL_FEATURES)
        if early_features:
            c.set_features(self.features)
        if bit(self.offered, F_PROTOCOL_FEATURES):
            self.offered_protocol = c.get_protocol_features()
            self.protocol = self.offered_protocol & self.want_protocol
            c.set_protocol_features(self.protocol)
        if bit(self.protocol, PROTO_MQ):
            self.queue_num = c.get_queue_num()
        c.set_owner()
        self.configure()
        self.nqueues = self.queue_count()

    def configure(self):
        """The device type's messages after SET_OWNER (GET_CONFIG...)."""

    def queue_count(self):
        """The vrings to set up: as many as wanted, at most GET_QUEUE_NUM's
        answer (1 without MQ)."""
        return min(self.queues_wanted, self.queue_num)

    def _send_ring(self, vq, base):
        c = self.conn
        c.set_vring_num(vq.index, vq.size)
        c.set_vring_base(vq.index, base)
        c.set_vring_addr(vq.index, *vq.addresses())
        c.set_vring_kick(vq.index, vq.kick_fd)
        c.set_vring_call(vq.index, vq.call_fd)

    def start(self, bases=None, base=0):
        """SET_FEATURES, SET_MEM_TABLE and the vrings, as QEMU's
        vhost_dev_start does (also after a stop or a reset).

        With `bases` the existing rings restart from those indexes (after
        stop()); otherwise fresh rings are made, starting at `base`.
        """
        c = self.conn
        c.set_features(self.features)
        c.set_mem_table(self.mem.table(), self.mem.fds())
        if bases is None:
            self.vqs = [Virtqueue(self.mem, i, self.queue_size,
                                  self.has(F_RING_EVENT_IDX), base)
                        for i in range(self.nqueues)]
            bases = [base] * self.nqueues
        for vq, b in zip(self.vqs, bases):
            self._send_ring(vq, b)
        if bit(self.features, F_PROTOCOL_FEATURES):
            for vq in self.vqs:
                c.set_vring_enable(vq.index, True)

    def setup(self, base=0, early_features=False):
        self.negotiate(early_features=early_features)
        self.start(base=base)

    def stop(self):
        """Disable every vring and read back its base (QEMU's vhost stop)."""
        if bit(self.features, F_PROTOCOL_FEATURES):
            for vq in self.vqs:
                self.conn.set_vring_enable(vq.index, False)
        return [self.conn.get_vring_base(vq.index) for vq in self.vqs]

    def restart(self, bases):
        self.start(bases=bases)

    def stop_ring(self, index):
        """stop() for one vring: disable it, return its base."""
        if bit(self.features, F_PROTOCOL_FEATURES):
            self.conn.set_vring_enable(index, False)
        return self.conn.get_vring_base(index)

    def restart_ring(self, index, base):
        """Give one vring stopped by stop_ring() back, from `base`."""
        self._send_ring(self.vqs[index], base)
        if bit(self.features, F_PROTOCOL_FEATURES):
            self.conn.set_vring_enable(index, True)

    def reset(self, use_reset_device=None):
        """RESET_DEVICE when negotiated (or asked), else RESET_OWNER, then
        forget the rings (their memory stays allocated)."""
        if use_reset_device is None:
            use_reset_device = bit(self.protocol, PROTO_RESET_DEVICE)
        if use_reset_device:
            self.conn.reset_device()
        else:
            self.conn.reset_owner()
        for vq in self.vqs:
            vq.close()
        self.vqs = []

    # --- data path ---------------------------------------------------------

    def submit(self, req, queue=0, indirect=False, kick=True):
        req.queue = queue
        self.vqs[queue].add(req.chain(), req, indirect)
        if kick:
            self.vqs[queue].kick()
        return req

    def run(self, reqs, indirect=False, depth=None):
        """Submit `reqs` (each with .queue set), at most `depth` in flight
        per queue, and wait for all of them; returns reqs."""
        by_queue = {}
        for r in reqs:
            by_queue.setdefault(r.queue, []).append(r)
        inflight = {q: 0 for q in by_queue}
        left = {q: list(rs) for q, rs in by_queue.items()}
        done = 0
        deadline = time.monotonic() + self.timeout
        while done < len(reqs):
            for q, rs in left.items():
                while rs and (depth is None or inflight[q] < depth):
                    self.submit(rs.pop(0), q, indirect, kick=False)
                    inflight[q] += 1
                self.vqs[q].kick()
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                raise TimeoutError(
                    f"{len(reqs) - done} requests not completed")
            for vq, req, length in wait_any(
                    [self.vqs[q] for q in by_queue], left_s):
                req.complete(length)
                inflight[vq.index] -= 1
                done += 1
            deadline = time.monotonic() + self.timeout
        return reqs


# --- virtio-blk --------------------------------------------------------------

T_IN = 0
T_OUT = 1
T_FLUSH = 4
T_GET_ID = 8
T_DISCARD = 11
T_WRITE_ZEROES = 13
S_OK = 0
S_IOERR = 1
S_UNSUPP = 2
STATUS_NAMES = {S_OK: "OK", S_IOERR: "IOERR", S_UNSUPP: "UNSUPP"}
OUTHDR = struct.Struct("<IIQ")  # type, ioprio, sector
DISCARD_SEG = struct.Struct("<QII")  # sector, num_sectors, flags
WZ_F_UNMAP = 1
SECTOR = 512
ID_BYTES = 20
STATUS_UNSET = 0xFF


def status_name(status):
    return STATUS_NAMES.get(status, f"status {status}")


class BlkConfig:
    """struct virtio_blk_config (the first 60 bytes)."""
    SIZE = 60
    FIELDS = (  # name, offset, struct format
        ("capacity", 0, "Q"), ("size_max", 8, "I"), ("seg_max", 12, "I"),
        ("cylinders", 16, "H"), ("heads", 18, "B"), ("sectors", 19, "B"),
        ("blk_size", 20, "I"), ("physical_block_exp", 24, "B"),
        ("alignment_offset", 25, "B"), ("min_io_size", 26, "H"),
        ("opt_io_size", 28, "I"), ("writeback", 32, "B"),
        ("num_queues", 34, "H"), ("max_discard_sectors", 36, "I"),
        ("max_discard_seg", 40, "I"), ("discard_sector_alignment", 44, "I"),
        ("max_write_zeroes_sectors", 48, "I"),
        ("max_write_zeroes_seg", 52, "I"), ("write_zeroes_may_unmap", 56, "B"),
    )

    def __init__(self, raw):
        for name, off, fmt in self.FIELDS:
            setattr(self, name, struct.unpack_from("<" + fmt, raw, off)[0])

    def __repr__(self):
        return "BlkConfig(%s)" % ", ".join(
            f"{n}={getattr(self, n)}" for n, _, _ in self.FIELDS)


class BlkRequest:
    """One virtio-blk request and the guest buffers it owns.

    Data lives in `nseg` 4096-aligned buffers alternating between the two
    regions (the kernel backend does direct I/O straight into them).
    """

    def __init__(self, mem, rtype, sector=0, nbytes=0, nseg=1, data=None,
                 payload=None):
        self.mem, self.type, self.sector = mem, rtype, sector
        self.status = None
        self.used_len = None
        self.hdr = mem.alloc(OUTHDR.size, 64)
        mem.write(self.hdr, OUTHDR.pack(rtype, 0, sector))
        self.status_gpa = mem.alloc(1, 64)
        mem.write(self.status_gpa, bytes([STATUS_UNSET]))
        self.segs = []  # (gpa, length)
        if payload is not None:  # discard / write zeroes segments
            gpa = mem.alloc(len(payload), 64)
            mem.write(gpa, payload)
            self.segs.append((gpa, len(payload)))
        elif nbytes:
            if nbytes % nseg:
                raise ValueError(f"{nbytes} bytes do not split in {nseg}")
            for _ in range(nseg):
                self.segs.append((mem.alloc(nbytes // nseg, 4096),
                                  nbytes // nseg))
        self.nbytes = sum(n for _, n in self.segs)
        if data is not None:
            self.set_data(data)
        elif nbytes:  # so that a read that writes nothing shows
            for gpa, n in self.segs:
                mem.fill(gpa, n, 0xA5)

    def device_writes_data(self):
        return self.type in (T_IN, T_GET_ID)

    def writable(self):
        """Bytes the device may write: the used length's upper bound."""
        return (self.nbytes if self.device_writes_data() else 0) + 1

    def chain(self):
        w = self.device_writes_data()
        return ([(self.hdr, OUTHDR.size, False)] +
                [(g, n, w) for g, n in self.segs] +
                [(self.status_gpa, 1, True)])

    def set_data(self, data):
        if len(data) != self.nbytes:
            raise ValueError(f"{len(data)} bytes for a {self.nbytes}-byte "
                             "request")
        pos = 0
        for gpa, n in self.segs:
            self.mem.write(gpa, data[pos:pos + n])
            pos += n

    def data(self):
        return b"".join(self.mem.read(g, n) for g, n in self.segs)

    def complete(self, used_len):
        self.used_len = used_len
        self.status = self.mem.read(self.status_gpa, 1)[0]

    def release(self):
        for gpa in [self.hdr, self.status_gpa] + [g for g, _ in self.segs]:
            self.mem.free(gpa)
        self.segs = []


class BlkDevice(Device):
    """A virtio-blk device behind a vhost-user connection, set up as QEMU
    does it. `want` is the virtio features the driver accepts; the
    negotiated ones are in `features`."""

    def __init__(self, path, queues=1, queue_size=128, want=BLK_FEATURES,
                 want_protocol=BLK_PROTOCOL_FEATURES, timeout=TIMEOUT,
                 mem=None):
        super().__init__(path, queues, queue_size, want, want_protocol,
                         timeout, mem)
        self.config = None

    def configure(self):
        if bit(self.protocol, PROTO_CONFIG):
            self.config = BlkConfig(self.conn.get_config(0, BlkConfig.SIZE))

    def queue_count(self):
        n = super().queue_count()
        if self.config and self.has(F_BLK_MQ):
            n = min(n, self.config.num_queues)
        return n

    # --- data path ---------------------------------------------------------

    def request(self, rtype, sector=0, nbytes=0, nseg=1, data=None,
                payload=None):
        return BlkRequest(self.mem, rtype, sector, nbytes, nseg, data, payload)

    def do(self, req, queue=0, indirect=False):
        """One request, synchronously; returns its status."""
        req.queue = queue
        self.run([req], indirect)
        return req.status

    def write(self, sector, data, queue=0, nseg=1, indirect=False):
        r = self.request(T_OUT, sector, len(data), nseg, data)
        try:
            return self.do(r, queue, indirect)
        finally:
            r.release()

    def read(self, sector, nbytes, queue=0, nseg=1, indirect=False):
        """Returns (status, data)."""
        r = self.request(T_IN, sector, nbytes, nseg)
        try:
            status = self.do(r, queue, indirect)
            return status, r.data()
        finally:
            r.release()

    def flush(self, queue=0):
        r = self.request(T_FLUSH)
        try:
            return self.do(r, queue)
        finally:
            r.release()

    def get_id(self, queue=0):
        """Returns (status, the 20 ID bytes)."""
        r = self.request(T_GET_ID, nbytes=ID_BYTES)
        try:
            status = self.do(r, queue)
            return status, r.data()
        finally:
            r.release()

    def discard_like(self, rtype, ranges, flags=0, queue=0):
        """DISCARD or WRITE_ZEROES over [(sector, num_sectors)]."""
        payload = b"".join(DISCARD_SEG.pack(s, n, flags) for s, n in ranges)
        r = self.request(rtype, payload=payload)
        try:
            return self.do(r, queue)
        finally:
            r.release()


def pattern(seed, sector, nbytes, gen=0):
    """Bytes that say which run, sector and generation wrote them."""
    out = []
    for s in range(sector, sector + nbytes // SECTOR):
        out.append(struct.pack("<QQQQ", seed, s, gen, seed ^ s ^ gen << 32)
                   * (SECTOR // 32))
    return b"".join(out)


def first_mismatch(got, want):
    """Describe where two byte strings differ (sector granular)."""
    if len(got) != len(want):
        return f"length {len(got)} != {len(want)}"
    for off in range(0, len(want), SECTOR):
        if got[off:off + SECTOR] != want[off:off + SECTOR]:
            g = got[off:off + 32]
            return (f"first difference in sector +{off // SECTOR}: "
                    f"got {g.hex()[:64]}")
    return None
