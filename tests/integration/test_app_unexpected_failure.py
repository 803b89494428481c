"""A mission that meets a failure no stage turns into a message of its own (a defect of
Loopwright's) still ends as one: stored with its message, `done` last, and the check run
completed as a failure rather than left in progress."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loopwright.config import Settings
from loopwright.sandbox.base import Sandbox
from loopwright.sandbox.local import LocalProvider
from tests.conftest import SUITE_PATH
from tests.integration.app_harness import REPO, app_world
from tests.scenarios import CORRECT


class DefectiveProvider(LocalProvider):
    """The local provider with a defect: asked for a sandbox, it raises what no backend
    should (not a `SandboxError`)."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.sandbox_limits)

    def create(self, mission_id: str, tree: Path, *, network: bool) -> Sandbox:
        raise KeyError("slot")


def test_a_mission_failing_unexpectedly_completes_its_check_run_as_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{SUITE_PATH}:{os.environ['PATH']}")
    kwargs = {"provider_factory": DefectiveProvider}
    with app_world(tmp_path, CORRECT, app_kwargs=kwargs) as world:
        answer = world.deliver("check_run", world.check_run_payload())
        mission_id = answer.json()["mission"]
        mission = world.wait(mission_id)
        assert mission["status"] == "error"
        assert mission["message"].startswith(
            "Loopwright failed unexpectedly (KeyError: 'slot'); this is a defect"
        )
        runs = [r for r in world.github.check_runs(REPO) if r["name"] == "Loopwright"]
        assert [(r["status"], r["conclusion"]) for r in runs] == [("completed", "failure")]
        stored = world.client.get(f"/api/missions/{mission_id}/events").json()
        assert [e["type"] for e in stored][-2:] == ["error", "done"]
        assert stored[-2]["kind"] == "KeyError"
        assert world.model.requests == []
        assert world.github.requests_for("pulls/create") == []
