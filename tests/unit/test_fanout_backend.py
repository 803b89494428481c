"""ResilientBackend under Litestar's real ChannelsPlugin, over a backend that fails the way
a restarted Redis or PostgreSQL does: its stream raises, its publish raises. The plugin's
publishing and subscribing tasks must live on, and messages flow again once reopened."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterable

import pytest
from litestar.channels import ChannelsPlugin
from litestar.channels.backends.base import ChannelsBackend

from loopwright.app.fanout import ResilientBackend
from loopwright.app.stream import TIMEOUT, LiveHub
from loopwright.redaction import Redactor
from tests.loops import run_async

PASSWORD = "pw-in-the-error-9f2c"


class Bus:
    """The shared medium: what one backend publishes, every open one receives."""

    def __init__(self) -> None:
        self.backends: list[FlakyBackend] = []
        self.up = True
        self.opened = 0
        self.gate: asyncio.Future[None] | None = None
        """When set, opening a backend waits for it (a slow answer)."""
        self.gate_in_wait_for = False
        """Wait for the gate through `asyncio.wait_for`, as redis-py does for every send."""
        self.at_gate = asyncio.Event()
        self.started = 0
        self.closed = 0


class FlakyBackend(ChannelsBackend):
    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.channels: set[str] = set()
        self.inbox: asyncio.Queue[tuple[str, bytes] | Exception] = asyncio.Queue()

    async def on_startup(self) -> None:
        self.bus.started += 1
        if not self.bus.up:
            raise ConnectionRefusedError(f"connection refused (password {PASSWORD})")
        gate = self.bus.gate
        if gate is not None:
            self.bus.at_gate.set()
            if self.bus.gate_in_wait_for:
                await asyncio.wait_for(gate, 30)
            else:
                await gate
        self.bus.opened += 1
        self.bus.backends.append(self)

    async def on_shutdown(self) -> None:
        self.bus.closed += 1
        if self in self.bus.backends:
            self.bus.backends.remove(self)

    async def publish(self, data: bytes, channels: Iterable[str]) -> None:
        if not self.bus.up or self not in self.bus.backends:
            raise ConnectionResetError("connection reset by peer")
        for backend in self.bus.backends:
            for channel in channels:
                if channel in backend.channels:
                    backend.inbox.put_nowait((channel, data))

    async def subscribe(self, channels: Iterable[str]) -> None:
        self.channels.update(channels)

    async def unsubscribe(self, channels: Iterable[str]) -> None:
        self.channels.difference_update(channels)

    async def stream_events(self) -> AsyncGenerator[tuple[str, bytes], None]:
        while True:
            item = await self.inbox.get()
            if isinstance(item, Exception):
                raise item
            yield item

    async def get_history(self, channel: str, limit: int | None = None) -> list[bytes]:
        return []

    def lose(self) -> None:
        """The server went away: every open connection fails."""
        self.inbox.put_nowait(ConnectionResetError("connection closed by server"))


def _hub(bus: Bus) -> tuple[LiveHub, ResilientBackend]:
    backend = ResilientBackend(lambda: FlakyBackend(bus), "flaky://bus:1", Redactor([PASSWORD]))
    return LiveHub(ChannelsPlugin(backend=backend, arbitrary_channels_allowed=True)), backend


def test_streams_survive_a_lost_backend_and_resubscribe() -> None:
    async def scenario() -> None:
        bus = Bus()
        server, server_backend = _hub(bus)
        worker, _ = _hub(bus)
        async with server.channels, worker.channels:
            feed = await server.subscribe("mission:m")
            await worker.channels.wait_published(b"one", "mission:m")
            assert await feed.next(2.0) == b"one"
            bus.up = False
            for backend in list(bus.backends):
                backend.lose()
            bus.backends.clear()
            # While the backend is down, a publish is dropped, never raised.
            await worker.channels.wait_published(b"lost", "mission:m")
            worker.channels.publish(b"lost too", "mission:m")
            assert await feed.next(0.3) is TIMEOUT
            bus.up = True
            # Both sides reopen on their own and the stream's subscription comes back.
            for _ in range(100):
                worker.channels.publish(b"two", "mission:m")
                item = await feed.next(0.1)
                if item is not TIMEOUT:
                    break
            assert item == b"two"
            assert server_backend.reconnects >= 1
            assert bus.opened >= 4
            await server.unsubscribe(feed)

    run_async(scenario())


def test_a_backend_down_at_start_is_opened_later() -> None:
    async def scenario() -> None:
        bus = Bus()
        bus.up = False
        server, _ = _hub(bus)
        worker, _ = _hub(bus)
        async with server.channels, worker.channels:
            feed = await server.subscribe("mission:m")
            bus.up = True
            for _ in range(100):
                worker.channels.publish(b"hello", "mission:m")
                item = await feed.next(0.1)
                if item is not TIMEOUT:
                    break
            assert item == b"hello"
            await server.unsubscribe(feed)

    run_async(scenario())


def test_the_error_logged_never_holds_the_password(capsys) -> None:
    async def scenario() -> None:
        bus = Bus()
        bus.up = False
        server, _ = _hub(bus)
        async with server.channels:
            await asyncio.sleep(0.3)

    run_async(scenario())
    logged = capsys.readouterr()
    text = logged.out + logged.err
    assert "flaky://bus:1" in text
    assert PASSWORD not in text


@pytest.mark.parametrize("inside", ["plain", "wait_for"])
def test_closing_as_a_reopen_succeeds_ends_the_hub(inside: str) -> None:
    """The plugin's shutdown cancels the stream task once. Here the cancel lands in the
    very turn the backend's reopen finishes. In Python 3.11 `asyncio.wait_for` (ours then,
    and redis-py's inside its client) drops such a cancel, and the shutdown used to wait
    for the stream task for ever."""

    async def scenario() -> None:
        bus = Bus()
        bus.up = False
        hub, _ = _hub(bus)
        await hub.channels.__aenter__()
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        bus.gate, bus.gate_in_wait_for = gate, inside == "wait_for"
        bus.up = True
        await asyncio.wait_for(bus.at_gate.wait(), 10)  # the stream task's retry is opening
        gate.set_result(None)
        # Nothing between the gate's answer and the shutdown's cancel yields to the loop.
        async with asyncio.timeout(5) as limit:
            # (The plugin suppresses the CancelledError this limit raises in it.)
            await hub.channels.__aexit__(None, None, None)
        assert not limit.expired(), "the shutdown waited for the stream task"

    run_async(scenario())


def test_a_backend_still_opening_when_the_hub_closes_is_closed() -> None:
    """For PostgreSQL, an open backend holds the listener's connection."""

    async def scenario() -> None:
        bus = Bus()
        bus.up = False
        hub, _ = _hub(bus)
        async with hub.channels:
            bus.gate = asyncio.get_running_loop().create_future()  # never answers
            bus.up = True
            await asyncio.wait_for(bus.at_gate.wait(), 10)  # the stream task's retry
        # The refused open at start, and the one the shutdown interrupted: each closed.
        assert (bus.started, bus.closed, bus.opened) == (2, 2, 0)

    run_async(scenario())
