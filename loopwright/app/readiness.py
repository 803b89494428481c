"""`GET /readyz`: whether this server can do its work now, for a load balancer or an
orchestrator's readiness probe; `/healthz` only says the process answers (liveness).

Ready means the store answers `SELECT 1` and, with `LOOPWRIGHT_QUEUE_URL`, the queue's
backend answers too (Redis `PING`, PostgreSQL `SELECT 1`). Each check opens its own short
connection with a short timeout, so a probe says what a new request would meet, and a
backend that hangs costs the probe seconds, not the server. A failed check names the
dependency; where it is (host and port, never the password) and the error, redacted, are
shown to whoever may see everything on the dashboard (the dashboard token, or any caller
where no sign-in is configured) and logged, but never told to an anonymous caller of an
exposed server: a probe needs the status code, not the network's layout.
"""

from __future__ import annotations

from typing import Any

import anyio
import psycopg
import structlog
from litestar import Request, Response, get
from litestar.datastructures import State
from litestar.status_codes import HTTP_200_OK, HTTP_503_SERVICE_UNAVAILABLE
from redis import asyncio as aioredis
from sqlalchemy import text

from loopwright.app.api import identify
from loopwright.config import Settings
from loopwright.redaction import Redactor
from loopwright.store.repository import Store
from loopwright.store.saq_queue import saq_url, where

CHECK_TIMEOUT_S = 3.0

log = structlog.get_logger("loopwright.server")


def _store_answers(store: Store) -> None:
    with store.engine.connect() as conn:
        conn.execute(text("SELECT 1"))


async def check_store(store: Store | None) -> None:
    if store is None:
        raise RuntimeError("the store is not open (the server is starting or stopping)")
    with anyio.fail_after(CHECK_TIMEOUT_S):
        # Abandoned on timeout: a blocked connect holds a worker thread, not the probe.
        await anyio.to_thread.run_sync(_store_answers, store, abandon_on_cancel=True)


async def check_queue(url: str) -> None:
    plain = saq_url(url)
    with anyio.fail_after(CHECK_TIMEOUT_S):
        if plain.startswith(("redis://", "rediss://")):
            client = aioredis.from_url(
                plain, socket_connect_timeout=CHECK_TIMEOUT_S, socket_timeout=CHECK_TIMEOUT_S
            )
            try:
                await client.ping()  # type: ignore[misc]
            finally:
                await client.aclose()
            return
        async with await psycopg.AsyncConnection.connect(
            plain, connect_timeout=int(CHECK_TIMEOUT_S), autocommit=True
        ) as conn:
            await conn.execute("SELECT 1")


async def readiness(settings: Settings, store: Store | None) -> dict[str, Any]:
    """Each dependency's check: `{"ok": true}` or `{"ok": false, "error": ...}`."""
    redactor = Redactor(settings.secrets())
    checks: dict[str, dict[str, Any]] = {}

    async def run(name: str, shown: str | None, check: Any) -> None:
        entry: dict[str, Any] = {"ok": True} if shown is None else {"ok": True, "at": shown}
        try:
            await check
        except TimeoutError:
            entry.update(ok=False, error=f"no answer within {CHECK_TIMEOUT_S:g} s")
        except Exception as exc:  # noqa: BLE001 - any failure is the answer, not a crash
            entry.update(ok=False, error=redactor.text(f"{type(exc).__name__}: {exc}"))
        checks[name] = entry

    async with anyio.create_task_group() as group:
        group.start_soon(run, "store", None, check_store(store))
        url = settings.queue_url
        if url is not None:
            group.start_soon(run, "queue", where(url), check_queue(url))
    return checks


@get("/readyz", summary="Readiness check")
async def readyz(request: Request[Any, Any, Any], state: State) -> Response[dict[str, Any]]:
    """200 when the store and (when configured) the queue answer; 503 naming the one
    that did not, and why (the why and the where for a caller who may see everything)."""
    settings: Settings = state.settings
    checks = await readiness(settings, getattr(state, "store", None))
    ready = all(entry["ok"] for entry in checks.values())
    failed = [name for name, entry in checks.items() if not entry["ok"]]
    for name in failed:
        log.warning("readiness check failed", check=name, **checks[name])
    viewer = await identify(request)
    if viewer is None or not viewer.sees_everything:
        checks = {name: {"ok": entry["ok"]} for name, entry in checks.items()}
    body: dict[str, Any] = {"status": "ready" if ready else "unready", "checks": checks}
    if failed:
        body["failed"] = failed
    return Response(body, status_code=HTTP_200_OK if ready else HTTP_503_SERVICE_UNAVAILABLE)
