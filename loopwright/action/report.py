"""What the workflow gets back: the outcome, workflow commands, step outputs, the step
summary and the artifact directory."""

from __future__ import annotations

import json
import shutil
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from loopwright.action.plan import EXIT_FAILED, EXIT_OK, ActionEnv
from loopwright.events import Event, encodable
from loopwright.github import render
from loopwright.github.delivery import Delivered
from loopwright.missions.result import MissionResult
from loopwright.redaction import Redactor


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
        (directory / "patch.diff").write_bytes(
            redactor.text(result.patch).encode("utf-8", "surrogateescape")
        )


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
    # A name or a test output read from bytes that are not UTF-8 is written as U+FFFD.
    summary = encodable(step_summary(outcome, redactor, action.artifact_dir))
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
