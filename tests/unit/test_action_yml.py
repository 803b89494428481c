"""`action/action.yml`: a valid composite action whose inputs are all used, and no script
text that an expression could inject into."""

from __future__ import annotations

import re
import subprocess
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT

ACTION = ROOT / "action" / "action.yml"
ENTRYPOINT = ROOT / "loopwright" / "action"
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
INPUTS = {
    "test-command", "setup-command", "model-base-url", "model-api-key", "model-tiers",
    "max-cost-usd", "sandbox", "deliver", "github-token", "guidance", "max-steps", "dry-run",
    "trigger-phrase", "allowed-users",
}  # fmt: skip
OUTPUTS = {"status", "pull-request-url", "delivery-url", "mission-url", "patch-path", "cost-usd"}


@pytest.fixture(scope="module")
def action() -> dict[str, Any]:
    data = yaml.safe_load(ACTION.read_text())
    assert isinstance(data, dict)
    return data


def steps(action: dict[str, Any]) -> list[dict[str, Any]]:
    return list(action["runs"]["steps"])


def test_is_a_composite_action_with_the_required_keys(action: dict[str, Any]) -> None:
    assert {"name", "description", "inputs", "outputs", "runs"} <= set(action)
    assert action["runs"]["using"] == "composite"
    assert steps(action)
    allowed = {"name", "id", "if", "run", "shell", "env", "working-directory", "uses", "with",
               "continue-on-error"}  # fmt: skip
    for step in steps(action):
        assert set(step) <= allowed, step
        assert ("run" in step) != ("uses" in step), step
        if "run" in step:
            # A composite action's run steps must name their shell.
            assert step.get("shell") in {"bash", "sh", "python", "pwsh"}, step
    ids = [s["id"] for s in steps(action) if "id" in s]
    assert len(ids) == len(set(ids))


def test_declares_the_documented_inputs_and_outputs(action: dict[str, Any]) -> None:
    assert set(action["inputs"]) >= INPUTS
    assert set(action["outputs"]) >= OUTPUTS
    for name, spec in action["inputs"].items():
        assert spec.get("description"), name
    assert action["inputs"]["github-token"]["default"] == "${{ github.token }}"
    assert action["inputs"]["sandbox"]["default"] == "auto"
    assert action["inputs"]["deliver"]["default"] == "pull-request"
    ids = {s.get("id") for s in steps(action)}
    for name, spec in action["outputs"].items():
        match = re.fullmatch(r"\$\{\{ steps\.([\w-]+)\.outputs\.([\w-]+) \}\}", spec["value"])
        assert match, (name, spec["value"])
        assert match.group(1) in ids and match.group(2) == name


def test_every_input_is_used_by_a_step(action: dict[str, Any]) -> None:
    used = set()
    for step in steps(action):
        for text in [step.get("if", ""), *(step.get("env") or {}).values()]:
            used |= set(re.findall(r"inputs\.([\w-]+)", str(text)))
    assert used == set(action["inputs"])


def test_no_expression_is_interpolated_into_a_script(action: dict[str, Any]) -> None:
    # `${{ ... }}` in `run:` is pasted into the script before the shell parses it, so a
    # comment body or branch name could become a command. Values go through `env:` instead.
    for step in steps(action):
        assert not EXPRESSION.search(step.get("run", "")), step["run"]
    for expression in EXPRESSION.findall(ACTION.read_text()):
        assert "github.event" not in expression, expression


def test_the_environment_the_action_sets_is_what_the_entrypoint_reads(
    action: dict[str, Any],
) -> None:
    source = "\n".join(path.read_text() for path in sorted(ENTRYPOINT.glob("*.py")))
    read = set(re.findall(r"\"(INPUT_[A-Z_]+)\"", source))
    (entry,) = [s for s in steps(action) if "loopwright.action" in s.get("run", "")]
    assert set(entry["env"]) == read
    for name, value in entry["env"].items():
        expected = "inputs." + name.removeprefix("INPUT_").lower().replace("_", "-")
        assert value == "${{ " + expected + " }}", name
    # exec: no shell process stays behind holding the secrets in its environment.
    assert entry["run"].startswith("exec ")


def test_installs_into_its_own_virtualenv_from_the_action_checkout(
    action: dict[str, Any],
) -> None:
    runs = "\n".join(s.get("run", "") for s in steps(action))
    assert '"$GITHUB_ACTION_PATH/install.sh"' in runs
    script = (ACTION.parent / "install.sh").read_text()
    assert '"$GITHUB_ACTION_PATH/.."' in script
    assert "$RUNNER_TEMP" in script and "loopwright-venv" in script
    assert (ROOT / "pyproject.toml").is_file()
    # The entrypoint runs the virtualenv's python directly; PATH stays the project's own.
    assert "$RUNNER_TEMP/loopwright-venv/bin/python" in runs
    assert "GITHUB_PATH" not in runs + script


def test_install_script_is_valid_bash() -> None:
    script = ACTION.parent / "install.sh"
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
