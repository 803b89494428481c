"""The skeleton every mission runs: its stages in order, one place where how they ended
becomes the result's status and message, and the cleanup that always follows.

A mission (a fix, a build) supplies its stages; whatever happens in them, the sandboxes are
removed and the mission ends with a status and a message rather than a traceback.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import structlog

from loopwright.agent.budget import Budget
from loopwright.agent.context import Conversation
from loopwright.agent.loop import AgentLoop
from loopwright.agent.model import Model, ModelError, Sampling
from loopwright.agent.pair import PairMode
from loopwright.agent.tools import Toolbox
from loopwright.cancellation import Cancellation, Cancelled, Superseded
from loopwright.config import ConfigError, Settings
from loopwright.events import EventBus, PhaseName
from loopwright.sandbox.base import ExecResult, Sandbox, SandboxError, SandboxProvider
from loopwright.sandbox.hosttree import discard_tree
from loopwright.sandbox.workspace import WorkspaceError
from loopwright.verify.detect import DetectionError
from loopwright.verify.diff import PatchError

log = structlog.get_logger(__name__)
TRACEBACK_FRAMES = 40

Status = Literal[
    "verified", "unverified", "flaky", "nothing_to_fix", "budget_exceeded", "error", "cancelled"
]
SETUP_TIMEOUT_S = 900.0
MISSION_ERRORS = (ModelError, SandboxError, WorkspaceError, ConfigError, DetectionError, PatchError)
"""What a stage may raise that ends the mission with status `error` and the error's message."""


class MissionFailed(Exception):
    """Ends a mission early with a status other than verified; carries the message."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status = status


class MissionSandboxes:
    """The sandboxes one mission opened; closed together, whatever happened.

    A cancellation closes them from the thread that cancels (ending any command running in
    them), and a sandbox opened after that is closed at once. A sandbox may also be opened
    in the background (`open_in_background`): closing waits for that start to end, so a
    sandbox that finishes starting late is closed too, never left behind. A second
    `close_all` while another thread's is under way waits for it to end, so the mission
    never reports its end while its sandboxes are still being removed.
    """

    def __init__(
        self,
        provider: SandboxProvider,
        mission_id: str,
        cancellation: Cancellation | None = None,
    ) -> None:
        self._provider = provider
        self._mission_id = mission_id
        self._cancellation = cancellation or Cancellation()
        self._lock = threading.Lock()
        self._closing = threading.Lock()
        self._ended = False
        self._starting: list[threading.Thread] = []
        self.opened: list[Sandbox] = []

    def open(self, tree: Path, *, network: bool) -> Sandbox:
        self._cancellation.check()
        if self._ended:
            raise SandboxError("the mission ended before its sandbox could start")
        # Every sandbox of a mission carries the mission's id, so reaping finds them all.
        sandbox = self._provider.create(self._mission_id, tree, network=network)
        with self._lock:
            ended = self._ended
            if not ended:
                self.opened.append(sandbox)
        if ended:
            self._close(sandbox)
            self._cancellation.check()
            raise SandboxError("the mission ended before its sandbox had started")
        if self._cancellation.cancelled:
            self._close(sandbox)
            self._cancellation.check()
        return sandbox

    def open_in_background(self, start: Callable[[], None], name: str) -> bool:
        """Run `start` (which opens a sandbox through `open`) on a thread of its own; the
        mission's cleanup waits for it before closing what was opened. False, and nothing
        runs, when the mission's sandboxes are already closed."""
        thread = threading.Thread(target=start, name=name, daemon=True)
        with self._lock:
            if self._ended:
                return False
            self._starting.append(thread)
            thread.start()
        return True

    def close_all(self, events: EventBus) -> None:
        # Held for the whole close: a cancel closes on its own thread, and the mission's
        # end must not find the list already taken and go on while the removal runs.
        with self._closing:
            with self._lock:
                self._ended = True
                starting, self._starting = list(self._starting), []
            for thread in starting:
                if thread is not threading.current_thread():
                    thread.join()
            with self._lock:
                opened, self.opened = list(self.opened), []
            errors = [error for sandbox in opened if (error := self._close(sandbox))]
            if errors:  # before the lock goes: the mission's end follows its cleanup's error
                events.emit("error", message="sandbox cleanup failed: " + "; ".join(errors))

    @staticmethod
    def _close(sandbox: Sandbox) -> str:
        try:
            sandbox.close()
        except SandboxError as exc:
            return str(exc)
        return ""


@dataclass
class Outcome:
    """What every mission's result holds: the verdict, the change, and what it cost."""

    mission: str
    status: Status
    message: str = ""
    summary: str = ""
    patch: str = ""
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    cost_usd: float = 0.0
    steps: int = 0
    elapsed_s: float = 0.0
    final_tier: str | None = None
    verification: dict[str, Any] | None = None
    screenshot: str | None = None
    """The PNG of the booted web app, when there is a start command."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def account(result: Outcome, *, budget: Budget, elapsed_s: float) -> None:
    """The model usage, cost and effort so far, into the result."""
    result.usage = budget.report()
    result.cost_usd = round(budget.cost_usd, 6)
    result.steps = budget.steps
    result.elapsed_s = round(elapsed_s, 3)


def conclude(
    result: Outcome,
    *,
    budget: Budget,
    elapsed_s: float,
    workdir: Path,
    sandboxes: MissionSandboxes,
    events: EventBus,
) -> None:
    """The end of every mission: sandboxes closed, usage accounted, the result and patch
    saved next to the mission, the working trees removed."""
    sandboxes.close_all(events)
    account(result, budget=budget, elapsed_s=elapsed_s)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "result.json").write_text(json.dumps(result.to_dict(), indent=2), encoding="utf-8")
    if result.patch:
        (workdir / "patch.diff").write_bytes(result.patch.encode("utf-8", "surrogateescape"))
    discard_tree(workdir / "trees")


@contextlib.contextmanager
def timed_phase(events: EventBus, name: PhaseName) -> Iterator[None]:
    """Time one step of a mission that can take over a second; when it ends (or fails), emit
    a `phase` event with its wall time, in the stage it belongs to."""
    started = time.monotonic()
    try:
        yield
    finally:
        events.emit("phase", name=name, duration_s=round(time.monotonic() - started, 3))


def announce_done(result: Outcome, events: EventBus, **extra: Any) -> None:
    """The last event of every mission: its outcome, cost and effort."""
    events.emit(
        "done",
        status=result.status,
        message=result.message,
        summary=result.summary,
        cost_usd=result.cost_usd,
        steps=result.steps,
        elapsed_s=result.elapsed_s,
        final_tier=result.final_tier,
        **extra,
    )


R = TypeVar("R", bound=Outcome)


class Mission(Generic[R]):
    """One mission against a sandbox provider and a model: `run` calls `stages` and turns
    however they end into the result; a subclass supplies the stages."""

    def __init__(
        self,
        result: R,
        *,
        settings: Settings,
        provider: SandboxProvider,
        model: Model,
        events: EventBus,
        clock: Callable[[], float] = time.monotonic,
        cancellation: Cancellation | None = None,
        pair: PairMode | None = None,
    ) -> None:
        self.result = result
        self.pair = pair
        """Where pair mode's decisions come from, when the mission may use it."""
        self.pair_on: PairMode | None = None
        """The channel the loop asks, once the mission knows pair mode is on."""
        self.cancellation = cancellation or Cancellation()
        self.settings = settings
        self.provider = provider
        self.model = model
        self.events = events
        self.clock = clock
        self.workdir = settings.data_dir / "missions" / result.mission
        self.budget = Budget(settings, clock=clock)
        self.sandboxes = MissionSandboxes(provider, result.mission, self.cancellation)
        self.started = clock()

    def stages(self) -> None:
        """Prepare, loop, verify and deliver; a stage that cannot go on raises
        `MissionFailed` (or one of `MISSION_ERRORS`), one that finishes the mission sets the
        result's status."""
        raise NotImplementedError

    def done_fields(self) -> dict[str, Any]:
        """Fields of the `done` event beyond those every mission has."""
        return {}

    def run(self) -> R:
        started = self.started = self.clock()
        # Removing the sandboxes ends whatever command runs in them; the stage that ran it
        # then fails, and the failure is reported as the cancellation it is.
        self.cancellation.on_cancel(lambda: self.sandboxes.close_all(self.events))
        try:
            self.stages()
        except Cancelled:
            self._cancelled()
        except MissionFailed as stop:
            if self.cancellation.cancelled:
                self._cancelled()
            else:
                self.result.status = stop.status
                self.result.message = str(stop)
        except MISSION_ERRORS as exc:
            if self.cancellation.cancelled:
                self._cancelled()
            else:
                self.result.status = "error"
                self.result.message = str(exc)
                self.events.emit("error", message=str(exc), kind=type(exc).__name__)
        except Superseded:
            raise  # the run that replaced this one reports; cleaned up below all the same
        except Exception as exc:  # noqa: BLE001 - every mission ends with a result and `done`
            if self.cancellation.cancelled:
                self._cancelled()
            else:
                self._failed_unexpectedly(exc)
        finally:
            conclude(
                self.result,
                budget=self.budget,
                elapsed_s=self.clock() - started,
                workdir=self.workdir,
                sandboxes=self.sandboxes,
                events=self.events,
            )
        announce_done(self.result, self.events, **self.done_fields())
        return self.result

    def _failed_unexpectedly(self, exc: Exception) -> None:
        """A failure no stage turned into a message of its own: a defect of Loopwright's,
        reported as one, with its traceback in the log."""
        message = (
            f"Loopwright failed unexpectedly ({type(exc).__name__}: {exc}); this is a defect "
            "of Loopwright's: please report it with the mission's events"
        )
        fields = {
            "error": f"{type(exc).__name__}: {exc}",
            # The innermost frames: a RecursionError's whole stack is a thousand of them.
            "traceback": "".join(traceback.format_exception(exc, limit=-TRACEBACK_FRAMES)),
        }
        # With the mission's own secrets masked (an installation token, say), not only the
        # settings' ones the log's redaction knows.
        scrubbed = self.events.scrub(fields)
        log.error("mission failed unexpectedly", mission=self.result.mission, **scrubbed)
        self.result.status = "error"
        self.result.message = message
        self.events.emit("error", message=message, kind=type(exc).__name__)

    def _cancelled(self) -> None:
        summary = self.cancellation.summary or "Cancelled."
        self.result.status = "cancelled"
        self.result.message = summary
        self.result.summary = summary
        if self.events.stage is not None:
            self.events.leave(self.events.stage, "cancelled", reason=summary)

    # -- what the stages share ---------------------------------------------------------

    def agent_loop(
        self,
        toolbox: Toolbox,
        conversation: Conversation,
        *,
        settings: Settings | None = None,
        step_limit: int | None = None,
        sampling: Sampling | None = None,
        stages: tuple[bool, bool] = (True, True),
    ) -> AgentLoop:
        """The model's loop over `toolbox`, on this mission's budget, events and
        cancellation; `settings` narrows the tiers for one attempt."""
        return AgentLoop(
            settings=settings if settings is not None else self.settings,
            model=self.model,
            toolbox=toolbox,
            conversation=conversation,
            budget=self.budget,
            events=self.events,
            cancellation=self.cancellation,
            step_limit=step_limit,
            sampling=sampling,
            manage_stages=stages,
            pair=self.pair_on,
        )

    def run_setup(self, sandbox: Sandbox, command: str) -> ExecResult:
        """The repository's setup command, with the longer of the setup and command
        timeouts (installing dependencies takes longer than one test command)."""
        timeout_s = max(SETUP_TIMEOUT_S, self.settings.command_timeout_s)
        return sandbox.exec(command, timeout_s=timeout_s)
