"""Live streams: mission events fanned out through Litestar channels and served as SSE.

`LiveHub` owns the channels plugin. Missions run on worker threads (or in the CLI's main
thread), so `LiveHub.sink` hands each event to the event loop thread-safely. The in-memory
backend fans out within one process and carries the events themselves; the backend shared
by every server and worker on a queue (loopwright/app/fanout.py) carries references,
`{"mission": id, "seq": n}`, and a stream reads the events they name from the store.

A mission stream never trusts the channel alone. It subscribes first, then replays the
event log from the store, then forwards live events, dropping any sequence number it has
already sent and filling any hole from the store; an idle stream also reads the store on
every poll, so a lost notification only delays an event. So a reconnect with
`Last-Event-ID` resumes without gaps or duplicates, whichever process published the events.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from litestar import Request, get
from litestar.channels import ChannelsPlugin, Subscriber
from litestar.channels.backends.memory import MemoryChannelsBackend
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery
from litestar.response import ServerSentEvent, ServerSentEventMessage

from loopwright.app.api import (
    Viewer,
    queue_positions_of,
    require_token,
    still_signed_in,
    visible_mission,
    visible_missions,
)
from loopwright.app.params import (
    check_repo_filter,
    check_status_filter,
    clamp_cursor,
    parse_cursor,
)
from loopwright.events import Event, EventSink
from loopwright.store.models import ACTIVE_STATUSES, Mission
from loopwright.store.repository import Store

MISSIONS_CHANNEL = "missions"
"""Carries a mission id whenever a mission's summary (stage, cost, status) may have moved."""
SUMMARY_EVENTS = frozenset(
    {"stage", "model_call", "escalation", "done", "error", "delivery"}
    | {"approval_requested", "decision"}  # pair mode: waiting, and running again
)
ENDING_EVENTS = frozenset({"done", "error", "delivery"})


def mission_channel(mission_id: str) -> str:
    return f"mission:{mission_id}"


@dataclass(frozen=True)
class StreamTiming:
    """How streams pace themselves; tests and the benchmark shorten these."""

    ping_s: float = 15.0
    """A keep-alive comment after this long without a message (proxies drop idle streams)."""
    poll_s: float = 2.0
    """How often an idle stream checks the store for the end of its mission or new rows."""
    max_stream_s: float = 600.0
    """A stream closes after this long and the browser reconnects with `Last-Event-ID`:
    connections get recycled behind proxies and load balancers, and resuming is cheap."""
    retry_ms: int = 1000
    """The reconnect delay EventSource is told to use."""
    list_min_interval_s: float = 0.5
    """The missions list re-reads the store at most this often per client."""
    auth_check_s: float = 10.0
    """How often an open stream checks that its caller is still signed in: a session signed
    out (on any server) or expired ends its streams within this long."""


class _Timeout:
    """What `LiveFeed.next` returns when nothing arrived in time."""


TIMEOUT = _Timeout()


class LiveFeed:
    """One channels subscription that can be waited on with a timeout.

    Litestar's public way to read a `Subscriber` is `iter_events()`, which blocks; cancelling
    a wait on it would end the generator. So one task forwards its events into a queue of
    our own, which can be waited on with a timeout and drained, and which ends with None once
    the plugin lets the subscriber go (on unsubscribe it ends `iter_events()`).
    """

    def __init__(self, subscriber: Subscriber) -> None:
        self.subscriber = subscriber
        self._inbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._pump = asyncio.get_running_loop().create_task(self._forward())

    async def _forward(self) -> None:
        try:
            async for item in self.subscriber.iter_events():
                self._inbox.put_nowait(item)
        finally:
            self._inbox.put_nowait(None)

    @property
    def released(self) -> bool:
        """True once the plugin no longer feeds this subscriber."""
        return self._pump.done()

    async def next(self, timeout: float) -> bytes | _Timeout | None:
        """The next message, None once unsubscribed, or TIMEOUT."""
        with anyio.move_on_after(max(timeout, 0.0)):
            return await self._inbox.get()
        return TIMEOUT

    def drain(self) -> bool:
        """Drop every message waiting now; False if one of them was the end of the stream."""
        while not self._inbox.empty():
            if self._inbox.get_nowait() is None:
                return False
        return True

    async def wait_released(self) -> None:
        """Wait for the forwarding task to end (after the plugin's unsubscribe)."""
        await asyncio.wait({self._pump})


class LiveHub:
    """The channels plugin plus the event loop it lives on, for publishing from threads."""

    def __init__(self, plugin: ChannelsPlugin | None = None, *, references: bool = False) -> None:
        """`references`: publish `{"mission", "seq"}` instead of the event, for a backend
        shared between processes (every process reads the events from the one store)."""
        self.channels = plugin or ChannelsPlugin(
            backend=MemoryChannelsBackend(), arbitrary_channels_allowed=True
        )
        self.references = references
        self._loop: asyncio.AbstractEventLoop | None = None
        self._publishing = False
        self._feeds: set[LiveFeed] = set()
        self.streams_open = 0
        """Mission and list streams being served right now (for tests and /healthz-style
        checks: a closed tab must bring it back down)."""

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Remember the server's loop; called by the lifespan once the loop runs."""
        self._loop = loop
        self._publishing = True

    async def unbind(self) -> None:
        """Stop publishing, on the loop, before the plugin stops: the events already handed
        to the loop are published first; one handed over later stays in the store only."""
        self._loop = None
        try:
            await asyncio.sleep(0)  # the loop runs the callbacks already queued before this task
        finally:
            self._publishing = False  # also when the shutdown cancels this wait

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The server's event loop while it runs."""
        return self._loop

    def publish_event(self, event: Event) -> None:
        """Publish from any thread. Before the server runs (or after it stopped) events are
        only in the store, which is where every stream starts anyway."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if self.references:
            data = json.dumps({"mission": event.mission, "seq": event.seq}).encode()
        else:
            data = event.to_json().encode()
        notify = event.type in SUMMARY_EVENTS
        try:
            loop.call_soon_threadsafe(self._publish, data, event.mission, notify)
        except RuntimeError:
            return  # the loop closed between the check and the call

    def _publish(self, data: bytes, mission_id: str, notify: bool) -> None:
        # On the loop. One handed over as `unbind` ran would reach a plugin that is stopping,
        # where a publish raises or breaks the plugin's shutdown: it is dropped.
        if not self._publishing:
            return
        self.channels.publish(data, mission_channel(mission_id))
        if notify:
            self.channels.publish(mission_id.encode(), MISSIONS_CHANNEL)

    def sink(self, mission_id: str) -> EventSink:
        """An `EventBus` sink publishing the mission's events to its channel."""

        def sink(event: Event) -> None:
            if event.mission == mission_id:
                self.publish_event(event)

        return sink

    def sinks(self, mission_id: str) -> list[EventSink]:
        """The mission's sinks on this hub (what `open_runtime`'s `extra_sinks` takes)."""
        return [self.sink(mission_id)]

    def subscriber_count(self) -> int:
        """Subscriptions the channels plugin still feeds: one per open stream, gone once the
        plugin has let the subscriber go."""
        self._feeds = {feed for feed in self._feeds if not feed.released}
        return len(self._feeds)

    async def subscribe(self, channel: str) -> LiveFeed:
        feed = LiveFeed(await self.channels.subscribe(channel))
        self._feeds.add(feed)
        return feed

    async def unsubscribe(self, feed: LiveFeed) -> None:
        # Shielded: this runs while the disconnected response's scope is being cancelled.
        with anyio.CancelScope(shield=True):
            await self.channels.unsubscribe(feed.subscriber)
            await feed.wait_released()
            self._feeds.discard(feed)


def sse_event(event: dict[str, Any]) -> ServerSentEventMessage:
    return ServerSentEventMessage(
        data=json.dumps(event, ensure_ascii=False, separators=(",", ":")),
        id=int(event["seq"]),
        event="event",
    )


def mission_summary(
    mission: Mission, now: float | None = None, positions: dict[str, int] | None = None
) -> dict[str, Any]:
    """What the list page and the mission header show: no request body, no patch.
    `positions` (`Store.queue_positions`) gives a queued mission its `queue_position`."""
    started = mission.started_at or mission.created_at
    end = mission.finished_at.timestamp() if mission.finished_at else (now or time.time())
    return {
        "id": mission.id,
        "status": mission.status,
        "kind": mission.kind,
        "trigger": mission.trigger,
        "repo": mission.repo,
        "pr_number": mission.pr_number,
        "stage": mission.stage,
        "tier_reached": mission.tier_reached,
        "cost_usd": round(mission.cost_usd or 0.0, 6),
        "message": mission.message,
        "pr_url": mission.pr_url,
        "check_run_id": mission.check_run_id,
        "created_at": mission.created_at.isoformat(),
        "finished_at": mission.finished_at.isoformat() if mission.finished_at else None,
        "duration_s": round(max(end - started.timestamp(), 0.0), 1),
        "active": mission.status in ACTIVE_STATUSES,
        "queue_position": (positions or {}).get(mission.id) if mission.status == "queued" else None,
    }


class SignedIn:
    """Whether a stream's caller is still signed in, asked at most every `auth_check_s`."""

    def __init__(self, check: Callable[[], Awaitable[bool]], every_s: float) -> None:
        self._check = check
        self._every_s = every_s
        self._checked = time.monotonic()

    async def still(self) -> bool:
        if time.monotonic() - self._checked < self._every_s:
            return True
        self._checked = time.monotonic()
        return await self._check()


async def mission_events(
    store: Store,
    hub: LiveHub,
    mission_id: str,
    after: int,
    timing: StreamTiming,
    signed_in: SignedIn | None = None,
) -> AsyncIterator[ServerSentEventMessage]:
    """Every event of the mission with a sequence number above `after`, exactly once, in
    order; live until the mission ends (then an `end` message), `max_stream_s` passes, or
    the caller is signed out (`signed_in`)."""
    feed = await hub.subscribe(mission_channel(mission_id))
    hub.streams_open += 1
    try:
        yield ServerSentEventMessage(comment="loopwright", retry=timing.retry_ms, data=None)
        last = after
        started = time.monotonic()
        last_sent = started
        # The status is read before the log, so once it is final the log read after it is
        # complete: every writer stores its events before it marks the mission finished.
        finished = await _finished(store, mission_id)
        for event in await _events_after(store, mission_id, last):
            last = int(event["seq"])
            yield sse_event(event)
        if finished:
            yield await _end(store, mission_id)
            return
        wait = timing.poll_s
        while time.monotonic() - started < timing.max_stream_s:
            item = await feed.next(min(wait, timing.ping_s, timing.auth_check_s))
            if item is None:
                return  # unsubscribed: the server is shutting down
            if signed_in is not None and not await signed_in.still():
                return
            if isinstance(item, _Timeout):
                # Status first, then the log (see above). The read also delivers what a
                # lost notification (a backend restarting) did not announce.
                finished = await _finished(store, mission_id)
                for event in await _events_after(store, mission_id, last):
                    last = int(event["seq"])
                    last_sent = time.monotonic()
                    yield sse_event(event)
                if finished:
                    yield await _end(store, mission_id)
                    return
                if time.monotonic() - last_sent >= timing.ping_s:
                    last_sent = time.monotonic()
                    yield ServerSentEventMessage(comment="ping", data=None)
                wait = timing.poll_s
                continue
            message = json.loads(item)
            seq = int(message["seq"])
            if seq <= last:
                continue  # already sent
            if "type" in message and seq == last + 1:
                events = [message]
            else:
                # A reference (the event is in the store, not on the bus) or a hole (a
                # message lost between processes): the store has everything up to `seq`,
                # and whatever came after it, which the next references will find sent.
                events = await _events_after(store, mission_id, last)
            for event in events:
                last = int(event["seq"])
                last_sent = time.monotonic()
                yield sse_event(event)
            # After the last events the runner marks the mission finished; look soon.
            ending = bool(events) and events[-1].get("type") in ENDING_EVENTS
            wait = 0.2 if ending else timing.poll_s
    finally:
        hub.streams_open -= 1
        await hub.unsubscribe(feed)


async def _events_after(store: Store, mission_id: str, seq: int) -> list[dict[str, Any]]:
    return await anyio.to_thread.run_sync(store.events_after, mission_id, seq)


async def _finished(store: Store, mission_id: str) -> bool:
    mission = await anyio.to_thread.run_sync(store.get_mission, mission_id)
    return mission is None or mission.status not in ACTIVE_STATUSES


async def _end(store: Store, mission_id: str) -> ServerSentEventMessage:
    mission = await anyio.to_thread.run_sync(store.get_mission, mission_id)
    data = mission_summary(mission) if mission is not None else {"id": mission_id}
    return ServerSentEventMessage(event="end", data=json.dumps(data))


async def mission_list(
    store: Store,
    hub: LiveHub,
    read: Callable[[], list[dict[str, Any]]],
    timing: StreamTiming,
    signed_in: SignedIn | None = None,
) -> AsyncIterator[ServerSentEventMessage]:
    """The missions list as `missions` messages: at once, then whenever it changes, until
    `max_stream_s` passes or the caller is signed out (`signed_in`).

    Woken by any mission's summary events and, for changes that are not events (queued,
    claimed, finished), by polling the store every `poll_s`.
    """
    feed = await hub.subscribe(MISSIONS_CHANNEL)
    hub.streams_open += 1
    try:
        yield ServerSentEventMessage(comment="loopwright", retry=timing.retry_ms, data=None)
        started = time.monotonic()
        previous: str | None = None
        last_sent = started
        while time.monotonic() - started < timing.max_stream_s:
            if signed_in is not None and not await signed_in.still():
                return
            rows = await anyio.to_thread.run_sync(read)
            body = json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
            # Durations of running missions tick; compare without them.
            fingerprint = json.dumps([{**r, "duration_s": None} for r in rows])
            if fingerprint != previous:
                previous = fingerprint
                last_sent = time.monotonic()
                yield ServerSentEventMessage(event="missions", data=body)
            elif time.monotonic() - last_sent >= timing.ping_s:
                last_sent = time.monotonic()
                yield ServerSentEventMessage(comment="ping", data=None)
            item = await feed.next(min(timing.poll_s, timing.auth_check_s))
            if item is None:
                return
            if not isinstance(item, _Timeout):
                # Coalesce a burst of notifications into one read.
                await anyio.sleep(timing.list_min_interval_s)
                if not feed.drain():
                    return
    finally:
        hub.streams_open -= 1
        await hub.unsubscribe(feed)


def _after(request: Request[Any, Any, Any], after: int | None) -> int:
    """The resume point: `Last-Event-ID` when it is a number, else `?after=`, else 0; clamped
    to what the store can hold (past the end means nothing newer, negative means all)."""
    cursor = parse_cursor(request.headers.get("last-event-id"))
    if cursor is not None:
        return cursor
    return clamp_cursor(after) if after is not None else 0


@get(
    "/missions/{mission_id:str}/events",
    guards=[require_token],
    summary="Mission events (Server-Sent Events)",
)
async def mission_event_stream(
    request: Request[Any, Any, Any],
    store: NamedDependency[Store],
    hub: NamedDependency[LiveHub],
    timing: NamedDependency[StreamTiming],
    viewer: NamedDependency[Viewer],
    mission_id: FromPath[str],
    after: FromQuery[int | None] = None,
) -> ServerSentEvent:
    """Each event as an SSE message with `id:` = its sequence number. Resumes after
    `Last-Event-ID` (or `?after=N`); ends with an `end` message once the mission is over."""
    await anyio.to_thread.run_sync(visible_mission, store, viewer, mission_id)
    signed_in = SignedIn(lambda: still_signed_in(request), timing.auth_check_s)
    return ServerSentEvent(
        mission_events(store, hub, mission_id, _after(request, after), timing, signed_in),
        headers={"X-Accel-Buffering": "no"},
    )


@get("/missions/stream", guards=[require_token], summary="Missions list (Server-Sent Events)")
async def mission_list_stream(
    request: Request[Any, Any, Any],
    store: NamedDependency[Store],
    hub: NamedDependency[LiveHub],
    timing: NamedDependency[StreamTiming],
    viewer: NamedDependency[Viewer],
    status: FromQuery[str | None] = None,
    repo: FromQuery[str | None] = None,
    limit: FromQuery[int] = 100,
) -> ServerSentEvent:
    """The missions list (newest first, optionally filtered) whenever it changes; a GitHub
    session sees only the missions of repositories its user can read."""
    cap = min(max(limit, 1), 500)
    status, repo = check_status_filter(status), check_repo_filter(repo)

    def read() -> list[dict[str, Any]]:
        now = time.time()
        missions = visible_missions(store, viewer, status or None, repo or None, cap)
        positions = queue_positions_of(store, missions)
        return [mission_summary(m, now, positions) for m in missions]

    signed_in = SignedIn(lambda: still_signed_in(request), timing.auth_check_s)
    return ServerSentEvent(
        mission_list(store, hub, read, timing, signed_in), headers={"X-Accel-Buffering": "no"}
    )
