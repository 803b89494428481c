"""What every rule shares: the `Outcome` a handler returns, and the helpers that find the
program and its positional arguments in a simple command's words."""

from __future__ import annotations

import posixpath
import re
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


def asks_help(args: list[str]) -> bool:
    return any(arg in ("-h", "--help", "--version", "-V") for arg in args)


def always(rule: str) -> Handler:
    return lambda args, command: rule
