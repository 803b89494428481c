"""`loopwright serve` and `loopwright worker`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from loopwright.cli.base import EXIT_OK, UsageError
from loopwright.config import Settings
from loopwright.redaction import Redactor

if TYPE_CHECKING:
    pass


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
