"""The GitHub Action's entrypoint end to end (SECURITY.md checks 22, 33 and 34).

`python -m loopwright.action` runs as a subprocess with the environment a runner gives a
step: `GITHUB_EVENT_PATH` points at a recorded payload from `@octokit/webhooks-examples`
rewritten to name the test repository, `GITHUB_OUTPUT` and `GITHUB_STEP_SUMMARY` are files,
the API is the fake GitHub, git goes to a real `git http-backend`, and the model is the
scripted OpenAI-compatible server. The workflow token is a real installation token minted
by the fake GitHub: GitHub's own `GITHUB_TOKEN` is one too (a `ghs_` token of the Actions
App, scoped to the repository).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from loopwright.action.plan import ActionEnv, Refuse, Target, plan_event
from loopwright.action.report import write_outputs
from loopwright.action.run import toolchain_env
from loopwright.agent.scripted import ScriptedModelServer
from loopwright.agent.scripted_steps import parse_steps
from loopwright.github.service import GitHubApp
from loopwright.github.triggers import Ignore
from tests.conftest import EXAMPLES, ROOT, SUITE_PATH, git, step, tool
from tests.fakes.git_server import GitServer
from tests.fakes.github import FakeGitHub, generate_app_key
from tests.integration.app_harness import WEBHOOK_EXAMPLES
from tests.integration.test_secrets_cli import tool_messages
from tests.scenarios import (
    CORRECT,
    EDIT,
    FINISH,
    FIX_NEW,
    PLAN,
    assert_one_deliver_then_done,
)

REPO = "acme/invoice"
INSTALLATION = 77
APP_ID = 4711
CONFIG = "test_cmd: python -m pytest\n"
CANARIES = {
    "GITHUB_TOKEN": "ghs_CANARY0123456789abcdefworkflow",
    "GH_TOKEN": "ghp_CANARY0123456789abcdefgh",
    "ACTIONS_RUNTIME_TOKEN": "runtime.CANARY.0123456789",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "idtoken.CANARY.0123456789",
    "ACTIONS_ID_TOKEN_REQUEST_URL": "https://token.CANARY.invalid/request",
}
MODEL_KEY = "sk-CANARY0123456789abcdefmodelkey"


@cache
def _examples() -> dict[str, list[dict[str, Any]]]:
    data = json.loads(WEBHOOK_EXAMPLES.read_text())
    return {entry["name"]: entry["examples"] for entry in data}


def example(event: str, action: str, *, where: Any = None) -> dict[str, Any]:
    for payload in _examples()[event]:
        if payload.get("action") == action and (where is None or where(payload)):
            return copy.deepcopy(payload)
    raise LookupError(f"no {event}.{action} example")


@dataclass
class ActionRun:
    exit_code: int
    stdout: str
    stderr: str
    outputs: dict[str, str]
    summary: str
    artifacts: Path


@dataclass
class World:
    tmp: Path
    git: GitServer
    github: FakeGitHub
    model: ScriptedModelServer
    bare: Path
    head_sha: str
    pr_number: int
    token: str

    def repository(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Point a recorded payload's repository at this world's."""
        repo = payload["repository"]
        repo["full_name"] = REPO
        repo["name"] = "invoice"
        repo["owner"]["login"] = "acme"
        repo["clone_url"] = self.git.repo_url(REPO)
        repo["default_branch"] = "main"
        repo["url"] = f"{self.github.url}/repos/{REPO}"
        return payload

    def workflow_run(self) -> dict[str, Any]:
        payload = self.repository(
            example("workflow_run", "completed", where=lambda p: p["workflow_run"]["pull_requests"])
        )
        run = payload["workflow_run"]
        run.update(conclusion="failure", head_sha=self.head_sha, head_branch="feature")
        run["head_repository"]["full_name"] = REPO
        pull = run["pull_requests"][0]
        api = f"{self.github.url}/repos/{REPO}"
        pull.update(number=self.pr_number, url=f"{api}/pulls/{self.pr_number}")
        pull["head"].update(ref="feature", sha=self.head_sha)
        pull["base"]["ref"] = "main"
        pull["head"]["repo"]["url"] = pull["base"]["repo"]["url"] = api
        payload["sender"].update(login="maintainer", type="User")
        return payload

    def comment(self, user: str, body: str = "/loopwright fix") -> dict[str, Any]:
        payload = self.repository(example("issue_comment", "created"))
        payload["issue"]["number"] = self.pr_number
        payload["issue"]["pull_request"] = {
            "url": f"{self.github.url}/repos/{REPO}/pulls/{self.pr_number}"
        }
        payload["comment"]["body"] = body
        for who in (payload["comment"]["user"], payload["sender"]):
            who.update(login=user, type="User")
        # The comment exists on GitHub before the workflow runs (reactions go to it).
        payload["comment"]["id"] = self.github.add_comment(REPO, self.pr_number, body, user=user)
        return payload

    def pull_request_from_fork(self) -> dict[str, Any]:
        payload = self.repository(example("pull_request", "opened"))
        pull = payload["pull_request"]
        pull["number"] = self.pr_number
        pull["head"].update(ref="feature", sha=self.head_sha)
        pull["head"]["repo"]["full_name"] = "mallory/invoice"
        pull["base"]["repo"]["full_name"] = REPO
        payload["sender"].update(login="mallory", type="User")
        return payload

    def run(
        self,
        event: str,
        payload: dict[str, Any],
        *,
        workspace: Path | None = None,
        sha: str = "",
        ref: str = "refs/heads/main",
        inputs: dict[str, str] | None = None,
        extra: dict[str, str] | None = None,
    ) -> ActionRun:
        runner = self.tmp / f"runner-{len(list(self.tmp.glob('runner-*')))}"
        (runner / "temp").mkdir(parents=True)
        (runner / "home").mkdir()
        event_path = runner / "event.json"
        event_path.write_text(json.dumps(payload))
        output, summary = runner / "output", runner / "summary.md"
        output.touch()
        summary.touch()
        default_workspace = runner / "workspace"
        default_workspace.mkdir()
        env = {
            # The local sandbox runs the example's tests with the python on PATH.
            "PATH": f"{SUITE_PATH}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(runner / "home"),
            "PYTHONPATH": str(ROOT),
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_EVENT_NAME": event,
            "GITHUB_EVENT_PATH": str(event_path),
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_WORKSPACE": str(workspace or default_workspace),
            "GITHUB_SHA": sha,
            "GITHUB_REF": ref,
            "GITHUB_REF_NAME": ref.rsplit("/", 1)[-1],
            "GITHUB_API_URL": self.github.url,
            "GITHUB_SERVER_URL": "https://github.test",
            "GITHUB_RUN_ID": "9001",
            "GITHUB_OUTPUT": str(output),
            "GITHUB_STEP_SUMMARY": str(summary),
            "RUNNER_TEMP": str(runner / "temp"),
            "INPUT_GITHUB_TOKEN": self.token,
            "INPUT_MODEL_BASE_URL": self.model.base_url,
            "INPUT_MODEL_API_KEY": "sk-test-action-key-1234",
            "INPUT_MODEL_TIERS": "nano=model-nano,super=model-super",
            "INPUT_SANDBOX": "local",
            "INPUT_DELIVER": "pull-request",
            **(inputs or {}),
            **(extra or {}),
        }
        proc = subprocess.run(
            [sys.executable, "-m", "loopwright.action"],
            env=env,
            cwd=workspace or default_workspace,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        return ActionRun(
            proc.returncode,
            proc.stdout,
            proc.stderr,
            parse_outputs(output.read_text()),
            summary.read_text(),
            runner / "temp" / "loopwright",
        )


def parse_outputs(text: str) -> dict[str, str]:
    """`$GITHUB_OUTPUT` as the runner reads it: `name<<DELIMITER` blocks or `name=value`."""
    values: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        heredoc = re.fullmatch(r"([\w-]+)<<(\S+)", line)
        if heredoc:
            name, delimiter = heredoc.groups()
            body = []
            for inner in lines:
                if inner == delimiter:
                    break
                body.append(inner)
            else:
                raise AssertionError(f"output {name} has no closing delimiter")
            values[name] = "\n".join(body)
        elif "=" in line:
            name, _, value = line.partition("=")
            values[name] = value
    return values


@pytest.fixture
def world(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[World]:
    steps = getattr(request, "param", CORRECT)
    work = tmp_path / "work"
    shutil.copytree(EXAMPLES / "python-invoice", work)
    (work / ".github").mkdir()
    (work / ".github" / "loopwright.yml").write_text(CONFIG)
    git("init", "-q", "-b", "main", cwd=work)
    git("add", "-A", cwd=work)
    git("commit", "-qm", "invoice with a discount bug", cwd=work)
    git("checkout", "-qb", "feature", cwd=work)
    (work / "NOTES.md").write_text("feature work\n")
    git("add", "-A", cwd=work)
    git("commit", "-qm", "feature", cwd=work)
    head_sha = git("rev-parse", "HEAD", cwd=work).strip()
    (tmp_path / "srv").mkdir()
    key = generate_app_key()
    with GitServer(tmp_path / "srv") as git_server:
        bare = git_server.create_repo(REPO, work)
        subprocess.run(["git", "-C", str(bare), "branch", "-f", "feature", head_sha], check=True)
        with FakeGitHub(APP_ID, key, app_slug="github-actions", git_url=git_server.url) as gh:
            gh.add_installation(INSTALLATION, "acme", repositories=[REPO])
            gh.add_repo(REPO, clone_url=git_server.repo_url(REPO), git_dir=bare)
            gh.set_permission(REPO, "maintainer", "write")
            gh.set_permission(REPO, "reader", "read")
            number = gh.add_pull(REPO, head_ref="feature", head_sha=head_sha, base_ref="main",
                                 title="Feature", user="maintainer")  # fmt: skip
            # The workflow's token: an installation token for this one repository.
            token = GitHubApp(APP_ID, key, gh.url).session(INSTALLATION, REPO).token
            gh.requests.clear()
            with ScriptedModelServer(parse_steps(steps)) as model:
                yield World(tmp_path, git_server, gh, model, bare, head_sha, number, token)


def opened_pull(world: World) -> dict[str, Any]:
    pulls = [p for p in world.github.pulls(REPO) if p["head"]["ref"].startswith("loopwright/")]
    assert len(pulls) == 1, world.github.pulls(REPO)
    return pulls[0]


def test_red_workflow_run_becomes_a_verified_pull_request(world: World) -> None:
    run = world.run("workflow_run", world.workflow_run())

    assert run.exit_code == 0, run.stderr
    pull = opened_pull(world)
    assert pull["head"]["ref"] == f"loopwright/fix-{world.pr_number}"
    assert pull["base"]["ref"] == "feature"
    body = pull["body"]
    # The App's body: heading, before/after table, cost, and the run as the live view.
    assert "Verified fix" in body and "### Verification" in body
    assert "test_line_with_percentage_discount" in body and "✅ fixed" in body
    assert "### Cost" in body
    assert "https://github.test/acme/invoice/actions/runs/9001" in body
    pushed = git("show", f"loopwright/fix-{world.pr_number}", "--format=%ae%n%P", cwd=world.bare)
    assert FIX_NEW.strip() in pushed and world.head_sha in pushed

    assert run.outputs["status"] == "verified"
    assert run.outputs["pull-request-url"] == pull["html_url"]
    assert float(run.outputs["cost-usd"]) >= 0
    assert run.outputs["artifact-dir"] == str(run.artifacts)
    assert "# Loopwright: Verified fix" in run.summary
    assert "| test | before | after | status |" in run.summary
    assert "| tier | calls | tokens | USD |" in run.summary and "| nano |" in run.summary
    assert f"pull request: {pull['html_url']}" in run.summary

    log = (run.artifacts / "events.ndjson").read_text().splitlines()
    events = [json.loads(line) for line in log]
    assert {"stage", "model_call", "tool_call", "verification", "done"} <= {
        e["type"] for e in events
    }
    assert next(e for e in events if e["type"] == "delivery")["url"] == pull["html_url"]
    assert_one_deliver_then_done(events, "delivered")
    assert json.loads((run.artifacts / "result.json").read_text())["status"] == "verified"
    assert FIX_NEW.strip() in (run.artifacts / "patch.diff").read_text()
    # Config came from the default branch through the API.
    assert world.github.requests_for("repos/get-content")
    world.github.assert_no_rejections()
    everything = body + run.summary + run.stderr + (run.artifacts / "events.ndjson").read_text()
    assert world.token not in everything
    assert all(world.token not in json.dumps(r) for r in world.model.requests)


@pytest.mark.parametrize(
    "world",
    [
        [
            step(PLAN),
            step(tool("run_command", command="env")),
            step(tool("run_command", command="cat /proc/self/environ")),
            # The process that started the command: the entrypoint itself.
            step(tool("run_command", command="cat /proc/$PPID/environ; echo; echo parent-read")),
            step(EDIT),
            step(FINISH),
        ]
    ],
    indirect=True,
    ids=["recon"],
)
def test_comment_from_a_writer_is_fixed_and_secrets_never_reach_commands(world: World) -> None:
    run = world.run(
        "issue_comment",
        world.comment("maintainer", "/loopwright fix the discount is a percentage"),
        inputs={"INPUT_MODEL_API_KEY": MODEL_KEY},
        extra=CANARIES,
    )

    assert run.exit_code == 0, run.stderr
    assert world.github.requests_for("repos/get-collaborator-permission-level")
    pull = opened_pull(world)
    assert pull["base"]["ref"] == "feature"
    seen = tool_messages(world.model)
    assert len(seen) == 5
    assert "PATH=" in seen[1] and "HOME=" in seen[1]
    assert "PATH=" in seen[2]
    # The process above the command is the local sandbox's launcher: non-dumpable, so its
    # environment cannot be read at all (where it can be, it holds no secret either).
    assert "parent-read" in seen[3]
    assert "PATH=" in seen[3] or "Permission denied" in seen[3]
    secrets = [*CANARIES.values(), MODEL_KEY, world.token]
    for text in seen:
        assert "CANARY" not in text, text
        for secret in secrets:
            assert secret not in text
    # The guidance after the command reached the model as the maintainer's words.
    first = json.dumps(world.model.requests[0]["messages"])
    assert "the discount is a percentage" in first
    for secret in secrets:
        assert secret not in pull["body"] and secret not in run.summary
        assert secret not in (run.artifacts / "events.ndjson").read_text()
    # 👀 on the command, then the same tracking comment as the App, before the clone, ending
    # with the pull request.
    ops = [r.operation_id for r in world.github.requests]
    assert ops.index("reactions/create-for-issue-comment") < ops.index("issues/create-comment")
    assert ops.count("issues/create-comment") == 1
    (tracking,) = [
        c for c in world.github.comments(REPO, world.pr_number) if c["user"]["type"] == "Bot"
    ]
    body = tracking["body"]
    assert f"Loopwright worked on `{world.head_sha[:7]}` for @maintainer" in body
    assert "[Watch it live](https://github.test/acme/invoice/actions/runs/9001)" in body
    assert "- [x] ✅ **deliver**: delivered" in body
    assert f"**Outcome:** ✅ verified fix in [this pull request]({pull['html_url']})" in body
    for secret in secrets:
        assert secret not in body
    world.github.assert_no_rejections()


def test_comment_from_a_non_writer_is_refused_before_any_model_call(world: World) -> None:
    run = world.run("issue_comment", world.comment("reader"))

    assert run.exit_code == 1
    assert "reader has read permission" in run.stderr
    assert world.model.requests == []
    assert [p for p in world.github.pulls(REPO) if p["head"]["ref"].startswith("loopwright/")] == []
    comments = [
        c for c in world.github.comments(REPO, world.pr_number) if c["user"]["type"] == "Bot"
    ]
    assert len(comments) == 1 and "only people with write access" in comments[0]["body"]
    assert run.outputs["status"] == "refused"
    assert "Refused" in run.summary
    # Only the permission check and the refusal: the pull request was not even read.
    assert [r.operation_id for r in world.github.requests] == [
        "repos/get-collaborator-permission-level",
        "issues/create-comment",
    ]


def test_pull_request_target_from_a_fork_is_refused_before_anything(world: World) -> None:
    run = world.run("pull_request_target", world.pull_request_from_fork(), sha=world.head_sha)

    assert run.exit_code == 1
    assert "mallory/invoice" in run.stderr and "refusing" in run.stderr
    assert world.model.requests == []
    assert world.github.requests == []
    assert world.git.requests == []
    assert run.outputs["status"] == "refused"


def test_a_step_after_failing_tests_fixes_the_workspace_and_commits(world: World) -> None:
    workspace = world.tmp / "checkout"
    subprocess.run(
        ["git", "clone", "-q", "-b", "feature", world.git.repo_url(REPO), str(workspace)],
        check=True,
    )
    payload = world.repository(example("workflow_dispatch", None))
    run = world.run(
        "workflow_dispatch",
        payload,
        workspace=workspace,
        sha=world.head_sha,
        ref="refs/heads/feature",
        inputs={"INPUT_DELIVER": "commit", "INPUT_TEST_COMMAND": "python -m pytest -q"},
    )

    assert run.exit_code == 0, run.stderr
    feature = world.github.branch_sha(REPO, "feature")
    assert feature != world.head_sha
    pushed = git("show", "feature", "--format=%ae%n%P", cwd=world.bare)
    assert FIX_NEW.strip() in pushed and world.head_sha in pushed
    assert run.outputs["status"] == "verified" and run.outputs["pull-request-url"] == ""
    # The workspace the job checked out is left as it was.
    assert git("status", "--porcelain", cwd=workspace) == ""
    assert FIX_NEW not in (workspace / "invoice/totals.py").read_text()


def test_outside_actions_is_a_usage_error(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "loopwright.action"], env=env, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "GITHUB_EVENT_NAME is not set" in proc.stderr


# -- the pure parts, without a world ---------------------------------------------------------


def action_env(tmp_path: Path, event: str, payload: dict[str, Any]) -> ActionEnv:
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload))
    return ActionEnv.from_environ(
        {"GITHUB_EVENT_NAME": event, "GITHUB_EVENT_PATH": str(path), "GITHUB_REPOSITORY": REPO,
         "GITHUB_SHA": "a" * 40, "GITHUB_REF": "refs/heads/main", "INPUT_GITHUB_TOKEN": "t"}
    )  # fmt: skip


@pytest.mark.parametrize(
    ("event", "fork", "expected"),
    [
        ("pull_request_target", True, Refuse),
        ("pull_request_target", False, Target),
        ("pull_request", True, Target),
        ("pull_request", False, Target),
    ],
    ids=["target-fork", "target-same-repo", "fork-read-only-token", "same-repo"],
)
def test_pull_request_events_and_forks(tmp_path: Path, event: str, fork: bool, expected: type):
    payload = example("pull_request", "opened")
    payload["pull_request"]["head"]["repo"]["full_name"] = "mallory/invoice" if fork else REPO
    payload["pull_request"]["base"]["repo"]["full_name"] = REPO
    plan = plan_event(action_env(tmp_path, event, payload))
    assert isinstance(plan, expected)
    if isinstance(plan, Target):
        assert plan.from_workspace and plan.request.fork is fork
        assert plan.request.head_sha == payload["pull_request"]["head"]["sha"]


def test_a_comment_without_the_command_and_a_green_run_are_ignored(tmp_path: Path) -> None:
    comment = example("issue_comment", "created")
    assert isinstance(plan_event(action_env(tmp_path, "issue_comment", comment)), Ignore)
    green = example("workflow_run", "completed", where=lambda p: p["workflow_run"]["conclusion"])
    assert isinstance(plan_event(action_env(tmp_path, "workflow_run", green)), Ignore)


def test_outputs_use_delimiters_so_any_value_is_safe(tmp_path: Path) -> None:
    path = tmp_path / "output"
    write_outputs(path, {"status": "verified", "message": "two\nlines\nstatus=hijacked"})
    assert parse_outputs(path.read_text()) == {
        "status": "verified",
        "message": "two\nlines\nstatus=hijacked",
    }


def test_local_commands_get_toolchain_locations_and_no_secrets() -> None:
    env = {**CANARIES, "JAVA_HOME": "/opt/java", "pythonLocation": "/opt/py", "AWS_SECRET": "x"}
    assert toolchain_env(env) == {"JAVA_HOME": "/opt/java", "pythonLocation": "/opt/py"}
