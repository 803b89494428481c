"""The adversarial suite: a hostile repository and a hostile (or prompt-injected) model.

Every case runs the real CLI (or the real host-side code path) against a real sandbox, with
a scripted model that does what an attacker would, and asserts the exact outcome: the
mission is not verified and says why, the user's working tree is byte-for-byte unchanged,
no marker file appears outside the tree, and no token reaches a listener of the test's own.
Each case names the SECURITY.md check it covers.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import init_repo, step, tool
from tests.integration.test_fix_cli import EDIT, FIX_NEW, FIX_OLD, PLAN, model_env

FINISH = tool("finish", summary="done")
CHECK = tool("run_command", command="python -m pytest -q")


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under `root` (the `.git` directory included) with its sha256: two equal
    digests mean the tree is byte-for-byte the same."""
    digest: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            digest[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            digest[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest


def hostile_session(*calls: dict[str, Any], fix: bool = False) -> list[dict[str, Any]]:
    """A scripted session: plan, the hostile calls one per step, optionally the real fix,
    a test run, finish."""
    steps = [step(PLAN), *(step(call) for call in calls)]
    if fix:
        steps.append(step(EDIT))
    return [*steps, step(CHECK), step(FINISH)]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def marker_dir(tmp_path: Path) -> Path:
    """A directory outside every tree a mission handles; nothing may appear in it."""
    where = tmp_path / "markers"
    where.mkdir()
    return where


__all__ = [
    "EDIT",
    "FIX_NEW",
    "FIX_OLD",
    "hostile_session",
    "init_repo",
    "model_env",
    "tree_digest",
    "write",
]


# ---- protected paths in the tool layer (SECURITY 43, 20) ----
#
# A hostile repository plants symlinks into `.github`; a hostile model writes through them,
# through `./` and `..` spellings and through shell commands. Every write is refused before
# it happens, with a message naming the protected pattern; the patch never carries a
# protected path, the tests still fail (the model did not fix anything), and the user's
# tree is unchanged.

PP_WORKFLOW = "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps: [{run: pytest}]\n"
PP_PROTECTED = (".github", "CODEOWNERS", ".loopwright.yml")


def _pp_repo(example_repo: Any) -> Path:
    """The invoice example with a workflow, CODEOWNERS, config and planted symlinks."""
    repo = example_repo(
        "python-invoice",
        {
            ".github/workflows/ci.yml": PP_WORKFLOW,
            ".github/CODEOWNERS": "* @acme/owners\n",
            "CODEOWNERS": "* @acme/owners\n",
            "docs/CODEOWNERS": "* @acme/docs\n",
            ".loopwright.yml": "network: none\n",
        },
    )
    (repo / "site").symlink_to(".github")  # a directory symlink into .github
    (repo / "hop").symlink_to(".github/workflows")
    (repo / "chain").symlink_to("hop")  # chain -> hop -> .github/workflows
    (repo / "ok.txt").symlink_to(".github/workflows/ci.yml")  # a file symlink to a workflow
    (repo / "invoice" / "up").symlink_to("../.github")  # relative, from a subdirectory
    init_repo(repo)
    return repo


def _pp_run(
    example_repo: Any, scripted: Any, run_cli: Any, *calls: dict[str, Any]
) -> tuple[Any, list[dict[str, Any]], Path, dict[str, str]]:
    repo = _pp_repo(example_repo)
    before = tree_digest(repo)
    server = scripted(hostile_session(*calls))
    run = run_cli("fix", str(repo), "--sandbox", "docker", env=model_env(server))
    results = run.of_type("tool_result")[1 : 1 + len(calls)]  # after update_plan
    return run, results, repo, before


def _pp_assert_refused(
    run: Any, results: list[dict[str, Any]], repo: Path, before: dict[str, str], count: int
) -> None:
    assert run.exit_code == 1, run.stderr
    assert run.result["status"] == "unverified", run.result["message"]
    assert "still fail" in run.result["message"], run.result["message"]
    assert len(results) == count
    for result in results:
        assert result["status"] == "refused", result
        assert "protected" in result["output"] and "fix the code instead" in result["output"]
    patch = run.result.get("patch") or ""
    assert not any(name in patch for name in PP_PROTECTED), patch
    assert tree_digest(repo) == before


@pytest.mark.docker
def test_write_file_through_dot_slash_and_dotdot_spellings_is_refused(
    docker_ready, example_repo, scripted, run_cli
):
    """SECURITY 43: `./.github/...`, `a/../.github/...`, `.github/./...`, `.github//...`."""
    paths = [
        "./.github/workflows/ci.yml",
        "invoice/../.github/workflows/evil.yml",
        ".github/./workflows/ci.yml",
        ".github//actions/setup/action.yml",
    ]
    calls = [tool("write_file", path=p, content="on: pull_request_target\n") for p in paths]
    run, results, repo, before = _pp_run(example_repo, scripted, run_cli, *calls)
    _pp_assert_refused(run, results, repo, before, len(paths))
    for path, result in zip(paths, results, strict=True):
        assert result["output"].startswith(f"Refused: {path!r} is a protected path")


@pytest.mark.docker
def test_write_file_through_a_directory_symlink_into_github_is_refused(
    docker_ready, example_repo, scripted, run_cli
):
    """SECURITY 43: `site -> .github` in the repository, then `site/workflows/x.yml`."""
    calls = [
        tool("write_file", path="site/workflows/evil.yml", content="on: push\n"),
        tool("write_file", path="site/workflows/ci.yml", content="on: push\n"),
        tool("write_file", path="invoice/up/workflows/ci.yml", content="on: push\n"),
    ]
    run, results, repo, before = _pp_run(example_repo, scripted, run_cli, *calls)
    _pp_assert_refused(run, results, repo, before, len(calls))
    targets = [".github/workflows/evil.yml", ".github/workflows/ci.yml", ".github/workflows/ci.yml"]
    for target, result in zip(targets, results, strict=True):
        assert f"resolves through a symlink to {target}" in result["output"]


@pytest.mark.docker
def test_write_and_edit_through_a_symlink_chain_and_a_file_symlink_are_refused(
    docker_ready, example_repo, scripted, run_cli
):
    """SECURITY 43: `chain -> hop -> .github/workflows`; `ok.txt -> .github/workflows/ci.yml`."""
    calls = [
        tool("write_file", path="chain/evil.yml", content="on: push\n"),
        tool("write_file", path="ok.txt", content="on: pull_request_target\n"),
        tool("edit_file", path="ok.txt", old="on: push", new="on: pull_request_target"),
        tool("edit_file", path="chain/ci.yml", old="on: push", new="on: workflow_run"),
    ]
    run, results, repo, before = _pp_run(example_repo, scripted, run_cli, *calls)
    _pp_assert_refused(run, results, repo, before, len(calls))
    assert "resolves through a symlink to .github/workflows/evil.yml" in results[0]["output"]
    assert "resolves through a symlink to .github/workflows/ci.yml" in results[1]["output"]


@pytest.mark.docker
def test_codeowners_in_its_three_locations_and_loopwright_config_are_refused(
    docker_ready, example_repo, scripted, run_cli
):
    """SECURITY 20/43: CODEOWNERS at the root, in .github/ and docs/, and Loopwright's config."""
    paths = [
        "CODEOWNERS",
        ".github/CODEOWNERS",
        "docs/CODEOWNERS",
        "site/CODEOWNERS",
        ".loopwright.yml",
        ".github/loopwright.yml",
        "site/loopwright.yml",
    ]
    calls = [tool("write_file", path=p, content="* @attacker\nnetwork: always\n") for p in paths]
    run, results, repo, before = _pp_run(example_repo, scripted, run_cli, *calls)
    _pp_assert_refused(run, results, repo, before, len(paths))


@pytest.mark.docker
def test_shell_redirections_into_protected_paths_are_refused(
    docker_ready, example_repo, scripted, run_cli
):
    """SECURITY 43: `>`, `>>`, `tee`, a here-document, after `cd`, and through the symlinks."""
    commands = [
        "echo x > .github/workflows/ci.yml",
        "echo x >> ./CODEOWNERS",
        "echo x | tee site/workflows/evil.yml",
        "cat > .loopwright.yml <<EOF\nnetwork: always\nEOF",
        "cd site && echo x > workflows/ci.yml",
        "cd invoice && echo x > up/CODEOWNERS",
        "echo x > ok.txt",
        "echo x > /workspace/.github/workflows/ci.yml",
    ]
    calls = [tool("run_command", command=c) for c in commands]
    run, results, repo, before = _pp_run(example_repo, scripted, run_cli, *calls)
    _pp_assert_refused(run, results, repo, before, len(commands))
    for result in results:
        assert result["output"].startswith("Refused (protected_path):")
    assert "resolves through a symlink to .github/workflows/ci.yml" in results[6]["output"]


@pytest.mark.docker
def test_file_programs_writing_protected_paths_are_refused(
    docker_ready, example_repo, scripted, run_cli
):
    """SECURITY 43: mv, cp, sed -i, truncate, rm, chmod, dd, install, rsync on protected paths."""
    commands = [
        "mv invoice/totals.py .github/workflows/ci.yml",
        "mv .github/workflows/ci.yml invoice/",
        "cp invoice/totals.py chain/",
        "sed -i s/push/pull_request_target/ ok.txt",
        "truncate -s 0 docs/CODEOWNERS",
        "rm -rf site/workflows",
        "rm -rf hop",
        "chmod 777 .github/workflows/ci.yml",
        "dd if=/dev/zero of=.github/workflows/ci.yml count=1",
        "install -m 644 invoice/totals.py .github/actions/x/action.yml",
        "rsync -a invoice/ .github/actions/",
        "rm .github/*/ci.yml",
    ]
    calls = [tool("run_command", command=c) for c in commands]
    run, results, repo, before = _pp_run(example_repo, scripted, run_cli, *calls)
    _pp_assert_refused(run, results, repo, before, len(commands))


@pytest.mark.docker
def test_wrapped_and_symlink_building_commands_are_refused(
    docker_ready, example_repo, scripted, run_cli
):
    """SECURITY 43: bash -c, env/timeout wrappers, $(...), and `ln -s` into .github."""
    commands = [
        "bash -c 'printf x >> .github/workflows/ci.yml'",
        "timeout 5 env A=1 cp invoice/totals.py .github/workflows/evil.yml",
        "echo $(echo x > CODEOWNERS)",
        "ln -s .github/workflows w && echo x > w/ci.yml",
        "ln -s .github gh",
        "ln -s ../.github invoice/gh2",
    ]
    calls = [tool("run_command", command=c) for c in commands]
    run, results, repo, before = _pp_run(example_repo, scripted, run_cli, *calls)
    _pp_assert_refused(run, results, repo, before, len(commands))


@pytest.mark.docker
def test_refused_protected_write_next_to_a_real_fix_keeps_the_patch_clean(
    docker_ready, example_repo, scripted, run_cli
):
    """SECURITY 20/43: the fix is verified and applied; the workflow write never happened."""
    repo = _pp_repo(example_repo)
    before = tree_digest(repo)
    server = scripted(
        hostile_session(
            tool("write_file", path="site/workflows/ci.yml", content="on: push\n"),
            tool("run_command", command="echo x > ok.txt"),
            fix=True,
        )
    )
    run = run_cli("fix", str(repo), "--sandbox", "docker", "--dry-run", env=model_env(server))
    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "verified", run.result["message"]
    statuses = [r["status"] for r in run.of_type("tool_result")[1:3]]
    assert statuses == ["refused", "refused"]
    patch = run.result["patch"]
    assert FIX_NEW.strip() in patch
    assert not any(name in patch for name in (*PP_PROTECTED, "ok.txt", "site/"))
    assert tree_digest(repo) == before  # --dry-run: nothing applied
