"""One relayed connection: stdin goes to 127.0.0.1:argv[1] inside the sandbox, replies to stdout.

Run with `python3 -I -c` inside the sandbox, so it uses the standard library only.
"""

import os
import socket
import sys
import threading

try:
    upstream = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
except OSError as exc:
    sys.exit(f"relay: {exc}")
upstream.settimeout(None)


def forward() -> None:
    try:
        while data := os.read(0, 65536):
            upstream.sendall(data)
        upstream.shutdown(socket.SHUT_WR)
    except OSError:
        pass


threading.Thread(target=forward, daemon=True).start()
out = sys.stdout.buffer
try:
    while data := upstream.recv(65536):
        out.write(data)
        out.flush()
except OSError:
    pass
