"""A model that never finishes is stopped by every cap, and its sandbox goes (SECURITY.md 29).

The real CLI runs in-process against a scripted model that keeps calling tools and never
calls `finish`. Each cap (steps, tokens, dollars, wall-clock seconds) must end the mission
with status `budget_exceeded`, name the cap and its setting, leave the working tree as it
was, and leave no sandbox behind: no copy of the repository in the temporary directory
(local) and no container labelled with the mission (Docker).
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import git, step, tool
from tests.scenarios import model_env

WHERE = "pwd; echo still-working"
NEVER_FINISHES = [step(tool("run_command", command=WHERE), repeat=True)]
"""Every answer is another command; the model never submits."""
SLOW_NEVER_FINISHES = [step(tool("run_command", command=WHERE), delay_s=1, repeat=True)]
WALL_CLOCK_S = 8

CAPS = [
    pytest.param(NEVER_FINISHES, {"LOOPWRIGHT_MAX_STEPS": "3"},
                 "step limit reached (3, LOOPWRIGHT_MAX_STEPS)", 3, id="steps"),
    pytest.param(NEVER_FINISHES, {"LOOPWRIGHT_MAX_TOKENS": "1"},
                 "token limit reached", 1, id="tokens"),
    pytest.param(NEVER_FINISHES,
                 {"LOOPWRIGHT_MODEL_PRICES": "nano=1000000/1000000",
                  "LOOPWRIGHT_MAX_COST_USD": "0.5"},
                 "cost limit reached", 1, id="cost"),
    pytest.param(SLOW_NEVER_FINISHES, {"LOOPWRIGHT_WALL_CLOCK_S": str(WALL_CLOCK_S)},
                 f"wall-clock limit reached ({WALL_CLOCK_S}s, LOOPWRIGHT_WALL_CLOCK_S)", None,
                 id="wall-clock"),
]  # fmt: skip


def mission_id(run) -> str:
    (mission,) = {e["mission"] for e in run.events}
    return str(mission)


def workspaces_seen(run) -> set[str]:
    """The directories the model's commands ran in (`pwd` of every command)."""
    seen = set()
    for event in run.of_type("tool_result"):
        if event["tool"] == "run_command" and "still-working" in event["output"]:
            seen.add(event["output"].splitlines()[0].strip())
    return seen


def labelled_containers(mission: str) -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "-a", "-q", "--filter", f"label=loopwright.mission={mission}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return out.split()


@pytest.mark.parametrize(("steps", "env", "reason", "calls"), CAPS)
def test_every_cap_ends_a_never_finishing_model_and_removes_its_sandbox(
    steps, env, reason, calls, example_repo, scripted, run_cli
):
    repo = example_repo("python-invoice")
    server = scripted(steps)
    run = run_cli("fix", str(repo), "--sandbox", "local", env=model_env(server, **env))

    assert run.exit_code == 1, run.stderr
    assert run.result["status"] == "budget_exceeded", run.result["message"]
    assert reason in run.result["message"]
    assert run.of_type("done")[-1]["status"] == "budget_exceeded"
    if calls is not None:
        assert len(server.requests) == calls
    else:
        # Stopped by the clock (the reason says so), not by running out of script: well
        # before a step cap.
        assert len(server.requests) < 40
    assert run.result["applied"] is False
    assert git("status", "--porcelain", cwd=repo) == ""

    mission = mission_id(run)
    seen = workspaces_seen(run)
    if calls is not None:
        assert seen, "the model's commands did not run in a sandbox"
    for workspace in seen:
        assert not Path(workspace).exists(), f"the sandbox {workspace} was left behind"
    leftovers = sorted(Path(tempfile.gettempdir()).glob(f"loopwright-{mission}-*"))
    assert leftovers == []


@pytest.mark.docker
def test_a_cap_in_the_docker_sandbox_removes_the_container(
    example_repo, scripted, run_cli, docker_ready
):
    repo = example_repo("python-invoice")
    server = scripted(NEVER_FINISHES)
    run = run_cli(
        "fix", str(repo), "--sandbox", "docker",
        env=model_env(server, LOOPWRIGHT_MAX_TOKENS="1"),
    )  # fmt: skip

    assert run.exit_code == 1, run.stderr
    assert run.result["status"] == "budget_exceeded", run.result["message"]
    assert "token limit reached" in run.result["message"]
    assert workspaces_seen(run) == {"/workspace"}
    assert labelled_containers(mission_id(run)) == []
    assert git("status", "--porcelain", cwd=repo) == ""
