"""The rules for the JavaScript toolchain: package managers (npm, yarn, pnpm, bun) and
runtimes (node, tsx, deno).

Package scripts named like servers (`dev`, `start`, `serve`, `start:prod`) are refused when
run, and so are app entry points started directly: `node server.js` (basename
server/app/index/main/serve/start)."""

from __future__ import annotations

import posixpath
import re

from loopwright.agent.command_rules.common import Outcome, after_options
from loopwright.agent.command_rules.wrappers import npx
from loopwright.agent.shell import Command

_SERVER_SCRIPTS = frozenset({"start", "dev", "serve", "server", "preview", "watch", "develop"})
_APP_ENTRY = re.compile(r"(?:server|app|index|main|serve|start)\.(?:[cm]?js|[cm]?ts)")


def _is_server_script(name: str) -> bool:
    """A package.json script name that conventionally starts a server (`dev`, `start:prod`)."""
    return name.split(":", 1)[0] in _SERVER_SCRIPTS


def _is_app_entry(path: str) -> bool:
    return path in (".", "./") or bool(_APP_ENTRY.fullmatch(posixpath.basename(path)))


def npm(args: list[str], command: Command) -> Outcome:
    values = frozenset({"--prefix", "--workspace"})
    rest = after_options(args, "w", values)
    if not rest:
        return None
    sub, tail = rest[0], rest[1:]
    if sub in ("start", "restart"):
        return "server"
    if sub in ("run", "run-script", "rum", "urn"):
        script = after_options(tail, "w", values)
        return "server" if script and _is_server_script(script[0]) else None
    if sub in ("exec", "x"):
        return npx(tail, command)
    return None


_YARN_BUILTINS = frozenset(
    {"add", "install", "i", "remove", "rm", "test", "t", "ci", "init", "info", "why", "list",
     "ls", "outdated", "upgrade", "up", "update", "link", "unlink", "pack", "publish", "audit",
     "config", "cache", "bin", "global", "import", "licenses", "version", "versions", "create"}
)  # fmt: skip


def yarn_like(args: list[str], command: Command) -> Outcome:
    """yarn and pnpm: `yarn dev` and `pnpm start` run package scripts by name."""
    rest = after_options(args, "CF", frozenset({"--cwd", "--dir", "--filter"}))
    if not rest:
        return None
    sub, tail = rest[0], rest[1:]
    if sub == "workspace" and tail:
        return yarn_like(tail[1:], command)
    if sub in ("exec", "dlx"):
        return npx(tail, command)
    if sub in ("run", "run-script"):
        script = after_options(tail)
        return "server" if script and _is_server_script(script[0]) else None
    if sub in _YARN_BUILTINS:
        return None
    return "server" if _is_server_script(sub) else None


def bun(args: list[str], command: Command) -> Outcome:
    if any(arg in ("--watch", "--hot") for arg in args):
        return "server"
    rest = after_options(args)
    if not rest:
        return None
    if rest[0] == "x":
        return npx(rest[1:], command)
    target = after_options(rest[1:]) if rest[0] == "run" else rest
    if target and (_is_server_script(target[0]) or _is_app_entry(target[0])):
        return "server"
    return None


_NODE_VALUES = frozenset(
    {"-r", "--require", "--import", "--loader", "--experimental-loader", "-C", "--conditions",
     "--env-file", "--input-type", "--title", "--stack-size"}
)  # fmt: skip
_NODE_ONE_SHOT = frozenset({"--eval", "--print", "--check", "--version", "--help", "--test"})


def node(args: list[str], command: Command) -> Outcome:
    """Refuse `node server.js`-style app starts; allow tests, one-liners and other scripts."""
    i = 0
    while i < len(args):
        arg = args[i]
        name = arg.split("=", 1)[0]
        if name in _NODE_ONE_SHOT or name.startswith("--test"):
            return None
        if name.startswith("--watch"):
            return "server"
        if name == "--run":
            name = arg.partition("=")[2] or (args[i + 1] if i + 1 < len(args) else "")
            return "server" if _is_server_script(name) else None
        if arg == "--":
            i += 1
            break
        if arg in _NODE_VALUES:
            i += 2
        elif arg.startswith("--"):
            i += 1
        elif arg.startswith("-") and len(arg) > 1:
            if any(flag in "epcvh" for flag in arg[1:]):
                return None  # -e / -p / -c / -v / -h: a one-liner, a syntax check or info
            i += 1
        else:
            break
    return "server" if i < len(args) and _is_app_entry(args[i]) else None


def tsx(args: list[str], command: Command) -> Outcome:
    rest = after_options(args)
    if rest and rest[0] == "watch":
        return "server"
    return node(args, command)


def deno(args: list[str], command: Command) -> Outcome:
    rest = after_options(args)
    if not rest:
        return None
    sub, tail = rest[0], rest[1:]
    if sub == "serve" or any(arg.startswith("--watch") for arg in tail):
        return "server"
    if sub == "task":
        task = after_options(tail)
        return "server" if task and _is_server_script(task[0]) else None
    if sub == "run":
        return node(tail, command)
    return None
