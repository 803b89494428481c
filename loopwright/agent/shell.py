"""A small bash lexer: the simple commands a shell text runs, and the texts it runs nested.

`Lexer(text).parse()` returns a `Script`: each simple command's argv after quote removal,
what is fed to its stdin, the files its redirections write, and the bodies of `$( )`,
backticks and `<( )`. Quoting that does not close raises `ParseError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_DEPTH = 16
"""How deeply nested shell texts and command wrappers are followed before giving up."""


class ParseError(Exception):
    """The text is not valid shell syntax as far as quoting and nesting go."""


@dataclass
class Command:
    """One simple command: its words after quote removal, and what is fed to its stdin."""

    words: list[str]
    stdin: list[str] = field(default_factory=list)
    """Heredoc bodies and here-strings."""
    piped_from: Command | None = None
    redirects: list[str] = field(default_factory=list)
    """Files the command's output redirections write (`>`, `>>`, `&>`, `<>`, `>|`)."""


@dataclass
class Script:
    """What a bash text runs: its simple commands, the texts it runs nested, `&` anywhere."""

    commands: list[Command] = field(default_factory=list)
    nested: list[str] = field(default_factory=list)
    """Bodies of `$( )`, backticks and `<( )` that bash runs as commands of their own."""
    background: bool = False


@dataclass
class Heredoc:
    """A pending `<<` heredoc: its body is read after the line ends, into `sink`."""

    delimiter: str
    strip_tabs: bool
    expand: bool
    sink: list[str]


def _end_single(s: str, i: int) -> int:
    """Index just past the `'` that closes a single-quoted string whose body starts at i."""
    end = s.find("'", i)
    if end < 0:
        raise ParseError("a single quote (') is never closed")
    return end + 1


def _end_ansi(s: str, i: int) -> int:
    while i < len(s):
        if s[i] == "\\":
            i += 2
        elif s[i] == "'":
            return i + 1
        else:
            i += 1
    raise ParseError("a $'...' string is never closed")


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
    raise ParseError('a double quote (") is never closed')


def _end_backtick(s: str, i: int) -> int:
    while i < len(s):
        if s[i] == "\\":
            i += 2
        elif s[i] == "`":
            return i + 1
        else:
            i += 1
    raise ParseError("a backtick (`) is never closed")


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
    raise ParseError(f"{what} is never closed")


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


ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
"""The start of a variable assignment word (`FOO=`, `arr[1]+=`)."""


class Lexer:
    """A small bash tokenizer: enough of the grammar to find every command a string runs.

    Separators (`;`, `&&`, `||`, `|`, `&`, newlines, parentheses) end a simple command;
    redirections and their targets are dropped from the words; heredoc bodies become the
    command's stdin; command and process substitutions are collected for a recursive check.
    """

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.script = Script()
        self.words: list[str] = []
        self.stdin: list[str] = []
        self.redirects: list[str] = []
        self.chars: list[str] = []
        self.in_word = False
        self.quoted = False
        self.target: str | None = None
        """What the next word is when it is not an argument: a redirection's operand."""
        self.heredocs: list[Heredoc] = []
        self.pipe_from: Command | None = None
        self.open_parens = 0

    def parse(self) -> Script:
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
            raise ParseError("a ( is never closed")
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
            self.heredocs.append(Heredoc(word, strip_tabs, not quoted, self.stdin))
        elif target == "out" or (target == "dup" and not (word.isdigit() or word == "-")):
            self.redirects.append(word)  # `>&file` (not `>&2`) writes a file too
        # Any other target is a redirection's file name: not part of the command's words.

    def _end_command(self, *, piped: bool = False) -> None:
        self._end_word()
        self.target = None
        if self.words or self.stdin or self.redirects:
            command = Command(self.words, self.stdin, self.pipe_from, self.redirects)
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
                raise ParseError('a double quote (") is never closed')
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
        if self.in_word and (ASSIGNMENT.fullmatch(word) or word[-1:] in ("@", "*", "+", "?", "!")):
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
