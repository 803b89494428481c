"""The `loopwright` command line: fix, build, replay, doctor, sandbox build.

Exit codes: 0 only when a fix was verified (or a command succeeded), 2 for usage and
configuration errors, 1 for every other outcome.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from loopwright import __version__
from loopwright.config import ConfigError, Settings
from loopwright.events import EventBus, EventSink, NdjsonWriter
from loopwright.progress import ProgressPrinter, render_verification, replay
from loopwright.redaction import Redactor
from loopwright.sandbox.base import SandboxError, SandboxProvider
from loopwright.secret_env import HandoffError, restart_without_secrets

if TYPE_CHECKING:
    from loopwright.agent.model import OpenAIModel
    from loopwright.mission import FixRequest
    from loopwright.store.repository import Store

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class FixResultLike(Protocol):
    """What the CLI prints of a fix or build result."""

    @property
    def status(self) -> str: ...

    @property
    def verification(self) -> dict[str, Any] | None: ...

    def to_dict(self) -> dict[str, Any]: ...


class UsageError(Exception):
    """Bad flags or settings; printed as one line, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopwright",
        description="Fix failing tests with a model, and prove the fix before anyone sees it.",
    )
    parser.add_argument("--version", action="version", version=f"loopwright {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    fix = sub.add_parser("fix", help="fix a repository whose tests fail")
    fix.add_argument("source", metavar="PATH_OR_GIT_URL")
    fix.add_argument("--test-cmd", help="the command that runs the tests (default: detected)")
    fix.add_argument(
        "--setup-cmd", help="install dependencies before the tests (default: detected)"
    )
    fix.add_argument("--guidance", help="extra instructions for the model")
    fix.add_argument("--sandbox", choices=("docker", "local"), help="where commands run")
    fix.add_argument("--events", type=Path, metavar="FILE.ndjson", help="write every event here")
    fix.add_argument("--json", action="store_true", help="print the result as one JSON object")
    fix.add_argument("--dry-run", action="store_true", help="do not apply the verified patch")
    fix.add_argument("--max-steps", type=int, help="cap on model calls (LOOPWRIGHT_MAX_STEPS)")
    fix.add_argument("--quiet", action="store_true", help="no progress on stderr")
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

    build = sub.add_parser("build", help="build a small app with tests from a specification")
    build.add_argument("spec", metavar="SPEC", help="what to build, or @FILE to read it from FILE")
    build.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="a new or empty directory"
    )
    build.add_argument("--lang", choices=("node", "python"), default="node", help="the stack")
    build.add_argument("--sandbox", choices=("docker", "local"), help="where commands run")
    build.add_argument("--events", type=Path, metavar="FILE.ndjson", help="write every event here")
    build.add_argument("--json", action="store_true", help="print the result as one JSON object")
    build.add_argument("--max-steps", type=int, help="cap on model calls (LOOPWRIGHT_MAX_STEPS)")
    build.add_argument(
        "--boot-timeout", type=float, metavar="SECONDS", help="how long the app may take to start"
    )
    build.add_argument("--quiet", action="store_true", help="no progress on stderr")
    build_group = build.add_mutually_exclusive_group()
    build_group.add_argument("--record", type=Path, metavar="FILE", help="save the model exchanges")
    build_group.add_argument("--replay", type=Path, metavar="FILE", help="serve a recorded session")

    serve = sub.add_parser("serve", help="run the GitHub App server (webhooks, API)")
    serve.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")

    worker = sub.add_parser("worker", help="run queued App missions from the shared store")
    worker.add_argument(
        "--poll", type=float, default=2.0, help="seconds between looks for queued missions"
    )

    rep = sub.add_parser("replay", help="render a saved event log (NDJSON) in the terminal")
    rep.add_argument("events", type=Path, metavar="FILE.ndjson")

    sub.add_parser("doctor", help="check Docker, the sandbox image and browsers")
    sandbox = sub.add_parser("sandbox", help="manage the sandbox image")
    sandbox_sub = sandbox.add_subparsers(dest="sandbox_command", required=True, metavar="ACTION")
    sandbox_sub.add_parser("build", help="build the sandbox image (offline bootstrap if needed)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
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
        if args.command == "doctor":
            return cmd_doctor(settings)
        if args.command == "sandbox":
            return cmd_sandbox_build(settings)
    except (ConfigError, UsageError) as exc:
        print(f"loopwright: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("loopwright: interrupted", file=sys.stderr)
        return 130
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE  # pragma: no cover - parser.error exits


def make_provider(settings: Settings) -> SandboxProvider:
    if settings.sandbox == "local":
        from loopwright.sandbox.local import LocalProvider

        return LocalProvider(settings.sandbox_limits)
    from loopwright.sandbox.docker import DockerProvider

    provider = DockerProvider(settings)
    # Sandboxes left by a Loopwright process that was killed are removed at start.
    provider.reap_abandoned()
    return provider


@contextmanager
def model_endpoint(
    args: argparse.Namespace, settings: Settings, mission: dict[str, Any] | None = None
) -> Iterator[Settings]:
    """Point the settings at a replay server when asked to; otherwise check the key. A
    recording made for another mission than `mission` (its fingerprint) is refused here,
    before anything runs."""
    if args.replay is None:
        if settings.model_api_key is None and "tokenfactory.nebius.com" in settings.model_base_url:
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
        yield settings.with_overrides(model_base_url=server.base_url, model_api_key="replay")


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
    from loopwright.mission import FixMission, FixRequest

    if args.max_steps is not None and args.max_steps < 1:
        raise UsageError("--max-steps must be at least 1")
    settings = settings.with_overrides(sandbox=args.sandbox, max_steps=args.max_steps)
    request = FixRequest(
        source=args.source,
        test_cmd=args.test_cmd,
        setup_cmd=args.setup_cmd,
        guidance=args.guidance,
        dry_run=args.dry_run,
    )
    if args.serve and not 0 <= args.port < 65536:
        raise UsageError(f"--port {args.port} is not a TCP port")
    live: LiveView | None = None

    def live_sinks(stack: ExitStack, settings: Settings) -> list[EventSink]:
        nonlocal live
        if not args.serve:
            return []
        view = stack.enter_context(live_view(args, settings, request))
        live = view

        def record_failure(exc_type: type[BaseException] | None, exc: BaseException | None,
                           tb: object) -> None:  # fmt: skip
            # Runs before the view shuts down, so the page shows why the mission failed.
            if isinstance(exc, SandboxError):
                view.store.set_status(request.mission_id, "error", message=str(exc))

        stack.push(record_failure)
        return view.sinks

    try:
        with mission_wiring(
            args, settings, request.mission_id, live_sinks, fix_mission_fingerprint(request)
        ) as wired:
            result = FixMission(
                request,
                settings=wired.settings,
                provider=wired.provider,
                model=wired.model,
                events=wired.events,
            ).run()
            if live is not None:
                live.store.mark_finished(result)
    except SandboxError as exc:
        print(f"loopwright: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return report_result(args, result)


@dataclass
class Wiring:
    """What a CLI mission runs with: settings (pointed at a replay server if asked), the
    event bus with its sinks, the model client and the sandbox provider."""

    settings: Settings
    events: EventBus
    model: OpenAIModel
    provider: SandboxProvider


@contextmanager
def mission_wiring(
    args: argparse.Namespace,
    settings: Settings,
    mission_id: str,
    extra_sinks: Callable[[ExitStack, Settings], list[EventSink]] | None = None,
    fingerprint: dict[str, Any] | None = None,
) -> Iterator[Wiring]:
    """Open everything `fix` and `build` share, and close it all on the way out.

    Raises `SandboxError` when the sandbox backend is unavailable.
    """
    from loopwright.agent.model import OpenAIModel, Recorder

    sinks: list[EventSink] = [] if args.quiet else [ProgressPrinter()]
    with ExitStack() as stack:
        if args.events:
            writer = NdjsonWriter(args.events)
            stack.callback(writer.close)
            sinks.append(writer)
        settings = stack.enter_context(model_endpoint(args, settings, fingerprint))
        if extra_sinks is not None:
            sinks.extend(extra_sinks(stack, settings))
        events = EventBus(mission_id, sinks, Redactor(settings.secrets()))
        recorder = Recorder(args.record, fingerprint) if args.record else None
        model = OpenAIModel(settings, recorder=recorder)
        stack.callback(model.close)
        provider = make_provider(settings)
        stack.callback(provider.close)
        yield Wiring(settings, events, model, provider)


def report_result(args: argparse.Namespace, result: FixResultLike) -> int:
    """Print the result as asked and turn it into the exit code (0 only when verified)."""
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    elif args.quiet and result.verification:
        print(render_verification(result.verification), file=sys.stderr)
    return EXIT_OK if result.status == "verified" else EXIT_FAILED


@dataclass
class LiveView:
    """The view `fix --serve` runs beside a CLI mission: its URL, store and event sinks."""

    url: str
    store: Store
    sinks: list[EventSink]


@contextmanager
def live_view(
    args: argparse.Namespace, settings: Settings, request: FixRequest
) -> Iterator[LiveView]:
    """Serve the live view on localhost for one CLI mission (no GitHub App needed).

    The mission is stored in the data dir's store like an App mission, so its page, the
    list and the cost view work the same way, and stay there for the next `--serve`.
    """
    from loopwright.app.server import create_app, serve_in_thread
    from loopwright.request import MissionRequest
    from loopwright.sandbox.workspace import is_git_url

    app = create_app(settings, mode="local")
    with ExitStack() as stack:
        try:
            url = stack.enter_context(serve_in_thread(app, "127.0.0.1", args.port))
        except OSError as exc:
            raise UsageError(
                f"--serve: cannot listen on 127.0.0.1:{args.port} ({exc.strerror})"
            ) from None
        store: Store = app.state.store
        mission_id = request.mission_id
        source = request.source
        url_source = is_git_url(source)
        # A CLI run fixes a working tree, not a pinned commit; the run id stands in for the
        # commit so every run is a mission of its own.
        store.create_mission(
            MissionRequest(
                trigger="cli",
                repo=source if url_source else str(Path(source).expanduser().resolve()),
                clone_url=source if url_source else "",
                head_sha=mission_id,
                guidance=request.guidance,
            ),
            mission_id,
        )
        store.mark_running(mission_id)
        # A run that ends without a result (Ctrl-C, a crash) is not left `running`.
        stack.callback(store.set_status, mission_id, "interrupted", expect="running")
        mission_url = f"{url}/missions/{mission_id}"
        print(f"loopwright: watch this mission at {mission_url}", file=sys.stderr, flush=True)
        if settings.dashboard_token is not None:
            print("loopwright: sign in with LOOPWRIGHT_DASHBOARD_TOKEN", file=sys.stderr)
        hub = app.state.hub
        yield LiveView(mission_url, store, [store.event_sink(mission_id), hub.sink(mission_id)])
        if sys.stdin.isatty():
            print(
                f"loopwright: done; {mission_url} stays up until you press Enter",
                file=sys.stderr,
            )
            with suppress(KeyboardInterrupt):
                sys.stdin.readline()


def cmd_build(args: argparse.Namespace, settings: Settings) -> int:
    from loopwright.agent.scripted import build_fingerprint
    from loopwright.build import BuildMission, BuildRequest, SpecError, check_out_dir, read_spec
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
    try:
        fingerprint = build_fingerprint(request.spec, request.lang)
        with mission_wiring(args, settings, request.mission_id, None, fingerprint) as wired:
            result = BuildMission(
                request,
                settings=wired.settings,
                provider=wired.provider,
                model=wired.model,
                events=wired.events,
            ).run()
    except SandboxError as exc:
        print(f"loopwright: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return report_result(args, result)


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from loopwright.app.server import create_app

    missing = settings.github.missing()
    if missing:
        raise UsageError(f"serve needs {', '.join(missing)}; see README → GitHub App")
    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port} is not a TCP port")
    if args.host not in ("127.0.0.1", "localhost", "::1") and settings.dashboard_token is None:
        print(
            "loopwright: warning: listening beyond localhost without LOOPWRIGHT_DASHBOARD_TOKEN; "
            "the mission API is readable by anyone who can reach it",
            file=sys.stderr,
        )
    from loopwright.logs import configure_logging

    configure_logging(Redactor(settings.secrets()))
    # Live streams stay open until their mission ends; on shutdown they get a moment to
    # finish, then they are cut (browsers reconnect to the next server with Last-Event-ID).
    uvicorn.run(
        create_app(settings),
        host=args.host,
        port=args.port,
        log_level="info",
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

    from loopwright.app.runtime import open_runtime
    from loopwright.logs import configure_logging

    missing = settings.github.missing()
    if missing:
        raise UsageError(f"worker needs {', '.join(missing)}; see README → GitHub App")
    if args.poll <= 0:
        raise UsageError("--poll must be a positive number of seconds")
    configure_logging(Redactor(settings.secrets()))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    submitted: set[str] = set()
    with open_runtime(settings, recover=False) as runtime:
        print(
            f"loopwright: worker running up to {settings.max_concurrent_missions} missions at a "
            "time from the shared store",
            file=sys.stderr,
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


def cmd_doctor(settings: Settings) -> int:
    from loopwright.sandbox.image import doctor

    checks = doctor(settings)
    for check in checks:
        mark = "ok  " if check.ok else "FAIL"
        print(f"[{mark}] {check.name}: {check.detail}")
        if not check.ok and check.fix:
            print(f"       fix: {check.fix}")
    return EXIT_OK if all(c.ok for c in checks) else EXIT_FAILED


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
        return EXIT_FAILED
    try:
        tag = ensure_image(client, settings, lambda line: print(line, file=sys.stderr))
    except SandboxError as exc:
        print(f"loopwright: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        client.close()
    print(tag)
    return EXIT_OK


def entry() -> int:
    """The `loopwright` command: secrets leave the environment block first (see secret_env)."""
    try:
        restart_without_secrets([sys.executable, "-m", "loopwright.cli", *sys.argv[1:]])
    except HandoffError as exc:
        print(f"loopwright: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return main()


if __name__ == "__main__":
    sys.exit(entry())
