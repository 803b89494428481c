"""The App answers at once: 👀 on the command, one tracking comment before the sandbox starts,
edited through the stages and ending with the outcome (issue 12, item 1)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from loopwright.config import Settings
from loopwright.events import STAGES
from loopwright.sandbox.base import Sandbox
from loopwright.sandbox.local import LocalProvider
from tests.conftest import SUITE_PATH
from tests.integration.app_harness import REPO, World, app_world
from tests.integration.test_mission_caps import NEVER_FINISHES
from tests.scenarios import CORRECT

pytestmark = pytest.mark.xdist_group("tracking_comment")


@pytest.fixture(autouse=True)
def venv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # The local sandbox runs the example's tests with the python on PATH.
    monkeypatch.setenv("PATH", f"{SUITE_PATH}:{os.environ['PATH']}")


class RecordingProvider(LocalProvider):
    """The local provider, noting how many requests the fake GitHub had seen when each
    sandbox was created."""

    world: World | None = None

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.sandbox_limits)
        self.seen_at_create: list[int] = []
        self._lock = threading.Lock()

    def create(self, mission_id: str, tree: Path, *, network: bool) -> Sandbox:
        assert self.world is not None
        with self._lock:
            self.seen_at_create.append(len(self.world.github.requests))
        return super().create(mission_id, tree, network=network)


def _ops(world: World) -> list[str]:
    return [str(r.operation_id) for r in world.github.requests]


def _edits(world: World) -> list[str]:
    return [r.body["body"] for r in world.github.requests_for("issues/update-comment")]


def _checklist(body: str) -> list[str]:
    return [line for line in body.splitlines() if line.startswith("- [")]


def _tracking(world: World, mission: dict[str, Any]) -> dict[str, Any]:
    comment_id = mission["tracking_comment_id"]
    assert comment_id, mission
    (comment,) = [c for c in world.github.comments(REPO, world.pr_number) if c["id"] == comment_id]
    return comment


def test_a_writers_command_gets_eyes_and_a_tracking_comment_that_ends_with_the_pr(tmp_path):
    providers: list[RecordingProvider] = []

    def factory(settings: Settings) -> RecordingProvider:
        providers.append(RecordingProvider(settings))
        return providers[-1]

    env = {"LOOPWRIGHT_COMMENT_INTERVAL_S": "0.05"}
    with app_world(tmp_path, CORRECT, env=env, app_kwargs={"provider_factory": factory}) as world:
        (provider,) = providers
        provider.world = world
        payload = world.comment_payload("/loopwright fix")
        answer = world.deliver("issue_comment", payload)
        mission = world.wait(answer.json()["mission"])
        assert mission["status"] == "verified", mission["message"]

        ops = _ops(world)
        react = ops.index("reactions/create-for-issue-comment")
        posted = ops.index("issues/create-comment")
        # 👀 first, then the tracking comment, both before any sandbox exists.
        assert react < posted < provider.seen_at_create[0]
        assert ops.count("issues/create-comment") == 1
        reaction = world.github.requests[react]
        assert reaction.body == {"content": "eyes"}
        assert reaction.path.endswith(f"/comments/{payload['comment']['id']}/reactions")
        first = world.github.requests[posted].body["body"]
        assert f"Loopwright is fixing `{world.head_sha[:7]}` for @maintainer" in first
        assert f"[Watch it live](http://loopwright.test/missions/{mission['id']})" in first
        assert _checklist(first) == [f"- [ ] **{stage}**" for stage in STAGES]

        # Edited in place through the stages: some edit shows a stage in progress, and the
        # states only move forward.
        edits = _edits(world)
        assert len(edits) >= 2
        assert any("⏳" in body for body in edits)
        done_counts = [sum("✅" in line for line in _checklist(b)) for b in edits]
        assert done_counts == sorted(done_counts)

        final = _tracking(world, mission)["body"]
        assert final == edits[-1]
        assert _checklist(final) == [
            "- [x] ✅ **prepare**: reproduced",
            "- [x] ✅ **plan**: done",
            "- [x] ✅ **loop**: finished",
            "- [x] ✅ **verify**: verified",
            "- [x] ✅ **deliver**: delivered",
        ]
        assert f"**Outcome:** ✅ verified fix in [this pull request]({mission['pr_url']})" in final
        result = mission["result"]
        tokens = sum(u["prompt_tokens"] + u["completion_tokens"] for u in result["usage"].values())
        assert f"· {tokens:,} tokens · **tier reached:** `{result['final_tier']}`" in final
        # The tracking comment is all the App said on the pull request.
        bot = [
            c for c in world.github.comments(REPO, world.pr_number) if c["user"]["type"] == "Bot"
        ]
        assert [c["id"] for c in bot] == [mission["tracking_comment_id"]]
        world.github.assert_no_rejections()


def test_budget_exceeded_cap_and_non_writer_each_get_the_right_answer(tmp_path):
    env = {
        "LOOPWRIGHT_MODEL_PRICES": "nano=1000000/1000000",
        "LOOPWRIGHT_MAX_COST_USD": "0.5",
        "LOOPWRIGHT_MAX_ATTEMPTS": "1",
        # Far longer than any mission: every stage change before the end is coalesced away.
        "LOOPWRIGHT_COMMENT_INTERVAL_S": "86400",
    }
    with app_world(tmp_path, NEVER_FINISHES, env=env) as world:
        answer = world.deliver("issue_comment", world.comment_payload("/loopwright fix"))
        mission = world.wait(answer.json()["mission"])
        assert mission["status"] == "budget_exceeded", mission["message"]
        events = world.client.get(f"/api/missions/{mission['id']}/events").json()
        changes = [e for e in events if e["type"] == "stage" and e["status"] != "detected"]
        assert len(changes) >= 4
        edits = _edits(world)
        assert len(edits) == 1  # only the final one
        final = _tracking(world, mission)["body"]
        assert final == edits[-1]
        assert "**Outcome:** ⚠️ Budget exceeded; nothing was delivered" in final
        assert "cost limit reached" in final
        assert f"**Cost:** ${mission['cost_usd']:.2f}" in final
        assert "**tier reached:** `nano`" in final
        assert "- [x] ✅ **prepare**: reproduced" in final
        assert "- [ ] **verify**" in final and "- [ ] **deliver**" in final

        # A writer over the attempt cap: 👀 and one comment that says why.
        before = len(world.github.requests)
        over = world.comment_payload("/loopwright fix")
        answer = world.deliver("issue_comment", over)
        capped = world.wait(answer.json()["mission"])
        assert capped["status"] == "ignored"
        ops = [str(r.operation_id) for r in world.github.requests[before:]]
        assert ops.count("reactions/create-for-issue-comment") == 1
        assert ops.count("issues/create-comment") == 1
        assert "issues/update-comment" not in ops and "checks/create" not in ops
        why = _tracking(world, capped)["body"]
        assert "already made 1 attempts" in why and "@maintainer" in why

        # A non-writer: today's single refusal, no reaction, no tracking comment.
        before = len(world.github.requests)
        answer = world.deliver("issue_comment", world.comment_payload("/loopwright fix", "reader"))
        refused = world.wait(answer.json()["mission"])
        assert refused["status"] == "refused"
        assert refused["tracking_comment_id"] is None
        writes = [
            str(r.operation_id)
            for r in world.github.requests[before:]
            if r.method in ("POST", "PATCH")
            and r.operation_id != "apps/create-installation-access-token"
        ]
        assert writes == ["issues/create-comment"]
        refusal = world.github.comments(REPO, world.pr_number)[-1]["body"]
        assert "only people with write access" in refusal and "@reader" in refusal
        world.github.assert_no_rejections()
