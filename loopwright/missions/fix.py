"""One fix mission from start to verdict: prepare → plan → loop → verify → deliver.

This module supplies a fix's stages; `missions.base` runs them and owns cleanup, and each
stage's logic lives in its own module (sandbox, agent, verify; the loop's attempts on the
model tiers in `missions.attempts`).

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

from loopwright.agent.model import Model
from loopwright.agent.pair import PairMode
from loopwright.cancellation import Cancellation
from loopwright.clip import truncate_middle
from loopwright.config import Settings, effective_network
from loopwright.events import EventBus, PhaseName
from loopwright.instructions import RepoInstructions, read_tree_instructions
from loopwright.missions.attempts import Attempts, LoopEnd, ask_rules, first_task
from loopwright.missions.base import Mission, MissionFailed, account, timed_phase
from loopwright.missions.delivery import Deliverer, apply_locally
from loopwright.missions.reproduction import Flaky, reproduce
from loopwright.missions.result import MissionResult
from loopwright.missions.standby import Standby
from loopwright.missions.trees import patch_path_problem, write_into_sandbox, write_into_tree
from loopwright.missions.verification import (
    VerificationLayout,
    plan_verification,
    run_new_tests,
    setup_phase,
    verification_evidence,
)
from loopwright.protected_paths import DEFAULT_PROTECTED_PATHS
from loopwright.repo_config import RepoConfig, load_repo_config
from loopwright.sandbox.base import ExecResult, Sandbox, SandboxProvider
from loopwright.sandbox.workspace import (
    clone,
    copy_tree,
    is_git_url,
    patched_copy,
    prepare_sandbox_repo,
    snapshot,
    without_credentials,
)
from loopwright.verify.compare import compare
from loopwright.verify.detect import TestPlan, detect_tests
from loopwright.verify.runner import (
    SuiteRun,
    key_file,
    needs_key,
    place_key,
    place_key_in_tree,
    run_suite,
)
from loopwright.verify.stream import StreamKey
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
        pair: PairMode | None = None,
    ) -> None:
        """`pair` is on for every loop when `pair.always`, else where the repository
        config sets `pair: true`."""
        super().__init__(
            MissionResult(request.mission_id, "error"),
            settings=settings,
            provider=provider,
            model=model,
            events=events,
            clock=clock,
            cancellation=cancellation,
            pair=pair,
        )
        self.request = request
        self.deliverer = deliver
        self.instructions = request.instructions
        self.standby: Standby | None = None
        """Verification's sandbox, started while the loop runs."""

    # -- the stages --------------------------------------------------------------------

    def stages(self) -> None:
        check = self.cancellation.check
        check()
        base, repo, plan = self._prepare_tree()
        check()
        before = self._reproduce(base, plan, repo)
        check()
        self.standby = self._start_verification_sandbox(base, plan, repo)
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

    def _start_verification_sandbox(self, base: Path, plan: TestPlan, repo: RepoConfig) -> Standby:
        """Start verification's sandbox now, so it is up when the loop ends: the base tree,
        with the setup network when setup will run there (on the base tree's inputs) and
        none otherwise. Without setup nothing but the suite will ever run in it, so the
        suite's run key can be placed at once."""
        if plan.setup:
            network = effective_network(self.settings.network, repo.network)
            return Standby(self.sandboxes, base, network=network != "none")
        return Standby(
            self.sandboxes, base, network=False, prepare=place_key if needs_key(plan) else None
        )

    def _take_standby(self) -> tuple[Sandbox, StreamKey | None] | None:
        return self.standby.take() if self.standby is not None else None

    def _sandbox_evidence(self, taken: object) -> dict[str, str]:
        """How verification got its sandbox, for the evidence's `apply` phase."""
        where = "started_during_loop" if taken is not None else "started_at_verify"
        note = self.standby.problem if self.standby is not None else ""
        return {"sandbox": where, **({"sandbox_note": note} if note else {})}

    def _change_requested(self) -> bool:
        return self.request.change_requested and bool((self.request.guidance or "").strip())

    def _fix(self, plan: TestPlan, before: SuiteRun, repo: RepoConfig) -> tuple[str, str]:
        """The loop, as the attempts `missions.attempts` runs in the reproduction's sandbox;
        the mission adopts the loop they end with."""
        sandbox = self.sandboxes.opened[-1]
        pair = self.pair
        self.pair_on = pair if pair is not None and (pair.always or repo.pair) else None
        network = effective_network(self.settings.network, repo.network)
        network_on = network == "always"
        attempts = Attempts(
            sandbox,
            self.workdir / "trees" / "base",
            plan,
            repo,
            before,
            task=first_task(
                sandbox,
                plan,
                before,
                guidance=self.request.guidance,
                instructions=self.instructions,
            ),
            settings=self.settings,
            events=self.events,
            agent_loop=self.agent_loop,
            records=self.result.attempts,
            ask_rules=(
                ask_rules(repo, network=network, isolated=self.settings.sandbox != "local")
                if self.pair_on is not None
                else None
            ),
            network_on=network_on,
        )
        if self.pair_on is None:
            return self._adopt(attempts.run())
        self.pair_on.channel.taking_guidance(True)
        try:
            end = attempts.run()
        finally:
            self.pair_on.channel.taking_guidance(False)
        return self._adopt(end)

    def _adopt(self, end: LoopEnd) -> tuple[str, str]:
        self.result.final_tier = end.loop.escalation.current
        self.result.plan = [{"step": i.step, "status": i.status} for i in end.toolbox.plan]
        self.result.title = end.toolbox.title or ""
        self.result.patch = end.patch
        if end.outcome.outcome in ("budget_exceeded", "attempt_exhausted"):
            raise MissionFailed("budget_exceeded", end.outcome.reason)
        return end.outcome.summary, end.patch

    def _verify(
        self, base: Path, plan: TestPlan, repo: RepoConfig, before: SuiteRun, patch: str
    ) -> None:
        """Judge the patch with the ORIGINAL tests: a sandbox of the base tree runs setup on
        the base tree's inputs, loses its network, and only then receives the patch's
        product changes; test and test-configuration changes stay out unless the repository
        allows them, and new test files run in a separate pass."""
        self.events.enter("verify")
        unfit = patch_path_problem(patch)
        if unfit is not None:
            # Refused before a copy of the tree is made: the host never walks such a path.
            self.events.leave("verify", "unverified")
            raise MissionFailed("unverified", unfit)
        protected = (
            repo.protected_paths if repo.protected_paths is not None else DEFAULT_PROTECTED_PATHS
        )
        tamper = tamper_findings(patch, allow_test_edits=repo.allow_test_edits, protected=protected)
        patched = patched_copy(base, self.workdir / "trees" / "verify", patch)
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
        key: StreamKey | None = None
        if plan.setup:
            with timed_phase(self.events, "verify_sandbox"):
                taken = self._take_standby()
                if taken is not None:
                    sandbox = taken[0]
                else:
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
            # Nothing runs before the tests, so the sandbox holds no network and the run's key
            # is already in it: either the one started during the loop (the patch's files
            # are written into it now) or a new one from the filtered tree.
            with timed_phase(self.events, "verify_sandbox"):
                taken = self._take_standby()
                if taken is not None:
                    sandbox, key = taken
                    write_into_sandbox(
                        sandbox, patched, [*dependency, *main], base=base, timeout_s=timeout
                    )
                else:
                    sandbox, key = self._filtered_sandbox(base, patched, plan, layout)
            main = [*dependency, *main]
        phases.append(
            {
                "phase": "apply",
                "files": [r.path for r in main],
                "network": "none",
                **self._sandbox_evidence(taken),
            }
        )
        with timed_phase(self.events, "verify_tests"):
            after = run_suite(sandbox, plan, timeout_s=timeout, key=key)
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

    def _filtered_sandbox(
        self, base: Path, patched: Path, plan: TestPlan, layout: VerificationLayout
    ) -> tuple[Sandbox, StreamKey | None]:
        """A new sandbox holding the base tree plus the patch's product changes, without a
        network, its run key copied in with the tree."""
        tree = copy_tree(base, self.workdir / "trees" / "verify-filtered")
        write_into_tree(tree, patched, [*layout.phase("dependency"), *layout.phase("main")])
        key = place_key_in_tree(tree) if needs_key(plan) else None
        try:
            sandbox = self.sandboxes.open(tree, network=False)
        finally:
            if key is not None:
                (tree / key_file(key)).unlink()
        return sandbox, key

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
