"""Host-side git for delivery: clone at a pinned commit, commit a verified patch, push.

The installation token reaches git only through a credential helper that reads it from
the environment of the one git process that needs it: never in a URL, an argv, a config
file or a log line. Every git call disables hooks and fsmonitor, and works only in trees
this module created itself.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from loopwright.sandbox.workspace import SAFE_GIT, WorkspaceError, apply_patch

TOKEN_VAR = "LOOPWRIGHT_GIT_TOKEN"  # noqa: S105 - the variable's name, not a secret
# The helper script names the variable; the value is only in the child's environment.
CREDENTIAL_HELPER = f'!f() {{ echo username=x-access-token; echo "password=${TOKEN_VAR}"; }}; f'
BOT_NAME = "loopwright[bot]"
BOT_EMAIL = "loopwright[bot]@users.noreply.github.com"
MISSION_TRAILER = "Loopwright-Mission"


class GitError(WorkspaceError):
    """A git operation against the remote failed; the message is safe to show."""


@dataclass(frozen=True)
class RemoteBranch:
    sha: str
    ours: bool
    """Every commit on the branch past the base was authored by Loopwright."""


def run_git(
    args: list[str], cwd: Path, *, token: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/false",
        "LANG": "C.UTF-8",
    }
    helper: list[str] = []
    if token is not None:
        env[TOKEN_VAR] = token
        helper = ["-c", "credential.helper=", "-c", f"credential.helper={CREDENTIAL_HELPER}"]
    proc = subprocess.run(
        ["git", *SAFE_GIT, *helper, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        if token:
            detail = detail.replace(token, "[REDACTED]")
        raise GitError(f"git {args[0]} failed: {detail[-1500:]}")
    return proc


def clone_at(url: str, sha: str, dest: Path, token: str | None) -> Path:
    """A fresh repository at `dest` whose HEAD is exactly `sha` (detached)."""
    dest.mkdir(parents=True, exist_ok=False)
    run_git(["init", "--quiet"], dest)
    run_git(["remote", "add", "origin", url], dest)
    fetched = run_git(
        ["fetch", "--quiet", "--depth", "50", "origin", sha], dest, token=token, check=False
    )
    if fetched.returncode != 0:
        # Servers that refuse fetching by sha: fetch branches and look for it.
        run_git(
            ["fetch", "--quiet", "origin", "+refs/heads/*:refs/remotes/origin/*"], dest, token=token
        )
    run_git(["checkout", "--quiet", "--detach", sha], dest)
    return dest


def remote_branch(tree: Path, branch: str, base_sha: str, token: str | None) -> RemoteBranch | None:
    """The remote branch's tip and whether only Loopwright committed on top of `base_sha`."""
    listed = run_git(["ls-remote", "origin", f"refs/heads/{branch}"], tree, token=token).stdout
    if not listed.strip():
        return None
    sha = listed.split()[0]
    run_git(
        ["fetch", "--quiet", "origin", f"+refs/heads/{branch}:refs/loopwright/remote"],
        tree,
        token=token,
    )
    authors = run_git(
        ["log", "--format=%ae", f"{base_sha}..refs/loopwright/remote"], tree, check=False
    )
    emails = set(authors.stdout.split()) if authors.returncode == 0 else {"unknown"}
    return RemoteBranch(sha=sha, ours=emails <= {BOT_EMAIL})


def commit_patch(tree: Path, patch: str, message: str, mission_id: str) -> str:
    """Apply the verified patch (hooks off) and commit it as the App; return the commit."""
    apply_patch(tree, patch)
    run_git(["add", "--all"], tree)
    full = f"{message}\n\n{MISSION_TRAILER}: {mission_id}\n"
    run_git(
        [
            "-c", f"user.name={BOT_NAME}",
            "-c", f"user.email={BOT_EMAIL}",
            "commit", "--quiet", "--no-verify", "-m", full,
        ],
        tree,
    )  # fmt: skip
    return run_git(["rev-parse", "HEAD"], tree).stdout.strip()


def push_branch(tree: Path, branch: str, token: str | None, *, replace: str | None) -> None:
    """Push HEAD to `branch`. `replace` is the remote tip we expect to overwrite (our own
    earlier commit); None means the branch must not exist. The lease makes git refuse if a
    human pushed in between, so nobody's work is ever force-pushed over."""
    lease = f"--force-with-lease=refs/heads/{branch}:{replace or ''}"
    run_git(["push", "--quiet", lease, "origin", f"HEAD:refs/heads/{branch}"], tree, token=token)
