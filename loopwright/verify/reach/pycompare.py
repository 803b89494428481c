"""Comparison methods that can pass whatever they compare: the shapes of definitions that
return a constant, ignore an operand, or compare a subclass of a built-in value type."""

from __future__ import annotations

import ast

COMPARISONS = {
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


_VALUE_TYPES = {
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


def compares_both(value: ast.AST | None) -> bool:
    """Whether `value` is a lambda whose body uses its first two parameters."""
    if not isinstance(value, ast.Lambda):
        return False
    params = [a.arg for a in [*value.args.posonlyargs, *value.args.args]]
    used = {n.id for n in ast.walk(value.body) if isinstance(n, ast.Name)}
    return bool(params) and all(p in used for p in params[:2])


def value_type_bases(node: ast.ClassDef) -> bool:
    """Whether the class derives from a built-in value type (`int`, `str`, `Decimal`...)."""
    for base in node.bases:
        name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
        if name in _VALUE_TYPES:
            return True
    return False


def returns_constant(body: list[ast.stmt]) -> bool:
    """Whether a function body, past its docstring, is one `return` of a constant."""
    statements = [
        s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    return (
        len(statements) == 1
        and isinstance(statements[0], ast.Return)
        and isinstance(statements[0].value, ast.Constant)
    )


def loose_comparison(node: ast.FunctionDef | ast.AsyncFunctionDef, owner: ast.ClassDef) -> bool:
    """A comparison method over a built-in value type (the value passes for the real
    number or string everywhere else), or one that ignores an operand."""
    if value_type_bases(owner):
        return True
    params = [a.arg for a in [*node.args.posonlyargs, *node.args.args]]
    used = {n.id for s in node.body for n in ast.walk(s) if isinstance(n, ast.Name)}
    return not params or any(p not in used for p in params[:2])
