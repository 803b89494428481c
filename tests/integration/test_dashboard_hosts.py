"""The local dashboard on loopback answers only requests addressed to a loopback name, so a
page re-pointed at 127.0.0.1 by DNS rebinding cannot read the stored missions."""

from __future__ import annotations

import socket

import httpx
import pytest

from loopwright.app.hosts import LOOPBACK_HOSTS, request_host
from loopwright.app.server import create_app, serve_in_thread
from loopwright.config import Settings


@pytest.fixture
def dashboard(tmp_path):
    settings = Settings.from_env({"LOOPWRIGHT_DATA_DIR": str(tmp_path / "data")})
    app = create_app(settings, mode="local", allowed_hosts=LOOPBACK_HOSTS)
    with serve_in_thread(app, "127.0.0.1", 0) as url:
        yield url


@pytest.mark.parametrize(
    "host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST", "[::1]:{port}"]
)
def test_loopback_names_reach_the_dashboard(dashboard, host):
    port = dashboard.rsplit(":", 1)[1]
    answer = httpx.get(f"{dashboard}/api/missions", headers={"Host": host.format(port=port)})
    assert answer.status_code == 200
    assert answer.json() == []


@pytest.mark.parametrize(
    "host",
    [
        "rebind.attacker.example:{port}",
        "rebind.attacker.example",
        "127.0.0.1.attacker.example:{port}",
        "localhost.attacker.example",
        "[::1.attacker]:{port}",
    ],
)
def test_any_other_host_name_is_refused_before_any_route(dashboard, host):
    port = dashboard.rsplit(":", 1)[1]
    for path in ("/api/missions", "/", "/metrics", "/schema", "/missions/abc/events"):
        answer = httpx.get(f"{dashboard}{path}", headers={"Host": host.format(port=port)})
        assert answer.status_code == 421, (path, answer.text)
        assert "this dashboard answers only requests to" in answer.text
        assert "[]" not in answer.text


def test_a_request_without_a_host_header_is_refused(dashboard):
    host, port = dashboard.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as conn:
        conn.sendall(b"GET /api/missions HTTP/1.0\r\n\r\n")
        reply = conn.recv(4096)
    assert reply.startswith(b"HTTP/1.1 421"), reply[:80]


def test_request_host_strips_port_and_brackets_and_rejects_repeats():
    def scope(*values: bytes):
        return {"type": "http", "headers": [(b"host", v) for v in values]}

    assert request_host(scope(b"127.0.0.1:8000")) == "127.0.0.1"
    assert request_host(scope(b"[::1]:8000")) == "::1"
    assert request_host(scope(b"Example.COM")) == "example.com"
    assert request_host(scope()) is None
    assert request_host(scope(b"localhost", b"evil.example")) is None
