"""The JavaScript scan: token patterns that import the test framework, patch `process`,
globals or built-ins, or load a module whose name is computed at run time."""

from __future__ import annotations

import re

from loopwright.verify.reach.found import SUSPICIOUS_TEXT, Reach
from loopwright.verify.reach.jslex import JsLexer, Report, Token

_JS_TEST_MODULES = {
    "node:test",
    "node:test/reporters",
    "jest",
    "@jest/globals",
    "mocha",
    "vitest",
    "chai",
    "ava",
    "tap",
    "uvu",
    "jasmine",
}
_JS_RISKY_MODULES = {
    "assert": "the assertion library the tests use",
    "assert/strict": "the assertion library the tests use",
    "module": "the module loader, which can replace any module",
    "vm": "code built at run time",
    "inspector": "the inspector, which reaches the test runner's own state",
    "v8": "engine internals",
    "process": "the process object (exit, exitCode, exit handlers)",
}
_JS_PROCESS_DANGER = {
    "exit": "a forced exit",
    "exitCode": "the process's exit code, which decides the verdict",
    "reallyExit": "a forced exit",
    "abort": "a forced exit",
    "kill": "a signal sent to a process",
    "binding": "engine internals",
    "_linkedBinding": "engine internals",
    "dlopen": "native code loaded at run time",
    "mainModule": "the entry module, which reaches the test runner",
    "execArgv": "the runtime's own options, which tell the test run from a real one",
    "setUncaughtExceptionCaptureCallback": "the uncaught-exception hook",
    "_events": "the process's event handlers",
    "emit": "process events sent by hand",
}
_JS_LISTENERS = {
    "on",
    "once",
    "addListener",
    "prependListener",
    "prependOnceListener",
    "removeAllListeners",
    "removeListener",
    "off",
}
_JS_EXIT_EVENTS = {"exit", "beforeExit", "uncaughtException", "unhandledRejection"}
_JS_LOADER_PROPS = {
    "_load",
    "_resolveFilename",
    "_extensions",
    "_cache",
    "_compile",
    "_findPath",
    "_pathCache",
    "_nodeModulePaths",
}
_JS_GLOBALS = {"globalThis", "global", "window", "self"}
_JS_BUILTINS = {
    "Object",
    "Array",
    "String",
    "Number",
    "Boolean",
    "Function",
    "Promise",
    "RegExp",
    "Error",
    "Map",
    "Set",
    "Symbol",
    "Date",
    "JSON",
    "Math",
    "Reflect",
    "Proxy",
    "BigInt",
    "console",
}
_JS_DEFINERS = {
    ("Object", "defineProperty"),
    ("Object", "defineProperties"),
    ("Object", "setPrototypeOf"),
    ("Object", "assign"),
    ("Reflect", "defineProperty"),
    ("Reflect", "set"),
    ("Reflect", "setPrototypeOf"),
}
# Text that names the test run's internals or looks like code: a lexer fooled into reading
# code as a string still sees it.
_JS_CODE_IN_TEXT = re.compile(
    r"\bprocess\s*(?:\.|\[)|\bexitCode\b|\breallyExit\b|\bbeforeExit\b|\brequire\s*\("
    r"|\bimport\s*\(|\beval\s*\(|\bglobalThis\b|\.constructor\b|node:test|node:assert"
    r"|loopwright|junit",
    re.IGNORECASE,
)
_JS_STACK = "the call stack, whose callers tell the test run from a real one"
_JS_STACK_PROPS = {"captureStackTrace", "prepareStackTrace", "stackTraceLimit"}
_JS_MAIN = "the entry module, which tells the test run from a real one"
_ASSIGNMENT_OPS = {"=", "+=", "-=", "*=", "/=", "||=", "&&=", "??=", "|=", "&=", "**="}


def javascript_reaches(path: str, text: str | None) -> list[Reach]:
    if text is None:
        return []
    tokens = JsLexer(text).run()
    found: list[Reach] = []

    def report(token: Token, key: str, detail: str) -> None:
        found.append(Reach(path, token.line, key, detail))

    errors = _js_error_names(tokens)
    for index, token in enumerate(tokens):
        previous = tokens[index - 1] if index else None
        after_dot = (
            previous is not None and previous.value in (".", "?.") and (previous.kind == "punct")
        )
        if token.kind in ("str", "text", "regex"):
            texts = [token.value]
            starts_run = not (previous is not None and previous.value == "+" and index >= 2)
            if token.kind == "str" and starts_run:
                folded, _ = _fold_js(tokens, index)
                if folded is not None and folded != token.value:
                    texts.append(folded)
            for value in texts:
                if _JS_CODE_IN_TEXT.search(value) or (
                    token.kind != "regex" and SUSPICIOUS_TEXT.search(value)
                ):
                    shown = value if len(value) <= 60 else value[:57] + "..."
                    report(
                        token,
                        f"text:{value}",
                        f"holds the text {shown!r}, which names the test run's internals",
                    )
            continue
        if token.kind != "id":
            continue
        name = token.value
        if name == "require" and not after_dot:
            _js_require(tokens, index, report)
        elif name == "import" and not after_dot:
            _js_import(tokens, index, report)
        elif name in ("eval", "Function") and not after_dot:
            report(token, f"uses:{name}", f"uses `{name}`, which runs code built at run time")
        elif name == "process" and (not after_dot or _global_before(tokens, index)):
            _js_process(tokens, index, report)
        elif name in _JS_GLOBALS and not after_dot:
            _js_global(tokens, index, report)
        elif after_dot and name in _JS_LOADER_PROPS:
            report(token, f"loader:{name}", f"reaches `{name}` of the module loader")
        elif after_dot and name in ("cache", "extensions") and tokens[index - 2].value == "require":
            report(token, f"loader:require.{name}", f"reaches `require.{name}`, the module table")
        elif after_dot and name in _JS_STACK_PROPS:
            report(token, f"stack:{name}", f"uses `{name}`: {_JS_STACK}")
        elif (
            after_dot
            and name == "stack"
            and (tokens[index - 2].value == ")" or tokens[index - 2].value in errors)
        ):
            report(token, "stack:stack", f"reads the `stack` of an error it made: {_JS_STACK}")
        elif (
            after_dot
            and name == "main"
            and tokens[index - 2].value == "require"
            and not _next_is(tokens, index + 1, "===", "module")
            and not _next_is(tokens, index + 1, "!==", "module")
        ):
            report(
                token, "uses:require.main", f"uses `require.main` beyond `=== module`: {_JS_MAIN}"
            )
        elif after_dot and name == "parent" and tokens[index - 2].value == "module":
            report(token, "uses:module.parent", f"uses `module.parent`: {_JS_MAIN}")
        elif name == "constructor" and _next_is(tokens, index + 1, ".", "constructor"):
            report(token, "uses:constructor.constructor", "reaches the Function constructor")
        elif name == "__proto__":
            report(token, "patches:__proto__", "rewrites a prototype through `__proto__`")
        elif name in _JS_BUILTINS and not after_dot:
            _js_builtin(tokens, index, report)
    return found


def _js_error_names(tokens: list[Token]) -> set[str]:
    """Names bound to an error the code makes or catches: `catch (e)`, `e = new Error()`."""
    names: set[str] = set()
    for index, token in enumerate(tokens[:-3]):
        if token.value == "catch" and tokens[index + 1].value == "(":
            if tokens[index + 2].kind == "id":
                names.add(tokens[index + 2].value)
        elif token.kind == "id" and _next_is(tokens, index + 1, "=", "new"):
            names.add(token.value)
    return names


def _next_is(tokens: list[Token], index: int, *values: str) -> bool:
    """Whether the punctuators or identifiers `values` follow from `index` on."""
    for offset, value in enumerate(values):
        at = index + offset
        if at >= len(tokens) or tokens[at].kind not in ("punct", "id"):
            return False
        if tokens[at].value != value:
            return False
    return True


def _fold_js(tokens: list[Token], index: int) -> tuple[str | None, int]:
    """The constant string starting at `index` (`'a' + "b" + `c``), and the index after it;
    None when the expression there is not a constant string."""
    parts: list[str] = []
    while index < len(tokens) and tokens[index].kind == "str":
        parts.append(tokens[index].value)
        index += 1
        if _next_is(tokens, index, "+") and index + 1 < len(tokens):
            if tokens[index + 1].kind == "str":
                index += 1
                continue
            return None, index
        break
    if not parts:
        return None, index
    return "".join(parts), index


def _check_module(token: Token, spec: str, report: Report) -> None:
    if spec in _JS_TEST_MODULES or spec.startswith("@jest/"):
        report(token, f"imports:{spec}", f"imports `{spec}`: the test framework")
        return
    bare = spec if spec.startswith("node:test") else spec.removeprefix("node:")
    if bare in _JS_RISKY_MODULES:
        report(token, f"imports:{bare}", f"imports `{spec}`: {_JS_RISKY_MODULES[bare]}")


def _js_require(tokens: list[Token], index: int, report: Report) -> None:
    token = tokens[index]
    if not _next_is(tokens, index + 1, "("):
        if not _next_is(tokens, index + 1, "."):
            report(token, "passes:require", "passes `require` around as a value")
        return
    spec, after = _fold_js(tokens, index + 2)
    if spec is None or not _next_is(tokens, after, ")"):
        report(
            token,
            "dynamic-import:require",
            "`require` of a module whose name is computed at run time",
        )
        return
    _check_module(token, spec, report)


def _js_import(tokens: list[Token], index: int, report: Report) -> None:
    token = tokens[index]
    if _next_is(tokens, index + 1, "("):
        spec, after = _fold_js(tokens, index + 2)
        if spec is None or not _next_is(tokens, after, ")"):
            report(
                token,
                "dynamic-import:import",
                "`import()` of a module whose name is computed at run time",
            )
            return
        _check_module(token, spec, report)
        return
    if _next_is(tokens, index + 1, "."):
        return  # import.meta
    # `import x from 'm'`, `import 'm'`: the first string before the statement ends.
    for later in tokens[index + 1 : index + 200]:
        if later.kind == "str":
            _check_module(token, later.value, report)
            return
        if later.kind == "punct" and later.value == ";":
            return


def _global_before(tokens: list[Token], index: int) -> bool:
    return index >= 2 and tokens[index - 2].kind == "id" and tokens[index - 2].value in _JS_GLOBALS


def _js_process(tokens: list[Token], index: int, report: Report) -> None:
    token = tokens[index]
    previous = tokens[index - 1] if index else None
    prop: str | None = None
    if _next_is(tokens, index + 1, ".") or _next_is(tokens, index + 1, "?."):
        nxt = tokens[index + 2] if index + 2 < len(tokens) else None
        prop = nxt.value if nxt is not None and nxt.kind == "id" else None
        at = index + 3
    elif _next_is(tokens, index + 1, "["):
        prop, at = _fold_js(tokens, index + 2)
        if prop is None or not _next_is(tokens, at, "]"):
            report(token, "dynamic:process", "reads a property of `process` computed at run time")
            return
        at += 1
    else:
        if previous is not None and previous.value == "typeof":
            return
        report(
            token,
            "value:process",
            "uses `process` as a value, which hides what is done with it",
        )
        return
    if prop is None:
        return
    if prop in ("argv", "env") and not _plain_process_read(tokens, prop, at):
        report(
            token,
            f"process:{prop}",
            f"uses `process.{prop}` "
            + ("beyond its user arguments" if prop == "argv" else "whole or by a computed name")
            + ", which tells the test run from a real one",
        )
    elif prop in _JS_PROCESS_DANGER:
        report(token, f"process:{prop}", f"uses `process.{prop}`: {_JS_PROCESS_DANGER[prop]}")
    elif prop in _JS_LISTENERS and _next_is(tokens, at, "("):
        event, _ = _fold_js(tokens, at + 1)
        if event is None or event in _JS_EXIT_EVENTS:
            what = event or "an event computed at run time"
            report(
                token,
                f"process:{prop}:{what}",
                f"listens for `{what}` on `process`, which runs as the test run ends",
            )


def _plain_process_read(tokens: list[Token], prop: str, at: int) -> bool:
    """`process.argv.slice(2)` (the user's arguments) or `process.env.NAME` /
    `process.env['NAME']` with a constant name the text check has seen."""
    if prop == "argv":
        return (
            _next_is(tokens, at, ".", "slice", "(")
            and at + 3 < len(tokens)
            and (tokens[at + 3].value == "2")
        )
    if _next_is(tokens, at, ".") and at + 1 < len(tokens) and tokens[at + 1].kind == "id":
        return not SUSPICIOUS_TEXT.search(tokens[at + 1].value)
    if _next_is(tokens, at, "["):
        name, after = _fold_js(tokens, at + 1)
        return name is not None and _next_is(tokens, after, "]")
    return False


def _js_global(tokens: list[Token], index: int, report: Report) -> None:
    token = tokens[index]
    if _next_is(tokens, index + 1, ".") or _next_is(tokens, index + 1, "?."):
        return  # globalThis.process is checked at `process`
    if _next_is(tokens, index + 1, "["):
        prop, at = _fold_js(tokens, index + 2)
        if prop is None or not _next_is(tokens, at, "]"):
            report(
                token,
                f"dynamic:{token.value}",
                f"reads a global computed at run time through `{token.value}`",
            )
        elif prop == "process":
            # Treat `globalThis["process"]` as `process`, looking past the `]`.
            _js_process(tokens, at, report)
        return
    if token.value == "self" and index and tokens[index - 1].value in (".", "?."):
        return
    report(token, f"value:{token.value}", f"uses `{token.value}` as a value")


def _closing(tokens: list[Token], at: int) -> int:
    """The index of the bracket that closes the one at `at` (or the last token)."""
    depth = 0
    for index in range(at, len(tokens)):
        if tokens[index].kind != "punct":
            continue
        if tokens[index].value in ("(", "[", "{"):
            depth += 1
        elif tokens[index].value in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return index
    return len(tokens) - 1


def _js_builtin(tokens: list[Token], index: int, report: Report) -> None:
    """`String.prototype.x = ...`, `JSON.parse = ...`, `Object.defineProperty(Array, ...)`."""
    token = tokens[index]
    at = index + 1
    chain = [token.value]
    while at + 1 < len(tokens) and tokens[at].kind == "punct" and len(chain) < 4:
        if tokens[at].value == ".":
            chain.append(tokens[at + 1].value)
            at += 2
        elif tokens[at].value == "[":
            prop, after = _fold_js(tokens, at + 1)
            if prop is None or not _next_is(tokens, after, "]"):
                chain.append("<computed>")
                at = _closing(tokens, at) + 1
            else:
                chain.append(prop)
                at = after + 1
        else:
            break
    assigned = (
        at < len(tokens) and tokens[at].kind == "punct" and (tokens[at].value in _ASSIGNMENT_OPS)
    )
    if len(chain) > 1 and assigned:
        target = ".".join(chain)
        report(
            token,
            f"patches:{target}",
            f"patches the built-in `{target}`, which the tests use too",
        )
        return
    if (chain[0], chain[1] if len(chain) > 1 else "") in _JS_DEFINERS and _next_is(tokens, at, "("):
        first = tokens[at + 1] if at + 1 < len(tokens) else None
        if (
            first is not None
            and first.kind == "id"
            and (
                first.value in _JS_BUILTINS
                or first.value in _JS_GLOBALS
                or first.value == "process"
            )
        ):
            target = ".".join(chain[:2])
            report(
                token,
                f"patches:{target}:{first.value}",
                f"`{target}` on the built-in `{first.value}`, which the tests use too",
            )
