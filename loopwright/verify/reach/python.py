"""The Python scan: `ast` walks of a file, following aliases, `from X import Y`, computed
`getattr` names and string concatenation to the constructs that reach into the test run."""

from __future__ import annotations

import ast

from loopwright.verify.reach.found import SUSPICIOUS_TEXT, UNCHECKABLE, Reach
from loopwright.verify.reach.pycompare import (
    COMPARISONS,
    compares_both,
    loose_comparison,
    returns_constant,
    value_type_bases,
)
from loopwright.verify.reach.pydanger import (
    ATTR_BUILTINS,
    EXITS,
    IMPORTERS,
    INTROSPECTION_ATTRS,
    MODULE_VALUES,
    PASSABLE,
    danger,
)
from loopwright.verify.reach.pyfold import FoldTooLong, fold, left_spine, pieces
from loopwright.verify.reach.pynames import PythonNames


def python_reaches(path: str, text: str | None) -> list[Reach]:
    if text is None:
        return []
    try:
        tree = ast.parse(text, filename=path)
        scanner = _PythonScan(path)
        scanner.visit(tree)
    except RecursionError:
        # Valid Python (it may still import) whose expressions nest deeper than the scan,
        # one frame a level, can walk: it cannot be checked, so it cannot be verified.
        return [
            Reach(
                path,
                1,
                UNCHECKABLE,
                f"{path} nests its code too deeply to be checked for code that reaches into "
                "the test run (calls, brackets or blocks inside one another hundreds deep); "
                "split it",
            )
        ]
    except FoldTooLong as exc:
        return [
            Reach(
                path,
                1,
                UNCHECKABLE,
                f"{path} {exc} from constants, more than can be checked for code that "
                "reaches into the test run",
            )
        ]
    except (SyntaxError, ValueError, MemoryError) as exc:  # MemoryError: the parser's stack
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
    return scanner.found


class _PythonScan(PythonNames):
    """The visits that turn statements and expressions into findings."""

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
            if node.level == 0 and not danger(module):
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
        # At module and class level Python evaluates the annotation when it imports.
        self.visit(node.annotation)
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
            and target.id in COMPARISONS
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
            and target.id in COMPARISONS
            and self.classes
            and (value_type_bases(self.classes[-1]) or not compares_both(value))
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
        if node.name in COMPARISONS and returns_constant(node.body):
            self.add(
                node,
                f"always:{node.name}",
                f"defines `{node.name}` to return a constant, so any comparison with the "
                "value passes whatever it holds",
            )
        elif node.name in COMPARISONS and self.classes and loose_comparison(node, self.classes[-1]):
            self.add(
                node,
                f"compares:{node.name}",
                f"defines `{node.name}` on `{self.classes[-1].name}` "
                + (
                    "over a built-in value type"
                    if value_type_bases(self.classes[-1])
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
        if func in IMPORTERS and node.args:
            name = fold(node.args[0])
            if name is None:
                self.add(
                    node,
                    f"dynamic-import:{func}",
                    f"`{func}` imports a module whose name is computed at run time",
                )
            else:
                self.check(node, name, "imports")
        if func in ATTR_BUILTINS and len(node.args) >= 2:
            base = self.resolve(node.args[0])
            attr = fold(node.args[1])
            if attr is None and base:
                self.add(
                    node,
                    f"dynamic-attribute:{base}",
                    f"`{func}` on `{base}` with an attribute name computed at run time",
                )
            elif attr is not None and attr in INTROSPECTION_ATTRS:
                self.add(node, f"introspects:{attr}", f"reads `{attr}` through `{func}`")
            elif attr is not None and base and func != "getattr":
                self.add(
                    node, f"patches:{base}.{attr}", f"patches `{base}.{attr}` through `{func}`"
                )
            elif func == "getattr":
                self.check(node, self.resolve(node), "uses")
        if func in EXITS and self.depth == 0 and not self.main_guard:
            self.add(
                node,
                f"module-exit:{func}",
                f"calls `{func}` when the module is imported, which ends the test run",
            )
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in INTROSPECTION_ATTRS:
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
        if node.id in PASSABLE and not direct_call and node.id not in self.aliases:
            self.add(node, f"passes:{node.id}", f"passes `{node.id}` around as a value")
        if qual in MODULE_VALUES and not in_attribute and isinstance(node.ctx, ast.Load):
            self.add(
                node,
                f"module-value:{qual}",
                f"uses the module `{qual}` as a value, which hides what is done with it",
            )
        if not in_attribute and qual not in ATTR_BUILTINS:
            self.check(node, qual, "uses")

    def visit_Constant(self, node: ast.Constant) -> None:
        self.text(node, node.value)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        """The topmost operation down the left spine that folds to a constant is read as
        text (and what it is built of); above it, each operand is visited in the order a
        recursive walk takes: the folded part (or the spine's last left operand) first, then
        each right operand from the bottom up. A loop, so a long chain takes no frame per
        operand.

        An operation folds only if the one below it does, so the topmost that folds is
        found by halving the spine: a few folds, not one per operation."""
        spine = left_spine(node)
        low, high, folded = 0, len(spine), None
        while low < high:
            middle = (low + high) // 2
            value = fold(spine[middle])
            if value is None:
                low = middle + 1
            else:
                high, folded = middle, value
        if folded is not None:
            part = spine[low]
            self.text(part, folded)
            for piece in pieces(part):
                self.text(part, piece)
        else:
            self.visit(spine[-1].left)
        for part in reversed(spine[:low]):
            self.visit(part.op)
            self.visit(part.right)

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
