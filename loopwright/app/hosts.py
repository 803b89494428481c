"""The local dashboard answers only requests addressed to this machine by name.

A dashboard on 127.0.0.1 without a token is readable by any page the user opens if that
page's domain is re-pointed at 127.0.0.1 (DNS rebinding): the browser then sends the
attacker's host name in `Host`. Refusing every `Host` that is not a loopback name closes
that, and costs nothing for the browser tab the user opened themselves.
"""

from __future__ import annotations

from collections.abc import Callable

from litestar.enums import ScopeType
from litestar.types import (
    ASGIApp,
    HTTPResponseBodyEvent,
    HTTPResponseStartEvent,
    Receive,
    Scope,
    Send,
    WebSocketCloseEvent,
)

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
MISDIRECTED = 421


def request_host(scope: Scope) -> str | None:
    """The host name of the request's `Host` header, without port or IPv6 brackets."""
    values = [v for k, v in scope.get("headers", []) if k.lower() == b"host"]
    if len(values) != 1:
        return None  # absent or repeated: not a request a browser sends
    value = values[0].decode("latin-1").strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else None
    return value.rsplit(":", 1)[0] if ":" in value else value


def only_hosts(allowed: frozenset[str]) -> Callable[[ASGIApp], ASGIApp]:
    """ASGI middleware factory: HTTP and WebSocket requests whose `Host` is not in
    `allowed` get a 421 and reach nothing else."""

    def middleware(app: ASGIApp) -> ASGIApp:
        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            if (
                scope["type"] not in (ScopeType.HTTP, ScopeType.WEBSOCKET)
                or request_host(scope) in allowed
            ):
                await app(scope, receive, send)
                return
            if scope["type"] == ScopeType.WEBSOCKET:
                close: WebSocketCloseEvent = {
                    "type": "websocket.close",
                    "code": 1008,
                    "reason": "misdirected host",
                }
                await send(close)
                return
            body = (
                b"this dashboard answers only requests to "
                + b", ".join(sorted(h.encode() for h in allowed))
                + b"\n"
            )
            start: HTTPResponseStartEvent = {
                "type": "http.response.start",
                "status": MISDIRECTED,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"x-content-type-options", b"nosniff"),
                ],
            }
            end: HTTPResponseBodyEvent = {
                "type": "http.response.body",
                "body": body,
                "more_body": False,
            }
            await send(start)
            await send(end)

        return guarded

    return middleware
