"""The JSON API over stored missions, the screenshot route and the health check, and who
may see them: the dashboard token, its session cookie, or a GitHub sign-in session."""

from __future__ import annotations

import datetime
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Any

import anyio
from itsdangerous import BadData, Serializer, URLSafeSerializer, base64_encode
from litestar import Request, get
from litestar.connection import ASGIConnection
from litestar.di import NamedDependency
from litestar.exceptions import NotAuthorizedException, NotFoundException, PermissionDeniedException
from litestar.handlers import BaseRouteHandler
from litestar.params import FromPath, FromQuery
from litestar.response import File, Response

from loopwright.app.changes import render_changes
from loopwright.app.pair import takes_guidance
from loopwright.app.params import (
    check_mission_id,
    check_repo_filter,
    check_status_filter,
    clamp_cursor,
)
from loopwright.config import Settings
from loopwright.store.missions import patch_bytes
from loopwright.store.models import Mission
from loopwright.store.repository import Store

SESSION_COOKIE = "loopwright_session"
SESSION_MAX_AGE_S = 7 * 24 * 3600
GITHUB_COOKIE = "loopwright_github"
GITHUB_SESSION_MAX_AGE_S = 8 * 3600
PER_REPO_QUERIES = 20
"""A GitHub viewer with up to this many repositories gets one store query per repository."""
MAX_COOKIE_BYTES = 3500
"""Above this a GitHub session's repository list stays on the server (browsers stop at ~4 KB)."""


def new_session_id() -> str:
    """The random id every session cookie carries: what sign-out revokes."""
    return secrets.token_urlsafe(24)


@dataclass(frozen=True)
class SignedSession:
    """A session cookie that is signed with the current secret and unexpired; whether it
    was signed out is the store's to say."""

    id: str
    expires: int


def _signed_session(payload: Any, now: float | None) -> SignedSession | None:
    """The id and expiry of a verified payload; None when expired or without an id (a
    cookie from before sessions carried one: its user signs in again)."""
    if not isinstance(payload, dict):
        return None
    expires, session_id = payload.get("exp"), payload.get("sid")
    if not isinstance(expires, int) or not isinstance(session_id, str) or not session_id:
        return None
    if expires < (time.time() if now is None else now):
        return None
    return SignedSession(session_id, expires)


def _dashboard_signer(token: str) -> URLSafeSerializer:
    return URLSafeSerializer(token, salt="loopwright-session")


def session_value(token: str, expires: int) -> str:
    """A cookie that proves the dashboard token was given, without containing it: a new
    session id and its expiry, signed with a key derived from the token.

    Changing LOOPWRIGHT_DASHBOARD_TOKEN invalidates every session.
    """
    return _dashboard_signer(token).dumps({"exp": expires, "sid": new_session_id()})


def dashboard_session(token: str, value: str, now: float | None = None) -> SignedSession | None:
    """The session of a dashboard cookie signed with this token, unexpired and with an id."""
    try:
        payload = _dashboard_signer(token).loads(value)
    except BadData:
        return None
    return _signed_session(payload, now)


def valid_session(token: str, value: str, store: Store, now: float | None = None) -> bool:
    """True for an unexpired dashboard session cookie signed with this token and not signed
    out (asks the store)."""
    session = dashboard_session(token, value, now)
    return session is not None and not store.session_revoked(session.id)


@dataclass(frozen=True)
class Viewer:
    """Who is asking. `repos` None: everything (no login configured, or the dashboard
    token); otherwise the lower-cased `owner/name` of each repository the GitHub user can
    read, and only their missions are shown."""

    login: str | None = None
    repos: frozenset[str] | None = None
    names: tuple[str, ...] = ()
    """The same repositories spelled as GitHub spells them (the store matches exactly)."""

    @property
    def sees_everything(self) -> bool:
        return self.repos is None

    def can_see(self, repo: str) -> bool:
        return self.repos is None or repo.lower() in self.repos


class GitHubSessions:
    """Repository lists too long for a cookie, kept in the store under the SHA-256 of the
    session's id: every server process on the store reads them, a restart keeps them, and
    signing out forgets them everywhere (the short list in the cookie needs no row)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def put(self, session_id: str, repos: tuple[str, ...], expires: float) -> None:
        self._store.record_sign_in(
            session_id, repos, datetime.datetime.fromtimestamp(expires, datetime.UTC)
        )

    def get(self, session_id: str) -> tuple[str, ...] | None:
        return self._store.sign_in_repos(session_id)

    def drop(self, session_id: str) -> None:
        self._store.end_sign_in(session_id)


class _PlainURLSafeSerializer(URLSafeSerializer):
    """URL-safe and signed, never compressed: a cookie's size then follows the length of
    its repository list, so `MAX_COOKIE_BYTES` decides predictably when the list moves to
    the server. (Reading still accepts either form.)"""

    def dump_payload(self, obj: Any) -> bytes:
        return base64_encode(Serializer.dump_payload(self, obj))


def _github_signer(settings: Settings) -> URLSafeSerializer:
    """Signs GitHub sessions with a key derived from the client secret: rotating the secret
    signs everyone out."""
    secret = settings.github.client_secret or ""
    return _PlainURLSafeSerializer(secret, salt="loopwright-github-session")


@dataclass(frozen=True)
class GitHubSession(SignedSession):
    """A verified GitHub session cookie: the login and, unless the list is kept on the
    server (`repos` None), the readable repositories."""

    login: str
    repos: tuple[str, ...] | None


def github_session_value(
    settings: Settings, sessions: GitHubSessions, login: str, repos: list[str], expires: int
) -> str:
    """The signed cookie of a GitHub sign-in: a new session id, login, expiry and the
    readable repositories (for a long list, kept in `sessions` under the session id
    instead: this writes to the store). Never a token."""
    signer = _github_signer(settings)
    session_id = new_session_id()
    names = sorted({r.lower(): r for r in repos}.values(), key=str.lower)
    payload: dict[str, Any] = {"login": login, "exp": expires, "sid": session_id}
    value = signer.dumps({**payload, "repos": names})
    if len(value) > MAX_COOKIE_BYTES:
        sessions.put(session_id, tuple(names), expires)
        value = signer.dumps(payload)
    return value


def github_session(
    settings: Settings, value: str, now: float | None = None
) -> GitHubSession | None:
    """The session of a GitHub cookie signed with the current secret, unexpired and with an
    id; None if forged, edited, expired or from before sessions carried an id."""
    try:
        payload = _github_signer(settings).loads(value)
    except BadData:
        return None
    signed = _signed_session(payload, now)
    if signed is None:
        return None
    listed = payload.get("repos")
    return GitHubSession(
        signed.id,
        signed.expires,
        login=str(payload.get("login")),
        repos=None if listed is None else tuple(str(r) for r in listed or []),
    )


def github_viewer(
    settings: Settings, sessions: GitHubSessions, store: Store, value: str
) -> Viewer | None:
    """The viewer a GitHub session cookie stands for; None if forged, edited, expired or
    signed out (asks the store)."""
    session = github_session(settings, value)
    if session is None or store.session_revoked(session.id):
        return None
    names = sessions.get(session.id) if session.repos is None else session.repos
    if names is None:
        return None
    return Viewer(login=session.login, repos=frozenset(n.lower() for n in names), names=names)


_VIEWER_KEY = "loopwright_viewer"
"""Where a request keeps its viewer once known: the guard and the `viewer` dependency ask
the store once per request."""


async def identify(connection: ASGIConnection[Any, Any, Any, Any]) -> Viewer | None:
    """The viewer behind a request, or None when it must sign in first.

    Open when neither the dashboard token nor GitHub sign-in is configured. The token (as a
    bearer header or its session cookie) sees everything; a GitHub session sees the
    repositories its user could read when signing in. A session cookie counts only while
    the store has no sign-out recorded for its id.
    """
    state = connection.state
    if _VIEWER_KEY in state:
        known: Viewer | None = state[_VIEWER_KEY]
        return known
    viewer = await _identify(connection)
    state[_VIEWER_KEY] = viewer
    return viewer


async def still_signed_in(connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
    """Whether the connection's credentials hold now, checked afresh rather than from the
    request's cache: a long-lived stream asks, so a sign-out elsewhere ends it."""
    return await _identify(connection) is not None


async def _identify(connection: ASGIConnection[Any, Any, Any, Any]) -> Viewer | None:
    settings: Settings = connection.app.state.settings
    token = settings.dashboard_token
    oauth = settings.github.oauth_enabled
    if token is None and not oauth:
        return Viewer()
    store: Store = connection.app.state.store
    if token is not None:
        header = connection.headers.get("authorization", "")
        given = header[7:] if header.lower().startswith("bearer ") else ""
        if given and hmac.compare_digest(given.encode(), token.encode()):
            return Viewer()
        cookie = connection.cookies.get(SESSION_COOKIE)
        if cookie:
            valid: bool = await anyio.to_thread.run_sync(valid_session, token, cookie, store)
            if valid:
                return Viewer()
    if oauth:
        cookie = connection.cookies.get(GITHUB_COOKIE)
        if cookie:
            sessions: GitHubSessions = connection.app.state.github_sessions
            return await anyio.to_thread.run_sync(github_viewer, settings, sessions, store, cookie)
    return None


async def require_token(
    connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler
) -> None:
    """With LOOPWRIGHT_DASHBOARD_TOKEN or GitHub sign-in configured, every view, stream and
    API call needs the token (as a bearer token or the login form's session cookie) or a
    GitHub session. What a GitHub session may see is decided by each route from `Viewer`."""
    if await identify(connection) is None:
        raise NotAuthorizedException(
            "a bearer token (LOOPWRIGHT_DASHBOARD_TOKEN) or a GitHub sign-in is required"
        )


async def require_full_access(
    connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler
) -> None:
    """For views that total every repository (the costs): the dashboard token only."""
    viewer = await identify(connection)
    if viewer is None:
        raise NotAuthorizedException("a bearer token (LOOPWRIGHT_DASHBOARD_TOKEN) is required")
    if not viewer.sees_everything:
        raise PermissionDeniedException(
            "the cost view totals every repository's spend; it needs the dashboard token "
            "(LOOPWRIGHT_DASHBOARD_TOKEN)"
        )


async def current_viewer(request: Request[Any, Any, Any]) -> Viewer:
    """The `viewer` dependency (routes guarded by `require_token` always have one)."""
    viewer = await identify(request)
    if viewer is None:
        raise NotAuthorizedException("sign in first")
    return viewer


def visible_missions(
    store: Store, viewer: Viewer, status: str | None, repo: str | None, limit: int
) -> list[Mission]:
    """Newest first, only the viewer's repositories."""
    if viewer.repos is None:
        return store.list_missions(status=status, repo=repo, limit=limit)
    if repo is not None:
        if not viewer.can_see(repo):
            return []
        return store.list_missions(status=status, repo=repo, limit=limit)
    if len(viewer.repos) <= PER_REPO_QUERIES:
        found = [
            m for r in viewer.names for m in store.list_missions(status=status, repo=r, limit=limit)
        ]
        found = [m for m in found if viewer.can_see(m.repo)]
        return sorted(found, key=lambda m: m.created_at, reverse=True)[:limit]
    # Many repositories: read a wider window of everyone's missions and keep the viewer's.
    missions = store.list_missions(status=status, repo=None, limit=max(limit * 5, 500))
    return [m for m in missions if viewer.can_see(m.repo)][:limit]


def queue_positions_of(store: Store, missions: list[Mission]) -> dict[str, int]:
    """Queue positions, read only when one of `missions` is queued (the read is over every
    queued mission, also those the viewer cannot see: the position counts them)."""
    if not any(m.status == "queued" for m in missions):
        return {}
    return store.queue_positions()


def mission_json(mission: Mission, positions: dict[str, int]) -> dict[str, Any]:
    """A mission as the API answers it: its stored fields and `queue_position`."""
    position = positions.get(mission.id) if mission.status == "queued" else None
    return {**mission.to_dict(), "queue_position": position}


def visible_mission(store: Store, viewer: Viewer, mission_id: str) -> Mission:
    """The mission, or 404 when it does not exist or the viewer may not see it (a 403
    would tell a stranger the mission exists)."""
    mission = store.get_mission(check_mission_id(mission_id))
    if mission is None or not viewer.can_see(mission.repo):
        raise NotFoundException(f"no mission {mission_id}")
    return mission


@get("/api/missions", guards=[require_token], sync_to_thread=True, summary="List missions")
def list_missions(
    store: NamedDependency[Store],
    viewer: NamedDependency[Viewer],
    status: FromQuery[str | None] = None,
    repo: FromQuery[str | None] = None,
    limit: FromQuery[int] = 100,
) -> list[dict[str, Any]]:
    """Newest first; filter by status and repository (`owner/name`). A `queued` mission's
    `queue_position` is its place in the queue (1 runs next); null for every other status."""
    missions = visible_missions(
        store,
        viewer,
        check_status_filter(status),
        check_repo_filter(repo),
        min(max(limit, 1), 500),
    )
    positions = queue_positions_of(store, missions)
    return [mission_json(m, positions) for m in missions]


@get(
    "/api/missions/{mission_id:str}",
    guards=[require_token],
    sync_to_thread=True,
    summary="One mission",
)
def get_mission(
    store: NamedDependency[Store], viewer: NamedDependency[Viewer], mission_id: FromPath[str]
) -> dict[str, Any]:
    """The mission with its request, result (patch, verification evidence, usage) and links;
    `queue_position` is its place in the queue while `queued` (1 runs next), else null;
    `pending_request` is what a `waiting` mission (pair mode) asks a person to decide
    (`id`, `tool`, `rule`, `what`, `why`, `command` or `diff`, `network`, `asked_at`,
    `expires_at`), else null; `takes_guidance` says whether its pair-mode loop runs, so a
    `redirect` without a pending request reaches the model (else it is refused with 409)."""
    mission = visible_mission(store, viewer, mission_id)
    pending = store.pending_request(mission.id) if mission.status == "waiting" else None
    return {
        **mission_json(mission, queue_positions_of(store, [mission])),
        "pending_request": pending,
        "takes_guidance": takes_guidance(mission),
    }


@get(
    "/api/missions/{mission_id:str}/events",
    guards=[require_token],
    sync_to_thread=True,
    summary="A mission's event log",
)
def mission_events(
    store: NamedDependency[Store],
    viewer: NamedDependency[Viewer],
    mission_id: FromPath[str],
    after: FromQuery[int] = 0,
) -> list[dict[str, Any]]:
    """The stored events with a sequence number above `after`, in order (the SSE stream
    `/missions/{id}/events` sends the same objects live)."""
    visible_mission(store, viewer, mission_id)
    return store.events_after(mission_id, clamp_cursor(after), limit=5000)


def _patch_of(mission: Mission) -> str | None:
    """The mission's patch once its result is stored (None while it runs, or without one)."""
    patch = (mission.result or {}).get("patch")
    return patch if isinstance(patch, str) else None


@get(
    "/api/missions/{mission_id:str}/patch",
    guards=[require_token],
    sync_to_thread=True,
    summary="A mission's patch",
    media_type="text/x-diff",
)
def mission_patch(
    store: NamedDependency[Store], viewer: NamedDependency[Viewer], mission_id: FromPath[str]
) -> Response[bytes]:
    """The unified diff the mission produced, byte for byte (`git apply` takes it as it
    is, a change to a file that is not UTF-8 too)."""
    patch = patch_bytes(visible_mission(store, viewer, mission_id).result)
    if not patch:
        raise NotFoundException(f"mission {mission_id} has no patch (yet)")
    try:
        patch.decode("utf-8")
        content_type = "text/x-diff; charset=utf-8"
    except UnicodeDecodeError:  # the bytes of a file in another encoding: no charset is true
        content_type = "text/x-diff"
    # Given as a header: Litestar adds "; charset=utf-8" to any text/* media type it sets.
    return Response(
        patch,
        headers={
            "Content-Type": content_type,
            "Content-Disposition": f'inline; filename="{mission_id}.diff"',
        },
    )


@get(
    "/api/missions/{mission_id:str}/changes",
    guards=[require_token],
    sync_to_thread=True,
    summary="A mission's patch, per file, syntax-highlighted",
)
def mission_changes(
    store: NamedDependency[Store], viewer: NamedDependency[Viewer], mission_id: FromPath[str]
) -> dict[str, Any]:
    """The patch split into files, hunks and lines, each line as (CSS class, text) tokens;
    `ready` is false until the mission's result is stored."""
    mission = visible_mission(store, viewer, mission_id)
    patch = _patch_of(mission)
    if patch is None:
        return {"ready": mission.result is not None, "files": [], "stat": None}
    return {"ready": True, **render_changes(patch)}


@get("/api/costs", guards=[require_full_access], sync_to_thread=True, summary="Spend and tokens")
def costs(store: NamedDependency[Store]) -> dict[str, list[dict[str, Any]]]:
    """Spend, tokens and calls per tier (with the share of finished missions that ended on
    each tier), per repository and per UTC day."""
    return {
        "by_tier": store.costs_by_tier(),
        "by_repo": store.costs_by_repo(),
        "by_day": store.costs_by_day(),
    }


@get(
    "/missions/{mission_id:str}/screenshot.png",
    guards=[require_token],
    sync_to_thread=True,
    summary="Screenshot",
)
def screenshot(
    settings: NamedDependency[Settings],
    store: NamedDependency[Store],
    viewer: NamedDependency[Viewer],
    mission_id: FromPath[str],
) -> File:
    """The page verification loaded, when the repository is a web app."""
    if not mission_id.isalnum():
        raise NotFoundException("no such mission")
    check_mission_id(mission_id)
    if not viewer.sees_everything:
        visible_mission(store, viewer, mission_id)
    path = settings.data_dir / "missions" / mission_id / "screenshot.png"
    if not path.is_file():
        raise NotFoundException(f"mission {mission_id} has no screenshot")
    return File(path, media_type="image/png", content_disposition_type="inline")


@get("/healthz", sync_to_thread=False, summary="Health check")
def healthz(request: Request[Any, Any, Any]) -> dict[str, str]:
    return {"status": "ok"}
