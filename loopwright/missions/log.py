"""CLI missions kept in the store: every `fix` and `build` run is recorded with its events,
result and patch, and `loopwright missions` / `loopwright show` read them back."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopwright.config import ConfigError, Settings
from loopwright.events import EventSink
from loopwright.redaction import Redactor, redacted_result
from loopwright.request import MissionKind, MissionRequest

if TYPE_CHECKING:
    from loopwright.store.models import Mission
    from loopwright.store.repository import FinishedResult, Store


class StoreUnavailable(ConfigError):
    """The missions store cannot be opened (an unwritable data directory, a bad URL)."""


def open_kept_store(settings: Settings) -> Store:
    """The store CLI missions are kept in, migrated to the newest schema."""
    from sqlalchemy.exc import SQLAlchemyError

    from loopwright.store.repository import open_store

    try:
        return open_store(settings)
    except (OSError, SQLAlchemyError) as exc:
        if settings.database_url:
            fix = "check LOOPWRIGHT_DATABASE_URL"
            where = "at LOOPWRIGHT_DATABASE_URL"
        else:
            fix = "set LOOPWRIGHT_DATA_DIR to a writable directory"
            where = f"in {settings.data_dir}"
        raise StoreUnavailable(f"cannot open the missions store {where} ({exc}); {fix}") from None


def cli_request(
    source: str, mission_id: str, kind: MissionKind = "fix", guidance: str | None = None
) -> MissionRequest:
    """How a CLI mission is stored: the user's path (or git URL) as its repository.

    A CLI run works on a working tree, not a pinned commit; the run id stands in for the
    commit so every run is a mission of its own.
    """
    from loopwright.sandbox.workspace import is_git_url, without_credentials

    # A git URL may carry a user and password or token: it is stored without them.
    url = without_credentials(source) if is_git_url(source) else ""
    return MissionRequest(
        trigger="cli",
        repo=url or str(Path(source).expanduser().resolve()),
        clone_url=url,
        head_sha=mission_id,
        guidance=guidance,
        kind=kind,
    )


@dataclass
class KeptMission:
    """A running CLI mission's record: the store and the sink that appends its events."""

    id: str
    store: Store
    sink: EventSink
    redactor: Redactor

    def finish(self, result: FinishedResult) -> None:
        """Store the result as the API and `show` serve it: the model's text may quote
        secrets, so every text in it is redacted like the events are."""
        self.store.mark_finished(redacted_result(result, self.redactor))

    def fail(self, message: str) -> None:
        self.store.set_status(self.id, "error", message=message, expect="running")


@contextmanager
def kept_mission(
    settings: Settings, request: MissionRequest, mission_id: str
) -> Iterator[KeptMission]:
    """Store the mission as running; a run that ends without a result (Ctrl-C, a crash)
    is marked `interrupted` rather than left `running`."""
    store = open_kept_store(settings)
    try:
        store.create_mission(request, mission_id)
        store.mark_running(mission_id)
        try:
            redactor = Redactor(settings.secrets())
            yield KeptMission(mission_id, store, store.event_sink(mission_id), redactor)
        finally:
            store.set_status(mission_id, "interrupted", expect="running")
    finally:
        store.close()


def age(when: datetime.datetime | None, now: datetime.datetime) -> str:
    """`42s`, `5m`, `3h`, `2d`: how long ago."""
    if when is None:
        return "-"
    seconds = max(int((now - when).total_seconds()), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def list_row(mission: Mission, now: datetime.datetime) -> dict[str, Any]:
    """One line of `loopwright missions`, also its `--json` object."""
    return {
        "id": mission.id,
        "kind": mission.kind,
        "repo": mission.repo,
        "status": mission.status,
        "cost_usd": round(mission.cost_usd, 6),
        "created_at": mission.created_at.isoformat(),
        "age": age(mission.created_at, now),
    }


def render_list(rows: list[dict[str, Any]]) -> str:
    """The missions as an aligned table, newest first."""
    if not rows:
        return "no missions yet; `loopwright fix PATH` runs one"
    header = ["ID", "KIND", "STATUS", "COST", "AGE", "REPO"]
    table = [header] + [
        [r["id"], r["kind"], r["status"], f"${r['cost_usd']:.4f}", r["age"], r["repo"]]
        for r in rows
    ]
    widths = [max(len(row[n]) for row in table) for n in range(len(header) - 1)]
    return "\n".join(
        "  ".join(f"{cell:<{w}}" for cell, w in zip(row, widths, strict=False)) + f"  {row[-1]}"
        for row in table
    )


def render_mission(mission: Mission, *, terminal: bool = False) -> str:
    """`loopwright show`: what was asked, how it ended, the verdict table and the diff.

    For a terminal, control characters in the stored text are shown as escapes; piped,
    the patch stays byte for byte what `git apply` takes."""
    from loopwright.missions.progress import render_verification, terminal_safe

    result = mission.result or {}
    lines = [
        f"mission {mission.id}  ({mission.kind}, {mission.trigger})",
        f"  repository: {mission.repo}",
        f"  status:     {mission.status}",
        f"  cost:       ${mission.cost_usd:.4f}",
        f"  started:    {mission.created_at.isoformat(timespec='seconds')}",
    ]
    if mission.finished_at is not None:
        lines.append(f"  finished:   {mission.finished_at.isoformat(timespec='seconds')}")
    if mission.tier_reached:
        lines.append(f"  tier:       {mission.tier_reached}")
    if mission.message:
        lines.append(f"  message:    {mission.message}")
    if result.get("summary"):
        lines.append(f"  summary:    {result['summary']}")
    if result.get("verification"):
        lines.append(render_verification(result["verification"]))
    patch = str(result.get("patch") or "")
    lines.append("")
    lines.append("patch:" if patch else "patch: (none)")
    if patch:
        lines.append(patch.rstrip("\n"))
    text = "\n".join(lines)
    return terminal_safe(text) if terminal else text


def event_lines(events: list[dict[str, Any]]) -> list[str]:
    """The stored events as NDJSON lines, the shape `--events FILE` writes."""
    return [json.dumps(e, separators=(",", ":")) for e in events]
