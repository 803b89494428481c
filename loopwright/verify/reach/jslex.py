"""A JavaScript tokenizer just good enough for the reach check: strings, comments, regular
expressions and template text are told apart from code, and nothing else is parsed."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Token:
    kind: str
    """id, str (a constant string), text (template text around substitutions), num, punct,
    regex."""
    value: str
    line: int


Report = Callable[[Token, str, str], None]

_KEYWORDS_BEFORE_EXPRESSION = {
    "return",
    "typeof",
    "instanceof",
    "in",
    "of",
    "new",
    "delete",
    "void",
    "throw",
    "case",
    "do",
    "else",
    "yield",
    "await",
    "extends",
}
_OBJECT_AFTER_KEYWORD = {"return", "typeof", "yield", "await", "in", "of", "instanceof", "new"}
_OBJECT_AFTER_KEYWORD |= {"delete", "void", "throw"}
_CONTROL_HEADS = {"if", "while", "for", "with"}
_PUNCTUATORS = sorted(
    [
        ">>>=",
        "...",
        "===",
        "!==",
        "**=",
        "<<=",
        ">>=",
        ">>>",
        "&&=",
        "||=",
        "??=",
        "=>",
        "==",
        "!=",
        "<=",
        ">=",
        "&&",
        "||",
        "??",
        "?.",
        "++",
        "--",
        "+=",
        "-=",
        "*=",
        "/=",
        "%=",
        "&=",
        "|=",
        "^=",
        "**",
        "<<",
        ">>",
        "{",
        "}",
        "(",
        ")",
        "[",
        "]",
        ";",
        ",",
        "<",
        ">",
        "+",
        "-",
        "*",
        "/",
        "%",
        "&",
        "|",
        "^",
        "!",
        "~",
        "?",
        ":",
        "=",
        ".",
        "@",
        "#",
    ],
    key=len,
    reverse=True,
)
_ID_START = re.compile(r"[A-Za-z_$\u0080-\uffff]")
_ID_PART = re.compile(r"[\w$\u0080-\uffff]")
_NUMBER = re.compile(r"[\w.]+")
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}


class JsLexer:
    """Tokens of JavaScript (or TypeScript) source, with comments dropped, strings and
    identifiers unescaped, and regular expressions told from division the way a parser
    does: by the preceding token, and by whether a `)` closed a control head or a `}` a
    block."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.line = 1
        self.tokens: list[Token] = []
        self.braces: list[str] = []
        """block, expr or template, for each open `{` or `${`."""
        self.templates: list[bool] = []
        """For each open template: whether it has had a substitution."""
        self.parens: list[bool] = []
        """For each open `(`: whether it is the head of if/while/for/with."""
        self.regex_ok = True

    def run(self) -> list[Token]:
        text = self.text
        if text.startswith("#!"):
            self.skip_line()
        while self.i < len(text):
            char = text[self.i]
            if char == "\n":
                self.line += 1
                self.i += 1
            elif char in " \t\r\f\v\ufeff\u00a0\u2028\u2029":
                self.i += 1
            elif text.startswith("//", self.i):
                self.skip_line()
            elif text.startswith("/*", self.i):
                end = text.find("*/", self.i + 2)
                end = len(text) if end < 0 else end + 2
                self.line += text.count("\n", self.i, end)
                self.i = end
            elif char in "'\"":
                self.emit("str", self.string(char), regex_after=False)
            elif char == "`":
                self.i += 1
                self.templates.append(False)
                self.template()
            elif char == "}" and self.braces and self.braces[-1] == "template":
                self.braces.pop()
                self.i += 1
                self.template()
            elif char.isdigit() or (char == "." and text[self.i + 1 : self.i + 2].isdigit()):
                match = _NUMBER.match(text, self.i)
                end = match.end() if match else self.i + 1
                self.emit("num", text[self.i : end], regex_after=False)
                self.i = end
            elif char == "/" and self.regex_ok:
                self.emit("regex", self.regex(), regex_after=False)
            elif _ID_START.match(char) or char == "\\":
                name = self.identifier()
                self.emit("id", name, regex_after=name in _KEYWORDS_BEFORE_EXPRESSION)
            else:
                self.punctuator()
        return self.tokens

    def emit(self, kind: str, value: str, *, regex_after: bool) -> None:
        self.tokens.append(Token(kind, value, self.line))
        self.regex_ok = regex_after

    def skip_line(self) -> None:
        end = self.text.find("\n", self.i)
        self.i = len(self.text) if end < 0 else end

    def escape(self) -> str:
        """Decode the escape whose backslash was just consumed."""
        text = self.text
        char = text[self.i : self.i + 1]
        self.i += 1
        if char == "x":
            code = text[self.i : self.i + 2]
            self.i += 2
            return chr(int(code, 16)) if re.fullmatch(r"[0-9a-fA-F]{2}", code) else code
        if char == "u":
            if text.startswith("{", self.i):
                end = text.find("}", self.i)
                digits = text[self.i + 1 : end] if end > 0 else ""
                self.i = end + 1 if end > 0 else self.i
                return chr(int(digits, 16)) if re.fullmatch(r"[0-9a-fA-F]{1,6}", digits) else ""
            code = text[self.i : self.i + 4]
            self.i += 4
            return chr(int(code, 16)) if re.fullmatch(r"[0-9a-fA-F]{4}", code) else code
        if char in "1234567":
            match = re.compile(r"[0-7]{1,2}").match(text, self.i)
            digits = char + (match.group() if match else "")
            self.i += len(digits) - 1
            return chr(int(digits, 8))
        if char == "\n":
            self.line += 1
            return ""
        if char == "\r":
            if text.startswith("\n", self.i):
                self.i += 1
                self.line += 1
            return ""
        return _SIMPLE_ESCAPES.get(char, char)

    def string(self, quote: str) -> str:
        self.i += 1
        out: list[str] = []
        text = self.text
        while self.i < len(text):
            char = text[self.i]
            if char == quote:
                self.i += 1
                break
            if char == "\n":
                break  # unterminated: a syntax error for the engine too
            self.i += 1
            out.append(self.escape() if char == "\\" else char)
        return "".join(out)

    def template(self) -> None:
        """Template text up to the closing backtick or the next `${`."""
        out: list[str] = []
        text = self.text
        line = self.line
        while self.i < len(text):
            char = text[self.i]
            if char == "`":
                self.i += 1
                substituted = self.templates.pop() if self.templates else True
                self.tokens.append(Token("text" if substituted else "str", "".join(out), line))
                self.regex_ok = False
                return
            if text.startswith("${", self.i):
                self.i += 2
                self.tokens.append(Token("text", "".join(out), line))
                if self.templates:
                    self.templates[-1] = True
                self.braces.append("template")
                self.regex_ok = True
                return
            self.i += 1
            if char == "\n":
                self.line += 1
            out.append(self.escape() if char == "\\" else char)
        self.tokens.append(Token("text", "".join(out), line))

    def regex(self) -> str:
        text = self.text
        start = self.i
        self.i += 1
        in_class = False
        while self.i < len(text) and text[self.i] != "\n":
            char = text[self.i]
            if char == "\\":
                self.i += 2
                continue
            if char == "[":
                in_class = True
            elif char == "]":
                in_class = False
            elif char == "/" and not in_class:
                self.i += 1
                break
            self.i += 1
        while self.i < len(text) and _ID_PART.match(text[self.i]):
            self.i += 1
        return text[start : self.i]

    def identifier(self) -> str:
        text = self.text
        out: list[str] = []
        while self.i < len(text):
            char = text[self.i]
            if char == "\\" and text.startswith("u", self.i + 1):
                self.i += 1
                out.append(self.escape())
            elif _ID_PART.match(char):
                out.append(char)
                self.i += 1
            else:
                break
        if not out:
            self.i += 1
            return "\\"
        return "".join(out)

    def punctuator(self) -> None:
        text = self.text
        punct = next((p for p in _PUNCTUATORS if text.startswith(p, self.i)), text[self.i])
        self.i += len(punct)
        previous = self.tokens[-1] if self.tokens else None
        regex_after = True
        if punct == "(":
            self.parens.append(
                previous is not None and previous.kind == "id" and previous.value in _CONTROL_HEADS
            )
        elif punct == ")":
            regex_after = self.parens.pop() if self.parens else False
        elif punct == "{":
            self.braces.append("expr" if _opens_object(previous) else "block")
        elif punct == "}":
            regex_after = (self.braces.pop() if self.braces else "block") == "block"
        elif punct in ("]", "++", "--"):
            regex_after = False
        self.emit("punct", punct, regex_after=regex_after)


def _opens_object(previous: Token | None) -> bool:
    """Whether a `{` after `previous` opens an object literal rather than a block."""
    if previous is None:
        return False
    if previous.kind == "id":
        return previous.value in _OBJECT_AFTER_KEYWORD
    if previous.kind != "punct":
        return previous.kind == "text"
    return previous.value not in (";", "{", "}", ")", "=>")
