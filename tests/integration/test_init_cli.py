"""`loopwright init` through the real CLI entry point, on copies of the bundled examples:
the config it writes parses back to what detection finds, the workflow passes actionlint,
and nothing is ever half written or overwritten without --force."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from loopwright.cli.main import main
from loopwright.init import CONFIG_PATH, WORKFLOW_PATH, commented_defaults
from loopwright.protected_paths import DEFAULT_PROTECTED_PATHS
from loopwright.repo_config import RepoConfig, load_repo_config, parse_repo_config
from loopwright.verify.detect import detect_tests
from tests.conftest import EXAMPLES, ROOT, clean_cli_env, copy_example, init_repo
from tests.workflow_lint import actionlint


@dataclass
class InitRun:
    exit_code: int
    result: dict[str, Any] | None
    stdout: str
    stderr: str


@pytest.fixture
def run_init(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., InitRun]:
    """`loopwright init ARGS` in-process; with `as_json`, its one JSON object parsed."""

    def run(*args: str, as_json: bool = True) -> InitRun:
        clean_cli_env(monkeypatch, tmp_path, {})
        capsys.readouterr()
        code = main(["init", *args, *(["--json"] if as_json else [])])
        out, err = capsys.readouterr()
        result = json.loads(out) if as_json and out.strip() else None
        return InitRun(code, result, out, err)

    return run


def example(tmp_path: Path, name: str) -> Path:
    return copy_example(name, tmp_path)


EXPECTED = {
    "python-invoice": ("python -m pytest", None),
    "node-slugify": ("npm test", None),
    "node-todo-web": ("npm test", None),
}


@pytest.mark.parametrize("name", EXPECTED)
def test_init_on_each_example_writes_a_config_that_means_what_was_detected(
    name: str, tmp_path: Path, run_init: Callable[..., InitRun]
) -> None:
    repo = example(tmp_path, name)
    run = run_init(str(repo))

    assert run.exit_code == 0, run.stderr
    assert run.result is not None and run.result["exit_code"] == 0
    assert run.result["written"] == [CONFIG_PATH]
    test_cmd, setup_cmd = EXPECTED[name]
    assert (run.result["test_cmd"], run.result["setup_cmd"]) == (test_cmd, setup_cmd)
    text = (repo / CONFIG_PATH).read_text()
    assert parse_repo_config(text, CONFIG_PATH) == RepoConfig(
        test_cmd=test_cmd, setup_cmd=setup_cmd, source=CONFIG_PATH
    )
    # The CLI reads the same file, and a mission then runs the suite exactly as detected.
    config = load_repo_config(repo)
    assert config.test_cmd == test_cmd
    detected = detect_tests(repo)
    configured = detect_tests(repo, config.test_cmd, config.setup_cmd)
    assert replace(configured, reason="") == replace(detected, reason="")


def test_every_commented_default_is_the_default(
    tmp_path: Path, run_init: Callable[..., InitRun]
) -> None:
    repo = example(tmp_path, "python-invoice")
    assert run_init(str(repo)).exit_code == 0
    text = (repo / CONFIG_PATH).read_text()
    uncommented = commented_defaults(text)
    data = yaml.safe_load(uncommented)
    # Every key the parser accepts is shown (test_cmd set, the rest commented).
    assert set(data) == {
        "test_cmd", "setup_cmd", "auto_fix", "max_cost_usd", "tiers", "network",
        "protected_paths", "allow_test_edits", "app",
    }  # fmt: skip
    assert set(yaml.safe_load(text)) == {"test_cmd"}
    parsed = parse_repo_config(uncommented, CONFIG_PATH)
    # The built-in protected paths, written out, are the built-in list itself.
    assert parsed.protected_paths == DEFAULT_PROTECTED_PATHS
    assert replace(parsed, protected_paths=None) == parse_repo_config(text, CONFIG_PATH)


def test_refuses_to_overwrite_without_force_and_writes_nothing(
    tmp_path: Path, run_init: Callable[..., InitRun]
) -> None:
    repo = example(tmp_path, "node-slugify")
    (repo / ".github").mkdir()
    mine = "test_cmd: node --test test/\n"
    (repo / CONFIG_PATH).write_text(mine)

    run = run_init(str(repo), "--action")
    assert run.exit_code == 2
    assert run.result is not None and run.result["status"] == "error"
    assert "already has .github/loopwright.yml" in run.result["message"]
    assert "--force" in run.stderr
    assert (repo / CONFIG_PATH).read_text() == mine
    # Nothing at all: not even the workflow, which did not exist.
    assert not (repo / WORKFLOW_PATH).exists()
    assert sorted(p.name for p in (repo / ".github").iterdir()) == ["loopwright.yml"]

    forced = run_init(str(repo), "--force")
    assert forced.exit_code == 0, forced.stderr
    assert "test_cmd: npm test" in (repo / CONFIG_PATH).read_text()


def test_a_github_folder_linked_out_of_the_repository_is_refused(
    tmp_path: Path, run_init: Callable[..., InitRun]
) -> None:
    repo = example(tmp_path, "python-invoice")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (repo / ".github").symlink_to(elsewhere)
    run = run_init(str(repo), "--action")
    assert run.exit_code == 2
    assert "(a symlink); nothing was written" in run.result["message"]
    assert list(elsewhere.iterdir()) == []


def test_an_existing_workflow_blocks_the_config_too(
    tmp_path: Path, run_init: Callable[..., InitRun]
) -> None:
    repo = example(tmp_path, "python-invoice")
    (repo / WORKFLOW_PATH).parent.mkdir(parents=True)
    (repo / WORKFLOW_PATH).write_text("name: mine\n")
    run = run_init(str(repo), "--action")
    assert run.exit_code == 2
    assert "already has .github/workflows/loopwright.yml" in run.result["message"]
    assert not (repo / CONFIG_PATH).exists()
    assert (repo / WORKFLOW_PATH).read_text() == "name: mine\n"


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("plain", "is not a git repository; run `git init` there first"),
        ("subdir", "is inside the git repository"),
        ("unknown", "could not tell how to run the tests in"),
        ("missing", "is not a directory"),
        ("bad-uses", "is not an action reference"),
    ],
)
def test_clear_errors_say_what_to_do(
    setup: str, message: str, tmp_path: Path, run_init: Callable[..., InitRun]
) -> None:
    args: list[str] = []
    if setup == "plain":
        target = Path(shutil.copytree(EXAMPLES / "python-invoice", tmp_path / "plain"))
    elif setup == "subdir":
        target = example(tmp_path, "python-invoice") / "invoice"
    elif setup == "unknown":
        target = tmp_path / "docs"
        target.mkdir()
        (target / "README.md").write_text("no code here\n")
        init_repo(target)
    elif setup == "missing":
        target = tmp_path / "nowhere"
    else:
        target = example(tmp_path, "python-invoice")
        args = ["--action", "--uses", "x; rm -rf /"]
    run = run_init(str(target), *args)

    assert run.exit_code == 2, run.stderr
    assert run.result is not None and message in run.result["message"]
    assert "Traceback" not in run.stderr
    if setup == "unknown":
        assert "--test-cmd" in run.result["message"]
    if setup == "subdir":
        assert f"loopwright init {target.parent}" in run.result["message"]
    if target.is_dir():
        assert not (target / ".github").exists()


@pytest.mark.parametrize(
    ("files", "test_cmd", "setup_cmd"),
    [
        ({"go.mod": "module example.com/x\n", "go.sum": ""}, "go test ./...", "go mod download"),
        ({"Makefile": "test:\n\t./check\n"}, "make test", None),
        ({"Cargo.toml": "[package]\nname = 'x'\n"}, "cargo test", None),
    ],
    ids=["go", "make", "cargo"],
)
def test_other_languages_are_detected_too(
    files: dict[str, str],
    test_cmd: str,
    setup_cmd: str | None,
    tmp_path: Path,
    run_init: Callable[..., InitRun],
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for name, text in files.items():
        (repo / name).write_text(text)
    init_repo(repo)
    run = run_init(str(repo))
    assert run.exit_code == 0, run.stderr
    config = load_repo_config(repo)
    assert (config.test_cmd, config.setup_cmd) == (test_cmd, setup_cmd)


def test_unknown_language_with_a_given_command(
    tmp_path: Path, run_init: Callable[..., InitRun]
) -> None:
    repo = tmp_path / "custom"
    repo.mkdir()
    (repo / "check.sh").write_text("exit 0\n")
    init_repo(repo)
    run = run_init(str(repo), "--test-cmd", "sh check.sh", "--setup-cmd", "make deps")
    assert run.exit_code == 0, run.stderr
    config = load_repo_config(repo)
    assert (config.test_cmd, config.setup_cmd) == ("sh check.sh", "make deps")


CI_WORKFLOW = """\
name: Tests
on: [push, pull_request]
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v7
      - run: python -m pytest
"""


def test_action_workflow_reacts_to_red_ci_and_comments_and_passes_actionlint(
    tmp_path: Path, run_init: Callable[..., InitRun]
) -> None:
    repo = example(tmp_path, "python-invoice")
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "ci.yml").write_text(CI_WORKFLOW)
    (repo / ".github" / "workflows" / "lint.yaml").write_text(
        CI_WORKFLOW.replace("name: Tests\n", "")
    )
    # A copy of the Action inside the repository, so actionlint checks the step's inputs
    # against action.yml.
    shutil.copytree(ROOT / "action", repo / "action")
    run = run_init(str(repo), "--action", "--uses", "./action")

    assert run.exit_code == 0, run.stderr
    assert run.result["written"] == [CONFIG_PATH, WORKFLOW_PATH]
    assert run.result["ci_workflows"] == ["Tests", ".github/workflows/lint.yaml"]
    workflow_file = repo / WORKFLOW_PATH
    assert actionlint(repo, workflow_file) == ""
    workflow = yaml.safe_load(workflow_file.read_text())
    on = workflow[True]  # YAML 1.1 reads the key `on` as true, as PyYAML does
    assert on["workflow_run"] == {
        "workflows": ["Tests", ".github/workflows/lint.yaml"],
        "types": ["completed"],
    }
    assert on["issue_comment"] == {"types": ["created"]}
    assert workflow["permissions"] == {
        "contents": "write", "pull-requests": "write", "issues": "write",
    }  # fmt: skip
    job = workflow["jobs"]["fix"]
    assert "workflow_run.conclusion == 'failure'" in job["if"]
    assert "'/loopwright fix'" in job["if"]
    group = job["concurrency"]["group"]
    assert "github.event.issue.number" in group and "pull_requests[0].number" in group
    assert "head_branch" in group
    uses = [s["uses"] for s in job["steps"]]
    assert uses == ["./action", "actions/upload-artifact@v7"]


def test_the_default_workflow_passes_actionlint_and_says_what_to_replace(
    tmp_path: Path, run_init: Callable[..., InitRun]
) -> None:
    repo = example(tmp_path, "node-todo-web")
    run = run_init(str(repo), "--action", as_json=False)

    assert run.exit_code == 0, run.stderr
    assert f"wrote {repo / CONFIG_PATH}" in run.stdout
    assert f"wrote {repo / WORKFLOW_PATH}" in run.stdout
    assert "test_cmd: npm test" in run.stdout
    assert "replace OWNER/loopwright/action@REF" in run.stdout
    assert "LOOPWRIGHT_MODEL_API_KEY" in run.stdout
    # No CI workflow to follow: the workflow answers comments, and the output says so.
    assert "no CI workflow found" in run.stdout
    workflow = yaml.safe_load((repo / WORKFLOW_PATH).read_text())
    assert list(workflow[True]) == ["issue_comment"]
    assert "workflow_run" not in workflow["jobs"]["fix"]["concurrency"]["group"]
    assert actionlint(repo, repo / WORKFLOW_PATH) == ""
