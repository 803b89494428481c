"""The per-program rule table of the command policy.

`HANDLERS` maps a program name to a handler that sees the program's arguments and returns
its `Outcome`: a rule name (refuse), the argv it runs next (a wrapper such as `env` or
`timeout`), shell text it runs (`bash -c`, `eval`), or None (allowed).
"""

# Servers: besides the obvious server programs, app entry points count as servers when they
# are started directly: `node server.js` (basename server/app/index/main/serve/start) and
# `python app.py` (server/serve/app/wsgi/asgi). `python main.py` stays allowed: it is as
# often a command-line tool as a server.
#
# git: `push` and remote edits (`remote add/set-url/rename/remove`, `config remote.*`/`url.*`
# writes) are refused because delivering the patch is Loopwright's job, done from the host's
# own clean clone. `fetch`, `pull` and `clone` are allowed: the sandbox has no network while
# the model drives it (they fail fast and harmlessly) and they cannot change what is
# delivered, so refusing them would only add noise.

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from loopwright.agent.shell import ASSIGNMENT, Command


@dataclass(frozen=True)
class Run:
    """The command runs this shell text (`bash -c`, `eval`, `env -S`, a heredoc fed to sh)."""

    text: str


Outcome = str | list[str] | Run | None
"""A handler's verdict: a rule name (refuse), the argv it runs next, shell text, or None (ok)."""
Handler = Callable[[list[str], Command], Outcome]
"""A rule: the program's arguments and its simple command -> the `Outcome`."""

_RESERVED = frozenset(
    {"!", "{", "}", "if", "then", "elif", "else", "fi", "do", "done", "while", "until", "esac"}
)


def strip_prefix(words: list[str]) -> list[str]:
    """Drop leading variable assignments and reserved words (`FOO=1`, `if`, `!`, `{`)."""
    i = 0
    while i < len(words):
        word = words[i]
        if ASSIGNMENT.match(word) or word in _RESERVED:
            i += 1
        elif word == "function":
            i += 2
        elif word in ("for", "select", "case"):
            return []  # a loop header or case subject: its words are data, not a command
        else:
            break
    return words[i:]


def program_name(word: str) -> str:
    """The rule-table name of the program `word` runs (`/usr/bin/python3.12` -> `python`)."""
    name = posixpath.basename(word.rstrip("/")) if "/" in word else word
    if re.fullmatch(r"python[0-9.]*", name):
        return "python"
    return "node" if name == "nodejs" else name


def after_options(
    args: list[str], takes_value: str = "", long_values: frozenset[str] = frozenset()
) -> list[str]:
    """The arguments after leading options; `takes_value` lists short options with a value."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return args[i + 1 :]
        if arg.startswith("--"):
            i += 2 if "=" not in arg and arg in long_values else 1
            continue
        if arg.startswith("-") and len(arg) > 1:
            i += 1
            for k, flag in enumerate(arg[1:], start=1):
                if flag in takes_value:
                    i += 1 if k == len(arg) - 1 else 0
                    break
            continue
        return args[i:]
    return []


def _asks_help(args: list[str]) -> bool:
    return any(arg in ("-h", "--help", "--version", "-V") for arg in args)


def _always(rule: str) -> Handler:
    return lambda args, command: rule


def _server_program(args: list[str], command: Command) -> Outcome:
    return None if _asks_help(args) else "server"


def _server_subcommands(
    subcommands: frozenset[str] | set[str],
    takes_value: str = "",
    long_values: frozenset[str] = frozenset(),
    *,
    bare: bool = False,
) -> Handler:
    """Refuse when the first positional argument is a serving subcommand (or absent if bare)."""

    def handler(args: list[str], command: Command) -> Outcome:
        if _asks_help(args):
            return None
        rest = after_options(args, takes_value, long_values)
        if not rest:
            return "server" if bare else None
        return "server" if rest[0] in subcommands else None

    return handler


def _watch_flags(*flags: str, subcommands: frozenset[str] = frozenset()) -> Handler:
    """Refuse a build or test tool only in its never-ending watch mode."""

    def handler(args: list[str], command: Command) -> Outcome:
        if any(arg in flags or arg.split("=", 1)[0] in flags for arg in args):
            return "server"
        rest = after_options(args)
        return "server" if rest and rest[0] in subcommands else None

    return handler


# Wrappers: programs that run the rest of their arguments as a command.


def _unwrap_after(takes_value: str = "", long_values: frozenset[str] = frozenset()) -> Handler:
    def handler(args: list[str], command: Command) -> Outcome:
        return after_options(args, takes_value, long_values) or None

    return handler


def _env(args: list[str], command: Command) -> Outcome:
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-S", "--split-string") and i + 1 < len(args):
            return Run(" ".join([args[i + 1], *map(shlex.quote, args[i + 2 :])]))
        if arg.startswith(("--split-string=", "-S")):
            split = arg.split("=", 1)[1] if arg.startswith("--") else arg[2:]
            return Run(" ".join([split, *map(shlex.quote, args[i + 1 :])]))
        if arg in ("-u", "--unset", "-C", "--chdir"):
            i += 2
        elif arg.startswith("-"):
            i += 1
            if arg == "--":
                break
        else:
            break
    rest = args[i:]
    while rest and ASSIGNMENT.match(rest[0]):
        rest = rest[1:]
    return rest or None


def _timeout(args: list[str], command: Command) -> Outcome:
    rest = after_options(args, "sk", frozenset({"--signal", "--kill-after"}))
    return rest[1:] or None  # the first positional is the duration


def _command_builtin(args: list[str], command: Command) -> Outcome:
    options = args[: len(args) - len(after_options(args))]
    if any("v" in opt or "V" in opt for opt in options):
        return None  # `command -v NAME` only looks the name up
    return after_options(args) or None


def _npx(args: list[str], command: Command) -> Outcome:
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-c", "--call"):
            return Run(args[i + 1]) if i + 1 < len(args) else None
        if arg.startswith("--call="):
            return Run(arg.split("=", 1)[1])
        if arg in ("-p", "--package"):
            i += 2
        elif arg == "--":
            i += 1
            break
        elif arg.startswith("-"):
            i += 1
        else:
            break
    return args[i:] or None


def _eval(args: list[str], command: Command) -> Outcome:
    return Run(" ".join(args)) if args else None


def _shell(args: list[str], command: Command) -> Outcome:
    i = 0
    command_string = reads_stdin = False
    while i < len(args):
        arg = args[i]
        if arg in ("-o", "+o", "-O", "+O"):
            i += 2
        elif arg == "--" or arg == "-":
            i += 1
            break
        elif arg.startswith("--"):
            i += 1
        elif arg[:1] in ("-", "+") and len(arg) > 1:
            command_string = command_string or (arg[0] == "-" and "c" in arg)
            reads_stdin = reads_stdin or (arg[0] == "-" and "s" in arg)
            i += 1
        else:
            break
    rest = args[i:]
    if command_string:
        return Run(rest[0]) if rest else None
    if rest and not reads_stdin:
        return None  # a script file: its contents are not visible here
    return Run("\n".join(_stdin_text(command))) if _stdin_text(command) else None


def _stdin_text(command: Command) -> list[str]:
    """Text piped or fed into a command: heredocs, here-strings, `echo ... |`, `printf ... |`."""
    texts = list(command.stdin)
    source = command.piped_from
    if source is not None:
        words = strip_prefix(source.words)
        name = program_name(words[0]) if words else ""
        if name in ("echo", "printf"):
            texts.append(" ".join(after_options(words[1:]) if name == "echo" else words[1:]))
        elif name == "cat":
            texts.extend(source.stdin)
    return texts


def _find(args: list[str], command: Command) -> Outcome:
    for i, arg in enumerate(args):
        if arg in ("-exec", "-execdir", "-ok", "-okdir"):
            inner: list[str] = []
            for word in args[i + 1 :]:
                if word in (";", "+"):
                    break
                inner.append(word)
            return inner or None
    return None


def _subcommand_wrapper(
    subcommands: frozenset[str] | set[str],
    takes_value: str = "",
    long_values: frozenset[str] = frozenset(),
) -> Handler:
    """`bundle exec CMD`, `poetry run CMD`, `uv run CMD`: run CMD after the subcommand."""

    def handler(args: list[str], command: Command) -> Outcome:
        rest = after_options(args, takes_value, long_values)
        if not rest or rest[0] not in subcommands:
            return None
        return after_options(rest[1:], takes_value, long_values) or None

    return handler


_UV_VALUES = frozenset(
    {"--with", "--python", "--project", "--directory", "--package", "--extra", "--group",
     "--env-file", "--from", "--index", "--with-requirements"}
)  # fmt: skip

# Rules for particular programs.

_SERVER_SCRIPTS = frozenset({"start", "dev", "serve", "server", "preview", "watch", "develop"})
_APP_ENTRY = re.compile(r"(?:server|app|index|main|serve|start)\.(?:[cm]?js|[cm]?ts)")
_PY_SERVER_SCRIPTS = frozenset({"server.py", "serve.py", "app.py", "wsgi.py", "asgi.py"})


def _is_server_script(name: str) -> bool:
    """A package.json script name that conventionally starts a server (`dev`, `start:prod`)."""
    return name.split(":", 1)[0] in _SERVER_SCRIPTS


def _is_app_entry(path: str) -> bool:
    return path in (".", "./") or bool(_APP_ENTRY.fullmatch(posixpath.basename(path)))


def _npm(args: list[str], command: Command) -> Outcome:
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
        return _npx(tail, command)
    return None


_YARN_BUILTINS = frozenset(
    {"add", "install", "i", "remove", "rm", "test", "t", "ci", "init", "info", "why", "list",
     "ls", "outdated", "upgrade", "up", "update", "link", "unlink", "pack", "publish", "audit",
     "config", "cache", "bin", "global", "import", "licenses", "version", "versions", "create"}
)  # fmt: skip


def _yarn_like(args: list[str], command: Command) -> Outcome:
    """yarn and pnpm: `yarn dev` and `pnpm start` run package scripts by name."""
    rest = after_options(args, "CF", frozenset({"--cwd", "--dir", "--filter"}))
    if not rest:
        return None
    sub, tail = rest[0], rest[1:]
    if sub == "workspace" and tail:
        return _yarn_like(tail[1:], command)
    if sub in ("exec", "dlx"):
        return _npx(tail, command)
    if sub in ("run", "run-script"):
        script = after_options(tail)
        return "server" if script and _is_server_script(script[0]) else None
    if sub in _YARN_BUILTINS:
        return None
    return "server" if _is_server_script(sub) else None


def _bun(args: list[str], command: Command) -> Outcome:
    if any(arg in ("--watch", "--hot") for arg in args):
        return "server"
    rest = after_options(args)
    if not rest:
        return None
    if rest[0] == "x":
        return _npx(rest[1:], command)
    target = after_options(rest[1:]) if rest[0] == "run" else rest
    if target and (_is_server_script(target[0]) or _is_app_entry(target[0])):
        return "server"
    return None


_NODE_VALUES = frozenset(
    {"-r", "--require", "--import", "--loader", "--experimental-loader", "-C", "--conditions",
     "--env-file", "--input-type", "--title", "--stack-size"}
)  # fmt: skip
_NODE_ONE_SHOT = frozenset({"--eval", "--print", "--check", "--version", "--help", "--test"})


def _node(args: list[str], command: Command) -> Outcome:
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


def _tsx(args: list[str], command: Command) -> Outcome:
    rest = after_options(args)
    if rest and rest[0] == "watch":
        return "server"
    return _node(args, command)


def _deno(args: list[str], command: Command) -> Outcome:
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
        return _node(tail, command)
    return None


# `python -m MODULE ...` is checked as the program that MODULE provides.
_PY_MODULE_PROGRAMS = {
    "uvicorn": "uvicorn",
    "gunicorn": "gunicorn",
    "hypercorn": "hypercorn",
    "daphne": "daphne",
    "waitress": "waitress-serve",
    "flask": "flask",
    "django": "django-admin",
    "streamlit": "streamlit",
    "jupyter": "jupyter",
    "mkdocs": "mkdocs",
}
_PY_SERVER_MODULES = frozenset(
    {"http.server", "SimpleHTTPServer", "CGIHTTPServer", "aiohttp.web", "notebook", "jupyterlab",
     "livereload", "smtpd", "aiosmtpd", "pydoc_server"}
)  # fmt: skip


def _python(args: list[str], command: Command) -> Outcome:
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-" or not arg.startswith("-"):
            break
        if arg == "--":
            i += 1
            break
        i += 1
        if arg.startswith("--"):
            continue
        for k, flag in enumerate(arg[1:], start=1):
            if flag == "c":
                return None  # inline code: not analysed
            if flag == "m":
                inline = arg[k + 1 :]
                module = inline or (args[i] if i < len(args) else "")
                return _python_module(module, args[i:] if inline else args[i + 1 :])
            if flag in "WX":
                i += 1 if k == len(arg) - 1 else 0
                break
    if i >= len(args):
        return None
    script, rest = posixpath.basename(args[i]), args[i + 1 :]
    if script == "manage.py":
        return ["manage.py", *rest]
    return "server" if script in _PY_SERVER_SCRIPTS and not _asks_help(rest) else None


def _python_module(module: str, rest: list[str]) -> Outcome:
    if module in _PY_SERVER_MODULES:
        return None if _asks_help(rest) else "server"
    program = _PY_MODULE_PROGRAMS.get(module)
    return [program, *rest] if program else None


def _php(args: list[str], command: Command) -> Outcome:
    if any(arg.startswith("-S") for arg in args):
        return "server"
    rest = after_options(args, "cdfrtz")
    if rest and posixpath.basename(rest[0]) == "artisan" and rest[1:2] == ["serve"]:
        return "server"
    return None


def _ruby(args: list[str], command: Command) -> Outcome:
    # `ruby -run -e httpd .` is un.rb's one-line web server.
    if "-run" in args and any("httpd" in arg for arg in args):
        return "server"
    return None


def _tail(args: list[str], command: Command) -> Outcome:
    for arg in args:
        if arg == "--":
            break
        if arg.startswith("--follow") or arg == "--retry":
            return "server"
        if arg.startswith("-") and not arg.startswith("--"):
            for flag in arg[1:]:
                if flag in "fF":
                    return "server"
                if flag in "ncs":
                    break  # the rest of the cluster is this option's value
    return None


def _sleep(args: list[str], command: Command) -> Outcome:
    return "server" if any(arg in ("infinity", "inf") for arg in args) else None


def _fuser(args: list[str], command: Command) -> Outcome:
    kills = any(
        arg == "--kill" or (arg[:2] != "--" and arg[:1] == "-" and "k" in arg) for arg in args
    )
    return "kill" if kills else None


_REMOTE_EDITS = frozenset({"add", "set-url", "rename", "remove", "rm"})
_CONFIG_READS = frozenset(
    {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "get", "list"}
)
_CONFIG_WRITES = frozenset(
    {"--unset", "--unset-all", "--add", "--replace-all", "--remove-section", "--rename-section",
     "set", "unset", "remove-section", "rename-section"}
)  # fmt: skip


def _git(args: list[str], command: Command) -> Outcome:
    values = frozenset({"--git-dir", "--work-tree", "--namespace", "--config-env"})
    rest = after_options(args, "Cc", values)
    if not rest:
        return None
    sub, tail = rest[0], rest[1:]
    if sub in ("push", "send-pack") or (sub == "subtree" and "push" in tail):
        return "git_remote"
    if sub == "remote":
        positional = [arg for arg in tail if not arg.startswith("-")]
        return "git_remote" if positional and positional[0] in _REMOTE_EDITS else None
    if sub == "config" and not any(arg in _CONFIG_READS for arg in tail):
        keys = [arg for arg in tail if not arg.startswith("-")]
        touches_remote = any(key.lower().startswith(("remote.", "url.")) for key in keys)
        writes = len(keys) >= 2 or any(arg in _CONFIG_WRITES for arg in tail)
        return "git_remote" if touches_remote and writes else None
    return None


_SUDO = ("sudo", "su", "doas", "pkexec", "runuser")
_KILL = ("kill", "pkill", "killall", "killall5", "skill")
_DETACH = (
    "nohup", "setsid", "disown", "screen", "tmux", "bg", "daemonize", "start-stop-daemon",
    "systemd-run", "pm2", "forever",
)  # fmt: skip
_SERVERS = (
    "uvicorn", "gunicorn", "hypercorn", "daphne", "waitress-serve", "webpack-dev-server",
    "nodemon", "serve", "http-server", "live-server", "lite-server", "json-server",
    "browser-sync", "rackup", "puma", "unicorn", "ts-node-dev", "start-storybook", "watch",
)  # fmt: skip
_SHELLS = ("bash", "sh", "zsh", "dash", "ksh", "ash", "mksh")
_RUNNERS = ("poetry", "pipenv", "pdm", "hatch", "rye", "pipx")
_CONDAS = ("conda", "mamba", "micromamba")
_XARGS_VALUES = frozenset(
    {"--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--max-lines",
     "--process-slot-var", "--eof"}
)  # fmt: skip

# The rule table: a program without an entry is allowed as it is.
HANDLERS: dict[str, Handler] = {
    **dict.fromkeys(_SUDO, _always("sudo")),
    **dict.fromkeys(_KILL, _always("kill")),
    "fuser": _fuser,
    **dict.fromkeys(_DETACH, _always("background")),
    # long-running servers, watchers and followers
    **dict.fromkeys(_SERVERS, _server_program),
    "flask": _server_subcommands({"run"}, "Ae", frozenset({"--app", "--env-file"})),
    "django-admin": _server_subcommands({"runserver", "runserver_plus"}),
    "manage.py": _server_subcommands({"runserver", "runserver_plus"}),
    "rails": _server_subcommands({"server", "s"}),
    "next": _server_subcommands({"dev", "start"}),
    "nuxt": _server_subcommands({"dev", "start", "preview"}),
    "nuxi": _server_subcommands({"dev", "start", "preview"}),
    "astro": _server_subcommands({"dev", "preview", "start"}),
    "ng": _server_subcommands({"serve", "s"}),
    "react-scripts": _server_subcommands({"start"}),
    "vue-cli-service": _server_subcommands({"serve"}),
    "remix": _server_subcommands({"dev"}),
    "gatsby": _server_subcommands({"develop", "serve"}),
    "ember": _server_subcommands({"serve", "server", "s"}),
    "hugo": _server_subcommands({"server", "serve"}),
    "jekyll": _server_subcommands({"serve", "server", "s"}),
    "mkdocs": _server_subcommands({"serve"}),
    "streamlit": _server_subcommands({"run"}),
    "jupyter": _server_subcommands({"notebook", "lab", "server"}),
    "wrangler": _server_subcommands({"dev"}),
    "expo": _server_subcommands({"start"}),
    "storybook": _server_subcommands({"dev"}),
    # `vite` alone serves; `vite build` finishes. `vitest` is a different program.
    "vite": _server_subcommands({"dev", "serve", "preview"}, bare=True),
    "parcel": _server_subcommands({"serve", "watch"}, bare=True),
    "webpack": _watch_flags("--watch", "-w", subcommands=frozenset({"serve", "server", "s"})),
    "webpack-cli": _watch_flags("--watch", "-w", subcommands=frozenset({"serve", "server"})),
    "tsc": _watch_flags("--watch", "-w"),
    "jest": _watch_flags("--watch", "--watchAll"),
    "vitest": _watch_flags("--watch", "-w", subcommands=frozenset({"watch", "dev"})),
    "mocha": _watch_flags("--watch", "-w"),
    "rollup": _watch_flags("--watch", "-w"),
    "esbuild": _watch_flags("--watch", "--serve"),
    "npm": _npm,
    "yarn": _yarn_like,
    "pnpm": _yarn_like,
    "bun": _bun,
    "node": _node,
    "ts-node": _node,
    "tsx": _tsx,
    "deno": _deno,
    "python": _python,
    "php": _php,
    "ruby": _ruby,
    "tail": _tail,
    "sleep": _sleep,
    "git": _git,
    # wrappers: what matters is the command they run
    "env": _env,
    "timeout": _timeout,
    "gtimeout": _timeout,
    "nice": _unwrap_after("n", frozenset({"--adjustment"})),
    "ionice": _unwrap_after("cn", frozenset({"--class", "--classdata"})),
    "time": _unwrap_after("fo", frozenset({"--format", "--output"})),
    "command": _command_builtin,
    "builtin": _unwrap_after(),
    "exec": _unwrap_after("a"),
    "xargs": _unwrap_after("adEILnPs", _XARGS_VALUES),
    "stdbuf": _unwrap_after("ioe", frozenset({"--input", "--output", "--error"})),
    "npx": _npx,
    "bunx": _npx,
    "pnpx": _npx,
    "uvx": _unwrap_after("p", _UV_VALUES),
    "busybox": _unwrap_after(),
    "eval": _eval,
    **dict.fromkeys(_SHELLS, _shell),
    "find": _find,
    "bundle": _subcommand_wrapper({"exec"}),
    **dict.fromkeys(_RUNNERS, _subcommand_wrapper({"run"})),
    "uv": _subcommand_wrapper({"run", "tool"}, "p", _UV_VALUES),
    **dict.fromkeys(_CONDAS, _subcommand_wrapper({"run"}, "np", frozenset({"--name", "--cwd"}))),
}
