"""How a mission ends when one of its stages meets a patch the diff parser refuses: with
status `error`, the parser's message and the usual `error` and `done` events, never with a
traceback out of `run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopwright.agent.model import OpenAIModel
from loopwright.config import Settings
from loopwright.events import EventBus, EventList
from loopwright.missions.base import Mission
from loopwright.missions.result import MissionResult, outcome_block
from loopwright.missions.trees import changed_files
from loopwright.redaction import Redactor
from loopwright.sandbox.factory import LocalSandboxConfig, get_provider
from loopwright.store.missions import MissionClaim, MissionTakenOver

# The hunk header counts three lines of each side; the hunk has one.
UNPARSEABLE = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@\n-a\n+b\n"


class PatchReadingMission(Mission[MissionResult]):
    """A mission whose verify stage reads which files its patch changes, as a fix's does."""

    patch = UNPARSEABLE

    def stages(self) -> None:
        self.events.enter("verify")
        self.result.patch = self.patch
        changed_files(self.patch)
        self.result.status = "verified"


def run_mission(
    kind: type[Mission[MissionResult]], mission: str, tmp_path: Path, sink: EventList | None = None
) -> tuple[MissionResult, EventList, Settings]:
    """Run a mission of `kind` on local sandboxes under `tmp_path/boxes`; its result, its
    events (also in `sink` as they come) and its settings."""
    settings = Settings(sandbox="local", data_dir=tmp_path / "data")
    sink = sink if sink is not None else EventList()
    (tmp_path / "boxes").mkdir()
    provider = get_provider(settings, LocalSandboxConfig(base_dir=tmp_path / "boxes"))
    model = OpenAIModel(settings)
    try:
        result = kind(
            MissionResult(mission=mission, status="error"),
            settings=settings,
            provider=provider,
            model=model,
            events=EventBus(mission, [sink], Redactor()),
        ).run()
    finally:
        model.close()
        provider.close()
    return result, sink, settings


def test_a_patch_the_parser_refuses_ends_the_mission_with_an_error(tmp_path: Path) -> None:
    result, sink, settings = run_mission(PatchReadingMission, "m1", tmp_path)

    assert result.status == "error"
    assert result.message == "malformed diff: Hunk is shorter than expected"
    (error,) = sink.of_type("error")
    assert error.fields["kind"] == "PatchError"
    (done,) = sink.of_type("done")
    assert (done.fields["status"], done.fields["message"]) == ("error", result.message)
    saved = json.loads((settings.data_dir / "missions" / "m1" / "result.json").read_text())
    assert saved["status"] == "error"
    # The terminal's block after the verdict reads the same patch; it ends the same way.
    block = outcome_block(mission="m1", summary="", patch=result.patch, patch_path=None)
    assert "(no diffstat: malformed diff:" in block


class DefectiveMission(Mission[MissionResult]):
    """A mission whose prepare stage opens a sandbox and then meets a failure no stage turns
    into a message of its own: a walk that recurses without end."""

    def stages(self) -> None:
        self.events.enter("prepare")
        tree = self.workdir / "tree"
        tree.mkdir(parents=True)
        self.sandboxes.open(tree, network=False)
        _descend(0)


def _descend(level: int) -> int:
    return _descend(level + 1) + 1


def test_an_unexpected_failure_still_ends_the_mission_with_a_result_and_done(
    tmp_path: Path,
) -> None:
    """Before, the exception left `run`: no `error` or `done` event, and `result.json` said
    `error` with an empty message."""
    result, sink, settings = run_mission(DefectiveMission, "m2", tmp_path)

    assert result.status == "error"
    assert result.message == (
        "Loopwright failed unexpectedly (RecursionError: maximum recursion depth exceeded); "
        "this is a defect of Loopwright's: please report it with the mission's events"
    )
    (error,) = sink.of_type("error")
    assert error.fields["kind"] == "RecursionError"
    (done,) = sink.of_type("done")
    assert (done.fields["status"], done.fields["message"]) == ("error", result.message)
    saved = json.loads((settings.data_dir / "missions" / "m2" / "result.json").read_text())
    assert (saved["status"], saved["message"]) == ("error", result.message)
    assert list((tmp_path / "boxes").iterdir()) == []


class TakenOverMission(Mission[MissionResult]):
    """A mission whose run learns, at a store write, that another worker took it over."""

    def stages(self) -> None:
        self.events.enter("prepare")
        tree = self.workdir / "tree"
        tree.mkdir(parents=True)
        self.sandboxes.open(tree, network=False)
        raise MissionTakenOver(MissionClaim("m3", "worker-b", 2))


def test_a_run_another_worker_took_over_stops_without_a_result_of_its_own(
    tmp_path: Path,
) -> None:
    """Not a failure to report: the run that replaced it reports. The exception leaves
    `run` (the queue logs it), after the sandboxes are removed."""
    sink = EventList()
    with pytest.raises(MissionTakenOver):
        run_mission(TakenOverMission, "m3", tmp_path, sink)
    assert sink.of_type("error") == [] and sink.of_type("done") == []
    assert [e.fields["status"] for e in sink.of_type("stage")] == ["started"]
    assert list((tmp_path / "boxes").iterdir()) == []
