"""Tests run coroutines through `tests.loops.run_async`, never on the pytest thread.

A browser test leaves Playwright's loop running on its xdist worker's thread for the rest of
the session, so an `asyncio.run` or `run_until_complete` there passes alone and fails only
when the scheduler happens to put it after a browser test on the same worker.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from tests.loops import run_async

TESTS = Path(__file__).resolve().parents[1]
LOOP_ENTRIES = {"run", "run_until_complete", "run_forever"}


def _loop_entries(path: Path) -> list[str]:
    """`asyncio.run(…)` and `<loop>.run_until_complete/run_forever(…)` calls in one file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name, owner = node.func.attr, node.func.value
        if name == "run" and not (isinstance(owner, ast.Name) and owner.id == "asyncio"):
            continue
        if name in LOOP_ENTRIES:
            found.append(f"{path.relative_to(TESTS.parent)}:{node.lineno}: {name}")
    return found


def test_no_test_starts_an_event_loop_on_its_own_thread() -> None:
    helper = TESTS / "loops.py"
    offenders = [
        entry
        for path in sorted(TESTS.rglob("*.py"))
        if path != helper and "node_modules" not in path.parts
        for entry in _loop_entries(path)
    ]
    assert offenders == [], "use tests.loops.run_async instead"


def test_run_async_works_under_a_running_loop_and_passes_back_results_and_errors() -> None:
    async def answer() -> int:
        return 42

    async def refuse() -> None:
        raise ValueError("refused")

    async def outer() -> int:
        # This thread's loop is running here, as Playwright's is in a browser test's worker.
        assert asyncio.get_running_loop().is_running()
        return run_async(answer())

    assert run_async(outer()) == 42
    with pytest.raises(ValueError, match="refused"):
        run_async(refuse())


def test_run_async_fails_a_hung_scenario_instead_of_hanging() -> None:
    with pytest.raises(AssertionError, match=r"did not finish within 0\.2 s"):
        run_async(asyncio.sleep(5), timeout=0.2)
