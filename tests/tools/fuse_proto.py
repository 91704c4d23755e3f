"""FUSE over virtio-fs, the driver's side, on top of vhost_user.py.

The wire format is linux/fuse.h's (protocol 7.38); only what the tests use
is here. Layers:
  structs and parsers  fuse_in_header, fuse_out_header, the op arguments
                       and replies, directory entries
  FuseRequest          one request as one descriptor chain in guest memory:
                       the device-readable part (in header, args, data) and
                       the device-writable part (out header, reply), each
                       split over as many buffers as asked
  FsDevice             a vhost_user.Device with virtio-fs's features: vring
                       0 is the hiprio queue, 1.. the request queues
  Session              unique ids, INIT, and one helper per opcode; each
                       returns the completed FuseRequest with the reply
                       parsed into attributes (entry, attr, open, ...)
"""
import enum
import errno
import os
import struct
import time
from collections import namedtuple

import vhost_user as vu

KERNEL_VERSION = 7
KERNEL_MINOR_VERSION = 38
ROOT_ID = 1


class Op(enum.IntEnum):
    LOOKUP = 1
    FORGET = 2
    GETATTR = 3
    SETATTR = 4
    READLINK = 5
    SYMLINK = 6
    MKNOD = 8
    MKDIR = 9
    UNLINK = 10
    RMDIR = 11
    RENAME = 12
    LINK = 13
    OPEN = 14
    READ = 15
    WRITE = 16
    STATFS = 17
    RELEASE = 18
    FSYNC = 20
    SETXATTR = 21
    GETXATTR = 22
    LISTXATTR = 23
    REMOVEXATTR = 24
    FLUSH = 25
    INIT = 26
    OPENDIR = 27
    READDIR = 28
    RELEASEDIR = 29
    FSYNCDIR = 30
    GETLK = 31
    SETLK = 32
    SETLKW = 33
    ACCESS = 34
    CREATE = 35
    INTERRUPT = 36
    BMAP = 37
    DESTROY = 38
    IOCTL = 39
    POLL = 40
    NOTIFY_REPLY = 41
    BATCH_FORGET = 42
    FALLOCATE = 43
    READDIRPLUS = 44
    RENAME2 = 45
    LSEEK = 46
    COPY_FILE_RANGE = 47
    SETUPMAPPING = 48
    REMOVEMAPPING = 49
    SYNCFS = 50
    TMPFILE = 51


def op_name(opcode):
    try:
        return Op(opcode).name
    except ValueError:
        return f"opcode {opcode}"


# fuse_init_in/out flags (the 32 low bits; flags2 holds bits 32..63).
INIT_ASYNC_READ = 1 << 0
INIT_POSIX_LOCKS = 1 << 1
INIT_ATOMIC_O_TRUNC = 1 << 3
INIT_EXPORT_SUPPORT = 1 << 4
INIT_BIG_WRITES = 1 << 5
INIT_DONT_MASK = 1 << 6
INIT_POSIX_ACL = 1 << 20
SETXATTR_ACL_KILL_SGID = 1 << 0
INIT_AUTO_INVAL_DATA = 1 << 12
INIT_DO_READDIRPLUS = 1 << 13
INIT_READDIRPLUS_AUTO = 1 << 14
INIT_ASYNC_DIO = 1 << 15
INIT_PARALLEL_DIROPS = 1 << 18
INIT_ABORT_ERROR = 1 << 21
INIT_MAX_PAGES = 1 << 22
INIT_CACHE_SYMLINKS = 1 << 23
INIT_EXPLICIT_INVAL_DATA = 1 << 25
INIT_SETXATTR_EXT = 1 << 29
INIT_INIT_EXT = 1 << 30
INIT_WRITEBACK_CACHE = 1 << 16
# flags2 (bits 32.. of the 64-bit flags)
INIT2_CREATE_SUPP_GROUP = 1 << 2
INIT2_DIRECT_IO_ALLOW_MMAP = 1 << 4
# fuse_open_out.open_flags
FOPEN_DIRECT_IO = 1 << 0
FOPEN_KEEP_CACHE = 1 << 1
FOPEN_CACHE_DIR = 1 << 3
# extensions after a request's arguments (fuse_ext_header.type)
EXT_GROUPS = 32


def ext_groups(*gids):
    """A FUSE_EXT_GROUPS extension (fuse_ext_header, fuse_supp_groups),
    padded to 8 bytes as the kernel does."""
    body = struct.pack(f"<I{len(gids)}I", len(gids), *gids)
    size = 8 + len(body) + (-len(body) % 8)
    return struct.pack("<II", size, EXT_GROUPS) + body + \
        bytes(-len(body) % 8)

# What the tests ask for: a Linux guest's usual set, without the flags
# that change what requests carry (SECURITY_CTX extensions, POSIX_ACL,
# WRITEBACK_CACHE's widened opens, KILLPRIV).
INIT_FLAGS = (INIT_ASYNC_READ | INIT_ATOMIC_O_TRUNC | INIT_EXPORT_SUPPORT |
              INIT_BIG_WRITES | INIT_DONT_MASK | INIT_AUTO_INVAL_DATA |
              INIT_DO_READDIRPLUS | INIT_READDIRPLUS_AUTO | INIT_ASYNC_DIO |
              INIT_PARALLEL_DIROPS | INIT_ABORT_ERROR | INIT_MAX_PAGES |
              INIT_CACHE_SYMLINKS | INIT_EXPLICIT_INVAL_DATA |
              INIT_SETXATTR_EXT | INIT_INIT_EXT)

# fuse_setattr_in.valid
FATTR_MODE = 1 << 0
FATTR_UID = 1 << 1
FATTR_GID = 1 << 2
FATTR_SIZE = 1 << 3
FATTR_ATIME = 1 << 4
FATTR_MTIME = 1 << 5
FATTR_FH = 1 << 6
FATTR_ATIME_NOW = 1 << 7
FATTR_MTIME_NOW = 1 << 8

FSYNC_FDATASYNC = 1 << 0
GETATTR_FH = 1 << 0

# renameat2(2) flags (linux/fs.h)
RENAME_NOREPLACE = 1 << 0
RENAME_EXCHANGE = 1 << 1

# --- wire structs ------------------------------------------------------------

IN_HDR = struct.Struct("<IIQQIIIHH")  # len opcode unique nodeid uid gid pid
#                                       total_extlen padding
OUT_HDR = struct.Struct("<IiQ")  # len error unique
ATTR = struct.Struct("<QQQQQQIIIIIIIIII")
ENTRY_OUT_HEAD = struct.Struct("<QQQQII")  # nodeid generation entry_valid
#                                            attr_valid (+ their nsec)
ENTRY_OUT_SIZE = ENTRY_OUT_HEAD.size + ATTR.size  # 128
ATTR_OUT_HEAD = struct.Struct("<QII")  # attr_valid attr_valid_nsec dummy
ATTR_OUT_SIZE = ATTR_OUT_HEAD.size + ATTR.size  # 104
INIT_IN = struct.Struct("<IIIII44x")  # major minor max_readahead flags flags2
INIT_OUT = struct.Struct("<IIIIHHIIHHI28x")
GETATTR_IN = struct.Struct("<IIQ")  # getattr_flags dummy fh
SETATTR_IN = struct.Struct("<IIQQQQQQIIIIIIII")
MKNOD_IN = struct.Struct("<IIII")  # mode rdev umask padding
MKDIR_IN = struct.Struct("<II")  # mode umask
RENAME_IN = struct.Struct("<Q")  # newdir
RENAME2_IN = struct.Struct("<QII")  # newdir flags padding
LINK_IN = struct.Struct("<Q")  # oldnodeid
OPEN_IN = struct.Struct("<II")  # flags open_flags
CREATE_IN = struct.Struct("<IIII")  # flags mode umask open_flags
OPEN_OUT = struct.Struct("<QII")  # fh open_flags padding
RELEASE_IN = struct.Struct("<QIIQ")  # fh flags release_flags lock_owner
FLUSH_IN = struct.Struct("<QIIQ")  # fh unused padding lock_owner
READ_IN = struct.Struct("<QQIIQII")  # fh offset size read_flags lock_owner
#                                      flags padding
WRITE_KILL_SUIDGID = 1 << 2  # fuse_write_in.write_flags
WRITE_IN = struct.Struct("<QQIIQII")  # fh offset size write_flags ...
WRITE_OUT = struct.Struct("<II")  # size padding
KSTATFS = struct.Struct("<QQQQQIIII24x")  # blocks bfree bavail files ffree
#                                           bsize namelen frsize padding
FSYNC_IN = struct.Struct("<QII")  # fh fsync_flags padding
SETXATTR_IN = struct.Struct("<IIII")  # size flags setxattr_flags padding
SETXATTR_IN_COMPAT = struct.Struct("<II")  # size flags (no SETXATTR_EXT)
GETXATTR_IN = struct.Struct("<II")  # size padding
GETXATTR_OUT = struct.Struct("<II")  # size padding
ACCESS_IN = struct.Struct("<II")  # mask padding
FORGET_IN = struct.Struct("<Q")  # nlookup
FORGET_ONE = struct.Struct("<QQ")  # nodeid nlookup
BATCH_FORGET_IN = struct.Struct("<II")  # count dummy
FALLOCATE_IN = struct.Struct("<QQQII")  # fh offset length mode padding
LSEEK_IN = struct.Struct("<QQII")  # fh offset whence padding
LSEEK_OUT = struct.Struct("<Q")
SYNCFS_IN = struct.Struct("<Q")
DIRENT = struct.Struct("<QQII")  # ino off namelen type

Attr = namedtuple("Attr", "ino size blocks atime mtime ctime atimensec "
                  "mtimensec ctimensec mode nlink uid gid rdev blksize flags")
Entry = namedtuple("Entry", "nodeid generation entry_valid attr_valid "
                   "entry_valid_nsec attr_valid_nsec attr")
InitOut = namedtuple("InitOut", "major minor max_readahead flags "
                     "max_background congestion_threshold max_write "
                     "time_gran max_pages map_alignment flags2")
OpenOut = namedtuple("OpenOut", "fh open_flags")
Kstatfs = namedtuple("Kstatfs", "blocks bfree bavail files ffree bsize "
                     "namelen frsize")
Dirent = namedtuple("Dirent", "ino off type name entry")


def cstr(name):
    """A name as FUSE sends it: bytes with the terminating NUL."""
    if isinstance(name, str):
        name = name.encode()
    return name + b"\0"


def parse_attr(buf):
    return Attr(*ATTR.unpack_from(buf))


def parse_entry(buf):
    head = ENTRY_OUT_HEAD.unpack_from(buf)
    return Entry(*head, parse_attr(buf[ENTRY_OUT_HEAD.size:]))


def parse_attr_out(buf):
    return parse_attr(buf[ATTR_OUT_HEAD.size:])


def parse_dirents(buf, plus=False):
    """READDIR(PLUS) reply records; raises ValueError on a bad record."""
    out = []
    pos = 0
    while pos < len(buf):
        entry = None
        if plus:
            if pos + ENTRY_OUT_SIZE > len(buf):
                raise ValueError(f"direntplus at {pos} cut short")
            entry = parse_entry(buf[pos:pos + ENTRY_OUT_SIZE])
            pos += ENTRY_OUT_SIZE
        if pos + DIRENT.size > len(buf):
            raise ValueError(f"dirent at {pos} cut short")
        ino, off, namelen, dtype = DIRENT.unpack_from(buf, pos)
        end = pos + DIRENT.size + namelen
        if namelen == 0 or end > len(buf):
            raise ValueError(f"dirent at {pos}: name length {namelen}")
        name = bytes(buf[pos + DIRENT.size:end]).decode(errors="replace")
        out.append(Dirent(ino, off, dtype, name, entry))
        pos = (end + 7) & ~7
    return out


# --- one request -------------------------------------------------------------

def split_sizes(total, split):
    """Buffer sizes for `total` bytes: None = one buffer, an int = pieces
    of that size, a list = those sizes (plus one for any remainder)."""
    if total == 0:
        return []
    if split is None:
        return [total]
    if isinstance(split, int):
        return [min(split, total - p) for p in range(0, total, split)]
    sizes = [n for n in split if n]
    rest = total - sum(sizes)
    if rest < 0:
        raise ValueError(f"split {split} is more than {total} bytes")
    return sizes + ([rest] if rest else [])


class FuseRequest:
    """One FUSE request as one descriptor chain.

    `readable` is what the device reads (in header, args, data), `out_size`
    the bytes it may write (out header and reply). By default each part is
    split as Linux's virtio-fs driver does: header plus args in one buffer,
    data in another (in_split/out_split None); an int splits the data (or
    the reply after the out header) into buffers of that size; a list gives
    every buffer's size from the first byte. Buffers alternate between the
    guest memory regions. The writable ones start filled with 0xA5.

    After complete(): used_len, and when the device wrote an out header,
    out_len, error, out_unique and body (the reply after the header).
    """

    def __init__(self, mem, readable, out_size, in_split=None, out_split=None,
                 head_len=None, unique=0, opcode=0):
        self.mem = mem
        self.readable = bytes(readable)
        self.out_size = out_size
        self.unique, self.opcode = unique, opcode
        self.used_len = self.out_len = self.error = self.out_unique = None
        self.body = b""
        self.queue = None
        head = len(self.readable) if head_len is None else head_len
        if isinstance(in_split, int):
            in_sizes = [head] + split_sizes(len(self.readable) - head,
                                            in_split)
        elif in_split is None:
            in_sizes = split_sizes(len(self.readable), [head])
        else:
            in_sizes = split_sizes(len(self.readable), in_split)
        if isinstance(out_split, int):
            first = min(OUT_HDR.size, out_size)
            out_sizes = split_sizes(first, None) + split_sizes(
                out_size - first, out_split)
        elif out_split is None:
            out_sizes = split_sizes(out_size, [min(OUT_HDR.size, out_size)])
        else:
            out_sizes = split_sizes(out_size, out_split)
        self.owned = []  # guest buffers to free
        self.segs = []   # the chain: (gpa, length, device_writable)
        pos = 0
        for n in in_sizes:
            gpa = self._alloc(n)
            mem.write(gpa, self.readable[pos:pos + n])
            self.segs.append((gpa, n, False))
            pos += n
        for n in out_sizes:
            gpa = self._alloc(n)
            mem.fill(gpa, n, 0xA5)
            self.segs.append((gpa, n, True))

    def _alloc(self, n):
        gpa = self.mem.alloc(n, 4096 if n >= 4096 else 8)
        self.owned.append(gpa)
        return gpa

    def chain(self):
        return list(self.segs)

    def writable(self):
        return sum(n for _, n, w in self.segs if w)

    def out_bytes(self):
        return b"".join(self.mem.read(g, n) for g, n, w in self.segs if w)

    def complete(self, used_len):
        """Parse the reply and give the guest buffers back."""
        self.used_len = used_len
        self.completed_at = time.monotonic()
        out = self.out_bytes()
        if used_len >= OUT_HDR.size and len(out) >= OUT_HDR.size:
            self.out_len, self.error, self.out_unique = OUT_HDR.unpack_from(
                out)
            self.body = out[OUT_HDR.size:min(self.out_len, used_len,
                                             len(out))]
        self.release()

    def release(self):
        for gpa in self.owned:
            self.mem.free(gpa)
        self.owned = []

    def problem(self):
        """What is wrong with the reply as a reply to this request (None if
        nothing): used length = out header len <= writable, same unique,
        an error reply has no body."""
        if self.used_len is None:
            return "not completed"
        if self.out_len is None:
            return f"no out header (used length {self.used_len})"
        if self.used_len != self.out_len:
            return (f"used length {self.used_len} != out header len "
                    f"{self.out_len}")
        if self.out_len > self.writable():
            return f"out len {self.out_len} > {self.writable()} writable"
        if self.out_unique != self.unique:
            return f"unique {self.out_unique} != {self.unique}"
        if not -4095 <= self.error <= 0:
            return f"error {self.error} out of range"
        if self.error and self.out_len != OUT_HDR.size:
            return f"error {self.error} with a {self.out_len}-byte reply"
        return None

    def errname(self):
        if self.error is None:
            return f"no reply (used length {self.used_len})"
        if self.error == 0:
            return "0"
        return f"-{errno_name(-self.error)}"

    def __repr__(self):
        return (f"<{op_name(self.opcode)} unique {self.unique}: "
                f"{self.errname()}>")


def errno_name(e):
    return errno.errorcode.get(e, str(e))


# --- the device --------------------------------------------------------------

FS_FEATURES = sum(1 << b for b in (
    vu.F_RING_INDIRECT_DESC, vu.F_RING_EVENT_IDX, vu.F_VERSION_1))
FS_PROTOCOL_FEATURES = sum(1 << b for b in (
    vu.PROTO_MQ, vu.PROTO_REPLY_ACK, vu.PROTO_RESET_DEVICE))
HIPRIO = 0


class FsDevice(vu.Device):
    """A virtio-fs device: `request_queues` request queues plus the hiprio
    queue (vring 0). Without MQ the backend cannot say how many it has and
    QEMU trusts its own num-request-queues: so do we."""

    def __init__(self, path, request_queues=1, queue_size=512,
                 want=FS_FEATURES, want_protocol=FS_PROTOCOL_FEATURES,
                 timeout=vu.TIMEOUT, mem=None):
        super().__init__(path, 1 + request_queues, queue_size, want,
                         want_protocol, timeout, mem)

    def queue_count(self):
        if vu.bit(self.protocol, vu.PROTO_MQ):
            return super().queue_count()
        return self.queues_wanted


# --- a session ---------------------------------------------------------------

class Session:
    """FUSE requests on an FsDevice. Helpers run one request on `queue`
    (default: the session's) and return it completed, with the reply
    parsed into .entry, .attr, .open, .init, .written, .data, .statfs,
    .xattr_size, .offset or .dirents when the error is 0."""

    def __init__(self, dev, queue=1, uid=0, gid=0):
        self.dev, self.mem, self.queue = dev, dev.mem, queue
        self.uid, self.gid, self.pid = uid, gid, os.getpid()
        self.last_unique = int.from_bytes(os.urandom(2), "little") << 16
        self.init_out = None
        self.setxattr_ext = False

    def next_unique(self):
        self.last_unique += 2  # like Linux: odd ones mark interrupts
        return self.last_unique

    def header(self, opcode, nodeid, length, unique, extlen=0):
        return IN_HDR.pack(length, opcode, unique, nodeid, self.uid,
                           self.gid, self.pid, extlen, 0)

    def request(self, opcode, nodeid=0, args=b"", data=b"", out_size=0,
                in_split=None, out_split=None, length=None, unique=None,
                writable=None, ext=b"", extlen=None):
        """A FuseRequest, not submitted. `out_size` counts the reply after
        the out header (the header is added unless out_size is None, for
        a request with no writable part); `writable` overrides the
        writable bytes altogether. `length` overrides in_header.len (else
        the true readable length). `ext` (extensions, a multiple of 8
        bytes) goes after the arguments, counted in total_extlen unless
        `extlen` overrides it."""
        unique = self.next_unique() if unique is None else unique
        total = IN_HDR.size + len(args) + len(data) + len(ext)
        hdr = self.header(opcode, nodeid, total if length is None else length,
                          unique, len(ext) // 8 if extlen is None else extlen)
        if writable is None:
            writable = 0 if out_size is None else OUT_HDR.size + out_size
        return FuseRequest(self.mem, hdr + args + data + ext, writable,
                           in_split, out_split,
                           head_len=IN_HDR.size + len(args), unique=unique,
                           opcode=opcode)

    def run(self, reqs, queue=None, indirect=False):
        for r in reqs:
            r.queue = self.queue if queue is None else queue
        return self.dev.run(reqs, indirect)

    def call(self, opcode, nodeid=0, args=b"", data=b"", out_size=0,
             queue=None, indirect=False, **kw):
        r = self.request(opcode, nodeid, args, data, out_size, **kw)
        self.run([r], queue, indirect)
        return r

    # --- opcodes, with the reply parsed --------------------------------

    @staticmethod
    def _parse(r, size, parser, attr):
        setattr(r, attr, None)
        if r.error == 0 and len(r.body) >= size:
            setattr(r, attr, parser(r.body))
        return r

    def init(self, minor=KERNEL_MINOR_VERSION, flags=INIT_FLAGS,
             max_readahead=128 * 1024, flags2=0, **kw):
        r = self.call(Op.INIT, 0, INIT_IN.pack(
            KERNEL_VERSION, minor, max_readahead, flags, flags2),
            out_size=INIT_OUT.size, **kw)
        r.init = None
        if r.error == 0 and len(r.body) >= 24:  # FUSE_COMPAT_22_INIT_OUT
            body = r.body + bytes(max(0, INIT_OUT.size - len(r.body)))
            r.init = InitOut(*INIT_OUT.unpack_from(body))
            self.init_out = r.init
            self.setxattr_ext = bool(r.init.flags & flags & INIT_SETXATTR_EXT)
        return r

    def destroy(self, **kw):
        return self.call(Op.DESTROY, 0, **kw)

    def lookup(self, parent, name, **kw):
        r = self.call(Op.LOOKUP, parent, cstr(name), out_size=ENTRY_OUT_SIZE,
                      **kw)
        return self._parse(r, ENTRY_OUT_SIZE, parse_entry, "entry")

    def forget(self, nodeid, nlookup, queue=HIPRIO, **kw):
        """No reply: the chain has no writable part."""
        return self.call(Op.FORGET, nodeid, FORGET_IN.pack(nlookup),
                         out_size=None, queue=queue, **kw)

    def batch_forget(self, pairs, queue=HIPRIO, count=None, **kw):
        args = BATCH_FORGET_IN.pack(len(pairs) if count is None else count,
                                    0)
        args += b"".join(FORGET_ONE.pack(n, c) for n, c in pairs)
        return self.call(Op.BATCH_FORGET, 0, args, out_size=None, queue=queue,
                         **kw)

    def getattr(self, nodeid, fh=None, **kw):
        args = GETATTR_IN.pack(0 if fh is None else GETATTR_FH, 0, fh or 0)
        r = self.call(Op.GETATTR, nodeid, args, out_size=ATTR_OUT_SIZE, **kw)
        return self._parse(r, ATTR_OUT_SIZE, parse_attr_out, "attr")

    def setattr(self, nodeid, valid, fh=0, size=0, atime=(0, 0),
                mtime=(0, 0), mode=0, uid=0, gid=0, **kw):
        """atime and mtime: (seconds, nanoseconds)."""
        args = SETATTR_IN.pack(valid, 0, fh, size, 0, atime[0], mtime[0], 0,
                               atime[1], mtime[1], 0, mode, 0, uid, gid, 0)
        r = self.call(Op.SETATTR, nodeid, args, out_size=ATTR_OUT_SIZE, **kw)
        return self._parse(r, ATTR_OUT_SIZE, parse_attr_out, "attr")

    def readlink(self, nodeid, size=4096, **kw):
        return self.call(Op.READLINK, nodeid, out_size=size, **kw)

    def symlink(self, parent, name, target, **kw):
        r = self.call(Op.SYMLINK, parent, cstr(name) + cstr(target),
                      out_size=ENTRY_OUT_SIZE, **kw)
        return self._parse(r, ENTRY_OUT_SIZE, parse_entry, "entry")

    def mknod(self, parent, name, mode, rdev=0, umask=0, **kw):
        r = self.call(Op.MKNOD, parent,
                      MKNOD_IN.pack(mode, rdev, umask, 0) + cstr(name),
                      out_size=ENTRY_OUT_SIZE, **kw)
        return self._parse(r, ENTRY_OUT_SIZE, parse_entry, "entry")

    def mkdir(self, parent, name, mode, umask=0, **kw):
        r = self.call(Op.MKDIR, parent, MKDIR_IN.pack(mode, umask) +
                      cstr(name), out_size=ENTRY_OUT_SIZE, **kw)
        return self._parse(r, ENTRY_OUT_SIZE, parse_entry, "entry")

    def unlink(self, parent, name, **kw):
        return self.call(Op.UNLINK, parent, cstr(name), **kw)

    def rmdir(self, parent, name, **kw):
        return self.call(Op.RMDIR, parent, cstr(name), **kw)

    def rename(self, parent, name, newparent, newname, **kw):
        return self.call(Op.RENAME, parent, RENAME_IN.pack(newparent) +
                         cstr(name) + cstr(newname), **kw)

    def rename2(self, parent, name, newparent, newname, flags, **kw):
        return self.call(Op.RENAME2, parent,
                         RENAME2_IN.pack(newparent, flags, 0) + cstr(name) +
                         cstr(newname), **kw)

    def link(self, nodeid, newparent, newname, **kw):
        r = self.call(Op.LINK, newparent, LINK_IN.pack(nodeid) +
                      cstr(newname), out_size=ENTRY_OUT_SIZE, **kw)
        return self._parse(r, ENTRY_OUT_SIZE, parse_entry, "entry")

    def _open(self, opcode, nodeid, flags, **kw):
        r = self.call(opcode, nodeid, OPEN_IN.pack(flags, 0),
                      out_size=OPEN_OUT.size, **kw)
        return self._parse(r, OPEN_OUT.size,
                           lambda b: OpenOut(*OPEN_OUT.unpack_from(b)[:2]),
                           "open")

    def open(self, nodeid, flags=os.O_RDONLY, **kw):
        return self._open(Op.OPEN, nodeid, flags, **kw)

    def opendir(self, nodeid, flags=os.O_RDONLY | os.O_DIRECTORY, **kw):
        return self._open(Op.OPENDIR, nodeid, flags, **kw)

    def create(self, parent, name, mode, flags=os.O_RDWR | os.O_CREAT,
               umask=0, **kw):
        r = self.call(Op.CREATE, parent, CREATE_IN.pack(flags, mode, umask, 0)
                      + cstr(name), out_size=ENTRY_OUT_SIZE + OPEN_OUT.size,
                      **kw)
        self._parse(r, ENTRY_OUT_SIZE, parse_entry, "entry")
        return self._parse(
            r, ENTRY_OUT_SIZE + OPEN_OUT.size,
            lambda b: OpenOut(*OPEN_OUT.unpack_from(b, ENTRY_OUT_SIZE)[:2]),
            "open")

    def read(self, nodeid, fh, offset, size, **kw):
        r = self.call(Op.READ, nodeid, READ_IN.pack(fh, offset, size, 0, 0,
                                                    os.O_RDWR, 0),
                      out_size=size, **kw)
        r.data = r.body if r.error == 0 else None
        return r

    def write(self, nodeid, fh, offset, data, write_flags=0, **kw):
        r = self.call(Op.WRITE, nodeid, WRITE_IN.pack(fh, offset, len(data),
                                                      write_flags, 0,
                                                      os.O_RDWR, 0),
                      data, out_size=WRITE_OUT.size, **kw)
        return self._parse(r, WRITE_OUT.size,
                           lambda b: WRITE_OUT.unpack_from(b)[0], "written")

    def statfs(self, nodeid=ROOT_ID, **kw):
        r = self.call(Op.STATFS, nodeid, out_size=KSTATFS.size, **kw)
        return self._parse(r, KSTATFS.size,
                           lambda b: Kstatfs(*KSTATFS.unpack_from(b)[:8]),
                           "statfs")

    def release(self, nodeid, fh, flags=os.O_RDWR, **kw):
        return self.call(Op.RELEASE, nodeid, RELEASE_IN.pack(fh, flags, 0, 0),
                         **kw)

    def releasedir(self, nodeid, fh, **kw):
        return self.call(Op.RELEASEDIR, nodeid,
                         RELEASE_IN.pack(fh, os.O_RDONLY, 0, 0), **kw)

    def fsync(self, nodeid, fh, datasync=False, **kw):
        return self.call(Op.FSYNC, nodeid, FSYNC_IN.pack(
            fh, FSYNC_FDATASYNC if datasync else 0, 0), **kw)

    def fsyncdir(self, nodeid, fh, datasync=False, **kw):
        return self.call(Op.FSYNCDIR, nodeid, FSYNC_IN.pack(
            fh, FSYNC_FDATASYNC if datasync else 0, 0), **kw)

    def flush(self, nodeid, fh, lock_owner=0, **kw):
        return self.call(Op.FLUSH, nodeid,
                         FLUSH_IN.pack(fh, 0, 0, lock_owner), **kw)

    def setxattr(self, nodeid, name, value, flags=0, setxattr_flags=0,
                 **kw):
        if self.setxattr_ext:
            args = SETXATTR_IN.pack(len(value), flags, setxattr_flags, 0)
        else:
            args = SETXATTR_IN_COMPAT.pack(len(value), flags)
        return self.call(Op.SETXATTR, nodeid, args + cstr(name) + value, **kw)

    def _xattr_sized(self, r, size):
        r.xattr_size = r.value = None
        if r.error == 0:
            if size == 0 and len(r.body) >= GETXATTR_OUT.size:
                r.xattr_size = GETXATTR_OUT.unpack_from(r.body)[0]
            elif size:
                r.value = r.body
        return r

    def getxattr(self, nodeid, name, size, **kw):
        r = self.call(Op.GETXATTR, nodeid, GETXATTR_IN.pack(size, 0) +
                      cstr(name), out_size=size or GETXATTR_OUT.size, **kw)
        return self._xattr_sized(r, size)

    def listxattr(self, nodeid, size, **kw):
        r = self.call(Op.LISTXATTR, nodeid, GETXATTR_IN.pack(size, 0),
                      out_size=size or GETXATTR_OUT.size, **kw)
        return self._xattr_sized(r, size)

    def removexattr(self, nodeid, name, **kw):
        return self.call(Op.REMOVEXATTR, nodeid, cstr(name), **kw)

    def _readdir(self, opcode, nodeid, fh, offset, size, **kw):
        r = self.call(opcode, nodeid, READ_IN.pack(fh, offset, size, 0, 0,
                                                   os.O_RDONLY, 0),
                      out_size=size, **kw)
        r.dirents = r.bad_dirents = None
        if r.error == 0:
            try:
                r.dirents = parse_dirents(r.body, opcode == Op.READDIRPLUS)
            except ValueError as e:
                r.bad_dirents = str(e)
        return r

    def readdir(self, nodeid, fh, offset, size, **kw):
        return self._readdir(Op.READDIR, nodeid, fh, offset, size, **kw)

    def readdirplus(self, nodeid, fh, offset, size, **kw):
        return self._readdir(Op.READDIRPLUS, nodeid, fh, offset, size, **kw)

    def access(self, nodeid, mask, **kw):
        return self.call(Op.ACCESS, nodeid, ACCESS_IN.pack(mask, 0), **kw)

    def fallocate(self, nodeid, fh, offset, length, mode=0, **kw):
        return self.call(Op.FALLOCATE, nodeid,
                         FALLOCATE_IN.pack(fh, offset, length, mode, 0), **kw)

    def lseek(self, nodeid, fh, offset, whence, **kw):
        r = self.call(Op.LSEEK, nodeid, LSEEK_IN.pack(fh, offset, whence, 0),
                      out_size=LSEEK_OUT.size, **kw)
        return self._parse(r, LSEEK_OUT.size,
                           lambda b: LSEEK_OUT.unpack_from(b)[0], "offset")

    def syncfs(self, nodeid=ROOT_ID, **kw):
        return self.call(Op.SYNCFS, nodeid, SYNCFS_IN.pack(0), **kw)
