"""Pair mode's look at the whole change before `finish`: what a command did is judged by the
files it changed, not by its text.

Asking before a command only sees what the command says: `python -c "open(...)"`, `find
-delete` or a symlink made earlier change files no rule named. So when the model calls
`finish`, the workspace's change against the base tree is read as a patch, and each changed
file a rule covers (under `ask_paths`, deleted beyond `max_removals`, or outside the fix's
scope) waits for a person, unless a person approved that very state of the file before: a
file tool's approved write, or what an approved command changed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from loopwright.agent.pair import ApprovalRequest
from loopwright.agent.policy import Ask, AskRules
from loopwright.protected_paths import protected_by
from loopwright.sandbox.workspace import PatchTooLarge
from loopwright.verify.diff import PatchError, parse_patch

MAX_REASONS = 8
"""How many files the request's reason names before it says how many more there are."""

PatchSource = Callable[[], str]
"""The workspace's change against the base tree, as a unified diff."""


@dataclass(frozen=True)
class Section:
    """One file's part of the patch."""

    text: str
    deleted: bool

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8", "surrogateescape")).hexdigest()


@dataclass(frozen=True)
class Review:
    """The changed files that wait for a person at `finish`, and why."""

    ask: Ask
    paths: tuple[str, ...]
    diff: str


def sections(patch: str) -> dict[str, Section]:
    """Each changed path's section of `patch` (a rename is a deletion and an addition);
    raises `PatchError` for a patch the parser refuses."""
    found: dict[str, Section] = {}
    for text in re.split(r"(?m)^(?=diff --git )", patch):
        if not text.startswith("diff --git "):
            continue
        for file in parse_patch(text):
            for path in file.paths:
                found[path] = Section(text, file.status == "deleted")
    return found


class ChangeReview:
    """The change a mission's person has seen and approved, and what still needs them."""

    def __init__(self, patch: PatchSource, rules: AskRules, scope: frozenset[str] | None) -> None:
        """`scope`: the files the fix may change without asking (`scope.fix_scope`); None
        when the failing run names none, and then nothing is asked for being outside it."""
        self._patch = patch
        self._rules = rules
        self._scope = scope
        self._approved: dict[str, str] = {}
        """Path → the digest of its section when a person approved that state."""

    def state(self) -> dict[str, str]:
        """The digest of each changed file now ({} for a patch the parser refuses, or one
        too large to export: nothing is recorded as approved, and the mission cannot end
        with such a change)."""
        try:
            return {path: s.digest for path, s in sections(self._patch()).items()}
        except (PatchError, PatchTooLarge):
            return {}

    def approved(self, before: Mapping[str, str]) -> None:
        """Record what an approved action changed: every file whose state differs from
        `before`, as it is now."""
        for path, digest in self.state().items():
            if before.get(path) != digest:
                self._approved[path] = digest

    def check(self) -> Review | None:
        """What in the change waits for a person, or None. Raises `PatchTooLarge` for a
        change too large to show or deliver (`finish` refuses it)."""
        try:
            changed = sections(self._patch())
        except PatchError:
            return None
        fresh = {p: s for p, s in changed.items() if self._approved.get(p) != s.digest}
        reasons: dict[str, tuple[str, str]] = {}
        rules = self._rules
        for path in fresh:
            pattern = protected_by(path, rules.ask_paths) if rules.ask_paths else None
            if pattern is not None:
                reasons[path] = ("ask_path", f"{path}: under ask_paths `{pattern}`")
        deleted = [p for p, s in fresh.items() if s.deleted and p not in reasons]
        if len(deleted) > rules.max_removals:
            for path in deleted:
                reasons[path] = (
                    "removals",
                    f"{path}: deleted ({len(deleted)} files deleted or renamed; more than "
                    f"{rules.max_removals} ask first)",
                )
        if rules.outside_scope and self._scope is not None:
            for path in fresh:
                if path not in reasons and path not in self._scope:
                    reasons[path] = (
                        "scope",
                        f"{path}: outside the files the failing tests and their imports reach",
                    )
        if not reasons:
            return None
        paths = tuple(sorted(reasons))
        lines = [reasons[p][1] for p in paths[:MAX_REASONS]]
        if len(paths) > MAX_REASONS:
            lines.append(f"and {len(paths) - MAX_REASONS} more")
        rules_hit = {rule for rule, _ in reasons.values()}
        rule = next(r for r in ("ask_path", "removals", "scope") if r in rules_hit)
        diff = "".join(dict.fromkeys(changed[p].text for p in paths))
        return Review(Ask(rule, "; ".join(lines)), paths, diff)


def finish_request(review: Review) -> ApprovalRequest:
    """The request to finish with changes a person has not approved yet."""
    names = ", ".join(review.paths[:3])
    more = f" and {len(review.paths) - 3} more" if len(review.paths) > 3 else ""
    return ApprovalRequest(
        id="",
        tool="finish",
        rule=review.ask.rule,
        what=f"Finish with the changes to {names}{more}",
        why=review.ask.reason,
        diff=review.diff,
    )
