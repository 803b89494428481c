"""`/loopwright help|cancel|retry` (and unknown commands) on a pull request, and the live
view's cancel, against the OpenAPI-checked fake GitHub, the real App and a scripted model."""

from __future__ import annotations

import glob
import itertools
import os
import re
import tempfile
import time
from collections.abc import Callable
from typing import Any

import pytest

from loopwright.github.tracking import MARKER
from tests.conftest import SUITE_PATH, step, tool
from tests.integration.app_harness import REPO, World, app_world
from tests.scenarios import FINISH, PLAN

SLOW_COMMAND = [step(PLAN), step(tool("run_command", command="sleep 120")), step(FINISH)]
"""The mission sits in a two-minute command until something stops it."""
_ids = itertools.count(880_001)


@pytest.fixture(autouse=True)
def venv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # The local sandbox runs the example's tests with the python on PATH.
    monkeypatch.setenv("PATH", f"{SUITE_PATH}:{os.environ['PATH']}")


def _comment(world: World, body: str, user: str = "maintainer") -> dict[str, Any]:
    payload = world.comment_payload(body, user=user)
    payload["comment"]["id"] = next(_ids)
    return payload


def _until(condition: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _bot_comments(world: World) -> list[str]:
    """The App's comments on the pull request (the commands themselves are the user's)."""
    return [
        c["body"]
        for c in world.github.comments(REPO, world.pr_number)
        if c["user"]["type"] == "Bot"
    ]


def _replies(world: World) -> list[str]:
    """The App's replies to commands: its comments other than a mission's tracking comment."""
    return [body for body in _bot_comments(world) if MARKER not in body]


def _tracking(world: World) -> str:
    (body,) = [b for b in _bot_comments(world) if MARKER in b]
    return body


def _new_reply(world: World, before: int) -> str:
    bodies = _until(lambda: _replies(world)[before:], "a reply on the pull request")
    assert len(bodies) == 1, bodies
    return str(bodies[0])


def _events(world: World, mission_id: str) -> list[dict[str, Any]]:
    return list(world.client.get(f"/api/missions/{mission_id}/events").json())


def _sandbox_dirs(mission_id: str) -> list[str]:
    """The local provider's sandboxes of this mission (it names each directory after it)."""
    return glob.glob(os.path.join(tempfile.gettempdir(), f"loopwright-{mission_id}-*"))


def _assert_cancelled(world: World, mission: dict[str, Any], summary: str) -> None:
    assert mission["status"] == "cancelled", mission
    assert mission["result"]["status"] == "cancelled"
    assert mission["result"]["summary"] == summary
    assert mission["message"] == summary
    events = _events(world, mission["id"])
    assert events[-1]["type"] == "done" and events[-1]["status"] == "cancelled"
    assert _sandbox_dirs(mission["id"]) == []
    (run,) = [r for r in world.github.check_runs(REPO) if r["external_id"] == mission["id"]]
    assert run["status"] == "completed" and run["conclusion"] == "cancelled"
    assert summary in run["output"]["summary"]
    assert not [p for p in world.github.pulls(REPO) if p["head"]["ref"].startswith("loopwright/")]


def test_help_lists_the_commands_and_the_effective_settings(tmp_path):
    config = (
        "auto_fix: true\ntest_cmd: 'python -m pytest  # ask @octocat'\nmax_cost_usd: 0.5\n"
        "tiers: [nano]\nprotected_paths: ['deploy/**']\n"
    )
    with app_world(tmp_path, [], config=config, env={"LOOPWRIGHT_MAX_COST_USD": "2"}) as world:
        answer = world.deliver("issue_comment", _comment(world, "/loopwright help"))
        assert answer.status_code == 202, answer.text
        assert answer.json() == {"status": "command", "command": "help"}
        body = _new_reply(world, 0)
        for command in ("/loopwright fix", "/loopwright cancel", "/loopwright retry"):
            assert f"`{command}" in body
        assert "`.github/loopwright.yml` on `main`" in body
        assert "| Automatic fixes on red CI (`auto_fix`) | on |" in body
        assert "| Model tiers, cheapest first | `nano` |" in body  # super is not allowed
        assert "| Most a mission may cost | $0.50 |" in body  # the lower of repo and operator
        assert "| Missions per commit | 3 |" in body
        assert "`deploy/**`" in body
        # Text from the repository's file is shown as code, so its mention notifies no one.
        assert "`python -m pytest # ask @octocat`" in body
        assert world.db("SELECT count(*) FROM missions") == [(0,)]
        world.github.assert_no_rejections()


def test_help_for_a_non_writer_shows_no_settings_and_is_rate_limited(tmp_path):
    with app_world(tmp_path, []) as world:
        world.deliver("issue_comment", _comment(world, "/loopwright help", user="reader"))
        body = _new_reply(world, 0)
        assert "`/loopwright fix" in body and "`/loopwright cancel`" in body
        assert "@reader, your permission is read" in body
        assert "Settings" not in body and "python -m pytest" not in body
        # A second ask (any command) within the window gets no second reply.
        again = world.deliver("issue_comment", _comment(world, "/loopwright help", user="reader"))
        assert again.status_code == 202
        cancel = world.deliver("issue_comment", _comment(world, "/loopwright cancel", "reader"))
        assert cancel.status_code == 202
        _until(
            lambda: len(world.github.requests_for("repos/get-collaborator-permission-level")) >= 3,
            "the permission checks",
        )
        time.sleep(0.5)
        assert len(_replies(world)) == 1
        world.github.assert_no_rejections()


def test_unknown_command_suggests_the_nearest_one(tmp_path):
    with app_world(tmp_path, []) as world:
        world.deliver("issue_comment", _comment(world, "/loopwright fixx the <b>tests</b>"))
        body = _new_reply(world, 0)
        assert body.startswith(
            "`/loopwright fixx the <b>tests</b>` is not a Loopwright command; "
            "did you mean `/loopwright fix`?"
        )
        assert "| `/loopwright help` |" in body
        assert world.db("SELECT count(*) FROM missions") == [(0,)]


def test_cancel_stops_a_running_mission_and_removes_its_sandbox(tmp_path):
    with app_world(tmp_path, SLOW_COMMAND) as world:
        started = world.deliver("check_run", world.check_run_payload())
        mission_id = started.json()["mission"]
        # Wherever it is (reproducing the failure, or in the model's two-minute command),
        # the mission is busy in its sandbox.
        _until(lambda: _sandbox_dirs(mission_id), "the mission's sandbox", 60)

        # A reader cannot cancel it: the same refusal as for fix, and the mission goes on.
        world.deliver("issue_comment", _comment(world, "/loopwright cancel", user="reader"))
        refusal = _new_reply(world, 0)
        assert "only people with write access" in refusal and "@reader" in refusal
        assert world.client.get(f"/api/missions/{mission_id}").json()["status"] == "running"

        world.deliver("issue_comment", _comment(world, "/loopwright cancel"))
        mission = world.wait(mission_id, timeout=60)
        _assert_cancelled(world, mission, "Cancelled by @maintainer.")
        # The two-minute command was stopped, not waited out, and the model never went on.
        results = [e for e in _events(world, mission_id) if e["type"] == "tool_result"]
        assert [e for e in results if e["tool"] == "run_command" and e["exit_code"] == 0] == []
        assert not [e for e in results if e["tool"] == "finish"]
        assert len(_replies(world)) == 1  # the check run says it; no extra comment
        # The tracking comment, edited to its end, says who cancelled it.
        _until(lambda: "cancelled by @maintainer" in _tracking(world), "the tracking outcome")
        world.github.assert_no_rejections()


def test_cancel_with_nothing_running_says_so(tmp_path):
    with app_world(tmp_path, []) as world:
        world.deliver("issue_comment", _comment(world, "/loopwright cancel"))
        body = _new_reply(world, 0)
        assert body == (
            "@maintainer, no Loopwright mission is running or queued for this pull request, "
            "so there is nothing to cancel."
        )


def test_cancel_from_the_api_is_refused_when_nobody_can_be_told_apart(tmp_path):
    """With neither a dashboard token nor GitHub sign-in the live view is open to anyone
    who reaches it; cancelling is not, and the refusal says what to set."""
    with app_world(tmp_path, [step(FINISH)]) as world:
        mission_id = world.deliver("check_run", world.check_run_payload()).json()["mission"]
        answer = world.client.post(f"/api/missions/{mission_id}/cancel")
        assert answer.status_code == 403, answer.text
        assert "LOOPWRIGHT_DASHBOARD_TOKEN" in answer.json()["detail"]
        assert "/loopwright cancel" in answer.json()["detail"]
        mission = world.wait(mission_id)
        assert mission["status"] != "cancelled", mission
        assert "ancel" not in mission["message"], mission


def test_retry_reruns_the_last_mission_within_the_attempt_cap(tmp_path):
    # The first mission stops at a broken config; the maintainer fixes it and retries.
    env = {"LOOPWRIGHT_MAX_ATTEMPTS": "1"}
    with app_world(tmp_path, SLOW_COMMAND, config="auto_fix: maybe\n", env=env) as world:
        first = world.deliver(
            "issue_comment", _comment(world, "/loopwright fix\nlook at the discount maths")
        )
        first_id = first.json()["mission"]
        assert world.wait(first_id)["status"] == "error"
        world.github.set_file(
            REPO, "main", ".github/loopwright.yml", "test_cmd: python -m pytest\n"
        )

        retry = world.deliver("issue_comment", _comment(world, "/loopwright retry"))
        assert retry.status_code == 202, retry.text
        retry_id = retry.json()["mission"]
        _until(lambda: _sandbox_dirs(retry_id), "the retried mission's sandbox", 60)
        retried = world.client.get(f"/api/missions/{retry_id}").json()
        assert retried["status"] == "running"
        assert retried["request"]["guidance"] == "look at the discount maths"
        assert retried["request"]["extra"]["retry_of"] == first_id
        assert retried["request"]["actor"] == "maintainer"
        assert retried["head_sha"] == world.head_sha  # pinned when the retry was admitted
        # Another retry while it runs is answered, not queued.
        world.deliver("issue_comment", _comment(world, "/loopwright retry"))
        assert "is still running" in _new_reply(world, 0)
        world.deliver("issue_comment", _comment(world, "/loopwright cancel"))
        assert world.wait(retry_id, timeout=60)["status"] == "cancelled"

        # A reader's retry gets the refusal a reader's fix gets.
        refused = world.deliver("issue_comment", _comment(world, "/loopwright retry", "reader"))
        assert world.wait(refused.json()["mission"])["status"] == "refused"
        assert "only people with write access" in _new_reply(world, 1)

        # One mission ran on this head and the cap is one: the next retry is turned down.
        capped = world.deliver("issue_comment", _comment(world, "/loopwright retry"))
        assert world.wait(capped.json()["mission"])["status"] == "ignored"
        assert "already made 1 attempts" in _new_reply(world, 2)
        assert world.db("SELECT count(*) FROM missions") == [(4,)]
        world.github.assert_no_rejections()


def test_cancel_from_the_api_token_cookie_csrf_and_conflict(tmp_path):
    token = "dash-token-for-cancel"
    with app_world(tmp_path, SLOW_COMMAND, env={"LOOPWRIGHT_DASHBOARD_TOKEN": token}) as world:
        bearer = {"Authorization": f"Bearer {token}"}
        started = world.deliver("check_run", world.check_run_payload())
        mission_id = started.json()["mission"]
        url = f"/api/missions/{mission_id}/cancel"
        _until(lambda: _sandbox_dirs(mission_id), "the mission's sandbox", 60)

        assert world.client.post(url).status_code == 401
        logged_in = world.client.post(
            "/login", data={"token": token, "next": "/"}, follow_redirects=False
        )
        assert logged_in.status_code == 303
        page = world.client.get(f"/missions/{mission_id}")
        csrf = re.search(r'id="cancel" data-csrf="([0-9a-f]{64})"', page.text)
        assert csrf is not None, page.text
        # The session cookie alone is not enough: a cross-site form could send it.
        assert world.client.post(url).status_code == 403
        assert world.client.post(url, headers={"X-Loopwright-CSRF": "0" * 64}).status_code == 403
        foreign = {"X-Loopwright-CSRF": csrf.group(1), "Origin": "https://evil.example"}
        assert world.client.post(url, headers=foreign).status_code == 403

        answer = world.client.post(url, headers={"X-Loopwright-CSRF": csrf.group(1)})
        assert answer.status_code == 202, answer.text
        assert answer.json() == {"mission": mission_id, "status": "cancelling"}
        mission = world.wait(mission_id, timeout=60)
        _assert_cancelled(world, mission, "Cancelled from the live view.")

        world.client.cookies.clear()
        again = world.client.post(url, headers=bearer)
        assert again.status_code == 409
        assert "cancelled" in again.json()["detail"]
        assert (
            world.client.post("/api/missions/0123456789ab/cancel", headers=bearer).status_code
            == 404
        )
        world.github.assert_no_rejections()
