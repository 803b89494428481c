"""A fix's loop stage: the task the model starts from, and the attempts on the model tiers.

The tiers LOOPWRIGHT_ATTEMPTS names (in order, cheapest first) each get independent
attempts: a loop of its own on that one tier, with the attempt step limit and a seed per
attempt. An attempt counts only when the model finished AND the test command passes in the
loop's sandbox; the workspace is put back to the base tree before the next one. The tiers
left then run as one loop that escalates through them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from loopwright.agent.change_review import ChangeReview
from loopwright.agent.context import Conversation
from loopwright.agent.localize import Reader, source_excerpts
from loopwright.agent.loop import AgentLoop, LoopResult, leave_loop_stage
from loopwright.agent.model import Sampling
from loopwright.agent.policy import AskRules
from loopwright.agent.prompts import SYSTEM, change_task, fix_task
from loopwright.agent.scope import fix_scope
from loopwright.agent.testguard import TestEditGuard
from loopwright.agent.tools import Toolbox
from loopwright.clip import truncate_middle
from loopwright.config import NetworkMode, Settings
from loopwright.events import EventBus
from loopwright.instructions import RepoInstructions
from loopwright.missions.base import MissionFailed, timed_phase
from loopwright.missions.trees import (
    changed_files,
    patch_path_problem,
    read_text,
    restore_base,
    tree_files,
)
from loopwright.protected_paths import DEFAULT_PROTECTED_PATHS
from loopwright.repo_config import RepoConfig
from loopwright.sandbox.base import FileToolError, Sandbox, SandboxError
from loopwright.sandbox.workspace import PatchTooLarge, export_patch
from loopwright.verify.detect import TestPlan
from loopwright.verify.runner import SuiteRun, run_suite


class LoopFactory(Protocol):
    """Builds the model's loop over a toolbox, as `Mission.agent_loop` does."""

    def __call__(
        self,
        toolbox: Toolbox,
        conversation: Conversation,
        *,
        settings: Settings | None = None,
        step_limit: int | None = None,
        sampling: Sampling | None = None,
        stages: tuple[bool, bool] = (True, True),
    ) -> AgentLoop: ...


@dataclass(frozen=True)
class LoopEnd:
    """The loop whose work the mission adopts: how it ended and the patch it left."""

    loop: AgentLoop
    toolbox: Toolbox
    outcome: LoopResult
    patch: str


def first_task(
    sandbox: Sandbox,
    plan: TestPlan,
    before: SuiteRun,
    *,
    guidance: str | None,
    instructions: RepoInstructions | None,
) -> str:
    """The task every attempt starts from: the change the guidance asks for when the suite
    already passes, otherwise the failing run, with excerpts of the source it points at."""
    if _passes(before):
        return change_task(plan.command, guidance or "", instructions)
    return fix_task(
        plan.command,
        sorted(before.report.failing()),
        truncate_middle(before.result.output, 6_000),
        guidance,
        instructions,
        source=source_excerpts(before.result.output, _reader(sandbox)),
    )


class Attempts:
    """Runs a fix's loop stage in the loop's sandbox, which holds the base tree."""

    def __init__(
        self,
        sandbox: Sandbox,
        base: Path,
        plan: TestPlan,
        repo: RepoConfig,
        before: SuiteRun,
        *,
        task: str,
        settings: Settings,
        events: EventBus,
        agent_loop: LoopFactory,
        records: list[dict[str, Any]],
        ask_rules: AskRules | None = None,
        network_on: bool = False,
    ) -> None:
        """`records` receives one entry per attempt (tier, number, seed, passed, steps);
        `ask_rules` (pair mode) names the actions that wait for a person's decision, and
        `network_on` says the loop's sandbox keeps its network."""
        self.ask_rules = ask_rules
        self.network_on = network_on
        self.sandbox = sandbox
        self.base = base
        self.plan = plan
        self.repo = repo
        self.before = before
        self.task = task
        self.settings = settings
        self.events = events
        self.agent_loop = agent_loop
        self.records = records
        self._guard: TestEditGuard | None = None
        self._scope: tuple[frozenset[str] | None] | None = None

    def run(self) -> LoopEnd:
        """The attempts on the tiers that have several, then one escalating loop over the
        rest; returns the first attempt that passed, or the one that used up the budget or
        the tiers, or else the escalating loop."""
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
                    settings=self.settings.with_overrides(tiers=(tier,)),
                    step_limit=self.settings.attempt_steps,
                    sampling=Sampling(self.settings.attempt_temperature, seed),
                    stages=(not entered, last),
                )
                entered = True
                outcome = loop.run()
                try:
                    patch = self._export()
                except PatchTooLarge as exc:
                    if last:
                        raise MissionFailed("unverified", str(exc)) from exc
                    # This attempt failed; the next starts from the base again.
                    patch, passed, why, changed = "", False, str(exc), exc.paths
                else:
                    passed, why = self._passed(outcome, patch)
                    changed = tuple(path for path, _status in changed_files(patch))
                self.records.append(
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
                    return LoopEnd(loop, toolbox, outcome, patch)
                restore_base(
                    self.sandbox, self.base, changed, timeout_s=self.settings.command_timeout_s
                )
        loop, toolbox = self._loop(
            settings=self.settings.with_overrides(tiers=tiers[first:]),
            stages=(not entered, True),
        )
        outcome = loop.run()
        try:
            patch = self._export()
        except PatchTooLarge as exc:
            raise MissionFailed("unverified", str(exc)) from exc
        return LoopEnd(loop, toolbox, outcome, patch)

    def _loop(
        self,
        *,
        settings: Settings,
        stages: tuple[bool, bool],
        step_limit: int | None = None,
        sampling: Sampling | None = None,
    ) -> tuple[AgentLoop, Toolbox]:
        repo, plan, before = self.repo, self.plan, self.before
        protected = (
            repo.protected_paths if repo.protected_paths is not None else DEFAULT_PROTECTED_PATHS
        )
        toolbox = Toolbox(
            self.sandbox,
            command_timeout_s=self.settings.command_timeout_s,
            protected_paths=protected,
            test_command=plan.command,
            test_guard=self._test_guard(),
            ask_rules=self.ask_rules,
            network_on=self.network_on,
            review=self._review(),
        )
        conversation = Conversation(
            system=SYSTEM, task=self.task, context_tokens=self.settings.context_tokens
        )
        # The fix task quotes the failing run; a change task (the suite passes) does not.
        conversation.set_latest_test(
            plan.command,
            before.result.exit_code,
            before.result.output,
            in_task=not _passes(before),
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

    def _test_guard(self) -> TestEditGuard:
        """The tool-side copy of verification's test routing, for the base tree (built once:
        every loop and attempt starts from the same base)."""
        if self._guard is None:
            base, plan = self.base, self.plan
            self._guard = TestEditGuard.for_tree(
                tree_files(base),
                lambda rel: read_text(base, rel),
                test_command=plan.command,
                setup_command=plan.setup,
                test_script=plan.script,
                allow_test_edits=self.repo.allow_test_edits,
            )
        return self._guard

    def _review(self) -> ChangeReview | None:
        """Pair mode's review of the whole change at `finish`, one per loop (a person's
        approvals hold for the loop they were made in)."""
        if self.ask_rules is None:
            return None
        if self._scope is None:
            self._scope = (_scope_of(self.before, self.base),)
        sandbox, base = self.sandbox, self.base
        return ChangeReview(
            lambda: export_patch(sandbox, timeout_s=120, base=base), self.ask_rules, self._scope[0]
        )

    def _export(self) -> str:
        with timed_phase(self.events, "patch_export"):
            return export_patch(self.sandbox, timeout_s=120, base=self.base)

    def _passed(self, outcome: LoopResult, patch: str) -> tuple[bool, str]:
        """Whether an attempt is worth verifying: the model finished with a change and the
        test command now passes in the loop's sandbox."""
        if outcome.outcome != "finished":
            return False, outcome.reason or "the attempt ended without finish"
        if not patch.strip():
            return False, "the attempt finished without changing anything"
        unfit = patch_path_problem(patch)
        if unfit is not None:
            return False, unfit
        check = run_suite(self.sandbox, self.plan, timeout_s=self.settings.command_timeout_s)
        if _passes(check):
            return True, ""
        failing = sorted(check.report.failing())
        named = f": {', '.join(failing[:5])}" if failing else ""
        code = check.result.exit_code
        return False, f"the tests still fail after the attempt (exit {code}){named}"


def _scope_of(before: SuiteRun, base: Path) -> frozenset[str] | None:
    """The files a fix of the failing run may change without asking (pair mode)."""
    return fix_scope(
        before.report.failing(),
        before.result.output,
        tree_files(base),
        lambda rel: read_text(base, rel),
    )


def ask_rules(repo: RepoConfig, *, network: NetworkMode, isolated: bool = True) -> AskRules:
    """Pair mode's classes of actions that ask first, as the repository config sets them.

    `network` is the mission's sandbox network (`effective_network`). With `none` a
    command that needs the network is not asked about: an approval would attach a network
    the operator's or the repository's setting forbids, so the command runs without one, as
    it does without pair mode. `isolated` is False for the local sandbox, which cannot
    attach a network to one command.
    """
    return AskRules(
        network=repo.ask_network and network != "none",
        max_removals=repo.ask_removals,
        ask_paths=repo.ask_paths,
        network_isolated=isolated,
        outside_scope=repo.ask_outside_scope,
    )


def _passes(run: SuiteRun) -> bool:
    return run.result.ok and not run.report.failing()


def _reader(sandbox: Sandbox) -> Reader:
    """Reads workspace files for the first prompt's source excerpts; a file the sandbox
    refuses or cannot find is skipped."""

    def read(path: str) -> bytes | None:
        try:
            return sandbox.read_file(path)
        except (FileToolError, SandboxError):
            return None

    return read
