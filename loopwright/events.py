"""The one event schema shared by NDJSON files, the database and the live stream.

An event is a flat JSON object: `seq`, `ts`, `mission`, `type`, `stage`, plus fields that
depend on `type`. Each type has a model here (`EVENT_MODELS`) that says which fields it
carries; `EventBus` checks every event against it, numbers it, redacts it and hands it to
every sink. `event_schemas()` publishes the same models as JSON Schemas.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, Protocol, cast, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

EventType = Literal[
    "stage",
    "plan",
    "model_call",
    "model_retry",
    "tool_call",
    "tool_result",
    "escalation",
    "attempt",
    "verification",
    "screenshot",
    "delivery",
    "done",
    "error",
    "phase",
    "approval_requested",
    "decision",
]
Stage = Literal["prepare", "plan", "loop", "verify", "deliver"]
STAGES: tuple[Stage, ...] = ("prepare", "plan", "loop", "verify", "deliver")
EVENT_TYPES: tuple[EventType, ...] = get_args(EventType)
PhaseName = Literal[
    "snapshot",
    "sandbox_start",
    "setup",
    "reproduce",
    "patch_export",
    "verify_sandbox",
    "verify_setup",
    "verify_tests",
    "web_check",
    "new_tests",
    "deliver",
]
JsonObject = dict[str, Any]


LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""Half of a UTF-16 surrogate pair on its own: not a character, so no UTF-8 encoder takes
it. JSON's `\\ud800` decodes to one, and so does an undecodable byte of a file name read
with `surrogateescape`."""


def encodable(value: Any) -> Any:
    """A copy of a JSON-shaped value with every lone surrogate in its strings replaced by
    U+FFFD, so a UTF-8 file, terminal, browser or database column takes it."""
    if isinstance(value, str):
        return LONE_SURROGATE.sub("\ufffd", value) if LONE_SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {encodable(k): encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encodable(v) for v in value]
    return value


class Scrubber(Protocol):
    """What removes secrets from an event's fields before any sink sees them; the mission
    passes its `loopwright.redaction.Redactor`, which knows the secrets to mask."""

    def data(self, value: JsonObject) -> JsonObject: ...


class EventFieldsError(ValueError):
    """An event whose type is unknown or whose fields do not match its model: a bug in the
    code that emitted it, never something a user or a model can cause."""


# -- one model per event type -------------------------------------------------------------
# The envelope (`seq`, `ts`, `mission`, `type`, `stage`) is common; each model lists the
# fields of its type. Optional fields may be absent; nothing else may be present.


class _Envelope(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seq: int = Field(ge=1, description="Position in the mission's log, from 1, without gaps.")
    ts: float = Field(description="Unix time in seconds, rounded to milliseconds.")
    mission: str = Field(description="The mission id.")
    stage: Stage | None = Field(description="The pipeline stage the event belongs to.")


class InstructionsFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="The instruction file, e.g. `AGENTS.md`.")
    bytes: int = Field(ge=0, description="How many bytes of it the model was given.")
    truncated: bool = Field(description="The file was longer than the cap and was cut.")
    origin: Literal["default_branch", "tree"] = Field(
        description="Where it was read: the repository's default branch (App, Action) or the "
        "tree being fixed (CLI)."
    )


class StageEvent(_Envelope):
    """A stage started, finished, or reported what it found (`detected`)."""

    type: Literal["stage"]
    status: str = Field(
        description="started, detected, or how the stage ended (reproduced, done, "
        "finished, verified, unverified, applied, skipped, delivered, error, ...)."
    )
    source: str | None = Field(None, description="prepare: where the repository came from.")
    mode: str | None = Field(None, description="prepare of a build: `build`.")
    lang: str | None = Field(None, description="prepare of a build: the language asked for.")
    spec: str | None = Field(None, description="prepare of a build: the spec's title.")
    head: str | None = Field(None, description="detected: the commit the mission starts from.")
    test_command: str | None = Field(None, description="detected: the test command.")
    setup_command: str | None = Field(None, description="detected: the setup command.")
    config: str | None = Field(None, description="detected: where the repository config came from.")
    instructions: InstructionsFields | None = Field(
        None, description="detected: the repository's instruction file given to the model."
    )
    reason: str | None = Field(None, description="Why the stage ended as it did.")
    failing: list[str] | None = Field(None, description="reproduced: the failing test ids.")
    exit_code: int | None = Field(None, description="reproduced: the test command's exit code.")
    pattern: dict[str, list[str]] | None = Field(
        None, description="Each failing test's outcome per run (reproduce and re-runs)."
    )
    tests: int | list[str] | None = Field(
        None, description="nothing_to_fix: how many tests passed; flaky: the flaky tests."
    )
    path: str | None = Field(None, description="deliver: where the patch or app was written.")
    files: list[str] | None = Field(None, description="deliver: the diffstat's summary line.")
    commit: str | None = Field(None, description="deliver of a build: the commit written.")
    report: str | None = Field(None, description="deliver of a build: the report's path.")
    kind: str | None = Field(
        None, description="deliver on GitHub: what was delivered (pull_request, commit, comment)."
    )
    url: str | None = Field(None, description="deliver on GitHub: where it was delivered.")


class PlanItemFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step: str
    status: str


class PlanEvent(_Envelope):
    """The model's checklist, whole, each time it changes."""

    type: Literal["plan"]
    items: list[PlanItemFields]


class ModelCallEvent(_Envelope):
    """One completion from the model endpoint, with its tokens and cost."""

    type: Literal["model_call"]
    step: int
    tier: str
    model: str | None = None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    total_cost_usd: float | None = None
    duration_s: float | None = None
    tool_calls: list[str] = Field(default_factory=list)
    content: str | None = Field(None, description="The model's text, cut in the middle.")
    tool_call_source: Literal["native", "content"] | None = Field(
        None,
        description="Where the tool calls came from: the endpoint's `tool_calls` (native), or "
        "recovered from calls the model wrote in its text (content).",
    )
    recovered_tool_calls: int | None = Field(
        None, ge=0, description="How many tool calls were recovered from the model's text."
    )
    usage_estimated: bool | None = Field(
        None, description="The endpoint reported no usage; the token counts are estimates."
    )
    reasoning_tokens: int | None = Field(
        None, ge=0, description="Estimated tokens of reasoning sent apart from the content."
    )
    cached_tokens: int | None = Field(
        None,
        ge=0,
        description="Prompt tokens the endpoint served from its prompt cache (0 when it "
        "reports none).",
    )


class ModelRetryEvent(_Envelope):
    """A model call's attempt failed; the call is tried again after `wait_s` seconds."""

    type: Literal["model_retry"]
    step: int
    tier: str
    attempt: int = Field(ge=1, description="The attempt that failed, from 1.")
    attempts: int = Field(ge=1, description="How many attempts the call may take in all.")
    reason: str = Field(description="Why the attempt failed, in words (timeout, status...).")
    wait_s: float = Field(ge=0, description="Seconds until the next attempt.")


class AttemptEvent(_Envelope):
    """One of a tier's independent attempts started or ended (LOOPWRIGHT_ATTEMPTS)."""

    type: Literal["attempt"]
    tier: str
    attempt: int = Field(ge=1, description="This attempt's number, from 1.")
    attempts: int = Field(ge=1, description="How many attempts the tier may make.")
    seed: int
    status: Literal["started", "passed", "failed"] = Field(
        description="passed: the model finished and the test command passed in the loop's "
        "sandbox (verification still judges it); failed: it did not."
    )
    steps: int | None = Field(None, ge=0, description="Model steps the attempt took.")
    reason: str | None = Field(None, description="Why a failed attempt failed.")


class ToolCallEvent(_Envelope):
    """The model asked for a tool; `summary` says in words what the call does."""

    type: Literal["tool_call"]
    id: str = Field(description="The tool call id; its `tool_result` carries the same.")
    tool: str
    arguments: str = Field(description="The arguments as the model wrote them (JSON text).")
    args: JsonObject = Field(
        description="The arguments decoded; `{}` when `arguments` is not a JSON object."
    )
    args_error: str | None = Field(None, description="Why `arguments` could not be decoded.")
    summary: str = Field(description='What the call does, e.g. "Read tests/test_x.py:1-40".')


class ToolResultEvent(_Envelope):
    """What a tool call did."""

    type: Literal["tool_result"]
    id: str
    tool: str
    status: Literal["ok", "failed", "refused", "error"]
    exit_code: int | None = None
    timed_out: bool = False
    duration_s: float | None = None
    output: str = Field("", description="The observation or command output, cut in the middle.")
    summary: str | None = Field(None, description='The outcome in words, e.g. "exit 1".')


class EscalationEvent(_Envelope):
    """The loop moved to a stronger model tier."""

    type: Literal["escalation"]
    from_tier: str
    to_tier: str
    reason: str


class VerificationEvent(_Envelope):
    """The evidence of the independent verification run and its verdict."""

    type: Literal["verification"]
    verified: bool
    reasons: list[str] = Field(default_factory=list)
    rows: list[JsonObject] = Field(
        default_factory=list, description="Per test: id, before, after, status."
    )
    tamper: list[JsonObject] = Field(default_factory=list)
    commands: list[JsonObject] = Field(default_factory=list)
    report_source: dict[str, str] | None = None
    basis: str | None = None
    after_output: str | None = None
    web: JsonObject | None = None
    network: str | None = None
    phases: list[JsonObject] | None = None
    tree: dict[str, list[str]] | None = None
    dependency_changes: list[str] | None = None
    new_tests: JsonObject | None = None


class ScreenshotEvent(_Envelope):
    """The web check booted the app and loaded a page (or could not)."""

    type: Literal["screenshot"]
    path: str | None = None
    http_status: int | None = None
    console_errors: list[str] = Field(default_factory=list)
    ok: bool | None = None
    reason: str | None = None
    url_path: str | None = None


class DeliveryEvent(_Envelope):
    """Where the verified fix went (a pull request, a comment) or why it went nowhere."""

    type: Literal["delivery"]
    kind: str
    url: str | None = None
    reason: str | None = None


class DoneEvent(_Envelope):
    """The mission's outcome: the last event of every mission."""

    type: Literal["done"]
    status: str
    message: str | None = None
    summary: str | None = None
    cost_usd: float | None = None
    steps: int | None = None
    elapsed_s: float | None = None
    final_tier: str | None = None
    out: str | None = Field(None, description="build: the output directory.")


class ErrorEvent(_Envelope):
    """Something went wrong outside the model's control."""

    type: Literal["error"]
    message: str
    kind: str | None = Field(None, description="The exception's class name.")


class PhaseEvent(_Envelope):
    """A timed phase ended; `stage` is the stage it belongs to."""

    type: Literal["phase"]
    name: PhaseName
    duration_s: float = Field(ge=0, description="Seconds, rounded to 3 places.")


class ApprovalRequestedEvent(_Envelope):
    """Pair mode: the loop waits for a person to approve, reject or redirect an action."""

    type: Literal["approval_requested"]
    id: str = Field(description="The request id; the `decision` answering it carries the same.")
    tool: str = Field(description="The tool the model called (run_command, write_file, ...).")
    rule: str = Field(description="Why it asks: network, removals or ask_path.")
    what: str = Field(description='The action in words, e.g. "Run `pip install requests`".')
    why: str = Field(description="Why the action needs approval, in words.")
    command: str | None = Field(None, description="The exact command, for run_command.")
    diff: str | None = Field(None, description="The change as a unified diff, for file writes.")
    network: bool = Field(
        False, description="Approving runs the command with the network, for it alone."
    )
    expires_s: float = Field(ge=0, description="Seconds until an unanswered request is rejected.")


class DecisionEvent(_Envelope):
    """Pair mode: a person's decision on a request, or guidance sent during the loop."""

    type: Literal["decision"]
    decision: Literal["approve", "reject", "redirect", "guidance"]
    by: str = Field(description="Who decided: @login, dashboard, terminal or expiry.")
    id: str | None = Field(None, description="The request decided; absent for guidance.")
    text: str | None = Field(None, description="The reason of a reject, the guidance otherwise.")


EVENT_MODELS: dict[str, type[_Envelope]] = {
    "stage": StageEvent,
    "plan": PlanEvent,
    "model_call": ModelCallEvent,
    "model_retry": ModelRetryEvent,
    "tool_call": ToolCallEvent,
    "tool_result": ToolResultEvent,
    "escalation": EscalationEvent,
    "attempt": AttemptEvent,
    "verification": VerificationEvent,
    "screenshot": ScreenshotEvent,
    "delivery": DeliveryEvent,
    "done": DoneEvent,
    "error": ErrorEvent,
    "phase": PhaseEvent,
    "approval_requested": ApprovalRequestedEvent,
    "decision": DecisionEvent,
}


def event_schemas() -> dict[str, JsonObject]:
    """A JSON Schema (draft 2020-12) per event type, for the flat wire object."""
    return {
        name: {"$schema": "https://json-schema.org/draft/2020-12/schema", **m.model_json_schema()}
        for name, m in EVENT_MODELS.items()
    }


def check_event(data: JsonObject) -> _Envelope:
    """Validate one wire object against the model of its type; raises `EventFieldsError`
    naming the type and every field that does not fit."""
    kind = data.get("type")
    model = EVENT_MODELS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise EventFieldsError(
            f"unknown event type {kind!r}; the types are: {', '.join(EVENT_MODELS)}"
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'event'}: {err['msg']}"
            for err in exc.errors()
        )
        raise EventFieldsError(f"a {kind!r} event does not match its model: {problems}") from None


@dataclass(frozen=True)
class Event:
    seq: int
    ts: float
    mission: str
    type: EventType
    stage: Stage | None
    fields: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        base = {
            "seq": self.seq,
            "ts": round(self.ts, 3),
            "mission": self.mission,
            "type": self.type,
            "stage": self.stage,
        }
        return {**self.fields, **base}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        base = {"seq", "ts", "mission", "type", "stage"}
        fields = {k: v for k, v in data.items() if k not in base}
        return cls(
            seq=int(data["seq"]),
            ts=float(data["ts"]),
            mission=str(data["mission"]),
            type=data["type"],
            stage=data.get("stage"),
            fields=fields,
        )


EventSink = Callable[[Event], None]


class EventBus:
    """Numbers, timestamps and redacts events, then fans them out to the sinks.

    The redactor is injected so this module stays a leaf; every mission passes its own.

    Thread-safe: sandbox output callbacks may emit from another thread.
    """

    def __init__(
        self,
        mission: str,
        sinks: list[EventSink] | None,
        redactor: Scrubber,
        clock: Callable[[], float] = time.time,
        *,
        seq_after: int = 0,
    ) -> None:
        """`seq_after`: the last sequence number already in the mission's log (a mission
        run again after its worker was lost continues its log rather than restarting it)."""
        self.mission = mission
        self.sinks: list[EventSink] = list(sinks or [])
        self.stage: Stage | None = None
        self._redactor = redactor
        self._clock = clock
        self._seq = seq_after
        self._lock = threading.Lock()

    def emit(self, type: EventType, stage: Stage | None = None, **fields: Any) -> Event:
        """Check, number, redact and publish one event; raises `EventFieldsError` (before
        anything is published) when the fields do not match the type's model."""
        with self._lock:
            event = Event(
                seq=self._seq + 1,
                ts=self._clock(),
                mission=self.mission,
                type=type,
                stage=stage if stage is not None else self.stage,
                fields=encodable(self._redactor.data(fields)),
            )
            check_event(event.to_dict())
            self._seq += 1
            for sink in self.sinks:
                sink(event)
        return event

    def scrub(self, fields: JsonObject) -> JsonObject:
        """`fields` as an event would carry them: secrets masked, lone surrogates replaced
        (for what the mission writes elsewhere, such as its log)."""
        return cast(JsonObject, encodable(self._redactor.data(fields)))

    def enter(self, stage: Stage, **fields: Any) -> None:
        """Mark the start of a pipeline stage."""
        self.stage = stage
        self.emit("stage", stage, status="started", **fields)

    def leave(self, stage: Stage, status: str, **fields: Any) -> None:
        self.emit("stage", stage, status=status, **fields)


class NdjsonWriter:
    """A sink writing one JSON object per line, flushed per event so `tail -f` works."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = path.open("a", encoding="utf-8")

    def __call__(self, event: Event) -> None:
        self._file.write(event.to_json() + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class EventList:
    """A sink that keeps every event in memory (results, replays, tests)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def of_type(self, type: EventType) -> list[Event]:
        return [e for e in self.events if e.type == type]
