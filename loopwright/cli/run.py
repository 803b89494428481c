"""`loopwright fix` and `loopwright build`: settings to a running mission."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopwright.agent.pair import PairMode
from loopwright.cli.base import EXIT_ENVIRONMENT, UsageError, report_failure
from loopwright.cli.wiring import (
    LiveView,
    UserPaths,
    cli_logging,
    ctrl_c_cancels,
    keep_mission,
    live_view,
    mission_wiring,
    report_result,
)
from loopwright.config import Settings
from loopwright.events import EventSink
from loopwright.missions.log import KeptMission, cli_request
from loopwright.sandbox.base import SandboxError

if TYPE_CHECKING:
    from loopwright.missions.fix import FixRequest

STDIN = 0
"""Pair mode's answers come from file descriptor 0 whatever `sys.stdin` was replaced by."""


def fix_mission_fingerprint(request: FixRequest) -> dict[str, Any] | None:
    """The fingerprint of a fix: what `--record` writes and `--replay` checks."""
    from loopwright.agent.mission_fingerprint import fix_fingerprint
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


def check_pair_flags(args: argparse.Namespace) -> None:
    """Refuse `--pair` where it cannot prompt, before anything runs."""
    from loopwright.cli.pair import pair_refusal

    if not args.pair:
        if args.pair_lines:
            raise UsageError("--pair-lines only applies to --pair; add --pair or drop it")
        return
    refusal = pair_refusal(as_json=args.json, stdin_is_tty=os.isatty(STDIN), lines=args.pair_lines)
    if refusal is not None:
        raise UsageError(refusal)


@contextmanager
def pair_in_terminal(args: argparse.Namespace, settings: Settings) -> Iterator[PairMode | None]:
    """`--pair`: pair mode on with the terminal as its channel (None without `--pair`);
    the terminal's settings are restored however the mission ends."""
    if not args.pair:
        yield None
        return
    from loopwright.cli.pair import TerminalPair
    from loopwright.missions.progress import color_enabled

    with TerminalPair(
        stdin=STDIN,
        out=sys.stderr,
        expiry_s=settings.pair_expiry_s,
        interactive=os.isatty(STDIN) and not args.pair_lines,
        color=color_enabled(sys.stderr),
    ) as terminal:
        yield PairMode(terminal, always=True, expiry_s=settings.pair_expiry_s)


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
    check_pair_flags(args)
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
            with ctrl_c_cancels(cancellation), pair_in_terminal(args, settings) as pair:
                result = FixMission(
                    request,
                    settings=wired.settings,
                    provider=wired.provider,
                    model=wired.model,
                    events=wired.events,
                    cancellation=cancellation,
                    pair=pair,
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


def cmd_build(args: argparse.Namespace, settings: Settings) -> int:
    from loopwright.agent.mission_fingerprint import build_fingerprint
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
