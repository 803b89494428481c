"""The tracking comment: one comment per mission on its pull request, posted before any work
starts and edited in place as the stages pass, ending with the outcome.

`render_tracking` is pure (a `Tracking` state to Markdown, through render's helpers, so
repository and model text stay inert). `TrackingComment` owns the comment on GitHub: event
sink, coalesced edits (at most one every `interval_s`, the latest state always written last)
and the final outcome. Other features add a line to a mission's comment with `note`.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import structlog

from loopwright.events import STAGES, Event, Stage
from loopwright.github import render
from loopwright.github.service import GitHubError, RepoSession
from loopwright.redaction import Redactor

StageState = Literal["pending", "running", "done", "failed", "stopped"]

MARKER = "<!-- loopwright:tracking -->"
"""Starts every tracking comment, so one can be told from Loopwright's other comments."""
NOTES_END = "<!-- loopwright:notes-end -->"
"""Where `note` inserts a line into a comment it did not render itself."""

_DONE = frozenset({"reproduced", "done", "finished", "verified", "applied", "delivered", "ready"})
_FAILED = frozenset({"error", "failed", "unverified", "budget_exceeded"})
_MARKS: dict[StageState, str] = {
    "pending": "- [ ]",
    "running": "- [ ] ⏳",
    "done": "- [x] ✅",
    "failed": "- [ ] ❌",
    "stopped": "- [ ] ⏹️",
}
_PLAIN_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_CANCELLED_BY = re.compile(r"Cancelled by @([A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?)\.?")


@dataclass
class StageLine:
    state: StageState = "pending"
    status: str = ""


@dataclass
class Outcome:
    """How the mission ended, as the comment's last section shows it."""

    status: str
    """The result's status (`verified`, ..., `cancelled`), or `error` without a result."""
    message: str = ""
    summary: str = ""
    delivered_kind: str = ""
    """`pull_request`, `commit`, `comment`, `skipped` or `failed` (empty: no delivery)."""
    delivered_url: str | None = None
    delivered_reason: str = ""
    cost_usd: float = 0.0
    tokens: int = 0
    tier: str | None = None

    @classmethod
    def from_result(
        cls,
        result: Mapping[str, Any],
        *,
        kind: str = "",
        url: str | None = None,
        reason: str = "",
    ) -> Outcome:
        """From `MissionResult.to_dict()` and what delivery did."""
        usage = result.get("usage")
        tokens = 0
        if isinstance(usage, Mapping):
            for counts in usage.values():
                if isinstance(counts, Mapping):
                    tokens += _count(counts.get("prompt_tokens")) + _count(
                        counts.get("completion_tokens")
                    )
        cost = result.get("cost_usd")
        tier = result.get("final_tier")
        return cls(
            status=str(result.get("status") or "error"),
            message=str(result.get("message") or ""),
            summary=str(result.get("summary") or ""),
            delivered_kind=kind,
            delivered_url=url,
            delivered_reason=reason,
            cost_usd=float(cost) if isinstance(cost, int | float) else 0.0,
            tokens=tokens,
            tier=str(tier) if tier else None,
        )


@dataclass
class Tracking:
    """What the tracking comment shows; changed by events, notes and the outcome."""

    mission: str
    head_sha: str
    actor: str | None = None
    """Who asked (`/loopwright fix`); None for an automatic mission."""
    check_name: str | None = None
    live_url: str | None = None
    stages: dict[Stage, StageLine] = field(default_factory=lambda: {s: StageLine() for s in STAGES})
    notes: list[str] = field(default_factory=list)
    outcome: Outcome | None = None
    pending: dict[str, Any] | None = None
    """Pair mode: the `approval_requested` event's fields while the mission waits on it."""

    def apply(self, event: Event) -> bool:
        """Take a `stage` event into the checklist, and pair mode's request and decision
        into the waiting section; whether anything shown changed."""
        if event.type == "approval_requested":
            self.pending = dict(event.fields)
            return True
        if event.type == "decision":
            decided = self.pending is not None and event.fields.get("id") == self.pending.get("id")
            if decided:
                self.pending = None
            return decided
        if event.type != "stage" or event.stage is None:
            return False
        status = str(event.fields.get("status") or "")
        if status == "detected":
            return False
        line = self.stages[event.stage]
        before = (line.state, line.status)
        if status == "started":
            line.state, line.status = "running", ""
        else:
            line.state = _state_for(status)
            line.status = status
        return (line.state, line.status) != before


def _state_for(status: str) -> StageState:
    if status in _DONE:
        return "done"
    if status in _FAILED:
        return "failed"
    return "stopped"


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# -- rendering -----------------------------------------------------------------------------


def render_tracking(state: Tracking, redactor: Redactor | None = None) -> str:
    """The whole comment for `state`, inert and within GitHub's comment limit."""
    redactor = redactor or Redactor()
    sha = render.code(state.head_sha[:7], redactor) or "the head commit"
    lines = [MARKER, _headline(state, sha, redactor)]
    link = render.safe_url(state.live_url)
    if link:
        lines += ["", f"[Watch it live]({link})"]
    lines += [""]
    for stage in STAGES:
        lines.append(_stage_line(stage, state.stages[stage], redactor))
    if state.pending is not None and state.outcome is None:
        lines += ["", *_waiting(state.pending, redactor)]
    if state.notes:
        lines += ["", *(f"- {note}" for note in state.notes[-20:])]
    lines.append(NOTES_END)
    if state.outcome is not None:
        lines += ["", *_outcome(state.outcome, redactor)]
    mission = render.code(state.mission, redactor)
    lines += ["", f"<sub>Loopwright · mission {mission}</sub>"]
    return render.truncate(redactor.text("\n".join(lines)), render.COMMENT_LIMIT)


def _headline(state: Tracking, sha: str, redactor: Redactor) -> str:
    if state.outcome is None:
        verb = "is fixing"
    elif state.outcome.status == "cancelled":
        verb = "stopped fixing"
    else:
        verb = "worked on"
    whom = f" for {render.mention(state.actor)}" if state.actor else ""
    why = ""
    if not state.actor:
        check = render.prose(state.check_name, redactor, limit=100, inline=True)
        why = f", whose check {check} failed" if check else ", whose checks failed"
    return f"### 🔧 Loopwright {verb} {sha}{whom}{why}"


def _stage_line(stage: Stage, line: StageLine, redactor: Redactor) -> str:
    text = f"{_MARKS[line.state]} **{stage}**"
    if line.state == "running":
        return text + ": in progress"
    if line.status:
        return (
            text
            + f": {render.prose(line.status.replace('_', ' '), redactor, limit=40, inline=True)}"
        )
    return text


WHAT_LIMIT = 300
"""The most of a pending request's `what` the comment shows (characters)."""
DETAIL_LIMIT = 3000
"""The most of a pending request's command or diff the comment shows (characters)."""


def shown_whole(request: Mapping[str, Any]) -> bool:
    """Whether the tracking comment shows the pending request's action whole: its command
    or diff uncut, or (without either) its `what`. Only such an action may be approved by
    a comment; the live view shows every one whole."""
    detail = request.get("command") or request.get("diff")
    if isinstance(detail, str) and detail:
        return len(detail) <= DETAIL_LIMIT
    return len(str(request.get("what") or "")) <= WHAT_LIMIT


def _waiting(request: Mapping[str, Any], redactor: Redactor) -> list[str]:
    """Pair mode: what the mission waits on, and how to answer."""
    what = render.prose(request.get("what"), redactor, limit=WHAT_LIMIT, inline=True)
    why = render.prose(request.get("why"), redactor, limit=500, inline=True)
    lines = [f"**⏸️ Waiting for a decision:** {what or 'an action'}", "", f"Why: {why}"]
    detail = request.get("command") or request.get("diff")
    if isinstance(detail, str) and detail:
        shown = detail if len(detail) <= DETAIL_LIMIT else detail[:DETAIL_LIMIT] + "\n… (cut)"
        lines += ["", render.fenced(redactor.text(shown), "diff" if request.get("diff") else "")]
    expires = request.get("expires_s")
    within = ""
    if isinstance(expires, int | float) and not isinstance(expires, bool):
        span = f"{expires / 60:g} minutes" if expires >= 60 else f"{expires:g}s"
        within = f" Unanswered within {span}, it is rejected."
    # Our ids are `3-k7pq`; anything else is not put inside the commands' code spans.
    request_id = str(request.get("id") or "")
    if not _PLAIN_ID.fullmatch(request_id):
        request_id = "<id>"
    if not shown_whole(request):
        lines += [
            "",
            "This comment cannot show the action whole, so it can be approved only in the "
            "live view (where it is shown whole); `/loopwright reject "
            f"{request_id} <why>` or `/loopwright redirect <guidance>` in a comment still "
            f"work.{within}",
        ]
        return lines
    lines += [
        "",
        f"Request {render.code(request_id, redactor, limit=64)}. Answer with a comment on "
        f"its own line: `/loopwright approve {request_id}`, "
        f"`/loopwright reject {request_id} <why>` or `/loopwright redirect <guidance>`, or "
        f"in the live view.{within}",
    ]
    return lines


def _outcome(outcome: Outcome, redactor: Redactor) -> list[str]:
    lines = [f"**Outcome:** {_verdict(outcome, redactor)}"]
    if outcome.status not in ("verified", "cancelled"):
        if outcome.message:
            lines += ["", render.prose(outcome.message, redactor, limit=2_000)]
        if outcome.summary:
            lines += ["", "The model's summary:", "", render.quote(outcome.summary, redactor)]
    cost = f"{_usd(outcome.cost_usd)} · {outcome.tokens:,} tokens"
    tier = render.code(outcome.tier, redactor, limit=64) if outcome.tier else "none"
    lines += ["", f"**Cost:** {cost} · **tier reached:** {tier}"]
    return lines


def _verdict(outcome: Outcome, redactor: Redactor) -> str:
    status = outcome.status
    if status == "cancelled":
        who = _CANCELLED_BY.fullmatch(outcome.summary.strip())
        if who:
            return f"⏹️ cancelled by {render.mention(who.group(1))}"
        return "⏹️ cancelled" + (" from the live view" if "live view" in outcome.summary else "")
    if status != "verified":
        title = render.status_title(status) or render.prose(status, redactor, limit=40, inline=True)
        return f"⚠️ {title}; nothing was delivered"
    url = render.safe_url(outcome.delivered_url)
    kind = outcome.delivered_kind
    if kind == "pull_request" and url:
        return f"✅ verified fix in [this pull request]({url})"
    if kind == "comment" and url:
        return f"✅ verified fix, offered as a patch in [this comment]({url})"
    if kind == "commit":
        pushed = render.prose(outcome.delivered_reason, redactor, limit=300, inline=True)
        return f"✅ verified fix, {pushed or 'pushed as a commit'}"
    reason = render.prose(outcome.delivered_reason, redactor, limit=500, inline=True)
    return f"⚠️ verified, but not delivered: {reason or 'no reason given'}"


def _usd(amount: float) -> str:
    return f"${amount:.2f}" if amount >= 1 else f"${amount:.4f}"


# -- the comment on GitHub -----------------------------------------------------------------

_LIVE: dict[str, TrackingComment] = {}
"""The tracking comments this process is editing now, by mission id (for `note`)."""
_LIVE_LOCK = threading.Lock()


class TrackingComment:
    """One mission's tracking comment on pull request `number`.

    `sink` is an `EventSink`; it only changes the state and wakes the writer thread, which
    edits the comment at most once every `interval_s` (writes still go through the session's
    write spacing). `finish` writes the outcome synchronously, after any edit in flight and
    with no edit after it, so the outcome is what the comment ends with, however long an
    earlier edit took (a rate-limit retry can take minutes). A failed edit is logged, never
    fatal to the mission.
    """

    def __init__(
        self,
        session: RepoSession,
        number: int,
        state: Tracking,
        redactor: Redactor,
        *,
        interval_s: float = 3.0,
        clock: Callable[[], float] = time.monotonic,
        log: Any = None,
        stop_timeout_s: float = 60.0,
    ) -> None:
        self.session = session
        self.number = number
        self.state = state
        self.redactor = redactor
        self.interval_s = interval_s
        self.comment_id: int | None = None
        self.url = ""
        self.edits = 0
        self.finished = False
        self._clock = clock
        self._log = log or structlog.get_logger("loopwright.tracking")
        self._cond = threading.Condition()
        self._dirty = False
        self._closed = False
        self._written = ""
        self._last_write = float("-inf")
        self._thread: threading.Thread | None = None
        self._stop_timeout_s = stop_timeout_s
        """How long `finish` waits for the writer thread to end once the outcome is written."""
        # Held across rendering and sending an edit, so edits reach GitHub in the order
        # their bodies were made, and none follows the final one.
        self._send = threading.Lock()
        self._final_written = False

    def post(self, existing: int | None = None) -> int:
        """Post the comment (raises `GitHubError` when GitHub refuses); its id.

        `existing`: the comment of an earlier start of the same mission (its worker was
        lost), rewritten from the top instead of a second comment on the pull request.
        """
        body = render_tracking(self.state, self.redactor)
        if existing is None:
            self.comment_id, self.url = self.session.post_comment(self.number, body)
        else:
            self.session.edit_comment(existing, body)
            self.comment_id = existing
        self._written, self._last_write = body, self._clock()
        with _LIVE_LOCK:
            _LIVE[self.state.mission] = self
        self._thread = threading.Thread(
            target=self._writer, name=f"tracking-{self.state.mission}", daemon=True
        )
        self._thread.start()
        return self.comment_id

    def sink(self, event: Event) -> None:
        with self._cond:
            if self.state.apply(event):
                self._dirty = True
                self._cond.notify()

    def note(self, text: str) -> None:
        """Add a line (Markdown built with render's helpers) to the comment."""
        with self._cond:
            self.state.notes.append(text)
            self._dirty = True
            self._cond.notify()

    def finish(self, outcome: Outcome) -> None:
        """End the comment with `outcome` and write it now; the writer thread stops."""
        if self.finished:
            return
        self.finished = True
        with self._cond:
            self.state.outcome = outcome
            for line in self.state.stages.values():
                if line.state == "running":
                    line.state, line.status = _state_for(outcome.status), outcome.status
            self._closed = True
            self._cond.notify()
        with _LIVE_LOCK:
            if _LIVE.get(self.state.mission) is self:
                del _LIVE[self.state.mission]
        self._write(final=True)
        if self._thread is not None:
            self._thread.join(timeout=self._stop_timeout_s)

    def _writer(self) -> None:
        while True:
            with self._cond:
                while not self._dirty and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                wait = self._last_write + self.interval_s - self._clock()
                if wait > 0:
                    # Coalesce: whatever else changes before the slot goes in the same edit.
                    self._cond.wait(wait)
                    continue
                self._dirty = False
            self._write()

    def _write(self, *, final: bool = False) -> None:
        with self._send:
            if self._final_written:
                return  # the outcome is written: nothing may follow it
            self._final_written = final
            with self._cond:
                body = render_tracking(self.state, self.redactor)
            if body == self._written or self.comment_id is None:
                return
            try:
                self.session.edit_comment(self.comment_id, body)
            except GitHubError as exc:
                self._log.warning("tracking comment not edited", error=str(exc))
                return
            finally:
                self._last_write = self._clock()
            self._written = body
            self.edits += 1


def note(
    mission_id: str,
    text: str,
    *,
    session: RepoSession | None = None,
    comment_id: int | None = None,
) -> bool:
    """Add a line to mission `mission_id`'s tracking comment; whether it was written.

    `text` is Markdown the caller built with render's helpers (it is redacted again with
    the mission's redactor while the mission runs). A running mission of this process takes
    it into its next edit; otherwise the stored comment (`comment_id`, from the mission's
    `tracking_comment_id`) is read and edited through `session`.
    """
    with _LIVE_LOCK:
        live = _LIVE.get(mission_id)
    if live is not None:
        live.note(text)
        return True
    if session is None or comment_id is None:
        return False
    body = session.comment_body(comment_id)
    if MARKER not in body:
        return False
    line = f"- {text}"
    if NOTES_END in body:
        body = body.replace(NOTES_END, f"{line}\n{NOTES_END}", 1)
    else:
        body = f"{body.rstrip()}\n\n{line}"
    session.edit_comment(comment_id, render.truncate(body, render.COMMENT_LIMIT))
    return True
