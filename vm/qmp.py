#!/usr/bin/env python3
"""Send one QMP command to a QEMU monitor socket and print the reply.

Usage: qmp.py SOCKET < command.json
Prints the JSON reply ({"return": ...} or {"error": ...}); exits 1 on an
error reply or a connection problem. Events that arrive first are skipped.

Two commands of our own, for a guest that asks through vm.sh and cannot act
while it is stopped:
  {"execute": "vstor-pause", "arguments": {"seconds": S}}
      stop the VM, wait S seconds, continue it; returns {"paused": S}.
  {"execute": "vstor-cont-on-stop", "arguments": {"timeout": T, "after": A}}
      wait up to T seconds for the VM to stop by itself (an I/O error with
      werror=stop or enospc), then A seconds more, then continue it;
      returns {"status": the status it stopped in, "waited": seconds}.
  {"execute": "vstor-wake-on-suspend", "arguments": {"timeout": T, "after": A}}
      wait up to T seconds for the guest to suspend itself to RAM (ACPI S3:
      query-status "suspended"), then A seconds more, then wake it
      (system_wakeup); returns {"waited": seconds}. The guest cannot wait
      for this reply: its devices, the run directory's 9p among them, are
      reset by the suspend.
"""
import json
import socket
import sys
import time


def main():
    cmd = json.load(sys.stdin)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(sys.argv[1])
    f = s.makefile("rwb")

    def reply():
        while True:
            line = f.readline()
            if not line:
                raise ConnectionError("QMP socket closed")
            msg = json.loads(line)
            if "return" in msg or "error" in msg:
                return msg

    def send(c):
        f.write(json.dumps(c).encode() + b"\n")
        f.flush()
        return reply()

    json.loads(f.readline())  # greeting
    send({"execute": "qmp_capabilities"})
    what = cmd.get("execute")
    args = cmd.get("arguments", {})
    if what == "vstor-pause":
        msg = send({"execute": "stop"})
        if "return" in msg:
            time.sleep(float(args.get("seconds", 1)))
            msg = send({"execute": "cont"})
            if "return" in msg:
                msg = {"return": {"paused": args.get("seconds", 1)}}
    elif what == "vstor-cont-on-stop":
        t0 = time.monotonic()
        deadline = t0 + float(args.get("timeout", 20))
        msg = {"error": {"class": "vstor", "desc": "the VM did not stop"}}
        while time.monotonic() < deadline:
            st = send({"execute": "query-status"})
            if "return" in st and not st["return"].get("running", True):
                waited = round(time.monotonic() - t0, 1)
                time.sleep(float(args.get("after", 1)))
                msg = send({"execute": "cont"})
                if "return" in msg:
                    msg = {"return": {"status": st["return"].get("status"), "waited": waited}}
                break
            time.sleep(0.05)
    elif what == "vstor-wake-on-suspend":
        t0 = time.monotonic()
        timeout = float(args.get("timeout", 60))
        deadline = t0 + timeout
        msg = {"error": {"class": "vstor", "desc": f"the VM did not suspend within {timeout:g} s"}}
        while time.monotonic() < deadline:
            st = send({"execute": "query-status"})
            if "return" in st and st["return"].get("status") == "suspended":
                waited = round(time.monotonic() - t0, 1)
                time.sleep(float(args.get("after", 1)))
                msg = send({"execute": "system_wakeup"})
                if "return" in msg:
                    msg = {"return": {"waited": waited}}
                break
            time.sleep(0.05)
    else:
        msg = send(cmd)
    print(json.dumps(msg))
    return 1 if "error" in msg else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError) as e:
        print(json.dumps({"error": {"class": "vstor", "desc": str(e)}}))
        sys.exit(1)
