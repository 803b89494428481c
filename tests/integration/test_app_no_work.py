"""Deliveries that must start no work start none (SECURITY.md checks 1, 6, 7, 24 and 30).

The App runs with auto_fix on, a sandbox provider that records every sandbox it is asked
for (and otherwise is the real local provider), a fake GitHub and a scripted model. Each
case below must end with no mission row or a mission that ends without a sandbox, a model
call or a pull request, exactly as SECURITY.md words the criterion.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from loopwright.config import Settings
from loopwright.github.gitops import BOT_EMAIL
from loopwright.sandbox.base import Sandbox
from loopwright.sandbox.local import LocalProvider
from tests.conftest import SUITE_PATH, step, tool
from tests.integration.app_harness import (
    REPO,
    WEBHOOK_EXAMPLES,
    World,
    _fixture,
    _rewrite,
    app_world,
    sign,
)
from tests.scenarios import CORRECT, PLAN


class RecordingProvider(LocalProvider):
    """The local provider, remembering which missions asked it for a sandbox."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.sandbox_limits)
        self.created: list[str] = []
        self._lock = threading.Lock()

    def create(self, mission_id: str, tree: Path, *, network: bool) -> Sandbox:
        with self._lock:
            self.created.append(mission_id)
        return super().create(mission_id, tree, network=network)


@pytest.fixture(autouse=True)
def venv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # The local sandbox runs the example's tests with the python on PATH.
    monkeypatch.setenv("PATH", f"{SUITE_PATH}:{os.environ['PATH']}")


def armed_world(
    tmp: Path, steps: list[dict[str, Any]], **kwargs: Any
) -> tuple[AbstractContextManager[World], list[RecordingProvider]]:
    """An App that would fix a red check at once (auto_fix on), with a recording provider."""
    providers: list[RecordingProvider] = []

    def factory(settings: Settings) -> RecordingProvider:
        providers.append(RecordingProvider(settings))
        return providers[-1]

    return app_world(tmp, steps, app_kwargs={"provider_factory": factory}, **kwargs), providers


@pytest.fixture(scope="module")
def armed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, RecordingProvider]]:
    saved = os.environ["PATH"]
    os.environ["PATH"] = f"{SUITE_PATH}:{saved}"
    try:
        context, providers = armed_world(tmp_path_factory.mktemp("armed"), CORRECT)
        with context as world:
            (provider,) = providers
            yield world, provider
    finally:
        os.environ["PATH"] = saved


def assert_no_work(world: World, provider: RecordingProvider) -> None:
    assert world.db("SELECT count(*) FROM missions") == [(0,)]
    assert provider.created == []
    assert world.model.requests == []
    assert world.github.requests_for("pulls/create") == []


# -- 1. a bad signature: 401, no mission row, no delivery row, no sandbox ----------------------


@pytest.mark.parametrize(
    "signature",
    [None, "sha256=" + "0" * 64, "sha1=0123456789abcdef0123456789abcdef01234567", "reserialized"],
    ids=["missing", "wrong", "sha1-only", "reserialized"],
)
def test_bad_signature_stores_nothing_and_asks_for_no_sandbox(armed, signature):
    world, provider = armed
    payload = world.check_run_payload()
    raw = json.dumps(payload).encode()
    delivery = str(uuid.uuid4())
    headers = {"X-GitHub-Event": "check_run", "X-GitHub-Delivery": delivery,
               "Content-Type": "application/json"}  # fmt: skip
    body = raw
    if signature == "reserialized":
        body = json.dumps(payload, indent=2).encode()
        headers["X-Hub-Signature-256"] = sign(raw)
    elif signature is not None:
        headers["X-Hub-Signature-256"] = signature
    answer = world.client.post("/webhooks/github", content=body, headers=headers)
    assert answer.status_code == 401, answer.text
    assert world.db("SELECT count(*) FROM deliveries WHERE id = ?", delivery) == [(0,)]
    assert_no_work(world, provider)


# -- 6. events it does not act on: 2xx, no mission, even with auto_fix on ----------------------

_EXAMPLES = json.loads(WEBHOOK_EXAMPLES.read_text())
_CI_EVENTS = ("check_run", "check_suite", "workflow_run")


def _not_acted_on() -> list[Any]:
    """Every published example payload except the CI failures that Loopwright fixes."""
    cases = []
    for entry in _EXAMPLES:
        event = entry["name"]
        for index, example in enumerate(entry["examples"]):
            subject = example.get(event) if isinstance(example.get(event), dict) else {}
            failed = example.get("action") == "completed" and subject.get("conclusion") not in (
                None, "success", "neutral", "skipped",
            )  # fmt: skip
            if event in _CI_EVENTS and failed:
                continue
            cases.append(
                pytest.param(event, example, id=f"{event}.{example.get('action')}[{index}]")
            )
    return cases


NOT_ACTED_ON = _not_acted_on()


def test_every_event_it_does_not_act_on_gets_a_2xx_and_no_mission(armed):
    world, provider = armed
    assert len(NOT_ACTED_ON) > 300
    answers = []
    for case in NOT_ACTED_ON:
        event, example = case.values
        delivery = str(uuid.uuid4())
        answer = world.deliver(event, example, delivery=delivery)
        answers.append((case.id, answer.status_code, answer.json().get("status")))
        (decision,) = world.db("SELECT decision FROM deliveries WHERE id = ?", delivery)[0]
        assert decision.startswith("ignored"), (case.id, decision)
    assert [a for a in answers if not (200 <= a[1] < 300 and a[2] == "ignored")] == []
    assert_no_work(world, provider)
    world.github.assert_no_rejections()


# -- 7. non-writers: a polite refusal, no sandbox, status refused ------------------------------


@pytest.mark.parametrize("role", ["read", "triage", "none", "stranger"])
def test_command_from_a_non_writer_is_refused_without_a_sandbox(tmp_path, role):
    user = f"user-{role}"
    context, providers = armed_world(tmp_path, CORRECT)
    with context as world:
        if role != "stranger":  # a stranger is no collaborator at all: GitHub answers 404
            world.github.set_permission(REPO, user, role)
        answer = world.deliver("issue_comment", world.comment_payload("/loopwright fix", user))
        assert answer.status_code == 202, answer.text
        mission = world.wait(answer.json()["mission"])
        assert mission["status"] == "refused", mission
        comments = [c["body"] for c in world.github.comments(REPO, world.pr_number)]
        assert any(f"@{user}" in c and "write access" in c for c in comments), comments
        assert providers[0].created == []
        assert world.model.requests == []
        assert world.github.requests_for("pulls/create") == []
        assert world.branches().keys() == {"main", "feature"}


# -- 24. a red check on a commit Loopwright authored -------------------------------------------

BOT = f"loopwright[bot] <{BOT_EMAIL}>"


def _loopwright_commit_on_the_pr_head(world: World) -> str:
    """Loopwright pushed a commit to the pull request's own branch (the Action's `commit`
    delivery does this); the pull request's head is now that commit."""
    ours = world.push_commit("feature", {"invoice/x.py": "X = 1\n"}, author=BOT,
                             message="Fix the discount")  # fmt: skip
    world.move_pull_head(world.pr_number, ours)
    world.head_sha = ours
    return ours


def _assert_ignored_as_ours(world: World, provider: RecordingProvider, answer: Any) -> None:
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "ignored"
    assert "authored by Loopwright" in answer.json()["reason"]
    assert_no_work(world, provider)


def test_red_check_suite_on_a_commit_loopwright_authored_starts_no_mission(tmp_path):
    context, providers = armed_world(tmp_path, CORRECT)
    with context as world:
        _loopwright_commit_on_the_pr_head(world)
        payload = _rewrite(_fixture("check_suite.completed.evil_loopwright_commit"), world)
        assert payload["check_suite"]["head_commit"]["id"] == world.head_sha
        answer = world.deliver("check_suite", payload)
        _assert_ignored_as_ours(world, providers[0], answer)


def test_red_check_run_on_a_commit_loopwright_authored_starts_no_mission(tmp_path):
    """A check_run names no author: the worker reads the commit back before any sandbox."""
    context, providers = armed_world(tmp_path, CORRECT)
    with context as world:
        ours = _loopwright_commit_on_the_pr_head(world)
        answer = world.deliver("check_run", world.check_run_payload())
        assert answer.status_code == 202, answer.text
        mission = world.wait(answer.json()["mission"])
        assert mission["status"] == "ignored", mission
        assert f"commit {ours[:7]} was authored by Loopwright" in mission["message"]
        assert providers[0].created == []
        assert world.model.requests == []
        assert world.github.requests_for("pulls/create") == []
        assert world.github.requests_for("checks/create") == []
        assert world.github.requests_for("repos/get-commit"), "the commit was never read back"


def test_red_check_run_on_a_human_commit_still_starts_a_mission(tmp_path):
    """The read-back must not swallow ordinary red checks: a human's commit is fixed."""
    context, providers = armed_world(tmp_path, CORRECT)
    with context as world:
        answer = world.deliver("check_run", world.check_run_payload())
        assert answer.status_code == 202, answer.text
        mission = world.wait(answer.json()["mission"])
        assert mission["status"] == "verified", mission
        assert providers[0].created


# -- 30. a model that claims success while the tests still fail ---------------------------------

CLAIMS_SUCCESS = [
    step(PLAN),
    step(tool("write_file", path="invoice/notes.py", content="# looked at the discount\n")),
    step(tool("run_command", command="python -m pytest -q")),
    step(tool("finish", summary="Fixed the discount bug; all tests pass now")),
    # The loop refuses a finish right after a red run once; the model insists.
    step(tool("finish", summary="Fixed the discount bug; all tests pass now")),
]


def test_model_claiming_success_while_tests_fail_gets_no_pull_request(tmp_path):
    context, providers = armed_world(tmp_path, CLAIMS_SUCCESS)
    with context as world:
        branches = world.branches()
        answer = world.deliver("check_run", world.check_run_payload())
        assert answer.status_code == 202, answer.text
        mission = world.wait(answer.json()["mission"])
        assert mission["status"] == "unverified", mission
        assert providers[0].created, "the mission never reached a sandbox"
        # The model's own test run was red, and it said otherwise.
        assert "failed" in json.dumps(world.model.requests[-1]["messages"])
        assert world.github.requests_for("pulls/create") == []
        assert world.branches() == branches
        assert [p["number"] for p in world.github.pulls(REPO)] == [world.pr_number]
        runs = [r for r in world.github.check_runs(REPO) if r["name"] == "Loopwright"]
        assert runs, "no check run reported the mission"
        assert all(r["conclusion"] != "success" for r in runs)
        world.github.assert_no_rejections()
