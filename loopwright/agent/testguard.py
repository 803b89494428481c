"""Refuse, at the tool, the test edits that verification would undo.

Verification judges a patch with the base versions of the existing tests and of the test
configuration (`verify.testfiles.route` withholds them). A model that "fixes" a failure by
editing the test only learns that after a whole verification, and a weak model often does
exactly that. The guard asks the same routing rule before a write happens and turns such a
write into a refusal the model reads at once. Adding a new test file stays allowed (it runs
in verification's separate pass), and so does everything `allow_test_edits` covers.

Verification stays the rule that counts: a write the guard cannot see (a program that opens
the file itself) is still withheld there.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from loopwright.agent.policy import WriteTarget, is_protected
from loopwright.verify.testfiles import (
    BaseConfig,
    Reader,
    Status,
    classify,
    read_base_config,
    route,
)

_SHOWN_CHARS = 120
_ALLOW_HINT = "(a repository can allow it with allow_test_edits in .loopwright.yml)"


@dataclass(frozen=True)
class TestEditGuard:
    """Verification's routing rule for one base tree, asked before a write."""

    __test__ = False  # not a pytest test class despite the name

    config: BaseConfig
    read_base: Reader
    paths: tuple[str, ...] = ()
    """The base tree's files, for commands that name a directory or a glob."""
    allow_test_edits: tuple[str, ...] = ()

    @classmethod
    def for_tree(
        cls,
        paths: Iterable[str],
        read: Reader,
        *,
        test_command: str | None,
        setup_command: str | None,
        test_script: str | None = None,
        allow_test_edits: Sequence[str] = (),
    ) -> TestEditGuard:
        known = tuple(sorted(paths))
        config = read_base_config(
            known,
            read,
            test_command=test_command,
            setup_command=setup_command,
            test_script=test_script,
        )
        return cls(config, read, known, tuple(allow_test_edits))

    def refusal(self, path: str, new: str | None) -> str | None:
        """Why writing `new` to `path` (None: removing it) is refused, or None."""
        reason = self._withheld(path, new)
        return f"Refused: {reason}" if reason else None

    def command_refusal(self, command: str, target: WriteTarget) -> str | None:
        """Why `command`, which writes, moves or removes `target`, is refused, or None. The
        content a command writes is not known, so a file is judged by what it is: an
        existing test file, or test configuration by its name alone."""
        for path in self._covered(target):
            old = self.read_base(path)
            reason = self._withheld(path, old if old is not None else "")
            if reason:
                shown = " ".join(command.split())
                shown = shown if len(shown) <= _SHOWN_CHARS else shown[: _SHOWN_CHARS - 3] + "..."
                return f"`{shown}` was not run: {reason}"
        return None

    def _covered(self, target: WriteTarget) -> list[str]:
        path = target.path.strip("/")
        if target.glob:
            return [
                p
                for p in self.paths
                if fnmatch.fnmatchcase(p, path)
                or (target.tree and fnmatch.fnmatchcase(p, path + "/*"))
            ]
        if target.tree:
            below = [p for p in self.paths if p == path or p.startswith(path + "/")]
            return below or [path]
        return [path]

    def _withheld(self, path: str, new: str | None) -> str | None:
        if is_protected(path, self.allow_test_edits):
            return None
        old = self.read_base(path)
        if old is None and new is None:
            return None
        status: Status = "added" if old is None else "deleted" if new is None else "modified"
        change = classify(path, old, new, self.config)
        where = route(path, status, change, test_edit_allowed=False, dependency_allowed=True)
        if where.phase != "base":
            return None
        if change.test_config:
            return (
                f"{path} is test configuration ({'; '.join(change.test_config)}). "
                "Verification runs the tests with its base version, so this change cannot "
                f"make the fix count {_ALLOW_HINT}. Fix the code under test instead."
            )
        return (
            f"{path} is an existing test file. Verification runs its original version, so "
            "changing it cannot make the fix count; never weaken or rewrite the tests. Fix "
            "the code under test instead; to add a regression test, create a new test file "
            f"{_ALLOW_HINT}."
        )
