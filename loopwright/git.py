"""The one host-side git runner: every git process Loopwright starts on the host runs with
a configuration Loopwright owns, so no tree it handles can define a command for git to run
or a place for git to send a token.

Git reads configuration from `$HOME`, `$XDG_CONFIG_HOME`, the system file and the
repository's own `.git/config`. Each call here gets a fresh, empty, private `HOME` (mode
0700, never inside a tree), no global or system configuration or attributes, and an
environment built from scratch; everything that could run a program (hooks, fsmonitor,
pagers, textconv and external diff, submodule recursion, `ext::` transports) is switched
off on the command line, which git reads last. Attribute files in a tree may still select
a filter, diff or merge driver by name, but no configuration source a tree controls can
define one, so none runs.

A token reaches git only through a credential helper that is configured for the exact URL
the host computed (`credential.<url>.helper` with `useHttpPath`) and reads the token from
its own environment: a rewritten URL (`url.<x>.insteadOf`) gets no credentials.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

TOKEN_VAR = "LOOPWRIGHT_GIT_TOKEN"  # noqa: S105 - the variable's name, not a secret
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
AUTHOR_NAME = "Loopwright"
AUTHOR_EMAIL = "loopwright@users.noreply.github.com"

# The helper names the variable; the value lives only in the git process's environment.
# It answers `get` and nothing else, so git can never ask it to store or erase anything.
CREDENTIAL_HELPER = (
    f'!f() {{ test "$1" = get || exit 0; echo username=x-access-token; '
    f'echo "password=${TOKEN_VAR}"; }}; f'
)

# Passed with -c, which git reads after every configuration file, so these win over
# anything a repository's own `.git/config` says.
PATCH_FORMAT: tuple[tuple[str, str], ...] = (
    ("core.quotePath", "true"),
    ("diff.noprefix", "false"),
    ("diff.mnemonicPrefix", "false"),
)
"""A diff's headers as Loopwright's patch reader takes them (quoted names, `a/` and `b/`),
whatever the repository's own config says; the sandbox's git is given the same."""
OWNED_CONFIG: tuple[tuple[str, str], ...] = (
    *PATCH_FORMAT,
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.attributesFile", "/dev/null"),
    ("core.excludesFile", "/dev/null"),
    ("core.pager", "cat"),
    ("core.askPass", ""),
    ("core.editor", "false"),
    ("core.sshCommand", "ssh"),
    ("credential.helper", ""),
    ("diff.ignoreSubmodules", "all"),
    ("status.submoduleSummary", "false"),
    ("submodule.recurse", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("push.recurseSubmodules", "no"),
    ("protocol.allow", "never"),
    ("protocol.ext.allow", "never"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("init.defaultBranch", "main"),
    ("user.name", AUTHOR_NAME),
    ("user.email", AUTHOR_EMAIL),
)

# Transports a remote URL may use; remote helpers (`ext::`, `fd::`, ...) are never among them.
REMOTE_SCHEMES = frozenset({"http", "https", "ssh", "git", "file"})

# Subcommands that produce diffs: never an external diff program or a textconv filter,
# never a look inside a nested repository.
_DIFF_COMMANDS = {"diff", "log", "show", "format-patch", "whatchanged"}
_SUBMODULE_FLAGS = {
    "clone": ["--no-recurse-submodules"],
    "fetch": ["--no-recurse-submodules"],
    "pull": ["--no-recurse-submodules"],
    "push": ["--recurse-submodules=no"],
    "checkout": ["--no-recurse-submodules"],
    "status": ["--ignore-submodules=all"],
}
# Global options before the subcommand that take a separate value.
_VALUED_GLOBALS = {"-c", "-C", "--git-dir", "--work-tree", "--namespace"}
_PATH_GLOBALS = {"-C", "--git-dir", "--work-tree"}


class GitUsageError(ValueError):
    """The host asked for a git call this runner refuses to make (bad remote URL, a
    private home inside a tree); the message says what to fix."""


def scheme_of(url: str) -> str:
    """The transport `url` uses: http, https, ssh, git or file."""
    helper = url.split("::", 1)[0] if "::" in url.split("/", 1)[0] else None
    if helper is not None:
        raise GitUsageError(
            f"unsupported git URL scheme {helper + '::'!r} (a remote helper); use https://, "
            "http://, ssh://, git:// or file://"
        )
    if "://" in url:
        scheme = url.split("://", 1)[0].lower()
        if scheme in REMOTE_SCHEMES:
            return scheme
        raise GitUsageError(
            f"unsupported git URL scheme {scheme!r}; use https://, http://, ssh://, git:// "
            "or file://"
        )
    if ":" in url.split("/", 1)[0]:
        return "ssh"  # scp-like: user@host:org/repo
    return "file"


def credential_config(url: str) -> list[tuple[str, str]]:
    """The configuration that gives the token to `url` and to no other URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise GitUsageError(f"a token can only be sent over http(s); got {_safe(url)}")
    if parts.username or parts.password:
        raise GitUsageError("the remote URL must not carry credentials; pass the token instead")
    if parts.query or parts.fragment or "=" in url or "\n" in url:
        raise GitUsageError(f"the remote URL must be a plain repository URL; got {_safe(url)}")
    return [
        ("credential.useHttpPath", "true"),
        (f"credential.{url}.helper", CREDENTIAL_HELPER),
    ]


def command(
    args: Sequence[str], *, remote: str | None = None, token: str | None = None
) -> list[str]:
    """The full argv for `git ARGS` under Loopwright's configuration."""
    config = list(OWNED_CONFIG)
    if remote is not None:
        config.append((f"protocol.{scheme_of(remote)}.allow", "always"))
    if token is not None:
        if remote is None:
            raise GitUsageError("a token needs the remote URL it is for")
        config.extend(credential_config(remote))
    options = [item for key, value in config for item in ("-c", f"{key}={value}")]
    return ["git", "--no-pager", *options, *_guarded(list(args))]


OPERATOR_NETWORK_VARS = (
    "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy",
    "ALL_PROXY", "all_proxy", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "SSL_CERT_FILE", "SSL_CERT_DIR",
)  # fmt: skip
"""Passed through to git from Loopwright's own environment: how this machine reaches remotes."""


def environment(home: Path, *, token: str | None = None) -> dict[str, str]:
    """Git's environment, built from scratch: nothing of the caller's is inherited."""
    # An empty or relative entry would make git look up `ssh` (and anything else it runs
    # by name) in its working directory, a tree: only absolute directories are kept.
    path = [entry for entry in (os.environ.get("PATH") or "").split(os.pathsep) if entry]
    env = {
        "PATH": os.pathsep.join(e for e in path if os.path.isabs(e)) or DEFAULT_PATH,
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home),
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        # Read-only commands (status, diff) never rewrite the index of a tree they look at.
        "GIT_OPTIONAL_LOCKS": "0",
    }
    # How the operator's machine reaches remotes (a proxy, a private CA) is the operator's
    # setting, not the tree's, and pushes fail without it on such a machine.
    for name in OPERATOR_NETWORK_VARS:
        value = os.environ.get(name)
        if value:
            env[name] = value
    if token is not None:
        env[TOKEN_VAR] = token
    return env


def run(
    args: Sequence[str],
    cwd: Path,
    *,
    input: str | None = None,
    remote: str | None = None,
    token: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `git ARGS` in `cwd`. `remote` is the one URL this call may talk to (none: no
    transport is allowed at all); `token`, if given, is offered only to `remote`. Returns
    the finished process; a non-zero exit is the caller's to judge (see `failure`)."""
    home = Path(tempfile.mkdtemp(prefix="loopwright-git-home-"))
    try:
        _refuse_home_inside(home, [cwd, *_paths_in(args)])
        # Bytes in and out, decoded here: text mode would translate newlines, and a patch
        # that loses its carriage returns no longer applies to a CRLF file.
        argv = command(args, remote=remote, token=token)
        proc = subprocess.run(
            argv,
            cwd=cwd,
            env=environment(home, token=token),
            input=None if input is None else input.encode("utf-8", "surrogateescape"),
            capture_output=True,
            check=False,
        )
        return subprocess.CompletedProcess(
            argv,
            proc.returncode,
            proc.stdout.decode("utf-8", "surrogateescape"),
            proc.stderr.decode("utf-8", "surrogateescape"),
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)


def failure(
    args: Sequence[str], proc: subprocess.CompletedProcess[str], *, secrets: Iterable[str] = ()
) -> str:
    """A message for a failed call that is safe to show: secrets masked, bounded length."""
    detail = (proc.stderr or proc.stdout or "").strip()
    for secret in secrets:
        if secret:
            detail = detail.replace(secret, "[REDACTED]")
    return f"git {subcommand(args) or 'command'} failed: {detail[-1500:]}"


def subcommand(args: Sequence[str]) -> str | None:
    index = _subcommand_index(args)
    return args[index] if index is not None else None


def _subcommand_index(args: Sequence[str]) -> int | None:
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in _VALUED_GLOBALS:
            i += 2
        elif arg.startswith("-"):
            i += 1
        else:
            return i
    return None


def _guarded(args: list[str]) -> list[str]:
    index = _subcommand_index(args)
    if index is None:
        return args
    name = args[index]
    extra = list(_SUBMODULE_FLAGS.get(name, []))
    if name in _DIFF_COMMANDS:
        extra += ["--no-ext-diff", "--no-textconv", "--ignore-submodules=all"]
    return [*args[: index + 1], *extra, *args[index + 1 :]]


def _paths_in(args: Sequence[str]) -> list[Path]:
    paths = []
    for i, arg in enumerate(args[:-1]):
        if arg in _PATH_GLOBALS:
            paths.append(Path(args[i + 1]))
    for arg in args:
        for option in ("--git-dir=", "--work-tree="):
            if arg.startswith(option):
                paths.append(Path(arg[len(option) :]))
    return paths


def _refuse_home_inside(home: Path, trees: Iterable[Path]) -> None:
    resolved = home.resolve()
    for tree in trees:
        root = tree.resolve()
        if resolved == root or root in resolved.parents:
            raise GitUsageError(
                f"the temporary directory {tempfile.gettempdir()} is inside {root}, a tree "
                "git works on; set TMPDIR to a directory outside every repository"
            )


def _safe(url: str) -> str:
    parts = urlsplit(url)
    if parts.password or parts.username:
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        return parts._replace(netloc=host).geturl()
    return url
