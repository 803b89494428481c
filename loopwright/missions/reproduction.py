"""Reproduction: the failure a fix starts from, run on the base tree and re-run to tell a
bug from a flaky test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loopwright.events import EventBus
from loopwright.missions.base import MissionFailed
from loopwright.sandbox.base import Sandbox
from loopwright.verify.detect import TestPlan
from loopwright.verify.runner import SuiteRun, environment_problem, run_suite
from loopwright.verify.verdict import flaky_tests

FLAKY_RERUNS = 3


class Flaky(MissionFailed):
    """The failing tests passed on a re-run without any change; `evidence` holds the
    tests and each one's outcomes, run by run."""

    def __init__(self, message: str, evidence: dict[str, Any]) -> None:
        super().__init__("flaky", message)
        self.evidence = evidence


def reproduce(
    sandbox: Sandbox,
    base: Path,
    plan: TestPlan,
    *,
    events: EventBus,
    timeout_s: float,
    change_requested: bool,
) -> SuiteRun:
    """Run the suite on the base tree: it must fail, and fail again on every re-run (a
    suite that passes is returned only when a change was requested); ends the prepare
    stage with what it found."""
    before = run_suite(sandbox, plan, timeout_s=timeout_s)
    problem = environment_problem(before, base)
    if problem:
        events.leave("prepare", "error", reason=problem)
        raise MissionFailed("error", f"environment problem: {problem}")
    failing = sorted(before.report.failing())
    if before.result.ok and not failing and change_requested:
        events.leave("prepare", "passing", tests=len(before.report.results), exit_code=0)
        return before
    if before.result.ok and not failing:
        events.leave("prepare", "nothing_to_fix", tests=len(before.report.results))
        raise MissionFailed("nothing_to_fix", f"`{plan.command}` passes; nothing to fix")
    pattern: dict[str, list[str]] = {t: [before.report.by_id()[t].outcome] for t in failing}
    for _ in range(FLAKY_RERUNS):
        rerun = run_suite(sandbox, plan, timeout_s=timeout_s)
        outcomes = rerun.report.by_id()
        for test_id in failing:
            pattern[test_id].append(outcomes[test_id].outcome if test_id in outcomes else "missing")
        clean = rerun.result.ok and not rerun.report.failing()
        found = flaky_tests(failing, {t: o[-1] for t, o in pattern.items()}, clean)
        if found is not None:
            flaky = list(found)
            events.leave("prepare", "flaky", tests=flaky, pattern=pattern)
            raise Flaky(
                f"{', '.join(flaky) or f'`{plan.command}`'} failed, then passed on a "
                "re-run without any change: a flaky test, not a bug to fix",
                {"tests": flaky, "pattern": pattern},
            )
    events.leave(
        "prepare",
        "reproduced",
        failing=failing,
        exit_code=before.result.exit_code,
        pattern=pattern,
    )
    return before
