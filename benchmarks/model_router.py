"""One loopback OpenAI-compatible endpoint in front of several model servers.

A llama.cpp server serves one model, while a mission escalating from a small to a larger
model talks to one `LOOPWRIGHT_MODEL_BASE_URL`; the router forwards each request to the
server of the model the request names, streaming the answer through unchanged.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import sys
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class ModelRouter:
    """`routes` maps a model id to the base URL (ending in `/v1`) of the server serving it.
    A context manager; `.base_url` is the router's own `/v1` URL on loopback."""

    def __init__(self, routes: Mapping[str, str], timeout_s: float = 900.0) -> None:
        if not routes:
            raise ValueError("a model router needs at least one model to route to")
        for model, url in routes.items():
            parts = urlsplit(url)
            if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "localhost"):
                raise ValueError(f"{model}: {url!r} is not an http URL on loopback")
        self.routes = dict(routes)
        self.timeout_s = timeout_s
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the model router is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ModelRouter:
        router = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def do_GET(self) -> None:
                # /v1/models: the first upstream answers for all of them.
                router.forward(self, next(iter(router.routes.values())), b"")

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    model = json.loads(body or b"{}").get("model")
                except (ValueError, AttributeError):
                    model = None
                upstream = router.routes.get(model) if isinstance(model, str) else None
                if upstream is None:
                    known = ", ".join(sorted(router.routes))
                    router.reply_error(self, 404, f"unknown model {model!r}; served: {known}")
                    return
                router.forward(self, upstream, body)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                # A client killed at its run cap resets its connection; that is expected
                # and says nothing about the benchmark, so it prints no traceback.
                if not isinstance(sys.exc_info()[1], ConnectionError):
                    super().handle_error(request, client_address)

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def reply_error(self, handler: BaseHTTPRequestHandler, code: int, message: str) -> None:
        data = json.dumps({"error": {"message": message, "type": "invalid_request_error"}})
        handler.send_response(code)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data.encode())

    def forward(self, handler: BaseHTTPRequestHandler, upstream: str, body: bytes) -> None:
        base = urlsplit(upstream)
        path = handler.path
        if path.startswith("/v1"):
            path = base.path.rstrip("/") + path[len("/v1") :]
        conn = http.client.HTTPConnection(base.hostname or "127.0.0.1", base.port, self.timeout_s)
        try:
            headers = {
                k: v for k, v in handler.headers.items() if k.lower() not in _HOP_HEADERS | {"host"}
            }
            conn.request(handler.command, path, body=body or None, headers=headers)
            response = conn.getresponse()
        except OSError as exc:
            conn.close()
            # The client may have gone too (a run stopped at its cap); nothing to answer then.
            with contextlib.suppress(OSError):
                self.reply_error(handler, 502, f"model server {upstream} did not answer: {exc}")
            return
        try:
            handler.send_response(response.status)
            for key, value in response.getheaders():
                if key.lower() not in _HOP_HEADERS:
                    handler.send_header(key, value)
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            while chunk := response.read1(65536):
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                handler.wfile.flush()
            handler.wfile.write(b"0\r\n\r\n")
        except OSError:
            handler.close_connection = True
        finally:
            conn.close()
