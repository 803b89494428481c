"""The host-side git runner (SECURITY 35, 36): what git sees when Loopwright runs it.

Every test runs the real git binary through `loopwright.git.run` and reads back what git
itself reports: its environment (through an alias that prints it), the configuration it
loaded and where from, the credentials its credential machinery hands out.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from loopwright import git as host_git
from loopwright.sandbox.workspace import without_gitlinks
from tests.conftest import init_repo

TOKEN = "ghs_UNITTOKEN0123456789abcdef"
REMOTE = "http://127.0.0.1:9/octo/app.git"


def _tree(tmp_path: Path) -> Path:
    """A repository carrying every git configuration file a tree can carry."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "app.py").write_text("x = 1\n")
    (tree / ".gitconfig").write_text("[alias]\n\tfromtree = !echo tree-gitconfig\n")
    (tree / ".config" / "git").mkdir(parents=True)
    (tree / ".config" / "git" / "config").write_text("[alias]\n\tfromxdg = !echo tree-xdg\n")
    return init_repo(tree)


def _env_seen_by_git(cwd: Path, **kwargs: str) -> dict[str, str]:
    proc = host_git.run(["-c", "alias.dumpenv=!env -0", "dumpenv"], cwd, **kwargs)
    assert proc.returncode == 0, proc.stderr
    pairs = (item.split("=", 1) for item in proc.stdout.split("\0") if "=" in item)
    return dict(pairs)


def test_environment_is_built_from_scratch_with_a_private_home_security_35(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = _tree(tmp_path)
    monkeypatch.setenv("LOOPWRIGHT_MODEL_API_KEY", "sk-should-never-reach-git")
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.pager=false'")
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("HOME", str(tree))
    env = _env_seen_by_git(tree)

    # git adds its own bookkeeping variables for an alias; nothing else is inherited.
    git_own = {"GIT_PREFIX", "GIT_EXEC_PATH", "GIT_CONFIG_PARAMETERS", "PWD", "OLDPWD", "SHLVL"}
    git_own |= {"GIT_PAGER"}  # --no-pager tells child processes, too
    ours = {
        "PATH", "LANG", "HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM",
        "GIT_ATTR_NOSYSTEM", "GIT_TERMINAL_PROMPT", "GIT_OPTIONAL_LOCKS",
    }  # fmt: skip
    assert set(env) - git_own - {"_"} - set(host_git.OPERATOR_NETWORK_VARS) == ours
    assert env["GIT_CONFIG_GLOBAL"] == "/dev/null"
    assert env["GIT_CONFIG_NOSYSTEM"] == env["GIT_ATTR_NOSYSTEM"] == "1"
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["GIT_PAGER"] == "cat"
    assert env["HOME"] == env["XDG_CONFIG_HOME"]
    home = Path(env["HOME"])
    assert tree not in home.parents and home != tree
    assert "sk-should-never-reach-git" not in "".join(env.values())
    assert "core.pager=false" not in env["GIT_CONFIG_PARAMETERS"]
    # The private home is gone after the call.
    assert not home.exists()


def test_operator_proxy_and_ca_settings_reach_git_and_nothing_else_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = _tree(tmp_path)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    monkeypatch.setenv("GIT_SSL_CAINFO", "/etc/ssl/certs/ca-certificates.crt")
    monkeypatch.setenv("GIT_SSH_COMMAND", "touch /tmp/never")
    env = _env_seen_by_git(tree)
    assert env["HTTPS_PROXY"] == "http://127.0.0.1:3128"
    assert env["GIT_SSL_CAINFO"] == "/etc/ssl/certs/ca-certificates.crt"
    assert "GIT_SSH_COMMAND" not in env


def test_private_home_is_empty_and_mode_0700_security_35(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    proc = host_git.run(
        ["-c", 'alias.home=!stat -c %a "$HOME" && ls -A "$HOME" | wc -l', "home"], tree
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["700", "0"]


def test_tree_config_files_are_never_read_security_35(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    listed = host_git.run(["config", "--list", "--show-origin"], tree)
    assert listed.returncode == 0, listed.stderr
    origins = {line.split("\t", 1)[0] for line in listed.stdout.splitlines()}
    assert origins == {"command line:", "file:.git/config"}
    assert "fromtree" not in listed.stdout and "fromxdg" not in listed.stdout
    for alias in ("fromtree", "fromxdg"):
        proc = host_git.run([alias], tree)
        assert proc.returncode != 0 and "is not a git command" in proc.stderr


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("core.hooksPath", "/dev/null"),
        ("core.fsmonitor", "false"),
        ("core.attributesFile", "/dev/null"),
        ("core.pager", "cat"),
        ("credential.helper", ""),
        ("protocol.allow", "never"),
        ("protocol.ext.allow", "never"),
        ("submodule.recurse", "false"),
        ("diff.ignoreSubmodules", "all"),
    ],
)
def test_owned_settings_win_over_the_repository_config_security_35(
    tmp_path: Path, key: str, value: str
) -> None:
    tree = _tree(tmp_path)
    with (tree / ".git" / "config").open("a") as config:
        section, name = key.rsplit(".", 1)
        config.write(f"[{section}]\n\t{name} = touch {tmp_path / 'marker'}\n")
    got = host_git.run(["config", "--get-all", key], tree)
    assert got.stdout.splitlines()[-1] == value


@pytest.mark.parametrize(
    ("args", "inserted"),
    [
        (["diff", "--stat"], ["diff", "--no-ext-diff", "--no-textconv", "--ignore-submodules=all"]),
        (["--git-dir", "g", "--work-tree", "w", "log", "-p"], ["log", "--no-ext-diff"]),
        (["-c", "user.name=x", "show", "HEAD"], ["show", "--no-ext-diff", "--no-textconv"]),
        (["push", "u", "HEAD:refs/heads/b"], ["push", "--recurse-submodules=no"]),
        (["fetch", "u", "sha"], ["fetch", "--no-recurse-submodules"]),
        (["clone", "u", "d"], ["clone", "--no-recurse-submodules"]),
        (["checkout", "--detach", "sha"], ["checkout", "--no-recurse-submodules"]),
    ],
    ids=["diff", "log-after-globals", "show-after-c", "push", "fetch", "clone", "checkout"],
)
def test_diff_and_transport_commands_get_their_guards_security_35(
    args: list[str], inserted: list[str]
) -> None:
    argv = host_git.command(args)
    assert argv[:2] == ["git", "--no-pager"]
    start = argv.index(inserted[0])
    assert argv[start : start + len(inserted)] == inserted


def test_no_transport_is_allowed_without_a_named_remote_security_35(tmp_path: Path) -> None:
    source = _tree(tmp_path)
    proc = host_git.run(["clone", "--quiet", f"file://{source}", "copy"], tmp_path)
    assert proc.returncode != 0 and "transport 'file' not allowed" in proc.stderr
    assert not (tmp_path / "copy" / "app.py").exists()


def test_ext_transport_never_runs_even_when_named_security_35(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    url = f"ext::sh -c touch% {marker}"
    with pytest.raises(host_git.GitUsageError, match="unsupported git URL scheme"):
        host_git.run(["clone", url, "copy"], tmp_path, remote=url)
    proc = host_git.run(["clone", url, "copy"], tmp_path, remote="http://127.0.0.1:9/x.git")
    assert proc.returncode != 0 and "transport 'ext' not allowed" in proc.stderr
    assert not marker.exists()


def test_a_named_remote_allows_only_its_own_scheme_security_35(tmp_path: Path) -> None:
    source = _tree(tmp_path)
    proc = host_git.run(
        ["clone", "--quiet", f"file://{source}", "copy"], tmp_path, remote="https://h/x.git"
    )
    assert proc.returncode != 0 and "transport 'file' not allowed" in proc.stderr
    ok = host_git.run(
        ["clone", "--quiet", f"file://{source}", "copy"], tmp_path, remote=f"file://{source}"
    )
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "copy" / "app.py").read_text() == "x = 1\n"


def _fill(cwd: Path, url: str) -> str:
    proc = host_git.run(["credential", "fill"], cwd, input=f"url={url}\n\n", remote=REMOTE,
                        token=TOKEN)  # fmt: skip
    return proc.stdout if proc.returncode == 0 else ""


def test_credential_helper_answers_only_for_the_computed_url_security_36(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    assert f"password={TOKEN}" in _fill(tree, REMOTE)
    assert "username=x-access-token" in _fill(tree, REMOTE)
    for other in (
        "http://127.0.0.1:9/octo/other.git",
        "http://127.0.0.1:9/octo/app.git2",
        "http://127.0.0.1:10/octo/app.git",
        "http://localhost:9/octo/app.git",
        "https://127.0.0.1:9/octo/app.git",
    ):
        assert TOKEN not in _fill(tree, other), other


def test_a_repository_credential_helper_is_emptied_security_36(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    with (tree / ".git" / "config").open("a") as config:
        config.write("[credential]\n\thelper = !echo password=planted\n")
    filled = _fill(tree, "http://127.0.0.1:9/octo/other.git")
    assert "planted" not in filled and TOKEN not in filled


def test_token_never_appears_in_argv_security_36() -> None:
    argv = host_git.command(["push", REMOTE, "HEAD:refs/heads/x"], remote=REMOTE, token=TOKEN)
    assert TOKEN not in " ".join(argv)
    assert f"credential.{REMOTE}.helper={host_git.CREDENTIAL_HELPER}" in argv
    assert "credential.useHttpPath=true" in argv and "credential.helper=" in argv


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://user:pw@github.com/o/r.git", "must not carry credentials"),
        ("https://github.com/o/r.git?x=1", "plain repository URL"),
        ("ssh://github.com/o/r.git", "only be sent over http"),
        ("git@github.com:o/r.git", "only be sent over http"),
    ],
)
def test_a_token_is_refused_for_urls_it_cannot_be_scoped_to_security_36(
    url: str, message: str
) -> None:
    with pytest.raises(host_git.GitUsageError, match=message):
        host_git.command(["push", url], remote=url, token=TOKEN)
    with pytest.raises(host_git.GitUsageError, match="needs the remote URL"):
        host_git.command(["push", url], token=TOKEN)


@pytest.mark.parametrize(
    ("url", "scheme"),
    [
        ("https://h/o/r.git", "https"),
        ("HTTP://h/o/r.git", "http"),
        ("ssh://git@h/o/r.git", "ssh"),
        ("git@h:o/r.git", "ssh"),
        ("git://h/o/r.git", "git"),
        ("file:///srv/r.git", "file"),
        ("/srv/r.git", "file"),
    ],
)
def test_scheme_of(url: str, scheme: str) -> None:
    assert host_git.scheme_of(url) == scheme


def test_a_temporary_directory_inside_the_tree_is_refused_security_35(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = _tree(tmp_path)
    inside = tree / "tmp"
    inside.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(inside))
    with pytest.raises(host_git.GitUsageError, match="set TMPDIR to a directory outside"):
        host_git.run(["status"], tree)
    assert list(inside.iterdir()) == []


GITLINK = """diff --git a/vendor/x b/vendor/x
new file mode 160000
index 0000000..acc28fe
--- /dev/null
+++ b/vendor/x
@@ -0,0 +1 @@
+Subproject commit acc28fede7d7ef21272400ec058e377950d9d777
"""
FILE = """diff --git a/top b/top
new file mode 100644
index 0000000..975fbec
--- /dev/null
+++ b/top
@@ -0,0 +1 @@
+new file mode 160000
"""


def test_nested_repository_entries_are_dropped_from_a_patch_security_35() -> None:
    assert without_gitlinks(GITLINK + FILE) == FILE
    assert without_gitlinks(FILE + GITLINK) == FILE
    assert without_gitlinks(GITLINK) == ""
    # A file whose *content* reads like a mode line is kept.
    assert without_gitlinks(FILE) == FILE
