"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from loopwright.agent.tools import Toolbox
from loopwright.config import SandboxLimits
from loopwright.sandbox.local import LocalProvider


@pytest.fixture
def toolbox(tmp_path: Path) -> Iterator[Toolbox]:
    """The model's tools over a local sandbox of an empty tree."""
    tree = tmp_path / "repo"
    tree.mkdir()
    provider = LocalProvider(SandboxLimits(), base_dir=tmp_path / "sandboxes")
    sandbox = provider.create("m-unit", tree, network=False)
    yield Toolbox(sandbox, command_timeout_s=5, protected_paths=())
    sandbox.close()
