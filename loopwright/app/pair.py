"""`StorePair`: pair mode for the App's missions, with the store as the path decisions take.

A decision made on any server process (the live view's POST, a `/loopwright approve`
comment) is a row in the store; the mission's worker, wherever it runs, polls for it. While
a request is pending the mission is `waiting`: still active, still holding its slot and
its sandbox, its runner's heartbeat going on.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any, cast

import structlog
from sqlalchemy.exc import SQLAlchemyError

from loopwright.agent.pair import (
    DECISION_KINDS,
    ApprovalRequest,
    Decision,
    DecisionKind,
    wait_for_decision,
)
from loopwright.cancellation import Cancellation
from loopwright.redaction import Redactor
from loopwright.store.models import RUNNING_STATUSES, Mission
from loopwright.store.pair import DecisionRefused, StoredDecision
from loopwright.store.repository import Store

DECISION_TEXT_LIMIT = 4000
"""The longest reason or guidance a decision may carry (characters): it becomes a message
to the model, and a tracking comment quotes it."""


def request_payload(request: ApprovalRequest, expiry_s: float) -> dict[str, Any]:
    """The request as the store keeps it for the API and the tracking comment."""
    payload = {k: v for k, v in dataclasses.asdict(request).items() if v is not None}
    now = datetime.datetime.now(datetime.UTC)
    payload["asked_at"] = now.isoformat()
    payload["expires_at"] = (now + datetime.timedelta(seconds=expiry_s)).isoformat()
    return payload


class StorePair:
    """A `Pair` over the store for one mission."""

    def __init__(
        self,
        store: Store,
        mission_id: str,
        expiry_s: float,
        redactor: Redactor | None = None,
    ) -> None:
        self.store = store
        self.mission_id = mission_id
        self.expiry_s = expiry_s
        self.redactor = redactor or Redactor()
        """The mission's: the stored request is served by the API and quoted in comments,
        so it is masked like every event."""
        self._log = structlog.get_logger("loopwright.mission").bind(mission=mission_id)
        self._failing = False

    def open(self, request: ApprovalRequest) -> None:
        payload = self.redactor.data(request_payload(request, self.expiry_s))
        self.store.open_request(self.mission_id, request.id, payload)
        self.store.set_status(self.mission_id, "waiting", expect="running")

    def ask(self, request: ApprovalRequest, cancellation: Cancellation) -> Decision:
        try:
            decision = wait_for_decision(
                lambda: self._poll(request.id), expiry_s=self.expiry_s, cancellation=cancellation
            )
            if decision.by == "expiry":
                decision = self._expire(request.id, decision)
            return decision
        finally:
            self.store.close_request(self.mission_id, request.id)
            self.store.set_status(self.mission_id, "running", expect="waiting")

    def guidance(self) -> list[Decision]:
        try:
            taken = self.store.take_guidance(self.mission_id)
        except SQLAlchemyError as exc:
            # The guidance stays in the store and is taken at the next step.
            self._log.warning("guidance_poll_failed", error=f"{type(exc).__name__}: {exc}")
            return []
        return [_decision(stored) for stored in taken]

    def taking_guidance(self, on: bool) -> None:
        self.store.set_pair_loop(self.mission_id, "running" if on else "ended")

    def _poll(self, request_id: str) -> Decision | None:
        try:
            stored = self.store.decision_for(self.mission_id, request_id)
        except SQLAlchemyError as exc:
            if not self._failing:  # once per outage, not every poll
                self._log.warning("decision_poll_failed", error=f"{type(exc).__name__}: {exc}")
            self._failing = True
            return None
        self._failing = False
        return None if stored is None else _decision(stored)

    def _expire(self, request_id: str, expired: Decision) -> Decision:
        """Record the expiry as the request's reject, unless a person decided first."""
        try:
            self.store.record_decision(
                self.mission_id, "reject", expired.by, expired.text, request_id=request_id
            )
        except DecisionRefused:
            stored = self.store.decision_for(self.mission_id, request_id)
            if stored is not None:
                return _decision(stored)
        return expired


def _decision(stored: StoredDecision) -> Decision:
    # The store holds only the kinds `record_decision` was given, which the API checked.
    return Decision(cast(DecisionKind, stored.decision), stored.by, stored.text)


class BadDecision(ValueError):
    """A decision that is malformed; the message says what to send instead."""


def check_decision(kind: object, text: object, request_id: object) -> tuple[DecisionKind, str]:
    """The kind and text of a decision someone sent, or `BadDecision` saying what to fix."""
    if kind not in DECISION_KINDS:
        raise BadDecision(
            f"decision must be one of {', '.join(DECISION_KINDS)}, not {str(kind)[:40]!r}"
        )
    if not isinstance(text, str):
        raise BadDecision("text must be a string (the reason of a reject, a redirect's guidance)")
    if request_id is not None and (not isinstance(request_id, str) or not request_id):
        raise BadDecision("request must be the id of the pending request (a string) or left out")
    text = text.strip()
    if len(text) > DECISION_TEXT_LIMIT:
        raise BadDecision(
            f"text is {len(text)} characters; at most {DECISION_TEXT_LIMIT} are taken"
        )
    if kind == "redirect" and not text:
        raise BadDecision("a redirect needs text: the guidance the model should follow")
    return kind, text


def decide(
    store: Store,
    mission: Mission,
    kind: DecisionKind,
    by: str,
    text: str = "",
    request_id: str | None = None,
) -> StoredDecision:
    """Record a decision for a mission, from the live view or a comment.

    Raises `DecisionRefused` when the mission cannot take it now: it is not running (queued
    or ended), or there is no pending request for an approve or reject, or `request_id` is
    not the pending one.
    """
    if mission.status not in RUNNING_STATUSES:
        ended = "has not started yet" if mission.status == "queued" else "has ended"
        raise DecisionRefused(
            f"mission {mission.id} is {mission.status} and {ended}; decisions and guidance "
            "are taken only while it runs or waits"
        )
    # Guidance with no request to decide is read by the pair-mode loop alone.
    if (
        kind == "redirect"
        and request_id is None
        and mission.pair_loop != "running"
        and store.pending_request(mission.id) is None
    ):
        raise DecisionRefused(guidance_refusal(mission))
    return store.record_decision(mission.id, kind, by, text, request_id=request_id)


def takes_guidance(mission: Mission) -> bool:
    """Whether guidance sent now reaches the mission's model: its pair-mode loop runs."""
    return mission.status in RUNNING_STATUSES and mission.pair_loop == "running"


def guidance_refusal(mission: Mission) -> str:
    if mission.pair_loop == "ended":
        return (
            f"mission {mission.id} no longer takes guidance: its loop has ended and the fix "
            "is being verified or delivered; cancel it, or send guidance with "
            "`/loopwright retry` or `/loopwright fix <guidance>` once it ends"
        )
    return (
        f"mission {mission.id} does not take guidance: pair mode is not on for it (set "
        "`pair: true` in .github/loopwright.yml on the default branch), or its loop has not "
        "started yet"
    )
