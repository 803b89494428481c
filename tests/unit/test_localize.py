"""Localisation from tracebacks: which repository lines a failing run points at, and the
source shown around them in the first request."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from loopwright.agent.localize import Frame, failing_frames, source_excerpts

CALC = "def total(items):\n    s = 0\n    for i in items:\n        s += i.price\n    return s / 0\n"
TEST = "from calc import total\n\n\ndef test_total():\n    assert total([]) == 0\n"


def _pytest_output(tree: Path) -> str:
    (tree / "calc.py").write_text(CALC)
    (tree / "tests").mkdir()
    (tree / "tests" / "test_calc.py").write_text(TEST)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tree)],
        cwd=tree,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    return run.stdout


def _reader(tree: Path):
    def read(path: str) -> bytes | None:
        target = tree / path
        return target.read_bytes() if target.is_file() else None

    return read


def test_a_real_pytest_failure_points_at_the_product_line_first(tmp_path: Path):
    output = _pytest_output(tmp_path)
    frames = failing_frames(output)
    assert frames[0] == Frame("calc.py", 5)
    assert Frame("tests/test_calc.py", 5) in frames
    excerpt = source_excerpts(output, _reader(tmp_path))
    first = excerpt.split("\n\n")[0]
    assert first.startswith("calc.py:5\n")
    assert ">    5      return s / 0" in first
    assert "     4          s += i.price" in first


def test_absolute_workspace_paths_and_node_and_go_frames():
    output = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/workspace/app/main.py", line 12, in run',
            '  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads',
            '  File "/workspace/.venv/lib/python3.11/site-packages/x.py", line 3, in f',
            "    at sum (/workspace/src/sum.js:7:11)",
            "    at file:///workspace/test/sum.test.js:4:3",
            "    sum_test.go:18: got 3, want 4",
        ]
    )
    frames = failing_frames(output)
    assert frames == [
        Frame("src/sum.js", 7),
        Frame("app/main.py", 12),
        Frame("sum_test.go", 18),
        Frame("test/sum.test.js", 4),
    ]


def test_frames_that_cannot_be_read_are_skipped_and_nothing_is_shown_without_frames(
    tmp_path: Path,
):
    (tmp_path / "a.py").write_text("x = 1\n")
    output = '  File "/workspace/a.py", line 40, in f\n  File "/workspace/gone.py", line 1\n'
    assert source_excerpts(output, _reader(tmp_path)) == ""
    assert source_excerpts("1 failed\n", _reader(tmp_path)) == ""
