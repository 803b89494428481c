"""The rules for process tools: `tail -f` and `sleep infinity` never end (the `server` rule,
as a server), `fuser -k` kills what holds a file or port (the `kill` rule)."""

from __future__ import annotations

from loopwright.agent.command_rules.common import Outcome
from loopwright.agent.shell import Command


def tail(args: list[str], command: Command) -> Outcome:
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


def sleep(args: list[str], command: Command) -> Outcome:
    return "server" if any(arg in ("infinity", "inf") for arg in args) else None


def fuser(args: list[str], command: Command) -> Outcome:
    kills = any(
        arg == "--kill" or (arg[:2] != "--" and arg[:1] == "-" and "k" in arg) for arg in args
    )
    return "kill" if kills else None
