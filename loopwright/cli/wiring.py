"""How a mission started from the command line is wired: event sinks, logs, Ctrl-C,
the printed result, the kept mission and its live view."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopwright.cli.base import FixResultLike, UsageError, exit_code
from loopwright.config import Settings
from loopwright.events import Event, EventBus, EventSink, NdjsonWriter
from loopwright.missions.log import KeptMission
from loopwright.missions.progress import ProgressPrinter, color_enabled, terminal_safe
from loopwright.redaction import Redactor
from loopwright.sandbox.base import SandboxError, SandboxProvider
from loopwright.sandbox.factory import get_provider

if TYPE_CHECKING:
    from loopwright.agent.model import OpenAIModel
    from loopwright.cancellation import Cancellation
    from loopwright.missions.fix import FixRequest
    from loopwright.request import MissionRequest
    from loopwright.store.repository import Store


@contextmanager
def model_endpoint(
    args: argparse.Namespace, settings: Settings, mission: dict[str, Any] | None = None
) -> Iterator[Settings]:
    """Point the settings at a replay server when asked to; otherwise check the key. A
    recording made for another mission than `mission` (its fingerprint) is refused here,
    before anything runs."""
    if args.replay is None:
        if (
            settings.model_api_key is None
            and "tokenfactory.nebius.com" in settings.model_base_url
            and settings.uses_shared_endpoint
        ):
            raise UsageError(
                "LOOPWRIGHT_MODEL_API_KEY is not set; set it to your Nebius Token Factory key, "
                "point LOOPWRIGHT_MODEL_BASE_URL at another OpenAI-compatible endpoint, "
                "or use --replay FILE to serve a recorded session"
            )
        yield settings
        return
    from loopwright.agent.mission_fingerprint import fingerprint_mismatch
    from loopwright.agent.scripted import ScriptedModelServer
    from loopwright.agent.scripted_steps import load_recording

    if not args.replay.is_file():
        raise UsageError(f"--replay {args.replay}: no such file")
    try:
        steps, recorded = load_recording(args.replay)
    except ValueError as exc:
        raise UsageError(f"--replay {args.replay}: {exc}") from None
    if recorded is not None and mission is not None:
        why = fingerprint_mismatch(recorded, mission)
        if why is not None:
            raise UsageError(
                f"--replay {args.replay} belongs to another mission: {why}. Replay it "
                "against the mission it was recorded for, or record this one with --record"
            )
    with ScriptedModelServer(steps) as server:
        yield settings.with_shared_endpoint(server.base_url, "replay")


@dataclass
class Wiring:
    """What a CLI mission runs with: settings (pointed at a replay server if asked), the
    event bus with its sinks, the model client and the sandbox provider."""

    settings: Settings
    events: EventBus
    model: OpenAIModel
    provider: SandboxProvider
    error_kind: FirstErrorKind


class FirstErrorKind:
    """An event sink that keeps the cause (exception class) the first `error` event names;
    it decides between exit codes 2, 5 and 1 for a mission that ended in `error`."""

    def __init__(self) -> None:
        self.kind: str | None = None

    def __call__(self, event: Event) -> None:
        if self.kind is None and event.type == "error":
            kind = event.to_dict().get("kind")
            self.kind = str(kind) if kind else None


@dataclass(frozen=True)
class UserPaths:
    """A mission's internal working copies (under the data dir), named as the user knows
    them: the repository path or URL they passed."""

    replacements: tuple[tuple[str, str], ...]

    @classmethod
    def for_mission(cls, settings: Settings, mission_id: str, source: str) -> UserPaths:
        from loopwright.sandbox.workspace import is_git_url, without_credentials

        shown = (
            without_credentials(source)
            if is_git_url(source)
            else str(Path(source).expanduser().resolve())
        )
        trees = settings.data_dir / "missions" / mission_id / "trees"
        internal = {
            str(root / name)
            for root in (trees, trees.resolve())
            for name in ("base", "verify", "verify-filtered", "clone")
        }
        # Longest first, so `verify-filtered` is not left as `<repo>-filtered`.
        return cls(tuple((path, shown) for path in sorted(internal, key=len, reverse=True)))

    def text(self, text: str) -> str:
        for internal, shown in self.replacements:
            text = text.replace(internal, shown)
        return text

    def data(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: v if k == "patch" else self.data(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.data(v) for v in value]
        return value


def in_user_paths(sink: EventSink, paths: UserPaths) -> EventSink:
    """`sink`, receiving every event with internal paths named as the user's."""

    def forward(event: Event) -> None:
        sink(Event.from_dict(paths.data(event.to_dict())))

    return forward


QUIET_EVENTS = frozenset({"done", "approval_requested", "decision"})
"""What -q still prints: the verdict, and in pair mode what waits for you and what was
decided (the prompt needs them)."""


def terminal_sink(args: argparse.Namespace) -> EventSink:
    """The progress on stderr; with -q only the verdict line (the `done` event) and pair
    mode's requests and decisions."""
    printer = ProgressPrinter()
    if not args.quiet:
        return printer

    def verdict_only(event: Event) -> None:
        if event.type in QUIET_EVENTS:
            printer(event)

    return verdict_only


def cli_logging(args: argparse.Namespace, settings: Settings) -> AbstractContextManager[None]:
    """Library and Loopwright logs on stderr in one format: warnings only, all with -v."""
    from loopwright.logs import logging_configured

    return logging_configured(
        Redactor(settings.secrets()),
        level=logging.DEBUG if args.verbose else logging.WARNING,
        color=color_enabled(sys.stderr),
    )


@contextmanager
def mission_wiring(
    args: argparse.Namespace,
    settings: Settings,
    mission_id: str,
    paths: UserPaths,
    extra_sinks: Callable[[ExitStack, Settings], list[EventSink]] | None = None,
    fingerprint: dict[str, Any] | None = None,
) -> Iterator[Wiring]:
    """Open everything `fix` and `build` share, and close it all on the way out.

    Raises `SandboxError` when the sandbox backend is unavailable.
    """
    from loopwright.agent.model import OpenAIModel
    from loopwright.agent.recording import Recorder

    error_kind = FirstErrorKind()
    sinks: list[EventSink] = [terminal_sink(args), error_kind]
    # Checked before anything runs, so a bad path costs no model call and loses no output.
    for flag, path in (("--events", args.events), ("--record", args.record)):
        if path is not None:
            check_writable(flag, path)
    with ExitStack() as stack:
        if args.events:
            writer = NdjsonWriter(args.events)
            stack.callback(writer.close)
            sinks.append(writer)
        settings = stack.enter_context(model_endpoint(args, settings, fingerprint))
        if extra_sinks is not None:
            sinks.extend(extra_sinks(stack, settings))
        # The terminal, the event log and the live view name the user's repository, not
        # the mission's working copies of it.
        shown = [in_user_paths(sink, paths) for sink in sinks]
        events = EventBus(mission_id, shown, Redactor(settings.secrets()))
        recorder = Recorder(args.record, fingerprint) if args.record else None
        model = OpenAIModel(settings, recorder=recorder)
        stack.callback(model.close)
        provider = get_provider(settings)
        stack.callback(provider.close)
        yield Wiring(settings, events, model, provider, error_kind)


CTRL_C_SUMMARY = "Cancelled with Ctrl-C."


@contextmanager
def ctrl_c_cancels(cancellation: Cancellation) -> Iterator[None]:
    """The first Ctrl-C cancels the mission (its sandbox goes, its result says cancelled);
    a second one interrupts at once. The cancel runs on a thread of its own, because the
    signal can arrive while this thread holds a lock the cancel needs."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigint(signum: int, frame: Any) -> None:
        if cancellation.cancelled:
            raise KeyboardInterrupt
        print("loopwright: cancelling (Ctrl-C again to stop at once)", file=sys.stderr)
        threading.Thread(
            target=cancellation.cancel, args=(CTRL_C_SUMMARY,), name="ctrl-c", daemon=True
        ).start()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def report_result(
    args: argparse.Namespace,
    result: FixResultLike,
    error_kind: str | None,
    paths: UserPaths,
    settings: Settings,
    applied_to: str | None,
) -> int:
    """End the mission in the terminal (id, summary, diffstat, where the patch is), print
    the result as asked and turn it into the exit code."""
    from loopwright.missions.result import outcome_block

    code = exit_code(result.status, result.message, error_kind)
    saved = settings.data_dir / "missions" / result.mission / "patch.diff"
    if not args.quiet:
        block = outcome_block(
            mission=result.mission,
            summary=paths.text(result.summary),
            patch=result.patch,
            patch_path=saved if result.patch else None,
            applied_to=applied_to,
        )
        print(block, file=sys.stderr)
    if getattr(args, "show_diff", False) and result.patch:
        # On stdout it can be piped to `git apply`; with --json stdout holds only the object.
        stream = sys.stderr if args.json else sys.stdout
        if stream.isatty():
            # Bytes that are not UTF-8 are shown as escapes, like control characters.
            shown = terminal_safe(result.patch).encode("utf-8", "backslashreplace").decode()
            print(shown, end="", file=stream, flush=True)
        else:
            # Byte for byte, so the patch still applies to files that are not UTF-8.
            stream.flush()
            stream.buffer.write(result.patch.encode("utf-8", "surrogateescape"))
            stream.buffer.flush()
    if args.json:
        print(json.dumps({**paths.data(result.to_dict()), "exit_code": code}, indent=2), flush=True)
    return code


def check_writable(flag: str, path: Path) -> None:
    """Raise a `UsageError` unless `path` is a file Loopwright can create or write."""
    import tempfile

    if path.is_dir():
        raise UsageError(f"{flag} {path} is a directory; name a file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}."):
            pass
        if path.exists() and not os.access(path, os.W_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as exc:
        raise UsageError(
            f"{flag} {path}: cannot write there ({exc.strerror or exc}); name a file in a "
            "writable directory"
        ) from None


@dataclass
class LiveView:
    """The view `fix --serve` runs beside a CLI mission: its URL, store and event sinks."""

    url: str
    store: Store
    sinks: list[EventSink]


def keep_mission(
    stack: ExitStack, settings: Settings, request: MissionRequest, paths: UserPaths
) -> KeptMission:
    """Store a CLI mission (its events, result and patch) for `missions`, `show` and the
    dashboard, whether or not `--serve` was given; a failure is stored in the user's paths."""
    from loopwright.missions.log import kept_mission

    kept = stack.enter_context(kept_mission(settings, request, request.head_sha))

    def record_failure(exc_type: type[BaseException] | None, exc: BaseException | None,
                       tb: object) -> None:  # fmt: skip
        # Runs before the record closes, so the list and the page show why it failed.
        if isinstance(exc, SandboxError):
            kept.fail(paths.text(str(exc)))

    stack.push(record_failure)
    return kept


@contextmanager
def live_view(
    args: argparse.Namespace, settings: Settings, request: FixRequest
) -> Iterator[LiveView]:
    """Serve the live view on localhost for one CLI mission (no GitHub App needed).

    The mission is kept in the data dir's store like an App mission (see `keep_mission`),
    so its page, the list and the cost view work the same way, and stay there afterwards.
    """
    from loopwright.app.hosts import LOOPBACK_HOSTS
    from loopwright.app.server import create_app, serve_in_thread

    app = create_app(settings, mode="local", allowed_hosts=LOOPBACK_HOSTS)
    with ExitStack() as stack:
        try:
            url = stack.enter_context(serve_in_thread(app, "127.0.0.1", args.port))
        except OSError as exc:
            raise UsageError(
                f"--serve: cannot listen on 127.0.0.1:{args.port} ({exc.strerror})"
            ) from None
        store: Store = app.state.store
        mission_url = f"{url}/missions/{request.mission_id}"
        print(f"loopwright: watch this mission at {mission_url}", file=sys.stderr, flush=True)
        if settings.dashboard_token is not None:
            print("loopwright: sign in with LOOPWRIGHT_DASHBOARD_TOKEN", file=sys.stderr)
        hub = app.state.hub
        yield LiveView(mission_url, store, [hub.sink(request.mission_id)])
        if sys.stdin.isatty():
            print(
                f"loopwright: the mission is over; {mission_url} keeps serving until you "
                "press Ctrl-C",
                file=sys.stderr,
                flush=True,
            )
            wait_for_interrupt()


def wait_for_interrupt() -> None:
    """Block until Ctrl-C (or SIGTERM), then return normally."""
    import signal
    import threading

    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        with suppress(KeyboardInterrupt):
            while not stop.wait(0.5):
                pass
    finally:
        signal.signal(signal.SIGTERM, previous)
