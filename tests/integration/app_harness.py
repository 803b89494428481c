"""A whole GitHub App world on loopback: git server, fake GitHub, scripted model, the server.

Everything speaks its real protocol: webhooks are signed like GitHub signs them, the App
authenticates with a JWT and scoped installation tokens against a fake that validates
every request against GitHub's OpenAPI description, git clones and pushes go through
`git http-backend`, and the model is an OpenAI-compatible HTTP server.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from litestar.testing import TestClient

from loopwright.agent.scripted import ScriptedModelServer, parse_steps
from loopwright.app.server import create_app
from loopwright.config import Settings
from tests.conftest import EXAMPLES, VENV_BIN, git
from tests.fakes.git_server import GitServer
from tests.fakes.github import FakeGitHub, generate_app_key

WEBHOOK_EXAMPLES = (
    Path(__file__).resolve().parents[1]
    / "fakes/npm/node_modules/@octokit/webhooks-examples/api.github.com/index.json"
)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "webhooks"
REPO = "acme/invoice"
INSTALLATION = 4242
SECRET = "It's a Secret to Everybody"
APP_ID = 31337
FINAL = {"verified", "unverified", "flaky", "nothing_to_fix", "budget_exceeded", "error",
         "refused", "ignored", "interrupted"}  # fmt: skip
CONFIG = "auto_fix: true\ntest_cmd: python -m pytest\n"


def sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass
class World:
    tmp: Path
    git: GitServer
    github: FakeGitHub
    model: ScriptedModelServer
    settings: Settings
    client: TestClient[Any]
    head_sha: str
    pr_number: int
    bare: Path

    def deliver(self, event: str, payload: dict[str, Any], *, delivery: str | None = None,
                signature: str | None = None, body: bytes | None = None) -> Any:  # fmt: skip
        raw = body if body is not None else json.dumps(payload).encode()
        headers = {
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
            "X-Hub-Signature-256": signature if signature is not None else sign(raw),
            "Content-Type": "application/json",
        }
        return self.client.post("/webhooks/github", content=raw, headers=headers)

    def wait(self, mission_id: str, timeout: float = 180) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            data = self.client.get(f"/api/missions/{mission_id}").json()
            if data["status"] in FINAL:
                return dict(data)
            time.sleep(0.2)
        raise AssertionError(f"mission {mission_id} did not finish: {data}")

    def check_run_payload(self, conclusion: str = "failure") -> dict[str, Any]:
        payload = _rewrite(_fixture("check_run.completed.timed_out"), self)
        payload["check_run"]["conclusion"] = conclusion
        return payload

    def comment_payload(self, body: str, user: str = "maintainer") -> dict[str, Any]:
        payload = _rewrite(_fixture("issue_comment.created.command_on_pr"), self)
        payload["comment"]["body"] = body
        payload["comment"]["user"]["login"] = user
        payload["comment"]["user"]["type"] = "User"
        payload["sender"]["login"] = user
        payload["sender"]["type"] = "User"
        payload["issue"]["number"] = self.pr_number
        return payload


def _fixture(name: str) -> dict[str, Any]:
    return dict(json.loads((FIXTURES / f"{name}.json").read_text()))


def _rewrite(payload: dict[str, Any], world: World) -> dict[str, Any]:
    """Point a recorded payload at this world's repository, commit and installation."""
    old_repo = payload["repository"]["full_name"]
    text = json.dumps(payload).replace(old_repo, REPO)
    old_sha = _find_head_sha(payload)
    if old_sha:
        text = text.replace(old_sha, world.head_sha)
    data = json.loads(text)
    data["installation"] = {"id": INSTALLATION, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9u"}
    data["repository"]["clone_url"] = world.git.repo_url(REPO)
    data["repository"]["default_branch"] = "main"
    subject = data.get("check_run") or data.get("check_suite") or data.get("workflow_run") or {}
    suite = subject.get("check_suite") or {}
    for pr in [*(subject.get("pull_requests") or []), *(suite.get("pull_requests") or [])]:
        pr["number"] = world.pr_number
        pr["url"] = f"https://api.github.com/repos/{REPO}/pulls/{world.pr_number}"
        pr["head"]["ref"] = "feature"
        pr["base"]["ref"] = "main"
    for holder in (subject, suite):
        if "head_branch" in holder:
            holder["head_branch"] = "feature"
    return data


def _find_head_sha(payload: dict[str, Any]) -> str | None:
    for key in ("check_run", "check_suite", "workflow_run"):
        if key in payload:
            return str(payload[key]["head_sha"])
    return None


@contextmanager
def app_world(tmp: Path, steps: list[dict[str, Any]], *, config: str = CONFIG,
              env: dict[str, str] | None = None) -> Iterator[World]:  # fmt: skip
    work = tmp / "work"
    shutil.copytree(EXAMPLES / "python-invoice", work)
    (work / ".github").mkdir()
    (work / ".github" / "loopwright.yml").write_text(config)
    git("init", "-q", "-b", "main", cwd=work)
    git("add", "-A", cwd=work)
    git("commit", "-qm", "invoice with a discount bug", cwd=work)
    git("checkout", "-qb", "feature", cwd=work)
    (work / "NOTES.md").write_text("feature work\n")
    git("add", "-A", cwd=work)
    git("commit", "-qm", "feature", cwd=work)
    head_sha = git("rev-parse", "HEAD", cwd=work).strip()
    srv = tmp / "srv"
    srv.mkdir()
    key = generate_app_key()
    with GitServer(srv) as git_server:
        bare = git_server.create_repo(REPO, work)
        subprocess.run(["git", "-C", str(bare), "branch", "-f", "feature", head_sha], check=True)
        with FakeGitHub(APP_ID, key, git_url=git_server.url) as github:
            github.add_installation(INSTALLATION, "acme", repositories=[REPO])
            github.add_repo(REPO, clone_url=git_server.repo_url(REPO), git_dir=bare)
            github.set_permission(REPO, "maintainer", "write")
            github.set_permission(REPO, "reader", "read")
            number = github.add_pull(REPO, head_ref="feature", head_sha=head_sha, base_ref="main",
                                     title="Feature", body="", user="maintainer")  # fmt: skip
            model = ScriptedModelServer(parse_steps(steps)).start()
            try:
                values = {
                    "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin",
                    "LOOPWRIGHT_GITHUB_APP_ID": str(APP_ID),
                    "LOOPWRIGHT_GITHUB_PRIVATE_KEY": key,
                    "LOOPWRIGHT_WEBHOOK_SECRET": SECRET,
                    "LOOPWRIGHT_GITHUB_API_URL": github.url,
                    "LOOPWRIGHT_PUBLIC_URL": "http://loopwright.test",
                    "LOOPWRIGHT_DATA_DIR": str(tmp / "data"),
                    "LOOPWRIGHT_SANDBOX": "local",
                    "LOOPWRIGHT_MODEL_BASE_URL": model.base_url,
                    "LOOPWRIGHT_MODEL_API_KEY": "sk-test-app-key-123456",
                    "LOOPWRIGHT_MODEL_TIERS": "nano=model-nano,super=model-super",
                    **(env or {}),
                }
                settings = Settings.from_env(values)
                with TestClient(create_app(settings)) as client:
                    yield World(tmp, git_server, github, model, settings, client, head_sha,
                                number, bare)  # fmt: skip
            finally:
                model.stop()
