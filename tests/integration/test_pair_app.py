"""Pair mode in the App: a mission whose repository config sets `pair: true` waits for a
person when the model asks for a command that needs the network, and the decision made in
the API (approve, reject, redirect, none: expiry) decides what runs and what the model sees.

The real App, the OpenAPI-checked fake GitHub, a scripted model; the "package" the command
fetches is served on loopback. The local sandbox cannot switch the network, so that the
approved command had it for itself alone is checked in the Docker sandbox (marked
`docker`). Decisions also come from pull-request comments, a GitHub sign-in, and reach a
mission that a separate `loopwright worker` process runs.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from litestar.testing import TestClient

from loopwright.app.pair import DECISION_TEXT_LIMIT
from loopwright.app.server import create_app
from loopwright.config import Settings
from loopwright.github.tracking import MARKER
from loopwright.redaction import MASK
from tests.conftest import SUITE_PATH, step, tool
from tests.fakes.github_web import FakeGitHubWeb
from tests.integration.app_harness import FINAL, REPO, World, app_world
from tests.integration.test_saq_workers import (
    WorkerProcess,
    _deliver,
    _logs,
    _queue_env,
    _server_without_docker,
)
from tests.scenarios import EDIT, FINISH, PLAN

TOKEN = "dash-token-for-pair-mode"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
PAIR_CONFIG = "auto_fix: true\ntest_cmd: python -m pytest\npair: true\n"
PACKAGE = "invoice-helpers 1.0 (fetched)"
CLIENT_ID = "Iv1.0123456789abcdef"
CLIENT_SECRET = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(autouse=True)
def venv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
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
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/invoice-helpers"
    finally:
        server.shutdown()
        server.server_close()


def fetch(url: str) -> str:
    return f"curl -sSf {url}"


def script(command: str, *before: dict[str, Any]) -> list[dict[str, Any]]:
    """Plan, (anything else), the command that needs the network, then the fix."""
    return [
        step(PLAN),
        *before,
        step(tool("run_command", command=command)),
        step(EDIT),
        step(tool("run_command", command="python -m pytest -q")),
        step(FINISH),
    ]


def until(condition: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def start(world: World) -> str:
    return str(world.deliver("check_run", world.check_run_payload()).json()["mission"])


def waiting(world: World, mission_id: str) -> dict[str, Any]:
    """The mission once it waits, with its pending request."""

    def now() -> dict[str, Any] | None:
        mission = world.client.get(f"/api/missions/{mission_id}", headers=BEARER).json()
        return mission if mission["status"] == "waiting" else None

    return dict(until(now, "the mission to wait for a decision"))


def post(world: World, mission_id: str, body: Any, headers: dict[str, str] | None = None) -> Any:
    return world.client.post(
        f"/api/missions/{mission_id}/decisions",
        content=json.dumps(body),
        headers={"Content-Type": "application/json", **(BEARER if headers is None else headers)},
    )


def events(world: World, mission_id: str) -> list[dict[str, Any]]:
    return list(world.client.get(f"/api/missions/{mission_id}/events", headers=BEARER).json())


def results_of(log: list[dict[str, Any]], command: str) -> list[dict[str, Any]]:
    """The tool results of the calls that ran (or asked to run) `command`."""
    ids = {e["id"] for e in log if e["type"] == "tool_call" and e["args"].get("command") == command}
    return [e for e in log if e["type"] == "tool_result" and e["id"] in ids]


def finished(world: World, mission_id: str) -> dict[str, Any]:
    def final() -> dict[str, Any] | None:
        mission = world.client.get(f"/api/missions/{mission_id}", headers=BEARER).json()
        return mission if mission["status"] in FINAL else None

    return dict(until(final, f"mission {mission_id} to finish", timeout=180))


def request_after_steps(world: World, steps: int) -> str:
    """The model request made after its first `steps` answers, as text."""
    for body in world.model.requests:
        if sum(m["role"] == "assistant" for m in body["messages"]) == steps:
            return json.dumps(body["messages"])
    raise AssertionError(f"no model request after {steps} answers")


def test_an_approved_network_command_runs_and_the_mission_verifies(tmp_path, package_url):
    command = fetch(package_url)
    env = {"LOOPWRIGHT_DASHBOARD_TOKEN": TOKEN}
    with app_world(tmp_path, script(command), config=PAIR_CONFIG, env=env) as world:
        mission_id = start(world)
        mission = waiting(world, mission_id)
        pending = mission["pending_request"]
        assert pending["command"] == command and pending["rule"] == "network"
        # The local sandbox runs on the host's network: approving attaches nothing, and the
        # request says so rather than promise a network for this command alone.
        assert pending["network"] is False and pending["tool"] == "run_command"
        assert "the local sandbox has no network isolation" in pending["why"]
        assert pending["expires_at"] > pending["asked_at"]
        calls = len(world.model.requests)

        # Who may decide is who may cancel.
        assert post(world, mission_id, {"decision": "approve"}, headers={}).status_code == 401
        logged_in = world.client.post(
            "/login", data={"token": TOKEN, "next": "/"}, follow_redirects=False
        )
        assert logged_in.status_code == 303
        refused = post(world, mission_id, {"decision": "approve"}, headers={})
        assert refused.status_code == 403 and "X-Loopwright-CSRF" in refused.json()["detail"]
        world.client.cookies.clear()
        # Input that cannot be a decision says what to send.
        for body, status, says in [
            ({"decision": "merge"}, 400, "approve, reject, redirect"),
            ({"decision": "redirect", "text": ""}, 400, "needs text"),
            ({"decision": "reject", "text": "x" * (DECISION_TEXT_LIMIT + 1)}, 400, "at most"),
            ({"decision": "approve", "by": "@admin"}, 400, "unknown field by"),
            ([1, 2], 400, "JSON object"),
            ({"decision": "approve", "request": "9-nope"}, 409, "not pending"),
        ]:
            answer = post(world, mission_id, body)
            assert answer.status_code == status, (body, answer.text)
            assert says in answer.json()["detail"], answer.json()
        # While it waits the model is not called.
        assert len(world.model.requests) == calls

        answer = post(world, mission_id, {"decision": "approve", "request": pending["id"]})
        assert answer.status_code == 202, answer.text
        decided = answer.json()
        assert (decided["decision"], decided["by"], decided["request"]) == (
            "approve",
            "dashboard",
            pending["id"],
        )
        again = post(world, mission_id, {"decision": "reject"})
        assert again.status_code == 409  # decided once

        final = finished(world, mission_id)
        assert final["status"] == "verified", final
        assert final["pending_request"] is None
        log = events(world, mission_id)
        (ran,) = results_of(log, command)
        assert ran["exit_code"] == 0 and ran["status"] == "ok", ran
        assert PACKAGE in request_after_steps(world, 2)  # the model saw what it fetched
        (asked,) = [e for e in log if e["type"] == "approval_requested"]
        (decision,) = [e for e in log if e["type"] == "decision"]
        assert (asked["id"], asked["command"]) == (pending["id"], command)
        assert decision == {**decision, "decision": "approve", "by": "dashboard", "id": asked["id"]}
        assert log.index(asked) < log.index(decision) < log.index(ran)
        ended = post(world, mission_id, {"decision": "redirect", "text": "too late"})
        assert ended.status_code == 409 and "verified" in ended.json()["detail"]
        world.github.assert_no_rejections()


def test_a_rejected_command_is_not_run_and_the_model_reads_why(tmp_path, package_url):
    command = fetch(package_url)
    env = {"LOOPWRIGHT_DASHBOARD_TOKEN": TOKEN}
    with app_world(tmp_path, script(command), config=PAIR_CONFIG, env=env) as world:
        mission_id = start(world)
        waiting(world, mission_id)
        why = "use the helpers vendored in invoice/ instead"
        answer = post(world, mission_id, {"decision": "reject", "text": why})
        assert answer.status_code == 202, answer.text
        final = finished(world, mission_id)
        assert final["status"] == "verified", final
        seen = request_after_steps(world, 2)
        assert why in seen and "Refused (rejected)" in seen and PACKAGE not in seen
        log = events(world, mission_id)
        (refused,) = results_of(log, command)
        assert refused["status"] == "refused" and why in refused["output"]
        (decision,) = [e for e in log if e["type"] == "decision"]
        assert (decision["decision"], decision["text"]) == ("reject", why)


def test_an_unanswered_request_expires_as_a_reject(tmp_path, package_url):
    command = fetch(package_url)
    env = {"LOOPWRIGHT_DASHBOARD_TOKEN": TOKEN, "LOOPWRIGHT_PAIR_EXPIRY_S": "1.5"}
    with app_world(tmp_path, script(command), config=PAIR_CONFIG, env=env) as world:
        mission_id = start(world)
        final = finished(world, mission_id)
        assert final["status"] == "verified", final
        log = events(world, mission_id)
        (asked,) = [e for e in log if e["type"] == "approval_requested"]
        assert asked["expires_s"] == 1.5
        (decision,) = [e for e in log if e["type"] == "decision"]
        assert (decision["decision"], decision["by"]) == ("reject", "expiry")
        seen = request_after_steps(world, 2)
        assert "nobody decided within 1.5s" in seen and PACKAGE not in seen
        assert [r["status"] for r in results_of(log, command)] == ["refused"]
        # The expiry is recorded like a person's decision: nothing is left to approve.
        late = post(world, mission_id, {"decision": "approve", "request": asked["id"]})
        assert late.status_code == 409


def test_a_redirect_refuses_the_command_and_the_model_gets_the_guidance(tmp_path, package_url):
    command = fetch(package_url)
    env = {"LOOPWRIGHT_DASHBOARD_TOKEN": TOKEN}
    with app_world(tmp_path, script(command), config=PAIR_CONFIG, env=env) as world:
        mission_id = start(world)
        waiting(world, mission_id)
        guidance = "no new packages: the bug is the percentage in totals.py"
        answer = post(world, mission_id, {"decision": "redirect", "text": guidance})
        assert answer.status_code == 202, answer.text
        assert answer.json()["request"] is not None  # it decided the pending request
        assert finished(world, mission_id)["status"] == "verified"
        seen = request_after_steps(world, 2)
        assert guidance in seen and "redirected the plan" in seen and "update_plan" in seen
        assert PACKAGE not in seen


def slow_steps() -> list[dict[str, Any]]:
    """Plan, a 3-second command (the loop is busy: a window to send guidance), the fix."""
    slow = step(tool("run_command", command="sleep 3"))
    test = step(tool("run_command", command="python -m pytest -q"))
    return [step(PLAN), slow, step(EDIT), test, step(FINISH)]


def wait_for_slow_command(world: World, mission_id: str) -> None:
    until(
        lambda: any(
            e["type"] == "tool_call" and e["args"].get("command") == "sleep 3"
            for e in events(world, mission_id)
        ),
        "the slow command",
    )


def test_guidance_while_running_reaches_the_next_model_request(tmp_path, package_url):
    """Guidance needs no pending request; approve and reject do."""
    env = {"LOOPWRIGHT_DASHBOARD_TOKEN": TOKEN, "LOOPWRIGHT_PAIR_EXPIRY_S": "60"}
    steps = slow_steps()
    with app_world(tmp_path, steps, config=PAIR_CONFIG, env=env) as world:
        mission_id = start(world)
        wait_for_slow_command(world, mission_id)
        assert world.client.get(f"/api/missions/{mission_id}", headers=BEARER).json()[
            "takes_guidance"
        ]
        not_waiting = post(world, mission_id, {"decision": "approve"})
        assert not_waiting.status_code == 409
        assert "not waiting for a decision" in not_waiting.json()["detail"]
        guidance = "keep the rounding as it is"
        answer = post(world, mission_id, {"decision": "redirect", "text": guidance})
        assert answer.status_code == 202, answer.text
        assert answer.json()["request"] is None
        assert finished(world, mission_id)["status"] == "verified"
        seen = request_after_steps(world, 2)
        assert guidance in seen and "sends guidance" in seen
        assert guidance not in request_after_steps(world, 1)
        (decision,) = [e for e in events(world, mission_id) if e["type"] == "decision"]
        assert (decision["decision"], decision["by"], decision["text"]) == (
            "guidance",
            "dashboard",
            guidance,
        )


def test_without_pair_in_the_config_the_command_runs_unasked(tmp_path, package_url):
    command = fetch(package_url)
    with app_world(tmp_path, script(command)) as world:
        mission_id = start(world)
        assert finished(world, mission_id)["status"] == "verified"
        log = events(world, mission_id)
        assert not [e for e in log if e["type"] in ("approval_requested", "decision")]
        assert [r["exit_code"] for r in results_of(log, command)] == [0]


def test_guidance_to_a_mission_without_pair_mode_is_refused(tmp_path):
    """Only the pair-mode loop reads guidance: sent to any other mission it would be
    accepted and never delivered, so it is refused, in the API and in a comment."""
    env = {"LOOPWRIGHT_DASHBOARD_TOKEN": TOKEN}
    steps = slow_steps()
    with app_world(tmp_path, steps, env=env) as world:
        mission_id = start(world)
        wait_for_slow_command(world, mission_id)
        mission = world.client.get(f"/api/missions/{mission_id}", headers=BEARER).json()
        assert mission["status"] == "running" and mission["takes_guidance"] is False
        answer = post(world, mission_id, {"decision": "redirect", "text": "look at totals.py"})
        assert answer.status_code == 409, answer.text
        assert "pair mode is not on" in answer.json()["detail"]
        # Half an emoji (a lone surrogate) is refused before anything is decided or stored.
        split = post(world, mission_id, {"decision": "redirect", "text": "look at caf\ud83c"})
        assert split.status_code == 400, split.text
        assert "lone surrogate" in split.json()["detail"]
        comment(world, "/loopwright redirect look at totals.py")
        reply = until(lambda: replies(world), "the reply")[0]
        assert "nothing was decided" in reply and "pair mode is not on" in reply
        assert finished(world, mission_id)["status"] == "verified"
        assert "look at totals.py" not in json.dumps(world.model.requests)
        assert not [e for e in events(world, mission_id) if e["type"] == "decision"]


def test_a_decision_on_a_server_reaches_the_mission_in_a_worker_process(
    tmp_path, package_url, redis_service
):
    """`loopwright serve` only enqueues; `loopwright worker`, another process, runs the
    mission and waits; the approval posted to the server reaches it through the store."""
    command = fetch(package_url)
    env = {"LOOPWRIGHT_DASHBOARD_TOKEN": TOKEN, **_queue_env(redis_service.url)}
    steps = script(command)
    with app_world(tmp_path, steps, config=PAIR_CONFIG, env=env, serve=False) as world:
        server = _server_without_docker(world, tmp_path / "serve.log")
        worker = WorkerProcess(world, tmp_path / "worker.log")
        try:
            with httpx.Client(base_url=server.url, headers=BEARER, timeout=10) as client:
                mission_id = _deliver(server, world)

                def mission() -> dict[str, Any]:
                    return dict(client.get(f"/api/missions/{mission_id}").json())

                pending = until(
                    lambda: mission()["pending_request"], "the worker's mission to wait", 120
                )
                assert mission()["runner"].split(":")[1] == str(worker.pid)
                answer = client.post(
                    f"/api/missions/{mission_id}/decisions",
                    json={"decision": "approve", "request": pending["id"]},
                )
                assert answer.status_code == 202, answer.text
                done = until(lambda: (m := mission())["status"] in FINAL and m, "the mission", 180)
                logs = _logs(tmp_path / "worker.log", tmp_path / "serve.log")
                assert done["status"] == "verified", logs
                log = list(client.get(f"/api/missions/{mission_id}/events").json())
                (ran,) = results_of(log, command)
                assert ran["exit_code"] == 0, ran
                (decision,) = [e for e in log if e["type"] == "decision"]
                assert (decision["decision"], decision["by"]) == ("approve", "dashboard")
            assert worker.stop() == 0
        finally:
            worker.kill()
            server.stop()
        world.github.assert_no_rejections()


def bot_comments(world: World) -> list[str]:
    return [
        c["body"]
        for c in world.github.comments(REPO, world.pr_number)
        if c["user"]["type"] == "Bot"
    ]


def replies(world: World) -> list[str]:
    return [body for body in bot_comments(world) if MARKER not in body]


def tracking(world: World) -> str:
    (body,) = [b for b in bot_comments(world) if MARKER in b]
    return body


def comment(world: World, body: str, user: str = "maintainer") -> None:
    answer = world.deliver("issue_comment", world.comment_payload(body, user=user))
    assert answer.status_code == 202, answer.text


def test_comments_decide_for_writers_only_and_the_tracking_comment_shows_the_request(
    tmp_path, package_url
):
    command = fetch(package_url)
    env = {"LOOPWRIGHT_DASHBOARD_TOKEN": TOKEN}
    with app_world(tmp_path, script(command), config=PAIR_CONFIG, env=env) as world:
        mission_id = start(world)
        pending = waiting(world, mission_id)["pending_request"]
        shown = until(
            lambda: "Waiting for a decision" in tracking(world) and tracking(world),
            "the tracking comment to show the request",
        )
        assert command in shown and "reaches the network" in shown
        rid = pending["id"]
        assert f"`/loopwright approve {rid}`" in shown
        assert f"`/loopwright reject {rid} <why>`" in shown

        # A reader gets the refusal and decides nothing.
        comment(world, "/loopwright approve", user="reader")
        refusal = until(lambda: replies(world), "the reply to the reader")[0]
        assert "only people with write access" in refusal and "@reader" in refusal
        still = world.client.get(f"/api/missions/{mission_id}", headers=BEARER).json()
        assert still["status"] == "waiting" and still["pending_request"]["id"] == pending["id"]

        comment(world, f"/loopwright approve {rid}")
        approved = until(lambda: replies(world)[1:], "the reply to the maintainer")[0]
        assert approved.startswith(f"@maintainer approved request `{rid}`")
        assert mission_id in approved
        assert finished(world, mission_id)["status"] == "verified"
        log = events(world, mission_id)
        (decision,) = [e for e in log if e["type"] == "decision"]
        assert (decision["decision"], decision["by"]) == ("approve", "@maintainer")
        assert [r["exit_code"] for r in results_of(log, command)] == [0]
        until(lambda: "Waiting for a decision" not in tracking(world), "the request to go")

        # Nothing runs any more: the command says so.
        comment(world, "/loopwright reject too late")
        late = until(lambda: replies(world)[2:], "the reply after the end")[0]
        assert "no Loopwright mission is running" in late
        world.github.assert_no_rejections()


def test_a_redirect_comment_gives_the_model_the_guidance(tmp_path, package_url):
    command = fetch(package_url)
    with app_world(tmp_path, script(command), config=PAIR_CONFIG) as world:
        mission_id = start(world)
        waiting(world, mission_id)
        comment(world, "/loopwright redirect no packages:\nthe bug is in totals.py\n\nthanks")
        reply = until(lambda: replies(world), "the reply")[0]
        assert reply.startswith("@maintainer redirected the plan")
        assert finished(world, mission_id)["status"] == "verified"
        seen = request_after_steps(world, 2)
        assert "no packages:\\nthe bug is in totals.py" in seen and "thanks" not in seen
        (decision,) = [e for e in events(world, mission_id) if e["type"] == "decision"]
        assert (decision["decision"], decision["by"]) == ("redirect", "@maintainer")
        world.github.assert_no_rejections()


@pytest.mark.docker
def test_in_docker_the_approved_command_alone_has_the_network(tmp_path, docker_ready):
    """The approved command runs attached to the sandbox bridge (an interface besides
    loopback); the next command, not asked about, has loopback only again. Nothing leaves
    the container: the fetch is to its own loopback."""
    approved = "curl -sS -m 2 http://127.0.0.1:9/ ; ls /sys/class/net"
    after = "ls /sys/class/net"
    steps = script(approved)
    steps.insert(2, step(tool("run_command", command=after)))
    env = {"LOOPWRIGHT_DASHBOARD_TOKEN": TOKEN, "LOOPWRIGHT_SANDBOX": "docker",
           "LOOPWRIGHT_WARM_POOL": "0"}  # fmt: skip
    with app_world(tmp_path, steps, config=PAIR_CONFIG, env=env) as world:
        mission_id = start(world)
        pending = waiting(world, mission_id)["pending_request"]
        assert pending["command"] == approved and pending["network"] is True
        answer = post(world, mission_id, {"decision": "approve", "request": pending["id"]})
        assert answer.status_code == 202, answer.text
        assert finished(world, mission_id)["status"] == "verified"
        log = events(world, mission_id)
        (with_network,) = results_of(log, approved)
        (without,) = results_of(log, after)
        interfaces = set(with_network["output"].split()) & {"eth0", "eth1"}
        assert interfaces, with_network["output"]
        assert "lo" in without["output"].split() and not interfaces & set(without["output"].split())


def sign_in(client: Any, web: FakeGitHubWeb, login: str) -> str:
    """Sign `login` in through GitHub's OAuth pages; the CSRF value the mission page carries."""
    client.cookies.clear()
    web.approve_as = login
    begin = client.get("/auth/github", follow_redirects=False)
    assert begin.status_code == 302, begin.text
    back = httpx.get(begin.headers["location"], timeout=10)
    assert back.status_code == 302, back.text
    callback = urlsplit(back.headers["location"])
    done = client.get(f"{callback.path}?{callback.query}", follow_redirects=False)
    assert done.status_code == 303, done.text
    return done.headers.get("location", "")


def test_a_signed_in_reader_cannot_decide_and_a_writer_can(tmp_path, package_url):
    command = fetch(package_url)
    with (
        app_world(tmp_path, script(command), config=PAIR_CONFIG, serve=False) as world,
        FakeGitHubWeb(world.github, CLIENT_ID, CLIENT_SECRET) as web,
    ):
        settings = Settings.from_env(
            {
                **world.env,
                "LOOPWRIGHT_GITHUB_WEB_URL": web.url,
                "LOOPWRIGHT_GITHUB_CLIENT_ID": CLIENT_ID,
                "LOOPWRIGHT_GITHUB_CLIENT_SECRET": CLIENT_SECRET,
            }
        )
        with TestClient(create_app(settings)) as client:
            world = dataclasses.replace(world, client=client, settings=settings)
            mission_id = start(world)
            url = f"/api/missions/{mission_id}"

            def as_user(login: str) -> dict[str, str]:
                sign_in(client, web, login)
                page = client.get(f"/missions/{mission_id}")
                csrf = re.search(r'data-csrf="([0-9a-f]{64})"', page.text)
                assert csrf is not None, page.text
                return {"X-Loopwright-CSRF": csrf.group(1)}

            reader = as_user("reader")
            pending = until(lambda: client.get(url).json()["pending_request"], "the request")
            refused = post(world, mission_id, {"decision": "approve"}, headers=reader)
            assert refused.status_code == 403, refused.text
            detail = refused.json()["detail"]
            assert "write access to acme/invoice" in detail and "permission is read" in detail
            assert client.get(url).json()["status"] == "waiting"

            writer = as_user("maintainer")
            no_csrf = post(world, mission_id, {"decision": "approve"}, headers={})
            assert no_csrf.status_code == 403
            answer = post(world, mission_id, {"decision": "approve"}, headers=writer)
            assert answer.status_code == 202, answer.text
            assert (answer.json()["by"], answer.json()["request"]) == ("@maintainer", pending["id"])
            done = until(lambda: (m := client.get(url).json())["status"] in FINAL and m, "end", 180)
            assert done["status"] == "verified", done
        web.assert_no_rejections()
        world.github.assert_no_rejections()


def written(world: World, body: str, at: datetime.datetime) -> dict[str, Any]:
    """A comment payload whose comment GitHub says was written `at`."""
    payload = world.comment_payload(body)
    stamp = at.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    payload["comment"]["created_at"] = payload["comment"]["updated_at"] = stamp
    return payload


def test_a_comment_decides_only_the_request_it_was_written_about(tmp_path, package_url):
    """An approve written before the request was asked (a late webhook, a request asked
    while the maintainer typed) decides nothing; one naming another request neither."""
    command = fetch(package_url)
    env = {"LOOPWRIGHT_DASHBOARD_TOKEN": TOKEN}
    with app_world(tmp_path, script(command), config=PAIR_CONFIG, env=env) as world:
        mission_id = start(world)
        pending = waiting(world, mission_id)["pending_request"]
        rid = pending["id"]
        asked = datetime.datetime.fromisoformat(pending["asked_at"])

        early = written(world, "/loopwright approve", asked - datetime.timedelta(seconds=5))
        assert world.deliver("issue_comment", early).status_code == 202
        refused = until(lambda: replies(world), "the reply to the early approve")[0]
        assert (
            refused.startswith("@maintainer, nothing was decided")
            and "after your comment" in refused
        )
        assert f"`/loopwright approve {rid}`" in refused and f"`{rid}`" in refused
        comment(world, "/loopwright approve 1-zzzz")
        other = until(lambda: replies(world)[1:], "the reply to the wrong id")[0]
        assert "`1-zzzz` is not pending" in other and f"`/loopwright approve {rid}`" in other
        comment(world, "/loopwright reject 1-zzzz not this one")
        until(lambda: replies(world)[2:], "the reply to the wrong reject")
        mission = world.client.get(f"/api/missions/{mission_id}", headers=BEARER).json()
        assert mission["status"] == "waiting" and mission["pending_request"]["id"] == rid

        # Written after the request was asked, a bare approve is about it.
        later = written(world, "/loopwright approve", asked + datetime.timedelta(seconds=2))
        assert world.deliver("issue_comment", later).status_code == 202
        approved = until(lambda: replies(world)[3:], "the reply to the approve")[0]
        assert approved.startswith(f"@maintainer approved request `{rid}`"), approved
        assert finished(world, mission_id)["status"] == "verified"
        (decision,) = [e for e in events(world, mission_id) if e["type"] == "decision"]
        assert (decision["decision"], decision["by"], decision["id"]) == (
            "approve",
            "@maintainer",
            rid,
        )
        world.github.assert_no_rejections()


def test_a_request_the_comment_cannot_show_whole_is_approved_only_in_the_live_view(
    tmp_path, package_url
):
    command = f"{fetch(package_url)} -H 'X-Pad: {'a' * 3200}'"
    env = {"LOOPWRIGHT_DASHBOARD_TOKEN": TOKEN}
    with app_world(tmp_path, script(command), config=PAIR_CONFIG, env=env) as world:
        mission_id = start(world)
        pending = waiting(world, mission_id)["pending_request"]
        assert pending["command"] == command  # the live view has it whole
        shown = until(
            lambda: "Waiting for a decision" in tracking(world) and tracking(world),
            "the tracking comment to show the request",
        )
        assert "… (cut)" in shown and "approved only in the live view" in shown
        assert "/loopwright approve" not in shown

        comment(world, f"/loopwright approve {pending['id']}")
        refused = until(lambda: replies(world), "the reply")[0]
        assert "cannot be approved by a comment" in refused and "live view" in refused
        still = world.client.get(f"/api/missions/{mission_id}", headers=BEARER).json()
        assert still["status"] == "waiting"
        answer = post(world, mission_id, {"decision": "approve", "request": pending["id"]})
        assert answer.status_code == 202, answer.text
        assert finished(world, mission_id)["status"] == "verified"
        world.github.assert_no_rejections()


def test_the_pending_request_is_stored_and_served_redacted(tmp_path, package_url):
    token = "ghp_" + "A1b2C3d4" * 4 + "wxyz"
    command = f"curl -sSf -u ci:{token} {package_url}"
    env = {"LOOPWRIGHT_DASHBOARD_TOKEN": TOKEN}
    with app_world(tmp_path, script(command), config=PAIR_CONFIG, env=env) as world:
        mission_id = start(world)
        mission = waiting(world, mission_id)
        pending = mission["pending_request"]
        assert token not in json.dumps(mission)
        assert pending["command"] == command.replace(token, MASK)
        answer = post(world, mission_id, {"decision": "reject", "request": pending["id"]})
        assert answer.status_code == 202, answer.text
        assert finished(world, mission_id)["status"] == "verified"
