"""`queue_position`: each queued mission's place in the queue, in the API and on the pages."""

from __future__ import annotations

import re

import pytest
from litestar.testing import TestClient

from loopwright.app.server import create_app
from loopwright.config import Settings
from loopwright.missions.result import MissionResult
from loopwright.request import MissionRequest
from loopwright.store.repository import Store


def create(store: Store, n: int) -> str:
    request = MissionRequest(
        trigger="check_run",
        repo="acme/app",
        clone_url="https://github.com/acme/app.git",
        head_sha=f"{n:040x}",
        check_name="tests",
        installation_id=5,
    )
    mission, created = store.create_mission(request)
    assert created
    return mission.id


@pytest.fixture
def world(tmp_path):
    app = create_app(Settings.from_env({"LOOPWRIGHT_DATA_DIR": str(tmp_path)}), mode="local")
    with TestClient(app) as client:
        store: Store = app.state.store
        done, running, first, second, third = (create(store, n) for n in range(1, 6))
        assert store.mark_running(done)
        store.mark_finished(MissionResult(done, "verified"))
        assert store.mark_running(running)
        yield client, store, {"done": done, "running": running, 1: first, 2: second, 3: third}


def test_the_api_numbers_three_queued_missions_and_no_other(world):
    client, store, ids = world
    listed = {m["id"]: m["queue_position"] for m in client.get("/api/missions").json()}
    assert listed == {ids["done"]: None, ids["running"]: None, ids[1]: 1, ids[2]: 2, ids[3]: 3}
    for key in ("done", "running", 1, 2, 3):
        one = client.get(f"/api/missions/{ids[key]}").json()
        assert one["queue_position"] == (key if isinstance(key, int) else None), key
    # The first one starts: the others move up.
    assert store.mark_running(ids[1])
    assert client.get(f"/api/missions/{ids[3]}").json()["queue_position"] == 2
    assert client.get(f"/api/missions/{ids[1]}").json()["queue_position"] is None


def test_the_pages_show_queued_position_n_while_queued(world):
    client, _, ids = world
    page = client.get(f"/missions/{ids[2]}").text
    assert _text(page, "status-box") == "queued, position 2"
    running = client.get(f"/missions/{ids['running']}").text
    assert re.search(r'id="queue-position" hidden', running)
    listing = client.get("/").text
    rows = {
        mission_id: _text(row, "td")
        for mission_id, row in re.findall(r'<tr data-id="(\w+)">(.*?)</tr>', listing, re.S)
    }
    assert rows[ids[3]] == "queued, position 3"
    assert rows[ids[1]] == "queued, position 1"
    assert rows[ids["running"]] == "running"


def _text(html: str, opening: str) -> str:
    """The text of the first element whose opening tag contains `opening`, tags removed."""
    start = html.index(opening)
    end = html.index("</td>" if opening == "td" else "</span></span>", start)
    inner = html[html.index(">", start) + 1 : end]
    return re.sub(r"<[^>]+>", "", inner).strip()
