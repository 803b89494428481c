"""`POST /api/missions/{id}/cancel`: stop a running or queued mission from the live view.

Who may: the dashboard token (bearer header or its session cookie), or a GitHub sign-in
whose user has write, maintain or admin permission on the mission's repository (asked of
the collaborator-permission endpoint at that moment, like a `/loopwright cancel` comment).
A request that a browser sends with cookies must also carry `X-Loopwright-CSRF`, the value
the mission page embeds: another site can make a browser send the cookies (SameSite=Lax
still lets same-site pages do it), but it cannot read the page or add the header without a
CORS preflight this server never grants. The request is recorded in the store; the mission
notices it wherever it runs (see `AppMissionRunner`).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any
from urllib.parse import urlsplit

from litestar import Request, post
from litestar.connection import ASGIConnection
from litestar.di import NamedDependency
from litestar.exceptions import (
    ClientException,
    NotFoundException,
    PermissionDeniedException,
)
from litestar.params import FromPath
from litestar.response import Response
from litestar.status_codes import HTTP_202_ACCEPTED, HTTP_409_CONFLICT

from loopwright.app.api import GITHUB_COOKIE, SESSION_COOKIE, Viewer, require_token, visible_mission
from loopwright.app.commands import cancel_summary
from loopwright.app.runtime import Runtime
from loopwright.config import Settings
from loopwright.github.service import GitHubError
from loopwright.github.triggers import WRITE_PERMISSIONS
from loopwright.request import MissionRequest

CSRF_HEADER = "x-loopwright-csrf"


def csrf_token(settings: Settings, connection: ASGIConnection[Any, Any, Any, Any]) -> str:
    """The value a cookie-authenticated POST must send: bound to the browser's session
    cookies and keyed by the server's secrets, so it is useless to anyone who cannot read
    the page."""
    secrets = (
        settings.dashboard_token or "",
        settings.github.client_secret or "",
        settings.github.webhook_secret or "",
    )
    key = hashlib.sha256("\0".join(("loopwright-csrf", *secrets)).encode()).digest()
    bound = "\0".join(connection.cookies.get(name, "") for name in (SESSION_COOKIE, GITHUB_COOKIE))
    return hmac.new(key, bound.encode(), hashlib.sha256).hexdigest()


def by_bearer(settings: Settings, request: Request[Any, Any, Any]) -> bool:
    token = settings.dashboard_token
    header = request.headers.get("authorization", "")
    given = header[7:] if header.lower().startswith("bearer ") else ""
    return bool(token and given and hmac.compare_digest(given.encode(), token.encode()))


def check_csrf(settings: Settings, request: Request[Any, Any, Any]) -> None:
    origin = request.headers.get("origin")
    # This server, as the browser reached it: the Host it sent, or the public URL when a
    # reverse proxy rewrites Host.
    ours = {request.headers.get("host", ""), urlsplit(settings.github.public_url or "").netloc}
    if origin is not None and urlsplit(origin).netloc not in ours - {""}:
        raise PermissionDeniedException(
            f"cross-site request refused: Origin {origin[:100]} is not this server"
        )
    given = request.headers.get(CSRF_HEADER, "")
    if not given or not hmac.compare_digest(given.encode(), csrf_token(settings, request).encode()):
        raise PermissionDeniedException(
            "missing or wrong X-Loopwright-CSRF header: send the value the mission page "
            "carries in data-csrf (reload the page), or use a bearer token"
        )


@post(
    "/api/missions/{mission_id:str}/cancel",
    guards=[require_token],
    sync_to_thread=True,
    summary="Cancel a mission",
    status_code=HTTP_202_ACCEPTED,
)
def cancel_mission(
    request: Request[Any, Any, Any],
    settings: NamedDependency[Settings],
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[Viewer],
    mission_id: FromPath[str],
) -> Response[dict[str, Any]]:
    """Stop a running or queued mission: 202 when done (`cancelled`, it had not started) or
    recorded for the running mission (`cancelling`); 409 when it has already ended."""
    if settings.dashboard_token is None and not settings.github.oauth_enabled:
        # Nobody can be told apart: with neither a dashboard token nor GitHub sign-in, the
        # live view is open to anyone who reaches it, and cancelling is not.
        raise PermissionDeniedException(
            "cancelling needs a dashboard token (LOOPWRIGHT_DASHBOARD_TOKEN) or GitHub "
            "sign-in; set one, or comment `/loopwright cancel` on the pull request"
        )
    if not by_bearer(settings, request):
        check_csrf(settings, request)
    mission = visible_mission(runtime.store, viewer, mission_id)
    if viewer.login is not None:
        require_writer(runtime, viewer.login, MissionRequest.from_dict(dict(mission.request)))
    answer = runtime.store.request_cancel(mission.id, cancel_summary(viewer.login))
    if answer == "not_found":
        raise NotFoundException(f"no mission {mission_id}")
    if answer == "not_active":
        current = runtime.store.get_mission(mission.id)
        status = current.status if current is not None else mission.status
        raise ClientException(
            f"mission {mission.id} is {status}; only a running or queued mission can be cancelled",
            status_code=HTTP_409_CONFLICT,
        )
    return Response(
        {"mission": mission.id, "status": "cancelled" if answer == "cancelled" else "cancelling"},
        status_code=HTTP_202_ACCEPTED,
    )


def require_writer(
    runtime: Runtime, login: str, request: MissionRequest, act: str = "cancel its missions"
) -> None:
    """403 unless `login` has write, maintain or admin permission on the mission's
    repository, asked of GitHub now; `act` says what the refusal is about."""
    if request.installation_id is None:
        raise PermissionDeniedException(
            "this mission names no GitHub installation, so write permission cannot be "
            "checked; use the dashboard token"
        )
    try:
        session = runtime.github.session(request.installation_id, request.repo)
        permission = session.permission(login)
    except GitHubError as exc:
        raise PermissionDeniedException(f"could not check {login}'s permission: {exc}") from None
    if permission not in WRITE_PERMISSIONS:
        raise PermissionDeniedException(
            f"only people with write access to {request.repo} can {act}; "
            f"{login}'s permission is {permission}"
        )
