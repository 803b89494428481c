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

from loopwright.agent.policy import WriteTarget, shorten_command
from loopwright.protected_paths import is_protected
from loopwright.verify.testfiles import (
    ALLOW_TEST_EDITS_HINT,
    BaseConfig,
    Change,
    Reader,
    Status,
    classify,
    in_environment,
    is_compiled,
    read_base_config,
    route,
)


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

        def safe(rel: str) -> str | None:
            try:
                return read(rel)
            except (OSError, ValueError):
                return None  # an impossible path (too long, a NUL byte) is no base file

        config = read_base_config(
            known,
            safe,
            test_command=test_command,
            setup_command=setup_command,
            test_script=test_script,
        )
        return cls(config, safe, known, tuple(allow_test_edits))

    def refusal(self, path: str, new: str) -> str | None:
        """Why writing the text `new` to `path` is refused, or None. Writing a file's base
        text back is never refused."""
        if self._allowed(path):
            return None
        old = self.read_base(path)
        if old == new:
            return None
        status: Status = "added" if old is None else "modified"
        change = classify(path, old, new, self.config)
        where = route(path, status, change, test_edit_allowed=False, dependency_allowed=True)
        return _reason(path, change, exists=old is not None) if where.phase == "base" else None

    def name_refusal(self, path: str) -> str | None:
        """Why any change to `path` is refused, whatever the content, or None: an existing
        test file or test configuration by its name, or test configuration a new file of
        that name would be (a conftest.py, a start-up hook, a module shadowing pytest...).
        Files whose test configuration is one section of them (pyproject.toml, setup.cfg,
        tox.ini, package.json) are judged by their content only, in `refusal`."""
        if self._allowed(path):
            return None
        old = self.read_base(path)
        name = path.rsplit("/", 1)[-1]
        if "/" not in path and name in _SECTIONED:
            return None
        if old is None and (in_environment(path) or is_compiled(path)):
            return None  # caches and installed files the base does not have
        status: Status = "added" if old is None else "modified"
        change = classify(path, old, old if old is not None else "", self.config)
        where = route(path, status, change, test_edit_allowed=False, dependency_allowed=True)
        return _reason(path, change, exists=old is not None) if where.phase == "base" else None

    def command_refusal(self, command: str, target: WriteTarget) -> str | None:
        """Why `command`, which writes, moves or removes `target`, is refused, or None.
        The content a command writes is not known, so each file it reaches is judged by
        `name_refusal`."""
        for path in self._covered(target):
            reason = self.name_refusal(path)
            if reason:
                return f"`{shorten_command(command)}` was not run: {reason}"
        return None

    def _covered(self, target: WriteTarget) -> list[str]:
        """The paths a write to `target` reaches: globs expand over the base tree segment by
        segment, as the shell does (`*` never crosses a `/`); a tree reaches everything
        below it (`.`: the whole repository)."""
        path = target.path.strip("/")
        if path in ("", "."):
            return list(self.paths) if target.tree else []
        if target.glob:
            pattern = path.split("/")
            return [p for p in self.paths if _glob_reaches(pattern, p.split("/"), target.tree)]
        if target.tree:
            below = [p for p in self.paths if p.startswith(path + "/")]
            return [path, *below]
        return [path]

    def _allowed(self, path: str) -> bool:
        return is_protected(path, self.allow_test_edits)


_SECTIONED = frozenset({"pyproject.toml", "setup.cfg", "tox.ini", "package.json"})


def _glob_reaches(pattern: list[str], segments: list[str], tree: bool) -> bool:
    """Whether the shell glob `pattern` (split at `/`) matches `segments`, or for a tree
    target (`rm -r tests/*`) a directory above them."""
    if len(segments) < len(pattern) or (len(segments) > len(pattern) and not tree):
        return False
    return all(
        fnmatch.fnmatchcase(segment, part) for segment, part in zip(segments, pattern, strict=False)
    )


def _reason(path: str, change: Change, *, exists: bool) -> str:
    if change.test_config and not exists:
        return (
            f"{path} would be test configuration ({'; '.join(change.test_config)}). "
            "Verification runs the tests without it, so adding it cannot make the fix count "
            f"{ALLOW_TEST_EDITS_HINT}. Fix the code under test instead."
        )
    if change.test_config:
        return (
            f"{path} is test configuration ({'; '.join(change.test_config)}). Verification "
            "runs the tests with its base version, so changing it cannot make the fix count "
            f"{ALLOW_TEST_EDITS_HINT}. Fix the code under test instead."
        )
    return (
        f"{path} is an existing test file. Verification runs its original version, so "
        f"changing it cannot make the fix count {ALLOW_TEST_EDITS_HINT}; never weaken or "
        "rewrite the tests. Fix the code under test instead; a new test file for a "
        "regression test is allowed."
    )
