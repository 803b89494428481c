"""A finding: one way a patch can make tests pass without fixing anything, in words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FindingKind = Literal[
    "deleted_test_file",
    "renamed_test_file",
    "removed_test",
    "removed_assertion",
    "loosened_assertion",
    "added_skip",
    "edited_expected_value",
    "protected_path",
    "changed_test_file",
    "test_config",
    "dependency_change",
    "reach",
]


@dataclass(frozen=True)
class Finding:
    path: str
    kind: FindingKind
    detail: str
