"""Live events across processes: the channels backend every server and worker on one queue
shares, and a wrapper that survives the backend's restarts.

With `LOOPWRIGHT_QUEUE_URL` the servers only enqueue and `loopwright worker` processes run
the missions, so a worker's events must reach every server's live streams. They travel on
the queue's own backend: Redis pub/sub, or PostgreSQL LISTEN/NOTIFY. What travels is a
reference, `{"mission": id, "seq": n}`, never the event: a NOTIFY payload holds at most
8000 bytes, an event can be far larger, and the store, which every process shares, already
has it. A stream reads the events from the store when a reference arrives (`LiveHub` with
`references=True`; see `mission_events` in stream.py).

Litestar's channels plugin reads and writes its backend from two background tasks, and one
error from the backend (Redis restarted, PostgreSQL failed over) ends them for good: no
stream would see a live event again. `ResilientBackend` stands between the plugin and the
real backend: a lost connection is logged, the real backend is opened again with backoff
and resubscribed, and a publish that fails is dropped (the stream's poll of the store
delivers that event a moment later).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator
from typing import Any

import psycopg
import structlog
from litestar.channels import ChannelsPlugin
from litestar.channels.backends.base import ChannelsBackend
from litestar.channels.backends.redis import RedisChannelsPubSubBackend
from redis import asyncio as aioredis

from loopwright.app.stream import LiveHub
from loopwright.config import Settings
from loopwright.redaction import Redactor
from loopwright.store.saq_queue import saq_url, where

log = structlog.get_logger("loopwright.fanout")

NOTIFY_CHANNEL = "loopwright_live"
"""The one PostgreSQL notification channel; the Litestar channel travels in the payload."""
NOTIFY_LIMIT = 8000
"""PostgreSQL refuses a NOTIFY payload of this many bytes or more."""
CONNECT_TIMEOUT_S = 5.0
PUBLISH_TIMEOUT_S = 5.0
RETRY_FIRST_S = 0.2
RETRY_MAX_S = 5.0


class PayloadTooLarge(ValueError):
    """A message that PostgreSQL would refuse to carry (`NOTIFY_LIMIT`)."""


class PostgresNotifyBackend(ChannelsBackend):
    """Channels on PostgreSQL LISTEN/NOTIFY over two long-lived connections.

    Litestar's `PsycoPgChannelsBackend` opens a connection for every publish (a mission
    emits hundreds of events, each then a TCP and authentication round trip on the one
    publishing task) and LISTENs on one PostgreSQL channel per Litestar channel, stopping
    its listener for every subscribe. Here every message goes to one PostgreSQL channel,
    `NOTIFY_CHANNEL`, with its Litestar channel in the payload: the listener LISTENs once
    and filters by the channels subscribed here, and one connection publishes them all.
    """

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._channels: set[str] = set()
        self._listener: psycopg.AsyncConnection[Any] | None = None
        self._publisher: psycopg.AsyncConnection[Any] | None = None

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        return await psycopg.AsyncConnection.connect(
            self._dsn,
            autocommit=True,
            connect_timeout=int(CONNECT_TIMEOUT_S),
            # A peer that vanished without closing the socket is noticed within a minute.
            keepalives=1,
            keepalives_idle=20,
            keepalives_interval=5,
            keepalives_count=3,
        )

    async def on_startup(self) -> None:
        self._listener = await self._connect()
        await self._listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
        self._publisher = await self._connect()

    async def on_shutdown(self) -> None:
        for conn in (self._listener, self._publisher):
            if conn is not None:
                await conn.close()
        self._listener = self._publisher = None

    async def publish(self, data: bytes, channels: Iterable[str]) -> None:
        assert self._publisher is not None, "publish before on_startup"
        for channel in channels:
            payload = json.dumps({"channel": channel, "data": data.decode()})
            size = len(payload.encode())
            if size >= NOTIFY_LIMIT:
                raise PayloadTooLarge(
                    f"a message of {size} bytes for {channel!r}: NOTIFY carries less than "
                    f"{NOTIFY_LIMIT}; publish a reference to what the store holds instead"
                )
            await self._publisher.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, payload))

    async def subscribe(self, channels: Iterable[str]) -> None:
        self._channels.update(channels)

    async def unsubscribe(self, channels: Iterable[str]) -> None:
        self._channels.difference_update(channels)

    async def stream_events(self) -> AsyncGenerator[tuple[str, bytes], None]:
        assert self._listener is not None, "stream_events before on_startup"
        async for notify in self._listener.notifies():
            try:
                message = json.loads(notify.payload)
                channel, data = str(message["channel"]), str(message["data"])
            except (ValueError, KeyError, TypeError):
                log.warning("live events: a notification not sent by Loopwright was ignored")
                continue
            if channel in self._channels:
                yield channel, data.encode()

    async def get_history(self, channel: str, limit: int | None = None) -> list[bytes]:
        raise NotImplementedError("live events keep no history; the store has every event")


class _RedisPubSub(RedisChannelsPubSubBackend):
    """Litestar's Redis pub/sub backend that checks Redis answers when it starts (so a
    reconnect backs off while Redis is down) and closes its client when shut down."""

    async def on_startup(self) -> None:
        await self._redis.ping()  # type: ignore[misc]

    async def on_shutdown(self) -> None:
        try:
            await super().on_shutdown()
        finally:
            await self._redis.aclose()


def _redis_backend(url: str) -> ChannelsBackend:
    # No retries in the client: a lost connection surfaces at once and ResilientBackend
    # opens a fresh client and resubscribes (a pub/sub connection's subscriptions are gone
    # with it). The health check pings an idle subscription, so a dead Redis is noticed.
    client = aioredis.from_url(
        url,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_timeout=PUBLISH_TIMEOUT_S,
        health_check_interval=10,
        retry_on_timeout=False,
    )
    return _RedisPubSub(redis=client)


def _stop_if_cancelled() -> None:
    """Raise if this task was asked to stop and something swallowed the request.

    In Python 3.11 `asyncio.wait_for` (which redis-py calls inside) loses a cancel that
    arrives as the call it waits on finishes: the task is marked cancelling but runs on.
    The channels plugin cancels its stream task once, at shutdown, and then waits for it,
    so a lost cancel would hold the shutdown for ever; the mark stays, so honour it here.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class _Lost:
    """What the pump hands on when the real backend's stream ended."""

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


class ResilientBackend(ChannelsBackend):
    """A channels backend that reconnects: `open_backend()` makes a fresh real backend
    whenever the last one failed; `where` names it in logs (never with a password)."""

    def __init__(
        self, open_backend: Callable[[], ChannelsBackend], where: str, redactor: Redactor
    ) -> None:
        self._open_backend = open_backend
        self._where = where
        self._redactor = redactor
        self._inner: ChannelsBackend | None = None
        self._channels: set[str] = set()
        self._lock = asyncio.Lock()
        self._broken: asyncio.Event | None = None
        self._publish_failing = False
        self.reconnects = 0
        """How many times a lost backend was opened again (for tests and logs)."""

    def _error(self, exc: BaseException) -> str:
        return self._redactor.text(f"{type(exc).__name__}: {exc}")

    async def on_startup(self) -> None:
        self._broken = asyncio.Event()
        # A backend down at start is not fatal: the stream task keeps trying to reach it.
        with contextlib.suppress(Exception):
            await self._connect()

    async def on_shutdown(self) -> None:
        async with self._lock:
            inner, self._inner = self._inner, None
        if inner is not None:
            await self._close(inner)

    async def _connect(self) -> ChannelsBackend:
        """Open the real backend and subscribe it to every channel wanted here."""
        async with self._lock:
            if self._inner is not None:
                return self._inner
            inner = self._open_backend()
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    await inner.on_startup()
                if self._channels:
                    await inner.subscribe(set(self._channels))
            except Exception as exc:
                log.warning(
                    f"live events: cannot reach {self._where}; trying again",
                    error=self._error(exc),
                )
                await self._close(inner)
                raise
            except asyncio.CancelledError:
                # The hub closes while this opens: what was opened (for PostgreSQL, the
                # listener's connection) is closed, not left to the garbage collector.
                await self._close(inner)
                raise
            self._inner = inner
            assert self._broken is not None
            self._broken.clear()
            return inner

    async def _close(self, inner: ChannelsBackend) -> None:
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                await inner.on_shutdown()
        except Exception as exc:  # noqa: BLE001 - closing a backend that is already gone
            log.debug("live events: closing a lost backend failed", error=self._error(exc))

    async def _drop(self, inner: ChannelsBackend) -> None:
        """Forget `inner` (once), so the next use opens a fresh one."""
        async with self._lock:
            if self._inner is not inner:
                return
            self._inner = None
        if self._broken is not None:
            self._broken.set()
        await self._close(inner)

    async def _connected(self) -> ChannelsBackend:
        delay = RETRY_FIRST_S
        while True:
            _stop_if_cancelled()
            inner = self._inner
            if inner is not None:
                return inner
            try:
                inner = await self._connect()
            except Exception:  # noqa: BLE001 - logged by _connect; the backend may come back
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            _stop_if_cancelled()
            return inner

    async def publish(self, data: bytes, channels: Iterable[str]) -> None:
        """Publish, or log and drop: never raise, or the plugin's publishing task ends."""
        inner = self._inner
        if inner is None:
            self._publish_failed(None)
            return
        try:
            async with asyncio.timeout(PUBLISH_TIMEOUT_S):
                await inner.publish(data, channels)
        except PayloadTooLarge as exc:
            log.error("live event not published", error=str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - logged; the publishing task must go on
            self._publish_failed(exc)
            await self._drop(inner)
            return
        if self._publish_failing:
            self._publish_failing = False
            log.info(f"live events: publishing to {self._where} again")

    def _publish_failed(self, exc: BaseException | None) -> None:
        if self._publish_failing:
            return
        self._publish_failing = True
        log.warning(
            f"live events not published to {self._where} until it is back; streams read "
            "them from the store meanwhile",
            error=self._error(exc) if exc is not None else "not connected",
        )

    async def subscribe(self, channels: Iterable[str]) -> None:
        wanted = set(channels)
        self._channels |= wanted
        inner = self._inner
        if inner is None:
            return  # the reconnect subscribes to every wanted channel
        try:
            await inner.subscribe(wanted)
        except Exception as exc:  # noqa: BLE001 - logged; the reconnect subscribes again
            log.warning(f"live events: subscribing at {self._where} failed", error=self._error(exc))
            await self._drop(inner)

    async def unsubscribe(self, channels: Iterable[str]) -> None:
        gone = set(channels)
        self._channels -= gone
        inner = self._inner
        if inner is None:
            return
        try:
            await inner.unsubscribe(gone)
        except Exception as exc:  # noqa: BLE001 - logged; the reconnect leaves it out
            log.warning(
                f"live events: unsubscribing at {self._where} failed", error=self._error(exc)
            )
            await self._drop(inner)

    async def stream_events(self) -> AsyncGenerator[tuple[str, bytes], None]:
        """The real backend's messages, across any number of reconnects; ends only when
        cancelled (the plugin's shutdown)."""
        while True:
            inner = await self._connected()
            out: asyncio.Queue[tuple[str, bytes] | _Lost] = asyncio.Queue()
            pump = asyncio.create_task(self._pump(inner, out))
            try:
                while True:
                    item = await out.get()
                    if isinstance(item, _Lost):
                        break
                    yield item
            finally:
                pump.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pump
            if item.error is not None:
                log.warning(
                    f"live events: lost the connection to {self._where}; reconnecting",
                    error=self._error(item.error),
                )
            await self._drop(inner)
            self.reconnects += 1

    async def _pump(
        self, inner: ChannelsBackend, out: asyncio.Queue[tuple[str, bytes] | _Lost]
    ) -> None:
        """Forward `inner`'s stream until it fails or someone else found it broken (a
        failed publish or subscribe: the stream itself may wait forever on a dead one)."""
        assert self._broken is not None
        broken = asyncio.create_task(self._broken.wait())
        events = inner.stream_events()
        step: asyncio.Future[tuple[str, bytes]] | None = None
        try:
            while True:
                step = asyncio.ensure_future(anext(events))
                done, _ = await asyncio.wait({step, broken}, return_when=asyncio.FIRST_COMPLETED)
                if step not in done:
                    out.put_nowait(_Lost(None))
                    return
                out.put_nowait(step.result())
        except StopAsyncIteration:
            out.put_nowait(_Lost(ConnectionError("the backend's stream ended")))
        # Whatever the real backend raised, the live streams must go on: it is logged by
        # stream_events and the backend opened again.
        except Exception as exc:  # noqa: BLE001 - see above
            out.put_nowait(_Lost(exc))
        finally:
            broken.cancel()
            if step is not None and not step.done():
                step.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await step
            with contextlib.suppress(Exception):
                await events.aclose()

    async def get_history(self, channel: str, limit: int | None = None) -> list[bytes]:
        raise NotImplementedError("live events keep no history; the store has every event")


def fanout_backend(url: str, redactor: Redactor) -> ResilientBackend:
    """The shared backend for a queue URL: Redis pub/sub for `redis://`, LISTEN/NOTIFY for
    `postgresql://` (a SQLAlchemy driver suffix is dropped)."""
    plain = saq_url(url)
    if plain.startswith(("redis://", "rediss://")):
        return ResilientBackend(lambda: _redis_backend(plain), where(url), redactor)
    return ResilientBackend(lambda: PostgresNotifyBackend(plain), where(url), redactor)


def open_fanout(settings: Settings) -> LiveHub:
    """The live hub of a server or worker: with `settings.queue_url`, on the queue's
    backend and carrying references; without, in this process's memory. Nothing connects
    until the hub's channels start (`async with hub.channels`, or `hub_in_thread`)."""
    if settings.queue_url is None:
        return LiveHub()
    backend = fanout_backend(settings.queue_url, Redactor(settings.secrets()))
    plugin = ChannelsPlugin(backend=backend, arbitrary_channels_allowed=True)
    return LiveHub(plugin, references=True)


@contextlib.contextmanager
def hub_in_thread(hub: LiveHub, *, timeout_s: float = 30.0) -> Iterator[LiveHub]:
    """Run `hub`'s channels on an event loop of their own, in a thread, for a process
    without a server (`loopwright worker`): its sinks publish from the mission threads."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="loopwright-live", daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(hub.channels.__aenter__(), loop).result(timeout_s)
        hub.bind(loop)
        try:
            yield hub
        finally:
            asyncio.run_coroutine_threadsafe(hub.unbind(), loop).result(timeout_s)
            # Waits for the events still queued for publishing (a failing publish drops).
            asyncio.run_coroutine_threadsafe(hub.channels.__aexit__(None, None, None), loop).result(
                timeout_s
            )
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        if not loop.is_running():
            loop.close()
