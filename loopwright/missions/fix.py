"""One fix mission from start to verdict: prepare → plan → loop → verify → deliver.

This module supplies a fix's stages; `missions.base` runs them and owns cleanup, and each
stage's logic lives in its own module (sandbox, agent, verify).

Verification judges the patch with the repository's ORIGINAL tests and test configuration:
the sandbox starts from the base tree, setup runs on the base tree's inputs with the setup
network, the network is cut, and only then do the patch's product changes arrive. Test and
test-configuration changes stay at their base version unless `allow_test_edits` covers them,
dependency changes need LOOPWRIGHT_ALLOW_DEPENDENCY_CHANGES, and product code that reaches
into the test run is a finding. Test files the patch adds run afterwards in a process of
their own; their results are in the evidence, and a failing one blocks the verdict (once
merged, the suite would be red).
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, get_args

from loopwright.agent.context import Conversation
from loopwright.agent.localize import Reader, source_excerpts
from loopwright.agent.loop import AgentLoop, LoopResult, leave_loop_stage
from loopwright.agent.model import Model, Sampling
from loopwright.agent.prompts import SYSTEM, change_task, fix_task
from loopwright.agent.testguard import TestEditGuard
from loopwright.agent.tools import Toolbox
from loopwright.cancellation import Cancellation
from loopwright.clip import truncate_middle
from loopwright.config import (
    NetworkMode,
    RepoConfig,
    Settings,
    effective_network,
    load_repo_config,
)
from loopwright.events import EventBus, PhaseName
from loopwright.instructions import RepoInstructions, read_tree_instructions
from loopwright.missions.base import (
    Mission,
    MissionFailed,
    Status,
    account,
    timed_phase,
)
from loopwright.protected_paths import DEFAULT_PROTECTED_PATHS, is_protected
from loopwright.sandbox.base import (
    ExecResult,
    FileToolError,
    Sandbox,
    SandboxError,
    SandboxProvider,
)
from loopwright.sandbox.workspace import (
    WorkspaceError,
    apply_patch,
    clone,
    copy_tree,
    export_patch,
    is_git_url,
    prepare_sandbox_repo,
    snapshot,
    without_credentials,
)
from loopwright.verify.compare import Verdict, compare
from loopwright.verify.detect import TestPlan, detect_tests
from loopwright.verify.diff import parse_patch
from loopwright.verify.findings import Finding
from loopwright.verify.reach import reach_findings
from loopwright.verify.runner import SuiteRun, environment_problem, run_suite
from loopwright.verify.tamper import tamper_findings
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
from loopwright.verify.testfiles import (
    Status as ChangeStatus,
)
from loopwright.verify.verdict import Facts, flaky_tests, judge
from loopwright.verify.web import BOOT_TIMEOUT_S, WebCheck, find_app, screenshot_app

PHASES: tuple[PhaseName, ...] = get_args(PhaseName)
"""The timed phases of a fix mission, in the order they run."""
FLAKY_RERUNS = 3


@dataclass
class FixRequest:
    """What to fix and how; built by the CLI, the App or the Action."""

    source: str
    """A local repository path or a git URL."""
    test_cmd: str | None = None
    setup_cmd: str | None = None
    guidance: str | None = None
    dry_run: bool = False
    boot_timeout_s: float = BOOT_TIMEOUT_S
    """How long a web app may take to open its port during verification."""
    mission_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    repo_config: RepoConfig | None = None
    """The repository's rules, when the caller read them from a trusted place (the App
    reads the default branch); otherwise they come from the tree being fixed."""
    instructions: RepoInstructions | None = None
    """The repository's instruction file (AGENTS.md, ...), read by the caller from a trusted
    place (the App and the Action read the default branch, never the pull request's head)."""
    tree_instructions: bool = False
    """Read the instruction file from the tree being fixed when `instructions` is None: the
    CLI's owner runs it on their own tree."""
    change_requested: bool = False
    """A maintainer asked for a change to a fix (a command on Loopwright's own pull
    request): when the suite already passes, the model makes the change the guidance asks
    for and verification checks that nothing broke, instead of ending `nothing_to_fix`."""


@dataclass
class MissionResult:
    mission: str
    status: Status
    message: str = ""
    summary: str = ""
    patch: str = ""
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    cost_usd: float = 0.0
    steps: int = 0
    elapsed_s: float = 0.0
    final_tier: str | None = None
    applied: bool = False
    verification: dict[str, Any] | None = None
    flaky: dict[str, Any] | None = None
    screenshot: str | None = None
    """The PNG of the booted web app, when the repository has a start command."""
    title: str = ""
    """The short subject the model gave with `finish` (empty when it gave none)."""
    plan: list[dict[str, str]] = field(default_factory=list)
    """The model's latest plan, `{step, status}` items as in the `plan` event."""
    attempts: list[dict[str, Any]] = field(default_factory=list)
    """Independent attempts, `{tier, attempt, seed, passed, steps}` (LOOPWRIGHT_ATTEMPTS)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DeliveryOutcome:
    """How a mission's deliver stage ended: `status` is the stage event's status
    (`applied`, `delivered`, `skipped` or `failed`) and `fields` its extra fields; a `note`
    is appended to the result's message."""

    status: str
    fields: dict[str, Any] = field(default_factory=dict)
    note: str = ""


Deliverer = Callable[[MissionResult], DeliveryOutcome]
"""Delivers a verified result inside the mission's one deliver stage: the App and the
Action open a pull request (or commit, or comment) here; without one the CLI applies the
patch to the user's working tree."""


class FixMission(Mission[MissionResult]):
    """Runs one fix mission against a sandbox provider and a model."""

    def __init__(
        self,
        request: FixRequest,
        *,
        settings: Settings,
        provider: SandboxProvider,
        model: Model,
        events: EventBus,
        clock: Callable[[], float] = time.monotonic,
        deliver: Deliverer | None = None,
        cancellation: Cancellation | None = None,
    ) -> None:
        super().__init__(
            MissionResult(request.mission_id, "error"),
            settings=settings,
            provider=provider,
            model=model,
            events=events,
            clock=clock,
            cancellation=cancellation,
        )
        self.request = request
        self.deliverer = deliver
        self.instructions = request.instructions
        self._guard: TestEditGuard | None = None

    # -- the stages --------------------------------------------------------------------

    def stages(self) -> None:
        check = self.cancellation.check
        check()
        base, repo, plan = self._prepare_tree()
        check()
        before = self._reproduce(base, plan, repo)
        check()
        summary, patch = self._fix(plan, before, repo)
        self.result.summary, self.result.patch = summary, patch
        check()
        self._verify(base, plan, repo, before, patch)
        check()
        self._deliver(patch)

    def _prepare_tree(self) -> tuple[Path, RepoConfig, TestPlan]:
        self.events.enter("prepare", source=without_credentials(self.request.source))
        trees = self.workdir / "trees"
        source = self.request.source
        base = trees / "base"
        with timed_phase(self.events, "snapshot"):
            if is_git_url(source):
                local = clone(source, trees / "clone")
            else:
                local = Path(source).expanduser().resolve()
            head = snapshot(local, base)
        repo = self.request.repo_config or load_repo_config(base)
        origin = "default_branch"
        if self.instructions is None and self.request.tree_instructions:
            self.instructions, origin = read_tree_instructions(base), "tree"
        plan = detect_tests(
            base,
            explicit=self.request.test_cmd or repo.test_cmd,
            config_setup=self.request.setup_cmd or repo.setup_cmd,
        )
        self.events.emit(
            "stage",
            status="detected",
            head=head,
            test_command=plan.command,
            setup_command=plan.setup,
            reason=plan.reason,
            config=repo.source,
            **self._instructions_fields(origin),
        )
        return base, repo, plan

    def _instructions_fields(self, origin: str) -> dict[str, Any]:
        found = self.instructions
        if found is None:
            return {}
        return {
            "instructions": {
                "path": found.path,
                "bytes": found.size_bytes,
                "truncated": found.truncated,
                "origin": origin,
            }
        }

    def _open_sandbox(
        self, tree: Path, plan: TestPlan, repo: RepoConfig, *, exports_patch: bool = True
    ) -> Sandbox:
        network = effective_network(self.settings.network, repo.network)
        with timed_phase(self.events, "sandbox_start"):
            sandbox = self.sandboxes.open(tree, network=network != "none")
            if exports_patch:
                prepare_sandbox_repo(sandbox, timeout_s=60)
        if plan.setup:
            with timed_phase(self.events, "setup"):
                result = self.run_setup(sandbox, plan.setup)
            if not result.ok:
                raise setup_failed(plan.setup, result)
        if network == "setup":
            sandbox.set_network(False)
        return sandbox

    def _reproduce(self, base: Path, plan: TestPlan, repo: RepoConfig) -> SuiteRun:
        sandbox = self._open_sandbox(base, plan, repo)
        with timed_phase(self.events, "reproduce"):
            return self._reproduce_in(sandbox, base, plan)

    def _reproduce_in(self, sandbox: Sandbox, base: Path, plan: TestPlan) -> SuiteRun:
        """Run the suite on the base tree: it must fail, and fail again on every re-run."""
        timeout = self.settings.command_timeout_s
        before = run_suite(sandbox, plan, timeout_s=timeout)
        problem = environment_problem(before, base)
        if problem:
            self.events.leave("prepare", "error", reason=problem)
            raise MissionFailed("error", f"environment problem: {problem}")
        failing = sorted(before.report.failing())
        if before.result.ok and not failing and self._change_requested():
            self.events.leave("prepare", "passing", tests=len(before.report.results), exit_code=0)
            return before
        if before.result.ok and not failing:
            self.events.leave("prepare", "nothing_to_fix", tests=len(before.report.results))
            raise MissionFailed("nothing_to_fix", f"`{plan.command}` passes; nothing to fix")
        pattern: dict[str, list[str]] = {t: [before.report.by_id()[t].outcome] for t in failing}
        for _ in range(FLAKY_RERUNS):
            rerun = run_suite(sandbox, plan, timeout_s=timeout)
            outcomes = rerun.report.by_id()
            for test_id in failing:
                pattern[test_id].append(
                    outcomes[test_id].outcome if test_id in outcomes else "missing"
                )
            clean = rerun.result.ok and not rerun.report.failing()
            found = flaky_tests(failing, {t: o[-1] for t, o in pattern.items()}, clean)
            if found is not None:
                flaky = list(found)
                self.result.flaky = {"tests": flaky, "pattern": pattern}
                self.events.leave("prepare", "flaky", tests=flaky, pattern=pattern)
                raise MissionFailed(
                    "flaky",
                    f"{', '.join(flaky) or f'`{plan.command}`'} failed, then passed on a "
                    "re-run without any change: a flaky test, not a bug to fix",
                )
        self.events.leave(
            "prepare",
            "reproduced",
            failing=failing,
            exit_code=before.result.exit_code,
            pattern=pattern,
        )
        return before

    def _change_requested(self) -> bool:
        return self.request.change_requested and bool((self.request.guidance or "").strip())

    def _fix(self, plan: TestPlan, before: SuiteRun, repo: RepoConfig) -> tuple[str, str]:
        """The loop, as independent attempts on the tiers LOOPWRIGHT_ATTEMPTS names (in
        order, cheapest first) and then one escalating loop over the remaining tiers. An
        attempt counts only when the model finished AND the test command passes in the
        loop's sandbox; the workspace is put back to the base tree before the next one."""
        sandbox = self.sandboxes.opened[-1]
        base = self.workdir / "trees" / "base"
        task = (
            change_task(plan.command, self.request.guidance or "", self.instructions)
            if before.result.ok and not before.report.failing()
            else fix_task(
                plan.command,
                sorted(before.report.failing()),
                truncate_middle(before.result.output, 6_000),
                self.request.guidance,
                self.instructions,
                source=source_excerpts(before.result.output, _reader(sandbox)),
            )
        )
        tiers = self.settings.tiers
        first = 0
        while first < len(tiers) and self.settings.attempts.get(tiers[first].name, 1) > 1:
            first += 1
        entered = False
        for index, tier in enumerate(tiers[:first]):
            count = self.settings.attempts[tier.name]
            for number in range(1, count + 1):
                last = index == len(tiers) - 1 and number == count
                seed = number
                self.events.emit(
                    "attempt", tier=tier.name, attempt=number, attempts=count, seed=seed,
                    status="started",
                )  # fmt: skip
                loop, toolbox = self._loop(
                    sandbox, plan, repo, task, before,
                    settings=self.settings.with_overrides(tiers=(tier,)),
                    step_limit=self.settings.attempt_steps,
                    sampling=Sampling(self.settings.attempt_temperature, seed),
                    stages=(not entered, last),
                )  # fmt: skip
                entered = True
                outcome = loop.run()
                with timed_phase(self.events, "patch_export"):
                    patch = export_patch(sandbox, timeout_s=120, base=base)
                passed, why = self._attempt_passed(sandbox, plan, outcome, patch)
                self.result.attempts.append(
                    {"tier": tier.name, "attempt": number, "seed": seed, "passed": passed,
                     "steps": loop.steps_taken}
                )  # fmt: skip
                self.events.emit(
                    "attempt", tier=tier.name, attempt=number, attempts=count, seed=seed,
                    status="passed" if passed else "failed", steps=loop.steps_taken,
                    reason=None if passed else why,
                )  # fmt: skip
                if passed or last or outcome.outcome == "budget_exceeded":
                    if not last:
                        leave_loop_stage(self.events, "finished" if passed else "budget_exceeded")
                    return self._adopt(loop, toolbox, outcome, patch)
                restore_base(sandbox, base, patch, timeout_s=self.settings.command_timeout_s)
        loop, toolbox = self._loop(
            sandbox, plan, repo, task, before,
            settings=self.settings.with_overrides(tiers=tiers[first:]),
            stages=(not entered, True),
        )  # fmt: skip
        outcome = loop.run()
        with timed_phase(self.events, "patch_export"):
            patch = export_patch(sandbox, timeout_s=120, base=base)
        return self._adopt(loop, toolbox, outcome, patch)

    def _loop(
        self,
        sandbox: Sandbox,
        plan: TestPlan,
        repo: RepoConfig,
        task: str,
        before: SuiteRun,
        *,
        settings: Settings,
        stages: tuple[bool, bool],
        step_limit: int | None = None,
        sampling: Sampling | None = None,
    ) -> tuple[AgentLoop, Toolbox]:
        protected = (
            repo.protected_paths if repo.protected_paths is not None else DEFAULT_PROTECTED_PATHS
        )
        toolbox = Toolbox(
            sandbox,
            command_timeout_s=self.settings.command_timeout_s,
            protected_paths=protected,
            test_command=plan.command,
            test_guard=self._test_guard(plan, repo),
        )
        conversation = Conversation(
            system=SYSTEM, task=task, context_tokens=self.settings.context_tokens
        )
        # The fix task quotes the failing run; a change task (the suite passes) does not.
        conversation.set_latest_test(
            plan.command,
            before.result.exit_code,
            before.result.output,
            in_task=not (before.result.ok and not before.report.failing()),
        )
        loop = self.agent_loop(
            toolbox,
            conversation,
            settings=settings,
            step_limit=step_limit,
            sampling=sampling,
            stages=stages,
        )
        return loop, toolbox

    def _test_guard(self, plan: TestPlan, repo: RepoConfig) -> TestEditGuard:
        """The tool-side copy of verification's test routing, for the base tree (built once
        per mission: every loop and attempt starts from the same base)."""
        if self._guard is None:
            base = self.workdir / "trees" / "base"
            self._guard = TestEditGuard.for_tree(
                tree_files(base),
                lambda rel: read_text(base, rel),
                test_command=plan.command,
                setup_command=plan.setup,
                test_script=plan.script,
                allow_test_edits=repo.allow_test_edits,
            )
        return self._guard

    def _attempt_passed(
        self, sandbox: Sandbox, plan: TestPlan, outcome: LoopResult, patch: str
    ) -> tuple[bool, str]:
        """Whether an attempt is worth verifying: the model finished with a change and the
        test command now passes in the loop's sandbox."""
        if outcome.outcome != "finished":
            return False, outcome.reason or "the attempt ended without finish"
        if not patch.strip():
            return False, "the attempt finished without changing anything"
        check = run_suite(sandbox, plan, timeout_s=self.settings.command_timeout_s)
        if check.result.ok and not check.report.failing():
            return True, ""
        failing = sorted(check.report.failing())
        named = f": {', '.join(failing[:5])}" if failing else ""
        code = check.result.exit_code
        return False, f"the tests still fail after the attempt (exit {code}){named}"

    def _adopt(
        self, loop: AgentLoop, toolbox: Toolbox, outcome: LoopResult, patch: str
    ) -> tuple[str, str]:
        self.result.final_tier = loop.escalation.current
        self.result.plan = [{"step": i.step, "status": i.status} for i in toolbox.plan]
        self.result.title = toolbox.title or ""
        self.result.patch = patch
        if outcome.outcome in ("budget_exceeded", "attempt_exhausted"):
            raise MissionFailed("budget_exceeded", outcome.reason)
        return outcome.summary, patch

    def _verify(
        self, base: Path, plan: TestPlan, repo: RepoConfig, before: SuiteRun, patch: str
    ) -> None:
        """Judge the patch with the ORIGINAL tests: a sandbox of the base tree runs setup on
        the base tree's inputs, loses its network, and only then receives the patch's
        product changes; test and test-configuration changes stay out unless the repository
        allows them, and new test files run in a separate pass."""
        self.events.enter("verify")
        protected = (
            repo.protected_paths if repo.protected_paths is not None else DEFAULT_PROTECTED_PATHS
        )
        tamper = tamper_findings(patch, allow_test_edits=repo.allow_test_edits, protected=protected)
        patched = copy_tree(base, self.workdir / "trees" / "verify")
        apply_patch(patched, patch)
        layout = plan_verification(
            base,
            patched,
            patch,
            plan,
            allow_test_edits=repo.allow_test_edits,
            allow_dependency_changes=self.settings.allow_dependency_changes,
            tamper=tamper,
        )
        findings = tamper + layout.findings
        network = effective_network(self.settings.network, repo.network)
        timeout = self.settings.command_timeout_s
        phases: list[dict[str, Any]] = []
        reasons: list[str] = []
        dependency, main = layout.phase("dependency"), layout.phase("main")
        if plan.setup:
            with timed_phase(self.events, "verify_sandbox"):
                sandbox = self.sandboxes.open(base, network=network != "none")
                write_into_sandbox(sandbox, patched, dependency, base=base, timeout_s=timeout)
            with timed_phase(self.events, "verify_setup"):
                setup = self.run_setup(sandbox, plan.setup)
            phases.append(setup_phase(plan.setup, network, dependency, exit_code=setup.exit_code))
            if not setup.ok and not dependency:
                raise setup_failed(plan.setup, setup)
            if not setup.ok:
                reasons.append(
                    f"the setup command `{plan.setup}` failed (exit {setup.exit_code}) on the "
                    "patch's dependency changes"
                )
            # Nothing the patch changed in product code ever runs with a network.
            sandbox.set_network(False)
            write_into_sandbox(sandbox, patched, main, base=base, timeout_s=timeout)
        else:
            # Nothing runs before the tests, so the sandbox can start from the filtered tree,
            # without a network.
            with timed_phase(self.events, "verify_sandbox"):
                tree = copy_tree(base, self.workdir / "trees" / "verify-filtered")
                write_into_tree(tree, patched, [*dependency, *main])
                sandbox = self.sandboxes.open(tree, network=False)
            main = [*dependency, *main]
        phases.append({"phase": "apply", "files": [r.path for r in main], "network": "none"})
        with timed_phase(self.events, "verify_tests"):
            after = run_suite(sandbox, plan, timeout_s=timeout)
        phases.append(
            {
                "phase": "tests",
                "command": plan.command,
                "network": "none",
                "exit_code": after.result.exit_code,
            }
        )
        verdict = compare(before.report, after.report)
        web = self._check_web(sandbox, patched, repo)
        # Last: the new tests' code runs after everything the verdict reads from this
        # sandbox, so it cannot change what the original tests or the web check saw.
        new_tests = run_new_tests(
            sandbox, base, patched, plan, layout, timeout_s=timeout, events=self.events
        )
        failed_new = new_tests is not None and new_tests["passed"] is False
        judged = judge(
            Facts(
                comparison=verdict,
                changed=bool(patch.strip()),
                problems=tuple(reasons),
                findings=tuple(findings),
                web=web,
                new_tests_problem=new_tests["reason"] if new_tests and failed_new else None,
            )
        )
        reasons, verified = list(judged.reasons), judged.verified
        evidence = _evidence(plan, before, after, verdict, findings, reasons, verified, web)
        evidence.update(layout.evidence(network, phases, new_tests))
        self.result.verification = evidence
        self.events.emit("verification", **evidence)
        self.events.leave("verify", "verified" if verified else "unverified")
        if not verified:
            raise MissionFailed("unverified", "; ".join(reasons) or "verification failed")
        self.result.status = "verified"
        self.result.message = "verified: the failing tests pass and nothing else broke"

    def _check_web(self, sandbox: Sandbox, tree: Path, repo: RepoConfig) -> WebCheck | None:
        """Boot and screenshot the app when the repository has a start command."""
        app = find_app(tree, repo)
        if app is None:
            return None
        with timed_phase(self.events, "web_check"):
            web = screenshot_app(
                sandbox,
                app,
                self.workdir / "screenshot.png",
                boot_timeout_s=self.request.boot_timeout_s,
                events=self.events,
            )
        self.result.screenshot = str(web.screenshot) if web.screenshot else None
        return web

    def _deliver(self, patch: str) -> None:
        """The mission's one deliver stage; `done` follows it."""
        self.events.enter("deliver")
        if self.deliverer is not None:
            # What a pull request shows (the cost, the effort) is known by now.
            account(self.result, budget=self.budget, elapsed_s=self.clock() - self.started)
            with timed_phase(self.events, "deliver"):
                outcome = self.deliverer(self.result)
        else:
            outcome = self._apply_locally(patch)
        if outcome.note:
            self.result.message += f"; {outcome.note}"
        self.events.leave("deliver", outcome.status, **outcome.fields)

    def _apply_locally(self, patch: str) -> DeliveryOutcome:
        source = self.request.source
        if self.request.dry_run or is_git_url(source):
            why = "dry run" if self.request.dry_run else "the source is a URL"
            saved = self.workdir / "patch.diff"
            return DeliveryOutcome("skipped", {"reason": f"{why}: the patch is saved as {saved}"})
        target = Path(source).expanduser().resolve()
        try:
            with timed_phase(self.events, "deliver"):
                stat = apply_patch(target, patch)
        except WorkspaceError as exc:
            # Verified but not applicable (the working tree changed meanwhile): keep the
            # patch in the result and leave the working tree exactly as it was.
            return DeliveryOutcome(
                "failed",
                {"reason": str(exc)},
                note=f"the patch could not be applied to {target}: {exc}",
            )
        self.result.applied = True
        files = stat.strip().splitlines()
        return DeliveryOutcome(
            "applied", {"path": str(target), "files": files[-1:] if files else []}
        )


def setup_failed(command: str, result: ExecResult) -> MissionFailed:
    """The setup command failed on the base tree's inputs: the environment, not the fix."""
    return MissionFailed(
        "error",
        f"environment problem: the setup command `{command}` failed "
        f"(exit {result.exit_code}):\n{truncate_middle(result.output, 3000)}",
    )


def _evidence(
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


# -- the verification tree -----------------------------------------------------------------

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


def changed_files(patch: str) -> list[tuple[str, ChangeStatus]]:
    """Each path `patch` touches, with how (a rename is a deletion plus an addition)."""
    out: list[tuple[str, ChangeStatus]] = []
    for file in parse_patch(patch):
        if file.status == "renamed" and file.old_path and file.new_path:
            out += [(file.old_path, "deleted"), (file.new_path, "added")]
        elif file.path:
            status: ChangeStatus = "modified" if file.status == "renamed" else file.status
            out.append((file.path, status))
    return list(dict.fromkeys(out))


def tree_files(root: Path) -> list[str]:
    """Every file under `root` outside `.git`, relative and slash-separated."""
    found: list[str] = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        rel = Path(directory).relative_to(root)
        found += [(rel / name).as_posix() for name in files]
    return found


def read_text(root: Path, rel: str) -> str | None:
    """The text of a regular file under `root` (never through a symlink), or None."""
    path = root / rel
    try:
        if path.is_symlink() or not path.is_file():
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except (OSError, ValueError):  # a name too long, a NUL byte: no such base file
        return None


def write_into_sandbox(
    sandbox: Sandbox,
    patched: Path,
    files: Sequence[Routed],
    *,
    base: Path,
    timeout_s: float,
) -> None:
    """Give the sandbox (a copy of `base`) the patched version of `files`, written, linked
    or removed through the Sandbox protocol: no patch tool runs in the tree. A regular file
    is one write; a shell round trip is spent only on removals, links and new modes."""
    before: list[str] = []
    after: list[str] = []
    removed: list[str] = []
    executable: list[str] = []
    writes: list[str] = []
    for routed in files:
        path = routed.path
        source, old = patched / path, base / path
        if routed.status == "deleted" or source.is_symlink() or old.is_symlink():
            removed.append(path)
        if source.is_symlink():
            parent = shlex.quote(os.path.dirname(path) or ".")
            before.append(
                f"mkdir -p -- {parent} && ln -s -- {shlex.quote(os.readlink(source))} "
                f"{shlex.quote(path)}"
            )
        elif routed.status != "deleted" and source.is_file():
            writes.append(path)
            old_mode = old.stat().st_mode if old.is_file() and not old.is_symlink() else 0
            if source.stat().st_mode & 0o111 and not old_mode & 0o111:
                executable.append(path)
    if removed:
        before.insert(0, f"rm -f -- {shlex.join(removed)}")
    if executable:
        after.append(f"chmod +x -- {shlex.join(executable)}")
    _sandbox_steps(sandbox, before, timeout_s=timeout_s)
    for path in writes:
        sandbox.write_file(path, (patched / path).read_bytes())
    _sandbox_steps(sandbox, after, timeout_s=timeout_s)


def write_into_tree(tree: Path, patched: Path, files: Sequence[Routed]) -> None:
    """Give a host copy of the base tree the patched version of `files` (plain file
    operations: nothing in either tree runs)."""
    for routed in files:
        source, target = patched / routed.path, tree / routed.path
        if target.is_symlink() or target.is_file():
            target.unlink()
        if routed.status == "deleted" or not (source.is_symlink() or source.is_file()):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        else:
            shutil.copy2(source, target)


def restore_base(sandbox: Sandbox, base: Path, patch: str, *, timeout_s: float) -> None:
    """Put every path `patch` changed back to its version in `base` (removing what the
    patch added), so the next independent attempt starts from the reproduction's tree."""
    paths = sorted({path for path, _status in changed_files(patch)})
    if not paths:
        return
    steps = [f"rm -rf -- {shlex.join(paths)}"]
    links: list[str] = []
    executable: list[str] = []
    writes: list[str] = []
    for path in paths:
        original = base / path
        if original.is_symlink():
            parent = shlex.quote(os.path.dirname(path) or ".")
            links.append(
                f"mkdir -p -- {parent} && ln -s -- {shlex.quote(os.readlink(original))} "
                f"{shlex.quote(path)}"
            )
        elif original.is_file():
            writes.append(path)
            if original.stat().st_mode & 0o111:
                executable.append(path)
    _sandbox_steps(sandbox, steps + links, timeout_s=timeout_s)
    for path in writes:
        sandbox.write_file(path, (base / path).read_bytes())
    if executable:
        _sandbox_steps(sandbox, [f"chmod +x -- {shlex.join(executable)}"], timeout_s=timeout_s)


def _reader(sandbox: Sandbox) -> Reader:
    """Reads workspace files for the first prompt's source excerpts; a file the sandbox
    refuses or cannot find is skipped."""

    def read(path: str) -> bytes | None:
        try:
            return sandbox.read_file(path)
        except (FileToolError, SandboxError):
            return None

    return read


def _sandbox_steps(sandbox: Sandbox, steps: list[str], *, timeout_s: float) -> None:
    if not steps:
        return
    result = sandbox.exec(" && ".join(steps), timeout_s=timeout_s)
    if not result.ok:
        raise SandboxError(f"could not prepare the verification tree: {result.output.strip()}")


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
