"""The Action's sandbox choice: Docker when the runner has an engine, local (said so) when not."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from loopwright.action.run import choose_sandbox, docker_engine_problem
from tests.conftest import ROOT, docker_engine_available


def test_an_explicit_choice_is_kept_without_probing_the_engine() -> None:
    def probe() -> str | None:
        raise AssertionError("an explicit choice must not probe the engine")

    assert choose_sandbox("local", probe) == "local"
    assert choose_sandbox("docker", probe) == "docker"


def test_auto_without_a_reachable_engine_falls_back_to_local_with_a_notice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A socket path of the test's own where nothing listens.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    problem = docker_engine_problem()
    assert problem
    assert choose_sandbox("auto") == "local"
    out = capsys.readouterr().out
    assert out.startswith("::notice title=Loopwright sandbox::No Docker engine is reachable")
    assert "local sandbox" in out and " ".join(problem.split())[:40] in out
    assert out.count("\n") == 1  # one workflow command line


def test_auto_with_a_reachable_engine_picks_docker_and_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    if not docker_engine_available():
        pytest.skip("no Docker engine on this machine")
    assert docker_engine_problem() is None
    assert choose_sandbox("auto") == "docker"
    assert "Docker sandbox" in capsys.readouterr().out


def test_action_yml_defaults_to_auto_and_builds_the_image_unless_local() -> None:
    action = yaml.safe_load((ROOT / "action" / "action.yml").read_text())
    sandbox = action["inputs"]["sandbox"]
    assert sandbox["default"] == "auto"
    assert "reachable" in sandbox["description"]
    build = next(s for s in action["runs"]["steps"] if s.get("name", "").startswith("Build"))
    assert build["if"] == "inputs.sandbox != 'local'"
    assert "${{" not in build["run"]  # the input reaches the script through the environment
