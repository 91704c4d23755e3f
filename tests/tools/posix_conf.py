#!/usr/bin/python3
"""posix_conf: file-system semantics as POSIX and Linux define them, checked
in one directory, as root and as unprivileged users.

    posix_conf.py DIR [--other-fs DIR2] [--summary]

DIR must be empty or absent; it is left empty. Run as root: the checks make
fixtures owned by other users and act as users 1000 and 2000 (in forked
children with those ids, umask 022, no supplementary groups unless a check
gives one). DIR2 (default /dev/shm) is on another file system, for EXDEV.

Every expected value is what Linux gives on a local file system (ext4,
tmpfs); running this on the host's own directories is how the
expectations were checked. Prints one line per check ("ok" or "FAIL",
area, what, who, got and wanted), then a count per area, and exits 1 if any
check failed.

Areas: create (owner and mode of new files, directories, FIFOs, symlinks),
setgid (setgid-directory inheritance), errno (the error each refused call
gives), setid (suid/sgid clearing on write, truncate, chown, chmod),
times (ctime, mtime and atime updates), rename (rename and link edge
cases), open (unlink and rename of open files), sticky (sticky
directories), access (permission checks as the caller), acl (POSIX
ACLs where the file system has them: named users, the mask, default ACLs
instead of the umask, setgid; skipped where it has none).
"""
import argparse
import ctypes
import errno
import os
import pickle
import shutil
import stat
import struct
import sys
import time
from collections import OrderedDict

ROOT = (0, 0, ())
USER = (1000, 1000, ())
OTHER = (2000, 2000, ())
GROUP = 3000          # a group USER is given as a supplementary one
NAMES = {ROOT: "root", USER: "user", OTHER: "other"}

results = []          # (area, what, who, ok, got, want)
skipped = []          # (area, why)


def who(cred):
    return NAMES.get(cred, f"{cred[0]}:{cred[1]}+{list(cred[2])}")


def run_as(cred, fn, *args):
    """fn(*args) in a child with cred's uid, gid and groups and umask 022;
    its return value, or the errno name of the OSError it raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.umask(0o022)
            os.setgroups(list(cred[2]))
            os.setresgid(cred[1], cred[1], cred[1])
            os.setresuid(cred[0], cred[0], cred[0])
            try:
                out = fn(*args)
                out = 0 if out is None else out
            except OSError as e:
                out = errno.errorcode.get(e.errno, str(e.errno))
            os.write(w, pickle.dumps(out))
        except BaseException as e:  # noqa: BLE001 - reported, not hidden
            os.write(w, pickle.dumps(f"crash: {e!r}"))
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return pickle.loads(data) if data else "no result"


def check(area, what, cred, got, want):
    ok = got == want
    results.append((area, what, who(cred), ok, got, want))


def expect(area, what, cred, want, fn, *args):
    """Runs fn as cred and checks its result (0 or an errno name)."""
    check(area, what, cred, run_as(cred, fn, *args), want)


def mk(path, mode=0o644, owner=(0, 0), data=b"data"):
    with open(path, "wb") as f:
        f.write(data)
    os.chown(path, *owner)
    os.chmod(path, mode)
    return path


def mkd(path, mode=0o755, owner=(0, 0)):
    os.mkdir(path)
    os.chown(path, *owner)
    os.chmod(path, mode)
    return path


def lmode(path):
    st = os.lstat(path)
    return st.st_uid, st.st_gid, stat.S_IFMT(st.st_mode), \
        stat.S_IMODE(st.st_mode)


def openclose(path, flags, mode=0o666):
    os.close(os.open(path, flags, mode))


def ftrunc_ro(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)


# --- areas --------------------------------------------------------------------

def area_create(d):
    pub = mkd(os.path.join(d, "pub"), 0o777)
    for cred in (ROOT, USER):
        n = who(cred)
        p = os.path.join(pub, n)

        def make(p=p):
            openclose(p + ".f", os.O_CREAT | os.O_WRONLY, 0o666)
            os.mkdir(p + ".d", 0o777)
            os.mkfifo(p + ".p", 0o666)
            os.symlink("target", p + ".l")
            os.mknod(p + ".r", stat.S_IFREG | 0o666)
            os.link(p + ".f", p + ".h")
        check("create", "make file, dir, fifo, symlink, mknod, link", cred,
              run_as(cred, make), 0)
        u, g = cred[0], cred[1]
        for suffix, kind, mode in ((".f", stat.S_IFREG, 0o644),
                                   (".d", stat.S_IFDIR, 0o755),
                                   (".p", stat.S_IFIFO, 0o644),
                                   (".l", stat.S_IFLNK, 0o777),
                                   (".r", stat.S_IFREG, 0o644)):
            got = lmode(p + suffix) if os.path.lexists(p + suffix) else None
            check("create", f"owner, type and mode of new {suffix[1:]} "
                  "(umask 022)", cred, got, (u, g, kind, mode))
        check("create", "symlink text", cred,
              os.readlink(p + ".l") if os.path.lexists(p + ".l") else None,
              "target")
        st = os.stat(p + ".f") if os.path.exists(p + ".f") else None
        check("create", "hard link: same inode, 2 links", cred,
              (st.st_nlink, os.stat(p + ".h").st_ino == st.st_ino)
              if st and os.path.exists(p + ".h") else None, (2, True))
        check("create", "O_CREAT|O_EXCL on a new name", cred,
              run_as(cred, openclose, p + ".x",
                     os.O_CREAT | os.O_EXCL | os.O_WRONLY), 0)
        check("create", "new directory's link count", cred,
              os.stat(p + ".d").st_nlink if os.path.exists(p + ".d")
              else None, 2)
        check("create", "mode 0 file: created, then unreadable to its "
              "owner unless root", cred,
              run_as(cred, lambda p=p: (openclose(p + ".z", os.O_CREAT |
                                                  os.O_WRONLY, 0) or 0,
                                        os.access(p + ".z", os.R_OK))),
              (0, cred == ROOT))
    # Set-id and sticky bits asked for at creation, umask 022, as root.
    for what, fn, want in (
            ("mkdir 07777: set-id bits dropped, sticky kept", lambda p:
             os.mkdir(p, 0o7777), stat.S_IFDIR | 0o1755),
            ("mkfifo 07777: all kept", lambda p: os.mkfifo(p, 0o7777),
             stat.S_IFIFO | 0o7755),
            ("open O_CREAT 07777: all kept", lambda p: openclose(
                p, os.O_CREAT | os.O_WRONLY, 0o7777), stat.S_IFREG | 0o7755)):
        p = os.path.join(pub, "bits-" + what.split()[0].replace(" ", ""))
        r = run_as(ROOT, fn, p)
        check("create", what, ROOT,
              (r, os.lstat(p).st_mode) if os.path.lexists(p) else (r, None),
              (0, want))
    before = os.stat(pub).st_nlink
    os.mkdir(os.path.join(pub, "more"))
    check("create", "parent's link count +1 after mkdir", ROOT,
          os.stat(pub).st_nlink, before + 1)


def area_setgid(d):
    sg = mkd(os.path.join(d, "sg"), 0o2777, (0, 50))
    plain = mkd(os.path.join(d, "plain"), 0o777, (0, 50))
    for cred in (ROOT, USER):
        n = who(cred)
        run_as(cred, openclose, os.path.join(sg, n + ".f"),
               os.O_CREAT | os.O_WRONLY, 0o644)
        run_as(cred, os.mkdir, os.path.join(sg, n + ".d"), 0o755)
        run_as(cred, os.mkfifo, os.path.join(sg, n + ".p"), 0o644)
        run_as(cred, openclose, os.path.join(plain, n + ".f"),
               os.O_CREAT | os.O_WRONLY, 0o644)
        run_as(cred, os.mkdir, os.path.join(plain, n + ".d"), 0o755)
        g = lambda p: os.lstat(p).st_gid if os.path.lexists(p) else None
        m = lambda p: stat.S_IMODE(os.lstat(p).st_mode) \
            if os.path.lexists(p) else None
        check("setgid", "file in a setgid directory takes its group", cred,
              g(os.path.join(sg, n + ".f")), 50)
        check("setgid", "fifo in a setgid directory takes its group", cred,
              g(os.path.join(sg, n + ".p")), 50)
        check("setgid", "subdirectory takes its group", cred,
              g(os.path.join(sg, n + ".d")), 50)
        check("setgid", "subdirectory inherits the setgid bit", cred,
              m(os.path.join(sg, n + ".d")), 0o2755)
        check("setgid", "file in a plain directory: the caller's group",
              cred, g(os.path.join(plain, n + ".f")), cred[1])
        check("setgid", "subdirectory of a plain directory: no setgid",
              cred, m(os.path.join(plain, n + ".d")), 0o755)
    # Asking for setgid on a new file of a group the caller is not in.
    run_as(USER, openclose, os.path.join(sg, "ask.f"),
           os.O_CREAT | os.O_WRONLY, 0o2755)
    check("setgid", "new file asking for setgid in a group the caller is "
          "not in: bit dropped", USER,
          stat.S_IMODE(os.stat(os.path.join(sg, "ask.f")).st_mode)
          if os.path.exists(os.path.join(sg, "ask.f")) else None, 0o755)
    run_as((1000, 1000, (50,)), openclose, os.path.join(sg, "member.f"),
           os.O_CREAT | os.O_WRONLY, 0o2755)
    check("setgid", "the same by a member of the group: bit kept",
          (1000, 1000, (50,)),
          stat.S_IMODE(os.stat(os.path.join(sg, "member.f")).st_mode)
          if os.path.exists(os.path.join(sg, "member.f")) else None, 0o2755)
    # Group-writable only through a supplementary group.
    grp = mkd(os.path.join(d, "grp"), 0o770, (0, GROUP))
    ucred = (1000, 1000, (GROUP,))
    expect("setgid", "create in a mode 770 directory of a supplementary "
           "group", ucred, 0, openclose, os.path.join(grp, "f"),
           os.O_CREAT | os.O_WRONLY)
    expect("setgid", "mkdir there", ucred, 0, os.mkdir,
           os.path.join(grp, "d"))
    check("setgid", "owner there: the caller's uid and gid", ucred,
          os.stat(os.path.join(grp, "f"))[4:6]
          if os.path.exists(os.path.join(grp, "f")) else None, (1000, 1000))
    expect("setgid", "unlink there", ucred, 0, os.unlink,
           os.path.join(grp, "f"))
    expect("setgid", "the same without the group: create", USER, "EACCES",
           openclose, os.path.join(grp, "g"), os.O_CREAT | os.O_WRONLY)


def area_errno(d, other_fs):
    e = os.path.join(d, "e")
    mkd(e, 0o777)
    rootdir = mkd(os.path.join(e, "rootdir"), 0o755)
    victim = mk(os.path.join(rootdir, "victim"), 0o666)
    private = mkd(os.path.join(e, "private"), 0o700)
    mk(os.path.join(private, "f"))
    secret = mk(os.path.join(e, "secret"), 0o600)
    ro = mk(os.path.join(e, "ro"), 0o444, (1000, 1000))
    full = mkd(os.path.join(e, "full"), 0o777)
    mk(os.path.join(full, "x"))
    empty = mkd(os.path.join(e, "empty"), 0o777)
    f = mk(os.path.join(e, "f"), 0o666)
    f2 = mk(os.path.join(e, "f2"), 0o666)
    mine = mk(os.path.join(e, "mine"), 0o644, (1000, 1000))
    ro_other = mk(os.path.join(e, "ro-other"), 0o644)
    loop = os.path.join(e, "loop")
    os.symlink("loop", loop)
    sl = os.path.join(e, "sl")
    os.symlink("f", sl)
    wc = os.O_CREAT | os.O_WRONLY
    cases = [
        (USER, "EACCES", "create in root's 755 directory", openclose,
         os.path.join(rootdir, "n"), wc),
        (USER, "EACCES", "mkdir in root's 755 directory", os.mkdir,
         os.path.join(rootdir, "n")),
        (USER, "EACCES", "unlink from root's 755 directory", os.unlink,
         victim),
        (USER, "EACCES", "read a 600 file of root's", openclose, secret,
         os.O_RDONLY),
        (USER, "EACCES", "write its own 444 file", openclose, ro,
         os.O_WRONLY),
        (USER, "EACCES", "stat through a 700 directory", os.stat,
         os.path.join(private, "f")),
        (USER, "EACCES", "list a 700 directory", os.listdir, private),
        (USER, "EPERM", "chmod root's file", os.chmod, f, 0o600),
        (USER, "EPERM", "chown its file to another user", os.chown, mine,
         2000, -1),
        (USER, "EPERM", "set explicit times on root's file", os.utime, f,
         (1, 1)),
        (ROOT, "EPERM", "hard link to a directory", os.link, empty,
         os.path.join(e, "dlink")),
        (ROOT, "EEXIST", "mkdir of an existing name", os.mkdir, empty),
        (ROOT, "EEXIST", "O_CREAT|O_EXCL of an existing file", openclose,
         f, wc | os.O_EXCL),
        (ROOT, "EEXIST", "O_CREAT|O_EXCL of a dangling-free symlink",
         openclose, sl, wc | os.O_EXCL),
        (ROOT, "EEXIST", "link to an existing name", os.link, f, f2),
        (ROOT, "EEXIST", "symlink to an existing name", os.symlink, "x", f),
        (ROOT, "EEXIST", "mkfifo of an existing name", os.mkfifo, f),
        (ROOT, "ENOTEMPTY", "rmdir of a non-empty directory", os.rmdir, full),
        (ROOT, "ENOTEMPTY", "rename a directory over a non-empty one",
         os.rename, empty, full),
        (ROOT, "EISDIR", "open a directory for writing", openclose, empty,
         os.O_WRONLY),
        (ROOT, "EISDIR", "rename a file over a directory", os.rename, f,
         empty),
        (ROOT, "EISDIR", "unlink a directory", os.unlink, empty),
        (ROOT, "ENOTDIR", "a file as a path component", os.stat,
         os.path.join(f, "x")),
        (ROOT, "ENOTDIR", "rmdir of a file", os.rmdir, f),
        (ROOT, "ENOTDIR", "rename a directory over a file", os.rename, empty,
         f),
        (ROOT, "ENOTDIR", "O_DIRECTORY on a file", openclose, f,
         os.O_RDONLY | os.O_DIRECTORY),
        (ROOT, "ENAMETOOLONG", "a 256-byte name", openclose,
         os.path.join(e, "n" * 256), wc),
        (ROOT, "ELOOP", "open a symlink loop", openclose, loop, os.O_RDONLY),
        (ROOT, "ELOOP", "O_NOFOLLOW on a symlink", openclose, sl,
         os.O_RDONLY | os.O_NOFOLLOW),
        (ROOT, "EXDEV", "rename to another file system", os.rename, f2,
         os.path.join(other_fs, f"posix-conf-{os.getpid()}")),
        (ROOT, "EXDEV", "link to another file system", os.link, f2,
         os.path.join(other_fs, f"posix-conf-{os.getpid()}")),
        (ROOT, "ENOENT", "stat a missing name", os.stat,
         os.path.join(e, "missing")),
        (ROOT, "ENOENT", "unlink a missing name", os.unlink,
         os.path.join(e, "missing")),
        (ROOT, "ENOENT", "create under a missing directory", openclose,
         os.path.join(e, "missing", "f"), wc),
        (ROOT, "EINVAL", "rename a directory into itself", os.rename, full,
         os.path.join(full, "sub")),
        (ROOT, "EINVAL", "rmdir of .", os.rmdir, os.path.join(full, ".")),
        (ROOT, "ENAMETOOLONG", "a path longer than PATH_MAX", os.stat,
         os.path.join(e, *(["d" * 200] * 25))),
        (ROOT, "ENOENT", "a missing directory in the path", os.stat,
         os.path.join(e, "missing", "x")),
        (ROOT, "ELOOP", "a symlink loop as a path component", os.stat,
         os.path.join(loop, "x")),
        (ROOT, "EEXIST", "mkdir over a symlink", os.mkdir, sl),
        (ROOT, "ENOTDIR", "a file with a trailing slash", os.stat, f + "/"),
        (ROOT, "EINVAL", "truncate to a negative size", lambda: os.truncate(
            f2, -1)),
        (USER, 0, "utime(NULL) on another's file it may write",
         os.utime, f),
        (USER, 0, "truncate another's file it may write", os.truncate, f,
         2),
        (USER, "EACCES", "truncate a file it may not write", os.truncate,
         ro_other, 0),
        (USER, 0, "chown its own file to itself (a no-op)", os.chown, mine,
         1000, 1000),
        (USER, 0, "chown -1 -1", os.chown, mine, -1, -1),
        (USER, "EINVAL", "ftruncate of a read-only descriptor (Linux: EINVAL)",
         ftrunc_ro,
         mine),
        (ROOT, "EACCES", "execute a 644 file as root", os.execv, f,
         [f]),
        (ROOT, 0, "a 255-byte name", openclose, os.path.join(e, "n" * 255),
         wc),
    ]
    for cred, want, what, fn, *args in cases:
        expect("errno", f"{what}: {want}", cred, want, fn, *args)


def area_setid(d):
    s = mkd(os.path.join(d, "setid"), 0o777)

    def write(p):
        fd = os.open(p, os.O_WRONLY)
        os.write(fd, b"x")
        os.close(fd)

    cases = [
        ("write by another user", OTHER, 0o6777, write, 0o777),
        ("truncate by another user", OTHER, 0o6777,
         lambda p: os.truncate(p, 0), 0o777),
        ("write by root", ROOT, 0o6777, write, 0o6777),
        ("write by another user, setgid without group execute", OTHER,
         0o6766, write, 0o766),
        ("write by a member of the file's group, setgid without group "
         "execute", (2000, 2000, (1000,)), 0o6766, write, 0o2766),
        ("write by the owner", USER, 0o4755, write, 0o755),
    ]
    for i, (what, cred, mode, fn, want) in enumerate(cases):
        p = mk(os.path.join(s, f"w{i}"), mode, (1000, 1000))
        os.chmod(p, 0o777)
        os.chmod(p, mode)
        r = run_as(cred, fn, p)
        check("setid", f"{what}: mode {mode:o} becomes {want:o}", cred,
              (r, stat.S_IMODE(os.stat(p).st_mode)), (0, want))
    p = mk(os.path.join(s, "chown"), 0o6755, (1000, 1000))
    os.chmod(p, 0o6755)
    r = run_as(ROOT, os.chown, p, 2000, 2000)
    check("setid", "chown of an executable by root clears suid and sgid",
          ROOT, (r, stat.S_IMODE(os.stat(p).st_mode)), (0, 0o755))
    p = mk(os.path.join(s, "chgrp"), 0o6755, (1000, 1000))
    os.chmod(p, 0o6755)
    r = run_as((1000, 1000, (50,)), os.chown, p, -1, 50)
    check("setid", "chgrp by the owner clears suid and sgid",
          (1000, 1000, (50,)), (r, stat.S_IMODE(os.stat(p).st_mode)),
          (0, 0o755))
    p = mk(os.path.join(s, "chmod"), 0o755, (1000, 50))
    r = run_as(USER, os.chmod, p, 0o2755)
    check("setid", "chmod g+s by the owner outside the file's group: bit "
          "dropped", USER, (r, stat.S_IMODE(os.stat(p).st_mode)), (0, 0o755))
    p = mk(os.path.join(s, "dir"), 0o755)
    os.unlink(p)
    dd = mkd(p, 0o2775, (1000, 1000))
    r = run_as(OTHER, lambda: openclose(os.path.join(dd, "x"),
                                        os.O_CREAT | os.O_WRONLY))
    check("setid", "a directory's setgid bit survives entries made in it",
          ROOT, stat.S_IMODE(os.stat(dd).st_mode), 0o2775)


def area_times(d):
    t = mkd(os.path.join(d, "times"), 0o777)
    t2 = mkd(os.path.join(d, "times2"), 0o777)

    def st(p):
        s = os.lstat(p)
        return s.st_atime_ns, s.st_mtime_ns, s.st_ctime_ns

    def after(what, paths, fn, want):
        """want: per path, a string of a/m/c for the times that must
        advance; the others must stay."""
        befores = [st(p) for p in paths]
        time.sleep(0.05)
        r = fn()
        r = 0 if r is None else r
        afters = [st(p) if os.path.lexists(p) else None for p in paths]
        got = []
        for b, a in zip(befores, afters):
            if a is None:
                got.append("gone")
                continue
            got.append("".join(k for k, x, y in zip("amc", b, a) if y > x) +
                       "".join("<" for x, y in zip(b, a) if y < x))
        check("times", what, ROOT, (r, got), (0, list(want)))

    f = mk(os.path.join(t, "f"))
    os.utime(f, ns=(10**18, 10**18))   # atime after mtime: relatime stays
    after("write: mtime, ctime", [f],
          lambda: open(f, "ab").write(b"x") and None, ["mc"])
    after("truncate: mtime, ctime", [f], lambda: os.truncate(f, 1), ["mc"])
    after("chmod: ctime", [f], lambda: os.chmod(f, 0o600), ["c"])
    after("chown: ctime", [f], lambda: os.chown(f, 1000, 1000), ["c"])
    after("utimensat(UTIME_NOW): all three", [f],
          lambda: os.utime(f), ["amc"])
    g = os.path.join(t, "g")
    after("link: the file's ctime, the directory's mtime and ctime",
          [f, t], lambda: os.link(f, g), ["c", "mc"])
    after("unlink of one link: the file's ctime, the directory's mtime "
          "and ctime", [f, t], lambda: os.unlink(g), ["c", "mc"])
    after("rename across directories: both directories' mtime and ctime",
          [t, t2], lambda: os.rename(f, os.path.join(t2, "f")),
          ["mc", "mc"])
    f = os.path.join(t2, "f")
    after("create: the directory's mtime and ctime", [t2],
          lambda: openclose(os.path.join(t2, "n"),
                            os.O_CREAT | os.O_WRONLY), ["mc"])
    after("mkdir: the parent's mtime and ctime", [t2],
          lambda: os.mkdir(os.path.join(t2, "sub")), ["mc"])
    after("setxattr-free chmod of a directory: its ctime only", [t2],
          lambda: os.chmod(t2, 0o775), ["c"])
    after("read: nothing changes but atime", [f],
          lambda: open(f, "rb").read() and None, ["a"])
    os.utime(f, ns=(5 * 10**17, 6 * 10**17))
    s = os.stat(f)
    check("times", "explicit times set to the nanosecond", ROOT,
          (s.st_atime_ns, s.st_mtime_ns), (5 * 10**17, 6 * 10**17))


def renameat2(old, new, flags):
    libc = ctypes.CDLL(None, use_errno=True)
    AT_FDCWD = -100
    if libc.renameat2(AT_FDCWD, old.encode(), AT_FDCWD, new.encode(),
                      flags):
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def area_rename(d):
    r = mkd(os.path.join(d, "rn"), 0o777)
    a = mk(os.path.join(r, "a"), data=b"A")
    b = mk(os.path.join(r, "b"), data=b"B")
    h = os.path.join(r, "h")
    os.link(a, h)
    expect("rename", "rename a name to itself", ROOT, 0, os.rename, a, a)
    check("rename", "... leaves it", ROOT, open(a, "rb").read(), b"A")
    expect("rename", "rename between two links of one file", ROOT, 0,
           os.rename, a, h)
    check("rename", "... leaves both names (POSIX: nothing happens)", ROOT,
          (os.path.exists(a), os.path.exists(h)), (True, True))
    expect("rename", "rename over an existing file", ROOT, 0, os.rename, b,
           a)
    check("rename", "... replaces it, the old name goes", ROOT,
          (open(a, "rb").read(), os.path.exists(b), os.stat(h).st_nlink),
          (b"B", False, 1))
    d1 = mkd(os.path.join(r, "d1"))
    d2 = mkd(os.path.join(r, "d2"))
    mk(os.path.join(d1, "in"))
    expect("rename", "rename a directory over an empty one", ROOT, 0,
           os.rename, d1, d2)
    check("rename", "... moves its entries", ROOT,
          (os.path.exists(os.path.join(d2, "in")), os.path.exists(d1)),
          (True, False))
    x = mk(os.path.join(r, "x"), data=b"X")
    y = mk(os.path.join(r, "y"), data=b"Y")
    expect("rename", "RENAME_NOREPLACE over an existing name", ROOT,
           "EEXIST", renameat2, x, y, 1)
    expect("rename", "RENAME_EXCHANGE of two files", ROOT, 0, renameat2,
           x, y, 2)
    check("rename", "... swaps them", ROOT,
          (open(x, "rb").read(), open(y, "rb").read()), (b"Y", b"X"))
    expect("rename", "RENAME_EXCHANGE with a missing name", ROOT, "ENOENT",
           renameat2, x, os.path.join(r, "nothing"), 2)
    expect("rename", "RENAME_NOREPLACE to a new name", ROOT, 0, renameat2,
           x, os.path.join(r, "x2"), 1)
    sl = os.path.join(r, "sl")
    os.symlink("y", sl)
    expect("rename", "rename a symlink (not its target)", ROOT, 0,
           os.rename, sl, os.path.join(r, "sl2"))
    check("rename", "... keeps its text", ROOT,
          os.readlink(os.path.join(r, "sl2")), "y")
    expect("rename", "link a symlink (not its target)", ROOT, 0,
           lambda: os.link(os.path.join(r, "sl2"), os.path.join(r, "sl3"),
                           follow_symlinks=False))
    check("rename", "... a second name for the symlink", ROOT,
          stat.S_ISLNK(os.lstat(os.path.join(r, "sl3")).st_mode), True)
    n = mk(os.path.join(r, "n"))
    for i in range(3):
        os.link(n, os.path.join(r, f"n{i}"))
    check("rename", "link count after three links", ROOT, os.stat(n).st_nlink,
          4)
    os.unlink(os.path.join(r, "n0"))
    check("rename", "... and one unlink", ROOT, os.stat(n).st_nlink, 3)
    deep = os.path.join(r, "p", "q")
    os.makedirs(deep)
    expect("rename", "rename a directory to a name below itself", ROOT,
           "EINVAL", os.rename, os.path.join(r, "p"), os.path.join(deep, "p"))
    expect("rename", "rename a file to a new name with a trailing slash",
           ROOT, "ENOTDIR", os.rename, n, os.path.join(r, "nn") + "/")


def area_open(d):
    o = mkd(os.path.join(d, "open"), 0o777)
    f = mk(os.path.join(o, "f"), data=b"still here")
    fd = os.open(f, os.O_RDWR)
    try:
        os.unlink(f)
        check("open", "read after unlink", ROOT, os.pread(fd, 10, 0),
              b"still here")
        check("open", "fstat after unlink: 0 links", ROOT,
              os.fstat(fd).st_nlink, 0)
        os.pwrite(fd, b"STILL", 0)
        check("open", "write after unlink", ROOT, os.pread(fd, 10, 0),
              b"STILL here")
        os.ftruncate(fd, 5)
        check("open", "ftruncate after unlink", ROOT, os.fstat(fd).st_size,
              5)
        check("open", "the name is gone", ROOT, os.path.exists(f), False)
    finally:
        os.close(fd)
    g = mk(os.path.join(o, "g"), data=b"old")
    h = mk(os.path.join(o, "h"), data=b"new")
    fd = os.open(g, os.O_RDONLY)
    try:
        os.rename(h, g)
        check("open", "rename over an open file: the open file keeps the "
              "old data", ROOT, os.pread(fd, 3, 0), b"old")
        check("open", "... the name gives the new", ROOT,
              open(g, "rb").read(), b"new")
    finally:
        os.close(fd)
    fd = os.open(g, os.O_RDWR)
    try:
        os.rename(g, os.path.join(o, "moved"))
        os.pwrite(fd, b"NEW", 0)
        check("open", "rename of an open file: writes land under the new "
              "name", ROOT, open(os.path.join(o, "moved"), "rb").read(),
              b"NEW")
    finally:
        os.close(fd)
    sub = mkd(os.path.join(o, "sub"))
    fd = os.open(sub, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.rmdir(sub)
        check("open", "an open directory removed: fstat 0 links", ROOT,
              os.fstat(fd).st_nlink, 0)
        r = run_as(ROOT, lambda: os.open("x", os.O_CREAT | os.O_WRONLY,
                                         dir_fd=fd))
        check("open", "... and creating in it fails", ROOT, r, "ENOENT")
    finally:
        os.close(fd)


def area_sticky(d):
    s = mkd(os.path.join(d, "sticky"), 0o1777)
    theirs = mk(os.path.join(s, "theirs"), 0o666, (2000, 2000))
    expect("sticky", "unlink another user's file", USER, "EPERM", os.unlink,
           theirs)
    expect("sticky", "rename another user's file away", USER, "EPERM",
           os.rename, theirs, os.path.join(s, "taken"))
    mine = os.path.join(s, "mine")
    expect("sticky", "create its own file there", USER, 0, openclose, mine,
           os.O_CREAT | os.O_WRONLY)
    expect("sticky", "rename its own file over another user's", USER,
           "EPERM", os.rename, mine, theirs)
    expect("sticky", "write another user's writable file", USER, 0,
           openclose, theirs, os.O_WRONLY)
    expect("sticky", "unlink its own file", USER, 0, os.unlink, mine)
    expect("sticky", "the file's owner may unlink it", OTHER, 0, os.unlink,
           theirs)
    own = mkd(os.path.join(d, "sticky-own"), 0o1777, (1000, 1000))
    x = mk(os.path.join(own, "x"), 0o666, (2000, 2000))
    expect("sticky", "the directory's owner may unlink anyone's", USER, 0,
           os.unlink, x)
    sd = mkd(os.path.join(s, "sd"), 0o777, (2000, 2000))
    expect("sticky", "rmdir another user's empty directory", USER, "EPERM",
           os.rmdir, sd)
    expect("sticky", "root may", ROOT, 0, os.rmdir, sd)


def area_access(d):
    a = mkd(os.path.join(d, "acc"), 0o755)
    files = {
        "u600": (0o600, (1000, 1000)),
        "g060": (0o060, (2000, GROUP)),
        "o006": (0o006, (2000, 2000)),
        "none": (0o000, (1000, 1000)),
        "uonly": (0o604, (1000, 1000)),   # owner class wins: no group/other
        "x711": (0o711, (2000, 2000)),
    }
    for n, (mode, owner) in files.items():
        mk(os.path.join(a, n), mode, owner)
    member = (1000, 1000, (GROUP,))
    want = [  # (cred, file, mode bits, expected os.access)
        (USER, "u600", os.R_OK | os.W_OK, True),
        (USER, "u600", os.X_OK, False),
        (OTHER, "u600", os.R_OK, False),
        (member, "g060", os.R_OK | os.W_OK, True),
        (USER, "g060", os.R_OK, False),
        (USER, "o006", os.R_OK | os.W_OK, True),
        (USER, "none", os.R_OK, False),
        (ROOT, "none", os.R_OK | os.W_OK, True),
        (ROOT, "none", os.X_OK, False),
        (ROOT, "x711", os.X_OK, True),
        (USER, "x711", os.X_OK, True),
        (USER, "x711", os.R_OK, False),
        (USER, "uonly", os.R_OK, True),
        (OTHER, "uonly", os.R_OK, True),
    ]
    for cred, n, bits, ok in want:
        p = os.path.join(a, n)
        what = "".join(c for c, b in (("r", os.R_OK), ("w", os.W_OK),
                                      ("x", os.X_OK)) if bits & b)
        check("access", f"access({what}) of {n}", cred,
              run_as(cred, os.access, p, bits), ok)
        if bits & os.R_OK and not bits & os.X_OK:
            check("access", f"open for {what} of {n}", cred,
                  run_as(cred, openclose, p,
                         os.O_RDWR if bits & os.W_OK else os.O_RDONLY),
                  0 if ok else "EACCES")
    # A file owned by the user with owner bits 0 and others' bits rw: the
    # owner class decides, so the owner is refused.
    p = mk(os.path.join(a, "owner-no"), 0o066, (1000, 1000))
    expect("access", "the owner of a 066 file is refused (owner bits "
           "decide)", USER, "EACCES", openclose, p, os.O_RDONLY)


def acl(*entries):
    """A system.posix_acl_* value from (tag, perm, id) entries."""
    return struct.pack("<I", 2) + b"".join(
        struct.pack("<HHI", tag, perm, ident)
        for tag, perm, ident in sorted(entries))


U_OBJ, U, G_OBJ, MASK, O = 0x01, 0x02, 0x04, 0x10, 0x20
UNDEF = 0xffffffff
ACCESS, DEFAULT = "system.posix_acl_access", "system.posix_acl_default"


def area_acl(d):
    a = mkd(os.path.join(d, "acl"), 0o777)
    f = mk(os.path.join(a, "f"), 0o600)
    try:
        os.setxattr(f, ACCESS, acl((U_OBJ, 6, UNDEF), (G_OBJ, 0, UNDEF),
                                   (O, 0, UNDEF)))
    except OSError as e:
        skipped.append(("acl", f"no POSIX ACLs here ({e.strerror})"))
        return
    expect("acl", "a 600 file of root's, before any ACL entry", USER,
           "EACCES", openclose, f, os.O_RDWR)
    os.setxattr(f, ACCESS, acl((U_OBJ, 6, UNDEF), (U, 6, 1000),
                               (G_OBJ, 0, UNDEF), (MASK, 6, UNDEF),
                               (O, 0, UNDEF)))
    check("acl", "an ACL with a named user: the mask shows as the group "
          "bits", ROOT, stat.S_IMODE(os.stat(f).st_mode), 0o660)
    expect("acl", "the named user may read and write", USER, 0, openclose,
           f, os.O_RDWR)
    expect("acl", "another user may not", OTHER, "EACCES", openclose, f,
           os.O_RDONLY)
    os.chmod(f, 0o640)
    check("acl", "chmod g=r sets the mask to r", ROOT,
          struct.unpack_from("<HHI", os.getxattr(f, ACCESS),
                             4 + 8 * 3)[:2], (MASK, 4))
    expect("acl", "... and the named user can no longer write", USER,
           "EACCES", openclose, f, os.O_WRONLY)
    expect("acl", "... but still read", USER, 0, openclose, f, os.O_RDONLY)
    dd = mkd(os.path.join(a, "dflt"), 0o777)
    os.setxattr(dd, DEFAULT, acl((U_OBJ, 7, UNDEF), (G_OBJ, 5, UNDEF),
                                 (O, 0, UNDEF)))
    expect("acl", "create 0666 under a default ACL (u rwx, g r-x, o ---), "
           "umask 022", USER, 0, openclose, os.path.join(dd, "f"),
           os.O_CREAT | os.O_WRONLY, 0o666)
    check("acl", "... the default ACL, not the umask, decides: 0640", USER,
          stat.S_IMODE(os.stat(os.path.join(dd, "f")).st_mode)
          if os.path.exists(os.path.join(dd, "f")) else None, 0o640)
    expect("acl", "mkdir 0777 there", USER, 0, os.mkdir,
           os.path.join(dd, "sub"), 0o777)
    sub = os.path.join(dd, "sub")
    check("acl", "... gives 0750 and inherits the default ACL", USER,
          (stat.S_IMODE(os.stat(sub).st_mode),
           os.getxattr(sub, DEFAULT) == os.getxattr(dd, DEFAULT))
          if os.path.exists(sub) else None, (0o750, True))
    g = mk(os.path.join(a, "sgid"), 0o2770, (1000, 50))
    os.chmod(g, 0o2770)
    expect("acl", "its owner, outside the file's group, sets an access ACL",
           USER, 0, os.setxattr, g, ACCESS,
           acl((U_OBJ, 6, UNDEF), (G_OBJ, 6, UNDEF), (O, 0, UNDEF)))
    check("acl", "... which drops the setgid bit", USER,
          stat.S_IMODE(os.stat(g).st_mode), 0o660)
    expect("acl", "a user sets an ACL on root's file", USER, "EPERM",
           os.setxattr, f, ACCESS, acl((U_OBJ, 6, UNDEF), (G_OBJ, 0, UNDEF),
                                       (O, 6, UNDEF)))
    os.removexattr(f, ACCESS)
    check("acl", "removing the access ACL leaves the mode", ROOT,
          stat.S_IMODE(os.stat(f).st_mode), 0o640)


AREAS = OrderedDict(create=area_create, setgid=area_setgid,
                    errno=area_errno, setid=area_setid, times=area_times,
                    rename=area_rename, open=area_open, sticky=area_sticky,
                    access=area_access, acl=area_acl)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir")
    p.add_argument("--other-fs", default="/dev/shm")
    p.add_argument("--summary", action="store_true",
                   help="print only the failures and the counts")
    p.add_argument("--areas", default=",".join(AREAS))
    p.add_argument("--known", action="append", default=[], metavar="CHECK",
                   help="a check (\"area: what\", a prefix) that is a known, "
                   "explained difference of the file system under test: "
                   "reported, not counted as failed (repeatable)")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("posix_conf.py: run as root (it acts as other users)")
    os.umask(0o022)
    os.makedirs(args.dir, exist_ok=True)
    if os.listdir(args.dir):
        sys.exit(f"posix_conf.py: {args.dir} is not empty")
    for name in args.areas.split(","):
        base = os.path.join(args.dir, name)
        os.mkdir(base)
        os.chmod(base, 0o777)
        before = len(results)
        try:
            if name == "errno":
                AREAS[name](base, args.other_fs)
            else:
                AREAS[name](base)
        except Exception as e:  # noqa: BLE001 - the area's own failure
            results.append((name, f"the area stopped: {e!r}", "-", False,
                            None, None))
        if len(results) == before and not any(a == name for a, _ in skipped):
            results.append((name, "no checks ran", "-", False, None, None))
        shutil.rmtree(base)
    def known(area, what):
        return any(f"{area}: {what}".startswith(k) for k in args.known)

    for area, what, cred, ok, got, want in results:
        if ok and args.summary:
            continue
        tag = "ok  " if ok else "KNOWN" if known(area, what) else "FAIL"
        line = f"{tag} {area}: {what} [{cred}]"
        if not ok:
            line += f": got {got!r}, want {want!r}"
        print(line)
    counts = OrderedDict()
    for area, what, _, ok, _, _ in results:
        c = counts.setdefault(area, [0, 0, 0])
        c[0 if ok else 2 if known(area, what) else 1] += 1
    for area, (good, bad, kn) in counts.items():
        print(f"area {area}: {good} passed, {bad} failed" +
              (f", {kn} known differences" if kn else ""))
    for area, why in skipped:
        print(f"area {area}: skipped, {why}")
    total_bad = sum(c[1] for c in counts.values())
    total_known = sum(c[2] for c in counts.values())
    print(f"total: {len(results) - total_bad - total_known} passed, "
          f"{total_bad} failed" +
          (f", {total_known} known differences" if total_known else ""))
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
