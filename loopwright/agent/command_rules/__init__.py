"""The per-program rule table of the command policy.

`HANDLERS` maps a program name to a handler that sees the program's arguments and returns
its `Outcome`: a rule name (refuse), the argv it runs next (a wrapper such as `env` or
`timeout`), shell text it runs (`bash -c`, `eval`), or None (allowed).

The handlers live with their family: `wrappers` (commands that run other commands),
`servers` (serving and watching), `javascript` and `interpreters` (app starts and package
scripts), `processes` (tail, sleep, fuser) and `git` (remotes); `common` holds what they share.
"""

from __future__ import annotations

from loopwright.agent.command_rules import (
    git,
    interpreters,
    javascript,
    processes,
    servers,
    wrappers,
)
from loopwright.agent.command_rules.common import (
    Handler,
    Outcome,
    Run,
    after_options,
    always,
    program_name,
    strip_prefix,
)

__all__ = ["HANDLERS", "Handler", "Outcome", "Run", "after_options", "program_name", "strip_prefix"]

_UV_VALUES = frozenset(
    {"--with", "--python", "--project", "--directory", "--package", "--extra", "--group",
     "--env-file", "--from", "--index", "--with-requirements"}
)  # fmt: skip
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
    **dict.fromkeys(_SUDO, always("sudo")),
    **dict.fromkeys(_KILL, always("kill")),
    "fuser": processes.fuser,
    **dict.fromkeys(_DETACH, always("background")),
    # long-running servers, watchers and followers
    **dict.fromkeys(_SERVERS, servers.server_program),
    "flask": servers.server_subcommands({"run"}, "Ae", frozenset({"--app", "--env-file"})),
    "django-admin": servers.server_subcommands({"runserver", "runserver_plus"}),
    "manage.py": servers.server_subcommands({"runserver", "runserver_plus"}),
    "rails": servers.server_subcommands({"server", "s"}),
    "next": servers.server_subcommands({"dev", "start"}),
    "nuxt": servers.server_subcommands({"dev", "start", "preview"}),
    "nuxi": servers.server_subcommands({"dev", "start", "preview"}),
    "astro": servers.server_subcommands({"dev", "preview", "start"}),
    "ng": servers.server_subcommands({"serve", "s"}),
    "react-scripts": servers.server_subcommands({"start"}),
    "vue-cli-service": servers.server_subcommands({"serve"}),
    "remix": servers.server_subcommands({"dev"}),
    "gatsby": servers.server_subcommands({"develop", "serve"}),
    "ember": servers.server_subcommands({"serve", "server", "s"}),
    "hugo": servers.server_subcommands({"server", "serve"}),
    "jekyll": servers.server_subcommands({"serve", "server", "s"}),
    "mkdocs": servers.server_subcommands({"serve"}),
    "streamlit": servers.server_subcommands({"run"}),
    "jupyter": servers.server_subcommands({"notebook", "lab", "server"}),
    "wrangler": servers.server_subcommands({"dev"}),
    "expo": servers.server_subcommands({"start"}),
    "storybook": servers.server_subcommands({"dev"}),
    # `vite` alone serves; `vite build` finishes. `vitest` is a different program.
    "vite": servers.server_subcommands({"dev", "serve", "preview"}, bare=True),
    "parcel": servers.server_subcommands({"serve", "watch"}, bare=True),
    "webpack": servers.watch_flags(
        "--watch", "-w", subcommands=frozenset({"serve", "server", "s"})
    ),
    "webpack-cli": servers.watch_flags("--watch", "-w", subcommands=frozenset({"serve", "server"})),
    "tsc": servers.watch_flags("--watch", "-w"),
    "jest": servers.watch_flags("--watch", "--watchAll"),
    "vitest": servers.watch_flags("--watch", "-w", subcommands=frozenset({"watch", "dev"})),
    "mocha": servers.watch_flags("--watch", "-w"),
    "rollup": servers.watch_flags("--watch", "-w"),
    "esbuild": servers.watch_flags("--watch", "--serve"),
    "npm": javascript.npm,
    "yarn": javascript.yarn_like,
    "pnpm": javascript.yarn_like,
    "bun": javascript.bun,
    "node": javascript.node,
    "ts-node": javascript.node,
    "tsx": javascript.tsx,
    "deno": javascript.deno,
    "python": interpreters.python,
    "php": interpreters.php,
    "ruby": interpreters.ruby,
    "tail": processes.tail,
    "sleep": processes.sleep,
    "git": git.git,
    # wrappers: what matters is the command they run
    "env": wrappers.env,
    "timeout": wrappers.timeout,
    "gtimeout": wrappers.timeout,
    "nice": wrappers.unwrap_after("n", frozenset({"--adjustment"})),
    "ionice": wrappers.unwrap_after("cn", frozenset({"--class", "--classdata"})),
    "time": wrappers.unwrap_after("fo", frozenset({"--format", "--output"})),
    "command": wrappers.command_builtin,
    "builtin": wrappers.unwrap_after(),
    "exec": wrappers.unwrap_after("a"),
    "xargs": wrappers.unwrap_after("adEILnPs", _XARGS_VALUES),
    "stdbuf": wrappers.unwrap_after("ioe", frozenset({"--input", "--output", "--error"})),
    "npx": wrappers.npx,
    "bunx": wrappers.npx,
    "pnpx": wrappers.npx,
    "uvx": wrappers.unwrap_after("p", _UV_VALUES),
    "busybox": wrappers.unwrap_after(),
    "eval": wrappers.eval_text,
    **dict.fromkeys(_SHELLS, wrappers.shell),
    "find": wrappers.find,
    "bundle": wrappers.subcommand_wrapper({"exec"}),
    **dict.fromkeys(_RUNNERS, wrappers.subcommand_wrapper({"run"})),
    "uv": wrappers.subcommand_wrapper({"run", "tool"}, "p", _UV_VALUES),
    **dict.fromkeys(
        _CONDAS, wrappers.subcommand_wrapper({"run"}, "np", frozenset({"--name", "--cwd"}))
    ),
}
