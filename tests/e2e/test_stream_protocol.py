"""The SSE protocol without a browser: resume points, duplicates, holes, the end."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx

from loopwright.events import Event
from tests.e2e.scripted_mission import Player, create_mission, fix_mission_script


def read_stream(url: str, headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every message until the server closes the stream."""
    messages: list[dict[str, Any]] = []
    with httpx.stream("GET", url, headers=headers or {}, timeout=15) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        fields: dict[str, Any] = {}
        for line in answer.iter_lines():
            if not line:
                if fields:
                    messages.append(fields)
                fields = {}
                continue
            name, _, value = line.partition(": ")
            fields[name] = value
    return messages


def event_ids(messages: list[dict[str, Any]]) -> list[int]:
    return [int(m["id"]) for m in messages if m.get("event") == "event"]


def test_last_event_id_and_after_resume_a_finished_mission(live_server):
    server = live_server()
    mission_id = create_mission(server.store)
    script = fix_mission_script(None)
    player = Player(server.store, server.hub, mission_id, script, pace_s=0)
    player.play()
    player.finish()
    url = f"{server.url}/missions/{mission_id}/events"
    everything = read_stream(url)
    assert event_ids(everything) == list(range(1, len(script) + 1))
    assert everything[-1]["event"] == "end"
    assert json.loads(everything[-1]["data"])["status"] == "verified"
    assert event_ids(read_stream(url, {"Last-Event-ID": "20"})) == list(range(21, len(script) + 1))
    assert event_ids(read_stream(url + "?after=40")) == list(range(41, len(script) + 1))
    # The header wins over the query (it is what a browser sends when it reconnects).
    assert event_ids(read_stream(url + "?after=5", {"Last-Event-ID": "45"}))[0] == 46
    assert httpx.get(f"{server.url}/missions/nope/events").status_code == 404


def test_live_duplicates_are_dropped_and_holes_filled_from_the_store(live_server):
    server = live_server()
    mission_id = create_mission(server.store)
    script = fix_mission_script(None)[:6]
    player = Player(server.store, server.hub, mission_id, script, pace_s=0)
    player.play(2)

    def publish_again(played: int) -> None:
        # A second publisher (another process, a retry) repeats every event on the channel.
        stored = server.store.events_after(mission_id, played - 1, limit=1)[0]
        server.hub.publish_event(Event.from_dict(stored))

    def play_rest() -> None:
        time.sleep(0.5)  # the stream below is subscribed and has replayed 1-2 by now
        player.on_event = publish_again
        player.play(1)
        # Event 4 is stored but never reaches the channel (a lost message).
        player.bus.sinks = player.bus.sinks[:1]
        player.on_event = None
        player.play(1)
        player.bus.sinks.append(server.hub.sink(mission_id))
        player.on_event = publish_again
        player.play()
        player.finish()

    threading.Thread(target=play_rest, daemon=True).start()
    messages = read_stream(f"{server.url}/missions/{mission_id}/events")
    assert event_ids(messages) == list(range(1, len(script) + 1))
    assert server.hub.subscriber_count() == 0


def test_missions_stream_sends_the_list(live_server):
    server = live_server()
    mission_id = create_mission(server.store)
    with httpx.stream("GET", f"{server.url}/missions/stream", timeout=10) as answer:
        for line in answer.iter_lines():
            if line.startswith("data: ["):
                rows = json.loads(line[6:])
                break
    assert [r["id"] for r in rows] == [mission_id]
    assert rows[0]["status"] == "running"
    assert "request" not in rows[0]


def test_out_of_range_cursors_are_clamped_over_a_real_socket(live_server):
    """SECURITY 45: Last-Event-ID / ?after= past 64 bits, negative or not a number: never a
    500 or a broken stream; past the end resumes after everything, negative from the start."""
    server = live_server()
    mission_id = create_mission(server.store)
    script = fix_mission_script(None)
    player = Player(server.store, server.hub, mission_id, script, pace_s=0)
    player.play()
    player.finish()
    url = f"{server.url}/missions/{mission_id}/events"
    everything = list(range(1, len(script) + 1))
    for cursor in (str(2**64), str(10**30), "9" * 5000):
        assert event_ids(read_stream(url, {"Last-Event-ID": cursor})) == []
        assert event_ids(read_stream(f"{url}?after={cursor[:40]}")) == []
    for cursor in ("-1", str(-(2**70)), "abc", "", "1e3", "0x10"):
        assert event_ids(read_stream(url, {"Last-Event-ID": cursor})) == everything
    assert event_ids(read_stream(f"{url}?after=-5")) == everything
    messages = read_stream(url, {"Last-Event-ID": str(2**64)})
    assert messages[-1]["event"] == "end"
    api = f"{server.url}/api/missions/{mission_id}/events"
    assert httpx.get(api, params={"after": 2**64}).json() == []
    assert len(httpx.get(api, params={"after": -1}).json()) == len(script)
    assert httpx.get(api, params={"after": "abc"}).status_code == 400
    assert httpx.get(f"{url}?after=abc").status_code == 400
