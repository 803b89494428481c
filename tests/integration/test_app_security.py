"""SECURITY.md checks for the GitHub App, driven through its webhook like GitHub drives it.

The pure rules (triggers, rendering, rate-limit policy, store constraints, host-side git)
have table tests of their own; these tests show that the running App applies them: the
real Litestar app (or `loopwright serve` itself), a fake GitHub that validates every
request against GitHub's OpenAPI description, a git server and a scripted model.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from loopwright.app.server import create_app
from loopwright.app.webhooks import CHECK_ON_LOOP_MAX_BYTES
from loopwright.events import Event
from loopwright.github.service import MISSION_PERMISSIONS
from loopwright.github.triggers import CI_EVENTS
from loopwright.sandbox.base import Sandbox, SandboxError
from loopwright.store.engine import database_url
from loopwright.store.repository import Store
from tests.conftest import SUITE_PATH, step, tool
from tests.integration.app_harness import (
    INSTALLATION,
    REPO,
    WEBHOOK_EXAMPLES,
    World,
    app_world,
    post_webhook,
    sign,
    uvicorn_in_thread,
)
from tests.scenarios import CORRECT, EDIT, PLAN

OFF = "auto_fix: false\ntest_cmd: python -m pytest\n"
GITHUB_VECTOR = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
IDLE = [step(tool("finish", summary="nothing"), repeat=True)]
QUICK_FINISH = [step(tool("finish", summary="I looked at it"), repeat=True)]


@pytest.fixture(autouse=True)
def venv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # The local sandbox runs the example's tests with the python on PATH.
    monkeypatch.setenv("PATH", f"{SUITE_PATH}:{os.environ['PATH']}")


@pytest.fixture(scope="module")
def idle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One App for the deliveries that must not start any work; auto_fix is off, so even a
    stored candidate mission ends `ignored` without a sandbox or a model call."""
    with app_world(tmp_path_factory.mktemp("idle"), IDLE, config=OFF) as world:
        yield world


def mission_count(world: World) -> int:
    return len(world.client.get("/api/missions", params={"limit": 500}).json())


def delivery_row(world: World, delivery: str) -> tuple[Any, ...] | None:
    rows = world.db("SELECT event, decision, mission_id FROM deliveries WHERE id = ?", delivery)
    return rows[0] if rows else None


def pushed_fix(world: World, branch: str = "loopwright/fix-1") -> str | None:
    return world.branches().get(branch)


def loopwright_runs(world: World) -> list[dict[str, Any]]:
    return [r for r in world.github.check_runs(REPO) if r["name"] == "Loopwright"]


# -- 1. signatures ---------------------------------------------------------------------------


def test_githubs_published_signature_vector_verifies(idle):
    body = b"Hello, World!"
    assert sign(body, "It's a Secret to Everybody") == f"sha256={GITHUB_VECTOR}"
    assert idle.settings.github.webhook_secret == "It's a Secret to Everybody"
    answer = idle.deliver("ping", {}, body=body, signature=f"sha256={GITHUB_VECTOR}")
    # The signature passed (not 401); a body that is not JSON is then a client error.
    assert answer.status_code == 400, answer.text
    assert "not JSON" in answer.json()["error"]
    tampered = idle.deliver("ping", {}, body=b"Hello, World?", signature=f"sha256={GITHUB_VECTOR}")
    assert tampered.status_code == 401


# -- 3. one mission per delivery id, under real concurrency -------------------------------------


def test_same_delivery_fifty_times_concurrently_is_one_mission(tmp_path):
    with app_world(tmp_path, IDLE, config=OFF, serve=False) as world:
        body = json.dumps(world.check_run_payload()).encode()
        with uvicorn_in_thread(create_app(world.settings)) as url:
            barrier = threading.Barrier(50)

            def send(_: int) -> int:
                with httpx.Client(timeout=60) as client:
                    barrier.wait()
                    return post_webhook(client, url, "check_run", body, delivery="same").status_code

            with ThreadPoolExecutor(50) as pool:
                codes = list(pool.map(send, range(50)))
            missions = httpx.get(f"{url}/api/missions").json()
        assert sorted(codes) == [200] * 49 + [202], codes
        assert len(missions) == 1
        assert world.db("SELECT count(*) FROM deliveries") == [(1,)]


# -- 5. the answer does not wait for the work ------------------------------------------------


class _StuckProvider:
    """A sandbox provider whose `create` takes 30 s (an engine pulling an image)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0
        self.returned = 0

    def create(self, mission_id: str, tree: Path, *, network: bool) -> Sandbox:
        self.calls += 1
        self.release.wait(30)
        self.returned += 1
        raise SandboxError("the engine took too long")

    def reap_abandoned(self) -> list[str]:
        return []

    def close(self) -> None:
        self.release.set()


def test_answer_within_a_second_while_sandbox_start_takes_thirty(tmp_path):
    provider = _StuckProvider()
    with app_world(tmp_path, IDLE, app_kwargs={"provider_factory": lambda _s: provider}) as world:
        first = world.deliver("check_run", world.check_run_payload())
        assert first.status_code == 202
        deadline = time.monotonic() + 30
        while provider.calls == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert provider.calls == 1, "the mission never reached the sandbox"
        # The worker is now stuck in `create`; a new delivery is still answered. That it is
        # answered while `create` has not returned is the exact check: an answer that
        # waited for the work would come only after `create` gave up (30 s).
        answer = world.deliver("issue_comment", world.comment_payload("/loopwright fix\nplease"))
        assert provider.returned == 0, "the answer waited for the sandbox to start"
        assert answer.status_code == 202, answer.text
        stored = world.client.get(f"/api/missions/{answer.json()['mission']}")
        assert stored.status_code == 200
        assert stored.json()["status"] in ("queued", "running")
        provider.release.set()


# -- 6. events it does not act on; oversized bodies ------------------------------------------

_EXAMPLES = json.loads(WEBHOOK_EXAMPLES.read_text())


@pytest.mark.parametrize("event", _EXAMPLES, ids=[e["name"] for e in _EXAMPLES])
def test_every_published_example_payload_gets_a_2xx(idle, event):
    """Each example is answered 2xx and recorded; an event that is neither CI nor a comment
    is ignored with its name in the reason and starts nothing."""
    name = event["name"]
    acts = name in CI_EVENTS or name in ("issue_comment", "pull_request_review_comment")
    answers = []
    for example in event["examples"]:
        before = mission_count(idle)
        delivery = str(uuid.uuid4())
        body = json.dumps(example).encode()
        answer = idle.deliver(name, example, body=body, delivery=delivery)
        answers.append((example.get("action"), answer.status_code, answer.text[:200]))
        assert 200 <= answer.status_code < 300, answers
        row = delivery_row(idle, delivery)
        assert row is not None and row[0].split(".")[0] == name, row
        if not acts:
            assert answer.json()["status"] == "ignored", answer.text
            assert name in answer.json()["reason"], answer.text
            assert row[1].startswith("ignored") and row[2] is None, row
            assert mission_count(idle) == before
    assert answers
    idle.github.assert_no_rejections()


def test_a_replayed_delivery_of_an_ignored_event_is_a_duplicate_that_changes_nothing(idle):
    """Ignored events are stored from the event loop: a replayed id is still caught there."""
    body = json.dumps({"zen": "Half measures are as bad as nothing.", "hook_id": 3}).encode()
    first = idle.deliver("ping", {}, body=body, delivery="replayed-ping")
    assert (first.status_code, first.json()["status"]) == (200, "ignored"), first.text
    again = idle.deliver("ping", {}, body=body, delivery="replayed-ping")
    assert again.status_code == 200, again.text
    assert again.json() == {"status": "duplicate", "delivery": "replayed-ping"}
    rows = idle.db("SELECT decision FROM deliveries WHERE id = ?", "replayed-ping")
    assert rows == [("ignored: event ping is not handled",)]


def test_a_large_body_is_checked_off_the_event_loop_with_the_same_answers(idle):
    """Over CHECK_ON_LOOP_MAX_BYTES the signature and the JSON are checked on a thread; the
    answers are the same as for a small body: ignored and recorded, refused, or 401."""
    pad = "x" * (CHECK_ON_LOOP_MAX_BYTES + 1024)
    body = json.dumps({"zen": pad, "hook_id": 7}).encode()
    answer = idle.deliver("ping", {}, body=body, delivery="large-ping")
    assert (answer.status_code, answer.json()["status"]) == (200, "ignored"), answer.text
    row = delivery_row(idle, "large-ping")
    assert row is not None and row[1].startswith("ignored"), row
    nul = json.dumps({"zen": pad + "\x00"}).encode()  # the escape \u0000
    refused = idle.deliver("ping", {}, body=nul, delivery="large-nul")
    assert refused.status_code == 400 and "NUL" in refused.json()["error"], refused.text
    forged = idle.deliver(
        "ping", {}, body=body, delivery="large-forged", signature="sha256=" + "0" * 64
    )
    assert forged.status_code == 401
    assert delivery_row(idle, "large-nul") is None and delivery_row(idle, "large-forged") is None


def test_webhook_answers_are_json_with_the_apps_security_headers(idle):
    """The route writes its own answers: they carry the same headers as every other page."""
    answer = idle.deliver("ping", {"zen": "Design for failure.", "hook_id": 3})
    assert answer.status_code == 200 and answer.json()["status"] == "ignored", answer.text
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    refused = idle.deliver("ping", {}, signature="sha256=" + "0" * 64)
    assert refused.status_code == 401 and refused.headers["referrer-policy"] == "same-origin"


def test_body_over_25_mb_is_413_and_not_recorded(idle):
    body = b'{"action": "completed", "pad": "' + b"x" * (26 * 1024 * 1024) + b'"}'
    answer = idle.deliver("check_run", {}, body=body, delivery="too-big")
    assert answer.status_code == 413
    assert delivery_row(idle, "too-big") is None


# -- 7/8/9. who and what may ask ---------------------------------------------------------------


def _comment(world: World, body: str, **changes: Any) -> dict[str, Any]:
    payload = world.comment_payload(body)
    for key, value in changes.items():
        if key == "bot":
            payload["sender"].update(login="ci-helper[bot]", type="Bot")
            payload["comment"]["user"].update(login="ci-helper[bot]", type="Bot")
        else:
            payload[key] = value
    return payload


@pytest.mark.parametrize(
    ("event", "build", "reason"),
    [
        ("issue_comment", lambda w: _comment(w, "/loopwright fix", bot=True), "is a bot"),
        (
            "issue_comment",
            lambda w: _comment(w, "/loopwright fix", action="edited"),
            "only new comments",
        ),
        (
            "issue_comment",
            lambda w: _comment(w, "> /loopwright fix\n\nwhat does this do?"),
            "no /loopwright command",
        ),
        (
            "issues",
            lambda w: {
                **_comment(w, "x"),
                "action": "opened",
                "issue": {**_comment(w, "x")["issue"], "body": "/loopwright fix"},
            },
            "not handled",
        ),
    ],
    ids=["bot-sender", "edited-comment", "quoted-command", "issue-body"],
)
def test_commands_that_must_not_trigger_are_ignored(idle, event, build, reason):
    before = mission_count(idle)
    delivery = str(uuid.uuid4())
    answer = idle.deliver(event, build(idle), delivery=delivery)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "ignored"
    assert reason in answer.json()["reason"]
    assert mission_count(idle) == before
    row = delivery_row(idle, delivery)
    assert row is not None and row[1].startswith("ignored") and row[2] is None


# -- 24. no loops on Loopwright's own branches ---------------------------------------------


def test_red_check_on_loopwrights_own_branch_starts_nothing(idle):
    before = mission_count(idle)
    on_branch = idle.check_run_payload()
    on_branch["check_run"]["check_suite"]["head_branch"] = "loopwright/fix-1"
    on_branch["check_run"]["check_suite"]["pull_requests"] = []
    on_pr_head = idle.check_run_payload()
    on_pr_head["check_run"]["check_suite"]["pull_requests"][0]["head"]["ref"] = "loopwright/fix-7"
    for payload in (on_branch, on_pr_head):
        answer = idle.deliver("check_run", payload)
        assert answer.status_code == 200, answer.text
        assert "is Loopwright's" in answer.json()["reason"]
    assert mission_count(idle) == before


def test_attempts_per_head_are_capped(tmp_path):
    with app_world(tmp_path, QUICK_FINISH, env={"LOOPWRIGHT_MAX_ATTEMPTS": "1"}) as world:
        first = world.deliver("check_run", world.check_run_payload())
        assert first.status_code == 202
        assert world.wait(first.json()["mission"])["status"] == "unverified"
        # Another red check of the same head (a re-run): over the cap at the webhook.
        capped = world.deliver("check_run", world.check_run_payload())
        assert capped.status_code == 200, capped.text
        assert "attempt cap 1 reached" in capped.json()["reason"]
        # A maintainer's comment is stored, then refused by the runner with the reason.
        asked = world.deliver("issue_comment", world.comment_payload("/loopwright fix"))
        mission = world.wait(asked.json()["mission"])
        assert mission["status"] == "ignored"
        assert "cap is 1" in mission["message"]
        comments = world.github.comments(REPO, world.pr_number)
        assert any("cap is 1" in c["body"] for c in comments)
        assert len(world.model.requests) == 1
        assert len(loopwright_runs(world)) == 1


# -- 10. the pinned head ------------------------------------------------------------------------


def test_head_moving_after_authorization_does_not_change_what_is_fixed(tmp_path):
    with app_world(tmp_path, CORRECT) as world:
        fake = world.github
        pinned = world.head_sha
        moved: list[str] = []
        serve_pull = fake._op_pulls_get  # the fake's own handler; this wraps the double

        def serve_then_push(call: Any) -> Any:
            reply = serve_pull(call)
            if not moved:
                # Right after GitHub told the App the head, someone pushes to the branch.
                sha = world.push_commit("feature", {"NOTES.md": "pushed after the command\n"})
                world.move_pull_head(world.pr_number, sha)
                moved.append(sha)
            return reply

        fake._op_pulls_get = serve_then_push  # type: ignore[method-assign]
        answer = world.deliver("issue_comment", world.comment_payload("/loopwright fix"))
        mission = world.wait(answer.json()["mission"])
        assert moved and moved[0] != pinned
        assert mission["status"] == "verified", mission
        assert mission["head_sha"] == pinned
        fix = world.branches()["loopwright/fix-1"]
        parent = subprocess.run(
            ["git", "-C", str(world.bare), "rev-parse", f"{fix}^"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        assert parent == pinned
        assert [r["head_sha"] for r in loopwright_runs(world)] == [pinned]


# -- 11/13/14. secrets: canaries, token-shaped text, token scope ----------------------------------

CANARY_KEY = "sk-CANARY" + "7" * 32
PLANTED = "ghp_" + "Q" * 36  # a token-shaped string the model copies from a hostile file
PROBES = (
    "env; cat /proc/self/environ /proc/1/environ 2>&1; git config -l; "
    "find / -name '*.pem' 2>/dev/null | head"
)
LEAKY = [
    step(tool("update_plan", items=[{"step": f"fix ({PLANTED})", "status": "in_progress"}])),
    step(tool("run_command", command=PROBES)),
    step(EDIT),
    step(tool("run_command", command="python -m pytest -q")),
    step(tool("finish", summary=f"divide by 100; token {PLANTED} and key {CANARY_KEY}")),
]  # fmt: skip


@pytest.fixture(scope="module")
def leaky_mission(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One verified mission whose model probes for secrets and echoes token-shaped text;
    the model key is a canary, also in the server's own environment as in production."""
    tmp = tmp_path_factory.mktemp("leaky")
    saved = dict(os.environ)
    os.environ["PATH"] = f"{SUITE_PATH}:{os.environ['PATH']}"
    os.environ["LOOPWRIGHT_MODEL_API_KEY"] = CANARY_KEY
    try:
        with app_world(tmp, LEAKY, env={"LOOPWRIGHT_MODEL_API_KEY": CANARY_KEY}) as world:
            world.github.add_repo("acme/ledger")
            world.github.add_installation(INSTALLATION, "acme", repositories=[REPO, "acme/ledger"])
            import io
            import sys

            captured = io.StringIO()
            real_stdout = sys.stdout
            sys.stdout = captured  # structlog's default logger prints to sys.stdout
            try:
                answer = world.deliver("check_run", world.check_run_payload())
                mission = world.wait(answer.json()["mission"])
            finally:
                sys.stdout = real_stdout
            store = Store(database_url(world.settings))
            try:
                events = [dict(e) for e in store.events_after(mission["id"], 0)]
            finally:
                store.close()
            yield {"world": world, "mission": mission, "events": events, "log": captured.getvalue()}
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _secrets(world: World) -> list[str]:
    tokens = list(world.github.tokens)
    assert tokens, "no installation token was issued"
    return [CANARY_KEY, *tokens]


def test_no_canary_or_token_reaches_github_the_store_or_the_logs(leaky_mission):
    world, mission = leaky_mission["world"], leaky_mission["mission"]
    assert mission["status"] == "verified", mission
    probe = [e for e in leaky_mission["events"] if e["type"] == "tool_result"]
    assert any("PATH=" in json.dumps(e) for e in probe), "the env probe did not run"
    pulls = world.github.pulls(REPO)
    commits = subprocess.run(
        ["git", "-C", str(world.bare), "log", "--all", "--format=%B%n%an%n%ae"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    places = {
        "pull requests": json.dumps(pulls),
        "comments": json.dumps(world.github.comments(REPO, world.pr_number)),
        "check runs": json.dumps(world.github.check_runs(REPO)),
        "commits": commits,
        "API mission": json.dumps(world.client.get(f"/api/missions/{mission['id']}").json()),
        "stored events": json.dumps(leaky_mission["events"]),
        "requests to GitHub": json.dumps(
            [[r.path, r.query, r.body, _without_auth(r.headers)] for r in world.github.requests]
        ),
        "tool results sent to the model": json.dumps(
            [m for r in world.model.requests for m in r["messages"]]
        ),
        "log lines": leaky_mission["log"],
    }
    assert "github.request" in leaky_mission["log"], "the structlog output was not captured"
    for secret in _secrets(world):
        for where, text in places.items():
            assert secret not in text, f"{secret[:8]}… leaked into {where}"


def _without_auth(headers: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k != "authorization"}


def test_token_shaped_text_from_the_model_is_redacted_everywhere_posted(leaky_mission):
    world, mission = leaky_mission["world"], leaky_mission["mission"]
    pull = next(p for p in world.github.pulls(REPO) if p["head"]["ref"] == "loopwright/fix-1")
    message = subprocess.run(
        ["git", "-C", str(world.bare), "log", "-1", "--format=%B", "loopwright/fix-1"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    run = loopwright_runs(world)[0]
    posted = {
        "PR title": pull["title"],
        "PR body": pull["body"],
        "commit message": message,
        "check run": json.dumps(run["output"]),
        "events": json.dumps(leaky_mission["events"]),
        "mission": json.dumps(mission),
    }
    assert "divide by 100" in pull["title"] and "divide by 100" in message
    for where, text in posted.items():
        assert PLANTED not in text, f"token-shaped text in the {where}"
        assert "ghp_" not in text and "sk-CANARY" not in text, where


def test_installation_token_is_scoped_to_one_repository(leaky_mission):
    world = leaky_mission["world"]
    asks = world.github.requests_for("apps/create-installation-access-token")
    assert asks
    for ask in asks:
        assert ask.path == f"/app/installations/{INSTALLATION}/access_tokens"
        assert ask.body == {"repositories": ["invoice"], "permissions": MISSION_PERMISSIONS}
    assert MISSION_PERMISSIONS == {
        "contents": "write", "pull_requests": "write", "checks": "write", "issues": "write",
        "metadata": "read",
    }  # fmt: skip
    for token in world.github.tokens:
        auth = {"Authorization": f"token {token}"}
        own = httpx.get(f"{world.github.url}/repos/{REPO}", headers=auth)
        other = httpx.get(f"{world.github.url}/repos/acme/ledger", headers=auth)
        assert own.status_code == 200
        assert other.status_code == 404, other.text


# -- 20. protected paths ---------------------------------------------------------------------


def test_fix_that_also_writes_a_workflow_is_not_pushed(tmp_path):
    # The tool layer refuses the writes it can see (`echo x > .github/...`, SECURITY 43);
    # this one it cannot, so the patch check before push has to catch it.
    hidden_write = (
        "python -c \"import os; os.makedirs('.github/workflows', exist_ok=True); "
        "open('.github/workflows/ci.yml', 'w').write('x')\""
    )
    sneaky = [
        step(PLAN),
        step(EDIT),
        step(tool("run_command", command=hidden_write)),
        step(tool("run_command", command="python -m pytest -q")),
        step(tool("finish", summary="fixed the discount")),
    ]  # fmt: skip
    with app_world(tmp_path, sneaky) as world:
        branches = world.branches()
        answer = world.deliver("check_run", world.check_run_payload())
        mission = world.wait(answer.json()["mission"])
        assert mission["status"] == "unverified", mission
        assert "protected" in json.dumps(mission).lower()
        assert world.branches() == branches
        assert [p["number"] for p in world.github.pulls(REPO)] == [world.pr_number]
        (run,) = loopwright_runs(world)
        assert run["status"] == "completed" and run["conclusion"] != "success"
        assert world.github.requests_for("pulls/create") == []


# -- 21. config from the default branch only ----------------------------------------------------


def test_pull_request_cannot_turn_auto_fix_on_for_itself(tmp_path):
    with app_world(tmp_path, CORRECT, config=OFF) as world:
        loosened = world.push_commit(
            "feature", {".github/loopwright.yml": "auto_fix: true\ntest_cmd: python -m pytest\n"}
        )
        world.move_pull_head(world.pr_number, loosened)
        world.head_sha = loosened
        answer = world.deliver("check_run", world.check_run_payload())
        mission = world.wait(answer.json()["mission"])
        assert mission["status"] == "ignored", mission
        assert "auto_fix is off" in mission["message"]
        reads = world.github.requests_for("repos/get-content")
        assert reads and all(r.query.get("ref") == ["main"] for r in reads)
        assert world.model.requests == []
        assert loopwright_runs(world) == []


# -- 22. forks -----------------------------------------------------------------------------------


def test_fork_pull_request_gets_the_patch_as_a_comment_and_no_branch(tmp_path):
    with app_world(tmp_path, CORRECT) as world:
        fake = world.github
        fake.add_repo("mallory/invoice", fork_of=REPO, private=False)
        # GitHub exposes a fork's head in the base repository as refs/pull/N/head.
        number = len(fake.pulls(REPO)) + 1
        fork_head = world.push_commit(
            f"refs/pull/{number}/head", {"CONTRIBUTING.md": "thanks\n"}, parent=world.head_sha
        )
        assert fake.add_pull(REPO, head_ref="patch-1", head_sha=fork_head, base_ref="main",
                             head_repo="mallory/invoice", user="mallory") == number  # fmt: skip
        branches = world.branches()
        payload = world.comment_payload("/loopwright fix")
        payload["issue"]["number"] = number
        mission = world.wait(world.deliver("issue_comment", payload).json()["mission"])
        assert mission["status"] == "verified", mission
        assert mission["head_sha"] == fork_head
        assert world.branches() == branches
        assert fake.requests_for("pulls/create") == []
        bodies = [c["body"] for c in fake.comments(REPO, number)]
        assert any("```diff" in b and "/ 100" in b for b in bodies), bodies
        fake.assert_no_rejections()


# -- 25/26. one branch and PR per target; humans' work is never pushed over ---------------------


def _fix_pulls(world: World) -> list[dict[str, Any]]:
    return [p for p in world.github.pulls(REPO) if p["head"]["ref"] == "loopwright/fix-1"]


@pytest.mark.slow
def test_rerun_updates_the_same_pr_and_a_closed_pr_is_reopened_only_by_a_comment(tmp_path):
    with app_world(tmp_path, CORRECT * 4, env={"LOOPWRIGHT_MAX_ATTEMPTS": "10"}) as world:
        comment_ids = iter(range(9001, 9100))

        def ask() -> dict[str, Any]:
            payload = world.comment_payload("/loopwright fix")
            payload["comment"]["id"] = next(comment_ids)  # each comment is a new request
            answer = world.deliver("issue_comment", payload)
            assert answer.status_code == 202, answer.text
            return world.wait(answer.json()["mission"])

        first = ask()
        assert first["status"] == "verified", first
        (pull,) = _fix_pulls(world)
        tip = world.branches()["loopwright/fix-1"]

        second = ask()
        assert second["status"] == "verified", second
        (again,) = _fix_pulls(world)
        assert again["number"] == pull["number"] and again["state"] == "open"
        assert second["id"] in again["body"] and first["id"] not in again["body"]
        moved = world.branches()["loopwright/fix-1"]
        assert moved != tip
        assert len(world.github.requests_for("pulls/create")) == 1
        assert len(world.github.requests_for("pulls/update")) == 1

        world.close_pull(pull["number"])
        ci = world.wait(world.deliver("check_run", world.check_run_payload()).json()["mission"])
        assert ci["status"] == "verified", ci
        assert [p["state"] for p in _fix_pulls(world)] == ["closed"]
        assert world.branches()["loopwright/fix-1"] == moved
        ci_run = next(r for r in loopwright_runs(world) if r["external_id"] == ci["id"])
        assert "closed unmerged" in ci_run["output"]["summary"]

        third = ask()
        assert third["status"] == "verified", third
        states = sorted(p["state"] for p in _fix_pulls(world))
        assert states == ["closed", "open"]
        world.github.assert_no_rejections()


def test_human_commit_on_the_fix_branch_is_not_pushed_over(tmp_path):
    with app_world(tmp_path, CORRECT) as world:
        human = world.push_commit(
            "loopwright/fix-1", {"invoice/notes.txt": "my own attempt\n"}, parent=world.head_sha
        )
        answer = world.deliver("issue_comment", world.comment_payload("/loopwright fix"))
        mission = world.wait(answer.json()["mission"])
        assert mission["status"] == "verified", mission
        assert world.branches()["loopwright/fix-1"] == human
        assert world.github.requests_for("pulls/create") == []
        comments = [c["body"] for c in world.github.comments(REPO, world.pr_number)]
        assert any("someone else" in c and "loopwright/fix-1" in c for c in comments), comments


# -- 27. rate limits -------------------------------------------------------------------------


def test_rate_limited_writes_are_retried_and_the_fix_still_lands(tmp_path):
    with app_world(tmp_path, CORRECT) as world:
        fake = world.github
        fake.inject_rate_limit("checks/create", kind="retry_after", retry_after=1)
        fake.inject_rate_limit("pulls/create", kind="primary", reset_in=1)
        answer = world.deliver("check_run", world.check_run_payload())
        mission = world.wait(answer.json()["mission"])
        assert mission["status"] == "verified", mission
        assert len(_fix_pulls(world)) == 1
        for operation, first_status in (("checks/create", 429), ("pulls/create", 403)):
            calls = fake.requests_for(operation)
            assert [c.status for c in calls] == [first_status, 201], operation
        assert all(i.hits == 1 for i in fake.injections)


# -- 45. malformed but correctly signed content; cursors and ids out of range ---------------


def _signed(world: World, body: bytes, **headers: str | bytes) -> httpx.Response:
    sent: dict[str, str | bytes] = {
        "X-GitHub-Event": "check_run",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(body),
        "Content-Type": "application/json",
        **headers,
    }
    return world.client.post("/webhooks/github", content=body, headers=sent)


def _check_run_text(world: World) -> str:
    return json.dumps(world.check_run_payload())


def _nested(depth: int) -> bytes:
    return b'{"action": "completed", "x": ' + b"[" * depth + b"]" * depth + b"}"


MALFORMED_BODIES = {
    "100k-brackets": (lambda w: b"[" * 100_000, "nests too deeply"),
    "100k-deep-in-an-object": (lambda w: _nested(100_000), "nests too deeply"),
    "65-levels": (lambda w: _nested(65), "more than 64 levels deep"),
    "invalid-utf8": (lambda w: b'{"action": "\xff\xfe completed"}', "not UTF-8"),
    "utf8-encoded-surrogate": (lambda w: b'{"action": "\xed\xa0\x80"}', "not UTF-8"),
    "utf16-body": (lambda w: _check_run_text(w).encode("utf-16"), "not UTF-8"),
    "surrogate-escape-in-action": (
        lambda w: _check_run_text(w).replace('"completed"', '"\\ud800"', 1).encode(),
        "lone surrogate",
    ),
    "surrogate-escape-in-repo-name": (
        lambda w: _check_run_text(w).replace('"full_name": "', '"full_name": "\\udfff').encode(),
        "lone surrogate",
    ),
    "surrogate-escape-in-a-key": (
        lambda w: _check_run_text(w).replace('"action"', '"\\udbff\\udbff"', 1).encode(),
        "lone surrogate",
    ),
    "nul-escape": (
        lambda w: _check_run_text(w).replace('"completed"', '"comp\\u0000leted"', 1).encode(),
        "NUL",
    ),
    "installation-id-beyond-64-bits": (
        lambda w: _check_run_text(w).replace(f'"id": {INSTALLATION}', f'"id": {10**30}').encode(),
        "64 bits",
    ),
    "5000-digit-number": (lambda w: b'{"action": 1' + b"0" * 5000 + b"}", "not JSON"),
}


@pytest.mark.parametrize("case", list(MALFORMED_BODIES))
def test_signed_malformed_body_is_a_4xx_with_a_reason_and_nothing_stored(idle, case):
    """SECURITY 45: deep nesting, invalid UTF-8, lone surrogates, NUL, huge numbers."""
    make, reason = MALFORMED_BODIES[case]
    missions = mission_count(idle)
    delivery = str(uuid.uuid4())
    answer = _signed(idle, make(idle), **{"X-GitHub-Delivery": delivery})
    assert answer.status_code == 400, answer.text
    assert reason in answer.json()["error"]
    assert delivery_row(idle, delivery) is None
    assert mission_count(idle) == missions


MALFORMED_HEADERS = {
    "event-latin1-bytes": {"X-GitHub-Event": b"check_run\xff"},
    "event-high-bytes-only": {"X-GitHub-Event": bytes(range(0x80, 0x100))},
    "event-utf8-surrogate-bytes": {"X-GitHub-Event": b"check_\xed\xa0\x80run"},
    "delivery-high-bytes": {"X-GitHub-Delivery": b"\x80\x81\xfe\xff"},
    "delivery-surrogate-bytes": {"X-GitHub-Delivery": b"72d3162e-\xed\xb2\x80"},
    "delivery-too-long": {"X-GitHub-Delivery": "a" * 5000},
    "delivery-with-space": {"X-GitHub-Delivery": "a b"},
}


@pytest.mark.parametrize("case", list(MALFORMED_HEADERS))
def test_signed_delivery_with_malformed_headers_is_a_4xx_and_nothing_stored(idle, case):
    """SECURITY 45: bytes 0x80-0xff and surrogate-encoding bytes in X-GitHub-* headers."""
    missions = mission_count(idle)
    before = idle.db("SELECT count(*) FROM deliveries")
    answer = _signed(idle, _check_run_text(idle).encode(), **MALFORMED_HEADERS[case])
    assert answer.status_code == 400, answer.text
    assert "must be printable ASCII" in answer.json()["error"]
    assert idle.db("SELECT count(*) FROM deliveries") == before
    assert mission_count(idle) == missions


@pytest.mark.parametrize("signature", [b"sha256=\xff\xfe", ("sha256=" + "é" * 64).encode()])
def test_non_ascii_signature_is_401_not_500(idle, signature):
    body = _check_run_text(idle).encode()
    before = idle.db("SELECT count(*) FROM deliveries")
    answer = _signed(idle, body, **{"X-Hub-Signature-256": signature})
    assert answer.status_code == 401, answer.text
    assert "X-Hub-Signature-256" in answer.json()["error"]
    assert idle.db("SELECT count(*) FROM deliveries") == before


def test_a_well_formed_delivery_next_to_them_is_still_accepted(idle):
    """The control: the same helper with a plain payload is 2xx and recorded."""
    delivery = str(uuid.uuid4())
    answer = _signed(idle, _nested(60), **{"X-GitHub-Delivery": delivery, "X-GitHub-Event": "ping"})
    assert answer.status_code == 200, answer.text
    assert delivery_row(idle, delivery) is not None


@pytest.fixture(scope="module")
def finished_mission(idle: World) -> str:
    answer = idle.deliver("check_run", idle.check_run_payload())
    assert answer.status_code == 202, answer.text
    mission_id = str(answer.json()["mission"])
    idle.wait(mission_id)
    # The mission ended `ignored` (auto_fix is off) before writing a log; give it one to
    # resume from.
    store = Store(database_url(idle.settings))
    try:
        for seq in (1, 2, 3):
            store.append_event(Event(seq, time.time(), mission_id, "stage", "prepare"))
    finally:
        store.close()
    return mission_id


def _sse_event_ids(world: World, url: str, headers: dict[str, str] | None = None) -> list[int]:
    with world.client.stream("GET", url, headers=headers or {}, timeout=15) as answer:
        assert answer.status_code == 200, answer.read()
        text = "".join(answer.iter_text())
    assert "event: end" in text
    return [int(line[4:]) for line in text.splitlines() if line.startswith("id: ")]


CURSORS = [str(2**64), str(2**63), str(10**30), "-1", "abc", "9" * 5000, "1e3", ""]


@pytest.mark.parametrize("cursor", CURSORS, ids=[c[:12] or "<empty>" for c in CURSORS])
def test_out_of_range_last_event_id_is_clamped_not_a_500(idle, finished_mission, cursor):
    """SECURITY 45: Last-Event-ID beyond 64 bits, negative or not a number."""
    url = f"/missions/{finished_mission}/events"
    everything = _sse_event_ids(idle, url)
    assert everything, "the mission has events to resume from"
    ids = _sse_event_ids(idle, url, {"Last-Event-ID": cursor})
    huge = cursor.isdigit() and (len(cursor) > 19 or int(cursor) >= 2**63)
    assert ids == ([] if huge else everything)


@pytest.mark.parametrize("after", [2**64, 10**30, -1, -(2**70)])
def test_out_of_range_after_is_clamped_on_sse_and_json_api(idle, finished_mission, after):
    everything = idle.client.get(f"/api/missions/{finished_mission}/events").json()
    answer = idle.client.get(f"/api/missions/{finished_mission}/events", params={"after": after})
    assert answer.status_code == 200, answer.text
    assert answer.json() == ([] if after > 0 else everything)
    ids = _sse_event_ids(idle, f"/missions/{finished_mission}/events?after={after}")
    assert ids == ([] if after > 0 else [e["seq"] for e in everything])


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("/api/missions/{id}/events?after=abc", 400),
        ("/missions/{id}/events?after=abc", 400),
        ("/api/missions?limit=abc", 400),
        ("/api/missions?status=bogus", 400),
        ("/api/missions?status=%ED%A0%80", 400),
        ("/api/missions?repo=%00", 400),
        ("/api/missions?repo=%ED%A0%80", 400),
        ("/missions/stream?status=bogus", 400),
        ("/missions/stream?repo=a%00/b", 400),
        ("/api/missions/%00", 404),
        ("/api/missions/%ED%A0%80", 404),
        ("/api/missions/%ff/events", 404),
        ("/api/missions/" + "a" * 5000, 404),
        ("/missions/%ED%A0%80/events", 404),
        ("/missions/%00", 404),
        ("/missions/..%2F..%2Fetc/screenshot.png", 404),
        ("/missions/%C3%A9/screenshot.png", 404),
    ],
)
def test_every_api_parameter_out_of_range_is_a_4xx(idle, finished_mission, url, status):
    answer = idle.client.get(url.replace("{id}", finished_mission))
    assert answer.status_code == status, answer.text


@pytest.mark.parametrize("limit", [10**30, -(10**30), 0])
def test_limits_out_of_range_are_clamped(idle, finished_mission, limit):
    answer = idle.client.get("/api/missions", params={"limit": limit})
    assert answer.status_code == 200, answer.text
    assert 1 <= len(answer.json()) <= 500


def test_dashboard_filters_with_odd_values_render(idle, finished_mission):
    answer = idle.client.get("/?status=%ED%A0%80&repo=a%00b")
    assert answer.status_code == 200, answer.text


# -- 46. model prose on GitHub cannot close issues, mention anyone or break out of its quote ---

HOSTILE_SUMMARY = (
    "Fixes #1, closes octo/other#2, RESOLVED https://github.com/acme/invoice/issues/3\r"
    "# Approved by @acme/security\n"
    "cc @octocat\n\n"
    "| a | b |\n| --- | --- |\n"
    "```\n</details><img src=x onerror=alert(1)>\n```"
)
HOSTILE_PLAN = tool(
    "update_plan",
    items=[
        {"step": "fix the discount, Closes GH-4 @maintainer", "status": "done"},
        {"step": "### fixed https://github.com/acme/invoice/pull/5", "status": "done"},
    ],
)
LIVE_CLOSING = re.compile(
    r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b[\s:]*"
    r"(?:#\d|GH-\d|[\w.-]+/[\w.-]+#\d|https?://\S+/(?:issues|pull)/\d)",
    re.IGNORECASE,
)
LIVE_MENTION = re.compile(r"(?<![\w`])@[A-Za-z0-9][\w-]*(?:/[\w-]+)?")


def test_model_prose_in_the_pr_and_commit_cannot_close_mention_or_escape(tmp_path):
    """SECURITY 46, through the App and the OpenAPI-checked fake GitHub."""
    hostile = [
        step(HOSTILE_PLAN),
        step(EDIT),
        step(tool("run_command", command="python -m pytest -q")),
        step(tool("finish", summary=HOSTILE_SUMMARY)),
    ]
    with app_world(tmp_path, hostile) as world:
        answer = world.deliver("check_run", world.check_run_payload())
        mission = world.wait(answer.json()["mission"])
        assert mission["status"] == "verified", mission
        (created,) = world.github.requests_for("pulls/create")
        title, body = created.body["title"], created.body["body"]
        commit = subprocess.run(
            ["git", "-C", str(world.bare), "log", "-1", "--format=%B", "loopwright/fix-1"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        comments = [c["body"] for c in world.github.comments(REPO, world.pr_number)]
        for name, text in {"title": title, "body": body, "commit": commit}.items():
            assert LIVE_CLOSING.search(text) is None, (name, text)
            assert LIVE_MENTION.search(text) is None, (name, text)
        for text in comments:
            assert LIVE_CLOSING.search(text) is None, text
        assert "\n" not in title and title.startswith("F") and len(title) < 80
        lines = body.splitlines()
        # Only Loopwright's own headings; the model's `#` and `###` lines stay quoted.
        headings = [line for line in lines if line.startswith("#")]
        assert all(
            h.startswith(("## ✅", "### Plan", "### Changes", "### Verification", "### Cost"))
            for h in headings
        )
        assert not any(line.startswith(("|", "```", "<")) and "Approved" in line for line in lines)
        start = lines.index("The model's summary, as it wrote it:") + 2
        quoted = lines[start : lines.index("", start)]
        assert any("Approved by" in line for line in quoted)
        assert all(line.startswith(">") for line in quoted)
        assert "<img" not in body and "</details>" not in body
        # The model's plan is in the body, quoted and inert.
        assert "### Plan" in body and "fix the discount, C" in body
