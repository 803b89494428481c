"""Host-side git for delivery: clone at a pinned commit, commit a verified patch, push.

Every call goes through `loopwright.git`: a configuration Loopwright owns, and a token that
reaches git only through a credential helper configured for the exact URL the host
computed, reading it from the environment of the one git process that needs it (never a
URL, an argv, a config file or a log line). Fetches and pushes name that URL, never a
remote whose configuration could be rewritten, and refuse a clone whose own configuration
would route or authenticate traffic.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from loopwright import git as host_git
from loopwright.sandbox.workspace import WorkspaceError, apply_patch

BOT_NAME = "loopwright[bot]"
BOT_EMAIL = "loopwright[bot]@users.noreply.github.com"
MISSION_TRAILER = "Loopwright-Mission"

# Keys in a clone's own `.git/config` that could send traffic elsewhere, add credentials,
# move the work tree or pull in other files. Loopwright never writes any of them, so their
# presence means the clone was tampered with, and nothing is fetched or pushed from it.
# (Hooks, fsmonitor, pagers and the like need no check: the runner overrides them.)
ROUTING_PREFIXES = ("url.", "http.", "credential.", "remote.", "include.", "includeif.")
ROUTING_KEYS = {"core.sshcommand", "core.gitproxy", "core.askpass", "core.worktree"}


class GitError(WorkspaceError):
    """A git operation against the remote failed; the message is safe to show."""


@dataclass(frozen=True)
class RemoteBranch:
    sha: str
    ours: bool
    """Every commit on the branch past the base was authored by Loopwright."""


def run_git(
    args: list[str],
    cwd: Path,
    *,
    token: str | None = None,
    remote: str | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Host git in `cwd`; `remote` is the one URL the call may reach, `token` is offered
    to that URL only."""
    if remote is not None:
        _refuse_routing_config(cwd)
    try:
        proc = host_git.run(args, cwd, remote=remote, token=token)
    except host_git.GitUsageError as exc:
        raise GitError(str(exc)) from None
    if check and proc.returncode != 0:
        raise GitError(host_git.failure(args, proc, secrets=[token or ""]))
    return proc


def clone_at(url: str, sha: str, dest: Path, token: str | None) -> Path:
    """A fresh repository at `dest` whose HEAD is exactly `sha` (detached). It has no
    remote: every later fetch and push names the URL again."""
    dest.mkdir(parents=True, exist_ok=False)
    run_git(["init", "--quiet"], dest)
    fetched = run_git(
        ["fetch", "--quiet", "--depth", "50", url, sha],
        dest,
        token=token,
        remote=url,
        check=False,
    )
    if fetched.returncode != 0:
        # Servers that refuse fetching by sha: fetch branches and look for it.
        run_git(
            ["fetch", "--quiet", url, "+refs/heads/*:refs/remotes/origin/*"],
            dest,
            token=token,
            remote=url,
        )
    run_git(["checkout", "--quiet", "--detach", sha], dest)
    return dest


def remote_branch(
    tree: Path, branch: str, base_sha: str, token: str | None, *, url: str
) -> RemoteBranch | None:
    """The tip of `branch` at `url` and whether only Loopwright committed on top of
    `base_sha`."""
    ref = f"refs/heads/{branch}"
    listed = run_git(["ls-remote", url, ref], tree, token=token, remote=url).stdout
    if not listed.strip():
        return None
    sha = listed.split()[0]
    run_git(
        ["fetch", "--quiet", url, f"+{ref}:refs/loopwright/remote"], tree, token=token, remote=url
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


def push_branch(
    tree: Path, branch: str, token: str | None, *, replace: str | None, url: str
) -> None:
    """Push HEAD to `branch` at `url`. `replace` is the remote tip we expect to overwrite
    (our own earlier commit); None means the branch must not exist. The lease makes git
    refuse if a human pushed in between, so nobody's work is ever force-pushed over."""
    lease = f"--force-with-lease=refs/heads/{branch}:{replace or ''}"
    run_git(
        ["push", "--quiet", "--no-verify", lease, url, f"HEAD:refs/heads/{branch}"],
        tree,
        token=token,
        remote=url,
    )


def push_fast_forward(tree: Path, branch: str, token: str | None, *, url: str) -> None:
    """Push HEAD to the existing `branch` at `url` as a plain push, without any kind of
    force: git and the server accept only a fast-forward, so a commit someone pushed
    meanwhile is never overwritten (the push fails instead)."""
    run_git(
        ["push", "--quiet", "--no-verify", url, f"HEAD:refs/heads/{branch}"],
        tree,
        token=token,
        remote=url,
    )


def _refuse_routing_config(tree: Path) -> None:
    """Refuse a clone whose own configuration could redirect or authenticate traffic.

    Git is asked for every setting it would read there, so one the repository pulls in
    from elsewhere (`.git/config.worktree`, an include, a `.git` file or `commondir` naming
    another directory) is seen too; only Loopwright's own command-line settings are skipped.
    """
    listed = host_git.run(["config", "--list", "--name-only", "--show-scope"], tree)
    if listed.returncode != 0:
        raise GitError(
            f"the git configuration of the clone at {tree} cannot be read; re-clone it: "
            f"{host_git.failure(['config'], listed)}"
        )
    for line in listed.stdout.splitlines():
        scope, _, key = line.partition("\t")
        name = key.lower()
        if scope == "command":
            continue
        if name.startswith(ROUTING_PREFIXES) or name in ROUTING_KEYS:
            where = {"local": ".git/config", "worktree": ".git/config.worktree"}.get(
                scope, f"its {scope} git configuration"
            )
            raise GitError(
                f"the clone at {tree} sets {key} in {where}, which Loopwright never "
                "writes and which could redirect or authenticate git traffic; nothing is "
                "fetched or pushed from it (start again from a fresh clone)"
            )
