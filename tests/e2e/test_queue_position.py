"""Queued missions show their place in the queue in a real browser, and it moves live."""

from __future__ import annotations

import pytest

from tests.e2e.scripted_mission import Player, create_mission, fix_mission_script

pytestmark = pytest.mark.browser


def test_queued_missions_show_their_position_and_it_moves_as_the_queue_runs(page, live_server):
    server = live_server()
    first, second, third = (
        create_mission(server.store, sha=f"{n}abc", running=False) for n in range(3)
    )
    page.goto(f"{server.url}/missions/{second}")
    assert page.locator(".status-box").inner_text() == "queued, position 2"

    assert server.store.mark_running(first)  # the queue takes the oldest
    page.wait_for_function(
        "() => document.querySelector('.status-box').textContent === 'queued, position 1'",
        timeout=10_000,
    )

    page.goto(server.url + "/")
    row = page.locator(f"tr[data-id='{third}'] td[data-label='Status']")
    assert row.inner_text() == "queued, position 2"
    assert server.store.mark_running(second)
    page.wait_for_function(
        f"() => document.querySelector(\"tr[data-id='{third}'] td[data-label='Status']\")"
        ".textContent === 'queued, position 1'",
        timeout=10_000,
    )
    assert page.locator(f"tr[data-id='{first}'] td[data-label='Status']").inner_text() == (
        "running"
    )

    # Once it starts, the mission page says so and drops the position.
    page.goto(f"{server.url}/missions/{third}")
    assert page.locator(".status-box").inner_text() == "queued, position 1"
    assert server.store.mark_running(third)
    player = Player(server.store, server.hub, third, fix_mission_script(None), pace_s=0)
    player.play(3)
    page.wait_for_function(
        "() => document.getElementById('status').textContent === 'running' && "
        "document.getElementById('queue-position').hidden",
        timeout=10_000,
    )
    player.play()
    player.finish()
    assert page.js_errors == []
