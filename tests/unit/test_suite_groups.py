"""The suite's `xdist_group` marks take effect: tests of one group run on one worker, so a
group's expensive module fixture (the server image, the real model, a shared mission) is
made once rather than once per worker. A pytest or pytest-xdist upgrade that drops the
grouping fails here instead of slowing CI down unnoticed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GROUPED = """
import os
import pytest

pytestmark = pytest.mark.xdist_group("expensive")


@pytest.fixture(scope="module")
def built():
    with open(os.environ["BUILD_LOG"], "a") as log:
        log.write(os.environ.get("PYTEST_XDIST_WORKER", "main") + "\\n")
    yield


@pytest.mark.parametrize("n", range(6))
def test_grouped(built, n):
    with open(os.environ["RUN_LOG"], "a") as log:
        log.write(os.environ.get("PYTEST_XDIST_WORKER", "main") + "\\n")
"""

OTHERS = """
import pytest


@pytest.mark.parametrize("n", range(20))
def test_other(n):
    pass
"""


def test_a_group_runs_on_one_worker_and_builds_its_module_fixture_once(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "test_others.py").write_text(OTHERS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    env |= {"BUILD_LOG": str(tmp_path / "built"), "RUN_LOG": str(tmp_path / "ran")}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "3",
         "--dist", "loadgroup", "--rootdir", str(tmp_path), "-c", str(tmp_path / "pytest.ini"),
         str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "26 passed" in run.stdout, run.stdout[-2000:]
    ran = (tmp_path / "ran").read_text().split()
    assert len(ran) == 6 and len(set(ran)) == 1, f"one group ran on workers {ran}"
    assert (tmp_path / "built").read_text().split() == ran[:1], "the module fixture was rebuilt"
