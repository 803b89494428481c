"""The verdict, as a pure function of what verification found.

`judge` takes the facts a mission gathered (the before/after comparison, whether anything
changed, problems met along the way, tamper findings, the web check, the new tests) and
returns a frozen `Verification`. Nothing here runs a command or reads a file, so every way a
verdict can go is a table row in the unit tests. `flaky_tests` is the same kind of function
for the re-runs of the reproduction step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from loopwright.verify.compare import Verdict
from loopwright.verify.findings import Finding
from loopwright.verify.web import WebCheck

Status = Literal["verified", "unverified"]

NO_CHANGES = "the model made no changes"


@dataclass(frozen=True)
class Facts:
    """Everything a verdict rests on, gathered by the mission that ran the checks."""

    comparison: Verdict | None = None
    """The before/after comparison of a fix; None for a build, which has no before."""
    changed: bool = True
    """The patch changes something."""
    problems: tuple[str, ...] = ()
    """Problems met while verifying (a failed setup command, a build's failing suite)."""
    findings: tuple[Finding, ...] = ()
    """Tamper and reach findings on the patch."""
    web: WebCheck | None = None
    """The web check, when the repository has an app to boot."""
    new_tests_problem: str | None = None
    """Why the patch's new test files fail, when they do (a failing new test blocks)."""


@dataclass(frozen=True)
class Verification:
    """The verdict: a status and, unless verified, one sentence per reason."""

    status: Status
    reasons: tuple[str, ...] = ()

    @property
    def verified(self) -> bool:
        return self.status == "verified"


def judge(facts: Facts) -> Verification:
    """Verified only when the comparison holds and nothing else was found; else why not.

    Reasons come in a fixed order: no changes, the comparison's reasons, the problems, the
    findings, the web check, the new tests.
    """
    reasons: list[str] = []
    if not facts.changed:
        reasons.append(NO_CHANGES)
    if facts.comparison is not None:
        reasons += facts.comparison.reasons
    reasons += facts.problems
    reasons += [f"{f.path}: {f.detail}" for f in facts.findings]
    if facts.web is not None and not facts.web.ok:
        reasons.append(facts.web.reason)
    if facts.new_tests_problem is not None:
        reasons.append(facts.new_tests_problem)
    compared = facts.comparison is None or facts.comparison.verified
    verified = not reasons and compared
    return Verification("verified" if verified else "unverified", tuple(reasons))


def flaky_tests(
    failing: Sequence[str], rerun: Mapping[str, str], rerun_clean: bool
) -> tuple[str, ...] | None:
    """Whether one re-run of an unchanged tree shows the failure is flaky, and which tests.

    `rerun` maps test ids to their outcome in the re-run; `rerun_clean` says the re-run
    exited 0 with no failing test. None: the failure reproduced. Otherwise the failing tests
    that passed; when none did but the re-run was clean as a whole, all of `failing`, which
    is empty when the suite failed without naming a failing test (a coverage gate, a second
    command after the tests).
    """
    recovered = tuple(t for t in failing if rerun.get(t) == "passed")
    if recovered:
        return recovered
    return tuple(failing) if rerun_clean else None
