"""LiveFeed over a real Litestar ChannelsPlugin: timeouts, order, draining, release."""

from __future__ import annotations

import asyncio

from loopwright.app.stream import TIMEOUT, LiveHub
from loopwright.events import Event
from tests.loops import run_async


async def _published(hub: LiveHub, data: bytes, channel: str) -> None:
    await hub.channels.wait_published(data, channel)


def test_next_times_out_then_delivers_in_order() -> None:
    async def scenario() -> None:
        hub = LiveHub()
        async with hub.channels:
            feed = await hub.subscribe("c")
            assert await feed.next(0.05) is TIMEOUT
            # A timed-out wait must not lose the subscription: later messages still arrive.
            for n in range(3):
                await _published(hub, f"m{n}".encode(), "c")
            got = [await feed.next(1.0) for _ in range(3)]
            assert got == [b"m0", b"m1", b"m2"]
            assert await feed.next(0.05) is TIMEOUT
            await hub.unsubscribe(feed)

    run_async(scenario())


def test_other_channels_do_not_arrive() -> None:
    async def scenario() -> None:
        hub = LiveHub()
        async with hub.channels:
            feed = await hub.subscribe("mine")
            await _published(hub, b"elsewhere", "theirs")
            assert await feed.next(0.1) is TIMEOUT
            await hub.unsubscribe(feed)

    run_async(scenario())


def test_drain_drops_waiting_messages() -> None:
    async def scenario() -> None:
        hub = LiveHub()
        async with hub.channels:
            feed = await hub.subscribe("c")
            for n in range(5):
                await _published(hub, str(n).encode(), "c")
            await asyncio.sleep(0.1)
            assert feed.drain() is True
            assert await feed.next(0.05) is TIMEOUT
            await _published(hub, b"after", "c")
            assert await feed.next(1.0) == b"after"
            await hub.unsubscribe(feed)

    run_async(scenario())


def test_unsubscribe_ends_the_feed_and_the_count() -> None:
    async def scenario() -> None:
        hub = LiveHub()
        async with hub.channels:
            one = await hub.subscribe("c")
            two = await hub.subscribe("d")
            assert hub.subscriber_count() == 2
            # Unsubscribing through the plugin alone (not the hub) also releases the feed.
            await hub.channels.unsubscribe(two.subscriber)
            assert await two.next(1.0) is None
            assert two.released
            assert hub.subscriber_count() == 1
            await _published(hub, b"x", "c")
            await asyncio.sleep(0.05)
            await hub.unsubscribe(one)
            assert one.released
            # The end shows up after what was already waiting, and drain reports it.
            assert one.drain() is False
            assert hub.subscriber_count() == 0

    run_async(scenario())


def test_an_event_queued_as_the_server_stops_is_published_first_and_nothing_raises() -> None:
    # A mission thread's event is handed to the loop as a callback. One that ran after the
    # lifespan unbound the hub reached a plugin shutting down: publishing raised in the
    # callback or, between the plugin queue's join and its worker's `task_done`, made the
    # worker fail and with it the server's shutdown. Events queued before `unbind` are
    # published first.
    async def scenario() -> list[dict]:
        loop = asyncio.get_running_loop()
        errors: list[dict] = []
        loop.set_exception_handler(lambda _loop, context: errors.append(context))
        hub = LiveHub()
        async with hub.channels:
            hub.bind(loop)
            feed = await hub.subscribe("mission:m1")
            hub.publish_event(Event(1, 0.0, "m1", "plan", None))
            assert await feed.next(1.0) is not TIMEOUT  # bound: it is published
            hub.publish_event(Event(2, 0.0, "m1", "done", None))  # queued on the loop ...
            await hub.unbind()  # ... then the lifespan unbinds and the plugin stops
            hub.publish_event(Event(3, 0.0, "m1", "done", None))  # after: not handed over
            last = await feed.next(1.0)
            assert last is not TIMEOUT and b'"seq":2' in last  # queued before: published
            assert await feed.next(0.1) is TIMEOUT
            await hub.unsubscribe(feed)
            # A thread that read the loop just before `unbind` hands its event over after it;
            # it runs while the plugin stops, and is dropped.
            late = Event(4, 0.0, "m1", "done", None).to_json().encode()
            loop.call_soon_threadsafe(hub._publish, late, "m1", True)
        await asyncio.sleep(0.05)
        return errors

    assert run_async(scenario()) == []
