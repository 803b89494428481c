"""The webhook route speaks ASGI itself: the refusals it makes before any check are
exchanged here message by message, as a server would exchange them."""

from __future__ import annotations

from typing import Any

from loopwright.app.webhooks import MAX_WEBHOOK_BYTES, github_webhook
from tests.loops import run_async

HANDLER = github_webhook.fn


def _scope(method: str = "POST", headers: list[tuple[bytes, bytes]] | None = None) -> Any:
    return {
        "type": "http",
        "method": method,
        "path": "/webhooks/github",
        "headers": headers or [],
        "client": ("127.0.0.1", 40000),
    }


def _exchange(scope: Any, messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """What the route sent, and how many of `messages` it asked for."""
    sent: list[dict[str, Any]] = []
    asked = 0

    async def receive() -> dict[str, Any]:
        nonlocal asked
        asked += 1
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    run_async(HANDLER(scope, receive, send))
    return sent, asked


def _headers(start: dict[str, Any]) -> dict[bytes, bytes]:
    return dict(start["headers"])


def test_only_post_is_answered_and_the_answer_says_which_method():
    sent, asked = _exchange(_scope("GET"), [])
    assert sent[0]["status"] == 405 and _headers(sent[0])[b"allow"] == b"POST"
    assert b"POST" in sent[1]["body"] and asked == 0


def test_a_declared_length_over_the_cap_is_refused_before_the_body_is_read():
    scope = _scope(headers=[(b"content-length", str(MAX_WEBHOOK_BYTES + 1).encode())])
    sent, asked = _exchange(scope, [])
    assert sent[0]["status"] == 413 and asked == 0
    assert b"25" in sent[1]["body"]


def test_a_body_without_a_length_is_counted_and_refused_once_over_the_cap():
    chunk = b"x" * (1024 * 1024)
    messages = [{"type": "http.request", "body": chunk, "more_body": True} for _ in range(26)]
    sent, asked = _exchange(_scope(), messages)
    assert sent[0]["status"] == 413
    assert asked == 26  # 25 MiB arrived, the 26th chunk went over: nothing more was read


def test_a_sender_that_hangs_up_mid_body_gets_no_answer():
    messages = [
        {"type": "http.request", "body": b'{"zen": "half', "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent, asked = _exchange(_scope(headers=[(b"content-length", b"400")]), messages)
    assert sent == [] and asked == 2


def test_a_length_of_non_ascii_digits_is_left_to_the_count_not_a_500():
    """`"²".isdigit()` is True and `int("²")` raises: such a header is not a number."""
    messages = [{"type": "http.disconnect"}]
    scope = _scope(headers=[(b"content-length", "²".encode("latin-1"))])
    sent, asked = _exchange(scope, messages)
    assert sent == [] and asked == 1


def test_a_websocket_handshake_is_not_answered_as_http():
    scope = {"type": "websocket", "path": "/webhooks/github", "headers": []}
    sent, asked = _exchange(scope, [{"type": "websocket.connect"}])
    assert sent == [] and asked == 0
