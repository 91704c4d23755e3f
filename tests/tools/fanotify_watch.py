#!/usr/bin/env python3
"""Answer the fanotify permission events of one file, and count them.

    fanotify_watch.py [--pre-content] [--deny] PATH

Puts an inode mark on PATH: FAN_ACCESS_PERM in a FAN_CLASS_CONTENT group
(a read asks first), or with --pre-content FAN_PRE_ACCESS in a
FAN_CLASS_PRE_CONTENT group (a read or a write asks first, with the range
it covers). Prints "ready" once the mark is in place: a file opened after
that asks, one opened before does not (the kernel decides at open whether
anybody listens). Answers every event with FAN_ALLOW, or FAN_DENY with
--deny, and closes the event's file descriptor. On SIGTERM or SIGINT it
prints what it saw and exits 0:

    events N            permission events answered
    pid PID N           of those, per process (thread group id)
    bytes B             the sum of the ranges of pre-content events
    overflow N          queue overflows (events lost), if any

Exits 4, saying why, when the kernel refuses the group or the mark with
EINVAL or EOPNOTSUPP (no permission events, no pre-content events, or a
file system without them), 1 on any other error.
"""
import ctypes
import errno
import os
import signal
import struct
import sys

FAN_CLOEXEC = 0x1
FAN_CLASS_CONTENT = 0x4
FAN_CLASS_PRE_CONTENT = 0x8
FAN_MARK_ADD = 0x1
FAN_ACCESS_PERM = 0x20000
FAN_PRE_ACCESS = 0x100000
FAN_Q_OVERFLOW = 0x4000
FAN_ALLOW, FAN_DENY = 0x1, 0x2
FAN_NOFD = -1
FANOTIFY_METADATA_VERSION = 3
FAN_EVENT_INFO_TYPE_RANGE = 6
AT_FDCWD = -100
O_LARGEFILE = 0o100000

# struct fanotify_event_metadata, struct fanotify_response,
# struct fanotify_event_info_header and fanotify_event_info_range.
METADATA = struct.Struct("=IBBHQii")
RESPONSE = struct.Struct("=iI")
INFO_HEADER = struct.Struct("=BBH")
INFO_RANGE = struct.Struct("=BBHIQQ")


class Stop(Exception):
    """SIGTERM or SIGINT: report and exit."""


def stop(_signum, _frame):
    raise Stop()


def main():
    args = sys.argv[1:]
    pre_content = "--pre-content" in args
    deny = "--deny" in args
    paths = [a for a in args if not a.startswith("--")]
    if len(paths) != 1 or len(paths) + pre_content + deny != len(args):
        sys.exit("usage: fanotify_watch.py [--pre-content] [--deny] PATH")
    path = paths[0]

    libc = ctypes.CDLL(None, use_errno=True)
    libc.fanotify_init.argtypes = (ctypes.c_uint, ctypes.c_uint)
    libc.fanotify_mark.argtypes = (ctypes.c_int, ctypes.c_uint, ctypes.c_uint64,
                                   ctypes.c_int, ctypes.c_char_p)
    klass = FAN_CLASS_PRE_CONTENT if pre_content else FAN_CLASS_CONTENT
    mask = FAN_PRE_ACCESS if pre_content else FAN_ACCESS_PERM
    what = "FAN_PRE_ACCESS" if pre_content else "FAN_ACCESS_PERM"

    def refused(call):
        err = ctypes.get_errno()
        print("%s for %s: %s" % (call, what, os.strerror(err)), flush=True)
        sys.exit(4 if err in (errno.EINVAL, errno.EOPNOTSUPP) else 1)

    fan = libc.fanotify_init(klass | FAN_CLOEXEC, os.O_RDONLY | O_LARGEFILE)
    if fan < 0:
        refused("fanotify_init")
    if libc.fanotify_mark(fan, FAN_MARK_ADD, mask, AT_FDCWD, path.encode()) < 0:
        refused("fanotify_mark")

    answer = FAN_DENY if deny else FAN_ALLOW
    events = overflow = nbytes = 0
    pids = {}
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("ready", flush=True)
    try:
        while True:
            buf = os.read(fan, 65536)
            off = 0
            while off + METADATA.size <= len(buf):
                ev_len, vers, _, meta_len, ev_mask, fd, pid = METADATA.unpack_from(buf, off)
                if vers != FANOTIFY_METADATA_VERSION or ev_len < meta_len:
                    sys.exit("fanotify metadata version %d, length %d: not understood" %
                             (vers, ev_len))
                if ev_mask & FAN_Q_OVERFLOW:
                    overflow += 1
                info = off + meta_len
                while info + INFO_HEADER.size <= off + ev_len:
                    kind, _, rec_len = INFO_HEADER.unpack_from(buf, info)
                    if not rec_len:
                        break
                    if kind == FAN_EVENT_INFO_TYPE_RANGE:
                        nbytes += INFO_RANGE.unpack_from(buf, info)[5]
                    info += rec_len
                if fd != FAN_NOFD:
                    if ev_mask & mask:
                        os.write(fan, RESPONSE.pack(fd, answer))
                        events += 1
                        pids[pid] = pids.get(pid, 0) + 1
                    os.close(fd)
                off += ev_len
    except Stop:
        pass
    print("events %d" % events)
    for pid, n in sorted(pids.items()):
        print("pid %d %d" % (pid, n))
    if pre_content:
        print("bytes %d" % nbytes)
    if overflow:
        print("overflow %d" % overflow)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
