"""What a fix is expected to change: the files the failing run points at and what they import.

Pair mode asks a person before a fix changes a file outside this scope. The seeds are the
failing tests' files (from their ids, `tests/test_x.py::test_y`) and every repository file
the failing run's tracebacks name; the scope is the seeds plus every repository module they
import, followed transitively: Python `import` and `from … import` (packages' `__init__.py`
included, from the repository root, `src/` and the test files' own directories), relative
JavaScript and TypeScript `require`, `import` and `export … from`, and for Go the other files
of a seed's package directory. Files are read as text on the host and parsed, never run.
"""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Callable, Collection, Iterable

from loopwright.agent.localize import failing_frames

MAX_SCOPE_FILES = 5_000
"""A bound on the files followed, so a huge repository cannot make the walk slow."""
MAX_READ_CHARS = 1_000_000
"""Files longer than this are in scope but their imports are not followed."""

_PY = (".py",)
_JS = (".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx")
_JS_SPEC = re.compile(
    r"""(?:\brequire\s*\(\s*|\bimport\s*\(\s*|\bfrom\s+|\bimport\s+)(['"])(\.{1,2}/[^'"\n]*)\1"""
)
_JS_RESOLVE = ("", *_JS, ".json", *(f"/index{ext}" for ext in _JS))

Reader = Callable[[str], str | None]
"""The text of a repository file by relative path, or None when it cannot be read."""


def fix_scope(
    failing_ids: Iterable[str], output: str, files: Collection[str], read: Reader
) -> frozenset[str] | None:
    """The repository files (relative, slash-separated) a fix of this failing run may change
    without asking, or None when the run names no file of the repository (nothing to judge
    by: a change task, or a runner whose output names no file)."""
    known = set(files)
    seeds = [i.split("::", 1)[0] for i in failing_ids]
    seeds += [frame.path for frame in failing_frames(output)]
    todo = list(dict.fromkeys(s for s in seeds if s in known))
    if not todo:
        return None
    scope: set[str] = set()
    while todo and len(scope) < MAX_SCOPE_FILES:
        path = todo.pop()
        if path in scope:
            continue
        scope.add(path)
        todo += [p for p in _imports(path, known, read, seeds) if p not in scope]
    return frozenset(scope)


def _imports(path: str, known: set[str], read: Reader, seeds: list[str]) -> set[str]:
    if path.endswith(".go"):
        folder = posixpath.dirname(path)
        return {f for f in known if f.endswith(".go") and posixpath.dirname(f) == folder}
    if not path.endswith(_PY + _JS):
        return set()
    text = read(path)
    if text is None or len(text) > MAX_READ_CHARS:
        return set()
    if path.endswith(_PY):
        roots = _python_roots(seeds)
        modules = python_imports(path, text)
        return {p for module in modules for p in _module_files(module, roots, known)}
    return {p for p in (_js_file(path, spec, known) for spec in js_imports(text)) if p}


def python_imports(path: str, text: str) -> list[str]:
    """The dotted modules `text` (the module at `path`) imports, relative imports resolved
    to absolute names (`from . import b` in `pkg/a.py` gives `pkg.b` and `pkg`)."""
    try:
        tree = ast.parse(text, path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    package = posixpath.dirname(path).split("/") if "/" in path else []
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(package):
                    continue
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if module:
                found.append(module)
            # `from pkg import name`: `name` may be a submodule.
            names = [a.name for a in node.names if a.name != "*"]
            found += [f"{module}.{name}" if module else name for name in names]
    return found


def js_imports(text: str) -> list[str]:
    """The relative specifiers (`./x`, `../y/z`) a JavaScript or TypeScript file imports."""
    return [match.group(2) for match in _JS_SPEC.finditer(text)]


def _python_roots(seeds: list[str]) -> list[str]:
    """Where imports are looked up: the repository root, `src/`, and each seed's directory
    and its parents (pytest puts a test file's first directory without `__init__.py` on
    the path)."""
    roots = ["", "src"]
    for seed in seeds:
        folder = posixpath.dirname(seed)
        while folder:
            roots.append(folder)
            folder = posixpath.dirname(folder)
    return list(dict.fromkeys(roots))


def _module_files(module: str, roots: list[str], known: set[str]) -> set[str]:
    """The repository files importing `module` runs: the module itself and the
    `__init__.py` of each package on its way, under the first root that has it."""
    parts = module.split(".")
    for root in roots:
        prefix = f"{root}/" if root else ""
        target = prefix + "/".join(parts)
        hit = {f for f in (f"{target}.py", f"{target}/__init__.py") if f in known}
        if hit:
            packages = {f"{prefix}{'/'.join(parts[:n])}/__init__.py" for n in range(1, len(parts))}
            return hit | (packages & known)
    return set()


def _js_file(importer: str, spec: str, known: set[str]) -> str | None:
    base = posixpath.normpath(posixpath.join(posixpath.dirname(importer), spec))
    if base.startswith("../") or base == "..":
        return None
    for suffix in _JS_RESOLVE:
        if base + suffix in known:
            return base + suffix
    # TypeScript imports name the compiled file: `./x.js` for `x.ts`.
    stem, dot, ext = base.rpartition(".")
    if dot and f".{ext}" in _JS:
        for suffix in _JS:
            if stem + suffix in known:
                return stem + suffix
    return None
