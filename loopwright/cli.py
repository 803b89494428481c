"""The `loopwright` command line: fix, build, init, replay, model, doctor, sandbox build.

Exit codes (EXIT_CODES): 0 verified (or a command succeeded), 1 not verified, 2 usage or
configuration errors, 3 nothing to fix, 4 flaky, 5 an environment problem.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from loopwright import __version__
from loopwright.config import ConfigError, Settings
from loopwright.events import Event, EventBus, EventSink, NdjsonWriter
from loopwright.missions.log import KeptMission, cli_request
from loopwright.missions.progress import ProgressPrinter, color_enabled, replay, terminal_safe
from loopwright.redaction import Redactor
from loopwright.sandbox.base import SandboxError, SandboxProvider
from loopwright.sandbox.factory import get_provider
from loopwright.secret_env import HandoffError, restart_without_secrets

if TYPE_CHECKING:
    from loopwright.agent.model import OpenAIModel
    from loopwright.cancellation import Cancellation
    from loopwright.missions.fix import FixRequest
    from loopwright.request import MissionRequest
    from loopwright.store.repository import Store

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOTHING_TO_FIX, EXIT_FLAKY, EXIT_ENVIRONMENT = range(6)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C
EXIT_CODES = """exit codes:
  0  verified (or the command succeeded)
  1  not verified (the fix failed verification, or a budget ran out)
  2  usage or configuration error (bad flags or settings, not a directory, not a git
     repository, a bad .loopwright.yml, no test command found)
  3  nothing to fix (the tests already pass)
  4  flaky (the failing tests pass on a re-run with no change)
  5  environment problem (Docker unreachable, the sandbox image missing, the setup or test
     command cannot run, the model endpoint not answering)
  130  Ctrl-C: the mission was cancelled (with --json, its result says cancelled)"""
# What a mission's `error` event names as its cause, by exit code.
USAGE_ERROR_KINDS = frozenset({"ConfigError", "DetectionError", "WorkspaceError"})
ENVIRONMENT_ERROR_KINDS = frozenset({"SandboxError", "ModelError"})


class FixResultLike(Protocol):
    """What the CLI prints of a fix or build result."""

    @property
    def mission(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def message(self) -> str: ...

    @property
    def summary(self) -> str: ...

    @property
    def patch(self) -> str: ...

    @property
    def verification(self) -> dict[str, Any] | None: ...

    def to_dict(self) -> dict[str, Any]: ...


class UsageError(Exception):
    """Bad flags or settings; printed as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """Reports bad flags as a `UsageError`, so `--json` still prints its one object."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def add_output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print the result as one JSON object on stdout"
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="print only the verdict line on stderr"
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="also print debug logs on stderr"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="loopwright",
        description="Fix failing tests with a model, and prove the fix before anyone sees it.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"loopwright {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    fix = sub.add_parser(
        "fix",
        help="fix a repository whose tests fail",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fix.add_argument("source", metavar="PATH_OR_GIT_URL")
    fix.add_argument("--test-cmd", help="the command that runs the tests (default: detected)")
    fix.add_argument(
        "--setup-cmd", help="install dependencies before the tests (default: detected)"
    )
    fix.add_argument("--guidance", help="extra instructions for the model")
    fix.add_argument(
        "--no-instructions",
        action="store_true",
        help="do not give the model the tree's AGENTS.md / CLAUDE.md / "
        ".github/copilot-instructions.md",
    )
    fix.add_argument("--sandbox", choices=("docker", "local"), help="where commands run")
    fix.add_argument("--events", type=Path, metavar="FILE.ndjson", help="write every event here")
    add_output_options(fix)
    fix.add_argument("--show-diff", action="store_true", help="print the full patch at the end")
    fix.add_argument("--dry-run", action="store_true", help="do not apply the verified patch")
    fix.add_argument("--max-steps", type=int, help="cap on model calls (LOOPWRIGHT_MAX_STEPS)")
    fix.add_argument(
        "--serve",
        action="store_true",
        help="watch the mission live in a browser: serves the view on localhost, prints its URL",
    )
    fix.add_argument(
        "--port", type=int, default=0, help="port for --serve (default: any free port)"
    )
    group = fix.add_mutually_exclusive_group()
    group.add_argument("--record", type=Path, metavar="FILE", help="save the model exchanges")
    group.add_argument("--replay", type=Path, metavar="FILE", help="serve a recorded session")

    build = sub.add_parser(
        "build",
        help="build a small app with tests from a specification",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    build.add_argument("spec", metavar="SPEC", help="what to build, or @FILE to read it from FILE")
    build.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="a new or empty directory"
    )
    build.add_argument("--lang", choices=("node", "python"), default="node", help="the stack")
    build.add_argument("--sandbox", choices=("docker", "local"), help="where commands run")
    build.add_argument("--events", type=Path, metavar="FILE.ndjson", help="write every event here")
    add_output_options(build)
    build.add_argument("--max-steps", type=int, help="cap on model calls (LOOPWRIGHT_MAX_STEPS)")
    build.add_argument(
        "--boot-timeout", type=float, metavar="SECONDS", help="how long the app may take to start"
    )
    build_group = build.add_mutually_exclusive_group()
    build_group.add_argument("--record", type=Path, metavar="FILE", help="save the model exchanges")
    build_group.add_argument("--replay", type=Path, metavar="FILE", help="serve a recorded session")

    serve = sub.add_parser(
        "serve",
        help="run the GitHub App server (webhooks, API); without App settings, a local "
        "dashboard over the stored missions",
    )
    serve.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")

    worker = sub.add_parser("worker", help="run queued App missions from the shared store")
    worker.add_argument(
        "--poll", type=float, default=2.0, help="seconds between looks for queued missions"
    )

    rep = sub.add_parser("replay", help="render a saved event log (NDJSON) in the terminal")
    rep.add_argument("events", type=Path, metavar="FILE.ndjson")

    add_mission_commands(sub)

    init = sub.add_parser(
        "init",
        help="write .github/loopwright.yml (and with --action a workflow) for a repository",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    init.add_argument("path", nargs="?", default=".", metavar="PATH", help="default: .")
    init.add_argument(
        "--action",
        action="store_true",
        help="also write .github/workflows/loopwright.yml, running the Action on red CI and "
        "on /loopwright fix comments",
    )
    init.add_argument("--force", action="store_true", help="replace files that exist")
    init.add_argument("--test-cmd", help="the test command to write (default: detected)")
    init.add_argument("--setup-cmd", help="the setup command to write (default: detected)")
    init.add_argument(
        "--uses",
        metavar="OWNER/REPO/action@REF",
        help="the Action the workflow runs (default: a placeholder to replace)",
    )
    init.add_argument(
        "--json", action="store_true", help="print what was written as one JSON object"
    )

    add_model_commands(sub)

    sub.add_parser("doctor", help="check Docker, the sandbox image and browsers")
    sandbox = sub.add_parser("sandbox", help="manage the sandbox image")
    sandbox_sub = sandbox.add_subparsers(dest="sandbox_command", required=True, metavar="ACTION")
    sandbox_sub.add_parser("build", help="build the sandbox image (offline bootstrap if needed)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Known before parsing, so a bad flag next to --json still answers in JSON.
    as_json = "--json" in argv
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        settings = Settings.from_env()
        if args.command == "fix":
            return cmd_fix(args, settings)
        if args.command == "build":
            return cmd_build(args, settings)
        if args.command == "serve":
            return cmd_serve(args, settings)
        if args.command == "worker":
            return cmd_worker(args, settings)
        if args.command == "replay":
            return cmd_replay(args)
        if args.command == "missions":
            return cmd_missions(args, settings)
        if args.command == "show":
            return cmd_show(args, settings)
        if args.command == "init":
            return cmd_init(args)

        if args.command == "model":
            return cmd_model(args)
        if args.command == "doctor":
            return cmd_doctor(settings)
        if args.command == "sandbox":
            return cmd_sandbox_build(settings)
        parser.error(f"unknown command {args.command}")
    except (ConfigError, UsageError) as exc:
        return report_failure(as_json, EXIT_USAGE, str(exc))
    except KeyboardInterrupt:
        return report_failure(as_json, EXIT_INTERRUPTED, "interrupted")


def report_failure(as_json: bool, code: int, message: str, mission: str | None = None) -> int:
    """A run that ends before any result: one line on stderr, and with --json the one
    object stdout carries."""
    print(f"loopwright: {message}", file=sys.stderr)
    if as_json:
        failure: dict[str, Any] = {"status": "error", "exit_code": code, "message": message}
        if mission is not None:
            failure["mission"] = mission
        print(json.dumps(failure, indent=2))
    return code


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
    from loopwright.agent.scripted import (
        ScriptedModelServer,
        fingerprint_mismatch,
        load_recording,
    )

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


def fix_mission_fingerprint(request: FixRequest) -> dict[str, Any] | None:
    """The fingerprint of a fix: what `--record` writes and `--replay` checks."""
    from loopwright.agent.scripted import fix_fingerprint
    from loopwright.sandbox.workspace import (
        WorkspaceError,
        is_git_url,
        tree_fingerprint,
        without_credentials,
    )

    if is_git_url(request.source):
        return fix_fingerprint(None, without_credentials(request.source))
    try:
        tree = tree_fingerprint(Path(request.source).expanduser().resolve())
    except (OSError, WorkspaceError):
        return None  # the mission itself says what is wrong with the source
    return fix_fingerprint(tree, request.source) if tree else None


def cmd_fix(args: argparse.Namespace, settings: Settings) -> int:
    from loopwright.cancellation import Cancellation
    from loopwright.missions.fix import FixMission, FixRequest

    if args.max_steps is not None and args.max_steps < 1:
        raise UsageError("--max-steps must be at least 1")
    settings = settings.with_overrides(sandbox=args.sandbox, max_steps=args.max_steps)
    request = FixRequest(
        source=args.source,
        test_cmd=args.test_cmd,
        setup_cmd=args.setup_cmd,
        guidance=args.guidance,
        dry_run=args.dry_run,
        tree_instructions=not args.no_instructions,
    )
    if args.serve and not 0 <= args.port < 65536:
        raise UsageError(f"--port {args.port} is not a TCP port")
    paths = UserPaths.for_mission(settings, request.mission_id, request.source)
    live: LiveView | None = None
    kept: KeptMission | None = None
    code: int | None = None

    def live_sinks(stack: ExitStack, settings: Settings) -> list[EventSink]:
        nonlocal live, kept
        stored = cli_request(request.source, request.mission_id, guidance=request.guidance)
        kept = keep_mission(stack, settings, stored, paths)
        if not args.serve:
            return [kept.sink]
        view = stack.enter_context(live_view(args, settings, request))
        live = view
        return [kept.sink, *view.sinks]

    try:
        with (
            cli_logging(args, settings),
            mission_wiring(
                args,
                settings,
                request.mission_id,
                paths,
                live_sinks,
                fix_mission_fingerprint(request),
            ) as wired,
        ):
            cancellation = Cancellation()
            with ctrl_c_cancels(cancellation):
                result = FixMission(
                    request,
                    settings=wired.settings,
                    provider=wired.provider,
                    model=wired.model,
                    events=wired.events,
                    cancellation=cancellation,
                ).run()
            if kept is not None:
                kept.finish(result)
            applied = str(Path(request.source).expanduser().resolve()) if result.applied else None
            # Reported before the live view's wait for Ctrl-C, so nothing is held back.
            code = report_result(args, result, wired.error_kind.kind, paths, settings, applied)
    except SandboxError as exc:
        if code is not None:
            # The result is out; closing the sandbox failed after it. Say so, once.
            print(f"loopwright: {paths.text(str(exc))}", file=sys.stderr)
            return code
        return report_failure(args.json, EXIT_ENVIRONMENT, paths.text(str(exc)), request.mission_id)
    return code


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


def terminal_sink(args: argparse.Namespace) -> EventSink:
    """The progress on stderr; with -q only the verdict line (the `done` event)."""
    printer = ProgressPrinter()
    if not args.quiet:
        return printer

    def verdict_only(event: Event) -> None:
        if event.type == "done":
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
    from loopwright.agent.model import OpenAIModel, Recorder

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


def exit_code(status: str, message: str, error_kind: str | None) -> int:
    """The exit code of a mission that ran (see EXIT_CODES)."""
    if status == "verified":
        return EXIT_OK
    if status == "cancelled":
        return EXIT_INTERRUPTED
    if status == "nothing_to_fix":
        return EXIT_NOTHING_TO_FIX
    if status == "flaky":
        return EXIT_FLAKY
    if status == "error":
        if error_kind in USAGE_ERROR_KINDS:
            return EXIT_USAGE
        if error_kind in ENVIRONMENT_ERROR_KINDS or message.startswith("environment problem"):
            return EXIT_ENVIRONMENT
    return EXIT_FAILED


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
        shown = terminal_safe(result.patch) if stream.isatty() else result.patch
        print(shown, end="", file=stream, flush=True)
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


def cmd_build(args: argparse.Namespace, settings: Settings) -> int:
    from loopwright.agent.scripted import build_fingerprint
    from loopwright.missions.build import (
        BuildMission,
        BuildRequest,
        SpecError,
        check_out_dir,
        read_spec,
    )
    from loopwright.verify.web import BOOT_TIMEOUT_S

    try:
        spec = read_spec(args.spec)
        check_out_dir(args.out)
    except SpecError as exc:
        raise UsageError(str(exc)) from None
    if args.max_steps is not None and args.max_steps < 1:
        raise UsageError("--max-steps must be at least 1")
    if args.boot_timeout is not None and args.boot_timeout <= 0:
        raise UsageError("--boot-timeout must be a positive number of seconds")
    settings = settings.with_overrides(sandbox=args.sandbox, max_steps=args.max_steps)
    request = BuildRequest(
        spec=spec,
        out=args.out,
        lang=args.lang,
        boot_timeout_s=args.boot_timeout or BOOT_TIMEOUT_S,
    )
    paths = UserPaths.for_mission(settings, request.mission_id, str(args.out))
    kept: KeptMission | None = None

    def kept_sinks(stack: ExitStack, settings: Settings) -> list[EventSink]:
        nonlocal kept
        stored = cli_request(str(args.out), request.mission_id, kind="build")
        kept = keep_mission(stack, settings, stored, paths)
        return [kept.sink]

    try:
        fingerprint = build_fingerprint(request.spec, request.lang)
        with (
            cli_logging(args, settings),
            mission_wiring(
                args, settings, request.mission_id, paths, kept_sinks, fingerprint
            ) as wired,
        ):
            result = BuildMission(
                request,
                settings=wired.settings,
                provider=wired.provider,
                model=wired.model,
                events=wired.events,
            ).run()
            if kept is not None:
                kept.finish(result)
    except SandboxError as exc:
        return report_failure(args.json, EXIT_ENVIRONMENT, paths.text(str(exc)), request.mission_id)
    return report_result(args, result, wired.error_kind.kind, paths, settings, result.out)


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    """The GitHub App server; without App credentials, a local dashboard over the missions
    stored in the data directory (no webhook endpoint, no queue, no sandboxes)."""
    import uvicorn

    from loopwright.app.hosts import LOOPBACK_HOSTS
    from loopwright.app.server import create_app

    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port} is not a TCP port")
    missing = settings.github.missing()
    app = settings.github
    # Some App settings but not all is a half-configured App, not a wish for the dashboard.
    local = not (app.app_id or app.private_key or app.webhook_secret)
    if missing and not local:
        raise UsageError(f"serve needs {', '.join(missing)}; see README → GitHub App")
    import structlog

    from loopwright.logs import configure_logging

    # From here on every line the server writes, its own and the libraries', is one JSON
    # object with the same keys.
    configure_logging(Redactor(settings.secrets()))
    log = structlog.get_logger("loopwright.serve")
    if args.host not in ("127.0.0.1", "localhost", "::1") and settings.dashboard_token is None:
        log.warning(
            "listening beyond localhost without LOOPWRIGHT_DASHBOARD_TOKEN; "
            "the mission API is readable by anyone who can reach it"
        )
    if local:
        from loopwright.missions.log import open_kept_store

        open_kept_store(settings).close()  # a bad data directory fails here, with its path
        shown = f"[{args.host}]" if ":" in args.host else args.host
        log.info(
            f"local dashboard over the missions in {settings.data_dir} at "
            f"http://{shown}:{args.port}/; no webhook endpoint (set the GitHub App settings, "
            f"{', '.join(missing)}, to serve the App)"
        )
    else:
        from loopwright.github.identity import check_app_credentials

        # Wrong credentials fail here, naming the setting, not on the first webhook.
        identity = check_app_credentials(app)
        log.info(
            f"authenticated as {identity.slug} (App {identity.id})",
            app_slug=identity.slug,
            app_id=identity.id,
        )
        if identity.slug != app.app_slug:
            log.warning(
                f"LOOPWRIGHT_GITHUB_APP_SLUG is {app.app_slug!r} but the App is "
                f"{identity.slug!r}; set it to {identity.slug!r} so the App recognises its "
                "own comments and commits"
            )
    # Live streams stay open until their mission ends; on shutdown they get a moment to
    # finish, then they are cut (browsers reconnect to the next server with Last-Event-ID).
    uvicorn.run(
        create_app(
            settings,
            mode="local" if local else "app",
            # A local dashboard on loopback answers only to loopback names (DNS rebinding).
            allowed_hosts=LOOPBACK_HOSTS if local and args.host in LOOPBACK_HOSTS else None,
        ),
        host=args.host,
        port=args.port,
        log_level="info",
        # uvicorn's own log config would bring its own format; its records go to ours.
        log_config=None,
        timeout_graceful_shutdown=5,
    )
    return EXIT_OK


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    """Run queued missions from the store the server writes (SQLite file or PostgreSQL).

    Any number of workers and the server's own workers can share one store: a mission is
    claimed by one conditional update, so it runs exactly once.
    """
    import signal
    import threading

    import structlog

    from loopwright.app.runtime import open_runtime
    from loopwright.logs import configure_logging

    missing = settings.github.missing(webhooks=False)
    if missing:
        raise UsageError(f"worker needs {', '.join(missing)}; see README → GitHub App")
    if args.poll <= 0:
        raise UsageError("--poll must be a positive number of seconds")
    configure_logging(Redactor(settings.secrets()))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    submitted: set[str] = set()
    with open_runtime(settings, recover=False, webhooks=False) as runtime:
        structlog.get_logger("loopwright.worker").info(
            f"worker running up to {settings.max_concurrent_missions} missions at a "
            "time from the shared store"
        )
        try:
            while not stop.is_set():
                queued = {m.id for m in runtime.store.queued_missions()}
                for mission_id in sorted(queued - submitted):
                    runtime.queue.submit(mission_id)
                # Forget ids that left the queue, so a re-queued mission runs again.
                submitted = (submitted | queued) & (queued | set(runtime.queue.running()))
                stop.wait(args.poll)
        except KeyboardInterrupt:
            pass
    return EXIT_OK


def cmd_replay(args: argparse.Namespace) -> int:
    if not args.events.is_file():
        raise UsageError(f"{args.events}: no such file")
    lines = args.events.read_text(encoding="utf-8").splitlines()
    try:
        replay(lines, ProgressPrinter(sys.stdout))
    except ValueError as exc:
        raise UsageError(f"{args.events}: {exc}") from None
    return EXIT_OK


def add_mission_commands(sub: argparse._SubParsersAction[Parser]) -> None:
    """`missions` and `show`: the kept missions of this data directory."""
    missions = sub.add_parser("missions", help="list the stored missions, newest first")
    missions.add_argument(
        "--json", action="store_true", help='print {"missions": [...]} as one JSON object'
    )
    missions.add_argument("--limit", type=int, default=50, help="how many to list (default 50)")
    show = sub.add_parser(
        "show", help="a stored mission: result, verdict table, diff and event log"
    )
    show.add_argument("mission_id", metavar="ID", help="a mission id from `loopwright missions`")
    show_as = show.add_mutually_exclusive_group()
    show_as.add_argument("--json", action="store_true", help="print the mission as JSON")
    show_as.add_argument(
        "--events", action="store_true", help="print only its event log, as NDJSON"
    )


def cmd_missions(args: argparse.Namespace, settings: Settings) -> int:
    import datetime

    from loopwright.missions.log import list_row, open_kept_store, render_list

    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    with open_kept_store(settings) as store:
        missions = store.list_missions(limit=args.limit)
    now = datetime.datetime.now(datetime.UTC)
    rows = [list_row(m, now) for m in missions]
    print(json.dumps({"missions": rows}, indent=2) if args.json else render_list(rows))
    return EXIT_OK


def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    from loopwright.app.params import valid_mission_id
    from loopwright.missions.log import event_lines, open_kept_store, render_mission

    with open_kept_store(settings) as store:
        found = store.get_mission(args.mission_id) if valid_mission_id(args.mission_id) else None
        if found is None:
            raise UsageError(
                f"no mission {args.mission_id!r} in {settings.data_dir}; "
                "`loopwright missions` lists the stored ones"
            )
        events = store.events_after(found.id, 0)
    if args.events:
        for line in event_lines(events):
            print(line)
    elif args.json:
        print(json.dumps({**found.to_dict(), "events": events}, indent=2))
    else:
        print(render_mission(found, terminal=sys.stdout.isatty()))
        print("\nevents:")
        replay(event_lines(events), ProgressPrinter(sys.stdout))
    return EXIT_OK


def cmd_init(args: argparse.Namespace) -> int:
    from loopwright.init import ACTION_PLACEHOLDER, InitError, init_repository

    try:
        result = init_repository(
            Path(args.path),
            action=args.action,
            force=args.force,
            test_cmd=args.test_cmd,
            setup_cmd=args.setup_cmd,
            uses=args.uses or ACTION_PLACEHOLDER,
        )
    except InitError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps({**result.to_dict(), "exit_code": EXIT_OK}, indent=2))
        return EXIT_OK
    out = sys.stdout
    for name in result.written:
        print(f"wrote {result.root / name}", file=out)
    print(f"  test_cmd: {result.test_cmd}  ({result.reason})", file=out)
    print(f"  setup_cmd: {result.setup_cmd or '(none)'}", file=out)
    if result.ci_workflows:
        print(f"  fixes red runs of: {', '.join(result.ci_workflows)}", file=out)
    print("next:", file=out)
    for number, line in enumerate(result.next_steps, 1):
        print(f"  {number}. {line}", file=out)
    return EXIT_OK


def add_model_commands(sub: argparse._SubParsersAction[Parser]) -> None:
    """`model fetch` and `model serve`: a local model tier on llama.cpp's server."""
    from loopwright.agent.local_model import DEFAULT_THREADS, MODELS

    model = sub.add_parser("model", help="fetch and serve a local model for a local tier")
    model_sub = model.add_subparsers(dest="model_command", required=True, metavar="ACTION")
    fetch = model_sub.add_parser(
        "fetch", help="download a pinned model into the model cache and check its sha256"
    )
    fetch.add_argument("name", metavar="NAME", choices=list(MODELS), help=", ".join(MODELS))
    serve = model_sub.add_parser(
        "serve", help="serve a model on 127.0.0.1 with llama.cpp's server until Ctrl-C"
    )
    serve.add_argument(
        "model", metavar="GGUF_OR_NAME", help=f"a .gguf file, or {' or '.join(MODELS)}"
    )
    serve.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    serve.add_argument(
        "--threads",
        type=int,
        default=DEFAULT_THREADS,
        help=f"CPU threads for the model (default {DEFAULT_THREADS})",
    )


def cmd_model(args: argparse.Namespace) -> int:
    from loopwright.agent import local_model

    def say(line: str) -> None:
        print(f"loopwright: {line}", file=sys.stderr)

    try:
        if args.model_command == "fetch":
            print(local_model.fetch_model(args.name, progress=say))
            return EXIT_OK
        if not 0 < args.port < 65536:
            raise UsageError(f"--port {args.port}: give a port from 1 to 65535")
        if args.threads < 1:
            raise UsageError(f"--threads {args.threads}: give at least 1")
        if args.model in local_model.MODELS:
            gguf = local_model.fetch_model(args.model, progress=say)
        else:
            gguf = Path(args.model)
            if not gguf.is_file():
                raise UsageError(
                    f"{args.model} is neither a .gguf file nor a model name "
                    f"({', '.join(local_model.MODELS)})"
                )
        say(f"loading {gguf} with {args.threads} threads")
        with local_model.LocalServer(gguf, port=args.port, threads=args.threads) as server:
            print(f"LOOPWRIGHT_MODEL_BASE_URL={server.base_url}")
            print(f"LOOPWRIGHT_MODEL_TIERS=local={server.model_id}")
            print(f"LOOPWRIGHT_CONTEXT_TOKENS={local_model.LOCAL_CONTEXT_TOKENS}", flush=True)
            say(
                "serving; in front of hosted tiers: LOOPWRIGHT_MODEL_TIERS="
                f"{server.tier_line('local')},super=MODEL. Ctrl-C stops it"
            )
            try:
                code = server.wait()
            except KeyboardInterrupt:
                # Ctrl-C is how serving ends, as for `loopwright serve`.
                return EXIT_OK
        raise local_model.LocalModelError(f"the model server stopped on its own (exit {code})")
    except local_model.LocalModelError as exc:
        print(f"loopwright: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT


def cmd_doctor(settings: Settings) -> int:
    from loopwright.sandbox.image import doctor

    checks = doctor(settings)
    for check in checks:
        mark = "ok  " if check.ok else "FAIL"
        print(f"[{mark}] {check.name}: {check.detail}")
        if not check.ok and check.fix:
            print(f"       fix: {check.fix}")
    return EXIT_OK if all(c.ok for c in checks) else EXIT_ENVIRONMENT


def cmd_sandbox_build(settings: Settings) -> int:
    import docker
    from docker.errors import DockerException

    from loopwright.sandbox.image import ensure_image

    try:
        client = docker.from_env(version="auto")
    except DockerException as exc:
        print(
            f"loopwright: the Docker engine is not reachable ({exc}); start it with `dockerd &`",
            file=sys.stderr,
        )
        return EXIT_ENVIRONMENT
    try:
        tag = ensure_image(client, settings, lambda line: print(line, file=sys.stderr))
    except SandboxError as exc:
        print(f"loopwright: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    finally:
        client.close()
    print(tag)
    return EXIT_OK


def entry() -> int:
    """The `loopwright` command: secrets leave the environment block first (see secret_env)."""
    try:
        restart_without_secrets([sys.executable, "-m", "loopwright.cli", *sys.argv[1:]])
    except HandoffError as exc:
        return report_failure("--json" in sys.argv[1:], EXIT_USAGE, str(exc))
    return main()


if __name__ == "__main__":
    sys.exit(entry())
