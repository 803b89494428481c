"""Find product-code changes that reach into the test run instead of fixing the code.

A patch may only change what the tests test. Code that imports or patches the test
framework, registers exit handlers or forces the exit, writes the report location, patches
`sys.modules`, builtins or other modules, inspects frames or the garbage collector, loads
`ctypes`, or imports a module whose name is computed at run time can forge the outcome of
the very run that judges it, so each such construct is a finding.

The code is parsed, not grepped: Python with `ast` (aliases, `from X import Y`, `getattr`
with a computed name, string concatenation are followed), JavaScript with a token scan that
skips strings, comments, regular expressions and template text. Only constructs the patch
ADDS count: each file's constructs are compared, as a multiset, with the base file's.
"""

from __future__ import annotations

import ast
import difflib
import posixpath
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

PY_SUFFIXES = (".py",)
JS_SUFFIXES = (".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx")


@dataclass(frozen=True)
class Reach:
    """One construct that reaches into the test run."""

    path: str
    line: int
    key: str
    """What was found, independent of where (the unit the base comparison counts)."""
    detail: str


def reach_findings(path: str, old: str | None, new: str | None) -> list[Reach]:
    """The constructs `new` adds over `old` (None: the file is absent) that reach into the
    test run; empty for files that are neither Python nor JavaScript."""
    if new is None:
        return []
    if path.endswith(PY_SUFFIXES):
        scan = _python
    elif path.endswith(JS_SUFFIXES):
        scan = _javascript
    else:
        return []
    before = Counter(r.key for r in scan(path, old)) if old is not None else Counter()
    after = scan(path, new)
    changed = _changed_lines(old or "", new)
    extra = Counter(r.key for r in after) - before
    found: list[Reach] = []
    for key, count in extra.items():
        hits = [r for r in after if r.key == key]
        # Prefer the occurrences on lines the patch changed.
        hits.sort(key=lambda r: (r.line not in changed, r.line))
        found.extend(hits[:count])
    found.sort(key=lambda r: (r.line, r.key))
    return _one_per_key_and_line(found)


def _one_per_key_and_line(found: list[Reach]) -> list[Reach]:
    seen: set[tuple[str, int]] = set()
    out = []
    for reach in found:
        if (reach.key, reach.line) not in seen:
            seen.add((reach.key, reach.line))
            out.append(reach)
    return out


def _changed_lines(old: str, new: str) -> set[int]:
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    lines: set[int] = set()
    for op, _, _, j1, j2 in matcher.get_opcodes():
        if op in ("replace", "insert"):
            lines.update(range(j1 + 1, j2 + 1))
    return lines


# --- shared vocabulary ------------------------------------------------------------------------

_SUSPICIOUS_TEXT = re.compile(
    r"pytest|pluggy|unittest|conftest|junit|runtest|makereport|loopwright|atexit|_exit"
    r"|sys\.modules|builtins|__import__|f_back|f_globals|__globals__|__subclasses__"
    r"|node:test|node:assert|reallyExit|exitCode|beforeExit|/proc\b|NODE_TEST",
    re.IGNORECASE,
)

# --- Python -----------------------------------------------------------------------------------

_TEST_FRAMEWORK = "the test framework"
_IDENTITY = "the process's command line, which tells the test run from a real one"
_ENVIRONMENT = (
    "the process's environment read whole or by a computed name, which tells the test run "
    "from a real one"
)
_STACK = "the call stack, whose callers tell the test run from a real one"
_STREAMS = (
    "the standard streams inspected rather than written, which the test run replaces with "
    "its own capture"
)
_PY_DANGER: dict[str, str] = {
    "pytest": _TEST_FRAMEWORK,
    "_pytest": _TEST_FRAMEWORK,
    "pluggy": _TEST_FRAMEWORK,
    "unittest": _TEST_FRAMEWORK,
    "doctest": _TEST_FRAMEWORK,
    "nose": _TEST_FRAMEWORK,
    "nose2": _TEST_FRAMEWORK,
    "atexit": "an exit handler, which runs after the tests and can rewrite their outcome",
    "os._exit": "a forced exit, which ends the run before its outcome is written",
    "os.abort": "a forced exit",
    "os.kill": "a signal sent to a process",
    "os.killpg": "a signal sent to a process group",
    "os.fork": "a forked process, which can outlive the run and rewrite its outcome",
    "os.forkpty": "a forked process",
    "signal.signal": "a signal handler",
    "signal.raise_signal": "a signal",
    "signal.pthread_kill": "a signal",
    "signal.alarm": "a timer signal",
    "signal.setitimer": "a timer signal",
    "sys.modules": "the module table, which lets code replace any module",
    "sys.meta_path": "the import machinery",
    "sys.path_hooks": "the import machinery",
    "sys.path_importer_cache": "the import machinery",
    "sys.path.insert": "the import path",
    "sys.path.append": "the import path",
    "sys.path.extend": "the import path",
    "sys.path.remove": "the import path",
    "sys.path.clear": "the import path",
    "sys._getframe": "frame introspection, which reaches the test runner's own variables",
    "sys._current_frames": "frame introspection",
    "sys.settrace": "a trace hook, which can rewrite any running code",
    "sys.setprofile": "a profile hook",
    "sys.monitoring": "a monitoring hook",
    "sys.excepthook": "the exception hook",
    "sys.addaudithook": "an audit hook",
    "threading.settrace": "a trace hook",
    "threading.setprofile": "a profile hook",
    "builtins": "the builtins every module shares",
    "__builtin__": "the builtins every module shares",
    "__builtins__": "the builtins every module shares",
    "ctypes": "ctypes, which can rewrite memory",
    "_ctypes": "ctypes, which can rewrite memory",
    "cffi": "a foreign-function interface, which can rewrite memory",
    "gc.get_objects": "garbage-collector introspection, which reaches every live object",
    "gc.get_referrers": "garbage-collector introspection",
    "gc.get_referents": "garbage-collector introspection",
    "inspect.currentframe": "frame introspection",
    "inspect.stack": "frame introspection",
    "inspect.trace": "frame introspection",
    "inspect.getouterframes": "frame introspection",
    "inspect.getinnerframes": "frame introspection",
    "runpy": "code loaded by path at run time",
    "imp": "code loaded by path at run time",
    "zipimport": "code loaded by path at run time",
    "importlib.util": "code loaded by path at run time",
    "importlib.machinery": "code loaded by path at run time",
    "importlib.reload": "module reloading",
    "importlib._bootstrap": "the import machinery",
    "eval": "code built at run time",
    "exec": "code built at run time",
    "compile": "code built at run time",
    "globals": "a module's namespace by string, which can register hooks under computed names",
    "vars": "a namespace by string",
    "__main__": "the entry module, which tells the test run from a real one",
    "sys.argv": _IDENTITY,
    "sys.orig_argv": _IDENTITY,
    "os.environ": _ENVIRONMENT,
    "os.environb": _ENVIRONMENT,
    "os.getenv": _ENVIRONMENT,
    "os.getenvb": _ENVIRONMENT,
    "traceback.extract_stack": _STACK,
    "traceback.format_stack": _STACK,
    "traceback.print_stack": _STACK,
    "traceback.walk_stack": _STACK,
    "traceback.StackSummary": _STACK,
    "logging.currentframe": _STACK,
    "warnings.catch_warnings": "recorded warnings, whose locations name the calling test",
    "warnings.filters": "the warning filters, which the test run sets for each test",
    "faulthandler": "the fault handler, which the test run turns on",
    "sys.stdout": _STREAMS,
    "sys.stderr": _STREAMS,
    "sys.stdin": _STREAMS,
    "sys.__stdout__": _STREAMS,
    "sys.__stderr__": _STREAMS,
    "sys.__stdin__": _STREAMS,
}
_PY_EXEC_PREFIX = "os.exec"
_PY_IDENTITY = ("sys.argv", "os.environ", "os.environb", "os.getenv", "sys.std")
_PY_SPAWN = ("os.posix_spawn", "os.posix_spawnp")
_PY_MODULE_VALUES = {"os", "sys", "signal", "gc", "inspect", "importlib", "threading"}
_PY_INTROSPECTION_ATTRS = {
    "__globals__",
    "__subclasses__",
    "__builtins__",
    "__code__",
    "__closure__",
    "__getattribute__",
    "f_globals",
    "f_locals",
    "f_back",
    "f_builtins",
    "f_code",
    "tb_frame",
    "gi_frame",
    "cr_frame",
    "ag_frame",
}
_PY_ATTR_BUILTINS = {"getattr", "setattr", "delattr"}
_PY_PASSABLE = {"getattr", "setattr", "delattr", "__import__", "eval", "exec", "compile"}
_PY_IMPORTERS = {"__import__", "importlib.import_module", "importlib.__import__"}
_PY_EXITS = {"sys.exit", "exit", "quit", "os._exit"}


def _danger(qual: str) -> str | None:
    if qual.startswith(_PY_EXEC_PREFIX) or qual in _PY_SPAWN:
        return "a process replaced by another program"
    parts = qual.split(".")
    for end in range(len(parts), 0, -1):
        reason = _PY_DANGER.get(".".join(parts[:end]))
        if reason is not None:
            return reason
    return None


def _python(path: str, text: str | None) -> list[Reach]:
    if text is None:
        return []
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 1
        return [
            Reach(
                path,
                line,
                "unparsable",
                f"{path} does not parse as Python ({exc.__class__.__name__}: "
                f"{getattr(exc, 'msg', exc)}), so it cannot be checked for code that reaches "
                "into the test run",
            )
        ]
    scanner = _PythonScan(path)
    scanner.visit(tree)
    return scanner.found


class _PythonScan(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.found: list[Reach] = []
        self.aliases: dict[str, str] = {}
        self.star_modules: list[str] = []
        self.parents: dict[int, ast.AST] = {}
        self.depth = 0
        """Nesting in functions and classes: 0 is module level."""
        self.main_guard = 0
        self.classes: list[ast.ClassDef] = []

    def add(self, node: ast.AST, key: str, detail: str) -> None:
        self.found.append(Reach(self.path, getattr(node, "lineno", 1), key, detail))

    # -- names -----------------------------------------------------------------------------

    def visit_Module(self, node: ast.Module) -> None:
        for parent in ast.walk(node):
            for child in ast.iter_child_nodes(parent):
                self.parents[id(child)] = parent
        self.generic_visit(node)

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name an expression stands for, following imports and aliases."""
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            for module in self.star_modules:
                if _danger(f"{module}.{node.id}"):
                    return f"{module}.{node.id}"
            if node.id in _PY_DANGER or node.id in _PY_ATTR_BUILTINS or node.id in _PY_EXITS:
                return node.id
            if node.id in ("__import__", "open"):
                return node.id
            return None
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):
            func = self.resolve(node.func)
            if func in _PY_IMPORTERS and node.args:
                return _fold(node.args[0])
            if func == "getattr" and len(node.args) >= 2:
                base = self.resolve(node.args[0])
                attr = _fold(node.args[1])
                return f"{base}.{attr}" if base and attr else None
            return None
        if isinstance(node, ast.Subscript):
            base = self.resolve(node.value)
            if base == "sys.modules":
                return _fold(node.slice)
        return None

    def check(self, node: ast.AST, qual: str | None, how: str) -> None:
        if not qual:
            return
        if qual.startswith(_PY_IDENTITY) and (how == "imports" or self.plain_read(node, qual)):
            return
        reason = _danger(qual)
        if reason:
            self.add(node, f"{how}:{qual}", f"{how} `{qual}`: {reason}")

    def plain_read(self, node: ast.AST, qual: str) -> bool:
        """Whether `node` (standing for `qual`) reads one environment variable named by a
        constant, or the command line under `if __name__ == "__main__"`: reads that cannot
        tell the test run apart unless the constant names it (which the text check finds)."""
        parent = self.parents.get(id(node))
        if qual == "sys.argv":
            return bool(self.main_guard)
        if qual in ("sys.stdout", "sys.stderr", "sys.stdin"):
            # Written to, flushed, or passed as `file=`: how a program uses its streams.
            return isinstance(parent, ast.keyword) or (
                isinstance(parent, ast.Attribute) and parent.attr in _PY_STREAM_USES
            )
        if qual.startswith(("sys.stdout.", "sys.stderr.", "sys.stdin.")):
            return qual.split(".")[2] in _PY_STREAM_USES
        if qual in ("os.environ", "os.environb"):
            if isinstance(parent, ast.Subscript) and parent.value is node:
                return _fold(parent.slice) is not None
            return (
                isinstance(parent, ast.Compare)
                and parent.comparators == [node]
                and isinstance(parent.ops[0], ast.In | ast.NotIn)
                and _fold(parent.left) is not None
            )
        if qual in ("os.environ.get", "os.environb.get", "os.getenv", "os.getenvb"):
            return (
                isinstance(parent, ast.Call)
                and parent.func is node
                and bool(parent.args)
                and _fold(parent.args[0]) is not None
            )
        return False

    # -- statements ------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            self.aliases[bound] = alias.name if alias.asname else alias.name.split(".")[0]
            self.check(node, alias.name, "imports")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = "." * node.level + (node.module or "")
        if node.level == 0:
            self.check(node, module, "imports")
        for alias in node.names:
            if alias.name == "*":
                self.star_modules.append(module)
                continue
            qual = f"{module}.{alias.name}" if module else alias.name
            self.aliases[alias.asname or alias.name] = qual
            if node.level == 0 and not _danger(module):
                self.check(node, qual, "imports")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self.target(target, node)
        self.visit(node.value)
        value = self.resolve(node.value)
        for target in node.targets:
            if isinstance(target, ast.Name):
                if value:
                    self.aliases[target.id] = value
                else:
                    self.aliases.pop(target.id, None)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.target(node.target, node)
        if node.value is not None:
            self.visit(node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.target(node.target, node)
        self.visit(node.value)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self.target(target, node)

    def target(self, target: ast.AST, node: ast.AST) -> None:
        """Assignments that patch another module, or define a pytest hook by name."""
        value = getattr(node, "value", None)
        if (
            isinstance(target, ast.Name)
            and target.id in _PY_COMPARISONS
            and isinstance(value, ast.Lambda)
            and isinstance(value.body, ast.Constant)
        ):
            self.add(
                node,
                f"always:{target.id}",
                f"defines `{target.id}` to return a constant, so any comparison with the "
                "value passes whatever it holds",
            )
        elif (
            isinstance(target, ast.Name)
            and target.id in _PY_COMPARISONS
            and self.classes
            and (_value_type_bases(self.classes[-1]) or not _compares_both(value))
        ):
            self.add(
                node,
                f"compares:{target.id}",
                f"binds `{target.id}` on `{self.classes[-1].name}` to something other than a "
                "comparison of both operands, so a comparison with the value can pass "
                "whatever it holds",
            )
        if isinstance(target, ast.Name) and target.id.startswith("pytest"):
            self.add(
                node,
                f"defines:{target.id}",
                f"defines `{target.id}`, a name pytest loads as a hook or plugin list "
                "wherever the module's names are imported",
            )
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.target(element, node)
            return
        if isinstance(target, ast.Attribute):
            base = self.resolve(target.value)
            if base:
                self.add(
                    node,
                    f"patches:{base}.{target.attr}",
                    f"patches `{base}.{target.attr}` of another module",
                )
            self.visit(target.value)
            return
        if isinstance(target, ast.Subscript):
            self.visit(target.value)
            self.visit(target.slice)
            return
        if isinstance(target, ast.Starred):
            self.target(target.value, node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.defines(node, node.name)
        if node.name in _PY_COMPARISONS and _returns_constant(node.body):
            self.add(
                node,
                f"always:{node.name}",
                f"defines `{node.name}` to return a constant, so any comparison with the "
                "value passes whatever it holds",
            )
        elif node.name in _PY_COMPARISONS and self.classes and self.loose_comparison(node):
            self.add(
                node,
                f"compares:{node.name}",
                f"defines `{node.name}` on `{self.classes[-1].name}` "
                + (
                    "over a built-in value type"
                    if _value_type_bases(self.classes[-1])
                    else "without comparing both operands"
                )
                + ", so a comparison with the value can pass whatever it holds",
            )
        for decorator in node.decorator_list:
            self.visit(decorator)
        self.visit(node.args)
        if node.returns is not None:
            self.visit(node.returns)
        self.depth += 1
        for statement in node.body:
            self.visit(statement)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.defines(node, node.name)
        for expr in [*node.decorator_list, *node.bases, *node.keywords]:
            self.visit(expr)
        self.depth += 1
        self.classes.append(node)
        for statement in node.body:
            self.visit(statement)
        self.classes.pop()
        self.depth -= 1

    def loose_comparison(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """A comparison method over a built-in value type (the value passes for the real
        number or string everywhere else), or one that ignores an operand."""
        if _value_type_bases(self.classes[-1]):
            return True
        params = [a.arg for a in [*node.args.posonlyargs, *node.args.args]]
        used = {n.id for s in node.body for n in ast.walk(s) if isinstance(n, ast.Name)}
        return not params or any(p not in used for p in params[:2])

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    def defines(self, node: ast.AST, name: str) -> None:
        if name.startswith("pytest_"):
            self.add(
                node,
                f"defines:{name}",
                f"defines `{name}`, which pytest registers as a hook wherever the module's "
                "names are imported (a conftest's `from package import *`)",
            )

    def visit_If(self, node: ast.If) -> None:
        guard = _is_main_guard(node.test)
        self.visit(node.test)
        self.main_guard += guard
        for statement in node.body:
            self.visit(statement)
        self.main_guard -= guard
        for statement in node.orelse:
            self.visit(statement)

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if (
            self.depth == 0
            and not self.main_guard
            and isinstance(exc, ast.Name)
            and exc.id in ("SystemExit", "KeyboardInterrupt")
        ):
            self.add(
                node,
                f"module-exit:{exc.id}",
                f"raises {exc.id} when the module is imported, which ends the test run",
            )
        self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant):
            return  # a docstring or a bare string does nothing
        self.generic_visit(node)

    # -- expressions -----------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        func = self.resolve(node.func)
        folded = _fold(node)
        if folded is not None:
            self.text(node, folded)
        if func in _PY_IMPORTERS and node.args:
            name = _fold(node.args[0])
            if name is None:
                self.add(
                    node,
                    f"dynamic-import:{func}",
                    f"`{func}` imports a module whose name is computed at run time",
                )
            else:
                self.check(node, name, "imports")
        if func in _PY_ATTR_BUILTINS and len(node.args) >= 2:
            base = self.resolve(node.args[0])
            attr = _fold(node.args[1])
            if attr is None and base:
                self.add(
                    node,
                    f"dynamic-attribute:{base}",
                    f"`{func}` on `{base}` with an attribute name computed at run time",
                )
            elif attr is not None and attr in _PY_INTROSPECTION_ATTRS:
                self.add(node, f"introspects:{attr}", f"reads `{attr}` through `{func}`")
            elif attr is not None and base and func != "getattr":
                self.add(
                    node, f"patches:{base}.{attr}", f"patches `{base}.{attr}` through `{func}`"
                )
            elif func == "getattr":
                self.check(node, self.resolve(node), "uses")
        if func in _PY_EXITS and self.depth == 0 and not self.main_guard:
            self.add(
                node,
                f"module-exit:{func}",
                f"calls `{func}` when the module is imported, which ends the test run",
            )
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in _PY_INTROSPECTION_ATTRS:
            self.add(node, f"introspects:{node.attr}", f"reads `.{node.attr}`")
        if node.attr == "__dict__":
            base = self.resolve(node.value)
            if base:
                self.add(node, f"namespace:{base}", f"reaches the namespace of `{base}`")
        parent = self.parents.get(id(node))
        if not (isinstance(parent, ast.Attribute) and parent.value is node):
            self.check(node, self.resolve(node), "uses")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        parent = self.parents.get(id(node))
        qual = self.resolve(node)
        direct_call = isinstance(parent, ast.Call) and parent.func is node
        in_attribute = isinstance(parent, ast.Attribute) and parent.value is node
        if node.id in _PY_PASSABLE and not direct_call and node.id not in self.aliases:
            self.add(node, f"passes:{node.id}", f"passes `{node.id}` around as a value")
        if qual in _PY_MODULE_VALUES and not in_attribute and isinstance(node.ctx, ast.Load):
            self.add(
                node,
                f"module-value:{qual}",
                f"uses the module `{qual}` as a value, which hides what is done with it",
            )
        if not in_attribute and qual not in _PY_ATTR_BUILTINS:
            self.check(node, qual, "uses")

    def visit_Constant(self, node: ast.Constant) -> None:
        self.text(node, node.value)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        folded = _fold(node)
        if folded is not None:
            self.text(node, folded)
            for piece in _pieces(node):
                self.text(node, piece)
            return
        self.generic_visit(node)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        constant = "".join(
            v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)
        )
        self.text(node, constant)
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                self.visit(value)

    def text(self, node: ast.AST, value: object) -> None:
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        if isinstance(value, str) and _SUSPICIOUS_TEXT.search(value):
            shown = value if len(value) <= 60 else value[:57] + "..."
            self.add(
                node,
                f"text:{value}",
                f"builds the string {shown!r}, which names the test run's internals",
            )


_PY_COMPARISONS = {
    "__eq__",
    "__ne__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
    "__bool__",
    "__contains__",
    "__instancecheck__",
    "__subclasscheck__",
}


_PY_VALUE_TYPES = {
    "int",
    "float",
    "complex",
    "bool",
    "str",
    "bytes",
    "bytearray",
    "tuple",
    "list",
    "dict",
    "set",
    "frozenset",
    "Decimal",
    "Fraction",
}


def _compares_both(value: ast.AST | None) -> bool:
    """Whether `value` is a lambda whose body uses its first two parameters."""
    if not isinstance(value, ast.Lambda):
        return False
    params = [a.arg for a in [*value.args.posonlyargs, *value.args.args]]
    used = {n.id for n in ast.walk(value.body) if isinstance(n, ast.Name)}
    return bool(params) and all(p in used for p in params[:2])


def _value_type_bases(node: ast.ClassDef) -> bool:
    for base in node.bases:
        name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
        if name in _PY_VALUE_TYPES:
            return True
    return False


def _returns_constant(body: list[ast.stmt]) -> bool:
    statements = [
        s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    return (
        len(statements) == 1
        and isinstance(statements[0], ast.Return)
        and isinstance(statements[0].value, ast.Constant)
    )


def _is_main_guard(test: ast.AST) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _fold(node: ast.AST) -> str | None:
    """The string a constant expression builds (`"a" + "b"`, `"".join([...])`, `"ba"[::-1]`,
    `chr(97)`, f-strings without fields), or None when it is not constant."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return node.value
        if isinstance(node.value, bytes):
            return node.value.decode("latin-1")
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _fold(node.left), _fold(node.right)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = _fold(node.left)
        if left is not None and isinstance(node.right, ast.Constant | ast.Tuple):
            values = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            parts = [_fold(v) for v in values]
            if all(p is not None for p in parts):
                try:
                    return left % tuple(parts)
                except (TypeError, ValueError):
                    return None
        return None
    if isinstance(node, ast.JoinedStr):
        parts = [_fold(v) for v in node.values]
        return "".join(p for p in parts if p is not None) if all(parts) else None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        value = _fold(node.value)
        bounds = [node.slice.lower, node.slice.upper, node.slice.step]
        numbers = [_int(b) for b in bounds]
        if value is not None and all(
            b is None or n is not None for b, n in zip(bounds, numbers, strict=True)
        ):
            return value[slice(*numbers)]
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        # pathlib: Path("/") / "proc"
        left, right = _fold(node.left), _fold(node.right)
        return posixpath.join(left, right) if left is not None and right is not None else None
    if isinstance(node, ast.Call):
        if (
            isinstance(node.func, ast.Attribute)
            and node.func.attr == "join"
            and isinstance(node.func.value, ast.Attribute | ast.Name)
            and getattr(node.func.value, "attr", getattr(node.func.value, "id", "")) == "path"
            and node.args
        ):
            parts = [_fold(a) for a in node.args]
            if all(p is not None for p in parts):
                return posixpath.join(*(p for p in parts if p is not None))
            return None
        if (
            isinstance(node.func, ast.Name | ast.Attribute)
            and getattr(node.func, "id", getattr(node.func, "attr", "")) in _PY_PATH_TYPES
            and len(node.args) >= 1
        ):
            parts = [_fold(a) for a in node.args]
            if all(p is not None for p in parts):
                return posixpath.join(*(p for p in parts if p is not None))
            return None
        if isinstance(node.func, ast.Name) and node.func.id == "chr" and len(node.args) == 1:
            code = _int(node.args[0])
            return chr(code) if code is not None and 0 <= code < 0x110000 else None
        if (
            isinstance(node.func, ast.Attribute)
            and node.func.attr == "join"
            and len(node.args) == 1
            and isinstance(node.args[0], ast.List | ast.Tuple)
        ):
            glue = _fold(node.func.value)
            parts = [_fold(e) for e in node.args[0].elts]
            if glue is not None and all(p is not None for p in parts):
                return glue.join(p for p in parts if p is not None)
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("lower", "upper", "strip"):
            value = _fold(node.func.value)
            return getattr(value, node.func.attr)() if value is not None else None
        return _fold_encoded(node)
    return None


def _fold_encoded(node: ast.Call) -> str | None:
    """Text spelled as numbers or in an encoding: `bytes([47, 112])`, `bytes.fromhex(..)`,
    `x.decode()`, `"".join(map(chr, [..]))`, `"".join(reversed(".."))`, base64 and rot13."""
    func, args = node.func, node.args
    name = (
        func.id
        if isinstance(func, ast.Name)
        else func.attr
        if isinstance(func, ast.Attribute)
        else ""
    )
    if name in ("bytes", "bytearray") and len(args) == 1:
        codes = _ints(args[0])
        return "".join(map(chr, codes)) if codes is not None else None
    if name == "fromhex" and len(args) == 1:
        text = _fold(args[0])
        try:
            return bytes.fromhex(text).decode("latin-1") if text is not None else None
        except ValueError:
            return None
    if name in ("decode", "encode") and isinstance(func, ast.Attribute):
        if isinstance(func.value, ast.Name) and func.value.id == "codecs" and len(args) >= 2:
            text, codec = _fold(args[0]), _fold(args[1])
            if text is None or codec is None or codec.replace("_", "") != "rot13":
                return None
            import codecs

            return codecs.decode(text, "rot13")
        return _fold(func.value)
    if name in ("b64decode", "urlsafe_b64decode", "b32decode", "b16decode", "b85decode") and args:
        text = _fold(args[0])
        if text is None:
            return None
        import base64

        try:
            raw: bytes = getattr(base64, name)(text.encode("latin-1"))
        except ValueError:
            return None
        return raw.decode("latin-1")
    if isinstance(func, ast.Attribute) and func.attr == "join" and len(args) == 1:
        glue, inner = _fold(func.value), args[0]
        if glue is None or not isinstance(inner, ast.Call) or not isinstance(inner.func, ast.Name):
            return None
        if inner.func.id == "reversed" and len(inner.args) == 1:
            text = _fold(inner.args[0])
            return glue.join(reversed(text)) if text is not None else None
        if inner.func.id == "map" and len(inner.args) == 2:
            mapper = inner.args[0]
            codes = _ints(inner.args[1])
            if isinstance(mapper, ast.Name) and mapper.id == "chr" and codes is not None:
                return glue.join(map(chr, codes))
    return None


def _ints(node: ast.AST) -> list[int] | None:
    """The code points a list or tuple of integer constants spells, or None."""
    if not isinstance(node, ast.List | ast.Tuple):
        return None
    codes = [_int(e) for e in node.elts]
    if any(c is None or not 0 <= c < 0x110000 for c in codes):
        return None
    return [c for c in codes if c is not None]


_PY_STREAM_USES = {"write", "writelines", "flush", "buffer", "read", "readline", "readlines"}
_PY_PATH_TYPES = {"Path", "PurePath", "PosixPath", "PurePosixPath"}


def _int(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _int(node.operand)
        return -value if value is not None else None
    return None


def _pieces(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.BinOp):
        yield from _pieces(node.left)
        yield from _pieces(node.right)
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value


# --- JavaScript -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Token:
    kind: str
    """id, str (a constant string), text (template text around substitutions), num, punct,
    regex."""
    value: str
    line: int


Report = Callable[[_Token, str, str], None]

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


class _JsLexer:
    """Tokens of JavaScript (or TypeScript) source, with comments dropped, strings and
    identifiers unescaped, and regular expressions told from division the way a parser
    does: by the preceding token, and by whether a `)` closed a control head or a `}` a
    block."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.line = 1
        self.tokens: list[_Token] = []
        self.braces: list[str] = []
        """block, expr or template, for each open `{` or `${`."""
        self.templates: list[bool] = []
        """For each open template: whether it has had a substitution."""
        self.parens: list[bool] = []
        """For each open `(`: whether it is the head of if/while/for/with."""
        self.regex_ok = True

    def run(self) -> list[_Token]:
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
        self.tokens.append(_Token(kind, value, self.line))
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
                self.tokens.append(_Token("text" if substituted else "str", "".join(out), line))
                self.regex_ok = False
                return
            if text.startswith("${", self.i):
                self.i += 2
                self.tokens.append(_Token("text", "".join(out), line))
                if self.templates:
                    self.templates[-1] = True
                self.braces.append("template")
                self.regex_ok = True
                return
            self.i += 1
            if char == "\n":
                self.line += 1
            out.append(self.escape() if char == "\\" else char)
        self.tokens.append(_Token("text", "".join(out), line))

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


def _opens_object(previous: _Token | None) -> bool:
    """Whether a `{` after `previous` opens an object literal rather than a block."""
    if previous is None:
        return False
    if previous.kind == "id":
        return previous.value in _OBJECT_AFTER_KEYWORD
    if previous.kind != "punct":
        return previous.kind == "text"
    return previous.value not in (";", "{", "}", ")", "=>")


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


def _javascript(path: str, text: str | None) -> list[Reach]:
    if text is None:
        return []
    tokens = _JsLexer(text).run()
    found: list[Reach] = []

    def report(token: _Token, key: str, detail: str) -> None:
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
                    token.kind != "regex" and _SUSPICIOUS_TEXT.search(value)
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


def _js_error_names(tokens: list[_Token]) -> set[str]:
    """Names bound to an error the code makes or catches: `catch (e)`, `e = new Error()`."""
    names: set[str] = set()
    for index, token in enumerate(tokens[:-3]):
        if token.value == "catch" and tokens[index + 1].value == "(":
            if tokens[index + 2].kind == "id":
                names.add(tokens[index + 2].value)
        elif token.kind == "id" and _next_is(tokens, index + 1, "=", "new"):
            names.add(token.value)
    return names


def _next_is(tokens: list[_Token], index: int, *values: str) -> bool:
    """Whether the punctuators or identifiers `values` follow from `index` on."""
    for offset, value in enumerate(values):
        at = index + offset
        if at >= len(tokens) or tokens[at].kind not in ("punct", "id"):
            return False
        if tokens[at].value != value:
            return False
    return True


def _fold_js(tokens: list[_Token], index: int) -> tuple[str | None, int]:
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


def _check_module(token: _Token, spec: str, report: Report) -> None:
    if spec in _JS_TEST_MODULES or spec.startswith("@jest/"):
        report(token, f"imports:{spec}", f"imports `{spec}`: the test framework")
        return
    bare = spec if spec.startswith("node:test") else spec.removeprefix("node:")
    if bare in _JS_RISKY_MODULES:
        report(token, f"imports:{bare}", f"imports `{spec}`: {_JS_RISKY_MODULES[bare]}")


def _js_require(tokens: list[_Token], index: int, report: Report) -> None:
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


def _js_import(tokens: list[_Token], index: int, report: Report) -> None:
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


def _global_before(tokens: list[_Token], index: int) -> bool:
    return index >= 2 and tokens[index - 2].kind == "id" and tokens[index - 2].value in _JS_GLOBALS


def _js_process(tokens: list[_Token], index: int, report: Report) -> None:
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


def _plain_process_read(tokens: list[_Token], prop: str, at: int) -> bool:
    """`process.argv.slice(2)` (the user's arguments) or `process.env.NAME` /
    `process.env['NAME']` with a constant name the text check has seen."""
    if prop == "argv":
        return (
            _next_is(tokens, at, ".", "slice", "(")
            and at + 3 < len(tokens)
            and (tokens[at + 3].value == "2")
        )
    if _next_is(tokens, at, ".") and at + 1 < len(tokens) and tokens[at + 1].kind == "id":
        return not _SUSPICIOUS_TEXT.search(tokens[at + 1].value)
    if _next_is(tokens, at, "["):
        name, after = _fold_js(tokens, at + 1)
        return name is not None and _next_is(tokens, after, "]")
    return False


def _js_global(tokens: list[_Token], index: int, report: Report) -> None:
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


def _closing(tokens: list[_Token], at: int) -> int:
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


def _js_builtin(tokens: list[_Token], index: int, report: Report) -> None:
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


def summarize(findings: Iterable[Reach]) -> list[str]:
    """One line per finding, `path:line: detail`."""
    return [f"{r.path}:{r.line}: {r.detail}" for r in findings]
