"""The `loopwright` command line: fix, build, serve, worker, missions, show, init, replay,
model, doctor, sandbox build, image build. The parser, the dispatcher and the console-script
entry."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from loopwright import __version__
from loopwright.cli.admin import (
    add_mission_commands,
    add_model_commands,
    cmd_doctor,
    cmd_image_build,
    cmd_init,
    cmd_missions,
    cmd_model,
    cmd_replay,
    cmd_sandbox_build,
    cmd_show,
)
from loopwright.cli.base import (
    EXIT_CODES,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    Parser,
    UsageError,
    add_output_options,
    report_failure,
)
from loopwright.cli.run import cmd_build, cmd_fix
from loopwright.cli.server import cmd_serve, cmd_worker
from loopwright.config import ConfigError, Settings
from loopwright.hostpython import own_python
from loopwright.secret_env import HandoffError, restart_without_secrets

if TYPE_CHECKING:
    pass


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
    fix.add_argument(
        "--pair",
        action="store_true",
        help="pair mode, whatever the repository config says: before a risky step (a command "
        "that needs the network such as a package install, removing many files, a write "
        "under ask_paths) the loop waits for you; answer y (approve), n (reject, with an "
        "optional reason) or r (redirect, with guidance), and press g at any time to send "
        "the model guidance for its next step. An unanswered request is rejected after "
        "LOOPWRIGHT_PAIR_EXPIRY_S seconds (default 900). Ctrl-C at the prompt cancels the "
        "mission (exit 130). Needs a terminal on stdin, or --pair-lines; not with --json. "
        "Works with --record, and with --replay (whose recorded replies play on whatever "
        "you decide)",
    )
    fix.add_argument(
        "--pair-lines",
        action="store_true",
        help="with --pair, read the answers as lines on stdin instead of keys from a "
        "terminal (for scripts): y, n [REASON] and r GUIDANCE answer the requests in "
        "order, g GUIDANCE is guidance for the next step; once stdin ends, every request "
        "is rejected",
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
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="uvicorn worker processes over the shared store (default 1)",
    )

    worker = sub.add_parser("worker", help="run queued App missions from the shared store")
    worker.add_argument(
        "--poll", type=float, default=2.0, help="seconds between looks for queued missions"
    )
    worker.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="missions this worker runs at once (default LOOPWRIGHT_MAX_CONCURRENT_MISSIONS, "
        "which with LOOPWRIGHT_QUEUE_URL is also the cap across all workers)",
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
    image = sub.add_parser("image", help="manage the server image (serve and worker)")
    image_sub = image.add_subparsers(dest="image_command", required=True, metavar="ACTION")
    image_build = image_sub.add_parser(
        "build", help="build the server image from this checkout, offline if need be"
    )
    image_build.add_argument(
        "--tag", default=None, help="image name (default loopwright-server:latest)"
    )
    return parser


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """`environ`: where the settings come from (default `os.environ`); `entry` passes the
    environment the secrets were handed back into, which `os.environ` never holds."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # Known before parsing, so a bad flag next to --json still answers in JSON.
    as_json = "--json" in argv
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        settings = Settings.from_env(environ)
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
        if args.command == "image":
            return cmd_image_build(args)
        parser.error(f"unknown command {args.command}")
    except (ConfigError, UsageError) as exc:
        return report_failure(as_json, EXIT_USAGE, str(exc))
    except KeyboardInterrupt:
        return report_failure(as_json, EXIT_INTERRUPTED, "interrupted")


def entry() -> int:
    """The `loopwright` command: secrets leave the environment block first (see secret_env)."""
    # Every Python this command starts (uvicorn's spawned workers run `python -c`, which
    # puts the working directory first on the module path) keeps the working directory,
    # often a repository's checkout, off its path, as the restart below does (`own_python`).
    # Sandbox commands get an environment built from an allow-list, never this one.
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        # own_python: the working directory (often a repository's checkout) is off the
        # module path, so a `loopwright/` directory there is never what `-m` runs.
        env = restart_without_secrets(own_python("-m", "loopwright.cli", *sys.argv[1:]))
    except HandoffError as exc:
        return report_failure("--json" in sys.argv[1:], EXIT_USAGE, str(exc))
    code = main(environ=env)
    # The process ends next. Its closing collections would walk every object it holds (the
    # app, the model client, the store) again: about 0.5 s of a `fix` on an idle two-core
    # machine, seconds under load; frozen, they walk only what is still made from here on.
    gc.freeze()
    return code
