"""What `/loopwright help`, `cancel`, `retry`, pair mode's `approve`, `reject` and
`redirect`, and an unknown command do on a pull request.

Each command is authorized like `/loopwright fix`: the commenter's permission comes from
the collaborator-permission endpoint, and only write, maintain and admin may act. A
non-writer gets the list of commands (what the README says anyway, never the settings)
or the same refusal as for `fix`, and at most one such reply per pull request every
`NON_WRITER_REPLY_WINDOW_S`, so no one without write access can make the App spam a
thread. `retry` with a mission to re-run is not handled here: it is stored as a comment
mission and admitted by the runner exactly like `fix` (head re-pinned, attempt cap).
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, replace
from typing import Any

import structlog

from loopwright.app.pair import BadDecision, check_decision, decide
from loopwright.config import ConfigError, Settings, effective_network
from loopwright.github import render
from loopwright.github.command_text import Command
from loopwright.github.service import GitHubApp, RepoSession
from loopwright.github.tracking import shown_whole
from loopwright.github.triggers import WRITE_PERMISSIONS, CommandComment
from loopwright.protected_paths import DEFAULT_PROTECTED_PATHS
from loopwright.redaction import Redactor
from loopwright.repo_config import RepoConfig
from loopwright.request import MissionRequest
from loopwright.store.models import ACTIVE_STATUSES, RUNNING_STATUSES, Mission
from loopwright.store.pair import DecisionRefused
from loopwright.store.repository import Store

NON_WRITER_REPLY_WINDOW_S = 600.0
NOT_RETRIED = frozenset({"refused", "ignored"})
"""Missions that never ran; `retry` re-runs the last one that did."""

log = structlog.get_logger("loopwright.commands")

_COMMAND_ROWS = (
    (
        "/loopwright fix [guidance]",
        "Reproduce the failing tests in a sandbox, fix them, prove the fix with an "
        "independent run and open a pull request. Text after the command, up to a blank "
        "line, is guidance for the model.",
    ),
    ("/loopwright cancel", "Stop the mission running (or queued) for this pull request."),
    (
        "/loopwright retry",
        "Run the last mission of this pull request again, with the same guidance, on the "
        "current head.",
    ),
    (
        "/loopwright approve [request]",
        "Pair mode: let the mission run the action it waits on (the tracking comment shows it "
        "and its request id). Without the id it applies only to a request asked before the "
        "comment was written.",
    ),
    (
        "/loopwright reject [request] [why]",
        "Pair mode: refuse the action the mission waits on; the model reads why.",
    ),
    (
        "/loopwright redirect <guidance>",
        "Pair mode: new guidance for the model, at any time while the mission runs (it also "
        "refuses an action the mission waits on).",
    ),
    ("/loopwright help", "This list, with the repository's settings."),
)


def cancel_summary(login: str | None) -> str:
    """The summary a cancelled mission ends with."""
    return f"Cancelled by @{login}." if login else "Cancelled from the live view."


def retry_request(store: Store, comment: CommandComment) -> MissionRequest | None:
    """The mission a `retry` comment asks for: the pull request's last mission that ran,
    again, with its guidance; None when there is none or one is still active (the caller
    then answers through `CommentCommands`)."""
    request = comment.request
    missions = store.missions_for_pull(request.repo, request.pr_number or 0)
    if any(m.status in ACTIVE_STATUSES for m in missions):
        return None
    last = next((m for m in missions if m.status not in NOT_RETRIED), None)
    if last is None:
        return None
    previous = MissionRequest.from_dict(dict(last.request))
    return replace(
        request,
        guidance=previous.guidance,
        extra={**request.extra, "retry_of": last.id},
    )


@dataclass
class CommentCommands:
    """Answers the commands that are not missions; runs off the webhook's answer path."""

    settings: Settings
    store: Store
    github: GitHubApp
    non_writer_window_s: float = NON_WRITER_REPLY_WINDOW_S

    def run(self, comment: CommandComment, delivery: str) -> None:
        request = comment.request
        if request.installation_id is None or request.pr_number is None:
            return
        number = request.pr_number
        session = self.github.session(request.installation_id, request.repo)
        permission = session.permission(comment.user)
        command = comment.command
        bound = log.bind(delivery=delivery, repo=request.repo, pr=number, command=command.name)
        if permission not in WRITE_PERMISSIONS:
            if not self._may_answer_non_writer(request.repo, number, delivery):
                bound.info("non-writer reply skipped: one was posted recently")
                return
            if command.name in ("help", "unknown"):
                body = _unknown_line(command) + commands_help(comment.user, permission)
            else:
                body = render.refusal_comment(comment.user, permission or "none")
            session.comment(number, body)
            bound.info("answered a non-writer", permission=permission)
            return
        if command.name in ("help", "unknown"):
            body = _unknown_line(command) + self._help(session)
        elif command.name == "cancel":
            body = self._cancel(request.repo, number, comment.user)
        elif command.name in ("approve", "reject", "redirect"):
            body = self._decide(request.repo, number, comment, command.name, command.argument)
        else:
            body = self._retry_reply(request.repo, number, comment.user)
        if body:
            session.comment(number, body)
        bound.info("command answered")

    def _may_answer_non_writer(self, repo: str, number: int, delivery: str) -> bool:
        """At most one reply to non-writers per pull request in the window; concurrent ones
        both count, so a race answers no one rather than twice."""
        key = f"non-writer reply on {repo}#{number}"
        self.store.decide_delivery(delivery, key)
        if self.store.recent_deliveries(key, self.non_writer_window_s) > 1:
            self.store.decide_delivery(delivery, f"{key} skipped (rate limit)")
            return False
        return True

    def _help(self, session: RepoSession) -> str:
        try:
            config = session.read_config()
            branch = session.default_branch()
        except ConfigError as exc:
            return (
                commands_help(None, None)
                + "\n\n**The repository's Loopwright configuration is invalid**, so no "
                "mission can start until it is fixed:\n\n"
                + render.quote(str(exc), Redactor(self.settings.secrets()))
            )
        return commands_help(None, None) + "\n\n" + settings_help(config, self.settings, branch)

    def _cancel(self, repo: str, number: int, login: str) -> str:
        active = [m for m in self.store.missions_for_pull(repo, number) if _active(m)]
        if not active:
            return (
                f"{render.mention(login)}, no Loopwright mission is running or queued for "
                "this pull request, so there is nothing to cancel."
            )
        summary = cancel_summary(login)
        started = []
        for mission in active:
            answer = self.store.request_cancel(mission.id, summary)
            if answer == "cancelled":
                log.info("queued mission cancelled", mission=mission.id)
            elif answer == "requested":
                started.append(mission.id)
        if started:
            # The running mission ends its check run (and its tracking comment) with the
            # summary; another comment would only repeat it.
            return ""
        return (
            f"{render.mention(login)}, the queued mission "
            f"{render.code(active[0].id, Redactor())} is cancelled; it had not started."
        )

    def _decide(
        self, repo: str, number: int, comment: CommandComment, kind: str, argument: str
    ) -> str:
        """Decide for the pull request's running mission (the waiting one first); the
        reply says what was decided, or why nothing was.

        An approve or reject applies to one request: the one it names, or else the one
        that was pending when the comment was written. It is recorded for that request
        only, so a request asked meanwhile is never decided by a comment about another.
        """
        redactor = Redactor(self.settings.secrets())
        login = comment.user
        who = render.mention(login)
        running = [
            m for m in self.store.missions_for_pull(repo, number) if m.status in RUNNING_STATUSES
        ]
        if not running:
            return (
                f"{who}, no Loopwright mission is running for this pull request, so there is "
                f"nothing to {kind}."
            )
        mission = next((m for m in running if m.status == "waiting"), running[0])
        pending = self.store.pending_request(mission.id)
        named, text = (None, argument) if kind == "redirect" else _named_request(kind, argument)
        request_id = pending["id"] if pending else None
        if kind in ("approve", "reject") and pending is not None:
            current = render.code(pending["id"], redactor, limit=64)
            # Our ids are `3-k7pq`; anything else stays out of the command's code span.
            typed = pending["id"] if _PLAIN_ID.fullmatch(pending["id"]) else "<id>"
            answer = f"`/loopwright {kind} {typed}`"
            if named is not None and named != pending["id"]:
                return (
                    f"{who}, nothing was decided: request {render.code(named, redactor)} is "
                    f"not pending. Mission {render.code(mission.id, redactor)} now waits on "
                    f"request {current}, {_what(pending, redactor)}; to {kind} it, comment "
                    f"{answer}."
                )
            if named is None and not _asked_before(pending, comment.written_at):
                return (
                    f"{who}, nothing was decided: mission {render.code(mission.id, redactor)} "
                    f"asked request {current}, {_what(pending, redactor)}, after your comment "
                    f"was written, so your comment is not about it. Look at it in the "
                    f"tracking comment; to {kind} it, comment {answer}."
                )
            if kind == "approve" and not shown_whole(pending):
                where = self._live_view(mission.id)
                return (
                    f"{who}, nothing was decided: request {current} is too long for the "
                    "tracking comment to show whole, so it cannot be approved by a comment. "
                    f"Approve or reject it in the live view{where}, where it is shown whole, "
                    f"or comment `/loopwright reject {typed} <why>`."
                )
        try:
            checked, reason = check_decision(kind, text, None)
            decided = decide(
                self.store, mission, checked, f"@{login}", reason, request_id=request_id
            )
        except (BadDecision, DecisionRefused) as refused:
            return f"{who}, nothing was decided: {refused}"
        log.info("pair decision", mission=mission.id, decision=kind, by=login)
        if decided.request is None:
            return f"{who} sent guidance; the model gets it before its next step."
        what = _what(pending, redactor) if pending else "the action"
        which = f"request {render.code(decided.request, redactor, limit=64)}, {what}"
        if kind == "approve":
            return f"{who} approved {which}; mission {render.code(mission.id, redactor)} goes on."
        if kind == "reject":
            return f"{who} rejected {which}; the model is told why and looks for another way."
        return f"{who} redirected the plan instead of {which}; the model gets the guidance."

    def _live_view(self, mission_id: str) -> str:
        base = self.settings.github.public_url
        return f" ({base}/missions/{mission_id})" if base else ""

    def _retry_reply(self, repo: str, number: int, login: str) -> str:
        missions = self.store.missions_for_pull(repo, number)
        running = next((m for m in missions if _active(m)), None)
        if running is not None:
            return (
                f"{render.mention(login)}, mission {render.code(running.id, Redactor())} is "
                f"still {running.status} for this pull request; wait for it, or comment "
                "`/loopwright cancel` first."
            )
        return (
            f"{render.mention(login)}, there is no earlier mission on this pull request to "
            "retry; comment `/loopwright fix` to start one."
        )


def _active(mission: Mission) -> bool:
    return mission.status in ACTIVE_STATUSES


_PLAIN_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_REQUEST_ID = re.compile(r"\d{1,9}-[a-z0-9_]{1,40}")
"""A request id as typed after approve or reject (`3-k7pq`)."""


def _named_request(kind: str, argument: str) -> tuple[str | None, str]:
    """The request an approve or reject names, and the rest of its text. An approve's
    argument is the id; a reject's starts with one when its first word looks like an id."""
    first, _, rest = argument.strip().partition(" ")
    if kind == "approve":
        return (first or None), ""
    if _REQUEST_ID.fullmatch(first):
        return first, rest.strip()
    return None, argument


def _asked_before(pending: dict[str, Any], written_at: datetime.datetime | None) -> bool:
    """Whether `pending` was asked before the comment was written. GitHub gives the
    comment's time to the second, so a request asked within that second counts as after."""
    asked = pending.get("asked_at")
    if written_at is None or not isinstance(asked, str):
        return False
    try:
        asked_at = datetime.datetime.fromisoformat(asked)
    except ValueError:
        return False
    if asked_at.tzinfo is None:
        asked_at = asked_at.replace(tzinfo=datetime.UTC)
    return asked_at < written_at


def _what(pending: dict[str, Any], redactor: Redactor) -> str:
    return render.code(pending.get("what") or "an action", redactor)


def _unknown_line(command: Command) -> str:
    if command.name != "unknown":
        return ""
    redactor = Redactor()
    typed = render.code(f"/loopwright {command.argument}".strip(), redactor, limit=60)
    if command.suggestion:
        return (
            f"{typed} is not a Loopwright command; did you mean "
            f"`/loopwright {command.suggestion}`?\n\n"
        )
    return f"{typed} is not a Loopwright command.\n\n"


def commands_help(user: str | None, permission: str | None) -> str:
    """The list of commands; for a non-writer (`permission` given) with why they cannot
    run them, and nothing about the repository."""
    lines = [
        "**Loopwright commands**, each at the start of a line in a comment on a pull request:",
        "",
        "| Command | What it does |",
        "| --- | --- |",
        *(f"| `{name}` | {what} |" for name, what in _COMMAND_ROWS),
        "",
    ]
    if permission is not None and user is not None:
        level = permission if re.fullmatch(r"[a-z_]{1,20}", permission) else "unknown"
        lines.append(
            "Only people with write access to the repository can run them; "
            f"{render.mention(user)}, your permission is {level}."
        )
    else:
        lines.append("Only people with write access to the repository can run them.")
    return "\n".join(lines)


def settings_help(config: RepoConfig, settings: Settings, branch: str) -> str:
    """The settings a mission on this repository runs with: the repository's file from the
    default branch, narrowed by the operator's limits."""
    redactor = Redactor(settings.secrets())

    def code(value: object) -> str:
        return render.code(value, redactor, limit=200)

    source = (
        f"{code(config.source)} on {code(branch)}"
        if config.source
        else f"built-in defaults (no `.github/loopwright.yml` on {code(branch)})"
    )
    tiers = [t.name for t in settings.tiers]
    if config.tiers:
        tiers = [name for name in tiers if name in config.tiers] or tiers
    cost = config.max_cost_usd
    if cost is not None and settings.max_cost_usd is not None:
        cost = min(cost, settings.max_cost_usd)
    elif cost is None:
        cost = settings.max_cost_usd
    protected = (
        config.protected_paths if config.protected_paths is not None else DEFAULT_PROTECTED_PATHS
    )
    rows = [
        ("Automatic fixes on red CI (`auto_fix`)", "on" if config.auto_fix else "off"),
        ("Test command", code(config.test_cmd) if config.test_cmd else "detected"),
        ("Setup command", code(config.setup_cmd) if config.setup_cmd else "none"),
        ("Model tiers, cheapest first", ", ".join(code(t) for t in tiers)),
        ("Most a mission may cost", f"${cost:.2f}" if cost is not None else "no cap"),
        ("Missions per commit", str(settings.github.max_attempts)),
        ("Steps per mission", str(settings.max_steps)),
        ("Sandbox network", code(effective_network(settings.network, config.network))),
        ("Protected paths", ", ".join(code(p) for p in protected) or "none"),
        (
            "Test files the fix may edit",
            ", ".join(code(p) for p in config.allow_test_edits) or "none",
        ),
    ]
    table = ["| Setting | Value |", "| --- | --- |"]
    table += [f"| {name} | {_cell(value)} |" for name, value in rows]
    return "\n".join([f"**Settings for this repository**, from {source}:", "", *table])


def _cell(value: str) -> str:
    return value.replace("|", "\\|")
