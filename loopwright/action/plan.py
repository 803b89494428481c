"""What the Action fixes: the Actions environment read, and the plan for the event (a
target, a refusal before any model call, or nothing to do)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopwright.github.delivery import DeliveryMode
from loopwright.github.triggers import (
    CommandComment,
    Ignore,
    NeedsPermission,
    Reply,
    TriggerContext,
    decide,
)
from loopwright.repo_config import RepoConfig
from loopwright.request import MissionRequest

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
        except (OSError, ValueError, RecursionError) as exc:
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
