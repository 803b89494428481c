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

import difflib
from collections import Counter
from collections.abc import Iterable

from loopwright.verify.reach.found import JS_SUFFIXES, PY_SUFFIXES, UNCHECKABLE, Reach
from loopwright.verify.reach.javascript import javascript_reaches
from loopwright.verify.reach.python import python_reaches


def reach_findings(path: str, old: str | None, new: str | None) -> list[Reach]:
    """The constructs `new` adds over `old` (None: the file is absent) that reach into the
    test run; empty for files that are neither Python nor JavaScript."""
    if new is None:
        return []
    if path.endswith(PY_SUFFIXES):
        scan = python_reaches
    elif path.endswith(JS_SUFFIXES):
        scan = javascript_reaches
    else:
        return []
    before = Counter(r.key for r in scan(path, old)) if old is not None else Counter()
    after = scan(path, new)
    changed = _changed_lines(old or "", new)
    extra = Counter(r.key for r in after) - before
    if any(r.key == UNCHECKABLE for r in after):
        extra[UNCHECKABLE] = max(extra[UNCHECKABLE], 1)  # nothing of it was checked
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


def summarize(findings: Iterable[Reach]) -> list[str]:
    """One line per finding, `path:line: detail`."""
    return [f"{r.path}:{r.line}: {r.detail}" for r in findings]
