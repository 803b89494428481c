"""Secrets and host-side git end to end (SECURITY.md checks 11, 12, 19 and 34).

A scripted model goes looking for credentials with the commands a prompt-injected agent
would run, and plants git settings and hooks that would run commands wherever git is next
invoked on its tree. Nothing it finds may contain a canary, and nothing it plants may run on
the host while Loopwright exports, verifies and delivers the patch.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from loopwright.config import Settings
from loopwright.secret_env import HANDOFF_VARIABLE, SECRET_VARIABLES
from loopwright.verify.web import CHROMIUM
from tests.conftest import ROOT, git, step, tool
from tests.fakes.git_server import GitServer
from tests.fakes.github import generate_app_key
from tests.scenarios import EDIT, FINISH, FIX_NEW, PLAN, model_env

MARK = "CANARY"
CANARIES = {
    "LOOPWRIGHT_MODEL_API_KEY": "sk-CANARY0123456789abcdefmodel",
    "GITHUB_TOKEN": "ghs_CANARY0123456789abcdefgithub",
    "GH_TOKEN": "ghp_CANARY0123456789abcdefgh",
    # Not token-shaped: only keeping it out of the sandbox keeps it out of the output.
    "ACTIONS_RUNTIME_TOKEN": "runtime.CANARY.0123456789",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "idtoken.CANARY.0123456789",
    "ACTIONS_ID_TOKEN_REQUEST_URL": "https://token.CANARY.invalid/request",
}
# The scan is spelled so that the command itself does not contain the marker.
SCAN = 'grep -rIl "CANA""RY" . "$HOME" "${TMPDIR:-/tmp}" 2>/dev/null; echo scanned'
RECON = [
    "env",
    "cat /proc/self/environ /proc/1/environ",
    "git config -l",
    "find / -name '*.pem' 2>/dev/null | head",
    "cat ~/.gitconfig",
    "git remote -v",
    "cat .git/config",
    SCAN,
]


def recon_script(commands: Iterable[str]) -> list[dict[str, Any]]:
    return [
        step(PLAN),
        *(step(tool("run_command", command=c)) for c in commands),
        step(EDIT),
        step(FINISH),
    ]


def tool_messages(server) -> list[str]:
    """Every tool result the model was sent, across all its requests."""
    seen: dict[str, str] = {}
    for request in server.requests:
        for message in request["messages"]:
            if message["role"] == "tool":
                seen[message["tool_call_id"]] = message["content"]
    return list(seen.values())


def files_containing(root: Path, needle: str) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and needle.encode() in path.read_bytes():
            hits.append(str(path))
    return hits


def outputs_by_command(run) -> dict[str, str]:
    commands = {
        e["id"]: json.loads(e["arguments"])["command"]
        for e in run.of_type("tool_call")
        if e["tool"] == "run_command"
    }
    return {
        commands[e["id"]]: e["output"] for e in run.of_type("tool_result") if e["id"] in commands
    }


def test_canary_secrets_never_reach_the_model_events_or_files(
    tmp_path, example_repo, scripted, run_cli, sandbox_kind
):
    repo = example_repo("python-invoice")
    server = scripted(recon_script(RECON))
    env = {**model_env(server), **CANARIES}
    run = run_cli("fix", str(repo), "--sandbox", sandbox_kind, env=env)

    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "verified"
    seen = tool_messages(server)
    assert len(seen) == len(RECON) + 2  # plan and edit; finish ends the mission
    # The probes really ran and printed something.
    outputs = outputs_by_command(run)
    assert "PATH=" in outputs["env"] and "HOME=" in outputs["env"]
    assert "scanned" in outputs[SCAN]
    assert [line for line in outputs[SCAN].splitlines() if line != "scanned"] == []
    for text in seen:
        assert MARK not in text, text
    # The snapshot the sandbox holds has no remote, so no URL and no credential.
    assert outputs["git remote -v"].strip() == ""
    assert "[remote" not in outputs["cat .git/config"]
    assert "url" not in outputs["cat .git/config"]
    assert "[remote" not in outputs["git config -l"]

    events_text = "\n".join(json.dumps(e) for e in run.events)
    assert MARK not in events_text
    # A masked value would mean a secret got as far as the event bus.
    assert "[REDACTED]" not in events_text
    assert MARK not in json.dumps(run.result)
    assert files_containing(tmp_path / "data", MARK) == []
    assert files_containing(repo, MARK) == []
    assert FIX_NEW in (repo / "invoice/totals.py").read_text()


def test_git_credentials_in_the_source_url_stay_on_the_host(
    tmp_path, example_repo, scripted, run_cli
):
    token = CANARIES["GITHUB_TOKEN"]
    source = example_repo("python-invoice")
    (tmp_path / "srv").mkdir()
    with GitServer(tmp_path / "srv", token=token) as git_server:
        git_server.create_repo("shop/invoice", source)
        url = git_server.repo_url("shop/invoice").replace("http://", f"http://x:{token}@")
        server = scripted(
            recon_script(["git remote -v", "cat .git/config", "git log --format=%an%n%B", SCAN])
        )
        run = run_cli("fix", url, "--sandbox", "local", env=model_env(server))

    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "verified"
    assert any(r["authorization"] for r in git_server.requests)
    outputs = outputs_by_command(run)
    assert outputs["git remote -v"].strip() == ""
    assert "[remote" not in outputs["cat .git/config"]
    for text in tool_messages(server):
        assert MARK not in text, text
    assert MARK not in "\n".join(json.dumps(e) for e in run.events)
    assert MARK not in json.dumps(run.result)
    assert files_containing(tmp_path / "data", MARK) == []


def test_failed_clone_does_not_leak_url_credentials_into_the_result(
    tmp_path, example_repo, scripted, run_cli
):
    token = CANARIES["GITHUB_TOKEN"]
    source = example_repo("python-invoice")
    (tmp_path / "srv").mkdir()
    with GitServer(tmp_path / "srv", token="the-right-token") as git_server:
        git_server.create_repo("shop/invoice", source)
        url = git_server.repo_url("shop/invoice").replace("http://", f"http://x:{token}@")
        server = scripted([step(FINISH)])
        run = run_cli("fix", url, "--sandbox", "local", env=model_env(server))

    assert run.result["status"] == "error"
    assert server.requests == []
    assert MARK not in "\n".join(json.dumps(e) for e in run.events)
    assert files_containing(tmp_path / "data", MARK) == []
    assert MARK not in json.dumps(run.result)


# -- host-side git never runs what the agent planted ---------------------------------------

HOOKS = (
    "pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "pre-applypatch",
    "applypatch-msg", "post-applypatch", "post-checkout", "post-merge", "pre-rebase",
    "post-rewrite", "post-index-change", "reference-transaction", "pre-auto-gc", "pre-push",
)  # fmt: skip


def planted_config(sentinel: Path, evil_hooks: Path) -> list[str]:
    """Commands that make git run `touch SENTINEL/<name>` from settings in the repository."""
    s = sentinel
    hooks = " ".join(HOOKS)
    return [
        f'git config core.fsmonitor "touch {s}/fsmonitor"',
        # The snapshot's repository has no hooks folder (no template): an agent makes one.
        f"mkdir -p .git/hooks && for h in {hooks}; do "
        f"printf '#!/bin/sh\\ntouch {s}/hook-%s\\n' $h > .git/hooks/$h; "
        "chmod +x .git/hooks/$h; done",
        # A hooks directory prepared on the host (only reachable by the local backend).
        f"git config core.hooksPath {evil_hooks}",
        f'git config core.pager "touch {s}/pager; cat"',
        f'git config pager.diff "touch {s}/pager-diff; cat"',
        f'git config diff.external "touch {s}/diff-external"',
        f'git config core.editor "touch {s}/editor"',
        f'git config sequence.editor "touch {s}/sequence-editor"',
        f'git config core.sshCommand "touch {s}/ssh-command"',
        f'git config gpg.program "touch {s}/gpg"',
        "git config commit.gpgsign true",
        f'git config alias.apply "!touch {s}/alias"',
        "git config -l",
    ]


def drivers(sentinel: Path) -> list[str]:
    """Diff and filter drivers: named in .gitattributes, defined in .git/config."""
    s = sentinel
    return [
        'mkdir -p "$HOME/bin" && '
        f"printf '#!/bin/sh\\ntouch {s}/textconv 2>/dev/null\\ncat \"$1\"\\n' "
        '> "$HOME/bin/textconv" && '
        f"printf '#!/bin/sh\\ntouch {s}/filter-$1 2>/dev/null\\ncat\\n' > \"$HOME/bin/filter\" && "
        'chmod +x "$HOME/bin/textconv" "$HOME/bin/filter"',
        'git config diff.lw.textconv "$HOME/bin/textconv"',
        'git config filter.lw.clean "$HOME/bin/filter clean"',
        'git config filter.lw.smudge "$HOME/bin/filter smudge"',
        "printf '*.py diff=lw filter=lw\\n' > .gitattributes",
        "git config -l",
    ]


def evil_hooks_dir(tmp_path: Path, sentinel: Path) -> Path:
    hooks = tmp_path / "evil-hooks"
    hooks.mkdir()
    for name in HOOKS:
        hook = hooks / name
        hook.write_text(f"#!/bin/sh\ntouch {sentinel}/hooks-path-{name}\n")
        hook.chmod(0o755)
    return hooks


@pytest.fixture
def sentinel(tmp_path: Path) -> Path:
    path = tmp_path / "sentinel"
    path.mkdir()
    # The docker sandbox's uid must not be what keeps it empty: anyone may write here.
    path.chmod(stat.S_IRWXU | stat.S_IRWXG | stat.S_IRWXO)
    return path


def run_planted(commands, repo, scripted, run_cli, sandbox_kind):
    server = scripted(recon_script(commands))
    run = run_cli("fix", str(repo), "--sandbox", sandbox_kind, env=model_env(server))
    statuses = [e["status"] for e in run.of_type("tool_result") if e["tool"] == "run_command"]
    assert statuses == ["ok"] * len(commands), outputs_by_command(run)
    return run


def test_planted_git_config_and_hooks_never_run_on_the_host(
    tmp_path, sentinel, example_repo, scripted, run_cli, sandbox_kind
):
    repo = example_repo("python-invoice")
    commands = planted_config(sentinel, evil_hooks_dir(tmp_path, sentinel))
    run = run_planted(commands, repo, scripted, run_cli, sandbox_kind)

    # The settings were really in place in the agent's repository.
    config = outputs_by_command(run)["git config -l"]
    assert f"core.fsmonitor=touch {sentinel}/fsmonitor" in config
    assert "core.hookspath=" in config
    # Export, verification and delivery all ran.
    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "verified"
    assert run.result["applied"] is True
    assert sorted(p.name for p in sentinel.iterdir()) == []
    # Nothing of the agent's .git reached the user's repository.
    user_config = (repo / ".git/config").read_text()
    assert "fsmonitor" not in user_config and "hooksPath" not in user_config
    assert not [h for h in HOOKS if (repo / ".git/hooks" / h).exists()]
    assert git("status", "--porcelain", cwd=repo).strip() == "M invoice/totals.py"
    assert sorted(p.name for p in sentinel.iterdir()) == []


def _drivers_case(kind: str):
    marks = [pytest.mark.docker] if kind == "docker" else []
    return pytest.param(kind, marks=marks, id=kind)


@pytest.mark.parametrize("kind", [_drivers_case("local"), _drivers_case("docker")])
def test_planted_diff_and_filter_drivers_never_run_on_the_host(
    kind, request, sentinel, example_repo, scripted, run_cli
):
    if kind == "docker":
        request.getfixturevalue("docker_ready")
    repo = example_repo("python-invoice")
    run = run_planted(drivers(sentinel), repo, scripted, run_cli, kind)

    assert "diff.lw.textconv=" in outputs_by_command(run)["git config -l"]
    assert run.result["status"] == "verified", run.result["message"]
    assert sorted(p.name for p in sentinel.iterdir()) == []


# -- the parent's environment ----------------------------------------------------------------

PROC_SCAN = (
    'for p in /proc/[0-9]*; do tr "\\0" "\\n" < "$p/environ"; done 2>/dev/null '
    '| grep -a "CANA""RY"; echo scanned'
)


def start_up_environment(tmp_path: Path, server) -> dict[str, str]:
    """A `loopwright` command's whole environment, canaries included, as a CI job starts it."""
    return {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "LOOPWRIGHT_DATA_DIR": str(tmp_path / "data"),
        "LOOPWRIGHT_MODEL_BASE_URL": server.base_url,
        "LOOPWRIGHT_MODEL_TIERS": "nano=model-nano",
        **CANARIES,
    }


def _proc_case(kind: str):
    if kind == "docker":
        return pytest.param(kind, marks=pytest.mark.docker, id=kind)
    return pytest.param(kind, id=kind)


@pytest.mark.parametrize("kind", [_proc_case("local"), _proc_case("docker")])
def test_secrets_in_the_start_up_environment_are_unreadable_from_commands(
    kind, request, tmp_path, example_repo, scripted
):
    """Canaries set when the process starts (as in a CI job), not patched in afterwards."""
    if kind == "docker":
        request.getfixturevalue("docker_ready")
    repo = example_repo("python-invoice")
    commands = ['tr "\\0" "\\n" < /proc/$PPID/environ; echo parent', PROC_SCAN]
    server = scripted(recon_script(commands))
    # Only the real key gets answers: the settings were read from the handed-back secrets.
    server.api_key = CANARIES["LOOPWRIGHT_MODEL_API_KEY"]
    env = start_up_environment(tmp_path, server)
    if os.environ.get("DOCKER_HOST"):
        env["DOCKER_HOST"] = os.environ["DOCKER_HOST"]
    proc = subprocess.run(
        ["loopwright", "fix", str(repo), "--sandbox", kind, "--json", "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "verified"
    seen = tool_messages(server)
    assert any("scanned" in text for text in seen)
    for text in seen:
        assert MARK not in text, text
    assert MARK not in proc.stdout and MARK not in proc.stderr


# -- what the host's own child processes inherit ---------------------------------------------

HANDOFF_PROBE = """\
import json, os, subprocess, sys
from loopwright.secret_env import HANDOFF_VARIABLE, SECRET_VARIABLES, restart_without_secrets

env = restart_without_secrets([sys.executable, "-P", sys.argv[0]])
# A child started as Playwright, the local model server and pip are: no env= of its own.
child = subprocess.run(["cat", "/proc/self/environ"], capture_output=True, check=True).stdout
with open("/proc/self/environ", "rb") as own:
    block = own.read()
print(json.dumps({
    "handed_back": sorted(k for k in SECRET_VARIABLES if "CANA" "RY" in env.get(k, "")),
    "in_os_environ": sorted(k for k, v in os.environ.items() if "CANA" "RY" in v),
    "pipe_named": HANDOFF_VARIABLE in os.environ,
    "own_block": b"CANA" b"RY" in block,
    "child_block": b"CANA" b"RY" in child,
    "child_path": b"PATH=" in child,
}))
"""
EVERY_SECRET = {name: f"{name.lower()}-{MARK}-0123456789" for name in SECRET_VARIABLES}


@pytest.mark.parametrize("preset", [False, True], ids=["plain", "hand-off-variable-preset"])
def test_handed_back_secrets_stay_out_of_os_environ_and_of_host_children(tmp_path, preset):
    """`preset`: whoever starts Loopwright also sets the hand-off variable (naming an empty
    stdin here): the secrets beside it are still handed over, not left in place."""
    probe = tmp_path / "probe.py"
    probe.write_text(HANDOFF_PROBE)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), **EVERY_SECRET}
    if preset:
        env[HANDOFF_VARIABLE] = "0"
    proc = subprocess.run(
        [sys.executable, "-P", str(probe)],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    seen = json.loads(proc.stdout)
    # The process has every secret to build its settings from...
    assert seen["handed_back"] == sorted(SECRET_VARIABLES)
    # ...and none where a child inherits it, nor in its own start-up block.
    assert seen["in_os_environ"] == []
    assert seen["pipe_named"] is False
    assert seen["own_block"] is False
    assert seen["child_path"] is True and seen["child_block"] is False


def test_every_variable_a_secret_setting_is_read_from_is_handed_over() -> None:
    """Each value `Settings.secrets()` masks comes from a variable the restart takes out
    of the environment block: a secret setting added later must be added there too."""
    env = {
        "LOOPWRIGHT_MODEL_API_KEY": "sk-model-key-0123456789",
        "LOOPWRIGHT_GITHUB_APP_ID": "1",
        "LOOPWRIGHT_GITHUB_PRIVATE_KEY": generate_app_key(),
        "LOOPWRIGHT_WEBHOOK_SECRET": "webhook-secret-0123456789",
        "LOOPWRIGHT_GITHUB_CLIENT_ID": "Iv1.client",
        "LOOPWRIGHT_GITHUB_CLIENT_SECRET": "client-secret-0123456789",
        "LOOPWRIGHT_DASHBOARD_TOKEN": "dashboard-token-0123456789",
        "LOOPWRIGHT_DATABASE_URL": "postgresql://lw:db-password-0123@127.0.0.1/lw",
        "LOOPWRIGHT_QUEUE_URL": "redis://:queue-password-0123@127.0.0.1:6379/0",
    }
    secrets = Settings.from_env(env).secrets()
    assert len(secrets) == 7  # every secret setting is set above
    sources = {name for name, value in env.items() for secret in secrets if secret in value}
    assert sources - set(SECRET_VARIABLES) == set()
    assert len(sources) == 7


class _ScanOnRequest(ThreadingHTTPServer):
    """While the page is being loaded, the app under test asks this listener to look: every
    process below Loopwright is scanned then, the Playwright driver and Chromium included."""

    def __init__(self, root_pid: Callable[[], int | None]) -> None:
        self.root_pid = root_pid
        self.scans: list[dict[int, tuple[str, bool]]] = []
        super().__init__(("127.0.0.1", 0), _ScanHandler)


class _ScanHandler(BaseHTTPRequestHandler):
    server: _ScanOnRequest

    def do_GET(self) -> None:
        pid = self.server.root_pid()
        if pid is not None:
            self.server.scans.append(descendants_environ(pid))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


def descendants_environ(root: int) -> dict[int, tuple[str, bool]]:
    """Each process below `root`: its command line, and whether its start-up environment
    holds a canary."""
    parents: dict[int, int] = {}
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = status.read_text()
        except OSError:
            continue
        parents[int(status.parent.name)] = int(text.rsplit(")", 1)[1].split()[1])
    found, frontier = {}, [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in found:
                try:
                    command = (Path(f"/proc/{child}/cmdline").read_bytes()).replace(b"\0", b" ")
                    block = Path(f"/proc/{child}/environ").read_bytes()
                except OSError:  # gone, or another user's: its children are still looked at
                    command, block = b"(unreadable)", b""
                found[child] = (command.decode(errors="replace"), MARK.encode() in block)
                frontier.append(child)
    return found


SCANNING_SERVER = """\
'use strict';

const http = require('node:http');
const { handle } = require('./src/todos');

const port = Number(process.env.PORT || 3000);
http.createServer((req, res) => {
  const done = () => handle(req, res);
  http.get('http://127.0.0.1:%d/scan', (answer) => {
    answer.resume();
    answer.on('end', done);
  }).on('error', done);
}).listen(port, () => {
  console.log(`to-do page on http://127.0.0.1:${port}/`);
});
"""


@pytest.mark.browser
def test_secrets_are_in_no_host_process_while_the_app_under_test_is_served(
    tmp_path, example_repo, scripted
):
    """The moment a local-sandbox app is most exposed: it is running while Playwright's
    driver and Chromium, processes of Loopwright's own, load its page."""
    from tests.integration.test_web_verification import FIX_SCRIPT, app_config

    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} is missing; scripts/bootstrap.sh installs it")
    loopwright: list[int] = []
    listener = _ScanOnRequest(lambda: loopwright[0] if loopwright else None)
    thread = threading.Thread(target=listener.serve_forever, daemon=True)
    thread.start()
    try:
        files = {
            **app_config("local"),
            "server.js": SCANNING_SERVER % listener.server_address[1],
        }
        repo = example_repo("node-todo-web", files)
        # The model server accepts only the real key: the settings still get it.
        server = scripted(FIX_SCRIPT)
        server.api_key = CANARIES["LOOPWRIGHT_MODEL_API_KEY"]
        env = {
            **start_up_environment(tmp_path, server),
            # Secret settings a `fix` does not use, which a process may still have been
            # started with (a shared environment file): none may reach a child either.
            "LOOPWRIGHT_WEBHOOK_SECRET": f"webhook-{MARK}-0123456789",
            "LOOPWRIGHT_DASHBOARD_TOKEN": f"dashboard-{MARK}-0123456789",
            "LOOPWRIGHT_GITHUB_CLIENT_ID": "Iv1.client",
            "LOOPWRIGHT_GITHUB_CLIENT_SECRET": f"client-{MARK}-0123456789",
            "LOOPWRIGHT_QUEUE_URL": f"redis://:queue-{MARK}@127.0.0.1:9/0",
            "INPUT_GITHUB_TOKEN": f"ghs_{MARK}0123456789input",
        }
        proc = subprocess.Popen(
            ["loopwright", "fix", str(repo), "--sandbox", "local", "--json", "--quiet"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        loopwright.append(proc.pid)  # the hand-off re-executes in place: the pid stays
        out, err = proc.communicate(timeout=600)
    finally:
        listener.shutdown()
        listener.server_close()
    assert proc.returncode == 0, err
    result = json.loads(out)
    assert result["status"] == "verified", result["message"]
    assert result["verification"]["web"]["http_status"] == 200
    assert listener.scans, "the page was never requested"
    commands = [command for scan in listener.scans for command, _ in scan.values()]
    # The scan ran while Loopwright's browser was up: it could have found a secret there.
    assert any("chromium" in command for command in commands), commands
    assert any("node" in command and "playwright" in command for command in commands), commands
    leaking = [c for scan in listener.scans for c, canary in scan.values() if canary]
    assert leaking == []
