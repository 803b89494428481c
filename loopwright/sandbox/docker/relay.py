"""A verification service's port, carried to a loopback port on the host over `docker exec`."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import TYPE_CHECKING, Any

import docker.errors

from loopwright.sandbox.docker.engine import ENGINE_FAILURES, SERVICE_TOKEN_VAR, USER, script

if TYPE_CHECKING:
    from loopwright.sandbox.docker.container import DockerSandbox


class PortRelay:
    """Relays loopback connections on the host to a port inside the sandbox, over `docker exec`.

    Each accepted connection gets its own exec running a tiny relay (stdin/stdout to the
    port), so the container needs no network at all and nothing else can reach the app.
    """

    def __init__(self, sandbox: DockerSandbox, port: int, token: str) -> None:
        self._sandbox = sandbox
        self._port = port
        self._token = token
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="sandbox-relay", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # the listener was closed
            threading.Thread(
                target=self._relay, args=(client,), name="sandbox-relay-conn", daemon=True
            ).start()

    def _relay(self, client: socket.socket) -> None:
        api = self._sandbox.client.api
        try:
            exec_id = api.exec_create(
                self._sandbox.container_id,
                ["python3", "-I", "-c", script("relay.py"), str(self._port)],
                stdin=True,
                stdout=True,
                stderr=False,
                user=USER,
                environment={SERVICE_TOKEN_VAR: self._token},
            )["Id"]
            response: Any = api.exec_start(exec_id, socket=True)
        except (docker.errors.APIError, *ENGINE_FAILURES):
            client.close()
            return
        upstream: socket.socket = getattr(response, "_sock", response)
        upstream.settimeout(None)
        if not self._track(client, upstream):
            return
        threading.Thread(
            target=_copy_until_eof, args=(client, upstream), name="sandbox-relay-up", daemon=True
        ).start()
        try:
            # Docker frames an exec's output (8-byte header: stream, 0, 0, 0, size).
            while header := _read_exact(upstream, 8):
                payload = _read_exact(upstream, int.from_bytes(header[4:8], "big"))
                if payload is None:
                    break
                client.sendall(payload)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                self._forget(sock)

    def _track(self, *socks: socket.socket) -> bool:
        with self._lock:
            if self._closed:
                for sock in socks:
                    sock.close()
                return False
            self._open.update(socks)
        return True

    def _forget(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)
        _close_socket(sock)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            socks = list(self._open)
            self._open.clear()
        self._listener.close()
        for sock in socks:
            _close_socket(sock)


def _read_exact(sock: socket.socket, size: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < size:
        chunk = sock.recv(size - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _copy_until_eof(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        return


def _close_socket(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
