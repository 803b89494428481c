"""The import-linter contracts in pyproject.toml name every module they must.

`lint-imports` (run by the test command) checks the contracts themselves; these tests keep
the leaf contracts honest as modules come and go: a leaf must forbid every other top-level
module of the package, so a new module cannot become an unchecked dependency.
"""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

import loopwright

_PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _contracts() -> list[dict[str, Any]]:
    data = tomllib.loads(_PYPROJECT.read_text(encoding="utf-8"))
    contracts: list[dict[str, Any]] = data["tool"]["importlinter"]["contracts"]
    return contracts


def _top_level() -> set[str]:
    return {f"loopwright.{m.name}" for m in pkgutil.iter_modules(loopwright.__path__)}


def test_the_never_rules_are_all_contracts() -> None:
    sources = {tuple(c["source_modules"]) for c in _contracts()}
    for source in ("agent", "verify", "sandbox", "github", "config", "events"):
        assert (f"loopwright.{source}",) in sources, f"no contract for loopwright.{source}"


@pytest.mark.parametrize("leaf", ["loopwright.config", "loopwright.events"])
def test_a_leaf_forbids_every_other_top_level_module(leaf: str) -> None:
    (contract,) = [c for c in _contracts() if c["source_modules"] == [leaf]]
    assert contract["type"] == "forbidden"
    forbidden = set(contract["forbidden_modules"])
    missing = _top_level() - forbidden - {leaf}
    assert not missing, f"{leaf}'s contract does not forbid {sorted(missing)}"


def test_every_module_a_contract_names_exists() -> None:
    modules = _top_level()
    for contract in _contracts():
        for name in [*contract["source_modules"], *contract["forbidden_modules"]]:
            top = ".".join(name.split(".")[:2])
            assert top in modules, f"{contract['name']!r} names {name}, which does not exist"
