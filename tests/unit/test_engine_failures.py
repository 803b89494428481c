"""An engine that does not answer in time, or is not there, is a `SandboxError` that says
which, from every engine call of the sandbox: never docker-py's raw `requests` exception,
which a mission's clean-up (`close_all` keeps going past a `SandboxError` only) and the
pool's refill would not survive."""

from __future__ import annotations

import contextlib
import json
import socketserver
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import docker
import pytest

from loopwright.sandbox.base import SandboxError
from loopwright.sandbox.docker.engine import remove_container
from loopwright.sandbox.docker.reaper import reap_orphans, reap_volumes

READ_TIMEOUT_S = 1


class _Stalling(BaseHTTPRequestHandler):
    """An engine that takes every request and answers none before the test ends."""

    protocol_version = "HTTP/1.1"
    release: threading.Event

    def _stall(self) -> None:
        self.release.wait(30)

    do_GET = do_POST = do_DELETE = _stall

    def log_message(self, format: str, *args: object) -> None:
        pass


class _ListsThenStalls(_Stalling):
    """An engine that lists one mission volume, then answers nothing more."""

    def do_GET(self) -> None:
        if not self.path.startswith("/v1.41/volumes"):
            return self._stall()
        body = json.dumps({"Volumes": [{"Name": "loopwright-ws-0123"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        return None


@contextlib.contextmanager
def engine_on(tmp_path: Path, kind: type[_Stalling]) -> Iterator[docker.DockerClient]:
    path = tmp_path / "engine.sock"
    release = threading.Event()
    handler = type("Handler", (kind,), {"release": release})
    server = socketserver.ThreadingUnixStreamServer(str(path), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # An explicit API version: docker-py asks the engine for none before the first call.
    client = docker.DockerClient(base_url=f"unix://{path}", version="1.41", timeout=READ_TIMEOUT_S)
    try:
        yield client
    finally:
        release.set()
        client.close()
        server.shutdown()
        server.server_close()


@pytest.fixture
def stalling_engine(tmp_path: Path) -> Iterator[docker.DockerClient]:
    with engine_on(tmp_path, _Stalling) as client:
        yield client


def test_a_removal_the_engine_does_not_answer_says_it_did_not_answer_in_time(
    stalling_engine: docker.DockerClient,
) -> None:
    with pytest.raises(SandboxError) as raised:
        remove_container(stalling_engine, "0123456789abcdef", "loopwright-ws-0123")
    message = str(raised.value)
    assert message.startswith("the Docker engine did not answer in time")
    assert "overloaded or stuck" in message and "unreachable" not in message


def test_the_reapers_say_so_too(stalling_engine: docker.DockerClient) -> None:
    for reap in (
        lambda: reap_orphans(stalling_engine, set(), instance="x", idle=set(), claimed={}),
        lambda: reap_volumes(stalling_engine),
    ):
        with pytest.raises(SandboxError, match="did not answer in time"):
            reap()


def test_a_volume_removal_the_engine_does_not_answer_says_so(tmp_path: Path) -> None:
    with (
        engine_on(tmp_path, _ListsThenStalls) as client,
        pytest.raises(SandboxError, match=r"^the Docker engine did not answer in time"),
    ):
        reap_volumes(client)


def test_an_engine_that_is_not_there_is_still_called_unreachable(tmp_path: Path) -> None:
    # A socket path of the test's own where nothing listens.
    client = docker.DockerClient(
        base_url=f"unix://{tmp_path}/none.sock", version="1.41", timeout=READ_TIMEOUT_S
    )
    try:
        with pytest.raises(SandboxError) as raised:
            remove_container(client, "0123456789abcdef", None)
    finally:
        client.close()
    assert str(raised.value).startswith("the Docker engine is unreachable")
    assert "DOCKER_HOST" in str(raised.value)
