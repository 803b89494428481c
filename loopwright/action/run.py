"""The Action's run: the secrets hand-off, the sandbox and settings, and the fix mission
from the plan to delivery."""

from __future__ import annotations

import gc
import os
import sys
import uuid
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from loopwright.action.plan import (
    _INPUT_SETTINGS,
    _PRIVILEGED_EVENTS,
    EXIT_USAGE,
    TOOLCHAIN_VARIABLES,
    ActionEnv,
    Refuse,
    Target,
    UsageError,
    _fork_refusal,
    _full_name,
    _mapping,
    _pull_number,
    plan_event,
)
from loopwright.action.report import Outcome, StageGroups, _save_artifacts, report
from loopwright.config import ConfigError, Settings
from loopwright.events import EventBus, EventSink, NdjsonWriter
from loopwright.github import render
from loopwright.github.delivery import GitHubDelivery
from loopwright.github.gitops import clone_at
from loopwright.github.service import GitHubError, RepoSession, token_session
from loopwright.github.tracking import Outcome as TrackedOutcome
from loopwright.github.tracking import Tracking, TrackingComment
from loopwright.github.triggers import (
    Ignore,
    NeedsPermission,
    Reply,
    TriggerContext,
    authorize,
)
from loopwright.hostpython import own_python
from loopwright.instructions import RepoInstructions
from loopwright.missions.delivery import DeliveryOutcome
from loopwright.missions.fix import FixMission, FixRequest
from loopwright.missions.progress import ProgressPrinter
from loopwright.missions.result import MissionResult
from loopwright.redaction import Redactor
from loopwright.repo_config import RepoConfig, load_repo_config
from loopwright.request import MissionRequest
from loopwright.sandbox.base import SandboxError, SandboxProvider
from loopwright.sandbox.factory import get_provider, sandbox_config
from loopwright.sandbox.hosttree import discard_tree
from loopwright.sandbox.workspace import WorkspaceError
from loopwright.secret_env import SECRET_VARIABLES, HandoffError, restart_without_secrets

# -- the secrets hand-off ------------------------------------------------------------------


def start() -> int:
    """`python -m loopwright.action`: secrets never stay in this process's environment
    block, where a command of the local sandbox could read them (see `secret_env`)."""
    try:
        # own_python: the working directory is the repository's checkout; a `loopwright/`
        # directory there must never be what `-m` runs (action.yml starts this with -P too).
        env = restart_without_secrets(own_python("-m", "loopwright.action"))
    except HandoffError as exc:
        print(f"loopwright: {exc}", file=sys.stderr)
        return EXIT_USAGE
    code = main(env)
    gc.freeze()  # as `loopwright`'s entry: the closing collections skip what the run made
    return code


# -- the run -------------------------------------------------------------------------------


def main(environ: Mapping[str, str] | None = None) -> int:
    env = dict(os.environ if environ is None else environ)
    try:
        action = ActionEnv.from_environ(env)
        settings = action_settings(env, action)
    except (UsageError, ConfigError) as exc:
        print(f"loopwright: {exc}", file=sys.stderr)
        return EXIT_USAGE
    redactor = Redactor([*settings.secrets(), action.token, *_secret_values(env)])
    action.artifact_dir.mkdir(parents=True, exist_ok=True)
    try:
        outcome = ActionRun(action, settings, redactor, env).run()
    except UsageError as exc:
        print(f"loopwright: {redactor.text(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    report(action, outcome, redactor)
    return outcome.exit_code


def docker_engine_problem() -> str | None:
    """Why no Docker engine is usable on this runner, or None when one answers."""
    try:
        import docker
        import requests.exceptions
    except ImportError as exc:
        return f"the docker package is not installed: {exc}"
    try:
        client = docker.from_env(version="auto", timeout=5)
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        return str(exc) or type(exc).__name__
    try:
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        return str(exc) or type(exc).__name__
    finally:
        client.close()
    return None


def choose_sandbox(choice: str, problem: Callable[[], str | None] = docker_engine_problem) -> str:
    """`docker` or `local` for the `sandbox` input; `auto` picks Docker when it is reachable,
    and says so on the job's log either way (a notice annotation when it falls back)."""
    if choice != "auto":
        return choice
    why = problem()
    if why is None:
        print("loopwright: a Docker engine is reachable; model commands run in the Docker sandbox")
        return "docker"
    reason = " ".join(why.split())[:200]
    print(
        "::notice title=Loopwright sandbox::No Docker engine is reachable on this runner "
        f"({reason}), so model commands run in the local sandbox: on the runner itself, "
        "with a scrubbed environment. Start Docker on the runner (or set sandbox: docker to "
        "require it) for the isolated sandbox.",
        flush=True,
    )
    return "local"


def action_settings(env: Mapping[str, str], action: ActionEnv) -> Settings:
    """Settings from `LOOPWRIGHT_*` variables, overridden by the action's inputs."""
    values = {k: v for k, v in env.items() if k.startswith("LOOPWRIGHT_")}
    values.setdefault("LOOPWRIGHT_DATA_DIR", str(action.runner_temp / "loopwright-data"))
    for name, setting in _INPUT_SETTINGS.items():
        value = (env.get(name) or "").strip()
        if value:
            values[setting] = value
    choice = (env.get("INPUT_SANDBOX") or "").strip() or values.get("LOOPWRIGHT_SANDBOX", "auto")
    values["LOOPWRIGHT_SANDBOX"] = choose_sandbox(choice.strip())
    settings = Settings.from_env(values)
    if settings.model_api_key is None and "tokenfactory.nebius.com" in settings.model_base_url:
        raise UsageError(
            "the model-api-key input is empty; pass a Nebius Token Factory key from a secret "
            "(model-api-key: ${{ secrets.LOOPWRIGHT_MODEL_API_KEY }}) or set model-base-url "
            "to another OpenAI-compatible endpoint"
        )
    return settings


def toolchain_env(env: Mapping[str, str]) -> dict[str, str]:
    """The toolchain variables a local sandbox command may see besides PATH (no secrets)."""
    return {name: env[name] for name in TOOLCHAIN_VARIABLES if env.get(name)}


def _secret_values(env: Mapping[str, str]) -> list[str]:
    return [env[name] for name in SECRET_VARIABLES if env.get(name)]


class ActionRun:
    def __init__(
        self, action: ActionEnv, settings: Settings, redactor: Redactor, env: Mapping[str, str]
    ) -> None:
        self.action = action
        self.settings = settings
        self.redactor = redactor
        self.env = env
        self.mission_id = uuid.uuid4().hex[:12]
        self.scratch = action.runner_temp / f"loopwright-{self.mission_id}"
        self.tracker: TrackingComment | None = None

    def run(self) -> Outcome:
        plan = plan_event(self.action)
        if isinstance(plan, Refuse):
            return Outcome("refused", plan.reason)
        if isinstance(plan, Ignore):
            return Outcome("ignored", plan.reason)
        session = token_session(self.action.token, self.action.repository, self.action.api_url)
        try:
            if isinstance(plan, Reply):
                session.comment(plan.issue_number, plan.body)
                return Outcome("refused", plan.body)
            if isinstance(plan, NeedsPermission):
                admitted = self._authorize(plan, session)
                if not isinstance(admitted, Target):
                    return admitted
                plan = admitted
            # The event file is a file of the job's that an earlier step (the pull request's
            # own tests) can rewrite: the URL the token goes to comes from the API, and so do
            # the pull request's head, base and fork status.
            plan = Target(replace(plan.request, clone_url=session.clone_url()), plan.from_workspace)
            if plan.from_workspace and plan.request.pr_number:
                pinned = self._pin_pull(plan, session)
                if not isinstance(pinned, Target):
                    return pinned
                plan = pinned
            self._check_delivery(plan.request)
            config = self._config(plan, session)
            if plan.request.trigger == "comment" and not self.action.dry_run:
                self._track(plan.request, session)
            return self._fix(plan, session, config)
        except (GitHubError, WorkspaceError) as exc:
            if self.tracker is not None:
                self.tracker.finish(TrackedOutcome("error", message=self.redactor.text(str(exc))))
            return Outcome("error", str(exc))
        finally:
            if self.tracker is not None and not self.tracker.finished:
                self.tracker.finish(
                    TrackedOutcome("error", message="the mission stopped unexpectedly")
                )
            discard_tree(self.scratch)

    def _track(self, request: MissionRequest, session: RepoSession) -> None:
        """👀 on the command and the App's tracking comment, before anything is cloned; what
        GitHub refuses here is a warning, not the end of the fix."""
        if request.comment_id is not None:
            try:
                session.react(request.comment_id, "eyes")
            except GitHubError as exc:
                print(f"loopwright: warning: {exc}", file=sys.stderr)
        if not request.pr_number:
            return
        tracker = TrackingComment(
            session,
            request.pr_number,
            Tracking(
                mission=self.mission_id,
                head_sha=request.head_sha,
                actor=request.actor,
                live_url=self.action.run_url,
            ),
            self.redactor,
            interval_s=self.settings.github.comment_interval_s,
        )
        try:
            tracker.post()
        except GitHubError as exc:
            print(f"loopwright: warning: no tracking comment: {exc}", file=sys.stderr)
            return
        self.tracker = tracker

    def _authorize(self, pending: NeedsPermission, session: RepoSession) -> Target | Outcome:
        allowed = {u.lower() for u in self.action.allowed_users}
        if allowed and pending.user.lower() not in allowed:
            # Refused in the log only: a comment per unlisted commenter would let anyone make
            # the workflow write to the pull request.
            print(
                f"loopwright: {pending.user} is not in allowed-users; nothing done",
                file=sys.stderr,
            )
            return Outcome(
                "refused",
                f"{pending.user} is not in allowed-users ({', '.join(self.action.allowed_users)})",
            )
        # The collaborator-permission endpoint decides, before anything else is read or run.
        permission = session.permission(pending.user)
        if permission not in ("write", "maintain", "admin"):
            session.comment(
                pending.request.pr_number or 0, render.refusal_comment(pending.user, permission)
            )
            return Outcome(
                "refused",
                f"{pending.user} has {permission} permission on {self.action.repository}; "
                "only write, maintain or admin may ask for a fix",
            )
        pull = session.pull_data(pending.request.pr_number or 0)
        decision = authorize(pending, permission, pull, TriggerContext())
        if isinstance(decision, Reply):
            if pending.request.comment_id is not None:
                try:
                    session.react(pending.request.comment_id, "eyes")
                except GitHubError as exc:
                    print(f"loopwright: warning: {exc}", file=sys.stderr)
            session.comment(decision.issue_number, decision.body)
            return Outcome("refused", decision.body)
        if isinstance(decision, Ignore):
            return Outcome("ignored", decision.reason)
        # Adding commits to Loopwright's own pull request is the App's (it checks who
        # committed there first); the Action delivers as it was configured to.
        return Target(replace(decision, iterate=False), from_workspace=False)

    def _pin_pull(self, plan: Target, session: RepoSession) -> Target | Outcome:
        """The pull request as the API shows it, not as the event file claims: the number
        from GITHUB_REF where GitHub puts it there (`refs/pull/N/merge`), then head, base
        and whether the head is a fork read back from the REST API."""
        number = _pull_number(self.action.ref) or plan.request.pr_number or 0
        pull = session.pull_data(number)
        head, base = _mapping(pull.get("head")), _mapping(pull.get("base"))
        head_repo = _full_name(head.get("repo"))
        fork = head_repo != (_full_name(base.get("repo")) or self.action.repository)
        if fork and self.action.event_name in _PRIVILEGED_EVENTS:
            return Outcome("refused", _fork_refusal(self.action.event_name, head_repo))
        head_sha, head_ref, base_ref = head.get("sha"), head.get("ref"), base.get("ref")
        if not all(isinstance(v, str) and v for v in (head_sha, head_ref, base_ref)):
            return Outcome("error", f"pull request #{number} as GitHub returns it has no head")
        return Target(
            replace(
                plan.request,
                pr_number=number,
                head_sha=str(head_sha),
                head_ref=str(head_ref),
                base_ref=str(base_ref),
                fork=fork,
                head_repo=head_repo if fork else None,
            ),
            plan.from_workspace,
        )

    def _check_delivery(self, request: MissionRequest) -> None:
        if self.action.deliver == "comment" and not request.pr_number:
            raise UsageError(
                f"deliver: comment needs a pull request, and this {self.action.event_name} "
                "event has none; use pull-request or commit"
            )
        if self.action.deliver == "commit" and not request.head_ref:
            raise UsageError(
                f"deliver: commit needs a branch, and {request.head_sha[:12]} is on none "
                "(a tag or a detached ref); use pull-request"
            )

    def _config(self, plan: Target, session: RepoSession) -> RepoConfig:
        """The default branch's config (SECURITY #21); see the module docstring."""
        try:
            return session.read_config()
        except GitHubError as exc:
            pull_code = plan.request.pr_number is not None and plan.from_workspace
            if pull_code or not (self.action.workspace / ".git").exists():
                print(
                    f"loopwright: warning: {exc}; using the built-in rules (a pull request's "
                    "own config is never trusted)",
                    file=sys.stderr,
                )
                return RepoConfig()
            print(f"loopwright: warning: {exc}; reading the workspace's config", file=sys.stderr)
            return load_repo_config(self.action.workspace)
        except ConfigError as exc:
            raise UsageError(f"invalid configuration on the default branch: {exc}") from None

    def _instructions(self, session: RepoSession) -> RepoInstructions | None:
        """The default branch's AGENTS.md (or CLAUDE.md, ...), never the workspace's: the
        workspace may be the pull request's head. Without it the mission runs without."""
        try:
            return session.read_instructions()
        except GitHubError as exc:
            print(f"loopwright: warning: {exc}; no repository instructions", file=sys.stderr)
            return None

    def _fix(self, plan: Target, session: RepoSession, config: RepoConfig) -> Outcome:
        request = plan.request
        if self.action.guidance:
            guidance = "\n\n".join(g for g in (self.action.guidance, request.guidance) if g)
            request = replace(request, guidance=guidance)
        settings = config.narrow(self.settings)
        if plan.from_workspace:
            if not (self.action.workspace / ".git").exists():
                raise UsageError(
                    f"{self.action.workspace} is not a git checkout; run actions/checkout "
                    "before Loopwright"
                )
            source = self.action.workspace
        else:
            source = clone_at(
                request.clone_url, request.head_sha, self.scratch / "checkout", session.token
            )
        with ExitStack() as stack:
            writer = NdjsonWriter(self.action.artifact_dir / "events.ndjson")
            stack.callback(writer.close)
            groups = StageGroups(sys.stderr)
            stack.callback(groups.close)
            sinks: list[EventSink] = [writer, groups, ProgressPrinter(sys.stderr, color=False)]
            if self.tracker is not None:
                sinks.append(self.tracker.sink)
            bus = EventBus(self.mission_id, sinks, self.redactor)
            provider = self._provider(settings)
            stack.callback(provider.close)
            from loopwright.agent.model import OpenAIModel

            model = OpenAIModel(settings)
            stack.callback(model.close)

            def checkout() -> Path:
                # The model only ever worked on copies: `source` is untouched. For the
                # workspace, delivery still uses its own clone, with git hooks off, at the
                # pinned commit.
                if not plan.from_workspace:
                    return source
                return clone_at(
                    request.clone_url, request.head_sha, self.scratch / "checkout", session.token
                )

            delivery = GitHubDelivery(
                request=request,
                session=session,
                checkout=checkout,
                bus=bus,
                redactor=self.redactor,
                mission_url=self.action.run_url,
                mode=self.action.deliver,
                # The run page has no address for one artifact file, so the body does not
                # link the screenshot; it is in the artifact.
                link_screenshot=False,
                tracked=self.tracker is not None,
            )
            result = FixMission(
                FixRequest(
                    source=str(source),
                    test_cmd=self.action.test_command,
                    setup_cmd=self.action.setup_command,
                    guidance=request.guidance,
                    mission_id=self.mission_id,
                    repo_config=config,
                    instructions=self._instructions(session),
                ),
                settings=settings,
                provider=provider,
                model=model,
                events=bus,
                deliver=_dry_run if self.action.dry_run else delivery,
            ).run()
            _save_artifacts(self.action.artifact_dir, result, self.redactor)
        if self.tracker is not None:
            delivered = delivery.delivered
            self.tracker.finish(
                TrackedOutcome.from_result(
                    result.to_dict(),
                    kind=delivered.kind,
                    url=delivered.url,
                    reason=delivered.reason,
                )
            )
        if result.status != "verified" or self.action.dry_run:
            return Outcome(result.status, result.message, result, dry_run=self.action.dry_run)
        delivered = delivery.delivered
        if delivered.kind == "failed":
            return Outcome("error", delivered.reason, result, delivered)
        message = result.message
        if delivered.kind == "skipped":
            message += f"; not delivered: {delivered.reason}"
        return Outcome(result.status, message, result, delivered)

    def _provider(self, settings: Settings) -> SandboxProvider:
        # The environment of local commands is built from an allow-list (PATH, a private
        # HOME and TMPDIR, ...); only toolchain locations are added here.
        config = sandbox_config(
            settings, base_dir=self.scratch / "sandboxes", extra_env=toolchain_env(self.env)
        )
        try:
            return get_provider(settings, config)
        except SandboxError as exc:
            raise UsageError(f"sandbox: docker is not usable on this runner: {exc}") from None


def _dry_run(result: MissionResult) -> DeliveryOutcome:
    reason = "dry-run: nothing delivered; the patch is in the artifact directory"
    return DeliveryOutcome("skipped", {"reason": reason}, note=reason)
