"""Which programs reach the network: package installs, downloads and git's remote reads.

The loop's sandbox has no network, so such a command fails; in pair mode it is asked about
instead, and a person who approves it lets it run with the network attached for just that
command. `uses_network` sees one simple command after its wrappers (`env`, `timeout`,
`uv run`, ...) are taken off.
"""

from __future__ import annotations

from loopwright.agent.command_rules.common import after_options, program_name

_ALWAYS = frozenset({"curl", "wget", "ssh", "scp", "sftp", "ftp", "aria2c", "rsync-ssh"})
"""Programs whose only purpose is to talk to another host."""

_SUBCOMMANDS: dict[str, frozenset[str]] = {
    "pip": frozenset({"install", "download", "wheel", "search", "index"}),
    "npm": frozenset(
        {
            "install",
            "i",
            "in",
            "ins",
            "inst",
            "add",
            "ci",
            "update",
            "up",
            "upgrade",
            "audit",
            "outdated",
            "view",
            "info",
            "show",
            "publish",
            "exec",
            "create",
            "init",
            "dlx",
        }
    ),
    "yarn": frozenset({"add", "install", "upgrade", "up", "dlx", "create", "info", "npm"}),
    "pnpm": frozenset({"add", "install", "i", "update", "up", "dlx", "create", "fetch"}),
    "bun": frozenset({"add", "install", "i", "update", "x", "create"}),
    "uv": frozenset({"add", "sync", "lock", "tool", "pip", "python"}),
    "poetry": frozenset({"install", "add", "update", "lock", "self"}),
    "pipenv": frozenset({"install", "update", "sync", "lock"}),
    "pdm": frozenset({"install", "add", "update", "sync", "lock"}),
    "conda": frozenset({"install", "create", "update", "upgrade"}),
    "mamba": frozenset({"install", "create", "update", "upgrade"}),
    "micromamba": frozenset({"install", "create", "update"}),
    "apt": frozenset({"install", "update", "upgrade", "full-upgrade", "download", "source"}),
    "apt-get": frozenset({"install", "update", "upgrade", "dist-upgrade", "download", "source"}),
    "yum": frozenset({"install", "update", "upgrade", "makecache"}),
    "dnf": frozenset({"install", "update", "upgrade", "makecache"}),
    "apk": frozenset({"add", "update", "upgrade", "fetch"}),
    "brew": frozenset({"install", "update", "upgrade", "fetch", "tap"}),
    "gem": frozenset({"install", "update", "fetch"}),
    "bundle": frozenset({"install", "update", "add", "lock"}),
    "cargo": frozenset({"install", "fetch", "update", "add", "search", "publish"}),
    "go": frozenset({"get", "install", "mod"}),
    "composer": frozenset({"install", "require", "update", "create-project"}),
    "git": frozenset({"clone", "fetch", "pull", "ls-remote", "submodule"}),
}
"""Programs that reach the network through these subcommands (their first positional)."""

_PIP_OFFLINE = frozenset({"--no-index"})


def uses_network(words: list[str]) -> bool:
    """Whether the simple command `words` (its program first) needs the network."""
    if not words:
        return False
    name = program_name(words[0])
    args = words[1:]
    if name in _ALWAYS:
        return True
    if name in ("pip3",) or (name.startswith("pip") and name[3:].replace(".", "").isdigit()):
        name = "pip"
    if name == "python":
        module = _python_module(args)
        if module is None:
            return False
        name, args = module
    if name == "go" and args[:2] == ["mod", "tidy"]:
        return True
    subcommands = _SUBCOMMANDS.get(name)
    if subcommands is None:
        return False
    if name == "yarn" and not after_options(args):
        return True  # a bare `yarn` installs
    rest = after_options(args, "C", frozenset({"--prefix", "--cwd", "--directory"}))
    if not rest or rest[0] not in subcommands:
        return False
    if name == "go" and rest[0] == "mod":
        return len(rest) > 1 and rest[1] in ("download", "tidy", "vendor")
    if name == "uv" and rest[0] == "pip":
        return len(rest) > 1 and rest[1] in ("install", "sync", "compile")
    return not (name == "pip" and any(arg in _PIP_OFFLINE for arg in args))


def _python_module(args: list[str]) -> tuple[str, list[str]] | None:
    """`python -m pip install x` as (`pip`, [`install`, `x`]); None for anything else."""
    for i, arg in enumerate(args):
        if arg == "-m" and i + 1 < len(args):
            return program_name(args[i + 1]), args[i + 2 :]
        if not arg.startswith("-"):
            return None
    return None
