"""Pair mode in the live view, in a real browser: a mission of the App (fake GitHub, scripted
model, local sandbox) asks for a command that needs the network, and the mission page shows
the request and decides it (Approve, Reject with a reason, guidance at any time); a page
that cannot decide shows the request read-only, and a request decided elsewhere first
says so."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from loopwright.app.server import create_app
from tests.conftest import SUITE_PATH, step, tool
from tests.e2e.conftest import FAST
from tests.e2e.scripted_mission import Player, create_mission, stage
from tests.integration.app_harness import World, app_world, post_webhook, uvicorn_in_thread
from tests.integration.test_pair_app import (
    PACKAGE,
    PAIR_CONFIG,
    fetch,
    request_after_steps,
    results_of,
    script,
)
from tests.scenarios import EDIT, FINISH, PLAN

pytestmark = pytest.mark.browser

TOKEN = "dash-token-for-the-pair-view"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
WAIT_MS = 60_000
ASKED_AT, EXPIRES_AT = "2026-01-01T00:00:00+00:00", "2099-01-01T00:00:00+00:00"


@pytest.fixture(autouse=True)
def venv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local sandbox runs the mission's `python -m pytest` with the test run's Python."""
    monkeypatch.setenv("PATH", f"{SUITE_PATH}:{os.environ['PATH']}")


@pytest.fixture
def package_url() -> Iterator[str]:
    """A loopback server standing in for a package index."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = PACKAGE.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/invoice-helpers"
    finally:
        server.shutdown()
        server.server_close()


class PairView:
    """The App under uvicorn, one pair mission started by a red check run, and an API
    client holding the dashboard token."""

    def __init__(self, world: World, url: str, api: httpx.Client, mission_id: str) -> None:
        self.world, self.url, self.api, self.mission_id = world, url, api, mission_id

    def mission(self) -> dict[str, Any]:
        return dict(self.api.get(f"/api/missions/{self.mission_id}").json())

    def events(self) -> list[dict[str, Any]]:
        return list(self.api.get(f"/api/missions/{self.mission_id}/events").json())

    def open(self, page: Any) -> None:
        """Sign in with the dashboard token in the browser and open the mission page."""
        page.goto(f"{self.url}/login?next=/missions/{self.mission_id}")
        page.fill("#token", TOKEN)
        page.click("form[action='/login'] button[type=submit]")
        page.wait_for_url(f"**/missions/{self.mission_id}")

    def wait_until_waiting(self, page: Any) -> dict[str, Any]:
        """The request, once the panel shows it and the store holds it pending."""
        page.wait_for_selector("#approval", state="visible", timeout=WAIT_MS)
        until = 0
        while (mission := self.mission())["pending_request"] is None:
            page.wait_for_timeout(100)
            until += 1
            assert until < 300, mission
        return dict(mission["pending_request"])

    def wait_for_end(self, page: Any) -> str:
        page.wait_for_function(
            "() => document.getElementById('mission').dataset.ended === 'true'", timeout=180_000
        )
        return str(self.mission()["status"])


@contextmanager
def pair_view(
    tmp_path: Any, steps: list[dict[str, Any]], config: str = PAIR_CONFIG
) -> Iterator[PairView]:
    env = {"LOOPWRIGHT_DASHBOARD_TOKEN": TOKEN, "LOOPWRIGHT_PAIR_EXPIRY_S": "300"}
    with (
        app_world(tmp_path, steps, config=config, env=env, serve=False) as world,
        uvicorn_in_thread(create_app(world.settings, timing=FAST)) as url,
        httpx.Client(base_url=url, headers=BEARER, timeout=10) as api,
    ):
        body = json.dumps(world.check_run_payload()).encode()
        answer = post_webhook(api, url, "check_run", body)
        assert answer.status_code == 202, answer.text
        yield PairView(world, url, api, str(answer.json()["mission"]))
        world.github.assert_no_rejections()


def test_approve_in_the_page_runs_the_command_and_the_mission_verifies(page, tmp_path, package_url):
    command = fetch(package_url)
    with pair_view(tmp_path, script(command)) as view:
        view.open(page)
        pending = view.wait_until_waiting(page)
        assert page.locator("#approval-action").inner_text() == command
        assert "no network isolation" in page.locator("#approval-why").inner_text()
        assert page.locator("#approval-network").inner_text() == (
            "Approving does not attach the network."
        )
        assert "expires at" in page.locator("#approval-expires").inner_text()
        assert page.locator("#status").inner_text() == "waiting"
        # The log says it too, the command escaped as text.
        asked = page.locator("#timeline li[data-type='approval_requested']")
        assert asked.locator("code.cmd").inner_text() == command

        page.click("#approve")
        page.wait_for_selector("#approval", state="hidden", timeout=10_000)
        decided = page.locator("#timeline li[data-type='decision']")
        decided.wait_for(timeout=10_000)
        assert decided.locator(".what").inner_text() == "approved by dashboard"
        assert view.wait_for_end(page) == "verified"
        assert page.locator("#status").inner_text() == "verified"
        assert page.locator("#guidance").is_hidden()
        (ran,) = results_of(view.events(), command)
        assert ran["exit_code"] == 0 and ran["status"] == "ok", ran
        (decision,) = [e for e in view.events() if e["type"] == "decision"]
        assert (decision["decision"], decision["id"]) == ("approve", pending["id"])
        assert PACKAGE in request_after_steps(view.world, 2)
        assert page.js_errors == []


def test_reject_with_a_reason_in_the_page_reaches_the_model(page, tmp_path, package_url):
    command = fetch(package_url)
    why = "we vendor our dependencies <b>no installs</b>"
    with pair_view(tmp_path, script(command)) as view:
        view.open(page)
        view.wait_until_waiting(page)
        # A redirect needs guidance: without it nothing is sent and the panel stays.
        page.click("#redirect")
        assert "needs guidance" in page.locator("#approval-note").inner_text()
        assert page.locator("#approval").is_visible()
        page.fill("#reject-reason", why)
        page.click("#reject")
        page.wait_for_selector("#approval", state="hidden", timeout=10_000)
        decided = page.locator("#timeline li[data-type='decision']")
        decided.wait_for(timeout=10_000)
        assert decided.locator(".what").inner_text() == "rejected by dashboard"
        assert decided.locator(".decision-text").inner_text() == why  # text, not markup
        assert view.wait_for_end(page) == "verified"
        seen = request_after_steps(view.world, 2)
        assert "Refused (rejected)" in seen and json.dumps(why)[1:-1] in seen
        assert PACKAGE not in seen
        assert [r["status"] for r in results_of(view.events(), command)] == ["refused"]
        assert page.js_errors == []


def test_guidance_sent_from_the_page_mid_loop_reaches_the_next_model_request(page, tmp_path):
    slow = step(tool("run_command", command="sleep 3"))
    steps = [step(PLAN), slow, step(EDIT), step(tool("run_command", command="python -m pytest -q")),
             step(FINISH)]  # fmt: skip
    guidance = "keep the rounding as it is"
    with pair_view(tmp_path, steps) as view:
        view.open(page)
        page.wait_for_selector("#timeline li[data-tool='run_command']", timeout=WAIT_MS)
        page.wait_for_selector("#guidance", state="visible", timeout=10_000)
        assert page.locator("#approval").is_hidden()
        page.fill("#guidance-text", guidance)
        page.click("#send-guidance")
        page.wait_for_function(
            "() => document.getElementById('pair-note').textContent.startsWith('Guidance sent')",
            timeout=10_000,
        )
        decided = page.locator("#timeline li[data-type='decision']")
        decided.wait_for(timeout=WAIT_MS)
        assert decided.locator(".what").inner_text() == "guidance from dashboard"
        assert decided.locator(".decision-text").inner_text() == guidance
        assert view.wait_for_end(page) == "verified"
        page.wait_for_selector("#guidance", state="hidden", timeout=10_000)
        assert guidance in request_after_steps(view.world, 2)
        assert guidance not in request_after_steps(view.world, 1)
        assert page.js_errors == []


def test_a_mission_without_pair_mode_offers_no_guidance(page, tmp_path):
    """Nothing would read guidance sent to it, so the page does not offer to send any."""
    slow = step(tool("run_command", command="sleep 3"))
    steps = [step(PLAN), slow, step(EDIT), step(tool("run_command", command="python -m pytest -q")),
             step(FINISH)]  # fmt: skip
    config = PAIR_CONFIG.replace("pair: true\n", "")
    with pair_view(tmp_path, steps, config=config) as view:
        view.open(page)
        page.wait_for_selector("#timeline li[data-tool='run_command']", timeout=WAIT_MS)
        assert view.mission()["status"] == "running"
        page.wait_for_timeout(1_000)  # the page has asked the server after each stage
        assert page.locator("#guidance").is_hidden()
        assert view.wait_for_end(page) == "verified"
        assert page.locator("#guidance").is_hidden()
        assert page.js_errors == []


def test_a_request_decided_elsewhere_first_is_refused_and_the_page_says_so(
    page, tmp_path, package_url
):
    """The API decides while the page's own POST is on its way (the browser holds it until
    then); the server answers 409, and the page closes the panel and shows why."""
    command = fetch(package_url)
    with pair_view(tmp_path, script(command)) as view:
        view.open(page)
        pending = view.wait_until_waiting(page)
        decided_first: list[int] = []

        def api_decides_first(route: Any) -> None:
            answer = view.api.post(
                f"/api/missions/{view.mission_id}/decisions",
                json={"decision": "approve", "request": pending["id"]},
            )
            decided_first.append(answer.status_code)
            route.continue_()

        page.route("**/decisions", api_decides_first)
        with page.expect_response("**/decisions") as response:
            page.click("#approve")
        assert decided_first == [202]
        assert response.value.status == 409
        note = page.locator("#pair-note")
        page.wait_for_function(
            "() => document.getElementById('pair-note').textContent.startsWith('Not taken')",
            timeout=10_000,
        )
        assert pending["id"] in note.inner_text()
        assert page.locator("#approval").is_hidden()
        assert view.wait_for_end(page) == "verified"
        assert [r["exit_code"] for r in results_of(view.events(), command)] == [0]
        assert page.js_errors == []


def test_a_viewer_who_cannot_decide_sees_the_request_read_only(page, live_server):
    """The local dashboard (no App, so nobody may cancel) shows the pending request, from
    the API and the log, with no controls; a decision closes it."""
    server = live_server()
    mission_id = create_mission(server.store)
    command = "pip install httpx <script>window.__pwned = 1</script>"
    request = {
        "id": "1-call_2",
        "tool": "run_command",
        "rule": "network",
        "what": f"Run `{command}`",
        "why": f"`{command}` needs the network",
        "network": True,
    }
    player = Player(
        server.store,
        server.hub,
        mission_id,
        [
            stage("loop", "started"),
            ("approval_requested", "loop", {**request, "command": command, "expires_s": 900.0}),
            ("decision", "loop", {"decision": "reject", "by": "terminal", "id": request["id"]}),
        ],
        pace_s=0,
    )
    player.play(2)
    server.store.open_request(
        mission_id,
        request["id"],
        {**request, "command": command, "asked_at": ASKED_AT, "expires_at": EXPIRES_AT},
    )
    assert server.store.set_status(mission_id, "waiting")
    page.goto(f"{server.url}/missions/{mission_id}")
    page.wait_for_selector("#approval", state="visible", timeout=10_000)
    assert page.locator("#approval-action").inner_text() == command
    assert page.locator("#approval-what").inner_text() == f"Run `{command}`"
    assert page.locator("#read-only").is_visible()
    assert page.locator("#pair button, #pair input, #pair textarea").count() == 0
    assert page.locator("#guidance").count() == 0
    assert page.evaluate("() => window.__pwned") is None

    player.play()
    page.wait_for_selector("#approval", state="hidden", timeout=10_000)
    assert "rejected by terminal" in page.locator("#pair-note").inner_text()
    assert page.js_errors == []
