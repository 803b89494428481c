"""The one event schema shared by NDJSON files, the database and the live stream.

An event is a flat JSON object: `seq`, `ts`, `mission`, `type`, `stage`, plus fields that
depend on `type`. `EventBus` numbers events, redacts them and hands them to every sink.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from loopwright.redaction import Redactor

EventType = Literal[
    "stage",
    "plan",
    "model_call",
    "tool_call",
    "tool_result",
    "escalation",
    "verification",
    "screenshot",
    "delivery",
    "phase",
    "done",
    "error",
]
Stage = Literal["prepare", "plan", "loop", "verify", "deliver"]
STAGES: tuple[Stage, ...] = ("prepare", "plan", "loop", "verify", "deliver")


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

    Thread-safe: sandbox output callbacks may emit from another thread.
    """

    def __init__(
        self,
        mission: str,
        sinks: list[EventSink] | None = None,
        redactor: Redactor | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.mission = mission
        self.sinks: list[EventSink] = list(sinks or [])
        self.stage: Stage | None = None
        self._redactor = redactor or Redactor()
        self._clock = clock
        self._seq = 0
        self._lock = threading.Lock()

    def emit(self, type: EventType, stage: Stage | None = None, **fields: Any) -> Event:
        with self._lock:
            self._seq += 1
            event = Event(
                seq=self._seq,
                ts=self._clock(),
                mission=self.mission,
                type=type,
                stage=stage if stage is not None else self.stage,
                fields=self._redactor.data(fields),
            )
            for sink in self.sinks:
                sink(event)
        return event

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
