"""Host-side git on hostile trees (SECURITY 35, 36), with real git and a real git server.

A repository (or a patch) carries every way a tree can configure git: `.gitconfig`,
`.config/git/config`, `.gitattributes` selecting filter, diff and merge drivers,
`include.path`/`includeIf`, pager, fsmonitor and hooksPath settings, hooks, `.gitmodules`
with a command and an `ext::` URL, a gitlink and a nested repository. Each driver would
touch a file in a marker directory outside every tree. Each host operation (snapshot,
clone, local export, apply, the deliver-time `git diff --stat`, clone_at, commit_patch,
push_branch, remote_branch) must still work, and the marker directory must stay empty.
Planted `insteadOf`/`pushInsteadOf` rewrites point at a git server of the test's own on
127.0.0.1 that demands credentials: it must never see a token.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
from pathlib import Path

import pytest

from loopwright import git as host_git
from loopwright.config import SandboxLimits
from loopwright.github.gitops import GitError, clone_at, commit_patch, push_branch, remote_branch
from loopwright.sandbox.local import LocalProvider
from loopwright.sandbox.workspace import (
    WorkspaceError,
    apply_patch,
    clone,
    export_patch,
    git,
    patched_copy,
    snapshot,
)
from tests.conftest import git as run_test_git
from tests.conftest import init_repo
from tests.fakes.git_server import GitServer

TOKEN = "ghs_HOSTGITTOKEN0123456789abcdef"
ATTACKER_TOKEN = "ghs_ATTACKERWANTSATOKEN000000000"
HOOKS = (
    "pre-commit", "post-commit", "post-checkout", "pre-push", "reference-transaction",
    "post-index-change", "pre-auto-gc", "post-merge", "commit-msg", "prepare-commit-msg",
)  # fmt: skip


def evil_config(markers: Path) -> str:
    """A git config that runs a command through every setting that can run one."""

    def run(name: str) -> str:
        return f"touch {markers}/{name}; cat"

    return f"""[filter "evil"]
\tclean = {run("filter-clean")}
\tsmudge = {run("filter-smudge")}
\tprocess = touch {markers}/filter-process
\trequired = true
[diff "evil"]
\ttextconv = {run("diff-textconv")}
\tcommand = touch {markers}/diff-command
[merge "evil"]
\tdriver = touch {markers}/merge-driver
[diff]
\texternal = touch {markers}/diff-external
[core]
\tpager = touch {markers}/core-pager
\tfsmonitor = touch {markers}/core-fsmonitor
\thooksPath = hooks
\tsshCommand = touch {markers}/core-ssh
\taskPass = touch {markers}/core-askpass
[credential]
\thelper = !touch {markers}/credential-helper
[include]
\tpath = evil-include.cfg
[includeIf "gitdir:/"]
\tpath = evil-include.cfg
"""


def install_hooks(hooks: Path, markers: Path) -> None:
    hooks.mkdir(parents=True, exist_ok=True)
    for name in HOOKS:
        hook = hooks / name
        hook.write_text(f"#!/bin/sh\ntouch {markers}/hook-{name}\n")
        hook.chmod(0o755)


def plant(tree: Path, markers: Path) -> None:
    """Every git configuration a tree can carry, as files in the tree."""
    config = evil_config(markers)
    (tree / ".gitconfig").write_text(config)
    (tree / ".config" / "git").mkdir(parents=True, exist_ok=True)
    (tree / ".config" / "git" / "config").write_text(config)
    (tree / ".config" / "git" / "attributes").write_text("* filter=evil diff=evil\n")
    (tree / "evil-include.cfg").write_text(
        f"[core]\n\tfsmonitor = touch {markers}/include-fsmonitor\n"
        f"[diff]\n\texternal = touch {markers}/include-diff-external\n"
    )
    (tree / ".gitattributes").write_text("* filter=evil diff=evil merge=evil\n")
    (tree / ".gitmodules").write_text(
        '[submodule "sub"]\n\tpath = sub\n'
        f"\turl = ext::sh -c touch% {markers}/gitmodules-ext\n"
        f"\tupdate = !touch {markers}/gitmodules-update\n"
    )
    install_hooks(tree / "hooks", markers)


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    where = tmp_path / "markers"
    where.mkdir()
    return where


@pytest.fixture
def hostile(tmp_path: Path, markers: Path) -> Path:
    """A user's repository that carries every tree-level git configuration, a gitlink, an
    untracked nested repository with its own hostile config, and hooks in its `.git`."""
    tree = tmp_path / "hostile"
    tree.mkdir()
    (tree / "app.py").write_text("def add(a, b):\n    return a - b\n")
    plant(tree, markers)
    init_repo(tree)
    blob = run_test_git("rev-parse", "HEAD", cwd=tree).strip()
    run_test_git("update-index", "--add", "--cacheinfo", f"160000,{blob},sub", cwd=tree)
    run_test_git("commit", "-qm", "a submodule entry", cwd=tree)
    nested = tree / "vendor" / "nested"
    nested.mkdir(parents=True)
    (nested / "lib.py").write_text("y = 2\n")
    init_repo(nested)
    with (nested / ".git" / "config").open("a") as config:
        config.write(evil_config(markers))
    (nested / ".gitattributes").write_text("* filter=evil diff=evil\n")
    install_hooks(nested / ".git" / "hooks", markers)
    install_hooks(tree / ".git" / "hooks", markers)
    assert list(markers.iterdir()) == []
    return tree


PATCH = """diff --git a/app.py b/app.py
--- a/app.py
+++ b/app.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""


def _new_file(path: str, lines: list[str]) -> str:
    added = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n"
        f"+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{added}"
    )


def hostile_patch(markers: Path) -> str:
    """The fix plus a new package whose `.gitattributes` selects drivers for its files and
    whose `.gitconfig` (and a root `.gitconfig.d` include target) define them."""
    return (
        PATCH
        + _new_file("pkg/.gitattributes", ["* filter=evil diff=evil merge=evil"])
        + _new_file("pkg/.gitconfig", evil_config(markers).splitlines())
        + _new_file("pkg/.config/git/config", evil_config(markers).splitlines())
        + _new_file("pkg/mod.py", ["z = 3"])
    )


def assert_nothing_ran(markers: Path) -> None:
    assert sorted(p.name for p in markers.iterdir()) == []


def test_snapshot_of_a_hostile_repository_runs_nothing_security_35(
    hostile: Path, tmp_path: Path, markers: Path
) -> None:
    base = tmp_path / "base"
    head = snapshot(hostile, base)
    assert_nothing_ran(markers)
    assert head == run_test_git("rev-parse", "HEAD", cwd=hostile).strip()
    files = set(git(["ls-files"], base).split())
    # The tree's git files are kept as content; the gitlink and the nested repository are not.
    assert {"app.py", ".gitattributes", ".gitconfig", ".gitmodules", "evil-include.cfg"} <= files
    assert "sub" not in files and not any(f.startswith("vendor/") for f in files)
    assert not (base / "vendor").exists()
    assert (base / ".gitconfig").read_text() == (hostile / ".gitconfig").read_text()
    # No hook of the source's, nor git's sample ones, which every sandbox would be sent.
    assert not (base / ".git" / "hooks").exists()


def test_clone_of_a_hostile_repository_runs_no_smudge_or_hook_security_35(
    hostile: Path, tmp_path: Path, markers: Path
) -> None:
    copy = clone(f"file://{hostile}", tmp_path / "trees" / "clone")
    assert_nothing_ran(markers)
    assert (copy / "app.py").read_text() == (hostile / "app.py").read_text()
    assert not (copy / "sub" / ".git").exists()


def test_apply_and_deliver_diff_stat_on_a_hostile_tree_run_nothing_security_35(
    hostile: Path, markers: Path
) -> None:
    apply_patch(hostile, hostile_patch(markers))
    stat = git(["diff", "--stat"], hostile)
    assert_nothing_ran(markers)
    assert "app.py" in stat and "1 file changed" in stat
    assert "a + b" in (hostile / "app.py").read_text()
    assert (
        hostile / "pkg" / ".gitattributes"
    ).read_text() == "* filter=evil diff=evil merge=evil\n"
    assert (hostile / "pkg" / "mod.py").read_text() == "z = 3\n"
    # The log and show paths, which a delivery summary could use, run no drivers either.
    git(["log", "-p", "-1"], hostile)
    git(["show", "HEAD"], hostile)
    assert_nothing_ran(markers)


def test_local_export_of_a_hostile_agent_tree_runs_nothing_security_35(
    hostile: Path, tmp_path: Path, markers: Path
) -> None:
    base = tmp_path / "base"
    snapshot(hostile, base)
    provider = LocalProvider(SandboxLimits(), base_dir=tmp_path / "sandboxes")
    try:
        sandbox = provider.create("m1", base, network=False)
        work = sandbox.workspace
        (work / "app.py").write_text("def add(a, b):\n    return a + b\n")
        # What an agent could write in local mode: its own `.git/config` and hooks, tree
        # config files, and a nested repository of its own.
        with (work / ".git" / "config").open("a") as config:
            config.write(evil_config(markers))
        install_hooks(work / ".git" / "hooks", markers)
        (work / ".gitattributes").write_text("* filter=evil diff=evil merge=evil\n# new\n")
        (work / "deep").mkdir()
        plant(work / "deep", markers)
        nested = work / "planted"
        nested.mkdir()
        (nested / "x.txt").write_text("x\n")
        init_repo(nested)
        with (nested / ".git" / "config").open("a") as config:
            config.write(evil_config(markers))
        # A nested repository without any commit, inside a new directory, with a name
        # that is a glob pattern.
        empty = work / "newpkg" / "[e]mpty*"
        empty.mkdir(parents=True)
        (empty / "y.txt").write_text("y\n")
        (work / "newpkg" / "kept.py").write_text("k = 1\n")
        run_test_git("init", "-q", cwd=empty)
        assert_nothing_ran(markers)

        patch = export_patch(sandbox, timeout_s=60, base=base)
    finally:
        provider.close()
    assert_nothing_ran(markers)
    assert "+    return a + b" in patch
    assert "diff --git a/.gitattributes b/.gitattributes" in patch
    assert "diff --git a/deep/.gitconfig b/deep/.gitconfig" in patch
    assert "planted" not in patch and "Subproject commit" not in patch
    assert "empty" not in patch and "diff --git a/newpkg/kept.py b/newpkg/kept.py" in patch


def test_a_patch_writing_into_a_nested_git_directory_is_refused_security_35(
    tmp_path: Path, markers: Path
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "app.py").write_text("x = 1\n")
    init_repo(tree)
    for where in (".git/hooks/post-commit", "sub/.git/config", "sub/.GIT/hooks/pre-commit"):
        patch = (
            f"diff --git a/{where} b/{where}\nnew file mode 100755\n--- /dev/null\n"
            f"+++ b/{where}\n@@ -0,0 +1,2 @@\n+#!/bin/sh\n+touch {markers}/planted\n"
        )
        with pytest.raises(Exception, match=r"git apply failed: .*invalid path"):
            apply_patch(tree, patch)
    run_test_git("commit", "-q", "--allow-empty", "-m", "hooks would run here", cwd=tree)
    assert_nothing_ran(markers)
    assert not (tree / "sub").exists()


def _contents(root: Path) -> dict[str, bytes | str]:
    """Every entry under `root`, `.git` included: file bytes, or a symlink's target."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            found[rel] = "-> " + str(path.readlink())
        elif path.is_file():
            found[rel] = path.read_bytes()
    return found


def test_a_patched_copy_of_a_hostile_snapshot_runs_nothing_and_writes_only_the_copy_security_35(
    hostile: Path, tmp_path: Path, markers: Path
) -> None:
    """Verification's copy: git reads the snapshot's own repository, so it must run none of
    the tree's drivers and change nothing of the snapshot, `.git` included."""
    base = tmp_path / "base"
    snapshot(hostile, base)
    before = _contents(base)
    copy = patched_copy(base, tmp_path / "verify", hostile_patch(markers))
    assert_nothing_ran(markers)
    assert _contents(base) == before
    assert not (copy / ".git").exists()
    assert (copy / "app.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert (copy / "pkg" / ".gitattributes").read_text() == "* filter=evil diff=evil merge=evil\n"
    assert (copy / "pkg" / "mod.py").read_text() == "z = 3\n"
    # Apart from the patch's files, the copy is the snapshot's work tree, byte for byte.
    work = {rel: data for rel, data in before.items() if not rel.startswith(".git/")}
    copied = {rel: data for rel, data in _contents(copy).items() if not rel.startswith("pkg")}
    assert copied == {**work, "app.py": (copy / "app.py").read_bytes()}


@pytest.mark.parametrize(
    "where", [".git/hooks/post-commit", ".git/config", "sub/.git/config", "link/planted"]
)
def test_a_patched_copy_refuses_a_path_into_a_repository_or_through_a_symlink(
    tmp_path: Path, markers: Path, where: str
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "app.py").write_text("x = 1\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (source / "link").symlink_to(outside)
    init_repo(source)
    base = tmp_path / "base"
    snapshot(source, base)
    before = _contents(base)
    patch = (
        "diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
        + _new_file(where, ["#!/bin/sh", f"touch {markers}/planted"])
    )
    with pytest.raises(WorkspaceError, match="git apply failed"):
        patched_copy(base, tmp_path / "verify", patch)
    assert _contents(base) == before
    assert list(outside.iterdir()) == []
    # All or nothing: the fix beside the refused file was not applied either.
    assert (tmp_path / "verify" / "app.py").read_text() == "x = 1\n"


def test_a_patched_copy_with_a_hunk_that_does_not_apply_changes_no_file(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "a.py").write_text("a = 1\n")
    (source / "b.py").write_text("b = 1\n")
    init_repo(source)
    base = tmp_path / "base"
    snapshot(source, base)
    patch = (
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
        "diff --git a/b.py b/b.py\n--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-b = 9\n+b = 2\n"
    )
    with pytest.raises(WorkspaceError, match="patch does not apply"):
        patched_copy(base, tmp_path / "verify", patch)
    assert (tmp_path / "verify" / "a.py").read_text() == "a = 1\n"
    assert (tmp_path / "verify" / "b.py").read_text() == "b = 1\n"


def test_a_binary_hunk_naming_an_object_of_the_snapshot_is_taken_from_its_own_data(
    tmp_path: Path,
):
    """A binary hunk carries the result's object id. Where git already has that object, it
    takes it instead of the hunk's data: the snapshot's repository has every base file, so a
    patch could make verification test one file's content while delivery, which applies
    in an empty repository, fails. The copy must be made from the patch's own bytes."""
    source = tmp_path / "source"
    source.mkdir()
    (source / "blob.bin").write_bytes(b"\x00before\x00")
    (source / "secret.py").write_text("TESTS_PASS = True\n")
    init_repo(source)
    (source / "blob.bin").write_bytes(b"\x00after\x00")
    patch = run_test_git("diff", "--binary", "--", "blob.bin", cwd=source)
    run_test_git("checkout", "--", "blob.bin", cwd=source)
    data = b"\x00after\x00"
    after = hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()  # the blob id
    other = run_test_git("rev-parse", "HEAD:secret.py", cwd=source).strip()
    assert "GIT binary patch" in patch and after in patch
    base = tmp_path / "base"
    snapshot(source, base)
    # The honest hunk applies as its data says.
    copy = patched_copy(base, tmp_path / "honest", patch)
    assert (copy / "blob.bin").read_bytes() == b"\x00after\x00"
    # The same data under another object's id is refused, not read from the snapshot.
    with pytest.raises(WorkspaceError, match="git apply failed"):
        patched_copy(base, tmp_path / "forged", patch.replace(after, other))
    assert (tmp_path / "forged" / "blob.bin").read_bytes() == b"\x00before\x00"


@pytest.fixture
def served(hostile: Path, tmp_path: Path):
    """The hostile repository on a real git server that checks the token, and an attacker's
    git server on 127.0.0.1 that demands credentials and records every request."""
    (tmp_path / "srv").mkdir()
    (tmp_path / "evil").mkdir()
    with (
        GitServer(tmp_path / "srv", token=TOKEN) as server,
        GitServer(tmp_path / "evil", token=ATTACKER_TOKEN) as attacker,
    ):
        server.create_repo("octo/app", hostile)
        server.create_repo("octo/other", hostile)
        attacker.create_repo("octo/app", hostile)
        yield server, attacker, run_test_git("rev-parse", "HEAD", cwd=hostile).strip()


def test_app_delivery_from_a_hostile_repository_runs_nothing_security_35(
    served, tmp_path: Path, markers: Path
) -> None:
    server, attacker, sha = served
    url = server.repo_url("octo/app")
    tree = clone_at(url, sha, tmp_path / "clone", TOKEN)
    assert remote_branch(tree, "loopwright/fix-1", sha, TOKEN, url=url) is None
    commit = commit_patch(tree, hostile_patch(markers), "Fix add", "m1")
    push_branch(tree, "loopwright/fix-1", TOKEN, replace=None, url=url)
    branch = remote_branch(tree, "loopwright/fix-1", sha, TOKEN, url=url)
    assert_nothing_ran(markers)
    assert branch is not None and branch.sha == commit and branch.ours
    bare = server.root / "octo/app.git"
    assert run_test_git("rev-parse", "loopwright/fix-1", cwd=bare).strip() == commit
    shown = run_test_git("show", "--stat", "--format=", commit, cwd=bare)
    assert "pkg/.gitattributes" in shown and "pkg/.gitconfig" in shown and "app.py" in shown
    assert attacker.requests == []


def _rewrite(attacker: GitServer, server: GitServer) -> str:
    return (
        f'[url "{attacker.url}/"]\n\tinsteadOf = {server.url}/\n'
        f'[url "{attacker.url}/octo/"]\n\tpushInsteadOf = {server.url}/octo/\n'
    )


def test_tree_level_insteadof_and_pushinsteadof_never_redirect_security_36(
    served, hostile: Path, tmp_path: Path, markers: Path
) -> None:
    server, attacker, _ = served
    # The repository's tree-level config files rewrite the server's URL to the attacker's.
    for rel in (".gitconfig", ".config/git/config"):
        with (hostile / rel).open("a") as config:
            config.write(_rewrite(attacker, server))
    bare = server.root / "octo/app.git"
    no_hooks = ["-c", "core.hooksPath=/dev/null"]  # the test's own git runs no planted hook
    run_test_git(*no_hooks, "add", "-A", cwd=hostile)
    run_test_git(*no_hooks, "commit", "-qm", "rewrite urls", cwd=hostile)
    run_test_git(*no_hooks, "push", "-q", str(bare), "HEAD:refs/heads/main", cwd=hostile)
    sha = run_test_git("rev-parse", "HEAD", cwd=hostile).strip()
    url = server.repo_url("octo/app")

    tree = clone_at(url, sha, tmp_path / "clone", TOKEN)
    assert "insteadOf" in (tree / ".gitconfig").read_text()
    commit = commit_patch(tree, PATCH, "Fix add", "m1")
    push_branch(tree, "loopwright/fix-2", TOKEN, replace=None, url=url)

    assert attacker.requests == []
    assert run_test_git("rev-parse", "loopwright/fix-2", cwd=bare).strip() == commit
    assert_nothing_ran(markers)


@pytest.mark.parametrize("key", ["insteadOf", "pushInsteadOf"])
def test_rewrite_in_the_clones_own_config_is_refused_before_any_request_security_36(
    served, tmp_path: Path, key: str
) -> None:
    server, attacker, sha = served
    url = server.repo_url("octo/app")
    tree = clone_at(url, sha, tmp_path / "clone", TOKEN)
    commit_patch(tree, PATCH, "Fix add", "m1")
    with (tree / ".git" / "config").open("a") as config:
        config.write(f'[url "{attacker.url}/"]\n\t{key} = {server.url}/\n')
    before = len(server.requests)
    with pytest.raises(GitError) as err:
        push_branch(tree, "loopwright/fix-3", TOKEN, replace=None, url=url)
    assert f"sets url.{attacker.url}/.{key.lower()}" in str(err.value)
    assert "fresh clone" in str(err.value) and TOKEN not in str(err.value)
    with pytest.raises(GitError, match="never writes"):
        remote_branch(tree, "loopwright/fix-3", sha, TOKEN, url=url)
    assert attacker.requests == [] and len(server.requests) == before


@pytest.mark.parametrize(
    "planted",
    [
        "[http]\n\textraHeader = X-Planted: 1\n",
        "[credential]\n\thelper = store\n",
        '[remote "origin"]\n\turl = http://127.0.0.1:9/x.git\n',
        "[include]\n\tpath = /tmp/anything.cfg\n",
        "[core]\n\tsshCommand = ssh -o ProxyCommand=true\n",
    ],
    ids=["http", "credential", "remote", "include", "ssh-command"],
)
def test_other_routing_settings_in_the_clone_config_are_refused_security_36(
    served, tmp_path: Path, planted: str
) -> None:
    server, _, sha = served
    url = server.repo_url("octo/app")
    tree = clone_at(url, sha, tmp_path / "clone", TOKEN)
    with (tree / ".git" / "config").open("a") as config:
        config.write(planted)
    with pytest.raises(GitError, match="which Loopwright never writes"):
        push_branch(tree, "loopwright/fix-4", TOKEN, replace=None, url=url)


def _authorizations(listener: GitServer) -> set[str]:
    return {r["authorization"] for r in listener.requests}


def test_credential_helper_gives_a_second_remote_nothing_security_36(
    served, tmp_path: Path
) -> None:
    """The runner's helper is scoped to the computed URL: a push that reaches any other
    URL (another host, or another repository on the same host) carries no token."""
    server, attacker, sha = served
    url = server.repo_url("octo/app")
    tree = clone_at(url, sha, tmp_path / "clone", TOKEN)
    commit_patch(tree, PATCH, "Fix add", "m1")
    for other, listener in (
        (attacker.repo_url("octo/app"), attacker),
        (server.repo_url("octo/other"), server),
    ):
        listener.requests.clear()
        proc = host_git.run(
            ["push", "--quiet", other, "HEAD:refs/heads/stolen"], tree, remote=url, token=TOKEN
        )
        assert proc.returncode != 0
        assert "terminal prompts disabled" in proc.stderr or "Authentication" in proc.stderr
        assert listener.requests, "git never reached the listener"
        assert _authorizations(listener) == {""}
    # The computed URL itself does get the token.
    server.requests.clear()
    push_branch(tree, "loopwright/fix-5", TOKEN, replace=None, url=url)
    expected = "Basic " + base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    assert _authorizations(server) - {""} == {expected}


def test_the_token_never_reaches_argv_or_the_clone_config_security_36(
    served, tmp_path: Path
) -> None:
    server, _, sha = served
    tree = clone_at(server.repo_url("octo/app"), sha, tmp_path / "clone", TOKEN)
    assert TOKEN not in (tree / ".git" / "config").read_text()
    assert "remote" not in (tree / ".git" / "config").read_text()
    with pytest.raises(GitError) as err:
        clone_at(server.repo_url("octo/app"), sha, tmp_path / "again", "ghs_WRONG0000000000")
    assert "ghs_WRONG0000000000" not in str(err.value)


def test_submodule_recursion_never_happens_on_a_push_security_35(
    served, tmp_path: Path, markers: Path
) -> None:
    server, _, sha = served
    url = server.repo_url("octo/app")
    tree = clone_at(url, sha, tmp_path / "clone", TOKEN)
    ran = subprocess.run(["git", "-C", str(tree), "ls-files", "-s", "sub"], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    assert ran.startswith("160000 ")
    commit_patch(tree, PATCH, "Fix add", "m1")
    push_branch(tree, "loopwright/fix-6", TOKEN, replace=None, url=url)
    assert not (tree / "sub" / ".git").exists()
    assert_nothing_ran(markers)


def test_a_patch_with_bytes_that_are_not_utf8_applies_exactly(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "latin1.txt").write_bytes(b"caf\xe9\n")
    init_repo(tree)
    (tree / "latin1.txt").write_bytes(b"caf\xe9 cr\xe8me\n")
    raw = subprocess.run(["git", "diff"], cwd=tree, capture_output=True, check=True).stdout
    run_test_git("checkout", "--", "latin1.txt", cwd=tree)
    apply_patch(tree, raw.decode("utf-8", errors="surrogateescape"))
    assert (tree / "latin1.txt").read_bytes() == b"caf\xe9 cr\xe8me\n"


@pytest.mark.parametrize("key", ["insteadOf", "pushInsteadOf"])
def test_a_followed_rewrite_still_gets_no_token_security_36(
    served, tmp_path: Path, key: str
) -> None:
    """The second line of defence under the config check: if git does follow a rewrite
    in the clone's own config, the helper is scoped to the computed URL, so the
    rewritten request carries no token."""
    server, attacker, sha = served
    url = server.repo_url("octo/app")
    tree = clone_at(url, sha, tmp_path / "clone", TOKEN)
    commit_patch(tree, PATCH, "Fix add", "m1")
    with (tree / ".git" / "config").open("a") as config:
        config.write(f'[url "{attacker.url}/"]\n\t{key} = {server.url}/\n')
    server.requests.clear()
    proc = host_git.run(
        ["push", "--quiet", url, "HEAD:refs/heads/rewritten"], tree, remote=url, token=TOKEN
    )
    assert proc.returncode != 0 and TOKEN not in proc.stderr
    assert attacker.requests, "the rewrite was not followed"
    assert _authorizations(attacker) == {""}
    assert server.requests == []


def test_a_local_export_keeps_carriage_returns_so_the_patch_applies_to_its_base(
    tmp_path: Path,
) -> None:
    """A repository with CRLF line endings: the agent edits one line. The exported patch
    must carry the file's `\\r` bytes (git writes them), or it no longer matches the base
    tree it was taken against and cannot be verified or delivered; a lone `\\r` inside a
    line must not become a line break either (the diff parser then rejects the patch)."""
    source = tmp_path / "source"
    source.mkdir()
    (source / "app.py").write_bytes(b"def add(a, b):\r\n    return a - b\r\n")
    (source / "data.txt").write_bytes(b"x = 1\r  y\nz\n")
    init_repo(source)
    base = tmp_path / "base"
    snapshot(source, base)
    provider = LocalProvider(SandboxLimits(), base_dir=tmp_path / "sandboxes")
    try:
        sandbox = provider.create("m1", base, network=False)
        (sandbox.workspace / "app.py").write_bytes(b"def add(a, b):\r\n    return a + b\r\n")
        (sandbox.workspace / "data.txt").write_bytes(b"x = 1\r  y\nz = 2\n")
        patch = export_patch(sandbox, timeout_s=60, base=base)
    finally:
        provider.close()
    assert "+    return a + b\r\n" in patch
    assert " x = 1\r  y\n" in patch
    target = tmp_path / "target"
    snapshot(source, target)
    apply_patch(target, patch)
    assert (target / "app.py").read_bytes() == b"def add(a, b):\r\n    return a + b\r\n"
    assert (target / "data.txt").read_bytes() == b"x = 1\r  y\nz = 2\n"
