"""Host-side delivery git against a real git http-backend server that checks the token."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest

from loopwright.github.gitops import (
    BOT_EMAIL,
    GitError,
    clone_at,
    commit_patch,
    push_branch,
    remote_branch,
)
from tests.conftest import git, init_repo
from tests.fakes.git_server import GitServer

TOKEN = "ghs_TESTTOKEN1234567890abcdef"


@pytest.fixture
def served(tmp_path: Path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "app.py").write_text("def add(a, b):\n    return a - b\n")
    init_repo(work)
    srv_root = tmp_path / "srv"
    srv_root.mkdir()
    with GitServer(srv_root, token=TOKEN) as server:
        server.create_repo("octo/app", work)
        yield server, git("rev-parse", "HEAD", cwd=work).strip()


PATCH = """diff --git a/app.py b/app.py
--- a/app.py
+++ b/app.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""


def test_clone_commit_push_with_token_only_in_the_credential_helper(served, tmp_path):
    server, sha = served
    url = server.repo_url("octo/app")
    tree = clone_at(url, sha, tmp_path / "clone", TOKEN)
    assert git("rev-parse", "HEAD", cwd=tree).strip() == sha
    config = (tree / ".git" / "config").read_text()
    assert TOKEN not in config and "x-access-token" not in config
    commit = commit_patch(tree, PATCH, "Fix add", "m123")
    push_branch(tree, "loopwright/fix-1", TOKEN, replace=None, url=url)

    auths = {r["authorization"] for r in server.requests if r["authorization"]}
    assert auths == {"Basic " + base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()}
    branch = remote_branch(tree, "loopwright/fix-1", sha, TOKEN, url=url)
    assert branch is not None and branch.sha == commit and branch.ours
    message = git("log", "-1", "--format=%ae%n%B", commit, cwd=tree)
    assert message.startswith(BOT_EMAIL) and "Loopwright-Mission: m123" in message


def test_wrong_token_fails_without_echoing_it(served, tmp_path):
    server, sha = served
    with pytest.raises(GitError) as err:
        clone_at(server.repo_url("octo/app"), sha, tmp_path / "clone", "ghs_WRONGTOKEN999999")
    assert "ghs_WRONGTOKEN999999" not in str(err.value)


def test_a_human_commit_on_the_branch_is_never_pushed_over(served, tmp_path):
    server, sha = served
    url = server.repo_url("octo/app")
    ours = clone_at(url, sha, tmp_path / "ours", TOKEN)
    first = commit_patch(ours, PATCH, "Fix add", "m1")
    push_branch(ours, "loopwright/fix-1", TOKEN, replace=None, url=url)

    # A human adds a commit to Loopwright's branch.
    human = tmp_path / "human"
    subprocess.run(
        ["git", "clone", "-q", str(server.root / "octo/app.git"), str(human)], check=True
    )
    git("checkout", "-q", "loopwright/fix-1", cwd=human)
    (human / "NOTES.md").write_text("human work\n")
    git("add", "-A", cwd=human)
    git("commit", "-qm", "human change", cwd=human)
    git("push", "-q", "origin", "loopwright/fix-1", cwd=human)

    rerun = clone_at(url, sha, tmp_path / "rerun", TOKEN)
    branch = remote_branch(rerun, "loopwright/fix-1", sha, TOKEN, url=url)
    assert branch is not None and not branch.ours
    commit_patch(rerun, PATCH, "Fix add again", "m2")
    # Even with a stale lease naming our old commit, git refuses to overwrite the human's.
    with pytest.raises(GitError, match=r"stale info|rejected"):
        push_branch(rerun, "loopwright/fix-1", TOKEN, replace=first, url=url)
    tip = git("rev-parse", "loopwright/fix-1", cwd=server.root / "octo/app.git").strip()
    assert tip == branch.sha


def test_a_rerun_replaces_only_its_own_commit(served, tmp_path):
    server, sha = served
    url = server.repo_url("octo/app")
    first = clone_at(url, sha, tmp_path / "a", TOKEN)
    old = commit_patch(first, PATCH, "Fix add", "m1")
    push_branch(first, "loopwright/fix-1", TOKEN, replace=None, url=url)
    second = clone_at(url, sha, tmp_path / "b", TOKEN)
    branch = remote_branch(second, "loopwright/fix-1", sha, TOKEN, url=url)
    assert branch is not None and branch.ours and branch.sha == old
    new = commit_patch(second, PATCH, "Fix add (rerun)", "m2")
    push_branch(second, "loopwright/fix-1", TOKEN, replace=branch.sha, url=url)
    assert git("rev-parse", "loopwright/fix-1", cwd=server.root / "octo/app.git").strip() == new


def test_planted_hooks_in_the_remote_tree_never_run_on_the_host(served, tmp_path):
    server, sha = served
    sentinel = tmp_path / "sentinel"
    url = server.repo_url("octo/app")
    tree = clone_at(url, sha, tmp_path / "clone", TOKEN)
    hook = tree / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch {sentinel}\n")
    hook.chmod(0o755)
    subprocess.run(["git", "config", "core.fsmonitor", f"touch {sentinel}"], cwd=tree, check=True)
    commit_patch(tree, PATCH, "Fix", "m1")
    push_branch(tree, "loopwright/fix-9", TOKEN, replace=None, url=url)
    assert not sentinel.exists()
