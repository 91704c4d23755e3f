#!/usr/bin/env python3
"""Send one QMP command to a QEMU monitor socket and print the reply.

Usage: qmp.py SOCKET < command.json
Prints the JSON reply ({"return": ...} or {"error": ...}); exits 1 on an
error reply or a connection problem. Events that arrive first are skipped.
"""
import json
import socket
import sys


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

    json.loads(f.readline())  # greeting
    f.write(b'{"execute": "qmp_capabilities"}\n')
    f.flush()
    reply()
    f.write(json.dumps(cmd).encode() + b"\n")
    f.flush()
    msg = reply()
    print(json.dumps(msg))
    return 1 if "error" in msg else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError) as e:
        print(json.dumps({"error": {"class": "vstor", "desc": str(e)}}))
        sys.exit(1)
