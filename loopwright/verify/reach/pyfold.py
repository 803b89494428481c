"""Constant folding for the Python scan: the string or integers an expression always builds,
so `getattr(sys, "mod" + "ules")` is read as `sys.modules`."""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Iterator

PATH_TYPES = {"Path", "PurePath", "PosixPath", "PurePosixPath"}
MAX_FOLD_CHARS = 1_000_000
"""The longest string a fold builds: a constant expression can spell a string far larger
than its file (`"%999999999s" % ""`, a sum of long constants), which would take the
scan's memory and time; such a file is reported unchecked instead."""
_WIDE_FORMAT = re.compile(r"%[^a-zA-Z%]*?\d{7,}")
"""A `%` field whose width or precision has seven digits or more."""


class FoldTooLong(Exception):
    """A constant expression builds a string over MAX_FOLD_CHARS characters."""


def fold(node: ast.AST) -> str | None:
    """The string a constant expression builds (`"a" + "b"`, `"".join([...])`, `"ba"[::-1]`,
    `chr(97)`, f-strings without fields), or None when it is not constant."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return node.value
        if isinstance(node.value, bytes):
            return node.value.decode("latin-1")
        return None
    if isinstance(node, ast.BinOp):
        # Read from the bottom of the left spine up, keeping only the value so far (one
        # frame per level of brackets, as a recursive fold; none per operand).
        spine = left_spine(node)
        value = fold(spine[-1].left)
        for part in reversed(spine):
            if value is None:
                return None
            if isinstance(part.op, ast.Add | ast.Div):
                right = fold(part.right)
                if right is None:
                    return None
                # pathlib: Path("/") / "proc"
                value = (
                    value + right if isinstance(part.op, ast.Add) else posixpath.join(value, right)
                )
            elif isinstance(part.op, ast.Mod) and isinstance(part.right, ast.Constant | ast.Tuple):
                values = part.right.elts if isinstance(part.right, ast.Tuple) else [part.right]
                parts = [fold(v) for v in values]
                if any(p is None for p in parts):
                    return None
                if _WIDE_FORMAT.search(value):
                    raise FoldTooLong(f"formats a field over {MAX_FOLD_CHARS:,} characters wide")
                try:
                    value = value % tuple(parts)
                except (TypeError, ValueError, OverflowError):
                    return None
            else:
                return None
            if len(value) > MAX_FOLD_CHARS:
                raise FoldTooLong(f"builds a string over {MAX_FOLD_CHARS:,} characters long")
        return value
    if isinstance(node, ast.JoinedStr):
        parts = [fold(v) for v in node.values]
        return "".join(p for p in parts if p is not None) if all(parts) else None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        value = fold(node.value)
        bounds = [node.slice.lower, node.slice.upper, node.slice.step]
        numbers = [const_int(b) for b in bounds]
        if value is not None and all(
            b is None or n is not None for b, n in zip(bounds, numbers, strict=True)
        ):
            return value[slice(*numbers)]
        return None
    if isinstance(node, ast.Call):
        if (
            isinstance(node.func, ast.Attribute)
            and node.func.attr == "join"
            and isinstance(node.func.value, ast.Attribute | ast.Name)
            and getattr(node.func.value, "attr", getattr(node.func.value, "id", "")) == "path"
            and node.args
        ):
            parts = [fold(a) for a in node.args]
            if all(p is not None for p in parts):
                return posixpath.join(*(p for p in parts if p is not None))
            return None
        if (
            isinstance(node.func, ast.Name | ast.Attribute)
            and getattr(node.func, "id", getattr(node.func, "attr", "")) in PATH_TYPES
            and len(node.args) >= 1
        ):
            parts = [fold(a) for a in node.args]
            if all(p is not None for p in parts):
                return posixpath.join(*(p for p in parts if p is not None))
            return None
        if isinstance(node.func, ast.Name) and node.func.id == "chr" and len(node.args) == 1:
            code = const_int(node.args[0])
            return chr(code) if code is not None and 0 <= code < 0x110000 else None
        if (
            isinstance(node.func, ast.Attribute)
            and node.func.attr == "join"
            and len(node.args) == 1
            and isinstance(node.args[0], ast.List | ast.Tuple)
        ):
            glue = fold(node.func.value)
            parts = [fold(e) for e in node.args[0].elts]
            if glue is not None and all(p is not None for p in parts):
                return joined(glue, [p for p in parts if p is not None])
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("lower", "upper", "strip"):
            value = fold(node.func.value)
            return getattr(value, node.func.attr)() if value is not None else None
        return fold_encoded(node)
    return None


def left_spine(node: ast.BinOp) -> list[ast.BinOp]:
    """`node` and the operations down its left side, top first: `a + b + c` nests one
    `BinOp` per operator there, so generated code (a long sum, a long string built piece by
    piece) is read in a loop, not a frame per operand."""
    spine = [node]
    while isinstance(spine[-1].left, ast.BinOp):
        spine.append(spine[-1].left)
    return spine


def fold_encoded(node: ast.Call) -> str | None:
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
        codes = ints(args[0])
        return "".join(map(chr, codes)) if codes is not None else None
    if name == "fromhex" and len(args) == 1:
        text = fold(args[0])
        try:
            return bytes.fromhex(text).decode("latin-1") if text is not None else None
        except ValueError:
            return None
    if name in ("decode", "encode") and isinstance(func, ast.Attribute):
        if isinstance(func.value, ast.Name) and func.value.id == "codecs" and len(args) >= 2:
            text, codec = fold(args[0]), fold(args[1])
            if text is None or codec is None or codec.replace("_", "") != "rot13":
                return None
            import codecs

            return codecs.decode(text, "rot13")
        return fold(func.value)
    if name in ("b64decode", "urlsafe_b64decode", "b32decode", "b16decode", "b85decode") and args:
        text = fold(args[0])
        if text is None:
            return None
        import base64

        try:
            raw: bytes = getattr(base64, name)(text.encode("latin-1"))
        except ValueError:
            return None
        return raw.decode("latin-1")
    if isinstance(func, ast.Attribute) and func.attr == "join" and len(args) == 1:
        glue, inner = fold(func.value), args[0]
        if glue is None or not isinstance(inner, ast.Call) or not isinstance(inner.func, ast.Name):
            return None
        if inner.func.id == "reversed" and len(inner.args) == 1:
            text = fold(inner.args[0])
            return joined(glue, list(reversed(text))) if text is not None else None
        if inner.func.id == "map" and len(inner.args) == 2:
            mapper = inner.args[0]
            codes = ints(inner.args[1])
            if isinstance(mapper, ast.Name) and mapper.id == "chr" and codes is not None:
                return joined(glue, [chr(c) for c in codes])
    return None


def joined(glue: str, parts: list[str]) -> str:
    """`glue.join(parts)`, or FoldTooLong when that would be over MAX_FOLD_CHARS: a long
    glue between many parts multiplies the file's size."""
    if len(glue) * max(len(parts) - 1, 0) + sum(map(len, parts)) > MAX_FOLD_CHARS:
        raise FoldTooLong(f"joins a string over {MAX_FOLD_CHARS:,} characters long")
    return glue.join(parts)


def ints(node: ast.AST) -> list[int] | None:
    """The code points a list or tuple of integer constants spells, or None."""
    if not isinstance(node, ast.List | ast.Tuple):
        return None
    codes = [const_int(e) for e in node.elts]
    if any(c is None or not 0 <= c < 0x110000 for c in codes):
        return None
    return [c for c in codes if c is not None]


def const_int(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = const_int(node.operand)
        return -value if value is not None else None
    return None


def pieces(node: ast.AST) -> Iterator[str]:
    """The string constants of an expression's operations, left to right (a stack, not a
    frame per operation)."""
    stack = [node]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.BinOp):
            stack += (node.right, node.left)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value
