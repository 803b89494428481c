"""Live events across processes on the queue's backend (Redis pub/sub, PostgreSQL
LISTEN/NOTIFY): what a worker publishes reaches a server's SSE stream at once, through a
backend restart, and as references whose events the stream reads from the store.

The publishing side is a worker's hub (`hub_in_thread`, its own event loop); the serving
side a real uvicorn server on another loop. The streams poll the store only every 30 s
here, so an event that arrives sooner came through the backend.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis

from loopwright.app.fanout import (
    NOTIFY_CHANNEL,
    NOTIFY_LIMIT,
    PayloadTooLarge,
    PostgresNotifyBackend,
    ResilientBackend,
    hub_in_thread,
    open_fanout,
)
from loopwright.app.server import create_app, serve_in_thread
from loopwright.app.stream import LiveHub, StreamTiming, mission_channel
from loopwright.config import Settings
from loopwright.events import EventBus
from loopwright.redaction import Redactor
from loopwright.request import MissionRequest
from loopwright.store.repository import Store, open_store
from loopwright.store.saq_queue import saq_url
from tests.loops import run_async

NO_POLL = StreamTiming(ping_s=60, poll_s=30, max_stream_s=600, retry_ms=200)
LIVE_S = 10.0
"""An event is live when it arrives this soon, well before the stream's 30 s poll."""


def _settings(tmp_path: Path, queue_url: str, database_url: str | None = None) -> Settings:
    env = {"LOOPWRIGHT_DATA_DIR": str(tmp_path / "data"), "LOOPWRIGHT_QUEUE_URL": queue_url}
    if database_url is not None:
        env["LOOPWRIGHT_DATABASE_URL"] = database_url
    return Settings.from_env(env)


@pytest.fixture(params=["redis", "postgres"])
def fanout_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    if request.param == "redis":
        return _settings(tmp_path, request.getfixturevalue("redis_service").url)
    database: str = request.getfixturevalue("postgres_url")
    return _settings(tmp_path, database, database)


class SseClient:
    """One SSE connection read on a thread: messages as dicts, in arrival order."""

    def __init__(self, url: str) -> None:
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self._client = httpx.Client(timeout=httpx.Timeout(10, read=120))
        self._thread = threading.Thread(target=self._read, args=(url,), daemon=True)
        self._thread.start()

    def _read(self, url: str) -> None:
        message: dict[str, Any] = {}
        try:
            with self._client.stream("GET", url) as response:
                for line in response.iter_lines():
                    if line == "":
                        if "data" in message:
                            self.messages.put({**message, "arrived": time.time()})
                        message = {}
                    elif not line.startswith(":"):
                        key, _, value = line.partition(":")
                        message[key] = value.removeprefix(" ")
        except httpx.HTTPError:
            return

    def next_event(self, timeout: float = LIVE_S) -> dict[str, Any]:
        message = self.messages.get(timeout=timeout)
        assert message.get("event") == "event", message
        return dict(json.loads(message["data"]))

    def until_end(self, timeout: float) -> tuple[list[tuple[dict[str, Any], float]], bool]:
        """Every event up to the `end` message, each with the time it arrived; and
        whether the `end` came."""
        deadline = time.monotonic() + timeout
        events: list[tuple[dict[str, Any], float]] = []
        while time.monotonic() < deadline:
            try:
                message = self.messages.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                break
            if message.get("event") == "end":
                return events, True
            events.append((json.loads(message["data"]), float(message["arrived"])))
        return events, False

    def close(self) -> None:
        self._client.close()


@contextmanager
def served(settings: Settings, hub: LiveHub) -> Iterator[tuple[str, Store]]:
    app = create_app(settings, mode="local", timing=NO_POLL, hub=hub)
    with serve_in_thread(app) as url:
        yield url, app.state.store


def _mission(store: Store) -> str:
    request = MissionRequest(trigger="cli", repo="acme/live", clone_url="", head_sha="a")
    mission, _ = store.create_mission(request)
    store.mark_running(mission.id)
    return mission.id


def _emit(bus: EventBus, call_id: str) -> Any:
    return bus.emit("tool_result", "loop", id=call_id, tool="run_command", status="ok")


def _subscribed(hub: LiveHub, settings: Settings, mission_id: str, timeout: float = 10) -> None:
    """Wait for the stream's subscription, and on Redis for Redis to hold it (a SUBSCRIBE
    is sent without waiting for its answer: a message published before Redis read it is
    only in the store, for the stream's next poll)."""
    deadline = time.monotonic() + timeout
    while hub.subscriber_count() == 0:
        assert time.monotonic() < deadline, "the stream did not subscribe"
        time.sleep(0.05)
    url = settings.queue_url or ""
    if not url.startswith("redis://"):
        return  # PostgreSQL: the server's hub LISTENs once, at start
    with redis.Redis.from_url(url) as client:
        while not dict(client.pubsub_numsub(mission_channel(mission_id)))[
            mission_channel(mission_id).encode()
        ]:
            assert time.monotonic() < deadline, "Redis does not hold the subscription"
            time.sleep(0.05)


def test_a_workers_events_reach_a_servers_stream_live(tmp_path: Path, fanout_settings) -> None:
    settings = fanout_settings
    server_hub = open_fanout(settings)
    assert server_hub.references
    with served(settings, server_hub) as (url, store), hub_in_thread(open_fanout(settings)) as hub:
        mission_id = _mission(store)
        client = SseClient(f"{url}/missions/{mission_id}/events")
        try:
            _subscribed(server_hub, settings, mission_id)
            # The worker's own store: another connection (another process in production).
            worker_store = open_store(settings)
            bus = EventBus(
                mission_id,
                [worker_store.event_sink(mission_id), *hub.sinks(mission_id)],
                Redactor(),
            )
            for n in range(3):
                sent = bus.emit("tool_result", "loop", id=f"c{n}", tool="read_file", status="ok")
                got = client.next_event()
                assert (got["seq"], got["id"]) == (sent.seq, f"c{n}")
            worker_store.close()
        finally:
            client.close()


def test_a_huge_event_crosses_postgres_as_a_small_reference(tmp_path: Path, postgres_url) -> None:
    """NOTIFY carries less than 8000 bytes: the stream gets the 200 kB body from the store."""
    settings = _settings(tmp_path, postgres_url, postgres_url)
    server_hub = open_fanout(settings)
    with (
        psycopg.connect(saq_url(postgres_url), autocommit=True) as spy,
        served(settings, server_hub) as (url, store),
        hub_in_thread(open_fanout(settings)) as hub,
    ):
        spy.execute(f"LISTEN {NOTIFY_CHANNEL}")
        mission_id = _mission(store)
        client = SseClient(f"{url}/missions/{mission_id}/events")
        try:
            _subscribed(server_hub, settings, mission_id)
            bus = EventBus(
                mission_id, [store.event_sink(mission_id), *hub.sinks(mission_id)], Redactor()
            )
            output = "collected 4 items\n" * 12_000
            bus.emit("tool_result", "loop", id="c1", tool="run_command", status="ok", output=output)
            got = client.next_event()
            assert got["output"] == output
        finally:
            client.close()
        payloads = [n.payload for n in spy.notifies(timeout=1.0)]
    assert payloads, "nothing was notified"
    for payload in payloads:
        assert len(payload.encode()) < NOTIFY_LIMIT
        assert "collected" not in payload
    references = [json.loads(json.loads(p)["data"]) for p in payloads if mission_id in p]
    assert {"mission": mission_id, "seq": 1} in references


def test_postgres_backend_refuses_a_payload_notify_cannot_carry(postgres_url) -> None:
    async def scenario() -> None:
        backend = PostgresNotifyBackend(saq_url(postgres_url))
        await backend.on_startup()
        try:
            with pytest.raises(PayloadTooLarge, match="reference"):
                await backend.publish(b"x" * NOTIFY_LIMIT, ["mission:m"])
            await backend.publish(b"small", ["mission:m"])  # the connection still works
        finally:
            await backend.on_shutdown()

    run_async(scenario())


def test_events_still_arrive_after_redis_restarts(tmp_path: Path, redis_service) -> None:
    settings = _settings(tmp_path, redis_service.url)
    server_hub = open_fanout(settings)
    with served(settings, server_hub) as (url, store), hub_in_thread(open_fanout(settings)) as hub:
        mission_id = _mission(store)
        client = SseClient(f"{url}/missions/{mission_id}/events")
        try:
            _subscribed(server_hub, settings, mission_id)
            bus = EventBus(
                mission_id, [store.event_sink(mission_id), *hub.sinks(mission_id)], Redactor()
            )
            before = _emit(bus, "before")
            assert client.next_event()["seq"] == before.seq
            redis_service.restart(down_s=1.0)
            # Events published while either side reconnects are only in the store; the
            # first one published once both are back brings them along.
            deadline = time.monotonic() + 30
            received: list[dict[str, Any]] = []
            while not received and time.monotonic() < deadline:
                _emit(bus, "after")
                try:
                    received.append(client.next_event(timeout=0.5))
                except queue.Empty:
                    continue
            assert received, "no event arrived after the restart"
            while True:
                try:
                    received.append(client.next_event(timeout=1.0))
                except queue.Empty:
                    break
            last = _emit(bus, "last")
            received.append(client.next_event())
            seqs = [e["seq"] for e in received]
            assert seqs == list(range(2, last.seq + 1)), seqs
        finally:
            client.close()
    backend = server_hub.channels._backend
    assert isinstance(backend, ResilientBackend)
    assert backend.reconnects >= 1


def test_a_lost_notification_only_delays_the_event(tmp_path: Path) -> None:
    """An event stored but never announced (its notification lost) reaches an idle
    stream at its next poll of the store, long before the mission ends."""
    settings = Settings.from_env({"LOOPWRIGHT_DATA_DIR": str(tmp_path / "data")})
    timing = StreamTiming(ping_s=60, poll_s=0.3, max_stream_s=600, retry_ms=200)
    app = create_app(settings, mode="local", timing=timing)
    with serve_in_thread(app) as url:
        store: Store = app.state.store
        mission_id = _mission(store)
        client = SseClient(f"{url}/missions/{mission_id}/events")
        try:
            _subscribed(app.state.hub, settings, mission_id)
            bus = EventBus(mission_id, [store.event_sink(mission_id)], Redactor())
            sent = _emit(bus, "unannounced")
            got = client.next_event(timeout=5)
            assert (got["seq"], got["id"]) == (sent.seq, "unannounced")
            assert store.get_mission(mission_id).status == "running"
        finally:
            client.close()


def test_a_server_started_while_redis_is_down_streams_once_it_is_up(
    tmp_path: Path, redis_service
) -> None:
    settings = _settings(tmp_path, redis_service.url)
    redis_service.stop()
    server_hub = open_fanout(settings)
    with served(settings, server_hub) as (url, store), hub_in_thread(open_fanout(settings)) as hub:
        mission_id = _mission(store)
        client = SseClient(f"{url}/missions/{mission_id}/events")
        try:
            bus = EventBus(
                mission_id, [store.event_sink(mission_id), *hub.sinks(mission_id)], Redactor()
            )
            _emit(bus, "while-down")  # dropped by the bus; the store has it
            redis_service.start()
            _subscribed(server_hub, settings, mission_id, timeout=30)
            deadline = time.monotonic() + 30
            received: list[dict[str, Any]] = []
            while not received and time.monotonic() < deadline:
                _emit(bus, "up")
                try:
                    received.append(client.next_event(timeout=0.5))
                except queue.Empty:
                    continue
            assert received, "no event arrived once Redis was up"
            assert received[0]["id"] == "while-down"
        finally:
            client.close()
