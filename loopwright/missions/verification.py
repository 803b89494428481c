"""The verification tree of a fix: where each file the patch changed goes, what that
finds, and the evidence the verdict is given with; new test files run in a pass of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from loopwright.clip import truncate_middle
from loopwright.config import NetworkMode
from loopwright.events import EventBus
from loopwright.missions.base import timed_phase
from loopwright.missions.trees import changed_files, read_text, tree_files, write_into_sandbox
from loopwright.protected_paths import is_protected
from loopwright.sandbox.base import Sandbox
from loopwright.verify.compare import Verdict
from loopwright.verify.detect import TestPlan
from loopwright.verify.findings import Finding
from loopwright.verify.reach import reach_findings
from loopwright.verify.runner import SuiteRun, run_suite
from loopwright.verify.testfiles import (
    ALLOW_TEST_EDITS_HINT,
    BaseConfig,
    Routed,
    classify,
    is_test_module,
    new_tests_command,
    read_base_config,
    route,
)
from loopwright.verify.web import WebCheck


def verification_evidence(
    plan: TestPlan,
    before: SuiteRun,
    after: SuiteRun,
    verdict: Verdict,
    findings: list[Finding],
    reasons: list[str],
    verified: bool,
    web: WebCheck | None = None,
) -> dict[str, Any]:
    return {
        "verified": verified,
        "reasons": reasons,
        "rows": [asdict(row) for row in verdict.rows],
        "tamper": [asdict(f) for f in findings],
        "commands": [
            {"phase": "before", "command": plan.command, "exit_code": before.result.exit_code},
            {"phase": "after", "command": plan.command, "exit_code": after.result.exit_code},
        ],
        "report_source": {"before": before.report.source, "after": after.report.source},
        "basis": verdict.basis,
        "after_output": truncate_middle(after.result.output, 4_000),
        "web": web.to_dict() if web is not None else None,
    }


NEW_TESTS_BLOCK = True
"""A failing new test file blocks the verdict: once merged, the suite would be red."""


@dataclass
class VerificationLayout:
    """Where each file the patch changed goes in verification, and what that finds."""

    routed: list[Routed]
    findings: list[Finding]
    base_config: BaseConfig

    def phase(self, phase: str) -> list[Routed]:
        return [r for r in self.routed if r.phase == phase]

    def evidence(
        self, network: NetworkMode, phases: list[dict[str, Any]], new_tests: dict[str, Any] | None
    ) -> dict[str, Any]:
        return {
            "network": network,
            "phases": phases,
            "tree": {
                phase: [r.path for r in self.phase(phase)]
                for phase in ("main", "dependency", "new_tests", "base")
            },
            "dependency_changes": [r.path for r in self.routed if r.change.dependency],
            "new_tests": new_tests,
        }


def plan_verification(
    base: Path,
    patched: Path,
    patch: str,
    plan: TestPlan,
    *,
    allow_test_edits: Sequence[str],
    allow_dependency_changes: bool,
    tamper: Sequence[Finding] = (),
) -> VerificationLayout:
    """Route every file of `patch` (see `testfiles.route`) and collect the findings: test
    and test-configuration changes withheld, dependency changes not allowed, product code
    that reaches into the test run."""
    known = tree_files(base)
    config = read_base_config(
        known,
        lambda rel: read_text(base, rel),
        test_command=plan.command,
        setup_command=plan.setup,
        test_script=plan.script,
    )
    named = {f.path for f in tamper}
    routed: list[Routed] = []
    findings: list[Finding] = []
    for path, status in changed_files(patch):
        old, new = read_text(base, path), read_text(patched, path)
        change = classify(path, old, new, config)
        allowed = is_protected(path, allow_test_edits)
        where = route(
            path,
            status,
            change,
            test_edit_allowed=allowed,
            dependency_allowed=allow_dependency_changes,
        )
        routed.append(where)
        if where.phase == "base" and change.test_config:
            findings.append(
                Finding(
                    path,
                    "test_config",
                    f"the patch changes test configuration ({'; '.join(change.test_config)}); "
                    "verification ran the tests with the base version instead "
                    + ALLOW_TEST_EDITS_HINT,
                )
            )
        elif where.phase == "base" and path not in named:
            findings.append(
                Finding(
                    path,
                    "changed_test_file",
                    f"the patch {'deletes' if status == 'deleted' else 'changes'} the test "
                    f"file {path}; verification ran the original tests instead "
                    + ALLOW_TEST_EDITS_HINT,
                )
            )
        if change.dependency and not allow_dependency_changes:
            findings.append(
                Finding(
                    path,
                    "dependency_change",
                    f"the patch changes a dependency or setup input "
                    f"({'; '.join(change.dependency)}); verification installed from the base "
                    "version, so the change is untested (set "
                    "LOOPWRIGHT_ALLOW_DEPENDENCY_CHANGES=1 to install from the patched inputs)",
                )
            )
        if not change.touches_tests:
            for reach in reach_findings(path, old, new):
                findings.append(
                    Finding(
                        path,
                        "reach",
                        f"line {reach.line}: {reach.detail}; product code may not reach into "
                        "the test run",
                    )
                )
    return VerificationLayout(routed, findings, config)


def setup_phase(
    command: str, network: NetworkMode, dependency: Sequence[Routed], *, exit_code: int
) -> dict[str, Any]:
    """What the setup phase ran, on which tree, with which network."""
    tree = "the base tree"
    if dependency:
        tree += " plus the patch's dependency changes (" + ", ".join(r.path for r in dependency)
        tree += "), allowed by LOOPWRIGHT_ALLOW_DEPENDENCY_CHANGES"
    return {
        "phase": "setup",
        "command": command,
        "tree": tree,
        "network": "none" if network == "none" else "setup",
        "exit_code": exit_code,
    }


def run_new_tests(
    sandbox: Sandbox,
    base: Path,
    patched: Path,
    plan: TestPlan,
    layout: VerificationLayout,
    *,
    timeout_s: float,
    events: EventBus | None = None,
) -> dict[str, Any] | None:
    """Run the test files the patch adds in a process of their own, after the original
    tests, and report them (None when the patch adds none); `events` gets the phase's time."""
    added = layout.phase("new_tests")
    modules = [r.path for r in added if is_test_module(r.path)]
    if not modules:
        return None
    if events is None:
        return _run_new_tests(sandbox, base, patched, plan, added, modules, layout, timeout_s)
    with timed_phase(events, "new_tests"):
        return _run_new_tests(sandbox, base, patched, plan, added, modules, layout, timeout_s)


def _run_new_tests(
    sandbox: Sandbox,
    base: Path,
    patched: Path,
    plan: TestPlan,
    added: list[Routed],
    modules: list[str],
    layout: VerificationLayout,
    timeout_s: float,
) -> dict[str, Any]:
    write_into_sandbox(sandbox, patched, added, base=base, timeout_s=timeout_s)
    command = new_tests_command(
        plan.command, plan.runner, modules, sorted(layout.base_config.preload_paths)
    )
    if command is None:
        return {
            "files": modules,
            "command": None,
            "passed": None,
            "reason": f"the new test files were not run: the {plan.runner} runner cannot be "
            "pointed at single files",
        }
    if plan.runner == "pytest":
        new_plan = replace(plan, command=command)
    else:
        new_plan = replace(plan, command=command, runner="node", report="node-junit", script=None)
    run = run_suite(sandbox, new_plan, timeout_s=timeout_s)
    failing = sorted(run.report.failing())
    ran = bool(run.report.results) if run.report.source != "exit-code" else True
    passed = run.result.ok and not failing and ran
    if passed:
        reason = ""
    elif failing:
        reason = f"the new tests fail: {', '.join(failing)}"
    else:
        reason = f"the new test files {', '.join(modules)} fail (exit {run.result.exit_code})"
    return {
        "files": modules,
        "command": command,
        "exit_code": run.result.exit_code,
        "report_source": run.report.source,
        "rows": [{"id": r.id, "outcome": r.outcome} for r in run.report.results],
        "passed": passed,
        "blocks": NEW_TESTS_BLOCK,
        "reason": reason,
        "output": truncate_middle(run.result.output, 2_000),
    }
