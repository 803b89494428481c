"""The host end of a sandbox's resident exec channel: the container's stdio, attached.

Every sandbox container's main process is the resident exec server
(`scripts/resident.py`). The host attaches to its stdin and stdout once, hands it a key, and
from then on sends sealed, numbered requests (a command, a file script, a copy) and reads the
responses, several in flight at a time, each under its request id. A command then costs a
frame each way instead of the engine's exec round trip.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import secrets
import socket
import threading
import time
from collections import deque
from typing import Any

import docker
import docker.errors
import requests.exceptions

from loopwright.sandbox.docker.engine import script
from loopwright.sandbox.docker.scripts.resident import (
    CHUNK,
    UP,
    Codec,
    FrameError,
    boot_frame,
    hello,
    host_codec,
)

READY_TIMEOUT_S = 5.0
"""How long the host waits for a new server to answer before using `docker exec` instead."""
STDERR_KEPT = 2000


def boot_resident(client: docker.DockerClient, container_id: str) -> bool:
    """Hand a just-started container's main process the server's program (on its stdin) and
    wait until the server says it runs; False if it does not (an image without python3 runs
    the plain keeper and leaves the program unread: the sandbox then uses `docker exec`).

    Waiting keeps the next attach's frames from overtaking the program on the way in.
    """
    try:
        response = client.api.attach_socket(
            container_id, params={"stdin": 1, "stdout": 1, "stream": 1}
        )
    except (docker.errors.APIError, requests.exceptions.RequestException):
        return False
    sock: socket.socket = getattr(response, "_sock", response)
    deadline = time.monotonic() + READY_TIMEOUT_S
    seen = b""
    try:
        sock.sendall(boot_frame(script("resident.py")))
        raw = b""
        while UP not in seen:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            sock.settimeout(left)
            chunk = sock.recv(CHUNK)
            if not chunk:
                return False
            raw += chunk
            while len(raw) >= 8 and len(raw) >= 8 + int.from_bytes(raw[4:8], "big"):
                size = int.from_bytes(raw[4:8], "big")
                if raw[0] == 1:
                    seen += raw[8 : 8 + size]
                raw = raw[8 + size :]
        return True
    except OSError:
        return False
    finally:
        sock.close()
        with contextlib.suppress(OSError):
            response.close()


class ChannelClosed(Exception):
    """The channel ended: the server exited (killed, out of memory), or the host closed it."""


class Call:
    """One request's responses, in order."""

    def __init__(self, channel: ResidentChannel, rid: int) -> None:
        self.id = rid
        self._channel = channel
        self.inbox: queue.Queue[tuple[dict[str, Any], bytes] | ChannelClosed] = queue.Queue()

    def next(self, deadline: float) -> tuple[dict[str, Any], bytes] | None:
        """The next response, or None when `deadline` (monotonic) passes first."""
        try:
            item = self.inbox.get(timeout=max(deadline - time.monotonic(), 0.0))
        except queue.Empty:
            return None
        if isinstance(item, ChannelClosed):
            raise item
        return item

    def send(self, op: str, payload: bytes = b"") -> None:
        """A follow-up frame for this request (a copy's `data` and `end`)."""
        self._channel.send({"id": self.id, "op": op}, payload)

    def done(self) -> None:
        self._channel.forget(self.id)


class ResidentChannel:
    """A sealed request/response channel to one container's resident exec server."""

    def __init__(self, sock: socket.socket, response: Any, codec: Codec, container_id: str) -> None:
        self._sock = sock
        self._response = response
        self._codec = codec
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()
        self._calls: dict[int, Call] = {}
        self._ids = itertools.count(1)
        self._closed: ChannelClosed | None = None
        self._raw = bytearray()
        """Bytes read from the socket, not yet taken apart."""
        self._buf = bytearray()
        """The server's stdout, out of the engine's frames, not yet read as frames."""
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self.server_pid = 0
        """The server's pid inside the container (0 until it answered)."""
        self._ready: Call | None = None
        self._reader = threading.Thread(
            target=self._read_loop, name=f"sandbox-channel-{container_id[:12]}", daemon=True
        )
        self._reader.start()

    @classmethod
    def open(cls, client: docker.DockerClient, container_id: str) -> ResidentChannel | None:
        """Attach to the container's server and hand it a key (None if the engine refuses);
        `wait_ready` then tells whether a server answered."""
        try:
            response = client.api.attach_socket(
                container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
        except (docker.errors.APIError, requests.exceptions.RequestException):
            return None
        sock: socket.socket = getattr(response, "_sock", response)
        sock.settimeout(None)
        key = secrets.token_bytes(32)
        codec = host_codec(key)
        channel = cls(sock, response, codec, container_id)
        try:
            channel._ready = channel.call_raw(lambda: hello(codec, key), rid=0)
        except ChannelClosed:
            channel.close()
            return None
        return channel

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> bool:
        """Whether the server answered the hello as a server would (an image without
        python3, or a server that could not start, does not)."""
        ready, self._ready = self._ready, None
        if ready is None:
            return self.server_pid > 0
        try:
            answer = ready.next(time.monotonic() + timeout_s)
        except ChannelClosed:
            answer = None
        finally:
            ready.done()
        if answer is None or answer[0].get("op") != "ready":
            return False
        self.server_pid = int(answer[0].get("pid") or 0)
        return self.server_pid > 0

    # -- requests -------------------------------------------------------------------------

    def call(self, header: dict[str, Any], payload: bytes = b"") -> Call:
        """Send a request; its responses arrive on the returned `Call` (`done()` it after)."""
        with self._lock:
            rid = next(self._ids)
        return self.call_raw(lambda: self._codec.seal({**header, "id": rid}, payload), rid=rid)

    def call_raw(self, frame: Any, *, rid: int) -> Call:
        request = Call(self, rid)
        with self._lock:
            if self._closed is not None:
                raise self._closed
            self._calls[rid] = request
        try:
            self._write(frame)
        except ChannelClosed:
            self.forget(rid)
            raise
        return request

    def send(self, header: dict[str, Any], payload: bytes = b"") -> None:
        self._write(lambda: self._codec.seal(header, payload))

    def _write(self, frame: Any) -> None:
        # Sealing and writing under one lock: the server checks the frames' order.
        with self._write_lock:
            if self._closed is not None:
                raise self._closed
            try:
                self._sock.sendall(frame())
            except OSError as exc:
                raise self._end(f"writing to the channel failed: {exc}") from exc

    def forget(self, rid: int) -> None:
        with self._lock:
            self._calls.pop(rid, None)

    @property
    def alive(self) -> bool:
        return self._closed is None

    @property
    def stderr_tail(self) -> str:
        """The last of what the server wrote to stderr (why it stopped, when it says)."""
        return b"".join(self._stderr).decode("utf-8", "replace").strip()

    # -- reading --------------------------------------------------------------------------

    def _read_exact(self, size: int) -> bytes:
        """`size` bytes of the server's stdout, taken out of the engine's stream frames."""
        while len(self._buf) < size:
            header = self._recv_exact(8)
            payload = self._recv_exact(int.from_bytes(header[4:8], "big"))
            if header[0] == 2:
                self._keep_stderr(payload)
            else:
                self._buf += payload
        out = bytes(self._buf[:size])
        del self._buf[:size]
        return out

    def _recv_exact(self, size: int) -> bytes:
        while len(self._raw) < size:
            chunk = self._sock.recv(4 * CHUNK)
            if not chunk:
                raise EOFError("the stream ended")
            self._raw += chunk
        out = bytes(self._raw[:size])
        del self._raw[:size]
        return out

    def _keep_stderr(self, data: bytes) -> None:
        self._stderr.append(data)
        self._stderr_size += len(data)
        while self._stderr_size > STDERR_KEPT and len(self._stderr) > 1:
            self._stderr_size -= len(self._stderr.popleft())

    def _read_loop(self) -> None:
        try:
            while True:
                header, payload = self._codec.open(self._read_exact)
                rid = header.get("id")
                with self._lock:
                    request = self._calls.get(rid) if isinstance(rid, int) else None
                if request is not None:
                    request.inbox.put((header, payload))
        except (EOFError, OSError) as exc:
            self._end(f"the server's output ended ({exc})")
        except FrameError as exc:
            self._end(str(exc))

    def _end(self, reason: str) -> ChannelClosed:
        with self._lock:
            if self._closed is None:
                self._closed = ChannelClosed(reason)
            closed = self._closed
            calls = list(self._calls.values())
            self._calls.clear()
        for request in calls:
            request.inbox.put(closed)
        return closed

    def close(self) -> None:
        """Close the socket and wait for the reader thread. Safe to call twice."""
        self._end("the channel was closed")
        sock = self._sock
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
        with contextlib.suppress(OSError):
            self._response.close()
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout=5)
