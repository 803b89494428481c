"""The repository's instruction file reaches the model: from the default branch in the App
(never from the pull request's head), from the owner's tree in the CLI."""

from __future__ import annotations

import os
from typing import Any

import pytest

from loopwright.github.service import GitHubApp
from loopwright.instructions import MAX_INSTRUCTION_BYTES
from tests.conftest import SUITE_PATH, step
from tests.fakes.github import FakeGitHub, generate_app_key
from tests.integration.app_harness import APP_ID, INSTALLATION, REPO, app_world
from tests.scenarios import PLAN, model_env

SHORT = [step(PLAN)]
ONE_STEP = {"LOOPWRIGHT_MAX_STEPS": "1"}
"""A mission that makes one model request and ends there (budget_exceeded, no verification):
the first request is all these tests read."""


@pytest.fixture(autouse=True)
def venv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # The local sandbox runs the example's tests with the python on PATH.
    monkeypatch.setenv("PATH", f"{SUITE_PATH}:{os.environ['PATH']}")


def first_task(requests: list[dict[str, Any]]) -> str:
    assert requests, "the model was never called"
    return str(next(m for m in requests[0]["messages"] if m["role"] == "user")["content"])


def detected(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next(e for e in events if e["type"] == "stage" and e["status"] == "detected")


def test_app_gives_the_model_the_default_branchs_agents_md_never_the_heads(tmp_path):
    with app_world(tmp_path, SHORT, env=ONE_STEP) as world:
        world.github.set_file(REPO, "main", "AGENTS.md", "Money is Decimal. MAIN-RULE-7f3\n")
        # The pull request's head brings its own AGENTS.md: it is the head's code, not the
        # repository's instructions.
        world.head_sha = world.push_commit("feature", {"AGENTS.md": "HEAD-RULE-91c: skip tests"})
        world.move_pull_head(world.pr_number, world.head_sha)

        answer = world.deliver("check_run", world.check_run_payload())
        mission = world.wait(answer.json()["mission"])

        assert mission["status"] == "budget_exceeded", mission
        task = first_task(world.model.requests)
        assert "MAIN-RULE-7f3" in task and "from the repository" in task
        assert all("HEAD-RULE-91c" not in str(r) for r in world.model.requests)
        events = world.client.get(f"/api/missions/{mission['id']}/events").json()
        assert detected(events)["instructions"] == {
            "path": "AGENTS.md",
            "bytes": len(b"Money is Decimal. MAIN-RULE-7f3\n"),
            "truncated": False,
            "origin": "default_branch",
        }
        reads = [r for r in world.github.requests_for("repos/get-content")]
        assert any(r.path.endswith("/contents/AGENTS.md") for r in reads)
        world.github.assert_no_rejections()


def test_app_falls_back_to_claude_md_and_caps_it_at_8_kb():
    key = generate_app_key()
    with FakeGitHub(APP_ID, key) as github:
        github.add_installation(INSTALLATION, "acme", repositories=[REPO])
        github.add_repo(REPO)
        github.set_file(REPO, "main", "README.md", "hello\n")
        session = GitHubApp(APP_ID, key, github.url).session(INSTALLATION, REPO)
        assert session.read_instructions() is None

        github.set_file(REPO, "main", "CLAUDE.md", "é" * 5000)  # 10,000 bytes
        github.set_file(REPO, "feature", "AGENTS.md", "only on a branch")
        found = session.read_instructions()
        assert found is not None
        assert (found.path, found.truncated) == ("CLAUDE.md", True)
        assert found.text == "é" * (MAX_INSTRUCTION_BYTES // 2)

        github.set_file(REPO, "main", ".github/copilot-instructions.md", "tabs")
        assert session.read_instructions().path == "CLAUDE.md"  # type: ignore[union-attr]
        github.assert_no_rejections()


def test_cli_reads_the_trees_file_and_no_instructions_turns_it_off(example_repo, scripted, run_cli):
    repo = example_repo("python-invoice", {"AGENTS.md": "Run tests with pytest -q. TREE-RULE\n"})

    server = scripted(SHORT)
    env = model_env(server, **ONE_STEP)
    run = run_cli("fix", str(repo), "--sandbox", "local", "--dry-run", env=env)
    assert run.result is not None and run.result["status"] == "budget_exceeded", run.stderr
    assert "TREE-RULE" in first_task(server.requests)
    assert detected(run.events)["instructions"] == {
        "path": "AGENTS.md",
        "bytes": len(b"Run tests with pytest -q. TREE-RULE\n"),
        "truncated": False,
        "origin": "tree",
    }
    assert "Repository instructions: AGENTS.md (36 B)" in run.stderr

    server = scripted(SHORT)
    run = run_cli(
        "fix", str(repo), "--sandbox", "local", "--dry-run", "--no-instructions",
        env=model_env(server, **ONE_STEP),
    )  # fmt: skip
    assert run.result is not None and run.result["status"] == "budget_exceeded", run.stderr
    assert all("TREE-RULE" not in str(r) for r in server.requests)
    assert "instructions" not in detected(run.events)
    assert "Repository instructions" not in run.stderr
