"""The rules for servers and watchers, refused because they never end on their own
(`uvicorn`, `vite dev`, `jest --watch`); asking a server for its help or version is allowed."""

from __future__ import annotations

from loopwright.agent.command_rules.common import Handler, Outcome, after_options, asks_help
from loopwright.agent.shell import Command


def server_program(args: list[str], command: Command) -> Outcome:
    return None if asks_help(args) else "server"


def server_subcommands(
    subcommands: frozenset[str] | set[str],
    takes_value: str = "",
    long_values: frozenset[str] = frozenset(),
    *,
    bare: bool = False,
) -> Handler:
    """Refuse when the first positional argument is a serving subcommand (or absent if bare)."""

    def handler(args: list[str], command: Command) -> Outcome:
        if asks_help(args):
            return None
        rest = after_options(args, takes_value, long_values)
        if not rest:
            return "server" if bare else None
        return "server" if rest[0] in subcommands else None

    return handler


def watch_flags(*flags: str, subcommands: frozenset[str] = frozenset()) -> Handler:
    """Refuse a build or test tool only in its never-ending watch mode."""

    def handler(args: list[str], command: Command) -> Outcome:
        if any(arg in flags or arg.split("=", 1)[0] in flags for arg in args):
            return "server"
        rest = after_options(args)
        return "server" if rest and rest[0] in subcommands else None

    return handler
