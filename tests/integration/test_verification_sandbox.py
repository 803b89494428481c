"""Verification's sandbox is started while the loop runs: it is fresh, it is one of the
mission's sandboxes (closed however the mission ends), and a failed start falls back to
starting one at verification.

Missions run in-process against a real provider (local or Docker) wrapped to record every
sandbox it makes, and a scripted model server over HTTP.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import docker
import pytest

from loopwright.agent.model import OpenAIModel
from loopwright.cancellation import Cancellation
from loopwright.config import Settings
from loopwright.events import EventBus, EventList
from loopwright.missions.fix import FixMission, FixRequest
from loopwright.missions.result import MissionResult
from loopwright.redaction import Redactor
from loopwright.sandbox.base import Sandbox, SandboxError, SandboxProvider
from loopwright.sandbox.docker.container import DockerSandbox
from loopwright.sandbox.factory import get_provider
from loopwright.sandbox.local.sandbox import LocalSandbox
from tests.conftest import SUITE_PATH, step, tool
from tests.scenarios import EDIT, FINISH, PLAN, model_env

MARKER = "scratch/loop-was-here"
FRESH_TEST = f"""\
from pathlib import Path


def test_no_file_from_the_loop():
    assert not (Path(__file__).resolve().parents[1] / "{MARKER}").exists()
"""
FRESH_FILES = {".gitignore": "scratch/\n", "tests/test_fresh.py": FRESH_TEST}


class RecordingProvider:
    """A real provider that remembers each sandbox it made (and the tree it copied), and
    can refuse one create, as an engine that fails would."""

    def __init__(
        self,
        inner: SandboxProvider,
        *,
        fail_create: int | None = None,
        slow_create: tuple[int, float] | None = None,
    ) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.fail_create = fail_create
        self.slow_create = slow_create
        """(which create, seconds): that create finishes only after the delay."""
        self.calls: list[Path] = []
        self.made: list[Sandbox] = []
        self._lock = threading.Lock()

    def create(self, mission_id: str, tree: Path, *, network: bool) -> Sandbox:
        with self._lock:
            self.calls.append(tree)
            number = len(self.calls)
        if number == self.fail_create:
            raise SandboxError("the engine refused to start a container (injected)")
        sandbox = self.inner.create(mission_id, tree, network=network)
        if self.slow_create is not None and number == self.slow_create[0]:
            time.sleep(self.slow_create[1])
        with self._lock:
            self.made.append(sandbox)
        return sandbox

    def reap_abandoned(self) -> list[str]:
        return self.inner.reap_abandoned()

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # The local sandbox runs the example's tests with the python on PATH.
    monkeypatch.setenv("PATH", f"{SUITE_PATH}:/usr/local/bin:/usr/bin:/bin")


def run_mission(
    repo: Path,
    server: Any,
    tmp_path: Path,
    kind: str,
    *,
    fail_create: int | None = None,
    slow_create: tuple[int, float] | None = None,
    cancellation: Cancellation | None = None,
    extra: dict[str, str] | None = None,
) -> tuple[MissionResult, RecordingProvider, EventList]:
    settings = Settings.from_env(
        {
            **model_env(server),
            "LOOPWRIGHT_SANDBOX": kind,
            "LOOPWRIGHT_DATA_DIR": str(tmp_path / "data"),
            **(extra or {}),
        }
    )
    provider = RecordingProvider(
        get_provider(settings), fail_create=fail_create, slow_create=slow_create
    )
    model = OpenAIModel(settings)
    sink = EventList()
    request = FixRequest(source=str(repo), dry_run=True)
    try:
        result = FixMission(
            request,
            settings=settings,
            provider=provider,
            model=model,
            events=EventBus(request.mission_id, [sink], Redactor()),
            cancellation=cancellation,
        ).run()
    finally:
        model.close()
        provider.close()
    return result, provider, sink


def apply_phase(result: MissionResult) -> dict[str, Any]:
    assert result.verification is not None, result.message
    (phase,) = [p for p in result.verification["phases"] if p["phase"] == "apply"]
    return phase


def assert_all_closed(provider: RecordingProvider, kind: str) -> None:
    assert provider.made
    if kind == "local":
        local = [box for box in provider.made if isinstance(box, LocalSandbox)]
        assert len(local) == len(provider.made)
        assert all(box.closed and not Path(box.root).exists() for box in local)
    else:
        docker_boxes = [box for box in provider.made if isinstance(box, DockerSandbox)]
        assert len(docker_boxes) == len(provider.made)
        client = docker.from_env(version="auto")
        try:
            for box in docker_boxes:
                with pytest.raises(docker.errors.NotFound):
                    client.api.inspect_container(box.container_id)
        finally:
            client.close()


def test_the_verification_sandbox_holds_nothing_the_loop_wrote(
    example_repo, scripted, tmp_path, sandbox_kind, on_path
):
    repo = example_repo("python-invoice", FRESH_FILES)
    server = scripted(
        [
            step(PLAN),
            step(tool("write_file", path=MARKER, content="written by the loop\n")),
            # the guard test sees the marker in the loop's sandbox: it is not vacuous
            step(tool("run_command", command="python -m pytest -q tests/test_fresh.py")),
            step(EDIT),
            step(FINISH),
        ]
    )
    result, provider, sink = run_mission(repo, server, tmp_path, sandbox_kind)

    guard = [e for e in sink.of_type("tool_result") if e.fields.get("tool") == "run_command"]
    assert guard and guard[0].fields["exit_code"] != 0, guard
    assert result.status == "verified", result.message
    assert apply_phase(result)["sandbox"] == "started_during_loop"
    rows = {r["id"]: r["status"] for r in (result.verification or {})["rows"]}
    assert rows["tests/test_fresh.py::test_no_file_from_the_loop"] == "ok"
    # two sandboxes, both of the clean base tree: the loop's and verification's
    base = tmp_path / "data" / "missions" / result.mission / "trees" / "base"
    assert provider.calls == [base, base]
    assert_all_closed(provider, sandbox_kind)


def test_a_failed_start_in_advance_falls_back_to_a_start_at_verification(
    example_repo, scripted, tmp_path, on_path
):
    repo = example_repo("python-invoice")
    server = scripted([step(PLAN), step(EDIT), step(FINISH)])
    result, provider, _ = run_mission(repo, server, tmp_path, "local", fail_create=2)

    assert result.status == "verified", result.message
    phase = apply_phase(result)
    assert phase["sandbox"] == "started_at_verify"
    assert "the engine refused to start a container (injected)" in phase["sandbox_note"]
    assert len(provider.calls) == 3 and provider.calls[2].name == "verify-filtered"
    assert len(provider.made) == 2
    assert_all_closed(provider, "local")


def test_the_verification_sandbox_is_closed_when_the_loop_runs_out_of_budget(
    example_repo, scripted, tmp_path, on_path
):
    repo = example_repo("python-invoice")
    server = scripted([step(tool("run_command", command="true"), repeat=True)])
    result, provider, _ = run_mission(
        repo, server, tmp_path, "local", extra={"LOOPWRIGHT_MAX_STEPS": "3"}
    )

    assert result.status == "budget_exceeded", result.message
    assert len(provider.made) == 2
    assert_all_closed(provider, "local")


def test_the_verification_sandbox_is_closed_when_the_mission_is_cancelled(
    example_repo, scripted, tmp_path, on_path
):
    repo = example_repo("python-invoice")
    server = scripted([step(tool("run_command", command="sleep 0.2"), repeat=True)])
    cancellation = Cancellation()
    result_box: list[tuple[MissionResult, RecordingProvider, EventList]] = []
    worker = threading.Thread(
        target=lambda: result_box.append(
            run_mission(repo, server, tmp_path, "local", cancellation=cancellation)
        )
    )
    worker.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(server.requests) < 3:
        time.sleep(0.05)
    cancellation.cancel("Cancelled by the test.")
    worker.join(timeout=60)

    ((result, provider, _),) = result_box
    assert result.status == "cancelled", result.message
    assert len(provider.made) == 2
    assert_all_closed(provider, "local")


def test_a_verification_sandbox_still_starting_when_the_mission_ends_is_closed_too(
    example_repo, scripted, tmp_path, on_path
):
    repo = example_repo("python-invoice")
    server = scripted([step(tool("run_command", command="true"), repeat=True)])
    started = time.monotonic()
    result, provider, _ = run_mission(
        repo, server, tmp_path, "local", slow_create=(2, 3.0), extra={"LOOPWRIGHT_MAX_STEPS": "1"}
    )

    assert result.status == "budget_exceeded", result.message
    # the mission's end waited for the start under way, then closed what it made
    assert time.monotonic() - started >= 3.0
    assert len(provider.made) == 2
    assert_all_closed(provider, "local")
