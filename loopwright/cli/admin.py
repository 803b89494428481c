"""The smaller commands: replay, missions, show, init, model, doctor, sandbox build, image
build."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from loopwright.cli.base import EXIT_ENVIRONMENT, EXIT_OK, Parser, UsageError
from loopwright.config import Settings
from loopwright.missions.progress import ProgressPrinter, replay
from loopwright.sandbox.base import SandboxError

if TYPE_CHECKING:
    pass


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


def cmd_image_build(args: argparse.Namespace) -> int:
    import docker
    from docker.errors import DockerException

    from loopwright.server_image import SERVER_IMAGE, ServerImageError, build_server_image

    try:
        client = docker.from_env(version="auto")
    except DockerException as exc:
        print(
            f"loopwright: the Docker engine is not reachable ({exc}); start it with `dockerd &`",
            file=sys.stderr,
        )
        return EXIT_ENVIRONMENT
    try:
        tag = build_server_image(
            client, lambda line: print(line, file=sys.stderr), tag=args.tag or SERVER_IMAGE
        )
    except ServerImageError as exc:
        print(f"loopwright: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    finally:
        client.close()
    print(tag)
    return EXIT_OK
