"""The adversarial suite: a hostile repository and a hostile (or prompt-injected) model.

Every case runs the real CLI (or the real host-side code path) against a real sandbox, with
a scripted model that does what an attacker would, and asserts the exact outcome: the
mission is not verified and says why, the user's working tree is byte-for-byte unchanged,
no marker file appears outside the tree, and no token reaches a listener of the test's own.
Each case names the SECURITY.md check it covers.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import init_repo, step, tool
from tests.integration.test_fix_cli import EDIT, FIX_NEW, FIX_OLD, PLAN, model_env

FINISH = tool("finish", summary="done")
CHECK = tool("run_command", command="python -m pytest -q")


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under `root` (the `.git` directory included) with its sha256: two equal
    digests mean the tree is byte-for-byte the same."""
    digest: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            digest[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            digest[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest


def hostile_session(*calls: dict[str, Any], fix: bool = False) -> list[dict[str, Any]]:
    """A scripted session: plan, the hostile calls one per step, optionally the real fix,
    a test run, finish."""
    steps = [step(PLAN), *(step(call) for call in calls)]
    if fix:
        steps.append(step(EDIT))
    return [*steps, step(CHECK), step(FINISH)]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def marker_dir(tmp_path: Path) -> Path:
    """A directory outside every tree a mission handles; nothing may appear in it."""
    where = tmp_path / "markers"
    where.mkdir()
    return where


__all__ = [
    "EDIT",
    "FIX_NEW",
    "FIX_OLD",
    "hostile_session",
    "init_repo",
    "model_env",
    "tree_digest",
    "write",
]
