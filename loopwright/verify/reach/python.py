"""The Python scan: `ast` walks of a file, following aliases, `from X import Y`, computed
`getattr` names and string concatenation to the constructs that reach into the test run."""

from __future__ import annotations

import ast

from loopwright.verify.reach.found import SUSPICIOUS_TEXT, Reach
from loopwright.verify.reach.pyfold import fold, pieces

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


def python_reaches(path: str, text: str | None) -> list[Reach]:
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
                return fold(node.args[0])
            if func == "getattr" and len(node.args) >= 2:
                base = self.resolve(node.args[0])
                attr = fold(node.args[1])
                return f"{base}.{attr}" if base and attr else None
            return None
        if isinstance(node, ast.Subscript):
            base = self.resolve(node.value)
            if base == "sys.modules":
                return fold(node.slice)
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
                return fold(parent.slice) is not None
            return (
                isinstance(parent, ast.Compare)
                and parent.comparators == [node]
                and isinstance(parent.ops[0], ast.In | ast.NotIn)
                and fold(parent.left) is not None
            )
        if qual in ("os.environ.get", "os.environb.get", "os.getenv", "os.getenvb"):
            return (
                isinstance(parent, ast.Call)
                and parent.func is node
                and bool(parent.args)
                and fold(parent.args[0]) is not None
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
        folded = fold(node)
        if folded is not None:
            self.text(node, folded)
        if func in _PY_IMPORTERS and node.args:
            name = fold(node.args[0])
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
            attr = fold(node.args[1])
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
        folded = fold(node)
        if folded is not None:
            self.text(node, folded)
            for piece in pieces(node):
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
        if isinstance(value, str) and SUSPICIOUS_TEXT.search(value):
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


_PY_STREAM_USES = {"write", "writelines", "flush", "buffer", "read", "readline", "readlines"}
