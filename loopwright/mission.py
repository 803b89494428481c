"""One fix mission from start to verdict: prepare → plan → loop → verify → deliver.

This module sequences the stages and owns cleanup; each stage's logic lives in its own
module (sandbox, agent, verify). Whatever happens, the sandboxes are removed and the
mission ends with a status and a message rather than a traceback.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from loopwright.agent.budget import Budget
from loopwright.agent.context import Conversation, truncate_middle
from loopwright.agent.loop import AgentLoop
from loopwright.agent.model import Model, ModelError
from loopwright.agent.policy import DEFAULT_PROTECTED_PATHS
from loopwright.agent.prompts import SYSTEM, fix_task
from loopwright.agent.tools import Toolbox
from loopwright.config import ConfigError, RepoConfig, Settings, load_repo_config
from loopwright.events import EventBus
from loopwright.sandbox.base import Sandbox, SandboxError, SandboxProvider
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
from loopwright.verify.detect import DetectionError, TestPlan, detect_tests
from loopwright.verify.runner import SuiteRun, environment_problem, run_suite
from loopwright.verify.tamper import Finding, tamper_findings
from loopwright.verify.web import BOOT_TIMEOUT_S, WebCheck, find_app, screenshot_app

Status = Literal["verified", "unverified", "flaky", "nothing_to_fix", "budget_exceeded", "error"]
FLAKY_RERUNS = 3
SETUP_TIMEOUT_S = 900.0


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class MissionSandboxes:
    """The sandboxes one mission opened; closed together, whatever happened."""

    def __init__(self, provider: SandboxProvider, mission_id: str) -> None:
        self._provider = provider
        self._mission_id = mission_id
        self.opened: list[Sandbox] = []

    def open(self, tree: Path, *, network: bool) -> Sandbox:
        # Every sandbox of a mission carries the mission's id, so reaping finds them all.
        sandbox = self._provider.create(self._mission_id, tree, network=network)
        self.opened.append(sandbox)
        return sandbox

    def close_all(self, events: EventBus) -> None:
        errors = []
        for sandbox in self.opened:
            try:
                sandbox.close()
            except SandboxError as exc:
                errors.append(str(exc))
        self.opened.clear()
        if errors:
            events.emit("error", message="sandbox cleanup failed: " + "; ".join(errors))


class _Concludable(Protocol):
    usage: dict[str, dict[str, Any]]
    cost_usd: float
    steps: int
    elapsed_s: float
    patch: str

    def to_dict(self) -> dict[str, Any]: ...


def conclude(
    result: _Concludable,
    *,
    budget: Budget,
    elapsed_s: float,
    workdir: Path,
    sandboxes: MissionSandboxes,
    events: EventBus,
) -> None:
    """The end of every mission: sandboxes closed, usage accounted, the result and patch
    saved next to the mission, the working trees removed."""
    sandboxes.close_all(events)
    result.usage = budget.report()
    result.cost_usd = round(budget.cost_usd, 6)
    result.steps = budget.steps
    result.elapsed_s = round(elapsed_s, 3)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "result.json").write_text(json.dumps(result.to_dict(), indent=2), encoding="utf-8")
    if result.patch:
        (workdir / "patch.diff").write_text(result.patch, encoding="utf-8")
    shutil.rmtree(workdir / "trees", ignore_errors=True)


def announce_done(result: Any, events: EventBus, **extra: Any) -> None:
    """The last event of every mission: its outcome, cost and effort."""
    events.emit(
        "done",
        status=result.status,
        message=result.message,
        summary=result.summary,
        cost_usd=result.cost_usd,
        steps=result.steps,
        elapsed_s=result.elapsed_s,
        final_tier=result.final_tier,
        **extra,
    )


class MissionFailed(Exception):
    """Ends a mission early with a status other than verified; carries the message."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status = status


class FixMission:
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
    ) -> None:
        self.request = request
        self.settings = settings
        self.provider = provider
        self.model = model
        self.events = events
        self.clock = clock
        self.workdir = settings.data_dir / "missions" / request.mission_id
        self.budget = Budget(settings, clock=clock)
        self.result = MissionResult(request.mission_id, "error")
        self.sandboxes = MissionSandboxes(provider, request.mission_id)

    # -- the stages --------------------------------------------------------------------

    def run(self) -> MissionResult:
        started = self.clock()
        try:
            base, repo, plan = self._prepare_tree()
            before = self._reproduce(base, plan, repo)
            summary, patch = self._fix(plan, before, repo)
            self.result.summary, self.result.patch = summary, patch
            self._verify(base, plan, repo, before, patch)
            self._deliver(patch)
        except MissionFailed as stop:
            self.result.status = stop.status
            self.result.message = str(stop)
        except (ModelError, SandboxError, WorkspaceError, ConfigError, DetectionError) as exc:
            self.result.status = "error"
            self.result.message = str(exc)
            self.events.emit("error", message=str(exc), kind=type(exc).__name__)
        finally:
            conclude(
                self.result,
                budget=self.budget,
                elapsed_s=self.clock() - started,
                workdir=self.workdir,
                sandboxes=self.sandboxes,
                events=self.events,
            )
        announce_done(self.result, self.events)
        return self.result

    def _prepare_tree(self) -> tuple[Path, RepoConfig, TestPlan]:
        self.events.enter("prepare", source=without_credentials(self.request.source))
        trees = self.workdir / "trees"
        source = self.request.source
        if is_git_url(source):
            local = clone(source, trees / "clone")
        else:
            local = Path(source).expanduser().resolve()
        base = trees / "base"
        head = snapshot(local, base)
        repo = self.request.repo_config or load_repo_config(base)
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
        )
        return base, repo, plan

    def _open_sandbox(
        self, tree: Path, plan: TestPlan, repo: RepoConfig, *, exports_patch: bool = True
    ) -> Sandbox:
        network = repo.network or self.settings.network
        sandbox = self.sandboxes.open(tree, network=network != "none")
        if exports_patch:
            prepare_sandbox_repo(sandbox, timeout_s=60)
        if plan.setup:
            result = sandbox.exec(
                plan.setup, timeout_s=max(SETUP_TIMEOUT_S, self.settings.command_timeout_s)
            )
            if not result.ok:
                raise MissionFailed(
                    "error",
                    f"environment problem: the setup command `{plan.setup}` failed "
                    f"(exit {result.exit_code}):\n{truncate_middle(result.output, 3000)}",
                )
        if network == "setup":
            sandbox.set_network(False)
        return sandbox

    def _reproduce(self, base: Path, plan: TestPlan, repo: RepoConfig) -> SuiteRun:
        sandbox = self._open_sandbox(base, plan, repo)
        timeout = self.settings.command_timeout_s
        before = run_suite(sandbox, plan, timeout_s=timeout)
        problem = environment_problem(before, base)
        if problem:
            self.events.leave("prepare", "error", reason=problem)
            raise MissionFailed("error", f"environment problem: {problem}")
        failing = sorted(before.report.failing())
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
            recovered = [t for t in failing if pattern[t][-1] == "passed"]
            if recovered or (rerun.result.ok and not rerun.report.failing()):
                self.result.flaky = {"tests": recovered or failing, "pattern": pattern}
                self.events.leave("prepare", "flaky", tests=recovered or failing, pattern=pattern)
                raise MissionFailed(
                    "flaky",
                    f"{', '.join(recovered or failing)} failed, then passed on a re-run "
                    "without any change: a flaky test, not a bug to fix",
                )
        self.events.leave(
            "prepare",
            "reproduced",
            failing=failing,
            exit_code=before.result.exit_code,
            pattern=pattern,
        )
        return before

    def _fix(self, plan: TestPlan, before: SuiteRun, repo: RepoConfig) -> tuple[str, str]:
        sandbox = self.sandboxes.opened[-1]
        protected = (
            repo.protected_paths if repo.protected_paths is not None else DEFAULT_PROTECTED_PATHS
        )
        toolbox = Toolbox(
            sandbox,
            command_timeout_s=self.settings.command_timeout_s,
            protected_paths=protected,
            test_command=plan.command,
        )
        conversation = Conversation(
            system=SYSTEM,
            task=fix_task(
                plan.command,
                sorted(before.report.failing()),
                truncate_middle(before.result.output, 6_000),
                self.request.guidance,
            ),
            context_tokens=self.settings.context_tokens,
        )
        conversation.set_latest_test(plan.command, before.result.exit_code, before.result.output)
        loop = AgentLoop(
            settings=self.settings,
            model=self.model,
            toolbox=toolbox,
            conversation=conversation,
            budget=self.budget,
            events=self.events,
        )
        outcome = loop.run()
        self.result.final_tier = loop.escalation.current
        patch = export_patch(sandbox, timeout_s=120, base=self.workdir / "trees" / "base")
        self.result.patch = patch
        if outcome.outcome == "budget_exceeded":
            raise MissionFailed("budget_exceeded", outcome.reason)
        return outcome.summary, patch

    def _verify(
        self, base: Path, plan: TestPlan, repo: RepoConfig, before: SuiteRun, patch: str
    ) -> None:
        self.events.enter("verify")
        protected = (
            repo.protected_paths if repo.protected_paths is not None else DEFAULT_PROTECTED_PATHS
        )
        findings = tamper_findings(
            patch, allow_test_edits=repo.allow_test_edits, protected=protected
        )
        tree = copy_tree(base, self.workdir / "trees" / "verify")
        apply_patch(tree, patch)
        sandbox = self._open_sandbox(tree, plan, repo, exports_patch=False)
        after = run_suite(sandbox, plan, timeout_s=self.settings.command_timeout_s)
        verdict = compare(before.report, after.report)
        reasons = list(verdict.reasons)
        if not patch.strip():
            reasons.insert(0, "the model made no changes")
        reasons += [f"{f.path}: {f.detail}" for f in findings]
        web = self._check_web(sandbox, tree, repo)
        if web is not None and not web.ok:
            reasons.append(web.reason)
        verified = (
            verdict.verified and not findings and bool(patch.strip()) and (web is None or web.ok)
        )
        evidence = _evidence(plan, before, after, verdict, findings, reasons, verified, web)
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
        self.events.enter("deliver")
        source = self.request.source
        if self.request.dry_run or is_git_url(source):
            why = "dry run" if self.request.dry_run else "the source is a URL"
            self.events.leave("deliver", "skipped", reason=f"{why}: the patch is in the result")
            return
        target = Path(source).expanduser().resolve()
        try:
            stat = apply_patch(target, patch)
        except WorkspaceError as exc:
            # Verified but not applicable (the working tree changed meanwhile): keep the
            # patch in the result and leave the working tree exactly as it was.
            self.events.leave("deliver", "failed", reason=str(exc))
            self.result.message += f"; the patch could not be applied to {target}: {exc}"
            return
        self.result.applied = True
        files = stat.strip().splitlines()
        self.events.leave("deliver", "applied", path=str(target), files=files[-1:] if files else [])

    # -- housekeeping ------------------------------------------------------------------


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
        "after_output": truncate_middle(after.result.output, 4_000),
        "web": web.to_dict() if web is not None else None,
    }
