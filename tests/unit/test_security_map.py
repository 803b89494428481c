"""`docs/security-checks.md` maps every SECURITY.md check to tests that exist.

The table is parsed as written; each node id is looked up in its file's syntax tree (no
import, no collection), so renaming or deleting a listed test fails here at once.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "docs" / "security-checks.md"
CHECKS = range(1, 47)
NODE_ID = re.compile(r"`(?P<path>tests/[^`:\s]+\.py)::(?P<name>test_\w+)`")
ROW = re.compile(r"^\|\s*(?P<check>\d+)\s*\|(?P<summary>[^|]*)\|(?P<tests>.*)\|\s*$")


@dataclass(frozen=True)
class Row:
    check: int
    summary: str
    tests: str
    """The test cell exactly as written (stripped)."""

    @property
    def node_ids(self) -> list[tuple[str, str]]:
        return [(m["path"], m["name"]) for m in NODE_ID.finditer(self.tests)]


@cache
def rows() -> tuple[Row, ...]:
    found = []
    for line in MAP.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line.strip())
        if match:
            found.append(Row(int(match["check"]), match["summary"].strip(), match["tests"].strip()))
    return tuple(found)


def defined_tests(source: str) -> frozenset[str]:
    """Test functions pytest would collect by name: module-level functions and methods of
    module-level `Test*` classes (a name in a comment, a string or a nested def is not one)."""
    tree = ast.parse(source)
    functions = ast.FunctionDef | ast.AsyncFunctionDef
    names = {node.name for node in tree.body if isinstance(node, functions)}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            names |= {item.name for item in node.body if isinstance(item, functions)}
    return frozenset(names)


@cache
def names_in(path: str) -> frozenset[str]:
    return defined_tests((ROOT / path).read_text(encoding="utf-8"))


def test_every_check_has_exactly_one_row() -> None:
    numbers = [row.check for row in rows()]
    assert sorted(numbers) == list(CHECKS), numbers


def test_every_check_names_at_least_one_test() -> None:
    for row in rows():
        assert row.node_ids, f"check {row.check} lists no test"


def test_test_cells_hold_only_node_ids() -> None:
    """A cell holds backticked node ids joined by `<br>`: a typo that the node-id pattern
    does not match would otherwise go unchecked."""
    for row in rows():
        leftover = NODE_ID.sub("", row.tests).replace("<br>", "").strip()
        assert leftover == "", f"check {row.check}: not a node id: {leftover!r}"
        assert "[" not in row.tests, f"check {row.check}: drop the parametrization suffix"


def test_every_row_has_a_summary() -> None:
    assert [r.check for r in rows() if not r.summary] == []


@pytest.mark.parametrize("row", rows(), ids=lambda r: f"check-{r.check}")
def test_every_listed_test_exists(row: Row) -> None:
    for path, name in row.node_ids:
        assert (ROOT / path).is_file(), f"check {row.check}: {path} does not exist"
        assert name in names_in(path), f"check {row.check}: {path} defines no {name}"


def test_only_collectable_definitions_count() -> None:
    source = (
        "# def test_in_a_comment(): ...\n"
        "NOTE = 'def test_in_a_string(): ...'\n"
        "def test_top_level(): ...\n"
        "async def test_async(): ...\n"
        "def helper():\n"
        "    def test_nested(): ...\n"
        "class TestThing:\n"
        "    def test_method(self): ...\n"
        "class Other:\n"
        "    def test_not_collected(self): ...\n"
    )
    assert defined_tests(source) == {"test_top_level", "test_async", "helper", "test_method"}
