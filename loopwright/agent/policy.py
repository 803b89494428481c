"""The command policy: which `run_command` strings are refused before they reach a sandbox.

`check_command` tokenizes the bash text the model sent and checks every simple command in it;
`check_writes` refuses a command whose text writes a protected path. In pair mode
`check_ask` names the commands a person approves first (`AskRules`).
"""

# What the policy is, and what it is not
# --------------------------------------
# This is a guard rail for the model's ordinary mistakes (starting a dev server, backgrounding
# a job, killing processes, pushing), each answered with a message the model can act on. It is
# not the security boundary: a determined program can always hide a command from static
# analysis (`k=kill; $k 1`). Isolation comes from the sandbox (no credentials, no network, a
# process group killed on timeout); the policy only saves the model a wasted step.

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from loopwright.agent.command_rules import HANDLERS, Run, after_options, program_name, strip_prefix
from loopwright.agent.command_rules.network import uses_network
from loopwright.agent.shell import MAX_DEPTH, Command, Lexer, ParseError
from loopwright.protected_paths import covering_pattern, glob_protected_by, protected_by


@dataclass(frozen=True)
class Refusal:
    """A command the tool layer will not run; `message` goes back to the model."""

    rule: str
    """One of "server", "background", "kill", "git_remote", "sudo", "unparseable",
    "protected_path"."""
    message: str
    """What was refused, why, and what to do instead."""


_SHOWN_CHARS = 120

_REASONS = {
    "server": (
        "it starts a long-running process (a server, watcher or follower) that never exits, "
        "so it would only hang until the command timeout. You do not need to run the app "
        "yourself: verification boots the app; call finish when the tests pass. To check "
        "your change now, run the tests or a one-shot script that exits."
    ),
    "background": (
        "it runs something in the background (`&`, nohup, setsid, disown, screen, tmux, ...). "
        "Every command must finish before its output comes back, and nothing may keep running "
        "after it. Run it in the foreground instead; if it is a server, you do not need it: "
        "verification boots the app; call finish when the tests pass."
    ),
    "kill": (
        "killing processes is not allowed here. Each command's whole process tree is ended "
        "for you when it exits or times out, so there is nothing to clean up. Run the next "
        "command directly (wrap it in `timeout 60 ...` if it might hang)."
    ),
    "git_remote": (
        "pushing and changing git remotes are not allowed here: the sandbox holds no "
        "credentials, and Loopwright commits and pushes the patch itself once verification "
        "passes. Leave your changes in the working tree and call finish when the tests pass."
    ),
    "sudo": (
        "elevated privileges (sudo, su, doas) are not available: commands run as an "
        "unprivileged user. Run the command without it, and install what you need inside "
        "the workspace (e.g. `pip install --user ...`, `npm ci`)."
    ),
}


def check_command(command: str) -> Refusal | None:
    """The refusal for a bash command string, or None when it may run."""
    if "\0" in command:
        return Refusal(
            "unparseable",
            "The command contains a NUL byte, which no command line can carry. Nothing was "
            "run. Send the command without it (printf '\\0' writes one where a file needs it).",
        )
    try:
        return _check(command, 0)
    except RecursionError:
        return _unparseable("it is nested too deeply to check")
    except ParseError as exc:
        return _unparseable(str(exc))


def _unparseable(detail: str) -> Refusal:
    return Refusal(
        "unparseable",
        f"The command could not be parsed: {detail}. Nothing was run. Fix the quoting (close "
        "every ' and \", balance $( ), ( ) and backticks) and send the command again.",
    )


def _refusal(rule: str, shown: str) -> Refusal:
    shown = " ".join(shown.split())
    if len(shown) > _SHOWN_CHARS:
        shown = shown[: _SHOWN_CHARS - 3] + "..."
    return Refusal(rule, f"`{shown}` was not run: {_REASONS[rule]}")


def _check(text: str, depth: int) -> Refusal | None:
    if depth > MAX_DEPTH:
        raise ParseError("commands are nested too deeply to check")
    script = Lexer(text).parse()
    for command in script.commands:
        refusal = _check_words(command.words, command, depth)
        if refusal is not None:
            return refusal
    for body in script.nested:
        refusal = _check(body, depth + 1)
        if refusal is not None:
            return refusal
    if script.background:
        return _refusal("background", text)
    return None


def _check_words(argv: list[str], command: Command, depth: int) -> Refusal | None:
    words = argv
    for _ in range(MAX_DEPTH):
        words = strip_prefix(words)
        if not words:
            return None
        handler = HANDLERS.get(program_name(words[0]))
        if handler is None:
            return None
        outcome = handler(words[1:], command)
        if outcome is None:
            return None
        if isinstance(outcome, str):
            return _refusal(outcome, shlex.join(words))
        if isinstance(outcome, Run):
            return _check(outcome.text, depth + 1)
        words = outcome
    raise ParseError("too many nested command wrappers to check")


@dataclass(frozen=True)
class WriteTarget:
    """A path a shell command creates, changes or removes, relative to the repository root."""

    path: str
    tree: bool = False
    """The command acts on everything below `path` too (`rm -r`, `mv`, `chmod -R`, `ln`'s
    target, whose link reaches everything below it)."""
    glob: bool = False
    """`path` holds unexpanded glob characters."""


def write_targets(command: str, roots: Sequence[str] = ("/workspace",)) -> list[WriteTarget]:
    """The repository paths that `command` writes, as far as the text shows them.

    Covers output redirections (`>`, `>>`, `&>`, `<>`, `>|`) and the file arguments of
    programs that write, move or remove files (`mv`, `cp`, `install`, `ln`, `tee`, `touch`,
    `truncate`, `rm`, `unlink`, `shred`, `chmod`, `chown`, `chgrp`, `dd of=`, `sed -i`,
    `perl -i`, `rsync`), also behind wrappers (`env`, `timeout`, `xargs`, `bash -c`, ...) and
    after a `cd` with a literal directory. Absolute paths count when they lie under one of
    `roots` (the workspace as the command sees it). Words holding `$` or a command
    substitution are skipped: their value is not known before the command runs. A text that
    cannot be parsed has no targets (`check_command` refuses it anyway).
    """
    found: list[WriteTarget] = []
    try:
        _collect_writes(command, tuple(r.rstrip("/") for r in roots), found, 0)
    except (ParseError, RecursionError):
        return []
    unique: dict[WriteTarget, None] = dict.fromkeys(found)
    return list(unique)


def target_protected_by(target: WriteTarget, patterns: Sequence[str]) -> str | None:
    """The pattern a write to `target` would touch, or None."""
    if target.glob:
        return glob_protected_by(target.path, patterns, tree=target.tree)
    hit = protected_by(target.path, patterns)
    if hit is None and target.tree:
        hit = covering_pattern(target.path, patterns)
    return hit


def check_writes(
    command: str, patterns: Sequence[str], roots: Sequence[str] = ("/workspace",)
) -> Refusal | None:
    """The refusal for a command that writes a protected path (lexically), or None."""
    for target in write_targets(command, roots):
        pattern = target_protected_by(target, patterns)
        if pattern is not None:
            return protected_write_refusal(command, target.path, pattern)
    return None


def shorten_command(command: str) -> str:
    """`command` on one line, cut for a refusal message."""
    shown = " ".join(command.split())
    return shown if len(shown) <= _SHOWN_CHARS else shown[: _SHOWN_CHARS - 3] + "..."


def protected_write_refusal(
    command: str, path: str, pattern: str, resolved: str | None = None
) -> Refusal:
    """The refusal for a command that would change `path`, protected by `pattern`."""
    shown = shorten_command(command)
    via = f" (which resolves through a symlink to {resolved})" if resolved else ""
    return Refusal(
        "protected_path",
        f"`{shown}` was not run: it would change {path}{via}, which the protected-path "
        f"pattern `{pattern}` covers. Loopwright never changes protected paths (workflows, "
        "actions, CODEOWNERS, its own config), and a patch that touches them is rejected. "
        "Leave them as they are and fix the code instead.",
    )


_GLOB_CHARS = frozenset("*?[")


def _collect_writes(
    text: str, roots: tuple[str, ...], found: list[WriteTarget], depth: int
) -> None:
    if depth > MAX_DEPTH:
        raise ParseError("commands are nested too deeply to check")
    script = Lexer(text).parse()
    cwd: str | None = ""
    for command in script.commands:
        base = cwd or ""
        for target in command.redirects:
            _add_target(found, target, base, roots)
        words = _unwrap_for_writes(command.words, command, depth, roots, found)
        if not words:
            continue
        name = program_name(words[0])
        if name in ("cd", "pushd"):
            cwd = _change_dir(base, words[1:], roots)
            continue
        for path, tree in _program_writes(name, words[1:]):
            _add_target(found, path, base, roots, tree=tree)
    for body in script.nested:
        _collect_writes(body, roots, found, depth + 1)


def _change_dir(base: str, args: list[str], roots: tuple[str, ...]) -> str | None:
    rest = after_options(args)
    if not rest:
        return ""  # `cd` alone goes home; relative paths after it are not the repository's
    rel = _relative(rest[0], base, roots)
    return rel if rel is not None else None


def _relative(word: str, base: str, roots: tuple[str, ...]) -> str | None:
    """`word` as a repository-relative path, or None when it is outside or not known."""
    if not word or "$" in word or "`" in word or word.startswith("~") or word == "-":
        return None
    if word.startswith("/"):
        for root in roots:
            if word == root or word.startswith(root + "/"):
                word = word[len(root) :].lstrip("/") or "."
                break
        else:
            return None
        base = ""
    joined = posixpath.normpath(posixpath.join(base, word)) if base else posixpath.normpath(word)
    if joined == ".." or joined.startswith("../"):
        return None
    return joined


def _add_target(
    found: list[WriteTarget],
    word: str,
    base: str,
    roots: tuple[str, ...],
    *,
    tree: bool = False,
) -> None:
    rel = _relative(word, base, roots)
    if rel is not None:
        found.append(WriteTarget(rel, tree=tree, glob=any(c in _GLOB_CHARS for c in rel)))


def _unwrap_for_writes(
    argv: list[str],
    command: Command,
    depth: int,
    roots: tuple[str, ...],
    found: list[WriteTarget],
) -> list[str]:
    """The argv that really runs, after wrappers; shell text they run is collected too."""
    words = argv
    for _ in range(MAX_DEPTH):
        words = strip_prefix(words)
        if not words:
            return []
        name = program_name(words[0])
        if name in _WRITERS or name in ("cd", "pushd"):
            return words
        handler = HANDLERS.get(name)
        if handler is None:
            return words
        outcome = handler(words[1:], command)
        if isinstance(outcome, Run):
            _collect_writes(outcome.text, roots, found, depth + 1)
            return []
        if not isinstance(outcome, list):
            return words
        words = outcome
    return []


_Options = list[tuple[str, str | None]]


def _operands(
    args: list[str], takes_value: str = "", long_values: frozenset[str] = frozenset()
) -> tuple[_Options, list[str]]:
    """Split arguments into (options with their values, operands), honouring `--`."""
    options: _Options = []
    operands: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            operands.extend(args[i + 1 :])
            break
        if arg.startswith("--") and len(arg) > 2:
            name, eq, value = arg.partition("=")
            if not eq and name in long_values and i + 1 < len(args):
                options.append((name, args[i + 1]))
                i += 2
                continue
            options.append((name, value if eq else None))
        elif arg.startswith("-") and len(arg) > 1:
            for k, flag in enumerate(arg[1:], start=1):
                if flag in takes_value:
                    inline = arg[k + 1 :]
                    if inline:
                        options.append(("-" + flag, inline))
                    elif i + 1 < len(args):
                        options.append(("-" + flag, args[i + 1]))
                        i += 1
                    break
                options.append(("-" + flag, None))
        else:
            operands.append(arg)
        i += 1
    return options, operands


def _option(options: _Options, *names: str) -> str | None:
    for name, value in options:
        if name in names and value is not None:
            return value
    return None


def _has(options: _Options, *names: str) -> bool:
    return any(name in names for name, _ in options)


def _copy_like(
    args: list[str], takes_value: str, long_values: frozenset[str], *, moves: bool
) -> list[tuple[str, bool]]:
    options, operands = _operands(args, takes_value, long_values)
    writes: list[tuple[str, bool]] = []
    directory = _option(options, "-t", "--target-directory")
    sources = operands if directory else operands[:-1]
    dest = directory or (operands[-1] if operands else None)
    if moves:
        writes.extend((source, True) for source in sources)
    if dest is not None:
        writes.append((dest, False))
        writes.extend(
            (posixpath.join(dest, posixpath.basename(s.rstrip("/"))), moves) for s in sources
        )
    return writes


def _program_writes(name: str, args: list[str]) -> list[tuple[str, bool]]:
    """(path, whole tree) pairs the program `name` writes, given its arguments."""
    if name == "cp":
        return _copy_like(args, "tS", frozenset({"--target-directory", "--suffix"}), moves=False)
    if name == "mv":
        return _copy_like(args, "tS", frozenset({"--target-directory", "--suffix"}), moves=True)
    if name == "install":
        options, operands = _operands(
            args, "tSmog", frozenset({"--target-directory", "--suffix", "--mode", "--owner"})
        )
        if _has(options, "-d", "--directory"):
            return [(op, False) for op in operands]
        return _copy_like(args, "tSmog", frozenset({"--target-directory", "--mode"}), moves=False)
    if name == "ln":
        options, operands = _operands(args, "tS", frozenset({"--target-directory", "--suffix"}))
        directory = _option(options, "-t", "--target-directory")
        sources = operands if directory else operands[:-1]
        link = directory or (operands[-1] if len(operands) > 1 else None)
        writes = [(source, True) for source in sources]
        if link is not None:
            writes.append((link, False))
            for source in sources:
                writes.append((posixpath.join(link, posixpath.basename(source)), False))
                writes.append((posixpath.join(posixpath.dirname(link), source), True))
        elif operands:  # `ln -s TARGET`: a link named after the target, here
            writes += [(operands[0], True), (posixpath.basename(operands[0]), False)]
        return writes
    if name in _PLAIN_WRITERS:
        _, operands = _operands(args, _PLAIN_WRITERS[name], frozenset({"--reference", "--date"}))
        return [(op, False) for op in operands]
    if name == "truncate":
        _, operands = _operands(args, "sr", frozenset({"--size", "--reference"}))
        return [(op, False) for op in operands]
    if name == "rm":
        options, operands = _operands(args)
        recursive = _has(options, "-r", "-R", "--recursive")
        return [(op, recursive) for op in operands]
    if name in ("chmod", "chown", "chgrp"):
        options, operands = _operands(args, "", frozenset({"--reference"}))
        recursive = _has(options, "-R", "--recursive")
        files = operands if _option(options, "--reference") else operands[1:]
        return [(op, recursive) for op in files]
    if name == "dd":
        return [(arg[3:], False) for arg in args if arg.startswith("of=")]
    if name == "sed":
        options, operands = _operands(
            args, "efl", frozenset({"--expression", "--file", "--line-length"})
        )
        if not any(n in ("-i", "--in-place") for n, _ in options) and not any(
            a.startswith("-i") or a.startswith("--in-place") for a in args
        ):
            return []
        scripted = _has(options, "-e", "--expression", "-f", "--file")
        return [(op, False) for op in (operands if scripted else operands[1:])]
    if name == "perl":
        if not any(a.startswith("-") and not a.startswith("--") and "i" in a for a in args):
            return []
        options, operands = _operands(args, "eEIMm", frozenset())
        scripted = _has(options, "-e", "-E")
        return [(op, False) for op in (operands if scripted else operands[1:])]
    if name == "rsync":
        _, operands = _operands(args, "e", frozenset({"--rsh", "--exclude", "--include"}))
        return [(operands[-1], True)] if len(operands) > 1 else []
    return []


_PLAIN_WRITERS = {"tee": "", "touch": "rdt", "unlink": "", "shred": "ns"}
"""Programs whose operands are all files they write, with their short options taking a value."""
_WRITERS = frozenset(
    {"cp", "mv", "install", "ln", "tee", "touch", "unlink", "shred", "truncate", "rm", "chmod",
     "chown", "chgrp", "dd", "sed", "perl", "rsync"}
)  # fmt: skip


# -- pair mode: what needs a person's approval ----------------------------------------------


@dataclass(frozen=True)
class AskRules:
    """Which actions pair mode asks a person about before they run (the rest run as before)."""

    network: bool = True
    """Commands that need the network (package installs, downloads, git fetch)."""
    max_removals: int = 3
    """Deleting or renaming more than this many files asks; a recursive or glob removal,
    whose count the text does not show, asks too."""
    ask_paths: tuple[str, ...] = ()
    """Globs (the repository config's `ask_paths`) whose files are only changed on approval."""
    network_isolated: bool = True
    """Whether the sandbox can attach the network for one approved command (Docker). The
    local sandbox runs every command on the host's network: a network command still asks,
    but approving it attaches nothing, and the request says so."""
    outside_scope: bool = True
    """Changing a file outside the fix's scope (the failing tests' files, the files their
    tracebacks name, and what those import) asks, at the latest when the model finishes."""


@dataclass(frozen=True)
class Ask:
    """An action that waits for a person's decision; `reason` says why, for them and the model."""

    rule: str
    """One of "network", "removals", "ask_path", "scope"."""
    reason: str
    network: bool = False
    """Approving it runs the command with the network attached."""


def check_ask(command: str, rules: AskRules, *, network_on: bool = False) -> Ask | None:
    """Why `command` needs approval under `rules`, or None when it may run at once;
    `network_on` says the sandbox already has the network (nothing to ask for it)."""
    try:
        simple = list(_simple_commands(command, 0))
    except (ParseError, RecursionError):
        return None  # `check_command` refuses what cannot be parsed
    if rules.network and not network_on:
        for words in simple:
            if uses_network(words):
                shown = shorten_command(shlex.join(words))
                if not rules.network_isolated:
                    return Ask(
                        "network",
                        f"`{shown}` reaches the network; the local sandbox has no network "
                        "isolation, so it runs on the host's network",
                    )
                return Ask(
                    "network",
                    f"`{shown}` needs the network, which the sandbox does not have while the "
                    "model works",
                    network=True,
                )
    removed = _removal_count(simple)
    if removed > rules.max_removals:
        count = "an unknown number of" if removed == _MANY else str(removed)
        return Ask(
            "removals",
            f"it deletes or renames {count} files (more than {rules.max_removals} ask first)",
        )
    if rules.ask_paths:
        for target in write_targets(command):
            pattern = target_protected_by(target, rules.ask_paths)
            if pattern is not None:
                return Ask("ask_path", f"it changes {target.path}, under ask_paths `{pattern}`")
    return None


def ask_path_for(path: str, rules: AskRules) -> Ask | None:
    """Why a file tool's write of `path` (repository-relative) needs approval, or None."""
    pattern = protected_by(path, rules.ask_paths) if rules.ask_paths else None
    if pattern is None:
        return None
    return Ask("ask_path", f"it changes {path}, under ask_paths `{pattern}`")


_MANY = 1_000_000
"""The count of a removal whose size the text does not show (`rm -r dir`, `rm *.py`)."""


def _simple_commands(text: str, depth: int) -> Iterator[list[str]]:
    """Every simple command of `text` as the argv that really runs (wrappers taken off,
    `bash -c` text and substitutions followed)."""
    if depth > MAX_DEPTH:
        raise ParseError("commands are nested too deeply to check")
    script = Lexer(text).parse()
    for command in script.commands:
        words = command.words
        for _ in range(MAX_DEPTH):
            words = strip_prefix(words)
            if not words:
                break
            handler = HANDLERS.get(program_name(words[0]))
            outcome = handler(words[1:], command) if handler is not None else None
            if isinstance(outcome, Run):
                yield from _simple_commands(outcome.text, depth + 1)
                break
            if not isinstance(outcome, list):
                yield words
                break
            words = outcome
    for body in script.nested:
        yield from _simple_commands(body, depth + 1)


def _removal_count(simple: list[list[str]]) -> int:
    count = 0
    for words in simple:
        name = program_name(words[0])
        args = words[1:]
        if name == "git":
            rest = after_options(args, "Cc")
            if not rest or rest[0] not in ("rm", "mv"):
                continue
            name, args = rest[0], rest[1:]
            if name == "rm":
                args = [a for a in args if a != "--cached"]
        if name not in ("rm", "unlink", "shred", "mv"):
            continue
        options, operands = _operands(args, "tS" if name == "mv" else "ns")
        if name == "shred" and not _has(options, "-u", "--remove"):
            continue
        if name == "mv":
            directory = _option(options, "-t", "--target-directory")
            operands = operands if directory else operands[:-1]
        recursive = _has(options, "-r", "-R", "--recursive")
        for operand in operands:
            if any(c in _GLOB_CHARS for c in operand) or (recursive and name != "mv"):
                return _MANY
            count += 1
    return count
