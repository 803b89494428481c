"""The rules for wrappers: programs that run the rest of their arguments as a command
(`env`, `timeout`, `xargs`, `npx`, `uv run`) or run shell text (`bash -c`, `eval`, a heredoc
fed to `sh`). Their outcome is what they run next, which the policy checks in turn."""

from __future__ import annotations

import shlex

from loopwright.agent.command_rules.common import (
    Handler,
    Outcome,
    Run,
    after_options,
    program_name,
    strip_prefix,
)
from loopwright.agent.shell import ASSIGNMENT, Command


def unwrap_after(takes_value: str = "", long_values: frozenset[str] = frozenset()) -> Handler:
    def handler(args: list[str], command: Command) -> Outcome:
        return after_options(args, takes_value, long_values) or None

    return handler


def env(args: list[str], command: Command) -> Outcome:
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


def timeout(args: list[str], command: Command) -> Outcome:
    rest = after_options(args, "sk", frozenset({"--signal", "--kill-after"}))
    return rest[1:] or None  # the first positional is the duration


def command_builtin(args: list[str], command: Command) -> Outcome:
    options = args[: len(args) - len(after_options(args))]
    if any("v" in opt or "V" in opt for opt in options):
        return None  # `command -v NAME` only looks the name up
    return after_options(args) or None


def npx(args: list[str], command: Command) -> Outcome:
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


def eval_text(args: list[str], command: Command) -> Outcome:
    return Run(" ".join(args)) if args else None


def shell(args: list[str], command: Command) -> Outcome:
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


def find(args: list[str], command: Command) -> Outcome:
    for i, arg in enumerate(args):
        if arg in ("-exec", "-execdir", "-ok", "-okdir"):
            inner: list[str] = []
            for word in args[i + 1 :]:
                if word in (";", "+"):
                    break
                inner.append(word)
            return inner or None
    return None


def subcommand_wrapper(
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
