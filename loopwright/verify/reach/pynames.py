"""What the names of a Python module stand for as the scan walks it: import aliases, star
imports, each node's parent, and where the walk is (function depth, the `__main__` guard,
the enclosing classes); and which reads of those names are findings."""

from __future__ import annotations

import ast

from loopwright.verify.reach.found import Reach
from loopwright.verify.reach.pydanger import ATTR_BUILTINS, DANGER, EXITS, IMPORTERS, danger
from loopwright.verify.reach.pyfold import fold

_PY_IDENTITY = ("sys.argv", "os.environ", "os.environb", "os.getenv", "sys.std")
_PY_STREAM_USES = {"write", "writelines", "flush", "buffer", "read", "readline", "readlines"}


class PythonNames(ast.NodeVisitor):
    """The walk's state and the resolution of names; the scan's visits build on it."""

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
                if danger(f"{module}.{node.id}"):
                    return f"{module}.{node.id}"
            if node.id in DANGER or node.id in ATTR_BUILTINS or node.id in EXITS:
                return node.id
            if node.id in ("__import__", "open"):
                return node.id
            return None
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):
            func = self.resolve(node.func)
            if func in IMPORTERS and node.args:
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
        reason = danger(qual)
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

    def visit_If(self, node: ast.If) -> None:
        """An `elif` is an `If` alone in the `orelse` of the one before: a chain of them (a
        long dispatch) is walked in a loop, in the same order, not a frame per branch."""
        while True:
            guard = _is_main_guard(node.test)
            self.visit(node.test)
            self.main_guard += guard
            for statement in node.body:
                self.visit(statement)
            self.main_guard -= guard
            if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
                node = node.orelse[0]
                continue
            for statement in node.orelse:
                self.visit(statement)
            return


def _is_main_guard(test: ast.AST) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.ops[0], ast.Eq)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )
