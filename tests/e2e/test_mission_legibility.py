"""The mission page of a real scripted mission: what each step did, in words, and the fix.

The mission runs for real (`legible_mission`: `loopwright fix` in-process, the scripted
model over HTTP, a local sandbox); its event log and result are then played into a live
server the way an App mission writes them, and Chromium reads the page.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from loopwright.missions.result import MissionResult
from tests.e2e.conftest import screenshot_path
from tests.e2e.scripted_mission import Player, create_mission
from tests.scenarios import FIX_NEW

# One worker runs every test that shares the `legible_mission` run (see scripts/test.sh).
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("legible_mission")]


@dataclasses.dataclass
class RealMission(Player):
    """Plays a recorded CLI mission and then stores its real result (with the patch)."""

    result: dict[str, Any] = dataclasses.field(default_factory=dict)

    def finish(self) -> None:
        known = {f.name for f in dataclasses.fields(MissionResult)}
        values = {k: v for k, v in self.result.items() if k in known}
        self.store.mark_finished(MissionResult(**{**values, "mission": self.mission_id}))


def test_mission_page_says_what_each_step_did_and_shows_the_fix(
    page, live_server, legible_mission, tmp_path
):
    run = legible_mission
    assert run.exit_code == 0, run.stderr
    script = [
        (
            e["type"],
            e["stage"],
            {k: v for k, v in e.items() if k not in {"seq", "ts", "mission", "type", "stage"}},
        )
        for e in run.events
    ]

    server = live_server()
    mission_id = create_mission(server.store)
    player = RealMission(server.store, server.hub, mission_id, script, pace_s=0.01)
    player.result = run.result
    page.goto(f"{server.url}/missions/{mission_id}")
    page.wait_for_selector("#live:not([hidden])")
    player.start()
    player.join()
    page.wait_for_selector("#mission[data-ended='true']", timeout=15_000)

    # Each tool call says what it did, in the words the terminal prints.
    rows = page.eval_on_selector_all(
        "#timeline li.tool", "els => els.map(e => e.querySelector('.what').textContent)"
    )
    assert rows == [e["summary"] for e in run.of_type("tool_call")]
    assert "Updated the plan (3 items)" in rows
    assert "Read tests/test_totals.py:1-40" in rows
    assert "Edited invoice/totals.py (+1 \u22121)" in rows
    assert "Ran `python -m pytest -q`" in rows
    assert page.locator("#plan li").count() == 3
    assert page.locator("#plan li.done").count() == 1

    # Arguments are pretty JSON, decoded once.
    read = page.locator("#timeline li.tool", has_text="Read tests/test_totals.py:1-40")
    read.locator("details.args > summary").click()
    assert read.locator("pre.args").inner_text() == (
        '{\n  "path": "tests/test_totals.py",\n  "start_line": 1,\n  "end_line": 40\n}'
    )
    broken = page.locator("#timeline li.tool", has_text="arguments that are not JSON")
    broken.locator("details.args > summary").click()
    assert broken.locator("pre.args").inner_text() == '{"path": "invoice/'  # as the model sent it
    assert "not valid JSON" in broken.locator("details.args").inner_text()

    # The Changes panel: the patch per file, coloured, the added line and its diffstat.
    page.wait_for_selector("#changes-card:not([hidden]) .diff-file")
    assert page.locator("#changes .diff-path").all_inner_texts() == ["invoice/totals.py"]
    assert page.locator("#changes-stat").inner_text() == "1 file · +1 \u22121"
    added = page.locator("#changes tr.add td.code")
    assert added.count() == 1
    assert added.inner_text() == "+" + FIX_NEW.rstrip("\n")
    assert added.locator("span.tok-mi", has_text="100").count() == 1  # the number is coloured
    assert page.locator("#changes tr.del td.code").count() == 1
    patch = page.request.get(f"{server.url}/api/missions/{mission_id}/patch")
    assert patch.ok and patch.headers["content-type"].startswith("text/x-diff")
    assert patch.text() == run.result["patch"]
    assert page.js_errors == []
    page.locator("#changes-card").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot_path("mission-page.png", tmp_path)))
