"""The GitHub Action's entrypoint (`python -m loopwright.action`): one fix mission in a workflow.

It reads the Actions environment (the event payload, the repository, the workspace, the
`INPUT_*` variables `action/action.yml` sets), decides what to fix, refuses what it must
refuse before any model call (a fork head under `pull_request_target` or `workflow_run`, a
`/loopwright fix` comment from someone without write access), runs `FixMission`, delivers a
verified fix with the shared delivery code and the workflow's token, and writes the step
outputs, the step summary and an artifact directory (event log, result, patch, screenshot).

Where the tree and the rules come from, per event:

- `workflow_run` and `issue_comment` run in the default branch's context, so the tree is a
  fresh clone at the pinned head commit (the failing run's, or the pull request's head read
  when the command was authorized); the same clean clone receives the patch for delivery.
- `pull_request`, `pull_request_target`, `push`, `workflow_dispatch` and other events are
  a step after a failing test step in the same job: the workspace, as the job left it, is
  the tree (the mission copies it; nothing is run in it), and a clean clone at the head
  commit receives the patch.
- The repository config always comes from the default branch through the API; only when
  that is unreadable and the workspace is not pull-request code is the workspace's used.

Exit codes: 0 when a fix was verified and delivered, or the event asks for nothing; 1 for
every other outcome, refusals included; 2 for usage and configuration errors.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import uuid
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from loopwright.config import ConfigError, RepoConfig, Settings, load_repo_config
from loopwright.events import Event, EventBus, EventSink, NdjsonWriter
from loopwright.github import render
from loopwright.github.delivery import Delivered, DeliveryMode, GitHubDelivery
from loopwright.github.gitops import clone_at
from loopwright.github.service import GitHubError, RepoSession, token_session
from loopwright.github.tracking import Outcome as TrackedOutcome
from loopwright.github.tracking import Tracking, TrackingComment
from loopwright.github.triggers import (
    CommandComment,
    Ignore,
    NeedsPermission,
    Reply,
    TriggerContext,
    authorize,
    decide,
)
from loopwright.instructions import RepoInstructions
from loopwright.missions.fix import DeliveryOutcome, FixMission, FixRequest, MissionResult
from loopwright.missions.progress import ProgressPrinter
from loopwright.redaction import Redactor
from loopwright.request import MissionRequest
from loopwright.sandbox.base import SandboxError, SandboxProvider
from loopwright.sandbox.workspace import WorkspaceError
from loopwright.secret_env import SECRET_VARIABLES, HandoffError, restart_without_secrets

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DELIVERY_MODES: tuple[DeliveryMode, ...] = ("pull-request", "commit", "comment")
SANDBOXES = ("auto", "docker", "local")
"""`auto`: the Docker sandbox when an engine is reachable on the runner, else `local`."""
TOOLCHAIN_VARIABLES = (
    "JAVA_HOME",
    "GOROOT",
    "GOPATH",
    "pythonLocation",
    "Python_ROOT_DIR",
    "Python3_ROOT_DIR",
    "PKG_CONFIG_PATH",
    "LD_LIBRARY_PATH",
    "DOTNET_ROOT",
    "CARGO_HOME",
    "RUSTUP_HOME",
)
"""What setup-python/-node/-java/-go leave besides PATH, passed to local sandbox commands."""
_INPUT_SETTINGS = {
    "INPUT_MODEL_BASE_URL": "LOOPWRIGHT_MODEL_BASE_URL",
    "INPUT_MODEL_API_KEY": "LOOPWRIGHT_MODEL_API_KEY",
    "INPUT_MODEL_TIERS": "LOOPWRIGHT_MODEL_TIERS",
    "INPUT_MAX_COST_USD": "LOOPWRIGHT_MAX_COST_USD",
    "INPUT_MAX_STEPS": "LOOPWRIGHT_MAX_STEPS",
}
DEFAULT_TRIGGER_PHRASE = "/loopwright fix"
_PRIVILEGED_EVENTS = frozenset({"pull_request_target", "workflow_run"})
"""Events whose token can write and whose secrets are present, whoever wrote the code."""


class UsageError(Exception):
    """A missing input or Actions variable; printed as one line, exit code 2."""


_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?")


# -- what to fix ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A mission to run: the request, and whether the job's workspace is the tree."""

    request: MissionRequest
    from_workspace: bool


@dataclass(frozen=True)
class Refuse:
    """Running would expose the repository's token or secrets; exit non-zero, call nothing."""

    reason: str


Plan = Target | NeedsPermission | Reply | Ignore | Refuse


@dataclass(frozen=True)
class ActionEnv:
    """The Actions environment and this action's inputs, validated where they enter."""

    event_name: str
    payload: Mapping[str, Any]
    repository: str
    workspace: Path
    sha: str
    ref: str
    api_url: str
    server_url: str
    run_url: str | None
    output_path: Path | None
    summary_path: Path | None
    runner_temp: Path
    artifact_dir: Path
    token: str
    deliver: DeliveryMode
    test_command: str | None
    setup_command: str | None
    guidance: str | None = None
    """The `guidance` input: instructions for the model, before a comment's own."""
    dry_run: bool = False
    """Verify, but deliver nothing (no branch, pull request, commit or comment)."""
    trigger_phrase: str = DEFAULT_TRIGGER_PHRASE
    """What a comment types, at the start of a line, to ask for a fix."""
    allowed_users: tuple[str, ...] = ()
    """Logins that may ask with a comment (besides needing write access); empty: anyone
    with write access."""

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> ActionEnv:
        def need(name: str, why: str) -> str:
            value = env.get(name, "").strip()
            if not value:
                raise UsageError(f"{name} is not set; {why}")
            return value

        outside = "run Loopwright as a step of a GitHub Actions job"
        event_name = need("GITHUB_EVENT_NAME", outside)
        event_path = Path(need("GITHUB_EVENT_PATH", outside))
        try:
            payload = json.loads(event_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(
                f"GITHUB_EVENT_PATH={event_path} is not a readable event: {exc}"
            ) from None
        if not isinstance(payload, dict):
            raise UsageError(f"GITHUB_EVENT_PATH={event_path} does not hold a JSON object")
        repository = need("GITHUB_REPOSITORY", outside)
        token = (env.get("INPUT_GITHUB_TOKEN") or env.get("GITHUB_TOKEN") or "").strip()
        if not token:
            raise UsageError(
                "the github-token input is empty; leave it at its default "
                "(${{ github.token }}) or pass a token with contents, pull-requests and "
                "issues write access"
            )
        deliver = (env.get("INPUT_DELIVER") or "pull-request").strip()
        if deliver not in DELIVERY_MODES:
            raise UsageError(f"deliver: {deliver!r} is not one of {', '.join(DELIVERY_MODES)}")
        sandbox = (env.get("INPUT_SANDBOX") or "auto").strip()
        if sandbox not in SANDBOXES:
            raise UsageError(f"sandbox: {sandbox!r} is not one of {', '.join(SANDBOXES)}")
        runner_temp = Path(env.get("RUNNER_TEMP") or "/tmp")
        artifacts = (env.get("INPUT_ARTIFACT_DIR") or "").strip()
        server_url = (env.get("GITHUB_SERVER_URL") or "https://github.com").rstrip("/")
        run_id = env.get("GITHUB_RUN_ID", "").strip()
        output, summary = env.get("GITHUB_OUTPUT"), env.get("GITHUB_STEP_SUMMARY")
        max_steps = (env.get("INPUT_MAX_STEPS") or "").strip()
        if max_steps and not (max_steps.isdigit() and int(max_steps) >= 1):
            raise UsageError(f"max-steps: {max_steps!r} is not a whole number of at least 1")
        dry_run = (env.get("INPUT_DRY_RUN") or "false").strip().lower()
        if dry_run not in ("true", "false"):
            raise UsageError(f"dry-run: {dry_run!r} is not true or false")
        phrase = " ".join((env.get("INPUT_TRIGGER_PHRASE") or DEFAULT_TRIGGER_PHRASE).split())
        if not phrase or phrase.startswith((">", "`", "~", "<", "#")):
            raise UsageError(
                f"trigger-phrase: {phrase!r} cannot start a visible line of a comment; "
                f"use words such as {DEFAULT_TRIGGER_PHRASE!r} or '@loopwright fix'"
            )
        users = (env.get("INPUT_ALLOWED_USERS") or "").replace(",", " ").split()
        bad = [u for u in users if not _LOGIN.fullmatch(u)]
        if bad:
            raise UsageError(
                f"allowed-users: {', '.join(map(repr, bad))} is not a GitHub login; list "
                "logins separated by commas, e.g. alice,bob"
            )
        return cls(
            event_name=event_name,
            payload=payload,
            repository=repository,
            workspace=Path(env.get("GITHUB_WORKSPACE") or os.getcwd()),
            sha=env.get("GITHUB_SHA", "").strip(),
            ref=env.get("GITHUB_REF", "").strip(),
            api_url=(env.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/"),
            server_url=server_url,
            run_url=f"{server_url}/{repository}/actions/runs/{run_id}" if run_id else None,
            output_path=Path(output) if output else None,
            summary_path=Path(summary) if summary else None,
            runner_temp=runner_temp,
            artifact_dir=Path(artifacts) if artifacts else runner_temp / "loopwright",
            token=token,
            deliver=deliver,
            test_command=(env.get("INPUT_TEST_COMMAND") or "").strip() or None,
            setup_command=(env.get("INPUT_SETUP_COMMAND") or "").strip() or None,
            guidance=(env.get("INPUT_GUIDANCE") or "").strip() or None,
            dry_run=dry_run == "true",
            trigger_phrase=phrase,
            allowed_users=tuple(users),
        )

    @property
    def clone_url(self) -> str:
        repository = self.payload.get("repository")
        url = repository.get("clone_url") if isinstance(repository, Mapping) else None
        return url if isinstance(url, str) and url else f"{self.server_url}/{self.repository}.git"


def plan_event(env: ActionEnv) -> Plan:
    """What this run should do, from the event alone: no I/O, so refusals come first."""
    payload = env.payload
    ctx = TriggerContext()
    if env.event_name == "workflow_run":
        # The workflow file that runs this action is the opt-in, so auto_fix is implied.
        decision = decide("workflow_run", payload, RepoConfig(auto_fix=True), ctx)
        if isinstance(decision, MissionRequest):
            if decision.fork:
                return Refuse(_fork_refusal("workflow_run", decision.head_repo))
            return Target(decision, from_workspace=False)
        return decision if isinstance(decision, Ignore) else Ignore(str(decision))
    if env.event_name == "issue_comment":
        if env.trigger_phrase.lower() != DEFAULT_TRIGGER_PHRASE:
            payload = with_trigger_phrase(payload, env.trigger_phrase)
        decision = decide("issue_comment", payload, RepoConfig(), ctx)
        if isinstance(decision, MissionRequest):  # pragma: no cover - comments need a check
            return Ignore("a comment never starts a mission without a permission check")
        if isinstance(decision, CommandComment):
            return Ignore(
                f"`/loopwright {decision.command.name}` is answered by the Loopwright App; "
                "the Action runs `/loopwright fix` only"
            )
        return decision
    pull = payload.get("pull_request")
    if isinstance(pull, Mapping):
        return _pull_request_target(env, pull)
    branch = env.ref.removeprefix("refs/heads/") if env.ref.startswith("refs/heads/") else None
    if not env.sha:
        return Ignore("GITHUB_SHA is not set, so there is no commit to fix")
    return Target(
        MissionRequest(
            trigger="action",
            repo=env.repository,
            clone_url=env.clone_url,
            head_sha=env.sha,
            head_ref=branch,
            base_ref=branch,
            actor=_login(payload.get("sender")),
        ),
        from_workspace=True,
    )


def with_trigger_phrase(payload: Mapping[str, Any], phrase: str) -> Mapping[str, Any]:
    """The payload with its comment's command lines spelled as the trigger phrase asks:
    a line that starts with `phrase` becomes `/loopwright fix`, and one that starts with
    `/loopwright` no longer counts. Which lines a reader sees (quotes, code blocks, HTML
    comments) is still decided by the comment parser afterwards."""
    comment = payload.get("comment")
    if not isinstance(comment, Mapping) or not isinstance(comment.get("body"), str):
        return payload
    body: str = comment["body"]
    pattern = re.compile(rf"^( {{0,3}}){re.escape(phrase)}(?=[ \t\r]|$)", re.IGNORECASE)
    lines = []
    for line in body.split("\n"):
        if pattern.match(line):
            line = pattern.sub(rf"\g<1>{DEFAULT_TRIGGER_PHRASE}", line, count=1)
        elif re.match(r" {0,3}/loopwright\b", line, re.IGNORECASE):
            line = "\\" + line.lstrip(" ")
        lines.append(line)
    return {**payload, "comment": {**comment, "body": "\n".join(lines)}}


def _pull_request_target(env: ActionEnv, pull: Mapping[str, Any]) -> Plan:
    head = _mapping(pull.get("head"))
    base = _mapping(pull.get("base"))
    head_repo = _full_name(head.get("repo"))
    base_repo = _full_name(base.get("repo")) or env.repository
    # A deleted fork has no head repository; it is a fork all the same.
    fork = head_repo != base_repo
    if fork and env.event_name in _PRIVILEGED_EVENTS:
        return Refuse(_fork_refusal(env.event_name, head_repo))
    number = pull.get("number")
    head_sha, head_ref = head.get("sha"), head.get("ref")
    if not isinstance(number, int) or not isinstance(head_sha, str) or not head_sha:
        return Ignore("the event's pull_request has no number or head commit")
    return Target(
        MissionRequest(
            trigger="action",
            repo=env.repository,
            clone_url=env.clone_url,
            head_sha=head_sha,
            head_ref=head_ref if isinstance(head_ref, str) else None,
            base_ref=base.get("ref") if isinstance(base.get("ref"), str) else None,
            pr_number=number,
            actor=_login(env.payload.get("sender")),
            fork=fork,
            head_repo=head_repo if fork else None,
        ),
        from_workspace=True,
    )


def _fork_refusal(event: str, head_repo: str | None) -> str:
    return (
        f"refusing to run on {event} for a head from the fork {head_repo or '(deleted)'}: "
        "this event runs with the repository's write token and secrets, and the fork's code "
        "would run next to them. A maintainer can comment `/loopwright fix` on the pull "
        "request instead; the fix is then offered as a comment, never pushed."
    )


def _pull_number(ref: str) -> int | None:
    """N from `refs/pull/N/merge` (GITHUB_REF of pull_request events), else None."""
    parts = ref.split("/")
    if len(parts) == 4 and parts[:2] == ["refs", "pull"] and parts[2].isdigit():
        return int(parts[2])
    return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _full_name(repo: Any) -> str | None:
    name = repo.get("full_name") if isinstance(repo, Mapping) else None
    return name if isinstance(name, str) and name else None


def _login(user: Any) -> str | None:
    login = user.get("login") if isinstance(user, Mapping) else None
    return login if isinstance(login, str) else None


# -- the secrets hand-off ------------------------------------------------------------------


def start() -> int:
    """`python -m loopwright.action`: secrets never stay in this process's environment
    block, where a command of the local sandbox could read them (see `secret_env`)."""
    try:
        env = restart_without_secrets([sys.executable, "-m", "loopwright.action"])
    except HandoffError as exc:
        print(f"loopwright: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return main(env)


# -- the run -------------------------------------------------------------------------------


@dataclass
class Outcome:
    status: str
    message: str
    result: MissionResult | None = None
    delivered: Delivered | None = None
    dry_run: bool = False

    @property
    def exit_code(self) -> int:
        if self.status == "ignored" or (self.dry_run and self.status == "verified"):
            return EXIT_OK
        ok = self.delivered is not None and self.delivered.kind not in ("skipped", "failed")
        return EXIT_OK if self.status == "verified" and ok else EXIT_FAILED


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
            shutil.rmtree(self.scratch, ignore_errors=True)

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
        settings = _apply_config(self.settings, config)
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
        if settings.sandbox == "local":
            from loopwright.sandbox.local import LocalProvider

            # The environment of local commands is built from an allow-list (PATH, a private
            # HOME and TMPDIR, ...); only toolchain locations are added here.
            return LocalProvider(
                settings.sandbox_limits,
                base_dir=self.scratch / "sandboxes",
                extra_env=toolchain_env(self.env),
            )
        from loopwright.cli import make_provider

        try:
            return make_provider(settings)
        except SandboxError as exc:
            raise UsageError(f"sandbox: docker is not usable on this runner: {exc}") from None


def _dry_run(result: MissionResult) -> DeliveryOutcome:
    reason = "dry-run: nothing delivered; the patch is in the artifact directory"
    return DeliveryOutcome("skipped", {"reason": reason}, note=reason)


def _apply_config(settings: Settings, config: RepoConfig) -> Settings:
    """The repository may lower the cost cap and pick tiers, as it can for the App."""
    if config.max_cost_usd is not None:
        cap = min(config.max_cost_usd, settings.max_cost_usd or config.max_cost_usd)
        settings = settings.with_overrides(max_cost_usd=cap)
    if config.tiers:
        tiers = tuple(t for t in settings.tiers if t.name in config.tiers)
        settings = settings.with_overrides(tiers=tiers or None)
    return settings


# -- what the workflow gets back -----------------------------------------------------------


def escape_data(value: str) -> str:
    """A workflow command's message, escaped as the runner unescapes it."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """A workflow command's property value (`title=...`): `:` and `,` end it otherwise."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def workflow_command(name: str, message: str, **properties: str) -> str:
    """`::name key=value,...::message`, every part escaped."""
    props = ",".join(f"{key}={escape_property(value)}" for key, value in properties.items())
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}"


class StageGroups:
    """An event sink that folds the job log by stage: each of prepare, plan, loop, verify
    and deliver opens a `::group::` holding its lines, closed when the next begins."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.current: str | None = None

    def __call__(self, event: Event) -> None:
        if event.type == "done":
            self.close()
            return
        if event.stage is not None and event.stage != self.current:
            self.close()
            print(workflow_command("group", f"Loopwright: {event.stage}"), file=self.stream)
            self.current = event.stage

    def close(self) -> None:
        if self.current is not None:
            print("::endgroup::", file=self.stream, flush=True)
            self.current = None


def _save_artifacts(directory: Path, result: MissionResult, redactor: Redactor) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    data = redactor.data(result.to_dict())
    if result.screenshot and Path(result.screenshot).is_file():
        shutil.copyfile(result.screenshot, directory / "screenshot.png")
        data["screenshot"] = "screenshot.png"
    (directory / "result.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    if result.patch:
        (directory / "patch.diff").write_text(redactor.text(result.patch), encoding="utf-8")


def report(action: ActionEnv, outcome: Outcome, redactor: Redactor) -> None:
    """Step outputs, the step summary and a one-line verdict in the log."""
    result = outcome.result
    url = outcome.delivered.url if outcome.delivered and outcome.delivered.url else ""
    cost = f"{result.cost_usd:.6f}" if result else "0"
    outputs = {
        "status": outcome.status,
        "pull-request-url": url
        if outcome.delivered and outcome.delivered.kind == "pull_request"
        else "",
        "delivery-url": url,
        "mission-url": action.run_url or "",
        # From this run's result: a patch.diff left in the directory by an earlier run is not it.
        "patch-path": str(action.artifact_dir / "patch.diff") if result and result.patch else "",
        "cost-usd": cost,
        "artifact-dir": str(action.artifact_dir),
    }
    if action.output_path is not None:
        write_outputs(action.output_path, outputs)
    summary = step_summary(outcome, redactor, action.artifact_dir)
    (action.artifact_dir / "summary.md").write_text(summary, encoding="utf-8")
    if action.summary_path is not None:
        with action.summary_path.open("a", encoding="utf-8") as handle:
            handle.write(summary + "\n")
    message = redactor.text(outcome.message)
    # The verdict as an annotation on the run: an error when the step fails, else a notice.
    kind = "error" if outcome.exit_code != EXIT_OK else "notice"
    title = f"Loopwright: {outcome.status.replace('_', ' ')}"
    print(workflow_command(kind, message or outcome.status, title=title), file=sys.stderr)


def write_outputs(path: Path, values: Mapping[str, str]) -> None:
    """Append `name<<DELIMITER` blocks, safe whatever the values contain."""
    with path.open("a", encoding="utf-8") as handle:
        for name, value in values.items():
            delimiter = f"ghadelimiter_{uuid.uuid4()}"
            while delimiter in value:  # pragma: no cover - a random UUID does not collide
                delimiter = f"ghadelimiter_{uuid.uuid4()}"
            handle.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")


def step_summary(outcome: Outcome, redactor: Redactor, artifact_dir: Path) -> str:
    """Markdown for `$GITHUB_STEP_SUMMARY`: the same rendering as the App's check run."""
    if outcome.result is None:
        title = {"refused": "Refused", "ignored": "Nothing to do"}.get(outcome.status, "Failed")
        return "\n".join(
            [f"## Loopwright: {title}", "", render.prose(outcome.message, redactor, limit=4_000)]
        )
    data = outcome.result.to_dict()
    data["message"] = outcome.message
    output = render.check_run_output(data, redactor=redactor)
    lines = [f"# Loopwright: {render.prose(output['title'], redactor)}", "", output["summary"]]
    if output["text"]:
        lines += ["", output["text"]]
    delivered = outcome.delivered
    if delivered is not None:
        lines += ["", "### Outcome", ""]
        if delivered.url:
            lines.append(f"{delivered.kind.replace('_', ' ')}: {delivered.url}")
        else:
            lines.append(render.prose(delivered.reason or delivered.kind, redactor, limit=2_000))
    files = "result, patch and screenshot" if outcome.result.screenshot else "result and patch"
    where = render.code(str(artifact_dir), redactor)
    lines += ["", f"The event log, {files} are in {where}."]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(start())
