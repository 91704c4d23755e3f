#!/usr/bin/env python3
"""Test a vhost-user-fs (virtio-fs) backend from the VMM's side, without QEMU.

Usage: vufs_test.py [--daemon vufsd|virtiofsd] [--bin PATH] [--queues N]
                    [--threads N] [--busy-poll US] [--timeout S] [--keep]
                    [SCENARIO ...]

Starts the daemon itself on a fresh temporary directory (share/ is the
shared directory; outside/, an empty sentinel, and victim, a file, sit
next to it), runs the scenarios through tests/tools/vhost_user.py and
fuse_proto.py, checks every result against the host directory, and stops
the daemon at the end whatever happens. Prints one line per check (`ok N -`,
`not ok N -`, `ok N - ... # SKIP why`) and `N checks, N failed`; exits 1 if a
check failed.

Scenarios (default: all):
  ops         INIT, then every supported opcode on request queue 1 with
              1 MiB writes and reads over many descriptors, direct and
              indirect; forgets on the hiprio queue
  queues      (vufsd, --queues >= 2) requests on every request queue and
              forgets on hiprio; the stats file counts them per vring
  malformed   the error contract case by case, each followed by a good
              request on the same ring; the daemon's fds do not grow
  escape      nothing is resolved outside the shared directory: bad
              names, symlinks as parents and targets, a directory swapped
              for a symlink under a held nodeid
  disconnect  close or kill the frontend with 32+ requests in flight on
              two queues, 3 times; the daemon serves the next connection
  reset       GET_VRING_BASE stop and restart mid-stream, RESET_DEVICE and
              RESET_OWNER then a fresh set-up
  access      (vufsd, as root) who may connect: the socket's mode, another
              user, --socket-group; one daemon per socket (pid-file lock),
              a live socket never replaced; SIGHUP ends it like SIGTERM
  xattr       (vufsd, as root) the xattr policy: none without --xattr,
              user.* only with it, more with --xattr-allow
  fds         (vufsd, as root) descriptors: the hard limit raised to
              fs.nr_open; under a limit it cannot raise, names already
              looked up keep working after new ones run out
  shrink      (vufsd) the VMM cuts the memfd behind a region under a
              request: the daemon drops that connection and lives
  sandbox     (vufsd, as root) the server's namespaces, root, capabilities,
              no_new_privs and seccomp filter; the supervisor and the
              server outlive neither each other nor a SIGKILL;
              --seccomp none, --sandbox none
  creds       (vufsd, as root) requests of an unprivileged guest user: new
              names get its owner or a setgid directory's group, keep the
              set-id bits it asked for, and need its own permissions
  devices     (vufsd, as root) --allow-devices: guest root makes a device
              node, a guest user cannot; the server keeps CAP_MKNOD only
              then

--daemon virtiofsd runs the release's virtiofsd: the Rust one where it is
installed (Debian 13's package, /usr/libexec/virtiofsd, --sandbox=chroot,
--xattr), else QEMU 7.2's C one (one request queue, sandbox=chroot,
-o xattr). Both exit after each connection (the harness starts them
again) and differ from vufsd's contract in places. The C one aborts on
several malformed chains: those checks are marked `# SKIP vufsd only` with
the reason. The Rust one runs them: where it differs, the check says how
(RUST_DIFFS for the malformed scenario, inline elsewhere), and in the
malformed scenario a difference nobody wrote down fails. Its vring worker
panics on most malformed requests; the harness checks that the vring
serves no more while the daemon runs on (started without RUST_BACKTRACE,
which would make its seccomp filter kill it), then starts it again.
"""
import argparse
import contextlib
import ctypes
import errno
import fcntl
import os
import re
import resource
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import termios
import time
import traceback
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vhost_user as vu  # noqa: E402
import fuse_proto as fp  # noqa: E402
import syscall_inject  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "tools"))
import statsfile  # noqa: E402
from fuse_proto import HIPRIO, ROOT_ID, Op  # noqa: E402
from vhost_user import KiB, MiB  # noqa: E402

SCENARIOS = ("ops", "queues", "malformed", "escape", "disconnect", "reset",
             "access", "xattr", "fds", "shrink", "sandbox", "creds",
             "cache", "quiesce", "handles", "acl", "userns", "devices",
             "compromised", "frontfds", "statsfile")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
RUST_VIRTIOFSD = "/usr/libexec/virtiofsd"   # Debian 13's package virtiofsd
C_VIRTIOFSD = "/usr/lib/qemu/virtiofsd"     # QEMU 7.2's, Debian 12
DEFAULT_BIN = {"vufsd": os.path.join(REPO, "build", "tools", "vufsd"),
               "virtiofsd": RUST_VIRTIOFSD if os.access(RUST_VIRTIOFSD, os.X_OK)
               else C_VIRTIOFSD}
DT_DIR, DT_REG, DT_LNK = 4, 8, 10
XATTR_CREATE = 1
# A Rust panic logged, nothing back this long after it: the vring is lost.
RUST_PANIC_GRACE_S = 0.3
# The thread the Rust virtiofsd serves its vrings on (vhost-user-backend
# names it); without --thread-pool-size it also runs the requests.
RUST_VRING_THREAD = "vring_worker"
# After a panic, how long a good request on that vring is given.
RUST_DEAD_S = 0.5
# What a panic's message says went wrong, by the error it unwrapped.
RUST_PANIC_CLASSES = (
    ("decode", ("DecodeMessage", "InvalidCString", "InvalidHeaderLength",
                "MissingParameter")),
    ("reply", ("EncodeMessage",)),
    ("ring", ("QueueReader", "QueueWriter")),
)
# The Rust virtiofsd (1.13.2, Debian 13) where it differs from what vufsd
# must do in the malformed scenario, case by case: (what it does, why[,
# the errno]). Malformed.reply_rust fails a case that differs in any other
# way, or where this table is silent. Its vring worker thread unwraps the
# error of every request it cannot take apart or answer (vhost_user.rs:277
# in 1.13.2, "called Result::unwrap() on an Err value" in its log). The
# panic unwinds (Debian builds it with panic=unwind) and ends that thread
# only, the one that serves every vring: the process runs on with no
# queue served and the vhost-user connection open, so the guest's file
# system hangs and the VMM sees no disconnect to recover from. That is
# with RUST_BACKTRACE unset, as a VMM or systemd starts it, and the harness
# starts it so (Daemon.spawn): with RUST_BACKTRACE=1 the panic hook's
# backtrace calls getcwd(), which the seccomp allowlist lacks, and the
# filter kills the whole process with SIGSYS (Malformed.backtrace_case).
# Each "panics:CLASS" is checked for the class of the unwrapped error, a
# vring that serves no more, and a daemon that runs on without its vring
# thread and still answers on its connection.
RUST_PANIC_DECODE = ("its vring worker panics on a request it cannot decode "
                     "(short arguments or header, a name without NUL, a "
                     "chain it cannot read)")
RUST_PANIC_REPLY = ("its vring worker panics when the reply does not fit the "
                    "writable part (or there is none)")
RUST_PANIC_RING = ("its vring worker panics on a descriptor outside guest "
                   "memory")
RUST_PANIC_LOST = ("; the daemon runs on with every queue dead: the guest's "
                   "file system hangs, the VMM sees no disconnect")
RUST_LEN = ("it ignores in_header.len, as the C one does, and answers from "
            "the chain's own length")
RUST_LENIENT_CHAIN = ("it walks at most a ring's worth of descriptors and "
                      "serves what it found, loop or not")
RUST_NAMES = ("does not refuse names with / or .. (vufsd answers EINVAL) "
              "and answers them as the host's *at() calls do: only its "
              "sandbox, whose root is the share, keeps an absolute name "
              "inside (with --sandbox=none, RENAME from the canary's "
              "absolute path moved it into the share)")
# The malformed cases on which its vring worker panics, by the class of the
# error it unwrapped.
RUST_PANICS = {
    "decode": (
        "readable part of 20 bytes, shorter than the in header",
        "no readable part at all",
        "readable part of 39 bytes and 8 writable bytes",
        "readable part of 20 bytes and no writable part",
        "LOOKUP with in_header.len 0",
        "GETATTR with 8 of 16 bytes of args",
        "SETATTR with 40 of 88 bytes",
        "OPEN with 4 of 8 bytes",
        "READ with 20 of 40 bytes",
        "WRITE with 16 of 40 bytes of write_in",
        "MKDIR with 4 of 8 bytes of mkdir_in",
        "CREATE with 8 of 16 bytes of create_in",
        "MKNOD with 8 of 16 bytes of mknod_in",
        "RENAME with 4 of 8 bytes of rename_in",
        "RENAME2 with 12 of 16 bytes of rename2_in",
        "LINK with 4 of 8 bytes of link_in",
        "RELEASE with 8 of 24 bytes",
        "FLUSH with 8 of 24 bytes",
        "FSYNC with 4 of 16 bytes",
        "READDIR with 16 of 40 bytes",
        "SETXATTR with 4 bytes",
        "GETXATTR with 4 bytes",
        "ACCESS with 2 of 8 bytes",
        "FALLOCATE with 20 of 32 bytes",
        "LSEEK with 16 of 24 bytes",
        "FORGET with 4 of 8 bytes of args (hiprio)",
        "LOOKUP of a name without NUL",
        "LOOKUP with no name at all",
        "MKDIR of a name without NUL",
        "CREATE of a name without NUL",
        "MKNOD of a name without NUL",
        "SYMLINK whose target has no NUL",
        "SYMLINK with one string",
        "UNLINK of a name without NUL",
        "RMDIR of a name without NUL",
        "RENAME whose new name has no NUL",
        "RENAME with only the old name",
        "LINK of a name without NUL",
        "GETXATTR of a name without NUL",
        "REMOVEXATTR of a name without NUL",
        "readable descriptor of length 0 then nothing writable",
        "indirect table inside an indirect table",
        "indirect table outside guest memory",
        "indirect table of 20 bytes (not a multiple of 16)",
        "BATCH_FORGET with count 5 and 2 entries (hiprio)",
    ),
    "reply": (
        "writable descriptor of 4 GiB - 1",
        "descriptor whose next is itself",
        "next beyond the ring size",
        "GETATTR with 26 writable bytes for a 120-byte reply",
        "LOOKUP with 80 writable bytes for a 144-byte reply",
        "STATFS with 56 writable bytes for a 96-byte reply",
        "GETATTR with 8 writable bytes (no room for the out header)",
        "GETATTR with no writable part",
    ),
    "ring": (
        "readable descriptor outside guest memory",
        "writable descriptor outside guest memory",
        "readable descriptor across the end of region 0",
        "descriptor between the two regions",
    ),
}
RUST_DIFFS = {
    "GETATTR whose in_header.len is bigger than the readable length "
    "(64 for 56)": ("answers", RUST_LEN),
    "GETATTR whose in_header.len is bigger by 4096 than the readable length "
    "(4152 for 56)": ("answers", RUST_LEN),
    "GETATTR whose in_header.len is smaller than the readable length "
    "(48 for 56)": ("answers", RUST_LEN),
    "GETATTR whose in_header.len is smaller, header only than the readable "
    "length (40 for 56)": ("answers", RUST_LEN),
    "WRITE whose in_header.len leaves out the data": ("answers", RUST_LEN),
    "unknown opcode COPY_FILE_RANGE gets -ENOSYS": (
        "errs", "it implements COPY_FILE_RANGE (-EBADF for these arguments)",
        -errno.EBADF),
    "next loop of two descriptors": ("answers", RUST_LENIENT_CHAIN),
    "indirect table with a next loop": ("answers", RUST_LENIENT_CHAIN),
    "indirect table whose next leaves the table": ("answers",
                                                    RUST_LENIENT_CHAIN),
    "indirect table of 513 entries (ring size + 1)": ("answers",
                                                      RUST_LENIENT_CHAIN),
    "WRITE whose size is 4096 with 100 data bytes": (
        "answers", "it writes the bytes the chain has and answers with that "
        "count"),
    "WRITE of 256 MiB from 256 descriptors of the same 1 MiB": (
        "errs", "it refuses a WRITE above its own buffer size with -ENOMEM",
        -errno.ENOMEM),
    "WRITE of 1 MiB + 4 KiB": (
        "errs", "it refuses a WRITE above its own buffer size with -ENOMEM",
        -errno.ENOMEM),
    "READ of 64 MiB into 64 descriptors of the same 1 MiB": (
        "answers", "it does not hold a READ to the max_pages INIT agreed "
        "and reads what the file has"),
    "READ of 8192 bytes with 4096 writable for the data": (
        "answers", "it reads as much as the writable part holds"),
}
RUST_DIFFS.update({name: ("panics:" + cls, {"decode": RUST_PANIC_DECODE,
                                            "reply": RUST_PANIC_REPLY,
                                            "ring": RUST_PANIC_RING}[cls]
                            + RUST_PANIC_LOST)
                   for cls, names in RUST_PANICS.items() for name in names})
STAT_KEYS = ("requests", "bytes_in", "bytes_out", "errors", "malformed")
FALLOC_FL_KEEP_SIZE = 1
# What the sandboxed server keeps by default: CHOWN, DAC_OVERRIDE, FOWNER,
# FSETID, SETGID, SETUID. CAP_DAC_READ_SEARCH is bit 2.
SERVER_CAPS = 1 << 0 | 1 << 1 | 1 << 3 | 1 << 4 | 1 << 6 | 1 << 7
CAP_DAC_READ_SEARCH = 1 << 2


class DaemonDied(Exception):
    pass


def errstr(err):
    return "0" if err == 0 else f"-{fp.errno_name(-err)}"


# --- the daemon --------------------------------------------------------------

def die_with_parent():
    """In the daemon's child before exec: SIGKILL it when the test dies,
    however it dies (prctl PR_SET_PDEATHSIG)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)


class Daemon:
    """The backend under test, in its own session, logging to a file."""

    def __init__(self, args, workdir):
        self.kind, self.binary, self.queues = args.daemon, args.bin, \
            args.queues
        self.timeout = args.timeout
        self.verbose = args.verbose
        self.busy_poll = args.busy_poll
        self.workers = args.threads
        self.workdir = workdir
        self.share = os.path.join(workdir, "share")
        self.socket = os.path.join(workdir, "vufs.sock")
        self.stats = os.path.join(workdir, "stats")
        self.log = os.path.join(workdir, "daemon.log")
        self.proc = None
        self.starts = 0
        self.extra = ["--xattr"] + list(args.daemon_opt)  # --xattr: as
        # virtiofsd's -o xattr below
        self.prefix = []            # a command to run the daemon under
        self.served_by = None       # the serving process, once started
        self.pass_fds = ()          # descriptors it inherits
        self._rust = None
        self.backtrace = False      # start the Rust one with RUST_BACKTRACE=1
        self.log_mark = 0           # the log's size at the last start

    def argv(self, socket_path=None):
        sock = socket_path or self.socket
        if self.kind == "vufsd":
            argv = [self.binary, "--socket", sock, "--shared-dir", self.share,
                    "--queues", str(self.queues), "--stats", self.stats,
                    "--stats-interval", "50"]
            if self.busy_poll:
                argv += ["--busy-poll", str(self.busy_poll)]
            if self.workers > 1:
                argv += ["--threads", str(self.workers)]
            argv += self.extra
            return argv + (["--verbose"] if self.verbose else [])
        if self.rust:
            # --daemon-opt goes to it too, in place of a default it names.
            opts = [o for o in ("--sandbox=chroot", "--cache=auto")
                    if not any(x.split("=")[0] == o.split("=")[0]
                               for x in self.extra)]
            return [self.binary, f"--socket-path={sock}",
                    f"--shared-dir={self.share}"] + opts + self.extra
        return [self.binary, f"--socket-path={sock}", "-o",
                f"source={self.share}", "-o", "sandbox=chroot", "-o",
                "cache=auto", "-o", "xattr", "-f"]

    @property
    def rust(self):
        """The Rust virtiofsd (its options by name, --shared-dir), not
        QEMU 7.2's C one (-o source=): told apart by its version line,
        "virtiofsd 1.13.2" against "virtiofsd version 7.2.x"."""
        if self.kind != "virtiofsd":
            return False
        if self._rust is None:
            out = subprocess.run([self.binary, "--version"], capture_output=True,
                                 text=True, timeout=self.timeout).stdout
            self._rust = bool(re.match(r"virtiofsd \d", out))
        return self._rust

    def spawn(self, argv):
        env, shown = None, argv
        if self.rust:
            # RUST_BACKTRACE decides whether a vring worker's panic ends the
            # Rust virtiofsd (see RUST_DIFFS): never the caller's.
            env = {k: v for k, v in os.environ.items()
                   if k != "RUST_BACKTRACE"}
            if self.backtrace:
                env["RUST_BACKTRACE"] = "1"
                shown = ["RUST_BACKTRACE=1"] + argv
        with open(self.log, "a") as log:
            log.write(f"=== {' '.join(shown)}\n")
            log.flush()
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True,
                                    pass_fds=self.pass_fds, env=env,
                                    preexec_fn=die_with_parent)

    def start(self):
        """Start and wait until the socket is a new one (a stale file may
        be there: the daemon must replace it; its inode number may come
        back, its ctime does not)."""
        def ident(st):
            return st.st_ino, st.st_ctime_ns
        try:
            old = ident(os.stat(self.socket))
        except FileNotFoundError:
            old = None
        self.log_mark = os.path.getsize(self.log) if os.path.exists(
            self.log) else 0
        self.proc = self.spawn(self.prefix + self.argv())
        self.starts += 1
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise DaemonDied(f"{self.kind} exited at start with "
                                 f"{self.proc.returncode} (see {self.log})")
            try:
                st = os.stat(self.socket)
                if stat.S_ISSOCK(st.st_mode) and ident(st) != old:
                    if self.sandboxed() and not self.server_ready():
                        time.sleep(0.02)
                        continue
                    self.served_by = self.pid
                    return
            except FileNotFoundError:
                pass
            time.sleep(0.02)
        raise DaemonDied(f"{self.kind} made no socket in {self.timeout} s")

    def server_ready(self):
        """The sandboxed server is forked and set up: its first stats
        snapshot, written once it is sandboxed, names it."""
        pid = self.pid
        st = Stats(self.stats, self.timeout).parse()
        return pid != self.proc.pid and st is not None and \
            st.get("pid") == pid

    def sandboxed(self):
        """vufsd serves from a child of the process started unless told
        --sandbox none."""
        argv = self.argv()
        return self.kind == "vufsd" and not any(
            a == "none" and b == "--sandbox" for b, a in zip(argv, argv[1:]))

    @property
    def pid(self):
        """The serving process: vufsd's sandboxed server is the one child
        of the process started (its supervisor)."""
        if not self.proc:
            return None
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/"
                      "children") as f:
                kids = f.read().split()
        except OSError:
            kids = []
        return int(kids[0]) if len(kids) == 1 else self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def fds(self):
        try:
            return len(os.listdir(f"/proc/{self.pid}/fd"))
        except OSError:
            return None

    def threads(self):
        try:
            return len(os.listdir(f"/proc/{self.pid}/task"))
        except OSError:
            return None

    def thread_names(self):
        """The serving process's thread names (none once it is gone)."""
        names = []
        try:
            tids = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return names
        for tid in tids:
            try:
                with open(f"/proc/{self.pid}/task/{tid}/comm") as f:
                    names.append(f.read().strip())
            except OSError:
                pass
        return names

    def panic_over(self, timeout):
        """After the Rust virtiofsd's vring worker panicked: "ended" (the
        process is gone), "runs" (the thread has unwound and exited, the
        process lives on) or "panicking" (neither within `timeout`)."""
        deadline = time.monotonic() + timeout
        while True:
            # The names first: a process gone in between has none and is
            # then seen dead.
            worker = RUST_VRING_THREAD in self.thread_names()
            if not self.alive():
                return "ended"
            if not worker:
                return "runs"
            if time.monotonic() > deadline:
                return "panicking"
            time.sleep(0.01)

    def ensure(self):
        """Before a connection: virtiofsd serves one connection per run, so
        it is started again; vufsd must still be running."""
        if self.alive():
            return
        if self.kind == "virtiofsd" or self.proc is None:
            self.start()
        else:
            raise DaemonDied(f"vufsd exited with {self.proc.returncode}")

    def after_disconnect(self):
        """virtiofsd exits when its frontend goes: wait for that."""
        if self.kind == "virtiofsd" and self.proc is not None:
            try:
                self.proc.wait(self.timeout)
            except subprocess.TimeoutExpired:
                pass

    def panic_line(self):
        """The first Rust panic logged since the last start, as one line
        (where, then the message), or ""."""
        try:
            with open(self.log, "rb") as f:
                f.seek(self.log_mark)
                lines = f.read().decode(errors="replace").splitlines()
        except OSError:
            return ""
        for i, line in enumerate(lines):
            if " panicked at " in line:
                where = line.split(" panicked at ", 1)[1].rstrip(":")
                what = lines[i + 1].strip() if i + 1 < len(lines) else ""
                return f"{where.rsplit('/', 1)[-1]}: {what}"[:200]
        return ""

    def stop(self):
        """SIGTERM, then SIGKILL if it lingers; the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(self.timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(self.timeout)
                return "killed"
        return self.proc.returncode


class Stats:
    """vufsd's --stats file: rewritten every --stats-interval ms."""

    def __init__(self, path, timeout):
        self.path, self.timeout = path, timeout

    def parse(self):
        """The file as a dict, or None if it is missing or torn."""
        try:
            with open(self.path) as f:
                out = statsfile.nested(f.read())
        except FileNotFoundError:
            return None
        except ValueError:
            return None
        out.setdefault("vq", {})
        out.setdefault("op", {})
        if "seq" not in out or len(out["vq"]) != out.get("queues", -1):
            return None
        return out

    def wait(self, advance=2):
        """A snapshot written at least `advance` rewrites after now."""
        deadline = time.monotonic() + self.timeout
        first = None
        while time.monotonic() < deadline:
            now = self.parse()
            if now is not None:
                if first is None:
                    first = now["seq"]
                elif now["seq"] >= first + advance:
                    return now
            time.sleep(0.01)
        raise TimeoutError(f"{self.path}: seq did not advance by {advance} "
                           f"in {self.timeout} s (first {first})")


class Ctx:
    def __init__(self, args, tap, daemon):
        self.args, self.tap, self.daemon = args, tap, daemon
        self.vufsd = args.daemon == "vufsd"
        # The Rust virtiofsd differs from the C one in places of its own;
        # where it does, the check says how and what vufsd must do.
        self.rust = daemon.rust
        self.nreq = args.queues if self.vufsd else 1
        self.stats = Stats(daemon.stats, args.timeout) if self.vufsd else None
        self.share = daemon.share

    def host(self, *parts):
        return os.path.join(self.share, *parts)

    def only_vufsd(self, desc, why):
        """True when the check applies; else prints it as skipped."""
        if self.vufsd:
            return True
        self.tap.skip(desc, f"vufsd only: {why}")
        return False

    def not_c_virtiofsd(self, desc, why):
        """only_vufsd() where the reason is the C virtiofsd's own (it
        aborts, exits, or differs by design): the Rust one runs the check,
        its differences judged case by case (Malformed.reply_rust)."""
        return self.rust or self.only_vufsd(desc, why)

    def only_vufsd_root(self, desc, why):
        """only_vufsd(), and as root (the check uses other users, other
        namespaces or root's xattrs); else prints it as skipped."""
        if not self.only_vufsd(desc, why):
            return False
        if os.geteuid() == 0:
            return True
        self.tap.skip(desc, "needs root")
        return False

    @contextlib.contextmanager
    def connect(self, request_queues=None, init=True, queue_size=512,
                mem=None, daemon=None):
        """A set-up FsDevice and a Session on its first request queue,
        INIT done unless init=False; closed at the end. To the daemon
        under test unless another is given."""
        daemon = daemon or self.daemon
        daemon.ensure()
        dev = fp.FsDevice(daemon.socket,
                          self.nreq if request_queues is None
                          else request_queues, queue_size,
                          timeout=self.args.timeout, mem=mem)
        try:
            dev.setup()
            sess = fp.Session(dev)
            if init:
                r = sess.init()
                if r.error != 0 or r.problem():
                    raise vu.VhostUserError(f"INIT: {r.errname()}, "
                                            f"{r.problem()}")
            yield dev, sess
        finally:
            dev.close()
            daemon.after_disconnect()

    def check_alive(self, what):
        """vufsd must outlive everything; a dead one ends the run."""
        if self.vufsd and not self.tap.ok(self.daemon.alive(),
                                          f"{what}: daemon still running"):
            raise DaemonDied(f"vufsd exited with {self.daemon.proc.poll()}")

    def expect(self, what, r, err=0):
        """A well-formed reply with error `err`."""
        prob = r.problem()
        good = prob is None and r.error == err
        desc = f"{what}: {r.errname()}"
        if r.error != err:
            desc += f" (want {errstr(err)})"
        if prob:
            desc += f"; {prob}"
        return self.tap.ok(good, desc)

    def expect_vufsd(self, what, r, err, why):
        """`err` from vufsd; from virtiofsd, which differs (`why`), any
        well-formed error reply."""
        if self.vufsd:
            return self.expect(what, r, err)
        return self.expect_fail(f"{what} (vufsd must say {errstr(err)}; "
                                f"virtiofsd {why})", r)

    def expect_fail(self, what, r):
        """A well-formed error reply, any error."""
        prob = r.problem()
        return self.tap.ok(prob is None and r.error < 0,
                           f"{what}: fails ({r.errname()})"
                           + (f"; {prob}" if prob else ""))


def wait_fds(daemon, want, timeout=5.0):
    """The daemon's fd count once it is back to `want` (or at timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        n = daemon.fds()
        if n is None or n <= want or time.monotonic() > deadline:
            return n
        time.sleep(0.05)


def write_file(path, data, mode=0o644):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


def read_host(path):
    with open(path, "rb") as f:
        return f.read()


def first_diff(got, want):
    if got is None:
        return "no data"
    if len(got) != len(want):
        return f"{len(got)} bytes, want {len(want)}"
    for i in range(0, len(want), 4096):
        if got[i:i + 4096] != want[i:i + 4096]:
            return f"differs in the 4 KiB block at {i}"
    return None


def io_limit(sess, want=MiB):
    """The largest READ/WRITE the session allows, up to `want`."""
    init = sess.init_out
    limit = init.max_write if init else 4096
    if init and init.flags & fp.INIT_MAX_PAGES and init.max_pages:
        limit = min(limit, init.max_pages * 4096)
    return max(4096, min(want, limit))


def write_all(sess, nodeid, fh, offset, data, **kw):
    """WRITE `data` in requests of io_limit(); (all written, message)."""
    step = io_limit(sess, len(data))
    for pos in range(0, len(data), step):
        chunk = data[pos:pos + step]
        r = sess.write(nodeid, fh, offset + pos, chunk, **kw)
        if r.problem() or r.error or r.written != len(chunk):
            return False, (f"WRITE at {offset + pos}: {r.errname()}, "
                           f"{r.problem()}, wrote {r.written}")
    return True, f"{len(data)} bytes in requests of {step}"


def read_all(sess, nodeid, fh, offset, size, **kw):
    """READ `size` bytes in requests of io_limit(); (data or None, msg)."""
    step = io_limit(sess, size)
    out = []
    for pos in range(0, size, step):
        r = sess.read(nodeid, fh, offset + pos, min(step, size - pos), **kw)
        if r.problem() or r.error:
            return None, f"READ at {offset + pos}: {r.errname()}, " \
                f"{r.problem()}"
        out.append(r.data)
    return b"".join(out), f"{size} bytes in requests of {step}"


def same_attr(attr, st):
    """Where a fuse_attr disagrees with an os.stat_result (None if not)."""
    diffs = []
    for name, got, want in (
            ("ino", attr.ino, st.st_ino), ("size", attr.size, st.st_size),
            ("mode", attr.mode, st.st_mode), ("nlink", attr.nlink,
                                               st.st_nlink),
            ("uid", attr.uid, st.st_uid), ("gid", attr.gid, st.st_gid),
            ("mtime", attr.mtime * 10**9 + attr.mtimensec, st.st_mtime_ns)):
        if got != want:
            diffs.append(f"{name} {got:#o} != {want:#o}" if name == "mode"
                         else f"{name} {got} != {want}")
    return "; ".join(diffs) or None


# --- ops ---------------------------------------------------------------------

class Lookups:
    """nlookup per nodeid, as the kernel counts them for FORGET."""

    def __init__(self):
        self.count = Counter()

    def add(self, r):
        entry = getattr(r, "entry", None)
        if r.error == 0 and entry is not None and entry.nodeid:
            self.count[entry.nodeid] += 1
        for d in getattr(r, "dirents", None) or []:
            if d.entry is not None and d.entry.nodeid:
                self.count[d.entry.nodeid] += 1
        return r


def check_device(ctx, dev):
    t = ctx.tap
    t.diag(f"offered features {dev.offered:#x}, protocol "
           f"{dev.offered_protocol:#x}; GET_QUEUE_NUM {dev.queue_num}; "
           f"{dev.nqueues} vrings set up")
    for name, b in (("VERSION_1", vu.F_VERSION_1),
                    ("RING_INDIRECT_DESC", vu.F_RING_INDIRECT_DESC),
                    ("RING_EVENT_IDX", vu.F_RING_EVENT_IDX),
                    ("PROTOCOL_FEATURES", vu.F_PROTOCOL_FEATURES)):
        t.ok(vu.bit(dev.offered, b), f"ops: feature {name} offered")
    for name, b in (("MQ", vu.PROTO_MQ), ("REPLY_ACK", vu.PROTO_REPLY_ACK)):
        t.ok(vu.bit(dev.protocol, b), f"ops: protocol feature {name} "
             "negotiated")
    desc = "ops: protocol feature RESET_DEVICE offered, CONFIG not"
    if ctx.not_c_virtiofsd(desc, "virtiofsd 7.2 has no RESET_DEVICE"):
        t.ok(vu.bit(dev.offered_protocol, vu.PROTO_RESET_DEVICE) and
             not vu.bit(dev.offered_protocol, vu.PROTO_CONFIG),
             f"{desc} ({dev.offered_protocol:#x})")
    t.ok(dev.queue_num == 1 + ctx.nreq,
         f"ops: GET_QUEUE_NUM {dev.queue_num} == 1 + {ctx.nreq} request "
         "queues")


def check_init(ctx, r):
    t = ctx.tap
    if not ctx.expect("ops: INIT 7.38", r):
        return False
    i = r.init
    t.diag(f"INIT reply: {i}")
    t.ok(len(r.body) == fp.INIT_OUT.size,
         f"ops: INIT reply is a {len(r.body)}-byte fuse_init_out (64)")
    t.ok(i.major == 7 and 31 <= i.minor <= fp.KERNEL_MINOR_VERSION,
         f"ops: INIT answers 7.{i.minor} (7.31 .. 7.38)")
    t.ok(i.flags & fp.INIT_MAX_PAGES and i.max_pages >= 1,
         f"ops: INIT grants MAX_PAGES, max_pages {i.max_pages}")
    t.ok(i.max_write >= 4096, f"ops: INIT max_write {i.max_write} >= 4096")
    t.ok(not i.flags & ~fp.INIT_FLAGS & 0x7FFFFFFF,
         f"ops: INIT flags {i.flags:#x} within those asked for "
         f"({fp.INIT_FLAGS:#x})")
    return True


def ops_open(ctx, s, node):
    """OPEN read-only, READ, a WRITE the handle does not allow, RELEASE."""
    r = s.open(node, os.O_RDONLY)
    if not ctx.expect("ops: OPEN hostfile O_RDONLY", r):
        return
    fh = r.open.fh
    r = s.read(node, fh, 0, 4096)
    ctx.expect("ops: READ hostfile", r)
    ctx.tap.ok(r.data == b"made on the host\n",
               f"ops: ... gives its content ({r.data!r})")
    ctx.expect("ops: WRITE through the O_RDONLY handle",
               s.write(node, fh, 0, b"x"), -errno.EBADF)
    ctx.expect("ops: RELEASE hostfile", s.release(node, fh, os.O_RDONLY))


def ops_io(ctx, s, lk, top):
    """MKDIR, CREATE, 1 MiB writes and reads, odd splits, SETATTR."""
    t = ctx.tap
    r = lk.add(s.mkdir(top, "dir1", 0o750))
    if not ctx.expect("ops: MKDIR dir1 0750", r):
        return None
    dir1 = r.entry.nodeid
    st = os.stat(ctx.host("ops", "dir1"))
    t.ok(stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o750,
         f"ops: dir1 on the host is a directory, mode "
         f"{stat.S_IMODE(st.st_mode):#o}")
    t.ok(same_attr(r.entry.attr, st) is None,
         f"ops: MKDIR entry attributes match the host "
         f"({same_attr(r.entry.attr, st)})")

    r = lk.add(s.create(dir1, "big", 0o640))
    if not ctx.expect("ops: CREATE dir1/big 0640 O_RDWR", r):
        return None
    big, fh = r.entry.nodeid, r.open.fh
    path = ctx.host("ops", "dir1", "big")
    st = os.stat(path)
    t.ok(stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o640 and
         st.st_size == 0, f"ops: big exists on the host, mode "
         f"{stat.S_IMODE(st.st_mode):#o}, size {st.st_size}")

    a, b = os.urandom(MiB), os.urandom(MiB)
    good, msg = write_all(s, big, fh, 0, a, in_split=4096)
    t.ok(good, f"ops: WRITE 1 MiB in direct 4 KiB descriptors ({msg})")
    good, msg = write_all(s, big, fh, MiB, b, in_split=4096, indirect=True)
    t.ok(good, f"ops: WRITE 1 MiB in 4 KiB descriptors through an indirect "
         f"table ({msg})")
    bad = first_diff(read_host(path), a + b)
    t.ok(bad is None, "ops: the host file holds both writes"
         + (f" ({bad})" if bad else ""))

    data, msg = read_all(s, big, fh, 0, MiB, out_split=4096, indirect=True)
    bad = first_diff(data, a)
    t.ok(bad is None, f"ops: READ 1 MiB into indirect 4 KiB descriptors "
         f"matches ({bad or msg})")
    data, msg = read_all(s, big, fh, MiB, MiB, out_split=64 * KiB)
    bad = first_diff(data, b)
    t.ok(bad is None, f"ops: READ 1 MiB into direct 64 KiB descriptors "
         f"matches ({bad or msg})")
    odd = [16, 1, 4095, 7, 100, 3]  # then the rest in one
    r = s.read(big, fh, MiB - 6000, 12000, out_split=odd)
    want = (a + b)[MiB - 6000:MiB + 6000]
    ctx.expect("ops: READ 12000 bytes across the two writes into buffers "
               f"of {odd}+rest", r)
    t.ok(r.data == want, "ops: ... and its data matches")
    r = s.read(big, fh, 2 * MiB, 4096)
    t.ok(r.error == 0 and r.problem() is None and r.data == b"",
         f"ops: READ at end of file returns 0 bytes ({r.errname()}, "
         f"{len(r.body)} bytes)")

    # Headers and args cut at odd places, one byte per descriptor.
    r = s.getattr(big, in_split=[1] * fp.IN_HDR.size + [7, 9],
                  out_split=[1] * fp.OUT_HDR.size + [5] * 20)
    ctx.expect("ops: GETATTR with every header byte in its own descriptor",
               r)
    t.ok(r.attr is not None and r.attr.size == 2 * MiB,
         f"ops: ... and its attributes ({r.attr and r.attr.size} bytes)")
    odd_data = os.urandom(10000)
    r = s.write(big, fh, 5, odd_data, in_split=[7, 33, 13, 27, 1, 999, 2])
    ctx.expect("ops: WRITE with header, args and data cut at odd places", r)
    want = bytearray(a + b)
    want[5:10005] = odd_data
    bad = first_diff(read_host(path), bytes(want))
    t.ok(r.written == 10000 and bad is None,
         f"ops: ... wrote {r.written} bytes, the host file agrees"
         + (f" ({bad})" if bad else ""))

    r = s.getattr(big)
    st = os.stat(path)
    ctx.expect("ops: GETATTR big", r)
    t.ok(r.attr is not None and same_attr(r.attr, st) is None,
         f"ops: GETATTR matches os.stat "
         f"({r.attr and same_attr(r.attr, st)})")

    r = s.setattr(big, fp.FATTR_SIZE | fp.FATTR_FH, fh=fh, size=100000)
    ctx.expect("ops: SETATTR size 100000 (truncate)", r)
    t.ok(r.attr is not None and r.attr.size == 100000 and
         os.stat(path).st_size == 100000,
         f"ops: truncated: reply size {r.attr and r.attr.size}, host size "
         f"{os.stat(path).st_size}")
    r = s.setattr(big, fp.FATTR_MODE, mode=0o600)
    ctx.expect("ops: SETATTR mode 0600", r)
    mode = stat.S_IMODE(os.stat(path).st_mode)
    t.ok(r.attr is not None and stat.S_IMODE(r.attr.mode) == 0o600 and
         mode == 0o600, f"ops: chmod: host mode {mode:#o}")
    at, mt = (1000000000, 123456789), (1100000000, 987654321)
    r = s.setattr(big, fp.FATTR_ATIME | fp.FATTR_MTIME, atime=at, mtime=mt)
    ctx.expect("ops: SETATTR atime and mtime", r)
    st = os.stat(path)
    t.ok((st.st_atime_ns, st.st_mtime_ns) ==
         (at[0] * 10**9 + at[1], mt[0] * 10**9 + mt[1]) and r.attr and
         (r.attr.mtime, r.attr.mtimensec) == mt,
         f"ops: utimes: host atime {st.st_atime_ns} mtime {st.st_mtime_ns}")
    return dir1, big, fh


def ops_names(ctx, s, lk, top, dir1, big):
    """SYMLINK, READLINK, LINK, RENAME(2), UNLINK, MKNOD, RMDIR."""
    t = ctx.tap
    h = lambda *p: ctx.host("ops", *p)  # noqa: E731
    target = "dir1/big-not-resolved/../x"
    r = lk.add(s.symlink(top, "lnk", target))
    ctx.expect("ops: SYMLINK lnk", r)
    t.ok(os.path.islink(h("lnk")) and os.readlink(h("lnk")) == target,
         "ops: lnk is a symlink on the host with the text given")
    t.ok(r.entry is not None and stat.S_ISLNK(r.entry.attr.mode),
         "ops: SYMLINK entry is S_IFLNK")
    lnk = r.entry.nodeid if r.entry else 0
    r = s.readlink(lnk)
    ctx.expect("ops: READLINK lnk", r)
    t.ok(r.body == target.encode(), f"ops: READLINK text {r.body!r}")

    r = lk.add(s.link(big, top, "big.hard"))
    ctx.expect("ops: LINK dir1/big as big.hard", r)
    st, st2 = os.stat(h("dir1", "big")), os.stat(h("big.hard"))
    t.ok(st.st_ino == st2.st_ino and st.st_nlink == 2 and r.entry and
         r.entry.attr.nlink == 2 and r.entry.attr.ino == st.st_ino,
         f"ops: hard link on the host, nlink {st.st_nlink}")
    r = s.rename(top, "big.hard", top, "big.renamed")
    ctx.expect("ops: RENAME big.hard big.renamed", r)
    t.ok(os.path.exists(h("big.renamed")) and not
         os.path.exists(h("big.hard")), "ops: renamed on the host")

    write_file(h("other"), b"other file\n")
    # Like the kernel, look names up before renaming or removing them
    # (virtiofsd answers -EIO for a name it never looked up).
    lk.add(s.lookup(top, "other"))
    r = s.rename2(top, "other", top, "big.renamed", fp.RENAME_NOREPLACE)
    ctx.expect("ops: RENAME2 NOREPLACE onto an existing name", r,
               -errno.EEXIST)
    t.ok(read_host(h("other")) == b"other file\n" and
         os.stat(h("big.renamed")).st_ino == st.st_ino,
         "ops: both files unchanged on the host")
    r = s.rename2(top, "other", top, "big.exch", fp.RENAME_NOREPLACE)
    ctx.expect("ops: RENAME2 NOREPLACE onto a free name", r)
    r = s.rename2(top, "big.exch", top, "big.renamed", fp.RENAME_EXCHANGE)
    ctx.expect("ops: RENAME2 EXCHANGE", r)
    lk.add(s.lookup(top, "big.exch"))
    t.ok(read_host(h("big.renamed")) == b"other file\n" and
         os.stat(h("big.exch")).st_ino == st.st_ino,
         "ops: the two names swapped on the host")
    r = s.rename(top, "big.exch", dir1, "moved")
    ctx.expect("ops: RENAME into another directory", r)
    t.ok(os.stat(h("dir1", "moved")).st_ino == st.st_ino,
         "ops: moved on the host")

    lk.add(s.lookup(top, "big.renamed"))
    r = s.unlink(top, "big.renamed")
    ctx.expect("ops: UNLINK big.renamed", r)
    t.ok(not os.path.lexists(h("big.renamed")), "ops: gone on the host")
    r = s.unlink(top, "big.renamed")
    ctx.expect_vufsd("ops: UNLINK it again", r, -errno.ENOENT,
                     "answers -EIO for a name it never looked up")
    lk.add(s.lookup(dir1, "moved"))
    r = s.unlink(dir1, "moved")
    ctx.expect("ops: UNLINK the second link of big", r)
    t.ok(os.stat(h("dir1", "big")).st_nlink == 1, "ops: big has nlink 1")

    r = lk.add(s.mknod(top, "fifo", stat.S_IFIFO | 0o640))
    ctx.expect("ops: MKNOD fifo", r)
    t.ok(os.path.exists(h("fifo")) and
         stat.S_ISFIFO(os.lstat(h("fifo")).st_mode),
         "ops: fifo is a FIFO on the host")
    r = lk.add(s.mkdir(top, "dir2", 0o755))
    ctx.expect("ops: MKDIR dir2", r)
    r = s.rmdir(top, "dir2")
    ctx.expect("ops: RMDIR dir2", r)
    t.ok(not os.path.exists(h("dir2")), "ops: dir2 gone on the host")
    r = s.rmdir(top, "dir1")
    ctx.expect("ops: RMDIR dir1, which is not empty", r, -errno.ENOTEMPTY)
    r = lk.add(s.lookup(top, "nothing-here"))
    ctx.expect("ops: LOOKUP of a missing name", r, -errno.ENOENT)


def read_whole_dir(s, opcode, node, fh, size, limit=1000):
    """READDIR(PLUS) from offset 0, each call resuming at the last entry's
    off; (entries, calls, problem or None)."""
    entries, offset = [], 0
    for calls in range(1, limit + 1):
        r = s._readdir(opcode, node, fh, offset, size)
        if r.error or r.problem():
            return entries, calls, f"{r.errname()} {r.problem()}"
        if r.bad_dirents:
            return entries, calls, r.bad_dirents
        if not r.dirents:
            return entries, calls, None
        entries.extend(r.dirents)
        offset = r.dirents[-1].off
    return entries, limit, f"not at the end after {limit} calls"


def ops_dirs(ctx, s, lk, top):
    t = ctx.tap
    many = ctx.host("ops", "many")
    os.mkdir(many)
    names = {f"entry-{i:03d}-" + "x" * (i % 23) for i in range(60)}
    for n in names:
        write_file(os.path.join(many, n), n.encode())
    os.mkdir(os.path.join(many, "subdir"))
    names.add("subdir")
    r = lk.add(s.lookup(top, "many"))
    if not ctx.expect("ops: LOOKUP many", r):
        return
    node = r.entry.nodeid
    r = s.opendir(node)
    if not ctx.expect("ops: OPENDIR many", r):
        return
    fh = r.open.fh
    want = names | {".", ".."}

    r = s.readdir(node, fh, 0, 64 * KiB)
    ctx.expect("ops: READDIR with a 64 KiB buffer", r)
    got = [d.name for d in r.dirents or []]
    t.ok(sorted(got) == sorted(want),
         f"ops: READDIR lists the {len(want)} names once each "
         f"({len(got)} entries{', ' + r.bad_dirents if r.bad_dirents else ''}"
         ")")
    inos = {n: os.lstat(os.path.join(many, n)).st_ino for n in names}
    wrong = [d.name for d in r.dirents or []
             if d.name in inos and (d.ino != inos[d.name] or d.type !=
                                    (DT_DIR if d.name == "subdir"
                                     else DT_REG))]
    t.ok(not wrong, f"ops: READDIR inode numbers and types match the host "
         f"({wrong[:3]})")

    for opcode, size in ((Op.READDIR, 200), (Op.READDIRPLUS, 400)):
        ents, calls, prob = read_whole_dir(s, opcode, node, fh, size)
        lk.count.update(d.entry.nodeid for d in ents
                        if d.entry is not None and d.entry.nodeid)
        got = [d.name for d in ents]
        t.ok(prob is None and sorted(got) == sorted(want) and calls > 10,
             f"ops: {opcode.name} with a {size}-byte buffer, resumed at "
             f"each last off: {len(got)} entries in {calls} calls, each "
             f"name once ({prob})")
        if opcode == Op.READDIRPLUS:
            wrong = []
            for d in ents:
                if d.name in (".", ".."):
                    continue
                st = os.lstat(os.path.join(many, d.name))
                if not d.entry.nodeid or same_attr(d.entry.attr, st):
                    wrong.append((d.name, d.entry.nodeid,
                                  same_attr(d.entry.attr, st)))
            t.ok(not wrong, "ops: READDIRPLUS entries carry a nodeid and "
                 f"the host's attributes ({wrong[:2]})")
    ctx.expect("ops: FSYNCDIR", s.fsyncdir(node, fh))
    ctx.expect("ops: RELEASEDIR", s.releasedir(node, fh))


def ops_misc(ctx, s, lk, top, big, fh):
    """STATFS, ACCESS, FALLOCATE, LSEEK, FSYNC, FLUSH, RELEASE, xattrs."""
    t = ctx.tap
    r = s.statfs()
    ctx.expect("ops: STATFS", r)
    vfs = os.statvfs(ctx.share)
    sf = r.statfs
    t.ok(sf is not None and (sf.bsize, sf.frsize, sf.namelen, sf.blocks,
                             sf.files) ==
         (vfs.f_bsize, vfs.f_frsize, vfs.f_namemax, vfs.f_blocks,
          vfs.f_files),
         f"ops: STATFS matches os.statvfs ({sf})")

    desc = "ops: ACCESS R_OK|W_OK on big"
    if ctx.not_c_virtiofsd(desc, "virtiofsd 7.2 answers ACCESS with -ENOSYS"):
        ctx.expect(desc, s.access(big, os.R_OK | os.W_OK))
        ctx.expect("ops: ACCESS X_OK on big (mode 0600, even for root)",
                   s.access(big, os.X_OK), -errno.EACCES)

    r = lk.add(s.create(top, "falloc", 0o644))
    ctx.expect("ops: CREATE falloc", r)
    node, ffh = r.entry.nodeid, r.open.fh
    path = ctx.host("ops", "falloc")
    ctx.expect("ops: FALLOCATE 0..64 KiB", s.fallocate(node, ffh, 0, 65536))
    st = os.stat(path)
    t.ok(st.st_size == 65536 and st.st_blocks * 512 >= 65536,
         f"ops: falloc size {st.st_size}, {st.st_blocks * 512} bytes "
         "allocated")
    ctx.expect("ops: FALLOCATE KEEP_SIZE 64..192 KiB",
               s.fallocate(node, ffh, 65536, 131072, FALLOC_FL_KEEP_SIZE))
    st2 = os.stat(path)
    t.ok(st2.st_size == 65536 and st2.st_blocks * 512 >= 196608,
         f"ops: size still {st2.st_size}, {st2.st_blocks * 512} bytes "
         "allocated")
    ctx.expect("ops: RELEASE falloc", s.release(node, ffh))

    # A sparse file: data at 0 and at 1 MiB, a hole between.
    r = lk.add(s.create(top, "sparse", 0o644))
    ctx.expect("ops: CREATE sparse", r)
    node, sfh = r.entry.nodeid, r.open.fh
    for off in (0, MiB):
        s.write(node, sfh, off, os.urandom(4096))
    path = ctx.host("ops", "sparse")
    hfd = os.open(path, os.O_RDONLY)
    try:
        for what, off, whence in (("SEEK_DATA from 4096", 4096,
                                   os.SEEK_DATA),
                                  ("SEEK_HOLE from 0", 0, os.SEEK_HOLE),
                                  ("SEEK_DATA from 0", 0, os.SEEK_DATA),
                                  ("SEEK_HOLE from 1 MiB", MiB,
                                   os.SEEK_HOLE)):
            want = os.lseek(hfd, off, whence)
            r = s.lseek(node, sfh, off, whence)
            ctx.expect(f"ops: LSEEK {what}", r)
            t.ok(r.offset == want,
                 f"ops: LSEEK {what} gives {r.offset}, the host {want}")
        r = s.lseek(node, sfh, 2 * MiB, os.SEEK_DATA)
        ctx.expect("ops: LSEEK SEEK_DATA past the end", r, -errno.ENXIO)
    finally:
        os.close(hfd)
    ctx.expect("ops: RELEASE sparse", s.release(node, sfh))

    ctx.expect("ops: FSYNC big", s.fsync(big, fh))
    ctx.expect("ops: FSYNC big (datasync)", s.fsync(big, fh, datasync=True))
    ctx.expect("ops: FLUSH big", s.flush(big, fh, lock_owner=0x1234))
    ctx.expect("ops: RELEASE big", s.release(big, fh))
    ctx.expect("ops: SYNCFS", s.syncfs())

    # Extended attributes, if the host file system takes user.* ones.
    path = ctx.host("ops", "dir1", "big")
    try:
        os.setxattr(path, "user.probe", b"1")
        os.removexattr(path, "user.probe")
    except OSError as e:
        t.skip("ops: xattrs", f"the host fs refuses user xattrs ({e})")
        return
    name, value = "user.vufs.test", b"value-1"
    ctx.expect("ops: SETXATTR user.vufs.test",
               s.setxattr(big, name, value))
    t.ok(os.getxattr(path, name) == value, "ops: the host file has it")
    ctx.expect("ops: SETXATTR XATTR_CREATE on an existing name",
               s.setxattr(big, name, b"x", XATTR_CREATE), -errno.EEXIST)
    r = s.getxattr(big, name, 0)
    ctx.expect("ops: GETXATTR size 0", r)
    t.ok(r.xattr_size == len(value), f"ops: ... gives the size "
         f"{r.xattr_size}")
    r = s.getxattr(big, name, 64)
    ctx.expect("ops: GETXATTR into 64 bytes", r)
    t.ok(r.value == value, f"ops: ... gives the value {r.value!r}")
    ctx.expect("ops: GETXATTR into 3 bytes", s.getxattr(big, name, 3),
               -errno.ERANGE)
    ctx.expect("ops: SETXATTR user.vufs.short = 'ab'",
               s.setxattr(big, "user.vufs.short", b"ab"))
    r = s.getxattr(big, "user.vufs.short", 4)
    ctx.expect("ops: GETXATTR of a 2-byte value into 4 bytes", r)
    t.ok(r.value == b"ab", f"ops: ... gives the value {r.value!r}")
    ctx.expect("ops: LISTXATTR into 4 bytes", s.listxattr(big, 4),
               -errno.ERANGE)
    ctx.expect("ops: REMOVEXATTR user.vufs.short",
               s.removexattr(big, "user.vufs.short"))
    # vufsd shows user.* names only (scenario xattr); virtiofsd all of them.
    host_list = b"".join(n.encode() + b"\0" for n in os.listxattr(path)
                         if n.startswith("user.") or not ctx.vufsd)
    r = s.listxattr(big, 0)
    ctx.expect("ops: LISTXATTR size 0", r)
    t.ok(r.xattr_size == len(host_list),
         f"ops: ... gives {r.xattr_size}, the host list has "
         f"{len(host_list)} bytes")
    r = s.listxattr(big, 4096)
    ctx.expect("ops: LISTXATTR into 4 KiB", r)
    got = set((r.value or b"").split(b"\0")) - {b""}
    t.ok(got == set(host_list.split(b"\0")) - {b""} and
         name.encode() in got, f"ops: ... lists {sorted(got)}")
    ctx.expect("ops: REMOVEXATTR", s.removexattr(big, name))
    t.ok(name not in os.listxattr(path), "ops: gone from the host file")
    ctx.expect("ops: GETXATTR after removal", s.getxattr(big, name, 64),
               -errno.ENODATA)


def ops_forget(ctx, s, lk):
    """FORGET and BATCH_FORGET on hiprio: chains back with used length 0."""
    t = ctx.tap
    counts = sorted(lk.count.items())
    t.diag(f"{len(counts)} nodeids looked up "
           f"{sum(c for _, c in counts)} times")
    first, rest = counts[0], counts[1:]
    r = s.forget(*first)
    t.ok(r.used_len == 0, f"ops: FORGET of nodeid {first[0]} x{first[1]} on "
         f"vring 0 returned with used length {r.used_len}")
    r = s.batch_forget(rest)
    t.ok(r.used_len == 0, f"ops: BATCH_FORGET of {len(rest)} nodeids on "
         f"vring 0 returned with used length {r.used_len}")
    r = s.getattr(ROOT_ID)
    ctx.expect("ops: GETATTR root after the forgets", r)


def scenario_ops(ctx):
    t = ctx.tap
    top_path = ctx.host("ops")
    os.mkdir(top_path)
    write_file(ctx.host("ops", "hostfile"), b"made on the host\n")
    with ctx.connect(init=False) as (dev, s):
        check_device(ctx, dev)
        if not check_init(ctx, s.init()):
            return
        lk = Lookups()
        r = s.getattr(ROOT_ID)
        ctx.expect("ops: GETATTR root", r)
        t.ok(r.attr is not None and
             same_attr(r.attr, os.stat(ctx.share)) is None,
             f"ops: root attributes are the shared directory's "
             f"({r.attr and same_attr(r.attr, os.stat(ctx.share))})")
        r = lk.add(s.lookup(ROOT_ID, "ops"))
        if not ctx.expect("ops: LOOKUP ops", r):
            return
        top = r.entry.nodeid
        r = lk.add(s.lookup(top, "hostfile"))
        ctx.expect("ops: LOOKUP hostfile", r)
        t.ok(r.entry is not None and r.entry.nodeid not in (0, ROOT_ID) and
             same_attr(r.entry.attr, os.stat(ctx.host("ops", "hostfile")))
             is None, "ops: LOOKUP entry matches os.stat")
        ops_open(ctx, s, r.entry.nodeid if r.entry else 0)
        got = ops_io(ctx, s, lk, top)
        if got is None:
            return
        dir1, big, fh = got
        ops_names(ctx, s, lk, top, dir1, big)
        ops_dirs(ctx, s, lk, top)
        ops_misc(ctx, s, lk, top, big, fh)
        ops_forget(ctx, s, lk)
        want = {"dir1", "hostfile", "lnk", "fifo", "many", "falloc",
                "sparse"}
        got = set(os.listdir(top_path))
        t.ok(got == want, f"ops: the host directory holds what it should "
             f"({sorted(got ^ want)} differ)")
        r = s.destroy()
        if ctx.rust:
            t.ok(r.used_len == 0 or (r.problem() is None and r.error == 0),
                 f"ops: DESTROY: used length {r.used_len} (the Rust virtiofsd "
                 "returns the chain with no reply, where libfuse answers 0; "
                 "vufsd must answer 0)")
        else:
            ctx.expect("ops: DESTROY", r)


# --- queues ------------------------------------------------------------------

def scenario_queues(ctx):
    t = ctx.tap
    if not ctx.only_vufsd_root("queues", "virtiofsd has one request queue"):
        return
    if ctx.nreq < 2:
        t.skip("queues", f"needs --queues >= 2 (have {ctx.nreq})")
        return
    os.mkdir(ctx.host("queues"))
    content = os.urandom(64 * KiB)
    write_file(ctx.host("queues", "data"), content)
    with ctx.connect() as (dev, s):
        nvq = dev.nqueues
        t.ok(nvq == 1 + ctx.nreq, f"queues: {nvq} vrings set up")
        threads = ctx.daemon.threads()
        want = 2 + ctx.nreq * ctx.daemon.workers  # main, hiprio, workers
        t.ok(threads is not None and threads >= want,
             f"queues: daemon has {threads} threads, >= {want} (main, "
             f"hiprio, {ctx.daemon.workers} per request queue)")
        top = s.lookup(ROOT_ID, "queues").entry.nodeid
        for _ in range(4):  # one lookup to keep, three to forget
            r = s.lookup(top, "data")
        node = r.entry.nodeid
        r = s.open(node)
        if not ctx.expect("queues: OPEN data", r):
            return
        fh = r.open.fh
        before = ctx.stats.wait()
        t.diag(f"stats before: {before}")
        t.ok(before.get("pid") == ctx.daemon.pid and
             before.get("queues") == nvq,
             f"queues: stats pid {before.get('pid')} and queues "
             f"{before.get('queues')} ({ctx.daemon.pid}, {nvq})")

        # Queue q gets 8 + 3q requests, all in flight on every queue at once.
        reqs = []
        for q in range(1, nvq):
            for i in range(8 + 3 * q):
                if i % 2:
                    r = s.request(Op.GETATTR, ROOT_ID,
                                  fp.GETATTR_IN.pack(0, 0, 0),
                                  out_size=fp.ATTR_OUT_SIZE)
                else:
                    size = 4096 * (1 + i % 4)
                    r = s.request(Op.READ, node, fp.READ_IN.pack(
                        fh, 4096 * q, size, 0, 0, 0, 0), out_size=size,
                        out_split=4096)
                r.queue = q
                reqs.append(r)
        hi = [s.request(Op.FORGET, node, fp.FORGET_IN.pack(1),
                        out_size=None),
              s.request(Op.BATCH_FORGET, 0, fp.BATCH_FORGET_IN.pack(1, 0) +
                        fp.FORGET_ONE.pack(node, 2), out_size=None)]
        for r in hi:
            r.queue = HIPRIO
        dev.run(reqs + hi)
        bad = [r for r in reqs if r.problem() or r.error]
        t.ok(not bad, f"queues: {len(reqs)} requests on {nvq - 1} request "
             f"queues all answered ({bad[:3]})")
        t.ok(all(r.used_len == 0 for r in hi),
             "queues: FORGET and BATCH_FORGET returned with used length 0")
        after = ctx.stats.wait()
        t.diag(f"stats after: {after}")
        for q in range(nvq):
            mine = [r for r in reqs + hi if r.queue == q]
            b, a = before["vq"].get(q), after["vq"].get(q)
            if not t.ok(a is not None and b is not None,
                        f"queues: stats line for vq {q}"):
                continue
            d = {k: a.get(k, 0) - b.get(k, 0) for k in STAT_KEYS}
            want = {"requests": len(mine),
                    "bytes_in": sum(len(r.readable) for r in mine),
                    "bytes_out": sum(r.used_len for r in mine),
                    "errors": 0, "malformed": 0}
            t.ok(d == want, f"queues: vq {q} counters moved by {d}, "
                 f"want {want}")
        sent = Counter(fp.op_name(r.opcode) for r in reqs + hi)
        got = {k: after["op"].get(k, 0) - before["op"].get(k, 0)
               for k in set(after["op"]) | set(before["op"])}
        got = {k: v for k, v in got.items() if v}
        t.ok(got == dict(sent), f"queues: per-opcode counters moved by "
             f"{got}, want {dict(sent)}")
        # The table mutex: every request that names an inode takes it.
        lb, la = before.get("lock", {}), after.get("lock", {})
        dl = {k: la.get(k, 0) - lb.get(k, 0)
              for k in ("acquired", "contended", "wait_us")}
        t.ok(set(la) == {"acquired", "contended", "wait_us"} and
             dl["acquired"] >= len(reqs) and
             0 <= dl["contended"] <= dl["acquired"] and dl["wait_us"] >= 0,
             f"queues: table-lock counters moved by {dl} (acquired >= "
             f"{len(reqs)}, contended within it)")
        ctx.expect("queues: RELEASE", s.release(node, fh))


# --- malformed ---------------------------------------------------------------

def hdr(opcode, unique, nodeid=ROOT_ID, length=None, extra=0):
    """A fuse_in_header with len = 40 + extra unless given."""
    return fp.IN_HDR.pack(fp.IN_HDR.size + extra if length is None
                          else length, opcode, unique, nodeid, 0, 0,
                          os.getpid(), 0, 0)


class Token:
    """A completion token for a hand-made chain."""

    def __init__(self):
        self.used_len = None

    def complete(self, used_len):
        self.used_len = used_len


class Malformed:
    """The error contract, case by case on request queue 1 (and hiprio)."""

    def __init__(self, ctx, dev, s):
        self.ctx, self.t, self.dev, self.s = ctx, ctx.tap, dev, s
        self.mem = dev.mem
        self.malformed = 0   # chains the daemon must count as malformed
        self.errors = Counter()  # replies with an error, per vring
        self.good_node = ROOT_ID
        self.revived = 0     # fresh daemons the Rust virtiofsd needed

    def note(self, queue, r, malformed):
        if malformed:
            self.malformed += 1
        if r.error is not None and r.error < 0:
            self.errors[queue] += 1

    def still_serves(self, desc, queue=1, fresh=False):
        """A good request right after, on the same vring (of a fresh
        daemon after a revive)."""
        if queue == HIPRIO:
            r = self.s.forget(self.good_node, 0)
            ok = r.used_len == 0
        else:
            r = self.s.getattr(ROOT_ID, queue=queue)
            ok = r.error == 0 and r.problem() is None
            self.note(queue, r, False)
        self.t.ok(ok, f"{desc}: then vring {queue} "
                  + ("of a fresh daemon serves" if fresh else "still serves")
                  + f" ({r.errname()})")

    def run_raw(self, r, queue):
        r.queue = queue
        try:
            self.dev.run([r])
            return True
        except TimeoutError as e:
            self.t.ok(False, f"{op_desc(r)}: no completion ({e})")
            return False

    def reply(self, desc, r, want, malformed=True, queue=1, vs=None,
              rust=None):
        """Run one request; want: an -errno for a reply with that error and
        the request's unique, ("einval", 0) for -EINVAL with unique 0,
        "noreply" for used length 0, "negative" for any error reply.
        `vs`: how virtiofsd differs, if it does (then any error will do,
        or for "negative", no reply at all). `rust`: (what, why), how the
        Rust virtiofsd differs, if it does (see reply_rust)."""
        desc = f"malformed: {desc}"
        if self.ctx.rust:
            self.reply_rust(desc, r, want, queue, malformed, rust)
            return
        if not self.run_raw(r, queue):
            raise vu.VhostUserError(f"{desc}: no completion")
        self.note(queue, r, malformed)
        if vs and not self.ctx.vufsd:
            self.t.ok(r.used_len == 0 or (r.problem() is None and
                                          r.error < 0),
                      f"{desc}: {r.errname()} (virtiofsd {vs}; vufsd must "
                      f"answer {want if want == 'negative' else errstr(want)}"
                      ")")
        else:
            self.t.ok(*self.judge(desc, r, want))
        self.still_serves(desc, queue)

    @staticmethod
    def judge(desc, r, want):
        """(good, description) of a completed request against `want`."""
        if want == "noreply":
            return r.used_len == 0, (f"{desc}: chain returned with used "
                                     f"length {r.used_len} (want 0)")
        if want == "negative":
            return (r.error is not None and r.error < 0 and
                    r.used_len == r.out_len and r.used_len <= r.writable(),
                    f"{desc}: error reply ({r.errname()}, used length "
                    f"{r.used_len} of {r.writable()})")
        if isinstance(want, tuple):
            err, unique = -errno.EINVAL, want[1]
            return (r.error == err and r.out_unique == unique and
                    r.used_len == r.out_len == fp.OUT_HDR.size,
                    f"{desc}: {r.errname()} with unique {r.out_unique}, "
                    f"used length {r.used_len} (want -EINVAL, unique "
                    f"{unique}, 16)")
        prob = r.problem()
        got = f"{desc}: {r.errname()}"
        if r.error != want:
            got += f" (want {errstr(want)})"
        if prob:
            got += f"; {prob}"
        return prob is None and r.error == want, got

    def reply_rust(self, desc, r, want, queue, malformed, rust):
        """reply() on the Rust virtiofsd. It may answer as vufsd must, or
        differ in one of these ways: "errs" (a well-formed reply with
        another error), "noreply" (the chain back with nothing written),
        "answers" (a well-formed success), "bad reply" (an ill-formed
        one), "panics:CLASS" (no completion: its vring worker panicked,
        CLASS from the panic's message), "stalls" (no completion, no
        panic). A difference passes only when `rust` (or RUST_DIFFS) names
        it; after a panic or a stall the harness starts a fresh daemon
        (revive)."""
        rust = rust or RUST_DIFFS.get(desc[len("malformed: "):])
        got, err = self.rust_run(queue, lambda: self.dev.submit(r, queue),
                                 r), None
        if got == "done":
            self.note(queue, r, malformed)
            good, got = self.judge(desc, r, want)
            err = r.error
            seen = "same" if good else "noreply" if r.used_len == 0 else \
                "bad reply" if r.problem() is not None else \
                "errs" if r.error < 0 else "answers"
        else:
            r.release()
            seen, got = self.rust_lost(desc, queue, got)
        self.rust_verdict(got, seen, want, rust, err)
        self.rust_after(desc, queue, seen)

    def rust_run(self, queue, submit, tok):
        """Submit and wait for `tok`, watching the Rust virtiofsd's log:
        "done", "panic" (a panic is logged and nothing came back within
        RUST_PANIC_GRACE_S of it) or "stall" (nothing within the
        timeout)."""
        vq = self.dev.vqs[queue]
        submit()
        deadline = time.monotonic() + self.ctx.args.timeout
        panic_at = None
        while True:
            try:
                for _, t_, n in vu.wait_any([vq], 0.05):
                    t_.complete(n)
                    if t_ is tok:
                        return "done"
            except TimeoutError:
                pass
            now = time.monotonic()
            if panic_at is None and self.ctx.daemon.panic_line():
                panic_at = now
            if panic_at is not None and now - panic_at > RUST_PANIC_GRACE_S:
                return "panic"
            if now > deadline:
                return "stall"

    def rust_lost(self, desc, queue, how):
        """A request the Rust virtiofsd never completed: (seen, what)."""
        if how == "stall":
            return "stalls", (f"{desc}: no completion in "
                              f"{self.ctx.args.timeout} s, no panic")
        d = self.ctx.daemon
        line = d.panic_line()
        cls = next((c for c, keys in RUST_PANIC_CLASSES
                    if any(k in line for k in keys)), "other")
        # What the table says of a panic: the vring serves no more; the
        # daemon runs on without its vring thread and still answers the VMM,
        # or, started with RUST_BACKTRACE=1, its seccomp filter kills it.
        end = d.panic_over(self.ctx.args.timeout)
        dead = self.vring_dead(queue)
        rc = d.proc.poll()
        if rc is None:
            try:
                self.dev.conn.get_features()
                answers = True
            except (OSError, vu.VhostUserError):
                answers = False
            daemon = ("daemon runs on without its vring thread and answers "
                      "on its connection" if end == "runs" and answers else
                      f"daemon still runs, its vring thread "
                      f"{'gone' if end == 'runs' else 'still there'}, its "
                      f"connection {'answers' if answers else 'dead'}")
            as_table = (not d.backtrace and end == "runs" and answers)
        else:
            daemon = (f"daemon ended by {signal.Signals(-rc).name}" if rc < 0
                      else f"daemon exited {rc}")
            as_table = d.backtrace and rc == -signal.SIGSYS
        return f"panics:{cls}", (
            f"{desc}: no completion; its vring worker panicked ({line}); "
            f"the vring {'serves no more' if dead else 'still serves'}, the "
            f"{daemon}") + ("" if dead and as_table
                            else " [not what the table says]")

    def vring_dead(self, queue):
        """After a panic: a good request on the same vring (GETATTR, or a
        FORGET on hiprio) does not come back within RUST_DEAD_S."""
        if queue == HIPRIO:
            g = self.s.request(Op.FORGET, self.good_node,
                               fp.FORGET_IN.pack(0), out_size=None)
        else:
            g = self.s.request(Op.GETATTR, ROOT_ID,
                               fp.GETATTR_IN.pack(0, 0, 0),
                               out_size=fp.ATTR_OUT_SIZE)
        self.dev.submit(g, queue)
        try:
            vu.wait_any([self.dev.vqs[queue]], RUST_DEAD_S)
            return False
        except TimeoutError:
            return True

    def rust_after(self, desc, queue, seen):
        """After a case on the Rust virtiofsd: a fresh daemon if the vring
        was lost, then a good request on it."""
        if seen.startswith("panics") or seen == "stalls":
            self.revive()
            self.revived += 1
            self.still_serves(desc, queue, fresh=True)
        else:
            self.still_serves(desc, queue)

    def rust_verdict(self, got, seen, want, rust, err=None):
        """The check of one case on the Rust virtiofsd (reply_rust)."""
        must = want if isinstance(want, str) else errstr(
            want if isinstance(want, int) else -errno.EINVAL)
        lost = got.endswith("[not what the table says]")
        if seen == "same":
            self.t.ok(True, got)
        elif rust and seen == rust[0] and not lost and (
                len(rust) < 3 or err == rust[2]):
            self.t.ok(True, f"{got} [Rust virtiofsd: {rust[1]}; vufsd must "
                      f"answer {must}]")
        else:
            self.t.ok(False, f"{got} [Rust virtiofsd: '{seen}', a difference "
                      "nobody explained" + (f"; expected '{rust[0]}'"
                                            + (f" {errstr(rust[2])}"
                                               if len(rust) > 2 else "")
                                            if rust else "") + "]")

    def revive(self, backtrace=False):
        """After the Rust virtiofsd lost a vring: a fresh daemon (with
        RUST_BACKTRACE=1 if `backtrace`), a fresh connection on the same
        guest memory, INIT and the fixture looked up again. self.dev and
        self.s stay the same objects (the cases hold them), re-pointed at
        the new connection."""
        d = self.ctx.daemon
        own, self.dev.own_mem = self.dev.own_mem, False
        self.dev.close()
        d.stop()
        for vq in self.dev.vqs:  # nobody uses the old rings any more
            vq.free_ring_memory()
        d.backtrace = backtrace
        d.start()
        dev = fp.FsDevice(d.socket, self.ctx.nreq, self.dev.queue_size,
                          timeout=self.ctx.args.timeout, mem=self.mem)
        dev.own_mem = own
        dev.setup()
        self.dev.__dict__.update(dev.__dict__)
        self.s.__dict__.update(fp.Session(self.dev).__dict__)
        r = self.s.init()
        if r.error != 0 or r.problem():
            raise vu.VhostUserError(f"revive: INIT: {r.errname()}")
        self.fixture()
        self.fds_base = d.fds()  # the fd check at the end: this daemon's

    def raw(self, readable, writable, in_split=None, out_split=None,
            unique=0, opcode=0):
        return fp.FuseRequest(self.mem, readable, writable, in_split,
                              out_split, unique=unique, opcode=opcode)

    def chain(self, desc, descs, queue=1, extra=(), rust=None):
        """A hand-made chain (vhost_user.Virtqueue.add_descs) that must come
        back with used length 0; `extra` are guest buffers to free;
        `rust` as for reply()."""
        rust = rust or RUST_DIFFS.get(desc)
        desc = f"malformed: {desc}"
        vq = self.dev.vqs[queue]
        tok = Token()
        if self.ctx.rust:
            def submit():
                vq.add_descs(descs, tok)
                vq.kick()
            try:
                how = self.rust_run(queue, submit, tok)
            finally:
                for gpa in extra:
                    self.mem.free(gpa)
            if how == "done":
                seen = "same" if tok.used_len == 0 else "answers"
                got = (f"{desc}: chain returned with used length "
                       f"{tok.used_len}")
            else:
                seen, got = self.rust_lost(desc, queue, how)
            self.malformed += 1
            self.rust_verdict(got, seen, "noreply", rust)
            self.rust_after(desc, queue, seen)
            return
        vq.add_descs(descs, tok)
        vq.kick()
        try:
            for _, t_, n in vu.wait_any([vq], self.ctx.args.timeout):
                t_.complete(n)
            self.t.ok(tok.used_len == 0, f"{desc}: chain returned with used "
                      f"length {tok.used_len} (want 0)")
        except TimeoutError as e:
            self.t.ok(False, f"{desc}: chain returned ({e})")
            raise
        finally:
            for gpa in extra:
                self.mem.free(gpa)
        self.malformed += 1
        self.still_serves(desc, queue)

    # --- the cases ---------------------------------------------------------

    def header_cases(self):
        s, ctx = self.s, self.ctx
        u = s.next_unique()
        full = hdr(Op.GETATTR, u, extra=16) + fp.GETATTR_IN.pack(0, 0, 0)
        if ctx.not_c_virtiofsd("malformed: readable part shorter than "
                          "fuse_in_header",
                          "virtiofsd asserts (aborts) on it"):
            self.reply("readable part of 20 bytes, shorter than the in "
                       "header", self.raw(full[:20], 16 + 104), ("einval", 0))
            self.reply("no readable part at all",
                       self.raw(b"", 16 + 104), ("einval", 0))
            self.reply("readable part of 39 bytes and 8 writable bytes",
                       self.raw(full[:39], 8), "noreply")
            self.reply("readable part of 20 bytes and no writable part",
                       self.raw(full[:20], 0), "noreply")
        if not ctx.not_c_virtiofsd("malformed: in_header.len different from the "
                              "readable length",
                              "virtiofsd ignores in_header.len"):
            return
        for what, delta in (("bigger", 8), ("bigger by 4096", 4096),
                            ("smaller", -8), ("smaller, header only", -16)):
            r = s.request(Op.GETATTR, ROOT_ID, fp.GETATTR_IN.pack(0, 0, 0),
                          out_size=fp.ATTR_OUT_SIZE, length=56 + delta)
            self.reply(f"GETATTR whose in_header.len is {what} than the "
                       f"readable length ({56 + delta} for 56)", r,
                       ("einval", r.unique))
        r = s.request(Op.LOOKUP, ROOT_ID, b"ops\0", out_size=128,
                      length=0)
        self.reply("LOOKUP with in_header.len 0", r, ("einval", r.unique))
        r = s.request(Op.WRITE, self.file, fp.WRITE_IN.pack(
            self.fh, 0, 4096, 0, 0, 0, 0), os.urandom(4096), out_size=8,
            length=80)
        self.reply("WRITE whose in_header.len leaves out the data", r,
                   ("einval", r.unique))

    def args_cases(self):
        s = self.s
        for i in range(len(self.args_list())):
            # Built again for each case: after a revive the fixture's
            # nodeids and handle are the new daemon's.
            desc, opcode, node, args = self.args_list()[i]
            r = s.request(opcode, node, args, out_size=256)
            self.reply(desc, r, -errno.EINVAL)
        # On hiprio: no reply, the chain comes back with used length 0.
        r = s.request(Op.FORGET, self.file, bytes(4), out_size=None)
        self.reply("FORGET with 4 of 8 bytes of args (hiprio)", r,
                   "noreply", queue=HIPRIO)

    def args_list(self):
        return [  # (desc, opcode, nodeid, args)
            ("GETATTR with 8 of 16 bytes of args", Op.GETATTR, ROOT_ID,
             bytes(8)),
            ("SETATTR with 40 of 88 bytes", Op.SETATTR, self.file, bytes(40)),
            ("OPEN with 4 of 8 bytes", Op.OPEN, self.file, bytes(4)),
            ("READ with 20 of 40 bytes", Op.READ, self.file,
             fp.READ_IN.pack(self.fh, 0, 4096, 0, 0, 0, 0)[:20]),
            ("WRITE with 16 of 40 bytes of write_in", Op.WRITE, self.file,
             fp.WRITE_IN.pack(self.fh, 0, 0, 0, 0, 0, 0)[:16]),
            ("MKDIR with 4 of 8 bytes of mkdir_in", Op.MKDIR, self.dir,
             bytes(4)),
            ("CREATE with 8 of 16 bytes of create_in", Op.CREATE, self.dir,
             bytes(8)),
            ("MKNOD with 8 of 16 bytes of mknod_in", Op.MKNOD, self.dir,
             bytes(8)),
            ("RENAME with 4 of 8 bytes of rename_in", Op.RENAME, self.dir,
             bytes(4)),
            ("RENAME2 with 12 of 16 bytes of rename2_in", Op.RENAME2,
             self.dir, bytes(12)),
            ("LINK with 4 of 8 bytes of link_in", Op.LINK, self.dir,
             bytes(4)),
            ("RELEASE with 8 of 24 bytes", Op.RELEASE, self.file, bytes(8)),
            ("FLUSH with 8 of 24 bytes", Op.FLUSH, self.file, bytes(8)),
            ("FSYNC with 4 of 16 bytes", Op.FSYNC, self.file, bytes(4)),
            ("READDIR with 16 of 40 bytes", Op.READDIR, self.dir, bytes(16)),
            ("SETXATTR with 4 bytes", Op.SETXATTR, self.file, bytes(4)),
            ("GETXATTR with 4 bytes", Op.GETXATTR, self.file, bytes(4)),
            ("ACCESS with 2 of 8 bytes", Op.ACCESS, self.file, bytes(2)),
            ("FALLOCATE with 20 of 32 bytes", Op.FALLOCATE, self.file,
             bytes(20)),
            ("LSEEK with 16 of 24 bytes", Op.LSEEK, self.file, bytes(16)),
        ]

    def length_field_cases(self):
        """Args too short for what their own length field says."""
        s = self.s
        r = s.request(Op.WRITE, self.file, fp.WRITE_IN.pack(
            self.fh, 0, 4096, 0, 0, 0, 0), bytes(100), out_size=8)
        self.reply("WRITE whose size is 4096 with 100 data bytes", r,
                   -errno.EINVAL, vs="answers -EIO")
        r = s.request(Op.BATCH_FORGET, 0, fp.BATCH_FORGET_IN.pack(5, 0) +
                      fp.FORGET_ONE.pack(self.file, 0) * 2, out_size=None)
        self.reply("BATCH_FORGET with count 5 and 2 entries (hiprio)", r,
                   "noreply", queue=HIPRIO)

    def name_cases(self):
        s = self.s
        for i in range(len(self.name_list())):
            desc, opcode, node, args = self.name_list()[i]
            r = s.request(opcode, node, args, out_size=256)
            self.reply(desc, r, -errno.EINVAL)
        left = sorted(os.listdir(self.ctx.host("malformed")))
        self.t.ok(left == ["f", "sub"], f"malformed: nothing was made from "
                  f"the unterminated names ({left})")

    def name_list(self):
        d = self.dir
        return [
            ("LOOKUP of a name without NUL", Op.LOOKUP, d, b"abc"),
            ("LOOKUP with no name at all", Op.LOOKUP, d, b""),
            ("MKDIR of a name without NUL", Op.MKDIR, d,
             fp.MKDIR_IN.pack(0o755, 0) + b"newdir"),
            ("CREATE of a name without NUL", Op.CREATE, d,
             fp.CREATE_IN.pack(os.O_RDWR | os.O_CREAT, 0o644, 0, 0) +
             b"newfile"),
            ("MKNOD of a name without NUL", Op.MKNOD, d,
             fp.MKNOD_IN.pack(stat.S_IFIFO | 0o644, 0, 0, 0) + b"fifo"),
            ("SYMLINK whose target has no NUL", Op.SYMLINK, d,
             b"newlink\0target"),
            ("SYMLINK with one string", Op.SYMLINK, d, b"newlink\0"),
            ("UNLINK of a name without NUL", Op.UNLINK, d, b"f"),
            ("RMDIR of a name without NUL", Op.RMDIR, d, b"sub"),
            ("RENAME whose new name has no NUL", Op.RENAME, d,
             fp.RENAME_IN.pack(d) + b"f\0g"),
            ("RENAME with only the old name", Op.RENAME, d,
             fp.RENAME_IN.pack(d) + b"f\0"),
            ("LINK of a name without NUL", Op.LINK, d,
             fp.LINK_IN.pack(self.file) + b"newlink"),
            ("GETXATTR of a name without NUL", Op.GETXATTR, self.file,
             fp.GETXATTR_IN.pack(64, 0) + b"user.x"),
            ("REMOVEXATTR of a name without NUL", Op.REMOVEXATTR,
             self.file, b"user.x"),
        ]

    def opcode_cases(self):
        s, ctx = self.s, self.ctx
        for opcode, why in ((9999, None), (0, None), (Op.TMPFILE, None),
                            (Op.GETLK, None), (Op.IOCTL, None),
                            (Op.BMAP, None), (Op.POLL, None),
                            (Op.SETUPMAPPING, None),
                            (Op.COPY_FILE_RANGE, "virtiofsd implements it")):
            desc = f"unknown opcode {fp.op_name(opcode)} gets -ENOSYS"
            if why and not ctx.not_c_virtiofsd(f"malformed: {desc}", why):
                continue
            r = s.request(opcode, self.file, bytes(64), out_size=64)
            self.reply(desc, r, -errno.ENOSYS, malformed=False)
        # FUSE never answers INTERRUPT (every request runs to completion
        # here anyway): the chain comes back unused, and is not malformed.
        if ctx.not_c_virtiofsd("malformed: INTERRUPT gets no reply",
                          "virtiofsd keeps the interrupt for a later request"):
            r = s.request(Op.INTERRUPT, self.file, bytes(64), out_size=64)
            self.reply("INTERRUPT gets no reply", r, "noreply",
                       malformed=False)

    def ring_cases(self):
        """Descriptors the daemon must refuse without touching them."""
        ctx, s, mem = self.ctx, self.s, self.mem
        why = "virtiofsd (libvhost-user) exits on a bad descriptor"
        if not ctx.not_c_virtiofsd("malformed: bad descriptors", why):
            return
        D = vu.DESC.pack
        NEXT, WRITE, IND = vu.DESC_F_NEXT, vu.DESC_F_WRITE, \
            vu.DESC_F_INDIRECT
        u = s.next_unique()
        req = hdr(Op.GETATTR, u, extra=16) + fp.GETATTR_IN.pack(0, 0, 0)
        rd = mem.alloc(len(req), 8)
        mem.write(rd, req)
        wr = mem.alloc(128, 8)
        r0 = mem.regions[0]
        end0 = r0.gpa + r0.size
        nowhere = 0x5000_0000_0000
        self.chain("readable descriptor outside guest memory",
                   [(nowhere, len(req), NEXT, 1), (wr, 128, WRITE, 0)])
        self.chain("writable descriptor outside guest memory",
                   [(rd, len(req), NEXT, 1), (nowhere, 128, WRITE, 0)])
        self.chain("readable descriptor across the end of region 0",
                   [(end0 - 16, len(req), NEXT, 1), (wr, 128, WRITE, 0)])
        self.chain("writable descriptor of 4 GiB - 1",
                   [(rd, len(req), NEXT, 1),
                    (wr, 0xFFFFFFFF, WRITE, 0)])
        self.chain("descriptor between the two regions",
                   [(end0 + MiB, len(req), NEXT, 1),
                    (wr, 128, WRITE, 0)])
        self.chain("next loop of two descriptors",
                   [(rd, len(req), NEXT, 1), (wr, 128, WRITE | NEXT, 0)])
        self.chain("descriptor whose next is itself",
                   [(rd, len(req), NEXT, 0)])
        self.chain("next beyond the ring size",
                   [(rd, len(req), NEXT, 0xFFFF)])
        self.chain("readable descriptor of length 0 then nothing "
                   "writable", [(rd, 0, 0, 0)])
        # The indirect cases: tables made by hand.
        table = mem.alloc(64, 16)
        inner = mem.alloc(32, 16)
        try:
            mem.write(inner, D(rd, len(req), NEXT, 1) + D(wr, 128, WRITE, 0))
            mem.write(table, D(inner, 32, IND, 0) + bytes(48))
            self.chain("indirect table inside an indirect table",
                       [(table, 16, IND, 0)])
            mem.write(table, D(rd, len(req), NEXT, 1) +
                      D(wr, 128, WRITE | NEXT, 0))
            self.chain("indirect table with a next loop",
                       [(table, 32, IND, 0)])
            mem.write(table, D(rd, len(req), NEXT, 1) +
                      D(wr, 128, WRITE | NEXT, 7))
            self.chain("indirect table whose next leaves the table",
                       [(table, 32, IND, 0)])
            self.chain("indirect table outside guest memory",
                       [(nowhere, 32, IND, 0)])
            self.chain("indirect table of 20 bytes (not a multiple of 16)",
                       [(table, 20, IND, 0)])
            # A chain is at most the ring's size, tables included: a
            # well-formed request in a table one entry too long is refused.
            n = self.dev.vqs[1].size + 1
            big = mem.alloc(16 * n, 16)
            try:
                mem.write(big, D(rd, len(req), NEXT, 1) + D(wr, 128, WRITE, 0)
                          + bytes(16 * (n - 2)))
                self.chain(f"indirect table of {n} entries (ring size + 1)",
                           [(big, 16 * n, IND, 0)])
            finally:
                mem.free(big)
        finally:
            for gpa in (table, inner, rd, wr):
                mem.free(gpa)

    def backtrace_case(self):
        """What decides whether a panic ends the Rust virtiofsd: the first
        header case again, on a daemon started with RUST_BACKTRACE=1. Its
        panic hook then prints a backtrace, which calls getcwd() (in the
        kernel's log: type=1326 ... syscall=79), and the seccomp filter
        kills the process with SIGSYS where without it the daemon runs on."""
        if any(o.startswith("--seccomp") for o in self.ctx.daemon.extra):
            self.t.skip("malformed: with RUST_BACKTRACE=1",
                        "the SIGSYS is the default --seccomp=kill's")
            return
        full = hdr(Op.GETATTR, self.s.next_unique(), extra=16) + \
            fp.GETATTR_IN.pack(0, 0, 0)
        self.revive(backtrace=True)
        self.reply("readable part of 20 bytes, shorter than the in header, "
                   "with RUST_BACKTRACE=1", self.raw(full[:20], 16 + 104),
                   ("einval", 0), rust=(
                       "panics:decode", "the same panic; the backtrace it "
                       "prints calls getcwd(), outside its seccomp "
                       "allowlist, and the filter kills the daemon"))

    def small_writable_cases(self):
        """Outside the stats window: the contract only asks for an error."""
        s = self.s
        vs = "returns the chain unanswered, used length 0"
        r = s.request(Op.GETATTR, ROOT_ID, fp.GETATTR_IN.pack(0, 0, 0),
                      writable=16 + 10)
        self.reply("GETATTR with 26 writable bytes for a 120-byte reply", r,
                   "negative", malformed=False, vs=vs)
        r = s.request(Op.LOOKUP, self.dir, b"f\0", writable=16 + 64,
                      out_split=[16, 8])
        self.reply("LOOKUP with 80 writable bytes for a 144-byte reply", r,
                   "negative", malformed=False, vs=vs)
        r = s.request(Op.STATFS, ROOT_ID, writable=16 + 40,
                      out_split=[4, 12, 40])
        self.reply("STATFS with 56 writable bytes for a 96-byte reply", r,
                   "negative", malformed=False, vs=vs)
        r = s.request(Op.READ, self.file, fp.READ_IN.pack(
            self.fh, 0, 8192, 0, 0, 0, 0), writable=16 + 4096,
            out_split=4096)
        self.reply("READ of 8192 bytes with 4096 writable for the data", r,
                   "negative", malformed=False, vs=vs)
        r = s.request(Op.GETATTR, ROOT_ID, fp.GETATTR_IN.pack(0, 0, 0),
                      writable=8)
        self.reply("GETATTR with 8 writable bytes (no room for the out "
                   "header)", r, "noreply", malformed=False)
        r = s.request(Op.GETATTR, ROOT_ID, fp.GETATTR_IN.pack(0, 0, 0),
                      writable=0)
        self.reply("GETATTR with no writable part", r, "noreply",
                   malformed=False)

    def counted(self, what, groups):
        """Run the case groups; vufsd's stats must count every malformed
        chain and every error reply they made, per vring."""
        ctx, t = self.ctx, self.t
        before = ctx.stats.wait() if ctx.stats else None
        self.malformed, self.errors = 0, Counter()
        for group in groups:
            group()
        if before is None:
            return
        after = ctx.stats.wait()
        got = sum(a["malformed"] - before["vq"][q]["malformed"]
                  for q, a in after["vq"].items())
        t.ok(got == self.malformed,
             f"malformed: {what}stats count {got} malformed chains, "
             f"{self.malformed} were sent")
        for q, a in sorted(after["vq"].items()):
            got = a["errors"] - before["vq"][q]["errors"]
            t.ok(got == self.errors[q],
                 f"malformed: {what}stats vq {q} errors +{got}, "
                 f"{self.errors[q]} error replies seen")

    def aliased(self, desc, opcode, size, want_file_size):
        """READ or WRITE of `size` bytes whose data descriptors all point
        at the same 1 MiB of guest memory: more than the max_write and
        max_pages INIT agreed to (1 MiB), so -EINVAL before a byte moves,
        and the file keeps its size."""
        ctx, s, mem = self.ctx, self.s, self.mem
        NEXT, WRITE = vu.DESC_F_NEXT, vu.DESC_F_WRITE
        u = s.next_unique()
        args = (fp.WRITE_IN if opcode == Op.WRITE else fp.READ_IN).pack(
            self.fh, 0, size, 0, 0, 0, 0)
        inlen = fp.IN_HDR.size + len(args) + (size if opcode == Op.WRITE
                                              else 0)
        head = hdr(opcode, u, self.file, length=inlen) + args
        rd, buf = mem.alloc(len(head), 8), mem.alloc(MiB)
        wr = mem.alloc(64, 8)
        mem.write(rd, head)
        mem.write(wr, bytes(64))
        chunks = [min(MiB, size - off) for off in range(0, size, MiB)]
        if opcode == Op.WRITE:
            parts = ([(rd, len(head), 0)] + [(buf, n, 0) for n in chunks] +
                     [(wr, fp.OUT_HDR.size + 8, WRITE)])
        else:
            parts = ([(rd, len(head), 0), (wr, fp.OUT_HDR.size, WRITE)] +
                     [(buf, n, WRITE) for n in chunks])
        descs = [(gpa, n, flags | (NEXT if i + 1 < len(parts) else 0),
                  i + 1 if i + 1 < len(parts) else 0)
                 for i, (gpa, n, flags) in enumerate(parts)]
        vq = self.dev.vqs[1]
        tok = Token()
        try:
            vq.add_descs(descs, tok)
            vq.kick()
            for _, t_, n in vu.wait_any([vq], ctx.args.timeout):
                t_.complete(n)
            _, err, unique = fp.OUT_HDR.unpack(mem.read(wr, fp.OUT_HDR.size))
        finally:
            for gpa in (rd, buf, wr):
                mem.free(gpa)
        size_now = os.stat(ctx.host("malformed", "f")).st_size
        self.malformed += 1
        self.errors[1] += err < 0
        got = (f"malformed: {desc}: {errstr(err)} (want -EINVAL), the file "
               f"is {size_now} bytes (want {want_file_size})")
        if ctx.rust and size_now == want_file_size:
            # The header is read from the writable buffer: only a chain
            # returned with at least a header in it, for this request,
            # is a reply at all.
            seen = "noreply" if tok.used_len < fp.OUT_HDR.size else \
                "bad reply" if unique != u else \
                "same" if err == -errno.EINVAL else \
                "errs" if err < 0 else "answers"
            self.rust_verdict(got + f", used length {tok.used_len}", seen,
                              -errno.EINVAL, RUST_DIFFS.get(desc), err)
        else:
            self.t.ok(err == -errno.EINVAL and unique == u and
                      size_now == want_file_size, got)
        self.still_serves(f"malformed: {desc}")

    def size_cases(self):
        """READ and WRITE larger than INIT's max_write/max_pages."""
        if not self.ctx.not_c_virtiofsd("malformed: WRITE and READ over 1 MiB",
                                   "virtiofsd answers ENOMEM above its own "
                                   "buffer size"):
            return
        size = os.stat(self.ctx.host("malformed", "f")).st_size
        self.aliased("WRITE of 256 MiB from 256 descriptors of the same "
                     "1 MiB", Op.WRITE, 256 * MiB, size)
        self.aliased("WRITE of 1 MiB + 4 KiB", Op.WRITE, MiB + 4096, size)
        self.aliased("READ of 64 MiB into 64 descriptors of the same 1 MiB",
                     Op.READ, 64 * MiB, size)

    def fixture(self):
        """The directory, file and open handle the cases use."""
        s = self.s
        self.dir = s.lookup(ROOT_ID, "malformed").entry.nodeid
        r = s.lookup(self.dir, "f")
        self.file = self.good_node = r.entry.nodeid
        self.fh = s.open(self.file, os.O_RDWR).open.fh

    def run(self):
        ctx, t, s = self.ctx, self.t, self.s
        os.mkdir(ctx.host("malformed"))
        os.mkdir(ctx.host("malformed", "sub"))
        write_file(ctx.host("malformed", "f"), os.urandom(8192))
        self.fixture()
        self.fds_base = ctx.daemon.fds()
        self.counted("", [self.header_cases, self.args_cases,
                          self.name_cases, self.opcode_cases,
                          self.ring_cases, self.size_cases])
        self.counted("length fields beyond the args: ",
                     [self.length_field_cases])
        self.small_writable_cases()
        if ctx.rust:
            self.backtrace_case()
        r = s.read(self.file, self.fh, 0, 8192)
        t.ok(r.error == 0 and r.data == read_host(ctx.host("malformed",
                                                           "f")),
             "malformed: the file is intact and reads back")
        ctx.check_alive("malformed")
        now = wait_fds(ctx.daemon, self.fds_base)
        t.ok(now == self.fds_base, f"malformed: daemon holds {now} fds, as "
             f"before the cases ({self.fds_base})" +
             (f"; the daemon started {self.revived} times over, each after "
              "a vring it lost, counted from its last start"
              if self.revived else ""))
        ctx.expect("malformed: RELEASE", s.release(self.file, self.fh))


def op_desc(r):
    return f"malformed: {fp.op_name(r.opcode)}"


def scenario_malformed(ctx):
    with ctx.connect() as (dev, s):
        Malformed(ctx, dev, s).run()


# --- escape ------------------------------------------------------------------

# Names no component may be. <canary> stands for the absolute path of the
# canary directory next to the share (it holds one file, "in"): a daemon
# that takes such a name as it comes acts on the canary, whose inode,
# mtime and content the scenario checks, rather than on a file of the
# host's that matters. <canary>/made does not exist (what makes a name
# there changes the canary), <canary>/in does (UNLINK or RENAME from it
# empties the canary). ../../outside/made, from the scenario's directory,
# names the sentinel directory next to the share, which must stay empty.
BAD_NAMES = ("", ".", "..", "a/b", "<canary>", "<canary>/made",
             "<canary>/in", "../outside", "../../outside/made", "x/")


def inode_inside(top, ino):
    """Whether some file under `top` (not following symlinks) has inode
    number `ino`."""
    for dirpath, dirs, files in os.walk(top):
        for n in [dirpath] + [os.path.join(dirpath, f) for f in dirs + files]:
            if os.lstat(n).st_ino == ino:
                return True
    return False


def rust_tidy(top, want, links, before):
    """After the bad names on the Rust virtiofsd: remove what they made in
    `top` beyond `want`, and in the share's root (`before` lists it as it
    was), and make again the symlinks of `links` they moved away; returns
    what changed, for the log."""
    changed = []
    for d, keep in ((top, set(want)), (os.path.dirname(top), set(before))):
        for n in sorted(set(os.listdir(d)) - keep):
            p = os.path.join(d, n)
            changed.append(f"+{os.path.relpath(p, os.path.dirname(top))}")
            # Never recursive: what a bad name made is empty, and anything
            # else (moved in from outside) must stay for the checks to see.
            if os.path.isdir(p) and not os.path.islink(p):
                try:
                    os.rmdir(p)
                except OSError:
                    changed[-1] += " (not empty: left)"
            else:
                os.unlink(p)
    for n, target in links.items():
        if not os.path.lexists(os.path.join(top, n)):
            changed.append(f"-{n}")
            os.symlink(target, os.path.join(top, n))
    return changed


def scenario_escape(ctx):
    t, h = ctx.tap, lambda *p: ctx.host("escape", *p)
    wd = ctx.daemon.workdir
    outside, victim = os.path.join(wd, "outside"), os.path.join(wd, "victim")
    canary = os.path.join(wd, "canary")
    os.mkdir(canary)
    write_file(os.path.join(canary, "in"), b"canary\n")
    cst = os.stat(canary)

    def bad(name):
        return name.replace("<canary>", canary)
    os.mkdir(h())
    links = {"abs": canary, "rel": "../../..", "out": outside,
             "outrel": "../../outside", "victimlink": victim}
    for n, target in links.items():
        os.symlink(target, h(n))
    root_before = os.listdir(ctx.share)
    os.mkdir(h("d"))
    write_file(h("d", "inside"), b"inside d\n")
    write_file(h("file"), b"a file\n")
    vst = os.stat(victim)
    with ctx.connect() as (dev, s):
        top = s.lookup(ROOT_ID, "escape").entry.nodeid
        node = {}
        for n in ("abs", "rel", "out", "outrel", "victimlink", "d", "file"):
            r = s.lookup(top, n)
            ctx.expect(f"escape: LOOKUP {n}", r)
            node[n] = r.entry.nodeid if r.entry else 0
            want = os.lstat(h(n)).st_mode
            t.ok(r.entry is not None and r.entry.attr.mode == want and
                 r.entry.attr.ino == os.lstat(h(n)).st_ino,
                 f"escape: {n} is the {stat.filemode(want)} itself (lstat)")

        for name in ("..", "."):
            desc = f"escape: LOOKUP {name!r} in the root"
            r = s.lookup(ROOT_ID, name)
            if ctx.vufsd:
                ctx.expect(desc, r, -errno.EINVAL)
            else:  # virtiofsd answers them, but must stay inside
                t.ok(r.error == 0 and r.entry.attr.ino ==
                     os.stat(ctx.share).st_ino,
                     f"{desc}: virtiofsd answers, with the root itself")
        if ctx.rust:
            t.diag(f"escape: the Rust virtiofsd {RUST_NAMES}")
        for shown in ("a/b", "<canary>", "../outside"):
            name = bad(shown)
            r = s.lookup(top, name)
            if ctx.rust:
                inside = r.error != 0 or (r.entry is not None and
                                          inode_inside(ctx.share,
                                                       r.entry.attr.ino))
                t.ok(inside and r.problem() is None,
                     f"escape: LOOKUP {shown!r}: {r.errname()}, "
                     f"{'nothing outside the share' if inside else 'an inode outside the share'}"
                     " [Rust virtiofsd: takes names as they come, see above; "
                     "vufsd must answer -EINVAL]")
            else:
                ctx.expect(f"escape: LOOKUP {shown!r}", r, -errno.EINVAL)
        for link, name in (("abs", "in"), ("rel", "etc"),
                           ("out", "anything"), ("victimlink", "x")):
            ctx.expect(f"escape: LOOKUP {name} under the symlink {link}",
                       s.lookup(node[link], name), -errno.ENOTDIR)
        for link in ("abs", "out", "victimlink"):
            ctx.expect_fail(f"escape: OPEN of the symlink {link}",
                            s.open(node[link]))
            ctx.expect_fail(f"escape: OPENDIR of the symlink {link}",
                            s.opendir(node[link]))
        ctx.expect_fail("escape: OPEN O_RDWR of the symlink victimlink",
                        s.open(node["victimlink"], os.O_RDWR))
        for link, text in (("abs", canary), ("rel", "../../.."),
                           ("out", outside)):
            r = s.readlink(node[link])
            t.ok(r.error == 0 and r.body == text.encode(),
                 f"escape: READLINK {link} is the text {r.body!r}")
        r = s.getattr(node["victimlink"])
        t.ok(r.attr is not None and stat.S_ISLNK(r.attr.mode) and
             r.attr.ino != vst.st_ino,
             "escape: GETATTR of victimlink is the link's, not the victim's")

        # Changing a symlink must not change what it points to.
        s.setattr(node["victimlink"], fp.FATTR_MODE, mode=0o777)
        s.setattr(node["victimlink"], fp.FATTR_SIZE, size=0)
        s.setxattr(node["victimlink"], "user.escape", b"1")
        r = s.link(node["victimlink"], top, "hardlink")
        vnow = os.stat(victim)
        t.ok((vnow.st_mode, vnow.st_size, vnow.st_nlink) ==
             (vst.st_mode, vst.st_size, vst.st_nlink) and
             os.listxattr(victim) == [] and read_host(victim) == b"victim\n",
             "escape: SETATTR mode and size, SETXATTR and LINK on "
             "victimlink left the victim file alone")
        if r.error == 0:
            t.ok(os.path.islink(h("hardlink")),
                 "escape: LINK of a symlink links the symlink")

        # Making things under symlinks to the outside.
        for link in ("out", "outrel", "abs"):
            p = node[link]
            for what, r in (
                    ("CREATE", s.create(p, "made", 0o644)),
                    ("MKDIR", s.mkdir(p, "made", 0o755)),
                    ("MKNOD", s.mknod(p, "made", stat.S_IFIFO | 0o644)),
                    ("SYMLINK", s.symlink(p, "made", "x")),
                    ("LINK", s.link(node["file"], p, "made")),
                    ("RENAME into", s.rename(top, "rel", p, "made"))):
                ctx.expect_fail(f"escape: {what} under the symlink {link}", r)
        t.ok(not os.path.lexists(os.path.join(canary, "made")),
             "escape: nothing made in the canary through the symlink abs")

        # Bad names everywhere a name is taken.
        for shown in BAD_NAMES:
            name = bad(shown)
            rs = [("CREATE", s.create(top, name, 0o644)),
                  ("MKDIR", s.mkdir(top, name, 0o755)),
                  ("MKNOD", s.mknod(top, name, stat.S_IFIFO | 0o644)),
                  ("SYMLINK", s.symlink(top, name, "target")),
                  ("LINK", s.link(node["file"], top, name)),
                  ("RENAME to", s.rename(top, "abs", top, name)),
                  ("RENAME from", s.rename(top, name, top, "renamed")),
                  ("RENAME2 to", s.rename2(top, "abs", top, name,
                                           fp.RENAME_NOREPLACE)),
                  ("UNLINK", s.unlink(top, name)),
                  ("RMDIR", s.rmdir(top, name))]
            for what, r in rs:
                desc = f"escape: {what} {shown!r}"
                if name == "":
                    ctx.expect_vufsd(desc, r, -errno.EINVAL,
                                     "answers -ENOENT for an empty name")
                elif ctx.rust:
                    t.ok(r.problem() is None, f"{desc}: {r.errname()} "
                         "[Rust virtiofsd: takes names as they come, see "
                         "above; vufsd must answer -EINVAL]")
                else:
                    ctx.expect(desc, r, -errno.EINVAL)
        want = sorted(["abs", "rel", "out", "outrel", "victimlink", "d",
                       "file"] +
                      (["hardlink"] if os.path.lexists(h("hardlink"))
                       else []))
        if ctx.rust:
            # The bad names made or moved things; whether any of it left
            # the share is what the sentinel and canary checks below say.
            # The directory is put back for the rest of the scenario, so
            # its listing says nothing here.
            made = rust_tidy(h(), want, links, root_before)
            t.skip("escape: the directory holds only what the test made",
                   f"the Rust virtiofsd made or moved {made} from the bad "
                   "names (put back where empty)")
        else:
            left = sorted(os.listdir(h()))
            t.ok(left == want, f"escape: the directory holds only what the "
                 f"test made ({sorted(set(left) ^ set(want))} differ)")

        # The race: swap d for a symlink to / under the held nodeid.
        dn = node["d"]
        os.rename(h("d"), h("d.old"))
        os.symlink("/", h("d"))
        r = s.lookup(dn, "inside")
        ctx.expect("escape: after d became a symlink to /, LOOKUP inside "
                   "under the old nodeid", r)
        t.ok(r.entry is not None and r.entry.attr.ino ==
             os.stat(h("d.old", "inside")).st_ino,
             "escape: ... finds the old directory's file")
        ctx.expect("escape: LOOKUP etc under the old nodeid",
                   s.lookup(dn, "etc"), -errno.ENOENT)
        r = s.opendir(dn)
        ctx.expect("escape: OPENDIR of the old nodeid", r)
        if r.open:
            names, _, prob = read_whole_dir(s, Op.READDIR, dn, r.open.fh,
                                            4096)
            got = sorted(d.name for d in names)
            t.ok(prob is None and got == [".", "..", "inside"],
                 f"escape: READDIR of the old nodeid lists {got}")
            s.releasedir(dn, r.open.fh)
        r = s.create(dn, "made-in-d", 0o644)
        ctx.expect("escape: CREATE under the old nodeid", r)
        t.ok(os.path.exists(h("d.old", "made-in-d")) and
             not os.path.lexists("/made-in-d"),
             "escape: ... made it in the old directory, not in /")
        if os.path.lexists("/made-in-d"):
            os.unlink("/made-in-d")
        if r.open:
            s.release(r.entry.nodeid, r.open.fh)
        r = s.lookup(top, "d")
        ctx.expect("escape: a fresh LOOKUP of d", r)
        t.ok(r.entry is not None and stat.S_ISLNK(r.entry.attr.mode),
             "escape: ... is the symlink")
        if r.entry:
            ctx.expect("escape: LOOKUP etc under the new d",
                       s.lookup(r.entry.nodeid, "etc"), -errno.ENOTDIR)
        ctx.expect("escape: GETATTR root still works", s.getattr(ROOT_ID))
    special_files(ctx)
    t.ok(os.listdir(outside) == [],
         f"escape: the sentinel directory next to the share is empty "
         f"({os.listdir(outside)})")
    try:
        now = os.stat(canary)
        intact = (now.st_ino, now.st_mtime_ns) == (cst.st_ino,
                                                   cst.st_mtime_ns) and \
            read_host(os.path.join(canary, "in")) == b"canary\n"
    except OSError:
        intact = False
    t.ok(intact, "escape: the canary directory next to the share, named by "
         "its absolute path, is where it was and as it was")
    ctx.check_alive("escape")


# --- disconnect --------------------------------------------------------------

def flood(ctx, dev, s, data, fh, scratch, sfh):
    """Per request queue: 1 MiB writes, 256 KiB reads and GETATTRs, all
    submitted and kicked without waiting; 36 or more in all."""
    n = 0
    per_queue = max(24, -(-36 // (dev.nqueues - 1)) // 3 * 3)
    for q in range(1, dev.nqueues):
        for i in range(per_queue):
            kind = i % 3
            if kind == 0:
                r = s.request(Op.WRITE, scratch, fp.WRITE_IN.pack(
                    sfh, (i // 3) * MiB, MiB, 0, 0, 0, 0), os.urandom(MiB)
                    if i < 3 else bytes(MiB), out_size=8, in_split=4096)
                ind = True
            elif kind == 1:
                r = s.request(Op.READ, data, fp.READ_IN.pack(
                    fh, (i * 64 * KiB) % MiB, 256 * KiB, 0, 0, 0, 0),
                    out_size=256 * KiB, out_split=16 * KiB)
                ind = False
            else:
                r = s.request(Op.GETATTR, data, fp.GETATTR_IN.pack(0, 0, 0),
                              out_size=fp.ATTR_OUT_SIZE)
                ind = False
            dev.submit(r, q, indirect=ind, kick=False)
            n += 1
        dev.vqs[q].kick()
    return n


def disconnect_setup(ctx, dev, s, rnd):
    top = s.lookup(ROOT_ID, "disconnect").entry.nodeid
    data = s.lookup(top, "data").entry.nodeid
    fh = s.open(data).open.fh
    r = s.create(top, f"scratch{rnd}", 0o644)
    return data, fh, r.entry.nodeid, r.open.fh


def child_flood(ctx, rnd, wfd):
    """In a forked child: set up, flood, say how many, SIGKILL oneself.
    Never returns."""
    try:
        # The daemon is the parent's child: Popen.poll() here would say it
        # is gone, and virtiofsd's restart is the parent's job anyway.
        ctx.daemon.ensure = ctx.daemon.after_disconnect = lambda: None
        with ctx.connect(request_queues=ctx.nreq) as (dev, s):
            n = flood(ctx, dev, s, *disconnect_setup(ctx, dev, s, rnd))
            os.write(wfd, str(n).encode())
            os.kill(os.getpid(), signal.SIGKILL)
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(2)


def verify_after(ctx, what, content, baseline):
    t = ctx.tap
    if ctx.vufsd:
        t.ok(ctx.daemon.alive(), f"{what}: daemon still running")
    with ctx.connect() as (dev, s):
        r = s.lookup(ROOT_ID, "disconnect")
        ctx.expect(f"{what}: new connection: INIT and LOOKUP", r)
        r = s.lookup(r.entry.nodeid, "data")
        node = r.entry.nodeid
        r = s.open(node)
        ctx.expect(f"{what}: OPEN data", r)
        got, msg = read_all(s, node, r.open.fh, 0, len(content),
                            out_split=4096, indirect=True)
        bad = first_diff(got, content)
        t.ok(bad is None, f"{what}: READ of the whole file matches "
             f"({bad or msg})")
        s.release(node, r.open.fh)
    if ctx.vufsd:
        now = wait_fds(ctx.daemon, baseline)
        t.ok(now == baseline, f"{what}: daemon fds back to {now} "
             f"(baseline {baseline})")


def special_files(ctx):
    """Special files and handles (vufsd): no device nodes from the guest;
    CREATE over an existing FIFO, device or symlink opens nothing (a FIFO
    would block the ring forever, a device would be the host's); CREATE
    over an existing regular file opens it; O_NOFOLLOW from the guest is
    not a refusal; a file handle only works with its own nodeid."""
    t, h = ctx.tap, lambda *p: ctx.host("special", *p)
    if not ctx.only_vufsd("escape: special files and handles",
                          "virtiofsd's behaviour differs (opens FIFOs)"):
        return
    os.mkdir(h())
    os.mkfifo(h("fifo"))
    write_file(h("reg"), b"regular\n")
    os.symlink("reg", h("link"))
    have_dev = True
    try:
        os.mknod(h("null"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError:
        have_dev = False
    with ctx.connect() as (dev, s):
        top = s.lookup(ROOT_ID, "special").entry.nodeid
        for kind, mode in (("char", stat.S_IFCHR), ("block", stat.S_IFBLK)):
            ctx.expect(f"escape: MKNOD of a {kind} device is refused",
                       s.mknod(top, f"dev-{kind}", mode | 0o666,
                               os.makedev(1, 11)), -errno.EPERM)
            t.ok(not os.path.lexists(h(f"dev-{kind}")),
                 f"escape: no {kind} device node on the host")
        ctx.expect("escape: MKNOD of a FIFO is allowed",
                   s.mknod(top, "fifo2", stat.S_IFIFO | 0o644))
        cases = [("fifo", -errno.ENXIO), ("link", -errno.ELOOP)]
        if have_dev:
            cases.append(("null", -errno.ENXIO))
        for name, err in cases:
            for flags in (os.O_RDONLY, os.O_WRONLY, os.O_RDWR):
                start = time.monotonic()
                r = s.create(top, name, 0o644, flags=flags | os.O_CREAT)
                ctx.expect(f"escape: CREATE (no O_EXCL, flags {flags}) over "
                           f"the existing {name} opens nothing", r, err)
                t.ok(time.monotonic() - start < 2,
                     f"escape: ... and answers at once "
                     f"({time.monotonic() - start:.2f} s)")
        r = s.create(top, "reg", 0o644,
                     flags=os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        ctx.expect("escape: CREATE over an existing regular file opens it",
                   r)
        t.ok(os.path.getsize(h("reg")) == 0,
             "escape: ... with O_TRUNC honoured")
        reg = r.entry.nodeid if r.entry else 0
        r2 = s.lookup(top, "fifo")
        fifo = r2.entry.nodeid if r2.entry else 0
        r = s.open(reg, os.O_RDONLY | os.O_NOFOLLOW)
        ctx.expect("escape: OPEN with O_NOFOLLOW of a regular file", r)
        fh = r.open.fh if r.open else 0
        ctx.expect("escape: GETATTR with the file's own handle",
                   s.getattr(reg, fh=fh))
        ctx.expect("escape: GETATTR naming another nodeid with that handle",
                   s.getattr(fifo, fh=fh), -errno.EBADF)
        ctx.expect("escape: SETATTR naming another nodeid with that handle",
                   s.setattr(fifo, 0x8 | 0x40, fh=fh, size=0),
                   -errno.EBADF)
        ctx.expect("escape: RELEASE", s.release(reg, fh))


def scenario_disconnect(ctx):
    t = ctx.tap
    os.mkdir(ctx.host("disconnect"))
    content = os.urandom(2 * MiB)
    write_file(ctx.host("disconnect", "data"), content)
    ctx.daemon.ensure()
    baseline = ctx.daemon.fds()
    t.diag(f"daemon fds with no connection: {baseline}; "
           f"{ctx.nreq} request queue(s)")
    for rnd in range(1, 4):
        what = f"disconnect {rnd}/3: socket closed with requests in flight"
        with ctx.connect() as (dev, s):
            n = flood(ctx, dev, s, *disconnect_setup(ctx, dev, s, rnd))
            dev.conn.close()  # without waiting for anything
            t.ok(n >= 32, f"{what}: {n} requests queued on "
                 f"{dev.nqueues - 1} queue(s), kicked, socket closed")
        verify_after(ctx, what, content, baseline)

        what = f"disconnect {rnd}/3: frontend killed right after kicking"
        ctx.daemon.ensure()  # the child cannot start virtiofsd again
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            child_flood(ctx, 10 + rnd, w)
        os.close(w)
        try:
            deadline = time.monotonic() + 4 * ctx.args.timeout
            status = None
            while time.monotonic() < deadline:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.02)
            else:
                os.kill(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
            said = os.read(r, 16)
        finally:
            os.close(r)
        ctx.daemon.after_disconnect()
        t.ok(os.WIFSIGNALED(status) and os.WTERMSIG(status) ==
             signal.SIGKILL and int(said or 0) >= 32,
             f"{what}: child queued {said.decode() or 'nothing'} requests "
             f"and died of SIGKILL ({status:#x})")
        verify_after(ctx, what, content, baseline)


# --- reset -------------------------------------------------------------------

def reads(s, node, fh, offsets, size=16 * KiB):
    out = []
    for off in offsets:
        r = s.request(Op.READ, node, fp.READ_IN.pack(fh, off, size, 0, 0, 0,
                                                     0),
                      out_size=size, out_split=4096)
        r.offset = off
        r.queue = s.queue
        out.append(r)
    return out


def reads_ok(reqs, content, size=16 * KiB):
    for r in reqs:
        if r.used_len is None:
            return f"READ at {r.offset} never completed"
        if r.problem() or r.error:
            return f"READ at {r.offset}: {r.errname()} {r.problem()}"
        if r.body != content[r.offset:r.offset + size]:
            return f"READ at {r.offset}: wrong data"
    return None


def scenario_reset(ctx):
    t = ctx.tap
    os.mkdir(ctx.host("reset"))
    content = os.urandom(MiB)
    write_file(ctx.host("reset", "data"), content)

    def open_data(s):
        top = s.lookup(ROOT_ID, "reset").entry.nodeid
        node = s.lookup(top, "data").entry.nodeid
        return node, s.open(node).open.fh

    with ctx.connect() as (dev, s):
        node, fh = open_data(s)
        vq = dev.vqs[1]
        # 256 reads (indirect) queued and kicked, the ring stopped at once.
        batch = reads(s, node, fh, [i * 4 * KiB for i in range(256)])
        for r in batch:
            vq.add(r.chain(), r, indirect=True)
        vq.kick()
        base = dev.stop_ring(1)
        used = vq.used_idx()
        done = vq.poll()
        for r, n in done:
            r.complete(n)
        t.ok(base == used and base <= vq.avail_idx,
             f"reset: GET_VRING_BASE mid-stream {base} == used index {used} "
             f"({len(done)} of 256 done when it stopped)")
        dev.restart_ring(1, base)
        vq.kick(force=True)
        while vq.pending:  # wait_any raises when nothing comes in time
            for _, r, n in vu.wait_any([vq], ctx.args.timeout):
                r.complete(n)
        bad = reads_ok(batch, content)
        t.ok(bad is None, f"reset: after restarting from {base} all 256 "
             f"reads completed once with the right data ({bad})")
        more = reads(s, node, fh, [i * 16 * KiB for i in range(64, 80)])
        dev.run(more)
        t.ok(reads_ok(more, content) is None,
             "reset: 16 more reads on the restarted ring")
        # QEMU's stop of every vring, then a restart from the bases.
        bases = dev.stop()
        want = [v.avail_idx for v in dev.vqs]
        t.ok(bases == want, f"reset: GET_VRING_BASE of every vring {bases} "
             f"== avail indexes {want}")
        dev.restart(bases)
        more = reads(s, node, fh, [i * 16 * KiB for i in range(16)])
        dev.run(more)
        t.ok(reads_ok(more, content) is None,
             "reset: reads after stopping and restarting every vring")

        if not ctx.not_c_virtiofsd("reset: RESET_DEVICE and RESET_OWNER, then "
                              "a fresh set-up", "virtiofsd 7.2 has no "
                              "RESET_DEVICE, and aborts on RESET_OWNER then "
                              "SET_VRING_KICK (assertion kick_fd == -1 in "
                              "fv_queue_set_started)"):
            return
        t.ok(vu.bit(dev.protocol, vu.PROTO_RESET_DEVICE),
             "reset: RESET_DEVICE negotiated")
        for use_rd, busy in ((True, False), (True, True), (False, False),
                             (False, True)):
            what = ("RESET_DEVICE" if use_rd else "RESET_OWNER") + (
                " with 32 reads in flight" if busy else "")
            if busy:
                for r in reads(s, node, fh, [i * 16 * KiB
                                             for i in range(32)]):
                    dev.submit(r, 1, kick=False)
                dev.vqs[1].kick()
            try:
                if ctx.rust:
                    # It serves fresh rings after a reset only when the old
                    # ones were stopped first (GET_VRING_BASE), as QEMU
                    # always does; vufsd must not need that.
                    dev.stop()
                    what += " (rings stopped first: the Rust virtiofsd " \
                        "needs it)"
                dev.reset(use_rd)
                dev.start()  # fresh rings, what QEMU sends after a reset
                r = s.init()
            except (vu.VhostUserError, OSError) as e:
                t.ok(False, f"reset: {what}, then set up again ({e!r})")
                return
            ctx.expect(f"reset: {what}, set up again: INIT", r)
            node, fh = open_data(s)
            more = reads(s, node, fh, [i * 16 * KiB for i in range(16)])
            dev.run(more)
            t.ok(reads_ok(more, content) is None,
                 f"reset: {what}: reads on the fresh rings")
            ctx.check_alive(f"reset: {what}")


def connect_as(path, uid, gid, timeout):
    """Connect to the unix socket path as uid/gid (no supplementary
    groups) in a child; 0 or the errno."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
                c.settimeout(timeout)
                c.connect(path)
        except OSError as e:
            code = e.errno or 255
        except BaseException:
            code = 255
        os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def ename(rc):
    """connect_as()'s result as a name."""
    return "ok" if rc == 0 else errno.errorcode.get(rc, str(rc))


def wait_exit(p, timeout):
    """Exit status of p within timeout, else kill it and say so."""
    try:
        return p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(timeout)
        return f"still running after {timeout} s"


def scenario_access(ctx):
    """Who can reach the daemon, and one daemon per socket."""
    t, d, tmo = ctx.tap, ctx.daemon, ctx.args.timeout
    if not ctx.only_vufsd_root("access: socket mode, pid-file lock, SIGHUP",
                               "virtiofsd's own socket handling"):
        return
    nobody, nogroup = 65534, 65534
    # The work directory is the owner's alone; let others reach the
    # sockets in it so that only a socket's own mode decides.
    os.chmod(d.workdir, 0o711)
    try:
        st = os.stat(d.socket)
        t.ok(stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 0,
             f"access: the socket is mode {stat.S_IMODE(st.st_mode):o}, "
             f"owner {st.st_uid} (want 600, 0)")
        # The control: the same user reaches a socket that lets it.
        ctrl = os.path.join(d.workdir, "control.sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as ls:
            ls.bind(ctrl)
            os.chmod(ctrl, 0o666)
            ls.listen(1)
            rc_ctrl = connect_as(ctrl, nobody, nogroup, tmo)
        rc = connect_as(d.socket, nobody, nogroup, tmo)
        t.ok(rc_ctrl == 0 and rc == errno.EACCES,
             f"access: nobody cannot connect ({ename(rc)}; a mode 666 "
             f"socket next to it: {ename(rc_ctrl)})")
        try:
            with open(d.socket + ".pid") as f:
                pid = f.read().strip()
        except OSError as e:
            pid = None if e.errno == errno.ENOENT else str(e)
        t.ok(pid == str(d.proc.pid), f"access: {d.socket}.pid holds the "
             f"pid of the process started ({pid!r}, want {d.proc.pid})")

        # A second daemon on the same socket is refused; the first serves on.
        ino = os.stat(d.socket).st_ino
        p = d.spawn(d.argv())
        rc = wait_exit(p, tmo)
        with open(d.log, errors="replace") as f:
            said = "served by another daemon" in f.read()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.settimeout(tmo)
            live = c.connect_ex(d.socket) == 0
        t.ok(rc == 1 and said and live and os.stat(d.socket).st_ino == ino
             and d.alive(),
             f"access: a second daemon on the socket exits {rc} (want 1) "
             f"saying who serves it; the first still listens there: {live}")
        ctx.check_alive("access: after the second daemon")

        # A live socket that another program listens on is not taken.
        other = os.path.join(d.workdir, "other.sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as ls:
            ls.bind(other)
            ls.listen(4)
            p = d.spawn(d.argv(other))
            rc = wait_exit(p, tmo)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
                c.settimeout(tmo)
                c.connect(other)
                ls.settimeout(tmo)
                conn, _ = ls.accept()
                conn.close()
            t.ok(rc == 1 and not os.path.exists(other + ".pid"),
                 f"access: a live socket of another program is left "
                 f"alone (exit {rc}, want 1; it still accepts)")

        # --socket-group: the group may connect, others still not; SIGHUP.
        grp = os.path.join(d.workdir, "group.sock")
        argv = [d.argv()[0], "--socket", grp, "--shared-dir", d.share,
                "--socket-group", "nogroup"]
        p = d.spawn(argv)
        deadline = time.monotonic() + tmo
        # Until it listens (bind, chown and listen are separate steps).
        while p.poll() is None and time.monotonic() < deadline:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
                if c.connect_ex(grp) == 0:
                    break
            time.sleep(0.02)
        try:
            st = os.stat(grp)
            mode, gid = stat.S_IMODE(st.st_mode), st.st_gid
        except OSError:
            mode = gid = None
        rc_grp = connect_as(grp, nobody, nogroup, tmo)
        rc_other = connect_as(grp, nobody, nobody - 1, tmo)
        t.ok(mode == 0o660 and gid == nogroup and rc_grp == 0 and
             rc_other == errno.EACCES,
             f"access: --socket-group nogroup: mode {mode and oct(mode)}, "
             f"group {gid}; a member connects ({ename(rc_grp)}), a "
             f"non-member does not ({ename(rc_other)})")
        p.send_signal(signal.SIGHUP)
        rc = wait_exit(p, tmo)
        t.ok(rc == 0 and not os.path.exists(grp) and
             not os.path.exists(grp + ".pid"),
             f"access: SIGHUP ends it like SIGTERM: exit {rc} (want 0), "
             "socket and pid file removed")
        p = subprocess.run([argv[0], "-s", grp, "-d", d.share,
                            "--socket-group", "no-such-group-here"],
                           capture_output=True, text=True, timeout=tmo)
        t.ok(p.returncode == 2 and "no such group" in p.stderr and
             not os.path.exists(grp),
             f"access: an unknown --socket-group: exit {p.returncode} "
             "(want 2)")
    finally:
        os.chmod(d.workdir, 0o700)


def side_daemon(ctx, name, extra, prefix=(), pass_fds=()):
    """Another vufsd on the same share, on socket NAME.sock, with extra
    options instead of --xattr, run under the prefix command, inheriting
    pass_fds; started."""
    d = Daemon(ctx.args, ctx.daemon.workdir)
    d.socket = os.path.join(d.workdir, f"{name}.sock")
    d.stats = os.path.join(d.workdir, f"{name}.stats")
    d.log = ctx.daemon.log
    d.extra = extra
    d.prefix = list(prefix)
    d.pass_fds = tuple(pass_fds)
    d.start()
    return d


def userns_refused():
    """Why this process cannot make a user namespace, or None. The kernel
    refuses one in a chroot (EPERM), as in scripts/fresh-machine.sh's root;
    on a machine it works as root and, unless a sysctl forbids it, for
    anyone."""
    p = subprocess.run(["unshare", "--user", "true"], capture_output=True,
                       text=True)
    if p.returncode == 0:
        return None
    return p.stderr.strip() or f"unshare --user: exit {p.returncode}"


def can_raise_nofile(limit):
    """Whether a process here may raise its hard descriptor limit to
    limit (CAP_SYS_RESOURCE); tried in a child."""
    pid = os.fork()
    if pid == 0:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
            os._exit(0)
        except BaseException:
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def nofile_limits(pid):
    """(soft, hard) of a process's descriptor limit, from /proc."""
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    return None


def scenario_fds(ctx):
    """Descriptor limits: raised as far as allowed; known names need none."""
    t = ctx.tap
    if not ctx.only_vufsd_root("fds: descriptor limits", "vufsd's own limits"):
        return
    with open("/proc/sys/fs/nr_open") as f:
        nr_open = int(f.read())
    d = side_daemon(ctx, "wide", [], ["prlimit", "--nofile=256:1024"])
    try:
        lim = nofile_limits(d.pid)
        if can_raise_nofile(nr_open):
            t.ok(lim == (nr_open, nr_open),
                 f"fds: started with a limit of 256 (hard 1024), it runs "
                 f"with {lim} (want fs.nr_open, {nr_open})")
        else:
            t.ok(lim == (1024, 1024),
                 f"fds: started with a limit of 256 (hard 1024), it runs "
                 f"with {lim} (want the hard limit)")
            t.skip("fds: the hard limit raised to fs.nr_open",
                   "no CAP_SYS_RESOURCE in this machine's bounding set")
    finally:
        t.ok(d.stop() == 0, "fds: that daemon exits 0")

    many = ctx.host("many")
    os.mkdir(many)
    for i in range(300):
        write_file(os.path.join(many, f"f{i:03}"), b"")
    # 256 descriptors and no CAP_SYS_RESOURCE to raise them.
    d = side_daemon(ctx, "tight", [], [
        "prlimit", "--nofile=256:256",
        "setpriv", "--bounding-set", "-sys_resource", "--"])
    try:
        with ctx.connect(daemon=d) as (dev, s):
            r = s.lookup(ROOT_ID, "many")
            top = r.entry.nodeid if r.error == 0 and r.entry else None
            first_err, known = None, 0
            for i in range(300):
                r = s.lookup(top, f"f{i:03}")
                if r.error:
                    first_err = (i, r.errname())
                    break
                known = i + 1
            again = [s.lookup(top, f"f{i % max(known, 1):03}").error
                     for i in range(64)]
            bad = [e for e in again if e]
        t.ok(first_err is not None and first_err[1] == "-EMFILE" and
             known > 128,
             f"fds: under a 256 limit, {known} new names looked up, then "
             f"{first_err} (want EMFILE)")
        t.ok(known > 0 and not bad,
             f"fds: 64 lookups of names it knows still work at the limit "
             f"({len(bad)} failed: {sorted(set(bad))})")
    finally:
        t.ok(d.stop() == 0, "fds: the limited daemon exits 0")
        shutil.rmtree(many)


def scenario_xattr(ctx):
    """Which extended attributes the guest may reach on the host."""
    t, tmo = ctx.tap, ctx.args.timeout
    if not ctx.only_vufsd_root("xattr: the policy", "virtiofsd's -o xattr passes "
                          "every name"):
        return
    path = ctx.host("xa")
    write_file(path, b"attrs\n")
    try:
        os.setxattr(path, "user.ok", b"u")
        os.setxattr(path, "trusted.vufs", b"t")
    except OSError as e:
        t.skip("xattr: the policy", f"the host fs refuses xattrs ({e})")
        return
    # A valid file capability (v2, CAP_NET_RAW permitted): the host takes it.
    fcap = struct.pack("<5I", 0x02000000, 1 << 13, 0, 0, 0)
    ename_ = errno.errorcode.get

    def host_names():
        return sorted(os.listxattr(path))

    def node(s):
        r = s.lookup(ROOT_ID, "xa")
        return r.entry.nodeid if r.error == 0 and r.entry else None

    # Without --xattr: nothing, and the guest is told so (ENOSYS).
    plain = side_daemon(ctx, "plain", [])
    try:
        with ctx.connect(daemon=plain) as (dev, s):
            n = node(s)
            errs = [s.getxattr(n, "user.ok", 64).error,
                    s.listxattr(n, 4096).error,
                    s.setxattr(n, "user.new", b"x").error,
                    s.removexattr(n, "user.ok").error]
        t.ok(errs == [-errno.ENOSYS] * 4 and
             host_names() == ["trusted.vufs", "user.ok"],
             f"xattr: without --xattr GET, LIST, SET, REMOVE give "
             f"{[ename_(-e, e) for e in errs]} (want ENOSYS), host file "
             f"unchanged: {host_names()}")
    finally:
        t.ok(plain.stop() == 0, "xattr: the daemon without --xattr exits 0")

    # --xattr: user.* only; the others do not exist for the guest.
    with ctx.connect() as (dev, s):
        n = node(s)
        r = s.listxattr(n, 4096)
        names = sorted(x for x in (r.value or b"").decode().split("\0") if x)
        r0 = s.listxattr(n, 0)
        t.ok(r.error == 0 and names == ["user.ok"] and
             r0.xattr_size == len(b"user.ok\0"),
             f"xattr: LISTXATTR shows {names} (size {r0.xattr_size}), not "
             "the host's trusted.vufs")
        got = [s.getxattr(n, "user.ok", 64).value,
               s.getxattr(n, "trusted.vufs", 64).error,
               s.getxattr(n, "trusted.vufs", 0).error]
        t.ok(got == [b"u", -errno.ENODATA, -errno.ENODATA],
             f"xattr: GETXATTR user.ok, trusted.vufs (value, size): {got}")
        errs = [s.setxattr(n, "security.capability", fcap).error,
                s.setxattr(n, "trusted.new", b"x").error,
                s.setxattr(n, "system.vufs", b"x").error,
                s.removexattr(n, "trusted.vufs").error]
        t.ok(errs == [-errno.EPERM] * 4 and
             host_names() == ["trusted.vufs", "user.ok"],
             f"xattr: SETXATTR security.capability, trusted.new, "
             f"system.vufs and REMOVEXATTR trusted.vufs give "
             f"{[ename_(-e, e) for e in errs]} (want EPERM); host file: "
             f"{host_names()}")
        e = s.setxattr(n, "user.new", b"n").error
        t.ok(e == 0 and os.getxattr(path, "user.new") == b"n",
             f"xattr: SETXATTR user.new works ({e})")
        s.removexattr(n, "user.new")

    # --xattr-allow trusted.: that prefix too, security.* still not.
    wide = side_daemon(ctx, "wide", ["--xattr", "--xattr-allow", "trusted."])
    try:
        with ctx.connect(daemon=wide) as (dev, s):
            n = node(s)
            r = s.listxattr(n, 4096)
            names = sorted(x for x in (r.value or b"").decode().split("\0")
                           if x)
            val = s.getxattr(n, "trusted.vufs", 64).value
            e1 = s.setxattr(n, "trusted.new", b"w").error
            e2 = s.setxattr(n, "security.capability", fcap).error
        t.ok(names == ["trusted.vufs", "user.ok"] and val == b"t" and
             e1 == 0 and e2 == -errno.EPERM and
             "trusted.new" in host_names() and
             "security.capability" not in host_names(),
             f"xattr: --xattr-allow trusted.: lists {names}, reads "
             f"{val!r}, sets trusted.new ({e1}); security.capability "
             f"still {ename_(-e2, e2)}")
    finally:
        t.ok(wide.stop() == 0, "xattr: the --xattr-allow daemon exits 0")

    binary = ctx.daemon.argv()[0]
    sock = os.path.join(ctx.daemon.workdir, "xcli.sock")
    for desc, extra, text in (
            ("--xattr-allow without --xattr", ["-X", "trusted."], "needs"),
            ("an empty --xattr-allow", ["-x", "-X", ""], "non-empty")):
        p = subprocess.run([binary, "-s", sock, "-d", ctx.share] + extra,
                           capture_output=True, text=True, timeout=tmo)
        t.ok(p.returncode == 2 and text in p.stderr and
             not os.path.exists(sock),
             f"xattr: {desc}: exit {p.returncode} (want 2)")
    os.unlink(path)


def scenario_shrink(ctx):
    """The VMM shrinks the file behind guest memory after SET_MEM_TABLE:
    the request that touches the lost pages costs the connection, never
    the daemon."""
    t, d, tmo = ctx.tap, ctx.daemon, ctx.args.timeout
    if not ctx.only_vufsd_root("shrink: guest memory cut under the daemon",
                          "virtiofsd's own memory handling"):
        return
    write_file(ctx.host("shrink"), b"shrink\n")
    closed, placed = None, False
    # A SIGBUS sent by someone is no fault: it must not switch the guard
    # off for the real one below.
    os.kill(d.pid, signal.SIGBUS)
    with ctx.connect() as (dev, s):
        mem = dev.mem
        cut = mem.regions[-1]
        r = s.lookup(ROOT_ID, "shrink")
        node = r.entry.nodeid if r.error == 0 and r.entry else ROOT_ID
        # A GETATTR whose reply goes to the last page of the last region,
        # far above the rings there: the file is cut at that page, and
        # this side touches rings, never that page, until the cut is
        # undone.
        last = cut.gpa + cut.size - 4096
        rings = max(mem.offset(a) for vq in dev.vqs
                    for a in (vq.desc, vq.avail, vq.used))
        req = s.request(fp.Op.GETATTR, node, fp.GETATTR_IN.pack(0, 0, 0),
                        out_size=fp.ATTR_OUT_SIZE)
        out = sum(n for g, n, w in req.segs if w)
        req.segs = [seg for seg in req.segs if not seg[2]] + [(last, out, True)]
        placed = mem.offset(last) > rings + 4096
        if placed:
            dev.submit(req, queue=1, kick=False)
            os.ftruncate(mem.fd, mem.offset(last))
            dev.vqs[1].kick()
            closed = dev.conn.wait_closed(tmo)
            os.ftruncate(mem.fd, mem.size)
    t.ok(placed, "shrink: the reply page lies above every ring")
    with open(d.log, errors="replace") as f:
        said = "guest memory shrank" in f.read()
    t.ok(closed and d.alive() and said,
         f"shrink: the memfd cut under a GETATTR's reply: the "
         f"daemon closed the connection ({closed}), logged why ({said}) "
         f"and runs ({d.alive()}, exit {d.proc.poll()})")
    ctx.check_alive("shrink: after the cut")
    with ctx.connect() as (dev, s):
        r = s.getattr(ROOT_ID)
        ctx.expect("shrink: the next connection is served (GETATTR /)", r)
    os.unlink(ctx.host("shrink"))


def proc_status(pid):
    """/proc/PID/status as a dict of strings."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def namespaces(pid):
    return {ns: os.readlink(f"/proc/{pid}/ns/{ns}")
            for ns in ("mnt", "pid", "net", "ipc", "uts")}


def wait_gone(pid, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ")[1].startswith("Z"):
                    return True
        except OSError:
            return True
        time.sleep(0.02)
    return False


def fd_links(pid):
    """What process pid's descriptors lead to (their /proc links)."""
    links = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return links


def scenario_sandbox(ctx):
    """What the sandboxed server can reach, and its life with the
    supervisor."""
    t, d, tmo = ctx.tap, ctx.daemon, ctx.args.timeout
    if not ctx.only_vufsd("sandbox", "virtiofsd has its own"):
        return
    # CHOWN, DAC_OVERRIDE, FOWNER, FSETID, SETGID, SETUID
    base = SERVER_CAPS
    write_file(ctx.host("marker"), b"in the share\n")
    server, mine = d.pid, namespaces(os.getpid())
    t.ok(server != d.proc.pid, f"sandbox: the server ({server}) is a child "
         f"of the process started ({d.proc.pid})")
    theirs = namespaces(server)
    same = [ns for ns in mine if mine[ns] == theirs[ns]]
    t.ok(not same, f"sandbox: the server has its own mnt, pid, net, ipc and "
         f"uts namespaces (shared with the host: {same})")
    t.ok(namespaces(d.proc.pid) == mine,
         "sandbox: the supervisor stays in the host's namespaces")
    root = sorted(os.listdir(f"/proc/{server}/root"))
    t.ok("marker" in root and root == sorted(os.listdir(d.share)),
         f"sandbox: the server's / is the shared directory ({root[:5]}, "
         "as in the share)")
    os.unlink(ctx.host("marker"))
    with open(f"/proc/{server}/mountinfo") as f:
        mounts = f.read().splitlines()
    t.ok(len(mounts) == 1 and mounts[0].split()[4] == "/",
         f"sandbox: its mount table is the share alone: {len(mounts)} "
         "mount(s), the old root and proc detached")
    # Its /proc/self/fd descriptor leads up to a proc of processes only.
    above = None
    for fd in os.listdir(f"/proc/{server}/fd"):
        link = f"/proc/{server}/fd/{fd}"
        try:
            if os.readlink(link).endswith("/fd") and os.path.isdir(link):
                above = sorted(os.listdir(link + "/../.."))
        except OSError:
            pass
    t.ok(above is not None and "sys" not in above and
         all(e.isdigit() or e in ("self", "thread-self") for e in above),
         f"sandbox: above its /proc/self/fd: {above} (want processes "
         "only: no sys, sysrq-trigger or kcore)")
    links = fd_links(server)
    seq0 = ctx.stats.wait()["seq"] if ctx.stats else None
    seq1 = ctx.stats.wait()["seq"] if ctx.stats else None
    t.ok(d.stats not in links and (seq0 is None or seq1 > seq0),
         f"sandbox: the server holds no descriptor of the stats file (a "
         f"server taken over could fill it and make it set-uid root), the "
         f"supervisor writes it: seq {seq0} then {seq1}")
    st = proc_status(server)
    caps = {k: int(st[k], 16) for k in ("CapEff", "CapPrm", "CapBnd",
                                        "CapInh", "CapAmb")}
    t.ok(st.get("Seccomp") == "2" and st.get("Seccomp_filters") == "1",
         f"sandbox: a seccomp filter (Seccomp {st.get('Seccomp')}, filters "
         f"{st.get('Seccomp_filters')}; want 2, 1)")
    t.ok(caps == {"CapEff": base, "CapPrm": base, "CapBnd": base,
                  "CapInh": 0, "CapAmb": 0} and st.get("NoNewPrivs") == "1",
         f"sandbox: capabilities { {k: hex(v) for k, v in caps.items()} }, "
         f"no_new_privs {st.get('NoNewPrivs')} (want {base:#x}: chown, "
         "dac_override, fowner, fsetid, setgid, setuid)")

    # --xattr-allow trusted. keeps what trusted.* needs (CAP_SYS_ADMIN).
    x = side_daemon(ctx, "xtrusted", ["--xattr", "-X", "trusted."])
    try:
        eff = int(proc_status(x.pid)["CapEff"], 16)
        t.ok(eff == base | 1 << 21, f"sandbox: with --xattr-allow trusted. "
             f"the server keeps sys_admin ({eff:#x})")
    finally:
        x.stop()

    # What the process started inherits does not reach the server.
    outside = os.path.join(d.workdir, "outside")
    dfd = os.open(outside, os.O_RDONLY | os.O_DIRECTORY)
    try:
        x = side_daemon(ctx, "inherit", [], pass_fds=(dfd,))
    finally:
        os.close(dfd)
    try:
        links = fd_links(x.pid)
        t.ok(outside not in links and len(links) <= 12,
             f"sandbox: an inherited descriptor of {outside} is not the "
             f"server's ({len(links)} descriptors: {links})")
    finally:
        x.stop()

    # The server killed: the supervisor cleans up and reports it.
    k = side_daemon(ctx, "kserver", [])
    try:
        os.kill(k.pid, signal.SIGKILL)
        rc = wait_exit(k.proc, tmo)
        t.ok(rc == 128 + signal.SIGKILL and not os.path.exists(k.socket)
             and not os.path.exists(k.socket + ".pid"),
             f"sandbox: SIGKILL of the server: the supervisor exits {rc} "
             "(want 137), socket and pid file removed")
    finally:
        k.stop()
    # The supervisor killed: the server goes with it.
    k = side_daemon(ctx, "ksuper", [])
    try:
        srv = k.pid
        k.proc.kill()
        k.proc.wait(tmo)
        t.ok(wait_gone(srv, tmo), "sandbox: SIGKILL of the supervisor: the "
             "server goes too (PR_SET_PDEATHSIG)")
    finally:
        k.stop()

    # --seccomp none: sandboxed, no filter.
    x = side_daemon(ctx, "noseccomp", ["--seccomp", "none"])
    try:
        t.ok(proc_status(x.pid).get("Seccomp") == "0",
             "sandbox: --seccomp none: no filter")
    finally:
        x.stop()

    # Root of a user namespace where setgroups is denied (rootless
    # containers): it serves, with a warning, unsandboxed.
    why = userns_refused()
    if why:
        t.skip("sandbox: --sandbox none as root of a user namespace "
               "(unshare -r)", f"no user namespace here: {why}")
    else:
        x = side_daemon(ctx, "userns", ["--sandbox", "none"],
                        ["unshare", "-r"])
        try:
            with ctx.connect(daemon=x) as (dev, s):
                ctx.expect("sandbox: --sandbox none as root of a user "
                           "namespace (unshare -r) serves (GETATTR /)",
                           s.getattr(ROOT_ID))
        finally:
            x.stop()

    # --sandbox none: one process, in the host's namespaces.
    n = side_daemon(ctx, "nobox", ["--sandbox", "none"])
    try:
        t.ok(n.pid == n.proc.pid and namespaces(n.pid) == mine,
             "sandbox: --sandbox none serves from the process started, in "
             "the host's namespaces")
        with ctx.connect(daemon=n) as (dev, s):
            ctx.expect("sandbox: --sandbox none serves (GETATTR /)",
                       s.getattr(ROOT_ID))
    finally:
        t.ok(n.stop() == 0, "sandbox: --sandbox none exits 0 on SIGTERM")
    for opt, val in (("--sandbox", "chroot"), ("--seccomp", "trap")):
        p = subprocess.run([d.argv()[0], "-s",
                            os.path.join(d.workdir, "b.sock"), "-d", d.share,
                            opt, val],
                           capture_output=True, text=True, timeout=tmo)
        t.ok(p.returncode == 2 and opt in p.stderr,
             f"sandbox: {opt} {val}: exit {p.returncode} (want 2)")


def scenario_creds(ctx):
    """Names made and removed with the guest caller's credentials."""
    t = ctx.tap
    if not ctx.only_vufsd_root("creds: the caller's credentials",
                          "virtiofsd has its own model"):
        return
    uid, gid, staff, other = 1000, 1000, 50, 2000
    top = ctx.host("creds")
    dirs = {"pub": (0o777, 0), "rootonly": (0o755, 0),
            "sgid": (0o2777, staff), "sticky": (0o1777, 0)}
    os.mkdir(top)
    for name, (mode, group) in dirs.items():
        os.mkdir(os.path.join(top, name))
        os.chown(os.path.join(top, name), 0, group)
        os.chmod(os.path.join(top, name), mode)
    theirs = os.path.join(top, "sticky", "theirs")
    write_file(theirs, b"not yours\n")
    os.chown(theirs, other, other)

    def owner(*parts):
        try:
            st = os.lstat(os.path.join(top, *parts))
        except OSError:
            return None
        return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)

    with ctx.connect() as (dev, s):
        root = s.lookup(ROOT_ID, "creds").entry.nodeid
        node = {n: s.lookup(root, n).entry.nodeid for n in dirs}
        s.uid, s.gid = uid, gid
        r = s.create(node["pub"], "a", 0o644)
        t.ok(r.error == 0 and owner("pub", "a") == (uid, gid, 0o644),
             f"creds: CREATE as {uid}:{gid} in a mode 777 directory: "
             f"{r.errname()}, host owner/group/mode {owner('pub', 'a')}")
        r = s.create(node["rootonly"], "x", 0o644)
        t.ok(r.error == -errno.EACCES and owner("rootonly", "x") is None,
             f"creds: CREATE as {uid} in root's mode 755 directory: "
             f"{r.errname()} (want -EACCES), on the host: "
             f"{owner('rootonly', 'x')}")
        r = s.create(node["sgid"], "f", 0o640)
        t.ok(r.error == 0 and owner("sgid", "f") == (uid, staff, 0o640),
             f"creds: CREATE in a setgid directory of group {staff}: "
             f"{owner('sgid', 'f')} (want the directory's group)")
        r = s.mkdir(node["sgid"], "d", 0o755)
        t.ok(r.error == 0 and owner("sgid", "d") == (uid, staff, 0o2755),
             f"creds: MKDIR there: {owner('sgid', 'd')} (want group "
             f"{staff} and the setgid bit, 0o2755)")
        r = s.create(node["pub"], "suid", 0o4755)
        t.ok(r.error == 0 and owner("pub", "suid") == (uid, gid, 0o4755),
             f"creds: CREATE with mode 4755 keeps the set-uid bit its "
             f"creator asked for: {owner('pub', 'suid')}")
        if r.error == 0:
            # A write the guest marks as one that must drop set-id bits
            # (its writer has no CAP_FSETID): the daemon does, on the fd.
            w = s.write(r.entry.nodeid, r.open.fh, 0, b"x",
                        write_flags=fp.WRITE_KILL_SUIDGID)
            t.ok(w.error == 0 and owner("pub", "suid") == (uid, gid, 0o755),
                 f"creds: WRITE with KILL_SUIDGID: {w.errname()}, mode "
                 f"now {oct(owner('pub', 'suid')[2])} (want 0o755)")
            s.release(r.entry.nodeid, r.open.fh)
        r = s.mknod(node["pub"], "fifo", stat.S_IFIFO | 0o600, 0)
        e = s.symlink(node["pub"], "ln", "a")
        t.ok(r.error == 0 and e.error == 0 and
             owner("pub", "fifo") == (uid, gid, 0o600) and
             owner("pub", "ln")[:2] == (uid, gid),
             f"creds: MKNOD (FIFO) {owner('pub', 'fifo')}, SYMLINK "
             f"{owner('pub', 'ln')}: the caller's")
        r = s.unlink(node["sticky"], "theirs")
        t.ok(r.error == -errno.EPERM and owner("sticky", "theirs"),
             f"creds: UNLINK of another user's file in a sticky "
             f"directory: {r.errname()} (want -EPERM), still there: "
             f"{bool(owner('sticky', 'theirs'))}")
        r = s.rename(node["sticky"], "theirs", node["pub"], "stolen")
        t.ok(r.error == -errno.EPERM and owner("pub", "stolen") is None,
             f"creds: RENAME of it out of there: {r.errname()} (want "
             "-EPERM)")
        a = s.lookup(node["pub"], "a").entry.nodeid
        r = s.link(a, node["rootonly"], "hard")
        e = s.link(a, node["pub"], "hard")
        t.ok(r.error == -errno.EACCES and owner("rootonly", "hard") is None
             and e.error == 0 and owner("pub", "hard") == (uid, gid, 0o644),
             f"creds: LINK as {uid} into root's mode 755 directory: "
             f"{r.errname()} (want -EACCES); into a mode 777 one: "
             f"{e.errname()}")
        s.uid, s.gid = 0, 0
        r = s.unlink(node["sticky"], "theirs")
        t.ok(r.error == 0, f"creds: root (uid 0) may: {r.errname()}")
    creds_supp_group(ctx, top, owner, uid, gid, other)
    shutil.rmtree(top)


def creds_supp_group(ctx, top, owner, uid, gid, group):
    """A caller in a directory's group only as a supplementary group:
    FUSE_CREATE_SUPP_GROUP sends that group with the requests that make
    names, and the host must let the caller write there."""
    t = ctx.tap
    os.mkdir(os.path.join(top, "grp"))
    os.chown(os.path.join(top, "grp"), 0, group)
    os.chmod(os.path.join(top, "grp"), 0o770)
    sg = fp.ext_groups(group)
    with ctx.connect(init=False) as (dev, s):
        r = s.init(flags2=fp.INIT2_CREATE_SUPP_GROUP)
        t.ok(r.error == 0 and r.init.flags & fp.INIT_INIT_EXT and
             r.init.flags2 & fp.INIT2_CREATE_SUPP_GROUP,
             f"creds: INIT agrees to CREATE_SUPP_GROUP: {r.errname()}, "
             f"flags2 {r.init.flags2 if r.init else None}")
        root = s.lookup(ROOT_ID, "creds").entry.nodeid
        node = s.lookup(root, "grp").entry.nodeid
        s.uid, s.gid = uid, gid
        r = s.create(node, "plain", 0o644)
        t.ok(r.error == -errno.EACCES and owner("grp", "plain") is None,
             f"creds: CREATE as {uid}:{gid} in a mode 770 directory of "
             f"group {group}, no group sent: {r.errname()} (want -EACCES)")
        r = s.create(node, "f", 0o644, ext=sg)
        m = s.mkdir(node, "d", 0o755, ext=sg)
        n = s.mknod(node, "fifo", stat.S_IFIFO | 0o600, 0, ext=sg)
        y = s.symlink(node, "ln", "f", ext=sg)
        t.ok([x.error for x in (r, m, n, y)] == [0] * 4 and
             owner("grp", "f") == (uid, gid, 0o644) and
             owner("grp", "d") == (uid, gid, 0o755) and
             owner("grp", "fifo") == (uid, gid, 0o600) and
             owner("grp", "ln")[:2] == (uid, gid),
             f"creds: with group {group} sent as supplementary: CREATE "
             f"{r.errname()} {owner('grp', 'f')}, MKDIR {m.errname()} "
             f"{owner('grp', 'd')}, MKNOD {n.errname()}, SYMLINK "
             f"{y.errname()}: the caller's, as the host kernel makes them")
        if r.error == 0:
            s.release(r.entry.nodeid, r.open.fh)
        # UNLINK, RENAME and LINK carry no group: the daemon retries an
        # EACCES with the directory's group (the guest checked membership).
        fn = s.lookup(node, "f").entry.nodeid
        ln = s.link(fn, node, "f2")
        rn = s.rename(node, "f2", node, "f3")
        ul = s.unlink(node, "f3")
        rd = s.rmdir(node, "d")
        t.ok([x.error for x in (ln, rn, ul, rd)] == [0] * 4 and
             owner("grp", "f3") is None and owner("grp", "d") is None,
             f"creds: in that directory, LINK {ln.errname()}, RENAME "
             f"{rn.errname()}, UNLINK {ul.errname()}, RMDIR {rd.errname()} "
             "(want 0: FUSE sends no group with them)")
        # What the retry cannot widen: a group class without write, and the
        # sticky bit (another user's file in a group-writable 1770 one).
        for name, mode in (("grp-ro", 0o750), ("grp-sticky", 0o1770)):
            os.mkdir(os.path.join(top, name))
            os.chown(os.path.join(top, name), 0, group)
            os.chmod(os.path.join(top, name), mode)
            write_file(os.path.join(top, name, "theirs"), b"theirs\n")
            os.chown(os.path.join(top, name, "theirs"), group + 7, group + 7)
        ro = s.lookup(root, "grp-ro").entry.nodeid
        st = s.lookup(root, "grp-sticky").entry.nodeid
        ul_ro = s.unlink(ro, "theirs")
        ul_st = s.unlink(st, "theirs")
        t.ok(ul_ro.error == -errno.EACCES and ul_st.error == -errno.EPERM and
             owner("grp-ro", "theirs") and owner("grp-sticky", "theirs"),
             f"creds: the directory-group retry does not widen the rest: "
             f"UNLINK in a 0750 directory of group {group}: "
             f"{ul_ro.errname()} (want -EACCES), another user's file in a "
             f"1770 one: {ul_st.errname()} (want -EPERM)")
        r = s.create(node, "other", 0o644, ext=fp.ext_groups(group + 1))
        a = s.create(node, "after", 0o644)
        t.ok(r.error == -errno.EACCES and a.error == -errno.EACCES,
             f"creds: another group sent does not open it "
             f"({r.errname()}), and no group sticks to the worker for the "
             f"next request ({a.errname()}; want -EACCES for both)")
        bad = s.create(node, "bad", 0o644, ext=struct.pack("<II", 4, 32))
        big = s.create(node, "big", 0o644, ext=sg, extlen=200)
        odd = s.create(node, "odd", 0o644,
                       ext=struct.pack("<III", 16, 32, 3) + bytes(4))
        t.ok([x.error for x in (bad, big, odd)] == [-errno.EINVAL] * 3 and
             not any(owner("grp", n) for n in ("bad", "big", "odd")),
             f"creds: an extension of size 4, total_extlen past the "
             f"request, 3 groups in room for 1: {bad.errname()}, "
             f"{big.errname()}, {odd.errname()} (want -EINVAL), nothing "
             "made")


def scenario_cache(ctx):
    """--cache and --writeback: what the guest is told it may cache."""
    t = ctx.tap
    if not ctx.only_vufsd_root("cache: --cache and --writeback",
                               "virtiofsd's own options"):
        return
    top = ctx.host("cache")
    os.mkdir(top)
    write_file(os.path.join(top, "f"), b"0123456789")
    write_file(os.path.join(top, "wo"), b"")
    os.chown(os.path.join(top, "wo"), 1000, 1000)
    os.chmod(os.path.join(top, "wo"), 0o200)
    os.chmod(top, 0o777)
    want = {  # mode: (timeout, file open_flags, directory open_flags)
        "auto": (1, 0, 0),
        "always": (86400, fp.FOPEN_KEEP_CACHE,
                   fp.FOPEN_KEEP_CACHE | fp.FOPEN_CACHE_DIR),
        "never": (0, fp.FOPEN_DIRECT_IO, 0),
    }
    for mode, (tmo, fflags, dflags) in want.items():
        d = side_daemon(ctx, f"cache-{mode}", ["--cache", mode])
        try:
            with ctx.connect(daemon=d) as (dev, s):
                e = s.lookup(ROOT_ID, "cache")
                node = e.entry.nodeid
                f = s.lookup(node, "f")
                g = s.getattr(f.entry.nodeid)
                o = s.open(f.entry.nodeid, os.O_RDONLY)
                od = s.opendir(node)
                c = s.create(node, f"new-{mode}", 0o644)
                got = (f.entry.entry_valid, f.entry.attr_valid,
                       struct.unpack_from("<Q", g.body)[0] if g.error == 0
                       else None, o.open.open_flags if o.open else None,
                       c.open.open_flags if c.open else None,
                       od.open.open_flags if od.open else None)
                t.ok(got == (tmo, tmo, tmo, fflags, fflags, dflags),
                     f"cache {mode}: LOOKUP entry/attr timeout, GETATTR "
                     f"timeout, OPEN, CREATE and OPENDIR open_flags {got} "
                     f"(want {(tmo, tmo, tmo, fflags, fflags, dflags)})")
                inval = bool(s.init_out.flags & fp.INIT_AUTO_INVAL_DATA)
                t.ok(inval == (mode != "always"),
                     f"cache {mode}: AUTO_INVAL_DATA agreed: {inval} (not "
                     "with always: a stat must not drop a day's cache)")
        finally:
            t.ok(d.stop() == 0, f"cache {mode}: that daemon exits 0")
    with ctx.connect(init=False) as (dev, s):
        r = s.init(flags=fp.INIT_FLAGS | fp.INIT_WRITEBACK_CACHE,
                   flags2=fp.INIT2_DIRECT_IO_ALLOW_MMAP)
        t.ok(r.init and not r.init.flags & fp.INIT_WRITEBACK_CACHE and
             r.init.flags2 & fp.INIT2_DIRECT_IO_ALLOW_MMAP,
             "cache: without --writeback INIT does not agree to "
             "WRITEBACK_CACHE; it agrees to DIRECT_IO_ALLOW_MMAP (shared "
             "mappings of --cache never files)")
    d = side_daemon(ctx, "cache-wb", ["--writeback"])
    try:
        with ctx.connect(init=False, daemon=d) as (dev, s):
            r = s.init(flags=fp.INIT_FLAGS | fp.INIT_WRITEBACK_CACHE)
            t.ok(r.init and r.init.flags & fp.INIT_WRITEBACK_CACHE,
                 "cache: with --writeback INIT agrees to WRITEBACK_CACHE")
            node = s.lookup(ROOT_ID, "cache").entry.nodeid
            f = s.lookup(node, "f").entry.nodeid
            o = s.open(f, os.O_WRONLY)
            rd = s.read(f, o.open.fh, 0, 4) if o.open else None
            t.ok(rd is not None and rd.error == 0 and rd.data == b"0123",
                 f"cache: with --writeback a write-only OPEN can be read "
                 f"through (the guest reads around partial pages): "
                 f"{rd.errname() if rd else o.errname()}")
            a = s.open(f, os.O_WRONLY | os.O_APPEND)
            w = s.write(f, a.open.fh, 2, b"ab") if a.open else None
            t.ok(w is not None and w.error == 0 and
                 read_host(os.path.join(top, "f")) == b"01ab456789",
                 f"cache: with --writeback O_APPEND is dropped (the guest "
                 f"gives the offsets): a write at 2 gave "
                 f"{read_host(os.path.join(top, 'f'))!r}")
            s.uid, s.gid = 1000, 1000
            c = s.create(node, "wo", 0o200, flags=os.O_WRONLY | os.O_CREAT)
            t.ok(c.error == 0,
                 f"cache: with --writeback the owner of a mode 200 file "
                 f"still opens it write-only through CREATE (the widened "
                 f"open is refused, the plain one is not): {c.errname()}")
    finally:
        t.ok(d.stop() == 0, "cache: the --writeback daemon exits 0")
    shutil.rmtree(top)


def scenario_quiesce(ctx):
    """INIT and DESTROY wait for what the other queues are serving."""
    t = ctx.tap
    if not ctx.only_vufsd("quiesce: INIT and DESTROY drain the other queues",
                          "virtiofsd serves one request queue"):
        return
    top = ctx.host("quiesce")
    os.mkdir(top)
    big = os.path.join(top, "big")
    if subprocess.run(["stat", "-f", "-c", "%T", top], capture_output=True,
                      text=True).stdout.strip() == "tmpfs":
        t.skip("quiesce: INIT and DESTROY drain the other queues",
               "the share is on tmpfs, where FSYNC takes no time")
        shutil.rmtree(top)
        return
    chunk = bytes(MiB)
    for op in (Op.INIT, Op.DESTROY):
        with ctx.connect(request_queues=2) as (dev, s):
            node = s.lookup(ROOT_ID, "quiesce").entry.nodeid
            node = s.lookup(node, "big").entry.nodeid \
                if os.path.exists(big) else s.create(node, "big", 0o644).entry.nodeid
            fh = s.open(node, os.O_RDWR).open.fh
            # 256 MiB of dirty pages in the host's cache: FSYNC is slow.
            with open(big, "wb") as f:
                for _ in range(256):
                    f.write(chunk)
            sync = s.request(Op.FSYNC, node, fp.FSYNC_IN.pack(fh, 0, 0))
            reset = s.request(op, 0, fp.INIT_IN.pack(
                fp.KERNEL_VERSION, fp.KERNEL_MINOR_VERSION, 128 * KiB,
                fp.INIT_FLAGS, 0) if op == Op.INIT else b"",
                out_size=fp.INIT_OUT.size if op == Op.INIT else 0)
            start = time.monotonic()
            dev.submit(sync, 1)
            time.sleep(0.05)
            dev.submit(reset, 2)
            for vq, req, length in iter_completions(dev, [1, 2], 2):
                req.complete(length)
            name = op.name
            if sync.completed_at - start < 0.05:
                t.skip(f"quiesce: {name} waits for an FSYNC in flight on "
                       "another queue", f"FSYNC took only "
                       f"{sync.completed_at - start:.3f} s")
                continue
            t.ok(sync.error == 0 and reset.error == 0 and
                 reset.completed_at >= sync.completed_at,
                 f"quiesce: {name} on queue 2 while queue 1 serves an FSYNC "
                 f"of 256 MiB ({sync.completed_at - start:.2f} s): {name} "
                 f"answered {reset.completed_at - sync.completed_at:+.3f} s "
                 f"after it (want >= 0), errors {sync.errname()} "
                 f"{reset.errname()}")
            r = s.getattr(node)
            t.ok(r.error == -errno.ESTALE,
                 f"quiesce: after {name} the old session's inode is gone: "
                 f"{r.errname()} (want -ESTALE)")
    shutil.rmtree(top)


def iter_completions(dev, queues, n):
    """Yields n completions from the given vrings of dev."""
    got = 0
    while got < n:
        for c in vu.wait_any([dev.vqs[q] for q in queues], dev.timeout):
            got += 1
            yield c


def scenario_handles(ctx):
    """--inode-file-handles prefer: a tree larger than the descriptor
    limit, all held by the guest at once."""
    t = ctx.tap
    if not ctx.only_vufsd_root("handles: inodes kept as file handles",
                               "virtiofsd's own option"):
        return
    many = ctx.host("handles")
    os.mkdir(many)
    n = 1000
    for i in range(n):
        write_file(os.path.join(many, f"f{i:04}"), f"{i}\n".encode())
    d = side_daemon(ctx, "handles", ["--inode-file-handles", "prefer"], [
        "prlimit", "--nofile=256:256",
        "setpriv", "--bounding-set", "-sys_resource", "--"])
    try:
        with ctx.connect(daemon=d) as (dev, s):
            top = s.lookup(ROOT_ID, "handles").entry.nodeid
            ids, errs = [], Counter()
            for i in range(n):
                r = s.lookup(top, f"f{i:04}")
                errs[r.errname()] += 1
                ids.append(r.entry.nodeid if r.entry else None)
            t.ok(errs == Counter({"0": n}) and len(set(ids)) == n,
                 f"handles: under a 256 descriptor limit, {n} files looked "
                 f"up and all held: {dict(errs)}, {len(set(ids))} distinct "
                 "node ids")
            nfd = len(os.listdir(f"/proc/{d.pid}/fd"))
            t.ok(nfd < 128, f"handles: the server holds {nfd} descriptors "
                 f"with {n} inodes known (want fewer than 128)")
            got = [s.getattr(ids[i]) for i in range(0, n, 7)]
            bad = [r.errname() for r in got if r.error]
            t.ok(not bad and all(r.attr.size == len(f"{i}\n") for r, i in
                                 zip(got, range(0, n, 7))),
                 f"handles: GETATTR of {len(got)} of them: {len(bad)} failed")
            o = s.open(ids[5], os.O_RDWR)
            rd = s.read(ids[5], o.open.fh, 0, 16) if o.open else o
            t.ok(rd.error == 0 and rd.data == b"5\n",
                 f"handles: OPEN and READ through a handle: {rd.errname()}")
            if o.open:
                s.release(ids[5], o.open.fh)
            again = s.lookup(top, "f0005")
            t.ok(again.error == 0 and again.entry.nodeid == ids[5],
                 "handles: a second LOOKUP finds the same inode (matched "
                 "by handle)")
            os.rename(os.path.join(many, "f0007"), os.path.join(many, "moved"))
            r = s.getattr(ids[7])
            m = s.lookup(top, "moved")
            t.ok(r.error == 0 and m.error == 0 and m.entry.nodeid == ids[7],
                 f"handles: renamed on the host, the inode still works "
                 f"({r.errname()}) and its new name is the same inode")
            old_ino = os.stat(os.path.join(many, "f0009")).st_ino
            os.unlink(os.path.join(many, "f0009"))
            r = s.getattr(ids[9])
            t.ok(r.error == -errno.ESTALE,
                 f"handles: removed on the host, GETATTR of it: "
                 f"{r.errname()} (want -ESTALE: the handle no longer opens)")
            # A new file, perhaps with the old inode number: not the old
            # inode, whatever its number.
            write_file(os.path.join(many, "f0009"), b"new\n")
            new_ino = os.stat(os.path.join(many, "f0009")).st_ino
            r = s.lookup(top, "f0009")
            t.ok(r.error == 0 and r.entry.nodeid != ids[9],
                 f"handles: a new file under the removed name (inode "
                 f"{'reused' if new_ino == old_ino else 'not reused'}) is "
                 f"a new inode: node id {r.entry.nodeid if r.entry else None}"
                 f", old {ids[9]}")
            st = Stats(d.stats, ctx.args.timeout).wait()
            held = st["inodes"] if st else None
            s.batch_forget([(x, 1) for x in ids if x] +
                           [(ids[5], 1), (ids[7], 1), (top, 1),
                            (r.entry.nodeid if r.entry else 0, 1)])
            st = Stats(d.stats, ctx.args.timeout).wait()
            t.ok(held is not None and held >= n and st and
                 st["inodes"] == 1,
                 f"handles: {held} inodes held, then after BATCH_FORGET of "
                 f"all: {st['inodes'] if st else None} (want 1, the root)")
    finally:
        t.ok(d.stop() == 0, "handles: that daemon exits 0")
        shutil.rmtree(many)


def acl_value(*entries):
    """A system.posix_acl_* value: (tag, perm, id) entries, version 2."""
    return struct.pack("<I", 2) + b"".join(
        struct.pack("<HHI", tag, perm, ident) for tag, perm, ident in
        sorted(entries))


ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ, ACL_MASK, ACL_OTHER = \
    0x01, 0x02, 0x04, 0x10, 0x20
ACL_UNDEF = 0xffffffff


def scenario_acl(ctx):
    """--posix-acl: the two ACL names pass, the guest checks them, a
    default ACL replaces the umask."""
    t = ctx.tap
    if not ctx.only_vufsd_root("acl: --posix-acl", "virtiofsd's own option"):
        return
    top = ctx.host("acl")
    os.mkdir(top)
    os.chmod(top, 0o777)
    f = os.path.join(top, "f")
    write_file(f, b"acl\n", 0o640)
    try:
        os.setxattr(top, "system.posix_acl_default", acl_value(
            (ACL_USER_OBJ, 7, ACL_UNDEF), (ACL_GROUP_OBJ, 5, ACL_UNDEF),
            (ACL_OTHER, 0, ACL_UNDEF)))
        os.removexattr(top, "system.posix_acl_default")
    except OSError as e:
        t.skip("acl: --posix-acl", f"the host fs has no POSIX ACLs ({e})")
        shutil.rmtree(top)
        return
    d0 = os.path.join(top, "dflt")
    os.mkdir(d0)
    os.chmod(d0, 0o777)
    dflt = acl_value((ACL_USER_OBJ, 7, ACL_UNDEF), (ACL_GROUP_OBJ, 5, ACL_UNDEF),
                     (ACL_OTHER, 0, ACL_UNDEF))
    os.setxattr(d0, "system.posix_acl_default", dflt)
    os.mkdir(os.path.join(top, "plain"))
    os.chmod(os.path.join(top, "plain"), 0o777)
    sg = os.path.join(top, "sg")
    write_file(sg, b"", 0o2770)
    os.chown(sg, 0, 50)
    os.chmod(sg, 0o2770)
    flags = fp.INIT_FLAGS | fp.INIT_POSIX_ACL
    with ctx.connect(init=False) as (dev, s):
        r = s.init(flags=flags)
        t.ok(r.init and not r.init.flags & fp.INIT_POSIX_ACL,
             "acl: without --posix-acl INIT does not agree to POSIX_ACL")
        node = s.lookup(ROOT_ID, "acl").entry.nodeid
        fn = s.lookup(node, "f").entry.nodeid
        r = s.getxattr(fn, "system.posix_acl_access", 0)
        t.ok(r.error == -errno.ENODATA,
             f"acl: ... and the ACL names stay hidden: {r.errname()}")
    d = side_daemon(ctx, "acl", ["--xattr", "--posix-acl"])
    try:
        with ctx.connect(init=False, daemon=d) as (dev, s):
            r = s.init(flags=flags)
            agreed = r.init.flags if r.init else 0
            t.ok(agreed & fp.INIT_POSIX_ACL and agreed & fp.INIT_DONT_MASK,
                 f"acl: with --posix-acl INIT agrees to POSIX_ACL and "
                 f"DONT_MASK ({agreed:#x})")
            node = s.lookup(ROOT_ID, "acl").entry.nodeid
            fn = s.lookup(node, "f").entry.nodeid
            acc = acl_value((ACL_USER_OBJ, 6, ACL_UNDEF), (ACL_USER, 6, 1000),
                            (ACL_GROUP_OBJ, 4, ACL_UNDEF),
                            (ACL_MASK, 6, ACL_UNDEF), (ACL_OTHER, 0, ACL_UNDEF))
            r = s.setxattr(fn, "system.posix_acl_access", acc)
            host = os.getxattr(f, "system.posix_acl_access") \
                if r.error == 0 else None
            t.ok(r.error == 0 and host == acc and
                 stat.S_IMODE(os.stat(f).st_mode) == 0o660,
                 f"acl: SETXATTR of an access ACL (user 1000 rw, mask rw): "
                 f"{r.errname()}, on the host {'the same' if host == acc else host}"
                 f", mode {oct(stat.S_IMODE(os.stat(f).st_mode))} (want 0o660: "
                 "group bits are the mask)")
            g = s.getxattr(fn, "system.posix_acl_access", 4096)
            ls = s.listxattr(fn, 4096)
            t.ok(g.error == 0 and g.value == acc and ls.error == 0 and
                 b"system.posix_acl_access\0" in ls.value,
                 f"acl: GETXATTR gives it back ({g.errname()}), LISTXATTR "
                 f"names it ({ls.errname()})")
            r = s.setxattr(fn, "system.other", b"x")
            t.ok(r.error == -errno.EPERM,
                 f"acl: other system.* names still refused: {r.errname()}")
            dn = s.lookup(node, "dflt").entry.nodeid
            pn = s.lookup(node, "plain").entry.nodeid
            a = s.create(dn, "inherits", 0o666, umask=0o077)
            b = s.create(pn, "masked", 0o666, umask=0o077)
            m = s.mkdir(dn, "sub", 0o777, umask=0o077)
            k = s.mknod(dn, "fifo", stat.S_IFIFO | 0o666, umask=0o077)
            mode = lambda *p: oct(stat.S_IMODE(os.stat(os.path.join(top, *p)).st_mode)) \
                if os.path.exists(os.path.join(top, *p)) else None
            sub_dflt = os.getxattr(os.path.join(d0, "sub"),
                                   "system.posix_acl_default") \
                if m.error == 0 else None
            t.ok([x.error for x in (a, b, m, k)] == [0] * 4 and
                 (mode("dflt", "inherits"), mode("plain", "masked"),
                  mode("dflt", "sub"), mode("dflt", "fifo")) ==
                 ("0o640", "0o600", "0o750", "0o640") and sub_dflt == dflt,
                 f"acl: umask 077 with DONT_MASK: under a default ACL (u rwx, "
                 f"g r-x, o ---) CREATE 0666 gives {mode('dflt', 'inherits')}"
                 f", MKDIR 0777 {mode('dflt', 'sub')} (and inherits the "
                 f"default ACL: {sub_dflt == dflt}), MKNOD 0666 "
                 f"{mode('dflt', 'fifo')}; without one CREATE 0666 gives "
                 f"{mode('plain', 'masked')} (want 0o640, 0o750, 0o640, "
                 "0o600)")
            sn = s.lookup(node, "sg").entry.nodeid
            gacc = acl_value((ACL_USER_OBJ, 6, ACL_UNDEF),
                             (ACL_GROUP_OBJ, 6, ACL_UNDEF),
                             (ACL_OTHER, 0, ACL_UNDEF))
            r1 = s.setxattr(sn, "system.posix_acl_access", gacc)
            keep = stat.S_IMODE(os.stat(sg).st_mode)
            r2 = s.setxattr(sn, "system.posix_acl_access", gacc,
                            setxattr_flags=fp.SETXATTR_ACL_KILL_SGID)
            gone = stat.S_IMODE(os.stat(sg).st_mode)
            t.ok(r1.error == 0 and r2.error == 0 and keep & stat.S_ISGID and
                 not gone & stat.S_ISGID,
                 f"acl: an access ACL keeps setgid ({oct(keep)}) unless the "
                 f"guest asks ACL_KILL_SGID ({oct(gone)})")
    finally:
        t.ok(d.stop() == 0, "acl: that daemon exits 0")
    shutil.rmtree(top)


def userns_daemon(ctx, name, opts, owner, prefix=()):
    """A vufsd --sandbox userns on a share of its own, in a directory the
    namespace's ids can reach (the test's own is mode 0700), both owned
    by owner (host uid, gid); started. Returns (daemon, share)."""
    base = tempfile.mkdtemp(prefix=f"vufs-{name}.")
    os.chmod(base, 0o755)
    share = os.path.join(base, "share")
    os.mkdir(share)
    for p in (base, share):
        os.chown(p, *owner)
    d = Daemon(ctx.args, base)
    d.share = share
    d.socket = os.path.join(base, f"{name}.sock")
    # Run by root, the stats file must not be in a directory another
    # user owns (vufsd refuses it: that user could swap the file).
    d.stats = os.path.join(base if prefix else ctx.daemon.workdir,
                           f"{name}.stats")
    d.log = ctx.daemon.log
    d.extra = ["--sandbox", "userns"] + opts
    d.prefix = list(prefix)
    d.start()
    return d, share


def scenario_userns(ctx):
    """--sandbox userns: a user namespace whose maps translate guest ids,
    run by root with a range and by an unprivileged user with its own."""
    t = ctx.tap
    if not ctx.only_vufsd_root("userns: --sandbox userns",
                               "virtiofsd's own sandbox"):
        return
    why = userns_refused()
    if why:
        t.skip("userns: --sandbox userns", f"no user namespace here: {why}")
        return

    def owner(*p):
        try:
            st = os.lstat(os.path.join(*p))
        except OSError:
            return None
        return st.st_uid, st.st_gid

    base_id = 100000
    d, share = userns_daemon(ctx, "userns", [
        "--uid-map", f"0:{base_id}:65536", "--gid-map", f"0:{base_id}:65536"],
        (base_id, base_id))
    try:
        with open(f"/proc/{d.pid}/uid_map") as f:
            umap = f.read().split()
        t.ok(umap == ["0", str(base_id), "65536"] and d.pid != d.proc.pid,
             f"userns: run by root with --uid-map 0:{base_id}:65536, the "
             f"server's uid_map is {umap}")
        write_file(os.path.join(share, "hosts"), b"root's\n", 0o644)
        os.chmod(share, 0o777)
        with ctx.connect(daemon=d, init=False) as (dev, s):
            s.init(flags2=fp.INIT2_CREATE_SUPP_GROUP)
            s.uid, s.gid = 1000, 1000
            g = s.create(ROOT_ID, "g", 0o644, ext=fp.ext_groups(70000))
            t.ok(g.error == -errno.EPERM and owner(share, "g") is None,
                 f"userns: guest user 1000 with supplementary group 70000 "
                 f"(outside the map): {g.errname()} (want -EPERM, as for "
                 f"an unmapped uid or gid)")
        with ctx.connect(daemon=d) as (dev, s):
            r = s.create(ROOT_ID, "r", 0o644)
            s.uid, s.gid = 1000, 1000
            u = s.create(ROOT_ID, "u", 0o644)
            s.uid, s.gid = 70000, 70000
            x = s.create(ROOT_ID, "x", 0o644)
            t.ok(r.error == 0 and owner(share, "r") == (base_id, base_id) and
                 u.error == 0 and owner(share, "u") ==
                 (base_id + 1000, base_id + 1000) and
                 x.error == -errno.EPERM and owner(share, "x") is None,
                 f"userns: guest root makes a file owned by "
                 f"{owner(share, 'r')} on the host, guest user 1000 one "
                 f"owned by {owner(share, 'u')}, guest user 70000 (outside "
                 f"the map) gets {x.errname()} (want {base_id}, "
                 f"{base_id + 1000}, -EPERM)")
            s.uid, s.gid = 0, 0
            h = s.lookup(ROOT_ID, "hosts")
            o = s.open(h.entry.nodeid, os.O_WRONLY) if h.entry else h
            t.ok(h.error == 0 and h.entry.attr.uid == 65534 and
                 o.error == -errno.EACCES,
                 f"userns: a host root's file shows as owned by "
                 f"{h.entry.attr.uid if h.entry else None} (want 65534, "
                 f"unmapped) and guest root may not write it: "
                 f"{o.errname()} (want -EACCES)")
            c = s.setattr(r.entry.nodeid, fp.FATTR_UID | fp.FATTR_GID,
                          uid=1000, gid=1000) if r.entry else r
            t.ok(c.error == 0 and owner(share, "r") ==
                 (base_id + 1000, base_id + 1000),
                 f"userns: guest root's chown to 1000:1000 gives "
                 f"{owner(share, 'r')} on the host: {c.errname()}")
    finally:
        t.ok(d.stop() == 0, "userns: the root-run daemon exits 0")
        shutil.rmtree(os.path.dirname(share))
    d, share = userns_daemon(ctx, "userns-user", [], (1000, 1000), [
        "setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "--"])
    try:
        with open(f"/proc/{d.pid}/status") as f:
            uids = [ln.split()[1:] for ln in f if ln.startswith("Uid:")][0]
        with open(f"/proc/{d.pid}/uid_map") as f:
            umap = f.read().split()
        t.ok(uids == ["1000"] * 4 and umap == ["0", "1000", "1"],
             f"userns: run by user 1000, the server is uid {uids} on the "
             f"host and root only of its namespace (uid_map {umap})")
        with ctx.connect(daemon=d) as (dev, s):
            r = s.create(ROOT_ID, "r", 0o644)
            m = s.mkdir(ROOT_ID, "d", 0o755)
            s.uid, s.gid = 1000, 1000
            u = s.create(ROOT_ID, "u", 0o644)
            t.ok(r.error == 0 and m.error == 0 and
                 owner(share, "r") == (1000, 1000) and
                 owner(share, "d") == (1000, 1000) and
                 u.error == -errno.EPERM,
                 f"userns: guest root's file and directory are user "
                 f"1000's on the host ({owner(share, 'r')}, "
                 f"{owner(share, 'd')}); guest user 1000, not mapped, gets "
                 f"{u.errname()} (want -EPERM)")
    finally:
        t.ok(d.stop() == 0, "userns: the unprivileged daemon exits 0")
        shutil.rmtree(os.path.dirname(share))


def scenario_devices(ctx):
    """Device nodes, only when the operator allows them."""
    t = ctx.tap
    if not ctx.only_vufsd_root("devices: --allow-devices",
                               "virtiofsd's own policy"):
        return
    top = ctx.host("devs")
    os.mkdir(top, 0o777)
    os.chmod(top, 0o777)
    d = side_daemon(ctx, "devices", ["--allow-devices"])
    try:
        eff = int(proc_status(d.pid)["CapEff"], 16)
        t.ok(eff & 1 << 27, f"devices: the server keeps CAP_MKNOD "
             f"({eff:#x}); without the option it does not (scenario "
             "sandbox)")
        with ctx.connect(daemon=d) as (dev, s):
            node = s.lookup(ROOT_ID, "devs").entry.nodeid
            r = s.mknod(node, "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
            st = os.lstat(os.path.join(top, "null")) if r.error == 0 \
                else None
            t.ok(r.error == 0 and stat.S_ISCHR(st.st_mode) and
                 st.st_rdev == os.makedev(1, 3),
                 f"devices: guest root makes a character device 1:3: "
                 f"{r.errname()}")
            s.uid, s.gid = 1000, 1000
            r = s.mknod(node, "user-null", stat.S_IFCHR | 0o666,
                        os.makedev(1, 3))
            t.ok(r.error == -errno.EPERM and
                 not os.path.lexists(os.path.join(top, "user-null")),
                 f"devices: guest user 1000 cannot (no CAP_MKNOD as that "
                 f"user): {r.errname()} (want -EPERM)")
    finally:
        t.ok(d.stop() == 0, "devices: that daemon exits 0")
        shutil.rmtree(top)


def scenario_compromised(ctx):
    """A server taken over: system calls injected into the running
    sandboxed server (ptrace, as an attacker with code execution in it
    would make them) with its seccomp filter and capabilities in force.
    The old container escape ("shocker") opens a directory outside the
    share from a file handle; it must fail unless --inode-file-handles
    prefer asked for handles, whose price that is."""
    t, d, tmo = ctx.tap, ctx.daemon, ctx.args.timeout
    if not ctx.only_vufsd_root("compromised", "the sandbox is vufsd's"):
        return
    why = syscall_inject.supported()
    if why:
        t.skip("compromised: open_by_handle_at injected", why)
        return
    outside = os.path.join(d.workdir, "outside")
    os.makedirs(outside, exist_ok=True)
    write_file(os.path.join(outside, "secret"), b"host only\n")
    try:
        htype, fh = syscall_inject.file_handle(outside)
    except OSError as e:
        t.skip("compromised: open_by_handle_at injected",
               f"the share's file system has no handles: {e}")
        return
    st = os.stat(d.share)
    if st.st_dev != os.stat(outside).st_dev:
        t.skip("compromised: open_by_handle_at injected",
               "the share and the work directory are on different file "
               "systems")
        return

    def shocker(daemon):
        """(result, what the fd leads to) of open_by_handle_at(AT_FDCWD,
        outside's handle, O_RDONLY | O_DIRECTORY) made by the server."""
        with syscall_inject.Injector(daemon.pid) as inj:
            addr = inj.poke(struct.pack("=Ii", len(fh), htype) + fh)
            fd = inj.syscall("open_by_handle_at", -100, addr,
                             os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            where = None
            if fd >= 0:
                try:
                    where = os.listdir(f"/proc/{daemon.pid}/fd/{fd}")
                except OSError as e:
                    where = str(e)
                inj.syscall("close", fd)
            return fd, where

    cases = (
        # name, options, what the server keeps, want
        ("seccomp", [], SERVER_CAPS, "killed"),
        ("caps", ["--seccomp", "log"], SERVER_CAPS, "EPERM"),
        ("handles", ["--inode-file-handles", "prefer"],
         SERVER_CAPS | CAP_DAC_READ_SEARCH, "opened"),
    )
    for name, opts, caps, want in cases:
        x = side_daemon(ctx, f"shocker-{name}", opts)
        try:
            eff = int(proc_status(x.pid)["CapEff"], 16)
            t.ok(eff == caps, f"compromised: {' '.join(opts) or 'defaults'}"
                 f": the server keeps {eff:#x} (want {caps:#x}; "
                 f"dac_read_search only for handles)")
            try:
                fd, where = shocker(x)
                got = "opened" if fd >= 0 else errno.errorcode[-fd]
            except syscall_inject.Killed as e:
                got, where = "killed", None
                sig = os.WTERMSIG(e.status) if os.WIFSIGNALED(e.status) \
                    else None
                t.ok(sig == signal.SIGSYS, f"compromised: the filter's "
                     f"kill is SIGSYS (got {sig})")
                wait_exit(x.proc, tmo)
            t.ok(got == want, f"compromised: {' '.join(opts) or 'defaults'}"
                 f": open_by_handle_at of {outside} from inside the server:"
                 f" {got} (want {want}; the fd led to {where})")
        finally:
            x.stop()
    # The daemon under test still serves after its siblings' trials.
    with ctx.connect() as (dev, s):
        ctx.expect("compromised: the daemon under test serves (GETATTR /)",
                   s.getattr(ROOT_ID))


def fionread(fd):
    """Bytes waiting in pipe fd."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD,
                                          bytes(4)))[0]


def cpu_seconds(pid):
    """User plus system time of process pid so far, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scenario_frontfds(ctx):
    """A front end's descriptors for a vring that are not eventfds: a
    pipe's write end as call fd (and its read end as error fd, so nobody
    ever empties it) would block the daemon's notifications once the pipe
    fills, and a regular file as kick fd is always readable. Each is
    refused (an error ack), the vring keeps the eventfd it had, more
    requests than a pipe holds complete, nothing spins, and the daemon
    still stops on SIGTERM."""
    t = ctx.tap
    if not ctx.only_vufsd("frontfds", "vufsd's own check"):
        return
    x = side_daemon(ctx, "frontfds", [])
    rd, wr = os.pipe()
    plain = os.open(os.path.join(x.workdir, "frontfds.kick"),
                    os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    os.write(plain, b"\1" * 8)
    sem = os.eventfd(0, os.EFD_SEMAPHORE | os.EFD_CLOEXEC)
    os.eventfd_write(sem, 2**64 - 2)
    with open(f"/proc/self/fdinfo/{sem}") as f:
        shows_sem = "eventfd-semaphore" in f.read()
    try:
        with ctx.connect(daemon=x) as (dev, s):
            c = dev.conn
            t.ok(c.reply_ack, "frontfds: REPLY_ACK negotiated (the refusals "
                 "are seen as acks)")
            c.use_ack = False
            kick_q = dev.nqueues - 1
            for what, req, index, fd in (
                    ("a pipe's write end as call fd", vu.Req.SET_VRING_CALL,
                     1, wr),
                    ("the pipe's read end as error fd", vu.Req.SET_VRING_ERR,
                     1, rd),
                    ("a regular file as kick fd", vu.Req.SET_VRING_KICK,
                     kick_q, plain),
                    ("a semaphore eventfd of count 2^64-2 as kick fd",
                     vu.Req.SET_VRING_KICK, kick_q, sem)):
                if fd == sem and not shows_sem:
                    t.skip(f"frontfds: {what}", "this kernel's fdinfo does "
                           "not show EFD_SEMAPHORE (Linux 6.5)")
                    continue
                status = c.ack(req, struct.pack("<Q", index), [fd])
                t.ok(status != 0, f"frontfds: {what} on vring {index}: "
                     f"refused (ack {status}, want non-zero)")
            c.use_ack = True
            # Full already: a daemon that took the pipe blocks on its first
            # notification, holding the ring's lock.
            os.set_blocking(wr, False)
            try:
                while os.write(wr, bytes(4096)):
                    pass
            except BlockingIOError:
                pass
            os.set_blocking(wr, True)   # the mode is the daemon's to set
            filled = fionread(rd)
            n, done = 2000, 0
            dev.timeout = 10
            try:
                for _ in range(0, n, 500):
                    reqs = [s.request(Op.GETATTR, ROOT_ID,
                                      args=fp.GETATTR_IN.pack(0, 0, 0),
                                      out_size=fp.ATTR_OUT_SIZE)
                            for _ in range(500)]
                    for r in reqs:
                        r.queue = 1
                    dev.run(reqs, depth=100)
                    done += sum(r.error == 0 and r.problem() is None
                                for r in reqs)
            except TimeoutError as e:
                t.diag(f"frontfds: {e}")
            t.ok(done == n, f"frontfds: {done} of {n} GETATTRs on vring 1 "
                 "completed")
            t.ok(fionread(rd) == filled, f"frontfds: the pipe was not "
                 f"written to ({fionread(rd) - filled} bytes more than the "
                 f"{filled} the test put there)")
            cpu0 = cpu_seconds(x.pid)
            time.sleep(1)
            used = cpu_seconds(x.pid) - cpu0
            t.ok(used < 0.3, f"frontfds: the idle daemon used {used:.2f} s "
                 "of CPU in 1 s (a worker spinning on a file as kick fd "
                 "would use about 1)")
            r = s.getattr(ROOT_ID, queue=kick_q)
            ctx.expect(f"frontfds: vring {kick_q} still serves on its "
                       "eventfd (GETATTR)", r)
        with ctx.connect(daemon=x) as (dev, s):
            ctx.expect("frontfds: the next connection is served (GETATTR /)",
                       s.getattr(ROOT_ID))
    finally:
        os.close(rd)
        os.close(wr)
        os.close(plain)
        os.close(sem)
        t0 = time.monotonic()
        rc = x.stop()
        t.ok(rc == 0, f"frontfds: SIGTERM: the daemon exits {rc} in "
             f"{time.monotonic() - t0:.1f} s (want 0)")


def scenario_statsfile(ctx):
    """--stats as root in a directory others may write to: what a local
    user plants at the path (a symbolic link or a hard link to root's
    0600 file, a file of their own, a FIFO, a link in place of a
    directory on the way) is neither followed nor written, and a path
    through a directory others may write to (not sticky) is refused; the
    daemon says why and does not start."""
    t, d, tmo = ctx.tap, ctx.daemon, ctx.args.timeout
    if not ctx.only_vufsd_root("statsfile", "vufsd's --stats"):
        return
    top = os.path.join(d.workdir, "statsdir")
    os.makedirs(top, exist_ok=True)
    victim = os.path.join(d.workdir, "victim-0600")
    secret = b"root's own, mode 0600\n"

    def plant(kind, path):
        if kind == "symlink":
            os.symlink(victim, path)
        elif kind == "hard link":
            os.link(victim, path)
        elif kind == "another user's file":
            write_file(path, b"user 1000's\n")
            os.chown(path, 1000, 1000)
        elif kind == "FIFO":
            os.mkfifo(path, 0o666)

    linkdir = os.path.join(d.workdir, "statslink")
    os.symlink(d.workdir, linkdir)
    opendir = os.path.join(d.workdir, "statsopen")
    os.makedirs(opendir, exist_ok=True)
    os.chown(opendir, 0, 1000)
    os.chmod(opendir, 0o775)
    for kind in ("symlink", "hard link", "another user's file", "FIFO",
                 "directory link", "group-writable directory"):
        write_file(victim, secret)
        os.chmod(victim, 0o600)
        path = os.path.join(top, kind.replace(" ", "-").replace("'", ""))
        if kind == "directory link":
            # A user who could make /tmp/x point at /etc: root's own
            # file with one name is at the end of the path.
            path = os.path.join(linkdir, os.path.basename(victim))
        elif kind == "group-writable directory":
            # Group 1000 could swap the file for a link at any time.
            path = os.path.join(opendir, "stats")
        plant(kind, path)

        def look():
            if not os.path.lexists(path):
                return None
            st = os.lstat(path)
            return st.st_ino, st.st_size, st.st_mtime_ns
        before = look()
        sock = os.path.join(d.workdir, "statsfile.sock")
        argv = [d.binary, "--socket", sock, "--shared-dir", d.share,
                "--stats", path, "--stats-interval", "50"]
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        try:
            rc = p.wait(min(tmo, 5))
        except subprocess.TimeoutExpired:
            time.sleep(0.3)     # a few stats intervals
            p.terminate()
            p.wait(tmo)
            rc = "still serving"
        err = p.stderr.read().strip().splitlines()
        with open(victim, "rb") as f:
            intact = f.read() == secret
        same = look() == before
        t.ok(rc == 1 and intact and same and "--stats" in " ".join(err),
             f"statsfile: {kind} at the --stats path: exit {rc} (want 1), "
             f"root's file {'intact' if intact else 'OVERWRITTEN'}, the "
             f"planted name {'untouched' if same else 'changed'}, message "
             f"{err[-1:]}")
        if kind != "directory link" and os.path.lexists(path):
            os.unlink(path)
        if os.path.exists(sock):
            os.unlink(sock)


# --- main --------------------------------------------------------------------

RUN = {"ops": scenario_ops, "queues": scenario_queues,
       "malformed": scenario_malformed, "escape": scenario_escape,
       "disconnect": scenario_disconnect, "reset": scenario_reset,
       "access": scenario_access, "xattr": scenario_xattr,
       "fds": scenario_fds, "shrink": scenario_shrink,
       "sandbox": scenario_sandbox, "creds": scenario_creds,
       "cache": scenario_cache, "quiesce": scenario_quiesce,
       "handles": scenario_handles, "acl": scenario_acl,
       "userns": scenario_userns,
       "devices": scenario_devices, "compromised": scenario_compromised,
       "frontfds": scenario_frontfds, "statsfile": scenario_statsfile}


def daemon_start_checks(ctx):
    """vufsd: replaces a stale socket, refuses a non-socket."""
    t, d = ctx.tap, ctx.daemon
    if not ctx.vufsd:
        d.start()
        return
    notsock = os.path.join(d.workdir, "not-a-socket")
    write_file(notsock, b"keep me\n")
    p = d.spawn(d.argv(notsock))
    try:
        rc = p.wait(ctx.args.timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait(ctx.args.timeout)
        rc = f"still running after {ctx.args.timeout} s"
    t.ok(rc != 0 and read_host(notsock) == b"keep me\n",
         f"daemon: --socket on a regular file: refused (exit {rc}), file "
         "kept")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(d.socket)
    stale.close()
    d.start()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(ctx.args.timeout)
        listening = probe.connect_ex(d.socket) == 0
    t.ok(listening, "daemon: started on a stale socket file and listens "
         "there")
    cli_checks(ctx)


def cli_checks(ctx):
    """vufsd's command line: --help, and a clear error and exit status for
    every bad option (2) or unusable directory (1)."""
    t, d = ctx.tap, ctx.daemon
    binary = d.argv(d.socket)[0]
    p = subprocess.run([binary, "--help"], capture_output=True, text=True,
                       timeout=ctx.args.timeout)
    t.ok(p.returncode == 0 and "--queues" in p.stdout and
         "num-request-queues" in p.stdout,
         f"cli: --help exits 0 and documents --queues (exit {p.returncode})")
    sock = os.path.join(d.workdir, "cli.sock")
    share = ctx.host("")
    notdir = os.path.join(d.workdir, "victim")
    cases = [
        ("no arguments", [], 2, "required"),
        ("--queues 0", ["-s", sock, "-d", share, "-q", "0"], 2, "--queues"),
        ("--queues 65", ["-s", sock, "-d", share, "-q", "65"], 2, "--queues"),
        ("--queues x", ["-s", sock, "-d", share, "-q", "x"], 2, "--queues"),
        ("--busy-poll -1", ["-s", sock, "-d", share, "-p", "-1"], 2,
         "--busy-poll"),
        ("an unknown option", ["-s", sock, "-d", share, "--bogus"], 2,
         "Usage"),
        ("a stray argument", ["-s", sock, "-d", share, "extra"], 2,
         "unexpected"),
        ("--cache sometimes", ["-s", sock, "-d", share, "--cache",
                               "sometimes"], 2, "give auto, always or never"),
        ("--writeback with --cache never", ["-s", sock, "-d", share,
                                            "--writeback", "--cache",
                                            "never"], 2, "not with --cache never"),
        ("a missing directory", ["-s", sock, "-d", share + "/nope"], 1,
         "No such file"),
        ("a file as directory", ["-s", sock, "-d", notdir], 1,
         "not a directory"),
    ]
    for desc, argv, want, text in cases:
        p = subprocess.run([binary] + argv, capture_output=True, text=True,
                           timeout=ctx.args.timeout)
        t.ok(p.returncode == want and text in p.stderr and
             not os.path.exists(sock),
             f"cli: {desc}: exit {p.returncode} (want {want}), message "
             f"{p.stderr.strip().splitlines()[-1:] if p.stderr else None}")


def main():
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 2)[2])
    p.add_argument("--daemon", choices=("vufsd", "virtiofsd"),
                   default="vufsd")
    p.add_argument("--bin", help="the daemon's binary (default: "
                   + ", ".join(f"{k} {v}" for k, v in DEFAULT_BIN.items())
                   + ")")
    p.add_argument("--queues", type=int, default=2,
                   help="vufsd --queues (request queues; default 2)")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="vufsd --threads (workers per request queue)")
    p.add_argument("--busy-poll", type=int, default=0, metavar="US",
                   help="vufsd --busy-poll (default 0: sleep on the kick)")
    p.add_argument("--daemon-opt", action="append", default=[],
                   metavar="OPT", help="one more option of vufsd or the Rust "
                   "virtiofsd (in place of a default of the same name), e.g. "
                   "--daemon-opt=--inode-file-handles=prefer (repeatable)")
    p.add_argument("--timeout", type=float, default=vu.TIMEOUT,
                   help="seconds any single wait may take (default 10)")
    p.add_argument("--keep", action="store_true",
                   help="keep the temporary directory (and print it)")
    p.add_argument("--verbose", action="store_true",
                   help="run vufsd with --verbose (its log is in the "
                   "temporary directory)")
    p.add_argument("scenario", nargs="*", metavar="SCENARIO",
                   help=" ".join(SCENARIOS) + " (default: all)")
    args = p.parse_args()
    for name in args.scenario:
        if name not in SCENARIOS:
            p.error(f"unknown scenario {name!r}")
    args.bin = args.bin or DEFAULT_BIN[args.daemon]
    scenarios = args.scenario or list(SCENARIOS)
    if args.daemon == "vufsd" and args.queues < 1:
        p.error("--queues must be >= 1")
    if not os.access(args.bin, os.X_OK):
        print(f"{args.bin}: not an executable (build vufsd with make -C "
              "tools/vufsd OUT=build/tools, or give --bin)")
        return 2

    workdir = tempfile.mkdtemp(prefix="vufs-test.")
    for sub in ("share", "outside"):
        os.mkdir(os.path.join(workdir, sub))
    write_file(os.path.join(workdir, "victim"), b"victim\n")
    tap = vu.Tap()
    daemon = Daemon(args, workdir)
    ctx = Ctx(args, tap, daemon)
    tap.diag(f"{args.daemon} {args.bin}, {ctx.nreq} request queue(s), "
             f"work directory {workdir}, scenarios {' '.join(scenarios)}")
    try:
        daemon_start_checks(ctx)
        for name in scenarios:
            tap.diag(f"scenario {name}")
            try:
                RUN[name](ctx)
            except DaemonDied:
                raise
            except Exception as e:
                tap.diag(traceback.format_exc())
                tap.ok(False, f"{name}: ran to the end ({e!r})")
            ctx.check_alive(f"{name}: after the scenario")
    except DaemonDied as e:
        tap.ok(False, f"the daemon died: {e}")
    finally:
        rc = daemon.stop()
        if ctx.vufsd:
            tap.ok(rc == 0, f"daemon: SIGTERM ends it with exit status {rc}")
            st = ctx.stats.parse() if ctx.stats else None
            tap.ok(st is not None and st.get("pid") == daemon.served_by,
                   "daemon: the stats file is whole after the exit "
                   f"(seq {st and st.get('seq')})")
        if tap.failed or args.keep:
            log = daemon.log
            if os.path.exists(log):
                with open(log, errors="replace") as f:
                    lines = f.read().splitlines()
                tap.diag(f"last lines of {log}:")
                tap.diag("\n".join(lines[-30:]))
        if args.keep:
            tap.diag(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    if tap.skipped:
        print(f"# {tap.skipped} skipped")
    print(f"{tap.n} checks, {tap.failed} failed")
    return 1 if tap.failed else 0


if __name__ == "__main__":
    sys.exit(main())
