"""The command policy: which `run_command` strings are refused before they reach a sandbox.

`check_command` tokenizes the bash text the model sent and checks every simple command in it;
`check_writes` refuses a command whose text writes a protected path.
"""

# What the policy is, and what it is not
# --------------------------------------
# This is a guard rail for the model's ordinary mistakes (starting a dev server, backgrounding
# a job, killing processes, pushing), each answered with a message the model can act on. It is
# not the security boundary: a determined program can always hide a command from static
# analysis (`k=kill; $k 1`). Isolation comes from the sandbox (no credentials, no network, a
# process group killed on timeout); the policy only saves the model a wasted step.
#
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from loopwright.protected_paths import covering_pattern, glob_protected_by, protected_by


@dataclass(frozen=True)
class Refusal:
    """A command the tool layer will not run; `message` goes back to the model."""

    rule: str
    """One of "server", "background", "kill", "git_remote", "sudo", "unparseable",
    "protected_path"."""
    message: str
    """What was refused, why, and what to do instead."""


_MAX_DEPTH = 16
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
    try:
        return _check(command, 0)
    except RecursionError:
        return _unparseable("it is nested too deeply to check")
    except _ParseError as exc:
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
    if depth > _MAX_DEPTH:
        raise _ParseError("commands are nested too deeply to check")
    script = _Lexer(text).parse()
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


# --------------------------------------------------------------------------------------------
# Tokenizing: bash text -> simple commands (argv after quote removal) + nested command texts.
# --------------------------------------------------------------------------------------------


class _ParseError(Exception):
    """The text is not valid shell syntax as far as quoting and nesting go."""


@dataclass
class _Command:
    """One simple command: its words after quote removal, and what is fed to its stdin."""

    words: list[str]
    stdin: list[str] = field(default_factory=list)
    """Heredoc bodies and here-strings."""
    piped_from: _Command | None = None
    redirects: list[str] = field(default_factory=list)
    """Files the command's output redirections write (`>`, `>>`, `&>`, `<>`, `>|`)."""


@dataclass
class _Script:
    commands: list[_Command] = field(default_factory=list)
    nested: list[str] = field(default_factory=list)
    """Bodies of `$( )`, backticks and `<( )` that bash runs as commands of their own."""
    background: bool = False


@dataclass
class _Heredoc:
    delimiter: str
    strip_tabs: bool
    expand: bool
    sink: list[str]


def _end_single(s: str, i: int) -> int:
    """Index just past the `'` that closes a single-quoted string whose body starts at i."""
    end = s.find("'", i)
    if end < 0:
        raise _ParseError("a single quote (') is never closed")
    return end + 1


def _end_ansi(s: str, i: int) -> int:
    while i < len(s):
        if s[i] == "\\":
            i += 2
        elif s[i] == "'":
            return i + 1
        else:
            i += 1
    raise _ParseError("a $'...' string is never closed")


def _end_double(s: str, i: int) -> int:
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
        elif c == '"':
            return i + 1
        elif c == "`":
            i = _end_backtick(s, i + 1)
        elif s.startswith("$(", i):
            i = _end_parens(s, i + 2)
        elif s.startswith("${", i):
            i = _end_braces(s, i + 2)
        else:
            i += 1
    raise _ParseError('a double quote (") is never closed')


def _end_backtick(s: str, i: int) -> int:
    while i < len(s):
        if s[i] == "\\":
            i += 2
        elif s[i] == "`":
            return i + 1
        else:
            i += 1
    raise _ParseError("a backtick (`) is never closed")


def _end_nested(s: str, i: int, opener: str, closer: str, what: str) -> int:
    depth = 1
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if s.startswith("$'", i):
            i = _end_ansi(s, i + 2)
            continue
        if c == "'":
            i = _end_single(s, i + 1)
            continue
        if c == '"':
            i = _end_double(s, i + 1)
            continue
        if c == "`":
            i = _end_backtick(s, i + 1)
            continue
        if c == opener:
            depth += 1
        elif c == closer:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise _ParseError(f"{what} is never closed")


def _end_parens(s: str, i: int) -> int:
    """Index just past the `)` matching a `(` that sits right before i."""
    return _end_nested(s, i, "(", ")", "a $( or (")


def _end_braces(s: str, i: int) -> int:
    return _end_nested(s, i, "{", "}", "a ${")


def _unescape_backtick(body: str) -> str:
    return re.sub(r"\\([`$\\])", r"\1", body)


_ANSI_ESCAPE = re.compile(
    r"\\(?:x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|([0-7]{1,3})|(.))", re.S
)
_ANSI_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v",
                "e": "\x1b", "E": "\x1b", "\\": "\\", "'": "'", '"': '"', "?": "?"}  # fmt: skip


def _ansi_c(body: str) -> str:
    """The value of a `$'...'` string, with bash's backslash escapes decoded."""

    def decode(match: re.Match[str]) -> str:
        hex2, hex4, hex8, octal, other = match.groups()
        number = hex2 or hex4 or hex8
        if number:
            return chr(min(int(number, 16), 0x10FFFF))
        if octal:
            return chr(int(octal, 8))
        return _ANSI_SIMPLE.get(other, "\\" + other)

    return _ANSI_ESCAPE.sub(decode, body)


def _substitutions(text: str) -> list[str]:
    """Command substitutions in text where quotes are literal (heredoc bodies, `${...}`)."""
    found = []
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == "`":
            end = _end_backtick(text, i + 1)
            found.append(_unescape_backtick(text[i + 1 : end - 1]))
            i = end
        elif text.startswith("$((", i):
            i = _end_parens(text, i + 2)
        elif text.startswith("$(", i):
            end = _end_parens(text, i + 2)
            found.append(text[i + 2 : end - 1])
            i = end
        else:
            i += 1
    return found


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")


class _Lexer:
    """A small bash tokenizer: enough of the grammar to find every command a string runs.

    Separators (`;`, `&&`, `||`, `|`, `&`, newlines, parentheses) end a simple command;
    redirections and their targets are dropped from the words; heredoc bodies become the
    command's stdin; command and process substitutions are collected for a recursive check.
    """

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.script = _Script()
        self.words: list[str] = []
        self.stdin: list[str] = []
        self.redirects: list[str] = []
        self.chars: list[str] = []
        self.in_word = False
        self.quoted = False
        self.target: str | None = None
        """What the next word is when it is not an argument: a redirection's operand."""
        self.heredocs: list[_Heredoc] = []
        self.pipe_from: _Command | None = None
        self.open_parens = 0

    def parse(self) -> _Script:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t\r":
                self._end_word()
                self.i += 1
            elif c == "\n":
                self._end_command()
                self.i += 1
                self._read_heredocs()
            elif c == "#" and not self.in_word:
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
            elif c == "\\":
                if s.startswith("\\\n", self.i):
                    self.i += 2  # line continuation
                else:
                    self._add(s[self.i + 1 : self.i + 2], quoted=True)
                    self.i += 2
            elif c == "'":
                end = _end_single(s, self.i + 1)
                self._add(s[self.i + 1 : end - 1], quoted=True)
                self.i = end
            elif c == '"':
                self._double_quoted()
            elif c == "`":
                end = _end_backtick(s, self.i + 1)
                self.script.nested.append(_unescape_backtick(s[self.i + 1 : end - 1]))
                self._add(s[self.i : end])
                self.i = end
            elif c == "$":
                self._dollar()
            elif c in ";&|":
                self._control()
            elif c == "(":
                self._open_paren()
            elif c == ")":
                self._end_command()
                self.open_parens = max(0, self.open_parens - 1)
                self.i += 1
            elif c in "<>":
                self._redirect()
            else:
                self._add(c)
                self.i += 1
        self._end_command()
        self._read_heredocs()
        if self.open_parens:
            raise _ParseError("a ( is never closed")
        return self.script

    def _add(self, text: str, *, quoted: bool = False) -> None:
        self.chars.append(text)
        self.in_word = True
        self.quoted = self.quoted or quoted

    def _end_word(self) -> None:
        if not self.in_word:
            return
        word, quoted, target = "".join(self.chars), self.quoted, self.target
        self.chars, self.in_word, self.quoted, self.target = [], False, False, None
        if target is None:
            self.words.append(word)
        elif target == "herestring":
            self.stdin.append(word)
        elif target.startswith("heredoc"):
            strip_tabs = target == "heredoc-"
            self.heredocs.append(_Heredoc(word, strip_tabs, not quoted, self.stdin))
        elif target == "out" or (target == "dup" and not (word.isdigit() or word == "-")):
            self.redirects.append(word)  # `>&file` (not `>&2`) writes a file too
        # Any other target is a redirection's file name: not part of the command's words.

    def _end_command(self, *, piped: bool = False) -> None:
        self._end_word()
        self.target = None
        if self.words or self.stdin or self.redirects:
            command = _Command(self.words, self.stdin, self.pipe_from, self.redirects)
            self.script.commands.append(command)
            self.pipe_from = command if piped else None
        else:
            self.pipe_from = None
        self.words, self.stdin, self.redirects = [], [], []

    def _double_quoted(self) -> None:
        s, i = self.s, self.i + 1
        out: list[str] = []
        while True:
            if i >= len(s):
                raise _ParseError('a double quote (") is never closed')
            c = s[i]
            if c == '"':
                i += 1
                break
            if c == "\\" and s[i + 1 : i + 2] in ("$", "`", '"', "\\", "\n"):
                if s[i + 1] != "\n":
                    out.append(s[i + 1])
                i += 2
            elif c == "`":
                end = _end_backtick(s, i + 1)
                self.script.nested.append(_unescape_backtick(s[i + 1 : end - 1]))
                out.append(s[i:end])
                i = end
            elif s.startswith("$((", i):
                end = _end_parens(s, i + 2)
                out.append(s[i:end])
                i = end
            elif s.startswith("$(", i):
                end = _end_parens(s, i + 2)
                self.script.nested.append(s[i + 2 : end - 1])
                out.append(s[i:end])
                i = end
            elif s.startswith("${", i):
                end = _end_braces(s, i + 2)
                self.script.nested.extend(_substitutions(s[i + 2 : end - 1]))
                out.append(s[i:end])
                i = end
            else:
                out.append(c)
                i += 1
        self._add("".join(out), quoted=True)
        self.i = i

    def _dollar(self) -> None:
        s, i = self.s, self.i
        nxt = s[i + 1 : i + 2]
        if s.startswith("$((", i):  # arithmetic, not a command
            end = _end_parens(s, i + 2)
            self._add(s[i:end])
            self.i = end
        elif nxt == "(":
            end = _end_parens(s, i + 2)
            self.script.nested.append(s[i + 2 : end - 1])
            self._add(s[i:end])
            self.i = end
        elif nxt == "'":
            end = _end_ansi(s, i + 2)
            self._add(_ansi_c(s[i + 2 : end - 1]), quoted=True)
            self.i = end
        elif nxt == '"':
            self.i += 1
            self._double_quoted()
        elif nxt == "{":
            end = _end_braces(s, i + 2)
            self.script.nested.extend(_substitutions(s[i + 2 : end - 1]))
            self._add(s[i:end])
            self.i = end
        else:
            self._add("$")
            self.i += 1

    def _control(self) -> None:
        s, i = self.s, self.i
        pair = s[i : i + 2]
        if pair in ("&&", "||"):
            self._end_command()
            self.i += 2
        elif pair == "&>":  # `&>file` / `&>>file` redirect both streams
            self._end_word()
            self.i += 3 if s.startswith("&>>", i) else 2
            self.target = "out"
        elif pair == "|&":
            self._end_command(piped=True)
            self.i += 2
        elif s[i] == "|":
            self._end_command(piped=True)
            self.i += 1
        elif s[i] == "&":
            self.script.background = True
            self._end_command()
            self.i += 1
        else:
            self._end_command()
            self.i += 1
            while s[self.i : self.i + 1] in (";", "&"):
                self.i += 1  # `;;`, `;&`, `;;&` end a case branch

    def _open_paren(self) -> None:
        s, i = self.s, self.i
        word = "".join(self.chars)
        # `arr=(a b)` and extglob `@(a|b)` are words, not subshells.
        if self.in_word and (_ASSIGNMENT.fullmatch(word) or word[-1:] in ("@", "*", "+", "?", "!")):
            end = _end_parens(s, i + 1)
            self._add(s[i:end])
            self.i = end
            return
        if s.startswith("((", i) and not self.words and not self.in_word:
            self.i = _end_parens(s, i + 1)  # an arithmetic command `(( ... ))`
            return
        self._end_command()
        self.open_parens += 1
        self.i += 1

    def _redirect(self) -> None:
        s, i = self.s, self.i
        if s[i + 1 : i + 2] == "(":  # process substitution <( ... ) / >( ... )
            end = _end_parens(s, i + 2)
            self.script.nested.append(s[i + 2 : end - 1])
            self._add(s[i:end])
            self.i = end
            return
        # In `2>file` the digits glued to the operator name a file descriptor, not an argument.
        if self.in_word and not self.quoted and "".join(self.chars).isdigit():
            self.chars, self.in_word = [], False
        else:
            self._end_word()
        if s.startswith("<<<", i):
            kind, width = "herestring", 3
        elif s.startswith("<<-", i):
            kind, width = "heredoc-", 3
        elif s.startswith("<<", i):
            kind, width = "heredoc", 2
        elif s.startswith((">>", ">|", "<>"), i):
            kind, width = "out", 2
        elif s.startswith(">&", i):
            kind, width = "dup", 2
        elif s.startswith("<&", i):
            kind, width = "file", 2
        else:
            kind, width = ("out" if s[i] == ">" else "file"), 1
        self.i += width
        self.target = kind

    def _read_heredocs(self) -> None:
        s = self.s
        for doc in self.heredocs:
            lines = []
            while self.i < len(s):
                end = s.find("\n", self.i)
                line = s[self.i : len(s) if end < 0 else end]
                self.i = len(s) if end < 0 else end + 1
                if (line.lstrip("\t") if doc.strip_tabs else line) == doc.delimiter:
                    break
                lines.append(line)
            body = "\n".join(lines)
            doc.sink.append(body)
            if doc.expand:
                self.script.nested.extend(_substitutions(body))
        self.heredocs = []


# --------------------------------------------------------------------------------------------
# Checking: each simple command's argv, unwrapped from wrappers, against the rules.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Run:
    """The command runs this shell text (`bash -c`, `eval`, `env -S`, a heredoc fed to sh)."""

    text: str


_Outcome = str | list[str] | _Run | None
"""A handler's verdict: a rule name (refuse), the argv it runs next, shell text, or None (ok)."""
_Handler = Callable[[list[str], _Command], _Outcome]

_RESERVED = frozenset(
    {"!", "{", "}", "if", "then", "elif", "else", "fi", "do", "done", "while", "until", "esac"}
)


def _check_words(argv: list[str], command: _Command, depth: int) -> Refusal | None:
    words = argv
    for _ in range(_MAX_DEPTH):
        words = _strip_prefix(words)
        if not words:
            return None
        handler = _HANDLERS.get(_program(words[0]))
        if handler is None:
            return None
        outcome = handler(words[1:], command)
        if outcome is None:
            return None
        if isinstance(outcome, str):
            return _refusal(outcome, shlex.join(words))
        if isinstance(outcome, _Run):
            return _check(outcome.text, depth + 1)
        words = outcome
    raise _ParseError("too many nested command wrappers to check")


def _strip_prefix(words: list[str]) -> list[str]:
    """Drop leading variable assignments and reserved words (`FOO=1`, `if`, `!`, `{`)."""
    i = 0
    while i < len(words):
        word = words[i]
        if _ASSIGNMENT.match(word) or word in _RESERVED:
            i += 1
        elif word == "function":
            i += 2
        elif word in ("for", "select", "case"):
            return []  # a loop header or case subject: its words are data, not a command
        else:
            break
    return words[i:]


def _program(word: str) -> str:
    name = posixpath.basename(word.rstrip("/")) if "/" in word else word
    if re.fullmatch(r"python[0-9.]*", name):
        return "python"
    return "node" if name == "nodejs" else name


def _after_options(
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


def _always(rule: str) -> _Handler:
    return lambda args, command: rule


def _server_program(args: list[str], command: _Command) -> _Outcome:
    return None if _asks_help(args) else "server"


def _server_subcommands(
    subcommands: frozenset[str] | set[str],
    takes_value: str = "",
    long_values: frozenset[str] = frozenset(),
    *,
    bare: bool = False,
) -> _Handler:
    """Refuse when the first positional argument is a serving subcommand (or absent if bare)."""

    def handler(args: list[str], command: _Command) -> _Outcome:
        if _asks_help(args):
            return None
        rest = _after_options(args, takes_value, long_values)
        if not rest:
            return "server" if bare else None
        return "server" if rest[0] in subcommands else None

    return handler


def _watch_flags(*flags: str, subcommands: frozenset[str] = frozenset()) -> _Handler:
    """Refuse a build or test tool only in its never-ending watch mode."""

    def handler(args: list[str], command: _Command) -> _Outcome:
        if any(arg in flags or arg.split("=", 1)[0] in flags for arg in args):
            return "server"
        rest = _after_options(args)
        return "server" if rest and rest[0] in subcommands else None

    return handler


# Wrappers: programs that run the rest of their arguments as a command.


def _unwrap_after(takes_value: str = "", long_values: frozenset[str] = frozenset()) -> _Handler:
    def handler(args: list[str], command: _Command) -> _Outcome:
        return _after_options(args, takes_value, long_values) or None

    return handler


def _env(args: list[str], command: _Command) -> _Outcome:
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-S", "--split-string") and i + 1 < len(args):
            return _Run(" ".join([args[i + 1], *map(shlex.quote, args[i + 2 :])]))
        if arg.startswith(("--split-string=", "-S")):
            split = arg.split("=", 1)[1] if arg.startswith("--") else arg[2:]
            return _Run(" ".join([split, *map(shlex.quote, args[i + 1 :])]))
        if arg in ("-u", "--unset", "-C", "--chdir"):
            i += 2
        elif arg.startswith("-"):
            i += 1
            if arg == "--":
                break
        else:
            break
    rest = args[i:]
    while rest and _ASSIGNMENT.match(rest[0]):
        rest = rest[1:]
    return rest or None


def _timeout(args: list[str], command: _Command) -> _Outcome:
    rest = _after_options(args, "sk", frozenset({"--signal", "--kill-after"}))
    return rest[1:] or None  # the first positional is the duration


def _command_builtin(args: list[str], command: _Command) -> _Outcome:
    options = args[: len(args) - len(_after_options(args))]
    if any("v" in opt or "V" in opt for opt in options):
        return None  # `command -v NAME` only looks the name up
    return _after_options(args) or None


def _npx(args: list[str], command: _Command) -> _Outcome:
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-c", "--call"):
            return _Run(args[i + 1]) if i + 1 < len(args) else None
        if arg.startswith("--call="):
            return _Run(arg.split("=", 1)[1])
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


def _eval(args: list[str], command: _Command) -> _Outcome:
    return _Run(" ".join(args)) if args else None


def _shell(args: list[str], command: _Command) -> _Outcome:
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
        return _Run(rest[0]) if rest else None
    if rest and not reads_stdin:
        return None  # a script file: its contents are not visible here
    return _Run("\n".join(_stdin_text(command))) if _stdin_text(command) else None


def _stdin_text(command: _Command) -> list[str]:
    """Text piped or fed into a command: heredocs, here-strings, `echo ... |`, `printf ... |`."""
    texts = list(command.stdin)
    source = command.piped_from
    if source is not None:
        words = _strip_prefix(source.words)
        name = _program(words[0]) if words else ""
        if name in ("echo", "printf"):
            texts.append(" ".join(_after_options(words[1:]) if name == "echo" else words[1:]))
        elif name == "cat":
            texts.extend(source.stdin)
    return texts


def _find(args: list[str], command: _Command) -> _Outcome:
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
) -> _Handler:
    """`bundle exec CMD`, `poetry run CMD`, `uv run CMD`: run CMD after the subcommand."""

    def handler(args: list[str], command: _Command) -> _Outcome:
        rest = _after_options(args, takes_value, long_values)
        if not rest or rest[0] not in subcommands:
            return None
        return _after_options(rest[1:], takes_value, long_values) or None

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


def _npm(args: list[str], command: _Command) -> _Outcome:
    values = frozenset({"--prefix", "--workspace"})
    rest = _after_options(args, "w", values)
    if not rest:
        return None
    sub, tail = rest[0], rest[1:]
    if sub in ("start", "restart"):
        return "server"
    if sub in ("run", "run-script", "rum", "urn"):
        script = _after_options(tail, "w", values)
        return "server" if script and _is_server_script(script[0]) else None
    if sub in ("exec", "x"):
        return _npx(tail, command)
    return None


_YARN_BUILTINS = frozenset(
    {"add", "install", "i", "remove", "rm", "test", "t", "ci", "init", "info", "why", "list",
     "ls", "outdated", "upgrade", "up", "update", "link", "unlink", "pack", "publish", "audit",
     "config", "cache", "bin", "global", "import", "licenses", "version", "versions", "create"}
)  # fmt: skip


def _yarn_like(args: list[str], command: _Command) -> _Outcome:
    """yarn and pnpm: `yarn dev` and `pnpm start` run package scripts by name."""
    rest = _after_options(args, "CF", frozenset({"--cwd", "--dir", "--filter"}))
    if not rest:
        return None
    sub, tail = rest[0], rest[1:]
    if sub == "workspace" and tail:
        return _yarn_like(tail[1:], command)
    if sub in ("exec", "dlx"):
        return _npx(tail, command)
    if sub in ("run", "run-script"):
        script = _after_options(tail)
        return "server" if script and _is_server_script(script[0]) else None
    if sub in _YARN_BUILTINS:
        return None
    return "server" if _is_server_script(sub) else None


def _bun(args: list[str], command: _Command) -> _Outcome:
    if any(arg in ("--watch", "--hot") for arg in args):
        return "server"
    rest = _after_options(args)
    if not rest:
        return None
    if rest[0] == "x":
        return _npx(rest[1:], command)
    target = _after_options(rest[1:]) if rest[0] == "run" else rest
    if target and (_is_server_script(target[0]) or _is_app_entry(target[0])):
        return "server"
    return None


_NODE_VALUES = frozenset(
    {"-r", "--require", "--import", "--loader", "--experimental-loader", "-C", "--conditions",
     "--env-file", "--input-type", "--title", "--stack-size"}
)  # fmt: skip
_NODE_ONE_SHOT = frozenset({"--eval", "--print", "--check", "--version", "--help", "--test"})


def _node(args: list[str], command: _Command) -> _Outcome:
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


def _tsx(args: list[str], command: _Command) -> _Outcome:
    rest = _after_options(args)
    if rest and rest[0] == "watch":
        return "server"
    return _node(args, command)


def _deno(args: list[str], command: _Command) -> _Outcome:
    rest = _after_options(args)
    if not rest:
        return None
    sub, tail = rest[0], rest[1:]
    if sub == "serve" or any(arg.startswith("--watch") for arg in tail):
        return "server"
    if sub == "task":
        task = _after_options(tail)
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


def _python(args: list[str], command: _Command) -> _Outcome:
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


def _python_module(module: str, rest: list[str]) -> _Outcome:
    if module in _PY_SERVER_MODULES:
        return None if _asks_help(rest) else "server"
    program = _PY_MODULE_PROGRAMS.get(module)
    return [program, *rest] if program else None


def _php(args: list[str], command: _Command) -> _Outcome:
    if any(arg.startswith("-S") for arg in args):
        return "server"
    rest = _after_options(args, "cdfrtz")
    if rest and posixpath.basename(rest[0]) == "artisan" and rest[1:2] == ["serve"]:
        return "server"
    return None


def _ruby(args: list[str], command: _Command) -> _Outcome:
    # `ruby -run -e httpd .` is un.rb's one-line web server.
    if "-run" in args and any("httpd" in arg for arg in args):
        return "server"
    return None


def _tail(args: list[str], command: _Command) -> _Outcome:
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


def _sleep(args: list[str], command: _Command) -> _Outcome:
    return "server" if any(arg in ("infinity", "inf") for arg in args) else None


def _fuser(args: list[str], command: _Command) -> _Outcome:
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


def _git(args: list[str], command: _Command) -> _Outcome:
    values = frozenset({"--git-dir", "--work-tree", "--namespace", "--config-env"})
    rest = _after_options(args, "Cc", values)
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

_HANDLERS: dict[str, _Handler] = {
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
    except (_ParseError, RecursionError):
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
    if depth > _MAX_DEPTH:
        raise _ParseError("commands are nested too deeply to check")
    script = _Lexer(text).parse()
    cwd: str | None = ""
    for command in script.commands:
        base = cwd or ""
        for target in command.redirects:
            _add_target(found, target, base, roots)
        words = _unwrap_for_writes(command.words, command, depth, roots, found)
        if not words:
            continue
        name = _program(words[0])
        if name in ("cd", "pushd"):
            cwd = _change_dir(base, words[1:], roots)
            continue
        for path, tree in _program_writes(name, words[1:]):
            _add_target(found, path, base, roots, tree=tree)
    for body in script.nested:
        _collect_writes(body, roots, found, depth + 1)


def _change_dir(base: str, args: list[str], roots: tuple[str, ...]) -> str | None:
    rest = _after_options(args)
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
    command: _Command,
    depth: int,
    roots: tuple[str, ...],
    found: list[WriteTarget],
) -> list[str]:
    """The argv that really runs, after wrappers; shell text they run is collected too."""
    words = argv
    for _ in range(_MAX_DEPTH):
        words = _strip_prefix(words)
        if not words:
            return []
        name = _program(words[0])
        if name in _WRITERS or name in ("cd", "pushd"):
            return words
        handler = _HANDLERS.get(name)
        if handler is None:
            return words
        outcome = handler(words[1:], command)
        if isinstance(outcome, _Run):
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
