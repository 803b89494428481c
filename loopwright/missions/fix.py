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

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
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
from loopwright.config import Settings, effective_network
from loopwright.events import EventBus, PhaseName
from loopwright.instructions import RepoInstructions, read_tree_instructions
from loopwright.missions.base import (
    Mission,
    MissionFailed,
    account,
    timed_phase,
)
from loopwright.missions.delivery import Deliverer, apply_locally
from loopwright.missions.reproduction import Flaky, reproduce
from loopwright.missions.result import MissionResult
from loopwright.missions.trees import (
    read_text,
    restore_base,
    tree_files,
    write_into_sandbox,
    write_into_tree,
)
from loopwright.missions.verification import (
    plan_verification,
    run_new_tests,
    setup_phase,
    verification_evidence,
)
from loopwright.protected_paths import DEFAULT_PROTECTED_PATHS
from loopwright.repo_config import RepoConfig, load_repo_config
from loopwright.sandbox.base import (
    ExecResult,
    FileToolError,
    Sandbox,
    SandboxError,
    SandboxProvider,
)
from loopwright.sandbox.workspace import (
    apply_patch,
    clone,
    copy_tree,
    export_patch,
    is_git_url,
    prepare_sandbox_repo,
    snapshot,
    without_credentials,
)
from loopwright.verify.compare import compare
from loopwright.verify.detect import TestPlan, detect_tests
from loopwright.verify.runner import SuiteRun, run_suite
from loopwright.verify.tamper import tamper_findings
from loopwright.verify.verdict import Facts, judge
from loopwright.verify.web import BOOT_TIMEOUT_S, WebCheck, find_app, screenshot_app

PHASES: tuple[PhaseName, ...] = get_args(PhaseName)
"""The timed phases of a fix mission, in the order they run."""


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
            try:
                return reproduce(
                    sandbox,
                    base,
                    plan,
                    events=self.events,
                    timeout_s=self.settings.command_timeout_s,
                    change_requested=self._change_requested(),
                )
            except Flaky as flaky:
                self.result.flaky = flaky.evidence
                raise

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
        evidence = verification_evidence(
            plan, before, after, verdict, findings, reasons, verified, web
        )
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
            outcome = apply_locally(
                self.request.source,
                patch,
                dry_run=self.request.dry_run,
                saved=self.workdir / "patch.diff",
                events=self.events,
            )
            self.result.applied = outcome.status == "applied"
        if outcome.note:
            self.result.message += f"; {outcome.note}"
        self.events.leave("deliver", outcome.status, **outcome.fields)


def setup_failed(command: str, result: ExecResult) -> MissionFailed:
    """The setup command failed on the base tree's inputs: the environment, not the fix."""
    return MissionFailed(
        "error",
        f"environment problem: the setup command `{command}` failed "
        f"(exit {result.exit_code}):\n{truncate_middle(result.output, 3000)}",
    )


def _reader(sandbox: Sandbox) -> Reader:
    """Reads workspace files for the first prompt's source excerpts; a file the sandbox
    refuses or cannot find is skipped."""

    def read(path: str) -> bytes | None:
        try:
            return sandbox.read_file(path)
        except (FileToolError, SandboxError):
            return None

    return read
