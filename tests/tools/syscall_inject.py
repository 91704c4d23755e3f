#!/usr/bin/env python3
"""Make a running process issue system calls of our choosing (x86-64).

This is what an attacker who has taken over a daemon can do: run any
system call the daemon's sandbox lets through, with the daemon's
credentials, capabilities, namespaces and seccomp filter. The tests use
it to check that the sandbox, not the daemon's good behaviour, is what
stops an escape.

    with Injector(tid) as inj:
        addr = inj.poke(b"bytes")           # scratch memory below its stack
        ret = inj.syscall(NR_openat, AT_FDCWD, addr, 0)

syscall() returns the raw result (a negative errno on failure), or raises
Killed if the call killed the process (a seccomp filter's verdict). The
thread is stopped with PTRACE_INTERRUPT wherever it is, usually blocked in
a system call; its registers are put back afterwards so that call
restarts as if nothing happened.
"""
import ctypes
import os
import struct

PTRACE_GETREGS, PTRACE_SETREGS = 12, 13
PTRACE_SINGLESTEP, PTRACE_CONT, PTRACE_DETACH = 9, 7, 17
PTRACE_SEIZE, PTRACE_INTERRUPT = 0x4206, 0x4207
WALL = 0x40000000

# struct user_regs_struct, x86-64: 27 unsigned longs.
REGS = ("r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax "
        "rip cs eflags rsp ss fs_base gs_base ds es fs gs").split()
SYSCALL_INSN = b"\x0f\x05"

NR = {"read": 0, "close": 3, "ioctl": 16, "socket": 41, "getdents64": 217,
      "openat": 257, "name_to_handle_at": 303, "open_by_handle_at": 304}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.restype = ctypes.c_long
_libc.ptrace.argtypes = (ctypes.c_long, ctypes.c_int, ctypes.c_void_p,
                         ctypes.c_void_p)


class Killed(Exception):
    """The injected call ended the process (status in .status)."""

    def __init__(self, status):
        super().__init__(f"the process died: wait status {status:#x}")
        self.status = status


class Regs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulong) for n in REGS]

    def copy(self):
        c = Regs()
        ctypes.memmove(ctypes.byref(c), ctypes.byref(self),
                       ctypes.sizeof(self))
        return c


def supported():
    """None if this machine can inject, else why not."""
    if os.uname().machine != "x86_64":
        return f"syscall injection is written for x86-64, not {os.uname().machine}"
    return None


def main(argv):
    """syscall_inject.py PID NAME [ARG...]: make process PID call NAME with
    integer ARGs (or strings, copied into its memory, as pointers); prints
    the result, or 'killed SIGNAL' if the call ended the process."""
    pid, name, args = int(argv[1]), argv[2], argv[3:]
    with Injector(pid) as inj:
        vals, off = [], 0
        for a in args:
            try:
                vals.append(int(a, 0))
            except ValueError:
                vals.append(inj.poke(a.encode() + b"\0", off))
                off += len(a) + 1
        try:
            print(inj.syscall(name, *vals))
        except Killed as e:
            sig = os.WTERMSIG(e.status) if os.WIFSIGNALED(e.status) else 0
            print(f"killed {sig}")


class Injector:
    def __init__(self, tid):
        self.tid = tid
        self.saved = None
        self.scratch = None
        self.dead = False

    def _ptrace(self, req, addr=0, data=0):
        if _libc.ptrace(req, self.tid, addr, data) < 0:
            e = ctypes.get_errno()
            raise OSError(e, f"ptrace {req} of {self.tid}: {os.strerror(e)}")

    def _wait(self):
        _, status = os.waitpid(self.tid, WALL)
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            self.dead = True
            raise Killed(status)
        return status

    def __enter__(self):
        self._ptrace(PTRACE_SEIZE)
        self._ptrace(PTRACE_INTERRUPT)
        self._wait()
        self.saved = self._getregs()
        # Below the red zone and whatever the thread keeps on its stack.
        self.scratch = (self.saved.rsp - 65536) & ~0xfff
        self.insn = self._find_syscall_insn()
        return self

    def __exit__(self, *exc):
        if self.dead:
            return False
        self._setregs(self.saved)
        self._ptrace(PTRACE_DETACH)
        return False

    def _getregs(self):
        r = Regs()
        self._ptrace(PTRACE_GETREGS, 0, ctypes.addressof(r))
        return r

    def _setregs(self, r):
        self._ptrace(PTRACE_SETREGS, 0, ctypes.addressof(r))

    def _find_syscall_insn(self):
        # Stopped in a system call, rip is just past its instruction.
        if self.peek(self.saved.rip - 2, 2) == SYSCALL_INSN:
            return self.saved.rip - 2
        # Otherwise look through the executable mappings of libc.
        with open(f"/proc/{self.tid}/maps") as f:
            for line in f:
                addr, perm = line.split()[:2]
                if "x" not in perm:
                    continue
                lo, hi = (int(x, 16) for x in addr.split("-"))
                data = self.peek(lo, min(hi - lo, 1 << 20))
                at = data.find(SYSCALL_INSN)
                if at >= 0:
                    return lo + at
        raise RuntimeError(f"no syscall instruction found in {self.tid}")

    def peek(self, addr, n):
        with open(f"/proc/{self.tid}/mem", "rb", buffering=0) as f:
            f.seek(addr)
            return f.read(n)

    def poke(self, data, offset=0):
        """Write data into scratch memory; returns its address there."""
        addr = self.scratch + offset
        with open(f"/proc/{self.tid}/mem", "r+b", buffering=0) as f:
            f.seek(addr)
            f.write(data)
        return addr

    def syscall(self, name, *args):
        r = self.saved.copy()
        r.rax = NR[name] if isinstance(name, str) else name
        r.orig_rax = 2**64 - 1          # no restart of the interrupted call
        r.rip = self.insn
        for reg, val in zip(("rdi", "rsi", "rdx", "r10", "r8", "r9"), args):
            setattr(r, reg, val & (2**64 - 1))
        self._setregs(r)
        self._ptrace(PTRACE_SINGLESTEP)
        self._wait()
        ret = self._getregs().rax
        return ret - 2**64 if ret >= 2**63 else ret


def file_handle(path):
    """(handle_type, bytes) of path's file handle, from name_to_handle_at."""
    buf = ctypes.create_string_buffer(8 + 128)
    struct.pack_into("=Ii", buf, 0, 128, 0)
    mount_id = ctypes.c_int()
    if _libc.name_to_handle_at(-100, path.encode(), buf,
                               ctypes.byref(mount_id), 0):
        e = ctypes.get_errno()
        raise OSError(e, f"name_to_handle_at {path}: {os.strerror(e)}")
    size, htype = struct.unpack_from("=Ii", buf, 0)
    return htype, buf.raw[8:8 + size]


if __name__ == "__main__":
    import sys
    main(sys.argv)
