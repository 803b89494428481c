"""`loopwright init`: the repository config (and, on request, the Action's workflow) for a
repository, written from what test detection finds there.

Everything is decided before anything is written: a file that exists is refused without
`force`, and the files are written through temporary files renamed into place, so a
refusal or a failure leaves the repository as it was.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from loopwright.protected_paths import DEFAULT_PROTECTED_PATHS
from loopwright.repo_config import REPO_CONFIG_FILES, RepoConfig, parse_repo_config
from loopwright.verify.detect import DetectionError, TestPlan, detect_tests

CONFIG_PATH = ".github/loopwright.yml"
WORKFLOW_PATH = ".github/workflows/loopwright.yml"
ACTION_PLACEHOLDER = "OWNER/loopwright/action@REF"
UPLOAD_ACTION = "actions/upload-artifact@v7"
_ACTION_REF = re.compile(r"[\w.-]+/[\w.-]+(?:/[\w./-]+)?@[\w./-]+|\./[\w./-]+")


class InitError(Exception):
    """`init` cannot write what was asked; the message says what to do. Nothing was written."""


@dataclass(frozen=True)
class InitResult:
    """What `init` wrote and found."""

    root: Path
    written: list[str]
    """Paths relative to `root`, in the order they were written."""
    test_cmd: str
    setup_cmd: str | None
    reason: str
    """Why these commands: detection's explanation, or that they were given."""
    ci_workflows: list[str] = field(default_factory=list)
    """The workflows whose failure the written workflow reacts to."""
    next_steps: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": "written",
            "path": str(self.root),
            "written": self.written,
            "test_cmd": self.test_cmd,
            "setup_cmd": self.setup_cmd,
            "reason": self.reason,
            "ci_workflows": self.ci_workflows,
            "next_steps": self.next_steps,
        }


def init_repository(
    root: Path,
    *,
    action: bool = False,
    force: bool = False,
    test_cmd: str | None = None,
    setup_cmd: str | None = None,
    uses: str = ACTION_PLACEHOLDER,
) -> InitResult:
    """Write `.github/loopwright.yml` (and with `action`, the workflow) into `root`."""
    if not _ACTION_REF.fullmatch(uses):
        raise InitError(
            f"--uses {uses!r} is not an action reference; write OWNER/REPO/action@REF "
            "(or ./PATH for a copy inside this repository)"
        )
    root = _repository_root(root)
    plan = _test_plan(root, test_cmd, setup_cmd)
    config_text = render_config(plan.command, plan.setup)
    # The file must mean what was detected; a config the parser reads differently is a bug.
    parsed = parse_repo_config(config_text, CONFIG_PATH)
    expected = RepoConfig(test_cmd=plan.command, setup_cmd=plan.setup, source=CONFIG_PATH)
    if parsed != expected:  # pragma: no cover - render_config's own contract
        raise AssertionError(f"the written config parses as {parsed}, not {expected}")
    files = {CONFIG_PATH: config_text}
    ci: list[str] = []
    if action:
        ci = ci_workflow_names(root)
        files[WORKFLOW_PATH] = render_workflow(ci, uses)
    existing = [name for name in files if (root / name).exists() or (root / name).is_symlink()]
    other_config = [n for n in REPO_CONFIG_FILES if n != CONFIG_PATH and (root / n).exists()]
    if not force and (existing or other_config):
        found = ", ".join(existing + other_config)
        raise InitError(
            f"{root} already has {found}; nothing was written. Pass --force to replace "
            f"{', '.join(files)}, or edit the existing file"
        )
    for name in existing:
        if (root / name).is_symlink() or not (root / name).is_file():
            raise InitError(f"{root / name} is not a regular file; nothing was written")
    for name in files:
        # A `.github` that is a link out of the repository would put the files elsewhere.
        if not (root / name).parent.resolve().is_relative_to(root):
            raise InitError(f"{root / name} is outside {root} (a symlink); nothing was written")
    _write_all(root, files)
    return InitResult(
        root=root,
        written=list(files),
        test_cmd=plan.command,
        setup_cmd=plan.setup,
        reason=plan.reason,
        ci_workflows=ci,
        next_steps=_next_steps(root, files, ci, uses, other_config),
    )


def _repository_root(path: Path) -> Path:
    path = path.expanduser().resolve()
    if not path.is_dir():
        raise InitError(f"{path} is not a directory; run `loopwright init` in a repository")
    if (path / ".git").exists():
        return path
    for parent in path.parents:
        if (parent / ".git").exists():
            raise InitError(
                f"{path} is inside the git repository {parent}; the config belongs at its "
                f"root: run `loopwright init {parent}`"
            )
    raise InitError(
        f"{path} is not a git repository; run `git init` there first (Loopwright reads "
        "the config from the repository's default branch)"
    )


def _test_plan(root: Path, test_cmd: str | None, setup_cmd: str | None) -> TestPlan:
    try:
        return detect_tests(root, test_cmd, setup_cmd)
    except DetectionError:
        raise InitError(
            f"could not tell how to run the tests in {root}: no pytest configuration or "
            "test_*.py files, no scripts.test in package.json, no *.test.js files, no go.mod, "
            "Cargo.toml or Makefile with a test target. Pass the command with "
            '--test-cmd "CMD" (and --setup-cmd "CMD" to install dependencies)'
        ) from None


# -- the config ------------------------------------------------------------------------------


def _scalar(value: Any) -> str:
    """One YAML flow value, as `yaml.safe_load` reads it back."""
    text: str = yaml.safe_dump(value, default_flow_style=True, width=1_000_000)
    return text.strip().removesuffix("\n...").strip()


def render_config(test_cmd: str, setup_cmd: str | None) -> str:
    """`.github/loopwright.yml`: the commands, then every other key the repository config
    accepts at its default, commented out (uncommenting one changes nothing until it is
    edited)."""

    def default(key: str, value: Any, *why: str) -> list[str]:
        return ["", *(f"# {line}" for line in why), f"# {key}: {_scalar(value)}"]

    lines = [
        "# Loopwright's settings for this repository, read from the default branch only.",
        "# Every key is optional; the commented ones show their defaults. See the README's",
        "# Configuration section.",
        "",
        "# How to run the tests (found by `loopwright init`).",
        f"test_cmd: {_scalar(test_cmd)}",
    ]
    if setup_cmd:
        lines += ["# How to install the dependencies (the only step with a network).",
                  f"setup_cmd: {_scalar(setup_cmd)}"]  # fmt: skip
    else:
        lines += default("setup_cmd", None, "How to install the dependencies (none found).")
    lines += default(
        "auto_fix", False, "Act on red CI by itself, not only on `/loopwright fix` (the App)."
    )
    lines += default("max_cost_usd", None, "Cap on the model calls of one mission, in USD.")
    lines += default(
        "tiers", None, "The model tiers a mission may use, e.g. [nano, super]; null: all."
    )
    lines += default(
        "network",
        None,
        "The sandbox network: none, setup or always; it can only narrow the operator's.",
    )
    lines += default(
        "protected_paths",
        list(DEFAULT_PROTECTED_PATHS),
        "Paths a fix may never change (these are the built-in ones).",
    )
    lines += default(
        "allow_test_edits", [], "Test files a fix may change without failing verification."
    )
    lines += default(
        "app",
        None,
        "A web app to boot and screenshot during verification,",
        'e.g. {start: "npm start", port: 3000, path: /}.',
    )
    return "\n".join(lines) + "\n"


def commented_defaults(text: str) -> str:
    """`text` with every commented `# key: value` line of a repository key uncommented."""
    keys = "|".join(
        ("setup_cmd", "auto_fix", "max_cost_usd", "tiers", "network", "protected_paths",
         "allow_test_edits", "app")
    )  # fmt: skip
    return re.sub(rf"^# ((?:{keys}): )", r"\1", text, flags=re.M)


# -- the workflow ----------------------------------------------------------------------------


def ci_workflow_names(root: Path) -> list[str]:
    """The names `workflow_run` knows the repository's other workflows by: each file's
    `name:`, or its path where it has none."""
    folder = root / ".github" / "workflows"
    names: list[str] = []
    if not folder.is_dir():
        return names
    for path in sorted(folder.iterdir()):
        if path.suffix not in (".yml", ".yaml") or path.name.startswith("loopwright."):
            continue
        if path.is_symlink() or not path.is_file():
            continue
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
            continue
        if not isinstance(data, dict):
            continue
        name = data.get("name")
        names.append(name if isinstance(name, str) and name else path.relative_to(root).as_posix())
    return names


def render_workflow(ci_workflows: list[str], uses: str = ACTION_PLACEHOLDER) -> str:
    """The Action on red CI (a failed run of `ci_workflows`) and on `/loopwright fix`
    comments, one mission at a time per pull request or branch."""
    triggers = ["on:"]
    conditions = []
    if ci_workflows:
        triggers += [
            "  workflow_run:",
            f"    workflows: {_scalar(ci_workflows)}",
            "    types: [completed]",
        ]
        conditions.append(
            "(github.event_name == 'workflow_run' && "
            "github.event.workflow_run.conclusion == 'failure')"
        )
    triggers += ["  issue_comment:", "    types: [created]"]
    conditions.append(
        "(github.event_name == 'issue_comment' && github.event.issue.pull_request && "
        "contains(github.event.comment.body, '/loopwright fix'))"
    )
    condition = "\n      || ".join(conditions)
    group = "loopwright-${{ github.event.issue.number }}"
    if ci_workflows:
        group = (
            "loopwright-${{ github.event.issue.number || "
            "github.event.workflow_run.pull_requests[0].number || "
            "github.event.workflow_run.head_branch }}"
        )
    lines = [
        "# Written by `loopwright init --action`: Loopwright fixes red CI and answers",
        "# `/loopwright fix` comments on pull requests, and proves each fix before it is",
        "# delivered. The model key comes from the LOOPWRIGHT_MODEL_API_KEY secret.",
        "name: Loopwright",
        *triggers,
        "# What the fix needs: push a branch, open the pull request, comment.",
        "permissions:",
        "  contents: write",
        "  pull-requests: write",
        "  issues: write",
        "jobs:",
        "  fix:",
        "    if: >-",
        f"      {condition}",
        "    # One mission at a time per pull request (or branch); a newer one waits.",
        "    concurrency:",
        f"      group: {group}",
        "      cancel-in-progress: false",
        "    runs-on: ubuntu-latest",
        "    timeout-minutes: 60",
        "    steps:",
        "      - id: loopwright",
        f"        uses: {uses}",
        "        with:",
        "          model-api-key: ${{ secrets.LOOPWRIGHT_MODEL_API_KEY }}",
        "      - if: always()",
        f"        uses: {UPLOAD_ACTION}",
        "        with:",
        "          name: loopwright",
        "          path: ${{ runner.temp }}/loopwright",
    ]
    return "\n".join(lines) + "\n"


# -- writing -------------------------------------------------------------------------------


def _write_all(root: Path, files: dict[str, str]) -> None:
    """Every file or none: all are staged as temporary files first, then renamed."""
    staged: list[tuple[Path, Path]] = []
    try:
        for name, text in files.items():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            handle, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
            os.chmod(temp_name, 0o644)
            staged.append((Path(temp_name), target))
        for temp, target in staged:
            os.replace(temp, target)
    except OSError as exc:
        raise InitError(f"cannot write into {root}: {exc.strerror or exc}") from None
    finally:
        for temp, _ in staged:
            temp.unlink(missing_ok=True)


def _next_steps(
    root: Path, files: dict[str, str], ci: list[str], uses: str, other_config: list[str]
) -> list[str]:
    steps = []
    if other_config:
        steps.append(
            f"delete {', '.join(other_config)}: the command line reads it before {CONFIG_PATH}"
        )
    steps.append(f"review {CONFIG_PATH}; uncomment a setting to change it")
    if WORKFLOW_PATH in files:
        if uses == ACTION_PLACEHOLDER:
            steps.append(
                f"in {WORKFLOW_PATH}, replace {ACTION_PLACEHOLDER} with where you host "
                "Loopwright (owner/repository/action@tag)"
            )
        steps.append(
            "add the model key as the repository secret LOOPWRIGHT_MODEL_API_KEY "
            "(Settings → Secrets and variables → Actions)"
        )
        if not ci:
            steps.append(
                f"no CI workflow found in .github/workflows, so {WORKFLOW_PATH} only answers "
                "`/loopwright fix` comments; add a workflow_run trigger naming your CI "
                "workflow to fix red CI too"
            )
    steps.append(
        f"commit {' and '.join(files)} to the default branch (git add {' '.join(files)} "
        "&& git commit)"
    )
    steps.append(f"try it locally: loopwright fix {root}")
    return steps
