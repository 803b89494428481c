"""The rules for the Python, PHP and Ruby interpreters: their one-line servers and app starts.

`python app.py` counts as a server (server/serve/app/wsgi/asgi); `python main.py` stays
allowed: it is as often a command-line tool as a server."""

from __future__ import annotations

import posixpath

from loopwright.agent.command_rules.common import Outcome, after_options, asks_help
from loopwright.agent.shell import Command

_PY_SERVER_SCRIPTS = frozenset({"server.py", "serve.py", "app.py", "wsgi.py", "asgi.py"})

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


def python(args: list[str], command: Command) -> Outcome:
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
    return "server" if script in _PY_SERVER_SCRIPTS and not asks_help(rest) else None


def _python_module(module: str, rest: list[str]) -> Outcome:
    if module in _PY_SERVER_MODULES:
        return None if asks_help(rest) else "server"
    program = _PY_MODULE_PROGRAMS.get(module)
    return [program, *rest] if program else None


def php(args: list[str], command: Command) -> Outcome:
    if any(arg.startswith("-S") for arg in args):
        return "server"
    rest = after_options(args, "cdfrtz")
    if rest and posixpath.basename(rest[0]) == "artisan" and rest[1:2] == ["serve"]:
        return "server"
    return None


def ruby(args: list[str], command: Command) -> Outcome:
    # `ruby -run -e httpd .` is un.rb's one-line web server.
    if "-run" in args and any("httpd" in arg for arg in args):
        return "server"
    return None
