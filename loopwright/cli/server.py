"""`loopwright serve` and `loopwright worker`."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from loopwright.cli.base import EXIT_OK, UsageError
from loopwright.config import Settings, warm_pool_size
from loopwright.redaction import Redactor

if TYPE_CHECKING:
    from litestar import Litestar

    from loopwright.events import EventSink

WORKER_POLL_S = 2.0
"""How often a worker process of `serve --workers N` looks for queued missions."""


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    """The GitHub App server; without App credentials, a local dashboard over the missions
    stored in the data directory (no webhook endpoint, no queue, no sandboxes)."""
    import uvicorn

    from loopwright.app.hosts import LOOPBACK_HOSTS

    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port} is not a TCP port")
    workers = int(getattr(args, "workers", 1))
    if workers < 1:
        raise UsageError(f"--workers {workers}: give 1 or more worker processes")
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
    mode: Literal["app", "local"] = "local" if local else "app"
    # A local dashboard on loopback answers only to loopback names (DNS rebinding).
    allowed_hosts = LOOPBACK_HOSTS if local and args.host in LOOPBACK_HOSTS else None
    # Live streams stay open until their mission ends; on shutdown they get a moment to
    # finish, then they are cut (browsers reconnect to the next server with Last-Event-ID).
    options = {
        "host": args.host,
        "port": args.port,
        "log_level": "info",
        # uvicorn's own log config would bring its own format; its records go to ours.
        "log_config": None,
        "timeout_graceful_shutdown": 5,
    }
    if workers == 1:
        from loopwright.app.server import create_app

        served = create_app(settings, mode=mode, allowed_hosts=allowed_hosts, freeze_heap=True)
        uvicorn.run(served, **options)
        return EXIT_OK
    return _serve_workers(settings, mode, allowed_hosts, workers, options)


def _serve_workers(
    settings: Settings,
    mode: Literal["app", "local"],
    allowed_hosts: frozenset[str] | None,
    workers: int,
    options: dict[str, object],
) -> int:
    """`serve --workers N`: the start-up work once here, then N uvicorn worker processes
    on one listening socket over the shared store.

    `LOOPWRIGHT_MAX_CONCURRENT_MISSIONS` is the cap of the whole store, not of a worker:
    each worker has that many mission threads, and a mission runs only once it holds one
    of the store's slots (`Store.acquire_slot`), which every process on the store shares.
    """
    import structlog
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    log = structlog.get_logger("loopwright.serve")
    if mode == "app" and settings.queue_url is None:
        from loopwright.app.runtime import start_up_once

        # Before any worker exists: a worker's start must never mark another worker's
        # new missions interrupted. (With a queue the server runs no mission: there is
        # nothing of its own to interrupt or reap.)
        start_up_once(settings)
    # Each worker may run up to LOOPWRIGHT_MAX_CONCURRENT_MISSIONS missions, and the
    # store's mission slots hold all of them (and any `loopwright worker` on the store)
    # together under that cap: a busy worker takes the slots an idle one does not use.
    # The server's warm pool is shared out, so N workers keep about as many idle
    # sandboxes as one server would, each at least one.
    pool = warm_pool_size(settings, server=True)
    pool_each = max(1, pool // workers) if pool else 0
    worker_settings = dataclasses.replace(settings, warm_pool=pool_each)
    config = uvicorn.Config(
        functools.partial(worker_app, worker_settings, mode, allowed_hosts),
        factory=True,
        workers=workers,
        **options,  # type: ignore[arg-type]
    )
    log.info(
        f"serving with {workers} worker processes, up to "
        f"{settings.max_concurrent_missions} missions at a time in all and {pool_each} "
        "ready sandboxes each"
    )
    Multiprocess(config, sockets=[config.bind_socket()]).run()
    return EXIT_OK


def worker_app(
    settings: Settings, mode: Literal["app", "local"], allowed_hosts: frozenset[str] | None
) -> Litestar:
    """The app of one worker process of `serve --workers N` (a fresh interpreter)."""
    from loopwright.app.server import create_app
    from loopwright.logs import configure_logging

    configure_logging(Redactor(settings.secrets()))
    return create_app(
        settings,
        mode=mode,
        allowed_hosts=allowed_hosts,
        start_up=False,
        freeze_heap=True,
        # With a queue, missions reach the SAQ workers through it, not by polling.
        poll_queued=WORKER_POLL_S if mode == "app" and settings.queue_url is None else None,
    )


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    """Run queued missions from the store the server writes (SQLite file or PostgreSQL),
    or with LOOPWRIGHT_QUEUE_URL from the SAQ queue the servers submit to.

    Any number of workers and the server's own workers can share one store: a mission is
    claimed by one conditional update, so it runs exactly once. They share the caps too:
    `LOOPWRIGHT_MAX_CONCURRENT_MISSIONS` missions at a time across all of them and
    `LOOPWRIGHT_MAX_MISSIONS_PER_INSTALLATION` of one installation (slots in the store), so
    give every process on the store the same values.
    """
    import signal
    import threading

    import structlog

    from loopwright.app.fanout import hub_in_thread, open_fanout
    from loopwright.app.runtime import feed_from_store, open_runtime
    from loopwright.logs import configure_logging

    missing = settings.github.missing(webhooks=False)
    if missing:
        raise UsageError(f"worker needs {', '.join(missing)}; see README → GitHub App")
    if args.poll <= 0:
        raise UsageError("--poll must be a positive number of seconds")
    concurrency = getattr(args, "concurrency", None) or settings.max_concurrent_missions
    if concurrency < 1:
        raise UsageError(f"--concurrency {concurrency}: give 1 or more missions at a time")
    configure_logging(Redactor(settings.secrets()))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with contextlib.ExitStack() as stack:
        sinks: Callable[[str], list[EventSink]] | None = None
        if settings.queue_url is not None:
            # The missions' events reach the servers' live streams through the queue's
            # backend; without a queue, the servers read them from the shared store.
            sinks = stack.enter_context(hub_in_thread(open_fanout(settings))).sinks
        runtime = stack.enter_context(
            open_runtime(
                settings,
                recover=False,
                webhooks=False,
                worker=True,
                concurrency=concurrency,
                extra_sinks=sinks,
            )
        )
        log = structlog.get_logger("loopwright.worker")
        with contextlib.suppress(KeyboardInterrupt):
            if settings.queue_url is None:
                log.info(
                    f"worker running up to {concurrency} missions at a time from the shared store "
                    "(the cap of every process on it together)"
                )
                feed_from_store(runtime, stop, args.poll)
            else:
                from loopwright.store.saq_queue import where

                log.info(
                    f"worker running up to {concurrency} missions at a "
                    f"time from the queue at {where(settings.queue_url)}"
                )
                while not stop.wait(1.0):
                    pass
    return EXIT_OK
