"""actionlint on every workflow the README shows and on the usage example in action.yml,
with the Action referenced as the local `./action`, so each step's `with:` inputs and each
`steps.<id>.outputs.<name>` is checked against action.yml itself."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.workflow_lint import actionlint

README = ROOT / "README.md"
ACTION = ROOT / "action" / "action.yml"
PLACEHOLDER = "OWNER/loopwright/action@REF"
FENCE = re.compile(r"^```ya?ml\n(.*?)^```", re.M | re.S)


def readme_workflows() -> list[str]:
    """The README's YAML blocks that are workflows (they have `on` and `jobs`)."""
    blocks = []
    for block in FENCE.findall(README.read_text()):
        data = yaml.safe_load(block)
        if isinstance(data, dict) and "jobs" in data and True in data:  # `on` reads as True
            blocks.append(block)
    return blocks


def action_usage() -> str:
    """The commented usage workflow at the top of action.yml."""
    lines = []
    for line in ACTION.read_text().splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("#   ") or line == "#":
            lines.append(line[4:])
    return "\n".join(lines).strip() + "\n"


def lint_as_local_action(tmp_path: Path, name: str, workflow: str) -> str:
    assert PLACEHOLDER in workflow, "the example should use the Action"
    repo = tmp_path / "repo"
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".git").mkdir()
    shutil.copytree(ROOT / "action", repo / "action")
    path = repo / ".github" / "workflows" / f"{name}.yml"
    path.write_text(workflow.replace(PLACEHOLDER, "./action"))
    return actionlint(repo, path)


def test_the_readme_shows_the_three_action_workflows() -> None:
    workflows = readme_workflows()
    assert len(workflows) == 3
    triggers = [set(yaml.safe_load(w)[True]) for w in workflows]
    assert {"workflow_run"} in triggers and {"issue_comment"} in triggers


@pytest.mark.parametrize("index", range(3), ids=["workflow-run", "comment", "after-tests"])
def test_readme_workflows_pass_actionlint(index: int, tmp_path: Path) -> None:
    workflow = readme_workflows()[index]
    assert lint_as_local_action(tmp_path, f"readme-{index}", workflow) == ""


def test_action_yml_usage_example_passes_actionlint(tmp_path: Path) -> None:
    usage = action_usage()
    assert "jobs:" in usage and "steps.loopwright.outputs.pull-request-url" in usage
    assert lint_as_local_action(tmp_path, "usage", usage) == ""


def test_actionlint_catches_an_undeclared_input_and_output(tmp_path: Path) -> None:
    # The check above means something: a wrong input or output name is a finding.
    usage = action_usage().replace("max-steps: 30", "max-step: 30")
    usage = usage.replace("outputs.pull-request-url ", "outputs.pull-request ")
    findings = lint_as_local_action(tmp_path, "wrong", usage)
    assert 'input "max-step" is not defined' in findings
    assert 'property "pull-request" is not defined' in findings
