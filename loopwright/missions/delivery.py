"""How a verified fix is delivered: the outcome of the deliver stage, the App's and the
Action's deliverers' signature, and the CLI's own delivery to the working tree."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopwright.events import EventBus
from loopwright.missions.base import timed_phase
from loopwright.missions.result import MissionResult
from loopwright.sandbox.workspace import WorkspaceError, apply_patch, is_git_url


@dataclass(frozen=True)
class DeliveryOutcome:
    """How a mission's deliver stage ended: `status` is the stage event's status
    (`applied`, `delivered`, `skipped` or `failed`) and `fields` its extra fields; a `note`
    is appended to the result's message."""

    status: str
    fields: dict[str, Any] = field(default_factory=dict)
    note: str = ""


Deliverer = Callable[[MissionResult], DeliveryOutcome]
"""Delivers a verified result inside the mission's one deliver stage: the App and the
Action open a pull request (or commit, or comment) here; without one the CLI applies the
patch to the user's working tree."""


def apply_locally(
    source: str, patch: str, *, dry_run: bool, saved: Path, events: EventBus
) -> DeliveryOutcome:
    """The CLI's delivery: apply the verified patch to the user's working tree (`source`),
    or say where it is saved when there is no working tree to apply it to."""
    if dry_run or is_git_url(source):
        why = "dry run" if dry_run else "the source is a URL"
        return DeliveryOutcome("skipped", {"reason": f"{why}: the patch is saved as {saved}"})
    target = Path(source).expanduser().resolve()
    try:
        with timed_phase(events, "deliver"):
            stat = apply_patch(target, patch)
    except WorkspaceError as exc:
        # Verified but not applicable (the working tree changed meanwhile): keep the
        # patch in the result and leave the working tree exactly as it was.
        return DeliveryOutcome(
            "failed",
            {"reason": str(exc)},
            note=f"the patch could not be applied to {target}: {exc}",
        )
    files = stat.strip().splitlines()
    return DeliveryOutcome("applied", {"path": str(target), "files": files[-1:] if files else []})
