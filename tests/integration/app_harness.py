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
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from litestar import Litestar
from litestar.testing import TestClient

from loopwright.agent.scripted import ScriptedModelServer
from loopwright.agent.scripted_steps import parse_steps
from loopwright.app.server import create_app
from loopwright.config import Settings
from tests.conftest import EXAMPLES, SUITE_PATH, VENV_BIN, git
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
         "refused", "ignored", "interrupted", "cancelled"}  # fmt: skip
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
    env: dict[str, str] = field(default_factory=dict)
    """The server's environment (what `loopwright serve` would be started with)."""

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
        # The comment exists on GitHub before its webhook arrives (reactions go to it).
        payload["comment"]["id"] = self.github.add_comment(REPO, self.pr_number, body, user=user)
        (made,) = [
            c
            for c in self.github.comments(REPO, self.pr_number)
            if c["id"] == payload["comment"]["id"]
        ]
        payload["comment"]["created_at"] = payload["comment"]["updated_at"] = made["created_at"]
        return payload

    def review_comment_payload(self, body: str, *, number: int, path: str, line: int,
                               user: str = "maintainer") -> dict[str, Any]:  # fmt: skip
        """A review comment left on `line` of `path` in pull request `number`'s diff."""
        payload = _rewrite(_fixture("pull_request_review_comment.created.command_on_pr"), self)
        comment = payload["comment"]
        comment.update(body=body, path=path, line=line, start_line=None, original_line=line)
        for who in (comment["user"], payload["sender"]):
            who.update(login=user, type="User")
        payload["pull_request"]["number"] = number
        # The comment exists on GitHub before its webhook arrives (reactions go to it).
        comment["id"] = self.github.add_review_comment(
            REPO, number, body, path=path, line=line, user=user
        )
        return payload

    # -- changing the world behind the App's back -------------------------------------------

    def push_commit(self, ref: str, files: dict[str, str], *, parent: str | None = None,
                    message: str = "human change", author: str = "Human <human@example.com>",
                    ) -> str:  # fmt: skip
        """Commit `files` on top of `parent` (default: the tip of `ref`) and push it to `ref`
        (a branch name or a full ref such as `refs/pull/2/head`); returns the new commit."""
        full = ref if ref.startswith("refs/") else f"refs/heads/{ref}"
        scratch = self.tmp / f"scratch-{uuid.uuid4().hex[:8]}"
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(self.bare), str(scratch)],
                       check=True, capture_output=True)  # fmt: skip
        base = parent or _git_out(scratch, "rev-parse", full.replace("refs/heads/", "origin/"))
        _git_out(scratch, "checkout", "-q", "--detach", base)
        for rel, text in files.items():
            target = scratch / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        name, _, email = author.partition(" <")
        _git_out(scratch, "add", "-A")
        _git_out(scratch, "-c", f"user.name={name}", "-c", f"user.email={email.rstrip('>')}",
                 "commit", "-qm", message)  # fmt: skip
        sha = _git_out(scratch, "rev-parse", "HEAD")
        _git_out(scratch, "push", "-q", "--force", "origin", f"HEAD:{full}")
        shutil.rmtree(scratch, ignore_errors=True)
        return sha

    def move_pull_head(self, number: int, sha: str) -> None:
        """What GitHub shows after a push to the pull request's head branch."""
        fake = self.github
        with fake._lock:
            pull = fake._repo(REPO).issues[number].pull
            assert pull is not None
            pull["head_sha"] = sha

    def close_pull(self, number: int) -> None:
        """A maintainer closes the pull request without merging it."""
        fake = self.github
        with fake._lock:
            issue = fake._repo(REPO).issues[number]
            issue.state = "closed"
            issue.closed_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def branches(self) -> dict[str, str]:
        """Every branch of the bare repository on the git server, with its tip."""
        out = _git_out(self.bare, "for-each-ref", "--format=%(refname:short) %(objectname)",
                       "refs/heads")  # fmt: skip
        return dict(line.split() for line in out.splitlines() if line.strip())

    def db(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        """Rows straight from the server's SQLite file (what survives the process)."""
        with sqlite3.connect(self.settings.data_dir / "loopwright.db") as conn:
            return list(conn.execute(query, args).fetchall())


def _git_out(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def post_webhook(client: httpx.Client, base_url: str, event: str, body: bytes, *,
                 delivery: str | None = None) -> httpx.Response:  # fmt: skip
    headers = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(body),
        "Content-Type": "application/json",
    }
    return client.post(f"{base_url}/webhooks/github", content=body, headers=headers)


@contextmanager
def uvicorn_in_thread(app: Litestar) -> Iterator[str]:
    """The app behind a real uvicorn server on loopback (a real socket, real concurrency);
    yields its base URL."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise AssertionError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(60)
        sock.close()


class ServeProcess:
    """`loopwright serve` as a separate process: the real CLI, configured by environment."""

    def __init__(self, env: dict[str, str], log: Path, *, workers: int = 1) -> None:
        self.env = env
        self.log = log
        self.port = free_port()
        self.workers = workers
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180) -> ServeProcess:
        # Each worker process imports the app afresh; on a busy two-core machine running
        # the rest of the suite beside it, that has taken over a minute.
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [f"{VENV_BIN}/loopwright", "serve", "--port", str(self.port),
                 "--workers", str(self.workers)],
                env={**self.env, "HOME": os.environ.get("HOME", "/tmp"), **_pythonpath()},
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited: {self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"serve did not answer: {self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL to every process of the server (its workers too): no lifespan shutdown,
        no cleanup, as when a machine dies."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()

    def mission(self, mission_id: str) -> dict[str, Any]:
        return dict(httpx.get(f"{self.url}/api/missions/{mission_id}", timeout=10).json())

    def wait(self, mission_id: str, timeout: float = 180) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        data: dict[str, Any] = {}
        while time.monotonic() < deadline:
            data = self.mission(mission_id)
            if data.get("status") in FINAL:
                return data
            time.sleep(0.2)
        raise AssertionError(f"mission {mission_id} did not finish: {data}")


def _pythonpath() -> dict[str, str]:
    """The test run's PYTHONPATH, so a server process imports the code under test."""
    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}


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
              env: dict[str, str] | None = None, app_kwargs: dict[str, Any] | None = None,
              serve: bool = True, per_conversation: bool = False) -> Iterator[World]:  # fmt: skip
    """`app_kwargs` go to `create_app` (test doubles of the sandbox provider); with
    `serve=False` no in-process server runs (the test starts its own on `world.settings`
    or `world.env`), and `world.client` is a client of nothing. `per_conversation` gives
    every mission the whole model script (see `ScriptedModelServer`)."""
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
            model = ScriptedModelServer(
                parse_steps(steps), per_conversation=per_conversation
            ).start()
            try:
                values = {
                    "PATH": f"{SUITE_PATH}:/usr/local/bin:/usr/bin:/bin",
                    "LOOPWRIGHT_GITHUB_APP_ID": str(APP_ID),
                    "LOOPWRIGHT_GITHUB_PRIVATE_KEY": key,
                    "LOOPWRIGHT_WEBHOOK_SECRET": SECRET,
                    "LOOPWRIGHT_GITHUB_API_URL": github.url,
                    # The fake has no secondary rate limits: a second between writes made
                    # twenty missions over three workers wait ~60 s on writes alone.
                    "LOOPWRIGHT_GITHUB_WRITE_INTERVAL_S": "0.05",
                    "LOOPWRIGHT_PUBLIC_URL": "http://loopwright.test",
                    "LOOPWRIGHT_DATA_DIR": str(tmp / "data"),
                    "LOOPWRIGHT_SANDBOX": "local",
                    "LOOPWRIGHT_MODEL_BASE_URL": model.base_url,
                    "LOOPWRIGHT_MODEL_API_KEY": "sk-test-app-key-123456",
                    "LOOPWRIGHT_MODEL_TIERS": "nano=model-nano,super=model-super",
                    **(env or {}),
                }
                settings = Settings.from_env(values)
                if not serve:
                    idle = TestClient(Litestar(route_handlers=[]))
                    yield World(tmp, git_server, github, model, settings, idle, head_sha,
                                number, bare, values)  # fmt: skip
                    return
                with TestClient(create_app(settings, **(app_kwargs or {}))) as client:
                    yield World(tmp, git_server, github, model, settings, client, head_sha,
                                number, bare, values)  # fmt: skip
            finally:
                model.stop()
